package engine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"math/bits"
	"slices"
	"sort"
	"strconv"

	"github.com/msgtrace/msgtrace/tracer/stream"
)

// Input is one stream for ProcessStreams: random access to its bytes and how many there are.
type Input struct {
	R    io.ReaderAt
	Size int64
	Name string // for messages; may be empty
}

// ProcessStreams reads one or more streams and feeds every kept call and every mark to the
// sink, process by process (ordered by their first event) and thread by thread, each thread's
// events in post-order. Times of every process are on one timeline: CLOCK_MONOTONIC from the
// clock frames, in ns since the earliest event of all the streams.
//
// Each stream is read twice. Pass 1 checks every frame (resyncing past bad ones), keeps the
// process, clock, methods and thread frames, and indexes each thread's events frames by
// offset (8 bytes a frame) and its latest open frame; pass 2 reads each thread's frames in
// order. Memory is the index, the names and the clock points, the largest frame (≤ 16 MiB),
// and, for the thread being read, its latest open frame's calls (at most one per depth): none
// of it grows with the number of calls.
func ProcessStreams(ins []Input, opt Options, sink Sink) (t Totals, err error) {
	defer abortOnError(sink, &err)
	p := planFor(sink, opt)
	if len(p.drive) == 0 { // aggregates only
		tot, err := processAggregate(ins, opt, p.tries[0])
		if err != nil {
			return tot, err
		}
		p.share()
		return tot, sink.Close(tot)
	}
	drive := p.driven()
	mode := p1Spans
	if hasBudget(drive) {
		mode = p1Shapes
	}
	files, tot, err := indexStreams(ins, opt, mode)
	if err != nil {
		return tot, err
	}
	if p.fast { // the aggregates beside the others: their trie from the same pass 1
		var aggTot Totals // (pass 2 counts the same)
		if _, err := aggregateFiles(files, opt, p.tries[0], false, true, &aggTot); err != nil {
			return tot, err
		}
	}
	var durs durHist
	var calls, open uint64
	for _, sf := range files {
		sf.addDurations(&durs)
		for _, st := range sf.threads {
			calls += st.t.Records
			for k := range st.spans {
				if st.spans[k].flags&stream.FlagOpen != 0 {
					open++
				}
			}
		}
	}
	a := &applier{sink: drive, flt: newTreeFilter(opt)}
	a.ts, a.foldKeys = asTreeWith(drive, &durs, open)
	a.skip = skipperOf(a.ts)
	em := newEmitter(a, calls)
	err = replayStreams(files, opt, em, &tot)
	if serr := em.stop(); err == nil { // the applier's goroutine ends, on an error too
		err = serr
	}
	tot.Calls, tot.Open, tot.Kept = a.calls, a.open, a.kept
	if err != nil {
		return tot, err
	}
	p.share()
	return tot, sink.Close(tot)
}

// indexStreams is pass 1 of every stream (mode: see pass1Mode), their times put on one
// timeline, and the streams ordered by their first event (p1Lazy: left to the caller, see
// settleStreams).
func indexStreams(ins []Input, opt Options, mode pass1Mode) ([]*streamFile, Totals, error) {
	var tot Totals
	files := make([]*streamFile, 0, len(ins))
	names := newNames()
	for i, in := range ins {
		sf, err := indexStream(in, mode)
		if err != nil {
			name := in.Name
			if name == "" {
				name = "stream " + strconv.Itoa(i+1)
			}
			return nil, tot, fmt.Errorf("%s: %w", name, err)
		}
		sf.nameMethods(names)
		files = append(files, sf)
		tot.BadFrames += sf.badFrames
		tot.BadBytes += sf.badBytes
		tot.TornBytes += sf.tornBytes
		tot.Unwritten += sf.counters.Unwritten
		if !sf.ended {
			tot.Unended++
		}
	}
	if mode == p1Lazy {
		return files, tot, nil
	}
	return settleStreams(files, opt), tot, nil
}

// settleStreams puts the streams' times on one timeline (ns since the earliest event or
// instant of all) and orders them by their first event.
func settleStreams(files []*streamFile, opt Options) []*streamFile {
	base := uint64(math.MaxUint64)
	for _, sf := range files {
		if sf.haveTicks {
			sf.first = sf.clock.mono(sf.minTick)
			base = min(base, sf.first)
		}
		for _, in := range sf.instants { // the process's start comes before its first call
			base = min(base, sf.instantMono(in))
		}
	}
	for _, sf := range files {
		sf.base = base
		sf.hdr.Instants = sf.resolveInstants(opt)
		sf.hdr.CPU = sf.resolveCPU(opt)
	}
	sort.SliceStable(files, func(i, j int) bool { return files[i].first < files[j].first })
	return files
}

// replayStreams is pass 2: each selected thread's events, in pre-order, to the emitter.
func replayStreams(files []*streamFile, opt Options, em *emitter, tot *Totals) error {
	r := &replayer{em: em, tot: tot}
	for _, sf := range files {
		tot.Processes++
		if sf.hdr.Hops == nil {
			h, err := sf.resolveHops()
			if err != nil {
				return err
			}
			sf.hdr.Hops = h
		}
		for _, st := range sf.threads {
			t := &st.t
			if !threadSelected(opt.Threads, t) {
				continue
			}
			tot.Threads++
			tot.Dropped += t.Dropped
			tot.Overflow += t.Overflow
			if err := em.begin(sf, &sf.hdr, t); err != nil {
				return err
			}
			if err := sf.replayThread(r, st); err != nil {
				return err
			}
			if err := em.op(rawOp{kind: opEnd}); err != nil {
				return err
			}
		}
		sf.w.buf = nil
	}
	return nil
}

// window reads a file through one buffer: a frame is served from it when it is inside, and
// otherwise the buffer is refilled from the frame's offset (with read-ahead).
type window struct {
	r     io.ReaderAt
	size  int64
	ahead int
	back  bool // reading backwards: a refill ends where the bytes asked for end
	buf   []byte
	start int64
}

// at returns n bytes at off, valid until the next call.
func (w *window) at(off int64, n int) ([]byte, error) {
	if off < 0 || n < 0 || off > w.size-int64(n) {
		return nil, io.ErrUnexpectedEOF
	}
	if off >= w.start && off+int64(n) <= w.start+int64(len(w.buf)) {
		return w.buf[off-w.start:][:n], nil
	}
	m := max(n, w.ahead)
	from := off
	if w.back {
		from = max(0, off+int64(n)-int64(m))
	}
	if int64(m) > w.size-from {
		m = int(w.size - from)
	}
	if cap(w.buf) < m {
		w.buf = make([]byte, m)
	}
	w.buf = w.buf[:m]
	k, err := w.r.ReadAt(w.buf, from)
	if k < m {
		w.buf = w.buf[:0]
		if err == nil || err == io.EOF {
			err = errors.New("file shrank while being read")
		}
		return nil, err
	}
	w.start = from
	return w.buf[off-from:][:n], nil
}

// streamMethod is a method's name, call flags and number in the conversion's Names.
type streamMethod struct {
	name  string
	flags int
	m     Method
}

// streamThread is a thread's pass-1 index.
type streamThread struct {
	t         stream.Thread
	frames    []frameRef // its events frames, in the order its calls ended
	unordered bool       // a frame came out of order in the file: frames sorted and analysed again
	events    bool       // an event was met
	lastEnd   uint64     // end tick of the last event met
	openOff   int64      // its latest open frame, or -1
	openTick  uint64
	sh        shape      // pass-1 pending stack
	segs      segCounter // its events' segments
	spans     []spanCall // calls entered in an earlier segment than their record's
	reg       int64      // offset of the frame that made it a thread of the stream (-1: none yet)
	evReg     int64      // its first valid events frame with events (-1: none; the analyser's)
	worker    int        // the analyser of its events frames
	marks     uint64     // mark events in its valid frames
	hopMarks  uint64     // of them, async hops' (hops.go)
	suspect   bool       // p1Lazy: a frame whose events could not be counted
	lazy      lazyLearnt // p1Lazy: what pass 1 did not learn of its events, from pass 2
}

// lazyLearnt is what p1Lazy's pass 2 learns of a thread's events that pass 1 otherwise does.
type lazyLearnt struct {
	events            bool
	lo, hi            uint64 // tick span
	dropped, overflow uint64 // calls lost and past the shadow stack, by its marks
}

// frameRef is an events frame of a thread: where it is, and what pass 1 learnt of it.
type frameRef struct {
	off         int64
	first, last uint64 // end ticks of its first and last event
	minDepth    uint32 // of its calls (maxStreamDepth+1 when none)
	n           uint32 // events
}

// streamFile is one stream after pass 1.
type streamFile struct {
	w    window
	off  int64 // scan position
	hdr  stream.Header
	seen bool // process frame read

	clock            clockMap
	methods          map[uint64]streamMethod
	names            *Names         // the conversion's, numbering methods
	dense            []streamMethod // methods by id, when ids are dense
	threads          []*streamThread
	byTID            map[uint64]*streamThread
	haveTicks        bool
	minTick, maxTick uint64
	first, base      uint64 // monotonic ns of the first event; of the trace's origin
	ended            bool
	counters         stream.StreamCounters
	badFrames        uint64
	badBytes         uint64
	tornBytes        uint64
	resyncBudget     int64
	clockMax         uint64
	endEst           uint64                   // p1Lazy: maxTick as estimated for pass 2 (see estimateEnd)
	instants         []stream.StreamInstant   // as written (instant frames)
	cpu              []stream.StreamCPU       // as written (cpu frames)
	durs             durHist                  // its calls by duration, in ticks (timeline budgets)
	durKeys          *[64 * 16]uint64         // per tick bucket, its durKey
	met              map[uint64]*streamThread // every thread met, registered or not yet
	metOrder         []*streamThread
	an               []*analyser // pass 1's events analysers (one inline, or one goroutine per core)
}

type openEntry struct {
	id, start, depth uint64
}

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

// check says whether a whole, valid frame starts at off, or the start of one that runs past
// the end of the file (torn).
func (sf *streamFile) check(off int64, resync bool) (length int, ok, torn bool, err error) {
	rem := sf.w.size - off
	if rem < stream.FrameHeader {
		b, err := sf.w.at(off, int(rem))
		if err != nil {
			return 0, false, false, err
		}
		return 0, false, bytes.HasPrefix(b, []byte(stream.StreamMagic)) || bytes.HasPrefix([]byte(stream.StreamMagic), b), nil
	}
	h, err := sf.w.at(off, stream.FrameHeader)
	if err != nil {
		return 0, false, false, err
	}
	if string(h[:4]) != stream.StreamMagic {
		return 0, false, false, nil
	}
	n := binary.LittleEndian.Uint32(h[stream.FrameLenAt:])
	if n > stream.MaxFramePayload {
		return 0, false, false, nil
	}
	if int64(n) > rem-stream.FrameHeader {
		return int(n), false, true, nil
	}
	if resync {
		if sf.resyncBudget < 0 {
			return 0, false, false, nil
		}
		sf.resyncBudget -= int64(n)
	}
	b, err := sf.w.at(off, stream.FrameHeader+int(n))
	if err != nil {
		return 0, false, false, err
	}
	tab := stream.Castagnoli()
	crc := crc32.Update(crc32.Update(0, tab, b[stream.FrameKindAt:stream.FrameCRCAt]), tab, b[stream.FrameHeader:])
	return int(n), crc == binary.LittleEndian.Uint32(b[stream.FrameCRCAt:]), false, nil
}

// resync finds the next valid frame from off (-1: none), and the first torn frame met on the
// way (-1: none).
func (sf *streamFile) resync(off int64) (valid, torn int64, err error) {
	torn = -1
	size := sf.w.size
	for p := off; p < size && sf.resyncBudget >= 0; {
		n := int(min(1<<20, size-p))
		b, err := sf.w.at(p, n)
		if err != nil {
			return -1, torn, err
		}
		i := bytes.Index(b, []byte(stream.StreamMagic))
		if i < 0 {
			if p+int64(n) >= size {
				// a magic cut short at the very end
				for k := min(3, n); k > 0; k-- {
					if bytes.Equal(b[n-k:], []byte(stream.StreamMagic[:k])) && torn < 0 {
						torn = size - int64(k)
						break
					}
				}
				break
			}
			p += int64(n - 3)
			sf.resyncBudget -= int64(n)
			continue
		}
		q := p + int64(i)
		_, ok, isTorn, err := sf.check(q, true)
		if err != nil {
			return -1, torn, err
		}
		if ok {
			return q, torn, nil
		}
		if isTorn && torn < 0 {
			torn = q
		}
		p = q + 1
	}
	return -1, torn, nil
}

// next returns the next valid frame, counting bad and torn bytes on the way, or io.EOF.
func (sf *streamFile) next() (kind uint8, off int64, payload []byte, err error) {
	size := sf.w.size
	for sf.off < size {
		n, ok, torn, err := sf.check(sf.off, false)
		if err != nil {
			return 0, 0, nil, err
		}
		if ok {
			off := sf.off
			b, err := sf.w.at(off, stream.FrameHeader+n)
			if err != nil {
				return 0, 0, nil, err
			}
			sf.off += int64(stream.FrameHeader + n)
			return b[stream.FrameKindAt], off, b[stream.FrameHeader:], nil
		}
		valid, tornAt, err := sf.resync(sf.off + 1)
		if err != nil {
			return 0, 0, nil, err
		}
		switch {
		case valid >= 0:
			sf.badFrames++
			sf.badBytes += uint64(valid - sf.off)
			sf.off = valid
		case torn:
			sf.tornBytes += uint64(size - sf.off)
			sf.off = size
		default:
			end := size
			if tornAt >= 0 {
				end = tornAt
				sf.tornBytes += uint64(size - tornAt)
			}
			sf.badFrames++
			sf.badBytes += uint64(end - sf.off)
			sf.off = size
		}
	}
	return 0, 0, nil, io.EOF
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

// ns converts a tick to ns on the trace's timeline.
func (sf *streamFile) ns(tick uint64) uint64 {
	m := sf.clock.mono(tick)
	if m < sf.base {
		return 0
	}
	return m - sf.base
}

// method names a method id: its name, call flags and Method.
func (sf *streamFile) method(id uint64) (string, int, Method) {
	if id < uint64(len(sf.dense)) {
		if m := &sf.dense[id]; m.name != "" {
			return m.name, m.flags, m.m
		}
	}
	return sf.methodSlow(id)
}

// methodSlow is method for ids not in the dense table.
func (sf *streamFile) methodSlow(id uint64) (string, int, Method) {
	if m, ok := sf.methods[id]; ok {
		return m.name, m.flags, m.m
	}
	if _, _, _, ok := stream.WaitOf(id); ok { // a wait event's id (stream.WaitID)
		name := stream.WaitName(id)
		return name, stream.FlagWait, sf.names.intern(name)
	}
	name := "?[method " + strconv.FormatUint(id, 10) + "]"
	return name, 0, sf.names.intern(name)
}

// nameMethods numbers the stream's methods in names, in the order of their ids.
func (sf *streamFile) nameMethods(names *Names) {
	sf.names = names
	ids := make([]uint64, 0, len(sf.methods))
	for id := range sf.methods {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		m := sf.methods[id]
		m.m = names.intern(m.name)
		sf.methods[id] = m
		if id < uint64(len(sf.dense)) {
			sf.dense[id] = m
		}
	}
}

// frameAt reads the payload of a frame pass 1 indexed.
func (sf *streamFile) frameAt(off int64) ([]byte, error) { return frameAtWith(&sf.w, off) }

// frameAtWith is frameAt reading through w.
func frameAtWith(w *window, off int64) ([]byte, error) {
	h, err := w.at(off, stream.FrameHeader)
	if err != nil {
		return nil, err
	}
	n := binary.LittleEndian.Uint32(h[stream.FrameLenAt:])
	if n > stream.MaxFramePayload {
		return nil, errors.New("stream changed while being read")
	}
	b, err := w.at(off+stream.FrameHeader, int(n))
	return b, err
}

// clockMap converts a process's ticks to monotonic ns, piecewise-linearly between its clock
// frames and with the nearest pair's slope outside them; with one clock frame, with its rate;
// with none, ticks are taken as ns.
type clockMap struct {
	pts      []clockPoint
	num, den uint64
	i        int // segment of the last conversion

	// the line of the last conversion, for ticks in [fLo, fHi): ns = fMono + (t-fLo)*fMul/fDiv,
	// divided through fInv = (2^64-1)/fDiv (a multiplication and at most two corrections)
	fLo, fHi, fMono, fMul, fDiv, fInv uint64
}

type clockPoint struct{ tick, mono uint64 }

// add takes a clock frame; one that goes back in time is ignored.
func (c *clockMap) add(tick, mono, num, den uint64) {
	c.fHi = 0
	if num != 0 && den != 0 {
		c.num, c.den = num, den
	}
	if n := len(c.pts); n > 0 && (tick <= c.pts[n-1].tick || mono < c.pts[n-1].mono) {
		return
	}
	c.pts = append(c.pts, clockPoint{tick, mono})
}

// scale is x*m/d, saturated.
func scale(x, m, d uint64) uint64 {
	hi, lo := bits.Mul64(x, m)
	if hi >= d {
		return math.MaxUint64
	}
	q, _ := bits.Div64(hi, lo, d)
	return q
}

// monoFast is mono for a tick on the line of the last conversion (false: another, see slow).
func (c *clockMap) monoFast(t uint64) (uint64, bool) {
	if t < c.fLo || t >= c.fHi {
		return 0, false
	}
	n := (t - c.fLo) * c.fMul
	q, _ := bits.Mul64(n, c.fInv)
	for n-q*c.fDiv >= c.fDiv {
		q++
	}
	return c.fMono + q, true
}

func (c *clockMap) mono(t uint64) uint64 {
	if t >= c.fLo && t < c.fHi {
		n := (t - c.fLo) * c.fMul
		q, _ := bits.Mul64(n, c.fInv)
		for n-q*c.fDiv >= c.fDiv {
			q++
		}
		return c.fMono + q
	}
	return c.slow(t)
}

func (c *clockMap) slow(t uint64) uint64 {
	n := len(c.pts)
	if n == 0 {
		return t
	}
	a := c.pts[0]
	dm, dt := uint64(1), uint64(1)
	if n == 1 {
		if c.num != 0 && c.den != 0 {
			dm, dt = c.num, c.den
		}
	} else {
		i := c.i
		if t < c.pts[i].tick || (i < n-2 && t >= c.pts[i+1].tick) {
			i = sort.Search(n, func(k int) bool { return c.pts[k].tick > t }) - 1
			i = max(0, min(i, n-2))
			c.i = i
		}
		a = c.pts[i]
		dm, dt = c.pts[i+1].mono-a.mono, c.pts[i+1].tick-a.tick
	}
	if t >= a.tick && dt > 0 {
		c.fLo, c.fMono, c.fMul, c.fDiv, c.fInv = a.tick, a.mono, dm, dt, math.MaxUint64/dt
		c.fHi = math.MaxUint64
		if n > 2 && c.i < n-2 {
			c.fHi = c.pts[c.i+1].tick
		}
		if dm > 0 {
			c.fHi = min(c.fHi, a.tick+min(math.MaxUint64/dm, math.MaxUint64-a.tick))
		}
		if a.mono > math.MaxUint64/2 {
			c.fHi = 0 // saturation is the slow path's
		}
	}
	if t >= a.tick {
		v := scale(t-a.tick, dm, dt)
		if v > math.MaxUint64-a.mono {
			return math.MaxUint64
		}
		return a.mono + v
	}
	v := scale(a.tick-t, dm, dt)
	if v > a.mono {
		return 0
	}
	return a.mono - v
}

// FrameStats are what ScanFrames skipped.
type FrameStats struct {
	BadFrames, BadBytes, TornBytes uint64
}

// ScanFrames calls fn with every frame of a stream that checks, in file order (payload valid
// during the call only), resyncing past bad frames and stopping at a torn tail as the reader
// does. It is the low-level view for checking a writer's output frame by frame.
func ScanFrames(in Input, fn func(kind uint8, off int64, payload []byte) error) (FrameStats, error) {
	sf := &streamFile{w: window{r: in.R, size: in.Size, ahead: 1 << 20}, resyncBudget: 8*in.Size + 64<<20}
	for {
		kind, off, p, err := sf.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return FrameStats{}, err
		}
		if err := fn(kind, off, p); err != nil {
			return FrameStats{}, err
		}
	}
	return FrameStats{sf.badFrames, sf.badBytes, sf.tornBytes}, nil
}

// instantMono is an instant's time on CLOCK_MONOTONIC.
func (sf *streamFile) instantMono(in stream.StreamInstant) uint64 {
	if in.Clock == stream.InstantClockTicks {
		return sf.clock.mono(in.Time)
	}
	return in.Time
}

// resolveInstants puts the stream's instants on the trace's timeline, in time order, with the
// first call derived where the stream has launch marks: an instant of a thread with no events
// becomes process-wide, one of a thread opt leaves out is left out.
func (sf *streamFile) resolveInstants(opt Options) []stream.Instant {
	if len(sf.instants) == 0 {
		return nil
	}
	out := make([]stream.Instant, 0, len(sf.instants)+1)
	launch := false
	for _, in := range sf.instants {
		m := sf.instantMono(in)
		ns := uint64(0)
		if m > sf.base {
			ns = m - sf.base
		}
		tid := in.TID
		if st := sf.byTID[tid]; tid != 0 && st == nil {
			tid = 0
		} else if st != nil && !threadSelected(opt.Threads, &st.t) {
			continue
		}
		launch = launch || in.Kind.Launch()
		out = append(out, stream.Instant{Kind: in.Kind, Name: in.Name, Nanos: ns, PrecisionNanos: in.Precision, TID: tid})
	}
	if launch && sf.haveTicks {
		out = append(out, stream.Instant{Kind: stream.InstantFirstCall, Name: stream.InstantFirstCall.String(), Nanos: sf.ns(sf.minTick)})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Nanos < out[j].Nanos })
	return out
}
