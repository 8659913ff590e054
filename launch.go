package msgtrace

/*
#include <stdlib.h>
#include "rt_launch.h"
*/
import "C"

import "unsafe"

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
