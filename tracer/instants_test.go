package tracer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/msgtrace/msgtrace/tracer/engine"
	"github.com/msgtrace/msgtrace/tracer/report"
	"github.com/msgtrace/msgtrace/tracer/sink"
	"github.com/msgtrace/msgtrace/tracer/stream"
)

// launchThreads are the threads of the launch test stream (ticks are ns; tick 0 is
// CLOCK_MONOTONIC 1 s): +load and +initialize calls before main (an +initialize nested in
// another), a worker's +load, main's launch work (busy 30 ms, no run-loop wait) and its run
// loop.
func launchThreads() []rthread {
	return []rthread{
		{tid: 1, main: true, name: "main", roots: []*rnode{
			rn("+[A load]", 1, 3, rn("+[B initialize]", 1.5, 2.5, rn("+[C initialize]", 1.6, 2.0))),
			rn("-[App main]", 10, 40, rn("-[App finishLaunching]", 12, 35)),
			rn("-[NSRunLoop run]", 40, 100, rn("-[App tick]", 50, 51)),
		}},
		{tid: 2, name: "worker", roots: []*rnode{rn("+[W load]", 5, 6), rn("-[W work]", 20, 30)}},
	}
}

// launchInstants: the process started 50 ms before tick 0 (±2 ms), the library loaded 20 ms
// before it, main at 8 ms, the app's marks on the main thread, on the worker and on a thread
// with no calls.
func launchInstants(app bool) []stream.StreamInstant {
	ins := []stream.StreamInstant{
		{Clock: stream.InstantClockMonotonic, Time: 1e9 - 50*ms, Kind: stream.InstantProcessStart, Precision: 2 * ms, Name: "process start"},
		{Clock: stream.InstantClockMonotonic, Time: 1e9 - 20*ms, Kind: stream.InstantLoaded, Name: "library loaded"},
		{Clock: stream.InstantClockTicks, Time: 8 * ms, Kind: stream.InstantMain, Name: "main"},
	}
	if app {
		ins = append(ins,
			stream.StreamInstant{TID: 1, Clock: stream.InstantClockTicks, Time: 45 * ms, Name: "first frame"},
			stream.StreamInstant{TID: 2, Clock: stream.InstantClockTicks, Time: 46 * ms, Name: "worker mark"},
			stream.StreamInstant{TID: 99, Clock: stream.InstantClockTicks, Time: 60 * ms, Name: "stray"})
	}
	return ins
}

// withInstants appends instant frames to a stream (frames may come in any order after the
// process frame).
func withInstants(t *testing.T, strm []byte, ins ...stream.StreamInstant) []byte {
	t.Helper()
	b := bytes.NewBuffer(append([]byte(nil), strm...))
	w := stream.NewStreamWriter(b)
	for _, in := range ins {
		w.Instant(in)
	}
	if w.Err() != nil {
		t.Fatal(w.Err())
	}
	return b.Bytes()
}

func launchTrace(t *testing.T, app bool) []byte {
	return withInstants(t, reportStream(t, 7, 100, launchThreads()...), launchInstants(app)...)
}

// TestInstantRoundTrip: the Go encoder's instant frames decode to what was written; a
// malformed one is a bad frame, the rest of the stream read.
func TestInstantRoundTrip(t *testing.T) {
	in := stream.StreamInstant{TID: 42, Clock: stream.InstantClockTicks, Time: 1 << 40, Kind: stream.InstantMain, Precision: 10_000_000, Name: "main ✓"}
	var b bytes.Buffer
	stream.NewStreamWriter(&b).Instant(in)
	got, err := stream.DecodeInstant(b.Bytes()[stream.FrameHeader:])
	if err != nil || got != in {
		t.Fatalf("decoded %+v, %v; want %+v", got, err, in)
	}
	for _, bad := range [][]byte{nil, b.Bytes()[stream.FrameHeader : stream.FrameHeader+8], b.Bytes()[stream.FrameHeader : b.Len()-2]} {
		if _, err := stream.DecodeInstant(bad); err == nil {
			t.Errorf("DecodeInstant(%x) decodes", bad)
		}
	}
	s := launchTrace(t, true)
	var w bytes.Buffer
	sw := stream.NewStreamWriter(&w)
	sw.Frame(stream.FrameInstant, []byte{1, 0, 0, 0, 0, 0, 0, 0, 7, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}) // clock 7
	s = append(s, w.Bytes()...)
	var c collectSink
	tot, err := engine.ProcessStreams([]engine.Input{{R: bytes.NewReader(s), Size: int64(len(s))}}, engine.Options{MaxDepth: -1}, &c)
	if err != nil || tot.BadFrames != 1 || len(c.hdr.Instants) != 7 {
		t.Fatalf("%v, %+v, %d instants", err, tot, len(c.hdr.Instants))
	}
}

// TestInstantsTimeline: the reader puts every instant on the trace's timeline, whose origin
// moves back to the process's start; the first call is derived; an instant of a thread with
// no calls is process-wide; one of a thread left out by Options.Threads is left out.
func TestInstantsTimeline(t *testing.T) {
	s := launchTrace(t, true)
	var c collectSink
	if _, err := engine.ProcessStreams([]engine.Input{{R: bytes.NewReader(s), Size: int64(len(s))}}, engine.Options{MaxDepth: -1}, &c); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, in := range c.hdr.Instants {
		got = append(got, fmt.Sprintf("%s/%s@%d±%d t%d", in.Name, in.Kind, in.Nanos/ms, in.PrecisionNanos/ms, in.TID))
	}
	want := "[process start/process start@0±2 t0 library loaded/library loaded@30±0 t0 first call/first call@51±0 t0 main/main@58±0 t0 first frame/mark@95±0 t1 worker mark/mark@96±0 t2 stray/mark@110±0 t0]"
	if fmt.Sprint(got) != want {
		t.Errorf("instants %v\nwant     %s", got, want)
	}
	if c.calls[0].Name != "+[C initialize]" || c.calls[0].Start != 51*ms+600_000 {
		t.Errorf("first call %+v: the calls did not move with the origin", c.calls[0])
	}
	c = collectSink{}
	if _, err := engine.ProcessStreams([]engine.Input{{R: bytes.NewReader(s), Size: int64(len(s))}}, engine.Options{MaxDepth: -1, Threads: "main"}, &c); err != nil {
		t.Fatal(err)
	}
	for _, in := range c.hdr.Instants {
		if in.Name == "worker mark" {
			t.Errorf("--threads main kept the worker's mark")
		}
	}
	// no launch marks: no first call derived, and the origin is the first call
	plain := withInstants(t, reportStream(t, 7, 100, launchThreads()...), stream.StreamInstant{TID: 1, Time: 45 * ms, Name: "x"})
	c = collectSink{}
	if _, err := engine.ProcessStreams([]engine.Input{{R: bytes.NewReader(plain), Size: int64(len(plain))}}, engine.Options{MaxDepth: -1}, &c); err != nil {
		t.Fatal(err)
	}
	if len(c.hdr.Instants) != 1 || c.hdr.Instants[0].Nanos != 44*ms {
		t.Errorf("instants without launch marks: %+v", c.hdr.Instants)
	}
}

// TestInstantsChrome: process-wide instants on thread 0 ("s":"p"), the app's on their threads
// ("s":"t"), every one in category msgtrace with its kind and precision, and every thread's
// events (and thread 0's) in time order in the file.
func TestInstantsChrome(t *testing.T) {
	s := launchTrace(t, true)
	var out bytes.Buffer
	if _, err := engine.ProcessStreams([]engine.Input{{R: bytes.NewReader(s), Size: int64(len(s))}}, engine.Options{MaxDepth: -1}, sink.NewChromeSink(&out)); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		TraceEvents []struct {
			Ph, Name, S, Cat string
			Ts               float64
			Tid              uint64
			Args             map[string]any
		}
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	last := map[uint64]float64{}
	var got []string
	for _, e := range doc.TraceEvents {
		if e.Ph == "M" {
			continue
		}
		if e.Ts < last[e.Tid] {
			t.Errorf("thread %d goes back in time at %s %s (%v after %v)", e.Tid, e.Ph, e.Name, e.Ts, last[e.Tid])
		}
		last[e.Tid] = e.Ts
		if e.Ph == "i" && e.Cat == "msgtrace" {
			got = append(got, fmt.Sprintf("%s/%v:%s@%v t%d ±%v", e.Name, e.Args["kind"], e.S, e.Ts/1000, e.Tid, e.Args["precision_ns"]))
		}
	}
	want := "[process start/process start:p@0 t0 ±2e+06 library loaded/library loaded:p@30 t0 ±0 first call/first call:p@51 t0 ±0 main/main:p@58 t0 ±0 stray/mark:p@110 t0 ±0 first frame/mark:t@95 t1 ±0 worker mark/mark:t@96 t2 ±0]"
	if fmt.Sprint(got) != want {
		t.Errorf("instants %v\nwant     %s", got, want)
	}
}

// TestInstantsPerfetto: process-wide instants are TYPE_INSTANT events on the process's track,
// the app's on their thread's track, at their times, with kind and precision_ns; the slices
// nest as before.
func TestInstantsPerfetto(t *testing.T) {
	s := launchTrace(t, true)
	var pb bytes.Buffer
	if _, err := engine.ProcessStreams([]engine.Input{{R: bytes.NewReader(s), Size: int64(len(s))}}, engine.Options{MaxDepth: -1}, sink.NewPerfettoSink(&pb, sink.Meta{})); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range pfSequences(t, pb.Bytes()) {
		ev := p.m("track_event")
		if ev == nil || ev.u("type") != pfInstant {
			continue
		}
		where := "?"
		switch p.track {
		case processUUID(7):
			where = "process"
		case threadUUID(7, 1):
			where = "main"
		case threadUUID(7, 2):
			where = "worker"
		}
		var args []string
		for _, a := range ev["debug_annotations"] {
			a := a.(pfMsg)
			if a.has("string_value") {
				args = append(args, a.s("name")+"="+a.s("string_value"))
			} else {
				args = append(args, fmt.Sprintf("%s=%d", a.s("name"), a.u("uint_value")))
			}
		}
		got = append(got, fmt.Sprintf("%s@%d %s %v", ev.s("name"), p.ts/ms, where, args))
	}
	want := "[process start@0 process [kind=process start precision_ns=2000000] library loaded@30 process [kind=library loaded precision_ns=0] first call@51 process [kind=first call precision_ns=0] main@58 process [kind=main precision_ns=0] stray@110 process [kind=mark precision_ns=0] first frame@95 main [kind=mark precision_ns=0] worker mark@96 worker [kind=mark precision_ns=0]]"
	if fmt.Sprint(got) != want {
		t.Errorf("instants %v\nwant     %s", got, want)
	}
	imp := pfImport(t, pb.Bytes())
	if n := len(imp.slices[1]); n != 8 || len(imp.instants) != 5 || imp.process == "" {
		t.Errorf("main thread: %d slices (7 calls, 1 instant), %d process instants, process %q", n, len(imp.instants), imp.process)
	}
}

// TestInstantsLeftOut: speedscope (no instants in its format), pprof, folded stacks and the
// flame graph show no instant.
func TestInstantsLeftOut(t *testing.T) {
	s := launchTrace(t, true)
	for _, f := range []string{"speedscope", "pprof", "folded", "svg"} {
		var out bytes.Buffer
		sink, err := NewSink(f, &out, sink.Meta{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := engine.ProcessStreams([]engine.Input{{R: bytes.NewReader(s), Size: int64(len(s))}}, engine.Options{MaxDepth: -1}, sink); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"first frame", "process start", "library loaded"} {
			if bytes.Contains(out.Bytes(), []byte(name)) {
				t.Errorf("%s shows %q", f, name)
			}
		}
	}
}

// TestReportLaunch: the launch section's marks and steps to the app's first mark, before
// main, and the +load and +initialize calls (a nested +initialize counted, its time not
// twice); without the app's marks the launch ends with the first main-thread call after main
// busy over the budget; a trace with +load calls and no launch marks still lists them; one
// with neither has no launch.
func TestReportLaunch(t *testing.T) {
	r := reportOf(t, report.ReportOptions{}, launchTrace(t, true))
	if len(r.Launches) != 1 {
		t.Fatalf("%d launches", len(r.Launches))
	}
	l := r.Launches[0]
	var steps []string
	for _, s := range l.Steps {
		steps = append(steps, fmt.Sprintf("%s>%s %d", s.From, s.To, s.DurNanos/ms))
	}
	if want := "[process start>library loaded 30 library loaded>first call 21 first call>main 7 main>first frame 37]"; fmt.Sprint(steps) != want {
		t.Errorf("steps %v\nwant  %s", steps, want)
	}
	if l.End != (report.LaunchEnd{Reason: "mark", Name: "first frame", StartNanos: 95 * ms, EndNanos: 95 * ms}) || l.DurNanos != 95*ms || l.MainNanos != 58*ms || len(l.Marks) != 7 {
		t.Errorf("end %+v, %d ns, %d ns before main, %d marks", l.End, l.DurNanos, l.MainNanos, len(l.Marks))
	}
	calls := func(lc report.LaunchCalls) string {
		var s []string
		for _, c := range lc.List {
			s = append(s, fmt.Sprintf("%s@%v/%v %s", c.Method, float64(c.StartNanos)/ms, float64(c.DurNanos)/ms, c.Thread))
		}
		return fmt.Sprintf("%d %v %v", lc.Calls, float64(lc.Nanos)/ms, s)
	}
	if got, want := calls(l.Load), "2 3 [+[A load]@51/2 main +[W load]@55/1 worker]"; got != want {
		t.Errorf("load %s, want %s", got, want)
	}
	if got, want := calls(l.Initialize), "2 1 [+[B initialize]@51.5/1 main +[C initialize]@51.6/0.4 main]"; got != want {
		t.Errorf("initialize %s, want %s", got, want)
	}
	b, err := json.Marshal(r)
	if err != nil || !bytes.Contains(b, []byte(`"launches":[{"program":"app","pid":7,"marks":[{"name":"process start","kind":"process start","start_ns":0,"precision_ns":2000000}`)) {
		t.Errorf("JSON %v: %.300s", err, b[bytes.Index(b, []byte(`"launches"`)):])
	}

	// without the app's marks: the first long main-thread call after main
	l = reportOf(t, report.ReportOptions{}, launchTrace(t, false)).Launches[0]
	if l.End != (report.LaunchEnd{Reason: "long call", Name: "-[App main]", StartNanos: 60 * ms, EndNanos: 90 * ms}) || l.DurNanos != 90*ms {
		t.Errorf("end %+v, %d ns", l.End, l.DurNanos)
	}
	if last := l.Steps[len(l.Steps)-1]; last.From != "main" || last.To != "the end of -[App main]" || last.DurNanos != 32*ms {
		t.Errorf("last step %+v", last)
	}
	// no launch marks, +load calls: listed all the same
	ls := reportOf(t, report.ReportOptions{}, reportStream(t, 7, 100, launchThreads()...)).Launches
	if len(ls) != 1 || ls[0].Load.Calls != 2 || len(ls[0].Steps) != 0 || ls[0].End.Reason != "long call" {
		t.Errorf("launches without marks %+v", ls)
	}
	// neither
	ls = reportOf(t, report.ReportOptions{}, reportStream(t, 7, 100, rthread{tid: 1, main: true, name: "main", roots: []*rnode{rn("-[App run]", 0, 50)}})).Launches
	if ls == nil || len(ls) != 0 {
		t.Errorf("launches of a trace without launch %#v", ls)
	}
}
