package tracer

import (
	"bufio"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/google/pprof/profile"
)

// stackStats is what is known about one call stack: how often it was called, its self time and
// its inclusive time.
type stackStats struct {
	count, self, total uint64
}

// stackAggregator turns post-order calls into per-stack totals without holding the tree:
// pending holds, per depth, the stacks of kept subtrees not yet claimed by a parent, as
// suffixes below that parent ("b;c" for the stack "a;b;c" pending under "a").
type stackAggregator struct {
	pending []pendingStacks
	stacks  map[string]*stackStats // full stacks, "root;...;leaf", across threads
}

type pendingStacks struct {
	depth int
	m     map[string]stackStats
}

func newStackAggregator() *stackAggregator {
	return &stackAggregator{stacks: map[string]*stackStats{}}
}

func (a *stackAggregator) claim(depth int) map[string]stackStats {
	out := map[string]stackStats{}
	i := len(a.pending)
	for i > 0 && a.pending[i-1].depth > depth {
		i--
		for k, v := range a.pending[i].m {
			s := out[k]
			out[k] = stackStats{s.count + v.count, s.self + v.self, s.total + v.total}
		}
	}
	a.pending = a.pending[:i]
	return out
}

func (a *stackAggregator) call(c *Call) {
	children := a.claim(c.Depth)
	m := make(map[string]stackStats, len(children)+1)
	for k, v := range children {
		m[c.Name+";"+k] = v
	}
	s := m[c.Name]
	m[c.Name] = stackStats{s.count + 1, s.self + c.SelfNanos, s.total + c.DurNanos}
	a.pending = append(a.pending, pendingStacks{c.Depth, m})
}

func (a *stackAggregator) skip(depth int) {
	if m := a.claim(depth); len(m) > 0 {
		a.pending = append(a.pending, pendingStacks{depth, m})
	}
}

// endThread moves every unclaimed subtree to the roots.
func (a *stackAggregator) endThread() {
	for k, v := range a.claim(-1) {
		s := a.stacks[k]
		if s == nil {
			s = &stackStats{}
			a.stacks[k] = s
		}
		s.count += v.count
		s.self += v.self
		s.total += v.total
	}
}

func (a *stackAggregator) sorted() []string {
	keys := make([]string, 0, len(a.stacks))
	for k := range a.stacks {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// FoldedSink writes folded stacks ("a;b;c <self ns>"), one line per distinct stack, for
// flamegraph.pl and speedscope.
type FoldedSink struct {
	agg *stackAggregator
	w   io.Writer
}

// NewFoldedSink writes to w.
func NewFoldedSink(w io.Writer) *FoldedSink { return &FoldedSink{newStackAggregator(), w} }

// BeginThread does nothing: stacks are merged across threads.
func (s *FoldedSink) BeginThread(*Header, *Thread) error { return nil }

// Call aggregates one call.
func (s *FoldedSink) Call(c *Call) error { s.agg.call(c); return nil }

// Skip hands a dropped call's subtrees up.
func (s *FoldedSink) Skip(d int) error { s.agg.skip(d); return nil }

// EndThread closes the thread's stacks.
func (s *FoldedSink) EndThread() error { s.agg.endThread(); return nil }

// Close writes the stacks.
func (s *FoldedSink) Close(Totals) error {
	w := bufio.NewWriter(s.w)
	for _, k := range s.agg.sorted() {
		if v := s.agg.stacks[k]; v.self > 0 {
			fmt.Fprintf(w, "%s %d\n", k, v.self)
		}
	}
	return w.Flush()
}

// PprofSink writes a pprof profile: one sample per distinct call stack with its call count,
// self time and inclusive time.
type PprofSink struct {
	agg *stackAggregator
	w   io.Writer
}

// NewPprofSink writes to w.
func NewPprofSink(w io.Writer) *PprofSink { return &PprofSink{newStackAggregator(), w} }

// BeginThread does nothing: stacks are merged across threads.
func (s *PprofSink) BeginThread(*Header, *Thread) error { return nil }

// Call aggregates one call.
func (s *PprofSink) Call(c *Call) error { s.agg.call(c); return nil }

// Skip hands a dropped call's subtrees up.
func (s *PprofSink) Skip(d int) error { s.agg.skip(d); return nil }

// EndThread closes the thread's stacks.
func (s *PprofSink) EndThread() error { s.agg.endThread(); return nil }

// Close builds and writes the profile.
func (s *PprofSink) Close(Totals) error {
	p := &profile.Profile{
		SampleType: []*profile.ValueType{
			{Type: "calls", Unit: "count"},
			{Type: "self", Unit: "nanoseconds"},
			{Type: "total", Unit: "nanoseconds"},
		},
		DefaultSampleType: "self",
		TimeNanos:         time.Now().UnixNano(),
	}
	locs := map[string]*profile.Location{}
	loc := func(name string) *profile.Location {
		if l := locs[name]; l != nil {
			return l
		}
		f := &profile.Function{ID: uint64(len(p.Function) + 1), Name: name, SystemName: name}
		p.Function = append(p.Function, f)
		l := &profile.Location{ID: uint64(len(p.Location) + 1), Line: []profile.Line{{Function: f}}}
		p.Location = append(p.Location, l)
		locs[name] = l
		return l
	}
	for _, k := range s.agg.sorted() {
		v := s.agg.stacks[k]
		frames := strings.Split(k, ";")
		ls := make([]*profile.Location, len(frames))
		for i, f := range frames {
			ls[len(frames)-1-i] = loc(f) // leaf first
		}
		p.Sample = append(p.Sample, &profile.Sample{Location: ls, Value: []int64{int64(v.count), int64(v.self), int64(v.total)}})
	}
	if err := p.CheckValid(); err != nil {
		return err
	}
	return p.Write(s.w)
}

// Mark is not shown yet.
func (s *FoldedSink) Mark(*Mark) error { return nil }

// Mark is not shown yet.
func (s *PprofSink) Mark(*Mark) error { return nil }
