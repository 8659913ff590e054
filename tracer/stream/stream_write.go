package stream

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"sync"
)

// Castagnoli returns the CRC-32C table frames are checked with, made at the first use: made
// at init it cost every traced process ~0.2 ms at start (the SSE4.2 tables), for a table the
// library uses only when converting.
var Castagnoli = sync.OnceValue(func() *crc32.Table { return crc32.MakeTable(crc32.Castagnoli) })

// StreamProcess is a process frame.
type StreamProcess struct {
	PID, PPID         uint64
	Path, Name        string
	Arch, OS          string
	Mode              uint64 // ModeStream, ModeRing
	Version, Reserved uint32 // written as is; Version 0 means StreamVersion
}

// ClockSample is a clock frame: a tick and the clocks read with it.
type ClockSample struct {
	Tick, MonoNanos, WallNanos uint64
	RateNum, RateDen           uint64 // ns = ticks * num / den; 0, 0 when unknown
}

// StreamMethod is one entry of a methods frame.
type StreamMethod struct {
	ID              uint64
	Flags           uint64 // MethodClass, MethodSuper, MethodTagged
	Class, Selector string
}

// StreamThread is a thread frame.
type StreamThread struct {
	TID   uint64
	Flags uint64 // ThreadMain, ThreadExited
	Name  string
}

// StreamEvent is one event of an events frame, with absolute ticks (the writer encodes the
// deltas).
type StreamEvent struct {
	Type       int    // EventCall, EventUnwound, EventMark, EventWait
	ID         uint64 // method id, or mark kind for a mark; a wait: its primitive (written), its WaitID (read)
	Start, End uint64 // ticks
	Depth      uint64 // calls and waits
	Count      uint64 // marks
	Addr       uint64 // waits: the primitive's address
	Holder     uint64 // waits: the holder's thread id, 0 unknown
}

// OpenCall is one entry of an open frame.
type OpenCall struct {
	ID, Start, Depth uint64
}

// StreamInstant is an instant frame.
type StreamInstant struct {
	TID       uint64 // 0: process-wide
	Clock     uint8  // InstantClockTicks or InstantClockMonotonic
	Time      uint64 // ticks or CLOCK_MONOTONIC ns, as Clock says
	Kind      InstantKind
	Precision uint64 // ns
	Name      string
}

// StreamCounters is an end frame.
type StreamCounters struct {
	Calls, Lost, Overflow, Waits, TicksWaited, Unwritten uint64
}

// StreamWriter encodes frames of the stream format to w: the reference encoder the C drain is
// checked against, and how tests build streams. Each method writes whole frames; errors stick.
type StreamWriter struct {
	w   io.Writer
	b   []byte
	err error
}

// NewStreamWriter writes frames to w (unbuffered: wrap a file in a bufio.Writer).
func NewStreamWriter(w io.Writer) *StreamWriter { return &StreamWriter{w: w} }

// Err is the first error met.
func (sw *StreamWriter) Err() error { return sw.err }

// Frame writes one frame with any kind and payload.
func (sw *StreamWriter) Frame(kind uint8, payload []byte) error {
	if sw.err != nil {
		return sw.err
	}
	if len(payload) > MaxFramePayload {
		sw.err = fmt.Errorf("stream frame of %d bytes (at most %d)", len(payload), MaxFramePayload)
		return sw.err
	}
	var h [FrameHeader]byte
	copy(h[:], StreamMagic)
	h[FrameKindAt] = kind
	binary.LittleEndian.PutUint32(h[FrameLenAt:], uint32(len(payload)))
	tab := Castagnoli()
	crc := crc32.Update(crc32.Update(0, tab, h[FrameKindAt:FrameCRCAt]), tab, payload)
	binary.LittleEndian.PutUint32(h[FrameCRCAt:], crc)
	if _, sw.err = sw.w.Write(h[:]); sw.err == nil {
		_, sw.err = sw.w.Write(payload)
	}
	return sw.err
}

func appendU64(b []byte, v uint64) []byte { return binary.LittleEndian.AppendUint64(b, v) }

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// Process writes a process frame (the first frame of a stream).
func (sw *StreamWriter) Process(p StreamProcess) error {
	v := p.Version
	if v == 0 {
		v = StreamVersion
	}
	b := binary.LittleEndian.AppendUint32(sw.b[:0], v)
	b = binary.LittleEndian.AppendUint32(b, p.Reserved)
	b = appendU64(appendU64(b, p.PID), p.PPID)
	b = appendString(appendString(b, p.Path), p.Name)
	b = appendString(appendString(b, p.Arch), p.OS)
	b = binary.AppendUvarint(b, p.Mode)
	sw.b = b
	return sw.Frame(FrameProcess, b)
}

// Clock writes a clock frame.
func (sw *StreamWriter) Clock(c ClockSample) error {
	b := appendU64(appendU64(appendU64(sw.b[:0], c.Tick), c.MonoNanos), c.WallNanos)
	b = appendU64(appendU64(b, c.RateNum), c.RateDen)
	sw.b = b
	return sw.Frame(FrameClock, b)
}

// Methods writes a methods frame.
func (sw *StreamWriter) Methods(ms ...StreamMethod) error {
	b := sw.b[:0]
	for _, m := range ms {
		b = binary.AppendUvarint(binary.AppendUvarint(b, m.ID), m.Flags)
		b = appendString(appendString(b, m.Class), m.Selector)
	}
	sw.b = b
	return sw.Frame(FrameMethods, b)
}

// Thread writes a thread frame.
func (sw *StreamWriter) Thread(t StreamThread) error {
	b := binary.AppendUvarint(appendU64(sw.b[:0], t.TID), t.Flags)
	b = appendString(b, t.Name)
	sw.b = b
	return sw.Frame(FrameThread, b)
}

// Events writes the events of one thread, in the order they ended, as one events frame whose
// header carries prevEnd (the thread's previous end tick; any tick at or before the first
// event's end); events that do not fit a frame go on in further frames. It returns the last
// event's end tick, the prevEnd of the thread's next frame.
func (sw *StreamWriter) Events(tid, prevEnd uint64, evs []StreamEvent) (uint64, error) {
	for first := true; first || len(evs) > 0; first = false {
		b := appendU64(appendU64(sw.b[:0], tid), prevEnd)
		prev := prevEnd
		n := 0
		for _, e := range evs {
			if len(b) > MaxFramePayload-64 {
				break
			}
			id := e.ID
			if p, _, _, ok := WaitOf(id); ok && e.Type == EventWait {
				id = uint64(p) // as read back: the primitive
			}
			b = binary.AppendUvarint(b, id<<EventTypeBits|uint64(e.Type)&EventTypeMask)
			b = binary.AppendVarint(b, int64(e.End-prev))
			b = binary.AppendUvarint(b, e.End-e.Start)
			if e.Type == EventMark {
				b = binary.AppendUvarint(b, e.Count)
			} else {
				b = binary.AppendUvarint(b, e.Depth)
			}
			if e.Type == EventWait {
				b = binary.AppendUvarint(binary.AppendUvarint(b, e.Addr), e.Holder)
			}
			prev = e.End
			n++
		}
		sw.b = b
		if err := sw.Frame(FrameEvents, b); err != nil {
			return prevEnd, err
		}
		evs, prevEnd = evs[n:], prev
	}
	return prevEnd, nil
}

// Open writes an open frame: the calls open on a thread at tick, outermost first.
func (sw *StreamWriter) Open(tid, tick uint64, calls []OpenCall) error {
	b := appendU64(appendU64(sw.b[:0], tid), tick)
	for _, c := range calls {
		b = binary.AppendUvarint(binary.AppendUvarint(b, c.ID), tick-c.Start)
		b = binary.AppendUvarint(b, c.Depth)
	}
	sw.b = b
	return sw.Frame(FrameOpen, b)
}

// Instant writes an instant frame.
func (sw *StreamWriter) Instant(in StreamInstant) error {
	b := append(appendU64(sw.b[:0], in.TID), in.Clock)
	b = appendU64(b, in.Time)
	b = binary.AppendUvarint(binary.AppendUvarint(b, uint64(in.Kind)), in.Precision)
	b = appendString(b, in.Name)
	sw.b = b
	return sw.Frame(FrameInstant, b)
}

// End writes the end frame (the last frame of a stream closed cleanly).
func (sw *StreamWriter) End(c StreamCounters) error {
	b := sw.b[:0]
	for _, v := range []uint64{c.Calls, c.Lost, c.Overflow, c.Waits, c.TicksWaited, c.Unwritten} {
		b = binary.AppendUvarint(b, v)
	}
	sw.b = b
	return sw.Frame(FrameEnd, b)
}
