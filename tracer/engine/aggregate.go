package engine

import (
	"errors"
	"math"
	"runtime"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/msgtrace/msgtrace/tracer/stream"
)

// The aggregates' path (pprof, folded, SVG with no filter on calls): they need each call's
// stack, its count and self time, not time order, so they need neither segment trees nor a
// walk in pre-order. Pass 1 runs without its pending stacks; then each thread's records are
// read backwards (its frames last first, each frame's events decoded and taken last first).
// Records are written children first, so backwards a call comes before the calls nested in
// it: a stack of the calls read and not yet closed gives each call its parent at once (the
// nearest open one shallower than it), and its self time once its children have been read.
// Threads are independent: they are read on two goroutines, each into a trie of its own,
// merged into the sink's in thread order at the end.
//
// The output is the generic path's, byte for byte. Which call is whose parent is what pass
// 2's pending stack decides when no call ever has orphans (a deeper subtree that started
// before it): that is checked on the way, and a thread where it fails takes the generic path
// instead, alone. Marks (losses, waits) go where the generic walk puts them: a mark between
// the records of calls p and m (file order) in m's segment goes before the first call entered
// between p's exit and m's, in time, or last inside m; one in an earlier segment than m's
// goes at the end of its segment, inside p's callers (see replayer.replay and marksUntil).
// Marks are read backwards too, so the ones between p and m are placed once p is read. The
// trie's nodes are made in the order the generic walk would meet them: each is given the
// place of the first event that would make it in the thread's walk (without marks, a call is
// entered after 2F+A events, F the records before its subtree and A its ancestors, and exits
// after 2R+A+1, R the records before its own; a mark comes just before such an event, and
// marks come in file order), and the thread's nodes are sorted by it.

// aggJob is one selected thread of the aggregates' path and what reading it gave.
type aggJob struct {
	sf  *streamFile
	st  *streamThread
	res aggThread
	err error
}

// processAggregate is ProcessStreams for aggregates only, filling tr (their Close is left to
// the caller). Pass 1 first leaves events frames undecoded (p1Lazy); when pass 2 finds that
// something it took for granted does not hold (a frame that does not decode as counted, a
// thread with orphans, the end of the trace not where it was estimated while calls are open
// at it), the conversion is made again with pass 1 decoding (p1Decode).
func processAggregate(ins []Input, opt Options, tr *StackTrie) (Totals, error) {
	mode := p1Lazy
	if opt.Threads != "" && opt.Threads != "all" { // the threads left out count for the timeline
		mode = p1Decode
	}
	tot, again, err := aggregateWith(ins, opt, tr, mode)
	if again {
		tot, _, err = aggregateWith(ins, opt, tr, p1Decode)
	}
	return tot, err
}

// aggregateWith is processAggregate with pass 1 in mode; again when p1Lazy does not do (tr
// is then untouched).
func aggregateWith(ins []Input, opt Options, tr *StackTrie, mode pass1Mode) (tot Totals, again bool, err error) {
	files, tot, err := indexStreams(ins, opt, mode)
	if err != nil {
		return tot, false, err
	}
	again, err = aggregateFiles(files, opt, tr, mode == p1Lazy, false, &tot)
	return tot, again, err
}

// aggregateFiles is the aggregates' pass 2 of the streams pass 1 indexed (lazy: in p1Lazy,
// the streams not yet settled; again when that does not do), filling tr and counting into
// tot. keep: pass 2 drives other sinks afterwards, so the threads' spans are kept.
func aggregateFiles(files []*streamFile, opt Options, tr *StackTrie, lazy, keep bool, tot *Totals) (again bool, err error) {
	var jobs []*aggJob
	var size uint64
	for _, sf := range files {
		if lazy {
			for _, st := range sf.threads {
				if st.suspect {
					return true, nil
				}
			}
			sf.estimateEnd()
		}
		for _, st := range sf.threads {
			if !threadSelected(opt.Threads, &st.t) {
				continue
			}
			jobs = append(jobs, &aggJob{sf: sf, st: st})
			size += st.t.Records
		}
	}
	// the biggest threads first, on up to two goroutines
	order := slices.Clone(jobs)
	sort.SliceStable(order, func(a, b int) bool { return order[a].st.t.Records > order[b].st.t.Records })
	workers := min(runtime.GOMAXPROCS(0), 2, len(order))
	if size < aggParallelMin {
		workers = min(workers, 1)
	}
	var next atomic.Int64
	work := func() {
		var r aggReader
		for {
			k := int(next.Add(1)) - 1
			if k >= len(order) {
				return
			}
			j := order[k]
			j.err = r.thread(j.sf, j.st, &j.res, lazy)
		}
	}
	if workers > 1 {
		var wg sync.WaitGroup
		for i := 0; i < workers; i++ {
			wg.Add(1)
			go func() { defer wg.Done(); work() }()
		}
		wg.Wait()
	} else {
		work()
	}
	if lazy {
		for _, j := range jobs {
			if j.err == errLazy || j.err == nil && j.res.orphan {
				return true, nil
			}
		}
		for _, sf := range files { // what pass 1 learns from the events, from pass 2
			for _, st := range sf.threads {
				if st.lazy.events {
					sf.tick(st.lazy.lo, st.lazy.hi)
				}
			}
			var open bool
			for _, j := range jobs {
				open = open || j.sf == sf && j.res.open > 0
			}
			if sf.haveTicks {
				sf.maxTick = max(sf.maxTick, sf.clockMax)
			}
			if open && sf.maxTick != sf.endEst { // calls open at an end that was not the trace's
				return true, nil
			}
		}
		files = settleStreams(files, opt)
	}
	byFile := map[*streamFile][]*aggJob{}
	for _, j := range jobs {
		byFile[j.sf] = append(byFile[j.sf], j)
	}
	var kept uint64
	var nFast, nGeneric int
	for _, sf := range files {
		tot.Processes++
		for _, j := range byFile[sf] {
			t := &j.st.t
			tot.Threads++
			if lazy {
				t.Dropped, t.Overflow = j.st.lazy.dropped, j.st.lazy.overflow
			}
			tot.Dropped += t.Dropped
			tot.Overflow += t.Overflow
			if j.err == nil && !j.res.orphan {
				if err := tr.BeginThread(&sf.hdr, t); err != nil {
					return false, err
				}
				shift := sf.base
				if !lazy {
					shift = 0
				}
				j.res.mergeInto(tr, shift)
				nFast++
				kept += j.res.calls
				tot.Open += j.res.open
				tot.Marks += j.res.marks
				j.res = aggThread{}
				continue
			}
			if j.err != nil {
				return false, j.err
			}
			g, n, open, err := sf.aggregateGeneric(j.st, tot, keep)
			if err != nil {
				return false, err
			}
			if err := tr.BeginThread(&sf.hdr, t); err != nil {
				return false, err
			}
			mergeTrie(tr, g)
			nGeneric++
			kept += n
			tot.Open += open
		}
		sf.w.buf = nil
	}
	tot.Calls, tot.Kept = kept, kept
	if aggTestHook != nil {
		aggTestHook(nFast, nGeneric, lazy)
	}
	return false, nil
}

// errLazy is what reading a thread backwards returns when pass 1 took for granted what its
// events do not bear out (p1Lazy).
var errLazy = errors.New("events frame not as counted")

// estimateEnd sets the stream's end tick as p1Lazy's pass 2 takes it for calls open at the
// end: the latest of its clock and open frames and of each thread's last events frame (the
// events of every frame are checked against it afterwards).
func (sf *streamFile) estimateEnd() {
	var end uint64
	if sf.haveTicks {
		end = sf.maxTick
	}
	for _, st := range sf.threads {
		if len(st.frames) == 0 {
			continue
		}
		it, err := sf.events(st.frames[len(st.frames)-1].off)
		if err != nil {
			continue
		}
		var e stream.StreamEvent
		for {
			if ok, err := it.Next(&e); err != nil || !ok {
				break
			}
			end = max(end, e.End)
		}
	}
	sf.endEst = max(end, sf.clockMax)
}

// aggTestHook, when set (by the tests), is told how many threads the aggregates' path read
// backwards and how many it left to the generic path, and whether pass 1 was p1Lazy.
var aggTestHook func(fast, generic int, lazy bool)

// aggregateGeneric is the generic path for one thread: its pass-1 analysis, then pass 2 into a
// trie of its own (which it returns, with the calls and open calls it took); keep: the
// thread's spans are kept for a pass 2 to come.
func (sf *streamFile) aggregateGeneric(st *streamThread, tot *Totals, keep bool) (*StackTrie, uint64, uint64, error) {
	if err := sf.reanalyse(st); err != nil {
		return nil, 0, 0, err
	}
	if st.openOff >= 0 {
		if err := sf.openSpans(st); err != nil {
			return nil, 0, 0, err
		}
	}
	sortSpans(st.spans)
	g := NewStackTrie()
	a := &applier{sink: PreOrder(g), ts: g, flt: newTreeFilter(Options{MaxDepth: -1})}
	em := newEmitter(a, 0)
	r := &replayer{em: em, tot: tot}
	err := em.begin(sf, &sf.hdr, &st.t)
	if err == nil {
		err = sf.replayThread(r, st)
	}
	if err == nil {
		err = em.op(rawOp{kind: opEnd})
	}
	if serr := em.stop(); err == nil {
		err = serr
	}
	if !keep {
		st.spans, st.sh.pend = nil, nil
	}
	return g, a.calls, a.open, err
}

// mergeTrie appends the one thread of g to tr, whose current thread's root it becomes.
func mergeTrie(tr, g *StackTrie) {
	root := int32(len(tr.Nodes) - 1)
	remap := make([]int32, len(g.Nodes))
	names := make([]int32, len(g.Names))
	for i := range names {
		names[i] = -1
	}
	remap[0] = root
	for i := 1; i < len(g.Nodes); i++ {
		nd := &g.Nodes[i]
		if names[nd.Name] < 0 {
			names[nd.Name] = tr.name(g.Names[nd.Name])
		}
		remap[i] = int32(len(tr.Nodes))
		tr.Nodes = append(tr.Nodes, trieNode{Parent: remap[nd.Parent], Name: names[nd.Name], Count: nd.Count, Self: nd.Self})
	}
	tr.Threads[len(tr.Threads)-1].total += g.Threads[0].total
	if g.any {
		tr.span(g.Start, 0)
		tr.End = max(tr.End, g.End)
	}
}

// aggThread is one thread read backwards: its stacks (node 0 is the thread), each with the
// place in the thread's walk of the first event that makes it.
type aggThread struct {
	nodes      []aggNode
	names      []string // by the thread's name ids
	total      uint64   // time in its outermost calls
	start, end uint64   // earliest start and latest end of its outermost calls
	any        bool
	calls      uint64
	open       uint64
	marks      uint64
	orphan     bool // a call had orphans: the thread takes the generic path
}

type aggNode struct {
	parent, name int32
	memo         int32  // the child looked up last
	idKid        int32  // the child of method idMemo-1 looked up last
	idMemo       uint64 // 0: none
	count, self  uint64
	pos          aggPos // the first event of the walk that makes it
}

// aggPos is a place in a thread's walk: the calls' entries and exits before it (without
// marks), and for a mark, its index among the thread's marks (^0 for a call's entry or exit,
// which comes after the marks just before it).
type aggPos struct{ ev, mark uint64 }

func (p aggPos) less(q aggPos) bool { return p.ev < q.ev || p.ev == q.ev && p.mark < q.mark }

func minPos(p, q aggPos) aggPos {
	if q.less(p) {
		return q
	}
	return p
}

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

// aggParallelMin is the number of events from which threads are read on two goroutines (a
// variable for the tests).
var aggParallelMin uint64 = pipeMin

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

// call takes the call recorded rec records into the thread (read backwards).
func (r *aggReader) call(id, start, end uint64, depth uint32, flags int32, rec uint64) {
	t := r.t
	stack := r.stack
	for k := len(stack) - 1; k >= 0 && stack[k].depth >= depth; k-- { // r.pop(k), in line
		e := &stack[k]
		if e.kidStart < e.startTick {
			t.orphan = true
		}
		nd := &t.nodes[e.node]
		if ev := 2*e.first + uint64(k); ev < nd.pos.ev {
			nd.pos = aggPos{ev, math.MaxUint64}
		}
		self := e.dur - min(e.dur, e.kids)
		if e.flags&(stream.FlagOpen|stream.FlagUnwound) == 0 {
			nd.self += self
		} else {
			r.exitFrame(e, self, uint64(k))
		}
		if k > 0 {
			stack[k-1].first = e.first
		}
		stack = stack[:k]
	}
	r.stack = stack
	parent := int32(0)
	sm, ok := r.clk.monoFast(start) // r.ns, in line
	if !ok {
		sm = r.clk.slow(start)
	}
	em, ok := r.clk.monoFast(end)
	if !ok {
		em = r.clk.slow(end)
	}
	base := r.sf.base
	sNs, eNs := sm-min(sm, base), em-min(em, base)
	dur := eNs - min(eNs, sNs)
	if k := len(r.stack); k > 0 {
		p := &r.stack[k-1]
		parent = p.node
		p.kidStart = start
		p.kids += dur
	} else {
		t.total += dur
		if !t.any || sNs < t.start {
			t.start = sNs
		}
		t.end = max(t.end, sNs+dur)
		t.any = true
	}
	var n int32
	if p := &t.nodes[parent]; p.idMemo == id+1 {
		n = p.idKid
	} else {
		n = r.kid(parent, r.name(id))
		p = &t.nodes[parent] // kid may have moved the nodes
		p.idMemo, p.idKid = id+1, n
	}
	t.nodes[n].count++
	t.calls++
	if flags&stream.FlagOpen != 0 {
		t.open++
	}
	r.stack = append(r.stack, aggEntry{node: n, depth: depth, flags: flags, first: rec, rec: rec, startTick: start,
		kidStart: math.MaxUint64, dur: dur})
}

// pop closes the call on top of the stack, at k: its children have all been read.
func (r *aggReader) pop(k int) {
	e := &r.stack[k]
	t := r.t
	if e.kidStart < e.startTick {
		t.orphan = true
	}
	a := uint64(k) // its ancestors
	nd := &t.nodes[e.node]
	if ev := 2*e.first + a; ev < nd.pos.ev { // a call's entry: no mark has its place
		nd.pos = aggPos{ev, math.MaxUint64}
	}
	self := e.dur - min(e.dur, e.kids)
	if e.flags&(stream.FlagOpen|stream.FlagUnwound) == 0 {
		nd.self += self
	} else {
		r.exitFrame(e, self, a)
	}
	if k > 0 {
		r.stack[k-1].first = e.first
	}
	r.stack = r.stack[:k]
}

// exitFrame puts the self time of a call still running at the end, or unwound, on its child
// frame "[running]" or "[unwound]", made at the call's exit (a: its ancestors).
func (r *aggReader) exitFrame(e *aggEntry, self, a uint64) {
	name := FrameUnwound
	if e.flags&stream.FlagOpen != 0 {
		name = FrameRunning
	}
	nm, ok := r.byName[name]
	if !ok {
		nm = r.newName(name)
	}
	c := r.kid(e.node, nm)
	nd := &r.t.nodes[c]
	nd.self += self
	nd.pos = minPos(nd.pos, aggPos{2*e.rec + a + 1, math.MaxUint64})
}

// place puts the marks read since the last record (m, in r.after) where the generic walk
// would, now that the record before them (p, at depth; -1: none, the thread's start) is about
// to be read: the calls on the stack that p closes are those entered between p's exit and
// m's, outermost first.
func (r *aggReader) place(depth int64) {
	c := len(r.stack)
	for c > 0 && int64(r.stack[c-1].depth) >= depth {
		c--
	}
	top := len(r.stack) - 1
	m := r.after
	mSeg := int32(-1) // m's segment (-1: no m)
	if r.aEv != math.MaxUint64 {
		mSeg = int32(r.aEv / uint64(segEvents))
	}
	next := c // the chain's next call a mark may come before
	for k := len(r.gap) - 1; k >= 0; k-- {
		g := &r.gap[k]
		in := c - 1 // the innermost call the mark is inside (-1: none)
		ev := 2*m + uint64(c)
		if g.seg == mSeg { // before the first call of the chain that starts at or after it
			for next <= top && r.ns(r.stack[next].startTick) < g.m.StartNanos {
				next++
			}
			in, ev = next-1, 2*m+uint64(next)
			if next > top { // last inside m
				in, ev = top, 2*m+uint64(top)+1
			}
		}
		parent := int32(0)
		dur := g.m.DurNanos
		if in >= 0 {
			parent = r.stack[in].node
			r.stack[in].kids += dur
		} else {
			t := r.t
			t.total += dur
			if !t.any || g.m.StartNanos < t.start {
				t.start = g.m.StartNanos
			}
			t.end = max(t.end, g.m.StartNanos+dur)
			t.any = true
		}
		k := markKey{g.m.Kind, g.m.Count}
		if k.kind == stream.MarkWait {
			k.count = 0
		}
		nm, ok := r.marks[k]
		if !ok {
			label := MarkLabel(&g.m)
			if nm, ok = r.byName[label]; !ok {
				nm = r.newName(label)
			}
			r.marks[k] = nm
		}
		n := r.kid(parent, nm)
		nd := &r.t.nodes[n]
		nd.count += g.m.Count
		nd.self += dur
		nd.pos = minPos(nd.pos, aggPos{ev, g.index})
	}
	r.gap = r.gap[:0]
}

// name returns the thread's name id of a method.
func (r *aggReader) name(id uint64) int32 {
	if id < uint64(len(r.ids)) {
		if v := r.ids[id]; v != 0 {
			return v - 1
		}
	}
	return r.nameSlow(id)
}

func (r *aggReader) nameSlow(id uint64) int32 {
	if v, ok := r.bigIDs[id]; ok {
		return v
	}
	s, _, _ := r.sf.method(id)
	nm, ok := r.byName[s]
	if !ok {
		nm = r.newName(s)
	}
	if id < 1<<20 {
		if id >= uint64(len(r.ids)) {
			r.ids = append(r.ids, make([]int32, int(id)+1-len(r.ids))...)
		}
		r.ids[id] = nm + 1
	} else {
		r.bigIDs[id] = nm
	}
	return nm
}

func (r *aggReader) newName(s string) int32 {
	nm := int32(len(r.t.names))
	r.t.names = append(r.t.names, s)
	r.byName[s] = nm
	return nm
}

// kid returns the node of name under parent, made when new.
func (r *aggReader) kid(parent, nm int32) int32 {
	nodes := r.t.nodes
	if m := nodes[parent].memo; m > 0 && nodes[m].name == nm {
		return m
	}
	key := uint64(uint32(parent))<<32 | uint64(uint32(nm))
	s := r.kids.slot(key)
	n := s.node
	if n == 0 { // node 0 is the thread's root, never a child
		n = int32(len(nodes))
		r.t.nodes = append(nodes, aggNode{parent: parent, name: nm, pos: aggPos{math.MaxUint64, math.MaxUint64}})
		r.kids.add(s, key, n)
	}
	r.t.nodes[parent].memo = n
	return n
}

// mergeInto appends the thread's stacks to tr, whose current thread's root is the thread's, in
// the order the generic walk makes them.
func (t *aggThread) mergeInto(tr *StackTrie, shift uint64) {
	order := make([]int32, 0, len(t.nodes)-1)
	for i := 1; i < len(t.nodes); i++ {
		order = append(order, int32(i))
	}
	sort.Slice(order, func(a, b int) bool { return t.nodes[order[a]].pos.less(t.nodes[order[b]].pos) })
	remap := make([]int32, len(t.nodes))
	remap[0] = int32(len(tr.Nodes) - 1)
	names := make([]int32, len(t.names))
	for i := range names {
		names[i] = -1
	}
	for _, i := range order {
		nd := &t.nodes[i]
		if names[nd.name] < 0 {
			names[nd.name] = tr.name(t.names[nd.name])
		}
		remap[i] = int32(len(tr.Nodes))
		tr.Nodes = append(tr.Nodes, trieNode{Parent: remap[nd.parent], Name: names[nd.name], Count: nd.count, Self: nd.self})
	}
	tr.Threads[len(tr.Threads)-1].total += t.total
	if t.any {
		tr.span(t.start-min(t.start, shift), 0)
		tr.End = max(tr.End, t.end-min(t.end, shift))
	}
}
