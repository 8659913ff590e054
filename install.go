package msgtrace

/*
#include "rt.h"
*/
import "C"

import (
	"errors"
	"runtime"
	"unsafe"

	"github.com/msgtrace/msgtrace/machobind"
)

// variant is one runtime entry point: its symbol, the interposer that replaces it, and the C
// variable the interposer forwards through.
type variant struct {
	name       string
	interposer unsafe.Pointer
	orig       *unsafe.Pointer
}

// variants lists the entry points interposed on this architecture.
func variants() []variant {
	vs := []variant{
		{"objc_msgSend", C.msgtrace_objc_msgSend, (*unsafe.Pointer)(unsafe.Pointer(&C.msgtrace_orig_objc_msgSend))},
		{"objc_msgSendSuper2", C.msgtrace_objc_msgSendSuper2, (*unsafe.Pointer)(unsafe.Pointer(&C.msgtrace_orig_objc_msgSendSuper2))},
	}
	if runtime.GOARCH == "amd64" {
		vs = append(vs,
			variant{"objc_msgSend_stret", C.msgtrace_objc_msgSend_stret, (*unsafe.Pointer)(unsafe.Pointer(&C.msgtrace_orig_objc_msgSend_stret))},
			variant{"objc_msgSend_fpret", C.msgtrace_objc_msgSend_fpret, (*unsafe.Pointer)(unsafe.Pointer(&C.msgtrace_orig_objc_msgSend_fpret))},
			variant{"objc_msgSend_fp2ret", C.msgtrace_objc_msgSend_fp2ret, (*unsafe.Pointer)(unsafe.Pointer(&C.msgtrace_orig_objc_msgSend_fp2ret))},
			variant{"objc_msgSendSuper2_stret", C.msgtrace_objc_msgSendSuper2_stret, (*unsafe.Pointer)(unsafe.Pointer(&C.msgtrace_orig_objc_msgSendSuper2_stret))},
		)
	}
	return vs
}

// Install rebinds objc_msgSend and its variants to the interposers in every image the
// Rebinder's runtime reports (and those loaded later: dyld reports them on darwin; on Linux
// dlopen is rebound too, and reports what it loaded when it returns). Each original is handed
// to its interposer before any slot points at it, and the class and tagged-pointer masks are
// read from the Objective-C runtime first (see Masks). Recording starts with SetActive(true).
func Install(r *machobind.Rebinder) (*machobind.Hook, error) { return InstallCapture(r, true) }

// InstallCapture is Install, leaving objc_msgSend and its variants alone when sends is false
// (MSGTRACE_CAPTURE=methods): only the platform's own rebindings (Linux: dlopen, _exit) are made.
func InstallCapture(r *machobind.Rebinder, sends bool) (*machobind.Hook, error) {
	h, _, err := InstallCaptureAnd(r, sends)
	return h, err
}

// InstallCaptureAnd is InstallCapture making more sets of rebindings (say ModuleRebindings')
// in the same pass over the images (machobind's RebindSets: each image's relocations walked
// once, the process's mappings read once), each set with its hook (nil for an empty set).
func InstallCaptureAnd(r *machobind.Rebinder, sends bool, more ...[]machobind.Rebinding) (*machobind.Hook, []*machobind.Hook, error) {
	p, err := PlanCapture(r, sends, more...)
	if err != nil {
		return nil, nil, err
	}
	return p.Commit()
}

// CapturePlan is InstallCaptureAnd in two steps (machobind.Plan): PlanCapture finds the slots
// and hands each original to its interposer, changing nothing the program sees; Commit reads
// the masks and writes the slots.
type CapturePlan struct{ p *machobind.Plan }

// PlanCapture is the first step of InstallCaptureAnd (see CapturePlan).
func PlanCapture(r *machobind.Rebinder, sends bool, more ...[]machobind.Rebinding) (*CapturePlan, error) {
	var rs []machobind.Rebinding
	for _, v := range variants() {
		if !sends {
			break
		}
		v := v
		rs = append(rs, machobind.Rebinding{
			Name:        v.name,
			Replacement: uintptr(v.interposer),
			Publish:     func(orig uintptr) { *v.orig = *(*unsafe.Pointer)(unsafe.Pointer(&orig)) },
		})
	}
	rs = append(append(rs, platformRebindings()...), WaitRebindings()...) // waits.go: unless SetWaits(false)
	p, err := r.PlanSets(append([][]machobind.Rebinding{rs}, more...)...)
	if err != nil {
		return nil, err
	}
	return &CapturePlan{p}, nil
}

// Commit is the second step of InstallCaptureAnd: the capture's hook, then those of the other
// sets.
func (c *CapturePlan) Commit() (*machobind.Hook, []*machobind.Hook, error) {
	applyRuntimeMasks(runtimeSymbol)
	hs, err := c.p.Commit()
	if err != nil {
		return nil, nil, err
	}
	if hs[0] == nil { // nothing to rebind here (darwin, methods only): as Rebind, an error
		return nil, nil, errors.New("no rebindings given")
	}
	return hs[0], hs[1:], nil
}

// SendNames lists the entry points the interposers replace on this architecture
// (objc_msgSend and its variants).
func SendNames() []string {
	var ns []string
	for _, v := range variants() {
		ns = append(ns, v.name)
	}
	return ns
}

// ParkNames lists the rebindings a long pause gives their originals back: the sends' and the
// waits' (paused, each only forwards). dlopen, _exit and the signal calls stay bound: they keep
// the library itself working.
func ParkNames() []string {
	ns := SendNames()
	for _, r := range WaitRebindings() {
		ns = append(ns, r.Name)
	}
	return ns
}

// interposerOf and originalOf expose the tables to the tests.
func interposerOf(name string) uintptr {
	for _, v := range variants() {
		if v.name == name {
			return uintptr(v.interposer)
		}
	}
	return 0
}

func originalOf(name string) uintptr {
	for _, v := range variants() {
		if v.name == name {
			return uintptr(*v.orig)
		}
	}
	return 0
}
