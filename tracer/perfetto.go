package tracer

import (
	"bufio"
	"io"

	"google.golang.org/protobuf/encoding/protowire"
)

// Perfetto's trace format (protos/perfetto/trace in google/perfetto): a Trace is a sequence of
// TracePacket messages, field 1, length-delimited. These are the fields written here, with
// Perfetto's numbers; nothing else of the schema is needed.
const (
	pfTracePacket = 1 // Trace.packet

	pfPacketTimestamp   = 8  // TracePacket.timestamp, uint64 ns
	pfPacketSequenceID  = 10 // TracePacket.trusted_packet_sequence_id, uint32
	pfPacketTrackEvent  = 11 // TracePacket.track_event
	pfPacketInterned    = 12 // TracePacket.interned_data
	pfPacketSeqFlags    = 13 // TracePacket.sequence_flags
	pfPacketDescriptor  = 60 // TracePacket.track_descriptor
	pfSeqCleared        = 1  // SEQ_INCREMENTAL_STATE_CLEARED
	pfSeqNeedsIncrement = 2  // SEQ_NEEDS_INCREMENTAL_STATE

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
	pfDebugName = 10 // DebugAnnotation.name
)

// PerfettoSink writes Perfetto's native protobuf trace (NAME.pftrace; ui.perfetto.dev opens
// it, and reads it faster than JSON, from a file a fraction of the size): a process track per
// process named after the program, a thread track per thread, each call a begin and an end TrackEvent on its
// thread's track in pre-order (PreOrder), call names interned (each name written once, then
// referred to by number), all on one packet sequence. A call still open at the end of the trace
// has no end (Perfetto shows it as a slice that did not end); a call an exception unwound has
// the debug annotation unwound=true on its end; a mark is an instant on the thread's track with
// the count, and each loss steps the thread's "lost calls" counter track.
type PerfettoSink struct {
	Sink
	w       *bufio.Writer
	meta    Meta
	pkt     []byte
	ev      []byte
	names   map[string]uint64
	pid     uint64
	pids    map[uint64]bool // processes with a track (a merged trace has several)
	thread  uint64          // current thread's track uuid
	counter uint64          // current thread's loss counter track uuid, 0 until needed
	tid     uint64
	label   string
	lost    uint64
	err     error
}

// NewPerfettoSink writes to w.
func NewPerfettoSink(w io.Writer, m Meta) *PerfettoSink {
	s := &PerfettoSink{w: bufio.NewWriterSize(w, 1<<16), meta: m, names: map[string]uint64{}}
	s.Sink = PreOrder(perfettoTree{s})
	return s
}

// Track uuids: a process's pid<<1|1 (odd), a thread's (pid<<32 ^ tid)<<2 (a multiple of 4),
// its loss counter that plus 2.
func processUUID(pid uint64) uint64      { return pid<<1 | 1 }
func threadUUID(pid, tid uint64) uint64  { return (pid<<32 ^ tid) << 2 }
func counterUUID(pid, tid uint64) uint64 { return threadUUID(pid, tid) + 2 }

// packet writes one TracePacket whose fields (after the sequence id) are body.
func (s *PerfettoSink) packet(body []byte) {
	p := s.pkt[:0]
	p = protowire.AppendTag(p, pfTracePacket, protowire.BytesType)
	p = protowire.AppendVarint(p, uint64(len(body)+2))
	p = protowire.AppendTag(p, pfPacketSequenceID, protowire.VarintType)
	p = protowire.AppendVarint(p, 1)
	p = append(p, body...)
	s.pkt = p
	if s.err == nil {
		_, s.err = s.w.Write(p)
	}
}

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

// descriptor writes a TrackDescriptor packet.
func (s *PerfettoSink) descriptor(desc []byte) {
	s.packet(appendMsg(nil, pfPacketDescriptor, desc))
}

// trackEvent writes a TrackEvent packet at ts; name (if not "") is interned.
func (s *PerfettoSink) trackEvent(ts uint64, typ uint64, track uint64, name string, extra []byte) {
	e := s.ev[:0]
	e = appendUint(e, pfEventType, typ)
	e = appendUint(e, pfEventTrack, track)
	var interned []byte
	if name != "" {
		iid, ok := s.names[name]
		if !ok {
			iid = uint64(len(s.names) + 1)
			s.names[name] = iid
			en := appendUint(nil, pfNameIID, iid)
			en = appendStr(en, pfNameName, name)
			interned = appendMsg(nil, pfInternedNames, en)
		}
		e = appendUint(e, pfEventNameIID, iid)
	}
	e = append(e, extra...)
	s.ev = e
	body := appendUint(nil, pfPacketTimestamp, ts)
	body = appendMsg(body, pfPacketTrackEvent, e)
	if interned != nil {
		body = appendMsg(body, pfPacketInterned, interned)
	}
	body = appendUint(body, pfPacketSeqFlags, pfSeqNeedsIncrement)
	s.packet(body)
}

type perfettoTree struct{ s *PerfettoSink }

func (t perfettoTree) BeginThread(h *Header, th *Thread) error {
	s := t.s
	s.pid = h.PID
	if !s.pids[h.PID] {
		p := appendUint(nil, pfProcessPID, h.PID)
		p = appendStr(p, pfProcessName, s.meta.process(h))
		d := appendUint(nil, pfTrackUUID, processUUID(h.PID))
		d = appendMsg(d, pfTrackProcess, p)
		if s.pids == nil { // the first packet clears the sequence's interned state
			s.pids = map[uint64]bool{}
			s.packet(appendUint(appendMsg(nil, pfPacketDescriptor, d), pfPacketSeqFlags, pfSeqCleared))
		} else {
			s.descriptor(d)
		}
		s.pids[h.PID] = true
	}
	s.tid, s.label, s.counter, s.lost = th.TID, threadLabel(th), 0, 0
	s.thread = threadUUID(s.pid, th.TID)
	td := appendUint(nil, pfThreadPID, s.pid)
	td = appendUint(td, pfThreadTID, th.TID)
	td = appendStr(td, pfThreadName, s.label)
	d := appendUint(nil, pfTrackUUID, s.thread)
	d = appendUint(d, pfTrackParent, processUUID(s.pid))
	d = appendMsg(d, pfTrackThread, td)
	s.descriptor(d)
	return s.err
}

func (t perfettoTree) Enter(c *Call, _ int) error {
	t.s.trackEvent(c.StartNanos, pfSliceBegin, t.s.thread, c.Name, nil)
	return t.s.err
}

func (t perfettoTree) Exit(c *Call, _ int) error {
	if c.Flags&FlagOpen != 0 {
		return nil // a slice that did not end
	}
	var extra []byte
	if c.Flags&FlagUnwound != 0 {
		a := appendStr(nil, pfDebugName, "unwound")
		a = appendUint(a, pfDebugBool, 1)
		extra = appendMsg(nil, pfEventDebug, a)
	}
	t.s.trackEvent(c.StartNanos+c.DurNanos, pfSliceEnd, t.s.thread, "", extra)
	return t.s.err
}

func (t perfettoTree) Mark(m *Mark, _ int) error {
	s := t.s
	a := appendStr(nil, pfDebugName, "count")
	a = appendUint(a, pfDebugUint, m.Count)
	extra := appendMsg(nil, pfEventDebug, a)
	a = appendStr(nil, pfDebugName, "dur_ns")
	a = appendUint(a, pfDebugUint, m.DurNanos)
	extra = appendMsg(extra, pfEventDebug, a)
	s.trackEvent(m.StartNanos, pfInstant, s.thread, markLabel(m), extra)
	if m.Count == 0 {
		return s.err
	}
	if s.counter == 0 {
		s.counter = counterUUID(s.pid, s.tid)
		d := appendUint(nil, pfTrackUUID, s.counter)
		d = appendUint(d, pfTrackParent, s.thread)
		d = appendStr(d, pfTrackName, "lost calls")
		d = appendMsg(d, pfTrackCounter, appendUint(nil, pfCounterUnit, pfUnitCount))
		s.descriptor(d)
	}
	s.lost += m.Count
	s.trackEvent(m.StartNanos, pfCounter, s.counter, "", appendUint(nil, pfEventCounterVal, s.lost))
	return s.err
}

func (t perfettoTree) EndThread() error { return t.s.err }

func (t perfettoTree) Close(Totals) error {
	if t.s.err != nil {
		return t.s.err
	}
	return t.s.w.Flush()
}
