//go:build linux

package main

import (
	"bytes"
	"compress/zlib"
	"io"
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

// perfettoPackets calls fn with each TracePacket of the Perfetto trace b, in file order; a
// packet that carries compressed_packets (field 50, zlib) is replaced by the packets inside it.
func perfettoPackets(t *testing.T, b []byte, fn func(pkt []byte)) {
	t.Helper()
	pbFields(t, b, func(num protowire.Number, _ protowire.Type, pkt []byte, _ uint64) {
		if num != 1 {
			return
		}
		compressed := false
		pbFields(t, pkt, func(num protowire.Number, _ protowire.Type, v []byte, _ uint64) {
			if num != 50 {
				return
			}
			compressed = true
			z, err := zlib.NewReader(bytes.NewReader(v))
			if err != nil {
				t.Fatal(err)
			}
			inner, err := io.ReadAll(z)
			if err != nil {
				t.Fatal(err)
			}
			perfettoPackets(t, inner, fn)
		})
		if !compressed {
			fn(pkt)
		}
	})
}

// perfettoEventNames calls fn with each event name (iid, name) of a packet's interned_data
// (event_names, field 2: iid 1, name 2).
func perfettoEventNames(t *testing.T, interned []byte, fn func(iid uint64, name string)) {
	t.Helper()
	pbFields(t, interned, func(num protowire.Number, _ protowire.Type, v []byte, _ uint64) {
		if num != 2 {
			return
		}
		var iid uint64
		var name string
		pbFields(t, v, func(num protowire.Number, _ protowire.Type, v []byte, u uint64) {
			if num == 1 {
				iid = u
			} else if num == 2 {
				name = string(v)
			}
		})
		fn(iid, name)
	})
}
