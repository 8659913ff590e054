package engine

import (
	"errors"
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
//
// This file is the driver (threads picked, read on two goroutines, merged, the generic path
// for the threads that need it); aggregate_read.go reads a thread backwards, aggregate_stack.go
// makes its stacks.

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

// aggParallelMin is the number of events from which threads are read on two goroutines (a
// variable for the tests).
var aggParallelMin uint64 = pipeMin
