package engine

import (
	"encoding/binary"
	"errors"
	"sort"

	"github.com/msgtrace/msgtrace/tracer/stream"
)

// Pre-order from a post-order stream, in memory bounded by stack depth.
//
// A thread's events come in the order its calls ended (a call after every call nested in it).
// Timelines want pre-order (a call before its children), and in a GUI app one call (the run
// loop) encloses the whole run: rebuilding each outermost call's tree before writing it would
// hold every call of the run. Instead, a thread's events are cut into segments (an events
// frame, or segEvents, 16 Ki, events of a bigger one) and pre-order is produced segment by
// segment: all that a segment lacks is which calls that end in a later segment must be entered
// in it, and where. Pass 1 finds them with a stack of pending groups (below); pass 2 replays each
// segment's own little tree plus those calls, keeping an output stack of the calls entered and
// not yet exited.
//
// The pending stack: a call's record adopts, as its children, the subtrees that are not yet
// claimed and are deeper than it (as PreOrder does), but only those that started at or after
// it: a deeper subtree that started before it lost its parent's record (lost calls) and is
// made its preceding sibling instead, so that nothing is ever nested under a call that starts
// after it. Adjacent groups at one depth merge, so depths strictly increase up the stack and it
// never holds more than the deepest stack. Each group remembers the earliest segment among its
// subtrees: a record that adopts a group from an earlier segment spans segments, and is entered
// in that earlier segment (a spanCall). Pass 2 runs the identical stack, so it tells which
// records close calls it already entered.
//
// This file is pass 1's side (segments, the pending stack, the spans, the calls open at the
// end); pass 2 is stream_replay.go.

// segEvents is the number of events of a segment (the working set of pass 2): the calls that
// span segments are what pass 1 keeps, so segments are made large (several frames), but their
// nodes (56 bytes each: 0.9 MiB) are kept within a core's 2 MiB L2 with room for the rest of
// the reader's work: at 32 Ki events (1.8 MiB) a cache simulation of a 2 MiB L2 counted 2.2
// misses a call replaying oneloop to speedscope, at 16 Ki 0.28.
// (A variable for the tests, which cut segments of a few events.)
var segEvents uint32 = 1 << 14

// segCounter numbers a thread's events' segments.
type segCounter struct {
	seg  int32
	fill uint32 // events in segment seg
}

// next returns the next event's segment, and whether that is a new segment after an earlier.
func (s *segCounter) next() (seg int32, started bool) {
	if s.fill == segEvents {
		s.seg, s.fill, started = s.seg+1, 0, true
	}
	s.fill++
	return s.seg, started
}

// count is the number of segments so far.
func (s *segCounter) count() int32 {
	if s.fill > 0 {
		return s.seg + 1
	}
	return s.seg
}

// pendGroupShape is a run of sibling subtrees not yet claimed by a parent.
type pendGroupShape struct {
	depth uint32
	seg   int32  // earliest segment of any call in the group
	start uint64 // start tick of its first call
	epoch uint32 // losses before its last call: when calls were lost since (its epoch is not
	// the stack's), a later call at its depth starts a new group
}

// maxPend bounds the pending stack: past it, sealed groups take later calls again.
const maxPend = 1 << 16

// shape is the pending stack of one thread, identical in both passes.
type shape struct {
	pend  []pendGroupShape
	epoch uint32 // losses so far
}

// call takes a call's record at depth, starting at start, in segment seg. It returns the index
// in pend from which the groups are its children (len(pend) before the call: none), the index
// from which they are orphans merged before it (i <= j), and the earliest segment of its
// subtree (seg when it has no pending children). The caller must call commit afterwards.
func (s *shape) claim(depth uint32, start uint64, seg int32) (i, j int, minSeg int32) {
	i = len(s.pend)
	for i > 0 && s.pend[i-1].depth > depth {
		i--
	}
	j = i
	for j < len(s.pend) && s.pend[j].start < start {
		j++
	}
	minSeg = seg
	if j < len(s.pend) {
		minSeg = s.pend[j].seg
	}
	return i, j, minSeg
}

// commit replaces pend[i:] by the orphans from i to j as one sealed group at the call's
// depth (when there are any), then the call, in a group of its own or joining the group below
// at its depth (merged) unless that one is sealed.
func (s *shape) commit(depth uint32, start uint64, i, j int, minSeg int32) (orphans, merged bool) {
	og := pendGroupShape{depth: depth}
	if i < j {
		og = pendGroupShape{depth, s.pend[i].seg, s.pend[i].start, s.epoch - 1} // sealed
	}
	s.pend = s.pend[:i]
	if i < j {
		s.pend = append(s.pend, og)
		orphans = true
	}
	if k := len(s.pend) - 1; k >= 0 && s.pend[k].depth == depth && (s.pend[k].epoch == s.epoch || len(s.pend) >= maxPend) {
		s.pend[k].epoch = s.epoch
		return orphans, true
	}
	var g *pendGroupShape
	s.pend, g = AppendSlot(s.pend)
	g.depth, g.seg, g.start, g.epoch = depth, minSeg, start, s.epoch
	return orphans, false
}

// seal is a loss: calls whose records were lost may be the parents of the pending groups, so
// calls that come later at their depths are not their siblings.
func (s *shape) seal() { s.epoch++ }

// spanCall is a call whose record comes in a later segment than the one it is entered in, or
// a call still open at the end of the thread.
type spanCall struct {
	seg        int32
	depth      uint32
	flags      int32 // FlagUnwound, FlagOpen
	id         uint64
	start, end uint64 // ticks; end unknown (0) for open calls until the trace's end is known
}

// sortSpans orders a thread's spans for pass 2: by segment, outermost first.
func sortSpans(sp []spanCall) {
	sort.Slice(sp, func(a, b int) bool {
		if sp[a].seg != sp[b].seg {
			return sp[a].seg < sp[b].seg
		}
		return sp[a].depth < sp[b].depth
	})
}

// shapeCall is pass 1's step for one call record in segment seg.
func (st *streamThread) shapeCall(e *stream.StreamEvent, seg int32) {
	depth := uint32(e.Depth)
	i, j, minSeg := st.sh.claim(depth, e.Start, seg)
	st.sh.commit(depth, e.Start, i, j, minSeg)
	if minSeg < seg {
		fl := int32(0)
		if e.Type == stream.EventUnwound {
			fl = stream.FlagUnwound
		}
		st.spans = append(st.spans, spanCall{seg: minSeg, depth: depth, flags: fl, id: e.ID, start: e.Start, end: e.End})
	}
}

// finishThreads ends pass 1: threads whose frames came out of order are sorted and analysed
// again; calls still open at the end become spans; spans are sorted for pass 2.
func (sf *streamFile) finishThreads() error {
	for _, st := range sf.threads {
		if st.unordered {
			if err := sf.reanalyse(st); err != nil {
				return err
			}
		}
		if st.openOff >= 0 {
			if err := sf.openSpans(st); err != nil {
				return err
			}
		}
		sortSpans(st.spans)
	}
	return nil
}

// reanalyse puts a thread's frames in the order its calls ended (by their first and last end
// ticks) and runs the pass-1 analysis again over them.
func (sf *streamFile) reanalyse(st *streamThread) error {
	sort.SliceStable(st.frames, func(a, b int) bool {
		fa, fb := &st.frames[a], &st.frames[b]
		if fa.first != fb.first {
			return fa.first < fb.first
		}
		return fa.last < fb.last
	})
	st.sh.pend, st.sh.epoch, st.spans, st.segs = st.sh.pend[:0], 0, st.spans[:0], segCounter{}
	var e stream.StreamEvent
	for _, fr := range st.frames {
		it, err := sf.events(fr.off)
		if err != nil {
			return err
		}
		for {
			if ok, err := it.Next(&e); err != nil {
				return errChanged
			} else if !ok {
				break
			}
			seg, _ := st.segs.next()
			if e.Type != stream.EventMark {
				st.shapeCall(&e, seg)
			} else if stream.MarkKind(e.ID) == stream.MarkLost {
				st.sh.seal()
			}
		}
	}
	return nil
}

var errChanged = errors.New("stream changed while being read")

// events returns an iterator over the events of the events frame at off.
func (sf *streamFile) events(off int64) (stream.EventIter, error) { return eventsWith(&sf.w, off) }

// eventsWith is events reading through w.
func eventsWith(w *window, off int64) (stream.EventIter, error) {
	p, err := frameAtWith(w, off)
	if err != nil {
		return stream.EventIter{}, err
	}
	if len(p) < 16 {
		return stream.EventIter{}, errChanged
	}
	return stream.EventIter{Buf: p[16:], Prev: binary.LittleEndian.Uint64(p[8:])}, nil
}

// openSpans finds which calls of the thread's latest open frame no later record closed (a
// call at depth d that ended after the frame was taken closes every open call at depth d or
// deeper; so does the record of an open call itself) and makes them spans, innermost first,
// as if their records came after every event of the thread.
func (sf *streamFile) openSpans(st *streamThread) error {
	open, err := sf.openCalls(st, &sf.w, st.frames)
	if err != nil {
		return err
	}
	for i := len(open) - 1; i >= 0; i-- {
		c := open[i]
		depth := uint32(c.depth)
		a, b, minSeg := st.sh.claim(depth, c.start, st.segs.count())
		st.sh.commit(depth, c.start, a, b, minSeg)
		st.spans = append(st.spans, spanCall{seg: minSeg, depth: depth, flags: stream.FlagOpen, id: c.id, start: c.start})
	}
	return nil
}

// openCalls returns the calls of the thread's latest open frame that no later record closed,
// outermost first, reading through w, the thread's events frames being frames.
func (sf *streamFile) openCalls(st *streamThread, w *window, frames []frameRef) ([]openEntry, error) {
	p, err := frameAtWith(w, st.openOff)
	if err != nil {
		return nil, err
	}
	d := stream.Decoder{Buf: p}
	d.U64()
	tick := d.U64()
	var open []openEntry
	for len(d.Buf) > 0 && !d.Bad {
		id, age, depth := d.Uvarint(), d.Uvarint(), d.Uvarint()
		open = append(open, openEntry{id, tick - age, depth})
	}
	if d.Bad {
		return nil, errChanged
	}
	k := len(open)
	closeAt := func(depth uint64) {
		k = min(k, sort.Search(k, func(x int) bool { return open[x].depth >= depth }))
	}
	var e stream.StreamEvent
	for _, fr := range frames {
		if fr.last < tick {
			continue
		}
		if fr.first > tick {
			if fr.minDepth <= stream.MaxStreamDepth {
				closeAt(uint64(fr.minDepth))
			}
			continue
		}
		it, err := eventsWith(w, fr.off)
		if err != nil {
			return nil, err
		}
		for {
			if ok, err := it.Next(&e); err != nil {
				return nil, errChanged
			} else if !ok {
				break
			}
			if e.Type == stream.EventMark || e.End < tick {
				continue
			}
			j := sort.Search(k, func(x int) bool { return open[x].depth >= e.Depth })
			if e.End > tick || (j < k && open[j].depth == e.Depth && open[j].start == e.Start) {
				k = j
			}
		}
	}
	return open[:k], nil
}
