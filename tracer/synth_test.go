package tracer

import (
	"bytes"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"github.com/msgtrace/msgtrace/internal/viewertest"
	"github.com/msgtrace/msgtrace/tracer/stream"
)

// TestWriteTouchingTrace writes a synthetic raw trace of $MSGTRACE_BENCH_CALLS calls (touching
// siblings, zero-tick calls, four threads) to $MSGTRACE_BENCH_OUT, for scripts/bench-viewers.sh;
// skipped without it.
func TestWriteTouchingTrace(t *testing.T) {
	out := os.Getenv("MSGTRACE_BENCH_OUT")
	if out == "" {
		t.Skip("MSGTRACE_BENCH_OUT not set")
	}
	n, err := strconv.Atoi(os.Getenv("MSGTRACE_BENCH_CALLS"))
	if err != nil || n < 1 {
		n = 1000000
	}
	raw := writeSynth(t, synthTrace(42, n, 20000, "", "worker", "com.apple.root.default-qos", "com.apple.network"))
	if err := os.WriteFile(out, raw, 0o644); err != nil {
		t.Fatal(err)
	}
}

// synthCall is a call of a synthetic trace, times in ticks.
type synthCall struct {
	name       int // index into synthMethods
	start, end uint64
	flags      uint64
	kids       []*synthCall
}

// synthMethods are the methods of synthetic traces: name, class key, selector key.
var synthMethods = []struct {
	name     string
	cls, sel uint64
}{
	{"-[App run]", 0x1000, 0x10},
	{"-[Worker fib:]", 0x2000, 0x20},
	{"-[Worker step]", 0x2000, 0x30},
	{"-[Cell value]", 0x3000, 0x40},
	{"+[Cache shared]", 0x4000, 0x50},
}

func synthNames() []stream.NameEntry {
	return []stream.NameEntry{
		{Key: 0x1000, Kind: stream.NameClass, Name: "App"}, {Key: 0x2000, Kind: stream.NameClass, Name: "Worker"}, {Key: 0x3000, Kind: stream.NameClass, Name: "Cell"}, {Key: 0x4000, Kind: stream.NameMetaclass, Name: "Cache"},
		{Key: 0x10, Kind: stream.NameSelector, Name: "run"}, {Key: 0x20, Kind: stream.NameSelector, Name: "fib:"}, {Key: 0x30, Kind: stream.NameSelector, Name: "step"}, {Key: 0x40, Kind: stream.NameSelector, Name: "value"}, {Key: 0x50, Kind: stream.NameSelector, Name: "shared"},
	}
}

// synthTree grows about n calls under a root starting at tick t: siblings that touch (the next
// starts at the tick the previous ended), children starting at their parent's tick, calls of
// no ticks at all, recursion of the same method with equal bounds, as a 24 MHz counter records
// them.
func synthTree(r *rand.Rand, n int, t uint64) *synthCall {
	root := &synthCall{name: 0, start: t}
	budget := n - 1
	var grow func(c *synthCall, depth int) uint64
	grow = func(c *synthCall, depth int) uint64 {
		at := c.start
		if r.IntN(3) > 0 {
			at += uint64(r.IntN(3)) // often a child at the parent's own tick
		}
		for budget > 0 && (depth == 0 || r.IntN(depth+2) < 2) {
			budget--
			k := &synthCall{name: 1 + r.IntN(len(synthMethods)-1), start: at}
			if depth > 0 && r.IntN(4) == 0 {
				k.name = c.name // recursion
			}
			if depth < 12 && r.IntN(3) > 0 {
				at = grow(k, depth+1)
			}
			k.end = at + uint64(r.IntN(3)) // 0: ends with its last child, or takes no tick
			at = k.end
			if r.IntN(4) == 0 {
				at += uint64(1 + r.IntN(5)) // a gap; otherwise the next sibling touches
			}
			c.kids = append(c.kids, k)
		}
		return at
	}
	root.end = grow(root, 0) + uint64(r.IntN(2))
	return root
}

func (c *synthCall) records(depth uint64, out *[]stream.Record) {
	for _, k := range c.kids {
		k.records(depth+1, out)
	}
	m := synthMethods[c.name]
	*out = append(*out, stream.Record{Start: c.start, End: c.end, Class: m.cls | depth<<48 | c.flags<<60, Sel: m.sel})
}

// synthThread is one thread of a synthetic trace.
type synthThread struct {
	th    stream.Thread
	roots []*synthCall
}

// synthHeader ticks at 24 MHz (125/3 ns a tick), as Apple silicon's counter.
var synthHeader = stream.Header{PID: 777, TickNum: 125, TickDen: 3, BaseTick: 0}

// synthTrace makes threads with about calls calls in all, spread over outermost calls of at
// most perRoot calls each.
func synthTrace(seed uint64, calls, perRoot int, names ...string) []synthThread {
	r := rand.New(rand.NewPCG(seed, 1))
	var ts []synthThread
	for i, name := range names {
		st := synthThread{th: stream.Thread{TID: uint64(1000 + i), Main: i == 0, Name: name}}
		left := calls / len(names)
		t := uint64(r.IntN(100))
		for left > 0 {
			n := min(left, 1+r.IntN(perRoot))
			root := synthTree(r, n, t)
			st.roots = append(st.roots, root)
			left -= n
			t = root.end + uint64(r.IntN(3)) // outermost calls touch too
		}
		ts = append(ts, st)
	}
	return ts
}

func writeSynth(t testing.TB, ts []synthThread) []byte {
	var buf bytes.Buffer
	w := stream.NewWriter(&buf, synthHeader)
	w.WriteNames(synthNames())
	for _, st := range ts {
		var recs []stream.Record
		for _, r := range st.roots {
			r.records(0, &recs)
		}
		w.WriteThread(st.th, recs)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// ns is a tick in nanoseconds as Process converts it.
func ns(tick uint64) uint64 { return uint64(synthHeader.Nanos(tick)) }

// synthExpect works out, per thread, each method's self and total time in nanoseconds, and
// the thread's total (time in its outermost calls).
func synthExpect(st synthThread) (map[string]viewertest.Times, uint64) {
	m := map[string]viewertest.Times{}
	var total uint64
	var walk func(c *synthCall, onStack map[int]bool)
	walk = func(c *synthCall, onStack map[int]bool) {
		s, e := ns(c.start), ns(c.end)
		self := e - s
		for _, k := range c.kids {
			self -= ns(k.end) - ns(k.start)
		}
		mt := m[synthMethods[c.name].name]
		mt.Self += self
		if !onStack[c.name] {
			mt.Total += e - s
		}
		m[synthMethods[c.name].name] = mt
		was := onStack[c.name]
		onStack[c.name] = true
		for _, k := range c.kids {
			walk(k, onStack)
		}
		onStack[c.name] = was
	}
	for _, r := range st.roots {
		total += ns(r.end) - ns(r.start)
		walk(r, map[int]bool{})
	}
	return m, total
}

// synthEdge is a thread with the edge cases: an unwound call, a hang (two calls still open at
// the end of the trace), and 5 calls lost (the thread's dropped counter).
func synthEdge() synthThread {
	edge := synthThread{th: stream.Thread{TID: 2000, Name: "hang", Dropped: 5}}
	edge.roots = []*synthCall{
		{name: 0, start: 10, end: 100, kids: []*synthCall{{name: 2, start: 20, end: 40, flags: stream.FlagUnwound}}},
		{name: 0, start: 100, end: 400, flags: stream.FlagOpen, kids: []*synthCall{
			{name: 3, start: 110, end: 130},
			{name: 1, start: 150, end: 400, flags: stream.FlagOpen},
		}},
	}
	return edge
}
