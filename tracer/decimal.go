package tracer

import "math/bits"

// digitPairs is "00" to "99", then padding: indexed by a uint8, it needs no bounds check.
var digitPairs = func() (t [256]byte) {
	for i := 0; i < 100; i++ {
		t[2*i], t[2*i+1] = byte('0'+i/10), byte('0'+i%10)
	}
	return t
}()

// pow10s[i] is 10^i.
var pow10s = [20]uint64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13,
	1e14, 1e15, 1e16, 1e17, 1e18, 1e19}

// appendDec appends u in decimal, as strconv.AppendUint(b, u, 10) does: the timelines write
// two or more numbers a call (times in ns or µs), and this writes them in place, two digits a
// step, from their length known up front (strconv formats into a buffer of its own, then
// copies).
func appendDec(b []byte, u uint64) []byte {
	if u < 10 {
		return append(b, byte('0'+u))
	}
	// digits: from the bit length, corrected by one power of ten
	n := (bits.Len64(u) * 1233) >> 12
	if u >= pow10s[n] {
		n++
	}
	l := len(b)
	if cap(b)-l < n {
		b = append(b, "00000000000000000000"[:n]...)
	} else {
		b = b[:l+n]
	}
	d := b[l : l+n]
	for u >= 100 { // d: the digits not written yet
		q := u / 100
		r := uint8((u - q*100) * 2)
		k := len(d) - 2
		d[k], d[k+1] = digitPairs[r], digitPairs[r+1]
		d = d[:k]
		u = q
	}
	if u >= 10 {
		r := uint8(u * 2)
		d[0], d[1] = digitPairs[r], digitPairs[r+1]
	} else {
		d[0] = byte('0' + u)
	}
	return b
}
