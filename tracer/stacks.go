package tracer

import (
	"bufio"
	"io"
	"sort"
	"strconv"
	"strings"
)

// FoldedSink writes folded stacks, one line per distinct (thread, stack): the thread's name as
// the root frame, then the calls, outermost first, separated by ';', a space and the stack's
// self time in nanoseconds ("main;-[App run];-[Worker fib:] 1200"). Lines are sorted; stacks
// with no self time are left out, except losses ("[lost 5] 0": calls lost in no measured time).
// flamegraph.pl, speedscope and inferno read it.
type FoldedSink struct {
	Sink
	agg *StackTrie
	w   io.Writer
}

// NewFoldedSink writes to w.
func NewFoldedSink(w io.Writer) *FoldedSink {
	s := &FoldedSink{agg: NewStackTrie(), w: w}
	s.Sink = PreOrder(foldedTree{s.agg, s})
	return s
}

// Needs: an aggregate, its trie filled directly when no filter drops calls.
func (s *FoldedSink) Needs() Needs { return Needs{Tree: foldedTree{s.agg, s}, Stacks: s.agg} }

type foldedTree struct {
	*StackTrie
	s *FoldedSink
}

// Close writes the stacks.
func (f foldedTree) Close(Totals) error {
	a := f.StackTrie
	var lines []string
	var st []string
	for i := range a.nodes {
		n := int32(i)
		if a.isRoot(n) || a.nodes[n].self == 0 && (a.nodes[n].count == 0 || a.names[a.nodes[n].name][0] != '[') {
			continue
		}
		st = a.stack(n, st)
		lines = append(lines, strings.Join(st, ";")+" "+strconv.FormatUint(a.nodes[n].self, 10))
	}
	sort.Strings(lines)
	w := bufio.NewWriter(f.s.w)
	for _, l := range lines {
		w.WriteString(l)
		w.WriteByte('\n')
	}
	return w.Flush()
}

// PprofSink writes a pprof profile: a sample per distinct (thread, call stack) with two values
// whose sums mean something: calls (count) and self time (nanoseconds, the default). pprof's
// cumulative column is then exact inclusive time, recursion included. Each sample has a string
// label "thread" (the thread's name) and numeric labels "tid" and "pid"; the main mapping names the
// program; period_type is self time, duration_nanos the span of the trace.
type PprofSink struct {
	Sink
	agg  *StackTrie
	w    io.Writer
	Meta Meta
}

// NewPprofSink writes to w.
func NewPprofSink(w io.Writer) *PprofSink {
	s := &PprofSink{agg: NewStackTrie(), w: w}
	s.Sink = PreOrder(pprofTree{s.agg, s})
	return s
}

// Needs: an aggregate, its trie filled directly when no filter drops calls.
func (s *PprofSink) Needs() Needs { return Needs{Tree: pprofTree{s.agg, s}, Stacks: s.agg} }

type pprofTree struct {
	*StackTrie
	s *PprofSink
}

// Close builds and writes the profile.
func (t pprofTree) Close(Totals) error { return writePprof(t.StackTrie, t.s.w, t.s.Meta) }
