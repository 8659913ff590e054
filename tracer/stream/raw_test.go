package stream

import (
	"os"
	"regexp"
	"strconv"
	"testing"
)

// TestClassWordMatchesRT: the raw dump's class word layout and record flags are rt.h's
// (CLS_BITS, DEPTH_SHIFT, DEPTH_BITS, FLAG_SHIFT, F_*_BIT), read from the header the recorder
// is built with, and a record built with them reads back its class, depth and flags.
func TestClassWordMatchesRT(t *testing.T) {
	b, err := os.ReadFile("../../rt.h")
	if err != nil {
		t.Fatal(err)
	}
	defs := map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)^#define (\w+)\s+(\d+)\b`).FindAllSubmatch(b, -1) {
		n, _ := strconv.Atoi(string(m[2]))
		defs[string(m[1])] = n
	}
	for name, got := range map[string]int{
		"CLS_BITS": ClassBits, "DEPTH_SHIFT": DepthShift, "DEPTH_BITS": DepthBits, "FLAG_SHIFT": FlagShift,
		"F_SUPER_BIT": 0, "F_TAGGED_BIT": 1, "F_UNWOUND_BIT": 2,
	} {
		want, ok := defs[name]
		if !ok {
			t.Errorf("rt.h defines no %s", name)
		} else if got != want {
			t.Errorf("%s: %d here, %d in rt.h", name, got, want)
		}
	}
	for flag, bit := range map[int]int{FlagSuper: defs["F_SUPER_BIT"], FlagTagged: defs["F_TAGGED_BIT"], FlagUnwound: defs["F_UNWOUND_BIT"]} {
		if flag != 1<<bit {
			t.Errorf("flag %d is not 1 << %d", flag, bit)
		}
	}
	r := Record{Class: 0x1234_5678_9abc | 77<<DepthShift | FlagUnwound<<FlagShift}
	if r.ClassKey() != 0x1234_5678_9abc || r.Depth() != 77 || r.Flags() != FlagUnwound {
		t.Errorf("record %#x: class %#x depth %d flags %d", r.Class, r.ClassKey(), r.Depth(), r.Flags())
	}
	if DepthMask != 1<<DepthBits-1 {
		t.Errorf("DepthMask %#x", DepthMask)
	}
}
