package tracer

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/msgtrace/msgtrace/tracer/engine"
	"github.com/msgtrace/msgtrace/tracer/report"
	"github.com/msgtrace/msgtrace/tracer/sink"
	"github.com/msgtrace/msgtrace/tracer/stream"
)

// waitsStream is a stream where the main thread's -[App frame:] waits in objc_sync_enter (a
// wait event under it) and in pthread_cond_wait (holder unknown to the lock) while thread
// "indexer" runs -[Index compact], which releases both (release marks) before it returns.
func waitsStream(t testing.TB) []byte {
	var buf bytes.Buffer
	w := stream.NewStreamWriter(&buf)
	w.Process(stream.StreamProcess{PID: 7, Name: "app"})
	w.Clock(stream.ClockSample{Tick: 0, MonoNanos: 0, RateNum: 1000, RateDen: 1}) // a tick is 1 us
	w.Methods(stream.StreamMethod{ID: 1, Class: "App", Selector: "frame:"}, stream.StreamMethod{ID: 2, Class: "Index", Selector: "compact"})
	w.Thread(stream.StreamThread{TID: 100, Flags: stream.ThreadMain, Name: "app"})
	w.Thread(stream.StreamThread{TID: 200, Name: "indexer"})
	w.Events(200, 0, []stream.StreamEvent{
		{Type: stream.EventMark, ID: uint64(stream.MarkRelease), Start: 30000, End: 30000, Count: 0x7f00cafe0010},
		{Type: stream.EventMark, ID: uint64(stream.MarkRelease), Start: 44000, End: 44000, Count: 0x7f00cafe0020},
		{Type: stream.EventCall, ID: 2, Start: 1000, End: 45000, Depth: 0},
	})
	w.Events(100, 0, []stream.StreamEvent{
		{Type: stream.EventWait, ID: uint64(stream.WaitSyncEnter), Start: 5000, End: 30010, Depth: 1, Addr: 0x7f00cafe0010, Holder: 200},
		{Type: stream.EventWait, ID: uint64(stream.WaitCondWait), Start: 30020, End: 44020, Depth: 1, Addr: 0x7f00cafe0020},
		{Type: stream.EventCall, ID: 1, Start: 4000, End: 45000, Depth: 0},
	})
	if w.Err() != nil {
		t.Fatal(w.Err())
	}
	return buf.Bytes()
}

// TestWaitsRead: wait events read back as slices "wait PRIMITIVE" under the call that waited,
// never hitches themselves; the report lists them in the hitch with their holders (the lock's
// owner; the thread whose release came last before a condition's wait ended) and the holder's
// method at the release, and says so in the sentence; release marks draw nothing.
func TestWaitsRead(t *testing.T) {
	s := waitsStream(t)
	rep := reportOf(t, report.ReportOptions{BudgetNanos: 16e6}, s)
	if len(rep.Hitches) != 1 || rep.Hitches[0].Method != "-[App frame:]" {
		t.Fatalf("hitches %+v, want -[App frame:] alone", callKeys(rep.Hitches))
	}
	h := rep.Hitches[0]
	if len(h.Waits) != 2 || h.WaitingNanos != 25010e3+14000e3 {
		t.Fatalf("waits %+v (%d ns)", h.Waits, h.WaitingNanos)
	}
	sync, cond := h.Waits[0], h.Waits[1]
	if sync.Primitive != "objc_sync_enter" || sync.Address != "0xcafe0010" || sync.HolderThread != "indexer" || sync.HolderFrom != "owner" ||
		sync.HolderMethod != "-[Index compact]" || sync.ReleaseNanos != 29000e3 { // the trace starts at tick 1000
		t.Errorf("objc_sync_enter wait %+v", sync)
	}
	if cond.Primitive != "pthread_cond_wait" || cond.HolderTID != 200 || cond.HolderFrom != "release" || cond.HolderMethod != "-[Index compact]" {
		t.Errorf("pthread_cond_wait wait %+v", cond)
	}
	want := "-[App frame:] 41.000 ms on thread main: 1.990 ms outside waits, 25.010 ms waiting in objc_sync_enter for the lock held by thread indexer in -[Index compact], 14.000 ms waiting in pthread_cond_wait for a signal from thread indexer in -[Index compact]"
	if h.Why != want {
		t.Errorf("sentence\n%s\nwant\n%s", h.Why, want)
	}
	// the timelines: the waits as slices under -[App frame:]; no release drawn
	var folded bytes.Buffer
	if _, err := engine.ProcessStreams([]engine.Input{{R: bytes.NewReader(s), Size: int64(len(s))}}, engine.Options{MaxDepth: -1}, sink.NewFoldedSink(&folded)); err != nil {
		t.Fatal(err)
	}
	out := folded.Bytes()
	if !strings.Contains(string(out), "-[App frame:];wait objc_sync_enter 25010000") || strings.Contains(string(out), "release") {
		t.Errorf("folded:\n%s", out)
	}
}

// TestWaitsFlows: each wait whose release was recorded is a flow from the holder's release to
// the waiter's wake-up: in Chrome JSON a flow start ("s") on the holder's thread at the release
// and a flow end ("f", bound to the enclosing slice) on the waiter's at the wake-up; in Perfetto
// (read back as trace_processor reads the packets) an instant "release PRIMITIVE" with flow_ids
// on the holder's track and "wake PRIMITIVE" with terminating_flow_ids on the waiter's, and the
// wait's slice carries its address and holder.
func TestWaitsFlows(t *testing.T) {
	s := waitsStream(t)
	in := []engine.Input{{R: bytes.NewReader(s), Size: int64(len(s))}}
	var js bytes.Buffer
	if _, err := engine.ProcessStreams(in, engine.Options{MaxDepth: -1}, sink.NewChromeSink(&js)); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		TraceEvents []struct {
			Ph, Name, Bp string
			Ts           float64
			TID          uint64
			ID           uint64
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	var flows []string
	for _, e := range doc.TraceEvents {
		if e.Ph == "s" || e.Ph == "f" {
			flows = append(flows, fmtFlow(e.Ph, e.Name, e.TID, e.Ts, e.ID, e.Bp))
		}
	}
	want := []string{
		"s wait objc_sync_enter tid 200 at 29000 id 1099511627777 e",
		"f wait objc_sync_enter tid 100 at 29010 id 1099511627777 e",
		"s wait pthread_cond_wait tid 200 at 43000 id 1099511627778 e",
		"f wait pthread_cond_wait tid 100 at 43020 id 1099511627778 e",
	}
	if strings.Join(flows, "\n") != strings.Join(want, "\n") {
		t.Errorf("Chrome flows\n%s\nwant\n%s", strings.Join(flows, "\n"), strings.Join(want, "\n"))
	}

	var pb bytes.Buffer
	if _, err := engine.ProcessStreams([]engine.Input{{R: bytes.NewReader(s), Size: int64(len(s))}}, engine.Options{MaxDepth: -1}, sink.NewPerfettoSink(&pb, sink.Meta{})); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range pfSequences(t, pb.Bytes()) {
		ev := p.m("track_event")
		if ev == nil {
			continue
		}
		name := ev.s("name")
		switch {
		case ev.has("flow_ids") || ev.has("terminating_flow_ids"):
			id := ev.u("flow_ids") | ev.u("terminating_flow_ids")
			got = append(got, fmtFlow(name, "", p.track, float64(p.ts), id, ""))
		case strings.HasPrefix(name, "wait ") && len(ev["debug_annotations"]) != 2:
			t.Errorf("%s: debug annotations %v, want address and holder_tid", name, ev["debug_annotations"])
		}
	}
	wantPf := []string{
		fmtFlow("release objc_sync_enter", "", threadUUID(7, 200), 29000e3, 1<<40+1, ""),
		fmtFlow("wake objc_sync_enter", "", threadUUID(7, 100), 29010e3, 1<<40+1, ""),
		fmtFlow("release pthread_cond_wait", "", threadUUID(7, 200), 43000e3, 1<<40+2, ""),
		fmtFlow("wake pthread_cond_wait", "", threadUUID(7, 100), 43020e3, 1<<40+2, ""),
	}
	if strings.Join(got, "\n") != strings.Join(wantPf, "\n") {
		t.Errorf("Perfetto flows\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(wantPf, "\n"))
	}
}

func fmtFlow(ph, name string, tid uint64, ts float64, id uint64, bp string) string {
	return strings.TrimSpace(ph+" "+name) + " tid " + strconv.FormatUint(tid, 10) + " at " + strconv.FormatUint(uint64(ts), 10) + " id " + strconv.FormatUint(id, 10) + " " + bp
}

// TestWaitsDiff: diff counts the time a method waited in contended waits (metric wait) beside
// its self time: a run whose -[App frame:] waits where the base's did not is a wait regression
// of -[App frame:], and the wait itself a new method.
func TestWaitsDiff(t *testing.T) {
	prof := func(s []byte) *report.RunProfile {
		ps := report.NewProfileSink()
		if _, err := engine.ProcessStreams([]engine.Input{{R: bytes.NewReader(s), Size: int64(len(s))}}, engine.Options{MaxDepth: -1}, ps); err != nil {
			t.Fatal(err)
		}
		return ps.Profile()
	}
	var buf bytes.Buffer
	w := stream.NewStreamWriter(&buf)
	w.Process(stream.StreamProcess{PID: 7, Name: "app"})
	w.Clock(stream.ClockSample{Tick: 0, MonoNanos: 0, RateNum: 1000, RateDen: 1})
	w.Methods(stream.StreamMethod{ID: 1, Class: "App", Selector: "frame:"})
	w.Thread(stream.StreamThread{TID: 100, Flags: stream.ThreadMain})
	w.Events(100, 0, []stream.StreamEvent{{Type: stream.EventCall, ID: 1, Start: 4000, End: 6000, Depth: 0}})
	base, head := prof(buf.Bytes()), prof(waitsStream(t))
	if got := head.Waits["-[App frame:]"]; got != 39010e3 {
		t.Errorf("-[App frame:] waited %d ns in the profile, want 39010000", got)
	}
	d := report.Diff([]*report.RunProfile{base}, []*report.RunProfile{head}, report.DefaultDiffOptions())
	var wait, newWait bool
	for _, e := range d.Regressions {
		wait = wait || (e.Metric == "wait" && e.Method == "-[App frame:]" && e.Head == 39010e3 && e.ChangePct == nil)
	}
	for _, p := range d.New {
		newWait = newWait || (p.Method == "wait objc_sync_enter" && p.Regression)
	}
	if !wait || !newWait || !d.Regressed() {
		t.Errorf("regressions %+v, new %+v: want -[App frame:]'s wait and the new wait objc_sync_enter", d.Regressions, d.New)
	}
}

// TestWaitsHolderEnqueuedBy: when the holder's thread ran work handed to it (an async hop:
// -[App scheduleIndex] enqueued what -[Index compact] runs in), the wait says who enqueued the
// holder's work, in its JSON and in the sentence.
func TestWaitsHolderEnqueuedBy(t *testing.T) {
	var buf bytes.Buffer
	w := stream.NewStreamWriter(&buf)
	w.Process(stream.StreamProcess{PID: 7, Name: "app"})
	w.Clock(stream.ClockSample{Tick: 0, MonoNanos: 0, RateNum: 1000, RateDen: 1}) // a tick is 1 us
	w.Methods(stream.StreamMethod{ID: 1, Class: "App", Selector: "frame:"}, stream.StreamMethod{ID: 2, Class: "Index", Selector: "compact"},
		stream.StreamMethod{ID: 3, Class: "App", Selector: "scheduleIndex"})
	w.Thread(stream.StreamThread{TID: 100, Flags: stream.ThreadMain, Name: "app"})
	w.Thread(stream.StreamThread{TID: 200, Name: "indexer"})
	mark := func(kind stream.MarkKind, at, count uint64) stream.StreamEvent {
		return stream.StreamEvent{Type: stream.EventMark, ID: uint64(kind), Start: at, End: at, Count: count}
	}
	w.Events(200, 0, []stream.StreamEvent{
		mark(stream.MarkHopBegin, 999, 1),
		mark(stream.MarkRelease, 30000, 0x7f00cafe0010),
		{Type: stream.EventCall, ID: 2, Start: 1000, End: 45000, Depth: 0},
		mark(stream.MarkHopEnd, 45001, 1),
	})
	w.Events(100, 0, []stream.StreamEvent{
		mark(stream.MarkHopEnqueue, 600, 1),
		{Type: stream.EventCall, ID: 3, Start: 500, End: 900, Depth: 0},
		{Type: stream.EventWait, ID: uint64(stream.WaitSyncEnter), Start: 5000, End: 30010, Depth: 1, Addr: 0x7f00cafe0010, Holder: 200},
		{Type: stream.EventCall, ID: 1, Start: 4000, End: 45000, Depth: 0},
	})
	if w.Err() != nil {
		t.Fatal(w.Err())
	}
	rep := reportOf(t, report.ReportOptions{BudgetNanos: 16e6}, buf.Bytes())
	if len(rep.Hitches) != 1 || len(rep.Hitches[0].Waits) != 1 {
		t.Fatalf("hitches %+v", callKeys(rep.Hitches))
	}
	h := rep.Hitches[0]
	e := h.Waits[0].HolderEnqueuedBy
	if e == nil || e.Method != "-[App scheduleIndex]" || e.TID != 100 {
		t.Fatalf("holder enqueued by %+v, want -[App scheduleIndex] on thread 100", e)
	}
	if want := "for the lock held by thread indexer in -[Index compact] (enqueued by -[App scheduleIndex])"; !strings.Contains(h.Why, want) {
		t.Errorf("sentence %q lacks %q", h.Why, want)
	}
	js, err := json.Marshal(h.Waits[0])
	if err != nil || !strings.Contains(string(js), `"holder_enqueued_by":{"method":"-[App scheduleIndex]"`) {
		t.Errorf("JSON %s (%v)", js, err)
	}
}
