package engine

import (
	"slices"

	"github.com/msgtrace/msgtrace/tracer/stream"
)

// Tee and the plan of a conversion: which sinks pass 2 drives, and which aggregates share a
// trie. A conversion reads its streams once whatever the sinks: one pass 1 (durations counted
// when a timeline has a budget), the aggregates' trie filled once (by the aggregates' path when
// no filter drops calls: each thread read backwards; otherwise by pass 2 as one more tree) and
// copied to every other aggregate, and one pass 2 driving every other sink (each timeline
// folded by its own budget).

// Tee sends one trace to several sinks, read once: every sink sees every thread, call and
// mark, each as its own Needs say (each timeline its budget and fold report, each tree its
// order); the aggregates (Needs.Stacks) share one trie, filled by the aggregates' path when
// no filter drops calls.
func Tee(sinks ...Sink) Sink { return tee(sinks) }

// Needs: the sinks the tee feeds (Needs.Members); a failed conversion aborts them all.
func (t tee) Needs() Needs { return Needs{Members: t, Abort: t.abort} }

type tee []Sink

func (t tee) each(f func(Sink) error) error {
	for _, s := range t {
		if err := f(s); err != nil {
			return err
		}
	}
	return nil
}

func (t tee) BeginThread(h *stream.Header, th *stream.Thread) error {
	return t.each(func(s Sink) error { return s.BeginThread(h, th) })
}
func (t tee) Call(c *Call) error        { return t.each(func(s Sink) error { return s.Call(c) }) }
func (t tee) Skip(d int) error          { return t.each(func(s Sink) error { return s.Skip(d) }) }
func (t tee) Mark(m *stream.Mark) error { return t.each(func(s Sink) error { return s.Mark(m) }) }
func (t tee) EndThread() error          { return t.each(func(s Sink) error { return s.EndThread() }) }
func (t tee) Close(tt Totals) error     { return t.each(func(s Sink) error { return s.Close(tt) }) }

// abort aborts every sink that holds something only its Close ends (Needs.Abort): a failed
// conversion, or a Close that failed before it reached them all.
func (t tee) abort() {
	for _, s := range t {
		if a := s.Needs().Abort; a != nil {
			a()
		}
	}
}

// leaves appends the sinks s feeds: its members' (Needs.Members), or s itself.
func leaves(s Sink, out []Sink) []Sink {
	if m := s.Needs().Members; m != nil {
		for _, s := range m {
			out = leaves(s, out)
		}
		return out
	}
	return append(out, s)
}

// plan is how one conversion feeds a sink's leaves.
type plan struct {
	drive []Sink       // what pass 2 drives (none: the aggregates' path alone)
	tries []*StackTrie // the aggregates' tries: the first is filled, copied to the others at the end
	fast  bool         // the first trie is filled by the aggregates' path (no filter on calls)
}

// planFor plans the conversion of s under opt.
func planFor(s Sink, opt Options) plan {
	var p plan
	var first Sink // the first aggregate
	for _, m := range leaves(s, nil) {
		if tr := m.Needs().Stacks; tr != nil {
			if first == nil {
				first = m
			}
			p.tries = append(p.tries, tr)
			continue
		}
		p.drive = append(p.drive, m)
	}
	p.fast = first != nil && unfiltered(opt)
	if first != nil && !p.fast { // its tree, in pass 2
		p.drive = append(p.drive, first)
	}
	return p
}

// unfiltered says whether opt keeps every call (threads may still be selected).
func unfiltered(opt Options) bool {
	return opt.MinNanos <= 0 && opt.MaxDepth < 0 && len(opt.Include) == 0 && len(opt.Exclude) == 0
}

// Readings is how many times a conversion of s under opt reads its streams, for a progress's
// total: pass 1 and pass 2, and the aggregates' path beside a pass 2.
func Readings(s Sink, opt Options) int {
	if p := planFor(s, opt); p.fast && len(p.drive) > 0 {
		return 3
	}
	return 2
}

// driven is the sink pass 2 drives: the one, or a tee of them.
func (p *plan) driven() Sink {
	if len(p.drive) == 1 {
		return p.drive[0]
	}
	return tee(p.drive)
}

// share copies the filled trie to the other aggregates.
func (p *plan) share() {
	for _, tr := range p.tries[min(1, len(p.tries)):] {
		tr.copyFrom(p.tries[0])
	}
}

// copyFrom makes a a copy of b's stacks and threads.
func (a *StackTrie) copyFrom(b *StackTrie) {
	*a = *b
	a.Names, a.Nodes, a.Threads = slices.Clone(b.Names), slices.Clone(b.Nodes), slices.Clone(b.Threads)
	a.path, a.marked = nil, nil
}

type teeTree []TreeSink

func (t teeTree) BeginThread(h *stream.Header, th *stream.Thread) error {
	for _, s := range t {
		if err := s.BeginThread(h, th); err != nil {
			return err
		}
	}
	return nil
}
func (t teeTree) Enter(c *Call, d int) error {
	for _, s := range t {
		if err := s.Enter(c, d); err != nil {
			return err
		}
	}
	return nil
}
func (t teeTree) Exit(c *Call, d int) error {
	for _, s := range t {
		if err := s.Exit(c, d); err != nil {
			return err
		}
	}
	return nil
}
func (t teeTree) Mark(m *stream.Mark, d int) error {
	for _, s := range t {
		if err := s.Mark(m, d); err != nil {
			return err
		}
	}
	return nil
}
func (t teeTree) EndThread() error {
	for _, s := range t {
		if err := s.EndThread(); err != nil {
			return err
		}
	}
	return nil
}
func (t teeTree) Close(tt Totals) error {
	for _, s := range t {
		if err := s.Close(tt); err != nil {
			return err
		}
	}
	return nil
}
