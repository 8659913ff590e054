package tracer

import (
	"bufio"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/msgtrace/msgtrace/tracer/engine"
	"github.com/msgtrace/msgtrace/tracer/stream"
)

// writeBigBoth writes the same n calls (8 threads, balanced trees 8 deep, 64 classes x 64
// selectors, a 24 MHz tick) as a raw dump and as a stream whose events frames hold 4096 events
// each, the threads' frames interleaved as a drain writes them.
func writeBigBoth(b *testing.B, n int) (raw, strm string) {
	dir := b.TempDir()
	raw, strm = filepath.Join(dir, "big.raw"), filepath.Join(dir, "big.mtrace")
	rf, err := os.Create(raw)
	if err != nil {
		b.Fatal(err)
	}
	sf, err := os.Create(strm)
	if err != nil {
		b.Fatal(err)
	}
	bw := bufio.NewWriterSize(sf, 1<<20)
	rw := stream.NewWriter(rf, stream.Header{PID: 1, TickNum: 125, TickDen: 3, BaseTick: 0})
	sw := stream.NewStreamWriter(bw)
	sw.Process(stream.StreamProcess{PID: 1, Name: "bench"})
	sw.Clock(stream.ClockSample{Tick: 0, MonoNanos: 1e9, RateNum: 125, RateDen: 3})
	var names []stream.NameEntry
	var methods []stream.StreamMethod
	cls := func(i uint64) string { return "Class" + string(rune('A'+i%26)) + string(rune('a'+i/26)) }
	sel := func(i uint64) string { return "selector" + string(rune('a'+i%26)) + ":with:" }
	for i := uint64(0); i < 64; i++ {
		names = append(names, stream.NameEntry{Key: 0x100000 + i*0x100, Kind: stream.NameClass, Name: cls(i)}, stream.NameEntry{Key: 0x900000 + i*8, Kind: stream.NameSelector, Name: sel(i)})
	}
	for c := uint64(0); c < 64; c++ {
		for s := uint64(0); s < 64; s++ {
			methods = append(methods, stream.StreamMethod{ID: 1 + c*64 + s, Class: cls(c), Selector: sel(s)})
		}
	}
	rw.WriteNames(names)
	sw.Methods(methods...)
	const threads = 8
	per := n / threads / 255 * 255
	type th struct {
		recs []stream.Record
		evs  []stream.StreamEvent
	}
	all := make([]th, threads)
	for t := range all {
		sw.Thread(stream.StreamThread{TID: uint64(1000 + t), Flags: uint64(min(t, 1) ^ 1)})
		tick, count := uint64(0), 0
		var emit func(depth uint64)
		emit = func(depth uint64) {
			start := tick
			tick += 7
			if depth < 7 {
				emit(depth + 1)
				emit(depth + 1)
			}
			tick += 11
			i := uint64(count)
			count++
			c, s := i%64, i/64%64
			all[t].recs = append(all[t].recs, stream.Record{Start: start, End: tick, Class: (0x100000 + c*0x100) | depth<<48, Sel: 0x900000 + s*8})
			all[t].evs = append(all[t].evs, stream.StreamEvent{Type: stream.EventCall, ID: 1 + c*64 + s, Start: start, End: tick, Depth: depth})
		}
		for count < per {
			emit(0)
		}
		rw.WriteThread(stream.Thread{TID: uint64(1000 + t), Main: t == 0}, all[t].recs)
		all[t].recs = nil
	}
	prev := make([]uint64, threads)
	for done := false; !done; {
		done = true
		for t := range all {
			if len(all[t].evs) == 0 {
				continue
			}
			done = false
			k := min(4096, len(all[t].evs))
			prev[t], _ = sw.Events(uint64(1000+t), prev[t], all[t].evs[:k])
			all[t].evs = all[t].evs[k:]
		}
	}
	sw.End(stream.StreamCounters{Calls: uint64(per * threads)})
	if err := rw.Close(); err != nil {
		b.Fatal(err)
	}
	if err := bw.Flush(); err != nil || sw.Err() != nil {
		b.Fatal(err, sw.Err())
	}
	rf.Close()
	sf.Close()
	return raw, strm
}

// nopSink takes calls and does nothing: what is measured is reading.
type nopSink struct{}

func (nopSink) BeginThread(*stream.Header, *stream.Thread) error { return nil }
func (nopSink) Call(*engine.Call) error                          { return nil }
func (nopSink) Needs() engine.Needs                              { return engine.Needs{} }
func (nopSink) Skip(int) error                                   { return nil }
func (nopSink) Mark(*stream.Mark) error                          { return nil }
func (nopSink) EndThread() error                                 { return nil }
func (nopSink) Close(engine.Totals) error                        { return nil }

// BenchmarkStreamDecode reads 4,000,000 calls from a strm file and the same calls from a
// raw v1 dump, in the same run, into a sink that does nothing: calls/s of each, their ratio,
// bytes per call of each file, and the bytes the strm reader allocates per run (constant
// in the number of calls).
func BenchmarkStreamDecode(b *testing.B) {
	raw, strm := writeBigBoth(b, 4_000_000)
	var rawT, streamT time.Duration
	var calls uint64
	var alloc uint64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, p := range []string{raw, strm} {
			f, err := os.Open(p)
			if err != nil {
				b.Fatal(err)
			}
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			t0 := time.Now()
			tot, err := engine.Process(f, engine.Options{MaxDepth: -1}, nopSink{})
			d := time.Since(t0)
			runtime.ReadMemStats(&m1)
			f.Close()
			if err != nil {
				b.Fatal(err)
			}
			calls = tot.Calls
			if p == raw {
				rawT += d
			} else {
				streamT += d
				alloc += m1.TotalAlloc - m0.TotalAlloc
			}
		}
	}
	rs, _ := os.Stat(raw)
	ss, _ := os.Stat(strm)
	b.ReportMetric(float64(calls)*float64(b.N)/streamT.Seconds(), "stream-calls/s")
	b.ReportMetric(float64(calls)*float64(b.N)/rawT.Seconds(), "raw-calls/s")
	b.ReportMetric(rawT.Seconds()/streamT.Seconds(), "stream/raw-speed")
	b.ReportMetric(float64(ss.Size())/float64(calls), "stream-B/call")
	b.ReportMetric(float64(rs.Size())/float64(calls), "raw-B/call")
	b.ReportMetric(float64(alloc)/float64(b.N), "stream-alloc-B/run")
}
