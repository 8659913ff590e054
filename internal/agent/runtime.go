package agent

import (
	"errors"

	"github.com/msgtrace/msgtrace/machobind"
)

// wholeProcess is a Runtime that exempts no image from rebinding. It is used when the library
// is part of the main program (the static archive linked into a test host): there "its own
// image" is the host, whose sends are the ones to trace. Rebinding the shared image is safe:
// the library's code imports no objc_msgSend (scripts/cross-check.sh verifies each artifact),
// and the interposers reach the originals through their own variables, never a slot.
type wholeProcess struct{ machobind.Runtime }

// Self returns 0, a header no image has.
func (wholeProcess) Self() uintptr { return 0 }

// Mappings passes the runtime's own on (machobind.MappingLister: one reading of the process's
// mappings per rebinding); without one, the error makes the rebinder ask page by page.
func (w wholeProcess) Mappings() ([]machobind.Mapping, error) {
	if ml, ok := w.Runtime.(machobind.MappingLister); ok {
		return ml.Mappings()
	}
	return nil, errors.New("no mappings list")
}

// ProbesPages passes the runtime's own on (machobind.PageProber: Protection asks about one
// page without reading every mapping).
func (w wholeProcess) ProbesPages() bool {
	pp, ok := w.Runtime.(machobind.PageProber)
	return ok && pp.ProbesPages()
}

// scope returns rt itself when the library is an image of its own (preloaded or injected), and
// rt with nothing exempt when the library's code lives in the main program. The main program
// is the first image both dyld and dl_iterate_phdr report.
func scope(rt machobind.Runtime) machobind.Runtime {
	imgs, err := rt.Images()
	if err != nil || len(imgs) == 0 || imgs[0].Header != rt.Self() {
		return rt
	}
	return wholeProcess{rt}
}
