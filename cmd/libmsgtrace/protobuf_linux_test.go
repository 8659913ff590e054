//go:build linux

package main

import (
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// pbFields calls fn for each field of the protobuf message b, in order: a varint's or a fixed
// field's value in u, a length-delimited field's bytes in v. A malformed message, or a wire type
// Perfetto never writes (groups), fails the test.
func pbFields(t *testing.T, b []byte, fn func(num protowire.Number, typ protowire.Type, v []byte, u uint64)) {
	t.Helper()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			t.Fatal("protobuf: bad tag")
		}
		b = b[n:]
		var v []byte
		var u uint64
		var u32 uint32
		switch typ {
		case protowire.VarintType:
			u, n = protowire.ConsumeVarint(b)
		case protowire.Fixed64Type:
			u, n = protowire.ConsumeFixed64(b)
		case protowire.Fixed32Type:
			u32, n = protowire.ConsumeFixed32(b)
			u = uint64(u32)
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		default:
			t.Fatalf("protobuf: field %d has wire type %d", num, typ)
		}
		if n < 0 {
			t.Fatalf("protobuf: field %d is cut short", num)
		}
		b = b[n:]
		fn(num, typ, v, u)
	}
}
