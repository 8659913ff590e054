//go:build linux

package machobind

import (
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/msgtrace/msgtrace/internal/simdyld"
	"github.com/msgtrace/msgtrace/internal/testfiles"
)

// specialOrdinalsSources: a program, and a bundle loaded into it that imports from it
// (-bundle_loader: ordinal -1, main-executable), from whoever exports it first
// (-undefined dynamic_lookup: -2, flat-namespace), and a weak definition of its own that dyld
// coalesces with the program's (-3, weak).
const (
	ordinalsHost = `int host_fn(void) { return 1; }
__attribute__((weak)) int shared_weak(void) { return 2; }
int main(void) { return host_fn() + shared_weak(); }
`
	ordinalsBundle = `extern int host_fn(void);
extern int flat_fn(void);
__attribute__((weak)) int shared_weak(void) { return 3; }
int entry(void) {
	int (*volatile a)(void) = host_fn, (*volatile b)(void) = flat_fn, (*volatile c)(void) = shared_weak;
	return a() + b() + c();
}
`
)

// buildOrdinalBundles links the bundle with chained fixups and with classic dyld info
// (clang-19 and ld64.lld-19, as the fixtures are) and returns the two files.
func buildOrdinalBundles(t *testing.T) map[string]string {
	testfiles.NeedTools(t, "clang-19", "ld64.lld-19")
	t.Helper()
	dir, sdk := t.TempDir(), filepath.Join(testfiles.Root(t), "sdk")
	for name, src := range map[string]string{"host.c": ordinalsHost, "bundle.c": ordinalsBundle} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := map[string]string{}
	for _, style := range []string{"fixup_chains", "no_fixup_chains"} {
		common := []string{"-target", "arm64-apple-macos12", "-fuse-ld=lld", "-nostdlib", "-isysroot", sdk,
			"-L" + filepath.Join(sdk, "usr/lib"), "-O1", "-Wl,-" + style}
		host, bundle := filepath.Join(dir, "host-"+style), filepath.Join(dir, "bundle-"+style)
		for _, args := range [][]string{
			append(common, "-o", host, filepath.Join(dir, "host.c"), "-lSystem", "-Wl,-export_dynamic"),
			append(common, "-bundle", "-Wl,-bundle_loader,"+host, "-Wl,-undefined,dynamic_lookup", "-o", bundle,
				filepath.Join(dir, "bundle.c"), "-lSystem"),
		} {
			if b, err := exec.Command("clang-19", args...).CombinedOutput(); err != nil {
				t.Fatalf("clang-19 %s: %v\n%s", strings.Join(args, " "), err, b)
			}
		}
		out[style] = bundle
	}
	return out
}

// TestSpecialOrdinals: dump attributes each import as dyld binds it (main-executable,
// flat-namespace, weak with the library the linker found it in), llvm-objdump agrees, and a
// Rebinding's Library filter selects each slot by those names.
func TestSpecialOrdinals(t *testing.T) {
	for style, file := range buildOrdinalBundles(t) {
		t.Run(style, func(t *testing.T) {
			d, err := DumpFile(file, DumpOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]PointerDump{}
			for _, p := range d.Slices[0].Pointers {
				got[p.Symbol] = p
			}
			want := map[string]PointerDump{
				"_host_fn":     {Library: "main-executable", Ordinal: MainExecutableOrdinal},
				"_flat_fn":     {Library: "flat-namespace", Ordinal: FlatLookupOrdinal},
				"_shared_weak": {Library: "weak", Ordinal: WeakLookupOrdinal, LinkedLibrary: "this-image"},
			}
			for sym, w := range want {
				g := got[sym]
				if g.Library != w.Library || g.Ordinal != w.Ordinal || g.LinkedLibrary != w.LinkedLibrary {
					t.Errorf("%s: library %q ordinal %d linked %q, want %q %d %q", sym, g.Library, g.Ordinal, g.LinkedLibrary, w.Library, w.Ordinal, w.LinkedLibrary)
				}
			}
			f, err := Open(file)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			crossCheckSlice(t, file, false, f.Slices[0])

			img, err := simdyld.Load(file, simdyld.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer img.Close()
			l := loadedOf(img)
			r := NewRebinder(&simRuntime{})
			for _, c := range []struct {
				sym, filter string
				slots       int
			}{
				{"host_fn", "main-executable", 1},
				{"host_fn", "libSystem.B.dylib", 0},
				{"host_fn", "flat-namespace", 0},
				{"flat_fn", "flat-namespace", 1},
				{"flat_fn", "libSystem.B.dylib", 0},
				{"shared_weak", "weak", 1},
				{"shared_weak", "this-image", 1}, // the linker found it in the bundle itself
				{"shared_weak", "main-executable", 0},
				{"shared_weak", "", 1},
			} {
				h, err := r.RebindImage(l, Rebinding{Name: c.sym, Replacement: 0x5150_0000_0300, Library: c.filter})
				if err != nil {
					t.Fatal(err)
				}
				if h.Slots() != c.slots {
					t.Errorf("%s with Library %q: %d slots rebound, want %d", c.sym, c.filter, h.Slots(), c.slots)
				}
				if err := h.Undo(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestWeakCoalescedLinkedLibrary: in real C++ binaries linked by ld64 with classic dyld info,
// the imports of operator new/delete and typeinfo that the weak-bind table coalesces over a
// regular bind are "weak", linked from libc++, and selected by a Library filter of "weak" or
// "libc++.1.dylib": parcel's watcher.node (bundles), libvips-cpp (a dylib) and leveldown's
// universal addon, whose bind and weak-bind tables each list every such slot twice; and, with
// chained fixups, ggml's plugins (ld-prime), where only the chained import table says "weak
// lookup" (their symbol-table entries name libc++ without N_REF_TO_WEAK).
func TestWeakCoalescedLinkedLibrary(t *testing.T) {
	found := map[string][]string{}
	for _, f := range testfiles.Corpus(t) {
		for _, p := range []string{"parcel-watcher", "libvips-cpp", "leveldown", "ggml-cpu", "ggml-metal"} {
			if strings.HasPrefix(filepath.Base(f), p) {
				found[p] = append(found[p], f)
			}
		}
	}
	var files []string
	for _, p := range []string{"parcel-watcher", "libvips-cpp", "leveldown", "ggml-cpu", "ggml-metal"} {
		if len(found[p]) == 0 {
			testfiles.Missing(t, "the "+p+" binary of the corpus (testdata/corpus: `make corpus`)")
		}
		files = append(files, found[p]...)
	}
	for _, file := range files {
		d, err := DumpFile(file, DumpOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, sl := range d.Slices {
			checkWeakCoalescedSlice(t, file, sl)
		}
	}
}

func checkWeakCoalescedSlice(t *testing.T, file string, sl SliceDump) {
	const libcxx = "/usr/lib/libc++.1.dylib"
	where := filepath.Base(file) + " [" + sl.Arch + "]"
	var ps []PointerDump
	for _, p := range sl.Pointers {
		if p.LinkedLibrary == "weak" {
			t.Errorf("%s: %s at %s linked from \"weak\"", where, p.Symbol, p.Address)
		}
		if p.Symbol == "__Znwm" || p.Symbol == "__ZdlPv" {
			ps = append(ps, p)
		}
	}
	if len(ps) == 0 {
		t.Fatalf("%s: no slot for operator new or delete", where)
	}
	for _, p := range ps {
		if p.Library != "weak" || p.Ordinal != WeakLookupOrdinal || p.LinkedLibrary != libcxx {
			t.Errorf("%s: %s slot %s: library %q ordinal %d linked %q, want weak -3 %s", where, p.Symbol, p.Address, p.Library, p.Ordinal, p.LinkedLibrary, libcxx)
		}
	}
	img, err := simdyld.Load(file, simdyld.Options{Arch: sl.Arch})
	if err != nil {
		t.Fatal(err)
	}
	defer img.Close()
	l := loadedOf(img)
	r := NewRebinder(&simRuntime{})
	for _, sym := range []string{"__Znwm", "__ZdlPv"} {
		n := 0
		for _, p := range ps {
			if p.Symbol == sym {
				n++
			}
		}
		for filter, want := range map[string]int{"weak": n, "libc++.1.dylib": n, libcxx: n, "libSystem.B.dylib": 0} {
			h, err := r.RebindImage(l, Rebinding{Name: sym, Replacement: 0x5150_0000_0300, Library: filter})
			if err != nil {
				t.Fatal(err)
			}
			if h.Slots() != want {
				t.Errorf("%s: Library %q rebound %d %s slots, want %d", where, filter, h.Slots(), sym, want)
			}
			h.Undo()
		}
	}
}

// TestRebind32BitRefused: dump reads 32-bit images, rebinding refuses them (ErrNot64) before
// touching anything: an i386 image mapped in memory is not parsed for rebinding.
func TestRebind32BitRefused(t *testing.T) {
	for _, file := range testfiles.GoDebugMachO(t) {
		f, err := Open(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range f.Slices {
			img, err := s.Parse()
			if err != nil || img.Is64() {
				continue
			}
			if img.PointerWidth() != 4 {
				t.Errorf("%s [%s]: pointer width %d", file, s.Arch, img.PointerWidth())
			}
			mem := append([]byte(nil), s.data...)
			l := Loaded{Name: file, Header: uintptr(unsafe.Pointer(&mem[0])), Slide: uintptr(unsafe.Pointer(&mem[0])) - uintptr(img.TextVMAddr())}
			if _, err := ParseLoaded(l); !errors.Is(err, ErrNot64) {
				t.Errorf("%s [%s]: ParseLoaded of a 32-bit image: %v, want ErrNot64", file, s.Arch, err)
			}
			r := NewRebinder(&simRuntime{})
			if _, err := r.RebindImage(l, Rebinding{Name: "puts", Replacement: 1}); !errors.Is(err, ErrNot64) {
				t.Errorf("%s [%s]: RebindImage of a 32-bit image: %v, want ErrNot64", file, s.Arch, err)
			}
			runtime.KeepAlive(mem)
		}
		f.Close()
	}
}

// TestExternalRelocationsSaid: an old image that also binds data through external relocations
// (LC_DYSYMTAB nextrel) is dumped with their count, and the simulated dyld, which does not
// apply relocations, refuses it saying so rather than binding part of it.
func TestExternalRelocationsSaid(t *testing.T) {
	data, err := os.ReadFile(goDebugFile(t, "gcc-amd64-darwin-exec"))
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	patched := false
	for off, i := uint32(32), uint32(0); i < le.Uint32(data[16:]); i++ {
		if le.Uint32(data[off:]) == 0xb { // LC_DYSYMTAB
			le.PutUint32(data[off+64:], le.Uint32(data[off+56:])) // extreloff: any bytes in __LINKEDIT
			le.PutUint32(data[off+68:], 1)                        // nextrel
			patched = true
		}
		off += le.Uint32(data[off+4:])
	}
	if !patched {
		t.Fatal("no LC_DYSYMTAB")
	}
	file := filepath.Join(t.TempDir(), "extrel")
	os.WriteFile(file, data, 0o644)
	d, err := DumpFile(file, DumpOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s := d.Slices[0]; s.Fixups != "relocations" || s.ExternalRelocations != 1 || len(s.Pointers) != 2 {
		t.Errorf("fixups %q, %d external relocations, %d slots", s.Fixups, s.ExternalRelocations, len(s.Pointers))
	}
	if _, err := simdyld.Load(file, simdyld.Options{}); err == nil || !strings.Contains(err.Error(), "1 external relocations") {
		t.Errorf("simulated dyld: %v, want a refusal naming the external relocations", err)
	}
}
