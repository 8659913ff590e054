// Decoding a stream's frame payloads: the events frame (thread, previous end tick, then
// each event as four uvarints) and the instant frame, and the little-endian reader the other
// frames' payloads are read with. The frames themselves (magic, length, CRC) are stream_format.go's.

package stream

import (
	"encoding/binary"
	"errors"
)

// MaxStreamDepth bounds a call's depth in a stream (the shadow stack is far smaller).
const MaxStreamDepth = 1 << 16

var ErrMalformed = errors.New("malformed frame payload")

// Decoder decodes a payload; any overrun sets bad.
type Decoder struct {
	Buf []byte
	Bad bool
}

func (d *Decoder) U32() uint32 {
	if len(d.Buf) < 4 {
		d.Bad = true
		return 0
	}
	v := binary.LittleEndian.Uint32(d.Buf)
	d.Buf = d.Buf[4:]
	return v
}

func (d *Decoder) U64() uint64 {
	if len(d.Buf) < 8 {
		d.Bad = true
		return 0
	}
	v := binary.LittleEndian.Uint64(d.Buf)
	d.Buf = d.Buf[8:]
	return v
}

func (d *Decoder) Uvarint() uint64 {
	v, n := binary.Uvarint(d.Buf)
	if n <= 0 {
		d.Bad = true
		d.Buf = nil
		return 0
	}
	d.Buf = d.Buf[n:]
	return v
}

func (d *Decoder) Str() string {
	n := d.Uvarint()
	if n > uint64(len(d.Buf)) {
		d.Bad = true
		d.Buf = nil
		return ""
	}
	s := string(d.Buf[:n])
	d.Buf = d.Buf[n:]
	return s
}

// EventIter decodes an events frame's events.
type EventIter struct {
	Buf  []byte
	i    int // next byte of b
	Prev uint64
}

// Next decodes one event into e; false at the end of the payload. Varints of one and two
// bytes, the common case, are decoded in line, by index (no reslicing: this is the hottest
// loop of a conversion, run twice a call).
func (it *EventIter) Next(e *StreamEvent) (bool, error) {
	b, i := it.Buf, it.i
	if i >= len(b) {
		return false, nil
	}
	// each field: its one or two bytes here, or uvarintSlow (which fails, once i < 0, to the end)
	var code, zz, dur, arg uint64
	if uint(i) < uint(len(b)) && b[i] < 0x80 {
		code, i = uint64(b[i]), i+1
	} else if i >= 0 && i+1 < len(b) && b[i+1] < 0x80 {
		code, i = uint64(b[i]&0x7f)|uint64(b[i+1])<<7, i+2
	} else {
		code, i = uvarintSlow(b, i)
	}
	if uint(i) < uint(len(b)) && b[i] < 0x80 {
		zz, i = uint64(b[i]), i+1
	} else if i >= 0 && i+1 < len(b) && b[i+1] < 0x80 {
		zz, i = uint64(b[i]&0x7f)|uint64(b[i+1])<<7, i+2
	} else {
		zz, i = uvarintSlow(b, i)
	}
	if uint(i) < uint(len(b)) && b[i] < 0x80 {
		dur, i = uint64(b[i]), i+1
	} else if i >= 0 && i+1 < len(b) && b[i+1] < 0x80 {
		dur, i = uint64(b[i]&0x7f)|uint64(b[i+1])<<7, i+2
	} else {
		dur, i = uvarintSlow(b, i)
	}
	if uint(i) < uint(len(b)) && b[i] < 0x80 {
		arg, i = uint64(b[i]), i+1
	} else if i >= 0 && i+1 < len(b) && b[i+1] < 0x80 {
		arg, i = uint64(b[i]&0x7f)|uint64(b[i+1])<<7, i+2
	} else {
		arg, i = uvarintSlow(b, i)
	}
	if i < 0 {
		return false, ErrMalformed
	}
	it.i = i
	delta := int64(zz >> 1) // zigzag, as binary.Varint
	if zz&1 != 0 {
		delta = ^delta
	}
	end := it.Prev + uint64(delta)
	if (delta < 0 && end > it.Prev) || (delta > 0 && end < it.Prev) || dur > end {
		return false, ErrMalformed
	}
	e.Type, e.ID, e.Start, e.End = int(code&EventTypeMask), code>>EventTypeBits, end-dur, end
	switch e.Type {
	case EventCall, EventUnwound:
		if arg > MaxStreamDepth {
			return false, ErrMalformed
		}
		e.Depth, e.Count = arg, 0
	case EventMark:
		e.Depth, e.Count = 0, arg
	case EventWait: // then its address and holder; the id becomes a wait id (waits.go)
		addr, n := binary.Uvarint(b[i:])
		if n <= 0 {
			return false, ErrMalformed
		}
		holder, m := binary.Uvarint(b[i+n:])
		if m <= 0 {
			return false, ErrMalformed
		}
		i += n + m
		if arg > MaxStreamDepth || e.ID == 0 || e.ID > 0x7f {
			return false, ErrMalformed
		}
		it.i = i
		e.Depth, e.Count, e.Addr, e.Holder = arg, 0, addr, holder
		e.ID = WaitID(WaitPrimitive(e.ID), addr, holder)
	default:
		return false, ErrMalformed
	}
	it.Prev = end
	return true, nil
}

// uvarintSlow decodes the uvarint at b[i:] (of three bytes or more: shorter ones are decoded
// in line) and returns it and the index after it; a negative index when i is negative (an
// earlier failure) or the bytes there are not a uvarint.
func uvarintSlow(b []byte, i int) (uint64, int) {
	if i < 0 || i >= len(b) {
		return 0, -1
	}
	if i+1 < len(b) && b[i+1] < 0x80 {
		return uint64(b[i]&0x7f) | uint64(b[i+1])<<7, i + 2
	}
	v, n := binary.Uvarint(b[i:])
	if n <= 0 {
		return 0, -1
	}
	return v, i + n
}

// EventsHeader splits an events frame's payload into its header (the thread, the end tick of
// the event before the frame's first) and its events, which an eventIter starting at prevEnd
// decodes.
func EventsHeader(payload []byte) (tid, prevEnd uint64, events []byte, err error) {
	d := Decoder{Buf: payload}
	tid, prevEnd = d.U64(), d.U64()
	if d.Bad {
		return 0, 0, nil, ErrMalformed
	}
	return tid, prevEnd, d.Buf, nil
}

// DecodeEvents decodes an events frame's payload: the thread, the header's previous end tick,
// and the events with absolute ticks.
func DecodeEvents(payload []byte) (tid, prevEnd uint64, evs []StreamEvent, err error) {
	tid, prevEnd, b, err := EventsHeader(payload)
	if err != nil {
		return 0, 0, nil, err
	}
	it := EventIter{Buf: b, Prev: prevEnd}
	for {
		var e StreamEvent
		ok, err := it.Next(&e)
		if err != nil {
			return tid, prevEnd, evs, err
		}
		if !ok {
			return tid, prevEnd, evs, nil
		}
		evs = append(evs, e)
	}
}

// DecodeInstant decodes an instant frame's payload; an error when it does not decode (cut
// short, a clock other than ticks or monotonic). Bytes past the name are a later version's
// fields: ignored.
func DecodeInstant(payload []byte) (StreamInstant, error) {
	var in StreamInstant
	d := Decoder{Buf: payload}
	in.TID = d.U64()
	if d.Bad || len(d.Buf) == 0 {
		return in, ErrMalformed
	}
	in.Clock, d.Buf = d.Buf[0], d.Buf[1:]
	in.Time = d.U64()
	kind := d.Uvarint()
	in.Precision = d.Uvarint()
	in.Name = d.Str()
	if d.Bad || in.Clock > InstantClockMonotonic || kind > 1<<16 {
		return in, ErrMalformed
	}
	in.Kind = InstantKind(kind)
	return in, nil
}
