// Perfetto's protobuf as the Perfetto sink (perfetto.go) writes it: the field numbers it uses
// (Perfetto's own), the tracks' uuids, the hot path's tags encoded, and the append helpers.

package sink

import "google.golang.org/protobuf/encoding/protowire"

// Perfetto's trace format (protos/perfetto/trace in google/perfetto): a Trace is a sequence of
// TracePacket messages, field 1, length-delimited. These are the fields written here, with
// Perfetto's numbers; nothing else of the schema is needed.
const (
	pfTracePacket = 1 // Trace.packet

	pfPacketClockSnapshot = 6  // TracePacket.clock_snapshot
	pfPacketTimestamp     = 8  // TracePacket.timestamp, uint64, in the packet's clock
	pfPacketSequenceID    = 10 // TracePacket.trusted_packet_sequence_id, uint32
	pfPacketTrackEvent    = 11 // TracePacket.track_event
	pfPacketInterned      = 12 // TracePacket.interned_data
	pfPacketSeqFlags      = 13 // TracePacket.sequence_flags
	pfPacketCompressed    = 50 // TracePacket.compressed_packets: a zlib stream of a Trace
	pfPacketClockID       = 58 // TracePacket.timestamp_clock_id
	pfPacketDefaults      = 59 // TracePacket.trace_packet_defaults
	pfPacketDescriptor    = 60 // TracePacket.track_descriptor
	pfSeqCleared          = 1  // SEQ_INCREMENTAL_STATE_CLEARED
	pfSeqNeedsIncrement   = 2  // SEQ_NEEDS_INCREMENTAL_STATE

	pfDefaultsClockID    = 58 // TracePacketDefaults.timestamp_clock_id
	pfDefaultsTrackEvent = 11 // TracePacketDefaults.track_event_defaults
	pfEventDefaultsTrack = 11 // TrackEventDefaults.track_uuid

	pfSnapshotClock    = 1  // ClockSnapshot.clocks
	pfClockID          = 1  // ClockSnapshot.Clock.clock_id
	pfClockTimestamp   = 2  // ClockSnapshot.Clock.timestamp
	pfClockIncremental = 3  // ClockSnapshot.Clock.is_incremental
	pfClockBoottime    = 6  // BUILTIN_CLOCK_BOOTTIME: trace time of a proto trace
	pfClockSequence    = 64 // a sequence-scoped clock (64-127): each thread's, delta-encoded

	pfTrackUUID    = 1 // TrackDescriptor.uuid
	pfTrackName    = 2 // TrackDescriptor.name
	pfTrackProcess = 3 // TrackDescriptor.process
	pfTrackThread  = 4 // TrackDescriptor.thread
	pfTrackParent  = 5 // TrackDescriptor.parent_uuid
	pfTrackCounter = 8 // TrackDescriptor.counter

	pfProcessPID  = 1 // ProcessDescriptor.pid
	pfProcessName = 6 // ProcessDescriptor.process_name
	pfThreadPID   = 1 // ThreadDescriptor.pid
	pfThreadTID   = 2 // ThreadDescriptor.tid
	pfThreadName  = 5 // ThreadDescriptor.thread_name

	pfCounterUnit = 3 // CounterDescriptor.unit
	pfUnitCount   = 2 // CounterDescriptor.UNIT_COUNT

	pfEventDebug      = 4  // TrackEvent.debug_annotations
	pfEventType       = 9  // TrackEvent.type
	pfEventNameIID    = 10 // TrackEvent.name_iid
	pfEventTrack      = 11 // TrackEvent.track_uuid
	pfEventCounterVal = 30 // TrackEvent.counter_value, int64
	pfSliceBegin      = 1  // TYPE_SLICE_BEGIN
	pfSliceEnd        = 2  // TYPE_SLICE_END
	pfInstant         = 3  // TYPE_INSTANT
	pfCounter         = 4  // TYPE_COUNTER

	pfInternedNames = 2 // InternedData.event_names
	pfNameIID       = 1 // EventName.iid
	pfNameName      = 2 // EventName.name

	pfDebugBool = 2  // DebugAnnotation.bool_value
	pfDebugUint = 3  // DebugAnnotation.uint_value
	pfDebugStr  = 6  // DebugAnnotation.string_value
	pfDebugName = 10 // DebugAnnotation.name
)

// Track uuids: a process's pid<<1|1 (odd), a thread's (pid<<32 ^ tid)<<2 (a multiple of 4),
// its loss counter that plus 2.
func processUUID(pid uint64) uint64      { return pid<<1 | 1 }
func threadUUID(pid, tid uint64) uint64  { return (pid<<32 ^ tid) << 2 }
func counterUUID(pid, tid uint64) uint64 { return threadUUID(pid, tid) + 2 }

func appendMsg(b []byte, num protowire.Number, msg []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, msg)
}

func appendUint(b []byte, num protowire.Number, v uint64) []byte {
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func appendStr(b []byte, num protowire.Number, v string) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, v)
}

// appendVarint is protowire.AppendVarint, inlined for the one-byte values of the hot path.
func appendVarint(b []byte, v uint64) []byte {
	if v < 0x80 {
		return append(b, byte(v))
	}
	return protowire.AppendVarint(b, v)
}

// Tags of the hot path, encoded.
const (
	tagPacket    = pfTracePacket<<3 | 2
	tagTimestamp = pfPacketTimestamp<<3 | 0
	tagEvent     = pfPacketTrackEvent<<3 | 2
	tagFlags     = pfPacketSeqFlags<<3 | 0
	tagInterned  = pfPacketInterned<<3 | 2
	tagType      = pfEventType<<3 | 0
	tagNameIID   = pfEventNameIID<<3 | 0
)

// appendDebugUint appends the TrackEvent field debug_annotations {name, uint_value}.
func appendDebugUint(b []byte, name string, v uint64) []byte {
	b = protowire.AppendTag(b, pfEventDebug, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(1+protowire.SizeBytes(len(name))+1+protowire.SizeVarint(v)))
	b = appendStr(b, pfDebugName, name)
	return appendUint(b, pfDebugUint, v)
}
