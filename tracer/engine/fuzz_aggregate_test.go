package engine_test

import (
	"bytes"
	"testing"

	"github.com/msgtrace/msgtrace/tracer/engine"
	"github.com/msgtrace/msgtrace/tracer/internal/tracetest"
	"github.com/msgtrace/msgtrace/tracer/sink"
)

// FuzzAggregate: the aggregates' fast path (pass 1, threads read backwards on two goroutines,
// orphans left to the generic path) gives the generic path's pprof, folded and SVG byte for
// byte, with the same totals, on any stream fuzzStream writes, whole or with a byte damaged,
// and under a depth limit. TestAggregateSameOutput is its fixed cases; `make fuzz` runs it.
func FuzzAggregate(f *testing.F) {
	old := *engine.AggParallelMin
	*engine.AggParallelMin = 0 // threads read on two goroutines, whatever their size
	f.Cleanup(func() { *engine.AggParallelMin = old })
	f.Add([]byte{}, uint16(0), byte(0), int8(-1))
	f.Add([]byte{0, 8, 16, 2, 2, 2, 7}, uint16(0), byte(0), int8(-1))
	f.Add([]byte{0, 0x48, 0x50, 0x0c, 0x02, 0x46, 0, 8, 0x42, 0x03, 0x87, 0xce, 1, 9, 0x44, 0x02, 0x05, 7, 0x56, 0, 2}, uint16(0), byte(0), int8(-1))
	f.Add(bytes.Repeat([]byte{0, 0x48, 1, 0x4a, 0x44, 0x43, 0x42, 0x07, 0x0e, 0x08, 0x10, 0x52, 0x85, 0x42, 0x16}, 20), uint16(300), byte(0x40), int8(2))
	f.Fuzz(func(t *testing.T, ops []byte, at uint16, xor byte, maxDepth int8) {
		b := tracetest.FuzzStream(ops)
		if xor != 0 {
			b[int(at)%len(b)] ^= xor
		}
		opt := engine.Options{MaxDepth: int(maxDepth)}
		for _, format := range []string{"pprof", "folded", "svg"} {
			want, wtot, werr := fuzzConvert(t, b, format, opt, true)
			got, gtot, gerr := fuzzConvert(t, b, format, opt, false)
			if (werr == nil) != (gerr == nil) || werr != nil && werr.Error() != gerr.Error() {
				t.Fatalf("%s: the aggregates' path: %v, the generic one: %v", format, gerr, werr)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%s: %d bytes from the aggregates' path, %d from the generic one, not the same", format, len(got), len(want))
			}
			if gtot != wtot {
				t.Fatalf("%s: totals %+v, generic %+v", format, gtot, wtot)
			}
		}
	})
}

// fuzzConvert is aggConvert on one stream, returning the error (a stream damaged in its first
// frame is not one).
func fuzzConvert(t *testing.T, b []byte, format string, opt engine.Options, generic bool) ([]byte, engine.Totals, error) {
	var out bytes.Buffer
	s := newSink(t, format, &out, sink.Meta{TimeNanos: 1})
	if generic {
		s = tracetest.GenericSink{Sink: s}
	}
	tot, err := engine.ProcessStreams([]engine.Input{{R: bytes.NewReader(b), Size: int64(len(b))}}, opt, s)
	return out.Bytes(), tot, err
}
