// Package streamspec is the one definition of the stream format's numbers: frame kinds, event
// types, mark kinds, method and thread flags, the process frame's modes, the bit layout of an
// event's code and the frame header's fields. The format's prose (payload layouts) is the
// comment of tracer/stream/stream.go; the numbers are the tables below, and nowhere else.
//
// `go generate ./tracer/stream` (gen/main.go) writes them out twice:
//
//	tracer/stream/stream_format.go  Go constants for the reader and the reference writer
//	                                (FrameProcess, EventCall, MarkLost, MethodClass, ...)
//	stream_format.h                 C macros for the recorder's encoder (MT_FRAME_PROCESS,
//	                                MT_EVENT_CALL, MT_MARK_LOST, MT_METHOD_CLASS, ...)
//
// and TestGeneratedFilesCurrent fails when either file is not what the tables generate now.
//
// Adding a value is one entry: a frame kind is a Value in FrameKinds ({"Instant", 8, "..."}),
// which becomes FrameInstant in Go and MT_FRAME_INSTANT in C. (Its payload is then written by
// a function of the C encoder, encode.c, and one of tracer.StreamWriter, and read by
// tracer's reader.)
package streamspec

// Value is one named number of a group.
type Value struct {
	Name string // CamelCase: Go name = group prefix + Name, C name = MT_ + PREFIX + NAME
	N    uint64
	Doc  string
}

// Group is one field of the format and the values it takes.
type Group struct {
	Doc      string // what the field is (comment above the constants)
	GoPrefix string // "Frame" -> FrameProcess
	CPrefix  string // "FRAME" -> MT_FRAME_PROCESS
	GoType   string // "" for untyped constants; otherwise a named type of int declared with them
	Stringer bool   // GoType gets a String method: the lower-case value names
	Values   []Value
}

// Scalar is one number (or string) of the format's framing.
type Scalar struct {
	GoName string // "" = C only; lower case = unexported in Go
	CName  string // "" = Go only (without the MT_ prefix)
	N      uint64
	Str    string // a string constant instead of N when not ""
	Expr   string // how N is spelled ("16 << 20", "0x82f63b78"): valid Go and C
	Doc    string // a verb phrase: "Name " + Doc is the Go doc comment
}

// FrameKinds are the kinds of frame (the header's kind byte).
var FrameKinds = Group{
	Doc:      "Frame kinds (the kind byte of a frame's header; payloads in the format's comment).",
	GoPrefix: "Frame", CPrefix: "FRAME",
	Values: []Value{
		{"Process", 1, "who wrote the stream; first frame"},
		{"Clock", 2, "a tick and the clocks read with it"},
		{"Methods", 3, "method ids named"},
		{"Thread", 4, "a thread's id, flags and name"},
		{"Events", 5, "calls and marks of one thread, in the order they ended"},
		{"Open", 6, "the calls open on a thread at a tick"},
		{"End", 7, "counters; last frame of a stream closed cleanly"},
		{"Instant", 8, "a moment on the timeline that is not a call: a launch mark, the app's, a crash in the tracer"},
		{"CPU", 9, "per-thread CPU time sampled by the drain: time run, time runnable, timeslices"},
	},
}

// EventTypes are the low EventTypeBits bits of an event's code.
var EventTypes = Group{
	Doc:      "Event types in an events frame (the low bits of an event's code; the rest is the method id or mark kind).",
	GoPrefix: "Event", CPrefix: "EVENT",
	Values: []Value{
		{"Call", 0, "a call: end delta, duration, depth"},
		{"Unwound", 1, "a call an exception, a longjmp or the thread's exit went past: same fields"},
		{"Mark", 2, "a mark: end delta, duration, count"},
		{"Wait", 3, "a contended wait (the rest of the code is its primitive): end delta, duration, depth, address, holder"},
	},
}

// MarkKinds are what a mark event says.
var MarkKinds = Group{
	Doc:      "Mark kinds, as numbered in the stream format (a mark event's code above its type).",
	GoPrefix: "Mark", CPrefix: "MARK", GoType: "MarkKind", Stringer: true,
	Values: []Value{
		{"Lost", 1, "calls not recorded: no buffer space (MSGTRACE_FULL=drop)"},
		{"Wait", 2, "the thread waited for buffer space"},
		{"Overflow", 3, "calls nested deeper than the shadow stack, untraced"},
		{"Overwritten", 4, "ring mode: calls overwritten before the snapshot"},
		{"Release", 5, "the thread released a primitive others waited on (unlock, signal, post): count is its address"},
		{"HopEnqueue", 10, "work handed to another thread or for later (count: the hop's id), where it was enqueued"},
		{"HopBegin", 11, "the hop's work item starts to run on this thread (count: the hop's id)"},
		{"HopEnd", 12, "the hop's work item returned (count: the hop's id)"},
	},
}

// MethodFlags are the bits of a methods frame entry's flags.
var MethodFlags = Group{
	Doc:      "Method flags in a methods frame (bits).",
	GoPrefix: "Method", CPrefix: "METHOD",
	Values: []Value{
		{"Class", 1, "class method: +[Class sel]"},
		{"Super", 2, "reached through a super send"},
		{"Tagged", 4, "tagged-pointer receiver"},
	},
}

// ThreadFlags are the bits of a thread frame's flags.
var ThreadFlags = Group{
	Doc:      "Thread flags in a thread frame (bits).",
	GoPrefix: "Thread", CPrefix: "THREAD",
	Values: []Value{
		{"Main", 1, "the process's main thread"},
		{"Exited", 2, "the thread exited"},
	},
}

// ProcessModes are the process frame's mode.
var ProcessModes = Group{
	Doc:      "Process frame modes: how the stream was written.",
	GoPrefix: "Mode", CPrefix: "MODE",
	Values: []Value{
		{"Stream", 0, "written as the program ran"},
		{"Ring", 1, "a ring-mode snapshot (the flight recorder's dump)"},
	},
}

// InstantKinds are what an instant frame marks.
var InstantKinds = Group{
	Doc:      "Instant kinds, as numbered in the stream format (an instant frame's kind).",
	GoPrefix: "Instant", CPrefix: "INSTANT", GoType: "InstantKind",
	Values: []Value{
		{"App", 0, "a mark the app set (msgtrace_mark)"},
		{"ProcessStart", 1, "the process started (the kernel's record)"},
		{"Loaded", 2, "the tracer's library was loaded (its constructor ran)"},
		{"FirstCall", 3, "the first recorded call started (derived by the reader, never written)"},
		{"Main", 4, "main was entered"},
		{"Crash", 5, "a signal arrived while the faulting thread ran the tracer's own code (on that thread)"},
	},
}

// InstantClocks are the clock an instant frame's time is read on.
var InstantClocks = Group{
	Doc:      "Instant clocks, as numbered in the stream format (an instant frame's clock byte).",
	GoPrefix: "InstantClock", CPrefix: "CLOCK",
	Values: []Value{
		{"Ticks", 0, "the time is in ticks, as events"},
		{"Monotonic", 1, "the time is CLOCK_MONOTONIC ns, as clock frames"},
	},
}

// CPUFields are the bits of a cpu frame entry's known field: which counters follow, in this order.
var CPUFields = Group{
	Doc:      "CPU fields in a cpu frame entry (bits: which counters the entry carries, in this order).",
	GoPrefix: "CPU", CPrefix: "CPU",
	Values: []Value{
		{"Running", 1, "ns the thread ran on a CPU"},
		{"Runnable", 2, "ns the thread waited runnable on a run queue"},
		{"Slices", 4, "timeslices the thread ran"},
	},
}

// WaitPrimitives are what a wait event waited in (its code above its type): the function that
// blocked. Numbers 1-12 are the first set; a reader names one it does not know by its number.
var WaitPrimitives = Group{
	Doc:      "Wait primitives, as numbered in the stream format (a wait event's code above its type).",
	GoPrefix: "Wait", CPrefix: "WAIT", GoType: "WaitPrimitive",
	Values: []Value{
		{"MutexLock", 1, "pthread_mutex_lock"},
		{"RwlockRdlock", 2, "pthread_rwlock_rdlock"},
		{"RwlockWrlock", 3, "pthread_rwlock_wrlock"},
		{"CondWait", 4, "pthread_cond_wait"},
		{"CondTimedwait", 5, "pthread_cond_timedwait"},
		{"SemWait", 6, "sem_wait"},
		{"SemTimedwait", 7, "sem_timedwait"},
		{"SyncEnter", 8, "objc_sync_enter (@synchronized): the lock inside it, the address the object's"},
		{"UnfairLock", 9, "os_unfair_lock_lock (Apple)"},
		{"DispatchSync", 10, "dispatch_sync, dispatch_sync_f (Apple): from the call to the block's start"},
		{"DispatchSemaphore", 11, "dispatch_semaphore_wait (Apple)"},
		{"DispatchGroup", 12, "dispatch_group_wait (Apple)"},
	},
}

// Groups is every group, in the order they are generated.
var Groups = []*Group{&FrameKinds, &EventTypes, &MarkKinds, &MethodFlags, &ThreadFlags, &ProcessModes, &InstantKinds, &InstantClocks, &CPUFields, &WaitPrimitives}

// Scalars are the framing's numbers.
var Scalars = []Scalar{
	{GoName: "StreamMagic", CName: "STREAM_MAGIC", Str: "MTSF", Doc: "is the first 4 bytes of every frame"},
	{GoName: "StreamVersion", CName: "STREAM_VERSION", N: 1, Doc: "is the process frame's version"},
	{GoName: "MaxFramePayload", CName: "MAX_FRAME_PAYLOAD", N: 16 << 20, Expr: "16 << 20", Doc: "bounds a frame's payload"},
	{GoName: "FrameHeader", CName: "FRAME_HEADER", N: 16, Doc: "is the size of a frame's header: magic, kind, reserved, length, checksum"},
	{GoName: "FrameKindAt", CName: "FRAME_KIND_AT", N: 4, Doc: "is the header offset of the kind byte (then a reserved byte and a reserved u16, 0)"},
	{GoName: "FrameLenAt", CName: "FRAME_LEN_AT", N: 8, Doc: "is the header offset of the payload length (u32)"},
	{GoName: "FrameCRCAt", CName: "FRAME_CRC_AT", N: 12, Doc: "is the header offset of the CRC-32C (u32) of the header from the kind byte up to here, then the payload"},
	{CName: "CRC32C_POLY", N: 0x82f63b78, Expr: "0x82f63b78", Doc: "is CRC-32C's (Castagnoli's) reversed polynomial (Go: crc32.Castagnoli)"},
	{GoName: "EventTypeBits", CName: "EVENT_TYPE_BITS", N: 2, Doc: "is how many low bits of an event's code hold its type (the method id or mark kind above)"},
	{GoName: "EventTypeMask", CName: "EVENT_TYPE_MASK", N: 3, Doc: "masks the type bits of an event's code"},
	{CName: "MAX_STRING", N: 4096, Doc: "is how many bytes of a string the recorder writes at most (longer names are cut)"},
}
