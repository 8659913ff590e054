package tracetest

import (
	"bytes"
	"fmt"
	"math/rand"
	"slices"
	"testing"

	"github.com/msgtrace/msgtrace/tracer/engine"
	"github.com/msgtrace/msgtrace/tracer/stream"
)

// TreeEv is one thing a TreeSink was told.
type TreeEv struct {
	Kind             byte // 'B' begin thread, 'E' enter, 'X' exit, 'M' mark
	TID              uint64
	Name             string
	Start, Dur, Self uint64
	Depth, Flags     int
}

// RecTree records what it is told; with pre set it takes calls in pre-order (the stream
// reader drives it directly), else it is a plain post-order Sink behind PreOrder.
type RecTree struct {
	Evs []TreeEv
	tid uint64
}

func (r *RecTree) BeginThread(_ *stream.Header, t *stream.Thread) error {
	r.tid = t.TID
	r.Evs = append(r.Evs, TreeEv{Kind: 'B', TID: t.TID})
	return nil
}
func (r *RecTree) Enter(c *engine.Call, d int) error {
	r.Evs = append(r.Evs, TreeEv{'E', r.tid, c.Name, c.StartNanos, c.DurNanos, 0, d, c.Flags})
	return nil
}
func (r *RecTree) Exit(c *engine.Call, d int) error {
	r.Evs = append(r.Evs, TreeEv{'X', r.tid, c.Name, c.StartNanos, c.DurNanos, c.SelfNanos, d, c.Flags})
	return nil
}
func (r *RecTree) Mark(m *stream.Mark, d int) error {
	r.Evs = append(r.Evs, TreeEv{'M', r.tid, m.Kind.String(), m.StartNanos, m.DurNanos, m.Count, d, 0})
	return nil
}
func (r *RecTree) EndThread() error          { return nil }
func (r *RecTree) Close(engine.Totals) error { return nil }

// Direct is a RecTree the stream reader drives in pre-order.
type Direct struct {
	engine.Sink
	R *RecTree
}

// Needs: the RecTree, driven in pre-order.
func (d Direct) Needs() engine.Needs { return engine.Needs{Tree: d.R} }

// NewDirect returns an empty Direct.
func NewDirect() Direct {
	r := &RecTree{}
	return Direct{engine.PreOrder(r), r}
}

// Runloop makes one thread's calls: a single outermost call enclosing n calls in random
// subtrees (deep recursion now and then), touching and zero-length calls, marks between
// calls. It returns the events in post-order (what a stream holds) and what a TreeSink must
// be told, with times relative to base.
func Runloop(r *rand.Rand, tid uint64, n, methods int, tick *uint64, marks bool) (evs []stream.StreamEvent, want []TreeEv) {
	return RunloopShaped(r, tid, n, methods, tick, marks, false)
}

// RunloopShaped is Runloop; with fixed, a call's method follows from its caller's and its
// place among its siblings (as in a real program, where stacks repeat), else it is random.
func RunloopShaped(r *rand.Rand, tid uint64, n, methods int, tick *uint64, marks, fixed bool) (evs []stream.StreamEvent, want []TreeEv) {
	count := 0
	var emit func(depth int, maxDepth int, parent uint64, k int) (dur uint64)
	emit = func(depth, maxDepth int, parent uint64, k int) uint64 {
		start := *tick
		*tick += uint64(r.Intn(3)) // touching and zero-length calls
		id := uint64(r.Intn(methods) + 1)
		if fixed { // two callees per method, recursion below depth 4
			id = parent
			if depth <= 4 {
				id = (parent*7+uint64(min(k, 1))+uint64(depth))%uint64(methods) + 1
			}
		}
		name := fmt.Sprintf("-[C%d s%d]", id%7, id)
		fl := 0
		typ := stream.EventCall
		if r.Intn(40) == 0 {
			typ, fl = stream.EventUnwound, stream.FlagUnwound
		}
		wi := len(want)
		want = append(want, TreeEv{Kind: 'E', TID: tid, Name: name, Start: start, Depth: depth, Flags: fl})
		count++
		var kids uint64
		for k := 0; depth < maxDepth && count < n && r.Intn(4) != 0; k++ {
			kids += emit(depth+1, maxDepth, id, k)
			if marks && r.Intn(16) == 0 {
				ms := *tick
				*tick += uint64(r.Intn(4))
				cnt := uint64(r.Intn(3) + 1)
				evs = append(evs, stream.StreamEvent{Type: stream.EventMark, ID: uint64(stream.MarkLost), Start: ms, End: *tick, Count: cnt})
				want = append(want, TreeEv{Kind: 'M', TID: tid, Name: stream.MarkLost.String(), Start: ms, Dur: *tick - ms, Self: cnt, Depth: depth + 1})
			}
			*tick += uint64(r.Intn(3))
		}
		*tick += uint64(r.Intn(3))
		dur := *tick - start
		want[wi].Dur = dur
		want = append(want, TreeEv{Kind: 'X', TID: tid, Name: name, Start: start, Dur: dur, Self: dur - kids, Depth: depth, Flags: fl})
		evs = append(evs, stream.StreamEvent{Type: typ, ID: id, Start: start, End: *tick, Depth: uint64(depth)})
		return dur
	}
	start := *tick
	*tick++
	rootW := len(want)
	want = append(want, TreeEv{Kind: 'E', TID: tid, Name: "-[C1 s1]", Start: start})
	var kids uint64
	for count < n {
		maxDepth := 6
		if r.Intn(50) == 0 {
			maxDepth = 200
		}
		kids += emit(1, maxDepth, 1, 0)
		*tick += uint64(r.Intn(5))
	}
	*tick++
	dur := *tick - start
	want[rootW].Dur = dur
	want = append(want, TreeEv{Kind: 'X', TID: tid, Name: "-[C1 s1]", Start: start, Dur: dur, Self: dur - kids})
	evs = append(evs, stream.StreamEvent{Type: stream.EventCall, ID: 1, Start: start, End: *tick, Depth: 0})
	return evs, want
}

// WriteThreads writes threads' events as a stream with 1:1 ticks to ns, in frames of random
// sizes up to maxFrame, the threads' frames interleaved; with swap, now and then two frames of a
// thread change places in the file (what a drain that wrote a quiet thread's partial chunk
// before its previous chunk left).
func WriteThreads(t testing.TB, r *rand.Rand, evs [][]stream.StreamEvent, maxFrame int, swap bool) []byte {
	var buf bytes.Buffer
	w := stream.NewStreamWriter(&buf)
	w.Process(stream.StreamProcess{PID: 7, Name: "loop"})
	w.Clock(stream.ClockSample{Tick: 0, MonoNanos: 0, RateNum: 1, RateDen: 1})
	var ms []stream.StreamMethod
	for id := uint64(1); id <= 64; id++ {
		ms = append(ms, stream.StreamMethod{ID: id, Class: fmt.Sprintf("C%d", id%7), Selector: fmt.Sprintf("s%d", id)})
	}
	w.Methods(ms...)
	type fr struct {
		tid uint64
		evs []stream.StreamEvent
	}
	var frames []fr
	for i, e := range evs {
		w.Thread(stream.StreamThread{TID: uint64(100 + i)})
		var mine []fr
		for len(e) > 0 {
			k := min(len(e), 1+r.Intn(maxFrame))
			mine = append(mine, fr{uint64(100 + i), e[:k]})
			e = e[k:]
		}
		if swap {
			for k := 0; k+1 < len(mine); k++ {
				a, b := mine[k].evs, mine[k+1].evs
				if r.Intn(5) == 0 && a[len(a)-1].End < b[0].End {
					mine[k], mine[k+1] = mine[k+1], mine[k]
					k++
				}
			}
		}
		frames = append(frames, mine...)
	}
	r.Shuffle(len(frames), func(a, b int) {}) // keep per-thread order; interleave below
	// interleave threads round-robin, each thread's frames in their (possibly swapped) order
	per := map[uint64][]fr{}
	var order []uint64
	for _, f := range frames {
		if _, ok := per[f.tid]; !ok {
			order = append(order, f.tid)
		}
		per[f.tid] = append(per[f.tid], f)
	}
	for left := true; left; {
		left = false
		for _, tid := range order {
			if len(per[tid]) == 0 {
				continue
			}
			left = true
			f := per[tid][0]
			per[tid] = per[tid][1:]
			if _, err := w.Events(f.tid, f.evs[0].End, f.evs); err != nil {
				t.Fatal(err)
			}
		}
	}
	w.End(stream.StreamCounters{})
	if w.Err() != nil {
		t.Fatal(w.Err())
	}
	return buf.Bytes()
}

// Rebase shifts want's times back by base.
func Rebase(want []TreeEv, base uint64) []TreeEv {
	out := slices.Clone(want)
	for i := range out {
		if out[i].Kind != 'B' {
			out[i].Start -= base
		}
	}
	return out
}
