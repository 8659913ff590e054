//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/msgtrace/msgtrace/internal/testfiles"
	"github.com/msgtrace/msgtrace/tracer/engine"
	"github.com/msgtrace/msgtrace/tracer/report"
	"github.com/msgtrace/msgtrace/tracer/stream"
)

// launchSink keeps what a launch test checks: the headers' instants and every call.
type launchSink struct {
	hdrs  map[uint64]*stream.Header
	main  map[uint64]uint64 // pid -> main thread's tid
	calls []engine.Call
	pids  []uint64
}

func (s *launchSink) BeginThread(h *stream.Header, t *stream.Thread) error {
	if s.hdrs == nil {
		s.hdrs, s.main = map[uint64]*stream.Header{}, map[uint64]uint64{}
	}
	if s.hdrs[h.PID] == nil {
		s.pids = append(s.pids, h.PID)
	}
	s.hdrs[h.PID] = h
	if t.Main {
		s.main[h.PID] = t.TID
	}
	return nil
}
func (s *launchSink) Call(c *engine.Call) error {
	cc := *c
	cc.Thread = &stream.Thread{TID: c.Thread.TID, PID: c.Thread.PID}
	s.calls = append(s.calls, cc)
	return nil
}
func (s *launchSink) Needs() engine.Needs                  { return engine.Needs{} }
func (s *launchSink) Skip(int) error                       { return nil }
func (s *launchSink) Mark(*stream.Mark) error              { return nil }
func (s *launchSink) EndThread() error                     { return nil }
func (s *launchSink) Close(engine.Totals) error            { return nil }
func (s *launchSink) instants(pid uint64) []stream.Instant { return s.hdrs[pid].Instants }

func readLaunch(t *testing.T, path string) *launchSink {
	t.Helper()
	var s launchSink
	processStream(t, path, &s)
	return &s
}

// launchMark finds the first instant of a kind (and name, for the app's).
func launchMark(ins []stream.Instant, kind stream.InstantKind, name string) (stream.Instant, bool) {
	for _, in := range ins {
		if in.Kind == kind && (name == "" || in.Name == name) {
			return in, true
		}
	}
	return stream.Instant{}, false
}

// checkLaunchOrder checks that the launch marks are there and in order: process start ≤
// library loaded ≤ main ≤ the app's mark, the first call after the library loaded and before
// the app's mark; with preMain, the first call before main too. It returns the marks by kind.
func checkLaunchOrder(t *testing.T, ins []stream.Instant, appMark string, preMain bool) map[stream.InstantKind]stream.Instant {
	t.Helper()
	got := map[stream.InstantKind]stream.Instant{}
	for _, k := range []stream.InstantKind{stream.InstantProcessStart, stream.InstantLoaded, stream.InstantFirstCall, stream.InstantMain, stream.InstantApp} {
		name := ""
		if k == stream.InstantApp {
			name = appMark
		}
		in, ok := launchMark(ins, k, name)
		if !ok {
			t.Fatalf("no %s mark %s in %+v", k, name, ins)
		}
		got[k] = in
	}
	ps, lo, fc, mn, app := got[stream.InstantProcessStart], got[stream.InstantLoaded], got[stream.InstantFirstCall], got[stream.InstantMain], got[stream.InstantApp]
	if !(ps.Nanos <= lo.Nanos && lo.Nanos <= mn.Nanos && mn.Nanos <= app.Nanos && lo.Nanos <= fc.Nanos && fc.Nanos <= app.Nanos) || preMain && fc.Nanos > mn.Nanos {
		t.Errorf("launch marks out of order: %+v", ins)
	}
	// the kernel keeps the start in clock ticks (USER_HZ: 100 here): 10 ms at most
	if ps.Nanos != 0 || ps.PrecisionNanos > 10_000_000 || lo.PrecisionNanos != 0 || mn.PrecisionNanos != 0 {
		t.Errorf("process start %+v (the origin, within 10 ms), library loaded %+v, main %+v", ps, lo, mn)
	}
	return got
}

// perfettoInstants lists the instant events of a Perfetto trace (TYPE_INSTANT, names from each
// sequence's interned names), in file order.
func perfettoInstants(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	names := map[[2]uint64]string{}
	var out []string
	field := func(b []byte, fn func(num protowire.Number, typ protowire.Type, v []byte, u uint64)) {
		pbFields(t, b, fn)
	}
	perfettoPackets(t, b, func(pkt []byte) {
		var seq, typ, iid uint64
		field(pkt, func(num protowire.Number, _ protowire.Type, v []byte, u uint64) {
			switch num {
			case 10:
				seq = u
			case 12: // interned_data
				perfettoEventNames(t, v, func(iid uint64, name string) { names[[2]uint64{seq, iid}] = name })
			case 11: // track_event: type, name_iid
				field(v, func(num protowire.Number, _ protowire.Type, _ []byte, u uint64) {
					if num == 9 {
						typ = u
					} else if num == 10 {
						iid = u
					}
				})
			}
		})
		if typ == 3 {
			out = append(out, names[[2]uint64{seq, iid}])
		}
	})
	return out
}

// TestGNUstepLaunch traces a gcc + gnustep-base program whose C constructor sends messages
// before main and which marks "first frame" (msgtrace_mark, looked up with dlsym) in main,
// preloaded at the defaults (the library itself, and the preload loader): its output is the
// untraced run's; the launch marks are in order (process start, library loaded, first call,
// main, first frame), every call made before main started and ended before the main mark and
// the others after it; Chrome JSON and Perfetto show the marks; machobind report prints the
// launch section (text and JSON).
func TestGNUstepLaunchMarks(t *testing.T) {
	testfiles.Slow(t, "builds and runs GNUstep programs")
	if runtime.GOARCH != "amd64" {
		t.Skip("Debian's GNUstep is installed for the host (amd64) only")
	}
	if _, err := exec.LookPath("gnustep-config"); err != nil {
		t.Fatal("gnustep-config missing: run make setup (libgnustep-base-dev, gobjc)")
	}
	root := testfiles.Root(t)
	g := gnustep{dir: t.TempDir()}
	g.lib = filepath.Join(g.dir, "libmsgtrace.so")
	buildLib(t, "c-shared", g.lib, "amd64", "gcc")
	loader := filepath.Join(g.dir, "libmsgtrace-preload.so")
	buildLoader(t, "gcc", loader)
	// marksctor.c after marks.m: its constructor runs after the one that registers
	// marks.m's classes
	mustGNUstepCC(t, g.dir, "launch", filepath.Join(root, "testdata", "gnustep", "marks.m"), filepath.Join(root, "testdata", "gnustep", "marksctor.c"))
	app := filepath.Join(g.dir, "launch")
	plain, _, err := g.run(t, false, "home", nil, nil, app)
	if err != nil || !strings.Contains(plain, "before main 3") {
		t.Fatalf("launch untraced: %v %q", err, plain)
	}
	mb := filepath.Join(g.dir, "machobind")
	build := exec.Command("go", "build", "-o", mb, "./cmd/machobind")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build machobind: %v\n%s", err, out)
	}

	for _, c := range []struct{ name, lib string }{{"library", g.lib}, {"loader", loader}} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(g.dir, c.name+".json")
			g := g
			g.lib = c.lib
			so, se, err := g.run(t, true, "home", map[string]string{"MSGTRACE_OUT": out, "MSGTRACE_KEEP_STREAM": "1"}, nil, app)
			if err != nil || so != plain {
				t.Fatalf("traced: %v\nstdout %q, want %q\nstderr:\n%s", err, so, plain, se)
			}
			strm := out + ".mtrace"
			s := readLaunch(t, strm)
			if len(s.pids) != 1 {
				t.Fatalf("%d processes", len(s.pids))
			}
			pid := s.pids[0]
			ins := s.instants(pid)
			m := checkLaunchOrder(t, ins, "first frame", true)
			if fm := m[stream.InstantApp]; fm.TID != s.main[pid] {
				t.Errorf("first frame on thread %d, the main thread is %d", fm.TID, s.main[pid])
			}
			// the constructor's +warm: (and the +step: it sends) before main, main's after
			mainAt := m[stream.InstantMain].Nanos
			var before, after []string
			first := ^uint64(0)
			for _, c := range s.calls {
				first = min(first, c.StartNanos)
				if c.StartNanos < mainAt {
					before = append(before, c.Name)
					if c.StartNanos+c.DurNanos > mainAt {
						t.Errorf("%s started before main and ended after it", c.Name)
					}
				} else {
					after = append(after, c.Name)
				}
			}
			sort.Strings(before)
			sort.Strings(after)
			if strings.Join(before, " ") != "+[Early step:] +[Early warm:]" || strings.Join(after, " ") != "+[Early step:] +[Early step:] +[Early warm:]" {
				t.Errorf("before main %v, after %v", before, after)
			}
			if first != m[stream.InstantFirstCall].Nanos {
				t.Errorf("first call mark at %d, the first call at %d", m[stream.InstantFirstCall].Nanos, first)
			}

			// Chrome JSON (the conversion at exit): the marks as instants, in order
			b, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			var doc struct {
				TraceEvents []struct {
					Ph, Name, S, Cat string
					Ts               float64
					Tid              uint64
				}
			}
			if err := json.Unmarshal(b, &doc); err != nil {
				t.Fatal(err)
			}
			var marks []string
			var last float64
			for _, e := range doc.TraceEvents {
				if e.Ph == "i" && e.Cat == "msgtrace" {
					if e.Ts < last {
						t.Errorf("JSON: %s at %v, before the mark before it (%v)", e.Name, e.Ts, last)
					}
					last = e.Ts
					marks = append(marks, e.Name+":"+e.S)
				}
			}
			if got := strings.Join(marks, ", "); got != "process start:p, library loaded:p, first call:p, main:p, first frame:t" {
				t.Errorf("JSON instants: %s", got)
			}

			// Perfetto, converted from the stream
			pf := filepath.Join(g.dir, c.name+".pftrace")
			if b, err := exec.Command(mb, "trace", strm, "-o", pf).CombinedOutput(); err != nil {
				t.Fatalf("machobind trace: %v\n%s", err, b)
			}
			if got := strings.Join(perfettoInstants(t, pf), ", "); got != "process start, library loaded, first call, main, first frame" {
				t.Errorf("Perfetto instants: %s", got)
			}

			// machobind report: the launch section
			rep, err := exec.Command(mb, "report", strm).CombinedOutput()
			if err != nil || !strings.Contains(string(rep), "LAUNCH of launch (pid ") || !strings.Contains(string(rep), `to the app's mark "first frame"`) ||
				!strings.Contains(string(rep), "ms before main") || !strings.Contains(string(rep), "+load: 0 calls") {
				t.Errorf("machobind report: %v\n%s", err, rep)
			}
			js, err := exec.Command(mb, "report", "--json", strm).Output()
			if err != nil {
				t.Fatal(err)
			}
			var r report.Report
			if err := json.Unmarshal(js, &r); err != nil {
				t.Fatal(err)
			}
			if len(r.Launches) != 1 || r.Launches[0].End.Reason != "mark" || len(r.Launches[0].Steps) != 4 || r.Launches[0].MainNanos != mainAt {
				t.Errorf("report --json launches %+v", r.Launches)
			}
			t.Logf("%s: %s", c.name, rep[:bytes.Index(rep, []byte("\nHITCHES"))])
		})
	}
}

// TestGNUstepLaunchGUI: a Debian GNUstep application (EdenMath) under Xvfb, preloaded with
// firstidle.so, which marks "first idle" when its run loop is first idle and exits: the
// launch marks in order, under the default selection and MSGTRACE_METHODS=all, and machobind
// report's launch ends at that mark. Through the preload loader with MSGTRACE_METHODS=all, the
// report's launch lists gnustep-base's own +load methods (sent before the loader's
// constructor), each once, before main.
func TestGNUstepLaunchMarksGUI(t *testing.T) {
	testfiles.Slow(t, "runs GNUstep GUI applications under Xvfb")
	if runtime.GOARCH != "amd64" {
		t.Skip("Debian's GNUstep is installed for the host (amd64) only")
	}
	for _, tool := range []string{"xvfb-run", "EdenMath", "gnustep-config"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s missing: run make setup (xvfb, edenmath.app)", tool)
		}
	}
	root := testfiles.Root(t)
	dir := t.TempDir()
	lib := filepath.Join(dir, "libmsgtrace.so")
	buildLib(t, "c-shared", lib, "amd64", "gcc")
	loader := filepath.Join(dir, "libmsgtrace-preload.so")
	buildLoader(t, "gcc", loader)
	mustGNUstepCC(t, dir, "firstidle.so", "-shared", filepath.Join(root, "testdata", "gnustep", "firstidle.m"))
	for _, methods := range []string{"", "all", "loader-all"} {
		name := methods
		if name == "" {
			name = "default"
		}
		preload := lib
		if methods == "loader-all" {
			preload, methods = loader, "all"
		}
		t.Run(name, func(t *testing.T) {
			out := filepath.Join(dir, name)
			if err := os.MkdirAll(out, 0o755); err != nil {
				t.Fatal(err)
			}
			run := exec.Command("xvfb-run", "-a", "EdenMath")
			run.Dir = dir
			// every process that inherits the preload (gdnc, which EdenMath may start) writes its own
			run.Env = append(os.Environ(), "HOME="+filepath.Join(dir, "home-"+name), "LD_PRELOAD="+preload+":"+filepath.Join(dir, "firstidle.so"),
				"MSGTRACE_OUT="+filepath.Join(out, "t-%p.mtrace"), "MSGTRACE_FORMAT=stream", "MSGTRACE_METHODS="+methods)
			b, err := run.CombinedOutput()
			if err != nil || !strings.Contains(string(b), "firstidle: launched and idle") {
				t.Fatalf("EdenMath under xvfb-run: %v\n%s", err, b)
			}
			files, _ := filepath.Glob(filepath.Join(out, "t-*.mtrace"))
			var strm string
			for _, f := range files {
				if s := readLaunch(t, f); len(s.pids) == 1 && s.hdrs[s.pids[0]].Program == "EdenMath" {
					strm = f
					m := checkLaunchOrder(t, s.instants(s.pids[0]), "first idle", false)
					t.Logf("EdenMath (%s): start ±%.3f ms, loaded %.3f ms, main %.3f ms, first call %.3f ms, first idle %.3f ms, %d calls",
						name, float64(m[stream.InstantProcessStart].PrecisionNanos)/1e6, float64(m[stream.InstantLoaded].Nanos)/1e6, float64(m[stream.InstantMain].Nanos)/1e6,
						float64(m[stream.InstantFirstCall].Nanos)/1e6, float64(m[stream.InstantApp].Nanos)/1e6, len(s.calls))
				}
			}
			if strm == "" {
				t.Fatalf("no stream of EdenMath among %v", files)
			}
			sink := report.NewReportSink(report.ReportOptions{})
			processStream(t, strm, sink)
			ls := sink.Report().Launches
			if len(ls) != 1 || ls[0].End.Reason != "mark" || ls[0].End.Name != "first idle" || ls[0].MainNanos == 0 {
				t.Fatalf("launch %+v", ls)
			}
			if preload != loader {
				return
			}
			// gnustep-base's +load methods (testdata/gnustep/baseloads.m lists them), each once, before main
			var main uint64
			for _, m := range ls[0].Marks {
				if m.Kind == "main" {
					main = m.StartNanos
				}
			}
			seen := map[string]int{}
			for _, c := range ls[0].Load.List {
				seen[c.Method]++
				if c.StartNanos >= main {
					t.Errorf("%s at %d ns, main at %d", c.Method, c.StartNanos, main)
				}
			}
			for _, m := range []string{"+[NSObject load]", "+[NSProxy load]", "+[NSProcessInfo load]", "+[MTFirstIdle load]"} {
				if seen[m] != 1 {
					t.Errorf("%s %d times in the launch's +load list, want 1: %v", m, seen[m], seen)
				}
			}
			t.Logf("+load before main: %v", seen)
		})
	}
}
