package sink

import (
	"bytes"
	"compress/zlib"
	"hash/adler32"
	"io"
	"math/rand/v2"
	"testing"
)

// TestPerfettoDeflate: pfDeflater's streams inflate to their input, whatever the packets and
// what is said of them: runs of identical packets (copies longer than 258, overlapping),
// batches longer than the 32 KiB window, shapes and names that lie, bytes that do not
// compress (stored, never much bigger than they are).
func TestPerfettoDeflate(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var df pfDeflater
	for round := 0; round < 200; round++ {
		var raw []byte
		var pkts []pfPkt
		n := r.IntN(3000)
		if round%10 == 0 {
			n = 20000
		}
		var prev []byte
		for len(pkts) < n {
			var p []byte
			switch x := r.IntN(10); {
			case x < 4 && prev != nil: // the same again
				p = prev
			case x < 7 && prev != nil: // the same but a byte or two
				p = append([]byte(nil), prev...)
				for k := r.IntN(3); k >= 0; k-- {
					p[r.IntN(len(p))] = byte(r.IntN(4))
				}
			default:
				p = make([]byte, 1+r.IntN(40))
				for k := range p {
					p[k] = byte(r.IntN(1 + r.IntN(256)))
				}
			}
			pkts = append(pkts, pfPkt{pos: uint32(len(raw)), shape: uint32(r.IntN(4)<<8 | min(len(p), 255)), iid: uint32(r.IntN(50))})
			raw = append(raw, p...)
			prev = p
		}
		if round%50 == 7 { // bytes that do not repeat, over 143: stored blocks
			for k := range raw {
				raw[k] = byte(144 + r.IntN(112))
			}
		}
		z := df.compress(nil, raw, pkts)
		if len(z) > len(raw)+64+5*(len(raw)/65535+1) {
			t.Errorf("round %d: %d bytes compressed to %d", round, len(raw), len(z))
		}
		zr, err := zlib.NewReader(bytes.NewReader(z))
		if err != nil {
			t.Fatal(err)
		}
		back, err := io.ReadAll(zr)
		if err != nil || !bytes.Equal(back, raw) {
			t.Fatalf("round %d (%d packets, %d bytes): %v, %d bytes back", round, len(pkts), len(raw), err, len(back))
		}
	}
}

// pfAdler32 is hash/adler32's checksum: on every length up to 100 and some longer (past a
// block of 1<<16 words), on random bytes and on all 0xff (the largest sums).
func TestPfAdler32(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var lens []int
	for n := 0; n <= 100; n++ {
		lens = append(lens, n)
	}
	lens = append(lens, 5551, 5552, 5553, 65536, 1<<19+3, 1<<20+13)
	for _, n := range lens {
		for _, fill := range []int{-1, 0xff} {
			p := make([]byte, n)
			for i := range p {
				if fill < 0 {
					p[i] = byte(r.IntN(256))
				} else {
					p[i] = byte(fill)
				}
			}
			if got, want := pfAdler32(p), adler32.Checksum(p); got != want {
				t.Fatalf("%d bytes (fill %d): %#x, want %#x", n, fill, got, want)
			}
		}
	}
}
