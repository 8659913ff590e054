//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/msgtrace/msgtrace/internal/testfiles"
	"github.com/msgtrace/msgtrace/tracer"
	"github.com/msgtrace/msgtrace/tracer/engine"
	"github.com/msgtrace/msgtrace/tracer/report"
	"github.com/msgtrace/msgtrace/tracer/sink"
	"github.com/msgtrace/msgtrace/tracer/stream"
)

// hopSink keeps a trace's calls and its hops (the header's: what the reader made of the
// recorder's hop marks).
type hopSink struct {
	calls int
	hops  *stream.Hops
}

func (s *hopSink) BeginThread(h *stream.Header, _ *stream.Thread) error {
	s.hops = h.Hops
	return nil
}
func (s *hopSink) Call(*engine.Call) error   { s.calls++; return nil }
func (s *hopSink) Skip(int) error            { return nil }
func (s *hopSink) Needs() engine.Needs       { return engine.Needs{} }
func (s *hopSink) Mark(m *stream.Mark) error { return nil }
func (s *hopSink) EndThread() error          { return nil }
func (s *hopSink) Close(engine.Totals) error { return nil }

// TestGNUstepHopsRecorded runs a gcc + gnustep-base program that hands work to a worker
// NSThread (detachNewThreadSelector:, performSelector:onThread: with waitUntilDone: NO and YES),
// to an NSOperationQueue, and to the main run loop (performSelector:withObject:afterDelay:, a
// repeating NSTimer, an NSNotificationQueue post), preloaded at the defaults. Each work item is
// a hop enqueued by the app method that asked for it, on its thread, that ran the app method
// it carries on the thread that ran it (the timer's twice); Perfetto has a flow from the one to
// the other (as trace_processor binds them) and Chrome JSON flow events (as its JSON importer
// binds them), the executed call labelled with who enqueued it; the report's calls say the
// same. With MSGTRACE_FLOWS=0 there is no hop and no flow.
func TestGNUstepHopsRecorded(t *testing.T) {
	testfiles.Slow(t, "builds and runs a GNUstep program")
	testfiles.NeedTools(t, "gnustep-config", "gcc")
	root := testfiles.Root(t)
	dir := t.TempDir()
	mustGNUstepCC(t, dir, "hops", filepath.Join(root, "testdata", "gnustep", "hops.m"))
	g := gnustep{dir: dir, lib: filepath.Join(root, "bin", "libmsgtrace-preload.so")}
	if _, err := os.Stat(g.lib); err != nil {
		t.Skip("bin/libmsgtrace-preload.so not built (make build)")
	}
	run := func(name string, env map[string]string) *hopSink {
		out := filepath.Join(dir, name+".mtrace")
		env["MSGTRACE_OUT"] = out
		so, se, err := g.run(t, true, "home", env, nil, filepath.Join(dir, "hops"))
		if err != nil || !strings.Contains(so, "done") {
			t.Fatalf("hops: %v\n%s\n%s", err, so, se)
		}
		var s hopSink
		processStream(t, out, &s)
		return &s
	}
	s := run("on", map[string]string{})
	// each work item: the app method that enqueued it, the thread and app method that ran it
	want := []struct{ enq, enqThread, runThread, ran string }{
		{"-[App startWorker]", "main", "worker", "-[Worker loop:]"},
		{"-[App schedulePerform]", "main", "worker", "-[Worker performed:]"},
		{"-[App schedulePerformWait]", "main", "worker", "-[Worker performedWait:]"},
		{"-[App scheduleOperation]", "main", "", "-[Worker operated:]"}, // a queue's thread
		{"-[App scheduleDelayed]", "main", "main", "-[App delayedRan:]"},
		{"-[App scheduleTimer]", "main", "main", "-[App ticked:]"},
		{"-[App scheduleNote]", "main", "main", "-[App noted:]"},
		{"-[App stopWorker]", "main", "worker", "-[Worker stop:]"},
	}
	if s.hops.Len() == 0 {
		t.Fatal("no hops in the trace")
	}
	// the worker names itself in -[Worker loop:], after its hop began (and registered it
	// under the name it inherited): it is the thread that ran -[Worker loop:]
	tids := map[string]uint64{}
	for _, w := range want {
		found, ended := false, false
		for i := range s.hops.List {
			h := &s.hops.List[i]
			if !h.Enqueued || h.EnqueuedBy != w.enq || h.EnqThread != w.enqThread {
				continue
			}
			for _, r := range h.Runs {
				if r.Call.Name != w.ran {
					continue
				}
				found, ended = true, ended || r.Ended
				switch tid, ok := tids[w.runThread]; {
				case w.runThread == "main":
					if r.Thread != "main" {
						t.Errorf("%s ran %s on thread %q, want main", w.enq, w.ran, r.Thread)
					}
				case w.runThread == "":
				case !ok:
					tids[w.runThread] = r.TID
				case tid != r.TID:
					t.Errorf("%s ran %s on thread %d (%s), want %s's, %d", w.enq, w.ran, r.TID, r.Thread, w.runThread, tid)
				}
			}
			if w.ran == "-[App ticked:]" && len(h.Runs) != 2 {
				t.Errorf("the repeating timer's hop ran %d times, want 2 (one per firing)", len(h.Runs))
			}
		}
		if !found {
			t.Errorf("no hop from %s (thread %s) to %s", w.enq, w.enqThread, w.ran)
		} else if !ended {
			t.Errorf("%s: the run of %s did not end", w.enq, w.ran)
		}
	}
	if t.Failed() || testing.Verbose() {
		for _, h := range s.hops.List {
			t.Logf("%s: %+v", h.String(), h.Runs)
		}
	}

	// the outputs: a flow from the enqueuing app method to the executed one in Perfetto and in
	// Chrome JSON, the executed call labelled; the report's calls say who enqueued them
	onStream := filepath.Join(dir, "on.mtrace")
	wantFlows := map[string]string{}
	for _, w := range want {
		wantFlows[w.enq+" -> "+w.ran] = w.enq + " on thread " + w.enqThread
	}
	checkFlows := func(format string, got map[string]string) {
		t.Helper()
		for f, by := range wantFlows {
			if got[f] != by {
				t.Errorf("%s: flow %s labelled %q, want %q", format, f, got[f], by)
			}
		}
		if t.Failed() {
			t.Logf("%s flows: %v", format, got)
		}
	}
	checkFlows("perfetto", pfFlows(t, convertStream(t, onStream, "perfetto")))
	checkFlows("json", jsonFlows(t, convertStream(t, onStream, "json")))
	rs := report.NewReportSink(report.ReportOptions{Top: 100})
	processStream(t, onStream, rs)
	by := map[string]string{}
	for _, c := range rs.Report().Longest {
		if c.EnqueuedBy != nil {
			by[c.Method] = c.EnqueuedBy.String()
		}
	}
	for _, w := range want {
		if got, wantBy := by[w.ran], "enqueued by "+w.enq+" on thread "+w.enqThread; got != wantBy {
			t.Errorf("report: %s %q, want %q", w.ran, got, wantBy)
		}
	}

	off := run("off", map[string]string{"MSGTRACE_FLOWS": "0"})
	if n := off.hops.Len(); n != 0 {
		t.Errorf("MSGTRACE_FLOWS=0: %d hops recorded, want none", n)
	}
	if off.calls == 0 {
		t.Errorf("MSGTRACE_FLOWS=0: no calls recorded")
	}
	offStream := filepath.Join(dir, "off.mtrace")
	if f := pfFlows(t, convertStream(t, offStream, "perfetto")); len(f) != 0 {
		t.Errorf("MSGTRACE_FLOWS=0: Perfetto flows %v", f)
	}
	if f := jsonFlows(t, convertStream(t, offStream, "json")); len(f) != 0 {
		t.Errorf("MSGTRACE_FLOWS=0: JSON flows %v", f)
	}
}

// processStream reads a stream file into a sink.
func processStream(t *testing.T, path string, sk engine.Sink) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := engine.Process(f, engine.Options{MaxDepth: -1}, sk); err != nil {
		t.Fatal(err)
	}
}

// convertStream converts a stream file to a format, in memory.
func convertStream(t *testing.T, path, format string) []byte {
	t.Helper()
	var b bytes.Buffer
	sk, err := tracer.NewSink(format, &b, sink.Meta{})
	if err != nil {
		t.Fatal(err)
	}
	processStream(t, path, sk)
	return b.Bytes()
}

// pfFlows reads a Perfetto trace's flows as trace_processor binds TrackEvent flows (to the
// event's own slice: flow_ids begin a flow there, terminating_flow_ids end it there): "SOURCE
// -> TARGET" -> the target's enqueued_by. Only what that needs is decoded: the packets (and
// those of compressed_packets), each sequence's interned event names, the events' names,
// flows and debug annotations.
func pfFlows(t *testing.T, b []byte) map[string]string {
	t.Helper()
	type end struct{ name, by string }
	src, dst := map[uint64]string{}, map[uint64]end{}
	names := map[uint64]map[uint64]string{} // sequence -> iid -> name
	field := func(b []byte, fn func(num protowire.Number, typ protowire.Type, v []byte, u uint64)) {
		pbFields(t, b, fn)
	}
	perfettoPackets(t, b, func(p []byte) {
		var seq uint64
		var ev, interned []byte
		field(p, func(num protowire.Number, _ protowire.Type, v []byte, u uint64) {
			switch num {
			case 10:
				seq = u
			case 11:
				ev = v
			case 12:
				interned = v
			}
		})
		if names[seq] == nil {
			names[seq] = map[uint64]string{}
		}
		perfettoEventNames(t, interned, func(iid uint64, name string) { names[seq][iid] = name })
		if ev == nil {
			return
		}
		var name, by string
		var out, in []uint64
		field(ev, func(num protowire.Number, _ protowire.Type, v []byte, u uint64) {
			switch num {
			case 10:
				name = names[seq][u]
			case 47:
				out = append(out, u)
			case 48:
				in = append(in, u)
			case 4: // debug_annotations: name 10, string_value 6
				var an, av string
				field(v, func(num protowire.Number, _ protowire.Type, v []byte, _ uint64) {
					if num == 10 {
						an = string(v)
					} else if num == 6 {
						av = string(v)
					}
				})
				if an == "enqueued_by" {
					by = av
				}
			}
		})
		if strings.HasPrefix(name, "release ") || strings.HasPrefix(name, "wake ") {
			return // a contended wait's flow (waits), not a hop's
		}
		for _, id := range out {
			src[id] = name
		}
		for _, id := range in {
			dst[id] = end{name, by}
		}
	})
	got := map[string]string{}
	for id, d := range dst {
		if s, ok := src[id]; ok { // trace_processor drops a terminating id it never saw begin
			got[s+" -> "+d.name] = d.by
		}
	}
	return got
}

// jsonFlows reads Chrome JSON's flow events as trace_processor's JSON importer binds them
// ("s" and "f" with "bp":"e" to the innermost slice open on their thread at their time, events
// taken in time order, file order at equal times): "SOURCE -> TARGET" -> the target's
// args.enqueued_by.
func jsonFlows(t *testing.T, b []byte) map[string]string {
	t.Helper()
	var f struct {
		TraceEvents []struct {
			Ph, Name, Bp, Cat string
			Ts                float64
			Tid               uint64
			ID                uint64
			Args              map[string]any
		}
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	evs := f.TraceEvents
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].Ts < evs[j].Ts })
	type open struct{ name, by string }
	stacks := map[uint64][]open{}
	src, dst := map[uint64]string{}, map[uint64]open{}
	for _, e := range evs {
		st := stacks[e.Tid]
		switch e.Ph {
		case "B":
			by, _ := e.Args["enqueued_by"].(string)
			stacks[e.Tid] = append(st, open{e.Name, by})
		case "E":
			if len(st) > 0 {
				stacks[e.Tid] = st[:len(st)-1]
			}
		case "s", "f":
			if e.Cat == "wait" { // a contended wait's flow (waits): not a hop's
				continue
			}
			if e.Bp != "e" || len(st) == 0 {
				t.Fatalf("flow event not bound to an open slice: %+v", e)
			}
			if e.Ph == "s" {
				src[e.ID] = st[len(st)-1].name
			} else {
				dst[e.ID] = st[len(st)-1]
			}
		}
	}
	got := map[string]string{}
	for id, d := range dst {
		if s, ok := src[id]; ok {
			got[s+" -> "+d.name] = d.by
		}
	}
	return got
}
