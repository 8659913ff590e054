package tracer

import (
	"bytes"
	"strings"
	"testing"
)

// TestFlameThreadWithoutTime: a thread whose calls take no time has no section in the flame
// graph, and the threads after it are drawn in the sections that follow (the SVG sink indexed
// its sections by thread and ran past them; found by FuzzAggregate).
func TestFlameThreadWithoutTime(t *testing.T) {
	var buf bytes.Buffer
	w := NewStreamWriter(&buf)
	w.Process(StreamProcess{PID: 7, Name: "x"})
	w.Clock(ClockSample{Tick: 0, MonoNanos: 0, RateNum: 1, RateDen: 1})
	w.Methods(StreamMethod{ID: 1, Class: "A", Selector: "a"}, StreamMethod{ID: 2, Class: "B", Selector: "b"})
	w.Thread(StreamThread{TID: 1, Flags: ThreadMain})
	w.Thread(StreamThread{TID: 2, Name: "worker"})
	w.Events(1, 0, []StreamEvent{{Type: EventCall, ID: 1, Start: 5, End: 5}})
	w.Events(2, 0, []StreamEvent{{Type: EventCall, ID: 2, Start: 5, End: 9}})
	for _, generic := range []bool{true, false} {
		out, tot := aggConvert(t, [][]byte{buf.Bytes()}, "svg", Options{MaxDepth: -1}, generic)
		svg := string(out)
		if tot.Calls != 2 || !strings.Contains(svg, `data-s="0"`) || strings.Contains(svg, `data-s="1"`) || !strings.Contains(svg, "-[B b]") || strings.Contains(svg, "-[A a]") {
			t.Errorf("generic %v: %+v\n%s", generic, tot, svg)
		}
	}
}
