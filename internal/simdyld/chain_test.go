//go:build linux

package simdyld

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
)

// The hand-encoded tests below cover the pointer formats and opcodes that no toolchain here
// emits (arm64e, 64_OFFSET, threaded binds) or that the fixtures happen not to use.

const (
	synthBase  = 0x1_0000_0000 // __TEXT vmaddr
	synthData  = synthBase + 0x4000
	synthSlide = 0x7000_0000
)

var (
	libobjc = "/usr/lib/libobjc.A.dylib"
	libsys  = "/usr/lib/libSystem.B.dylib"
)

// synthImage is an Image over a plain buffer: __PAGEZERO, __TEXT (16K) and __DATA (16K, first
// words given), not mapped, at slide synthSlide.
func synthImage(words ...uint64) *Image {
	img := &Image{mem: make([]byte, 0x8000), base: synthBase, text: synthBase, Slide: synthSlide,
		dylibs: []string{libobjc, libsys}, Fake: map[string]uint64{}, stats: map[string]int{},
		segs: []seg{{name: "__PAGEZERO", memsz: synthBase}, {name: "__TEXT", addr: synthBase, memsz: 0x4000},
			{name: "__DATA", addr: synthData, memsz: 0x4000}}}
	for i, w := range words {
		binary.LittleEndian.PutUint64(img.mem[0x4000+8*i:], w)
	}
	return img
}

func (img *Image) at(i int) uint64 { return binary.LittleEndian.Uint64(img.mem[0x4000+8*i:]) }

func field(v uint64, lo uint) uint64 { return v << lo }

func TestChainFormats(t *testing.T) {
	imports := []chainedImport{{ordinal: 1, name: "_objc_msgSend"}, {ordinal: 2, name: "_malloc", addend: 16}, {ordinal: -3, name: "_weakdef"}}
	msgSend, malloc, weak := FakeAddress(libobjc, "_objc_msgSend"), FakeAddress(libsys, "_malloc"), FakeAddress("weak", "_weakdef")
	big := make([]chainedImport, 0x10002) // for 24-bit ordinals
	copy(big, imports)
	big[0x10001] = chainedImport{ordinal: 2, name: "_far"}
	type bind struct {
		word int
		sym  string
		auth *AuthInfo
		weak bool
	}
	cases := []struct {
		name    string
		format  uint16
		imports []chainedImport
		words   []uint64
		want    []uint64 // each word after fixups
		binds   []bind
		rebases []int
	}{
		{
			name: "DYLD_CHAINED_PTR_64", format: ptr64, imports: imports,
			// rebase to vmaddr with high8 0x12, next 2 (x4 bytes); bind import 1 inline addend 3, next 2; weak bind
			words: []uint64{field(synthBase+0x40, 0) | field(0x12, 36) | field(2, 51), field(1, 0) | field(3, 24) | field(2, 51) | field(1, 63),
				field(2, 0) | field(1, 63)},
			want:    []uint64{0x12<<56 | (synthBase + 0x40 + synthSlide), malloc + 16 + 3, weak},
			binds:   []bind{{1, "_malloc", nil, false}, {2, "_weakdef", nil, true}},
			rebases: []int{0},
		},
		{
			name: "DYLD_CHAINED_PTR_64_OFFSET", format: ptr64Offset, imports: imports,
			// skip a word (next 4 x4 bytes); rebase to offset 0x4000; bind 0
			words:   []uint64{field(0x4000, 0) | field(4, 51), 0xdead, field(0, 0) | field(1, 63)},
			want:    []uint64{synthBase + 0x4000 + synthSlide, 0xdead, msgSend},
			binds:   []bind{{2, "_objc_msgSend", nil, false}},
			rebases: []int{0},
		},
		{
			name: "DYLD_CHAINED_PTR_ARM64E", format: ptrArm64e, imports: imports,
			// rebase to vmaddr with high8; auth rebase (offset 0x20, div 0x55, addrDiv, key DA);
			// auth bind 0 (div 7, key IB); bind 1 addend -8
			words: []uint64{
				field(synthBase+0x40, 0) | field(0x34, 43) | field(1, 51),
				field(0x20, 0) | field(0x55, 32) | field(1, 48) | field(2, 49) | field(1, 51) | field(1, 63),
				field(0, 0) | field(7, 32) | field(1, 49) | field(1, 51) | field(1, 62) | field(1, 63),
				field(1, 0) | field((1<<19)-8, 32) | field(1, 62),
			},
			want:    []uint64{0x34<<56 | (synthBase + 0x40 + synthSlide), synthBase + 0x20 + synthSlide, msgSend, malloc + 16 - 8},
			binds:   []bind{{2, "_objc_msgSend", &AuthInfo{Key: 1, Diversity: 7}, false}, {3, "_malloc", nil, false}},
			rebases: []int{0, 1},
		},
		{
			name: "DYLD_CHAINED_PTR_ARM64E_USERLAND", format: ptrArm64eUserland, imports: imports,
			// rebase to offset 0x80; auth bind 2 (key DB, div 0xffff); bind 0 addend +5
			words: []uint64{field(0x80, 0) | field(1, 51),
				field(2, 0) | field(0xffff, 32) | field(3, 49) | field(1, 51) | field(1, 62) | field(1, 63),
				field(0, 0) | field(5, 32) | field(1, 62)},
			want:    []uint64{synthBase + 0x80 + synthSlide, weak, msgSend + 5},
			binds:   []bind{{1, "_weakdef", &AuthInfo{Key: 3, Diversity: 0xffff}, true}, {2, "_objc_msgSend", nil, false}},
			rebases: []int{0},
		},
		{
			name: "DYLD_CHAINED_PTR_ARM64E_USERLAND24", format: ptrArm64eUserland24, imports: big,
			// rebase to offset 0x80; auth bind import 1, key IA, addrDiv; bind 0x10001
			words: []uint64{field(0x80, 0) | field(1, 51), field(1, 0) | field(1, 48) | field(1, 51) | field(1, 62) | field(1, 63),
				field(0x10001, 0) | field(1, 62)},
			want:    []uint64{synthBase + 0x80 + synthSlide, malloc + 16, FakeAddress(libsys, "_far")},
			binds:   []bind{{1, "_malloc", &AuthInfo{Key: 0, AddrDiv: true}, false}, {2, "_far", nil, false}},
			rebases: []int{0},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			img := synthImage(c.words...)
			if err := img.walkChain(synthData, &img.segs[2], c.format, c.imports); err != nil {
				t.Fatal(err)
			}
			for i, w := range c.want {
				if got := img.at(i); got != w {
					t.Errorf("word %d = %#x, want %#x", i, got, w)
				}
			}
			if len(img.Binds) != len(c.binds) {
				t.Fatalf("binds %+v, want %+v", img.Binds, c.binds)
			}
			for i, b := range img.Binds {
				w := c.binds[i]
				if b.Addr != synthData+synthSlide+uint64(8*w.word) || b.Symbol != w.sym || b.Weak != w.weak || b.Value != img.at(w.word) ||
					(b.Auth == nil) != (w.auth == nil) || b.Auth != nil && *b.Auth != *w.auth {
					t.Errorf("bind %d: %+v (auth %v), want %+v", i, b, b.Auth, w)
				}
			}
			if len(img.Rebases) != len(c.rebases) {
				t.Fatalf("rebases %#x, want words %v", img.Rebases, c.rebases)
			}
			for i, r := range c.rebases {
				if img.Rebases[i] != synthData+synthSlide+uint64(8*r) {
					t.Errorf("rebase %d at %#x", i, img.Rebases[i])
				}
			}
		})
	}
}

func TestChainErrors(t *testing.T) {
	imports := []chainedImport{{ordinal: 1, name: "_objc_msgSend"}, {ordinal: 7, name: "_nowhere"}}
	for _, c := range []struct {
		name   string
		format uint16
		words  []uint64
		at     uint64
		err    string
	}{
		{"unknown format", 3, []uint64{0}, synthData, "not supported"},
		{"import out of range", ptr64, []uint64{field(5, 0) | field(1, 63)}, synthData, "import 5 of 2"},
		{"bad ordinal", ptr64, []uint64{field(1, 0) | field(1, 63)}, synthData, "library ordinal 7"},
		{"chain leaves the segment", ptrArm64e, []uint64{field(0x7ff, 51)}, synthData + 0x3ff8 - 8*0x7ff + 8, "outside segment"},
		{"start past the segment", ptr64, nil, synthData + 0x3ffc, "outside segment"},
	} {
		img := synthImage(c.words...)
		if c.at != synthData && len(c.words) > 0 {
			binary.LittleEndian.PutUint64(img.mem[c.at-synthBase:], c.words[0])
		}
		err := img.walkChain(c.at, &img.segs[2], c.format, imports)
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: error %v, want %q", c.name, err, c.err)
		}
	}
}

// ops assembles an opcode stream: bytes, and strings as NUL-terminated names.
func ops(parts ...any) []byte {
	var b []byte
	for _, p := range parts {
		switch v := p.(type) {
		case int:
			b = append(b, byte(v))
		case string:
			b = append(append(b, v...), 0)
		case uleb:
			b = binary.AppendUvarint(b, uint64(v))
		case sleb:
			x := int64(v)
			for {
				c := byte(x & 0x7f)
				x >>= 7
				if x == 0 && c&0x40 == 0 || x == -1 && c&0x40 != 0 {
					b = append(b, c)
					break
				}
				b = append(b, c|0x80)
			}
		default:
			panic(fmt.Sprintf("ops: %T", p))
		}
	}
	return b
}

type (
	uleb uint64
	sleb int64
)

func TestClassicOpcodes(t *testing.T) {
	for _, lazy := range []bool{false, true} {
		img := synthImage()
		for i := 0; i < 0x80; i++ { // a recognisable unslid pointer in every word
			binary.LittleEndian.PutUint64(img.mem[0x4000+8*i:], synthBase+uint64(i))
		}
		rebase := ops(0x11, 0x22, uleb(0), // SET_TYPE_IMM pointer, SET_SEGMENT_AND_OFFSET seg 2 off 0
			0x52,          // DO_REBASE_IMM_TIMES 2: 0, 8
			0x30, uleb(8), // ADD_ADDR_ULEB 8 -> 24
			0x60, uleb(1), // DO_REBASE_ULEB_TIMES 1: 24
			0x41,          // ADD_ADDR_IMM_SCALED 1 -> 40
			0x70, uleb(8), // DO_REBASE_ADD_ADDR_ULEB: 40, -> 56
			0x80, uleb(2), uleb(8), // DO_REBASE_ULEB_TIMES_SKIPPING_ULEB 2 skip 8: 56, 72
			0x22, uleb(0x300), 0x52, // the lazy pointers at 0x300, 0x308
			0x00)
		if err := img.rebaseOpcodes(rebase); err != nil {
			t.Fatal(err)
		}
		var rebased []uint64
		for _, r := range img.Rebases {
			rebased = append(rebased, r-synthData-synthSlide)
		}
		if fmt.Sprint(rebased) != "[0 8 24 40 56 72 768 776]" {
			t.Errorf("rebased %v", rebased)
		}
		bind := ops(0x72, uleb(0x100), // SET_SEGMENT_AND_OFFSET seg 2 off 0x100
			0x11, 0x40, "_a", 0x51, 0x90, // ORDINAL_IMM 1, SYMBOL _a (flags 0), TYPE pointer, DO_BIND: 0x100
			0x20, uleb(2), 0x40, "_b", 0x60, sleb(-8), // ORDINAL_ULEB 2, SYMBOL _b, ADDEND -8
			0xa0, uleb(8), // DO_BIND_ADD_ADDR_ULEB: 0x108, -> 0x118
			0xb1,                            // DO_BIND_ADD_ADDR_IMM_SCALED 1: 0x118, -> 0x128
			0x3e, 0x60, sleb(0), 0x41, "_c", // SPECIAL_IMM -2 (flat), ADDEND 0, SYMBOL _c (weak import)
			0xc0, uleb(3), uleb(8), // DO_BIND_ULEB_TIMES_SKIPPING_ULEB 3 skip 8: 0x128, 0x138, 0x148 -> 0x158
			0x80, uleb(8), 0x30, 0x40, "_self", 0x90, // ADD_ADDR 8, SPECIAL_IMM 0 (this image): 0x160
			0x3f, 0x40, "_main", 0x90, // SPECIAL_IMM -1: 0x168
			0x00)
		if err := img.bindOpcodes(bind, bindNow, true); err != nil {
			t.Fatal(err)
		}
		weakOps := ops(0x72, uleb(0x100), 0x40, "_a", 0x90, // weak entry over a regular bind: not written
			0x72, uleb(0x200), 0x40, "_wk", 0x60, sleb(4), 0x90, // weak entry alone: written
			0x48, "_strong", // a strong definition: no bind
			0x00)
		if err := img.bindOpcodes(weakOps, bindWeak, true); err != nil {
			t.Fatal(err)
		}
		lazyOps := ops(0x72, uleb(0x300), 0x11, 0x40, "_l1", 0x90, 0x00, 0x72, uleb(0x308), 0x12, 0x40, "_l2", 0x90, 0x00)
		if err := img.bindOpcodes(lazyOps, bindLazy, lazy); err != nil {
			t.Fatal(err)
		}
		want := []struct {
			off, value uint64
			sym, lib   string
			lazy, weak bool
		}{
			{0x100, FakeAddress(libobjc, "_a"), "_a", libobjc, false, false},
			{0x108, FakeAddress(libsys, "_b") - 8, "_b", libsys, false, false},
			{0x118, FakeAddress(libsys, "_b") - 8, "_b", libsys, false, false},
			{0x128, FakeAddress("flat-namespace", "_c"), "_c", "flat-namespace", false, false},
			{0x138, FakeAddress("flat-namespace", "_c"), "_c", "flat-namespace", false, false},
			{0x148, FakeAddress("flat-namespace", "_c"), "_c", "flat-namespace", false, false},
			{0x160, FakeAddress("this-image", "_self"), "_self", "this-image", false, false},
			{0x168, FakeAddress("main-executable", "_main"), "_main", "main-executable", false, false},
			{0x100, FakeAddress("weak", "_a"), "_a", "weak", false, true},
			{0x200, FakeAddress("weak", "_wk") + 4, "_wk", "weak", false, true},
			{0x300, FakeAddress(libobjc, "_l1"), "_l1", libobjc, true, false},
			{0x308, FakeAddress(libsys, "_l2"), "_l2", libsys, true, false},
		}
		if len(img.Binds) != len(want) {
			t.Fatalf("%d binds: %+v", len(img.Binds), img.Binds)
		}
		for i, w := range want {
			b := img.Binds[i]
			if b.Addr != synthData+synthSlide+w.off || b.Value != w.value || b.Symbol != w.sym || b.Library != w.lib || b.Lazy != w.lazy || b.Weak != w.weak {
				t.Errorf("bind %d: %+v, want %+v", i, b, w)
			}
			v := img.at(int(w.off / 8))
			switch {
			case w.weak && w.off == 0x100:
				if v != FakeAddress(libobjc, "_a") {
					t.Errorf("weak bind over a regular one wrote %#x", v)
				}
			case w.lazy && !lazy:
				if v != synthBase+w.off/8+synthSlide {
					t.Errorf("unbound lazy pointer %s holds %#x, want the rebased stub helper", w.sym, v)
				}
			case v != w.value:
				t.Errorf("%s at %#x holds %#x, want %#x", w.sym, w.off, v, w.value)
			}
		}
		if len(img.Fake) != 9 { // _a is imported from libobjc and weak
			t.Errorf("Fake has %d entries: %v", len(img.Fake), img.Fake)
		}
	}
}

func TestThreadedBind(t *testing.T) {
	// an arm64e chain: rebase to vmaddr, plain bind of table entry 1 (addend 8 + inline 2), auth bind of entry 0
	img := synthImage(field(synthBase+0x10, 0)|field(1, 51), field(1, 0)|field(2, 32)|field(1, 51)|field(1, 62),
		field(0, 0)|field(9, 32)|field(2, 49)|field(1, 62)|field(1, 63))
	stream := ops(0xd0, uleb(2), // THREADED SET_BIND_ORDINAL_TABLE_SIZE_ULEB 2
		0x11, 0x40, "_objc_msgSend", 0x51, 0x90, // table[0]
		0x12, 0x40, "_malloc", 0x60, sleb(8), 0x90, // table[1]
		0x72, uleb(0), 0xd1, // SET_SEGMENT_AND_OFFSET seg 2 off 0, THREADED APPLY
		0x00)
	if err := img.bindOpcodes(stream, bindNow, true); err != nil {
		t.Fatal(err)
	}
	want := []uint64{synthBase + 0x10 + synthSlide, FakeAddress(libsys, "_malloc") + 10, FakeAddress(libobjc, "_objc_msgSend")}
	for i, w := range want {
		if img.at(i) != w {
			t.Errorf("word %d = %#x, want %#x", i, img.at(i), w)
		}
	}
	if len(img.Binds) != 2 || img.Binds[1].Auth == nil || *img.Binds[1].Auth != (AuthInfo{Key: 2, Diversity: 9}) || len(img.Rebases) != 1 {
		t.Errorf("binds %+v, rebases %#x", img.Binds, img.Rebases)
	}
	over := ops(0xd0, uleb(1), 0x11, 0x40, "_a", 0x90, 0x90, 0x00)
	if err := synthImage().bindOpcodes(over, bindNow, true); err == nil {
		t.Error("threaded table overflow accepted")
	}
}

func TestClassicErrors(t *testing.T) {
	for _, c := range []struct {
		name   string
		rebase bool
		ops    []byte
		err    string
	}{
		{"segment index", false, ops(0x79, uleb(0), 0x90), "segment index 9"},
		{"past the segment", false, ops(0x72, uleb(0x3ffc), 0x11, 0x40, "_a", 0x90), "outside segment"},
		{"unknown opcode", false, ops(0xe0), "unknown bind opcode"},
		{"truncated uleb", false, ops(0x72, 0x80), "truncated"},
		{"ordinal", false, ops(0x72, uleb(0), 0x15, 0x40, "_a", 0x90), "library ordinal 5"},
		{"bind type", false, ops(0x72, uleb(0), 0x11, 0x40, "_a", 0x52, 0x90), "bind type 2"},
		{"no symbol", false, ops(0x72, uleb(0), 0x11, 0x90), "without a symbol"},
		{"unterminated symbol", false, []byte{0x40, 'a'}, "unterminated"},
		{"bind before segment", false, ops(0x11, 0x40, "_a", 0x90), "before a segment"},
		{"rebase before segment", true, ops(0x51), "before a segment"},
		{"rebase past the segment", true, ops(0x22, uleb(0x3ff8), 0x52), "outside segment"},
		{"rebase type", true, ops(0x13, 0x22, uleb(0), 0x51), "rebase type 3"},
		{"huge rebase count", true, ops(0x22, uleb(0), 0x60, uleb(1<<40)), "outside segment"},
		{"uleb overflow", true, ops(0x30, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f), "overflows"},
	} {
		img := synthImage()
		var err error
		if c.rebase {
			err = img.rebaseOpcodes(c.ops)
		} else {
			err = img.bindOpcodes(c.ops, bindNow, true)
		}
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: error %v, want %q", c.name, err, c.err)
		}
	}
}

func TestSignedOrdinal(t *testing.T) {
	for _, c := range []struct {
		v    uint64
		n    uint
		want int
	}{{0, 8, 0}, {1, 8, 1}, {0xf0, 8, 0xf0}, {0xfd, 8, -3}, {0xff, 8, -1}, {0xfffe, 16, -2}, {0x1234, 16, 0x1234}} {
		if got := signedOrdinal(c.v, c.n); got != c.want {
			t.Errorf("signedOrdinal(%#x, %d) = %d, want %d", c.v, c.n, got, c.want)
		}
	}
}
