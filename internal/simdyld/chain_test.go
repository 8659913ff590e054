package simdyld

import (
	"encoding/binary"
	"testing"
)

// chainImage is an Image over a plain buffer at unslid base 0x100000000 with slide 0x1000, for
// decoding hand-encoded chains of the formats no toolchain here emits.
func chainImage(words []uint64) *Image {
	mem := make([]byte, 8*len(words))
	for i, w := range words {
		binary.LittleEndian.PutUint64(mem[8*i:], w)
	}
	return &Image{mem: mem, base: 0x1_0000_0000, Slide: 0x1000, dylibs: []string{"/usr/lib/libobjc.A.dylib"}}
}

func field(v uint64, lo uint) uint64 { return v << lo }

func TestChainFormats(t *testing.T) {
	imports := []chainedImport{{ordinal: 1, name: "_objc_msgSend"}, {ordinal: 1, name: "_objc_alloc", addend: 16}}
	const base = 0x1_0000_0000
	fake := FakeAddress("/usr/lib/libobjc.A.dylib", "_objc_msgSend")
	fakeAlloc := FakeAddress("/usr/lib/libobjc.A.dylib", "_objc_alloc")
	cases := []struct {
		name    string
		format  uint16
		words   []uint64
		want    []uint64 // value of each word after fixups (slide 0x1000)
		auth    []*AuthInfo
		rebases int
	}{
		{
			name:   "DYLD_CHAINED_PTR_64_OFFSET",
			format: ptr64Offset,
			// rebase to vm offset 0x4000 with high8 0x12, next 2 (x4 bytes); bind import 1 addend 3, end
			words: []uint64{field(0x4000, 0) | field(0x12, 36) | field(2, 51), field(1, 0) | field(3, 24) | field(1, 63)},
			want:  []uint64{0x12<<56 | (base + 0x4000 + 0x1000), fakeAlloc + 16 + 3},
			auth:  []*AuthInfo{nil},
		},
		{
			name:   "DYLD_CHAINED_PTR_ARM64E",
			format: ptrArm64e,
			// rebase to vmaddr; auth rebase (offset 0x20, div 0x55, addrDiv, key DA); auth bind 0 (div 7, key IB); bind 1 addend -8
			words: []uint64{
				field(base+0x40, 0) | field(1, 51),
				field(0x20, 0) | field(0x55, 32) | field(1, 48) | field(2, 49) | field(1, 51) | field(1, 63),
				field(0, 0) | field(7, 32) | field(1, 49) | field(1, 51) | field(1, 62) | field(1, 63),
				field(1, 0) | field((1<<19)-8, 32) | field(1, 62),
			},
			want: []uint64{base + 0x40 + 0x1000, base + 0x20 + 0x1000, fake, fakeAlloc + 16 - 8},
			auth: []*AuthInfo{{Key: 1, AddrDiv: false, Diversity: 7}, nil},
		},
		{
			name:   "DYLD_CHAINED_PTR_ARM64E_USERLAND24",
			format: ptrArm64eUserland24,
			// rebase to vm offset 0x80; auth bind import 1 (24-bit ordinal), key IA, addrDiv
			words: []uint64{field(0x80, 0) | field(1, 51), field(1, 0) | field(1, 48) | field(1, 62) | field(1, 63)},
			want:  []uint64{base + 0x80 + 0x1000, fakeAlloc + 16},
			auth:  []*AuthInfo{{Key: 0, AddrDiv: true, Diversity: 0}},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			img := chainImage(c.words)
			if err := img.walkChain(base, c.format, imports, base); err != nil {
				t.Fatal(err)
			}
			for i, w := range c.want {
				if got := img.word(base + uint64(8*i)); got != w {
					t.Errorf("word %d = %#x, want %#x", i, got, w)
				}
			}
			var auths []*AuthInfo
			for _, b := range img.Binds {
				auths = append(auths, b.Auth)
			}
			if len(auths) != len(c.auth) {
				t.Fatalf("%d binds, want %d", len(auths), len(c.auth))
			}
			for i := range auths {
				if (auths[i] == nil) != (c.auth[i] == nil) || auths[i] != nil && *auths[i] != *c.auth[i] {
					t.Errorf("bind %d auth %+v, want %+v", i, auths[i], c.auth[i])
				}
			}
		})
	}
}
