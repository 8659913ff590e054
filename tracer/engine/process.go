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

// callFilter applies the options to one thread's calls, in post-order, computes self time and
// feeds the sink.
type callFilter struct {
	opt      Options
	inc, exc []Pattern
	Sink     Sink
	tot      *Totals
	p        selfTimer
	c        Call
	mark     stream.Mark
}

func NewCallFilter(opt Options, sink Sink, tot *Totals) *callFilter {
	return &callFilter{opt: opt, inc: CompilePatterns(opt.Include), exc: CompilePatterns(opt.Exclude), Sink: sink, tot: tot}
}

// Begin starts a thread.
func (f *callFilter) Begin(t *stream.Thread) {
	f.p.pending = f.p.pending[:0]
	f.c = Call{Thread: t}
}

// Call takes the thread's next call in post-order.
func (f *callFilter) Call(name string, start, dur uint64, depth, flags int) error {
	f.tot.Calls++
	if float64(dur) < f.opt.MinNanos || (f.opt.MaxDepth >= 0 && depth > f.opt.MaxDepth) ||
		(len(f.inc) > 0 && !MatchAny(f.inc, name)) || MatchAny(f.exc, name) {
		f.p.skip(depth)
		return f.Sink.Skip(depth)
	}
	f.tot.Kept++
	c := &f.c
	c.Name, c.StartNanos, c.DurNanos, c.Depth, c.Flags = name, start, dur, depth, flags
	c.SelfNanos = dur - min(dur, f.p.call(depth, dur))
	return f.Sink.Call(c)
}

// processRaw reads a raw dump.
func processRaw(r io.Reader, opt Options, sink Sink) (t Totals, err error) {
	defer abortOnError(sink, &err)
	rd, err := stream.NewReader(r)
	if err != nil {
		return Totals{}, err
	}
	var tot Totals
	f := NewCallFilter(opt, sink, &tot)
	names := map[[2]uint64]string{}
	for {
		t, err := rd.NextThread()
		if err == io.EOF {
			break
		}
		if err != nil {
			return tot, err
		}
		if !threadSelected(opt.Threads, t) {
			continue
		}
		t.PID = rd.Header.PID
		tot.Threads++
		tot.Dropped += t.Dropped
		tot.Overflow += t.Overflow
		if err := sink.BeginThread(&rd.Header, t); err != nil {
			return tot, err
		}
		f.Begin(t)
		var last uint64 // the thread's last end, where its loss counters are shown
		for {
			rec, err := rd.NextRecord()
			if err == io.EOF {
				break
			}
			if err != nil {
				return tot, err
			}
			key := [2]uint64{rec.Class &^ (stream.DepthMask << stream.DepthShift), rec.Sel} // flags kept: super/tagged name differently
			name, ok := names[key]
			if !ok {
				name = rd.Names.Name(rec)
				names[key] = name
			}
			start := uint64(rd.Header.Nanos(rec.Start))
			end := uint64(rd.Header.Nanos(rec.End))
			last = max(last, end)
			if err := f.Call(name, start, end-start, rec.Depth(), rec.Flags()); err != nil {
				return tot, err
			}
		}
		// A raw dump counts losses per thread without saying when: shown at the thread's end.
		for _, m := range []stream.Mark{{Kind: stream.MarkLost, Count: t.Dropped}, {Kind: stream.MarkOverflow, Count: t.Overflow}} {
			if m.Count > 0 {
				m.StartNanos, m.Thread = last, t
				if err := sink.Mark(&m); err != nil {
					return tot, err
				}
			}
		}
		if err := sink.EndThread(); err != nil {
			return tot, err
		}
	}
	return tot, sink.Close(tot)
}

// selfTimer computes self time in post-order: pending holds kept subtrees not yet claimed by a
// parent, as (depth, total duration).
type selfTimer struct {
	pending []pendingDur
}

type pendingDur struct {
	depth int
	dur   uint64
}

// call claims the pending subtrees deeper than depth as children and returns their total.
func (p *selfTimer) call(depth int, dur uint64) uint64 {
	var children uint64
	i := len(p.pending)
	for i > 0 && p.pending[i-1].depth > depth {
		i--
		children += p.pending[i].dur
	}
	p.pending = append(p.pending[:i], pendingDur{depth, dur})
	return children
}

// skip hands a dropped call's kept subtrees up to its own depth.
func (p *selfTimer) skip(depth int) {
	var sum uint64
	i := len(p.pending)
	for i > 0 && p.pending[i-1].depth > depth {
		i--
		sum += p.pending[i].dur
	}
	if i < len(p.pending) {
		p.pending = append(p.pending[:i], pendingDur{depth, sum})
	}
}

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
