package sink

import (
	"bufio"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/msgtrace/msgtrace/tracer/engine"
)

// FoldedSink writes folded stacks, one line per distinct (thread, stack): the thread's name as
// the root frame, then the calls, outermost first, separated by ';', a space and the stack's
// self time in nanoseconds ("main;-[App run];-[Worker fib:] 1200"). Lines are sorted; stacks
// with no self time are left out, except losses ("[lost 5] 0": calls lost in no measured time).
// flamegraph.pl, speedscope and inferno read it.
type FoldedSink struct {
	engine.Sink
	agg *engine.StackTrie
	w   io.Writer
}

// NewFoldedSink writes to w.
func NewFoldedSink(w io.Writer) *FoldedSink {
	s := &FoldedSink{agg: engine.NewStackTrie(), w: w}
	s.Sink = engine.PreOrder(foldedTree{s.agg, s})
	return s
}

// Needs: an aggregate, its trie filled directly when no filter drops calls.
func (s *FoldedSink) Needs() engine.Needs {
	return engine.Needs{Tree: foldedTree{s.agg, s}, Stacks: s.agg}
}

type foldedTree struct {
	*engine.StackTrie
	s *FoldedSink
}

// Close writes the stacks.
func (f foldedTree) Close(engine.Totals) error {
	a := f.StackTrie
	var lines []string
	var st []string
	for i := range a.Nodes {
		n := int32(i)
		if a.IsRoot(n) || a.Nodes[n].Self == 0 && (a.Nodes[n].Count == 0 || a.Names[a.Nodes[n].Name][0] != '[') {
			continue
		}
		st = a.Stack(n, st)
		lines = append(lines, strings.Join(st, ";")+" "+strconv.FormatUint(a.Nodes[n].Self, 10))
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
	engine.Sink
	agg  *engine.StackTrie
	w    io.Writer
	Meta Meta
}

// NewPprofSink writes to w.
func NewPprofSink(w io.Writer) *PprofSink {
	s := &PprofSink{agg: engine.NewStackTrie(), w: w}
	s.Sink = engine.PreOrder(pprofTree{s.agg, s})
	return s
}

// Needs: an aggregate, its trie filled directly when no filter drops calls.
func (s *PprofSink) Needs() engine.Needs {
	return engine.Needs{Tree: pprofTree{s.agg, s}, Stacks: s.agg}
}

type pprofTree struct {
	*engine.StackTrie
	s *PprofSink
}

// Close builds and writes the profile.
func (t pprofTree) Close(engine.Totals) error { return writePprof(t.StackTrie, t.s.w, t.s.Meta) }
