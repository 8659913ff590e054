package engine

import (
	"math/bits"

	"github.com/msgtrace/msgtrace/tracer/stream"
)

// Timeline budgets. A browser is the limit of a timeline viewer: Perfetto UI's in-browser trace
// processor has about 2 GB and holds a slice in several times its bytes in the file; speedscope
// slows past a few million events; a Chrome JSON of a million calls is 150 MB that every viewer
// parses in JavaScript. A run of tens of millions of calls is recorded in seconds. So a timeline
// (Chrome JSON, Perfetto, speedscope) keeps at most a budget of calls: the longest ones. The
// calls shorter than a threshold chosen from the durations of all calls are folded into their
// caller (their time is in its self time, the number of them in its "folded" count): a call is
// never kept when its caller is not (a caller lasts at least as long), so the kept calls are a
// top slice of every tree. Aggregates (pprof, folded stacks, SVG) keep every call.

// durHist counts calls by duration in ns: 16 buckets per power of two.
type durHist struct {
	n      [64 * 16]uint64
	total  uint64
	maxDur uint64
}

func durBucket(ns uint64) int {
	if ns < 16 {
		return int(ns)
	}
	l := bits.Len64(ns) - 1 // 2^l <= ns < 2^(l+1)
	return l*16 + int(ns>>(l-4)&15)
}

// bucketFloor is the smallest duration in bucket b.
func bucketFloor(b int) uint64 {
	if b < 16 {
		return uint64(b)
	}
	l := b / 16
	return 1<<l | uint64(b%16)<<(l-4)
}

func (h *durHist) add(ns, count uint64) {
	h.n[durBucket(ns)] += count
	h.total += count
	h.maxDur = max(h.maxDur, ns)
}

// threshold is the shortest duration a call may have to be kept when at most budget calls
// are (0: every call fits).
func (h *durHist) threshold(budget uint64) uint64 {
	if budget == 0 || h.total <= budget {
		return 0
	}
	var kept uint64
	for b := len(h.n) - 1; b >= 0; b-- {
		if kept+h.n[b] > budget {
			if kept == 0 { // the longest calls are kept whatever the budget
				return bucketFloor(b)
			}
			return bucketFloor(b + 1)
		}
		kept += h.n[b]
	}
	return 0
}

// addDurations converts a stream's tick histogram to ns (each bucket at its floor, through the
// stream's average rate: see durKey) and adds it to h.
func (sf *streamFile) addDurations(h *durHist) {
	sf.setDurRate()
	for b, c := range sf.durs.n {
		if c > 0 {
			h.add(sf.durKeys[b], c)
		}
	}
}

// durKey is what a budget compares for a call of the stream that lasted ticks: its tick
// bucket's floor in ns at the stream's average rate, the very number addDurations counted it
// under. A call's own DurNanos cannot be compared: it goes through the clock's segments and
// is any number of its tick bucket's, so calls counted below a threshold would be kept past
// it (oneloop's 11.9 M calls: 2,130,321 kept for a speedscope budget of 2,000,000). durKey
// grows with ticks, so a caller's is never below its callee's.
func (sf *streamFile) durKey(ticks uint64) uint64 {
	return sf.durKeys[durBucket(ticks)]
}

// setDurRate sets each tick bucket's durKey, at the stream's average rate (ns per tick), once
// its clock and ticks are known.
func (sf *streamFile) setDurRate() {
	num, den := uint64(1), uint64(1)
	if sf.haveTicks && sf.maxTick > sf.minTick {
		a, b := sf.clock.mono(sf.minTick), sf.clock.mono(sf.maxTick)
		if b > a {
			num, den = b-a, sf.maxTick-sf.minTick
		}
	} else if sf.clock.num != 0 && sf.clock.den != 0 {
		num, den = sf.clock.num, sf.clock.den
	}
	sf.durKeys = new([len(durHist{}.n)]uint64)
	for b := range sf.durKeys {
		if b >= 16 && b < 64 { // no such bucket (durBucket: 0-15, then 64 on)
			sf.durKeys[b] = sf.durKeys[b-1]
			continue
		}
		sf.durKeys[b] = scale(bucketFloor(b), num, den)
	}
}

// FoldReport says what a timeline's budget did.
type FoldReport struct {
	Budget    uint64 // calls it could keep (0: every call)
	FoldNanos uint64 // calls shorter than this were folded into their callers (0: none, every call kept)
	Kept      uint64 // calls it shows (counted when FoldNanos > 0)
	Folded    uint64 // calls folded into their callers
}

// Folded reports what the budget of a timeline sink did (nil for other sinks, and for none).
func Folded(s Sink) *FoldReport {
	if s == nil {
		return nil
	}
	return s.Needs().Fold
}

// foldTree keeps the calls at least fold long, and folds the others into the kept call
// around them: their time is in its self time already; the count goes on Call.Folded.
type foldTree struct {
	ts      TreeSink
	fold    uint64
	rep     *FoldReport
	folding int      // depth of the outermost folded call open, -1 none
	folded  []uint64 // per kept depth: calls folded inside it so far
	foldDur []uint64 // per kept depth: time of the calls folded right under it
}

func (f *foldTree) Enter(c *Call, d int) error {
	if f.folding >= 0 {
		f.rep.Folded++
		if f.folding > 0 && f.folding-1 < len(f.folded) {
			f.folded[f.folding-1]++
		}
		return nil
	}
	if c.foldKey < f.fold && c.Flags&stream.FlagOpen == 0 {
		f.folding = d
		f.rep.Folded++
		if d > 0 && d-1 < len(f.folded) {
			f.folded[d-1]++
			f.foldDur[d-1] += c.DurNanos
		}
		return nil
	}
	f.rep.Kept++
	f.folded = append(f.folded[:d], 0)
	f.foldDur = append(f.foldDur[:d], 0)
	return f.ts.Enter(c, d)
}

func (f *foldTree) Exit(c *Call, d int) error {
	if f.folding >= 0 {
		if d == f.folding {
			f.folding = -1
		}
		return nil
	}
	self := c.SelfNanos
	if d < len(f.folded) {
		c.Folded = f.folded[d]
		c.SelfNanos = min(c.DurNanos, c.SelfNanos+f.foldDur[d])
	}
	err := f.ts.Exit(c, d)
	c.Folded, c.SelfNanos = 0, self
	return err
}

func (f *foldTree) Mark(m *stream.Mark, d int) error {
	if f.folding >= 0 {
		d = f.folding
	}
	return f.ts.Mark(m, d)
}

func (f *foldTree) BeginThread(h *stream.Header, t *stream.Thread) error {
	f.folding, f.folded, f.foldDur = -1, f.folded[:0], f.foldDur[:0]
	return f.ts.BeginThread(h, t)
}
func (f *foldTree) EndThread() error     { return f.ts.EndThread() }
func (f *foldTree) Close(t Totals) error { return f.ts.Close(t) }

// hasBudget says whether a sink (or one a Tee holds) is a timeline with a budget, for which
// pass 1 counts the calls by duration; without one (aggregates, a timeline with every call
// kept: --max-calls all) it does not.
func hasBudget(s Sink) bool {
	for _, s := range leaves(s, nil) {
		if n := s.Needs(); n.Fold != nil && n.Budget > 0 {
			return true
		}
	}
	return false
}

// asTreeNoBudget is asTreeWith with no budget: every call of a timeline kept, its fold report
// left as it is.
func asTreeNoBudget(s Sink) TreeSink {
	if m := s.Needs().Members; m != nil {
		tt := make(teeTree, len(m))
		for i, s := range m {
			tt[i] = asTreeNoBudget(s)
		}
		return tt
	}
	return asTree(s)
}

// asTreeWith returns the TreeSink the stream reader drives for a sink, timelines wrapped in
// their budget given the durations of the trace's calls (h) and the number of calls open at
// its end (open: not in h, and never folded); folds says whether a budget folds calls (the
// reader must then set each Call's foldKey). A Tee's members are driven each as its own.
func asTreeWith(s Sink, h *durHist, open uint64) (ts TreeSink, folds bool) {
	if m := s.Needs().Members; m != nil {
		tt := make(teeTree, len(m))
		for i, s := range m {
			var f bool
			tt[i], f = asTreeWith(s, h, open)
			folds = folds || f
		}
		return tt, folds
	}
	ts = asTree(s)
	if n := s.Needs(); n.Fold != nil {
		rep := n.Fold
		*rep = FoldReport{Budget: n.Budget}
		// the open calls are kept whatever their length: the others share what is left
		budget := rep.Budget
		if budget > 0 {
			budget = max(budget-min(budget, open), 1)
		}
		if fold := h.threshold(budget); fold > 0 {
			rep.FoldNanos = fold
			return &foldTree{ts: ts, fold: fold, rep: rep, folding: -1}, true
		}
	}
	return ts, false
}
