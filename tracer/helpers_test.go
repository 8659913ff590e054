package tracer

import (
	"bytes"
	"io"
	"testing"

	"github.com/msgtrace/msgtrace/tracer/engine"
	"github.com/msgtrace/msgtrace/tracer/sink"
)

// newSink is NewSink for a test: an error ends it.
func newSink(t *testing.T, format string, w io.Writer, m sink.Meta) engine.Sink {
	t.Helper()
	s, err := NewSink(format, w, m)
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

// discard takes what is written and keeps nothing (an io.Writer and nothing else).
type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
