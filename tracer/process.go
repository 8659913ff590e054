package tracer

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
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
	StartNanos uint64 // since the trace's base tick
	DurNanos   uint64
	SelfNanos  uint64 // minus the kept calls nested in it
	Depth      int    // on the thread's shadow stack
	Flags      int    // FlagSuper, FlagTagged, FlagUnwound
	Thread     *Thread
}

// Sink receives a processed trace.
type Sink interface {
	BeginThread(h *Header, t *Thread) error
	Call(c *Call) error
	Skip(depth int) error // a dropped call at this depth: its kept descendants now belong to its parent
	Mark(m *Mark) error   // a loss or a wait on the current thread, in time order with its calls
	EndThread() error
	Close(t Totals) error
}

// Totals are the counters of the whole trace.
type Totals struct {
	Threads, Calls, Kept, Dropped, Overflow uint64
}

// Process reads a raw dump and feeds every kept call to the sink.
func Process(r io.Reader, opt Options, sink Sink) (Totals, error) {
	rd, err := NewReader(r)
	if err != nil {
		return Totals{}, err
	}
	var tot Totals
	inc, exc := compilePatterns(opt.Include), compilePatterns(opt.Exclude)
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
		tot.Threads++
		tot.Dropped += t.Dropped
		tot.Overflow += t.Overflow
		if err := sink.BeginThread(&rd.Header, t); err != nil {
			return tot, err
		}
		var p selfTimer
		var last uint64 // the thread's last end, where its loss counters are shown
		c := Call{Thread: t}
		for {
			rec, err := rd.NextRecord()
			if err == io.EOF {
				break
			}
			if err != nil {
				return tot, err
			}
			tot.Calls++
			key := [2]uint64{rec.Class &^ (0xfff << 48), rec.Sel} // flags kept: super/tagged name differently
			name, ok := names[key]
			if !ok {
				name = rd.Names.Name(rec)
				names[key] = name
			}
			start := uint64(rd.Header.Nanos(rec.Start))
			end := uint64(rd.Header.Nanos(rec.End))
			depth := rec.Depth()
			dur := end - start
			last = max(last, end)
			if float64(dur) < opt.MinNanos || (opt.MaxDepth >= 0 && depth > opt.MaxDepth) ||
				(len(inc) > 0 && !matchAny(inc, name)) || matchAny(exc, name) {
				p.skip(depth)
				if err := sink.Skip(depth); err != nil {
					return tot, err
				}
				continue
			}
			tot.Kept++
			c.Name, c.StartNanos, c.DurNanos, c.Depth, c.Flags = name, start, dur, depth, rec.Flags()
			c.SelfNanos = dur - min(dur, p.call(depth, dur))
			if err := sink.Call(&c); err != nil {
				return tot, err
			}
		}
		// A raw dump counts losses per thread without saying when: shown at the thread's end.
		for _, m := range []Mark{{Kind: MarkLost, Count: t.Dropped}, {Kind: MarkOverflow, Count: t.Overflow}} {
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

func threadSelected(sel string, t *Thread) bool {
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

// pattern is a glob over method names where only '*' is special ('[' and ']' are literal).
type pattern []string

func compilePatterns(ps []string) []pattern {
	var out []pattern
	for _, p := range ps {
		out = append(out, strings.Split(p, "*"))
	}
	return out
}

func (p pattern) match(s string) bool {
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

func matchAny(ps []pattern, s string) bool {
	for _, p := range ps {
		if p.match(s) {
			return true
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
