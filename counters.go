package msgtrace

/*
#include "rt.h"
*/
import "C"

import "fmt"

// The chunk pool's size in MiB (MSGTRACE_BUFFER_MB): its default (32) and its largest value (4096), the
// same constants the early recording reads the variable with (rt.h).
const (
	DefaultBufferMB = C.MT_DEFAULT_BUFFER_MB
	MaxBufferMB     = C.MT_MAX_BUFFER_MB
)

// Counters are the totals over every thread that made a traced call.
type Counters struct {
	Threads   uint64 // threads that registered
	Recorded  uint64 // calls recorded into chunks
	Dropped   uint64 // calls not recorded: no buffer space (MSGTRACE_FULL=drop, or no drain)
	Overflow  uint64 // calls passed through untraced because the shadow stack was full
	Waits     uint64 // times a thread waited for buffer space
	WaitTicks uint64 // ticks spent waiting
	Written   uint64 // calls the drain wrote into the stream
	LostBytes uint64 // stream bytes that could not be written (disk full, file gone)
	Chunks    uint64 // chunks made: pool memory in use is Chunks times the chunk size
	// Linux: thread states made by the rebound pthread_create before their thread started (so
	// that its first traced call costs what a later one does), those registered at their
	// thread's first traced call, and those freed unused as their thread ended (it made none)
	StatesMade, StatesRegistered, StatesUnused uint64
}

// ReadCounters returns the current totals.
func ReadCounters() Counters {
	var c C.struct_mt_counters
	C.msgtrace_counters(&c)
	return Counters{uint64(c.threads), uint64(c.recorded), uint64(c.dropped), uint64(c.overflow),
		uint64(c.waits), uint64(c.wait_ticks), uint64(c.written), uint64(c.lost_bytes), uint64(c.chunks),
		uint64(c.states_made), uint64(c.states_registered), uint64(c.states_unused)}
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

// Configure sets the shadow stack depth (calls in flight per thread) of threads that make
// their first traced call from now on, and, before the first chunk is made, the pool's cap
// and the chunk size (a power of two from 4 KiB to 16 MiB).
func Configure(stackDepth int, poolBytes uint64, chunkBytes int) error {
	if C.msgtrace_configure(C.uint32_t(stackDepth), C.uint64_t(poolBytes), C.uint32_t(chunkBytes)) != 0 {
		return fmt.Errorf("bad tracer sizes: stack depth %d, pool %d bytes, chunk %d bytes", stackDepth, poolBytes, chunkBytes)
	}
	return nil
}
