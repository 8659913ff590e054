package sink

import (
	"math"
	"math/rand"
	"strconv"
	"testing"
)

// TestAppendDec: the same digits as strconv, at every length and at the powers of ten and
// their neighbours, appended to a full, a roomy and an empty slice.
func TestAppendDec(t *testing.T) {
	vals := []uint64{0, 9, 10, 11, 99, 100, 101, math.MaxUint64, math.MaxUint64 - 1}
	for p := uint64(1); p <= 1e19 && p > 0; p *= 10 {
		vals = append(vals, p-1, p, p+1)
		if p == 1e19 {
			break
		}
	}
	r := rand.New(rand.NewSource(1))
	for i := 0; i < 100_000; i++ {
		vals = append(vals, r.Uint64()>>uint(r.Intn(64)))
	}
	for _, v := range vals {
		want := strconv.AppendUint([]byte("x,"), v, 10)
		for _, b := range [][]byte{[]byte("x,"), append(make([]byte, 0, 64), "x,"...)} {
			if got := appendDec(b, v); string(got) != string(want) {
				t.Fatalf("%d: %q, strconv %q", v, got, want)
			}
		}
		if got := appendDec(nil, v); string(got) != strconv.FormatUint(v, 10) {
			t.Fatalf("%d: %q", v, got)
		}
	}
}

// TestAppendMicros: µs with three decimals, exactly the ns, at every length.
func TestAppendMicros(t *testing.T) {
	vals := []uint64{0, 1, 9, 10, 99, 100, 999, 1000, 1001, 1010, 1100, 123456789, 99_999_999_999, 100_000_000_000, math.MaxUint64}
	r := rand.New(rand.NewSource(1))
	for i := 0; i < 100_000; i++ {
		vals = append(vals, r.Uint64()>>uint(r.Intn(64)))
	}
	for _, ns := range vals {
		want := strconv.FormatUint(ns/1000, 10) + "." + strconv.FormatUint(1000+ns%1000, 10)[1:]
		if got := string(appendMicros(nil, ns)); got != want {
			t.Errorf("%d ns: %q, want %q", ns, got, want)
		}
	}
}

// TestDecCache: a cache's dec and micros write what appendDec and appendMicros write, on
// times that walk up by small and large steps (the cached digits kept, then changed), jump
// back, and cross every length, into slices full and roomy.
func TestDecCache(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	var c, m decCache
	u := uint64(0)
	for i := 0; i < 300_000; i++ {
		switch k := r.Intn(100); {
		case k < 80:
			u += uint64(r.Intn(200))
		case k < 95:
			u += uint64(r.Int63n(1 << uint(r.Intn(40))))
		case k < 98:
			u = r.Uint64() >> uint(r.Intn(64))
		default:
			u -= min(u, uint64(r.Intn(10_000)))
		}
		for _, b := range [][]byte{[]byte("x,"), append(make([]byte, 0, 64), "x,"...)} {
			if got, want := string(c.dec(b, u)), string(appendDec([]byte("x,"), u)); got != want {
				t.Fatalf("dec %d: %q, want %q", u, got, want)
			}
			if got, want := string(m.micros(b, u)), string(appendMicros([]byte("x,"), u)); got != want {
				t.Fatalf("micros %d: %q, want %q", u, got, want)
			}
		}
	}
}
