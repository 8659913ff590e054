//go:build linux

package machobind

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/ebitengine/purego"
)

// elfRuntime rebinds ELF objects in this process: real pages (ProcVM), dlsym for unbound lazy
// slots.
type elfRuntime struct{ ProcVM }

func (elfRuntime) Images() ([]Loaded, error)                      { return nil, nil }
func (elfRuntime) Self() uintptr                                  { return 0 }
func (elfRuntime) WatchImages(func(Loaded)) error                 { return nil }
func (elfRuntime) Strip(p uintptr) uintptr                        { return p }
func (elfRuntime) Sign(p, _ uintptr, _ AuthInfo) (uintptr, error) { return p, nil }
func (elfRuntime) Resolve(sym, _ string) (uintptr, error) {
	return purego.Dlsym(purego.RTLD_DEFAULT, strings.TrimPrefix(sym, "_"))
}

// loadedELF finds where a shared object is mapped (its first mapping, file offset 0).
func loadedELF(t *testing.T, path string) Loaded {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) >= 6 && fs[5] == path && fs[2] == "00000000" {
			lo, _ := strconv.ParseUint(strings.Split(fs[0], "-")[0], 16, 64)
			return Loaded{Name: path, Header: uintptr(lo), Slide: uintptr(lo), ELF: true}
		}
	}
	t.Fatalf("%s is not mapped", path)
	return Loaded{}
}

// TestRebindELF rebinds a real shared library built and loaded here: a lazy PLT slot not yet
// bound (RTLD_LAZY), and a GOT slot in RELRO (read-only after load). Calls go to the
// replacements, Original is the real function, Undo puts everything back.
func TestRebindELF(t *testing.T) {
	for _, mode := range []struct {
		name  string
		flags []string
	}{{"lazy", []string{"-Wl,-z,lazy"}}, {"now-relro", []string{"-Wl,-z,now", "-Wl,-z,relro"}}} {
		t.Run(mode.name, func(t *testing.T) {
			lib := filepath.Join(t.TempDir(), "libvictim.so")
			args := append([]string{"-shared", "-fPIC", "-O0", "-fno-builtin", "-o", lib, "testdata/victim.c"}, mode.flags...)
			if out, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
				t.Fatalf("gcc: %v\n%s", err, out)
			}
			h, err := purego.Dlopen(lib, purego.RTLD_LAZY|purego.RTLD_LOCAL)
			if err != nil {
				t.Fatal(err)
			}
			var callStrlen func(string) uintptr
			var callAbs func(int32) int32
			purego.RegisterLibFunc(&callStrlen, h, "call_strlen")
			purego.RegisterLibFunc(&callAbs, h, "call_abs")
			fakeStrlen, _ := purego.Dlsym(h, "fake_strlen")
			fakeAbs, _ := purego.Dlsym(h, "fake_abs")
			realStrlen, _ := purego.Dlsym(purego.RTLD_DEFAULT, "strlen")
			realAbs, _ := purego.Dlsym(purego.RTLD_DEFAULT, "abs")

			l := loadedELF(t, lib)
			img, err := ParseLoadedELF(l)
			if err != nil {
				t.Fatal(err)
			}
			slots := map[string]Kind{}
			img.WalkSlots(func(s *Slot, name, _ []byte) bool { slots[string(name)] = s.Kind; return true })
			if k, ok := slots["strlen"]; !ok || k != KindLazy {
				t.Fatalf("slots: %v", slots)
			}
			if k, ok := slots["abs"]; !ok || k != KindNonLazy {
				t.Fatalf("slots: %v", slots)
			}
			var vm ProcVM
			before := map[string]Prot{}
			img.WalkSlots(func(s *Slot, name, _ []byte) bool {
				p, _ := vm.Protection(l.Slide + uintptr(s.Addr))
				before[string(name)] = p
				return true
			})

			if mode.name == "now-relro" && before["abs"]&ProtWrite != 0 {
				t.Fatalf("GOT slot of abs is writable (%v): not the RELRO case", before["abs"])
			}
			lo, hi := img.ownCode()
			var strlenSlot uintptr
			img.WalkSlots(func(s *Slot, name, _ []byte) bool {
				if string(name) == "strlen" {
					strlenSlot = l.Slide + uintptr(s.Addr)
				}
				return true
			})
			inPLT := func() bool { v := uint64(loadSlot(strlenSlot) - l.Slide); return v >= lo && v < hi }
			if mode.name == "lazy" && !inPLT() {
				t.Fatal("lazy strlen slot is already bound: not the unbound-PLT case")
			}

			r := NewRebinder(elfRuntime{})
			hook, err := r.RebindImage(l, Rebinding{Name: "strlen", Replacement: fakeStrlen}, Rebinding{Name: "abs", Replacement: fakeAbs})
			if err != nil {
				t.Fatal(err)
			}
			if got := callStrlen("abc"); got != 4242 {
				t.Errorf("strlen through the PLT returned %d, want the replacement's 4242", got)
			}
			if got := callAbs(-7); got != 7000 {
				t.Errorf("abs through the GOT returned %d, want the replacement's 7000", got)
			}
			if hook.Original("strlen") != realStrlen || hook.Original("abs") != realAbs {
				t.Errorf("originals %#x %#x, want %#x %#x", hook.Original("strlen"), hook.Original("abs"), realStrlen, realAbs)
			}
			img.WalkSlots(func(s *Slot, name, _ []byte) bool {
				if p, _ := vm.Protection(l.Slide + uintptr(s.Addr)); p != before[string(name)] {
					t.Errorf("%s slot protection %v, was %v", name, p, before[string(name)])
				}
				return true
			})
			if err := hook.Undo(); err != nil {
				t.Fatal(err)
			}
			if mode.name == "lazy" && !inPLT() {
				t.Error("Undo did not put the PLT pointer back")
			}
			if got := callStrlen("abc"); got != 3 {
				t.Errorf("after Undo strlen returned %d", got)
			}
			if got := callAbs(-7); got != 7 {
				t.Errorf("after Undo abs returned %d", got)
			}
		})
	}
}

// TestWalkSlotsLeavesOutRelative walks a real system library loaded here whose .rela.dyn
// opens with the relative relocations DT_RELACOUNT counts (libstdc++): the walk starts past
// them and still visits exactly the JUMP_SLOT and GLOB_DAT relocations readelf lists, at the
// same addresses.
func TestWalkSlotsLeavesOutRelative(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("readelf's relocation names are amd64's here")
	}
	out, err := exec.Command("gcc", "-print-file-name=libstdc++.so.6").Output()
	if err != nil {
		t.Skipf("no gcc: %v", err)
	}
	lib, err := filepath.EvalSymlinks(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := purego.Dlopen(lib, purego.RTLD_NOW|purego.RTLD_GLOBAL); err != nil {
		t.Fatal(err)
	}
	l := loadedELF(t, lib)
	img, err := ParseLoadedELF(l)
	if err != nil {
		t.Fatal(err)
	}
	skipped := false
	for _, r := range img.relocs {
		skipped = skipped || r[2] > 0
	}
	if !skipped {
		t.Fatalf("%s: no relative relocations left out (DT_RELACOUNT): not the case under test", lib)
	}
	got := map[string]bool{}
	img.WalkSlots(func(s *Slot, name, _ []byte) bool {
		got[strconv.FormatUint(s.Addr, 16)+" "+string(name)] = true
		return true
	})
	// the walk Rebind makes, filtered by the first two bytes of the names it looks for,
	// visits the same slots of those names as the whole walk
	names := NewNameSet("malloc", "_ZdlPv", "strlen", "abort", "a", "__cxa_finalize")
	var whole, filtered []string
	img.WalkSlots(func(s *Slot, name, _ []byte) bool {
		if _, ok := names.Lookup(name); ok {
			whole = append(whole, fmt.Sprint(s.Addr, string(name)))
		}
		return true
	})
	img.walk(names.prefixes(), func(s *Slot, name, _ []byte) bool {
		if _, ok := names.Lookup(name); ok {
			filtered = append(filtered, fmt.Sprint(s.Addr, string(name)))
		}
		return true
	})
	if len(whole) < 4 || !slices.Equal(whole, filtered) {
		t.Errorf("filtered walk found %v, the whole walk %v", filtered, whole)
	}
	rel, err := exec.Command("readelf", "-rW", lib).Output()
	if err != nil {
		t.Skipf("no readelf: %v", err)
	}
	want := map[string]bool{}
	for _, line := range strings.Split(string(rel), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || f[2] != "R_X86_64_JUMP_SLOT" && f[2] != "R_X86_64_GLOB_DAT" {
			continue
		}
		off, err := strconv.ParseUint(f[0], 16, 64)
		if err != nil {
			t.Fatalf("readelf line %q", line)
		}
		want[strconv.FormatUint(off, 16)+" "+strings.Split(f[4], "@")[0]] = true
	}
	if len(want) < 100 {
		t.Fatalf("readelf lists %d slots in %s", len(want), lib)
	}
	for k := range want {
		if !got[k] {
			t.Errorf("slot %s (readelf) not walked", k)
		}
	}
	for k := range got {
		if !want[k] {
			t.Errorf("slot %s walked, not in readelf", k)
		}
	}
}

// TestMappings reads the mappings of this process: in address order, each one's protection
// as /proc/self/maps spells it (read here line by line), and Protection agrees with them.
func TestMappings(t *testing.T) {
	var vm ProcVM
	maps, err := vm.Mappings()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	want := map[uintptr]Prot{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(line)
		lo, _ := strconv.ParseUint(strings.Split(f[0], "-")[0], 16, 64)
		var p Prot
		for i, c := range "rwx" {
			if f[1][i] == byte(c) {
				p |= 1 << i
			}
		}
		want[uintptr(lo)] = p
	}
	if len(maps) < 10 {
		t.Fatalf("%d mappings", len(maps))
	}
	for i, m := range maps {
		if m.Lo >= m.Hi || i > 0 && m.Lo < maps[i-1].Hi {
			t.Fatalf("mapping %d [%#x, %#x) out of order", i, m.Lo, m.Hi)
		}
		if p, ok := want[m.Lo]; ok && p != m.Prot { // the heap may have moved since
			t.Errorf("mapping at %#x: %v, maps says %v", m.Lo, m.Prot, p)
		}
		if p, err := vm.Protection(m.Lo); err != nil || p != m.Prot {
			t.Errorf("Protection(%#x) = %v, %v; want %v", m.Lo, p, err, m.Prot)
		}
	}
	if _, err := vm.Protection(0); err == nil {
		t.Error("address 0 reported mapped")
	}
}

// countingRuntime is elfRuntime over a fixed list of objects, counting how often the page
// protections are read; probe: it asks the kernel page by page where it can (PageProber).
type countingRuntime struct {
	elfRuntime
	objs                  []Loaded
	probe                 bool
	mappings, protections int
}

func (c *countingRuntime) ProbesPages() bool { return c.probe && c.elfRuntime.ProbesPages() }

func (c *countingRuntime) Images() ([]Loaded, error) { return c.objs, nil }
func (c *countingRuntime) Mappings() ([]Mapping, error) {
	c.mappings++
	return c.elfRuntime.Mappings()
}
func (c *countingRuntime) Protection(addr uintptr) (Prot, error) {
	c.protections++
	return c.elfRuntime.Protection(addr)
}

// TestRebindReadsMappingsOnce rebinds two real objects (a GOT slot in RELRO, read-only, and a
// PLT slot in each): the process's mappings are read once for the whole Rebind and once for
// the Undo, never page by page, and every slot is written and put back with its protection
// restored. Where the kernel answers for one page (PROCMAP_QUERY), the same with the pages
// asked one by one and the mappings never read whole.
func TestRebindReadsMappingsOnce(t *testing.T) {
	t.Run("maps", func(t *testing.T) { testRebindProtections(t, false) })
	t.Run("query", func(t *testing.T) {
		if !(ProcVM{}).ProbesPages() {
			t.Skip("this kernel has no PROCMAP_QUERY (Linux 6.11 and later)")
		}
		testRebindProtections(t, true)
	})
}

func testRebindProtections(t *testing.T, probe bool) {
	var objs []Loaded
	var callAbs []func(int32) int32
	var fakeAbs uintptr
	for _, name := range []string{"libvictim1.so", "libvictim2.so"} {
		lib := filepath.Join(t.TempDir(), name)
		if out, err := exec.Command("gcc", "-shared", "-fPIC", "-O0", "-fno-builtin", "-Wl,-z,now", "-Wl,-z,relro", "-o", lib, "testdata/victim.c").CombinedOutput(); err != nil {
			t.Fatalf("gcc: %v\n%s", err, out)
		}
		h, err := purego.Dlopen(lib, purego.RTLD_NOW|purego.RTLD_LOCAL)
		if err != nil {
			t.Fatal(err)
		}
		var f func(int32) int32
		purego.RegisterLibFunc(&f, h, "call_abs")
		callAbs = append(callAbs, f)
		if fakeAbs == 0 {
			fakeAbs, _ = purego.Dlsym(h, "fake_abs")
		}
		objs = append(objs, loadedELF(t, lib))
	}
	var vm ProcVM
	img, err := ParseLoadedELF(objs[0])
	if err != nil {
		t.Fatal(err)
	}
	var absSlot uintptr
	img.WalkSlots(func(s *Slot, name, _ []byte) bool {
		if string(name) == "abs" {
			absSlot = objs[0].Slide + uintptr(s.Addr)
		}
		return true
	})
	before, err := vm.Protection(absSlot)
	if err != nil || before&ProtWrite != 0 {
		t.Fatalf("abs slot protection %v, %v: not the read-only case under test", before, err)
	}
	rt := &countingRuntime{objs: objs, probe: probe}
	h, err := NewRebinder(rt).Rebind(Rebinding{Name: "abs", Replacement: fakeAbs}, Rebinding{Name: "strlen", Replacement: fakeAbs})
	if err != nil {
		t.Fatal(err)
	}
	if errs := h.Skipped(); len(errs) > 0 {
		t.Fatal(errs)
	}
	if !probe && (rt.mappings != 1 || rt.protections != 0) {
		t.Errorf("Rebind of 2 objects read the mappings %d times and asked %d protections; want 1 and 0", rt.mappings, rt.protections)
	}
	if probe && (rt.mappings != 0 || rt.protections < 2) {
		t.Errorf("Rebind of 2 objects read the mappings %d times and asked %d protections; want 0 and one a page", rt.mappings, rt.protections)
	}
	if n := h.Slots(); n != 4 {
		t.Errorf("%d slots written, want 4 (abs and strlen in each object)", n)
	}
	for i, f := range callAbs {
		if got := f(-7); got != 7000 {
			t.Errorf("object %d: abs returned %d, want the replacement's 7000", i+1, got)
		}
	}
	if p, _ := vm.Protection(absSlot); p != before {
		t.Errorf("abs slot protection %v after Rebind, was %v", p, before)
	}
	if err := h.Undo(); err != nil {
		t.Fatal(err)
	}
	if !probe && (rt.mappings != 2 || rt.protections != 0) {
		t.Errorf("Undo: mappings read %d times in all, %d protections asked; want 2 and 0", rt.mappings, rt.protections)
	}
	if probe && (rt.mappings != 0 || rt.protections < 4) {
		t.Errorf("Undo: mappings read %d times in all, %d protections asked; want 0 and one a page", rt.mappings, rt.protections)
	}
	for i, f := range callAbs {
		if got := f(-7); got != 7 {
			t.Errorf("object %d: after Undo abs returned %d", i+1, got)
		}
	}
	if p, _ := vm.Protection(absSlot); p != before {
		t.Errorf("abs slot protection %v after Undo, was %v", p, before)
	}
}

// TestProtectionFdReused: a program that closes the file Protection keeps open for the kernel's
// one-page answer (PROCMAP_QUERY), and opens another under its number, gets right answers
// still, and its own file is left alone.
func TestProtectionFdReused(t *testing.T) {
	var vm ProcVM
	if !vm.ProbesPages() {
		t.Skip("this kernel has no PROCMAP_QUERY (Linux 6.11 and later)")
	}
	maps, err := vm.Mappings()
	if err != nil {
		t.Fatal(err)
	}
	query.Lock()
	fd := query.fd
	query.Unlock()
	if err := syscall.Close(fd); err != nil { // as the program would
		t.Fatal(err)
	}
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if int(f.Fd()) != fd {
		t.Logf("the program's file got fd %d, not the closed %d", f.Fd(), fd)
	}
	for _, m := range maps {
		if m.Lo >= 1<<47 { // the vsyscall page: the maps answer it
			continue
		}
		if p, err := vm.Protection(m.Lo); err != nil || p != m.Prot {
			t.Errorf("Protection(%#x) = %v, %v; want %v", m.Lo, p, err, m.Prot)
		}
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatalf("the program's file: %v", err)
	}
	if !vm.ProbesPages() {
		t.Error("ProbesPages false after the file was reopened")
	}
}
