package tracer

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

// TestAppendMicros: µs with three decimals, exactly the ns.
func TestAppendMicros(t *testing.T) {
	for _, ns := range []uint64{0, 1, 9, 10, 99, 100, 999, 1000, 1001, 1010, 1100, 123456789, math.MaxUint64} {
		want := strconv.FormatUint(ns/1000, 10) + "." + strconv.FormatUint(1000+ns%1000, 10)[1:]
		if got := string(appendMicros(nil, ns)); got != want {
			t.Errorf("%d ns: %q, want %q", ns, got, want)
		}
	}
}
