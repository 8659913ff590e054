package engine

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/msgtrace/msgtrace/swiftname"
	"github.com/msgtrace/msgtrace/tracer/stream"
)

// Options select what is written.
type Options struct {
	MinNanos float64  // drop calls shorter than this; their children attach to the nearest kept ancestor
	MaxDepth int      // drop calls deeper than this (0-based); < 0: no limit
	Include  []string // keep only calls whose name matches one of these ("-[UIView *]", "*[RAC* *]")
	Exclude  []string // drop calls whose name matches one of these
	Threads  string   // "all" (or ""), "main", or a comma list of thread names and ids
}

// Call is one call after filtering, in the order calls ended on its thread.
type Call struct {
	Name       string
	Method     Method // the method's number in the conversion's Names (0: none; then Name only)
	StartNanos uint64 // since the trace's base tick
	DurNanos   uint64
	SelfNanos  uint64 // minus the kept calls nested in it
	Depth      int    // on the thread's shadow stack
	Flags      int    // FlagSuper, FlagTagged, FlagUnwound, FlagOpen
	Thread     *stream.Thread
	Folded     uint64 // timelines: calls inside it folded into its self time by the budget (at Exit)
	// ID is the call's method id in its stream: for a wait (FlagWait), its stream.WaitID
	// (primitive, holder, address: stream.WaitOf).
	ID uint64

	foldKey uint64 // at Enter, what a budget compares (streamFile.durKey), when one folds calls
	names   *Names // the table Method is in
}

// Sink receives a processed trace: the calls of each thread in the order they ended (Call,
// Skip, Mark between BeginThread and EndThread), then Close. What else a sink takes, and
// asks of the engine, it declares in Needs.
type Sink interface {
	BeginThread(h *stream.Header, t *stream.Thread) error
	Call(c *Call) error
	Skip(depth int) error      // a dropped call at this depth: its kept descendants now belong to its parent
	Mark(m *stream.Mark) error // a loss or a wait on the current thread, in time order with its calls
	EndThread() error
	Close(t Totals) error
	// Needs is what the sink asks of the engine (the zero Needs: calls in the order they
	// ended, every call, nothing to abort). The engine reads it, never the sink's type.
	Needs() Needs
}

// Needs is a sink's declared contract with the engine: the order it takes calls in, the
// budget of a timeline, the trie of an aggregate, what ends it on a failure. A Tee declares
// its members, whose needs the engine combines.
type Needs struct {
	// Tree takes each thread's calls in pre-order (a parent before its children): the stream
	// reader drives it directly, without holding call trees. Nil: the Sink's own methods, in
	// the order calls ended.
	Tree TreeSink
	// Fold marks a timeline (every call at its time): the engine keeps at most Budget calls,
	// the longest, folds the others into their callers and says here what it did. Budget 0
	// keeps every call.
	Fold   *FoldReport
	Budget uint64
	// Stacks marks an aggregate (one node per distinct stack): it needs each call's stack,
	// count and self time, not time order, and with no filter on calls the engine fills this
	// trie directly (the aggregates' path, aggregate.go) before Close; otherwise Tree is fed.
	Stacks *StackTrie
	// Abort ends what only Close ends (a writer goroutine) when a conversion fails before
	// Close, writing nothing more (nil: nothing to end).
	Abort func()
	// Members marks a tee: the sinks it feeds, each driven as its own Needs say, from one
	// reading of the trace (tee.go). The tee's own Needs are then Members and Abort only.
	Members []Sink
}

// abortOnError aborts the sink when the conversion failed (*err set).
func abortOnError(sink Sink, err *error) {
	if a := sink.Needs().Abort; a != nil && *err != nil {
		a()
	}
}

// Totals are the counters of the whole trace.
type Totals struct {
	Threads, Calls, Kept, Dropped, Overflow uint64

	// Streams only.
	Processes uint64 // processes read
	Open      uint64 // calls still running at the end of the trace (FlagOpen)
	Marks     uint64 // marks (losses, waits) passed to the sink
	BadFrames uint64 // frames that failed their checks (magic, length, checksum, payload), skipped
	BadBytes  uint64 // bytes skipped to resync past them
	TornBytes uint64 // bytes of incomplete frames at the ends of files (a cut or a kill mid-write)
	Unended   uint64 // streams without an end frame (the process was killed, crashed or is still running)
	Unwritten uint64 // bytes the writers reported they could not write (end frames)
}

// Process reads a trace, a raw dump or a stream (told apart by their magic), and feeds every
// kept call to the sink. A stream is read in two passes through io.ReaderAt when r is an
// io.ReaderAt and io.Seeker holding the stream from offset 0 (an *os.File), in memory
// that does not grow with the number of calls; any other reader is read into memory first.
func Process(r io.Reader, opt Options, sink Sink) (Totals, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	magic, _ := br.Peek(len(stream.Magic))
	switch {
	case len(magic) >= len(stream.StreamMagic) && string(magic[:len(stream.StreamMagic)]) == stream.StreamMagic:
		in, err := streamInput(r, br)
		if err != nil {
			return Totals{}, err
		}
		return ProcessStreams([]Input{in}, opt, sink)
	case len(magic) == len(stream.Magic) && string(magic) != stream.Magic:
		return Totals{}, &stream.RawError{Offset: 0, Err: errors.New("not a msgtrace trace: neither a raw dump (MSGTRACE) nor a stream (MTSF)")}
	}
	return processRaw(br, opt, sink)
}

// streamInput makes a stream being read from r random-access.
func streamInput(r io.Reader, br *bufio.Reader) (Input, error) {
	if ra, ok := r.(io.ReaderAt); ok {
		if s, ok := r.(io.Seeker); ok {
			if size, err := s.Seek(0, io.SeekEnd); err == nil {
				return Input{R: ra, Size: size}, nil
			} // a pipe: read it whole
		}
	}
	b, err := io.ReadAll(br)
	if err != nil {
		return Input{}, err
	}
	return Input{R: bytes.NewReader(b), Size: int64(len(b))}, nil
}

// processRaw reads a raw dump into the engine's model, as a stream is read: each thread's
// records (in the order calls ended, as a stream's events) are put in pre-order (PreOrder,
// every call) and told to the applier as pass 2 tells a stream's, so that raw dumps and
// streams have one filter, one self time and one nesting of the kept calls. A raw dump's
// ticks are converted to ns on reading (its header's rate; the applier's clock is then the
// identity), its methods are numbered by their class and selector words, and the losses it
// counts per thread are marks at the thread's last end. Timelines keep every call (no
// budget: raw dumps are the small traces of MSGTRACE_FORMAT=raw).
func processRaw(r io.Reader, opt Options, sink Sink) (t Totals, err error) {
	defer abortOnError(sink, &err)
	rd, err := stream.NewReader(r)
	if err != nil {
		return Totals{}, err
	}
	var tot Totals
	sf := &streamFile{names: newNames(), methods: map[uint64]streamMethod{}, dense: []streamMethod{{}}}
	a := &applier{sink: sink, ts: asTreeNoBudget(sink), flt: newTreeFilter(opt)}
	a.skip = skipperOf(a.ts)
	rt := &rawTree{a: a, sf: sf}
	err = readRaw(rd, opt, sf, PreOrder(rt), &tot)
	if rt.em != nil {
		if serr := rt.em.stop(); err == nil {
			err = serr
		}
	}
	tot.Calls, tot.Kept = a.calls, a.kept
	if err != nil {
		return tot, err
	}
	return tot, sink.Close(tot)
}

// readRaw reads the dump's threads into pre, every call in the order they ended.
func readRaw(rd *stream.Reader, opt Options, sf *streamFile, pre Sink, tot *Totals) error {
	ids := map[[2]uint64]Method{}
	var c Call
	for {
		t, err := rd.NextThread()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if !threadSelected(opt.Threads, t) {
			continue
		}
		t.PID = rd.Header.PID
		tot.Threads++
		tot.Dropped += t.Dropped
		tot.Overflow += t.Overflow
		if err := pre.BeginThread(&rd.Header, t); err != nil {
			return err
		}
		c = Call{Thread: t, names: sf.names}
		var last uint64 // the thread's last end, where its loss counters are shown
		for {
			rec, err := rd.NextRecord()
			if err == io.EOF {
				break
			}
			if err != nil {
				return err
			}
			key := [2]uint64{rec.Class &^ (stream.DepthMask << stream.DepthShift), rec.Sel} // flags kept: super/tagged name differently
			m, ok := ids[key]
			if !ok {
				name := rd.Names.Name(rec)
				m = sf.names.intern(name)
				ids[key] = m
				sf.dense = Grow(sf.dense, m)
				sf.dense[m] = streamMethod{name: name, m: m}
			}
			start := uint64(rd.Header.Nanos(rec.Start))
			end := uint64(rd.Header.Nanos(rec.End))
			last = max(last, end)
			c.Name, c.Method, c.StartNanos, c.DurNanos, c.Depth, c.Flags = sf.dense[m].name, m, start, end-start, rec.Depth(), rec.Flags()
			if err := pre.Call(&c); err != nil {
				return err
			}
		}
		for _, m := range []stream.Mark{{Kind: stream.MarkLost, Count: t.Dropped}, {Kind: stream.MarkOverflow, Count: t.Overflow}} {
			if m.Count > 0 {
				m.StartNanos, m.Thread = last, t
				if err := pre.Mark(&m); err != nil {
					return err
				}
			}
		}
		if err := pre.EndThread(); err != nil {
			return err
		}
	}
}

// rawTree tells the applier a raw dump's calls in pre-order, as pass 2 tells a stream's: a
// call's Method is its id, its times are in ns.
type rawTree struct {
	a  *applier
	em *emitter // made at the first thread: piped when it has pipeMin records
	sf *streamFile
}

func (r *rawTree) BeginThread(h *stream.Header, t *stream.Thread) error {
	if r.em == nil {
		r.em = newEmitter(r.a, t.Records)
	}
	return r.em.begin(r.sf, h, t)
}

func (r *rawTree) Enter(c *Call, _ int) error {
	end := c.StartNanos + c.DurNanos
	return r.em.op(rawOp{kind: opEnter, flags: uint8(c.Flags), depth: uint32(c.Depth), id: uint64(c.Method), start: c.StartNanos, startNanos: c.StartNanos, end: end})
}

func (r *rawTree) Exit(c *Call, _ int) error {
	return r.em.op(rawOp{kind: opExit, depth: uint32(c.Depth), start: c.StartNanos})
}

func (r *rawTree) Mark(m *stream.Mark, _ int) error { return r.em.mark(m) }
func (r *rawTree) EndThread() error                 { return r.em.op(rawOp{kind: opEnd}) }
func (r *rawTree) Close(Totals) error               { return nil }

func threadSelected(sel string, t *stream.Thread) bool {
	switch sel {
	case "", "all":
		return true
	case "main":
		return t.Main
	}
	for _, s := range strings.Split(sel, ",") {
		s = strings.TrimSpace(s)
		if s == t.Name || s == strconv.FormatUint(t.TID, 10) || (s == "main" && t.Main) {
			return true
		}
	}
	return false
}

// ValidateThreads checks a thread selection.
func ValidateThreads(sel string) error {
	if strings.Contains(sel, ",,") || strings.HasPrefix(sel, ",") || strings.HasSuffix(sel, ",") {
		return errors.New("empty entry in thread list")
	}
	return nil
}

// Pattern is a glob over method names where only '*' is special ('[' and ']' are literal).
type Pattern []string

func CompilePatterns(ps []string) []Pattern {
	var out []Pattern
	for _, p := range ps {
		out = append(out, strings.Split(p, "*"))
	}
	return out
}

func (p Pattern) match(s string) bool {
	if len(p) == 1 {
		return s == p[0]
	}
	if !strings.HasPrefix(s, p[0]) {
		return false
	}
	s = s[len(p[0]):]
	for _, mid := range p[1 : len(p)-1] {
		i := strings.Index(s, mid)
		if i < 0 {
			return false
		}
		s = s[i+len(mid):]
	}
	return strings.HasSuffix(s, p[len(p)-1])
}

// MatchAny reports whether a pattern matches the method name s or, for a Swift class's method,
// its demangled name ("-[ApertureCLI.* *]" and "-[_TtC11ApertureCLI* *]" both match
// "-[_TtC11ApertureCLI4Once run]").
func MatchAny(ps []Pattern, s string) bool {
	for _, p := range ps {
		if p.match(s) {
			return true
		}
	}
	if len(ps) == 0 {
		return false
	}
	if d := swiftname.Method(s); d != s {
		for _, p := range ps {
			if p.match(d) {
				return true
			}
		}
	}
	return false
}

// ValidatePattern checks a method-name pattern given on the command line.
func ValidatePattern(p string) error {
	if p == "" {
		return errors.New("empty pattern")
	}
	if !strings.ContainsAny(p, "*[") {
		return fmt.Errorf("pattern %q names no method: write -[Class selector], +[Class *] or *[Prefix* *]", p)
	}
	return nil
}
