//go:build linux

package machobind

import (
	"strings"
	"testing"

	"github.com/msgtrace/msgtrace/internal/simdyld"
)

// TestParkNamedAndLater parks one of two rebindings: its slots get the original, the other's
// keep their replacement; an image loaded while parked gets the original and the replacement at
// Unpark; a slot something else rebinds while parked is left alone and reported; Undo after a
// Park puts back what every slot held before the hook.
func TestParkNamedAndLater(t *testing.T) {
	app := load(t, "objc-macos-arm64-exe-chained", simdyld.Options{})
	lib := load(t, "objc-macos-arm64-dylib-classic", simdyld.Options{})
	later := load(t, "objc-ios-arm64-bundle-chained", simdyld.Options{})
	rt := &simRuntime{images: []Loaded{loadedOf(app), loadedOf(lib)}}
	r := NewRebinder(rt)
	const send, alloc = 0x5150_0000_0100, 0x5150_0000_0200
	before := map[uintptr]uintptr{}
	for _, img := range []*simdyld.Image{app, lib, later} {
		for _, sym := range []string{"_objc_msgSend", "_objc_msgSendSuper2"} {
			for _, a := range slotsOf(t, loadedOf(img), sym) {
				before[a] = loadSlot(a)
			}
		}
	}
	h, err := r.Rebind(Rebinding{Name: "objc_msgSend", Replacement: send}, Rebinding{Name: "objc_msgSendSuper2", Replacement: alloc})
	if err != nil {
		t.Fatal(err)
	}
	orig := h.Original("objc_msgSend")
	sends := func(imgs ...*simdyld.Image) (as []uintptr) {
		for _, img := range imgs {
			as = append(as, slotsOf(t, loadedOf(img), "_objc_msgSend")...)
		}
		return as
	}
	allocs := append(slotsOf(t, loadedOf(app), "_objc_msgSendSuper2"), slotsOf(t, loadedOf(lib), "_objc_msgSendSuper2")...)
	if len(sends(app, lib)) == 0 || len(sends(later)) == 0 || len(allocs) == 0 || orig == 0 {
		t.Fatalf("fixtures: %d send slots, %d later, %d alloc slots, original %#x", len(sends(app, lib)), len(sends(later)), len(allocs), orig)
	}
	expect := func(when string, as []uintptr, want uintptr) {
		t.Helper()
		for _, a := range as {
			if got := loadSlot(a); got != want {
				t.Fatalf("%s: slot %#x holds %#x, want %#x", when, a, got, want)
			}
		}
	}
	n, err := h.Park("objc_msgSend", "not_rebound_here")
	if err != nil || n != len(sends(app, lib)) {
		t.Fatalf("Park: %d slots, want %d: %v", n, len(sends(app, lib)), err)
	}
	expect("parked", sends(app, lib), orig)
	expect("parked, the other name", allocs, alloc)
	rt.watch(loadedOf(later)) // loaded while parked
	expect("loaded while parked", sends(later), orig)
	// something else (a second interposer) rebinds one slot while parked
	other := sends(lib)[0] // a lazy slot, in a writable page
	storeSlot(other, 0x7777_0000)
	n, err = h.Unpark()
	if err == nil || !strings.Contains(err.Error(), "changed while parked") || n != len(sends(app, lib, later))-1 {
		t.Fatalf("Unpark: %d slots, err %v; want %d and the changed slot reported", n, err, len(sends(app, lib, later))-1)
	}
	if loadSlot(other) != 0x7777_0000 {
		t.Fatal("Unpark wrote over a slot changed while parked")
	}
	for _, a := range sends(app, lib, later) {
		if a != other {
			expect("unparked", []uintptr{a}, send)
		}
	}
	storeSlot(other, send) // the replacement again: the hook's slot once more
	allocs = append(allocs, slotsOf(t, loadedOf(later), "_objc_msgSendSuper2")...)
	if n, err := h.Park(); err != nil || n != len(sends(app, lib, later))+len(allocs) {
		t.Fatalf("Park of every name: %d slots: %v", n, err)
	}
	expect("parked again", sends(app, lib, later), orig)
	expect("parked again, the other name", allocs, h.Original("objc_msgSendSuper2"))
	if err := h.Undo(); err != nil {
		t.Fatalf("Undo while parked: %v", err)
	}
	for a, v := range before {
		if loadSlot(a) != v {
			t.Fatalf("after Undo slot %#x holds %#x, want %#x as before the hook", a, loadSlot(a), v)
		}
	}
	if _, err := h.Park(); err == nil {
		t.Fatal("Park of an undone hook succeeded")
	}
}
