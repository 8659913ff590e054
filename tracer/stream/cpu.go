// The cpu frame (kind 9): each recording thread's CPU time as the drain sampled it (the
// recorder's drain_cpu.c), decoded and written, and a thread's samples on the trace's timeline.

package stream

import (
	"encoding/binary"
	"math/bits"
)

// CPUEntry is one thread's counters in a cpu frame, as cumulative totals since the thread
// started. Known says which are there (CPURunning, CPURunnable, CPUSlices): Linux writes all
// three, Apple and a Linux thread read through its CPU clock the time run only.
type CPUEntry struct {
	TID      uint64
	Known    uint64
	Running  uint64 // ns on a CPU
	Runnable uint64 // ns runnable, waiting on a run queue
	Slices   uint64 // timeslices run
}

// StreamCPU is a cpu frame: the tick the counters were read at, and the threads whose counters
// changed since their previous entry (a thread absent had the counters of its previous entry).
type StreamCPU struct {
	Tick    uint64
	Entries []CPUEntry
}

// DecodeCPU decodes a cpu frame's payload; an error when it does not decode. A known bit this
// version does not name is one more uvarint counter, in bit order, skipped.
func DecodeCPU(payload []byte) (StreamCPU, error) {
	var c StreamCPU
	d := Decoder{Buf: payload}
	c.Tick = d.U64()
	for !d.Bad && len(d.Buf) > 0 {
		e := CPUEntry{TID: d.Uvarint(), Known: d.Uvarint()}
		for k := e.Known; k != 0 && !d.Bad; k &= k - 1 {
			v := d.Uvarint()
			switch uint64(1) << bits.TrailingZeros64(k) {
			case CPURunning:
				e.Running = v
			case CPURunnable:
				e.Runnable = v
			case CPUSlices:
				e.Slices = v
			}
		}
		c.Entries = append(c.Entries, e)
	}
	if d.Bad {
		return c, ErrMalformed
	}
	return c, nil
}

// CPU writes a cpu frame: the counters known of each entry, in bit order.
func (sw *StreamWriter) CPU(c StreamCPU) error {
	b := appendU64(sw.b[:0], c.Tick)
	for _, e := range c.Entries {
		b = binary.AppendUvarint(binary.AppendUvarint(b, e.TID), e.Known)
		for _, f := range [...]struct{ bit, v uint64 }{{CPURunning, e.Running}, {CPURunnable, e.Runnable}, {CPUSlices, e.Slices}} {
			if e.Known&f.bit != 0 {
				b = binary.AppendUvarint(b, f.v)
			}
		}
	}
	sw.b = b
	return sw.Frame(FrameCPU, b)
}

// CPUSample is a thread's counters at a moment of the trace's timeline: cumulative since the
// thread started, as the drain read them. Between two samples a counter is taken to grow
// evenly (the report interpolates); Known says which were read (CPURunning, CPURunnable,
// CPUSlices).
type CPUSample struct {
	Nanos         uint64 // since the trace's base tick
	RunningNanos  uint64
	RunnableNanos uint64
	Slices        uint64
	Known         uint64
}

// ThreadCPU is one thread's samples, in time order.
type ThreadCPU struct {
	TID     uint64
	Samples []CPUSample
}
