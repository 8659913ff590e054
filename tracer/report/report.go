package report

import (
	"sort"
	"strings"

	"github.com/msgtrace/msgtrace/tracer/engine"
	"github.com/msgtrace/msgtrace/tracer/stream"
)

// The report answers questions about a trace instead of drawing it: what held each main thread
// past a frame's budget (hitches), where each thread spent its time, the longest calls, and
// what the recorder lost. It is a TreeSink: calls arrive per thread in pre-order, and it keeps
// only the open calls (one frame per depth), one entry per distinct method of the current
// thread and of the whole trace, and lists of at most Top entries; never one entry per call.

// DefaultBudgetNanos is a frame at 60 Hz.
const DefaultBudgetNanos = 16_000_000

// DefaultIdle are the methods whose own time is a run loop waiting for work, not work: Apple's
// and GNUstep's run loops and their event waits. Their own time is idle, not busy; a call with
// idle time inside drives a run loop and is never a hitch itself (a long stretch of work between
// two waits is a call inside it).
var DefaultIdle = []string{
	"-[NSRunLoop run]",
	"-[NSRunLoop runUntilDate:]",
	"-[NSRunLoop runMode:beforeDate:]",
	"-[NSRunLoop acceptInputForMode:beforeDate:]",
	"-[GSRunLoopCtxt pollUntil:within:]",
	"-[NSApplication run]",
	"-[NSApplication nextEventMatchingMask:untilDate:inMode:dequeue:]",
	"-[UIApplication _run]",
}

// ReportOptions configure a report.
type ReportOptions struct {
	BudgetNanos uint64   // main-thread calls busier than this are hitches (0: DefaultBudgetNanos)
	Top         int      // the length of every list (0: 10)
	Idle        []string // patterns of run-loop waits (nil: DefaultIdle; empty non-nil: none)
	Children    int      // heaviest children shown per hitch (0: 5)
}

// Report is what a ReportSink found, ready for encoding/json.
type Report struct {
	BudgetNanos  uint64   `json:"budget_ns"`
	IdlePatterns []string `json:"idle_patterns"`

	Recorder RecorderTotals `json:"recorder"`

	// Hitches: on main threads, the calls longer than the budget none of whose children is (and
	// with no run-loop wait inside), longest first; HitchCount and HitchNanos count all of them,
	// Hitches lists Top.
	HitchCount int          `json:"hitch_count"`
	HitchNanos uint64       `json:"hitch_ns"`
	Hitches    []ReportCall `json:"hitches"`
	// The same rule on every other thread: long calls, not hitches.
	OffMainCount int          `json:"off_main_count"`
	OffMain      []ReportCall `json:"off_main"`

	Longest   []ReportCall `json:"longest"` // the longest calls of the trace, any thread, any depth
	OpenCount uint64       `json:"open_count"`
	Open      []ReportCall `json:"open"` // calls still running at the end of the trace, longest first
	Unwound   uint64       `json:"unwound"`
	Losses    Losses       `json:"losses"`

	Methods MethodTops     `json:"methods"` // over every thread
	Threads []ThreadReport `json:"threads"`

	// Launches: each process with launch marks or +load / +initialize calls (report_launch.go).
	Launches []Launch `json:"launches"`

	all map[string]*MethodStat
}

// AllMethods returns every method of the trace with its calls, self and total time over every
// thread, by name.
func (r *Report) AllMethods() map[string]MethodStat {
	out := make(map[string]MethodStat, len(r.all))
	for k, v := range r.all {
		out[k] = *v
	}
	return out
}

// RecorderTotals are the reader's and the recorder's counters (Totals).
type RecorderTotals struct {
	Processes uint64 `json:"processes"`
	Threads   uint64 `json:"threads"`
	Calls     uint64 `json:"calls"`
	Kept      uint64 `json:"kept"`
	Dropped   uint64 `json:"dropped"`
	Overflow  uint64 `json:"overflow"`
	Open      uint64 `json:"open"`
	Marks     uint64 `json:"marks"`
	BadFrames uint64 `json:"bad_frames"`
	BadBytes  uint64 `json:"bad_bytes"`
	TornBytes uint64 `json:"torn_bytes"`
	Unended   uint64 `json:"unended"`
	Unwritten uint64 `json:"unwritten"`
}

// ReportCall is one call of a list: where it ran, how long, the calls around it (outermost
// first, not including itself) and, for hitches, its heaviest children by method.
type ReportCall struct {
	Thread     string      `json:"thread"`
	PID        uint64      `json:"pid"`
	TID        uint64      `json:"tid"`
	Method     string      `json:"method"`
	Display    string      `json:"display,omitempty"` // Method as people write it, when it differs (a Swift class's)
	StartNanos uint64      `json:"start_ns"`
	DurNanos   uint64      `json:"dur_ns"`
	SelfNanos  uint64      `json:"self_ns"`
	IdleNanos  uint64      `json:"idle_ns,omitempty"`          // run-loop waits inside it
	WaitNanos  uint64      `json:"recorder_wait_ns,omitempty"` // the recorder waiting for buffer space inside it
	Open       bool        `json:"open,omitempty"`             // still running at the end of the trace
	Unwound    bool        `json:"unwound,omitempty"`          // an exception (longjmp, thread exit) went through it
	Stack      []string    `json:"stack"`
	Children   []ChildStat `json:"children,omitempty"`
	CPU        *CallCPU    `json:"cpu,omitempty"`         // running and not, from the thread's CPU samples (report_cpu.go)
	EnqueuedBy *HopRef     `json:"enqueued_by,omitempty"` // work handed to its thread: who asked (hops.go)
	// Waits are the contended waits inside the call, longest first (waits.go), and
	// WaitNanos their time: the call's time less it was spent running (or runnable).
	Waits        []ReportWait `json:"waits,omitempty"`
	WaitingNanos uint64       `json:"waits_ns,omitempty"`
	Why          string       `json:"why,omitempty"` // the sentence: time outside waits, each wait and its holder
}

// ChildStat is what the direct children of a call named Method added up to.
type ChildStat struct {
	Method   string `json:"method"`
	Calls    uint64 `json:"calls"`
	DurNanos uint64 `json:"dur_ns"`
}

// MethodStat is a method's calls, self time and total time (a recursive call's time counted
// once: only the outermost call of a method on a thread's stack adds to its total).
type MethodStat struct {
	Method     string `json:"method"`
	Calls      uint64 `json:"calls"`
	SelfNanos  uint64 `json:"self_ns"`
	TotalNanos uint64 `json:"total_ns"`
	Idle       bool   `json:"idle,omitempty"`    // a run-loop wait (ReportOptions.Idle): its self time is waiting
	Display    string `json:"display,omitempty"` // a Swift class's method as people write it (DisplayName), when it differs
}

// MethodTops are the top methods three ways.
type MethodTops struct {
	BySelf  []MethodStat `json:"by_self"`
	ByTotal []MethodStat `json:"by_total"`
	ByCalls []MethodStat `json:"by_calls"`
}

// ThreadReport is one thread.
type ThreadReport struct {
	Program   string     `json:"program,omitempty"`
	PID       uint64     `json:"pid"`
	TID       uint64     `json:"tid"`
	Name      string     `json:"name"`
	Main      bool       `json:"main"`
	Calls     uint64     `json:"calls"`
	BusyNanos uint64     `json:"busy_ns"` // in traced calls, less run-loop waits
	IdleNanos uint64     `json:"idle_ns"` // run-loop waits
	Hitches   int        `json:"hitches"` // calls over the budget none of whose children is (hitches on a main thread)
	Unwound   uint64     `json:"unwound"`
	Open      uint64     `json:"open"`
	Lost      uint64     `json:"lost"` // calls lost, overflowed or overwritten (marks)
	Methods   MethodTops `json:"methods"`
	CPU       *ThreadCPU `json:"cpu,omitempty"` // its CPU samples' totals (report_cpu.go)
}

// Losses add up the marks of the trace: calls not recorded, and the recorder's waits.
type Losses struct {
	Lost        MarkStat `json:"lost"`        // no buffer space (MSGTRACE_FULL=drop)
	Overflow    MarkStat `json:"overflow"`    // deeper than the shadow stack
	Overwritten MarkStat `json:"overwritten"` // ring mode
	Waits       struct {
		Count uint64 `json:"count"`
		Nanos uint64 `json:"ns"`
	} `json:"waits"` // threads waiting for buffer space
}

// MarkStat counts marks of one kind and the calls they stand for.
type MarkStat struct {
	Marks uint64 `json:"marks"`
	Calls uint64 `json:"calls"`
}

// ReportSink builds a Report; its Sink replays calls in pre-order.
type ReportSink struct {
	engine.Sink
	t *reportTree
}

// NewReportSink returns a sink that builds a report; read it with Report after Close.
func NewReportSink(opt ReportOptions) *ReportSink {
	if opt.BudgetNanos == 0 {
		opt.BudgetNanos = DefaultBudgetNanos
	}
	if opt.Top <= 0 {
		opt.Top = 10
	}
	if opt.Children <= 0 {
		opt.Children = 5
	}
	if opt.Idle == nil {
		opt.Idle = DefaultIdle
	}
	t := &reportTree{opt: opt, idle: engine.CompilePatterns(opt.Idle), idleOf: map[string]bool{}, all: map[string]*MethodStat{}}
	t.rep = &Report{BudgetNanos: opt.BudgetNanos, IdlePatterns: append([]string{}, opt.Idle...)}
	return &ReportSink{Sink: engine.PreOrder(t), t: t}
}

// treeSink lets an engine that produces pre-order itself drive the report directly.
// Needs: calls in pre-order, every one.
func (s *ReportSink) Needs() engine.Needs { return engine.Needs{Tree: s.t} }

// Report returns the report; complete after Close.
func (s *ReportSink) Report() *Report { return s.t.rep }

// maxKids bounds the distinct child methods counted per open call; the rest are "(other)".
const maxKids = 64

// OtherChildren names the children of a call past the first maxKids distinct methods.
const OtherChildren = "(other methods)"

type reportTree struct {
	opt    ReportOptions
	idle   []engine.Pattern
	idleOf map[string]bool
	rep    *Report
	all    map[string]*MethodStat

	// the current thread
	th      *ThreadReport
	label   string
	methods map[string]*threadMethod
	stack   []reportFrame

	hitches, offMain, longest, open topCalls

	launches    map[uint64]*launchState // by pid (report_launch.go)
	launchOrder []uint64
	launch      *launchState       // the current thread's process
	cpu         []stream.CPUSample // the current thread's CPU samples (report_cpu.go)
	hops        *stream.Hops       // the current thread's process's (hops.go)

	w waitState // contended waits (waits.go)
}

type threadMethod struct {
	name   string
	idle   bool
	active int // calls of it open on the stack
	calls  uint64
	self   uint64
	total  uint64
}

type kidStat struct {
	m     *threadMethod // nil: the other methods
	calls uint64
	dur   uint64
}

type reportFrame struct {
	m       *threadMethod
	start   uint64
	longKid bool   // a child was busy longer than the budget
	idle    uint64 // run-loop waits in the children's subtrees
	wait    uint64 // recorder waits inside
	kids    []kidStat
}

func (r *reportTree) BeginThread(h *stream.Header, t *stream.Thread) error {
	r.th = &ThreadReport{Program: h.Program, PID: h.PID, TID: t.TID, Name: engine.ThreadLabel(t), Main: t.Main}
	if t.PID != 0 {
		r.th.PID = t.PID
	}
	r.label = r.th.Name
	r.launch = r.launchOf(h)
	r.cpu = cpuOf(h, t.TID)
	r.hops = h.Hops
	if h.Hops != nil {
		if r.w.hops == nil {
			r.w.hops = map[uint64]*stream.Hops{}
		}
		r.w.hops[r.th.PID] = h.Hops
	}
	r.methods = map[string]*threadMethod{}
	r.stack = r.stack[:0]
	return nil
}

func (r *reportTree) method(name string) *threadMethod {
	m := r.methods[name]
	if m == nil {
		idle, ok := r.idleOf[name]
		if !ok {
			idle = engine.MatchAny(r.idle, name)
			r.idleOf[name] = idle
		}
		m = &threadMethod{name: name, idle: idle}
		r.methods[name] = m
	}
	return m
}

func (r *reportTree) Enter(c *engine.Call, depth int) error {
	if depth > len(r.stack) { // not expected from PreOrder: attach to what is open
		depth = len(r.stack)
	}
	r.stack = r.stack[:depth]
	m := r.method(c.Name)
	m.active++
	r.launchEnter(c)
	r.waitEnter(depth)
	if cap(r.stack) > depth {
		r.stack = r.stack[:depth+1]
		f := &r.stack[depth]
		*f = reportFrame{m: m, start: c.StartNanos, kids: f.kids[:0]}
	} else {
		r.stack = append(r.stack, reportFrame{m: m, start: c.StartNanos})
	}
	return nil
}

// Exit reads the call's duration, self time and flags: they are final only here.
func (r *reportTree) Exit(c *engine.Call, depth int) error {
	if depth >= len(r.stack) { // not expected from PreOrder
		return nil
	}
	f := &r.stack[depth]
	m := f.m
	dur, self := c.DurNanos, c.SelfNanos
	m.calls++
	m.self += self
	if m.active--; m.active == 0 {
		m.total += dur
	}
	th := r.th
	th.Calls++
	idle := f.idle
	if m.idle {
		idle += self
	}
	busy := dur - min(dur, idle)
	waits := r.waitExit(c, depth)
	long := busy > r.opt.BudgetNanos && c.Flags&stream.FlagWait == 0 // a wait is its caller's
	open, unwound := c.Flags&stream.FlagOpen != 0, c.Flags&stream.FlagUnwound != 0
	if open {
		th.Open++
		r.rep.OpenCount++
	}
	if unwound {
		th.Unwound++
		r.rep.Unwound++
	}
	mk := func() ReportCall {
		rc := ReportCall{Thread: r.label, PID: th.PID, TID: th.TID, Method: m.name, Display: engine.DisplayIfOther(m.name), StartNanos: f.start,
			DurNanos: dur, SelfNanos: self, IdleNanos: idle, WaitNanos: f.wait, Open: open, Unwound: unwound,
			Stack: make([]string, depth), CPU: callCPU(r.cpu, f.start, dur), Waits: waits}
		for _, w := range waits {
			rc.WaitingNanos += w.DurNanos
		}
		for i := 0; i < depth; i++ {
			rc.Stack[i] = r.stack[i].m.name
		}
		rc.EnqueuedBy = hopRef(r.hops, th.TID, f.start)
		return rc
	}
	if long && idle == 0 && !m.idle && !f.longKid {
		th.Hitches++
		list := &r.offMain
		if th.Main {
			list = &r.hitches
			r.rep.HitchCount++
			r.rep.HitchNanos += dur
		} else {
			r.rep.OffMainCount++
		}
		if list.wants(r.opt.Top, dur, f.start) {
			rc := mk()
			rc.Children = r.children(f)
			list.add(r.opt.Top, rc)
		}
	}
	if r.longest.wants(r.opt.Top, dur, f.start) {
		r.longest.add(r.opt.Top, mk())
	}
	if open && r.open.wants(r.opt.Top, dur, f.start) {
		r.open.add(r.opt.Top, mk())
	}
	r.launchExit(c, mk, long, idle > 0 || m.idle)
	if depth > 0 {
		p := &r.stack[depth-1]
		p.longKid = p.longKid || long
		p.idle += idle
		p.wait += f.wait
		p.addKid(m, dur)
	} else {
		th.BusyNanos += busy
		th.IdleNanos += dur - busy
	}
	r.stack = r.stack[:depth]
	return nil
}

func (f *reportFrame) addKid(m *threadMethod, dur uint64) {
	for i := range f.kids {
		if f.kids[i].m == m {
			f.kids[i].calls++
			f.kids[i].dur += dur
			return
		}
	}
	if len(f.kids) < maxKids {
		f.kids = append(f.kids, kidStat{m: m, calls: 1, dur: dur})
		return
	}
	if f.kids[len(f.kids)-1].m != nil {
		f.kids = append(f.kids, kidStat{})
	}
	o := &f.kids[len(f.kids)-1]
	o.calls++
	o.dur += dur
}

// children lists a call's heaviest children by method.
func (r *reportTree) children(f *reportFrame) []ChildStat {
	ks := append([]kidStat(nil), f.kids...)
	sort.SliceStable(ks, func(i, j int) bool { return ks[i].dur > ks[j].dur })
	var out []ChildStat
	for _, k := range ks {
		if len(out) == r.opt.Children {
			break
		}
		name := OtherChildren
		if k.m != nil {
			name = k.m.name
		}
		out = append(out, ChildStat{Method: name, Calls: k.calls, DurNanos: k.dur})
	}
	return out
}

func (r *reportTree) Mark(m *stream.Mark, depth int) error {
	l := &r.rep.Losses
	switch m.Kind {
	case stream.MarkLost:
		l.Lost.Marks++
		l.Lost.Calls += m.Count
	case stream.MarkOverflow:
		l.Overflow.Marks++
		l.Overflow.Calls += m.Count
	case stream.MarkOverwritten:
		l.Overwritten.Marks++
		l.Overwritten.Calls += m.Count
	case stream.MarkRelease: // a lock released with waiters: who held it (waits.go)
		r.waitReleased(m)
		return nil
	case stream.MarkWait:
		l.Waits.Count++
		l.Waits.Nanos += m.DurNanos
		if depth > 0 && depth <= len(r.stack) {
			r.stack[depth-1].wait += m.DurNanos
		}
	}
	if m.Kind != stream.MarkWait {
		r.th.Lost += m.Count
	}
	return nil
}

func (r *reportTree) EndThread() error {
	th := r.th
	ms := make([]MethodStat, 0, len(r.methods))
	for _, m := range r.methods {
		ms = append(ms, MethodStat{Method: m.name, Display: engine.DisplayIfOther(m.name), Calls: m.calls, SelfNanos: m.self, TotalNanos: m.total, Idle: m.idle})
		a := r.all[m.name]
		if a == nil {
			a = &MethodStat{Method: m.name, Display: engine.DisplayIfOther(m.name), Idle: m.idle}
			r.all[m.name] = a
		}
		a.Calls += m.calls
		a.SelfNanos += m.self
		a.TotalNanos += m.total
	}
	th.Methods = tops(ms, r.opt.Top)
	th.CPU = threadCPU(r.cpu)
	r.rep.Threads = append(r.rep.Threads, *th)
	r.methods = nil
	return nil
}

func (r *reportTree) Close(t engine.Totals) error {
	rep := r.rep
	rep.Recorder = RecorderTotals{Processes: t.Processes, Threads: t.Threads, Calls: t.Calls, Kept: t.Kept,
		Dropped: t.Dropped, Overflow: t.Overflow, Open: t.Open, Marks: t.Marks, BadFrames: t.BadFrames,
		BadBytes: t.BadBytes, TornBytes: t.TornBytes, Unended: t.Unended, Unwritten: t.Unwritten}
	if rep.Recorder.Processes == 0 && len(rep.Threads) > 0 { // a raw dump: one process
		rep.Recorder.Processes = 1
	}
	rep.Hitches = r.hitches.list()
	rep.OffMain = r.offMain.list()
	rep.Longest = r.longest.list()
	rep.Open = r.open.list()
	r.waitsClose(rep)
	ms := make([]MethodStat, 0, len(r.all))
	for _, m := range r.all {
		ms = append(ms, *m)
	}
	rep.Methods = tops(ms, r.opt.Top)
	rep.all = r.all
	rep.Launches = r.finishLaunches()
	return nil
}

// tops sorts methods three ways and keeps n of each.
func tops(ms []MethodStat, n int) MethodTops {
	by := func(key func(*MethodStat) uint64) []MethodStat {
		sort.Slice(ms, func(i, j int) bool {
			a, b := key(&ms[i]), key(&ms[j])
			return a > b || a == b && ms[i].Method < ms[j].Method
		})
		return append([]MethodStat{}, ms[:min(n, len(ms))]...)
	}
	return MethodTops{
		BySelf:  by(func(m *MethodStat) uint64 { return m.SelfNanos }),
		ByTotal: by(func(m *MethodStat) uint64 { return m.TotalNanos }),
		ByCalls: by(func(m *MethodStat) uint64 { return m.Calls }),
	}
}

// topCalls keeps the n longest calls, longest first (earlier first among equals).
type topCalls []ReportCall

func better(dur, start uint64, c *ReportCall) bool {
	return dur > c.DurNanos || dur == c.DurNanos && start < c.StartNanos
}

// wants tells whether a call of this duration would make the list, before it is built.
func (t topCalls) wants(n int, dur, start uint64) bool {
	return len(t) < n || better(dur, start, &t[len(t)-1])
}

func (t *topCalls) add(n int, c ReportCall) {
	i := sort.Search(len(*t), func(i int) bool { return better(c.DurNanos, c.StartNanos, &(*t)[i]) })
	*t = append(*t, ReportCall{})
	copy((*t)[i+1:], (*t)[i:])
	(*t)[i] = c
	if len(*t) > n {
		*t = (*t)[:n]
	}
}

func (t topCalls) list() []ReportCall {
	if t == nil {
		return []ReportCall{}
	}
	return t
}

// StackString joins a stack for a person: outermost first, each method as DisplayName shows it.
func StackString(stack []string) string {
	ds := make([]string, len(stack))
	for i, s := range stack {
		ds[i] = engine.DisplayName(s)
	}
	return strings.Join(ds, " > ")
}
