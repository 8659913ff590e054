package tracer

// The tests' own copy of what they decode the Perfetto sink's output by (tracer/sink keeps its
// own unexported): Perfetto's field numbers (protos/perfetto/trace in google/perfetto), the
// sink's track uuids.
const (
	pfTracePacket       = 1  // Trace.packet
	pfPacketCompressed  = 50 // TracePacket.compressed_packets
	pfSeqCleared        = 1  // SEQ_INCREMENTAL_STATE_CLEARED
	pfSeqNeedsIncrement = 2  // SEQ_NEEDS_INCREMENTAL_STATE
	pfClockBoottime     = 6  // BUILTIN_CLOCK_BOOTTIME
	pfInstant           = 3  // TrackEvent.TYPE_INSTANT

	tagPacket = pfTracePacket<<3 | 2 // Trace.packet's tag, length-delimited
)

// processUUID and threadUUID are the sink's track uuids: a process's pid<<1|1, a thread's
// (pid<<32 ^ tid)<<2.
func processUUID(pid uint64) uint64     { return pid<<1 | 1 }
func threadUUID(pid, tid uint64) uint64 { return (pid<<32 ^ tid) << 2 }
