package engine

import (
	"math"
	"runtime"
	"slices"
	"sync"

	"github.com/msgtrace/msgtrace/tracer/stream"
)

// Pass 1's events analysis on the second core. Checking frames (CRC) and reading the small
// frames stays on the reading goroutine; each thread's events frames (decoding every event,
// its pending stack, the durations' histogram) go to one analyser, a goroutine per core, in
// batches of copied payloads (a few hundred KiB, three per analyser at most). A thread always
// goes to the same analyser, so its frames are analysed in file order as before; what the
// analysers add up (durations, tick span, bad frames) is merged at the end, and which threads
// the stream has, in the order the file made them threads, is settled then.

// parallelPass1Min is the stream size from which pass 1 uses analyser goroutines (a variable
// for the tests).
var parallelPass1Min int64 = 1 << 20

const p1BatchBytes = 128 << 10

// pass1Mode is what pass 1 does with events frames.
type pass1Mode uint8

const (
	p1Shapes pass1Mode = iota // decoded; pending stacks, spans and durations (the generic path)
	p1Spans                   // p1Shapes without the durations: no sink has a budget to fold by
	p1Decode                  // decoded (the aggregates' path, when p1Lazy would not do)
	p1Lazy                    // not decoded: their events counted (the aggregates' path, which
	// decodes them and checks what was taken for granted; see aggregate.go)
)

// lazyEvents is p1Lazy's pass 1 of an events frame of st at off: its events are counted (each
// is four varints: bytes below 0x80 end them), and the frame is taken as valid (the
// aggregates' pass 2 finds out; a frame that cannot be counted makes the thread suspect).
func lazyEvents(st *streamThread, off int64, b []byte) {
	ends := 0
	for _, c := range b {
		ends += int(^c >> 7)
	}
	if ends%4 != 0 || len(b) > 0 && b[len(b)-1] >= 0x80 {
		st.suspect = true
		return
	}
	n := ends / 4
	if n == 0 {
		return
	}
	if st.evReg < 0 {
		st.evReg = off
	}
	st.frames = append(st.frames, frameRef{off: off, minDepth: stream.MaxStreamDepth + 1, n: uint32(n)})
	st.events = true
	st.t.Records += uint64(n)
}

// analyser analyses events frames: on the reading goroutine (inline), or on its own.
type analyser struct {
	undo     shape   // a thread's pending stack before the frame being analysed
	durs     durHist // calls by duration, in ticks
	lo, hi   uint64  // tick span of the events analysed
	haveTick bool
	bad      uint64 // malformed frames (goroutine analysers: the reader counts the inline one's)
	badBytes uint64
	mode     pass1Mode

	in   chan *p1Batch // nil: inline
	free chan *p1Batch
	cur  *p1Batch
	wg   sync.WaitGroup
}

type p1Batch struct {
	items []p1Item
	buf   []byte
}

type p1Item struct {
	st   *streamThread
	off  int64
	prev uint64
	at   int // its events' bytes: buf[at:at+n]
	n    int
}

func newP1Batch() *p1Batch {
	return &p1Batch{items: make([]p1Item, 0, 64), buf: make([]byte, 0, p1BatchBytes)}
}

// startAnalysers makes one inline analyser, or one goroutine per core for a big stream.
func (sf *streamFile) startAnalysers(size int64, mode pass1Mode) {
	n := min(runtime.GOMAXPROCS(0), 2)
	if n < 2 || size < parallelPass1Min || mode == p1Lazy {
		sf.an = []*analyser{{mode: mode}}
		return
	}
	for i := 0; i < n; i++ {
		a := &analyser{in: make(chan *p1Batch, 1), free: make(chan *p1Batch, 2), cur: newP1Batch(), mode: mode}
		a.free <- newP1Batch()
		a.wg.Add(1)
		go a.run()
		sf.an = append(sf.an, a)
	}
}

func (a *analyser) run() {
	defer a.wg.Done()
	for b := range a.in {
		for i := range b.items {
			it := &b.items[i]
			if err := a.analyse(it.st, it.off, it.prev, b.buf[it.at:it.at+it.n]); err != nil {
				a.bad++
				a.badBytes += uint64(stream.FrameHeader + 16 + it.n)
			}
		}
		clear(b.items)
		b.items, b.buf = b.items[:0], b.buf[:0]
		a.free <- b
	}
}

// events takes an events frame of thread st at off (prev: its header's previous end tick;
// b: its events): analysed now (errMalformed when it does not decode), or copied and handed
// to the analyser's goroutine.
func (a *analyser) events(st *streamThread, off int64, prev uint64, b []byte) error {
	if a.mode == p1Lazy {
		lazyEvents(st, off, b)
		return nil
	}
	if a.in == nil {
		return a.analyse(st, off, prev, b)
	}
	if len(a.cur.items) > 0 && len(a.cur.buf)+len(b) > p1BatchBytes {
		a.in <- a.cur
		a.cur = <-a.free
	}
	a.cur.items = append(a.cur.items, p1Item{st: st, off: off, prev: prev, at: len(a.cur.buf), n: len(b)})
	a.cur.buf = append(a.cur.buf, b...)
	return nil
}

// stopAnalysers hands over what is left and waits for the analysers' goroutines to end.
func (sf *streamFile) stopAnalysers() {
	for _, a := range sf.an {
		if a.in == nil {
			continue
		}
		if len(a.cur.items) > 0 {
			a.in <- a.cur
			a.cur = nil
		}
		close(a.in)
		a.wg.Wait()
		a.in = nil
	}
}

// mergeAnalysers adds up what the analysers found, and settles the stream's threads: those
// a frame made threads (thread and open frames, events frames with events), in the order of
// the first such frame of each.
func (sf *streamFile) mergeAnalysers() {
	for _, a := range sf.an {
		for b, c := range a.durs.n {
			sf.durs.n[b] += c
		}
		sf.durs.total += a.durs.total
		sf.durs.maxDur = max(sf.durs.maxDur, a.durs.maxDur)
		if a.haveTick {
			sf.tick(a.lo, a.hi)
		}
		sf.badFrames += a.bad
		sf.badBytes += a.badBytes
	}
	sf.an = nil
	var ths []*streamThread
	for _, st := range sf.metOrder {
		if st.evReg >= 0 && (st.reg < 0 || st.evReg < st.reg) {
			st.reg = st.evReg
		}
		if st.reg >= 0 {
			ths = append(ths, st)
		}
	}
	slices.SortStableFunc(ths, func(x, y *streamThread) int {
		switch {
		case x.reg < y.reg:
			return -1
		case x.reg > y.reg:
			return 1
		}
		return 0
	})
	sf.threads = ths
	for _, st := range ths {
		sf.byTID[st.t.TID] = st
	}
	sf.met, sf.metOrder = nil, nil
}

// analyse decodes an events frame of st and analyses it (pass 1); a frame that turns out
// malformed is undone (errMalformed).
func (a *analyser) analyse(st *streamThread, off int64, prev uint64, b []byte) error {
	a.undo.pend, a.undo.epoch = append(a.undo.pend[:0], st.sh.pend...), st.sh.epoch
	spans, unordered, segs := len(st.spans), st.unordered, st.segs
	fr := frameRef{off: off, minDepth: stream.MaxStreamDepth + 1}
	var calls, lost, overflow, marks, hops uint64
	lo, hi := uint64(math.MaxUint64), uint64(0)
	analyse := !st.unordered && (a.mode == p1Shapes || a.mode == p1Spans)
	it := stream.EventIter{Buf: b, Prev: prev}
	var e stream.StreamEvent
	for k := uint32(0); ; k++ {
		ok, err := it.Next(&e)
		if err != nil {
			st.sh.pend, st.sh.epoch = append(st.sh.pend[:0], a.undo.pend...), a.undo.epoch
			st.spans, st.unordered, st.segs = st.spans[:spans], unordered, segs
			return stream.ErrMalformed
		}
		if !ok {
			fr.n = k
			break
		}
		if k == 0 {
			fr.first = e.End
			if st.events && e.End < st.lastEnd {
				st.unordered, analyse = true, false
			}
		}
		lo, hi = min(lo, e.Start), max(hi, e.End)
		var seg int32
		if analyse { // (segments are counted again by reanalyse)
			seg, _ = st.segs.next()
		}
		switch {
		case e.Type != stream.EventMark:
			calls++
			if a.mode == p1Shapes {
				a.durs.add(e.End-e.Start, 1)
			}
			fr.minDepth = min(fr.minDepth, uint32(e.Depth))
			if analyse {
				st.shapeCall(&e, seg)
			}
			continue
		}
		marks++
		switch {
		case stream.MarkKind(e.ID) == stream.MarkLost:
			lost += e.Count
			if analyse {
				st.sh.seal()
			}
		case stream.MarkKind(e.ID) == stream.MarkOverflow:
			overflow += e.Count
		case stream.MarkKind(e.ID).Hop():
			hops++
		}
	}
	if fr.n == 0 {
		return nil
	}
	if st.evReg < 0 {
		st.evReg = off
	}
	fr.last = e.End
	st.events, st.lastEnd = true, max(st.lastEnd, fr.last)
	st.frames = append(st.frames, fr)
	st.t.Records += calls
	st.t.Dropped += lost
	st.t.Overflow += overflow
	st.marks += marks
	st.hopMarks += hops
	if hi >= lo {
		if !a.haveTick {
			a.lo, a.hi, a.haveTick = lo, hi, true
		} else {
			a.lo, a.hi = min(a.lo, lo), max(a.hi, hi)
		}
	}
	return nil
}
