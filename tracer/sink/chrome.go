package sink

import (
	"io"
	"strconv"

	"github.com/msgtrace/msgtrace/tracer/engine"
	"github.com/msgtrace/msgtrace/tracer/stream"
)

// ChromeSink writes Chrome trace event JSON as a stream, built to read the same in Perfetto,
// chrome://tracing and speedscope:
//
//   - each thread in pre-order (PreOrder), times in microseconds written exactly to the
//     nanosecond (three decimals of integer nanoseconds; Perfetto rounds them back exactly);
//   - a call that lasted is a begin ("B") and an end ("E") event. Nothing varies per call on the
//     "B" (speedscope keys frames by name + JSON(args), so a method stays one frame). An "E"
//     followed at its time by a "B" of the same name (a touching sibling, or any later call of
//     that method starting at that tick) carries the call's self and total time as args: that
//     makes it differ from the "B", which is what makes speedscope end the call before it begins
//     the other (at equal times it takes a "B" first only when the two look the same). Other ends
//     carry nothing, as speedscope warns on every end that differs from its begin. Perfetto
//     takes every "E" first at equal times. No viewer adds ts and dur, so no float sum can move
//     an end past the next begin;
//   - a call that took no time (under one tick: common with Apple silicon's 24 MHz counter) is
//     a thread-scoped instant ("i"): a zero-length begin/end pair cannot be ordered right by
//     both viewers at the tick where its parent ends. Instants do not nest, so a zero-length
//     call inside another keeps its nesting only in args.depth (speedscope ignores instants,
//     so per-call args there split nothing);
//   - a call still open at the end of the trace has a "B" and no "E" (Perfetto: "did not end");
//     a call an exception unwound has "unwound": true on its "E"; a mark (calls lost, a wait for
//     buffer space) is a thread-scoped instant named "[lost N]", "[wait]", ... in category
//     "msgtrace", and every loss also steps a "lost calls" counter;
//   - an instant of the trace (Header.Instants: the launch marks, a mark the app set) is an
//     instant in category "msgtrace" named as it was, args kind ("process start", "library
//     loaded", "first call", "main", "mark") and precision_ns: process-wide ("s":"p", thread 0)
//     or on its thread, in time order with the thread's events;
//   - the program's name as the process name, thread names, displayTimeUnit "ns".
//
// Memory is what PreOrder holds: one outermost call tree at a time.
type ChromeSink struct {
	w       *outWriter
	flows   waitFlows // releases and waits, drawn as flows at Close (waits.go)
	buf     []byte
	pid     uint64
	tid     uint64
	first   bool
	started bool
	lost    uint64 // losses so far on this thread, for the counter
	label   string
	Meta    Meta // program name (the process name) and path
	pre     engine.Sink
	grouped bool // events at groupTs are being written (the group: see at)
	groupTs uint64
	gEnds   []chromeEnd // the group's ends, whose args wait for the group's begins
	gBegins []string    // the names of the group's begins
	insAt   []int       // addEndTimes' insertions: where each goes, where it ends in buf
	insEnd  []int
	pids    map[uint64]bool // processes named so far (a merged trace has several)
	fold    engine.FoldReport
	inst    instantQueue // the thread's instants not written yet
	cpu     chromeCPU    // the thread's CPU samples not written yet (cpu.go)
	names   *jsonNames   // events' names as JSON strings
	pt      []byte       // `,"pid":P,"tid":T` for ptPid and ptTid
	ptB     []byte       // pt, then the rest of a begin: `,"cat":"objc"}`
	ptPid   uint64
	ptTid   uint64
	ptOK    bool
	times   decCache
	hops    *stream.Hops // the process's (hops.go)
}

// NewChromeSink writes to w.
func NewChromeSink(w io.Writer) *ChromeSink {
	s := &ChromeSink{w: newOutWriter(w), first: true, names: &jsonNames{byName: map[string]*jsonName{}}}
	s.pre = engine.PreOrder(chromeTree{s})
	return s
}

func (s *ChromeSink) start() error {
	if s.started {
		return nil
	}
	s.started = true
	_, err := s.w.WriteString(`{"displayTimeUnit":"ns","traceEvents":[` + "\n")
	return err
}

// evBegin starts an event in place, at the end of the output: its separator, and the file's
// head before the first. evEnd ends it.
func (s *ChromeSink) evBegin() []byte {
	s.start() // (an error stays in s.w)
	b := s.w.tail()
	if !s.first {
		b = append(b, ",\n"...)
	}
	s.first = false
	return b
}

func (s *ChromeSink) evEnd(b []byte) error {
	if len(s.gEnds) > 0 {
		s.w.b = b // kept until the group ends
		return s.w.err
	}
	s.w.commit(b)
	return s.w.err
}

func (s *ChromeSink) event(b []byte) error {
	if err := s.start(); err != nil {
		return err
	}
	o := s.w.tail()
	if !s.first {
		o = append(o, ",\n"...)
	}
	s.first = false
	s.w.commit(append(o, b...))
	return s.w.err
}

func (s *ChromeSink) meta(name string, tid uint64, key string, value []byte) error {
	b := s.buf[:0]
	b = append(b, `{"ph":"M","name":"`...)
	b = append(b, name...)
	b = append(b, `","pid":`...)
	b = appendDec(b, s.pid)
	b = append(b, `,"tid":`...)
	b = appendDec(b, tid)
	b = append(b, `,"args":{"`...)
	b = append(b, key...)
	b = append(b, `":`...)
	b = append(b, value...)
	b = append(b, `}}`...)
	s.buf = b
	return s.event(b)
}

// head appends the fields every event has: phase, name, time, pid and tid.
func (s *ChromeSink) head(b []byte, ph byte, name string, ns uint64) []byte {
	b = append(b, `{"ph":"`...)
	b = append(b, ph)
	b = append(b, `","name":`...)
	b = s.names.append(b, name)
	b = append(b, `,"ts":`...)
	b = appendMicros(b, ns)
	if !s.ptOK || s.ptPid != s.pid || s.ptTid != s.tid {
		s.setPT()
	}
	return append(b, s.pt...)
}

// setPT makes pt (and ptB) for the current pid and tid.
func (s *ChromeSink) setPT() {
	s.pt = append(s.pt[:0], `,"pid":`...)
	s.pt = appendDec(s.pt, s.pid)
	s.pt = append(s.pt, `,"tid":`...)
	s.pt = appendDec(s.pt, s.tid)
	s.ptB = append(append(s.ptB[:0], s.pt...), `,"cat":"objc"}`...)
	s.ptPid, s.ptTid, s.ptOK = s.pid, s.tid, true
}

// callHead starts a call's begin (ph 'B') or end ('E') in place, up to its time: the
// separator, then `{"ph":"B","name":NAME,"ts":` made once per name (jsonNames), then the
// time. The rest is pt (or ptB), made once per thread: what head writes, without building it
// field by field for each of the two events of every call.
func (s *ChromeSink) callHead(end bool, c *engine.Call, ns uint64) []byte {
	if !s.started {
		s.start() // (an error stays in s.w)
	}
	if !s.ptOK || s.ptPid != s.pid || s.ptTid != s.tid {
		s.setPT()
	}
	e := s.names.call(c)
	q := e.b
	if end {
		q = e.e
	}
	if s.first {
		q, s.first = q[2:], false
	}
	return s.times.micros(append(s.w.b, q...), ns)
}

// BeginThread writes the thread's (and, the first time, the process's) name.
func (s *ChromeSink) BeginThread(h *stream.Header, t *stream.Thread) error {
	return s.pre.BeginThread(h, t)
}

// Call takes one call in the order calls ended.
func (s *ChromeSink) Call(c *engine.Call) error { return s.pre.Call(c) }

// Skip takes a dropped call.
func (s *ChromeSink) Skip(d int) error { return s.pre.Skip(d) }

// Mark takes a mark.
func (s *ChromeSink) Mark(m *stream.Mark) error { return s.pre.Mark(m) }

// EndThread writes what is left of the thread.
func (s *ChromeSink) EndThread() error { return s.pre.EndThread() }

// Close ends the JSON with the counters and flushes.
func (s *ChromeSink) Close(t engine.Totals) error {
	if err := s.start(); err != nil {
		return err
	}
	if err := s.writeFlows(); err != nil {
		return err
	}
	b := s.buf[:0]
	b = append(b, "\n],\"otherData\":{\"calls\":"...)
	b = appendDec(b, t.Calls)
	b = append(b, `,"kept":`...)
	b = appendDec(b, t.Kept)
	b = append(b, `,"dropped_buffer_full":`...)
	b = appendDec(b, t.Dropped)
	b = append(b, `,"untraced_stack_full":`...)
	b = appendDec(b, t.Overflow)
	if s.fold.FoldNanos > 0 {
		b = append(b, `,"timeline_budget":`...)
		b = appendDec(b, s.fold.Budget)
		b = append(b, `,"timeline_kept":`...)
		b = appendDec(b, s.fold.Kept)
		b = append(b, `,"folded_calls":`...)
		b = appendDec(b, s.fold.Folded)
		b = append(b, `,"folded_under_ns":`...)
		b = appendDec(b, s.fold.FoldNanos)
	}
	b = append(b, "}}\n"...)
	if _, err := s.w.Write(b); err != nil {
		return err
	}
	return s.w.Flush()
}

// Needs: a timeline, in pre-order, within its budget; its writer goroutine ended on a failure.
func (s *ChromeSink) Needs() engine.Needs {
	return engine.Needs{Tree: chromeTree{s}, Fold: &s.fold, Budget: s.Meta.budget(ChromeBudget), Abort: s.abort}
}

// chromeTree is the ChromeSink's pre-order side.
type chromeTree struct{ s *ChromeSink }

func (c chromeTree) BeginThread(h *stream.Header, t *stream.Thread) error {
	s := c.s
	if err := s.endGroup(); err != nil {
		return err
	}
	s.pid = h.PID
	if !s.pids[h.PID] {
		if s.pids == nil {
			s.pids = map[uint64]bool{}
		}
		s.pids[h.PID] = true
		if err := s.meta("process_name", 0, "name", appendJSONString(nil, s.Meta.ProcessName(h))); err != nil {
			return err
		}
		for _, in := range processInstants(h) {
			s.tid = 0
			if err := s.writeTimeInstant(&in); err != nil {
				return err
			}
		}
	}
	s.inst.reset(h, t.TID)
	s.tid, s.lost, s.label, s.hops = t.TID, 0, engine.ThreadLabel(t), h.Hops
	if err := s.meta("thread_name", t.TID, "name", appendJSONString(nil, s.label)); err != nil {
		return err
	}
	s.cpu.reset(h, t) // cpu.go
	if t.Main {
		return s.meta("thread_sort_index", t.TID, "sort_index", []byte("-1"))
	}
	return nil
}

func (s *ChromeSink) writeInstant(call *engine.Call, depth int) error {
	b := s.head(s.evBegin(), 'i', call.Name, call.StartNanos)
	b = append(b, `,"s":"t","cat":"objc","args":{"dur_ns":0,"depth":`...)
	b = strconv.AppendInt(b, int64(depth), 10)
	if call.Flags&stream.FlagUnwound != 0 {
		b = append(b, `,"unwound":true`...)
	}
	b = append(b, `}}`...)
	return s.evEnd(b)
}

func (s *ChromeSink) writeBegin(call *engine.Call) error {
	b := append(s.callHead(false, call, call.StartNanos), s.ptB...)
	s.gBegins = append(s.gBegins, call.Name)
	return s.evEnd(b)
}

// writeEnd writes an end without its times (see at), and remembers where they go.
func (s *ChromeSink) writeEnd(call *engine.Call) error {
	b := append(s.callHead(true, call, call.StartNanos+call.DurNanos), s.pt...)
	e := chromeEnd{name: call.Name, self: call.SelfNanos, dur: call.DurNanos}
	unwound := call.Flags&stream.FlagUnwound != 0
	switch {
	case call.Folded > 0:
		b = append(b, `,"args":{"folded_calls":`...)
		b = appendDec(b, call.Folded)
		e.at, e.how = len(b), endArgsAfter
		if unwound {
			b = append(b, `,"unwound":true`...)
		}
		b = append(b, '}')
	case unwound:
		b = append(b, `,"args":{`...)
		e.at, e.how = len(b), endArgsFirst
		b = append(b, `"unwound":true}`...)
	default:
		e.at, e.how = len(b), endArgsNew
	}
	b = append(b, '}')
	var g *chromeEnd
	s.gEnds, g = engine.AppendSlot(s.gEnds)
	g.at, g.how, g.name, g.self, g.dur = e.at, e.how, e.name, e.self, e.dur
	return s.evEnd(b)
}

func (s *ChromeSink) writeMark(m *stream.Mark) error {
	b := s.head(s.evBegin(), 'i', engine.MarkLabel(m), m.StartNanos)
	b = append(b, `,"s":"t","cat":"msgtrace","args":{"kind":"`...)
	b = append(b, m.Kind.String()...)
	b = append(b, `","count":`...)
	b = appendDec(b, m.Count)
	b = append(b, `,"dur_ns":`...)
	b = appendDec(b, m.DurNanos)
	b = append(b, `}}`...)
	if err := s.evEnd(b); err != nil {
		return err
	}
	if m.Count == 0 {
		return nil
	}
	s.lost += m.Count
	b = s.head(s.evBegin(), 'C', "lost calls", m.StartNanos)
	b = append(b, `,"args":{`...)
	b = appendJSONString(b, s.label)
	b = append(b, ':')
	b = appendDec(b, s.lost)
	b = append(b, `}}`...)
	return s.evEnd(b)
}

func (c chromeTree) Enter(call *engine.Call, d int) error {
	if err := c.s.at(call.StartNanos); err != nil {
		return err
	}
	if call.DurNanos == 0 && call.Flags&stream.FlagOpen == 0 {
		return c.s.writeInstant(call, d)
	}
	if from, ran, runs, ok := hopsOf(c.s.hops, c.s.tid, call); ok {
		return c.s.writeHopBegin(call, from, ran, runs)
	}
	return c.s.writeBegin(call)
}

func (c chromeTree) Exit(call *engine.Call, _ int) error {
	if call.Flags&stream.FlagWait != 0 {
		c.s.flows.wait(c.s.pid, c.s.tid, call)
	}
	if call.Flags&stream.FlagOpen != 0 || call.DurNanos == 0 {
		return nil // open: no end, a slice that did not end; no time: an instant
	}
	if err := c.s.at(call.StartNanos + call.DurNanos); err != nil {
		return err
	}
	return c.s.writeEnd(call)
}

func (c chromeTree) Mark(m *stream.Mark, depth int) error {
	if m.Kind == stream.MarkRelease { // a lock's release: a flow's start, at Close (waits.go)
		c.s.flows.release(c.s.pid, c.s.tid, m, depth)
		return nil
	}
	if err := c.s.at(m.StartNanos); err != nil {
		return err
	}
	return c.s.writeMark(m)
}

func (c chromeTree) EndThread() error {
	s := c.s
	if err := s.endGroup(); err != nil {
		return err
	}
	return s.writeTimedBefore(0, true)
}

// writeTimeInstant writes an instant of the trace (a launch mark, a mark the app set): on the
// current thread, or process-wide ("s":"p", thread 0) when it is not a thread's, in category
// msgtrace with its kind and precision.
func (s *ChromeSink) writeTimeInstant(in *stream.Instant) error {
	b := s.head(s.evBegin(), 'i', in.Name, in.Nanos)
	if in.TID == 0 {
		b = append(b, `,"s":"p"`...)
	} else {
		b = append(b, `,"s":"t"`...)
	}
	b = append(b, `,"cat":"msgtrace","args":{"kind":`...)
	b = appendJSONString(b, in.Kind.String())
	b = append(b, `,"precision_ns":`...)
	b = appendDec(b, in.PrecisionNanos)
	b = append(b, `}}`...)
	return s.evEnd(b)
}
func (c chromeTree) Close(t engine.Totals) error { return nil }

// abort ends the output's writer goroutine: the conversion failed before Close.
func (s *ChromeSink) abort() { s.w.abort() }

// writeFlows writes a flow from each release to the wake-up of the wait it ended: a flow start
// ("s") on the holder's thread at the release and a flow end ("f"), both bound to the enclosing
// slice (the holder's call; the call that waited) on the waiter's at its wake-up, category "wait", named as the
// wait, the end's args the address (low 32 bits) and the holder's thread id.
func (s *ChromeSink) writeFlows() error {
	for _, f := range s.flows.flows() {
		s.pid, s.tid = f.from.pid, f.from.tid
		b := s.head(s.evBegin(), 's', f.name, f.from.ns)
		b = append(b, `,"bp":"e","cat":"wait","id":`...)
		b = appendDec(b, f.id)
		b = append(b, '}')
		if err := s.evEnd(b); err != nil {
			return err
		}
		s.pid, s.tid = f.to.pid, f.to.tid
		b = s.head(s.evBegin(), 'f', f.name, f.to.ns)
		b = append(b, `,"bp":"e","cat":"wait","id":`...)
		b = appendDec(b, f.id)
		b = append(b, `,"args":{"address":`...)
		b = appendDec(b, f.addr)
		b = append(b, `,"holder_tid":`...)
		b = appendDec(b, f.holder)
		b = append(b, `}}`...)
		if err := s.evEnd(b); err != nil {
			return err
		}
	}
	return nil
}
