package tracer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/msgtrace/msgtrace/tracer/engine"
	"github.com/msgtrace/msgtrace/tracer/report"
	"github.com/msgtrace/msgtrace/tracer/stream"
)

// rnode is a call of a test trace, times in ms (ticks are ns).
type rnode struct {
	name       string
	start, end float64
	kids       []*rnode
	unwound    bool
}

func rn(name string, start, end float64, kids ...*rnode) *rnode {
	return &rnode{name: name, start: start, end: end, kids: kids}
}

const ms = 1_000_000

// rthread is a thread of a test stream: its calls and marks.
type rthread struct {
	tid   uint64
	main  bool
	name  string
	roots []*rnode
	marks []stream.StreamEvent // Type EventMark, ticks in ns
}

// reportStream writes one process's stream: threads' calls in the order they ended, marks
// placed by their end, a last clock frame at endMS and an end frame.
func reportStream(t testing.TB, pid uint64, endMS float64, threads ...rthread) []byte {
	t.Helper()
	var b bytes.Buffer
	w := stream.NewStreamWriter(&b)
	w.Process(stream.StreamProcess{PID: pid, Name: "app"})
	w.Clock(stream.ClockSample{Tick: 0, MonoNanos: 1e9, RateNum: 1, RateDen: 1})
	ids := map[string]uint64{}
	id := func(name string) uint64 {
		if v, ok := ids[name]; ok {
			return v
		}
		v := uint64(len(ids) + 1)
		ids[name] = v
		cls, sel, _ := strings.Cut(strings.Trim(name[1:], "[]"), " ")
		fl := uint64(0)
		if name[0] == '+' {
			fl = stream.MethodClass
		}
		w.Methods(stream.StreamMethod{ID: v, Flags: fl, Class: cls, Selector: sel})
		return v
	}
	for _, th := range threads {
		fl := uint64(0)
		if th.main {
			fl = stream.ThreadMain
		}
		w.Thread(stream.StreamThread{TID: th.tid, Flags: fl, Name: th.name})
		var evs []stream.StreamEvent
		var post func(n *rnode, depth uint64)
		post = func(n *rnode, depth uint64) {
			for _, k := range n.kids {
				post(k, depth+1)
			}
			typ := stream.EventCall
			if n.unwound {
				typ = stream.EventUnwound
			}
			evs = append(evs, stream.StreamEvent{Type: typ, ID: id(n.name), Start: uint64(n.start * ms), End: uint64(n.end * ms), Depth: depth})
		}
		for _, r := range th.roots {
			post(r, 0)
		}
		evs = append(evs, th.marks...)
		sort.SliceStable(evs, func(i, j int) bool { return evs[i].End < evs[j].End })
		if _, err := w.Events(th.tid, 0, evs); err != nil {
			t.Fatal(err)
		}
	}
	w.Clock(stream.ClockSample{Tick: uint64(endMS * ms), MonoNanos: 1e9 + uint64(endMS*ms), RateNum: 1, RateDen: 1})
	w.End(stream.StreamCounters{})
	if w.Err() != nil {
		t.Fatal(w.Err())
	}
	return b.Bytes()
}

func reportOf(t *testing.T, opt report.ReportOptions, streams ...[]byte) *report.Report {
	t.Helper()
	var ins []engine.Input
	for _, s := range streams {
		ins = append(ins, engine.Input{R: bytes.NewReader(s), Size: int64(len(s))})
	}
	s := report.NewReportSink(opt)
	if _, err := engine.ProcessStreams(ins, engine.Options{MaxDepth: -1}, s); err != nil {
		t.Fatal(err)
	}
	return s.Report()
}

func callKeys(cs []report.ReportCall) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Thread+" "+c.Method+" in "+report.StackString(c.Stack))
	}
	return out
}

// TestReport: hitches are the innermost main-thread calls over the budget (a call whose long
// time is all in its own body counts, one with a long child does not, a run loop's wait is no
// hitch), other threads' long calls are listed apart, recursion is counted once in total time,
// marks and open and unwound calls are counted.
func TestReport(t *testing.T) {
	mainTh := rthread{tid: 1, main: true, roots: []*rnode{
		rn("+[App run]", 0, 200,
			rn("-[App frame:]", 0, 10, rn("-[View layout]", 1, 5)),
			rn("-[App frame:]", 10, 70,
				rn("-[View layout]", 10, 12),
				rn("-[Loader load]", 12, 62, rn("-[Parser parse:]", 13, 14), rn("-[Parser parse:]", 14, 15), rn("-[Parser parse:]", 15, 16), rn("-[Cache put:]", 16, 16.5))),
			rn("-[App frame:]", 70, 100, rn("-[View layout]", 70, 72)),
			rn("-[NSRunLoop runMode:beforeDate:]", 100, 200, rn("-[Timer fire]", 150, 152))),
		// a method of the app driving a run loop: 20 ms of work between waits, no hitch
		rn("-[App spin]", 300, 400,
			rn("-[NSRunLoop runMode:beforeDate:]", 300, 350, rn("-[Timer fire]", 300, 310)),
			rn("-[NSRunLoop runMode:beforeDate:]", 350, 400, rn("-[Timer fire]", 350, 360))),
	}, marks: []stream.StreamEvent{{Type: stream.EventMark, ID: uint64(stream.MarkWait), Start: 20 * ms, End: 25 * ms}}}
	visit := rn("-[Node visit]", 110, 140, rn("-[Node visit]", 111, 130, rn("-[Node visit]", 112, 120)))
	boom := rn("-[Worker boom]", 140, 141)
	boom.unwound = true
	worker := rthread{tid: 2, name: "worker", roots: []*rnode{
		rn("-[Worker main]", 0, 300, rn("-[Worker crunch]", 0, 100), rn("-[Worker crunch]", 100, 110), visit, boom),
	}, marks: []stream.StreamEvent{{Type: stream.EventMark, ID: uint64(stream.MarkLost), Start: 301 * ms, End: 302 * ms, Count: 7}}}
	stream := reportStream(t, 42, 500, mainTh, worker)
	rep := reportOf(t, report.ReportOptions{}, stream)

	if got, want := callKeys(rep.Hitches), []string{"main -[Loader load] in +[App run] > -[App frame:]", "main -[App frame:] in +[App run]"}; !reflect.DeepEqual(got, want) {
		t.Errorf("hitches %q, want %q", got, want)
	}
	if rep.HitchCount != 2 || rep.HitchNanos != 80*ms {
		t.Errorf("hitch count %d, %d ns; want 2, 80 ms", rep.HitchCount, rep.HitchNanos)
	}
	if len(rep.Hitches) == 2 {
		h := rep.Hitches[0]
		if h.DurNanos != 50*ms || h.SelfNanos != 46.5*ms || h.WaitNanos != 5*ms || h.PID != 42 || h.TID != 1 || h.StartNanos != 12*ms {
			t.Errorf("hitch %+v", h)
		}
		if want := []report.ChildStat{{Method: "-[Parser parse:]", Calls: 3, DurNanos: 3 * ms}, {Method: "-[Cache put:]", Calls: 1, DurNanos: ms / 2}}; !reflect.DeepEqual(h.Children, want) {
			t.Errorf("children %+v, want %+v", h.Children, want)
		}
	}
	if got, want := callKeys(rep.OffMain), []string{"worker -[Worker crunch] in -[Worker main]", "worker -[Node visit] in -[Worker main] > -[Node visit]"}; !reflect.DeepEqual(got, want) {
		t.Errorf("off main %q, want %q", got, want)
	}
	if rep.Longest[0].Method != "-[Worker main]" || rep.Longest[1].Method != "+[App run]" || len(rep.Longest) != 10 {
		t.Errorf("longest %q", callKeys(rep.Longest))
	}
	var mainR, workerR *report.ThreadReport
	for i := range rep.Threads {
		switch rep.Threads[i].Name {
		case "main":
			mainR = &rep.Threads[i]
		case "worker":
			workerR = &rep.Threads[i]
		}
	}
	if mainR == nil || workerR == nil {
		t.Fatalf("threads %+v", rep.Threads)
	}
	// +[App run] 200 ms, of which the run loop's own 98 ms is waiting; -[App spin] 100 ms, 80 waiting
	if mainR.Calls != 19 || mainR.BusyNanos != 122*ms || mainR.IdleNanos != 178*ms || mainR.Hitches != 2 {
		t.Errorf("main: %d calls, busy %d, idle %d, %d hitches", mainR.Calls, mainR.BusyNanos, mainR.IdleNanos, mainR.Hitches)
	}
	find := func(ms []report.MethodStat, name string) report.MethodStat {
		for _, m := range ms {
			if m.Method == name {
				return m
			}
		}
		t.Errorf("%s not listed", name)
		return report.MethodStat{}
	}
	if v := find(workerR.Methods.ByTotal, "-[Node visit]"); v.Calls != 3 || v.TotalNanos != 30*ms || v.SelfNanos != 30*ms {
		t.Errorf("recursive -[Node visit]: %+v", v)
	}
	if workerR.Methods.BySelf[0].Method != "-[Worker main]" || workerR.Methods.ByCalls[0].Method != "-[Node visit]" {
		t.Errorf("worker tops %+v", workerR.Methods)
	}
	if v := find(rep.Methods.ByCalls, "-[App frame:]"); v.Calls != 3 || v.TotalNanos != 100*ms {
		t.Errorf("-[App frame:] %+v", v)
	}
	if workerR.Unwound != 1 || rep.Unwound != 1 || workerR.Lost != 7 || rep.Losses.Lost != (report.MarkStat{Marks: 1, Calls: 7}) ||
		rep.Losses.Waits.Count != 1 || rep.Losses.Waits.Nanos != 5*ms {
		t.Errorf("unwound %d/%d, lost %d, losses %+v", workerR.Unwound, rep.Unwound, workerR.Lost, rep.Losses)
	}
	if rep.Recorder.Calls != 26 || rep.Recorder.Threads != 2 || rep.Recorder.Processes != 1 {
		t.Errorf("recorder %+v", rep.Recorder)
	}
	all := rep.AllMethods()
	if len(all) != 13 || all["-[Parser parse:]"].Calls != 3 {
		t.Errorf("%d methods: %+v", len(all), all)
	}

	// JSON: the documented keys
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	json.Unmarshal(b, &m)
	for _, k := range []string{"budget_ns", "hitches", "hitch_count", "off_main", "longest", "open", "losses", "methods", "threads", "recorder"} {
		if _, ok := m[k]; !ok {
			t.Errorf("JSON lacks %q", k)
		}
	}
	h := m["hitches"].([]any)[0].(map[string]any)
	for _, k := range []string{"thread", "method", "dur_ns", "self_ns", "stack", "children"} {
		if _, ok := h[k]; !ok {
			t.Errorf("hitch JSON lacks %q: %v", k, h)
		}
	}

	// a tighter budget: the timers' 10 ms and the first frame's 4 ms layout too; 3 listed
	rep = reportOf(t, report.ReportOptions{BudgetNanos: 3 * ms, Top: 3}, stream)
	if got, want := callKeys(rep.Hitches), []string{"main -[Loader load] in +[App run] > -[App frame:]", "main -[App frame:] in +[App run]", "main -[Timer fire] in -[App spin] > -[NSRunLoop runMode:beforeDate:]"}; !reflect.DeepEqual(got, want) || rep.HitchCount != 5 {
		t.Errorf("3 ms budget: %d hitches %q, want %q", rep.HitchCount, got, want)
	}
	// without idle patterns, the run loop's waits are work: its iterations are hitches
	rep = reportOf(t, report.ReportOptions{Idle: []string{}}, stream)
	if rep.HitchCount != 5 || rep.Hitches[0].Method != "-[NSRunLoop runMode:beforeDate:]" || rep.Hitches[0].DurNanos != 100*ms {
		t.Errorf("no idle patterns: %q", callKeys(rep.Hitches))
	}
}

// TestReportOpenAndProcesses: a call still running on a killed process's main thread is a
// hitch (a hang), marked open; two processes' main threads both count.
func TestReportOpenAndProcesses(t *testing.T) {
	a := reportStream(t, 10, 500, rthread{tid: 10, main: true, roots: []*rnode{rn("-[A spin]", 0, 20)}})
	var b bytes.Buffer
	w := stream.NewStreamWriter(&b)
	w.Process(stream.StreamProcess{PID: 20, Name: "child"})
	w.Clock(stream.ClockSample{Tick: 0, MonoNanos: 1e9, RateNum: 1, RateDen: 1})
	w.Methods(stream.StreamMethod{ID: 1, Class: "B", Selector: "hang"}, stream.StreamMethod{ID: 2, Class: "B", Selector: "step"})
	w.Thread(stream.StreamThread{TID: 20, Flags: stream.ThreadMain})
	w.Events(20, 0, []stream.StreamEvent{{ID: 2, Start: 1 * ms, End: 2 * ms, Depth: 1}})
	w.Open(20, 100*ms, []stream.OpenCall{{ID: 1, Start: 0, Depth: 0}})
	w.Clock(stream.ClockSample{Tick: 300 * ms, MonoNanos: 1e9 + 300*ms, RateNum: 1, RateDen: 1})
	rep := reportOf(t, report.ReportOptions{}, a, b.Bytes())
	if got := callKeys(rep.Hitches); len(got) != 2 || got[0] != "main -[B hang] in " || got[1] != "main -[A spin] in " {
		t.Fatalf("hitches %q", got)
	}
	if h := rep.Hitches[0]; !h.Open || h.PID != 20 || h.DurNanos != 300*ms || rep.OpenCount != 1 || len(rep.Open) != 1 {
		t.Errorf("open hitch %+v, %d open", h, rep.OpenCount)
	}
	if rep.Recorder.Processes != 2 || rep.Recorder.Unended != 1 {
		t.Errorf("recorder %+v", rep.Recorder)
	}
}

// reportMaxKids is tracer/report's maxKids: the distinct child methods counted per open call.
const reportMaxKids = 64

// TestReportBoundedChildren: a call with more distinct child methods than are kept lumps the
// rest together.
func TestReportBoundedChildren(t *testing.T) {
	root := rn("-[Big run]", 0, 100)
	for i := 0; i < reportMaxKids+10; i++ {
		name := "-[K m" + strings.Repeat("x", i) + "]"
		root.kids = append(root.kids, rn(name, float64(i), float64(i)+0.5))
	}
	rep := reportOf(t, report.ReportOptions{Children: 100}, reportStream(t, 1, 200, rthread{tid: 1, main: true, roots: []*rnode{root}}))
	h := rep.Hitches[0]
	if len(h.Children) != reportMaxKids+1 || h.Children[0] != (report.ChildStat{Method: report.OtherChildren, Calls: 10, DurNanos: 5 * ms}) {
		t.Errorf("%d children, heaviest %+v", len(h.Children), h.Children[0])
	}
}

// TestFormatFor: strict output names.
func TestFormatFor(t *testing.T) {
	for in, want := range map[string]string{"a.json": "json", "A.SPEEDSCOPE.JSON": "speedscope", "x.pftrace": "perfetto",
		"x.perfetto-trace": "perfetto", "x.pb.gz": "pprof", "x.pprof": "pprof", "x.folded": "folded", "x.svg": "svg"} {
		if got, err := FormatFor(in); got != want || err != nil {
			t.Errorf("FormatFor(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"t.txt", "x.bogus", "x.mtrace", "trace", "x.json.tmp"} {
		if got, err := FormatFor(in); err == nil {
			t.Errorf("FormatFor(%q) = %q, want an error", in, got)
		}
	}
	if err := CheckOutputName("x.svg", "json"); err == nil {
		t.Error("x.svg accepted for json")
	}
	if err := CheckOutputName("x.mtrace", "json"); err == nil {
		t.Error("x.mtrace accepted for json")
	}
	for _, c := range [][2]string{{"out.dat", "pprof"}, {"-", "json"}, {"x.pb.gz", "pprof"}} {
		if err := CheckOutputName(c[0], c[1]); err != nil {
			t.Errorf("CheckOutputName(%q, %q): %v", c[0], c[1], err)
		}
	}
}

// TestWithPID: a process's own name keeps its format's extension, so it still converts and opens
// as that format.
func TestWithPID(t *testing.T) {
	for in, want := range map[string]string{"d/t.json": "d/t.7.json", "t.speedscope.json": "t.7.speedscope.json",
		"T.PB.GZ": "T.7.PB.GZ", "t.json.mtrace": "t.json.7.mtrace", "trace": "trace.7", "d.x/out": "d.x/out.7", ".json": ".json.7"} {
		if got := WithPID(in, 7); got != want {
			t.Errorf("WithPID(%q) = %q, want %q", in, got, want)
		}
	}
}

// enterBlind passes calls on with what is only final at Exit (duration, self time, flags)
// scrambled at Enter, as an engine that streams calls may have them.
type enterBlind struct{ engine.TreeSink }

func (e enterBlind) Enter(c *engine.Call, depth int) error {
	x := *c
	x.DurNanos, x.SelfNanos, x.Flags = 1<<62, 1<<61, stream.FlagOpen|stream.FlagUnwound
	return e.TreeSink.Enter(&x, depth)
}

// TestReportReadsAtExit: the report and the run profile read durations, self time and flags at
// Exit only, and are driven through treeSink as well as through their Sink.
func TestReportReadsAtExit(t *testing.T) {
	mainTh := rthread{tid: 1, main: true, roots: []*rnode{
		rn("+[App run]", 0, 100, rn("-[A b]", 0, 40, rn("-[A c]", 1, 2)), rn("-[A b]", 50, 60)),
	}}
	stream := reportStream(t, 1, 200, mainTh)
	in := []engine.Input{{R: bytes.NewReader(stream), Size: int64(len(stream))}}
	want := reportOf(t, report.ReportOptions{}, stream)
	s := report.NewReportSink(report.ReportOptions{})
	if _, err := engine.ProcessStreams(in, engine.Options{MaxDepth: -1}, engine.PreOrder(enterBlind{s.Needs().Tree})); err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(want)
	b, _ := json.Marshal(s.Report())
	if !bytes.Equal(a, b) {
		t.Errorf("report with calls scrambled at Enter:\n%s\nwant\n%s", b, a)
	}
	p := report.NewProfileSink()
	if _, err := engine.ProcessStreams(in, engine.Options{MaxDepth: -1}, engine.PreOrder(enterBlind{p.Needs().Tree})); err != nil {
		t.Fatal(err)
	}
	if got := p.Profile().Methods["-[A b]"]; got != (report.MethodStat{Method: "-[A b]", Calls: 2, SelfNanos: 49 * ms, TotalNanos: 50 * ms, Idle: false, Display: ""}) {
		t.Errorf("profile: %+v", got)
	}
	if _, ok := p.Profile().Edges[[2]string{"-[A b]", "-[A c]"}]; !ok || len(p.Profile().Edges) != 2 {
		t.Errorf("edges %v", p.Profile().Edges)
	}
}

// runLoopStream is one thread whose single outermost call encloses n calls: frames of a
// caller and three callees (of 40 distinct methods), written in the order they ended.
func runLoopStream(t *testing.T, n int) []byte {
	var b bytes.Buffer
	w := stream.NewStreamWriter(&b)
	w.Process(stream.StreamProcess{PID: 1, Name: "loop"})
	w.Clock(stream.ClockSample{Tick: 0, MonoNanos: 1e9, RateNum: 1, RateDen: 1})
	for i := uint64(1); i <= 41; i++ {
		w.Methods(stream.StreamMethod{ID: i, Class: "C", Selector: fmt.Sprintf("m%d", i)})
	}
	w.Thread(stream.StreamThread{TID: 1, Flags: stream.ThreadMain})
	var evs []stream.StreamEvent
	prev, tick := uint64(0), uint64(10)
	for i := 0; i < n/4; i++ {
		start := tick
		for k := uint64(0); k < 3; k++ {
			evs = append(evs, stream.StreamEvent{ID: 2 + (uint64(i)*3+k)%40, Start: tick, End: tick + 5 + k, Depth: 2})
			tick += 6 + k
		}
		evs = append(evs, stream.StreamEvent{ID: 2 + uint64(i)%40, Start: start, End: tick + 1, Depth: 1})
		tick += 2
		if len(evs) > 4000 {
			prev, _ = w.Events(1, prev, evs)
			evs = evs[:0]
		}
	}
	evs = append(evs, stream.StreamEvent{ID: 1, Start: 5, End: tick + 1, Depth: 0})
	w.Events(1, prev, evs)
	w.End(stream.StreamCounters{})
	if w.Err() != nil {
		t.Fatal(w.Err())
	}
	return b.Bytes()
}

// TestReportMemory: a report and a run profile of one call enclosing everything allocate the
// same for 100 k calls and for 1 M: no memory per call.
func TestReportMemory(t *testing.T) {
	small, big := runLoopStream(t, 100_000), runLoopStream(t, 1_000_000)
	for _, c := range []struct {
		name string
		sink func() engine.Sink
	}{
		{"report", func() engine.Sink { return report.NewReportSink(report.ReportOptions{}) }},
		{"profile", func() engine.Sink { return report.NewProfileSink() }},
	} {
		alloc := func(b []byte) (uint64, engine.Sink) {
			var m0, m1 runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&m0)
			s := c.sink()
			if _, err := engine.ProcessStreams([]engine.Input{{R: bytes.NewReader(b), Size: int64(len(b))}}, engine.Options{MaxDepth: -1}, s); err != nil {
				t.Fatal(err)
			}
			runtime.ReadMemStats(&m1)
			return m1.TotalAlloc - m0.TotalAlloc, s
		}
		a, _ := alloc(small)
		b, s := alloc(big)
		t.Logf("%s: %d bytes allocated for 100 k calls, %d for 1 M", c.name, a, b)
		if b > a+4<<20 {
			t.Errorf("%s: allocated %d bytes for 1 M calls, %d for 100 k", c.name, b, a)
		}
		if r, ok := s.(*report.ReportSink); ok && (r.Report().Recorder.Calls != 1_000_001 || len(r.Report().AllMethods()) != 41) {
			t.Errorf("report of 1 M calls: %+v", r.Report().Recorder)
		}
	}
}
