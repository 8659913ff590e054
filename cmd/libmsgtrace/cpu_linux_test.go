//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/msgtrace/msgtrace/internal/testfiles"
	"github.com/msgtrace/msgtrace/tracer/engine"
	"github.com/msgtrace/msgtrace/tracer/report"
	"github.com/msgtrace/msgtrace/tracer/stream"
	"google.golang.org/protobuf/encoding/protowire"
)

// TestGNUstepCPU traces testdata/gnustep/cpusplit.m, a gcc + gnustep-base program whose worker
// NSThread spins inside -[Spinner spin] until it has run 60 ms of CPU time while its main thread
// sleeps 60 ms inside -[Sleeper nap], preloaded at the defaults: the program's output is the
// untraced run's; the stream has each thread's CPU samples; the report splits the sleeper's
// hitch into mostly not running (off CPU: neither running nor runnable) and the spinner's long
// call into mostly on or wanting a CPU, with at least a third of the 60 ms it ran counted as
// running (bounds on what was recorded, broad enough for a loaded machine and the sampling's
// resolution: the samples are 10 ms or more apart); Perfetto has a "CPU running %" counter
// track under each thread's track, Chrome JSON counter events for each; the flight recorder
// (MSGTRACE_MODE=ring) dumps the samples it kept; with MSGTRACE_CPU=0 the stream has no cpu
// frame and the report no split.
func TestGNUstepCPU(t *testing.T) {
	testfiles.Slow(t, "builds and runs GNUstep programs")
	if runtime.GOARCH != "amd64" {
		t.Skip("Debian's GNUstep is installed for the host (amd64) only")
	}
	if _, err := exec.LookPath("gnustep-config"); err != nil {
		t.Fatal("gnustep-config missing: run make setup (libgnustep-base-dev, gobjc)")
	}
	if _, err := os.Stat("/proc/self/task/" + strconv.Itoa(os.Getpid()) + "/schedstat"); err != nil {
		t.Skip("no schedstat (a kernel without CONFIG_SCHED_INFO): CPU time is read from thread clocks, without runnable time")
	}
	root := testfiles.Root(t)
	g := gnustep{dir: t.TempDir()}
	g.lib = filepath.Join(g.dir, "libmsgtrace-preload.so")
	buildLib(t, "c-shared", filepath.Join(g.dir, "libmsgtrace.so"), "amd64", "gcc")
	buildLoader(t, "gcc", g.lib)
	mustGNUstepCC(t, g.dir, "cpusplit", filepath.Join(root, "testdata", "gnustep", "cpusplit.m"))
	app := filepath.Join(g.dir, "cpusplit")
	plain, _, err := g.run(t, false, "home", nil, nil, app)
	if err != nil || plain != "spun 0\nnapped 1\n" {
		t.Fatalf("untraced: %v %q", err, plain)
	}
	mb := filepath.Join(g.dir, "machobind")
	build := exec.Command("go", "build", "-o", mb, "./cmd/machobind")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build machobind: %v\n%s", err, out)
	}

	strm := filepath.Join(g.dir, "cpu.mtrace")
	so, se, err := g.run(t, true, "home", map[string]string{"MSGTRACE_OUT": strm}, nil, app)
	if err != nil || so != plain {
		t.Fatalf("traced: %v\nstdout %q, want %q\nstderr:\n%s", err, so, plain, se)
	}
	if n := cpuFrames(t, strm); n == 0 {
		t.Fatal("no cpu frame in the stream")
	}
	js, err := exec.Command(mb, "report", "--json", strm).Output()
	if err != nil {
		t.Fatal(err)
	}
	var rep report.Report
	if err := json.Unmarshal(js, &rep); err != nil {
		t.Fatal(err)
	}
	find := func(cs []report.ReportCall, method string) report.ReportCall {
		for _, c := range cs {
			if c.Method == method {
				return c
			}
		}
		t.Fatalf("no %s among %s", method, js)
		return report.ReportCall{}
	}
	nap, spin := find(rep.Hitches, "-[Sleeper nap]"), find(rep.OffMain, "-[Spinner spin]")
	for _, c := range []report.ReportCall{nap, spin} {
		// sampled from the thread's first traced call, 20 ms before (a late drain: later)
		if c.CPU == nil || c.CPU.RunnableNanos == nil || c.CPU.SampledNanos < c.DurNanos/4 ||
			c.CPU.RunningNanos+c.CPU.WaitingNanos != c.CPU.SampledNanos || *c.CPU.RunnableNanos > c.CPU.WaitingNanos {
			t.Fatalf("%s: CPU %+v, want samples over at least a quarter of its %d ns", c.Method, c.CPU, c.DurNanos)
		}
		t.Logf("%s %.1f ms: %.1f ms running, %.1f ms waiting (%.1f ms runnable), %.1f ms sampled, samples %.1f ms apart",
			c.Method, float64(c.DurNanos)/1e6, float64(c.CPU.RunningNanos)/1e6, float64(c.CPU.WaitingNanos)/1e6,
			float64(*c.CPU.RunnableNanos)/1e6, float64(c.CPU.SampledNanos)/1e6, float64(c.CPU.Resolution)/1e6)
	}
	offCPU := func(c *report.CallCPU) uint64 { return c.WaitingNanos - *c.RunnableNanos }
	if c := nap.CPU; c.RunningNanos > c.SampledNanos/4 || offCPU(c) < c.SampledNanos/2 {
		t.Errorf("the sleeper's hitch reads %+v: not mostly off CPU", c)
	}
	if c := spin.CPU; c.RunningNanos < 20_000_000 || offCPU(c) > c.RunningNanos+*c.RunnableNanos {
		t.Errorf("the spinner's call reads %+v: not mostly on or wanting a CPU, or under a third of its 60 ms run", c)
	}
	for _, th := range rep.Threads {
		if th.CPU == nil || th.CPU.Samples < 2 {
			t.Errorf("thread %s: CPU %+v", th.Name, th.CPU)
		}
	}
	text, err := exec.Command(mb, "report", strm).Output()
	if err != nil || !strings.Contains(string(text), " ms running, ") || !strings.Contains(string(text), "  on CPU: ") {
		t.Errorf("report: %v\n%s", err, text)
	}

	// Perfetto: a counter track per thread; Chrome JSON: counter events per thread
	pf := filepath.Join(g.dir, "cpu.pftrace")
	if b, err := exec.Command(mb, "trace", strm, "-o", pf).CombinedOutput(); err != nil {
		t.Fatalf("machobind trace: %v\n%s", err, b)
	}
	tids := map[uint64]bool{}
	for _, th := range rep.Threads {
		tids[th.TID] = true
	}
	tracks, values := perfettoCPUTracks(t, pf)
	for tid := range tids {
		if tracks[tid] != "CPU running %" {
			t.Errorf("Perfetto: thread %d has no CPU running counter track (%v)", tid, tracks)
		}
	}
	if values < 2*len(tids) {
		t.Errorf("Perfetto: %d counter values", values)
	}
	jf := filepath.Join(g.dir, "cpu.json")
	if b, err := exec.Command(mb, "trace", strm, "-o", jf).CombinedOutput(); err != nil {
		t.Fatalf("machobind trace: %v\n%s", err, b)
	}
	b, err := os.ReadFile(jf)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		TraceEvents []struct {
			Ph, Name string
			Tid      uint64
			Args     map[string]any
		}
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	counters := map[uint64]int{}
	for _, e := range doc.TraceEvents {
		if _, ok := e.Args["running"]; e.Ph == "C" && strings.HasPrefix(e.Name, "CPU % ") && ok {
			counters[e.Tid]++
		}
	}
	for tid := range tids {
		if counters[tid] < 2 {
			t.Errorf("JSON: %d CPU counter events for thread %d", counters[tid], tid)
		}
	}

	// ring mode: the flight recorder's dump at exit has the samples it kept
	ring := filepath.Join(g.dir, "ring.mtrace")
	if so, se, err := g.run(t, true, "home", map[string]string{"MSGTRACE_OUT": ring, "MSGTRACE_MODE": "ring"}, nil, app); err != nil || so != plain {
		t.Fatalf("MSGTRACE_MODE=ring: %v %q\n%s", err, so, se)
	}
	if n := cpuFrames(t, ring); n == 0 {
		t.Errorf("MSGTRACE_MODE=ring: no cpu frame in the dump")
	}
	if js, err := exec.Command(mb, "report", "--json", ring).Output(); err != nil || !bytes.Contains(js, []byte(`"running_ns"`)) {
		t.Errorf("MSGTRACE_MODE=ring: report %v\n%s", err, js)
	}

	// off: no samples
	off := filepath.Join(g.dir, "off.mtrace")
	if so, se, err := g.run(t, true, "home", map[string]string{"MSGTRACE_OUT": off, "MSGTRACE_CPU": "0"}, nil, app); err != nil || so != plain {
		t.Fatalf("MSGTRACE_CPU=0: %v %q\n%s", err, so, se)
	}
	if n := cpuFrames(t, off); n != 0 {
		t.Errorf("MSGTRACE_CPU=0: %d cpu frames", n)
	}
	if js, err := exec.Command(mb, "report", "--json", off).Output(); err != nil || bytes.Contains(js, []byte(`"cpu"`)) {
		t.Errorf("MSGTRACE_CPU=0: report %v\n%s", err, js)
	}
}

// cpuFrames counts the cpu frames of a stream file.
func cpuFrames(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	if _, err := engine.ScanFrames(engine.Input{R: bytes.NewReader(b), Size: int64(len(b))}, func(kind uint8, _ int64, p []byte) error {
		if kind == stream.FrameCPU {
			if _, err := stream.DecodeCPU(p); err != nil {
				t.Errorf("cpu frame: %v", err)
			}
			n++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// perfettoCPUTracks reads a Perfetto trace's counter tracks named "CPU running %" and the
// thread each is under (by its parent track's thread descriptor), and counts the double
// counter values of the trace's events.
func perfettoCPUTracks(t *testing.T, path string) (map[uint64]string, int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	type desc struct {
		uuid, parent, tid uint64
		thread            bool
		name              string
	}
	var descs []desc
	values := 0
	var walk func(b []byte, fn func(num protowire.Number, v []byte, u uint64))
	walk = func(b []byte, fn func(num protowire.Number, v []byte, u uint64)) {
		pbFields(t, b, func(num protowire.Number, _ protowire.Type, v []byte, u uint64) { fn(num, v, u) })
	}
	perfettoPackets(t, b, func(pkt []byte) {
		walk(pkt, func(num protowire.Number, v []byte, _ uint64) {
			switch num {
			case 60: // track_descriptor: uuid 1, name 2, thread 4 {tid 2}, parent_uuid 5
				var d desc
				walk(v, func(num protowire.Number, v []byte, u uint64) {
					switch num {
					case 1:
						d.uuid = u
					case 2:
						d.name = string(v)
					case 4:
						d.thread = true
						walk(v, func(num protowire.Number, _ []byte, u uint64) {
							if num == 2 {
								d.tid = u
							}
						})
					case 5:
						d.parent = u
					}
				})
				descs = append(descs, d)
			case 11: // track_event: double_counter_value 44
				walk(v, func(num protowire.Number, _ []byte, _ uint64) {
					if num == 44 {
						values++
					}
				})
			}
		})
	})
	threadOf := map[uint64]uint64{}
	for _, d := range descs {
		if d.thread {
			threadOf[d.uuid] = d.tid
		}
	}
	tracks := map[uint64]string{}
	for _, d := range descs {
		if tid, ok := threadOf[d.parent]; ok && d.name == "CPU running %" {
			tracks[tid] = d.name
		}
	}
	return tracks, values
}
