// Pass 1 frame by frame (ProcessStreams: stream_read.go): each valid frame of a stream taken
// into its index (process, clock, methods, thread, events frames handed to the analysers of
// pass1.go, open, instant, cpu and end frames), threads registered as they are met.

package engine

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/msgtrace/msgtrace/tracer/stream"
)

// indexStream is pass 1.
// Unless mode is p1Shapes or p1Spans (the aggregates' path), no pending stacks are run and no spans
// found: finishThreads is left to the caller, for the threads that need it.
func indexStream(in Input, mode pass1Mode) (*streamFile, error) {
	sf := &streamFile{
		w:            window{r: in.R, size: in.Size, ahead: 1 << 20},
		methods:      map[uint64]streamMethod{},
		byTID:        map[uint64]*streamThread{},
		met:          map[uint64]*streamThread{},
		resyncBudget: 8*in.Size + 64<<20,
	}
	sf.startAnalysers(in.Size, mode)
	defer sf.stopAnalysers() // on an error: the analysers' goroutines end
	sf.hdr.TickNum, sf.hdr.TickDen = 1, 1
	head, err := sf.w.at(0, int(min(in.Size, int64(len(stream.StreamMagic)))))
	if err != nil {
		return nil, err
	}
	if !bytes.HasPrefix([]byte(stream.StreamMagic), head) {
		return nil, errors.New("not a msgtrace stream (bad magic)")
	}
	for {
		kind, off, p, err := sf.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if err := sf.frame(kind, off, p); err != nil {
			if errors.Is(err, stream.ErrMalformed) {
				sf.badFrames++
				sf.badBytes += uint64(stream.FrameHeader + len(p))
				continue
			}
			return nil, err
		}
	}
	sf.stopAnalysers()
	sf.mergeAnalysers()
	if sf.haveTicks {
		sf.maxTick = max(sf.maxTick, sf.clockMax)
	}
	var maxID uint64
	for id := range sf.methods {
		maxID = max(maxID, id)
	}
	if maxID < uint64(4*len(sf.methods)+1024) { // ids are small and dense: a slice, not a map
		sf.dense = make([]streamMethod, maxID+1)
		for id, m := range sf.methods {
			sf.dense[id] = m
		}
	}
	if mode == p1Shapes || mode == p1Spans {
		if err := sf.finishThreads(); err != nil {
			return nil, err
		}
	}
	sf.w.ahead = 64 << 10 // pass 2 jumps from thread to thread
	sf.w.buf = nil        // several streams: one buffer at a time
	return sf, nil
}

// met returns a thread's index entry, made when first met (not yet a thread of the stream:
// see thread).
func (sf *streamFile) meet(tid uint64) *streamThread {
	st := sf.met[tid]
	if st == nil {
		st = &streamThread{t: stream.Thread{TID: tid, PID: sf.hdr.PID}, openOff: -1, reg: -1, evReg: -1}
		st.worker = len(sf.metOrder) % len(sf.an)
		sf.met[tid] = st
		sf.metOrder = append(sf.metOrder, st)
	}
	return st
}

// thread returns a thread's index entry, a thread of the stream from the frame at off on.
func (sf *streamFile) thread(tid uint64, off int64) *streamThread {
	st := sf.meet(tid)
	if st.reg < 0 {
		st.reg = off
	}
	return st
}

func (sf *streamFile) tick(start, end uint64) {
	if !sf.haveTicks {
		sf.minTick, sf.maxTick, sf.haveTicks = start, end, true
		return
	}
	sf.minTick = min(sf.minTick, start)
	sf.maxTick = max(sf.maxTick, end)
}

// frame takes one frame in pass 1; errMalformed when its payload does not decode.
func (sf *streamFile) frame(kind uint8, off int64, p []byte) error {
	d := stream.Decoder{Buf: p}
	switch kind {
	case stream.FrameProcess:
		v := d.U32()
		d.U32()
		pid, _ := d.U64(), d.U64()
		d.Str()
		name := d.Str()
		d.Str()
		d.Str()
		d.Uvarint()
		if d.Bad {
			return stream.ErrMalformed
		}
		if !sf.seen {
			if v != stream.StreamVersion {
				return fmt.Errorf("stream version %d (this reader knows %d)", v, stream.StreamVersion)
			}
			sf.seen = true
			sf.hdr.PID, sf.hdr.Program = pid, name
			for _, st := range sf.metOrder {
				st.t.PID = pid
			}
		}
	case stream.FrameClock:
		tick, mono := d.U64(), d.U64()
		d.U64()
		num, den := d.U64(), d.U64()
		if d.Bad {
			return stream.ErrMalformed
		}
		sf.clock.add(tick, mono, num, den)
		if sf.clock.num != 0 {
			sf.hdr.TickNum, sf.hdr.TickDen = sf.clock.num, sf.clock.den
		}
		sf.clockMax = max(sf.clockMax, tick)
	case stream.FrameMethods:
		type entry struct {
			id uint64
			m  streamMethod
		}
		var es []entry
		for len(d.Buf) > 0 && !d.Bad {
			id, fl := d.Uvarint(), d.Uvarint()
			cls, sel := d.Str(), d.Str()
			if id == 0 {
				return stream.ErrMalformed
			}
			sign, flags := "-", 0
			if fl&stream.MethodClass != 0 {
				sign = "+"
			}
			if fl&stream.MethodSuper != 0 {
				flags |= stream.FlagSuper
			}
			if fl&stream.MethodTagged != 0 {
				flags |= stream.FlagTagged
			}
			es = append(es, entry{id, streamMethod{name: sign + "[" + cls + " " + sel + "]", flags: flags}})
		}
		if d.Bad {
			return stream.ErrMalformed
		}
		for _, e := range es {
			if _, ok := sf.methods[e.id]; !ok {
				sf.methods[e.id] = e.m
			}
		}
	case stream.FrameThread:
		tid, fl := d.U64(), d.Uvarint()
		name := d.Str()
		if d.Bad {
			return stream.ErrMalformed
		}
		st := sf.thread(tid, off)
		st.t.Name, st.t.Main = name, fl&stream.ThreadMain != 0
	case stream.FrameEvents:
		tid, prev := d.U64(), d.U64()
		if d.Bad {
			return stream.ErrMalformed
		}
		return sf.an[sf.meet(tid).worker].events(sf.met[tid], off, prev, d.Buf)
	case stream.FrameOpen:
		tid, tick := d.U64(), d.U64()
		if d.Bad {
			return stream.ErrMalformed
		}
		lo := tick
		last := int64(-1)
		for len(d.Buf) > 0 {
			d.Uvarint()
			age, depth := d.Uvarint(), d.Uvarint()
			if d.Bad || age > tick || depth > stream.MaxStreamDepth || int64(depth) <= last {
				return stream.ErrMalformed
			}
			last = int64(depth)
			lo = min(lo, tick-age)
		}
		st := sf.thread(tid, off)
		if st.openOff < 0 || tick >= st.openTick {
			st.openOff, st.openTick = off, tick
		}
		sf.tick(lo, tick)
	case stream.FrameInstant:
		in, err := stream.DecodeInstant(p)
		if err != nil {
			return err
		}
		sf.instants = append(sf.instants, in)
	case stream.FrameCPU:
		c, err := stream.DecodeCPU(p)
		if err != nil {
			return err
		}
		sf.cpu = append(sf.cpu, c)
	case stream.FrameEnd:
		var c [6]uint64
		for i := range c {
			if len(d.Buf) == 0 {
				break
			}
			c[i] = d.Uvarint()
		}
		if d.Bad {
			return stream.ErrMalformed
		}
		sf.ended = true
		sf.counters = stream.StreamCounters{Calls: c[0], Lost: c[1], Overflow: c[2], Waits: c[3], TicksWaited: c[4], Unwritten: c[5]}
	}
	// unknown kinds: a later version's frames, skipped
	return nil
}
