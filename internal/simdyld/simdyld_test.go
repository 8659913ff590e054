//go:build linux

package simdyld

import (
	"bufio"
	"bytes"
	"debug/macho"
	"encoding/binary"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/msgtrace/msgtrace/internal/testfiles"
)

const objdump = "llvm-objdump-19"

// fixtureFiles lists the Mach-O files the tests run over: the hand-made ones in /tmp/fx (when
// present) and everything `make fixtures` built.
func fixtureFiles(t *testing.T) []string {
	var out []string
	for _, dir := range []string{"/tmp/fx", filepath.Join(testfiles.Root(t), "testdata", "fixtures")} {
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			p := filepath.Join(dir, e.Name())
			if e.Type().IsRegular() && testfiles.IsMachO(p) {
				out = append(out, p)
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("no Mach-O fixtures: run `make fixtures`")
	}
	return out
}

// sliceInfo is one architecture of a file, read with the standard library (independently of
// go-macho and of the loader).
type sliceInfo struct {
	arch    string // "" for a thin file
	name    string // the slice's own architecture name
	data    []byte
	f       *macho.File
	chained bool
}

func slicesOf(t *testing.T, file string) []sliceInfo {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if ff, err := macho.NewFatFile(bytes.NewReader(data)); err == nil {
		var out []sliceInfo
		for _, a := range ff.Arches {
			name := archName(uint32(a.Cpu), a.SubCpu)
			out = append(out, newSlice(t, name, name, data[a.Offset:a.Offset+a.Size]))
		}
		return out
	}
	s := newSlice(t, "", "", data)
	s.name = archName(uint32(s.f.Cpu), s.f.SubCpu)
	return []sliceInfo{s}
}

func newSlice(t *testing.T, arch, name string, data []byte) sliceInfo {
	f, err := macho.NewFile(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	s := sliceInfo{arch: arch, name: name, data: data, f: f}
	for _, l := range f.Loads {
		if raw := l.Raw(); len(raw) >= 4 && binary.LittleEndian.Uint32(raw) == 0x80000034 {
			s.chained = true
		}
	}
	return s
}

// odFixup is one line of llvm-objdump's rebase / bind / lazy-bind / weak-bind tables, or of
// its chained-fixups listing (--dyld-info).
type odFixup struct {
	kind   string // "rebase", "bind", "lazy", "weak"
	addr   uint64
	sym    string
	dylib  string // short name ("libobjc"), or this-image, flat-namespace, weak, ...
	addend int64
	target uint64 // chained rebase target; classic listings give none
}

func runObjdump(t *testing.T, file string, s sliceInfo) []odFixup {
	args := []string{"--macho", "--rebase", "--bind", "--lazy-bind", "--weak-bind"}
	if s.chained {
		args = []string{"--macho", "--dyld-info"}
	}
	if s.arch != "" {
		args = append(args, "--arch="+s.arch)
	}
	out, err := exec.Command(objdump, append(args, file)...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", objdump, err, out)
	}
	return parseObjdump(t, string(out), s.chained)
}

func parseObjdump(t *testing.T, out string, chained bool) []odFixup {
	var fx []odFixup
	table := ""
	num := func(s string) int64 {
		var v uint64
		var err error
		if h, ok := strings.CutPrefix(s, "0x"); ok {
			v, err = strconv.ParseUint(h, 16, 64)
		} else {
			var i int64
			i, err = strconv.ParseInt(s, 10, 64)
			v = uint64(i)
		}
		if err != nil {
			t.Fatalf("objdump: bad number %q", s)
		}
		return int64(v)
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "Rebase table:"):
			table = "rebase"
		case strings.HasPrefix(line, "Bind table:"), strings.HasPrefix(line, "dyld information:"):
			table = "bind"
		case strings.HasPrefix(line, "Lazy bind table:"):
			table = "lazy"
		case strings.HasPrefix(line, "Weak bind table:"):
			table = "weak"
		}
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[2], "0x") {
			continue
		}
		e := odFixup{kind: table, addr: uint64(num(f[2]))}
		switch {
		case chained && f[4] == "rebase" && len(f) >= 6:
			e.kind, e.target = "rebase", uint64(num(f[5]))
		case chained && f[4] == "bind" && len(f) >= 8:
			e.addend, e.dylib, e.sym = num(f[5]), f[6], f[7]
		case chained:
			t.Fatalf("objdump: unexpected line %q", line)
		case table == "rebase":
		case table == "bind" && len(f) >= 7:
			e.addend, e.dylib, e.sym = num(f[4]), f[5], f[6]
		case table == "lazy" && len(f) >= 5:
			e.dylib, e.sym = f[3], f[4]
		case table == "weak" && len(f) >= 6:
			e.addend, e.dylib, e.sym = num(f[4]), "weak", f[5]
		default:
			t.Fatalf("objdump: unexpected line %q in the %s table", line, table)
		}
		fx = append(fx, e)
	}
	return fx
}

// shortName is llvm-objdump's short name of a dylib install path.
func shortName(lib string) string {
	switch lib {
	case "this-image", "main-executable", "flat-namespace", "weak":
		return lib
	}
	base := path.Base(lib)
	if i := strings.Index(lib, ".framework/"); i >= 0 {
		return path.Base(lib[:i])
	}
	base = strings.TrimSuffix(base, ".dylib")
	if i := strings.LastIndexByte(base, '.'); i >= 0 && i == len(base)-2 { // libobjc.A
		base = base[:i]
	}
	return strings.TrimSuffix(strings.TrimSuffix(base, "_debug"), "_profile")
}

var protNames = map[string]int{
	"__TEXT": syscall.PROT_READ | syscall.PROT_EXEC, "__DATA_CONST": syscall.PROT_READ, "__AUTH_CONST": syscall.PROT_READ,
	"__DATA": syscall.PROT_READ | syscall.PROT_WRITE, "__AUTH": syscall.PROT_READ | syscall.PROT_WRITE, "__LINKEDIT": syscall.PROT_READ,
}

// checkImage compares a loaded slice with llvm-objdump and with the file, word by word.
// names, when set, overrides objdump's symbol names by address.
func checkImage(t *testing.T, img *Image, s sliceInfo, opt Options, od []odFixup, names map[uint64]string) {
	t.Helper()
	slide := uint64(img.Slide)
	var text *macho.Segment
	for _, l := range s.f.Loads {
		if sg, ok := l.(*macho.Segment); ok && sg.Name == "__TEXT" {
			text = sg
		}
	}
	if slide == 0 || opt.Slide != 0 && slide != opt.Slide {
		t.Fatalf("slide %#x (asked %#x)", slide, opt.Slide)
	}
	if uint64(img.Header) != text.Addr+slide || binary.LittleEndian.Uint32(img.mem[text.Addr-img.base:]) != 0xfeedfacf {
		t.Fatalf("header %#x: not the mach header at __TEXT %#x + slide", img.Header, text.Addr)
	}
	if img.Arch != s.name {
		t.Errorf("Arch %q, want %q", img.Arch, s.name)
	}
	mem := img.Bytes()
	word := func(unslid uint64) uint64 { return binary.LittleEndian.Uint64(mem[unslid-img.base:]) }

	// What the file holds at each unslid address of the mapping (zero past filesz).
	file := make([]byte, len(mem))
	for _, l := range s.f.Loads {
		sg, ok := l.(*macho.Segment)
		if !ok || sg.Name == "__PAGEZERO" || sg.Memsz == 0 {
			continue
		}
		copy(file[sg.Addr-img.base:], s.data[sg.Offset:sg.Offset+min(sg.Filesz, sg.Memsz)])
	}
	touched := make([]bool, len(mem))
	touch := func(unslid uint64) {
		for i := range uint64(8) {
			touched[unslid-img.base+i] = true
		}
	}

	// Binds: the same multiset as objdump's, with the right values in memory.
	type key struct {
		kind string
		addr uint64
		sym  string
	}
	want := map[key]odFixup{}
	rebases := map[uint64]odFixup{}
	for _, e := range od {
		if e.kind == "rebase" {
			rebases[e.addr] = e
			continue
		}
		if n, ok := names[e.addr]; ok {
			e.sym = n
		}
		k := key{e.kind, e.addr, e.sym}
		if _, dup := want[k]; dup {
			t.Fatalf("objdump lists %v twice", k)
		}
		want[k] = e
	}
	regular := map[uint64]Bind{}
	for _, b := range img.Binds {
		if !b.Lazy && !(b.Weak && !s.chained) {
			regular[b.Addr] = b
		}
	}
	written := map[uint64]Bind{} // the bind whose value each bound slot holds
	for _, b := range img.Binds {
		_, overRegular := regular[b.Addr]
		if !(b.Lazy && !opt.BindLazy) && !(b.Weak && !s.chained && overRegular) {
			written[b.Addr] = b
		}
	}
	for _, b := range img.Binds {
		kind := "bind"
		switch {
		case b.Lazy:
			kind = "lazy"
		case b.Weak && !s.chained:
			kind = "weak"
		}
		addr := b.Addr - slide
		k := key{kind, addr, b.Symbol}
		e, ok := want[k]
		if !ok {
			t.Errorf("bind %s %s at %#x (%s): objdump lists no such bind", kind, b.Symbol, addr, b.Library)
			continue
		}
		delete(want, k)
		if shortName(b.Library) != e.dylib {
			t.Errorf("bind %s at %#x: library %s, objdump says %s", b.Symbol, addr, b.Library, e.dylib)
		}
		if b.Weak != (b.Library == "weak") {
			t.Errorf("bind %s at %#x: Weak %v from %s", b.Symbol, addr, b.Weak, b.Library)
		}
		fake := FakeAddress(b.Library, b.Symbol)
		if b.Value != fake+uint64(e.addend) {
			t.Errorf("bind %s at %#x: value %#x, want fake %#x + addend %#x", b.Symbol, addr, b.Value, fake, e.addend)
		}
		if img.Fake[b.Library+"\x00"+b.Symbol] != fake {
			t.Errorf("Fake lacks %s %s", b.Library, b.Symbol)
		}
		if b.Auth != nil {
			t.Errorf("bind %s at %#x: auth %+v in a %s image", b.Symbol, addr, *b.Auth, s.name)
		}
		got := word(addr)
		switch r, bound := regular[b.Addr]; {
		case b.Lazy && !opt.BindLazy:
			if _, ok := rebases[addr]; !ok || got != binary.LittleEndian.Uint64(file[addr-img.base:])+slide {
				t.Errorf("lazy %s at %#x holds %#x: not the rebased stub helper", b.Symbol, addr, got)
			}
		case kind == "weak" && bound:
			if got != r.Value {
				t.Errorf("weak %s at %#x holds %#x, want the regular bind's %#x", b.Symbol, addr, got, r.Value)
			}
		case got != b.Value:
			t.Errorf("%s %s at %#x holds %#x, want %#x", kind, b.Symbol, addr, got, b.Value)
		}
		touch(addr)
	}
	for k := range want {
		t.Errorf("objdump's %s %s at %#x is missing", k.kind, k.sym, k.addr)
	}

	// Rebases: the same set; each holds its target (chained) or the file's pointer
	// (classic) plus the slide, unless a bind wrote over it.
	got := map[uint64]bool{}
	for _, a := range img.Rebases {
		got[a-slide] = true
	}
	for a, e := range rebases {
		if !got[a] {
			t.Errorf("rebase at %#x missing", a)
			continue
		}
		delete(got, a)
		target := e.target
		if !s.chained {
			target = binary.LittleEndian.Uint64(file[a-img.base:])
		}
		b, bound := written[a+slide]
		switch v := word(a); {
		case bound && v != b.Value:
			t.Errorf("rebased and bound %#x holds %#x, want %#x", a, v, b.Value)
		case !bound && v != target+slide:
			t.Errorf("rebase at %#x holds %#x, want %#x + slide %#x", a, v, target, slide)
		}
		touch(a)
	}
	for a := range got {
		t.Errorf("rebase at %#x that objdump does not list", a)
	}

	// Every other byte is the file's (or zero).
	for i := range mem {
		if !touched[i] && mem[i] != file[i] {
			t.Fatalf("byte at %#x is %#x, the file has %#x, and no fixup is there", img.base+uint64(i), mem[i], file[i])
		}
	}

	// Protections as dyld leaves them, read back from /proc/self/maps.
	prots, err := img.CurrentProtections()
	if err != nil {
		t.Fatal(err)
	}
	var segs []*macho.Segment
	for _, l := range s.f.Loads {
		if sg, ok := l.(*macho.Segment); ok && sg.Name != "__PAGEZERO" && sg.Memsz != 0 {
			segs = append(segs, sg)
		}
	}
	if len(prots) != len(segs) {
		t.Fatalf("%d segments mapped, the file has %d", len(prots), len(segs))
	}
	for i, p := range prots {
		sg := segs[i]
		w := int(sg.Prot) & 7
		if sg.Flag&0x10 != 0 || sg.Name == "__DATA_CONST" || sg.Name == "__AUTH_CONST" {
			w = syscall.PROT_READ
		}
		if n, ok := protNames[sg.Name]; ok && n != w {
			t.Errorf("%s: initprot %s, expected %s", sg.Name, protString(w), protString(n))
		}
		if p.Name != sg.Name || p.Addr != sg.Addr+slide || p.Prot != w || p.Size < sg.Memsz {
			t.Errorf("segment %s [%#x,+%#x) %s, want %s at %#x %s", p.Name, p.Addr, p.Size, protString(p.Prot), sg.Name, sg.Addr+slide, protString(w))
		}
	}
	fakes := map[uint64]string{}
	for k, v := range img.Fake {
		if o, dup := fakes[v]; dup {
			t.Errorf("%q and %q share fake address %#x", o, k, v)
		}
		fakes[v] = k
	}
}

// stats gathers the opcodes and pointer formats the real fixtures exercised.
var (
	statsMu sync.Mutex
	stats   = map[string]int{}
)

func loadAndCheck(t *testing.T, file string, s sliceInfo, opt Options, names map[uint64]string) {
	t.Helper()
	od := runObjdump(t, file, s)
	for _, lazy := range []bool{false, true} {
		o := opt
		o.Arch, o.BindLazy = s.arch, lazy
		img, err := Load(file, o)
		if err != nil {
			t.Fatal(err)
		}
		checkImage(t, img, s, o, od, names)
		statsMu.Lock()
		for k, v := range img.stats {
			stats[k] += v
		}
		statsMu.Unlock()
		if err := img.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLoadMatchesObjdump loads every slice of every fixture and checks it against
// llvm-objdump and the file itself.
func TestLoadMatchesObjdump(t *testing.T) {
	var loaded atomic.Int32
	t.Run("fixtures", func(t *testing.T) {
		for _, file := range fixtureFiles(t) {
			for _, s := range slicesOf(t, file) {
				name := filepath.Base(file)
				if s.arch != "" {
					name += "/" + s.arch
				}
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					if s.f.Type != macho.TypeExec && s.f.Type != macho.TypeDylib && s.f.Type != macho.TypeBundle {
						if img, err := Load(file, Options{Arch: s.arch}); err == nil {
							img.Close()
							t.Fatalf("loaded a file of type %v", s.f.Type)
						}
						return
					}
					loadAndCheck(t, file, s, Options{}, nil)
					loaded.Add(1)
				})
			}
		}
	})
	statsMu.Lock()
	defer statsMu.Unlock()
	if loaded.Load() == 0 {
		t.Fatal("nothing loaded")
	}
	var keys []string
	for k := range stats {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.Logf("exercised by real fixtures: %-60s %d", k, stats[k])
	}
	for _, k := range []string{"DYLD_CHAINED_PTR_64 bind", "DYLD_CHAINED_PTR_64 rebase", "DYLD_CHAINED_IMPORT",
		"BIND_OPCODE_DO_BIND", "BIND_OPCODE_SET_SYMBOL_TRAILING_FLAGS_IMM", "REBASE_OPCODE_DO_REBASE_IMM_TIMES"} {
		if stats[k] == 0 {
			t.Errorf("no fixture exercised %s", k)
		}
	}
}

// TestLoadAddends builds small dylibs with addends, flat-namespace and weak imports, and a
// weak definition (IMPORT_ADDEND and IMPORT_ADDEND64 chained imports, SET_ADDEND_SLEB,
// SET_DYLIB_SPECIAL_IMM, weak-bind tables) and checks them the same way.
func TestLoadAddends(t *testing.T) {
	sdk := filepath.Join(testfiles.Root(t), "sdk")
	testfiles.NeedTools(t, "clang-19", "ld64.lld-19")
	if _, err := os.Stat(filepath.Join(sdk, "usr/lib/libSystem.tbd")); err != nil {
		t.Skip("no SDK stubs")
	}
	dir := t.TempDir()
	src := `extern int ext_arr[]; extern char ext_big[]; extern int ext_flat;
extern int wimp __attribute__((weak_import));
__attribute__((weak)) int wk = 1;
int *p1 = &ext_arr[3];
BIG
char *p3 = ext_big - 16;
int *p4 = &ext_flat;
int *pw = &wk;
int *pwi = &wimp;
int *pd[12] = {&ext_arr[0], &ext_arr[0], &ext_arr[0], &ext_arr[0], &ext_arr[0], &ext_arr[0], &ext_arr[0], &ext_arr[0]};
int f(void) { return *p1 + ext_flat; }
`
	t.Run("built", func(t *testing.T) {
		for _, v := range []struct{ name, big string }{{"addend32", ""}, {"addend64", "char *p2 = ext_big + 0x100000000LL;"}} {
			c := filepath.Join(dir, v.name+".c")
			if err := os.WriteFile(c, []byte(strings.Replace(src, "BIG", v.big, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, target := range []string{"arm64-apple-macos13", "x86_64-apple-ios15-simulator"} {
				t.Run(v.name+"-"+target, func(t *testing.T) {
					t.Parallel()
					build := func(style string) (string, sliceInfo) {
						out := filepath.Join(dir, v.name+"-"+target+"-"+style)
						cmd := exec.Command("clang-19", "-target", target, "-fuse-ld=lld", "-nostdlib", "-shared", "-O1", "-isysroot", sdk,
							"-L"+sdk+"/usr/lib", "-Wl,-"+style, "-Wl,-undefined,dynamic_lookup", "-o", out, c, "-lSystem")
						if b, err := cmd.CombinedOutput(); err != nil {
							t.Fatalf("%v: %v\n%s", cmd, err, b)
						}
						return out, slicesOf(t, out)[0]
					}
					classic, cs := build("no_fixup_chains")
					chained, chs := build("fixup_chains")
					t.Run(filepath.Base(classic), func(t *testing.T) { loadAndCheck(t, classic, cs, Options{}, nil) })
					t.Run(filepath.Base(chained), func(t *testing.T) {
						// llvm-objdump-19 misreads DYLD_CHAINED_IMPORT_ADDEND64 names: take them from
						// the classic twin, whose layout is the same.
						var names map[uint64]string
						if v.name == "addend64" {
							names = map[uint64]string{}
							for _, e := range runObjdump(t, classic, cs) {
								if e.kind == "bind" || e.kind == "weak" {
									names[e.addr] = e.sym
								}
							}
						}
						loadAndCheck(t, chained, chs, Options{}, names)
					})
				})
			}
		}
	})
	statsMu.Lock()
	defer statsMu.Unlock()
	for _, k := range []string{"DYLD_CHAINED_IMPORT_ADDEND", "DYLD_CHAINED_IMPORT_ADDEND64", "BIND_OPCODE_SET_ADDEND_SLEB",
		"BIND_OPCODE_SET_DYLIB_SPECIAL_IMM", "BIND_OPCODE_DO_BIND_ULEB_TIMES_SKIPPING_ULEB"} {
		t.Logf("exercised: %-50s %d", k, stats[k])
	}
}

// TestSlideOption loads at a chosen slide, and refuses unusable ones.
func TestSlideOption(t *testing.T) {
	var file string
	var s sliceInfo
	for _, f := range fixtureFiles(t) {
		if ss := slicesOf(t, f); len(ss) == 1 && ss[0].chained && ss[0].f.Type == macho.TypeExec {
			file, s = f, ss[0]
			break
		}
	}
	if file == "" {
		t.Fatal("no thin chained executable")
	}
	const slide = 0x3c00_0000_0000
	loadAndCheck(t, file, s, Options{Slide: slide}, nil)
	img, err := Load(file, Options{Slide: slide})
	if err != nil {
		t.Fatal(err)
	}
	defer img.Close()
	if img.Slide != slide {
		t.Fatalf("slide %#x", img.Slide)
	}
	if img2, err := Load(file, Options{Slide: slide}); err == nil {
		img2.Close()
		t.Fatal("loaded twice at the same slide")
	}
	if img2, err := Load(file, Options{Slide: slide + 0x10}); err == nil {
		img2.Close()
		t.Fatal("loaded at an unaligned slide")
	}
	seen := map[uintptr]bool{}
	for range 4 {
		img, err := Load(file, Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer img.Close()
		if img.Slide == 0 || img.Slide%uintptr(os.Getpagesize()) != 0 || seen[img.Slide] {
			t.Fatalf("slide %#x", img.Slide)
		}
		seen[img.Slide] = true
	}
}

// TestArchSelection picks slices of universal files and refuses ambiguous or absent ones.
func TestArchSelection(t *testing.T) {
	var fat, thin string
	for _, f := range fixtureFiles(t) {
		ss := slicesOf(t, f)
		if len(ss) > 1 && ss[0].f.Type == macho.TypeExec {
			fat = f
		}
		if len(ss) == 1 && ss[0].f.Type == macho.TypeExec && ss[0].name == "x86_64" {
			thin = f
		}
	}
	if fat == "" || thin == "" {
		t.Skip("no universal or thin x86_64 executable fixture")
	}
	for _, c := range []struct {
		file, arch string
		ok         bool
	}{{fat, "", false}, {fat, "arm64", true}, {fat, "x86_64", true}, {fat, "ppc", false}, {thin, "", true}, {thin, "x86_64", true}, {thin, "arm64", false}} {
		img, err := Load(c.file, Options{Arch: c.arch})
		if (err == nil) != c.ok {
			t.Errorf("%s [%q]: error %v", filepath.Base(c.file), c.arch, err)
		}
		if err == nil {
			if c.arch != "" && img.Arch != c.arch {
				t.Errorf("Arch %q", img.Arch)
			}
			img.Close()
		}
	}
}

// TestCorruptInput mutates the fixup data of real files: the loader must return errors or
// load, never panic (load runs without Load's panic guard here).
func TestCorruptInput(t *testing.T) {
	n := 0
	for _, file := range fixtureFiles(t) {
		ss := slicesOf(t, file)
		if len(ss) != 1 || ss[0].f.Type == macho.TypeObj || strings.HasPrefix(filepath.Base(file), "go-") {
			continue
		}
		data := ss[0].data
		var le *macho.Segment
		for _, l := range ss[0].f.Loads {
			if sg, ok := l.(*macho.Segment); ok && sg.Name == "__LINKEDIT" {
				le = sg
			}
		}
		if le == nil {
			continue
		}
		n++
		if n > 8 {
			break
		}
		seed := uint64(len(data))
		for i := range 60 {
			seed = seed*6364136223846793005 + 1442695040888963407
			mut := bytes.Clone(data)
			at := le.Offset + seed>>33%min(le.Filesz, 512) // the fixup data sits at LINKEDIT's start
			mut[at] ^= byte(seed>>8) | 1
			if i%3 == 0 && at+1 < uint64(len(mut)) {
				mut[at+1] = 0xff
			}
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("%s, byte %#x: panic: %v", filepath.Base(file), at, r)
					}
				}()
				if img, err := load(mut, Options{}); err == nil {
					img.Close()
				}
			}()
		}
	}
	if n == 0 {
		t.Fatal("no fixture to corrupt")
	}
}

// FuzzLoad loads mutated fixtures without the panic guard.
func FuzzLoad(f *testing.F) {
	for _, file := range []string{"objc-macos-arm64-exe-chained", "objc-macos-x86_64-exe-classic", "objc-ios-arm64-dylib-classic-zig"} {
		if data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "fixtures", file)); err == nil {
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if img, err := load(data, Options{BindLazy: true}); err == nil {
			img.Close()
		}
	})
}
