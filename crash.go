package msgtrace

/*
#include "drain_signals.h"
*/
import "C"

import "runtime"

// markGoText tells the crash handler (drain_crash.c) where the Go runtime's code is in the
// library: a fault there is Go's to turn into a panic, not a crash of the tracer's C or
// assembly to report. The bounds are where runtime.FuncForPC starts and stops knowing a
// function, searched between the library's text bounds (Go's code is one range in it).
func markGoText() {
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
