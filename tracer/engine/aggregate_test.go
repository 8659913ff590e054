package engine_test

import (
	"bytes"
	"encoding/binary"
	"math/rand"
	"strings"
	"testing"

	"github.com/msgtrace/msgtrace/tracer/engine"
	"github.com/msgtrace/msgtrace/tracer/internal/tracetest"
	"github.com/msgtrace/msgtrace/tracer/sink"
	"github.com/msgtrace/msgtrace/tracer/stream"
)

// aggConvert converts streams to an aggregate format through the aggregates' path, or (generic)
// through the generic one, and returns the output and totals.
func aggConvert(t *testing.T, ins [][]byte, format string, opt engine.Options, generic bool) ([]byte, engine.Totals) {
	t.Helper()
	var out bytes.Buffer
	s := newSink(t, format, &out, sink.Meta{TimeNanos: 1})
	if generic {
		s = tracetest.GenericSink{Sink: s}
	}
	var in []engine.Input
	for _, b := range ins {
		in = append(in, engine.Input{R: bytes.NewReader(b), Size: int64(len(b))})
	}
	tot, err := engine.ProcessStreams(in, opt, s)
	if err != nil {
		t.Fatalf("%s (generic %v): %v", format, generic, err)
	}
	return out.Bytes(), tot
}

// aggSame checks that every aggregate format comes out of the aggregates' path byte for byte as
// out of the generic path, with the same totals; it returns how many threads the aggregates'
// path read backwards and how many it left to the generic path.
func aggSame(t *testing.T, name string, ins [][]byte, opt engine.Options) (fast, generic int) {
	t.Helper()
	defer func() { *engine.AggTestHook = nil }()
	lazy := false
	*engine.AggTestHook = func(f, g int, l bool) { fast, generic, lazy = f, g, l }
	defer func() {
		// pass 1 leaves events undecoded unless a thread is left to the generic path,
		// threads are selected or a frame does not decode
		if want := generic == 0 && opt.Threads == "" && !strings.HasPrefix(name, "again"); lazy != want {
			t.Errorf("%s: pass 1 lazy %v, want %v", name, lazy, want)
		}
	}()
	for _, format := range []string{"pprof", "folded", "svg"} {
		want, wtot := aggConvert(t, ins, format, opt, true)
		got, gtot := aggConvert(t, ins, format, opt, false)
		if !bytes.Equal(got, want) {
			t.Errorf("%s: %s: %d bytes from the aggregates' path, %d from the generic one, not the same", name, format, len(got), len(want))
		}
		if gtot != wtot {
			t.Errorf("%s: %s: totals %+v, generic %+v", name, format, gtot, wtot)
		}
		if wtot.Calls == 0 {
			t.Errorf("%s: no calls", name)
		}
	}
	return fast, generic
}

// TestAggregateSameOutput: the aggregates' path gives the generic path's pprof, folded and SVG
// byte for byte, on streams with several interleaved threads, unwound calls, calls open at a
// kill (open frames), frames out of order in the file, a damaged frame, calls lost with their
// loss marks and without (orphans), frames bigger than its decoding chunk, and several streams
// at once. Threads with orphans are left to the generic path, the others are read backwards
// (checked: both kinds occur).
func TestAggregateSameOutput(t *testing.T) {
	defer func(v uint64) { *engine.AggParallelMin = v }(*engine.AggParallelMin)
	*engine.AggParallelMin = 0 // threads read on two goroutines, whatever their size
	// the generic path places marks segment by segment: small segments, and the default
	for _, seg := range []uint32{50, *engine.SegEvents} {
		func() {
			defer func(s uint32) { *engine.SegEvents = s }(*engine.SegEvents)
			*engine.SegEvents = seg
			aggSameStreams(t)
		}()
	}
}

func aggSameStreams(t *testing.T) {
	opt := engine.Options{MaxDepth: -1}
	// four threads, open frames, a damaged frame; with marks, and without
	for _, marks := range []bool{false, true} {
		g := tracetest.Gen(t, tracetest.GenOpts{Seed: 21, PID: 1, Threads: 4, PerTh: 20_000, FrameEvents: 300, Line: tracetest.Line24MHz, Marks: marks, OpenAfterFrame: 5})
		b := bytes.Clone(g.B)
		b[len(b)/2] ^= 0x40
		if f, gn := aggSame(t, "gen", [][]byte{b}, opt); f < 3 {
			t.Errorf("gen marks=%v: %d threads read backwards, %d generic", marks, f, gn)
		}
	}
	// two processes, one with marks, merged in order; and a thread selection
	g1 := tracetest.Gen(t, tracetest.GenOpts{Seed: 22, PID: 1, Threads: 3, PerTh: 10_000, FrameEvents: 200, Line: tracetest.Line24MHz, Marks: true, OpenAfterFrame: 3})
	g2 := tracetest.Gen(t, tracetest.GenOpts{Seed: 23, PID: 2, Threads: 3, PerTh: 10_000, FrameEvents: 200, Line: tracetest.Line24MHz, OpenAfterFrame: 4})
	if f, gn := aggSame(t, "two streams", [][]byte{g1.B, g2.B}, opt); f == 0 {
		t.Errorf("two streams: %d threads read backwards, %d generic", f, gn)
	}
	aggSame(t, "two streams, threads", [][]byte{g1.B, g2.B}, engine.Options{MaxDepth: -1, Threads: "t1,2001"})

	// run loops: one outermost call per thread, unwound calls, recursion, loss marks after
	// calls and waits anywhere (one thread without marks); frames of every size, some swapped
	// in the file
	r := rand.New(rand.NewSource(5))
	tick := uint64(10)
	var all [][]stream.StreamEvent
	for th := 0; th < 3; th++ {
		evs, _ := tracetest.RunloopShaped(r, uint64(100+th), 20_000, 60, &tick, th != 2, th != 1)
		if th != 2 {
			evs = sprinkleWaits(r, evs)
		}
		all = append(all, evs)
	}
	b := tracetest.WriteThreads(t, r, all, 500, true)
	if f, gn := aggSame(t, "runloop", [][]byte{b}, opt); f != 3 || gn != 0 {
		t.Errorf("runloop: %d threads read backwards, %d generic", f, gn)
	}

	// calls lost, with their loss marks and silently: orphans, found on the way (generic path);
	// and a thread without losses next to it, with loss marks placed among its calls
	for _, withMarks := range []bool{true, false} {
		r := rand.New(rand.NewSource(9))
		tick = 10
		evs, _ := tracetest.Runloop(r, 100, 30_000, 60, &tick, false)
		var kept []stream.StreamEvent
		for i := 0; i < len(evs); i++ {
			if e := evs[i]; e.Depth > 0 && e.Depth < 4 && r.Intn(30) == 0 {
				k := min(i+1+r.Intn(3), len(evs)-1)
				if withMarks {
					kept = append(kept, stream.StreamEvent{Type: stream.EventMark, ID: uint64(stream.MarkLost), Start: evs[i].End, End: evs[k-1].End, Count: uint64(k - i)})
				}
				i = k - 1
				continue
			}
			kept = append(kept, evs[i])
		}
		clean, _ := tracetest.Runloop(r, 101, 5_000, 60, &tick, true)
		b := tracetest.WriteThreads(t, r, [][]stream.StreamEvent{kept, clean}, 200, false)
		if f, gn := aggSame(t, "losses", [][]byte{b}, opt); f != 1 || gn != 1 {
			t.Errorf("losses (marks %v): %d threads read backwards, %d generic", withMarks, f, gn)
		}
	}

	// frames whose checksum holds and whose events do not decode (a bad event type; a varint
	// cut short), as a thread's first events frame: pass 1 leaves them out, and so does the
	// conversion made again when pass 2 finds them
	for _, bad := range [][]byte{{3, 0, 0, 0}, {2, 0, 0x80}} {
		g := tracetest.Gen(t, tracetest.GenOpts{Seed: 24, PID: 1, Threads: 3, PerTh: 5_000, FrameEvents: 200, Line: tracetest.Line24MHz, Marks: true, OpenAfterFrame: 4})
		var buf bytes.Buffer
		w := stream.NewStreamWriter(&buf)
		pl := binary.LittleEndian.AppendUint64(nil, 1007)
		pl = binary.LittleEndian.AppendUint64(pl, 0)
		w.Thread(stream.StreamThread{TID: 1007, Name: "late"})
		w.Frame(stream.FrameEvents, append(pl, bad...))
		w.Events(1007, 0, []stream.StreamEvent{{Type: stream.EventCall, ID: 1, Start: tracetest.Line24MHz.Tick0 + 1<<32, End: tracetest.Line24MHz.Tick0 + 1<<32 + 4}})
		b := append(bytes.Clone(g.B), buf.Bytes()...)
		aggSame(t, "again: malformed", [][]byte{b}, opt)
	}

	// a call open at the end of the trace, whose end is the trace's latest tick: in a frame of
	// another thread that is not its last (that thread's frames out of order in the file),
	// where pass 2 cannot know it before the open call is read
	{
		var buf bytes.Buffer
		w := stream.NewStreamWriter(&buf)
		w.Process(stream.StreamProcess{PID: 9, Name: "late end"})
		w.Clock(stream.ClockSample{Tick: 0, MonoNanos: 0, RateNum: 1, RateDen: 1})
		w.Methods(stream.StreamMethod{ID: 1, Class: "A", Selector: "run"}, stream.StreamMethod{ID: 2, Class: "A", Selector: "step"})
		w.Thread(stream.StreamThread{TID: 1, Flags: stream.ThreadMain})
		w.Thread(stream.StreamThread{TID: 2, Name: "worker"})
		w.Events(1, 0, []stream.StreamEvent{{Type: stream.EventCall, ID: 2, Start: 100, End: 110, Depth: 1}})
		w.Events(2, 0, []stream.StreamEvent{{Type: stream.EventCall, ID: 2, Start: 900, End: 1000}})
		w.Events(2, 0, []stream.StreamEvent{{Type: stream.EventCall, ID: 1, Start: 150, End: 200}})
		w.Open(1, 120, []stream.OpenCall{{ID: 1, Start: 50, Depth: 0}})
		if f, _ := aggSame(t, "again: open end", [][]byte{buf.Bytes()}, opt); f != 2 {
			t.Errorf("open end: %d threads read backwards", f)
		}
	}

	// frames bigger than the decoding chunk
	r = rand.New(rand.NewSource(3))
	tick = 10
	evs, _ := tracetest.RunloopShaped(r, 100, 3*engine.AggChunk, 60, &tick, true, true)
	b = tracetest.WriteThreads(t, r, [][]stream.StreamEvent{evs}, 4*engine.AggChunk, false)
	if f, _ := aggSame(t, "big frames", [][]byte{b}, opt); f != 1 {
		t.Errorf("big frames: %d threads read backwards", f)
	}
}

// sprinkleWaits puts wait marks before random records, starting about when the record does
// (before, at or after its start, so before or after the calls it is the first record of).
func sprinkleWaits(r *rand.Rand, evs []stream.StreamEvent) []stream.StreamEvent {
	var out []stream.StreamEvent
	for _, e := range evs {
		if e.Type != stream.EventMark && r.Intn(12) == 0 {
			st := max(e.Start+uint64(r.Intn(5)), 2) - 2
			out = append(out, stream.StreamEvent{Type: stream.EventMark, ID: uint64(stream.MarkWait), Start: st, End: st + uint64(r.Intn(3))})
		}
		out = append(out, e)
	}
	return out
}
