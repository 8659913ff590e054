// The aggregates' path's reader (aggregate.go): one thread's frames read backwards, last first,
// its events decoded in chunks and checked against what pass 1 counted, each record and mark
// handed to the stack of open calls (aggregate_stack.go).

package engine

import (
	"math"
	"slices"
	"sort"

	"github.com/msgtrace/msgtrace/tracer/stream"
)

// aggMark is a mark read and not yet placed.
type aggMark struct {
	m     stream.Mark
	seg   int32
	index uint64 // among the thread's marks
}

// aggEntry is a call read and not yet closed (its children are still being read).
type aggEntry struct {
	node      int32
	depth     uint32 // in the stream
	flags     int32
	first     uint64 // the records before its subtree's first (so far)
	rec       uint64 // the records before its own
	startTick uint64
	kidStart  uint64 // start tick of its child read last (its first child; ^0: none yet)
	dur, kids uint64 // ns: its duration, its children's and the marks' inside it (the generic
	// path takes both from its duration, each saturated: the same as their sum, saturated)
}

// aggReader reads threads backwards, one at a time, on one goroutine.
type aggReader struct {
	w      window
	clk    clockMap
	clkOf  *streamFile
	evs    []stream.StreamEvent
	checks []stream.EventIter
	stack  []aggEntry
	gap    []aggMark // marks read since the last record, last first
	after  uint64    // the records before the gap's end (the last record read)
	aEv    uint64    // the events before the last record read (^0: none)
	ids    []int32   // method id -> the thread's name id + 1 (0: not yet)
	bigIDs map[uint64]int32
	byName map[string]int32
	marks  map[markKey]int32 // marks' labels' name ids
	kids   kidIndex          // (parent, name) -> node
	t      *aggThread
	sf     *streamFile
}

// aggChunk is the number of events of a frame decoded at once: a bigger frame is decoded
// once to note where each chunk starts, then chunk by chunk, last first.
const aggChunk = 1 << 16

// thread reads st of sf backwards into t (lazy: pass 1 was p1Lazy; errLazy when the thread's
// events are not as it took them).
func (r *aggReader) thread(sf *streamFile, st *streamThread, t *aggThread, lazy bool) error {
	if r.clkOf != sf {
		r.clk, r.clkOf = sf.clock, sf
	}
	r.w = window{r: sf.w.r, size: sf.w.size, ahead: 256 << 10, back: true, buf: r.w.buf[:0]}
	defer func() { r.w.r = nil }()
	frames, sorted := st.frames, st.unordered
	for {
		restart, err := r.read(sf, st, t, frames, sorted, lazy)
		if err != nil || !restart {
			return err
		}
		// frames out of order, found on the way: every frame's end ticks, then sorted
		frames = slices.Clone(st.frames)
		for i := range frames {
			if err := r.frameInfo(&frames[i], lazy); err != nil {
				return err
			}
		}
		sorted = true
	}
}

// aggRecs is where records and marks are counted from, down (their places only count
// relative to each other's).
const aggRecs = 1 << 40

// frameInfo decodes the frame fr refers to, to fill in its first and last end ticks and its
// calls' least depth, as pass 1 does.
func (r *aggReader) frameInfo(fr *frameRef, lazy bool) error {
	bad := errChanged
	if lazy {
		bad = errLazy
	}
	it, err := eventsWith(&r.w, fr.off)
	if err != nil {
		return err
	}
	var e stream.StreamEvent
	fr.minDepth = stream.MaxStreamDepth + 1
	for k := uint32(0); ; k++ {
		ok, err := it.Next(&e)
		if err != nil || !ok && k != fr.n {
			return bad
		}
		if !ok {
			return nil
		}
		if k == 0 {
			fr.first = e.End
		}
		fr.last = e.End
		if e.Type != stream.EventMark {
			fr.minDepth = min(fr.minDepth, uint32(e.Depth))
		}
	}
}

// read is thread with st's frames given (sorted: sort them as pass 1's analysis does; else
// restart when they turn out not to be in order).
func (r *aggReader) read(sf *streamFile, st *streamThread, t *aggThread, frames []frameRef, sorted, lazy bool) (restart bool, err error) {
	r.sf, r.t = sf, t
	*t = aggThread{nodes: []aggNode{{parent: -1, name: -1}}}
	r.ids = r.ids[:0]
	clear(r.bigIDs)
	clear(r.byName)
	clear(r.marks)
	if r.byName == nil {
		r.byName, r.bigIDs, r.marks = map[string]int32{}, map[uint64]int32{}, map[markKey]int32{}
	}
	r.kids.reset()
	r.stack = r.stack[:0]
	bad := errChanged
	if lazy {
		bad = errLazy
	}
	if sorted { // as pass 1's analysis orders them
		frames = slices.Clone(frames)
		sort.SliceStable(frames, func(a, b int) bool {
			fa, fb := &frames[a], &frames[b]
			if fa.first != fb.first {
				return fa.first < fb.first
			}
			return fa.last < fb.last
		})
	}
	rec := uint64(aggRecs) // records before the one being read, + 1
	var events uint64
	for _, fr := range frames {
		events += uint64(fr.n)
	}
	marks := uint64(aggRecs)
	learnt := lazyLearnt{lo: math.MaxUint64}
	r.gap, r.after, r.aEv = r.gap[:0], rec, math.MaxUint64
	if st.openOff >= 0 {
		info := frames
		if lazy && !sorted { // the end ticks of the frames that may close open calls
			info = slices.Clone(frames)
			p, err := frameAtWith(&r.w, st.openOff)
			if err != nil {
				return false, errChanged
			}
			_, tick, _, err := stream.EventsHeader(p)
			if err != nil {
				return false, errChanged
			}
			for i := len(info) - 1; i >= 0; i-- {
				if err := r.frameInfo(&info[i], lazy); err != nil {
					return false, err
				}
				if info[i].first < tick {
					break
				}
			}
		}
		open, err := sf.openCalls(st, &r.w, info)
		if err != nil {
			return false, err
		}
		end := sf.maxTick
		if lazy {
			end = sf.endEst
		}
		for i := range open { // as if their records came after every event, innermost first
			c := &open[i]
			r.call(c.id, c.start, max(end, c.start), uint32(c.depth), stream.FlagOpen, rec+uint64(len(open)-1-i))
		}
	}
	minFirst := uint64(math.MaxUint64) // of the frames read (the later ones)
	for f := len(frames) - 1; f >= 0; f-- {
		p, err := frameAtWith(&r.w, frames[f].off)
		if err != nil {
			return false, err
		}
		_, prev, evs, err := stream.EventsHeader(p)
		if err != nil {
			return false, errChanged
		}
		it := stream.EventIter{Buf: evs, Prev: prev}
		n := int(frames[f].n)
		r.checks = append(r.checks[:0], it)
		if n > aggChunk { // where each chunk starts
			var e stream.StreamEvent
			for k := 1; k < n; k++ {
				if ok, err := it.Next(&e); err != nil || !ok {
					return false, bad
				}
				if k%aggChunk == 0 {
					r.checks = append(r.checks, it)
				}
			}
		}
		for c := len(r.checks) - 1; c >= 0; c-- {
			it := r.checks[c]
			m := min(aggChunk, n-c*aggChunk)
			if cap(r.evs) < m {
				r.evs = make([]stream.StreamEvent, m)
			}
			evs := r.evs[:m]
			for k := range evs {
				if ok, err := it.Next(&evs[k]); err != nil || !ok {
					return false, bad
				}
			}
			if c == len(r.checks)-1 {
				var e stream.StreamEvent
				if ok, err := it.Next(&e); ok || err != nil { // more events than counted
					return false, bad
				}
				if !sorted && m > 0 && evs[m-1].End > minFirst { // out of order: pass 1 sorts them
					return true, nil
				}
			}
			if c == 0 && m > 0 {
				minFirst = min(minFirst, evs[0].End)
			}
			for k := m - 1; k >= 0; k-- {
				e := &evs[k]
				if events == 0 {
					return false, bad
				}
				events--
				learnt.lo, learnt.hi = min(learnt.lo, e.Start), max(learnt.hi, e.End)
				if e.Type == stream.EventMark {
					marks--
					switch stream.MarkKind(e.ID) {
					case stream.MarkLost:
						learnt.dropped += e.Count
					case stream.MarkOverflow:
						learnt.overflow += e.Count
					case stream.MarkRelease: // a lock's release: no frame of its own
						continue
					}
					if stream.MarkKind(e.ID).Hop() { // no stack of its own: a flow's end
						continue
					}
					start := r.ns(e.Start)
					r.gap = append(r.gap, aggMark{stream.Mark{Kind: stream.MarkKind(e.ID), StartNanos: start, DurNanos: r.ns(e.End) - start, Count: e.Count},
						int32(events / uint64(segEvents)), marks})
					continue
				}
				rec--
				fl := int32(0)
				if e.Type == stream.EventUnwound {
					fl = stream.FlagUnwound
				}
				if len(r.gap) > 0 {
					r.place(int64(e.Depth))
				}
				r.call(e.ID, e.Start, e.End, uint32(e.Depth), fl, rec)
				r.after, r.aEv = rec, events
			}
		}
	}
	if len(r.gap) > 0 {
		r.place(-1)
	}
	for k := len(r.stack) - 1; k >= 0; k-- {
		r.pop(k)
	}
	if events != 0 {
		return false, bad
	}
	t.marks = aggRecs - marks
	learnt.events = len(frames) > 0
	st.lazy = learnt
	return false, nil
}

// ns converts a tick of the thread's stream to ns on the trace's timeline.
func (r *aggReader) ns(tick uint64) uint64 {
	m, ok := r.clk.monoFast(tick)
	if !ok {
		m = r.clk.slow(tick)
	}
	if m < r.sf.base {
		return 0
	}
	return m - r.sf.base
}
