package report

import (
	"sort"
	"strings"

	"github.com/msgtrace/msgtrace/tracer/engine"
	"github.com/msgtrace/msgtrace/tracer/stream"
)

// Launch is how a process launched, for the report: its launch marks in order (process start,
// library loaded, first call, main) up to the end of the launch, the steps between them, and
// the +load and +initialize calls with their durations.
//
// The end of the launch is the first mark the app set (msgtrace_mark: "first frame", say),
// or, without one, the end of the first call on the main thread, started at or after main,
// that was busy longer than the budget with no run-loop wait inside (the launch's work:
// -[NSApplication finishLaunching], applicationDidFinishLaunching: and the like, not the run
// loop around them), or, without one, the end of the process's last call.
type Launch struct {
	Program string `json:"program"`
	PID     uint64 `json:"pid"`
	// Marks are every instant of the process (launch marks and the app's), in time order.
	Marks []LaunchMark `json:"marks"`
	// Steps go from each launch mark to the next, ending with the end of the launch.
	Steps     []LaunchStep `json:"steps"`
	End       LaunchEnd    `json:"end"`
	DurNanos  uint64       `json:"dur_ns"`                   // from the first mark (process start) to the end
	MainNanos uint64       `json:"before_main_ns,omitempty"` // from process start to main, when both are known

	// The +load and +initialize calls (selector load or initialize, any class), every one, in
	// the order they started (the report's text lists the longest). A call nested in another
	// of the same selector counts in Calls but not again in Nanos.
	Load       LaunchCalls `json:"load"`
	Initialize LaunchCalls `json:"initialize"`
}

// LaunchMark is an instant of the process.
type LaunchMark struct {
	Name           string `json:"name"`
	Kind           string `json:"kind"` // process start, library loaded, first call, main, mark
	StartNanos     uint64 `json:"start_ns"`
	PrecisionNanos uint64 `json:"precision_ns"`  // it lies in [start_ns - precision_ns, start_ns]
	TID            uint64 `json:"tid,omitempty"` // the thread an app's mark was set on
}

// LaunchStep is the time from one launch mark to the next.
type LaunchStep struct {
	From     string `json:"from"`
	To       string `json:"to"`
	DurNanos uint64 `json:"dur_ns"`
}

// LaunchEnd says where the launch ended and why.
type LaunchEnd struct {
	Reason     string `json:"reason"` // "mark", "long call" or "last call"
	Name       string `json:"name"`   // the mark's name or the call's method
	StartNanos uint64 `json:"start_ns"`
	EndNanos   uint64 `json:"end_ns"`
}

// LaunchCalls are the calls of one selector during the run.
type LaunchCalls struct {
	Calls uint64       `json:"calls"`
	Nanos uint64       `json:"ns"`
	List  []ReportCall `json:"list"`
}

// launchState is the report's view of one process's launch while the trace is read.
type launchState struct {
	l        *Launch
	main     uint64 // main's mark, when there is one
	haveMain bool
	long     *ReportCall // the earliest long call on the main thread after main
	lastEnd  uint64
	active   [2]int // +load / +initialize calls open on the current thread's stack
}

// LaunchOutermost says whether a +load or +initialize call is outside every other call of its
// selector (its time is counted in LaunchCalls.Nanos).
func LaunchOutermost(c *ReportCall) bool {
	k := launchSelector(c.Method)
	for _, s := range c.Stack {
		if launchSelector(s) == k {
			return false
		}
	}
	return true
}

// launchSelector tells a +load (0) or +initialize (1) call by its name; -1 for others.
func launchSelector(name string) int {
	if !strings.HasPrefix(name, "+[") {
		return -1
	}
	switch {
	case strings.HasSuffix(name, " load]"):
		return 0
	case strings.HasSuffix(name, " initialize]"):
		return 1
	}
	return -1
}

// launchOf returns the process's launch state, made from its header the first time.
func (r *reportTree) launchOf(h *stream.Header) *launchState {
	if r.launches == nil {
		r.launches = map[uint64]*launchState{}
	}
	st := r.launches[h.PID]
	if st == nil {
		st = &launchState{l: &Launch{Program: h.Program, PID: h.PID, Marks: []LaunchMark{}, Steps: []LaunchStep{}}}
		for _, in := range h.Instants {
			if in.Kind == stream.InstantCrash {
				continue // not a step of the launch
			}
			st.l.Marks = append(st.l.Marks, LaunchMark{Name: in.Name, Kind: in.Kind.String(), StartNanos: in.Nanos, PrecisionNanos: in.PrecisionNanos, TID: in.TID})
			if in.Kind == stream.InstantMain && !st.haveMain {
				st.main, st.haveMain = in.Nanos, true
			}
		}
		r.launches[h.PID] = st
		r.launchOrder = append(r.launchOrder, h.PID)
	}
	st.active = [2]int{}
	return st
}

// launchEnter notes a call entering (for +load / +initialize nesting).
func (r *reportTree) launchEnter(c *engine.Call) {
	if k := launchSelector(c.Name); k >= 0 && r.launch != nil {
		r.launch.active[k]++
	}
}

// launchExit takes a call's final times: +load / +initialize calls, the first long call on the
// main thread after main, the process's last end.
func (r *reportTree) launchExit(c *engine.Call, mk func() ReportCall, busyLong, idle bool) {
	st := r.launch
	if st == nil {
		return
	}
	st.lastEnd = max(st.lastEnd, c.StartNanos+c.DurNanos)
	if k := launchSelector(c.Name); k >= 0 {
		lc := &st.l.Load
		if k == 1 {
			lc = &st.l.Initialize
		}
		st.active[k]--
		lc.Calls++
		if st.active[k] == 0 {
			lc.Nanos += c.DurNanos
		}
		lc.List = append(lc.List, mk())
	}
	if r.th.Main && busyLong && !idle && (!st.haveMain || c.StartNanos >= st.main) &&
		(st.long == nil || c.StartNanos < st.long.StartNanos) {
		rc := mk()
		st.long = &rc
	}
}

// launches finishes every process's launch: only those with launch marks or +load /
// +initialize calls are reported.
func (r *reportTree) finishLaunches() []Launch {
	out := []Launch{}
	for _, pid := range r.launchOrder {
		st := r.launches[pid]
		l := st.l
		launchMarks := 0
		for _, m := range l.Marks {
			if m.Kind != stream.InstantApp.String() {
				launchMarks++
			}
		}
		if launchMarks == 0 && l.Load.Calls == 0 && l.Initialize.Calls == 0 {
			continue
		}
		for _, lc := range []*LaunchCalls{&l.Load, &l.Initialize} {
			sort.SliceStable(lc.List, func(i, j int) bool { return lc.List[i].StartNanos < lc.List[j].StartNanos })
			if lc.List == nil {
				lc.List = []ReportCall{}
			}
		}
		for _, m := range l.Marks {
			if m.Kind == stream.InstantApp.String() {
				l.End = LaunchEnd{Reason: "mark", Name: m.Name, StartNanos: m.StartNanos, EndNanos: m.StartNanos}
				break
			}
		}
		if l.End.Reason == "" && st.long != nil {
			l.End = LaunchEnd{Reason: "long call", Name: st.long.Method, StartNanos: st.long.StartNanos, EndNanos: st.long.StartNanos + st.long.DurNanos}
		}
		if l.End.Reason == "" {
			l.End = LaunchEnd{Reason: "last call", StartNanos: st.lastEnd, EndNanos: st.lastEnd}
		}
		var prev *LaunchMark
		var start uint64
		for i := range l.Marks {
			m := &l.Marks[i]
			if m.Kind == stream.InstantApp.String() || m.StartNanos > l.End.EndNanos {
				continue
			}
			if prev == nil {
				start = m.StartNanos
			} else {
				l.Steps = append(l.Steps, LaunchStep{From: prev.Name, To: m.Name, DurNanos: m.StartNanos - prev.StartNanos})
			}
			if m.Kind == stream.InstantMain.String() && l.Marks[0].Kind == stream.InstantProcessStart.String() {
				l.MainNanos = m.StartNanos - l.Marks[0].StartNanos
			}
			prev = m
		}
		if prev != nil {
			to := l.End.Name
			if l.End.Reason == "long call" {
				to = "the end of " + to
			} else if l.End.Reason == "last call" {
				to = "the last call's end"
			}
			l.Steps = append(l.Steps, LaunchStep{From: prev.Name, To: to, DurNanos: l.End.EndNanos - min(prev.StartNanos, l.End.EndNanos)})
			l.DurNanos = l.End.EndNanos - min(start, l.End.EndNanos)
		}
		out = append(out, *l)
	}
	return out
}
