package msgtrace

/*
#include <stdlib.h>
#include "rt_launch.h"
*/
import "C"

import (
	"runtime"
	"unsafe"

	"github.com/msgtrace/msgtrace/machobind"
)

// MainRebinding is the rebinding that marks "main" entered on the timeline, for the main
// program's image only (RebindImage). Linux: the main program's _start calls the C library's
// __libc_start_main through its GOT once every shared object's constructors ran (ours
// included); the slot is rebound to a function that hands the C library a main of ours,
// which marks "main" and calls the program's. ok is false where there is no such slot to
// rebind (Apple: dyld calls the LC_MAIN entry point itself, through no slot of the image).
func MainRebinding() (r machobind.Rebinding, ok bool) {
	if runtime.GOOS != "linux" {
		return r, false
	}
	return machobind.Rebinding{Name: "__libc_start_main", Replacement: uintptr(unsafe.Pointer(C.msgtrace___libc_start_main)),
		Publish: func(orig uintptr) {
			*(*uintptr)(unsafe.Pointer(&C.msgtrace_orig___libc_start_main)) = orig
		}}, true
}

// Mark puts an instant named name on the calling thread's timeline, now (msgtrace_mark in the
// C API). Safe from any thread at any time; a mark made before the stream starts waits for it.
func Mark(name string) {
	cs := C.CString(name)
	C.msgtrace_mark(cs)
	C.free(unsafe.Pointer(cs))
}

// InstantsLost is the number of marks dropped because the queue of marks not yet written
// was full (1024).
func InstantsLost() uint64 { return uint64(C.msgtrace_instants_lost()) }
