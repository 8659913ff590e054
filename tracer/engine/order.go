package engine

import (
	"github.com/msgtrace/msgtrace/tracer/stream"
)

// Pre-order replay. Records arrive per thread in the order calls ended (post-order: children
// before their parent). Timeline viewers want each thread in pre-order (a parent before its
// children, siblings in time order), and sorting by start time cannot give it when times touch:
// a zero-length call at its parent's last tick starts at the same tick as the parent's next
// sibling. So the tree is rebuilt from the post-order stream itself: a call at depth d adopts
// the pending subtrees deeper than d, in order, as its children.
//
// Memory: a tree is complete when its outermost call (depth 0) arrives; it is then replayed
// and forgotten. So what is held at once is one outermost call tree plus the marks that fell
// inside it: about 96 bytes per kept call of the largest outermost call on a thread (a whole
// thread when one call spans it, such as an app's run loop; calls that never reach depth 0,
// for example under MSGTRACE_START=paused, are held until the thread ends).

// TreeSink receives a processed trace per thread in pre-order: Enter before the call's
// children, Exit after them; depth is the nesting among the kept calls (0 for a root). Marks
// come in time order where they happened: depth is the number of calls open around them.
type TreeSink interface {
	BeginThread(h *stream.Header, t *stream.Thread) error
	Enter(c *Call, depth int) error
	Exit(c *Call, depth int) error
	Mark(m *stream.Mark, depth int) error
	EndThread() error
	Close(t Totals) error
}

// PreOrder turns a TreeSink into a Sink.
func PreOrder(ts TreeSink) Sink { return &preOrder{ts: ts} }

type treeNode struct {
	c                 Call
	first, last, next int32 // children and next sibling; -1 for none
}

// pendGroup is a run of sibling subtrees not yet claimed by a parent, at depth.
type pendGroup struct {
	depth      int
	head, tail int32
}

// Needs: calls in the order they ended (preOrder rebuilds the tree itself).
func (p *preOrder) Needs() Needs { return Needs{} }

type preOrder struct {
	ts      TreeSink
	nodes   []treeNode
	pending []pendGroup
	marks   []stream.Mark
	mi      int     // next mark to replay
	stack   []int32 // replay stack
}

func (p *preOrder) BeginThread(h *stream.Header, t *stream.Thread) error {
	p.reset()
	return p.ts.BeginThread(h, t)
}

func (p *preOrder) reset() {
	p.nodes, p.pending, p.marks, p.mi = p.nodes[:0], p.pending[:0], p.marks[:0], 0
}

// claim pops the pending groups deeper than depth and returns them as one sibling list.
func (p *preOrder) claim(depth int) (head, tail int32) {
	head, tail = -1, -1
	i := len(p.pending)
	for i > 0 && p.pending[i-1].depth > depth {
		i--
	}
	for _, g := range p.pending[i:] {
		if head < 0 {
			head = g.head
		} else {
			p.nodes[tail].next = g.head
		}
		tail = g.tail
	}
	p.pending = p.pending[:i]
	return head, tail
}

func (p *preOrder) Call(c *Call) error {
	head, tail := p.claim(c.Depth)
	n := int32(len(p.nodes))
	p.nodes = append(p.nodes, treeNode{c: *c, first: head, last: tail, next: -1})
	p.pending = append(p.pending, pendGroup{c.Depth, n, n})
	if c.Depth == 0 {
		return p.flush()
	}
	return nil
}

func (p *preOrder) Skip(depth int) error {
	if head, tail := p.claim(depth); head >= 0 {
		p.pending = append(p.pending, pendGroup{depth, head, tail})
	}
	if depth == 0 {
		return p.flush()
	}
	return nil
}

// Mark holds a mark until the outermost call around it (or the next one, if none is) is
// complete: a mark that arrives while nothing is pending may still be inside a call whose
// record comes later.
func (p *preOrder) Mark(m *stream.Mark) error {
	p.marks = append(p.marks, *m)
	return nil
}

// marksBefore replays the held marks that start before t (closed-open: a mark at a call's
// start tick comes before the call, one at its end tick after it).
func (p *preOrder) marksBefore(t uint64, depth int) error {
	for p.mi < len(p.marks) && p.marks[p.mi].StartNanos < t {
		if err := p.ts.Mark(&p.marks[p.mi], depth); err != nil {
			return err
		}
		p.mi++
	}
	return nil
}

// flush replays every pending tree and mark, then forgets them.
func (p *preOrder) flush() error {
	head, _ := p.claim(-1)
	for r := head; r >= 0; r = p.nodes[r].next {
		if err := p.replay(r); err != nil {
			return err
		}
	}
	if err := p.marksBefore(^uint64(0), 0); err != nil {
		return err
	}
	p.reset()
	return nil
}

// replay walks one tree depth-first without recursion.
func (p *preOrder) replay(root int32) error {
	st := append(p.stack[:0], root)
	entered := false
	for len(st) > 0 {
		n := st[len(st)-1]
		d := len(st) - 1
		c := &p.nodes[n].c
		if !entered {
			if err := p.marksBefore(c.StartNanos, d); err != nil {
				return err
			}
			if err := p.ts.Enter(c, d); err != nil {
				return err
			}
			if k := p.nodes[n].first; k >= 0 {
				st = append(st, k)
				continue
			}
		}
		if err := p.marksBefore(c.StartNanos+c.DurNanos, d+1); err != nil {
			return err
		}
		if err := p.ts.Exit(c, d); err != nil {
			return err
		}
		st = st[:len(st)-1]
		entered = true
		if s := p.nodes[n].next; s >= 0 && n != root {
			st = append(st, s)
			entered = false
		}
	}
	p.stack = st
	return nil
}

func (p *preOrder) EndThread() error {
	if err := p.flush(); err != nil {
		return err
	}
	return p.ts.EndThread()
}

func (p *preOrder) Close(t Totals) error { return p.ts.Close(t) }

// postOrder drives a plain Sink from tree events: each kept call when it exits (the order
// calls ended), marks where they happened.
type postOrder struct{ s Sink }

func (p postOrder) BeginThread(h *stream.Header, t *stream.Thread) error {
	return p.s.BeginThread(h, t)
}
func (p postOrder) Enter(*Call, int) error           { return nil }
func (p postOrder) Exit(c *Call, _ int) error        { return p.s.Call(c) }
func (p postOrder) Mark(m *stream.Mark, _ int) error { return p.s.Mark(m) }
func (p postOrder) EndThread() error                 { return p.s.EndThread() }
func (p postOrder) Close(t Totals) error             { return p.s.Close(t) }

// asTree returns the TreeSink the stream reader drives for a sink: its own (Needs.Tree), or
// its Sink methods called in the order calls ended.
func asTree(s Sink) TreeSink {
	if t := s.Needs().Tree; t != nil {
		return t
	}
	return postOrder{s}
}
