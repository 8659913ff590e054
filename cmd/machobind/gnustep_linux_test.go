//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/msgtrace/msgtrace/internal/testfiles"
	"github.com/msgtrace/msgtrace/tracer/report"
)

// gnustepKit builds real programs with gcc against Debian's gnustep-base (gcc's GNU runtime:
// traced through method trampolines) and the library that traces them.
type gnustepKit struct {
	root, dir, lib string
}

func newGNUstepKit(t *testing.T) *gnustepKit {
	t.Helper()
	if runtime.GOARCH != "amd64" {
		t.Skip("Debian's GNUstep is installed for the host (amd64) only")
	}
	testfiles.NeedTools(t, "gnustep-config", "gcc")
	k := &gnustepKit{root: testfiles.Root(t), dir: t.TempDir()}
	k.lib = filepath.Join(k.dir, "libmsgtrace.so")
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-ldflags="+testfiles.LibLDFlags, "-o", k.lib, "./cmd/libmsgtrace")
	cmd.Dir = k.root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building libmsgtrace.so: %v\n%s", err, out)
	}
	return k
}

func (k *gnustepKit) flags(t *testing.T, which string) []string {
	out, err := exec.Command("gnustep-config", which).Output()
	if err != nil {
		t.Fatalf("gnustep-config %s: %v", which, err)
	}
	return strings.Fields(string(out))
}

// build compiles testdata/gnustep/SRC into the kit's directory as OUT.
func (k *gnustepKit) build(t *testing.T, src, out string, defs ...string) string {
	t.Helper()
	args := append(append(append([]string{"-std=gnu11"}, k.flags(t, "--objc-flags")...), defs...),
		"-o", out, filepath.Join(k.root, "testdata", "gnustep", src))
	cc := exec.Command("gcc", append(append(args, k.flags(t, "--base-libs")...), "-lpthread")...)
	cc.Dir = k.dir
	if b, err := cc.CombinedOutput(); err != nil {
		t.Fatalf("gcc %s %v: %v\n%s", src, defs, err, b)
	}
	return filepath.Join(k.dir, out)
}

// trace runs prog with the library preloaded, its stream written into dir.
func (k *gnustepKit) trace(t *testing.T, prog, dir string, env ...string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, prog)
	cmd.Dir = k.dir
	cmd.Env = append(os.Environ(), "HOME="+k.dir, "LD_PRELOAD="+k.lib, "MSGTRACE_QUIET=1",
		"MSGTRACE_OUT="+filepath.Join(dir, "run-%p.mtrace"))
	cmd.Env = append(cmd.Env, env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s traced: %v\n%s", prog, err, out)
	}
}

// TestGNUstepReportDiff: report and diff on real programs, compiled by gcc against
// gnustep-base and traced by the library: the demo's main-thread block is its one hitch and
// the worker's long calls are not hitches; a build with more work inside one method's own body
// is a regression of that method alone, round after round, and the base against itself is not.
func TestGNUstepReportDiff(t *testing.T) {
	testfiles.Slow(t, "builds and runs GNUstep programs")
	k := newGNUstepKit(t)
	t.Run("report", func(t *testing.T) { testGNUstepReport(t, k) })
	t.Run("run", func(t *testing.T) { testGNUstepRun(t, k) })
	t.Run("diff", func(t *testing.T) { testGNUstepDiff(t, k) })
}

// The demo with a 250 ms block and a 150 ms budget: other main-thread calls are a few ms, so
// only a stall of the whole machine longer than the budget could make another hitch; such a
// run is traced again, once.
const (
	demoBlockMS  = 250
	demoBudgetMS = 150
)

func testGNUstepReport(t *testing.T, k *gnustepKit) {
	demo := k.build(t, "demo.m", "demo-report", fmt.Sprintf("-DBLOCK_MS=%d", demoBlockMS), "-DFRAMES=12")
	var problems []string
	for attempt := 0; attempt < 2; attempt++ {
		dir := filepath.Join(k.dir, fmt.Sprintf("report-%d", attempt))
		k.trace(t, demo, dir, "MSGTRACE_METHODS=all")
		code, out, stderr := runCLI("report", "--json", "--budget-ms", fmt.Sprint(demoBudgetMS), dir)
		if code != 0 {
			t.Fatalf("report: exit %d: %s", code, stderr)
		}
		var r report.Report
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		problems = checkDemoReport(&r)
		if len(problems) == 0 {
			// the text for a person says the same
			code, text, _ := runCLI("report", "--budget-ms", fmt.Sprint(demoBudgetMS), dir)
			if code != 0 || !strings.Contains(text, "HITCHES") || !strings.Contains(text, "-[Library loadThumbnailCache]") ||
				!strings.Contains(text, "-[Indexer compact]") || !strings.Contains(text, "LONG CALLS ON OTHER THREADS") {
				t.Errorf("text report:\n%s", text)
			}
			return
		}
		t.Logf("attempt %d: %s", attempt+1, strings.Join(problems, "; "))
	}
	t.Errorf("report of the demo: %s", strings.Join(problems, "; "))
}

// checkDemoReport lists what is wrong with the demo's report.
func checkDemoReport(r *report.Report) []string {
	var p []string
	if r.HitchCount != 1 || len(r.Hitches) != 1 {
		var hs []string
		for _, h := range r.Hitches {
			hs = append(hs, h.Thread+" "+h.Method)
		}
		return append(p, fmt.Sprintf("%d hitches %q, want 1", r.HitchCount, hs))
	}
	h := r.Hitches[0]
	if h.Method != "-[Library loadThumbnailCache]" || h.Thread != "main" {
		p = append(p, fmt.Sprintf("the hitch is %s on %s", h.Method, h.Thread))
	}
	// the calls around it, outermost first: the run loop under -[App run], the timer, the frame
	if n := len(h.Stack); n < 3 || h.Stack[0] != "-[App run]" || h.Stack[n-1] != "-[App frame:]" || h.Stack[n-2] != "-[App tick:]" ||
		!strings.Contains(report.StackString(h.Stack), "-[NSRunLoop runMode:beforeDate:]") {
		p = append(p, fmt.Sprintf("hitch stack %q", h.Stack))
	}
	// the worker's long calls are listed apart, never as hitches
	found := false
	for _, c := range r.OffMain {
		if c.Method == "-[Indexer compact]" && c.Thread == "indexer" && strings.HasSuffix(report.StackString(c.Stack), "-[Indexer run:]") {
			found = true
		}
		if c.Thread == "main" {
			p = append(p, "a main-thread call among the other threads' long calls: "+c.Method)
		}
	}
	if !found {
		p = append(p, fmt.Sprintf("-[Indexer compact] not among the other threads' long calls: %+v", r.OffMain))
	}
	var names []string
	for _, th := range r.Threads {
		names = append(names, th.Name)
		if th.Name == "indexer" && th.Hitches == 0 {
			p = append(p, "the indexer thread has no long call")
		}
	}
	if len(r.Threads) != 2 || r.Recorder.Dropped != 0 {
		p = append(p, fmt.Sprintf("threads %q, %d dropped", names, r.Recorder.Dropped))
	}
	// the app's comparator, called back by Foundation's sort, counted per thread and overall
	for _, l := range [][]report.MethodStat{r.Methods.ByCalls, r.Threads[0].Methods.ByCalls} {
		ok := false
		for _, m := range l {
			ok = ok || m.Method == "-[Photo compareByScore:]" && m.Calls > 100
		}
		if !ok {
			p = append(p, "-[Photo compareByScore:] not among the most called methods")
		}
	}
	return p
}

// testGNUstepRun: machobind run writes every output, creates --streams DIR, and ends with the
// report's summary; the kept streams report again.
func testGNUstepRun(t *testing.T, k *gnustepKit) {
	demo := k.build(t, "demo.m", "demo-run", fmt.Sprintf("-DBLOCK_MS=%d", demoBlockMS), "-DFRAMES=12")
	var problems []string
	for attempt := 0; attempt < 2; attempt++ {
		d := filepath.Join(k.dir, fmt.Sprintf("run-%d", attempt))
		os.Mkdir(d, 0o755)
		streams := filepath.Join(d, "kept", "streams") // created by run
		t.Setenv("MSGTRACE_METHODS", "all")
		t.Setenv("HOME", k.dir)
		code, stdout, stderr := runCLI("run", "--lib", k.lib, "--out", filepath.Join(d, "t.json"), "--perfetto", filepath.Join(d, "t.pftrace"),
			"--speedscope", filepath.Join(d, "t.speedscope.json"), "--pprof", filepath.Join(d, "t.pb.gz"), "--folded", filepath.Join(d, "t.folded"),
			"--flame", filepath.Join(d, "t.svg"), "--streams", streams, "--budget-ms", fmt.Sprint(demoBudgetMS), "--", demo)
		if code != 0 || !strings.Contains(stdout, "IMG_") {
			t.Fatalf("machobind run: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
		}
		for _, f := range []string{"t.json", "t.pftrace", "t.speedscope.json", "t.pb.gz", "t.folded", "t.svg"} {
			if st, err := os.Stat(filepath.Join(d, f)); err != nil || st.Size() == 0 {
				t.Errorf("%s: %v", f, err)
			}
		}
		kept, _ := filepath.Glob(filepath.Join(streams, "*.mtrace"))
		if len(kept) != 1 {
			t.Fatalf("--streams %s holds %q", streams, kept)
		}
		// the summary: top methods by self time, then the hitches with their stacks
		lines := strings.Split(stderr, "\n")
		top, hitch := -1, -1
		for i, l := range lines {
			if strings.HasPrefix(l, "top 10 methods by self time") {
				top = i
			}
			if strings.HasPrefix(l, "1 hitch (main-thread calls busy over 150.000 ms") {
				hitch = i
			}
		}
		problems = nil
		if top < 0 || top+2 >= len(lines) || !strings.HasSuffix(lines[top+1], "method") {
			problems = append(problems, "no top-10 table")
		}
		if hitch < top || hitch+2 >= len(lines) || !strings.Contains(lines[hitch+1], "-[Library loadThumbnailCache]") ||
			!strings.Contains(lines[hitch+2], "in -[App run] > ") || !strings.HasSuffix(lines[hitch+2], "-[App tick:] > -[App frame:]") {
			problems = append(problems, "no hitch -[Library loadThumbnailCache] after the table")
		}
		if !strings.Contains(stderr, "the whole report: machobind report "+streams) {
			problems = append(problems, "no pointer to the whole report")
		}
		if len(problems) == 0 {
			code, out, stderr := runCLI("report", "--json", "--budget-ms", fmt.Sprint(demoBudgetMS), streams)
			var r report.Report
			if code != 0 || json.Unmarshal([]byte(out), &r) != nil {
				t.Fatalf("report %s: exit %d %s", streams, code, stderr)
			}
			problems = checkDemoReport(&r)
		}
		if len(problems) == 0 {
			return
		}
		t.Logf("attempt %d: %s\n%s", attempt+1, strings.Join(problems, "; "), stderr)
	}
	t.Errorf("machobind run: %s", strings.Join(problems, "; "))
}

// diffVerdict is what a test needs of diff --json.
type diffVerdict struct {
	code int
	d    report.DiffResult
	out  string
}

func runDiff(t *testing.T, args ...string) diffVerdict {
	t.Helper()
	code, out, stderr := runCLI(append([]string{"diff", "--json"}, args...)...)
	v := diffVerdict{code: code, out: out}
	if code != 0 && code != 3 {
		t.Fatalf("diff %v: exit %d: %s", args, code, stderr)
	}
	if err := json.Unmarshal([]byte(out), &v.d); err != nil {
		t.Fatalf("diff %v: %v\n%s", args, err, out)
	}
	return v
}

func (v diffVerdict) regressions() []string {
	var out []string
	for _, r := range v.d.Regressions {
		out = append(out, r.Metric+" "+r.Method)
	}
	for _, n := range v.d.New {
		if n.Regression {
			out = append(out, "new "+n.Method)
		}
	}
	return out
}

// testGNUstepDiff: diffapp.m in two builds, 5 traced runs each (interleaved, so a change in the
// machine's load falls on both), in 3 rounds. In every round the base against itself exits 0,
// and against the slower build exits 3 naming -[Parser parse:]'s self time alone. A round can
// fail by chance on a loaded machine (with 5 runs a side, an unchanged method passes the rank
// test about once in 250 comparisons; one base run stalled for longer than the slower build
// takes hides the regression): such a round is done again, up to twice, and the test fails only
// if every attempt fails. A broken diff fails them all.
func testGNUstepDiff(t *testing.T, k *gnustepKit) {
	base := k.build(t, "diffapp.m", "diff-base")
	slow := k.build(t, "diffapp.m", "diff-slow", "-DSLOWER")
	var rounds []string // base directories of the rounds that passed
	for round := 1; round <= 3; round++ {
		var problems []string
		for attempt := 1; attempt <= 3; attempt++ {
			bd := filepath.Join(k.dir, fmt.Sprintf("diff-%d-%d", round, attempt), "base")
			sd := filepath.Join(k.dir, fmt.Sprintf("diff-%d-%d", round, attempt), "slower")
			for i := 0; i < 5; i++ {
				k.trace(t, base, bd)
				k.trace(t, slow, sd)
			}
			problems = nil
			self := runDiff(t, bd, bd)
			if self.code != 0 || len(self.regressions())+len(self.d.Improvements)+len(self.d.New)+len(self.d.Vanished) != 0 || self.d.BaseRuns != 5 {
				problems = append(problems, fmt.Sprintf("base against itself: exit %d %s", self.code, self.out))
			}
			v := runDiff(t, bd, sd)
			if got := v.regressions(); v.code != 3 || len(got) != 1 || got[0] != "self -[Parser parse:]" {
				problems = append(problems, fmt.Sprintf("base against the slower build: exit %d, regressions %q", v.code, got))
			} else if r := v.d.Regressions[0]; r.Head <= r.Base || r.P > 0.05 || len(r.HeadRuns) != 5 {
				problems = append(problems, fmt.Sprintf("the regression %+v", r))
			}
			if len(v.d.New)+len(v.d.Vanished) != 0 {
				problems = append(problems, fmt.Sprintf("new %+v, vanished %+v", v.d.New, v.d.Vanished))
			}
			for _, c := range v.d.ThroughCallees { // callers slower through parse: never regressions
				if len(c.Via) > 0 && c.Via[0] != "-[Parser parse:]" {
					problems = append(problems, fmt.Sprintf("%s slower via %q", c.Method, c.Via))
				}
			}
			if len(problems) == 0 {
				rounds = append(rounds, bd)
				if round == 1 {
					checkDiffOutputs(t, bd, sd)
				}
				break
			}
			t.Logf("round %d, attempt %d: %s", round, attempt, strings.Join(problems, "; "))
		}
		if len(problems) > 0 {
			t.Errorf("round %d: %s", round, strings.Join(problems, "; "))
		}
	}
	// fresh runs of the base against the base: nothing regressed (again, one retry)
	if len(rounds) >= 3 {
		v := runDiff(t, rounds[0], rounds[1])
		if v.code != 0 {
			t.Logf("base runs of rounds 1 and 2: %q", v.regressions())
			if v = runDiff(t, rounds[1], rounds[2]); v.code != 0 {
				t.Errorf("base runs against base runs: exit %d, regressions %q", v.code, v.regressions())
			}
		}
	}
}

// checkDiffOutputs: the text and Markdown forms, and the pprof pair go tool pprof diffs.
func checkDiffOutputs(t *testing.T, bd, sd string) {
	code, text, _ := runCLI("diff", bd, sd)
	if code != 3 || !strings.Contains(text, "REGRESSIONS: 1") || !strings.Contains(text, "-[Parser parse:]") || !strings.Contains(text, "verdict: regressed") {
		t.Errorf("text: exit %d\n%s", code, text)
	}
	code, md, _ := runCLI("diff", "--markdown", bd, sd)
	if code != 3 || !strings.HasPrefix(md, "### msgtrace: 1 regression\n") || !strings.Contains(md, "| `-[Parser parse:]` | self |") {
		t.Errorf("markdown: exit %d\n%s", code, md)
	}
	dir := filepath.Dir(bd)
	pb, ph := filepath.Join(dir, "base.pb.gz"), filepath.Join(dir, "head.pb.gz")
	if code, _, stderr := runCLI("diff", "--pprof-base", pb, "--pprof-head", ph, bd, sd); code != 3 {
		t.Fatalf("diff with pprof: exit %d: %s", code, stderr)
	}
	out, err := exec.Command("go", "tool", "pprof", "-top", "-diff_base", pb, ph).CombinedOutput()
	if err != nil {
		t.Fatalf("go tool pprof -diff_base: %v\n%s", err, out)
	}
	// the method that grew is the top line of the difference
	lines := strings.Split(string(bytes.TrimSpace(out)), "\n")
	var first string
	for i, l := range lines {
		if strings.Contains(l, "flat%") && i+1 < len(lines) {
			first = lines[i+1]
			break
		}
	}
	if !strings.HasSuffix(strings.TrimSpace(first), "-[Parser parse:]") {
		t.Errorf("go tool pprof -top -diff_base: first line %q\n%s", first, out)
	}
}
