package sink

import (
	"testing"

	"github.com/msgtrace/msgtrace/tracer/engine"
	"github.com/msgtrace/msgtrace/tracer/stream"
)

// TestFlameFramesCap: past the cap on frames the narrowest frames go (by share of their
// thread), and how many is said: a 1 ms call with a 1 ns and a 1 µs child, capped at 3 frames,
// loses the 1 ns one.
func TestFlameFramesCap(t *testing.T) {
	tr := engine.NewStackTrie()
	tr.BeginThread(&stream.Header{PID: 1}, &stream.Thread{TID: 1, Main: true})
	root := &engine.Call{Name: "-[Foo run]", DurNanos: 1_000_000, SelfNanos: 1_000_000 - 1 - 1000}
	step := &engine.Call{Name: "-[Bar step:]", StartNanos: 100, DurNanos: 1, SelfNanos: 1, Depth: 1}
	tiny := &engine.Call{Name: "-[Bar tiny]", StartNanos: 2000, DurNanos: 1000, SelfNanos: 1000, Depth: 1}
	tr.Enter(root, 0)
	for _, c := range []*engine.Call{step, tiny} {
		tr.Enter(c, 1)
		tr.Exit(c, 1)
	}
	tr.Exit(root, 0)
	if frames, dropped := flameFrames(tr, 4); len(frames) != 4 || dropped != 0 {
		t.Fatalf("uncapped: %d dropped, %+v", dropped, frames)
	}
	frames, dropped := flameFrames(tr, 3)
	if len(frames) != 3 || dropped != 1 || frames[2].Name != "-[Bar tiny]" {
		t.Errorf("capped: %d dropped, %+v", dropped, frames)
	}
}
