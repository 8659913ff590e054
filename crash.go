package msgtrace

/*
#include "drain_signals.h"
#include "rt.h"
#include "trampoline.h"
*/
import "C"

import (
	"runtime"
	"unsafe"
)

// markGoText tells the crash handler (drain_crash_where.c) where the method trampolines are, and
// where the Go runtime's code is in the library: a fault there is Go's to turn into a panic, not a crash of the tracer's C or
// assembly to report. The bounds are where runtime.FuncForPC starts and stops knowing a
// function, searched between the library's text bounds (Go's code is one range in it).
func markGoText() {
	C.msgtrace_crash_trampolines(unsafe.Pointer(&C.msgtrace_tramp_text), unsafe.Pointer(&C.msgtrace_tramp_data))
	var lo, hi C.uint64_t
	if C.msgtrace_crash_text(&lo, &hi) == 0 {
		return
	}
	pc, _, _, ok := runtime.Caller(0)
	if !ok || uint64(pc) < uint64(lo) || uint64(pc) >= uint64(hi) {
		return
	}
	known := func(p uintptr) bool { return runtime.FuncForPC(p) != nil }
	// the first address Go knows, in [lo, pc]
	a, b := uintptr(lo), pc
	for a < b {
		m := a + (b-a)/2
		if known(m) {
			b = m
		} else {
			a = m + 1
		}
	}
	start := a
	// the first address past pc it does not know, in (pc, hi]
	a, b = pc+1, uintptr(hi)
	for a < b {
		m := a + (b-a)/2
		if known(m) {
			a = m + 1
		} else {
			b = m
		}
	}
	C.msgtrace_crash_go_text(C.uint64_t(start), C.uint64_t(a))
}

// crashWhere is msgtrace_crash_where, for the tests: what the crash handler makes of the code
// at pc, and the frame it names.
func crashWhere(pc uintptr) (int, string) {
	var buf [160]C.char
	w := C.msgtrace_crash_where(C.uint64_t(pc), &buf[0], C.size_t(len(buf)))
	return int(w), C.GoString(&buf[0])
}

// crashProbes are code addresses of the library, for the tests: its C, interposers, the
// method trampolines.
func crashProbes() map[string]uintptr {
	return map[string]uintptr{
		"msgtrace_now_ticks":    uintptr(unsafe.Pointer(C.msgtrace_now_ticks)),
		"msgtrace_objc_msgSend": uintptr(unsafe.Pointer(C.msgtrace_objc_msgSend)),
		"msgtrace_method_entry": uintptr(unsafe.Pointer(C.msgtrace_method_entry)),
		"msgtrace_tramp_text":   uintptr(unsafe.Pointer(&C.msgtrace_tramp_text)),
	}
}
