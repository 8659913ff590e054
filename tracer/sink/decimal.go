package sink

import (
	"encoding/binary"
	"math/bits"
	"strconv"
)

// appendDec appends u in decimal, as strconv.AppendUint(b, u, 10) does: the timelines write
// two or more numbers a call (times in ns or µs), and this writes them in place, eight digits
// at a time without a loop (dec8); the leading zeros of the first eight are counted from the
// word and shifted out (strconv formats into a buffer of its own, two digits a step, then
// copies).
func appendDec(b []byte, u uint64) []byte {
	if u >= 1e16 {
		return strconv.AppendUint(b, u, 10)
	}
	l := len(b)
	if cap(b)-l < 16 { // room for two whole words of digits
		b = append(b, "0000000000000000"...)
	}
	b = b[:l+16]
	if u < 1e8 {
		v, n := dec8lead(u)
		binary.LittleEndian.PutUint64(b[l:], v)
		return b[:l+n]
	}
	hi := u / 1e8
	v, n := dec8lead(hi)
	binary.LittleEndian.PutUint64(b[l:], v)
	binary.LittleEndian.PutUint64(b[l+n:], dec8(u-hi*1e8))
	return b[:l+n+8]
}

// dec8lead returns x (< 10^8) as dec8 does without its leading zeros (but a zero's one) and the
// number of digits.
func dec8lead(x uint64) (uint64, int) {
	v := dec8(x)
	z := bits.TrailingZeros64(v-0x30303030_30303030|1<<56) &^ 7 // 8 x the leading zeros
	return v >> z, 8 - z>>3
}

// dec8 returns x (< 10^8) as eight ASCII digits with leading zeros, the first in the low byte
// (as they are stored little-endian): x is split into lanes of a word, 4+4 digits, then
// 2+2+2+2, then 8 single digits, each split a multiplication by a reciprocal (exact in these
// ranges: x/100 as x*10486>>20 for x < 10^4, x/10 as x*103>>10 for x < 100) that no lane
// carries out of.
func dec8(x uint64) uint64 {
	v := x/10000 | (x%10000)<<32
	h := (v * 10486 >> 20) & 0x0000007f_0000007f
	v = h | (v-h*100)<<16
	h = (v * 103 >> 10) & 0x000f000f_000f000f
	v = h | (v-h*10)<<8
	return v + 0x30303030_30303030
}

// appendMicros writes integer nanoseconds as microseconds with three decimals, exactly, so
// that events nest in the output exactly as they do in ticks: the µs as appendDec does, then
// the point and three decimals as one word.
func appendMicros(b []byte, ns uint64) []byte {
	q := ns / 1000
	return binary.LittleEndian.AppendUint32(appendDec(b, q), micros3[ns-q*1000])
}

// micros3[f] is '.' and f (< 1000) in three digits, as stored little-endian.
var micros3 = func() (t [1000]uint32) {
	for f := range t {
		t[f] = '.' | uint32('0'+f/100)<<8 | uint32('0'+f/10%10)<<16 | uint32('0'+f%10)<<24
	}
	return t
}()

// pairs16[i] is i (< 100) in two digits, as stored little-endian.
var pairs16 = func() (t [100]uint16) {
	for i := range t {
		t[i] = uint16('0'+i/10) | uint16('0'+i%10)<<8
	}
	return t
}()

// decCache formats the times of one output, which follow each other closely, keeping the
// digits that rarely change from one to the next: the whole µs (micros, below 100 s), or all
// digits but the last four (dec).
type decCache struct {
	key uint64 // what d holds the digits of (+1: 0 is none)
	d   [16]byte
	n   int
}

// micros is appendMicros(b, ns).
func (c *decCache) micros(b []byte, ns uint64) []byte {
	q := ns / 1000
	if q >= 1e8 {
		return appendMicros(b, ns)
	}
	l := len(b)
	if cap(b)-l < 16 {
		b = append(b, "0000000000000000"...)
	}
	b = b[:l+16]
	if q+1 != c.key {
		var v uint64
		v, c.n = dec8lead(q)
		binary.LittleEndian.PutUint64(c.d[:], v)
		c.key = q + 1
	}
	copy(b[l:l+8], c.d[:8])
	binary.LittleEndian.PutUint32(b[l+c.n:], micros3[ns-q*1000])
	return b[:l+c.n+4]
}

// dec is appendDec(b, u).
func (c *decCache) dec(b []byte, u uint64) []byte {
	if u < 1e4 || u >= 1e16 {
		return appendDec(b, u)
	}
	hi := u / 1e4
	lo := u - hi*1e4
	if hi+1 != c.key {
		c.n = len(appendDec(c.d[:0], hi)) // (at most 12 digits)
		c.key = hi + 1
	}
	l := len(b)
	if cap(b)-l < 20 {
		b = append(b, "00000000000000000000"...)
	}
	b = b[:l+20]
	copy(b[l:l+16], c.d[:])
	p := lo / 100
	binary.LittleEndian.PutUint32(b[l+c.n:], uint32(pairs16[p])|uint32(pairs16[lo-p*100])<<16)
	return b[:l+c.n+4]
}
