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
	var names []NameEntry
	for c, name := range g.classes {
		names = append(names, NameEntry{0x100000 + uint64(c)*0x100, NameClass, name})
	}
	for i, m := range g.methods {
		names = append(names, NameEntry{0x4000000 + uint64(i)*8, NameSelector, m.sel})
	}
	var buf bytes.Buffer
	w := NewWriter(&buf, synthHeader)
	w.WriteNames(names)
	var recs []Record
	for th, calls := range g.threads {
		recs = recs[:0]
		for _, c := range calls {
			recs = append(recs, Record{Start: c.start, End: c.end, Sel: 0x4000000 + uint64(c.method)*8,
				Class: 0x100000 + uint64(g.methods[c.method].class)*0x100 | uint64(c.depth)<<48})
		}
		w.WriteThread(Thread{TID: uint64(1000 + th), Main: th == 0, Name: fmt.Sprintf("worker %d", th)}, recs)
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
	w := NewStreamWriter(&buf)
	w.Process(StreamProcess{PID: 777, Name: "realistic"})
	w.Clock(ClockSample{RateNum: synthHeader.TickNum, RateDen: synthHeader.TickDen})
	var ms []StreamMethod
	for i, m := range g.methods {
		ms = append(ms, StreamMethod{ID: uint64(i + 1), Class: g.classes[m.class], Selector: m.sel})
	}
	w.Methods(ms...)
	evs := make([][]StreamEvent, len(g.threads))
	for th, calls := range g.threads {
		w.Thread(StreamThread{TID: uint64(1000 + th), Name: fmt.Sprintf("worker %d", th)})
		for _, c := range calls {
			evs[th] = append(evs[th], StreamEvent{Type: EventCall, ID: uint64(c.method + 1), Start: c.start, End: c.end, Depth: uint64(c.depth)})
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
	w.End(StreamCounters{Calls: total})
	if w.Err() != nil {
		panic(w.Err())
	}
	return buf.Bytes()
}

// pfOp is one call of a TreeSink, recorded to be replayed; pointer-free, so that a
// recording of millions of calls costs the garbage collector nothing.
type pfOp struct {
	op                byte // 'B'egin thread, 'E'nter, 'X'it, 'M'ark, 'e'nd thread
	kind              MarkKind
	depth, name, th   int32 // name: index in pfRecorder.names; th: in threads
	flags             int32
	start, dur, count uint64 // count: a mark's; self time for an exit
}

type pfRecorder struct {
	ops     []pfOp
	names   []string
	nameIdx map[string]int32
	headers []Header
	threads []Thread
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

func (r *pfRecorder) BeginThread(h *Header, t *Thread) error {
	r.headers, r.threads = append(r.headers, *h), append(r.threads, *t)
	r.ops = append(r.ops, pfOp{op: 'B', th: int32(len(r.threads) - 1)})
	return nil
}
func (r *pfRecorder) call(op byte, c *Call, d int, self uint64) {
	r.ops = append(r.ops, pfOp{op: op, depth: int32(d), name: r.name(c.Name), flags: int32(c.Flags),
		start: c.StartNanos, dur: c.DurNanos, count: self})
}
func (r *pfRecorder) Enter(c *Call, d int) error { r.call('E', c, d, 0); return nil }
func (r *pfRecorder) Exit(c *Call, d int) error  { r.call('X', c, d, c.SelfNanos); return nil }
func (r *pfRecorder) Mark(m *Mark, d int) error {
	r.ops = append(r.ops, pfOp{op: 'M', kind: m.Kind, depth: int32(d), start: m.StartNanos, dur: m.DurNanos, count: m.Count})
	return nil
}
func (r *pfRecorder) EndThread() error   { r.ops = append(r.ops, pfOp{op: 'e'}); return nil }
func (r *pfRecorder) Close(Totals) error { return nil }

// replay feeds the recorded calls to ts.
func (r *pfRecorder) replay(ts TreeSink) error {
	var err error
	var th *Thread
	var c Call // one Call and Mark, reused: what the pointers passed escape to is allocated once
	var m Mark
	for i := range r.ops {
		o := &r.ops[i]
		switch o.op {
		case 'B':
			th = &r.threads[o.th]
			err = ts.BeginThread(&r.headers[o.th], th)
		case 'E', 'X':
			c = Call{Name: r.names[o.name], StartNanos: o.start, DurNanos: o.dur, Depth: int(o.depth),
				Flags: int(o.flags), Thread: th}
			if o.op == 'E' {
				err = ts.Enter(&c, int(o.depth))
			} else {
				c.SelfNanos = o.count
				err = ts.Exit(&c, int(o.depth))
			}
		case 'M':
			m = Mark{Kind: o.kind, StartNanos: o.start, DurNanos: o.dur, Count: o.count, Thread: th}
			err = ts.Mark(&m, int(o.depth))
		case 'e':
			err = ts.EndThread()
		}
		if err != nil {
			return err
		}
	}
	return ts.Close(Totals{})
}

// countWriter counts what is written to it.
type countWriter struct{ n int }

func (c *countWriter) Write(p []byte) (int, error) { c.n += len(p); return len(p), nil }

// pfVariants are the encodings BenchmarkPerfetto compares: the packets uncompressed, in
// compressed_packets made by pfDeflater (the default), by compress/zlib at BestSpeed and at
// HuffmanOnly.
var pfVariants = []struct {
	name string
	sink func(io.Writer) *PerfettoSink
}{
	{"uncompressed", func(w io.Writer) *PerfettoSink {
		s := NewPerfettoSink(w, Meta{})
		s.Uncompressed = true
		return s
	}},
	{"pfdeflate", func(w io.Writer) *PerfettoSink { return NewPerfettoSink(w, Meta{}) }},
	{"zlib1", func(w io.Writer) *PerfettoSink {
		s := NewPerfettoSink(w, Meta{})
		s.level = flate.BestSpeed
		return s
	}},
	{"huffman", func(w io.Writer) *PerfettoSink {
		s := NewPerfettoSink(w, Meta{})
		s.level = flate.HuffmanOnly
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
	tot, err := Process(bytes.NewReader(raw), Options{MaxDepth: -1}, PreOrder(rec))
	if err != nil {
		b.Fatal(err)
	}
	run := func(name string, sink func(w io.Writer) Sink, conv func(Sink) error) {
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
	replay := func(s Sink) error { return rec.replay(s.(*PerfettoSink).Needs().Tree) }
	fromRaw := func(s Sink) error {
		_, err := Process(bytes.NewReader(raw), Options{MaxDepth: -1}, s)
		return err
	}
	fromStream := func(s Sink) error {
		_, err := Process(bytes.NewReader(stream), Options{MaxDepth: -1}, s)
		return err
	}
	for _, v := range pfVariants {
		sink := func(w io.Writer) Sink { return v.sink(w) }
		run("sink/"+v.name, sink, replay)
		run("raw/"+v.name, sink, fromRaw)
		run("stream/"+v.name, sink, fromStream)
	}
	run("sink/none", func(io.Writer) Sink { return nil }, func(Sink) error { return rec.replay(pfNop{}) })
	run("raw/none", func(io.Writer) Sink { return PreOrder(pfNop{}) }, fromRaw)
	run("stream/none", func(io.Writer) Sink { return pfNopSink{} }, fromStream)
	run("stream/json", func(w io.Writer) Sink {
		s, _ := NewSink("json", w, Meta{Budget: -1})
		return s
	}, fromStream)
}

// pfNopSink does nothing, in pre-order (as a timeline sink) or not.
type pfNopSink struct{}

func (pfNopSink) BeginThread(*Header, *Thread) error { return nil }
func (pfNopSink) Call(*Call) error                   { return nil }
func (pfNopSink) Skip(int) error                     { return nil }
func (pfNopSink) Mark(*Mark) error                   { return nil }
func (pfNopSink) EndThread() error                   { return nil }
func (pfNopSink) Close(Totals) error                 { return nil }
func (pfNopSink) Needs() Needs                       { return Needs{Tree: pfNop{}} }

type pfNop struct{}

func (pfNop) BeginThread(*Header, *Thread) error { return nil }
func (pfNop) Enter(*Call, int) error             { return nil }
func (pfNop) Exit(*Call, int) error              { return nil }
func (pfNop) Mark(*Mark, int) error              { return nil }
func (pfNop) EndThread() error                   { return nil }
func (pfNop) Close(Totals) error                 { return nil }

// cpuTime is the CPU time the process has used (all its threads), in ns.
func cpuTime() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}
