package sink

import (
	"math"
	"strconv"

	"github.com/msgtrace/msgtrace/tracer/engine"
	"github.com/msgtrace/msgtrace/tracer/stream"
	"google.golang.org/protobuf/encoding/protowire"
)

// A thread's CPU samples (stream.Header.CPU: its counters as the drain read them every 10 ms or
// more, MSGTRACE_CPU) drawn as counters: at each sample the share of one CPU the thread ran
// until the next sample, in percent ("CPU running %"), and where the counters say it, the share
// it waited runnable on a run queue ("CPU runnable %"); the last sample is 0 (the track ends).
// Perfetto: two counter tracks under the thread's track, on a packet sequence of their own
// (track uuids the thread's plus 1 and plus 3). Chrome JSON: one counter event (ph "C") per
// sample named "CPU % THREAD TID" with the two as args (a viewer makes a track of each).

const (
	pfCounterUnitName  = 6  // CounterDescriptor.unit_name
	pfEventCounterReal = 44 // TrackEvent.double_counter_value
)

// cpuShares returns, for each sample but the last, the share of a CPU the thread ran and waited
// runnable until the next sample, in percent; and whether every sample knows runnable time.
func cpuShares(ss []stream.CPUSample) (run, wait []float64, waitKnown bool) {
	waitKnown = true
	for _, s := range ss {
		waitKnown = waitKnown && s.Known&stream.CPURunnable != 0
	}
	share := func(a, b uint64, dt uint64) float64 {
		if b <= a || dt == 0 {
			return 0
		}
		return math.Round(float64(b-a)/float64(dt)*1000) / 10 // 0.1 %
	}
	for i := 0; i+1 < len(ss); i++ {
		a, b := ss[i], ss[i+1]
		run = append(run, share(a.RunningNanos, b.RunningNanos, b.Nanos-a.Nanos))
		wait = append(wait, share(a.RunnableNanos, b.RunnableNanos, b.Nanos-a.Nanos))
	}
	return run, wait, waitKnown
}

// cpuCounters writes the current thread's CPU samples as counter tracks under its track; the
// thread's own sequence starts again after them.
func (s *PerfettoSink) cpuCounters(ss []stream.CPUSample) {
	if len(ss) < 2 {
		return
	}
	run, wait, waitKnown := cpuShares(ss)
	runTrack, waitTrack := s.thread+1, s.thread+3
	s.sequence(runTrack)
	describe := func(uuid uint64, name string) {
		d := appendUint(nil, pfTrackUUID, uuid)
		d = appendUint(d, pfTrackParent, s.thread)
		d = appendStr(d, pfTrackName, name)
		d = appendMsg(d, pfTrackCounter, appendStr(nil, pfCounterUnitName, "%"))
		s.packet(appendMsg(nil, pfPacketDescriptor, d))
	}
	describe(runTrack, "CPU running %")
	if waitKnown {
		describe(waitTrack, "CPU runnable %")
	}
	value := func(v float64) []byte {
		b := protowire.AppendTag(s.scratch[:0], pfEventCounterReal, protowire.Fixed64Type)
		s.scratch = protowire.AppendFixed64(b, math.Float64bits(v))
		return s.scratch
	}
	for i, sm := range ss {
		var r, w float64
		if i < len(run) {
			r, w = run[i], wait[i]
		}
		s.event(sm.Nanos, pfCounter, 0, false, 0, value(r))
		if waitKnown {
			s.event(sm.Nanos, pfCounter, 0, false, waitTrack, value(w))
		}
	}
	s.sequence(s.thread)
}

// chromeCPU holds the current thread's CPU samples for a ChromeSink until their time comes: they
// are written in time order with the thread's other events (a counter event carries the
// thread's tid, and every event of a thread is in time order).
type chromeCPU struct {
	ss        []stream.CPUSample
	run, wait []float64
	waitKnown bool
	name      string
	next      int
}

// reset takes thread t's samples (none when fewer than two: no share to draw).
func (q *chromeCPU) reset(h *stream.Header, t *stream.Thread) {
	*q = chromeCPU{}
	tc := h.CPU[t.TID]
	if tc == nil || len(tc.Samples) < 2 {
		return
	}
	q.ss = tc.Samples
	q.run, q.wait, q.waitKnown = cpuShares(q.ss)
	q.name = "CPU % " + engine.ThreadLabel(t) + " " + strconv.FormatUint(t.TID, 10)
}

// pending returns the time of the next sample not written yet, if any.
func (q *chromeCPU) pending() (uint64, bool) {
	if q.next < len(q.ss) {
		return q.ss[q.next].Nanos, true
	}
	return 0, false
}

// writeCPUSample writes the thread's next CPU sample as a counter event.
func (s *ChromeSink) writeCPUSample() error {
	q := &s.cpu
	i := q.next
	q.next++
	var r, w float64
	if i < len(q.run) {
		r, w = q.run[i], q.wait[i]
	}
	b := s.head(s.evBegin(), 'C', q.name, q.ss[i].Nanos)
	b = append(b, `,"cat":"msgtrace","args":{"running":`...)
	b = strconv.AppendFloat(b, r, 'f', -1, 64)
	if q.waitKnown {
		b = append(b, `,"runnable":`...)
		b = strconv.AppendFloat(b, w, 'f', -1, 64)
	}
	b = append(b, `}}`...)
	return s.evEnd(b)
}

// writeTimedBefore writes the thread's instants and CPU samples before ts (all of them when all),
// merged in time order.
func (s *ChromeSink) writeTimedBefore(ts uint64, all bool) error {
	for {
		q := &s.inst
		inNext, inOK := uint64(0), q.next < len(q.list)
		if inOK {
			inNext = q.list[q.next].Nanos
		}
		cpuNext, cpuOK := s.cpu.pending()
		if !all {
			inOK = inOK && inNext < ts
			cpuOK = cpuOK && cpuNext < ts
		}
		switch {
		case inOK && (!cpuOK || inNext <= cpuNext):
			q.next++
			if err := s.writeTimeInstant(&q.list[q.next-1]); err != nil {
				return err
			}
		case cpuOK:
			if err := s.writeCPUSample(); err != nil {
				return err
			}
		default:
			return nil
		}
	}
}
