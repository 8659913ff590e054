package stream

import (
	"bufio"
	"encoding/binary"
	"io"
)

// Writer writes a raw dump: the header, names, then thread sections, then Close.
type Writer struct {
	w   *bufio.Writer
	err error
}

// NewWriter writes the header.
func NewWriter(w io.Writer, h Header) *Writer {
	wr := &Writer{w: bufio.NewWriterSize(w, 1<<16)}
	b := make([]byte, headerSize)
	copy(b, Magic)
	le := binary.LittleEndian
	le.PutUint32(b[8:], Version)
	le.PutUint32(b[12:], headerSize)
	le.PutUint64(b[16:], h.PID)
	le.PutUint64(b[24:], h.TickNum)
	le.PutUint64(b[32:], h.TickDen)
	le.PutUint64(b[40:], h.BaseTick)
	wr.write(b)
	return wr
}

func (wr *Writer) write(b []byte) {
	if wr.err == nil {
		_, wr.err = wr.w.Write(b)
	}
}

func (wr *Writer) section(kind uint32, length uint64) {
	var b [sectionHead]byte
	binary.LittleEndian.PutUint32(b[:], kind)
	binary.LittleEndian.PutUint64(b[8:], length)
	wr.write(b[:])
}

// NameEntry is one entry of a names section.
type NameEntry struct {
	Key  uint64
	Kind uint32 // NameClass, NameMetaclass, NameSelector
	Name string
}

// WriteNames writes a names section.
func (wr *Writer) WriteNames(ns []NameEntry) {
	var n uint64
	for _, e := range ns {
		n += 16 + uint64(len(e.Name))
	}
	wr.section(sectionNames, n)
	var b [16]byte
	for _, e := range ns {
		binary.LittleEndian.PutUint64(b[:], e.Key)
		binary.LittleEndian.PutUint32(b[8:], e.Kind)
		binary.LittleEndian.PutUint32(b[12:], uint32(len(e.Name)))
		wr.write(b[:])
		wr.write([]byte(e.Name))
	}
}

// WriteThread writes a thread section with its records, in the order the calls ended.
func (wr *Writer) WriteThread(t Thread, recs []Record) {
	wr.BeginThread(t, uint64(len(recs)))
	for _, r := range recs {
		wr.WriteRecord(r)
	}
}

// BeginThread starts a thread section that n WriteRecord calls will fill.
func (wr *Writer) BeginThread(t Thread, n uint64) {
	padded := (uint64(len(t.Name)) + 7) &^ 7
	wr.section(sectionThread, 32+padded+n*RecordSize)
	var h [32]byte
	le := binary.LittleEndian
	le.PutUint64(h[:], t.TID)
	le.PutUint64(h[8:], t.Dropped)
	le.PutUint64(h[16:], t.Overflow)
	if t.Main {
		le.PutUint32(h[24:], 1)
	}
	le.PutUint32(h[28:], uint32(len(t.Name)))
	wr.write(h[:])
	name := make([]byte, padded)
	copy(name, t.Name)
	wr.write(name)
}

// WriteRecord writes one record of the current thread section.
func (wr *Writer) WriteRecord(r Record) {
	var b [RecordSize]byte
	le := binary.LittleEndian
	le.PutUint64(b[:], r.Start)
	le.PutUint64(b[8:], r.End)
	le.PutUint64(b[16:], r.Class)
	le.PutUint64(b[24:], r.Sel)
	wr.write(b[:])
}

// Close writes the end section and flushes.
func (wr *Writer) Close() error {
	wr.section(sectionEnd, 0)
	if wr.err == nil {
		wr.err = wr.w.Flush()
	}
	return wr.err
}
