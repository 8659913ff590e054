package tracer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/msgtrace/msgtrace/tracer/engine"
	"github.com/msgtrace/msgtrace/tracer/report"
	"github.com/msgtrace/msgtrace/tracer/sink"
	"github.com/msgtrace/msgtrace/tracer/stream"
)

// hopMark is an async hop's mark at ms.
func hopMark(kind stream.MarkKind, id uint64, at float64) stream.StreamEvent {
	return stream.StreamEvent{Type: stream.EventMark, ID: uint64(kind), Start: uint64(at * ms), End: uint64(at * ms), Count: id}
}

// hopsStream is a process (pid 7) whose main thread hands work to a worker and to itself:
// hop 1 enqueued inside -[NSOperationQueue addOperation:] (a framework's enqueuing method)
// called by -[App schedule], run by the worker as -[Worker work]; hop 2 (a repeating timer)
// enqueued by -[App tick] and run twice on main as -[App ticked]; hop 3 enqueued by -[App
// later] and never run; hop 4 enqueued by -[App spawn] and run by a worker whose -[Worker
// loop] is still running at the end (an open frame, no end mark).
func hopsStream(t *testing.T, hops bool) []byte {
	main := rthread{tid: 1, main: true, name: "main", roots: []*rnode{
		rn("-[App schedule]", 10, 20, rn("-[NSOperationQueue addOperation:]", 12, 14)),
		rn("-[App tick]", 30, 40),
		rn("-[App ticked]", 71, 72),
		rn("-[App ticked]", 81, 82),
		rn("-[App later]", 89, 91),
		rn("-[App spawn]", 92, 93),
	}}
	worker := rthread{tid: 2, name: "worker", roots: []*rnode{
		rn("-[Worker loop]", 5, 100, rn("-[Worker work]", 51, 60)),
	}}
	if hops {
		main.marks = []stream.StreamEvent{
			hopMark(stream.MarkHopEnqueue, 1, 13), hopMark(stream.MarkHopEnqueue, 2, 35),
			hopMark(stream.MarkHopBegin, 2, 70.5), hopMark(stream.MarkHopEnd, 2, 73),
			hopMark(stream.MarkHopBegin, 2, 80.5), hopMark(stream.MarkHopEnd, 2, 83),
			hopMark(stream.MarkHopEnqueue, 3, 90), hopMark(stream.MarkHopEnqueue, 4, 92.5),
		}
		worker.marks = []stream.StreamEvent{hopMark(stream.MarkHopBegin, 1, 50), hopMark(stream.MarkHopEnd, 1, 61)}
	}
	s := reportStream(t, 7, 120, main, worker)
	// a third thread, started by hop 4, still in -[Spawned run] at the end
	var b bytes.Buffer
	w := stream.NewStreamWriter(&b)
	w.Methods(stream.StreamMethod{ID: 100, Class: "Spawned", Selector: "run"})
	w.Thread(stream.StreamThread{TID: 3, Name: "spawned"})
	if hops {
		w.Events(3, 0, []stream.StreamEvent{hopMark(stream.MarkHopBegin, 4, 94)})
	}
	w.Open(3, uint64(110*ms), []stream.OpenCall{{ID: 100, Start: uint64(95 * ms), Depth: 0}})
	if w.Err() != nil {
		t.Fatal(w.Err())
	}
	return append(s, b.Bytes()...)
}

func convertHops(t *testing.T, s []byte, sk engine.Sink) {
	t.Helper()
	if _, err := engine.ProcessStreams([]engine.Input{{R: bytes.NewReader(s), Size: int64(len(s))}}, engine.Options{MaxDepth: -1}, sk); err != nil {
		t.Fatal(err)
	}
}

// TestHopsPerfetto: each hop is a flow from the call that enqueued it (the innermost call
// around the enqueue) to the first call of each run, as trace_processor binds a TrackEvent's
// flow_ids and terminating_flow_ids (to the event's own slice); the executed call's
// enqueued_by names who asked, past the framework's enqueuing method; a hop that never ran
// has no flow; no hop mark is an instant; a stream without hops has no flow.
func TestHopsPerfetto(t *testing.T) {
	flows := func(s []byte) ([]string, map[string]string) {
		var pb bytes.Buffer
		convertHops(t, s, sink.NewPerfettoSink(&pb, sink.Meta{}))
		out := map[uint64][2]string{}
		by := map[string]string{}
		for _, p := range pfSequences(t, pb.Bytes()) {
			ev := p.m("track_event")
			if ev == nil {
				continue
			}
			if ev.u("type") == pfInstant && strings.HasPrefix(ev.s("name"), "[hop") {
				t.Errorf("a hop mark written as an instant: %v", ev)
			}
			for _, id := range ev["flow_ids"] {
				f := out[id.(uint64)]
				f[0] = ev.s("name")
				out[id.(uint64)] = f
			}
			for _, id := range ev["terminating_flow_ids"] {
				f := out[id.(uint64)]
				f[1] = ev.s("name")
				out[id.(uint64)] = f
			}
			for _, a := range ev["debug_annotations"] {
				if a.(pfMsg).s("name") == "enqueued_by" {
					by[fmt.Sprintf("%s@%d", ev.s("name"), p.ts/ms)] = a.(pfMsg).s("string_value")
				}
			}
		}
		var got []string
		for _, f := range out {
			got = append(got, f[0]+" -> "+f[1])
		}
		sort.Strings(got)
		return got, by
	}
	got, by := flows(hopsStream(t, true))
	want := []string{"-[App spawn] -> -[Spawned run]", "-[App tick] -> -[App ticked]", "-[App tick] -> -[App ticked]", "-[NSOperationQueue addOperation:] -> -[Worker work]"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("flows %q\nwant  %q", got, want)
	}
	// (times since the trace's first event, -[Worker loop] at 5 ms)
	wantBy := map[string]string{"-[Worker work]@46": "-[App schedule] on thread main", "-[App ticked]@66": "-[App tick] on thread main",
		"-[App ticked]@76": "-[App tick] on thread main", "-[Spawned run]@90": "-[App spawn] on thread main"}
	if fmt.Sprint(by) != fmt.Sprint(wantBy) {
		t.Errorf("enqueued_by %v\nwant        %v", by, wantBy)
	}
	if got, by := flows(hopsStream(t, false)); len(got) != 0 || len(by) != 0 {
		t.Errorf("without hop marks: flows %q, enqueued_by %v", got, by)
	}
}

// TestHopsJSON: Chrome JSON's flow events, bound as trace_processor's JSON importer binds
// them ("s" and "f" with "bp":"e": to the slice open on their thread at their time, the
// innermost), go from the enqueuing call to each run's first call, which says who enqueued it
// in args.enqueued_by.
func TestHopsJSON(t *testing.T) {
	var js bytes.Buffer
	convertHops(t, hopsStream(t, true), sink.NewChromeSink(&js))
	var f struct {
		TraceEvents []struct {
			Ph, Name, Bp string
			Ts           float64
			Tid          uint64
			ID           uint64
			Args         map[string]any
		}
	}
	if err := json.Unmarshal(js.Bytes(), &f); err != nil {
		t.Fatal(err)
	}
	type open struct {
		name string
		ts   float64
	}
	stacks := map[uint64][]open{}
	evs := f.TraceEvents
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].Ts < evs[j].Ts })
	ends := map[uint64][2]string{}
	by := map[string]any{}
	for _, e := range evs {
		st := stacks[e.Tid]
		switch e.Ph {
		case "B":
			stacks[e.Tid] = append(st, open{e.Name, e.Ts})
			if v, ok := e.Args["enqueued_by"]; ok {
				by[e.Name] = v
			}
		case "E":
			stacks[e.Tid] = st[:len(st)-1]
		case "s", "f":
			if e.Bp != "e" || len(st) == 0 {
				t.Fatalf("flow event %+v: not bound to an enclosing slice", e)
			}
			x := ends[e.ID]
			if e.Ph == "s" {
				x[0] = st[len(st)-1].name
			} else {
				x[1] = st[len(st)-1].name
			}
			ends[e.ID] = x
		}
	}
	var got []string
	for _, x := range ends {
		got = append(got, x[0]+" -> "+x[1])
	}
	sort.Strings(got)
	want := []string{"-[App spawn] -> -[Spawned run]", "-[App tick] -> -[App ticked]", "-[App tick] -> -[App ticked]", "-[NSOperationQueue addOperation:] -> -[Worker work]"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("flows %q\nwant  %q", got, want)
	}
	wantBy := map[string]any{"-[Worker work]": "-[App schedule] on thread main", "-[App ticked]": "-[App tick] on thread main", "-[Spawned run]": "-[App spawn] on thread main"}
	if fmt.Sprint(by) != fmt.Sprint(wantBy) {
		t.Errorf("enqueued_by %v\nwant        %v", by, wantBy)
	}
}

// TestHopsReport: a call inside a hop's run says who enqueued the work (enqueued_by in
// --json), the innermost run's when runs nest; calls outside every run say nothing.
func TestHopsReport(t *testing.T) {
	rs := report.NewReportSink(report.ReportOptions{Top: 50})
	convertHops(t, hopsStream(t, true), rs)
	got := map[string]string{}
	for _, c := range rs.Report().Longest {
		if c.EnqueuedBy != nil {
			got[c.Method] = c.EnqueuedBy.String()
		}
	}
	want := map[string]string{"-[Worker work]": "enqueued by -[App schedule] on thread main",
		"-[App ticked]": "enqueued by -[App tick] on thread main", "-[Spawned run]": "enqueued by -[App spawn] on thread main"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("enqueued by %v\nwant        %v", got, want)
	}
	b, err := json.Marshal(rs.Report())
	if err != nil || !strings.Contains(string(b), `"enqueued_by":{"method":"-[App schedule]","thread":"main","tid":1,"hop":1,"ran":"-[Worker work]"}`) {
		t.Errorf("--json: %v %s", err, b)
	}
}
