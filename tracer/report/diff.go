package report

import (
	"math"
	"slices"
	"sort"

	"github.com/msgtrace/msgtrace/tracer/engine"
	"github.com/msgtrace/msgtrace/tracer/stream"
)

// Comparing runs: each run of a program is reduced to a RunProfile (per method: calls, self
// time, total time; and which methods called which), and Diff compares the runs of a base
// against the runs of a head method by method. Self time decides: a method regressed when its
// self time per run grew beyond noise (a Mann-Whitney U rank test over the runs), by at least
// a relative threshold AND an absolute floor, in the median run and in the fastest run. A caller whose total time grew while its self
// time did not is listed as slower through its callees, not as a regression.

// RunProfile is one run's methods over every thread.
type RunProfile struct {
	Methods map[string]MethodStat
	Edges   map[[2]string]struct{} // (caller, callee) pairs seen
	// Waits is the time each method spent in contended waits directly inside its calls
	// ("wait PRIMITIVE" calls; absent: none).
	Waits map[string]uint64
}

// ProfileSink builds a RunProfile; memory grows with distinct methods and caller-callee pairs.
type ProfileSink struct {
	engine.Sink
	t *profileTree
}

// NewProfileSink returns a sink that collects a RunProfile; read it with Profile after Close.
func NewProfileSink() *ProfileSink {
	t := &profileTree{p: &RunProfile{Methods: map[string]MethodStat{}, Edges: map[[2]string]struct{}{}}, m: map[string]*profMethod{}}
	return &ProfileSink{Sink: engine.PreOrder(t), t: t}
}

// Needs: calls in pre-order, every one.
func (s *ProfileSink) Needs() engine.Needs { return engine.Needs{Tree: s.t} }

// Profile returns the run's profile; complete after Close.
func (s *ProfileSink) Profile() *RunProfile { return s.t.p }

type profMethod struct {
	MethodStat
	active int
}

type profileTree struct {
	p     *RunProfile
	m     map[string]*profMethod
	stack []*profMethod
}

func (t *profileTree) BeginThread(*stream.Header, *stream.Thread) error {
	t.stack = t.stack[:0]
	return nil
}

func (t *profileTree) Enter(c *engine.Call, depth int) error {
	m := t.m[c.Name]
	if m == nil {
		m = &profMethod{MethodStat: MethodStat{Method: c.Name}}
		t.m[c.Name] = m
	}
	depth = min(depth, len(t.stack))
	t.stack = append(t.stack[:depth], m)
	if depth > 0 {
		t.p.Edges[[2]string{t.stack[depth-1].Method, c.Name}] = struct{}{}
	}
	m.active++
	return nil
}

func (t *profileTree) Exit(c *engine.Call, depth int) error {
	if depth >= len(t.stack) {
		return nil
	}
	m := t.stack[depth]
	m.Calls++
	m.SelfNanos += c.SelfNanos
	if c.Flags&stream.FlagWait != 0 && depth > 0 { // a contended wait: its caller's wait time
		if t.p.Waits == nil {
			t.p.Waits = map[string]uint64{}
		}
		t.p.Waits[t.stack[depth-1].Method] += c.DurNanos
	}
	if m.active--; m.active == 0 {
		m.TotalNanos += c.DurNanos
	}
	t.stack = t.stack[:depth]
	return nil
}

func (t *profileTree) Mark(*stream.Mark, int) error { return nil }

func (t *profileTree) EndThread() error {
	for _, m := range t.stack { // not expected: every call entered exits
		m.active--
	}
	t.stack = t.stack[:0]
	return nil
}

func (t *profileTree) Close(engine.Totals) error {
	for k, m := range t.m {
		t.p.Methods[k] = m.MethodStat
	}
	return nil
}

// DiffOptions are the thresholds of a comparison: a change counts when it passes all of them.
type DiffOptions struct {
	ThresholdPct float64 // relative change of the median per run, percent of the base
	MinSelfNanos float64 // self (and total) time change of the median per run
	MinCalls     float64 // calls change of the median per run
	Alpha        float64 // the rank test's two-sided p-value at most this (when the runs allow it)
}

// DefaultDiffOptions: 10 %, 1 ms of self time, 100 calls, p <= 0.05.
func DefaultDiffOptions() DiffOptions {
	return DiffOptions{ThresholdPct: 10, MinSelfNanos: 1e6, MinCalls: 100, Alpha: 0.05}
}

// DiffEntry is one method's change in one metric: self (ns per run), calls (per run), total
// (ns per run, for callers slower through their callees) or wait (ns per run in contended waits
// directly inside its calls: a regression that is a new wait shows here, the wait itself as a
// new method "wait PRIMITIVE"). Base and Head are medians over the
// runs, BaseMin and HeadMin the smallest values; ChangePct (of the medians) is nil when the base
// is 0.
type DiffEntry struct {
	Method    string   `json:"method"`
	Display   string   `json:"display,omitempty"` // Method as people write it, when it differs (a Swift class's)
	Metric    string   `json:"metric"`
	Base      float64  `json:"base"`
	Head      float64  `json:"head"`
	ChangePct *float64 `json:"change_pct"`
	BaseMin   float64  `json:"base_min"` // the fastest run (fewest calls)
	HeadMin   float64  `json:"head_min"`
	P         float64  `json:"p"`          // Mann-Whitney U, two-sided
	PAdjusted float64  `json:"p_adjusted"` // Holm's adjustment over the methods whose metric moved past the thresholds
	BaseRuns  []uint64 `json:"base_runs"`
	HeadRuns  []uint64 `json:"head_runs"`
	Via       []string `json:"via,omitempty"` // total: the regressed methods it calls (directly or not)
}

// PresenceEntry is a method seen on one side only: medians per run over that side's runs.
type PresenceEntry struct {
	Method     string   `json:"method"`
	Display    string   `json:"display,omitempty"` // Method as people write it, when it differs
	Calls      float64  `json:"calls"`
	SelfNanos  float64  `json:"self_ns"`
	Runs       int      `json:"runs"` // runs it appears in
	P          float64  `json:"p"`
	Regression bool     `json:"regression,omitempty"` // new, and its self time per run passes the floor beyond noise
	SelfRuns   []uint64 `json:"self_runs"`
}

// DiffResult is a comparison.
type DiffResult struct {
	BaseRuns     int     `json:"base_runs"`
	HeadRuns     int     `json:"head_runs"`
	Test         string  `json:"test"`       // mann-whitney-u (two-sided, exact up to 40 runs)
	Correction   string  `json:"correction"` // holm, within each metric
	Testable     bool    `json:"testable"`   // enough runs for the test to reach Alpha; else thresholds alone decide
	MinP         float64 `json:"min_p"`      // the smallest p-value these run counts allow
	ThresholdPct float64 `json:"threshold_pct"`
	MinSelfNanos float64 `json:"min_self_ns"`
	MinCalls     float64 `json:"min_calls"`
	Alpha        float64 `json:"alpha"`

	Regressions    []DiffEntry     `json:"regressions"`
	Improvements   []DiffEntry     `json:"improvements"`
	ThroughCallees []DiffEntry     `json:"through_callees"`
	New            []PresenceEntry `json:"new"`
	Vanished       []PresenceEntry `json:"vanished"`
}

// Regressed tells whether anything regressed: a method's self time or calls, or a new method
// whose self time passes the floor.
func (d *DiffResult) Regressed() bool {
	if len(d.Regressions) > 0 {
		return true
	}
	for _, n := range d.New {
		if n.Regression {
			return true
		}
	}
	return false
}

// Diff compares the runs of base with the runs of head.
func Diff(base, head []*RunProfile, opt DiffOptions) *DiffResult {
	d := &DiffResult{BaseRuns: len(base), HeadRuns: len(head), Test: "mann-whitney-u", Correction: "holm", ThresholdPct: opt.ThresholdPct,
		MinSelfNanos: opt.MinSelfNanos, MinCalls: opt.MinCalls, Alpha: opt.Alpha,
		Regressions: []DiffEntry{}, Improvements: []DiffEntry{}, ThroughCallees: []DiffEntry{}, New: []PresenceEntry{}, Vanished: []PresenceEntry{}}
	d.MinP = MinMannWhitneyP(len(base), len(head))
	d.Testable = d.MinP <= opt.Alpha
	names := map[string]bool{}
	for _, side := range [][]*RunProfile{base, head} {
		for _, r := range side {
			for k := range r.Methods {
				names[k] = true
			}
		}
	}
	sorted := make([]string, 0, len(names))
	for k := range names {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	runs := func(side []*RunProfile, name string, f func(MethodStat) uint64) []uint64 {
		out := make([]uint64, len(side))
		for i, r := range side {
			out[i] = f(r.Methods[name])
		}
		return out
	}
	waits := func(side []*RunProfile, name string) []uint64 {
		out := make([]uint64, len(side))
		for i, r := range side {
			out[i] = r.Waits[name]
		}
		return out
	}
	self := func(m MethodStat) uint64 { return m.SelfNanos }
	calls := func(m MethodStat) uint64 { return m.Calls }
	total := func(m MethodStat) uint64 { return m.TotalNanos }

	// candidates: changes that pass the thresholds, per metric; the rank test decides after
	type cand struct {
		e     DiffEntry
		dir   int
		exact bool // every run of each side the same: no noise to test against
	}
	fams := map[string][]cand{}
	regressed := map[string]bool{}
	for _, name := range sorted {
		bc, hc := runs(base, name, calls), runs(head, name, calls)
		bs, hs := runs(base, name, self), runs(head, name, self)
		inBase, inHead := present(bc), present(hc)
		switch {
		case inBase == 0:
			e := d.presence(name, hc, hs, bs, inHead)
			e.Regression = e.SelfNanos >= opt.MinSelfNanos && (!d.Testable || inHead == len(head) || e.P <= opt.Alpha)
			if e.Regression {
				regressed[name] = true
			}
			d.New = append(d.New, e)
			continue
		case inHead == 0:
			d.Vanished = append(d.Vanished, d.presence(name, bc, bs, hs, inBase))
			continue
		}
		for _, m := range []struct {
			metric string
			b, h   []uint64
			floor  float64
		}{{"self", bs, hs, opt.MinSelfNanos}, {"calls", bc, hc, opt.MinCalls}, {"total", runs(base, name, total), runs(head, name, total), opt.MinSelfNanos},
			{"wait", waits(base, name), waits(head, name), opt.MinSelfNanos}} {
			if e, dir := screen(name, m.metric, m.b, m.h, m.floor, opt); dir != 0 && (m.metric != "total" || dir > 0) {
				fams[m.metric] = append(fams[m.metric], cand{e, dir, constant(m.b) && constant(m.h)})
			}
		}
	}
	// Holm's step-down correction within each metric: the more methods moved, the stronger the
	// evidence each one needs (noisy runs move many)
	selfRegressed := map[string]bool{}
	var totals []DiffEntry
	for _, metric := range []string{"self", "calls", "total", "wait"} {
		cs := fams[metric]
		ps := make([]float64, len(cs))
		for i := range cs {
			ps[i] = cs[i].e.P
		}
		adj := HolmAdjust(ps)
		for i := range cs {
			c := &cs[i]
			c.e.PAdjusted = adj[i]
			if d.Testable && !c.exact && adj[i] > opt.Alpha {
				continue
			}
			switch {
			case metric == "total":
				if !selfRegressed[c.e.Method] {
					totals = append(totals, c.e)
				}
			case c.dir > 0:
				d.Regressions = append(d.Regressions, c.e)
				regressed[c.e.Method] = true
				if metric == "self" {
					selfRegressed[c.e.Method] = true
				}
			default:
				d.Improvements = append(d.Improvements, c.e)
			}
		}
	}
	// a caller slower through its callees: which regressed methods it reaches in head's calls
	edges := map[string][]string{}
	for _, r := range head {
		for e := range r.Edges {
			edges[e[0]] = append(edges[e[0]], e[1])
		}
	}
	for i := range totals {
		seen := map[string]bool{totals[i].Method: true}
		queue := []string{totals[i].Method}
		for len(queue) > 0 {
			n := queue[0]
			queue = queue[1:]
			for _, k := range edges[n] {
				if seen[k] {
					continue
				}
				seen[k] = true
				queue = append(queue, k)
				if regressed[k] {
					totals[i].Via = append(totals[i].Via, k)
				}
			}
		}
		sort.Strings(totals[i].Via)
	}
	d.ThroughCallees = append(d.ThroughCallees, totals...)
	byDelta := func(es []DiffEntry, sign float64) {
		sort.SliceStable(es, func(i, j int) bool {
			if es[i].Metric != es[j].Metric {
				return es[i].Metric == "self" // self first, then calls
			}
			return sign*(es[i].Head-es[i].Base) > sign*(es[j].Head-es[j].Base)
		})
	}
	byDelta(d.Regressions, 1)
	byDelta(d.Improvements, -1)
	byDelta(d.ThroughCallees, 1)
	for _, ps := range [][]PresenceEntry{d.New, d.Vanished} {
		sort.SliceStable(ps, func(i, j int) bool { return ps[i].SelfNanos > ps[j].SelfNanos })
	}
	return d
}

// screen tells whether a metric of a method moved past the thresholds: 1 up, -1 down, 0 not.
// Both the medians and the minimums of the runs must move by the threshold and the floor, the
// same way. Noise (preemption, cache and page faults) only ever adds time, so the fastest run
// is the closest to a method's cost: a change the fastest runs do not show is noise landing in
// a few runs. The entry carries the rank test's p-value, for the caller to decide.
func screen(name, metric string, b, h []uint64, floor float64, opt DiffOptions) (DiffEntry, int) {
	mb, mh := median(b), median(h)
	e := DiffEntry{Method: name, Display: engine.DisplayIfOther(name), Metric: metric, Base: mb, Head: mh, BaseMin: float64(slices.Min(b)), HeadMin: float64(slices.Min(h)),
		P: 1, PAdjusted: 1, BaseRuns: b, HeadRuns: h}
	if mb > 0 {
		pct := 100 * (mh - mb) / mb
		e.ChangePct = &pct
	}
	shift := func(x, y float64) int {
		delta := y - x
		if delta == 0 || math.Abs(delta) < floor || x > 0 && 100*math.Abs(delta)/x < opt.ThresholdPct {
			return 0
		}
		if delta > 0 {
			return 1
		}
		return -1
	}
	dir := shift(mb, mh)
	if dir == 0 || shift(e.BaseMin, e.HeadMin) != dir {
		return e, 0
	}
	e.P = MannWhitneyP(b, h)
	return e, dir
}

func constant(v []uint64) bool { return slices.Min(v) == slices.Max(v) }

func (d *DiffResult) presence(name string, calls, self, otherSelf []uint64, in int) PresenceEntry {
	return PresenceEntry{Method: name, Display: engine.DisplayIfOther(name), Calls: median(calls), SelfNanos: median(self), Runs: in, P: MannWhitneyP(otherSelf, self), SelfRuns: self}
}

func present(calls []uint64) int {
	n := 0
	for _, c := range calls {
		if c > 0 {
			n++
		}
	}
	return n
}

func median(v []uint64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]uint64(nil), v...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	n := len(s)
	if n%2 == 1 {
		return float64(s[n/2])
	}
	return (float64(s[n/2-1]) + float64(s[n/2])) / 2
}
