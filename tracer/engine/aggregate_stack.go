// The aggregates' path's stacks (aggregate.go): a thread read backwards made into its nodes,
// each call given its parent from the stack of calls not yet closed and its self time once its
// children are read, marks placed where the generic walk puts them, and the thread's nodes
// merged into the sink's trie in the order the generic walk makes them.

package engine

import (
	"math"
	"sort"

	"github.com/msgtrace/msgtrace/tracer/stream"
)

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
