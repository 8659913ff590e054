package sink_test

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/msgtrace/msgtrace/tracer"
	"github.com/msgtrace/msgtrace/tracer/engine"
	"github.com/msgtrace/msgtrace/tracer/internal/tracetest"
	"github.com/msgtrace/msgtrace/tracer/sink"
)

// failAfter is a writer that fails once n bytes have been written.
type failAfter struct {
	n   int
	got bytes.Buffer
}

func (f *failAfter) Write(p []byte) (int, error) {
	if f.got.Len()+len(p) > f.n {
		return 0, errors.New("disk full")
	}
	return f.got.Write(p)
}

// TestTimelineWriteErrorStopsConversion: a write error of a text timeline's writer goroutine
// (a disk that fills up mid-file) ends a big conversion with that error, and its goroutines
// (the test would hang otherwise).
func TestTimelineWriteErrorStopsConversion(t *testing.T) {
	g := tracetest.Gen(t, tracetest.GenOpts{Seed: 5, PID: 1, Threads: 2, PerTh: 200_000 /* the engine pipes conversions of this many calls */, FrameEvents: 2046, Line: tracetest.Line24MHz, Marks: true})
	for _, format := range []string{"json", "speedscope"} {
		for _, n := range []int{100, 3 * sink.OutBlock} {
			f := &failAfter{n: n}
			s := newSink(t, format, f, sink.Meta{Budget: -1})
			_, err := engine.ProcessStreams([]engine.Input{{R: bytes.NewReader(g.B), Size: int64(len(g.B))}}, engine.Options{MaxDepth: -1}, s)
			if err == nil || err.Error() != "disk full" {
				t.Errorf("%s, failing after %d bytes: %v", format, n, err)
			}
		}
	}
}

// failingReaderAt reads r until it has handed out n bytes in all, then fails.
type failingReaderAt struct {
	r    io.ReaderAt
	n    int64
	read int64
}

func (f *failingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if f.read+int64(len(p)) > f.n {
		return 0, errors.New("input error")
	}
	n, err := f.r.ReadAt(p, off)
	f.read += int64(n)
	return n, err
}

// TestTimelineInputErrorEndsWriter: a conversion whose input fails after the output's writer
// goroutine started (the sink's Close is then never called) ends that goroutine: a process
// that flushes again and again (msgtrace_flush) does not collect parked writers.
func TestTimelineInputErrorEndsWriter(t *testing.T) {
	g := tracetest.Gen(t, tracetest.GenOpts{Seed: 7, PID: 1, Threads: 2, PerTh: 200_000 /* the engine pipes conversions of this many calls */, FrameEvents: 2046, Line: tracetest.Line24MHz})
	before := runtime.NumGoroutine()
	for _, format := range []string{"json", "speedscope"} {
		for i := range 6 {
			var out bytes.Buffer
			s := newSink(t, format, &out, sink.Meta{Budget: -1})
			if i%2 == 1 { // as machobind run and diff send a trace: through a Tee
				s = engine.Tee(s)
			}
			// pass 1 reads the stream once; the failure comes well into pass 2
			in := &failingReaderAt{r: bytes.NewReader(g.B), n: int64(len(g.B)) * 19 / 10}
			if _, err := engine.ProcessStreams([]engine.Input{{R: in, Size: int64(len(g.B))}}, engine.Options{MaxDepth: -1}, s); err == nil {
				t.Fatalf("%s: the failing input converted", format)
			}
			if out.Len() < sink.OutBlock {
				t.Fatalf("%s: %d bytes written before the failure: the writer goroutine never started", format, out.Len())
			}
		}
	}
	for i := 0; i < 100 && runtime.NumGoroutine() > before; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines after 12 failed conversions, %d before", n, before)
	}
}

// newSink is the registry's sink for format writing to w: an error ends the test.
func newSink(t *testing.T, format string, w io.Writer, m sink.Meta) engine.Sink {
	t.Helper()
	s, err := tracer.NewSink(format, w, m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
