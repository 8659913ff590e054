//go:build linux

package machobind

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/msgtrace/msgtrace/internal/simdyld"
	"github.com/msgtrace/msgtrace/internal/testfiles"
)

// simRuntime is the Runtime of images mapped by the simulated dyld: real pages with real
// protections in this process (ProcVM), fake addresses for what dyld would resolve, and a
// recording stand-in for arm64e signing.
type simRuntime struct {
	ProcVM
	images []Loaded
	watch  func(Loaded)
	mu     sync.Mutex
	signs  []signCall
}

type signCall struct {
	p, slot uintptr
	auth    AuthInfo
}

// signMark marks values "signed" by the test runtime so that the test can tell them apart.
const signMark = 0x0055_0000_0000_0000

func (rt *simRuntime) Images() ([]Loaded, error)         { return rt.images, nil }
func (rt *simRuntime) Self() uintptr                     { return 0 }
func (rt *simRuntime) WatchImages(fn func(Loaded)) error { rt.watch = fn; return nil }
func (rt *simRuntime) Strip(p uintptr) uintptr           { return p &^ signMark }
func (rt *simRuntime) Resolve(sym, lib string) (uintptr, error) {
	return uintptr(simdyld.FakeAddress(lib, sym)), nil
}
func (rt *simRuntime) Sign(p, slot uintptr, a AuthInfo) (uintptr, error) {
	rt.mu.Lock()
	rt.signs = append(rt.signs, signCall{p, slot, a})
	rt.mu.Unlock()
	return p | signMark, nil
}

func loadedOf(img *simdyld.Image) Loaded {
	return Loaded{Name: img.Path, Header: img.Header, Slide: img.Slide}
}

// simCase loads every slice of every fixture and corpus file in the simulated dyld.
func forEachSimImage(t *testing.T, files []string, opt simdyld.Options, fn func(t *testing.T, img *simdyld.Image)) {
	for _, file := range files {
		f, err := Open(file)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		arches := f.Arches()
		types := map[string]uint32{}
		skip := map[string]string{}
		for _, s := range f.Slices {
			if len(s.data) >= 16 {
				types[s.Arch] = binary.LittleEndian.Uint32(s.data[12:])
			}
			// Rebinding stays 64-bit (TestRebind32BitRefused); a malformed image is refused
			// by the parser before any slot is touched (its reason is checked against
			// llvm-objdump's by TestCrossCheckObjdump).
			img, err := s.Parse()
			if err == nil && !img.Is64() {
				err = ErrNot64
			}
			if err == nil {
				_, err = img.Slots()
			}
			if err != nil {
				skip[s.Arch] = err.Error()
			}
		}
		f.Close()
		for _, arch := range arches {
			if types[arch] == 1 || types[arch] == 0xa { // MH_OBJECT, MH_DSYM: never loaded by dyld
				continue
			}
			if why := skip[arch]; why != "" {
				t.Logf("%s [%s]: not rebound: %s", filepath.Base(file), arch, why)
				continue
			}
			t.Run(filepath.Base(file)+"/"+arch, func(t *testing.T) {
				o := opt
				if len(arches) > 1 {
					o.Arch = arch
				}
				img, err := simdyld.Load(file, o)
				if err != nil {
					t.Fatalf("%s [%s]: simulated dyld: %v", file, arch, err)
				}
				defer img.Close()
				fn(t, img)
			})
		}
	}
}

// TestRebindSimulated runs the production rebinding code over every fixture and corpus file
// mapped by the simulated dyld: all imported symbols rebound at once, then undone.
func TestRebindSimulated(t *testing.T) {
	forEachSimImage(t, testfiles.All(t), simdyld.Options{}, func(t *testing.T, img *simdyld.Image) {
		checkRebindImage(t, img)
	})
}

// TestRebindSimulatedLazyBound repeats the check with lazy pointers already bound, as after
// their first call.
func TestRebindSimulatedLazyBound(t *testing.T) {
	forEachSimImage(t, testfiles.Fixtures(t), simdyld.Options{BindLazy: true}, func(t *testing.T, img *simdyld.Image) {
		checkRebindImage(t, img)
	})
}

func checkRebindImage(t *testing.T, img *simdyld.Image) {
	l := loadedOf(img)
	parsed, err := ParseLoaded(l)
	if err != nil {
		t.Fatalf("%s: parsing the mapped image: %v", img.Path, err)
	}
	slots, err := parsed.Slots()
	if err != nil {
		t.Fatalf("%s: %v", img.Path, err)
	}
	// What the simulated dyld bound where (independently of our parser).
	bound := map[uint64]simdyld.Bind{}
	for _, b := range img.Binds {
		if _, dup := bound[b.Addr]; !dup || !b.Weak { // a weak entry never hides a regular bind
			bound[b.Addr] = b
		}
	}
	// One rebinding per distinct imported symbol, each with its own replacement.
	var names []string
	seen := map[string]bool{}
	for _, s := range slots {
		if !s.Local && !s.Absolute && !seen[s.Symbol] {
			seen[s.Symbol] = true
			names = append(names, s.Symbol)
		}
	}
	if len(names) == 0 {
		t.Skipf("%s: no imported pointer slots", img.Path) // Go-built static-ish binaries, objects
	}
	sort.Strings(names)
	repl := map[string]uintptr{}
	var rs []Rebinding
	for i, n := range names {
		repl[n] = uintptr(0x5150_0000_0000 + i*16)
		rs = append(rs, Rebinding{Name: n, Replacement: repl[n]})
	}

	before := bytes.Clone(img.Bytes())
	protBefore, err := img.CurrentProtections()
	if err != nil {
		t.Fatal(err)
	}
	rt := &simRuntime{images: []Loaded{l}}
	r := NewRebinder(rt)
	h, err := r.RebindImage(l, rs...)
	if err != nil {
		t.Fatalf("%s: RebindImage: %v", img.Path, err)
	}

	lo := uint64(uintptr(unsafe.Pointer(&img.Bytes()[0]))) // start of the mapping
	changed := map[uint64]bool{}
	// What Original may be for each name: a value one of its slots held before (a bound
	// address, or for weak coalescing the image's own definition), or, for lazy slots still at
	// the stub helper, what the runtime resolves.
	okOriginal := map[string]map[uintptr]bool{}
	for _, s := range slots {
		if s.Local || s.Absolute {
			continue
		}
		addr := uint64(l.Slide) + s.Addr
		b, ok := bound[addr]
		if !ok {
			t.Errorf("%s: slot %s %#x (%s): the simulated dyld bound nothing there", img.Path, s.Section.FullName(), s.Addr, s.Symbol)
			continue
		}
		if b.Symbol != s.Symbol {
			t.Errorf("%s: slot %#x: dyld bound %s, we matched %s", img.Path, s.Addr, b.Symbol, s.Symbol)
		}
		got := loadSlot(uintptr(addr))
		want := repl[s.Symbol]
		if s.Kind == KindAuth {
			want |= signMark
		}
		if got != want {
			t.Errorf("%s: slot %s %#x (%s): holds %#x, want the replacement %#x", img.Path, s.Section.FullName(), s.Addr, s.Symbol, got, want)
		}
		changed[addr-lo] = true
		if okOriginal[s.Symbol] == nil {
			okOriginal[s.Symbol] = map[uintptr]bool{}
		}
		pre := uintptr(binary.LittleEndian.Uint64(before[addr-lo:]))
		if b.Lazy && uint64(pre) != b.Value {
			pre = uintptr(simdyld.FakeAddress(b.Library, b.Symbol))
		}
		okOriginal[s.Symbol][pre] = true
	}
	for name, ok := range okOriginal {
		if o := h.Original(name); !ok[o] {
			t.Errorf("%s: Original(%s) = %#x, not what any of its slots held (%v)", img.Path, name, o, ok)
		}
	}
	// Every other byte of the image is unchanged.
	after := img.Bytes()
	for off := 0; off+8 <= len(before); off += 8 {
		if !changed[uint64(off)] && !bytes.Equal(before[off:off+8], after[off:off+8]) {
			t.Fatalf("%s: bytes at offset %#x changed (%x -> %x) but no slot is there", img.Path, off, before[off:off+8], after[off:off+8])
		}
	}
	if len(changed) != h.Slots() {
		t.Errorf("%s: hook reports %d slots changed, the image has %d", img.Path, h.Slots(), len(changed))
	}
	for _, c := range rt.signs {
		if c.auth != GOTAuth {
			t.Errorf("%s: auth slot %#x signed with %+v, want %+v", img.Path, c.slot, c.auth, GOTAuth)
		}
	}
	checkProtections(t, img, protBefore)
	checkParkImage(t, img, h, slots, protBefore)

	if err := h.Undo(); err != nil {
		t.Fatalf("%s: Undo: %v", img.Path, err)
	}
	if !bytes.Equal(before, img.Bytes()) {
		t.Fatalf("%s: Undo did not restore the image byte for byte", img.Path)
	}
	checkProtections(t, img, protBefore)
}

// checkParkImage parks every rebinding of a hook over a whole image: each slot holds its
// name's Original (signed for an auth slot), nothing else changes, protections stay; Unpark
// gives every slot its replacement back; parked a second time, the image is left for Undo.
func checkParkImage(t *testing.T, img *simdyld.Image, h *Hook, slots []Slot, prot []simdyld.Segment) {
	t.Helper()
	l := loadedOf(img)
	hooked := bytes.Clone(img.Bytes())
	n, err := h.Park()
	if err != nil {
		t.Fatalf("%s: Park: %v", img.Path, err)
	}
	if n != h.Slots() || !h.Parked() {
		t.Fatalf("%s: Park changed %d slots, the hook has %d (parked %v)", img.Path, n, h.Slots(), h.Parked())
	}
	lo := uint64(uintptr(unsafe.Pointer(&img.Bytes()[0])))
	changed := map[uint64]bool{}
	for _, s := range slots {
		if s.Local || s.Absolute {
			continue
		}
		addr := uint64(l.Slide) + s.Addr
		want := h.Original(s.Symbol)
		if s.Kind == KindAuth {
			want |= signMark
		}
		if got := loadSlot(uintptr(addr)); got != want || want == 0 {
			t.Errorf("%s: parked slot %#x (%s) holds %#x, want the original %#x", img.Path, s.Addr, s.Symbol, got, want)
		}
		changed[addr-lo] = true
	}
	now := img.Bytes()
	for off := 0; off+8 <= len(hooked); off += 8 {
		if !changed[uint64(off)] && !bytes.Equal(hooked[off:off+8], now[off:off+8]) {
			t.Fatalf("%s: Park changed bytes at offset %#x where no slot is", img.Path, off)
		}
	}
	checkProtections(t, img, prot)
	if n, err := h.Unpark(); err != nil || n != h.Slots() || h.Parked() {
		t.Fatalf("%s: Unpark changed %d slots of %d: %v", img.Path, n, h.Slots(), err)
	}
	if !bytes.Equal(hooked, img.Bytes()) {
		t.Fatalf("%s: Unpark did not give back every replacement", img.Path)
	}
	checkProtections(t, img, prot)
	if _, err := h.Park(); err != nil {
		t.Fatalf("%s: Park again: %v", img.Path, err)
	}
}

func checkProtections(t *testing.T, img *simdyld.Image, want []simdyld.Segment) {
	t.Helper()
	got, err := img.CurrentProtections()
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s: protections changed:\n got %v\nwant %v", img.Path, got, want)
	}
}

// TestReadOnlyConstStaysReadOnly checks that rebinding a __DATA_CONST slot leaves the page
// read-only, as dyld left it.
func TestReadOnlyConstStaysReadOnly(t *testing.T) {
	checked := 0
	forEachSimImage(t, testfiles.Fixtures(t), simdyld.Options{}, func(t *testing.T, img *simdyld.Image) {
		var vm ProcVM
		for _, s := range img.Segments {
			if s.Name != "__DATA_CONST" {
				continue
			}
			p, err := vm.Protection(uintptr(s.Addr))
			if err != nil {
				t.Fatal(err)
			}
			if p&ProtWrite != 0 {
				t.Fatalf("%s: __DATA_CONST is writable after load (%v)", img.Path, p)
			}
			checked++
		}
	})
	if checked == 0 {
		t.Fatal("no fixture has a __DATA_CONST segment")
	}
}

// TestRebindConcurrentReaders swaps slots while other goroutines read them: every read sees
// the bound address or the replacement, nothing else.
func TestRebindConcurrentReaders(t *testing.T) {
	var file string
	for _, f := range testfiles.Fixtures(t) {
		if strings.Contains(filepath.Base(f), "objc") && strings.Contains(filepath.Base(f), "chained") && !strings.Contains(filepath.Base(f), "universal") {
			file = f
			break
		}
	}
	if file == "" {
		t.Fatal("no chained objc fixture")
	}
	img, err := simdyld.Load(file, simdyld.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer img.Close()
	l := loadedOf(img)
	parsed, err := ParseLoaded(l)
	if err != nil {
		t.Fatal(err)
	}
	var addrs []uintptr
	slots, _ := parsed.Slots()
	for _, s := range slots {
		if s.Symbol == "_objc_msgSend" {
			addrs = append(addrs, l.Slide+uintptr(s.Addr))
		}
	}
	if len(addrs) == 0 {
		t.Fatalf("%s has no _objc_msgSend slot", file)
	}
	orig := loadSlot(addrs[0])
	const repl = 0x5150_0000_0010
	var stop atomic.Bool
	var bad atomic.Uintptr
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				for _, a := range addrs {
					if v := loadSlot(a); v != orig && v != repl {
						bad.Store(v)
					}
				}
			}
		}()
	}
	r := NewRebinder(&simRuntime{images: []Loaded{l}})
	for i := 0; i < 200; i++ {
		h, err := r.RebindImage(l, Rebinding{Name: "objc_msgSend", Replacement: repl})
		if err != nil {
			t.Fatal(err)
		}
		if h.Original("objc_msgSend") != orig {
			t.Fatalf("Original = %#x, want %#x", h.Original("objc_msgSend"), orig)
		}
		if err := h.Undo(); err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
	if v := bad.Load(); v != 0 {
		t.Fatalf("a reader saw %#x, neither the original nor the replacement", v)
	}
}
