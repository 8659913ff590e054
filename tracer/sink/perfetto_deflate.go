package sink

import (
	"encoding/binary"
	"math/bits"
)

// A zlib stream (RFC 1950, 1951) made for a batch of Perfetto packets, fast because it knows
// where packets are and which earlier packet each is likely to repeat. A general compressor
// (compress/flate, level 1) spends most of its time hashing every position to find repeats;
// here the encoder says, per packet, what it is (its shape: kind and length; for a begin, its
// name), and the packet is matched against the bytes following the previous packet's match (a
// repeated run of calls), the last packet of the same name (a begin), or else the last of the
// same shape; longest common prefix wins, the rest is literal. (A begin is not matched against
// the last of its shape when the last of its name is in reach: that is rarely longer, and
// comparing costs more than the 2 % of bytes it saves.) Tokens are coded with deflate's fixed
// Huffman codes (no tables to build or send), in one block.
//
// A trace's packets repeat a lot: an end differs from the previous end only in its time
// delta; a begin from the previous begin of the same method only in its delta; the same run
// of calls at the same pace repeats whole. On realistic traces this comes to about 7 bytes a
// call (compress/flate at BestSpeed: about the same; HuffmanOnly: 15-20), several times
// faster than flate.

// pfPkt is what the encoder says about a packet of a batch: where it starts, its shape
// (kind<<8 | length, length 255 for any longer), and for a begin its name's iid (else 0).
type pfPkt struct {
	pos   uint32
	shape uint32
	iid   uint32
}

const (
	pfShapeEnd   = 1 << 8
	pfShapeBegin = 2 << 8
	pfShapeOther = 3 << 8
)

// Deflate's fixed Huffman codes, bit-reversed for an LSB-first bit writer.
var (
	pfLitCode  [286]uint16 // literal/length symbol -> code
	pfLitBits  [286]uint8
	pfLenSym   [259]uint16 // match length 3..258 -> symbol
	pfLenExtra [259]uint8  // -> number of extra bits (value: length - base)
	pfLenBase  [29]uint16  // length symbol - 257 -> base length
	pfLenV     [259]uint32 // match length 3..258 -> its code and extra bits, ready to put
	pfLenN     [259]uint8  // -> how many bits that is
	pfDistRev  [30]uint8   // distance code -> its 5 bits, reversed
)

func init() {
	for s := 0; s < 286; s++ {
		var code, n int
		switch {
		case s < 144:
			code, n = 0x30+s, 8
		case s < 256:
			code, n = 0x190+s-144, 9
		case s < 280:
			code, n = s-256, 7
		default:
			code, n = 0xc0+s-280, 8
		}
		pfLitCode[s] = uint16(bits.Reverse16(uint16(code)) >> (16 - n))
		pfLitBits[s] = uint8(n)
	}
	base := 3
	for s := 0; s < 29; s++ {
		extra := 0
		if s >= 8 && s < 28 {
			extra = (s - 4) / 4
		}
		pfLenBase[s] = uint16(base)
		n := 1 << extra
		if s == 28 {
			base, n = 258, 1
			pfLenBase[s] = 258
		}
		for l := base; l < base+n && l <= 258; l++ {
			pfLenSym[l] = uint16(257 + s)
			pfLenExtra[l] = uint8(extra)
		}
		base += n
	}
	for l := 3; l <= 258; l++ {
		sym := pfLenSym[l]
		nl := uint(pfLitBits[sym])
		pfLenV[l] = uint32(pfLitCode[sym]) | uint32(l-int(pfLenBase[sym-257]))<<nl
		pfLenN[l] = uint8(nl + uint(pfLenExtra[l]))
	}
	for c := range pfDistRev {
		pfDistRev[c] = bits.Reverse8(uint8(c)) >> 3
	}
}

// pfDistBits returns the bits of a copy's distance, 1..32768 bytes back: its code (5 bits,
// reversed) and extra bits, at most 5+13.
func pfDistBits(dist int) (uint64, uint) {
	d := uint32(dist - 1)
	var code, nextra uint32
	if d < 4 {
		code = d
	} else {
		nb := uint32(bits.Len32(d)) - 1 // d in [2^nb, 2^(nb+1))
		nextra = nb - 1
		code = 2*nb + (d>>nextra)&1
	}
	return uint64(pfDistRev[code&31]) | uint64(d&(1<<nextra-1))<<5, 5 + uint(nextra)
}

// pfCopyBits returns the bits of a copy of length 3..258 whose distance's bits (pfDistBits)
// are dv, dn: the length's code and extra bits, then the distance's; at most 8+5+5+13.
func pfCopyBits(length int, dv uint64, dn uint) (uint64, uint) {
	n := uint(pfLenN[length])
	return uint64(pfLenV[length]) | dv<<n, n + dn
}

// pfDeflater compresses batches; it keeps its tables from one to the next.
type pfDeflater struct {
	shape [4 << 8]int32 // shape -> position of the last packet of that shape, -1 for none
	iid   []int32       // iid -> position of the last begin of that name, -1 for none
}

const pfWindow = 32768

// commonPrefix is the length of the common prefix of raw[a:] and raw[b:b+n] (a < b; the
// bytes compared may overlap, as a deflate copy does).
func commonPrefix(raw []byte, a, b, n int) int {
	k := 0
	for ; k+8 <= n; k += 8 {
		if x := binary.LittleEndian.Uint64(raw[a+k:]) ^ binary.LittleEndian.Uint64(raw[b+k:]); x != 0 {
			return k + bits.TrailingZeros64(x)/8
		}
	}
	if k == n {
		return n
	}
	if n >= 8 { // the last 8 bytes, less those compared already
		x := binary.LittleEndian.Uint64(raw[a+n-8:]) ^ binary.LittleEndian.Uint64(raw[b+n-8:])
		if x >>= 8 * uint(k-(n-8)); x != 0 {
			return k + bits.TrailingZeros64(x)/8
		}
		return n
	}
	for k < n && raw[a+k] == raw[b+k] {
		k++
	}
	return k
}

// compress appends to dst raw as a zlib stream, raw's packets being pkts.
func (z *pfDeflater) compress(dst, raw []byte, pkts []pfPkt) []byte {
	for i := range z.shape {
		z.shape[i] = -1
	}
	for i := range z.iid {
		z.iid[i] = -1
	}
	// raw with 16 bytes more to read, when its capacity allows: prefix16 compares a short
	// packet in two loads each side
	ext, slack := raw, cap(raw)-len(raw) >= 16
	if slack {
		ext = raw[:len(raw)+16]
	}
	// bits not yet in out, LSB first: the final block, fixed Huffman codes
	out, acc, nacc := append(dst, 0x78, 0x01), uint64(1|1<<1), uint(3) // deflate, 32 KiB window, fastest
	// the pending copy, held to be lengthened while the next packets repeat it too
	plen, pdist := 0, 0
	var dv uint64 // pdist's bits (pfDistBits)
	var dn uint
	for i, p := range pkts {
		pos := int(p.pos)
		end := len(raw)
		if i+1 < len(pkts) {
			end = int(pkts[i+1].pos)
		}
		n := end - pos
		// candidates: where the pending copy would go on, the last of the same name, or else
		// the last of the same shape; the longest common prefix wins
		short := slack && n <= 16
		best, bestK := -1, 0
		if plen > 0 {
			best = pos - pdist
			bestK = pfPrefix(short, ext, raw, best, pos, n)
		}
		named := false // the last begin of the same name was a candidate
		if bestK < n && p.iid != 0 {
			for int(p.iid) >= len(z.iid) {
				z.iid = append(z.iid, -1)
			}
			if c := int(z.iid[p.iid]); c >= 0 && pos-c <= pfWindow {
				named = true
				if k := pfPrefix(short, ext, raw, c, pos, n); k > bestK {
					best, bestK = c, k
				}
			}
			z.iid[p.iid] = int32(pos)
		}
		if bestK < n && !named {
			if c := int(z.shape[p.shape]); c >= 0 && pos-c <= pfWindow {
				if k := pfPrefix(short, ext, raw, c, pos, n); k > bestK {
					best, bestK = c, k
				}
			}
		}
		z.shape[p.shape] = int32(pos)
		if bestK >= 3 {
			if plen > 0 && pos-best == pdist {
				plen += bestK // the pending copy goes on
			} else {
				for plen > 0 {
					l := min(258, plen)
					if l < plen && plen-l < 3 {
						l = plen - 3 // leave at least 3 for the next copy
					}
					v, nv := pfCopyBits(l, dv, dn)
					out, acc, nacc = pfPut(out, acc, nacc, v, nv)
					plen -= l
				}
				plen, pdist = bestK, pos-best
				dv, dn = pfDistBits(pdist)
			}
		} else {
			bestK = 0
		}
		if bestK < n {
			for plen > 0 {
				l := min(258, plen)
				if l < plen && plen-l < 3 {
					l = plen - 3
				}
				v, nv := pfCopyBits(l, dv, dn)
				out, acc, nacc = pfPut(out, acc, nacc, v, nv)
				plen -= l
			}
			for _, c := range raw[pos+bestK : end] {
				out, acc, nacc = pfPut(out, acc, nacc, uint64(pfLitCode[c]), uint(pfLitBits[c]))
			}
		}
	}
	for plen > 0 {
		l := min(258, plen)
		if l < plen && plen-l < 3 {
			l = plen - 3
		}
		v, nv := pfCopyBits(l, dv, dn)
		out, acc, nacc = pfPut(out, acc, nacc, v, nv)
		plen -= l
	}
	out, acc, nacc = pfPut(out, acc, nacc, uint64(pfLitCode[256]), uint(pfLitBits[256])) // end of block
	for ; nacc > 0; nacc -= min(nacc, 8) {
		out = append(out, byte(acc))
		acc >>= 8
	}
	if len(out)-len(dst) > len(raw)+64 {
		// Fixed codes take 9 bits for a byte over 143: on bytes that do not repeat, stored
		// blocks are smaller, and keep a batch's packet under Perfetto's 512 KB.
		out = pfStored(dst, raw)
	}
	return binary.BigEndian.AppendUint32(out, pfAdler32(raw))
}

// pfPrefix is how many of the n bytes at pos the bytes at c repeat: prefix16 for a short
// packet (ext has the slack past it), commonPrefix otherwise.
func pfPrefix(short bool, ext, raw []byte, c, pos, n int) int {
	if short {
		return prefix16(ext, c, pos, n)
	}
	return commonPrefix(raw, c, pos, n)
}

// prefix16 is commonPrefix for n <= 16, b+16 <= len(ext): two 8-byte loads a side, whatever
// the bytes past n (they are not counted).
func prefix16(ext []byte, a, b, n int) int {
	x := binary.LittleEndian.Uint64(ext[a:]) ^ binary.LittleEndian.Uint64(ext[b:])
	k := bits.TrailingZeros64(x) / 8
	if x == 0 {
		y := binary.LittleEndian.Uint64(ext[a+8:]) ^ binary.LittleEndian.Uint64(ext[b+8:])
		k = 8 + bits.TrailingZeros64(y)/8
	}
	return min(k, n)
}

// pfAdler32 is hash/adler32.Checksum, 8 bytes a step: with b0..b7 the next 8 bytes,
// s2 += 8*s1 + 8*b0 + 7*b1 + ... + 1*b7 and s1 += b0 + ... + b7, the sums of bytes taken
// by multiplying the word's even and odd bytes, as 16-bit lanes, by the weights (no lane of
// the product exceeds 255*20, so none carries into the next).
func pfAdler32(p []byte) uint32 {
	const mod = 65521
	const lanes = 0x00ff00ff00ff00ff
	s1, s2 := uint64(1), uint64(0)
	for len(p) >= 8 {
		// a block: s2 stays far under 2^64 for 1<<16 words (about 2^45)
		n := min(len(p)/8, 1<<16)
		q := p[:n*8]
		for ; len(q) >= 16; q = q[16:] { // two words a step: s1's chain of adds halved
			x, y := binary.LittleEndian.Uint64(q), binary.LittleEndian.Uint64(q[8:])
			xe, xo, ye, yo := x&lanes, x>>8&lanes, y&lanes, y>>8&lanes
			tx := ((xe + xo) * 0x0001000100010001) >> 48
			ty := ((ye + yo) * 0x0001000100010001) >> 48
			s2 += 16*s1 + 8*tx + (xe*(8<<48|6<<32|4<<16|2))>>48 + (xo*(7<<48|5<<32|3<<16|1))>>48 +
				(ye*(8<<48|6<<32|4<<16|2))>>48 + (yo*(7<<48|5<<32|3<<16|1))>>48
			s1 += tx + ty
		}
		if len(q) >= 8 {
			x := binary.LittleEndian.Uint64(q)
			even, odd := x&lanes, x>>8&lanes
			s2 += 8*s1 + (even*(8<<48|6<<32|4<<16|2))>>48 + (odd*(7<<48|5<<32|3<<16|1))>>48
			s1 += ((even + odd) * 0x0001000100010001) >> 48
		}
		p = p[n*8:]
		s1 %= mod
		s2 %= mod
	}
	for _, c := range p {
		s1 += uint64(c)
		s2 += s1
	}
	return uint32(s2%mod)<<16 | uint32(s1%mod)
}

// pfPut is a bit writer, LSB first: to out and the low nacc bits of acc (nacc < 32), it
// appends the low n bits of v (n <= 32). (Values in and out, not a struct: the compiler
// keeps them in registers.)
func pfPut(out []byte, acc uint64, nacc uint, v uint64, n uint) ([]byte, uint64, uint) {
	acc |= v << nacc
	nacc += n
	if nacc >= 32 {
		out = binary.LittleEndian.AppendUint32(out, uint32(acc))
		acc >>= 32
		nacc -= 32
	}
	return out, acc, nacc
}

// pfStored appends to dst a zlib header and raw in stored deflate blocks (5 bytes a block of
// at most 65,535).
func pfStored(dst, raw []byte) []byte {
	out := append(dst, 0x78, 0x01)
	for first := true; first || len(raw) > 0; first = false {
		n := min(len(raw), 65535)
		final := byte(0)
		if n == len(raw) {
			final = 1
		}
		out = append(out, final, byte(n), byte(n>>8), ^byte(n), ^byte(n>>8))
		out = append(out, raw[:n]...)
		raw = raw[n:]
	}
	return out
}
