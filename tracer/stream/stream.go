package stream

// Stream format (version 1), what the library writes while the program runs. It replaces the
// raw dump written at exit (format v1 above) as the library's output; the raw dump stays
// readable.
//
// A stream file is a sequence of self-checking frames and nothing else. All integers are
// little-endian; "uvarint" is unsigned LEB128 and "varint" zigzag LEB128 (encoding/binary's
// Uvarint and Varint); a "string" is a uvarint length followed by that many UTF-8 bytes.
//
//	frame   magic "MTSF", kind u8, reserved u8 (0), reserved u16 (0), payload length u32
//	        (at most 16 MiB), CRC-32C (Castagnoli) u32 of header bytes 4..11 followed by the
//	        payload; then the payload.
//
// A reader that meets a frame whose magic, length or checksum is wrong counts it and resyncs
// at the next offset where a frame checks. A frame that runs past the end of the file is a
// torn tail (the writer was killed mid-write, or is still writing): everything before it is
// read. (Reader note: if a frame that checks follows it, its length was damaged instead: it is
// a bad frame, skipped.)
//
// Frame kinds and payloads:
//
//	process (1)  version u32 (1), reserved u32, pid u64, ppid u64, program path string,
//	             program name string, arch string ("amd64", "arm64"), os string ("linux",
//	             "darwin", "ios"), mode uvarint (0 stream, 1 ring snapshot). First frame.
//	clock   (2)  tick u64, monotonic ns u64 (CLOCK_MONOTONIC: one timeline for every process
//	             of the machine), wall ns u64 (CLOCK_REALTIME), rate num u64, rate den u64
//	             (ns = ticks * num / den as the process knows it; 0, 0 when unknown). Written
//	             after the process frame, at least every second while events are written, and
//	             at close. Ticks convert to monotonic ns piecewise-linearly between clock frames,
//	             extrapolated with the nearest pair's slope (or the rate) outside them.
//	methods (3)  entries to the end of the payload: id uvarint (1 or more), flags uvarint (1:
//	             class method "+", 2: reached through a super send, 4: tagged-pointer
//	             receiver), class name string, selector name string. Always written before the
//	             first events or open frame that uses the id.
//	thread  (4)  tid u64, flags uvarint (1: main thread, 2: exited), name string. Written when
//	             a thread is first met, when its name changes, and when it exits.
//	events  (5)  tid u64, previous end tick u64, then events to the end of the payload, in
//	             the order they ended on the thread (a call after every call nested in it):
//	               code uvarint: low 2 bits the type, the rest the method id or mark kind
//	               type 0, a call:            end delta varint, duration uvarint, depth uvarint
//	               type 1, a call unwound:    same; an exception, a longjmp or the thread's
//	                                          exit went past it: it ended without returning
//	               type 2, a mark:            end delta varint, duration uvarint, count uvarint
//	               type 3, a wait:            end delta varint, duration uvarint, depth uvarint,
//	                                          address uvarint, holder uvarint; the code's rest is
//	                                          the primitive (WaitPrimitive: 1 pthread_mutex_lock
//	                                          ... 12 dispatch_group_wait)
//	             end delta is the event's end tick minus the previous event's (the header's for
//	             the first); duration is end minus start in ticks; depth is the call's nesting on
//	             the thread's shadow stack (0 outermost). Mark kinds: 1 lost (count calls were
//	             not recorded: no buffer space under MSGTRACE_FULL=drop; the mark spans the time
//	             they were lost), 2 wait (the thread waited duration ticks for buffer space;
//	             count 0), 3 overflow (count calls nested deeper than the shadow stack went
//	             untraced), 4 overwritten (ring mode: count calls of this thread were overwritten
//	             before the snapshot; the mark spans them), 5 release (the thread released a
//	             primitive others waited on: an unlock, signal or post; count is its address,
//	             duration 0); an async hop's (count is its id,
//	             unique in the process; duration 0): 10 enqueued (work handed to another thread
//	             or to later, inside the call that enqueued it), 11 begins (its work item
//	             starts to run on this thread), 12 ends (it returned; a run without an end lasts
//	             to the end of the trace). A hop may run more than once (a repeating timer).
//	             The reader makes them Header.Hops, and hands no sink these marks.
//	             A wait (the recorder's waits.c) is a contended wait: the thread
//	             blocked duration ticks in the primitive at address, nested at depth under the
//	             call open at depth-1 (the order and depth rules of a call); holder is the thread
//	             id (as thread frames name threads) the primitive named as its owner when the
//	             wait began, 0 when it names none. Readers before waits fail an events frame with
//	             a wait in it (a malformed frame, skipped) and show a release as an unknown mark.
//	open    (6)  tid u64, tick u64 (when taken), then the calls open on the thread at that tick,
//	             outermost first: id uvarint, age uvarint (tick minus the call's start tick),
//	             depth uvarint. The latest open frame of a thread (the one with the greatest
//	             tick) is what it had open then; at the end of the trace, each of its calls that
//	             no later call record matches (same start tick and depth) was still running: it
//	             is shown from its start to the end of the trace with FlagOpen. A call record at
//	             the same depth or shallower that ends after the open frame's tick also closes
//	             it (it returned before that call could end), which covers an open call whose
//	             own record was lost. The end of the trace is the latest tick of the process's
//	             stream: an event's end, an open or a clock frame's tick.
//	end     (7)  counters, uvarints: calls recorded, calls lost, calls past the shadow stack,
//	             waits, ticks waited, bytes that could not be written. Last frame of a stream
//	             closed cleanly; a stream without it ended with its process (a kill, a crash)
//	             or is still being written.
//	instant (8)  tid u64 (0: process-wide), clock u8 (0 ticks, as events; 1 CLOCK_MONOTONIC
//	             ns, as clock frames), time u64, kind uvarint, precision uvarint (ns: the
//	             moment lies between time minus precision and time; 0 as exact as the clock),
//	             name string. A moment on the timeline that is not a call. Kinds: 0 a mark the
//	             app set (msgtrace_mark; on its thread), 1 process start (the kernel's record
//	             of the process, process-wide), 2 library loaded (the tracer's constructor
//	             ran), 3 first call (not written by the library: the reader derives it from
//	             the earliest call of a stream that has launch instants), 4 main entered, 5
//	             crash (a signal arrived while the thread ran the tracer's own code: the
//	             interposer, a trampoline, the recorder or the drain; on that thread, named
//	             "SIGSEGV in FRAME" with the receiver and selector being sent when known).
//	             Written in the order they were queued (threads read the clock, then queue:
//	             not quite time order across threads), anywhere after the process frame; those
//	             made before the stream started are written with its first frames.
//	cpu     (9)  tick u64 (when the counters were read), then to the end of the payload one
//	             entry per thread: tid uvarint, known uvarint (bits: 1 ns run on a CPU, 2 ns
//	             waited runnable on a run queue, 4 timeslices), then a uvarint for each bit set,
//	             in bit order (a bit a reader does not know is one more uvarint, skipped). The
//	             counters are the thread's totals since it started (Linux: its schedstat, all
//	             three, or its CPU clock, the first only; Apple: thread_info, the first only).
//	             Written by the drain every 10 ms or more (MSGTRACE_CPU=0: never) for the
//	             recording threads whose counters changed since their last entry: a thread
//	             absent from a frame had then the counters of its previous entry.
//go:generate go run ../../internal/streamspec/gen -root ../..

// The numbers (frame kinds, event types, mark kinds, flags, modes, framing) are generated from
// internal/streamspec into stream_format.go here and stream_format.h for the C encoder.

// FlagOpen marks a call that was still running when the trace ended (a hang, a kill, or a
// call in flight at exit): its duration runs to the end of the trace. A flag the reader sets
// on a call (with FlagSuper, FlagTagged, FlagUnwound), not a number of the stream.
const FlagOpen = 8

// Mark is something on a thread's timeline that is not a call: calls lost, or time the
// thread spent waiting for the tracer. Sinks show it where and when it happened.
type Mark struct {
	Kind       MarkKind
	StartNanos uint64 // since the trace's base tick
	DurNanos   uint64
	Count      uint64 // calls lost, overflowed or overwritten; 0 for a wait
	Thread     *Thread
}

func (k InstantKind) String() string {
	switch k {
	case InstantApp:
		return "mark"
	case InstantProcessStart:
		return "process start"
	case InstantLoaded:
		return "library loaded"
	case InstantFirstCall:
		return "first call"
	case InstantMain:
		return "main"
	case InstantCrash:
		return "crash"
	}
	return "instant"
}

// Launch reports whether the kind is one of the launch marks (all but the app's and a crash).
func (k InstantKind) Launch() bool { return k != InstantApp && k != InstantCrash }

// Instant is a moment on the timeline that is not a call: a launch mark, a mark the app set, or
// a crash in the tracer's own code.
// Sinks get a process's instants with its Header (in time order).
type Instant struct {
	Kind           InstantKind
	Name           string
	Nanos          uint64 // since the trace's base tick
	PrecisionNanos uint64 // the moment lies in [Nanos-PrecisionNanos, Nanos]
	TID            uint64 // the thread it was set on; 0: process-wide
}
