package engine_test

import (
	"bytes"
	"io"
	"testing"

	"github.com/msgtrace/msgtrace/tracer"
	"github.com/msgtrace/msgtrace/tracer/engine"
	"github.com/msgtrace/msgtrace/tracer/internal/tracetest"
	"github.com/msgtrace/msgtrace/tracer/sink"
	"github.com/msgtrace/msgtrace/tracer/stream"
)

// newSink is the registry's sink for format writing to w: an error ends the test.
func newSink(t *testing.T, format string, w io.Writer, m sink.Meta) engine.Sink {
	t.Helper()
	s, err := tracer.NewSink(format, w, m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// processBytes converts the stream b through s, every call, no depth limit: an error ends the test.
func processBytes(t *testing.T, b []byte, s engine.Sink) engine.Totals {
	t.Helper()
	tot, err := engine.ProcessStreams([]engine.Input{{R: bytes.NewReader(b), Size: int64(len(b))}}, engine.Options{MaxDepth: -1}, s)
	if err != nil {
		t.Fatal(err)
	}
	return tot
}

// gotCall is a call as a sink received it.
type gotCall struct {
	TID          uint64
	Name         string
	Start, Dur   uint64
	Depth, Flags int
}

// collectSink keeps the calls it is given, in the order they ended.
type collectSink struct {
	nopSink
	calls []gotCall
}

func (s *collectSink) Call(c *engine.Call) error {
	s.calls = append(s.calls, gotCall{c.Thread.TID, c.Name, c.StartNanos, c.DurNanos, c.Depth, c.Flags})
	return nil
}

// readStream converts streams to a collectSink.
func readStream(t testing.TB, opt engine.Options, bs ...[]byte) (*collectSink, error) {
	s := &collectSink{}
	_, err := engine.ProcessStreams(tracetest.Inputs(bs...), opt, s)
	return s, err
}

// nopSink takes calls and does nothing.
type nopSink struct{}

func (nopSink) BeginThread(*stream.Header, *stream.Thread) error { return nil }
func (nopSink) Call(*engine.Call) error                          { return nil }
func (nopSink) Skip(int) error                                   { return nil }
func (nopSink) Mark(*stream.Mark) error                          { return nil }
func (nopSink) EndThread() error                                 { return nil }
func (nopSink) Close(engine.Totals) error                        { return nil }
func (nopSink) Needs() engine.Needs                              { return engine.Needs{} }
