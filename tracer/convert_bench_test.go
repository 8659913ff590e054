package tracer

import (
	"encoding/binary"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/msgtrace/msgtrace/tracer/engine"
	"github.com/msgtrace/msgtrace/tracer/internal/tracetest"
	"github.com/msgtrace/msgtrace/tracer/sink"
	"github.com/msgtrace/msgtrace/tracer/stream"
)

// BenchmarkConvert converts a 4,000,000-call stream whose run is one call per thread (2
// threads, as a GUI app's run loop encloses its whole run; frames of 2046 events as the
// drain writes 64 KiB chunks) to every format, discarding the output, and decodes the same
// stream in the same run (every frame checked, every event decoded: the floor any
// conversion stands on). Reports calls/s of each and its ratio to decoding; the timelines
// with their default budget, and with every call (-all).
func BenchmarkConvert(b *testing.B) {
	const n = 4_000_000
	r := rand.New(rand.NewSource(1))
	tick := uint64(10)
	var all [][]stream.StreamEvent
	for th := 0; th < 2; th++ {
		evs, _ := tracetest.RunloopShaped(r, uint64(100+th), n/2, 60, &tick, true, true)
		all = append(all, evs)
	}
	p := filepath.Join(b.TempDir(), "loop.mtrace")
	if err := os.WriteFile(p, tracetest.WriteThreads(b, r, all, 2046, false), 0o644); err != nil {
		b.Fatal(err)
	}
	all = nil
	open := func() (*os.File, engine.Input) {
		f, err := os.Open(p)
		if err != nil {
			b.Fatal(err)
		}
		st, _ := f.Stat()
		return f, engine.Input{R: f, Size: st.Size()}
	}
	times := map[string]time.Duration{}
	var calls uint64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		f, in := open()
		t0 := time.Now()
		if _, err := decodeOnly(in); err != nil {
			b.Fatal(err)
		}
		times["decode"] += time.Since(t0)
		f.Close()
		for _, format := range append(Formats, "json-all", "perfetto-all", "speedscope-all") {
			f, in := open()
			m := sink.Meta{}
			if name, ok := strings.CutSuffix(format, "-all"); ok {
				m.Budget, format = -1, name
			}
			s, err := NewSink(format, discard{}, m)
			if err != nil {
				b.Fatal(err)
			}
			t0 := time.Now()
			tot, err := engine.ProcessStreams([]engine.Input{in}, engine.Options{MaxDepth: -1}, s)
			if m.Budget < 0 {
				format += "-all"
			}
			times[format] += time.Since(t0)
			f.Close()
			if err != nil {
				b.Fatal(err)
			}
			calls = tot.Calls
		}
	}
	rate := func(d time.Duration) float64 { return float64(calls) * float64(b.N) / d.Seconds() }
	b.ReportMetric(rate(times["decode"])/1e6, "decode-Mcalls/s")
	for _, format := range append(Formats, "json-all", "perfetto-all", "speedscope-all") {
		b.ReportMetric(rate(times[format])/1e6, format+"-Mcalls/s")
		b.ReportMetric(times["decode"].Seconds()/times[format].Seconds(), format+"/decode")
	}
}

// BenchmarkConvertOne converts a 500,000-call stream of BenchmarkConvert's shape to one format
// (MSGTRACE_BENCH_FORMAT: pprof by default; "decode" decodes only; MSGTRACE_BENCH_BUDGET=all
// keeps every call of a timeline, as --max-calls all does), for instruction counts where wall
// time is too noisy. With MSGTRACE_BENCH_STREAM=FILE the stream is made there once
// and read from there after, so that a count covers the conversion alone:
//
//	go test -c -o tracer.test ./tracer
//	MSGTRACE_BENCH_STREAM=/tmp/loop.mtrace ./tracer.test -test.run '^$' -test.bench ConvertOne -test.benchtime 1x
//	MSGTRACE_BENCH_STREAM=/tmp/loop.mtrace MSGTRACE_BENCH_FORMAT=pprof GOMAXPROCS=1 GODEBUG=asyncpreemptoff=1 \
//	    valgrind --tool=callgrind ./tracer.test -test.run '^$' -test.bench ConvertOne -test.benchtime 1x
//
// (Go's preemption signals trip callgrind; GOMAXPROCS=1 runs the conversion's goroutines'
// work inline, so that the count is all of it without the scheduler's spinning, which
// callgrind's one-thread-at-a-time execution inflates.) Compare the totals of decode and a
// format.
func BenchmarkConvertOne(b *testing.B) {
	p := os.Getenv("MSGTRACE_BENCH_STREAM")
	if _, err := os.Stat(p); p == "" || err != nil {
		const n = 500_000
		r := rand.New(rand.NewSource(1))
		tick := uint64(10)
		var all [][]stream.StreamEvent
		for th := 0; th < 2; th++ {
			evs, _ := tracetest.RunloopShaped(r, uint64(100+th), n/2, 60, &tick, true, true)
			all = append(all, evs)
		}
		if p == "" {
			p = filepath.Join(b.TempDir(), "loop.mtrace")
		}
		if err := os.WriteFile(p, tracetest.WriteThreads(b, r, all, 2046, false), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	format := os.Getenv("MSGTRACE_BENCH_FORMAT")
	if format == "" {
		format = "pprof"
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		f, err := os.Open(p)
		if err != nil {
			b.Fatal(err)
		}
		st, _ := f.Stat()
		in := engine.Input{R: f, Size: st.Size()}
		var n uint64
		if format == "decode" {
			n, err = decodeOnly(in)
		} else {
			var s engine.Sink
			m := sink.Meta{}
			if os.Getenv("MSGTRACE_BENCH_BUDGET") == "all" {
				m.Budget = -1
			}
			if s, err = NewSink(format, discard{}, m); err == nil {
				var tot engine.Totals
				tot, err = engine.ProcessStreams([]engine.Input{in}, engine.Options{MaxDepth: -1}, s)
				n = tot.Calls
			}
		}
		f.Close()
		if err != nil {
			b.Fatal(err)
		}
		if format == "decode" {
			b.ReportMetric(float64(n), "events")
		} else {
			b.ReportMetric(float64(n), "calls")
		}
	}
}

// decodeOnly is the floor of any conversion: every frame of the stream checked and every
// event of its events frames decoded, nothing else. It returns the number of events.
func decodeOnly(in engine.Input) (uint64, error) {
	var e stream.StreamEvent
	var n uint64
	_, err := engine.ScanFrames(in, func(kind uint8, _ int64, pl []byte) error {
		if kind != stream.FrameEvents {
			return nil
		}
		if len(pl) < 16 {
			return stream.ErrMalformed
		}
		it := stream.EventIter{Buf: pl[16:], Prev: binary.LittleEndian.Uint64(pl[8:])}
		for {
			ok, err := it.Next(&e)
			if err != nil || !ok {
				return err
			}
			n++
		}
	})
	return n, err
}
