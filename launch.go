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

// earlyConfig is what the early recording's C reads of the variables
// (msgtrace_launch_early_config): whether recording may start before the Go side (record), and
// what it then sizes and sets; methodsAll whatever record is.
func earlyConfig() (record, methodsAll, ring, drop bool, bufferMB int) {
	var c C.struct_mt_early_config
	record = C.msgtrace_launch_early_config(&c) != 0
	return record, c.methods_all != 0, c.ring != 0, c.drop != 0, int(c.buffer_mb)
}
