// Reading streams (ProcessStreams): pass 1 over every stream, the streams settled on one
// timeline, pass 2 thread by thread; what pass 1 leaves of a stream (streamFile, streamThread),
// its methods' names and its instants. A stream's frames: stream_frames.go; pass 1:
// stream_index.go, pass1.go; pass 2: stream_tree.go, stream_replay.go; its ticks: clock.go.

package engine

import (
	"fmt"
	"io"
	"math"
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
