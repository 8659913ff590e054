//go:build linux

package machobind

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/msgtrace/msgtrace/internal/simdyld"
	"github.com/msgtrace/msgtrace/internal/testfiles"
)

// fixture returns the fixture with the given base name.
func fixture(t testing.TB, name string) string {
	t.Helper()
	for _, f := range testfiles.Fixtures(t) {
		if filepath.Base(f) == name {
			return f
		}
	}
	t.Fatalf("no fixture %s", name)
	return ""
}

func load(t *testing.T, name string, opt simdyld.Options) *simdyld.Image {
	t.Helper()
	img, err := simdyld.Load(fixture(t, name), opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { img.Close() })
	return img
}

// slotsOf returns the slid addresses of a symbol's slots in a mapped image.
func slotsOf(t *testing.T, l Loaded, sym string) []uintptr {
	t.Helper()
	img, err := ParseLoaded(l)
	if err != nil {
		t.Fatal(err)
	}
	slots, err := img.Slots()
	if err != nil {
		t.Fatal(err)
	}
	var out []uintptr
	for _, s := range slots {
		if s.Symbol == sym {
			out = append(out, l.Slide+uintptr(s.Addr))
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s has no %s slot", l.Name, sym)
	}
	return out
}

// TestRebindAllImagesAndLater covers Rebind: every image now except our own, images loaded
// later through the add-image callback (including dyld's replay of the ones already seen),
// malformed images skipped with an error, and Undo stopping the following.
func TestRebindAllImagesAndLater(t *testing.T) {
	app := load(t, "objc-macos-arm64-exe-chained", simdyld.Options{})
	self := load(t, "objc-macos-x86_64-exe-chained", simdyld.Options{})
	lib := load(t, "objc-macos-arm64-dylib-classic", simdyld.Options{})
	later := load(t, "objc-ios-arm64-bundle-chained", simdyld.Options{})
	rt := &simRuntime{images: []Loaded{loadedOf(app), loadedOf(self), loadedOf(lib), {Name: "bogus", Header: loadedOf(lib).Header + 8, Slide: loadedOf(lib).Slide}}}
	selfRT := &selfRuntime{simRuntime: rt, self: self.Header}
	r := NewRebinder(selfRT)
	const repl = 0x5150_0000_0100
	h, err := r.Rebind(Rebinding{Name: "objc_msgSend", Replacement: repl})
	if err != nil {
		t.Fatal(err)
	}
	for _, img := range []*simdyld.Image{app, lib} {
		for _, a := range slotsOf(t, loadedOf(img), "_objc_msgSend") {
			if loadSlot(a) != repl {
				t.Fatalf("%s: slot %#x not rebound", img.Path, a)
			}
		}
	}
	for _, a := range slotsOf(t, loadedOf(self), "_objc_msgSend") {
		if loadSlot(a) == repl {
			t.Fatal("our own image was rebound")
		}
	}
	if sk := h.Skipped(); len(sk) != 1 || !strings.Contains(sk[0].Error(), "bogus") {
		t.Fatalf("skipped = %v, want the bogus image", sk)
	}
	// dyld calls the add-image callback for the images loaded later, and once for each
	// already-loaded image when the callback is registered.
	rt.watch(loadedOf(app))
	rt.watch(loadedOf(later))
	for _, a := range slotsOf(t, loadedOf(later), "_objc_msgSend") {
		if loadSlot(a) != repl {
			t.Fatalf("image loaded later: slot %#x not rebound", a)
		}
	}
	wantSlots := len(slotsOf(t, loadedOf(app), "_objc_msgSend")) + len(slotsOf(t, loadedOf(lib), "_objc_msgSend")) + len(slotsOf(t, loadedOf(later), "_objc_msgSend"))
	if h.Slots() != wantSlots {
		t.Fatalf("hook changed %d slots, want %d (a replayed image must not be rebound twice)", h.Slots(), wantSlots)
	}
	if err := h.Undo(); err != nil {
		t.Fatal(err)
	}
	for _, img := range []*simdyld.Image{app, lib, later} {
		for _, a := range slotsOf(t, loadedOf(img), "_objc_msgSend") {
			if loadSlot(a) == repl {
				t.Fatalf("%s: slot %#x still rebound after Undo", img.Path, a)
			}
		}
	}
	after := load(t, "objc-macos-x86_64-dylib-chained", simdyld.Options{})
	rt.watch(loadedOf(after))
	for _, a := range slotsOf(t, loadedOf(after), "_objc_msgSend") {
		if loadSlot(a) == repl {
			t.Fatal("an undone hook still rebinds new images")
		}
	}
}

type selfRuntime struct {
	*simRuntime
	self uintptr
}

func (s *selfRuntime) Self() uintptr { return s.self }

// TestLazySlotOriginalResolves: a lazy slot still at the stub helper must not be saved as the
// original (calling it would make dyld bind the slot over the hook); Original is the resolved
// function, and Undo puts the stub helper back.
func TestLazySlotOriginalResolves(t *testing.T) {
	img := load(t, "objc-macos-x86_64-exe-classic", simdyld.Options{})
	l := loadedOf(img)
	slots := slotsOf(t, l, "_objc_msgSendSuper2")
	stub := loadSlot(slots[0])
	r := NewRebinder(&simRuntime{})
	h, err := r.RebindImage(l, Rebinding{Name: "objc_msgSendSuper2", Replacement: 0x5150_0000_0200})
	if err != nil {
		t.Fatal(err)
	}
	if o, want := h.Original("objc_msgSendSuper2"), uintptr(simdyld.FakeAddress("/usr/lib/libobjc.A.dylib", "_objc_msgSendSuper2")); o != want {
		t.Fatalf("Original = %#x, want the resolved %#x (stub helper was %#x)", o, want, stub)
	}
	if err := h.Undo(); err != nil {
		t.Fatal(err)
	}
	if loadSlot(slots[0]) != stub {
		t.Fatal("Undo did not restore the stub-helper pointer")
	}
}

// TestLibraryFilter: a rebinding restricted to a library touches only imports bound to it.
func TestLibraryFilter(t *testing.T) {
	img := load(t, "objc-macos-arm64-exe-chained", simdyld.Options{})
	l := loadedOf(img)
	r := NewRebinder(&simRuntime{})
	h, err := r.RebindImage(l, Rebinding{Name: "objc_msgSend", Replacement: 0x5150_0000_0300, Library: "libSystem.B.dylib"})
	if err != nil {
		t.Fatal(err)
	}
	if h.Slots() != 0 {
		t.Fatalf("filter libSystem rebound %d objc_msgSend slots", h.Slots())
	}
	h, err = r.RebindImage(l, Rebinding{Name: "objc_msgSend", Replacement: 0x5150_0000_0300, Library: "/usr/lib/libobjc.A.dylib"})
	if err != nil {
		t.Fatal(err)
	}
	if h.Slots() == 0 {
		t.Fatal("filter libobjc rebound nothing")
	}
	h.Undo()
}

// TestAuthModifier checks the arm64e discriminator blend that signing an __auth_got slot uses.
func TestAuthModifier(t *testing.T) {
	a := AuthInfo{Key: 0, AddrDiv: true, Diversity: 0x1234}
	if got := a.Modifier(0x0000_7fff_1234_5678); got != 0x1234_7fff_1234_5678 {
		t.Fatalf("blend = %#x", got)
	}
	if got := (AuthInfo{Diversity: 0xbeef}).Modifier(0x7fff_0000_0000); got != 0xbeef {
		t.Fatalf("no address diversity: %#x", got)
	}
	if got := GOTAuth.Modifier(0xffff_0000_0000_1000); got != 0x1000 {
		t.Fatalf("GOT blend must clear the top 16 bits of the address: %#x", got)
	}
}

// TestRebindErrors: bad rebindings are refused.
func TestRebindErrors(t *testing.T) {
	r := NewRebinder(&simRuntime{})
	if _, err := r.Rebind(); err == nil {
		t.Fatal("no rebindings accepted")
	}
	if _, err := r.Rebind(Rebinding{Name: "objc_msgSend"}); err == nil {
		t.Fatal("zero replacement accepted")
	}
	if _, err := r.RebindImage(Loaded{Name: "nothing", Header: 0}, Rebinding{Name: "x", Replacement: 1}); err == nil {
		t.Fatal("image at address 0 accepted")
	}
}

// TestRebindSets: several sets rebound in one pass, each with a hook of its own that finds
// its slots, knows its originals and is undone alone; a name in two sets is refused.
func TestRebindSets(t *testing.T) {
	app := load(t, "objc-macos-arm64-exe-chained", simdyld.Options{})
	rt := &simRuntime{images: []Loaded{loadedOf(app)}}
	r := NewRebinder(rt)
	const send, super = 0x5150_0000_0100, 0x5150_0000_0200
	sendSlots := slotsOf(t, loadedOf(app), "_objc_msgSend")
	superSlots := slotsOf(t, loadedOf(app), "_objc_msgSendSuper2")
	origSend := loadSlot(sendSlots[0])
	hs, err := r.RebindSets([]Rebinding{{Name: "objc_msgSend", Replacement: send}}, nil,
		[]Rebinding{{Name: "objc_msgSendSuper2", Replacement: super}})
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) != 3 || hs[0] == nil || hs[1] != nil || hs[2] == nil {
		t.Fatalf("hooks = %v, want one for each non-empty set", hs)
	}
	for _, a := range sendSlots {
		if loadSlot(a) != send {
			t.Fatalf("objc_msgSend slot %#x not rebound", a)
		}
	}
	for _, a := range superSlots {
		if loadSlot(a) != super {
			t.Fatalf("objc_msgSendSuper2 slot %#x not rebound", a)
		}
	}
	if hs[0].Slots() != len(sendSlots) || hs[2].Slots() != len(superSlots) {
		t.Fatalf("slots %d and %d, want %d and %d", hs[0].Slots(), hs[2].Slots(), len(sendSlots), len(superSlots))
	}
	if got := hs[0].Original("objc_msgSend"); got != origSend {
		t.Fatalf("original of objc_msgSend = %#x, want %#x", got, origSend)
	}
	if hs[2].Original("objc_msgSend") != 0 || hs[2].Original("objc_msgSendSuper2") == 0 {
		t.Fatal("the second hook's originals are not its own")
	}
	if err := hs[0].Undo(); err != nil {
		t.Fatal(err)
	}
	if loadSlot(sendSlots[0]) != origSend || loadSlot(superSlots[0]) != super {
		t.Fatal("undoing one set touched the other, or did not restore its own")
	}
	if err := hs[2].Undo(); err != nil {
		t.Fatal(err)
	}
	if _, err := NewRebinder(rt).RebindSets([]Rebinding{{Name: "objc_msgSend", Replacement: send}},
		[]Rebinding{{Name: "objc_msgSend", Replacement: super}}); err == nil {
		t.Fatal("a name in two sets was accepted")
	}
}

// TestPlanCommit: PlanSets finds the slots and changes none; Commit writes them, finds those of
// an image loaded in between and leaves out one unloaded in between.
func TestPlanCommit(t *testing.T) {
	app := load(t, "objc-macos-arm64-exe-chained", simdyld.Options{})
	lib := load(t, "objc-macos-arm64-dylib-classic", simdyld.Options{})
	gone := load(t, "objc-macos-x86_64-dylib-chained", simdyld.Options{})
	rt := &simRuntime{images: []Loaded{loadedOf(app), loadedOf(gone)}}
	const repl = 0x5150_0000_0100
	appSlots, libSlots := slotsOf(t, loadedOf(app), "_objc_msgSend"), slotsOf(t, loadedOf(lib), "_objc_msgSend")
	goneSlots := slotsOf(t, loadedOf(gone), "_objc_msgSend")
	before := loadSlot(goneSlots[0])
	p, err := NewRebinder(rt).PlanSets([]Rebinding{{Name: "objc_msgSend", Replacement: repl}})
	if err != nil {
		t.Fatal(err)
	}
	if loadSlot(appSlots[0]) == repl {
		t.Fatal("the plan wrote a slot")
	}
	rt.images = []Loaded{loadedOf(app), loadedOf(lib)} // lib loaded, gone unloaded
	hs, err := p.Commit()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range append(appSlots, libSlots...) {
		if loadSlot(a) != repl {
			t.Fatalf("slot %#x not rebound", a)
		}
	}
	if loadSlot(goneSlots[0]) != before {
		t.Fatal("a slot of an image unloaded since the plan was written")
	}
	if hs[0].Slots() != len(appSlots)+len(libSlots) {
		t.Fatalf("%d slots, want %d", hs[0].Slots(), len(appSlots)+len(libSlots))
	}
	if _, err := p.Commit(); err == nil {
		t.Fatal("a plan committed twice")
	}
}
