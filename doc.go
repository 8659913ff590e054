// Package msgtrace traces Objective-C message sends: assembly interposers for objc_msgSend and
// its variants (msgsend_amd64.S) record, per thread and without a call into Go or C on the hot
// path, when each method starts and ends; the C runtime (rt.c) registers threads and hands the
// records out. machobind puts the interposers into the images' pointer slots.
package msgtrace

/*
#include "rt.h"
*/
import "C"

import "fmt"

// Counters are the totals over every thread that made a traced call.
type Counters struct {
	Threads  uint64 // threads with buffers
	Recorded uint64 // calls recorded
	Dropped  uint64 // calls not recorded because the thread's buffer was full
	Overflow uint64 // calls passed through untraced because the shadow stack was full
}

// ReadCounters returns the current totals.
func ReadCounters() Counters {
	var c C.struct_mt_counters
	C.msgtrace_counters(&c)
	return Counters{uint64(c.threads), uint64(c.recorded), uint64(c.dropped), uint64(c.overflow)}
}

// SetActive turns recording on or off for every thread; off, each interposed call costs a load,
// a compare and a jump.
func SetActive(on bool) {
	v := C.uint32_t(0)
	if on {
		v = 1
	}
	C.msgtrace_active = v
}

// Configure sets the shadow stack depth (calls in flight per thread) and the record buffer
// size (calls per thread) of threads that make their first traced call from now on.
func Configure(stackDepth int, bufferRecords uint64) error {
	if stackDepth <= 0 || stackDepth > 1<<20 || bufferRecords == 0 || bufferRecords > 1<<40 {
		return fmt.Errorf("bad tracer sizes: stack depth %d, buffer %d records", stackDepth, bufferRecords)
	}
	C.msgtrace_configure(C.uint32_t(stackDepth), C.uint64_t(bufferRecords))
	return nil
}
