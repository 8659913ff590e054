package engine_test

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"math/rand"
	"runtime"
	"strings"
	"testing"

	"github.com/msgtrace/msgtrace/tracer"
	"github.com/msgtrace/msgtrace/tracer/engine"
	"github.com/msgtrace/msgtrace/tracer/internal/tracetest"
	"github.com/msgtrace/msgtrace/tracer/sink"
	"github.com/msgtrace/msgtrace/tracer/stream"
)

// TestStreamPreOrder: threads whose whole run is one call, cut into frames of every size (one
// event to thousands), some frames out of order in the file: the reader tells a TreeSink
// exactly the pre-order the calls were made in (names, times, depths, self times, marks where
// they happened), thread by thread.
func TestStreamPreOrder(t *testing.T) {
	defer func(s uint32) { *engine.SegEvents = s }(*engine.SegEvents)
	for seed := int64(1); seed <= 16; seed++ {
		*engine.SegEvents = []uint32{1, 5, 64, 1000, 1 << 15}[seed%5]
		r := rand.New(rand.NewSource(seed))
		var all [][]stream.StreamEvent
		var want []tracetest.TreeEv
		tick := uint64(1000)
		base := tick
		for th := 0; th < 3; th++ {
			evs, w := tracetest.Runloop(r, uint64(100+th), 2000+r.Intn(3000), 60, &tick, seed%2 == 0)
			all = append(all, evs)
			want = append(want, tracetest.TreeEv{Kind: 'B', TID: uint64(100 + th)})
			want = append(want, w...)
		}
		maxFrame := []int{1, 3, 50, 700, 5000}[seed%5]
		b := tracetest.WriteThreads(t, r, all, maxFrame, seed%3 == 0)
		d := tracetest.NewDirect()
		tot := processBytes(t, b, d)
		want = tracetest.Rebase(want, base)
		if msg := diffEvs(d.R.Evs, want); msg != "" {
			t.Fatalf("seed %d (frames up to %d, segments of %d): %s", seed, maxFrame, *engine.SegEvents, msg)
		}
		if tot.Calls != tot.Kept || tot.Calls == 0 {
			t.Fatalf("seed %d: totals %+v", seed, tot)
		}
	}
}

func diffEvs(got, want []tracetest.TreeEv) string {
	for i := 0; i < min(len(got), len(want)); i++ {
		if got[i] != want[i] {
			lo := max(0, i-3)
			return fmt.Sprintf("event %d:\n got %+v\nwant %+v\ncontext got %+v\n want %+v", i, got[i], want[i], got[lo:min(i+3, len(got))], want[lo:min(i+3, len(want))])
		}
	}
	if len(got) != len(want) {
		return fmt.Sprintf("%d events, want %d", len(got), len(want))
	}
	return ""
}

// TestStreamPreOrderFiltered: with filters (a duration floor, a depth limit, include and
// exclude patterns) the pre-order the reader gives equals what PreOrder makes of the kept calls
// in the order they ended (the in-memory reference), self times included.
func TestStreamPreOrderFiltered(t *testing.T) {
	defer func(s uint32) { *engine.SegEvents = s }(*engine.SegEvents)
	*engine.SegEvents = 50
	r := rand.New(rand.NewSource(5))
	tick := uint64(10)
	var all [][]stream.StreamEvent
	for th := 0; th < 2; th++ {
		evs, _ := tracetest.Runloop(r, uint64(100+th), 20000, 60, &tick, false)
		all = append(all, evs)
	}
	b := tracetest.WriteThreads(t, r, all, 300, false)
	for _, opt := range []engine.Options{
		{MaxDepth: -1, MinNanos: 20},
		{MaxDepth: 3},
		{MaxDepth: -1, Include: []string{"-[C3 *]", "-[C1 *]"}},
		{MaxDepth: -1, Exclude: []string{"-[C2 *]"}, MinNanos: 5},
	} {
		d := tracetest.NewDirect()
		if _, err := engine.ProcessStreams([]engine.Input{{R: bytes.NewReader(b), Size: int64(len(b))}}, opt, d); err != nil {
			t.Fatal(err)
		}
		// the reference: every call in the order they ended, through the post-order filter
		// and PreOrder's in-memory trees
		all, err := readStream(t, engine.Options{MaxDepth: -1}, b)
		if err != nil {
			t.Fatal(err)
		}
		ref := &tracetest.RecTree{}
		f := &postFilter{opt: opt, sink: engine.PreOrder(ref)}
		var tid uint64
		for _, c := range all.calls {
			if c.TID != tid {
				if tid != 0 {
					f.sink.EndThread()
				}
				tid = c.TID
				th := &stream.Thread{TID: tid}
				f.sink.BeginThread(&stream.Header{}, th)
				f.pending = f.pending[:0]
			}
			f.call(engine.Call{Name: c.Name, StartNanos: c.Start, DurNanos: c.Dur, Depth: c.Depth, Flags: c.Flags})
		}
		f.sink.EndThread()
		if msg := diffEvs(d.R.Evs, ref.Evs); msg != "" {
			t.Fatalf("%+v: %s", opt, msg)
		}
	}
}

// postFilter is the reference filter: the options applied to one thread's calls in the order
// they ended, self time computed from the kept subtrees each call claims (the calls deeper
// than it not yet claimed), a dropped call's kept subtrees handed up to its depth (Skip).
type postFilter struct {
	opt     engine.Options
	sink    engine.Sink
	pending []struct {
		depth int
		dur   uint64
	}
}

func (f *postFilter) call(c engine.Call) {
	inc, exc := engine.CompilePatterns(f.opt.Include), engine.CompilePatterns(f.opt.Exclude)
	var children uint64
	i := len(f.pending)
	for i > 0 && f.pending[i-1].depth > c.Depth {
		i--
		children += f.pending[i].dur
	}
	kept := float64(c.DurNanos) >= f.opt.MinNanos && (f.opt.MaxDepth < 0 || c.Depth <= f.opt.MaxDepth) &&
		(len(inc) == 0 || engine.MatchAny(inc, c.Name)) && !engine.MatchAny(exc, c.Name)
	if !kept {
		if i < len(f.pending) {
			f.pending = append(f.pending[:i], struct {
				depth int
				dur   uint64
			}{c.Depth, children})
		}
		f.sink.Skip(c.Depth)
		return
	}
	f.pending = append(f.pending[:i], struct {
		depth int
		dur   uint64
	}{c.Depth, c.DurNanos})
	c.SelfNanos = c.DurNanos - min(c.DurNanos, children)
	f.sink.Call(&c)
}

// TestStreamOrphans: calls whose parent's record was lost (drop mode) are not nested under a
// later sibling of that parent: every thread's enters come in time order.
func TestStreamOrphans(t *testing.T) {
	defer func(s uint32) { *engine.SegEvents = s }(*engine.SegEvents)
	*engine.SegEvents = 100
	r := rand.New(rand.NewSource(9))
	tick := uint64(10)
	evs, _ := tracetest.Runloop(r, 100, 30000, 60, &tick, false)
	// runs of calls lost (no buffer space), each followed by its loss mark, as the recorder
	// writes them
	var kept []stream.StreamEvent
	var calls uint64
	for i := 0; i < len(evs); i++ {
		if e := evs[i]; e.Depth > 0 && e.Depth < 4 && r.Intn(30) == 0 {
			n := 1 + r.Intn(3)
			k := min(i+n, len(evs)-1)
			kept = append(kept, stream.StreamEvent{Type: stream.EventMark, ID: uint64(stream.MarkLost), Start: evs[i].End, End: evs[k-1].End, Count: uint64(k - i)})
			i = k - 1
			continue
		}
		kept = append(kept, evs[i])
		calls++
	}
	b := tracetest.WriteThreads(t, r, [][]stream.StreamEvent{kept}, 200, false)
	d := tracetest.NewDirect()
	tot := processBytes(t, b, d)
	if tot.Calls != calls {
		t.Fatalf("%d calls, want %d", tot.Calls, calls)
	}
	checkTimeOrder(t, d.R.Evs)
}

// checkTimeOrder: per thread, enters, exits and marks never go back in time, and every exit
// closes the latest call entered.
func checkTimeOrder(t *testing.T, evs []tracetest.TreeEv) {
	t.Helper()
	var last uint64
	var open []tracetest.TreeEv
	for i, e := range evs {
		at := e.Start
		switch e.Kind {
		case 'B':
			last, open = 0, open[:0]
			continue
		case 'X':
			at = e.Start + e.Dur
			if len(open) == 0 || open[len(open)-1].Start != e.Start || open[len(open)-1].Name != e.Name {
				t.Fatalf("event %d: exit %+v does not close the latest call", i, e)
			}
			open = open[:len(open)-1]
		case 'E':
			if e.Depth != len(open) {
				t.Fatalf("event %d: enter %+v at depth %d, %d calls open", i, e, e.Depth, len(open))
			}
			open = append(open, e)
		}
		if at < last {
			t.Fatalf("event %d: %+v at %d after %d", i, e, at, last)
		}
		last = at
	}
}

// TestStreamPreOrderMemory: converting a run that is one call enclosing everything allocates
// the same whatever the number of calls (100 k and 1 M calls), to every format.
func TestStreamPreOrderMemory(t *testing.T) {
	make1 := func(n int) []byte {
		r := rand.New(rand.NewSource(3))
		tick := uint64(10)
		evs, _ := tracetest.RunloopShaped(r, 100, n, 60, &tick, true, true)
		return tracetest.WriteThreads(t, r, [][]stream.StreamEvent{evs}, 2046, false)
	}
	small, big := make1(100_000), make1(1_000_000)
	for _, format := range tracer.Formats {
		alloc := func(b []byte) uint64 {
			var m0, m1 runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&m0)
			s := newSink(t, format, discard{}, sink.Meta{})
			if _, err := engine.ProcessStreams([]engine.Input{{R: bytes.NewReader(b), Size: int64(len(b))}}, engine.Options{MaxDepth: -1}, s); err != nil {
				t.Fatal(err)
			}
			runtime.ReadMemStats(&m1)
			return m1.TotalAlloc - m0.TotalAlloc
		}
		a, b := alloc(small), alloc(big)
		t.Logf("%s: %d bytes allocated for 100 k calls, %d for 1 M", format, a, b)
		if b > a+4<<20 {
			t.Errorf("%s: allocated %d bytes for 1 M calls, %d for 100 k", format, b, a)
		}
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

var _ = strings.Contains

// budgetRec is a timeline sink (a tracetest.RecTree) with a budget.
type budgetRec struct {
	tracetest.Direct
	budget uint64
	rep    engine.FoldReport
	folded uint64 // sum of Call.Folded at exits
}

func (b *budgetRec) Needs() engine.Needs {
	return engine.Needs{Tree: (*foldCount)(b), Fold: &b.rep, Budget: b.budget}
}

type foldCount budgetRec

func (f *foldCount) BeginThread(h *stream.Header, t *stream.Thread) error {
	return f.R.BeginThread(h, t)
}
func (f *foldCount) Enter(c *engine.Call, d int) error { return f.R.Enter(c, d) }
func (f *foldCount) Exit(c *engine.Call, d int) error {
	f.folded += c.Folded
	return f.R.Exit(c, d)
}
func (f *foldCount) Mark(m *stream.Mark, d int) error { return f.R.Mark(m, d) }
func (f *foldCount) EndThread() error                 { return nil }
func (f *foldCount) Close(engine.Totals) error        { return nil }

// TestTimelineBudget: a timeline keeps at most its budget of calls, the longest ones; the
// others are folded into their callers: the self times of the kept calls still add up to each
// thread's run, the folded counts add up, and every thread stays in time order.
func TestTimelineBudget(t *testing.T) {
	defer func(s uint32) { *engine.SegEvents = s }(*engine.SegEvents)
	*engine.SegEvents = 3000
	r := rand.New(rand.NewSource(11))
	tick := uint64(10)
	var all [][]stream.StreamEvent
	for th := 0; th < 2; th++ {
		evs, _ := tracetest.RunloopShaped(r, uint64(100+th), 150_000, 60, &tick, true, true)
		all = append(all, evs)
	}
	b := tracetest.WriteThreads(t, r, all, 2046, false)
	for _, budget := range []uint64{1, 1000, 30_000, 1 << 30} {
		s := &budgetRec{Direct: tracetest.NewDirect(), budget: budget}
		tot := processBytes(t, b, s)
		checkTimeOrder(t, s.R.Evs)
		var kept, self, roots, nroots uint64
		for _, e := range s.R.Evs {
			if e.Kind == 'X' {
				kept++
				self += e.Self
				if e.Depth == 0 {
					roots += e.Dur
					nroots++
				}
				if e.Dur < s.rep.FoldNanos {
					t.Fatalf("budget %d: kept %+v, shorter than %d ns", budget, e, s.rep.FoldNanos)
				}
			}
		}
		t.Logf("budget %d: kept %d of %d calls (folded under %d ns: %d)", budget, kept, tot.Calls, s.rep.FoldNanos, s.rep.Folded)
		switch {
		case budget >= tot.Calls:
			if kept != tot.Calls || s.rep.FoldNanos != 0 {
				t.Fatalf("budget %d: kept %d of %d", budget, kept, tot.Calls)
			}
		case kept > budget && kept > 2: // the longest are kept whatever the budget
			t.Fatalf("budget %d: kept %d", budget, kept)
		case budget >= 1000 && kept < budget/2:
			t.Fatalf("budget %d: kept only %d", budget, kept)
		}
		if nroots == 2 && self != roots {
			t.Fatalf("budget %d: self times add up to %d, the threads ran %d", budget, self, roots)
		}
		if s.rep.FoldNanos > 0 && (s.rep.Kept != kept || s.rep.Kept+s.rep.Folded != tot.Calls || s.folded != s.rep.Folded) {
			t.Fatalf("budget %d: report %+v, kept %d of %d, folded counts %d", budget, s.rep, kept, tot.Calls, s.folded)
		}
	}
}

// TestTimelineBudgetFormats: each timeline format keeps its budget and says so; Perfetto and
// Chrome JSON mark the calls that took in folded ones.
func TestTimelineBudgetFormats(t *testing.T) {
	r := rand.New(rand.NewSource(12))
	tick := uint64(10)
	evs, _ := tracetest.RunloopShaped(r, 100, 50_000, 60, &tick, false, true)
	b := tracetest.WriteThreads(t, r, [][]stream.StreamEvent{evs}, 2046, false)
	for _, format := range []string{"json", "perfetto", "speedscope"} {
		var out bytes.Buffer
		s := newSink(t, format, &out, sink.Meta{Budget: 500})
		tot := processBytes(t, b, s)
		rep := engine.Folded(s)
		if rep == nil || rep.Kept > 500 || rep.Kept < 250 || rep.Kept+rep.Folded != tot.Calls || rep.FoldNanos == 0 {
			t.Fatalf("%s: %+v of %d calls", format, rep, tot.Calls)
		}
		if format == "json" && !bytes.Contains(out.Bytes(), []byte(`"folded_calls":`)) {
			t.Errorf("json: no folded_calls")
		}
		s, _ = tracer.NewSink(format, &out, sink.Meta{Budget: -1})
		if _, err := engine.ProcessStreams([]engine.Input{{R: bytes.NewReader(b), Size: int64(len(b))}}, engine.Options{MaxDepth: -1}, s); err != nil || engine.Folded(s).FoldNanos != 0 {
			t.Fatalf("%s: every call: %+v %v", format, engine.Folded(s), err)
		}
	}
	if engine.Folded(sink.NewFoldedSink(&bytes.Buffer{})) != nil {
		t.Error("folded stacks have no budget")
	}
}

// TestTimelineBudgetHolds: a budget holds on a stream whose ticks are not ns and whose clock
// is not one line (a 2.1 GHz counter, its rate drifting between clock samples), where a call's
// duration in ns and the histogram that chose the threshold disagree near it, and with calls
// open at the end (always kept): each timeline keeps at most its budget, counts folded and
// kept calls as it wrote them, and keeps the longest.
func TestTimelineBudgetHolds(t *testing.T) {
	r := rand.New(rand.NewSource(17))
	var buf bytes.Buffer
	w := stream.NewStreamWriter(&buf)
	w.Process(stream.StreamProcess{PID: 7, Name: "loop"})
	w.Clock(stream.ClockSample{Tick: 0, MonoNanos: 1_000_000, RateNum: 10, RateDen: 21})
	var ms []stream.StreamMethod
	for id := uint64(1); id <= 16; id++ {
		ms = append(ms, stream.StreamMethod{ID: id, Class: "C", Selector: fmt.Sprintf("s%d", id)})
	}
	w.Methods(ms...)
	var evs [][]stream.StreamEvent
	var end uint64
	for th := uint64(0); th < 2; th++ {
		w.Thread(stream.StreamThread{TID: 100 + th})
		// an open root at depth 0 and an open child at depth 1; under it calls of 1 to 4,000
		// ticks, log-uniform, each with up to three callees
		tick := uint64(10 + th)
		var e []stream.StreamEvent
		for n := 0; n < 60_000; n++ {
			start := tick
			tick++
			for k := r.Intn(4); k > 0; k-- {
				d := uint64(math.Exp(r.Float64() * math.Log(1000)))
				e = append(e, stream.StreamEvent{Type: stream.EventCall, ID: uint64(3 + r.Intn(13)), Start: tick, End: tick + d, Depth: 3})
				tick += d + uint64(r.Intn(3))
			}
			tick += uint64(math.Exp(r.Float64() * math.Log(3000)))
			e = append(e, stream.StreamEvent{Type: stream.EventCall, ID: uint64(3 + r.Intn(13)), Start: start, End: tick, Depth: 2})
			tick++
		}
		evs = append(evs, e)
		end = max(end, tick)
	}
	// the rate drifts: two more clock samples, 0.2 % apart in slope
	w.Clock(stream.ClockSample{Tick: end / 2, MonoNanos: 1_000_000 + end/2*10/21, RateNum: 10, RateDen: 21})
	for th, e := range evs {
		tid := uint64(100 + th)
		prev := uint64(0)
		for len(e) > 0 {
			k := min(len(e), 1+r.Intn(3000))
			prev, _ = w.Events(tid, prev, e[:k])
			e = e[k:]
		}
		w.Open(tid, end, []stream.OpenCall{{ID: 1, Start: 5, Depth: 0}, {ID: 2, Start: 8, Depth: 1}})
	}
	w.Clock(stream.ClockSample{Tick: end, MonoNanos: 1_000_000 + end/2*10/21 + end/2*1002/2100, RateNum: 10, RateDen: 21})
	w.End(stream.StreamCounters{})
	b := buf.Bytes()
	for _, format := range []string{"json", "perfetto", "speedscope"} {
		for _, budget := range []int{3, 1000, 20_000, 77_777, 150_000} {
			s := newSink(t, format, io.Discard, sink.Meta{Budget: budget})
			tot := processBytes(t, b, s)
			rep := engine.Folded(s)
			if tot.Open != 4 || tot.Calls < 200_000 {
				t.Fatalf("%d calls, %d open", tot.Calls, tot.Open)
			}
			if rep.FoldNanos == 0 || rep.Kept+rep.Folded != tot.Calls {
				t.Fatalf("%s budget %d: %+v, totals %+v", format, budget, rep, tot)
			}
			// the longest calls (a bucket of them) are kept whatever the budget
			if rep.Kept > uint64(budget) && budget > 4 {
				t.Errorf("%s: kept %d calls for a budget of %d", format, rep.Kept, budget)
			}
			if budget >= 1000 && rep.Kept < uint64(budget)/2 {
				t.Errorf("%s: kept only %d calls for a budget of %d", format, rep.Kept, budget)
			}
		}
	}
}
