// Pass 2 of pre-order (the scheme: stream_tree.go): each segment of a thread replayed as its own
// little tree plus the calls spanning segments entered in it, the pending stack run again to tell
// which records close calls already entered, marks put between the calls where they happened.

package engine

import (
	"github.com/msgtrace/msgtrace/tracer/stream"
)

// segNode is one call of the segment being replayed.
type segNode struct {
	id                uint64
	start, end        uint64 // ticks
	depth             uint32
	flags             int32
	kind              uint8 // nodeCall, nodeExit (entered earlier), nodeEnter (exits later)
	post              int32 // its record's place among the segment's records (spans: after all)
	first, last, next int32
}

const (
	nodeCall  = 0
	nodeExit  = 1
	nodeEnter = 2
)

// segGroup is a pending group of pass 2: the shape and the segment's nodes in it.
type segGroup struct {
	head, tail int32
}

// replayer is pass 2 for one thread at a time: segments in, Enter/Exit/Mark out.
type replayer struct {
	sf     *streamFile
	em     *emitter
	tot    *Totals
	thread *stream.Thread

	sh     shape
	groups []segGroup // parallel to sh.pend
	nodes  []segNode
	recs   int32 // records of the segment so far
	exits  int32 // records of the segment exited so far
	marks  []stream.Mark
	mprev  []int32 // per mark: the records of the segment before it
	mi     int
	walk   []int32
	spans  []spanCall
	si     int
	seg    int32
	call   Call
}

func (r *replayer) begin(sf *streamFile, st *streamThread) {
	if r.nodes == nil {
		r.nodes = make([]segNode, 0, segEvents+1024)
	}
	r.sf, r.thread = sf, &st.t
	r.sh.pend, r.sh.epoch = r.sh.pend[:0], 0
	r.groups = r.groups[:0]
	r.spans, r.si, r.seg = st.spans, 0, 0
	r.resetSeg()
}

func (r *replayer) resetSeg() {
	r.nodes, r.marks, r.mprev, r.mi, r.recs, r.exits = r.nodes[:0], r.marks[:0], r.mprev[:0], 0, 0, 0
	for k := range r.groups {
		r.groups[k] = segGroup{-1, -1}
	}
}

// link appends list (h..t) after list (head..tail).
func (r *replayer) link(head, tail, h, t int32) (int32, int32) {
	if h < 0 {
		return head, tail
	}
	if head < 0 {
		return h, t
	}
	r.nodes[tail].next = h
	return head, t
}

// record takes one call record of the current segment.
func (r *replayer) record(id, start, end uint64, depth uint32, flags int32) {
	i, j, minSeg := r.sh.claim(depth, start, r.seg)
	kind := uint8(nodeCall)
	if minSeg < r.seg {
		kind = nodeExit
	}
	// children: the nodes of groups j..; orphans: groups i..j, then the node
	var ch, ct int32 = -1, -1
	for k := j; k < len(r.groups); k++ {
		ch, ct = r.link(ch, ct, r.groups[k].head, r.groups[k].tail)
	}
	var oh, ot int32 = -1, -1
	for k := i; k < j; k++ {
		oh, ot = r.link(oh, ot, r.groups[k].head, r.groups[k].tail)
	}
	n := int32(len(r.nodes))
	if int(n) == cap(r.nodes) {
		r.nodes = append(r.nodes, segNode{})
	} else {
		r.nodes = r.nodes[:n+1]
	}
	nd := &r.nodes[n] // in place: every field set
	nd.id, nd.start, nd.end, nd.depth, nd.flags, nd.kind = id, start, end, depth, flags, kind
	nd.post, nd.first, nd.last, nd.next = r.recs, ch, ct, -1
	r.recs++
	orphans, merged := r.sh.commit(depth, start, i, j, minSeg)
	r.groups = r.groups[:i]
	if orphans {
		r.groups = append(r.groups, segGroup{oh, ot})
	}
	if merged {
		g := &r.groups[len(r.groups)-1]
		g.head, g.tail = r.link(g.head, g.tail, n, n)
	} else {
		r.groups = append(r.groups, segGroup{n, n})
	}
}

// finish replays the current segment: its nodes, then the spans entered in it (they stay open).
func (r *replayer) finish() error {
	// the spans of this segment, innermost first, adopt the deeper groups that started after
	// them; the rest of the groups precede them
	hi := r.si
	for hi < len(r.spans) && r.spans[hi].seg <= r.seg {
		hi++
	}
	lo := r.si
	r.si = hi
	var inner int32 = -1
	cut := len(r.groups)
	for k := hi - 1; k >= lo; k-- {
		sp := &r.spans[k]
		c := cut
		for c > 0 && r.sh.pend[c-1].depth > sp.depth && r.sh.pend[c-1].start >= sp.start {
			c--
		}
		var ch, ct int32 = -1, -1
		for g := c; g < cut; g++ {
			ch, ct = r.link(ch, ct, r.groups[g].head, r.groups[g].tail)
		}
		if inner >= 0 {
			ch, ct = r.link(ch, ct, inner, inner)
		}
		cut = c
		inner = int32(len(r.nodes))
		r.nodes = append(r.nodes, segNode{id: sp.id, start: sp.start, end: sp.end, depth: sp.depth, flags: sp.flags, kind: nodeEnter, post: 1 << 30, first: ch, last: ct, next: -1})
	}
	for g := 0; g < cut; g++ {
		for n := r.groups[g].head; n >= 0; {
			next := r.nodes[n].next
			if err := r.replay(n); err != nil {
				return err
			}
			if n == r.groups[g].tail {
				break
			}
			n = next
		}
	}
	if inner >= 0 {
		if err := r.replay(inner); err != nil {
			return err
		}
	}
	if err := r.marksUntil(1<<30, ^uint64(0)); err != nil {
		return err
	}
	r.resetSeg()
	r.seg++
	return nil
}

// replay walks one subtree depth-first without recursion.
func (r *replayer) replay(root int32) error {
	st := append(r.walk[:0], root)
	entered := false
	em, sf := r.em, r.sf
	for len(st) > 0 {
		n := st[len(st)-1]
		nd := &r.nodes[n]
		if !entered {
			if nd.kind != nodeExit {
				// the call's start, converted here rather than on the applier's side, which
				// has more to do per call (it converts the end)
				start := sf.ns(nd.start)
				if r.mi < len(r.marks) && r.mprev[r.mi] <= r.exits {
					if err := r.marksUntil(r.exits, start); err != nil {
						return err
					}
				}
				if len(em.cur.ops) == pipeBatchOps { // em.op, in line
					if err := em.flush(); err != nil {
						return err
					}
				}
				o := em.cur.next()
				o.kind, o.flags, o.depth, o.id, o.start, o.startNanos, o.end = opEnter, uint8(nd.flags), nd.depth, nd.id, nd.start, start, nd.end
			}
			if k := nd.first; k >= 0 {
				st = append(st, k)
				continue
			}
		}
		if nd.kind != nodeEnter {
			if r.mi < len(r.marks) && r.mprev[r.mi] <= nd.post {
				if err := r.marksUntil(nd.post, ^uint64(0)); err != nil {
					return err
				}
			}
			if len(em.cur.ops) == pipeBatchOps {
				if err := em.flush(); err != nil {
					return err
				}
			}
			o := em.cur.next()
			o.kind, o.flags, o.depth, o.id, o.start, o.startNanos, o.end = opExit, 0, nd.depth, 0, nd.start, 0, 0
			r.exits++
		}
		st = st[:len(st)-1]
		entered = true
		if s := nd.next; s >= 0 && n != root && len(st) > 0 && n != r.nodes[st[len(st)-1]].last {
			st = append(st, s)
			entered = false
		}
	}
	r.walk = st
	return nil
}

// marksUntil replays the segment's marks that were recorded after at most recs of its records
// and start at or before ns: a mark is placed by the records around it, and among the calls
// entered between those by time (one at a call's start tick comes before the call).
func (r *replayer) marksUntil(recs int32, ns uint64) error {
	for r.mi < len(r.marks) && r.mprev[r.mi] <= recs && r.marks[r.mi].StartNanos <= ns {
		if err := r.em.mark(&r.marks[r.mi]); err != nil {
			return err
		}
		r.mi++
	}
	return nil
}

// replayThread is pass 2 for one thread: its segments in order, then what is still open.
func (sf *streamFile) replayThread(r *replayer, st *streamThread) error {
	for k := range st.spans {
		if st.spans[k].flags&stream.FlagOpen != 0 {
			st.spans[k].end = max(sf.maxTick, st.spans[k].start)
		}
	}
	r.begin(sf, st)
	var e stream.StreamEvent
	var segs segCounter
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
			if _, started := segs.next(); started {
				if err := r.finish(); err != nil {
					return err
				}
			}
			if e.Type == stream.EventMark {
				if stream.MarkKind(e.ID).Hop() { // in the header's Hops instead
					continue
				}
				r.tot.Marks++
				start := sf.ns(e.Start)
				r.marks = append(r.marks, stream.Mark{Kind: stream.MarkKind(e.ID), StartNanos: start, DurNanos: sf.ns(e.End) - start, Count: e.Count, Thread: r.thread})
				r.mprev = append(r.mprev, r.recs)
				if stream.MarkKind(e.ID) == stream.MarkLost {
					r.sh.seal()
				}
				continue
			}
			fl := int32(0)
			if e.Type == stream.EventUnwound {
				fl = stream.FlagUnwound
			}
			r.record(e.ID, e.Start, e.End, uint32(e.Depth), fl)
		}
	}
	if segs.fill > 0 {
		if err := r.finish(); err != nil {
			return err
		}
	}
	// the open calls with nothing after their start; the applier closes what is open at the end
	return r.finish()
}
