package tracer

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/msgtrace/msgtrace/tracer/engine"
	"github.com/msgtrace/msgtrace/tracer/internal/tracetest"
	"github.com/msgtrace/msgtrace/tracer/report"
	"github.com/msgtrace/msgtrace/tracer/sink"
	"github.com/msgtrace/msgtrace/tracer/stream"
)

// gotCall is a call as a sink received it.
type gotCall struct {
	PID, TID         uint64
	Name             string
	Start, Dur, Self uint64
	Depth, Flags     int
}

// collectSink keeps everything it is given.
type collectSink struct {
	hdr     *stream.Header
	thread  *stream.Thread
	threads []stream.Thread
	progs   map[uint64]string
	calls   []gotCall
	marks   []stream.Mark
	tot     engine.Totals
	closed  bool
}

func (s *collectSink) BeginThread(h *stream.Header, t *stream.Thread) error {
	if s.progs == nil {
		s.progs = map[uint64]string{}
	}
	s.progs[h.PID] = h.Program
	s.hdr, s.thread = h, t
	s.threads = append(s.threads, *t)
	return nil
}
func (s *collectSink) Call(c *engine.Call) error {
	s.calls = append(s.calls, gotCall{s.hdr.PID, c.Thread.TID, c.Name, c.StartNanos, c.DurNanos, c.SelfNanos, c.Depth, c.Flags})
	return nil
}
func (s *collectSink) Needs() engine.Needs { return engine.Needs{} }
func (s *collectSink) Skip(int) error      { return nil }
func (s *collectSink) Mark(m *stream.Mark) error {
	mm := *m
	mm.Thread = nil
	s.marks = append(s.marks, mm)
	return nil
}
func (s *collectSink) EndThread() error            { return nil }
func (s *collectSink) Close(t engine.Totals) error { s.tot, s.closed = t, true; return nil }

// want is what a reader must give for the events frames kept, with the trace's origin at the
// earliest event: per thread in order of first appearance, the events in file order.
func want(g *tracetest.GenStream, keep func(tracetest.GenFrame) bool) ([]gotCall, []stream.Mark) {
	var order []uint64
	per := map[uint64][]stream.StreamEvent{}
	base := ^uint64(0)
	for _, f := range g.Frames {
		if !keep(f) {
			continue
		}
		if _, ok := per[f.TID]; !ok {
			order = append(order, f.TID)
		}
		per[f.TID] = append(per[f.TID], f.Evs...)
		for _, e := range f.Evs {
			base = min(base, g.Line.Mono(e.Start))
		}
	}
	var calls []gotCall
	var marks []stream.Mark
	for _, tid := range order {
		for _, e := range per[tid] {
			s, d := g.Line.Mono(e.Start)-base, g.Line.Mono(e.End)-g.Line.Mono(e.Start)
			if e.Type == stream.EventMark {
				marks = append(marks, stream.Mark{Kind: stream.MarkKind(e.ID), StartNanos: s, DurNanos: d, Count: e.Count})
				continue
			}
			fl := g.Flags[e.ID]
			if e.Type == stream.EventUnwound {
				fl |= stream.FlagUnwound
			}
			calls = append(calls, gotCall{g.PID, tid, g.Names[e.ID], s, d, 0, int(e.Depth), fl})
		}
	}
	return calls, marks
}

func readStream(t testing.TB, opt engine.Options, bs ...[]byte) (*collectSink, error) {
	var ins []engine.Input
	for _, b := range bs {
		ins = append(ins, engine.Input{R: bytes.NewReader(b), Size: int64(len(b))})
	}
	s := &collectSink{}
	_, err := engine.ProcessStreams(ins, opt, s)
	return s, err
}

// sameCalls compares everything but self time (checked against the raw path separately).
func sameCalls(t *testing.T, what string, got []gotCall, want []gotCall) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d calls, want %d", what, len(got), len(want))
	}
	for i := range got {
		g := got[i]
		g.Self = 0
		if g != want[i] {
			t.Fatalf("%s: call %d: got %+v, want %+v", what, i, g, want[i])
		}
	}
}

func sameMarks(t *testing.T, what string, got, want []stream.Mark) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s: marks\n got %v\nwant %v", what, got, want)
	}
}

// TestStreamRoundTrip: a stream of 4 threads written by StreamWriter reads back call by call,
// mark by mark, with the counters of its marks.
func TestStreamRoundTrip(t *testing.T) {
	g := tracetest.Gen(t, tracetest.GenOpts{Seed: 1, PID: 77, Threads: 4, PerTh: 3000, FrameEvents: 200, Line: tracetest.Line24MHz, Marks: true, Program: "app"})
	s, err := readStream(t, engine.Options{MaxDepth: -1}, g.B)
	if err != nil {
		t.Fatal(err)
	}
	wc, wm := want(g, func(tracetest.GenFrame) bool { return true })
	sameCalls(t, "round trip", s.calls, wc)
	sameMarks(t, "round trip", s.marks, wm)
	var lost, over uint64
	for _, m := range wm {
		switch m.Kind {
		case stream.MarkLost:
			lost += m.Count
		case stream.MarkOverflow:
			over += m.Count
		}
	}
	tot := s.tot
	if tot.Threads != 4 || tot.Processes != 1 || tot.Calls != uint64(len(wc)) || tot.Dropped != lost || tot.Overflow != over ||
		tot.Marks != uint64(len(wm)) || tot.BadFrames != 0 || tot.TornBytes != 0 || tot.Unended != 0 || tot.Open != 0 {
		t.Errorf("totals %+v", tot)
	}
	if !s.threads[0].Main || s.threads[1].Name != "t1" || s.threads[2].PID != 77 || s.progs[77] != "app" {
		t.Errorf("threads %+v, programs %v", s.threads, s.progs)
	}
	if len(wc) < 12000 || len(wm) == 0 {
		t.Errorf("%d calls, %d marks", len(wc), len(wm))
	}
	t.Logf("%.1f bytes per call", float64(len(g.B))/float64(len(wc)))
}

// TestStreamMatchesRaw: the same calls as a raw dump and as a stream give the same calls,
// self times and counters, through every sink.
func TestStreamMatchesRaw(t *testing.T) {
	raw := testTrace(t)
	rd, err := stream.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w := stream.NewStreamWriter(&buf)
	w.Process(stream.StreamProcess{PID: rd.Header.PID, Name: ""})
	w.Clock(stream.ClockSample{Tick: 0, MonoNanos: 0, RateNum: 1, RateDen: 1})
	ids := map[[2]uint64]uint64{}
	for {
		th, err := rd.NextThread()
		if err != nil {
			break
		}
		fl := uint64(0)
		if th.Main {
			fl = stream.ThreadMain
		}
		w.Thread(stream.StreamThread{TID: th.TID, Flags: fl, Name: th.Name})
		var evs []stream.StreamEvent
		for {
			rec, err := rd.NextRecord()
			if err != nil {
				break
			}
			key := [2]uint64{rec.ClassKey(), rec.Sel}
			id, ok := ids[key]
			if !ok {
				id = uint64(len(ids) + 1)
				ids[key] = id
				n := rd.Names.Name(rec) // "-[Foo run]"
				mf := uint64(0)
				if n[0] == '+' {
					mf = stream.MethodClass
				}
				cls, sel, _ := strings.Cut(n[2:len(n)-1], " ")
				w.Methods(stream.StreamMethod{ID: id, Flags: mf, Class: cls, Selector: sel})
			}
			typ := stream.EventCall
			if rec.Flags()&stream.FlagUnwound != 0 {
				typ = stream.EventUnwound
			}
			evs = append(evs, stream.StreamEvent{Type: typ, ID: id, Start: rec.Start, End: rec.End, Depth: uint64(rec.Depth())})
		}
		if th.Dropped > 0 {
			evs = append(evs, stream.StreamEvent{Type: stream.EventMark, ID: uint64(stream.MarkLost), Start: 200000, End: 200000, Count: th.Dropped})
		}
		if th.Overflow > 0 {
			evs = append(evs, stream.StreamEvent{Type: stream.EventMark, ID: uint64(stream.MarkOverflow), Start: 200000, End: 200000, Count: th.Overflow})
		}
		w.Events(th.TID, 0, evs)
	}
	w.End(stream.StreamCounters{})
	stream := buf.Bytes()
	for _, opt := range []engine.Options{{MaxDepth: -1}, {MaxDepth: 0}, {MaxDepth: -1, MinNanos: 15000}, {MaxDepth: -1, Exclude: []string{"-[Bar step:]"}}} {
		a, b := &collectSink{}, &collectSink{}
		ta, err := engine.Process(bytes.NewReader(raw), opt, a)
		if err != nil {
			t.Fatal(err)
		}
		tb, err := engine.Process(bytes.NewReader(stream), opt, b)
		if err != nil {
			t.Fatal(err)
		}
		if len(a.calls) == 0 || !slices.Equal(a.calls, b.calls) {
			t.Errorf("%+v: raw %+v\nstream %+v", opt, a.calls, b.calls)
		}
		if ta.Calls != tb.Calls || ta.Kept != tb.Kept || ta.Dropped != tb.Dropped || ta.Overflow != tb.Overflow || ta.Threads != tb.Threads {
			t.Errorf("%+v: totals raw %+v, stream %+v", opt, ta, tb)
		}
	}
	for _, mk := range []func(*bytes.Buffer) engine.Sink{
		func(w *bytes.Buffer) engine.Sink { return sink.NewFoldedSink(w) },
		func(w *bytes.Buffer) engine.Sink { return sink.NewPprofSink(w) },
	} {
		var x, y bytes.Buffer
		engine.Process(bytes.NewReader(raw), engine.Options{MaxDepth: -1}, mk(&x))
		engine.Process(bytes.NewReader(stream), engine.Options{MaxDepth: -1}, mk(&y))
		if x.Len() == 0 || y.Len() == 0 {
			t.Errorf("empty output")
		}
		if _, ok := mk(&x).(*sink.FoldedSink); ok && x.String() != y.String() {
			t.Errorf("folded differs:\n%s\n%s", x.String(), y.String())
		}
	}
	jr, js := toJSON(t, raw, engine.Options{MaxDepth: -1}), toJSON(t, stream, engine.Options{MaxDepth: -1})
	if !slices.EqualFunc(jr.TraceEvents, js.TraceEvents, func(a, b chromeEvent) bool {
		x, _ := json.Marshal(a)
		y, _ := json.Marshal(b)
		return a.Ph != "X" || string(x) == string(y)
	}) || jr.OtherData["dropped_buffer_full"] != js.OtherData["dropped_buffer_full"] {
		t.Errorf("JSON differs")
	}
}

// TestStreamTorn: the file cut at every frame boundary and at every other offset reads
// everything before the cut, and counts the rest as a torn tail.
func TestStreamTorn(t *testing.T) {
	g := tracetest.Gen(t, tracetest.GenOpts{Seed: 2, PID: 9, Threads: 3, PerTh: 60, FrameEvents: 12, Line: tracetest.Line24MHz, Marks: true})
	for cut := 0; cut <= len(g.B); cut++ {
		s, err := readStream(t, engine.Options{MaxDepth: -1}, g.B[:cut])
		if err != nil {
			t.Fatalf("cut at %d: %v", cut, err)
		}
		wc, wm := want(g, func(f tracetest.GenFrame) bool { return f.End <= cut })
		sameCalls(t, fmt.Sprintf("cut at %d", cut), s.calls, wc)
		sameMarks(t, fmt.Sprintf("cut at %d", cut), s.marks, wm)
		last := 0
		for _, e := range g.Ends {
			if e <= cut {
				last = e
			}
		}
		if s.tot.TornBytes != uint64(cut-last) || s.tot.BadFrames != 0 || (s.tot.Unended == 0) != (cut == len(g.B)) {
			t.Fatalf("cut at %d (last frame ends at %d): totals %+v", cut, last, s.tot)
		}
	}
	// random cuts of a bigger stream
	g = tracetest.Gen(t, tracetest.GenOpts{Seed: 3, PID: 9, Threads: 4, PerTh: 2000, FrameEvents: 300, Line: tracetest.Line24MHz})
	r := rand.New(rand.NewSource(3))
	for i := 0; i < 50; i++ {
		cut := r.Intn(len(g.B) + 1)
		s, err := readStream(t, engine.Options{MaxDepth: -1}, g.B[:cut])
		if err != nil {
			t.Fatal(err)
		}
		wc, _ := want(g, func(f tracetest.GenFrame) bool { return f.End <= cut })
		sameCalls(t, fmt.Sprintf("cut at %d", cut), s.calls, wc)
	}
}

// TestStreamResync: a frame damaged in the middle of the file (payload byte, magic, or a length
// that runs past the end) is counted and skipped; every other frame is read.
func TestStreamResync(t *testing.T) {
	g := tracetest.Gen(t, tracetest.GenOpts{Seed: 4, PID: 5, Threads: 3, PerTh: 400, FrameEvents: 50, Line: tracetest.Line24MHz, Marks: true})
	victim := g.Frames[len(g.Frames)/2]
	for _, c := range []struct {
		name string
		at   int
		val  func(b []byte)
	}{
		{"payload byte", victim.Off + 30, func(b []byte) { b[0] ^= 0x40 }},
		{"magic", victim.Off + 1, func(b []byte) { b[0] = 'x' }},
		{"length past the end", victim.Off + 8, func(b []byte) { binary.LittleEndian.PutUint32(b, stream.MaxFramePayload) }},
		{"length too long", victim.Off + 8, func(b []byte) { binary.LittleEndian.PutUint32(b, stream.MaxFramePayload+1) }},
		{"checksum", victim.Off + 12, func(b []byte) { b[0]++ }},
	} {
		b := bytes.Clone(g.B)
		c.val(b[c.at:])
		s, err := readStream(t, engine.Options{MaxDepth: -1}, b)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		wc, wm := want(g, func(f tracetest.GenFrame) bool { return f.Off != victim.Off })
		sameCalls(t, c.name, s.calls, wc)
		sameMarks(t, c.name, s.marks, wm)
		if s.tot.BadFrames != 1 || s.tot.BadBytes != uint64(victim.End-victim.Off) || s.tot.TornBytes != 0 {
			t.Errorf("%s: totals %+v, want 1 bad frame of %d bytes", c.name, s.tot, victim.End-victim.Off)
		}
	}
	// a short write: half a frame, then the frames written after it
	half := victim.Off + (victim.End-victim.Off)/2
	s, err := readStream(t, engine.Options{MaxDepth: -1}, slices.Concat(g.B[:half], g.B[victim.End:]))
	if err != nil {
		t.Fatal(err)
	}
	wc, wm := want(g, func(f tracetest.GenFrame) bool { return f.Off != victim.Off })
	sameCalls(t, "short write", s.calls, wc)
	sameMarks(t, "short write", s.marks, wm)
	if s.tot.BadFrames != 1 || s.tot.BadBytes != uint64(half-victim.Off) || s.tot.TornBytes != 0 {
		t.Errorf("short write: totals %+v", s.tot)
	}
	// garbage between two frames, and garbage at the end
	b := slices.Concat(g.B[:victim.Off], []byte("garbage MTSF garbage"), g.B[victim.Off:], []byte("MTS"))
	s, err = readStream(t, engine.Options{MaxDepth: -1}, b)
	if err != nil {
		t.Fatal(err)
	}
	wc, _ = want(g, func(tracetest.GenFrame) bool { return true })
	sameCalls(t, "garbage", s.calls, wc)
	if s.tot.BadFrames != 1 || s.tot.BadBytes != 20 || s.tot.TornBytes != 3 {
		t.Errorf("garbage: totals %+v", s.tot)
	}
}

// TestStreamOpen: the calls of a thread's latest open frame that no later call record closes
// are shown from their start to the end of the trace with FlagOpen, innermost first, after
// the thread's calls; those a record closes are not.
func TestStreamOpen(t *testing.T) {
	var buf bytes.Buffer
	w := stream.NewStreamWriter(&buf)
	w.Process(stream.StreamProcess{PID: 3, Name: "hang"})
	w.Clock(stream.ClockSample{Tick: 1000, MonoNanos: 1000, RateNum: 1, RateDen: 1})
	w.Methods(stream.StreamMethod{ID: 1, Class: "App", Selector: "run"}, stream.StreamMethod{ID: 2, Class: "App", Selector: "wait"},
		stream.StreamMethod{ID: 3, Class: "Lock", Selector: "spin"}, stream.StreamMethod{ID: 4, Class: "App", Selector: "tick"})
	// thread 1: run(0) > wait(1) > spin(2) open at 5000; spin ends at 6000; then the process
	// dies at 9000 (last clock frame) with run and wait still running.
	w.Thread(stream.StreamThread{TID: 1, Flags: stream.ThreadMain})
	w.Events(1, 1000, []stream.StreamEvent{{Type: stream.EventCall, ID: 4, Start: 1100, End: 1200, Depth: 1}})
	w.Open(1, 5000, []stream.OpenCall{{ID: 1, Start: 1000, Depth: 0}, {ID: 2, Start: 1500, Depth: 1}, {ID: 3, Start: 4000, Depth: 2}})
	w.Events(1, 1200, []stream.StreamEvent{{Type: stream.EventCall, ID: 3, Start: 4000, End: 6000, Depth: 2}})
	// thread 2: an older open frame, then a newer one whose calls a later sibling supersedes
	// (its own record was lost): nothing stays open.
	w.Open(2, 2000, []stream.OpenCall{{ID: 1, Start: 1500, Depth: 0}})
	w.Open(2, 3000, []stream.OpenCall{{ID: 1, Start: 1500, Depth: 0}, {ID: 4, Start: 2500, Depth: 1}})
	w.Events(2, 0, []stream.StreamEvent{{Type: stream.EventCall, ID: 4, Start: 3500, End: 3600, Depth: 0}})
	w.Clock(stream.ClockSample{Tick: 9000, MonoNanos: 9000, RateNum: 1, RateDen: 1})
	s, err := readStream(t, engine.Options{MaxDepth: -1}, buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	want := []gotCall{
		{3, 1, "-[App tick]", 100, 100, 100, 1, 0},
		{3, 1, "-[Lock spin]", 3000, 2000, 2000, 2, 0},
		{3, 1, "-[App wait]", 500, 7500, 5500, 1, stream.FlagOpen},
		{3, 1, "-[App run]", 0, 8000, 400, 0, stream.FlagOpen},
		{3, 2, "-[App tick]", 2500, 100, 100, 0, 0},
	}
	if !slices.Equal(s.calls, want) {
		t.Errorf("calls\n got %+v\nwant %+v", s.calls, want)
	}
	if s.tot.Open != 2 || s.tot.Unended != 1 {
		t.Errorf("totals %+v", s.tot)
	}
	// The same with an exact match only: spin's record closes spin, not wait.
	var json bytes.Buffer
	if _, err := engine.Process(bytes.NewReader(buf.Bytes()), engine.Options{MaxDepth: -1}, sink.NewChromeSink(&json)); err != nil || !strings.Contains(json.String(), `"name":"-[App wait]"`) {
		t.Errorf("chrome: %v %s", err, json.String())
	}
}

// TestStreamTwoProcesses: two processes with different tick rates and origins land on one
// timeline (monotonic ns), each its own Chrome process track named after its program.
func TestStreamTwoProcesses(t *testing.T) {
	a := tracetest.Gen(t, tracetest.GenOpts{Seed: 5, PID: 100, Threads: 2, PerTh: 50, FrameEvents: 20, Line: tracetest.GenLine{Tick0: 0, Mono0: 10_000_000, Num: 1, Den: 1}, Program: "parent"})
	b := tracetest.Gen(t, tracetest.GenOpts{Seed: 6, PID: 200, Threads: 1, PerTh: 50, FrameEvents: 20, Line: tracetest.GenLine{Tick0: 7_000_000, Mono0: 10_000_000 + 30_000, Num: 125, Den: 3}, Program: "child"})
	s, err := readStream(t, engine.Options{MaxDepth: -1}, b.B, a.B)
	if err != nil {
		t.Fatal(err)
	}
	all := func(tracetest.GenFrame) bool { return true }
	wa, _ := want(a, all)
	wb, _ := want(b, all)
	// a starts first: the origin is a's first event; b's calls are shifted by the difference
	// of the two first events on the monotonic clock.
	firstA, firstB := ^uint64(0), ^uint64(0)
	for _, f := range a.Frames {
		for _, e := range f.Evs {
			firstA = min(firstA, a.Line.Mono(e.Start))
		}
	}
	for _, f := range b.Frames {
		for _, e := range f.Evs {
			firstB = min(firstB, b.Line.Mono(e.Start))
		}
	}
	if firstB <= firstA {
		t.Fatalf("test setup: child starts first")
	}
	for i := range wb {
		wb[i].Start += firstB - firstA
	}
	sameCalls(t, "two processes", s.calls, append(wa, wb...))
	if s.tot.Processes != 2 || s.tot.Threads != 3 || s.progs[100] != "parent" || s.progs[200] != "child" {
		t.Errorf("totals %+v programs %v", s.tot, s.progs)
	}
	var out bytes.Buffer
	ins := []engine.Input{{R: bytes.NewReader(a.B), Size: int64(len(a.B))}, {R: bytes.NewReader(b.B), Size: int64(len(b.B))}}
	if _, err := engine.ProcessStreams(ins, engine.Options{MaxDepth: -1}, sink.NewChromeSink(&out)); err != nil {
		t.Fatal(err)
	}
	var f chromeFile
	if err := json.Unmarshal(out.Bytes(), &f); err != nil {
		t.Fatal(err)
	}
	procs, pids := map[uint64]string{}, map[uint64]int{}
	for _, e := range f.TraceEvents {
		if e.Ph == "M" && e.Name == "process_name" {
			procs[e.Pid] = e.Args["name"].(string)
		}
		if e.Ph == "B" || e.Ph == "i" { // a call: its begin, or an instant when it took no time
			pids[e.Pid]++
		}
	}
	if procs[100] != "parent" || procs[200] != "child" || pids[100] != len(wa) || pids[200] != len(wb) {
		t.Errorf("process tracks %v, events per pid %v", procs, pids)
	}
}

// TestStreamHostile: lengths and counts that lie give a clear error or are counted as bad
// frames, without allocating by what they claim.
func TestStreamHostile(t *testing.T) {
	frame := func(kind uint8, p []byte) []byte {
		var b bytes.Buffer
		stream.NewStreamWriter(&b).Frame(kind, p)
		return b.Bytes()
	}
	var proc bytes.Buffer
	stream.NewStreamWriter(&proc).Process(stream.StreamProcess{PID: 1})
	uv := func(vs ...uint64) []byte {
		var b []byte
		for _, v := range vs {
			b = binary.AppendUvarint(b, v)
		}
		return b
	}
	tid := make([]byte, 16)
	cases := map[string][]byte{
		"huge string":        frame(stream.FrameMethods, uv(1, 0, 1<<60)),
		"method id 0":        frame(stream.FrameMethods, append(uv(0, 0, 1), 'A', 1, 'b')),
		"huge depth":         frame(stream.FrameEvents, append(bytes.Clone(tid), uv(4, 5, 1, 1<<40)...)),
		"duration past zero": frame(stream.FrameEvents, append(bytes.Clone(tid), uv(4, 10, 100, 1)...)),
		"event type 3":       frame(stream.FrameEvents, append(bytes.Clone(tid), uv(7, 10, 1, 1)...)),
		"cut varint":         frame(stream.FrameEvents, append(bytes.Clone(tid), 0x80)),
		"open ages":          frame(stream.FrameOpen, append(bytes.Clone(tid), uv(1, 5, 0)...)),
		"open depths":        frame(stream.FrameOpen, append(binary.LittleEndian.AppendUint64(bytes.Clone(tid[:8]), 100), uv(1, 5, 3, 1, 5, 3)...)),
		"short clock":        frame(stream.FrameClock, make([]byte, 39)),
	}
	for name, b := range cases {
		in := slices.Concat(proc.Bytes(), b)
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		s, err := readStream(t, engine.Options{MaxDepth: -1}, in)
		runtime.ReadMemStats(&m1)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if s.tot.BadFrames != 1 || len(s.calls) != 0 {
			t.Errorf("%s: totals %+v calls %v", name, s.tot, s.calls)
		}
		if a := m1.TotalAlloc - m0.TotalAlloc; a > 8<<20 {
			t.Errorf("%s: allocated %d bytes", name, a)
		}
	}
	// errors
	var v2 bytes.Buffer
	stream.NewStreamWriter(&v2).Process(stream.StreamProcess{PID: 1, Version: 2})
	for name, b := range map[string][]byte{"version 2": v2.Bytes(), "not a stream": []byte("MSGTRACE and more")} {
		if _, err := readStream(t, engine.Options{}, b); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	// many frame headers that claim the whole file: resync stays linear-bounded
	var hdrs []byte
	for i := 0; i < 20000; i++ {
		h := make([]byte, 16)
		copy(h, stream.StreamMagic)
		binary.LittleEndian.PutUint32(h[8:], uint32(20000*16-16*i-17))
		hdrs = append(hdrs, h...)
	}
	s, err := readStream(t, engine.Options{}, slices.Concat(proc.Bytes(), hdrs, proc.Bytes()))
	if err != nil || s.tot.BadFrames == 0 {
		t.Errorf("headers: %v %+v", err, s.tot)
	}
}

// FuzzStream: any bytes give output or an error, never a panic or a hang.
func FuzzStream(f *testing.F) {
	g := tracetest.Gen(f, tracetest.GenOpts{Seed: 7, PID: 1, Threads: 2, PerTh: 30, FrameEvents: 10, Line: tracetest.Line24MHz, Marks: true})
	f.Add(g.B)
	f.Add(g.B[:len(g.B)/2])
	var buf bytes.Buffer
	w := stream.NewStreamWriter(&buf)
	w.Process(stream.StreamProcess{PID: 3})
	w.Methods(stream.StreamMethod{ID: 1, Class: "A", Selector: "b"})
	w.Open(1, 50, []stream.OpenCall{{ID: 1, Start: 10, Depth: 0}, {ID: 1, Start: 20, Depth: 1}})
	w.Events(1, 0, []stream.StreamEvent{{ID: 1, Start: 20, End: 30, Depth: 1}})
	f.Add(buf.Bytes())
	f.Add(cpuTrace(f)) // cpu frames (cpu_test.go)
	// async hops: enqueued in a call, run on another thread (ended, and still running)
	hop := func(k stream.MarkKind, id, at uint64) stream.StreamEvent {
		return stream.StreamEvent{Type: stream.EventMark, ID: uint64(k), Start: at, End: at, Count: id}
	}
	buf.Reset()
	w.Process(stream.StreamProcess{PID: 4})
	w.Methods(stream.StreamMethod{ID: 1, Class: "A", Selector: "b"}, stream.StreamMethod{ID: 2, Class: "NSOperationQueue", Selector: "addOperation:"})
	w.Events(1, 0, []stream.StreamEvent{hop(stream.MarkHopEnqueue, 1, 12), {ID: 2, Start: 11, End: 13, Depth: 1},
		hop(stream.MarkHopEnqueue, 2, 14), {ID: 1, Start: 10, End: 20, Depth: 0}})
	w.Events(2, 0, []stream.StreamEvent{hop(stream.MarkHopBegin, 1, 21), {ID: 1, Start: 22, End: 23, Depth: 0},
		hop(stream.MarkHopEnd, 1, 24), hop(stream.MarkHopBegin, 2, 25)})
	w.Open(2, 40, []stream.OpenCall{{ID: 1, Start: 26, Depth: 0}})
	f.Add(buf.Bytes())
	f.Add(waitsStream(f)) // wait events and release marks (waits_test.go)
	f.Add([]byte("\x01\x2c\x01\x00\x00\x00\x00\x00\x00\x00\x07\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00" +
		"\x03\x07\x01\x00\x01A\x01b\x05\x14\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x04\x14\x05\x02"))
	f.Fuzz(func(t *testing.T, b []byte) {
		// The bytes as they are (frames whose checksums mutations break), and read as
		// {kind u8, length u8, payload} framed with good checksums (payloads the decoders see).
		var framed bytes.Buffer
		w := stream.NewStreamWriter(&framed)
		for r := b; len(r) >= 2; {
			n := min(int(r[1]), len(r)-2)
			w.Frame(r[0], r[2:2+n])
			r = r[2+n:]
		}
		for _, in := range [][]byte{b, framed.Bytes()} {
			for _, s := range []engine.Sink{sink.NewChromeSink(&bytes.Buffer{}), sink.NewFoldedSink(&bytes.Buffer{}), &collectSink{},
				report.NewReportSink(report.ReportOptions{}), sink.NewPerfettoSink(&bytes.Buffer{}, sink.Meta{})} {
				engine.ProcessStreams([]engine.Input{{R: bytes.NewReader(in), Size: int64(len(in))}}, engine.Options{MaxDepth: -1}, s)
			}
		}
		// pprof (gzip makes it the slowest sink) once; Process sniffs raw and stream
		engine.Process(bytes.NewReader(framed.Bytes()), engine.Options{MaxDepth: -1}, sink.NewPprofSink(&bytes.Buffer{}))
		engine.Process(bytes.NewReader(b), engine.Options{MaxDepth: -1}, &collectSink{})
	})
}

// TestStreamMemory: what reading a stream allocates does not grow with its calls: ten times
// the calls (900,000 more, 4.5 MB more file) allocate less than 2 MiB more (the read buffer
// reaching its 1 MiB size, the index's few hundred frame offsets), where 8 bytes a call would
// be 7 MB.
func TestStreamMemory(t *testing.T) {
	alloc := func(calls int) (uint64, int) {
		g := tracetest.Gen(t, tracetest.GenOpts{Seed: 8, PID: 1, Threads: 4, PerTh: calls / 4, FrameEvents: 8192, Line: tracetest.Line24MHz, Marks: true})
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		tot, err := engine.ProcessStreams([]engine.Input{{R: bytes.NewReader(g.B), Size: int64(len(g.B))}}, engine.Options{MaxDepth: -1}, nopSink{})
		runtime.ReadMemStats(&m1)
		if err != nil || tot.Calls < uint64(calls) {
			t.Fatalf("%v: %+v", err, tot)
		}
		return m1.TotalAlloc - m0.TotalAlloc, len(g.B)
	}
	small, sf := alloc(100_000)
	big, bf := alloc(1_000_000)
	t.Logf("%d calls (%d bytes): %d bytes allocated; %d calls (%d bytes): %d", 100_000, sf, small, 1_000_000, bf, big)
	if big > small+4<<20 { // pass 2 holds one segment (up to the largest frame) at a time
		t.Errorf("allocated %d bytes for 1 M calls, %d for 100 k", big, small)
	}
}

// TestScanFrames: the low-level view gives back every frame the writer wrote, and every
// events frame decodes to the events written.
func TestScanFrames(t *testing.T) {
	g := tracetest.Gen(t, tracetest.GenOpts{Seed: 9, PID: 1, Threads: 3, PerTh: 500, FrameEvents: 64, Line: tracetest.Line24MHz, Marks: true})
	var ends []int
	var frames []tracetest.GenFrame
	st, err := engine.ScanFrames(engine.Input{R: bytes.NewReader(g.B), Size: int64(len(g.B))}, func(kind uint8, off int64, p []byte) error {
		ends = append(ends, int(off)+stream.FrameHeader+len(p))
		if kind == stream.FrameEvents {
			tid, _, evs, err := stream.DecodeEvents(p)
			if err != nil {
				return err
			}
			frames = append(frames, tracetest.GenFrame{Off: int(off), End: int(off) + stream.FrameHeader + len(p), TID: tid, Evs: evs})
		}
		return nil
	})
	if err != nil || st != (engine.FrameStats{}) {
		t.Fatal(err, st)
	}
	if !slices.Equal(ends, g.Ends) {
		t.Errorf("frames end at %v, want %v", ends, g.Ends)
	}
	if !slices.EqualFunc(frames, g.Frames, func(a, b tracetest.GenFrame) bool {
		return a.Off == b.Off && a.End == b.End && a.TID == b.TID && slices.Equal(a.Evs, b.Evs)
	}) {
		t.Errorf("events frames differ")
	}
}

// TestClockThroughStream: a call across two segments of the clock of different slopes gets
// its start and duration from each (the engine's TestClockPiecewise checks the clock map).
func TestClockThroughStream(t *testing.T) {
	var buf bytes.Buffer
	w := stream.NewStreamWriter(&buf)
	w.Process(stream.StreamProcess{PID: 1})
	w.Clock(stream.ClockSample{Tick: 100, MonoNanos: 1000})
	w.Methods(stream.StreamMethod{ID: 1, Class: "A", Selector: "b"})
	w.Events(1, 0, []stream.StreamEvent{{ID: 1, Start: 90, End: 100}, {ID: 1, Start: 150, End: 250}})
	w.Clock(stream.ClockSample{Tick: 200, MonoNanos: 2000})
	w.Clock(stream.ClockSample{Tick: 300, MonoNanos: 2500})
	s, err := readStream(t, engine.Options{MaxDepth: -1}, buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if len(s.calls) != 2 || s.calls[0].Start != 0 || s.calls[0].Dur != 100 || s.calls[1].Start != 600 || s.calls[1].Dur != 500+250 {
		t.Errorf("calls %+v", s.calls)
	}
}

// TestProcessSniffs: Process reads a stream from a file (random access), from a pipe (read
// whole) and a raw dump, told apart by the magic.
func TestProcessSniffs(t *testing.T) {
	g := tracetest.Gen(t, tracetest.GenOpts{Seed: 10, PID: 1, Threads: 2, PerTh: 100, FrameEvents: 30, Line: tracetest.Line24MHz})
	want, _ := want(g, func(tracetest.GenFrame) bool { return true })
	p := t.TempDir() + "/s.mtrace"
	if err := os.WriteFile(p, g.B, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	go func() { pw.Write(g.B); pw.Close() }()
	defer pr.Close()
	for name, r := range map[string]io.Reader{"file": f, "pipe": pr, "reader": bytes.NewBuffer(g.B)} {
		s := &collectSink{}
		if _, err := engine.Process(r, engine.Options{MaxDepth: -1}, s); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		sameCalls(t, name, s.calls, want)
	}
}
