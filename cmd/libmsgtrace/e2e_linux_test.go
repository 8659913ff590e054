//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/pprof/profile"
	"github.com/msgtrace/msgtrace/internal/testfiles"
	"github.com/msgtrace/msgtrace/internal/viewertest"
)

// arches are the architectures the end-to-end run covers: amd64 natively where we are, arm64
// through qemu-aarch64 with the cross libc as its root.
var arches = []struct {
	goarch, cc string
	run        []string // prefix that runs a program of this architecture
	envFlag    string   // how the runner passes environment variables to the program
}{
	{"amd64", "gcc", nil, ""},
	{"arm64", "aarch64-linux-gnu-gcc", []string{"qemu-aarch64", "-L", "/usr/aarch64-linux-gnu"}, "-E"},
}

// built is one architecture's library, runtime and test programs.
type built struct {
	goarch   string
	dir, lib string
	run      []string
	envFlag  string
}

// buildLib builds cmd/libmsgtrace for linux/goarch with the given -buildmode into out.
func buildLib(t *testing.T, mode, out, goarch, cc string) {
	t.Helper()
	cmd := exec.Command("go", "build", "-buildmode="+mode, "-ldflags="+testfiles.LibLDFlags, "-o", out, "./cmd/libmsgtrace")
	cmd.Dir = testfiles.Root(t)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1", "GOOS=linux", "GOARCH="+goarch, "CC="+cc)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building %s for %s: %v\n%s", filepath.Base(out), goarch, err, b)
	}
}

func buildArch(t *testing.T, goarch, cc string) string {
	t.Helper()
	root := testfiles.Root(t)
	dir := t.TempDir()
	buildLib(t, "c-shared", filepath.Join(dir, "libmsgtrace.so"), goarch, cc)
	// the preload loader next to it: what users preload (and machobind run finds)
	buildLoader(t, cc, filepath.Join(dir, "libmsgtrace-preload.so"))
	cmd := exec.Command("bash", filepath.Join(root, "scripts", "testapp.sh"), goarch, dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("testapp.sh %s: %v\n%s", goarch, err, out)
	}
	return dir
}

// withLibgcc builds the test app again into a subdirectory, linked with libstdc++ and
// libgcc_s (Linux's default unwinder) instead of LLVM's libunwind, traced by the same library.
func withLibgcc(t *testing.T, b built) built {
	t.Helper()
	b.dir = filepath.Join(b.dir, "libgcc")
	cmd := exec.Command("bash", filepath.Join(testfiles.Root(t), "scripts", "testapp.sh"), b.goarch, b.dir, "libgcc")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("testapp.sh %s libgcc: %v\n%s", b.goarch, err, out)
	}
	return b
}

// command runs a program of the built architecture with extra environment variables (passed
// to the program; under qemu, LD_PRELOAD through -E and the rest through qemu's environment,
// which the guest inherits).
func (b built) command(env map[string]string, prog string, args ...string) *exec.Cmd {
	argv := append([]string(nil), b.run...)
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var extra []string
	for _, k := range keys {
		// Only LD_PRELOAD must reach the program alone (in qemu's own environment it would
		// be loaded into qemu); the rest is inherited, since qemu's -E splits values at commas.
		if b.envFlag != "" && k == "LD_PRELOAD" {
			argv = append(argv, b.envFlag, k+"="+env[k])
		} else {
			extra = append(extra, k+"="+env[k])
		}
	}
	argv = append(argv, filepath.Join(b.dir, prog))
	argv = append(argv, args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), extra...)
	cmd.Dir = b.dir
	return cmd
}

// event is one Chrome trace event as ChromeSink writes it.
type event struct {
	Ph   string  `json:"ph"`
	Name string  `json:"name"`
	Ts   float64 `json:"ts"`
	Dur  float64 `json:"dur"`
	TID  uint64  `json:"tid"`
	Cat  string  `json:"cat"` // objc: a call; msgtrace: a mark, a launch mark or the app's
	Args struct {
		Name    string  `json:"name"`
		SelfUS  float64 `json:"-"`     // duration minus the children's
		Depth   int     `json:"depth"` // nesting among the calls kept: from the events' order, or an instant's args
		Unwound bool    `json:"unwound"`
	} `json:"args"`
}

// call is an event placed in its thread's call tree.
type call struct {
	event
	parent   *call
	children []*call
}

// path is the call's ancestry, outermost first: "+[App run] > -[Worker fib:]".
func (c *call) path() string {
	if c.parent == nil {
		return c.Name
	}
	return c.parent.path() + " > " + c.Name
}

// trace is a parsed trace.json: calls per thread name.
type trace struct {
	threads map[string][]*call // thread name -> calls in the order they ended
	other   map[string]any
	orphans int // calls below depth 0 whose caller is not in the trace
}

func readTrace(t *testing.T, path string) trace {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		TraceEvents []event        `json:"traceEvents"`
		OtherData   map[string]any `json:"otherData"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s is not JSON: %v", path, err)
	}
	names := map[uint64]string{}
	byTID := map[uint64][]*call{}
	stacks := map[uint64][]*call{}
	orphans := 0
	// Each thread comes in pre-order: a call's begin ("B"), its children, its end ("E"); a
	// call of no measurable time is an instant ("i"). Calls are collected in the order they
	// ended, each with its parent and children.
	for _, e := range doc.TraceEvents {
		if e.Ph == "i" && e.Cat == "msgtrace" { // marks, launch marks, the app's: not calls
			continue
		}
		st := stacks[e.TID]
		switch e.Ph {
		case "M":
			if e.Name == "thread_name" {
				names[e.TID] = e.Args.Name
			}
		case "B":
			c := &call{event: e}
			c.Args.Depth = len(st)
			stacks[e.TID] = append(st, c)
		case "E", "i":
			c := &call{event: e}
			if e.Ph == "E" {
				if len(st) == 0 || st[len(st)-1].Name != e.Name {
					t.Fatalf("thread %d: end of %s without its begin", e.TID, e.Name)
				}
				c = st[len(st)-1]
				st = st[:len(st)-1]
				stacks[e.TID] = st
				c.Dur = e.Ts - c.Ts
				c.Args.Unwound = e.Args.Unwound
			} else if c.Args.Depth < len(st) { // a zero-length call in another has its depth in args
				c.Args.Depth = len(st)
			}
			if e.Name == "" || strings.HasPrefix(e.Name, "[") { // a mark
				continue
			}
			c.Args.SelfUS = c.Dur
			for _, k := range c.children {
				c.Args.SelfUS -= k.Dur
			}
			if len(st) > 0 {
				p := st[len(st)-1]
				c.parent = p
				p.children = append(p.children, c)
			}
			byTID[e.TID] = append(byTID[e.TID], c)
		}
	}
	for _, st := range stacks {
		orphans += len(st) // calls never ended
	}
	tr := &trace{threads: map[string][]*call{}, other: doc.OtherData, orphans: orphans}
	for tid, cs := range byTID {
		name := names[tid]
		if name == "" {
			name = fmt.Sprint(tid)
		}
		tr.threads[name] = append(tr.threads[name], cs...)
	}
	return *tr
}

// find returns the calls of a thread with a path.
func (tr trace) find(thread, path string) []*call {
	var out []*call
	for _, c := range tr.threads[thread] {
		if c.path() == path {
			out = append(out, c)
		}
	}
	return out
}

// count returns how many calls of a thread have a name, and the deepest of them.
func (tr trace) count(thread, name string) (n, maxDepth int) {
	for _, c := range tr.threads[thread] {
		if c.Name == name {
			n++
			maxDepth = max(maxDepth, c.Args.Depth)
		}
	}
	return n, maxDepth
}

func (tr trace) one(t *testing.T, thread, path string) *call {
	t.Helper()
	cs := tr.find(thread, path)
	if len(cs) != 1 {
		t.Errorf("%s: %d calls %q, want 1", thread, len(cs), path)
		return &call{}
	}
	return cs[0]
}

// TestPreloadEndToEnd preloads libmsgtrace-preload.so (which loads libmsgtrace.so) into the test app (a C++ program sending
// messages through a small Objective-C runtime with objc_msgSend's contract) and checks that
// the app behaves exactly as without it and that trace.json holds the calls it made.
func TestPreloadEndToEnd(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("the end-to-end test builds on amd64 hosts (arm64 runs under qemu)")
	}
	for _, a := range arches {
		t.Run(a.goarch, func(t *testing.T) {
			if len(a.run) > 0 {
				testfiles.Slow(t, "runs under "+a.run[0])
				testfiles.NeedTools(t, a.cc, a.run[0])
			} else {
				testfiles.NeedTools(t, a.cc)
			}
			b := built{goarch: a.goarch, dir: buildArch(t, a.goarch, a.cc), run: a.run, envFlag: a.envFlag}
			b.lib = filepath.Join(b.dir, "libmsgtrace-preload.so") // loads libmsgtrace.so where there is something to trace
			t.Run("app", func(t *testing.T) { testApp(t, b) })
			t.Run("app-libgcc", func(t *testing.T) { testApp(t, withLibgcc(t, b)) })
			t.Run("dlopen", func(t *testing.T) { testDlopen(t, b) })
			t.Run("small-objects", func(t *testing.T) { testSmallObjects(t, b) })
			t.Run("badenv", func(t *testing.T) { testBadEnv(t, b) })
			t.Run("filters", func(t *testing.T) { testFilters(t, b) })
			t.Run("capi", func(t *testing.T) { testCAPI(t, b, a.cc, false) })
			t.Run("capi-static", func(t *testing.T) { testCAPI(t, b, a.cc, true) })
			t.Run("stream", func(t *testing.T) { testStream(t, b) })
			if a.goarch == runtime.GOARCH {
				t.Run("machobind-run", func(t *testing.T) { testMachobindRun(t, b) })
			}
		})
	}
}

func runApp(t *testing.T, b built, env map[string]string, args ...string) (stdout, stderr string) {
	t.Helper()
	cmd := b.command(env, "testapp", args...)
	var so, se strings.Builder
	cmd.Stdout, cmd.Stderr = &so, &se
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v: %v\nstdout:\n%s\nstderr:\n%s", cmd.Args, err, so.String(), se.String())
	}
	return so.String(), se.String()
}

func testApp(t *testing.T, b built) {
	plain, _ := runApp(t, b, nil)
	out := filepath.Join(b.dir, "trace.json")
	napOut := filepath.Join(b.dir, "nap.txt")
	traced, stderr := runApp(t, b, map[string]string{"LD_PRELOAD": b.lib, "MSGTRACE_OUT": out, "TESTAPP_NAP_OUT": napOut})
	if traced != plain {
		t.Fatalf("the app printed differently under the tracer:\n--- plain\n%s--- traced\n%s", plain, traced)
	}
	if !strings.Contains(stderr, "msgtrace: "+out+": ") {
		t.Errorf("no summary line on stderr: %q", stderr)
	}
	tr := readTrace(t, out)
	if tr.orphans != 0 {
		t.Errorf("%d calls without their caller", tr.orphans)
	}
	main := "main"
	run := tr.one(t, main, "+[App run]")
	if run.Args.Depth != 0 {
		t.Errorf("+[App run] at depth %d", run.Args.Depth)
	}
	// Recursion: fib(12) is 465 sends, 12 deep below +[App run].
	if n, d := tr.count(main, "-[Worker fib:]"); n != 465 || d != 12 {
		t.Errorf("main: %d -[Worker fib:] calls, deepest %d; want 465, 12", n, d)
	}
	// Nesting: countdown:5 sends itself down to 0, one inside the other.
	p := "+[App run]"
	for i := 0; i < 6; i++ {
		p += " > -[Worker countdown:]"
		tr.one(t, main, p)
	}
	// A super call runs the superclass's method; it sends to self, named by the receiver's class.
	tr.one(t, main, "+[App run] > -[Derived describe] > -[Base describe] > -[Derived name]")
	// A class method that sleeps 200 ms: the recorded duration holds the sleep as the method
	// measured it (a loaded machine oversleeps), and not much more: the tick rate's conversion.
	nap := tr.one(t, main, "+[App run] > +[Sleeper nap:]")
	var sleptUS float64
	if b, err := os.ReadFile(napOut); err != nil {
		t.Errorf("the app did not say how long it slept: %v", err)
	} else if _, err := fmt.Sscan(string(b), &sleptUS); err != nil || sleptUS < 200000 {
		t.Errorf("the app slept %q us, want at least 200 ms", b)
	} else if nap.Dur < sleptUS-1000 || nap.Dur > 1.5*sleptUS+50000 {
		// the upper bound catches a wrong tick rate (a factor), not preemption between the
		// sleep's end and the return stub's tick: under qemu on a busy machine that was 41 ms
		t.Errorf("+[Sleeper nap:] lasted %.1f us, slept %.0f us", nap.Dur, sleptUS)
	}
	if nap.Args.SelfUS < 0.8*nap.Dur {
		t.Errorf("+[Sleeper nap:] self %.1f us of %.1f us", nap.Args.SelfUS, nap.Dur)
	}
	// A C++ exception thrown in a method, caught by its caller: the thrown-through call is
	// closed as unwound, the caller returns normally.
	boom := tr.one(t, main, "+[App run] > -[Catcher run] > -[Thrower boom]")
	if !boom.Args.Unwound {
		t.Error("-[Thrower boom] not marked unwound")
	}
	if c := tr.one(t, main, "+[App run] > -[Catcher run]"); c.Args.Unwound {
		t.Error("-[Catcher run] marked unwound")
	}
	// Floating-point arguments and a struct return (objc_msgSend_stret on x86-64).
	tr.one(t, main, "+[App run] > -[Worker scale:by:]")
	tr.one(t, main, "+[App run] > -[Worker rect]")
	// Three threads, each its own recursion.
	for i := 1; i <= 3; i++ {
		th := fmt.Sprintf("worker-%d", i)
		if n, d := tr.count(th, "-[Worker fib:]"); n != 177 || d != 9 {
			t.Errorf("%s: %d -[Worker fib:] calls, deepest %d; want 177, 9", th, n, d)
		}
		tr.one(t, th, "-[Worker fib:]")
	}
	if len(tr.threads) != 4 {
		names := []string{}
		for k := range tr.threads {
			names = append(names, k)
		}
		t.Errorf("threads %v, want the main thread and worker-1..3", names)
	}
	if t.Failed() {
		b, _ := os.ReadFile(out)
		t.Logf("trace.json (first 4 KiB):\n%.4096s", b)
	}
}

// testSmallObjects sends to small objects (tagged receivers with no isa, their class registered
// for their low bits, as GNUstep's libobjc2 makes them) from four threads, through
// objc_msgSend, _fpret and _stret: traced, the app prints the same and every call is named by
// the class the runtime's object_getClass gives.
func testSmallObjects(t *testing.T, b built) {
	plain, _ := runApp(t, b, nil, "small")
	for _, c := range []struct {
		name string
		env  map[string]string
	}{
		{"defaults", nil},
		{"ring", map[string]string{"MSGTRACE_MODE": "ring"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(b.dir, "small-"+c.name+".json")
			env := map[string]string{"LD_PRELOAD": b.lib, "MSGTRACE_OUT": out}
			maps.Copy(env, c.env)
			traced, _ := runApp(t, b, env, "small")
			if traced != plain {
				t.Fatalf("the app printed differently under the tracer:\n--- plain\n%s--- traced\n%s", plain, traced)
			}
			tr := readTrace(t, out)
			if tr.orphans != 0 {
				t.Errorf("%d calls without their caller", tr.orphans)
			}
			const rounds = 200 // SMALL_ROUNDS in testapp.cpp
			for _, th := range []string{"main", "small-1", "small-2", "small-3"} {
				for name, want := range map[string]int{
					"+[SmallInt with:]": 2 * rounds, "-[SmallInt plus:]": rounds, "-[SmallInt intValue]": 3 * rounds,
					"-[SmallDouble doubleValue]": rounds, "-[TinyString bounds]": rounds, "-[TinyString length]": rounds,
				} {
					if n, _ := tr.count(th, name); n != want {
						t.Errorf("%s: %d %s, want %d", th, n, name, want)
					}
				}
				for _, c := range tr.threads[th] {
					if strings.Contains(c.Name, "0x") {
						t.Errorf("%s: a call named %q: the small object's class was not found", th, c.Name)
						break
					}
				}
			}
			// nested sends to small objects keep their depth (by depth, not by path: under qemu
			// the counter's microsecond ticks make many calls instants, which carry their depth)
			atDepth := func(th, name string, depth int) (n int) {
				for _, c := range tr.threads[th] {
					if c.Name == name && c.Args.Depth == depth {
						n++
					}
				}
				return n
			}
			if n := atDepth("main", "-[SmallInt intValue]", 2); n != 2*rounds {
				t.Errorf("main: %d -[SmallInt intValue] at depth 2 (inside -[SmallInt plus:]), want %d", n, 2*rounds)
			}
			if n := atDepth("small-2", "-[TinyString length]", 2); n != rounds {
				t.Errorf("small-2: %d -[TinyString length] at depth 2 (inside -[TinyString bounds]), want %d", n, rounds)
			}
		})
	}
}

func testDlopen(t *testing.T, b built) {
	plain, _ := runApp(t, b, nil, "dlopen")
	out := filepath.Join(b.dir, "trace-dlopen.json")
	traced, _ := runApp(t, b, map[string]string{"LD_PRELOAD": b.lib, "MSGTRACE_OUT": out}, "dlopen")
	if traced != plain {
		t.Fatalf("the app printed differently under the tracer:\n--- plain\n%s--- traced\n%s", plain, traced)
	}
	tr := readTrace(t, out)
	// The plugin was loaded after the library installed; its own objc_msgSend import was
	// rebound when dlopen returned.
	if n, _ := tr.count("main", "-[Plugin work]"); n != 1 {
		t.Errorf("-[Plugin work] recorded %d times, want 1", n)
	}
}

func testBadEnv(t *testing.T, b built) {
	plain, _ := runApp(t, b, nil)
	out := filepath.Join(b.dir, "never.json")
	for _, bad := range []map[string]string{
		{"MSGTRACE_MIN_US": "fast"},
		{"MSGTRACE_FORMAT": "xml"},
		{"MSGTRACE_OUT": filepath.Join(b.dir, "missing", "t.json")},
	} {
		env := map[string]string{"LD_PRELOAD": b.lib, "MSGTRACE_OUT": out}
		for k, v := range bad {
			env[k] = v
		}
		traced, stderr := runApp(t, b, env)
		if traced != plain {
			t.Errorf("%v: output changed", bad)
		}
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		var k string
		for k = range bad {
		}
		if len(lines) != 1 || !strings.Contains(lines[0], k+"=") || !strings.Contains(lines[0], "tracing is off") {
			t.Errorf("%v: stderr %q, want one line naming %s", bad, stderr, k)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%v: a trace was written", bad)
			os.Remove(out)
		}
	}
}

// testCAPI runs a program that drives libmsgtrace through msgtrace.h: nothing is recorded
// while paused, flushes while another thread keeps sending hold everything so far, each call
// exactly once, bad filters and paths fail with a reason, and the exit write holds every call. static
// links the program with the c-archive instead of libmsgtrace.so, as an iOS test host links
// libmsgtrace.a: the library is then part of the main program, starts at msgtrace_start(),
// and must trace the program's own sends (its image is not exempt as the library's own).
func testCAPI(t *testing.T, b built, cc string, static bool) {
	root := testfiles.Root(t)
	name, lib := "capi", []string{"-L", b.dir, "-lmsgtrace"}
	if static {
		name = "capi-static"
		archive := filepath.Join(b.dir, "static", "libmsgtrace.a")
		buildLib(t, "c-archive", archive, b.goarch, cc)
		lib = []string{"-DMSGTRACE_STATIC", archive, "-ldl"}
	}
	prog := filepath.Join(b.dir, name)
	args := []string{"-O1", "-g", "-I", filepath.Join(root, "cmd", "libmsgtrace"), "-I", filepath.Join(root, "testdata", "objcapp"),
		"-o", prog, filepath.Join(root, "testdata", "capi", "capi.c")}
	args = append(append(args, lib...), "-L", b.dir, "-ltobjc", "-lpthread", "-Wl,-rpath,$ORIGIN")
	if out, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cc, err, out)
	}
	atExit := filepath.Join(b.dir, name+"-exit.json")
	c := b.command(map[string]string{"MSGTRACE_START": "paused", "MSGTRACE_OUT": atExit, "MSGTRACE_VERBOSE": "1"}, name)
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", name, err, out)
	}
	var sent, recorded, flushed, threads, dropped uint64
	var f1, f2 int
	var paused uint64
	var parked, bound, parks int
	text := string(out)
	for _, line := range strings.Split(text, "\n") {
		fmt.Sscanf(line, "paused recorded %d", &paused)
		fmt.Sscanf(line, "parked %d", &parked)
		fmt.Sscanf(line, "bound %d", &bound)
		fmt.Sscanf(line, "msgtrace: pauses that parked the send and wait slots: %d", &parks)
		fmt.Sscanf(line, "flush1 %d", &f1)
		fmt.Sscanf(line, "flush2 %d", &f2)
		fmt.Sscanf(line, "sent %d", &sent)
		fmt.Sscanf(line, "recorded %d flushed %d threads %d dropped %d", &recorded, &flushed, &threads, &dropped)
	}
	// paused for 300 ms the program's slot holds objc_msgSend itself (parked), resumed the
	// interposer
	// (the second pause, around the second flush, may be too short to park)
	if parked != 1 || bound != 1 || parks < 1 {
		t.Errorf("send slot: parked %d, bound again %d, want 1 and 1:\n%s", parked, bound, text)
	}
	if paused != 0 || f1 != 0 || f2 != 0 || sent < 3000 || recorded != sent || flushed != sent || threads != 2 || dropped != 0 {
		t.Fatalf("capi output:\n%s", text)
	}
	// a flush writes everything so far: the first at least the main thread's first 1000
	// calls, the second every call sent, each exactly once
	for _, f := range []string{"flush1.json", "flush2.json"} {
		tr := readTrace(t, filepath.Join(b.dir, f))
		total := 0
		for _, cs := range tr.threads {
			for _, c := range cs {
				if c.Name != "-[Counter tick]" {
					t.Errorf("%s: unexpected call %s", f, c.Name)
				}
				total++
			}
		}
		if n, _ := tr.count("main", "-[Counter tick]"); f == "flush1.json" && n < 1000 {
			t.Errorf("flush1 holds %d of the main thread's first 1000 calls", n)
		}
		if f == "flush2.json" && uint64(total) != sent {
			t.Errorf("flush2 holds %d calls, %d were sent", total, sent)
		}
	}
	for _, want := range []string{
		`bad pattern -1 [msgtrace: pattern "UIView" names no method`,
		"bad path -1 [msgtrace: cannot write missing/dir/x.json: no such file or directory]",
		"filters 0 []",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("capi output lacks %q:\n%s", want, text)
		}
	}
	tr := readTrace(t, atExit)
	if n, _ := tr.count("main", "-[Counter tick]"); n != 2010 {
		t.Errorf("the exit write holds %d of the main thread's 2010 recorded calls", n)
	}
	// loaded while the slots were parked, its send slot bound at the resume
	if n, _ := tr.count("main", "-[Plugin work]"); n != 1 || !strings.Contains(text, "plugin 42") {
		t.Errorf("the exit write holds -[Plugin work] %d times, want 1 (a library loaded while parked)", n)
	}
}

// testMachobindRun traces the app with `machobind run`: the app's output and exit status pass
// through, the trace files are written, and the summary's top method is the one that slept.
func testMachobindRun(t *testing.T, b built) {
	root := testfiles.Root(t)
	mb := filepath.Join(b.dir, "machobind")
	build := exec.Command("go", "build", "-o", mb, "./cmd/machobind")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building machobind: %v\n%s", err, out)
	}
	plain, _ := runApp(t, b, nil)
	d := b.dir
	cmd := exec.Command(mb, "run", "--lib", b.lib, "--out", filepath.Join(d, "run.json"), "--pprof", filepath.Join(d, "run.pb.gz"),
		"--folded", filepath.Join(d, "run.folded"), "--flame", filepath.Join(d, "run.svg"),
		"--speedscope", filepath.Join(d, "run.speedscope.json"), "--", filepath.Join(d, "testapp"))
	var so, se strings.Builder
	cmd.Stdout, cmd.Stderr = &so, &se
	if err := cmd.Run(); err != nil {
		t.Fatalf("machobind run: %v\n%s", err, se.String())
	}
	if so.String() != plain {
		t.Errorf("output under machobind run:\n%s\nwant:\n%s", so.String(), plain)
	}
	lines := strings.Split(se.String(), "\n")
	top := -1
	for i, l := range lines {
		if strings.HasPrefix(l, "top 10 methods by self time") {
			top = i
		}
	}
	if top < 0 || top+2 >= len(lines) || !strings.HasSuffix(strings.TrimSpace(lines[top+2]), "+[Sleeper nap:]") {
		t.Errorf("summary does not list +[Sleeper nap:] first:\n%s", se.String())
	}
	tr := readTrace(t, filepath.Join(d, "run.json"))
	tr.one(t, "main", "+[App run] > +[Sleeper nap:]")
	f, err := os.Open(filepath.Join(d, "run.pb.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	prof, err := profile.Parse(f)
	if err != nil {
		t.Fatalf("pprof: %v", err)
	}
	found := false
	for _, s := range prof.Sample {
		if len(s.Location) > 0 && s.Location[0].Line[0].Function.Name == "+[Sleeper nap:]" {
			found = true
		}
	}
	if !found {
		t.Error("pprof profile has no +[Sleeper nap:] sample")
	}
	folded, _ := os.ReadFile(filepath.Join(d, "run.folded"))
	if !strings.Contains(string(folded), "+[App run];+[Sleeper nap:] ") {
		t.Errorf("folded stacks lack +[App run];+[Sleeper nap:]")
	}
	svg, _ := os.ReadFile(filepath.Join(d, "run.svg"))
	if !strings.Contains(string(svg), "+[Sleeper nap:] (") {
		t.Errorf("flame graph lacks +[Sleeper nap:]")
	}
	t.Run("viewers", func(t *testing.T) { checkDemoInViewers(t, d, tr) })

	// The program's exit status is machobind's; a program that cannot start is an error.
	// stress _exit ends with _exit, past the exit handlers: the rebound _exit still closed
	// the stream.
	cmd = exec.Command(mb, "run", "--lib", b.lib, "--out", filepath.Join(d, "exit.json"), "--", filepath.Join(b.dir, "stress"), "_exit", "3")
	if err := cmd.Run(); cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 3 {
		t.Errorf("exit status of stress _exit 3 under machobind run: %v", err)
	}
	if tr := readTrace(t, filepath.Join(d, "exit.json")); len(tr.find("main", "-[App work]")) != 5 {
		t.Errorf("the trace of a program ending in _exit holds %d of its 5 calls", len(tr.find("main", "-[App work]")))
	}
	// A program that sent nothing leaves no trace, and says why.
	cmd = exec.Command(mb, "run", "--lib", b.lib, "--out", filepath.Join(d, "none.json"), "--", "sh", "-c", "exit 0")
	if o, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(o), "without writing a trace") {
		t.Errorf("sh -c 'exit 0' under machobind run: %v\n%s", err, o)
	}
	// A process tree: every process that sent messages is a process track of the one trace.
	cmd = exec.Command(mb, "run", "--lib", b.lib, "--out", filepath.Join(d, "tree.json"), "--", filepath.Join(b.dir, "stress"), "fork")
	if o, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(o), "of 3 processes") {
		t.Errorf("stress fork under machobind run: %v\n%s", err, o)
	}
	out, err := exec.Command(mb, "run", "--lib", b.lib, "--", filepath.Join(d, "no-such-app")).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "cannot start") {
		t.Errorf("missing app: %v\n%s", err, out)
	}
}

// testFilters: the MSGTRACE_* filters shape what the preloaded library writes.
func testFilters(t *testing.T, b built) {
	out := filepath.Join(b.dir, "filtered.json")
	runApp(t, b, map[string]string{"LD_PRELOAD": b.lib, "MSGTRACE_OUT": out,
		"MSGTRACE_INCLUDE": "*[Worker *], +[Sleeper nap:]", "MSGTRACE_THREADS": "main", "MSGTRACE_MAX_DEPTH": "3"})
	tr := readTrace(t, out)
	if len(tr.threads) != 1 || tr.threads["main"] == nil {
		t.Errorf("threads: want the main thread only, got %d", len(tr.threads))
	}
	for _, c := range tr.threads["main"] {
		if !strings.HasPrefix(c.Name, "-[Worker ") && !strings.HasPrefix(c.Name, "+[Worker ") && c.Name != "+[Sleeper nap:]" {
			t.Errorf("kept %s", c.Name)
		}
		if c.Args.Depth > 3 {
			t.Errorf("%s at depth %d kept with MSGTRACE_MAX_DEPTH=3", c.Name, c.Args.Depth)
		}
	}
	// Depths 1..3 of fib(12): 1 + 2 + 4 calls.
	if n, _ := tr.count("main", "-[Worker fib:]"); n != 7 {
		t.Errorf("%d -[Worker fib:] kept, want 7", n)
	}
	// Paused from the start and never resumed: installed, nothing recorded, so no file (a
	// process that recorded nothing never replaces a trace).
	out = filepath.Join(b.dir, "paused.json")
	runApp(t, b, map[string]string{"LD_PRELOAD": b.lib, "MSGTRACE_OUT": out, "MSGTRACE_START": "paused"})
	if _, err := os.Stat(out); err == nil {
		t.Errorf("paused: %s written", out)
	}
	// MSGTRACE_MIN_US in the interposer: the stream itself holds only the calls that long
	// (the 200 ms nap and the calls around it), not the short ones.
	out = filepath.Join(b.dir, "min.mtrace")
	runApp(t, b, map[string]string{"LD_PRELOAD": b.lib, "MSGTRACE_OUT": out, "MSGTRACE_MIN_US": "100000"})
	if s, tot := readStreams(t, out); s.calls["+[Sleeper nap:]"] != 1 || s.calls["-[Worker fib:]"] != 0 || tot.Calls > 5 {
		t.Errorf("MSGTRACE_MIN_US=100000: the stream holds %v", s.calls)
	}
	// pprof chosen by the file name.
	out = filepath.Join(b.dir, "t.pb.gz")
	runApp(t, b, map[string]string{"LD_PRELOAD": b.lib, "MSGTRACE_OUT": out})
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := profile.Parse(f); err != nil {
		t.Errorf("%s: %v", out, err)
	}
}

// checkDemoInViewers loads the demo's trace (`make demo`'s program under `machobind run`) into
// speedscope in headless Chromium, as .speedscope.json and as Chrome JSON, and its SVG flame
// graph, and checks what a person sees against the trace itself: a profile per thread with
// the thread's total, and per method the self and total time of the sandwich view, worked out
// here from the Chrome JSON's calls (total: time under at least one call of the method).
func checkDemoInViewers(t *testing.T, dir string, tr trace) {
	web := viewertest.Tools(t)
	defer func() { // the outputs and speedscope's screenshots outlive a failure
		if keep, err := os.MkdirTemp("", "msgtrace-demo-viewers-"); t.Failed() && err == nil {
			if os.CopyFS(keep, os.DirFS(dir)) == nil {
				t.Logf("outputs and screenshots kept in %s", keep)
			}
		} else if err == nil {
			os.RemoveAll(keep)
		}
	}()
	b, err := os.ReadFile(filepath.Join(dir, "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		TraceEvents []struct {
			Ph, Name string
			Pid, Tid uint64
			Args     struct{ Name string }
		}
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	process, tids := "", map[string]uint64{}
	var pid uint64
	for _, e := range doc.TraceEvents {
		if e.Ph == "M" && e.Name == "process_name" {
			process, pid = e.Args.Name, e.Pid
		}
		if e.Ph == "M" && e.Name == "thread_name" {
			tids[e.Args.Name] = e.Tid
		}
	}
	ns := func(us float64) uint64 { return uint64(math.Round(us * 1000)) }
	want := map[string]viewertest.Expect{}
	unwound := map[string]bool{}
	var names []string
	for thread, calls := range tr.threads {
		e := viewertest.Expect{Name: thread, Methods: map[string]viewertest.Times{}}
		for _, c := range calls {
			m := e.Methods[c.Name]
			self := ns(c.Dur)
			for _, k := range c.children {
				self -= ns(k.Dur)
			}
			m.Self += self
			outer := true
			for p := c.parent; p != nil; p = p.parent {
				outer = outer && p.Name != c.Name
			}
			if outer {
				m.Total += ns(c.Dur)
			}
			e.Methods[c.Name] = m
			if c.parent == nil {
				e.Total += ns(c.Dur)
			}
			unwound[thread] = unwound[thread] || c.Args.Unwound
			names = append(names, c.Name)
		}
		want[thread] = e
	}
	sort.Strings(names)
	names = slices.Compact(names)
	res := viewertest.Run(t, web, dir, []viewertest.Case{
		{File: "run.speedscope.json", Viewer: "speedscope"},
		{File: "run.json", Viewer: "speedscope"},
		{File: "run.svg", Viewer: "svg", Names: names},
	})
	for _, file := range []string{"run.speedscope.json", "run.json"} {
		r := res[file]
		// the profiles in speedscope's order, each matched to its thread by the name it shows:
		// the thread's (speedscope's own format) or "process (pid P), thread (tid T)" (Chrome JSON)
		label := func(thread string) string {
			if file == "run.json" {
				return fmt.Sprintf("%s (pid %d), %s (tid %d)", process, pid, thread, tids[thread])
			}
			if thread == "main" {
				return fmt.Sprintf("main (tid %d)", tids[thread])
			}
			return thread
		}
		var ordered []viewertest.Expect
		for _, p := range r.Profiles {
			for thread, e := range want {
				if label(thread) != p.Name {
					continue
				}
				if file == "run.speedscope.json" && unwound[thread] {
					// speedscope's own format marks a call an exception unwound with a
					// frame of no time after it (Chrome JSON: an instant, which speedscope skips)
					e.Methods = maps.Clone(e.Methods)
					e.Methods["[unwound]"] = viewertest.Times{}
				}
				ordered = append(ordered, e)
			}
		}
		if len(ordered) != len(want) || len(r.Profiles) != len(want) {
			t.Errorf("%s: speedscope shows profiles %v, want one per thread of %v", file, profileNames(r), slices.Sorted(maps.Keys(want)))
			continue
		}
		viewertest.Check(t, r, ordered, func(e viewertest.Expect) string { return label(e.Name) })
		rows := 0
		for _, p := range r.Profiles {
			rows += len(p.Rows)
		}
		t.Logf("speedscope opened the demo's %s in %d ms: %d profiles, %d sandwich rows checked", file, r.LoadMs, len(r.Profiles), rows)
	}
	sv := res["run.svg"]
	if sv.Error != "" || len(sv.Found) != len(names) {
		t.Errorf("svg: %+v", sv)
	}
	for i, c := range sv.Found {
		if c == 0 {
			t.Errorf("svg: search finds no %q", names[i])
		}
	}
}

func profileNames(r viewertest.Result) []string {
	var out []string
	for _, p := range r.Profiles {
		out = append(out, p.Name)
	}
	return out
}
