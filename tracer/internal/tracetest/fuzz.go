package tracetest

import (
	"bytes"
	"fmt"

	"github.com/msgtrace/msgtrace/tracer/stream"
)

// FuzzStream writes a stream whose shape the fuzzer's bytes decide, one byte an operation on
// three threads: enter a method, return (kept, unwound, lost with a loss mark, or lost
// silently: its children are orphans), a wait mark, switch thread, end a frame (frames of
// the threads interleave in the file), and the time that passes (0 to 3 ticks: touching and
// zero-length calls). What is still running at the end is written as open frames, or left
// unwritten, as a killed process leaves it.
func FuzzStream(data []byte) []byte {
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
