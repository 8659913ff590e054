package engine_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/msgtrace/msgtrace/tracer/engine"
	"github.com/msgtrace/msgtrace/tracer/internal/tracetest"
	"github.com/msgtrace/msgtrace/tracer/sink"
)

// failSink fails its n-th call (and every later one), as a sink whose disk fills up does.
type failSink struct {
	nopSink
	n, calls int
}

var errSinkFull = errors.New("sink: no space left")

func (s *failSink) Call(*engine.Call) error {
	s.calls++
	if s.calls >= s.n {
		return errSinkFull
	}
	return nil
}

// TestSinkErrorStopsConversion: a sink's error ends the conversion with that error, whether
// the sink runs on the reader's goroutine (a small trace) or on its own (a big one, piped;
// pass 1 on analyser goroutines), at the first call or deep into the trace, and the
// conversion's goroutines end (the test would hang otherwise).
func TestSinkErrorStopsConversion(t *testing.T) {
	for _, calls := range []int{20_000, 2 * engine.PipeMin} {
		g := tracetest.Gen(t, tracetest.GenOpts{Seed: 3, PID: 1, Threads: 3, PerTh: calls / 3, FrameEvents: 2046, Line: tracetest.Line24MHz, Marks: true})
		for _, n := range []int{1, calls / 2} {
			s := &failSink{n: n}
			_, err := engine.ProcessStreams([]engine.Input{{R: bytes.NewReader(g.B), Size: int64(len(g.B))}}, engine.Options{MaxDepth: -1}, s)
			if !errors.Is(err, errSinkFull) {
				t.Errorf("%d calls, failing at call %d: %v", calls, n, err)
			}
		}
	}
}

// TestParallelPass1SameOutput: pass 1 on analyser goroutines gives the outputs of pass 1 on
// the reader's goroutine byte for byte: four threads whose frames interleave, marks, open
// frames, and a frame damaged in the middle.
func TestParallelPass1SameOutput(t *testing.T) {
	g := tracetest.Gen(t, tracetest.GenOpts{Seed: 11, PID: 1, Threads: 4, PerTh: 30_000, FrameEvents: 300, Line: tracetest.Line24MHz, Marks: true, OpenAfterFrame: 5})
	b := bytes.Clone(g.B)
	b[len(b)/2] ^= 0x40 // a bad frame: skipped by both, the same way
	convert := func(parMin int64, format string) []byte {
		defer func(v int64) { *engine.ParallelPass1Min = v }(*engine.ParallelPass1Min)
		*engine.ParallelPass1Min = parMin
		var out bytes.Buffer
		s := newSink(t, format, &out, sink.Meta{TimeNanos: 1})
		tot, err := engine.ProcessStreams([]engine.Input{{R: bytes.NewReader(b), Size: int64(len(b))}}, engine.Options{MaxDepth: -1}, s)
		if err != nil || tot.BadFrames == 0 {
			t.Fatalf("%s: %v, %+v", format, err, tot)
		}
		return out.Bytes()
	}
	for _, format := range []string{"json", "folded", "speedscope", "perfetto"} {
		inline, par := convert(1<<40, format), convert(0, format)
		if !bytes.Equal(inline, par) {
			t.Errorf("%s: %d bytes with pass 1 inline, %d with analysers, not the same", format, len(inline), len(par))
		}
	}
}
