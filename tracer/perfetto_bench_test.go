package tracer

import (
	"bytes"
	"compress/flate"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/msgtrace/msgtrace/tracer/engine"
	"github.com/msgtrace/msgtrace/tracer/sink"
	"github.com/msgtrace/msgtrace/tracer/stream"
)

// pfGen is a trace that looks like a real program's, for measuring the size and speed of
// the Perfetto encoding: methods distinct methods (names of the length Objective-C's have), a
// call graph in which each method calls a few methods of its own (drawn with a Zipf law, as
// programs call a few methods most), call trees up to 40 deep (11 on average), times ticking
// at 24 MHz (Apple silicon), most calls a few ticks long, a sixth of them no tick at all,
// siblings that touch, children at their parent's tick. Made by pfGenerate; written as a raw
// dump (raw) or a stream (stream).
type pfGen struct {
	classes []string
	methods []pfGenMethod
	threads [][]pfGenCall // per thread, in the order calls ended
}

type pfGenMethod struct {
	class int
	sel   string
}

type pfGenCall struct {
	method     int
	start, end uint64 // ticks
	depth      int
}

func pfGenerate(seed uint64, calls, methods, threads int) *pfGen {
	r := rand.New(rand.NewPCG(seed, 7))
	zipf := rand.NewZipf(r, 1.1, 30, uint64(methods-1))
	g := &pfGen{}
	for c := 0; c < max(1, methods/12); c++ {
		g.classes = append(g.classes, fmt.Sprintf("%sView%dController", []string{"NS", "UI", "CA", "App", "MT"}[c%5], c))
	}
	callees := make([][]int, methods)
	for i := 0; i < methods; i++ {
		g.methods = append(g.methods, pfGenMethod{r.IntN(len(g.classes)),
			fmt.Sprintf("%s%d%s", []string{"layout", "objectFor", "set", "draw", "count", "is"}[i%6], i,
				[]string{"", ":", "WithKey:", ":forKey:", "InContext:options:"}[i%5])})
		for k := 1 + r.IntN(6); k > 0; k-- {
			callees[i] = append(callees[i], int(zipf.Uint64()))
		}
	}
	var out []pfGenCall
	var tick uint64
	var grow func(m, depth int, budget *int)
	grow = func(m, depth int, budget *int) {
		start := tick
		if r.IntN(3) == 0 {
			tick += uint64(r.IntN(2)) // usually the first child starts at its parent's tick
		}
		for depth < 40 && *budget > 0 && (depth == 0 || r.Float64() < 0.48) {
			*budget--
			cs := callees[m]
			grow(cs[r.IntN(len(cs))], depth+1, budget)
			if r.IntN(3) == 0 {
				tick += uint64(1 + r.IntN(4)) // a gap; otherwise the next sibling touches
			}
		}
		// self time: none (a call shorter than a tick) in a third of the calls, a few ticks
		// in most, a long one now and then
		switch x := r.IntN(20); {
		case x < 7:
		case x < 18:
			tick += uint64(1 + r.IntN(4))
		default:
			tick += uint64(r.IntN(2000))
		}
		out = append(out, pfGenCall{m, start, tick, depth})
	}
	for th := 0; th < threads; th++ {
		out = nil
		tick = uint64(r.IntN(1000))
		left := calls / threads
		for left > 0 {
			budget := min(left, 1+r.IntN(5000)) - 1
			left -= budget + 1
			grow(int(zipf.Uint64()), 0, &budget)
			left += budget // what the tree did not use
			tick += uint64(r.IntN(3))
		}
		g.threads = append(g.threads, out)
	}
	return g
}

// pfRealistic is pfGenerate's trace as a raw dump.
func pfRealistic(seed uint64, calls, methods, threads int) []byte {
	return pfGenerate(seed, calls, methods, threads).raw()
}

func (g *pfGen) raw() []byte {
	var names []stream.NameEntry
	for c, name := range g.classes {
		names = append(names, stream.NameEntry{Key: 0x100000 + uint64(c)*0x100, Kind: stream.NameClass, Name: name})
	}
	for i, m := range g.methods {
		names = append(names, stream.NameEntry{Key: 0x4000000 + uint64(i)*8, Kind: stream.NameSelector, Name: m.sel})
	}
	var buf bytes.Buffer
	w := stream.NewWriter(&buf, synthHeader)
	w.WriteNames(names)
	var recs []stream.Record
	for th, calls := range g.threads {
		recs = recs[:0]
		for _, c := range calls {
			recs = append(recs, stream.Record{Start: c.start, End: c.end, Sel: 0x4000000 + uint64(c.method)*8,
				Class: 0x100000 + uint64(g.methods[c.method].class)*0x100 | uint64(c.depth)<<48})
		}
		w.WriteThread(stream.Thread{TID: uint64(1000 + th), Main: th == 0, Name: fmt.Sprintf("worker %d", th)}, recs)
	}
	if err := w.Close(); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// stream writes the trace as a stream, each thread's calls in frames of 2,000 events, the
// threads' frames interleaved.
func (g *pfGen) stream() []byte {
	var buf bytes.Buffer
	w := stream.NewStreamWriter(&buf)
	w.Process(stream.StreamProcess{PID: 777, Name: "realistic"})
	w.Clock(stream.ClockSample{RateNum: synthHeader.TickNum, RateDen: synthHeader.TickDen})
	var ms []stream.StreamMethod
	for i, m := range g.methods {
		ms = append(ms, stream.StreamMethod{ID: uint64(i + 1), Class: g.classes[m.class], Selector: m.sel})
	}
	w.Methods(ms...)
	evs := make([][]stream.StreamEvent, len(g.threads))
	for th, calls := range g.threads {
		w.Thread(stream.StreamThread{TID: uint64(1000 + th), Name: fmt.Sprintf("worker %d", th)})
		for _, c := range calls {
			evs[th] = append(evs[th], stream.StreamEvent{Type: stream.EventCall, ID: uint64(c.method + 1), Start: c.start, End: c.end, Depth: uint64(c.depth)})
		}
	}
	prev := make([]uint64, len(evs))
	var total uint64
	for left := true; left; {
		left = false
		for th := range evs {
			if len(evs[th]) == 0 {
				continue
			}
			left = true
			k := min(2000, len(evs[th]))
			total += uint64(k)
			prev[th], _ = w.Events(uint64(1000+th), prev[th], evs[th][:k])
			evs[th] = evs[th][k:]
		}
	}
	w.End(stream.StreamCounters{Calls: total})
	if w.Err() != nil {
		panic(w.Err())
	}
	return buf.Bytes()
}

// pfOp is one call of a TreeSink, recorded to be replayed; pointer-free, so that a
// recording of millions of calls costs the garbage collector nothing.
type pfOp struct {
	op                byte // 'B'egin thread, 'E'nter, 'X'it, 'M'ark, 'e'nd thread
	kind              stream.MarkKind
	depth, name, th   int32 // name: index in pfRecorder.names; th: in threads
	flags             int32
	start, dur, count uint64 // count: a mark's; self time for an exit
}

type pfRecorder struct {
	ops     []pfOp
	names   []string
	nameIdx map[string]int32
	headers []stream.Header
	threads []stream.Thread
}

func (r *pfRecorder) name(s string) int32 {
	if r.nameIdx == nil {
		r.nameIdx = map[string]int32{}
	}
	i, ok := r.nameIdx[s]
	if !ok {
		i = int32(len(r.names))
		r.names = append(r.names, s)
		r.nameIdx[s] = i
	}
	return i
}

func (r *pfRecorder) BeginThread(h *stream.Header, t *stream.Thread) error {
	r.headers, r.threads = append(r.headers, *h), append(r.threads, *t)
	r.ops = append(r.ops, pfOp{op: 'B', th: int32(len(r.threads) - 1)})
	return nil
}
func (r *pfRecorder) call(op byte, c *engine.Call, d int, self uint64) {
	r.ops = append(r.ops, pfOp{op: op, depth: int32(d), name: r.name(c.Name), flags: int32(c.Flags),
		start: c.StartNanos, dur: c.DurNanos, count: self})
}
func (r *pfRecorder) Enter(c *engine.Call, d int) error { r.call('E', c, d, 0); return nil }
func (r *pfRecorder) Exit(c *engine.Call, d int) error  { r.call('X', c, d, c.SelfNanos); return nil }
func (r *pfRecorder) Mark(m *stream.Mark, d int) error {
	r.ops = append(r.ops, pfOp{op: 'M', kind: m.Kind, depth: int32(d), start: m.StartNanos, dur: m.DurNanos, count: m.Count})
	return nil
}
func (r *pfRecorder) EndThread() error          { r.ops = append(r.ops, pfOp{op: 'e'}); return nil }
func (r *pfRecorder) Close(engine.Totals) error { return nil }

// replay feeds the recorded calls to ts.
func (r *pfRecorder) replay(ts engine.TreeSink) error {
	var err error
	var th *stream.Thread
	var c engine.Call // one Call and Mark, reused: what the pointers passed escape to is allocated once
	var m stream.Mark
	for i := range r.ops {
		o := &r.ops[i]
		switch o.op {
		case 'B':
			th = &r.threads[o.th]
			err = ts.BeginThread(&r.headers[o.th], th)
		case 'E', 'X':
			c = engine.Call{Name: r.names[o.name], StartNanos: o.start, DurNanos: o.dur, Depth: int(o.depth),
				Flags: int(o.flags), Thread: th}
			if o.op == 'E' {
				err = ts.Enter(&c, int(o.depth))
			} else {
				c.SelfNanos = o.count
				err = ts.Exit(&c, int(o.depth))
			}
		case 'M':
			m = stream.Mark{Kind: o.kind, StartNanos: o.start, DurNanos: o.dur, Count: o.count, Thread: th}
			err = ts.Mark(&m, int(o.depth))
		case 'e':
			err = ts.EndThread()
		}
		if err != nil {
			return err
		}
	}
	return ts.Close(engine.Totals{})
}

// countWriter counts what is written to it.
type countWriter struct{ n int }

func (c *countWriter) Write(p []byte) (int, error) { c.n += len(p); return len(p), nil }

// pfVariants are the encodings BenchmarkPerfetto compares: the packets uncompressed, in
// compressed_packets made by pfDeflater (the default), by compress/zlib at BestSpeed and at
// HuffmanOnly.
var pfVariants = []struct {
	name string
	sink func(io.Writer) *sink.PerfettoSink
}{
	{"uncompressed", func(w io.Writer) *sink.PerfettoSink {
		s := sink.NewPerfettoSink(w, sink.Meta{})
		s.Uncompressed = true
		return s
	}},
	{"pfdeflate", func(w io.Writer) *sink.PerfettoSink { return sink.NewPerfettoSink(w, sink.Meta{}) }},
	{"zlib1", func(w io.Writer) *sink.PerfettoSink {
		s := sink.NewPerfettoSink(w, sink.Meta{})
		s.Level = flate.BestSpeed
		return s
	}},
	{"huffman", func(w io.Writer) *sink.PerfettoSink {
		s := sink.NewPerfettoSink(w, sink.Meta{})
		s.Level = flate.HuffmanOnly
		return s
	}},
}

// BenchmarkPerfetto measures the Perfetto encoding on a realistic trace of 2,000,000 calls
// (pfGenerate: 4 threads, 3,000 methods), for each encoding of pfVariants: "sink" is the
// encoder alone (the pre-order calls replayed into it), "raw" and "stream" the whole
// conversion from the trace in memory as a raw dump or a stream (reading, pre-order,
// encoding; output discarded); "none" is the conversion to a sink that does nothing (the
// floor), "json" to Chrome JSON. Reports calls/s, the CPU time of all threads per call, and
// the bytes written per call.
func BenchmarkPerfetto(b *testing.B) {
	g := pfGenerate(1, 2_000_000, 3000, 4)
	raw, stream := g.raw(), g.stream()
	g = nil
	rec := &pfRecorder{}
	tot, err := engine.Process(bytes.NewReader(raw), engine.Options{MaxDepth: -1}, engine.PreOrder(rec))
	if err != nil {
		b.Fatal(err)
	}
	run := func(name string, sink func(w io.Writer) engine.Sink, conv func(engine.Sink) error) {
		b.Run(name, func(b *testing.B) {
			var cw countWriter
			runtime.GC()
			t0, c0 := time.Now(), cpuTime()
			for i := 0; i < b.N; i++ {
				cw.n = 0
				if err := conv(sink(&cw)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(tot.Kept)*float64(b.N)/time.Since(t0).Seconds(), "calls/s")
			b.ReportMetric(float64(cpuTime()-c0)/float64(tot.Kept)/float64(b.N), "cpu-ns/call")
			if cw.n > 0 {
				b.ReportMetric(float64(cw.n)/float64(tot.Kept), "B/call")
			}
		})
	}
	replay := func(s engine.Sink) error { return rec.replay(s.(*sink.PerfettoSink).Needs().Tree) }
	fromRaw := func(s engine.Sink) error {
		_, err := engine.Process(bytes.NewReader(raw), engine.Options{MaxDepth: -1}, s)
		return err
	}
	fromStream := func(s engine.Sink) error {
		_, err := engine.Process(bytes.NewReader(stream), engine.Options{MaxDepth: -1}, s)
		return err
	}
	for _, v := range pfVariants {
		sink := func(w io.Writer) engine.Sink { return v.sink(w) }
		run("sink/"+v.name, sink, replay)
		run("raw/"+v.name, sink, fromRaw)
		run("stream/"+v.name, sink, fromStream)
	}
	run("sink/none", func(io.Writer) engine.Sink { return nil }, func(engine.Sink) error { return rec.replay(pfNop{}) })
	run("raw/none", func(io.Writer) engine.Sink { return engine.PreOrder(pfNop{}) }, fromRaw)
	run("stream/none", func(io.Writer) engine.Sink { return pfNopSink{} }, fromStream)
	run("stream/json", func(w io.Writer) engine.Sink {
		s, _ := NewSink("json", w, sink.Meta{Budget: -1})
		return s
	}, fromStream)
}

// pfNopSink does nothing, in pre-order (as a timeline sink) or not.
type pfNopSink struct{}

func (pfNopSink) BeginThread(*stream.Header, *stream.Thread) error { return nil }
func (pfNopSink) Call(*engine.Call) error                          { return nil }
func (pfNopSink) Skip(int) error                                   { return nil }
func (pfNopSink) Mark(*stream.Mark) error                          { return nil }
func (pfNopSink) EndThread() error                                 { return nil }
func (pfNopSink) Close(engine.Totals) error                        { return nil }
func (pfNopSink) Needs() engine.Needs                              { return engine.Needs{Tree: pfNop{}} }

type pfNop struct{}

func (pfNop) BeginThread(*stream.Header, *stream.Thread) error { return nil }
func (pfNop) Enter(*engine.Call, int) error                    { return nil }
func (pfNop) Exit(*engine.Call, int) error                     { return nil }
func (pfNop) Mark(*stream.Mark, int) error                     { return nil }
func (pfNop) EndThread() error                                 { return nil }
func (pfNop) Close(engine.Totals) error                        { return nil }

// cpuTime is the CPU time the process has used (all its threads), in ns.
func cpuTime() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}
