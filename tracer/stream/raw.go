package stream

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Raw dump format, version 1, little-endian:
//
//	header  magic "MSGTRACE", version u32, header size u32 (48), pid u64,
//	        tick numerator u64, tick denominator u64 (ns = ticks * num / den), base tick u64
//	section kind u32, reserved u32, payload length u64, payload
//	  names  (1): repeated {key u64, kind u32, length u32, UTF-8 name}
//	  thread (2): tid u64, dropped u64, overflow u64, flags u32 (1: main thread),
//	              name length u32, name, zero padding to 8, then 32-byte records
//	  end    (3): empty; last
//
// A record is {start tick u64, end tick u64, class u64, selector u64}; the class word carries
// the depth in bits 48-59 and flags in bits 60-63 (rt.h).
const (
	Magic       = "MSGTRACE"
	Version     = 1
	headerSize  = 48
	sectionHead = 16
	RecordSize  = 32

	sectionNames  = 1
	sectionThread = 2
	sectionEnd    = 3
)

// Name kinds in the names section: what a record's class word (without depth and flags) or
// selector word names.
const (
	NameClass     = 0 // instance method of this class: -[Class sel]
	NameMetaclass = 1 // class method: +[Class sel]
	NameSelector  = 2
)

// The class word's layout (rt.h: CLS_BITS, DEPTH_SHIFT, DEPTH_BITS, FLAG_SHIFT): the class
// key in the low ClassBits bits, the depth in the DepthBits above them, the flags on top.
const (
	ClassBits  = 48
	DepthShift = 48
	DepthBits  = 12
	FlagShift  = 60

	DepthMask = 1<<DepthBits - 1 // the depth field, shifted down
)

// Record flags (top 4 bits of the class word).
const (
	FlagSuper   = 1
	FlagTagged  = 2
	FlagUnwound = 4
)

// Record is one finished call as the interposer wrote it.
type Record struct {
	Start, End uint64 // ticks
	Class, Sel uint64 // Class includes depth (bits 48-59) and flags (60-63)
}

// Depth of the call on its thread's shadow stack (0 = outermost traced call).
func (r Record) Depth() int { return int(r.Class >> DepthShift & DepthMask) }

// Flags of the record.
func (r Record) Flags() int { return int(r.Class >> FlagShift) }

// ClassKey is the class word without depth and flags: the key into the names section.
func (r Record) ClassKey() uint64 { return r.Class & (1<<ClassBits - 1) }

// Header is the raw dump's file header.
type Header struct {
	PID              uint64
	TickNum, TickDen uint64
	BaseTick         uint64
	Program          string // the program's name (streams; "" for raw dumps)
	// Instants are the process's launch marks and the marks it set (streams), in time order.
	// An instant of a thread the trace does not show is process-wide (TID 0); one of a
	// thread left out by Options.Threads is left out.
	Instants []Instant
	// CPU is the process's threads' CPU time as the drain sampled it (streams written with
	// MSGTRACE_CPU on), by thread id; a thread left out by Options.Threads is left out.
	CPU map[uint64]*ThreadCPU
	// Hops are the process's async hops (streams; nil when it has none), read from their marks.
	Hops *Hops
}

// Nanos converts a tick count relative to the base tick into nanoseconds.
func (h *Header) Nanos(tick uint64) float64 {
	if tick < h.BaseTick {
		return 0
	}
	return float64(tick-h.BaseTick) * float64(h.TickNum) / float64(h.TickDen)
}

// Thread is a thread section's header.
type Thread struct {
	TID, Dropped, Overflow uint64
	Main                   bool
	Name                   string
	Records                uint64
	PID                    uint64 // the thread's process
}

// Names maps class and selector words to names.
type Names struct {
	classes map[uint64]name
	sels    map[uint64]string
}

type name struct {
	s    string
	meta bool
}

// Name returns "-[Class selector]" or "+[Class selector]" for a record.
func (n *Names) Name(r Record) string {
	c, ok := n.classes[r.ClassKey()]
	cls := c.s
	if !ok {
		cls = fmt.Sprintf("0x%x", r.ClassKey())
	}
	sel, ok := n.sels[r.Sel]
	if !ok {
		sel = fmt.Sprintf("0x%x", r.Sel)
	}
	sign := "-"
	if c.meta {
		sign = "+"
	}
	return sign + "[" + cls + " " + sel + "]"
}

// AddClass records the name of a class word; meta marks a metaclass (class methods).
func (n *Names) AddClass(key uint64, className string, meta bool) {
	if n.classes == nil {
		n.classes = map[uint64]name{}
	}
	n.classes[key] = name{className, meta}
}

// AddSelector records the name of a selector word.
func (n *Names) AddSelector(key uint64, sel string) {
	if n.sels == nil {
		n.sels = map[uint64]string{}
	}
	n.sels[key] = sel
}

// RawError is a malformed raw dump: the byte offset where reading failed and why.
type RawError struct {
	Offset int64
	Err    error
}

func (e *RawError) Error() string {
	return fmt.Sprintf("raw trace: byte offset %d: %v", e.Offset, e.Err)
}
func (e *RawError) Unwrap() error { return e.Err }

// Reader reads a raw dump as a stream.
type Reader struct {
	r      *bufio.Reader
	off    int64
	Header Header
	Names  Names
	// current thread section
	left uint64 // records left in the current thread
	done bool
}

// MaxNameLen is the longest name (a class, a selector, a thread) a raw dump may hold: the
// reader refuses a longer one as damage (a fact of the format, like MaxFramePayload).
const MaxNameLen = 1 << 16

// NewReader reads the header and the names section.
func NewReader(r io.Reader) (*Reader, error) {
	rd := &Reader{r: bufio.NewReaderSize(r, 1<<16)}
	var h [headerSize]byte
	if err := rd.full(h[:]); err != nil {
		return nil, err
	}
	le := binary.LittleEndian
	if string(h[:8]) != Magic {
		return nil, &RawError{0, errors.New("not a msgtrace raw dump (bad magic)")}
	}
	if v := le.Uint32(h[8:]); v != Version {
		return nil, &RawError{8, fmt.Errorf("unsupported version %d (this reader knows %d)", v, Version)}
	}
	if s := le.Uint32(h[12:]); s != headerSize {
		return nil, &RawError{12, fmt.Errorf("header size %d, want %d", s, headerSize)}
	}
	rd.Header = Header{PID: le.Uint64(h[16:]), TickNum: le.Uint64(h[24:]), TickDen: le.Uint64(h[32:]), BaseTick: le.Uint64(h[40:])}
	if rd.Header.TickNum == 0 || rd.Header.TickDen == 0 {
		return nil, &RawError{24, errors.New("zero tick ratio")}
	}
	return rd, nil
}

func (rd *Reader) full(b []byte) error {
	n, err := io.ReadFull(rd.r, b)
	rd.off += int64(n)
	if err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			err = errors.New("truncated")
		}
		return &RawError{rd.off, err}
	}
	return nil
}

func (rd *Reader) u64(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }

// NextThread skips the rest of the current thread and returns the next thread section, or
// io.EOF after the end section. Names sections met on the way are loaded.
func (rd *Reader) NextThread() (*Thread, error) {
	if rd.done {
		return nil, io.EOF
	}
	for rd.left > 0 {
		if _, err := rd.NextRecord(); err != nil {
			return nil, err
		}
	}
	for {
		start := rd.off
		var sh [sectionHead]byte
		if err := rd.full(sh[:]); err != nil {
			return nil, err
		}
		kind, length := binary.LittleEndian.Uint32(sh[:]), rd.u64(sh[8:])
		switch kind {
		case sectionEnd:
			if length != 0 {
				return nil, &RawError{start + 8, errors.New("end section with a payload")}
			}
			rd.done = true
			return nil, io.EOF
		case sectionNames:
			if err := rd.readNames(length); err != nil {
				return nil, err
			}
		case sectionThread:
			return rd.readThread(start, length)
		default:
			return nil, &RawError{start, fmt.Errorf("unknown section kind %d", kind)}
		}
	}
}

func (rd *Reader) readNames(length uint64) error {
	end := rd.off + int64(length)
	if length > 1<<34 {
		return &RawError{rd.off - 8, fmt.Errorf("names section of %d bytes", length)}
	}
	var e [16]byte
	for rd.off < end {
		at := rd.off
		if err := rd.full(e[:]); err != nil {
			return err
		}
		key, kind, n := rd.u64(e[:]), binary.LittleEndian.Uint32(e[8:]), binary.LittleEndian.Uint32(e[12:])
		if n > MaxNameLen || rd.off+int64(n) > end {
			return &RawError{at + 12, fmt.Errorf("name of %d bytes overruns its section", n)}
		}
		b := make([]byte, n)
		if err := rd.full(b); err != nil {
			return err
		}
		switch kind {
		case NameClass, NameMetaclass:
			rd.Names.AddClass(key, string(b), kind == NameMetaclass)
		case NameSelector:
			rd.Names.AddSelector(key, string(b))
		default:
			return &RawError{at + 8, fmt.Errorf("unknown name kind %d", kind)}
		}
	}
	if rd.off != end {
		return &RawError{rd.off, errors.New("names section length does not match its entries")}
	}
	return nil
}

func (rd *Reader) readThread(start int64, length uint64) (*Thread, error) {
	var h [32]byte
	if length < 32 {
		return nil, &RawError{start + 8, fmt.Errorf("thread section of %d bytes", length)}
	}
	if err := rd.full(h[:]); err != nil {
		return nil, err
	}
	t := &Thread{TID: rd.u64(h[:]), Dropped: rd.u64(h[8:]), Overflow: rd.u64(h[16:]), Main: binary.LittleEndian.Uint32(h[24:])&1 != 0}
	n := uint64(binary.LittleEndian.Uint32(h[28:]))
	padded := (n + 7) &^ 7
	if n > MaxNameLen || 32+padded > length || (length-32-padded)%RecordSize != 0 {
		return nil, &RawError{start + 8, fmt.Errorf("thread section of %d bytes does not hold a %d-byte name and whole records", length, n)}
	}
	b := make([]byte, padded)
	if err := rd.full(b); err != nil {
		return nil, err
	}
	t.Name = string(b[:n])
	t.Records = (length - 32 - padded) / RecordSize
	rd.left = t.Records
	return t, nil
}

// NextRecord returns the current thread's next record, or io.EOF at the thread's end.
func (rd *Reader) NextRecord() (Record, error) {
	if rd.left == 0 {
		return Record{}, io.EOF
	}
	var b [RecordSize]byte
	if err := rd.full(b[:]); err != nil {
		return Record{}, err
	}
	rd.left--
	r := Record{Start: rd.u64(b[:]), End: rd.u64(b[8:]), Class: rd.u64(b[16:]), Sel: rd.u64(b[24:])}
	if r.End < r.Start {
		return r, &RawError{rd.off - RecordSize, fmt.Errorf("record ends (%d) before it starts (%d)", r.End, r.Start)}
	}
	return r, nil
}

// Offset is how many bytes have been read.
func (rd *Reader) Offset() int64 { return rd.off }
