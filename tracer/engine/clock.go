// A process's ticks on CLOCK_MONOTONIC (clockMap): piecewise-linear between its clock frames,
// with a fast path for the ticks on the line of the last conversion.

package engine

import (
	"math"
	"math/bits"
	"sort"
)

// clockMap converts a process's ticks to monotonic ns, piecewise-linearly between its clock
// frames and with the nearest pair's slope outside them; with one clock frame, with its rate;
// with none, ticks are taken as ns.
type clockMap struct {
	pts      []clockPoint
	num, den uint64
	i        int // segment of the last conversion

	// the line of the last conversion, for ticks in [fLo, fHi): ns = fMono + (t-fLo)*fMul/fDiv,
	// divided through fInv = (2^64-1)/fDiv (a multiplication and at most two corrections)
	fLo, fHi, fMono, fMul, fDiv, fInv uint64
}

type clockPoint struct{ tick, mono uint64 }

// add takes a clock frame; one that goes back in time is ignored.
func (c *clockMap) add(tick, mono, num, den uint64) {
	c.fHi = 0
	if num != 0 && den != 0 {
		c.num, c.den = num, den
	}
	if n := len(c.pts); n > 0 && (tick <= c.pts[n-1].tick || mono < c.pts[n-1].mono) {
		return
	}
	c.pts = append(c.pts, clockPoint{tick, mono})
}

// scale is x*m/d, saturated.
func scale(x, m, d uint64) uint64 {
	hi, lo := bits.Mul64(x, m)
	if hi >= d {
		return math.MaxUint64
	}
	q, _ := bits.Div64(hi, lo, d)
	return q
}

// monoFast is mono for a tick on the line of the last conversion (false: another, see slow).
func (c *clockMap) monoFast(t uint64) (uint64, bool) {
	if t < c.fLo || t >= c.fHi {
		return 0, false
	}
	n := (t - c.fLo) * c.fMul
	q, _ := bits.Mul64(n, c.fInv)
	for n-q*c.fDiv >= c.fDiv {
		q++
	}
	return c.fMono + q, true
}

func (c *clockMap) mono(t uint64) uint64 {
	if t >= c.fLo && t < c.fHi {
		n := (t - c.fLo) * c.fMul
		q, _ := bits.Mul64(n, c.fInv)
		for n-q*c.fDiv >= c.fDiv {
			q++
		}
		return c.fMono + q
	}
	return c.slow(t)
}

func (c *clockMap) slow(t uint64) uint64 {
	n := len(c.pts)
	if n == 0 {
		return t
	}
	a := c.pts[0]
	dm, dt := uint64(1), uint64(1)
	if n == 1 {
		if c.num != 0 && c.den != 0 {
			dm, dt = c.num, c.den
		}
	} else {
		i := c.i
		if t < c.pts[i].tick || (i < n-2 && t >= c.pts[i+1].tick) {
			i = sort.Search(n, func(k int) bool { return c.pts[k].tick > t }) - 1
			i = max(0, min(i, n-2))
			c.i = i
		}
		a = c.pts[i]
		dm, dt = c.pts[i+1].mono-a.mono, c.pts[i+1].tick-a.tick
	}
	if t >= a.tick && dt > 0 {
		c.fLo, c.fMono, c.fMul, c.fDiv, c.fInv = a.tick, a.mono, dm, dt, math.MaxUint64/dt
		c.fHi = math.MaxUint64
		if n > 2 && c.i < n-2 {
			c.fHi = c.pts[c.i+1].tick
		}
		if dm > 0 {
			c.fHi = min(c.fHi, a.tick+min(math.MaxUint64/dm, math.MaxUint64-a.tick))
		}
		if a.mono > math.MaxUint64/2 {
			c.fHi = 0 // saturation is the slow path's
		}
	}
	if t >= a.tick {
		v := scale(t-a.tick, dm, dt)
		if v > math.MaxUint64-a.mono {
			return math.MaxUint64
		}
		return a.mono + v
	}
	v := scale(a.tick-t, dm, dt)
	if v > a.mono {
		return 0
	}
	return a.mono - v
}
