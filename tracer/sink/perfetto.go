package sink

import (
	"encoding/binary"
	"io"
	"strconv"

	"github.com/msgtrace/msgtrace/tracer/engine"
	"github.com/msgtrace/msgtrace/tracer/stream"
	"google.golang.org/protobuf/encoding/protowire"
)

// PerfettoSink writes Perfetto's native protobuf trace (NAME.pftrace; ui.perfetto.dev opens
// it, and reads it faster than JSON, from a file a fraction of the size): a process track per
// process named after the program, a thread track per thread, each call a begin and an end
// TrackEvent on its thread's track in pre-order (PreOrder). A call still open at the end of
// the trace has no end (Perfetto shows it as a slice that did not end); a call an exception
// unwound has the debug annotation unwound=true on its end; a mark is an instant on the
// thread's track with the count, and each loss steps the thread's "lost calls" counter track.
// An instant of the trace (Header.Instants: the launch marks, a mark the app set) is a
// TYPE_INSTANT event named as it was, with debug annotations kind and precision_ns: on the
// process's track (a packet sequence of its own) when it is process-wide, on the thread's
// track in time order with its events when it was set on a thread.
//
// It is written as compactly as the format allows (6-12 bytes a call on realistic traces,
// against about 50 for one track_uuid'd, absolutely timed packet sequence): each thread is a
// packet sequence of its own whose defaults name the thread's track and a clock of the
// sequence's own, delta-encoded (so an event carries neither a track nor more than the
// nanoseconds since the previous event); names are interned per sequence (each written once,
// then referred to by number); an end has no name; and the packets go, 448 KiB at a time,
// into compressed_packets (zlib, by pfDeflater), compressed on another core while the next
// batch is encoded. Inflated, the file is exactly what Uncompressed writes.
type PerfettoSink struct {
	engine.Sink
	flows waitFlows // releases and waits, drawn as flows at Close (waits.go)

	// Uncompressed, set before the first call, writes the packets as they are instead of in
	// compressed_packets: a file 3-4 times bigger, for readers that do not inflate.
	Uncompressed bool

	w     io.Writer
	meta  Meta
	Level int     // 0: pfDeflater; else compress/zlib's level (to compare)
	buf   []byte  // packets not yet written
	pkts  []pfPkt // and where they are
	err   error

	names    map[string]uint64 // name -> iid (the same on every sequence)
	nameSeq  []uint32          // iid -> the last sequence it was interned on
	nameShow []string          // iid -> the name shown (DisplayName)
	byMethod []uint64          // a call's Method -> iid (0: not yet)

	seq     uint32 // current sequence (one per thread, from 1)
	seqTag  []byte // its trusted_packet_sequence_id field, encoded
	head    uint64 // a packet's first bytes on it: tagPacket, a length of 0, seqTag (LE)
	headN   int    // how many (at most 8: seqTag is at most 6)
	last    uint64 // the sequence clock's value (ns): timestamps are deltas from it
	pid     uint64
	pids    map[uint64]bool // processes with a track (a merged trace has several)
	thread  uint64          // current thread's track uuid
	counter uint64          // current thread's loss counter track uuid, 0 until needed
	tid     uint64
	label   string
	lost    uint64

	scratch []byte
	fold    engine.FoldReport

	zp *pfCompressor // nil until a batch is full

	inst instantQueue // the thread's instants not written yet
	hops *stream.Hops // the process's (hops.go)
}

// NewPerfettoSink writes to w.
func NewPerfettoSink(w io.Writer, m Meta) *PerfettoSink {
	s := &PerfettoSink{w: w, meta: m, names: map[string]uint64{}, nameSeq: []uint32{0}, nameShow: []string{""}}
	s.Sink = engine.PreOrder(perfettoTree{s})
	return s
}

// treeSink is the sink as a TreeSink, for engines that produce pre-order themselves.
// Needs: a timeline, in pre-order, within its budget.
func (s *PerfettoSink) Needs() engine.Needs {
	return engine.Needs{Tree: perfettoTree{s}, Fold: &s.fold, Budget: s.meta.budget(PerfettoBudget)}
}

// begin starts a packet on the current sequence: its tag, a one-byte length end fixes, and
// the sequence id.
func (s *PerfettoSink) begin() int {
	start := len(s.buf)
	s.pkts = append(s.pkts, pfPkt{pos: uint32(start), shape: pfShapeOther})
	s.buf = append(s.buf, tagPacket, 0)
	s.buf = append(s.buf, s.seqTag...)
	return start
}

// appendHead returns s.buf with a packet's first bytes on the current sequence (tagPacket, a
// length of 0 for the caller to set, the sequence id) appended in one 8-byte store, and where
// the packet starts.
func (s *PerfettoSink) appendHead() ([]byte, int) {
	b := s.buf
	start := len(b)
	if cap(b)-start < 8 {
		b = append(b, 0, 0, 0, 0, 0, 0, 0, 0)[:start]
	}
	b = b[:start+8]
	binary.LittleEndian.PutUint64(b[start:], s.head)
	return b[:start+s.headN], start
}

// end sets the length of the packet begun at start, and hands a full batch over.
func (s *PerfettoSink) end(start int) {
	b := s.buf
	n := len(b) - start - 2
	if n < 0x80 {
		b[start+1] = byte(n)
	} else { // rare (an interned name, a descriptor): make room for a longer length
		k := protowire.SizeVarint(uint64(n))
		var room [8]byte
		b = append(b, room[:k-1]...)
		copy(b[start+1+k:], b[start+2:start+2+n])
		protowire.AppendVarint(b[:start+1], uint64(n))
	}
	s.buf = b
	s.pkts[len(s.pkts)-1].shape |= uint32(min(len(b)-start, 255))
	if len(b) >= pfBatchBytes {
		s.flush()
	}
}

// packet writes one TracePacket on the current sequence whose other fields are body.
func (s *PerfettoSink) packet(body []byte) {
	start := s.begin()
	s.buf = append(s.buf, body...)
	s.end(start)
}

// time appends the packet's timestamp: the nanoseconds since the previous one, on the
// sequence's incremental clock; a time before it (which pre-order never makes, but a broken
// recording might) absolute, on the trace's clock, as Perfetto's own SDK does.
func (s *PerfettoSink) time(b []byte, ts uint64) []byte {
	if ts >= s.last {
		b = append(b, tagTimestamp)
		b = appendVarint(b, ts-s.last)
		s.last = ts
		return b
	}
	b = appendUint(b, pfPacketTimestamp, ts)
	return appendUint(b, pfPacketClockID, pfClockBoottime)
}

// iid returns name's interned id, and whether the current sequence has yet to be told it.
func (s *PerfettoSink) iid(name string) (uint64, bool) {
	iid, ok := s.names[name]
	if !ok {
		iid = s.newName(name, engine.DisplayName(name))
	}
	return iid, s.tell(iid)
}

// iidOf is iid for a call's method, by its Method.
func (s *PerfettoSink) iidOf(c *engine.Call) (uint64, bool) {
	m := c.Method
	if int(m) < len(s.byMethod) && m != 0 {
		if iid := s.byMethod[m]; iid != 0 {
			return iid, s.tell(iid)
		}
	}
	iid, ok := s.names[c.Name]
	if !ok {
		iid = s.newName(c.Name, c.Display())
	}
	if m != 0 {
		s.byMethod = engine.Grow(s.byMethod, m)
		s.byMethod[m] = iid
	}
	return iid, s.tell(iid)
}

// iidBytes is iid for a name in bytes (allocating only for a new name).
func (s *PerfettoSink) iidBytes(name []byte) (uint64, bool) {
	iid, ok := s.names[string(name)]
	if !ok {
		iid = s.newName(string(name), engine.DisplayName(string(name)))
	}
	return iid, s.tell(iid)
}

func (s *PerfettoSink) newName(name, show string) uint64 {
	iid := uint64(len(s.nameShow))
	s.names[name] = iid
	s.nameShow = append(s.nameShow, show)
	s.nameSeq = append(s.nameSeq, 0)
	return iid
}

// tell says whether the current sequence has yet to be told iid's name, and notes it will be.
func (s *PerfettoSink) tell(iid uint64) bool {
	if s.nameSeq[iid] == s.seq {
		return false
	}
	s.nameSeq[iid] = s.seq
	return true
}

// appendInterned appends the InternedData telling iid's name.
func (s *PerfettoSink) appendInterned(b []byte, iid uint64) []byte {
	name := s.nameShow[iid]
	en := 1 + protowire.SizeVarint(iid) + 1 + protowire.SizeBytes(len(name))
	b = append(b, tagInterned)
	b = protowire.AppendVarint(b, uint64(1+protowire.SizeBytes(en)))
	b = protowire.AppendTag(b, pfInternedNames, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(en))
	b = appendUint(b, pfNameIID, iid)
	return appendStr(b, pfNameName, name)
}

// event writes a TrackEvent packet at ts on the thread's track (or, if track is not 0, on
// that track) of type typ, named iid (if not 0; tell: with the name), with extra fields.
func (s *PerfettoSink) event(ts uint64, typ byte, iid uint64, tell bool, track uint64, extra []byte) {
	start := s.begin()
	b := append(s.buf, tagFlags, pfSeqNeedsIncrement)
	n := 2 + len(extra)
	if iid != 0 {
		n += 1 + protowire.SizeVarint(iid)
	}
	if track != 0 {
		n += 1 + protowire.SizeVarint(track)
	}
	b = append(b, tagEvent)
	b = protowire.AppendVarint(b, uint64(n))
	b = append(b, tagType, typ)
	if iid != 0 {
		b = append(b, tagNameIID)
		b = protowire.AppendVarint(b, iid)
	}
	if track != 0 {
		b = appendUint(b, pfEventTrack, track)
	}
	b = append(b, extra...)
	b = s.time(b, ts)
	if tell {
		b = s.appendInterned(b, iid)
	}
	s.buf = b
	s.end(start)
}

type perfettoTree struct{ s *PerfettoSink }

// sequence starts a packet sequence whose events go on track by default.
func (s *PerfettoSink) sequence(track uint64) {
	s.seq++
	s.seqTag = appendUint(s.seqTag[:0], pfPacketSequenceID, uint64(s.seq))
	var h [8]byte
	s.headN = len(append(append(h[:0], tagPacket, 0), s.seqTag...))
	s.head = binary.LittleEndian.Uint64(h[:])
	s.last = 0
	// The sequence's first packet clears its state, sets its defaults (the track, the
	// sequence's clock) and says that clock is delta-encoded nanoseconds starting at trace
	// time 0.
	ted := appendUint(nil, pfEventDefaultsTrack, track)
	def := appendUint(nil, pfDefaultsClockID, pfClockSequence)
	def = appendMsg(def, pfDefaultsTrackEvent, ted)
	boot := appendUint(nil, pfClockID, pfClockBoottime)
	boot = appendUint(boot, pfClockTimestamp, 0)
	seqc := appendUint(nil, pfClockID, pfClockSequence)
	seqc = appendUint(seqc, pfClockTimestamp, 0)
	seqc = appendUint(seqc, pfClockIncremental, 1)
	snap := appendMsg(appendMsg(nil, pfSnapshotClock, boot), pfSnapshotClock, seqc)
	body := appendUint(nil, pfPacketSeqFlags, pfSeqCleared)
	body = appendMsg(body, pfPacketDefaults, def)
	body = appendMsg(body, pfPacketClockSnapshot, snap)
	s.packet(body)
}

// instant writes an instant of the trace (Header.Instants) on the sequence's track: an
// instant event named as it was, with debug annotations kind and precision_ns.
func (s *PerfettoSink) instant(in *stream.Instant) {
	iid, tell := s.iid(in.Name)
	e := protowire.AppendTag(nil, pfEventDebug, protowire.BytesType)
	kind := in.Kind.String()
	e = protowire.AppendVarint(e, uint64(1+protowire.SizeBytes(len("kind"))+1+protowire.SizeBytes(len(kind))))
	e = appendStr(appendStr(e, pfDebugName, "kind"), pfDebugStr, kind)
	e = appendDebugUint(e, "precision_ns", in.PrecisionNanos)
	s.event(in.Nanos, pfInstant, iid, tell, 0, e)
}

// instantsBefore writes the thread's instants before ts.
func (s *PerfettoSink) instantsBefore(ts uint64) {
	for in, ok := s.inst.before(ts); ok; in, ok = s.inst.before(ts) {
		s.instant(in)
	}
}

func (t perfettoTree) BeginThread(h *stream.Header, th *stream.Thread) error {
	s := t.s
	s.pid = h.PID
	describe := func() { // the process's track, before anything refers to it
		p := appendUint(nil, pfProcessPID, h.PID)
		p = appendStr(p, pfProcessName, s.meta.ProcessName(h))
		d := appendUint(nil, pfTrackUUID, processUUID(h.PID))
		d = appendMsg(d, pfTrackProcess, p)
		s.packet(appendMsg(nil, pfPacketDescriptor, d))
		if s.pids == nil {
			s.pids = map[uint64]bool{}
		}
		s.pids[h.PID] = true
	}
	if ins := processInstants(h); len(ins) > 0 && !s.pids[h.PID] {
		// the process-wide instants: a sequence of their own, on the process's track
		s.sequence(processUUID(h.PID))
		describe()
		for i := range ins {
			s.instant(&ins[i])
		}
	}
	s.tid, s.label, s.counter, s.lost, s.hops = th.TID, engine.ThreadLabel(th), 0, 0, h.Hops
	s.thread = threadUUID(s.pid, th.TID)
	s.inst.reset(h, th.TID)
	s.sequence(s.thread)
	if !s.pids[h.PID] {
		describe()
	}
	td := appendUint(nil, pfThreadPID, s.pid)
	td = appendUint(td, pfThreadTID, th.TID)
	td = appendStr(td, pfThreadName, s.label)
	d := appendUint(nil, pfTrackUUID, s.thread)
	d = appendUint(d, pfTrackParent, processUUID(s.pid))
	d = appendMsg(d, pfTrackThread, td)
	s.packet(appendMsg(nil, pfPacketDescriptor, d))
	if tc := h.CPU[th.TID]; tc != nil {
		s.cpuCounters(tc.Samples) // cpu.go
	}
	return s.err
}

// Enter writes a begin: its time delta, and the name's iid (after the name itself the first
// time on the thread). Call.SelfNanos is not read: it is not known yet.
func (t perfettoTree) Enter(c *engine.Call, _ int) error {
	s := t.s
	if s.inst.next < len(s.inst.list) {
		s.instantsBefore(c.StartNanos)
	}
	iid, tell := s.iidOf(c)
	if c.Flags&stream.FlagWait != 0 { // a wait: its address and holder as debug annotations
		s.flows.wait(s.pid, s.tid, c)
		_, addr, holder, _ := stream.WaitOf(c.ID)
		s.event(c.StartNanos, pfSliceBegin, iid, tell, 0, appendDebugUint(appendDebugUint(nil, "address", addr), "holder_tid", holder))
		return s.err
	}
	if from, ran, runs, ok := hopsOf(s.hops, s.tid, c); ok {
		s.event(c.StartNanos, pfSliceBegin, iid, tell, 0, pfHopFields(s.pid, from, ran, runs))
		return s.err
	}
	b, start := s.appendHead()
	// the parts that vary last, so that the packet repeats an earlier one as far as can be
	if iid < 0x4000 { // the varint by hand: most are 2 bytes
		if iid < 0x80 {
			b = append(b, tagFlags, pfSeqNeedsIncrement, tagEvent, 4, tagType, pfSliceBegin, tagNameIID, byte(iid))
		} else {
			b = append(b, tagFlags, pfSeqNeedsIncrement, tagEvent, 5, tagType, pfSliceBegin, tagNameIID, byte(iid)|0x80, byte(iid>>7))
		}
	} else {
		b = append(b, tagFlags, pfSeqNeedsIncrement, tagEvent, byte(3+protowire.SizeVarint(iid)), tagType, pfSliceBegin, tagNameIID)
		b = protowire.AppendVarint(b, iid)
	}
	b = s.time(b, c.StartNanos)
	if tell {
		b = s.appendInterned(b, iid)
	}
	s.pkts = append(s.pkts, pfPkt{pos: uint32(start), shape: pfShapeBegin, iid: uint32(iid)})
	if n := len(b) - start - 2; n < 0x80 && len(b) < pfBatchBytes {
		b[start+1] = byte(n)
		s.buf = b
		s.pkts[len(s.pkts)-1].shape |= uint32(n + 2)
		return s.err
	}
	s.buf = b
	s.end(start)
	return s.err
}

// pfUnwound is the debug annotation unwound=true, as a TrackEvent field.
var pfUnwound = appendMsg(nil, pfEventDebug, appendUint(appendStr(nil, pfDebugName, "unwound"), pfDebugBool, 1))

func (t perfettoTree) Exit(c *engine.Call, _ int) error {
	s := t.s
	if c.Flags&stream.FlagOpen != 0 {
		return s.err // a slice that did not end
	}
	ts := c.StartNanos + c.DurNanos
	if s.inst.next < len(s.inst.list) {
		s.instantsBefore(ts)
	}
	if c.Flags&stream.FlagUnwound != 0 || ts < s.last || c.Folded > 0 {
		var extra []byte
		if c.Flags&stream.FlagUnwound != 0 {
			extra = pfUnwound
		}
		if c.Folded > 0 { // the calls the budget folded into it: folded_calls=N
			extra = append(append([]byte(nil), extra...), appendMsg(nil, pfEventDebug, appendUint(appendStr(nil, pfDebugName, "folded_calls"), pfDebugUint, c.Folded))...)
		}
		s.event(ts, pfSliceEnd, 0, false, 0, extra)
		return s.err
	}
	b, start := s.appendHead()
	b = append(b, tagFlags, pfSeqNeedsIncrement, tagEvent, 2, tagType, pfSliceEnd, tagTimestamp)
	if d := ts - s.last; d < 0x4000 { // the varint by hand: most are 1 or 2 bytes
		if d < 0x80 {
			b = append(b, byte(d))
		} else {
			b = append(b, byte(d)|0x80, byte(d>>7))
		}
	} else {
		b = protowire.AppendVarint(b, d)
	}
	s.last = ts
	b[start+1] = byte(len(b) - start - 2)
	s.buf = b
	s.pkts = append(s.pkts, pfPkt{pos: uint32(start), shape: pfShapeEnd | uint32(len(b)-start)})
	if len(b) >= pfBatchBytes {
		s.flush()
	}
	return s.err
}

// Mark writes an instant named after the mark (as markLabel) with its count and duration,
// and for a loss the thread's lost calls so far on its counter track; without allocating
// but for a name not seen before.
func (t perfettoTree) Mark(m *stream.Mark, depth int) error {
	if m.Kind == stream.MarkRelease { // a lock's release: a flow's start, at Close (waits.go)
		t.s.flows.release(t.s.pid, t.s.tid, m, depth)
		return nil
	}
	s := t.s
	s.instantsBefore(m.StartNanos)
	label := append(s.scratch[:0], '[')
	if m.Kind == stream.MarkWait {
		label = append(label, "wait"...)
	} else {
		label = append(label, m.Kind.String()...)
		label = append(label, ' ')
		label = strconv.AppendUint(label, m.Count, 10)
	}
	label = append(label, ']')
	iid, tell := s.iidBytes(label)
	e := label[len(label):]
	e = appendDebugUint(e, "count", m.Count)
	e = appendDebugUint(e, "dur_ns", m.DurNanos)
	s.scratch = e
	s.event(m.StartNanos, pfInstant, iid, tell, 0, e)
	if m.Count == 0 {
		return s.err
	}
	if s.counter == 0 {
		s.counter = counterUUID(s.pid, s.tid)
		d := appendUint(nil, pfTrackUUID, s.counter)
		d = appendUint(d, pfTrackParent, s.thread)
		d = appendStr(d, pfTrackName, "lost calls")
		d = appendMsg(d, pfTrackCounter, appendUint(nil, pfCounterUnit, pfUnitCount))
		s.packet(appendMsg(nil, pfPacketDescriptor, d))
	}
	s.lost += m.Count
	s.scratch = appendUint(s.scratch[:0], pfEventCounterVal, s.lost)
	s.event(m.StartNanos, pfCounter, 0, false, s.counter, s.scratch)
	return s.err
}

func (t perfettoTree) EndThread() error {
	s := t.s
	for in, ok := s.inst.rest(); ok; in, ok = s.inst.rest() {
		s.instant(in)
	}
	return s.err
}

func (t perfettoTree) Close(engine.Totals) error {
	s := t.s
	s.writeFlows()
	s.flush()
	if s.zp != nil {
		if err := s.zp.close(); s.err == nil {
			s.err = err
		}
		s.zp = nil
	}
	return s.err
}

// flush writes the packets held: as they are, or compressed as one compressed_packets.
func (s *PerfettoSink) flush() {
	if len(s.buf) == 0 || s.err != nil {
		s.buf = s.buf[:0]
		return
	}
	if s.Uncompressed {
		_, s.err = s.w.Write(s.buf)
		s.buf, s.pkts = s.buf[:0], s.pkts[:0]
		return
	}
	if s.zp == nil {
		s.zp = newPfCompressor(s.w, s.Level)
	}
	if err := s.zp.err(); err != nil {
		s.err = err
		return
	}
	s.buf, s.pkts = s.zp.submit(s.buf, s.pkts)
}

// writeFlows writes, in a sequence of their own, a flow from each release to the wake-up of the
// wait it ended: an instant "release PRIMITIVE" on the holder's thread track at the release
// (flow_ids) and an instant "wake PRIMITIVE" on the waiter's at its wake-up
// (terminating_flow_ids), each with the address (low 32 bits) and the holder's thread id.
func (s *PerfettoSink) writeFlows() {
	fs := s.flows.flows()
	if len(fs) == 0 {
		return
	}
	s.sequence(threadUUID(fs[0].to.pid, fs[0].to.tid))
	for _, f := range fs {
		prim := f.name[len("wait "):]
		args := appendDebugUint(appendDebugUint(nil, "address", f.addr), "holder_tid", f.holder)
		for _, end := range []struct {
			p     flowPoint
			name  string
			field protowire.Number
		}{{f.from, "release " + prim, pfEventFlowIDs}, {f.to, "wake " + prim, pfEventTermFlowID}} {
			iid, tell := s.iid(end.name)
			e := protowire.AppendTag(append([]byte(nil), args...), end.field, protowire.Fixed64Type)
			e = protowire.AppendFixed64(e, f.id)
			s.event(end.p.ns, pfInstant, iid, tell, threadUUID(end.p.pid, end.p.tid), e)
		}
	}
}
