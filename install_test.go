//go:build linux

package msgtrace

import (
	"path/filepath"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/msgtrace/msgtrace/internal/simdyld"
	"github.com/msgtrace/msgtrace/internal/testfiles"
	"github.com/msgtrace/msgtrace/machobind"
)

// simRuntime is a machobind.Runtime over images mapped by the simulated dyld.
type simRuntime struct {
	machobind.ProcVM
	images []machobind.Loaded
}

func (rt *simRuntime) Images() ([]machobind.Loaded, error)                      { return rt.images, nil }
func (rt *simRuntime) Self() uintptr                                            { return 0 }
func (rt *simRuntime) WatchImages(func(machobind.Loaded)) error                 { return nil }
func (rt *simRuntime) Strip(p uintptr) uintptr                                  { return p }
func (rt *simRuntime) Sign(p, _ uintptr, _ machobind.AuthInfo) (uintptr, error) { return p, nil }
func (rt *simRuntime) Resolve(sym, lib string) (uintptr, error) {
	return uintptr(simdyld.FakeAddress(lib, sym)), nil
}

func slot(addr uintptr) uintptr {
	return atomic.LoadUintptr(*(**uintptr)(unsafe.Pointer(&addr)))
}

// TestInstall rebinds an Objective-C executable mapped by the simulated dyld: every
// objc_msgSend-family slot points at its interposer, each interposer's original is the
// address dyld bound (or, for a lazy slot still at the stub helper, the resolved function),
// and Undo restores the image.
func TestInstall(t *testing.T) {
	file := filepath.Join(testfiles.Root(t), "testdata", "fixtures", "objc-macos-x86_64-exe-classic")
	img, err := simdyld.Load(file, simdyld.Options{})
	if err != nil {
		t.Fatalf("%v (run `make fixtures`)", err)
	}
	defer img.Close()
	l := machobind.Loaded{Name: file, Header: img.Header, Slide: img.Slide}
	parsed, err := machobind.ParseLoaded(l)
	if err != nil {
		t.Fatal(err)
	}
	slots, err := parsed.Slots()
	if err != nil {
		t.Fatal(err)
	}
	r := machobind.NewRebinder(&simRuntime{images: []machobind.Loaded{l}})
	h, err := Install(r)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, s := range slots {
		name := s.Symbol[min(1, len(s.Symbol)):]
		if interposerOf(name) == 0 {
			continue
		}
		seen[name] = true
		if got := slot(l.Slide + uintptr(s.Addr)); got != interposerOf(name) {
			t.Errorf("%s slot %#x holds %#x, want the interposer %#x", s.Symbol, s.Addr, got, interposerOf(name))
		}
		if want := uintptr(simdyld.FakeAddress(s.Library, s.Symbol)); originalOf(name) != want || h.Original(name) != want {
			t.Errorf("%s: interposer forwards to %#x (hook says %#x), want %#x", name, originalOf(name), h.Original(name), want)
		}
	}
	if !seen["objc_msgSend"] || !seen["objc_msgSendSuper2"] {
		t.Fatalf("fixture lacks objc_msgSend / objc_msgSendSuper2 slots: %v", seen)
	}
	if err := h.Undo(); err != nil {
		t.Fatal(err)
	}
	for _, s := range slots {
		if name := s.Symbol[min(1, len(s.Symbol)):]; interposerOf(name) != 0 && slot(l.Slide+uintptr(s.Addr)) == interposerOf(name) {
			t.Errorf("%s still points at the interposer after Undo", s.Symbol)
		}
	}
}
