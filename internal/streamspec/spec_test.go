package streamspec

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestGeneratedFilesCurrent fails when tracer/stream/stream_format.go or stream_format.h is not what
// the tables generate: run `go generate ./tracer/stream`.
func TestGeneratedFilesCurrent(t *testing.T) {
	goFile, err := GoFile()
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string][]byte{
		"tracer/stream/stream_format.go": goFile,
		"stream_format.h":                CHeader(),
	} {
		got, err := os.ReadFile(filepath.Join("..", "..", name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run go generate ./tracer/stream", name)
		}
	}
}

// TestTablesConsistent: names and numbers are unique within a group, the event type mask
// covers the type bits, every type fits them.
func TestTablesConsistent(t *testing.T) {
	for _, g := range Groups {
		names, nums := map[string]bool{}, map[uint64]bool{}
		for _, v := range g.Values {
			if names[v.Name] || nums[v.N] {
				t.Errorf("%s: %s (%d) twice", g.GoPrefix, v.Name, v.N)
			}
			names[v.Name], nums[v.N] = true, true
		}
	}
	var bits, mask uint64
	for _, s := range Scalars {
		switch s.GoName {
		case "EventTypeBits":
			bits = s.N
		case "EventTypeMask":
			mask = s.N
		}
	}
	if mask != 1<<bits-1 {
		t.Errorf("EventTypeMask %d, EventTypeBits %d", mask, bits)
	}
	for _, v := range EventTypes.Values {
		if v.N > mask {
			t.Errorf("event type %s (%d) does not fit %d bits", v.Name, v.N, bits)
		}
	}
}
