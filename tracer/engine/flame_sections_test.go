package engine_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/msgtrace/msgtrace/tracer/engine"
	"github.com/msgtrace/msgtrace/tracer/stream"
)

// TestFlameThreadWithoutTime: a thread whose calls take no time has no section in the flame
// graph, and the threads after it are drawn in the sections that follow (the SVG sink indexed
// its sections by thread and ran past them; found by FuzzAggregate).
func TestFlameThreadWithoutTime(t *testing.T) {
	var buf bytes.Buffer
	w := stream.NewStreamWriter(&buf)
	w.Process(stream.StreamProcess{PID: 7, Name: "x"})
	w.Clock(stream.ClockSample{Tick: 0, MonoNanos: 0, RateNum: 1, RateDen: 1})
	w.Methods(stream.StreamMethod{ID: 1, Class: "A", Selector: "a"}, stream.StreamMethod{ID: 2, Class: "B", Selector: "b"})
	w.Thread(stream.StreamThread{TID: 1, Flags: stream.ThreadMain})
	w.Thread(stream.StreamThread{TID: 2, Name: "worker"})
	w.Events(1, 0, []stream.StreamEvent{{Type: stream.EventCall, ID: 1, Start: 5, End: 5}})
	w.Events(2, 0, []stream.StreamEvent{{Type: stream.EventCall, ID: 2, Start: 5, End: 9}})
	for _, generic := range []bool{true, false} {
		out, tot := aggConvert(t, [][]byte{buf.Bytes()}, "svg", engine.Options{MaxDepth: -1}, generic)
		svg := string(out)
		if tot.Calls != 2 || !strings.Contains(svg, `data-s="0"`) || strings.Contains(svg, `data-s="1"`) || !strings.Contains(svg, "-[B b]") || strings.Contains(svg, "-[A a]") {
			t.Errorf("generic %v: %+v\n%s", generic, tot, svg)
		}
	}
}
