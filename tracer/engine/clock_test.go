package engine

import (
	"math/rand"
	"testing"
)

// TestClockPiecewise: ticks become monotonic ns linearly between clock frames, with the nearest
// pair's slope outside them, with the rate when there is one frame, 1:1 with none; frames that
// go back in time are ignored; the result does not depend on the order of conversions (through
// a stream: the tracer's TestClockThroughStream).
func TestClockPiecewise(t *testing.T) {
	var c clockMap
	c.add(100, 1000, 0, 0)
	c.add(200, 2000, 0, 0) // 10 ns a tick
	c.add(150, 5000, 0, 0) // back in time: ignored
	c.add(300, 2500, 0, 0) // 5 ns a tick
	c.add(400, 2400, 0, 0) // clock going backwards: ignored
	want := map[uint64]uint64{0: 0, 50: 500, 100: 1000, 150: 1500, 199: 1990, 200: 2000, 250: 2250, 300: 2500, 340: 2700, 1 << 40: 2500 + ((1<<40)-300)*5}
	keys := []uint64{1 << 40, 50, 250, 0, 200, 340, 100, 199, 150, 300, 250, 50}
	for _, k := range keys {
		if got := c.mono(k); got != want[k] {
			t.Errorf("mono(%d) = %d, want %d", k, got, want[k])
		}
	}
	var one clockMap
	one.add(100, 1000, 3, 1)
	if one.mono(110) != 1030 || one.mono(90) != 970 || one.mono(0) != 700 {
		t.Errorf("one frame with a rate: %d %d %d", one.mono(110), one.mono(90), one.mono(0))
	}
	var none clockMap
	if none.mono(12345) != 12345 {
		t.Error("no clock frame")
	}
}

// TestClockFast: the fast path of tick conversion gives exactly what the 128-bit scaling
// gives, on random lines, rates and ticks.
func TestClockFast(t *testing.T) {
	r := rand.New(rand.NewSource(4))
	for k := 0; k < 200; k++ {
		var c, ref clockMap
		tick, mono := uint64(r.Int63n(1<<50)), uint64(r.Int63n(1<<60))
		num, den := uint64(r.Int63n(1<<32)+1), uint64(r.Int63n(1<<32)+1)
		for p := 0; p < 1+r.Intn(6); p++ {
			c.add(tick, mono, num, den)
			ref.add(tick, mono, num, den)
			tick += uint64(r.Int63n(1<<34) + 1)
			mono += uint64(r.Int63n(1 << 33))
		}
		for i := 0; i < 2000; i++ {
			x := uint64(r.Int63n(1 << 52))
			if i%3 == 0 && len(c.pts) > 0 {
				x = c.pts[r.Intn(len(c.pts))].tick + uint64(r.Int63n(1<<20)) - 1<<19
			}
			ref.fHi = 0
			if got, want := c.mono(x), ref.slow(x); got != want {
				t.Fatalf("line %d: tick %d: %d, want %d", k, x, got, want)
			}
		}
	}
}
