package tracer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/msgtrace/msgtrace/tracer/engine"
	"github.com/msgtrace/msgtrace/tracer/report"
	"github.com/msgtrace/msgtrace/tracer/sink"
	"github.com/msgtrace/msgtrace/tracer/stream"
)

const cpuAll = stream.CPURunning | stream.CPURunnable | stream.CPUSlices

// cpuTrace is a stream (ticks are ns) of a main thread whose -[App frame:] runs 10-75 ms and a
// worker whose -[W spin] runs 10-70 ms, with cpu frames every 10 ms from 10 to 80 ms as the
// drain writes them: a thread only where its counters changed. The main thread runs 1 ms in
// 10-20, waits 0.5 ms runnable in 20-30, sits out the frames at 40 and 60-70 (unchanged), runs
// 2 ms in 40-50, then 3 ms and 0.3 ms runnable in 70-80 (the frames at 60 and 70 say it had
// not by 70); the worker runs all of 10-70.
func cpuTrace(t testing.TB) []byte {
	t.Helper()
	s := reportStream(t, 7, 100,
		rthread{tid: 1, main: true, name: "main", roots: []*rnode{rn("-[App frame:]", 10, 75)}},
		rthread{tid: 2, name: "worker", roots: []*rnode{rn("-[W spin]", 10, 70)}})
	b := bytes.NewBuffer(s)
	w := stream.NewStreamWriter(b)
	frame := func(at float64, es ...stream.CPUEntry) {
		w.CPU(stream.StreamCPU{Tick: uint64(at * ms), Entries: es})
	}
	frame(5, stream.CPUEntry{TID: 1, Known: cpuAll, Running: 5 * ms}) // before the trace's origin: left out
	frame(10, stream.CPUEntry{TID: 1, Known: cpuAll, Running: 5 * ms, Runnable: 1 * ms, Slices: 3},
		stream.CPUEntry{TID: 2, Known: cpuAll, Running: 0, Slices: 1})
	frame(20, stream.CPUEntry{TID: 1, Known: cpuAll, Running: 6 * ms, Runnable: 1 * ms, Slices: 4},
		stream.CPUEntry{TID: 2, Known: cpuAll, Running: 10 * ms, Slices: 2})
	frame(30, stream.CPUEntry{TID: 1, Known: cpuAll, Running: 6 * ms, Runnable: 1.5 * ms, Slices: 5},
		stream.CPUEntry{TID: 2, Known: cpuAll, Running: 20 * ms, Slices: 3})
	frame(40, stream.CPUEntry{TID: 2, Known: cpuAll, Running: 30 * ms, Slices: 4})
	frame(50, stream.CPUEntry{TID: 1, Known: cpuAll, Running: 8 * ms, Runnable: 1.5 * ms, Slices: 6},
		stream.CPUEntry{TID: 2, Known: cpuAll, Running: 40 * ms, Slices: 5})
	frame(60, stream.CPUEntry{TID: 2, Known: cpuAll, Running: 50 * ms, Slices: 6})
	frame(70, stream.CPUEntry{TID: 2, Known: cpuAll, Running: 60 * ms, Slices: 7},
		stream.CPUEntry{TID: 9, Known: stream.CPURunning, Running: 1}) // a thread with no calls
	frame(80, stream.CPUEntry{TID: 1, Known: cpuAll, Running: 11 * ms, Runnable: 1.8 * ms, Slices: 7})
	if w.Err() != nil {
		t.Fatal(w.Err())
	}
	return b.Bytes()
}

// TestCPUFrameRoundTrip: the Go writer's cpu frames decode to what was written; a known bit
// this version does not name is skipped as one more uvarint; a frame cut short does not decode.
func TestCPUFrameRoundTrip(t *testing.T) {
	c := stream.StreamCPU{Tick: 1<<40 + 3, Entries: []stream.CPUEntry{
		{TID: 77, Known: cpuAll, Running: 1 << 35, Runnable: 9, Slices: 2},
		{TID: 1 << 40, Known: stream.CPURunning, Running: 5},
	}}
	var b bytes.Buffer
	stream.NewStreamWriter(&b).CPU(c)
	p := b.Bytes()[stream.FrameHeader:]
	got, err := stream.DecodeCPU(p)
	if err != nil || fmt.Sprint(got) != fmt.Sprint(c) {
		t.Fatalf("decoded %+v, %v; want %+v", got, err, c)
	}
	// a later version's entry: known 8|1, its extra counter after the first
	later := append(append([]byte(nil), p...), 5, 9, 42, 77)
	got, err = stream.DecodeCPU(later)
	if err != nil || len(got.Entries) != 3 || got.Entries[2] != (stream.CPUEntry{TID: 5, Known: 9, Running: 42}) {
		t.Errorf("a later version's entry: %+v, %v", got, err)
	}
	for _, bad := range [][]byte{nil, p[:7], p[:len(p)-1]} {
		if _, err := stream.DecodeCPU(bad); err == nil {
			t.Errorf("DecodeCPU(%x) decodes", bad)
		}
	}
}

// TestCPUSamples: the reader puts each thread's samples on the trace's timeline, a frame
// before the trace's origin left out, and puts back the sample of the last frame a thread sat
// out before its counters changed (main: the frames at 40 and 70 ms, its counters as at 30 and
// 50); a thread
// left out by Options.Threads has none.
func TestCPUSamples(t *testing.T) {
	s := cpuTrace(t)
	var c collectSink
	if _, err := engine.ProcessStreams([]engine.Input{{R: bytes.NewReader(s), Size: int64(len(s))}}, engine.Options{MaxDepth: -1}, &c); err != nil {
		t.Fatal(err)
	}
	str := func(tid uint64) string {
		tc := c.hdr.CPU[tid]
		if tc == nil {
			return "none"
		}
		var out []string
		for _, s := range tc.Samples {
			out = append(out, fmt.Sprintf("%d:%g/%g", s.Nanos/ms, float64(s.RunningNanos)/ms, float64(s.RunnableNanos)/ms))
		}
		return strings.Join(out, " ")
	}
	// the trace's origin is the first call's start, 10 ms
	if got, want := str(1), "0:5/1 10:6/1 20:6/1.5 30:6/1.5 40:8/1.5 60:8/1.5 70:11/1.8"; got != want {
		t.Errorf("main's samples %s\nwant %s", got, want)
	}
	if got, want := str(2), "0:0/0 10:10/0 20:20/0 30:30/0 40:40/0 50:50/0 60:60/0"; got != want {
		t.Errorf("worker's samples %s\nwant %s", got, want)
	}
	if got := str(9); got != "60:1e-06/0" {
		t.Errorf("thread 9: %s", got)
	}
	c = collectSink{}
	if _, err := engine.ProcessStreams([]engine.Input{{R: bytes.NewReader(s), Size: int64(len(s))}}, engine.Options{MaxDepth: -1, Threads: "main"}, &c); err != nil {
		t.Fatal(err)
	}
	if c.hdr.CPU[2] != nil || c.hdr.CPU[1] == nil {
		t.Errorf("threads main: %v", c.hdr.CPU)
	}
}

// TestCPUReport: a call's running and waiting time are its thread's counters interpolated at
// its start and end (main's -[App frame:], 10-75 ms: 1 ms in 10-20, 2 ms in 40-50, and half of
// the 3 ms run in 70-80, taken evenly); the worker's long call ran all along; the threads'
// totals; the JSON fields and the phrase.
func TestCPUReport(t *testing.T) {
	r := reportOf(t, report.ReportOptions{}, cpuTrace(t))
	if len(r.Hitches) != 1 || r.Hitches[0].CPU == nil {
		t.Fatalf("hitches %+v", r.Hitches)
	}
	h := r.Hitches[0].CPU
	// 10-75 ms is 0-65 on the trace's timeline (its origin is the first call): 3 ms by 40, then
	// half of 60-70's 3 ms; runnable 0.5 ms in 10-20, and half of 60-70's 0.3 ms
	if h.RunningNanos != 4.5*ms || h.RunnableNanos == nil || *h.RunnableNanos != 0.65*ms ||
		h.SampledNanos != 65*ms || h.WaitingNanos != 65*ms-h.RunningNanos || h.Resolution != 10*ms {
		t.Errorf("hitch CPU %+v (runnable %v)", h, *h.RunnableNanos)
	}
	if len(r.OffMain) != 1 || r.OffMain[0].CPU == nil {
		t.Fatalf("off main %+v", r.OffMain)
	}
	if w := r.OffMain[0].CPU; w.RunningNanos != 60*ms || w.WaitingNanos != 0 || w.Resolution != 0 {
		t.Errorf("worker's call CPU %+v", w)
	}
	for _, th := range r.Threads {
		c := th.CPU
		if c == nil {
			t.Errorf("thread %d: no CPU totals", th.TID)
			continue
		}
		switch th.TID {
		case 1:
			if c.RunningNanos != 6*ms || *c.RunnableNanos != 0.8*ms || c.OffCPUNanos != 63.2*ms ||
				c.SampledNanos != 70*ms || c.TotalRunningNanos != 11*ms || c.Samples != 7 {
				t.Errorf("main's totals %+v", c)
			}
		case 2:
			if c.RunningNanos != 60*ms || *c.RunnableNanos != 0 || c.OffCPUNanos != 0 || c.SampledNanos != 60*ms {
				t.Errorf("worker's totals %+v", c)
			}
		}
	}
	b, err := json.Marshal(r.Hitches[0])
	if err != nil || !strings.Contains(string(b), `"cpu":{"running_ns":4500000,"waiting_ns":60500000,"runnable_ns":650000,"sampled_ns":65000000,"resolution_ns":10000000}`) {
		t.Errorf("JSON %s %v", b, err)
	}
	if p := r.Hitches[0].CPU.Phrase(r.Hitches[0].DurNanos); p != "4.500 ms running, 60.500 ms waiting (0.650 ms of it runnable, waiting for a CPU); CPU samples 10.000 ms apart around it" {
		t.Errorf("phrase %q", p)
	}
	// without cpu frames: no fields
	r = reportOf(t, report.ReportOptions{}, reportStream(t, 7, 100, rthread{tid: 1, main: true, roots: []*rnode{rn("-[App frame:]", 10, 75)}}))
	if r.Hitches[0].CPU != nil || r.Threads[0].CPU != nil {
		t.Errorf("CPU without samples: %+v %+v", r.Hitches[0].CPU, r.Threads[0].CPU)
	}
}

// TestCPUCounters: Perfetto, read back as trace_processor reads it (pfSequences), has under
// each thread's track a "CPU running %" and a "CPU runnable %" counter track whose values are
// the share of a CPU between two samples (the last 0); Chrome JSON a counter event per sample.
func TestCPUCounters(t *testing.T) {
	s := cpuTrace(t)
	var pb bytes.Buffer
	if _, err := engine.ProcessStreams([]engine.Input{{R: bytes.NewReader(s), Size: int64(len(s))}}, engine.Options{MaxDepth: -1}, sink.NewPerfettoSink(&pb, sink.Meta{})); err != nil {
		t.Fatal(err)
	}
	tracks := map[uint64]string{} // counter track -> "tid name"
	threadTid := map[uint64]uint64{}
	values := map[string][]string{}
	for _, p := range pfSequences(t, pb.Bytes()) {
		if d := p.m("track_descriptor"); d != nil {
			if th := d.m("thread"); th != nil {
				threadTid[d.u("uuid")] = th.u("tid")
			}
			if c := d.m("counter"); c != nil && strings.HasPrefix(d.s("name"), "CPU") {
				tid, ok := threadTid[d.u("parent_uuid")]
				if !ok || c.s("unit_name") != "%" {
					t.Errorf("counter track %v: not under a thread described before", d)
				}
				tracks[d.u("uuid")] = fmt.Sprintf("%d %s", tid, d.s("name"))
			}
		}
		if ev := p.m("track_event"); ev != nil && ev.u("type") == 4 && tracks[p.track] != "" {
			values[tracks[p.track]] = append(values[tracks[p.track]], fmt.Sprintf("%d=%g", p.ts/ms, ev.f("double_counter_value")))
		}
	}
	want := map[string]string{
		"1 CPU running %":  "[0=10 10=0 20=0 30=20 40=0 60=30 70=0]",
		"1 CPU runnable %": "[0=0 10=5 20=0 30=0 40=0 60=3 70=0]",
		"2 CPU running %":  "[0=100 10=100 20=100 30=100 40=100 50=100 60=0]",
	}
	for k, v := range want {
		if got := fmt.Sprint(values[k]); got != v {
			t.Errorf("%s: %s, want %s", k, got, v)
		}
	}
	f := toJSON(t, s, engine.Options{MaxDepth: -1})
	var cs []string
	last := map[uint64]float64{} // every thread's events in time order, its counters with them
	for _, e := range f.TraceEvents {
		if e.Ph != "M" {
			if e.Ts < last[e.Tid] {
				t.Errorf("JSON: thread %d goes back in time at %s %s (%v after %v)", e.Tid, e.Ph, e.Name, e.Ts, last[e.Tid])
			}
			last[e.Tid] = e.Ts
		}
		if e.Ph == "C" && e.Tid == 1 {
			cs = append(cs, fmt.Sprintf("%s@%g=%v/%v", e.Name, e.Ts/1000, e.Args["running"], e.Args["runnable"]))
		}
	}
	if got, want := strings.Join(cs, " "), "CPU % main 1@0=10/0 CPU % main 1@10=0/5 CPU % main 1@20=0/0 CPU % main 1@30=20/0 CPU % main 1@40=0/0 CPU % main 1@60=30/3 CPU % main 1@70=0/0"; got != want {
		t.Errorf("JSON counters %s\nwant %s", got, want)
	}
}
