package tracer

import (
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/msgtrace/msgtrace/tracer/engine"
	"github.com/msgtrace/msgtrace/tracer/sink"
	"github.com/msgtrace/msgtrace/tracer/stream"
)

// writeBig writes a raw dump of n records on 8 threads: balanced call trees 8 deep, names for
// 64 classes x 64 selectors.
func writeBig(b *testing.B, n int) string {
	p := filepath.Join(b.TempDir(), "big.raw")
	f, err := os.Create(p)
	if err != nil {
		b.Fatal(err)
	}
	w := stream.NewWriter(f, stream.Header{PID: 1, TickNum: 1, TickDen: 3, BaseTick: 0})
	var names []stream.NameEntry
	for i := uint64(0); i < 64; i++ {
		names = append(names, stream.NameEntry{Key: 0x100000 + i*0x100, Kind: stream.NameClass, Name: "Class" + string(rune('A'+i%26)) + string(rune('a'+i/26))},
			stream.NameEntry{Key: 0x900000 + i*8, Kind: stream.NameSelector, Name: "selector" + string(rune('a'+i%26)) + ":with:"})
	}
	w.WriteNames(names)
	const threads = 8
	per := n / threads
	for th := 0; th < threads; th++ {
		w.BeginThread(stream.Thread{TID: uint64(1000 + th), Main: th == 0}, uint64(per/255*255))
		count := 0
		tick := uint64(0)
		// post-order of a complete binary tree of depth 8 (255 calls), repeated
		var emit func(depth uint64) (uint64, uint64)
		emit = func(depth uint64) (uint64, uint64) {
			start := tick
			tick += 7
			if depth < 7 {
				emit(depth + 1)
				emit(depth + 1)
			}
			tick += 11
			i := uint64(count)
			count++
			w.WriteRecord(stream.Record{Start: start, End: tick, Class: (0x100000 + (i%64)*0x100) | depth<<48, Sel: 0x900000 + (i/64%64)*8})
			return start, tick
		}
		for count+255 <= per {
			emit(0)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	f.Close()
	return p
}

// BenchmarkRawToJSON converts 10,000,000 records to Chrome JSON (discarded); reports records
// per second and the process's peak RSS (the dump is generated as a stream beforehand, so the
// peak is the conversion's).
func BenchmarkRawToJSON(b *testing.B) {
	const n = 10_000_000
	p := writeBig(b, n)
	b.ResetTimer()
	var kept uint64
	for i := 0; i < b.N; i++ {
		f, err := os.Open(p)
		if err != nil {
			b.Fatal(err)
		}
		tot, err := engine.Process(f, engine.Options{MaxDepth: -1}, sink.NewChromeSink(io.Discard))
		f.Close()
		if err != nil {
			b.Fatal(err)
		}
		kept = tot.Kept
	}
	b.ReportMetric(float64(kept)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	b.ReportMetric(float64(ru.Maxrss)/1024, "peakRSS-MiB")
}
