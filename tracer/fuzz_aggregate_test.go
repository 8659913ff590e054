package tracer

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/msgtrace/msgtrace/tracer/engine"
	"github.com/msgtrace/msgtrace/tracer/sink"
	"github.com/msgtrace/msgtrace/tracer/stream"
)

// fuzzStream writes a stream whose shape the fuzzer's bytes decide, one byte an operation on
// three threads: enter a method, return (kept, unwound, lost with a loss mark, or lost
// silently: its children are orphans), a wait mark, switch thread, end a frame (frames of
// the threads interleave in the file), and the time that passes (0 to 3 ticks: touching and
// zero-length calls). What is still running at the end is written as open frames, or left
// unwritten, as a killed process leaves it.
func fuzzStream(data []byte) []byte {
	var buf bytes.Buffer
	w := stream.NewStreamWriter(&buf)
	w.Process(stream.StreamProcess{PID: 7, Name: "fuzz"})
	w.Clock(stream.ClockSample{Tick: 0, MonoNanos: 0, RateNum: 1, RateDen: 1})
	var ms []stream.StreamMethod
	for id := uint64(1); id <= 8; id++ {
		ms = append(ms, stream.StreamMethod{ID: id, Flags: id % 3 / 2 * stream.MethodClass, Class: fmt.Sprintf("C%d", id%3), Selector: fmt.Sprintf("s%d", id)})
	}
	w.Methods(ms...)
	type open struct{ id, start uint64 }
	type thread struct {
		tid     uint64
		stack   []open
		pending []stream.StreamEvent
		prevEnd uint64
	}
	ths := []*thread{{tid: 1}, {tid: 2}, {tid: 3}}
	w.Thread(stream.StreamThread{TID: 1, Flags: stream.ThreadMain})
	w.Thread(stream.StreamThread{TID: 2, Name: "worker"})
	w.Thread(stream.StreamThread{TID: 3, Name: "com.apple.root.default-qos"})
	tick := uint64(10)
	cur := ths[0]
	flush := func(th *thread) {
		if len(th.pending) > 0 {
			th.prevEnd, _ = w.Events(th.tid, th.prevEnd, th.pending)
			th.pending = th.pending[:0]
		}
	}
	for _, op := range data {
		tick += uint64(op >> 6)
		switch arg := uint64(op>>3) & 7; op & 7 {
		case 0, 1: // enter
			if len(cur.stack) < 40 {
				cur.stack = append(cur.stack, open{arg + 1, tick})
			}
		case 2, 3, 4: // return: kept (2), unwound (3), lost with a mark (4: arg even) or silently
			if len(cur.stack) == 0 {
				continue
			}
			o := cur.stack[len(cur.stack)-1]
			cur.stack = cur.stack[:len(cur.stack)-1]
			e := stream.StreamEvent{Type: stream.EventCall, ID: o.id, Start: o.start, End: tick, Depth: uint64(len(cur.stack))}
			switch op & 7 {
			case 3:
				e.Type = stream.EventUnwound
			case 4:
				if arg%2 == 0 {
					cur.pending = append(cur.pending, stream.StreamEvent{Type: stream.EventMark, ID: uint64(stream.MarkLost), Start: tick, End: tick, Count: 1})
				}
				continue
			}
			cur.pending = append(cur.pending, e)
		case 5: // a wait mark
			cur.pending = append(cur.pending, stream.StreamEvent{Type: stream.EventMark, ID: uint64(stream.MarkWait), Start: tick - min(tick, arg), End: tick})
		case 6: // switch thread
			cur = ths[arg%3]
		case 7: // end the frame
			flush(cur)
		}
	}
	for i, th := range ths {
		flush(th)
		if len(th.stack) > 0 && (len(data) == 0 || data[0]>>i&1 == 0) {
			var calls []stream.OpenCall
			for d, o := range th.stack {
				calls = append(calls, stream.OpenCall{ID: o.id, Start: o.start, Depth: uint64(d)})
			}
			w.Open(th.tid, tick, calls)
		}
	}
	return buf.Bytes()
}

// FuzzAggregate: the aggregates' fast path (pass 1, threads read backwards on two goroutines,
// orphans left to the generic path) gives the generic path's pprof, folded and SVG byte for
// byte, with the same totals, on any stream fuzzStream writes, whole or with a byte damaged,
// and under a depth limit. TestAggregateSameOutput is its fixed cases; `make fuzz` runs it.
func FuzzAggregate(f *testing.F) {
	old := engine.AggParallelMin
	engine.AggParallelMin = 0 // threads read on two goroutines, whatever their size
	f.Cleanup(func() { engine.AggParallelMin = old })
	f.Add([]byte{}, uint16(0), byte(0), int8(-1))
	f.Add([]byte{0, 8, 16, 2, 2, 2, 7}, uint16(0), byte(0), int8(-1))
	f.Add([]byte{0, 0x48, 0x50, 0x0c, 0x02, 0x46, 0, 8, 0x42, 0x03, 0x87, 0xce, 1, 9, 0x44, 0x02, 0x05, 7, 0x56, 0, 2}, uint16(0), byte(0), int8(-1))
	f.Add(bytes.Repeat([]byte{0, 0x48, 1, 0x4a, 0x44, 0x43, 0x42, 0x07, 0x0e, 0x08, 0x10, 0x52, 0x85, 0x42, 0x16}, 20), uint16(300), byte(0x40), int8(2))
	f.Fuzz(func(t *testing.T, ops []byte, at uint16, xor byte, maxDepth int8) {
		b := fuzzStream(ops)
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
		s = genericSink{s}
	}
	tot, err := engine.ProcessStreams([]engine.Input{{R: bytes.NewReader(b), Size: int64(len(b))}}, opt, s)
	return out.Bytes(), tot, err
}
