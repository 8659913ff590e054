package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/msgtrace/msgtrace/internal/testfiles"
	"github.com/msgtrace/msgtrace/tracer"
	"github.com/msgtrace/msgtrace/tracer/report"
	"github.com/msgtrace/msgtrace/tracer/stream"
)

// built builds msgtrace and machobind, as `make build` does, into a temporary directory.
func built(t *testing.T) (msgtrace, machobind string) {
	t.Helper()
	dir := t.TempDir()
	for _, c := range []string{"msgtrace", "machobind"} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, c), "./cmd/"+c)
		cmd.Dir = testfiles.Root(t)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build ./cmd/%s: %v\n%s", c, err, b)
		}
	}
	return filepath.Join(dir, "msgtrace"), filepath.Join(dir, "machobind")
}

// runCmd runs a built command and returns its exit status, stdout and stderr.
func runCmd(t *testing.T, bin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errb.String()
}

// launchStream writes the stream of a process whose main thread runs n +initialize methods,
// the i-th lasting (i+1) µs, then -[App run]: 1 ms.
func launchStream(t *testing.T, path string, n int) {
	var b bytes.Buffer
	w := stream.NewStreamWriter(&b)
	w.Process(stream.StreamProcess{PID: 9, Name: "launcher"})
	w.Clock(stream.ClockSample{Tick: 0, MonoNanos: 1e9, RateNum: 1, RateDen: 1})
	w.Thread(stream.StreamThread{TID: 10, Flags: stream.ThreadMain})
	var evs []stream.StreamEvent
	at := uint64(100)
	for i := 0; i < n; i++ {
		w.Methods(stream.StreamMethod{ID: uint64(i + 1), Flags: stream.MethodClass, Class: fmt.Sprintf("C%02d", i), Selector: "initialize"})
		d := uint64(i+1) * 1000
		evs = append(evs, stream.StreamEvent{ID: uint64(i + 1), Start: at, End: at + d})
		at += d + 100
	}
	w.Methods(stream.StreamMethod{ID: uint64(n + 1), Class: "App", Selector: "run"})
	evs = append(evs, stream.StreamEvent{ID: uint64(n + 1), Start: at, End: at + 1e6})
	w.Events(10, 0, evs)
	w.End(stream.StreamCounters{Calls: uint64(n + 1)})
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestBuiltCommands runs the built msgtrace and machobind: trace says in one line what it
// read and wrote (and as JSON with --json), the old spelling writes the same bytes and says
// the same under its own name, the report's launch list is bounded by --top with the others
// counted and timed (and whole in --json), and bad usage exits 2 with the command's synopsis.
func TestBuiltCommands(t *testing.T) {
	mt, mb := built(t)
	dir := t.TempDir()
	in := filepath.Join(dir, "launch.mtrace")
	launchStream(t, in, 30)

	// trace: the summary line, the file, the old spelling
	out := filepath.Join(dir, "t.json")
	code, stdout, stderr := runCmd(t, mt, "trace", in, "-o", out)
	want := "msgtrace: 31 calls on 1 thread of 1 process (31 kept; 0 lost: no buffer space; 0 past the shadow stack) -> " + out + "\n"
	if code != 0 || stdout != "" || stderr != want {
		t.Fatalf("msgtrace trace: exit %d, stdout %q, stderr %q; want %q", code, stdout, stderr, want)
	}
	old := filepath.Join(dir, "old.json")
	code, _, stderr = runCmd(t, mb, "trace", in, "-o", old)
	a, _ := os.ReadFile(out)
	b, _ := os.ReadFile(old)
	if code != 0 || !bytes.Equal(a, b) || len(a) == 0 || stderr != strings.ReplaceAll(strings.Replace(want, "msgtrace:", "machobind:", 1), out, old) {
		t.Errorf("machobind trace: exit %d, %d vs %d bytes, stderr %q", code, len(b), len(a), stderr)
	}
	// a budget: what it folded, on the line after
	code, _, stderr = runCmd(t, mt, "trace", in, "-o", out, "--max-calls", "5")
	lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
	if code != 0 || len(lines) != 2 || lines[0] != strings.TrimSuffix(want, "\n") ||
		!strings.HasPrefix(lines[1], "msgtrace: "+out+" keeps the 5 longest calls (budget 5): 26 calls shorter than") {
		t.Errorf("trace --max-calls 5: exit %d\n%s", code, stderr)
	}
	code, stdout, stderr = runCmd(t, mt, "trace", in, "-o", out, "--max-calls", "5", "--json")
	var wr struct {
		Calls, Kept, Threads, Processes uint64
		Files                           []struct {
			Path, Format          string
			Calls, Budget, Folded uint64
		}
	}
	if err := json.Unmarshal([]byte(stdout), &wr); code != 0 || err != nil || stderr != "" {
		t.Fatalf("trace --json: exit %d, %v, stderr %q\n%s", code, err, stderr, stdout)
	}
	if wr.Calls != 31 || wr.Kept != 31 || wr.Threads != 1 || wr.Processes != 1 || len(wr.Files) != 1 ||
		wr.Files[0].Path != out || wr.Files[0].Format != "json" || wr.Files[0].Calls != 5 || wr.Files[0].Budget != 5 || wr.Files[0].Folded != 26 {
		t.Errorf("trace --json: %+v", wr)
	}

	// report: the +initialize list bounded, the others counted with their time
	code, stdout, stderr = runCmd(t, mt, "report", "--top", "4", in)
	if code != 0 || stderr != "" {
		t.Fatalf("report: exit %d: %s", code, stderr)
	}
	// 30 calls of 1..30 µs: 465 µs; the 4 longest 27..30 µs (114 µs), the 26 others 351 µs
	head := "  +initialize: 30 calls, 0.465 ms; the 4 longest:\n"
	i := strings.Index(stdout, head)
	if i < 0 {
		t.Fatalf("no %q in the report:\n%s", head, stdout)
	}
	listed := strings.SplitN(stdout[i+len(head):], "\n", 6)
	for k, us := range []int{27, 28, 29, 30} {
		if w := fmt.Sprintf("       0.%03d ms  +[C%02d initialize]  (at ", us, us-1); !strings.HasPrefix(listed[k], w) {
			t.Errorf("line %d: %q, want %q...", k, listed[k], w)
		}
	}
	if listed[4] != "  and 26 more (total 0.351 ms)" {
		t.Errorf("after the list: %q", listed[4])
	}
	if n := strings.Count(stdout, " initialize]  (at "); n != 4 {
		t.Errorf("%d +initialize lines, want 4:\n%s", n, stdout)
	}
	// the old spelling reports the same
	if code, same, _ := runCmd(t, mb, "report", "--top", "4", in); code != 0 || same != stdout {
		t.Errorf("machobind report differs:\n%s", same)
	}
	// JSON: every call
	code, stdout, _ = runCmd(t, mt, "report", "--top", "4", "--json", in)
	var r report.Report
	if err := json.Unmarshal([]byte(stdout), &r); code != 0 || err != nil {
		t.Fatalf("report --json: exit %d: %v", code, err)
	}
	if len(r.Launches) != 1 || r.Launches[0].Initialize.Calls != 30 || len(r.Launches[0].Initialize.List) != 30 || r.Launches[0].Initialize.Nanos != 465000 {
		t.Errorf("report --json launches: %+v", r.Launches)
	}
	// a list within --top is whole, in start order, with no tail
	code, stdout, _ = runCmd(t, mt, "report", "--top", "30", in)
	if code != 0 || !strings.Contains(stdout, "  +initialize: 30 calls, 0.465 ms\n       0.001 ms  +[C00 initialize]") || strings.Contains(stdout, "more (total") {
		t.Errorf("report --top 30:\n%s", stdout)
	}

	// bad usage: exit 2, the message and the command's synopsis
	for _, c := range []struct {
		args []string
		err  string
	}{
		{[]string{"trace", in, "-o", out, "--bogus"}, "flag provided but not defined: -bogus\nusage: msgtrace trace TRACE..."},
		{[]string{"trace", in, "-o", out, "--format", "xml"}, `unknown format "xml" (json, perfetto, speedscope, pprof, folded, svg)`},
		{[]string{"trace", in, "-o", "-", "--json"}, "--json writes on stdout"},
		{[]string{"trace", in, "-o", out, "--max-calls", "x"}, "--max-calls"},
		{[]string{"report", "--top", "0", in}, "positive\nusage: msgtrace report"},
		{[]string{"report", "--top", "x", in}, `invalid value "x" for flag -top`},
		{[]string{"diff", in}, "BASE and HEAD"},
		{[]string{"run", "--out", filepath.Join(dir, "t.txt"), "--", "true"}, "no output format has this extension"},
		{[]string{"run", "--report", filepath.Join(dir, "r.pftrace"), "--", "true"}, "the report is JSON"},
		{[]string{"run"}, "run needs a program: msgtrace run"},
		{[]string{"dump", in}, `unknown command "dump"`},
		{[]string{}, "no command given"},
	} {
		code, stdout, stderr := runCmd(t, mt, c.args...)
		if code != 2 || stdout != "" || !strings.HasPrefix(stderr, "msgtrace: ") || !strings.Contains(stderr, c.err) {
			t.Errorf("msgtrace %q: exit %d, stdout %q, stderr %q; want 2 and %q", c.args, code, stdout, stderr, c.err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "t.txt")); err == nil {
		t.Error("a refused run left its output")
	}
}

// TestBuiltHelp: msgtrace's help names its four commands and every format of the registry
// with each extension; each command's --help exits 0 on stdout; machobind's names dump too.
func TestBuiltHelp(t *testing.T) {
	mt, mb := built(t)
	code, out, stderr := runCmd(t, mt, "--help")
	if code != 0 || stderr != "" {
		t.Fatalf("msgtrace --help: exit %d %s", code, stderr)
	}
	for _, c := range []string{"trace", "run", "report", "diff"} {
		if !strings.Contains(out, "\n  "+c+" ") {
			t.Errorf("the help lacks %s", c)
		}
		if code, h, _ := runCmd(t, mt, c, "--help"); code != 0 || !strings.HasPrefix(h, "usage: msgtrace "+c+" ") {
			t.Errorf("msgtrace %s --help: exit %d\n%s", c, code, h)
		}
	}
	if strings.Contains(out, "\n  dump ") {
		t.Error("msgtrace's help names dump")
	}
	for _, f := range tracer.Registry {
		if !regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(f.Extensions[0]) + ` +` + f.Name + ` +` + regexp.QuoteMeta(f.Help) + `$`).MatchString(out) {
			t.Errorf("the help has no line for %s", f.Name)
		}
		for _, e := range f.Extensions {
			if !strings.Contains(out, e+" ") {
				t.Errorf("the help does not name %s (%s)", e, f.Name)
			}
		}
		if f.RunFlag != "" {
			if code, h, _ := runCmd(t, mt, "run", "--help"); code != 0 || !strings.Contains(h, "-"+f.RunFlag+" string\n") {
				t.Errorf("run --help lacks --%s", f.RunFlag)
			}
		}
	}
	code, out, _ = runCmd(t, mb, "help")
	for _, c := range []string{"dump", "trace", "run", "report", "diff"} {
		if code != 0 || !strings.Contains(out, "\n  "+c+" ") {
			t.Errorf("machobind help lacks %s (exit %d)", c, code)
		}
	}
}

// TestBuiltReportThreads: with more threads than --top, the text shows the main thread and the
// busiest others, then how many more there are with their calls and busy time; JSON has all.
func TestBuiltReportThreads(t *testing.T) {
	mt, _ := built(t)
	in := filepath.Join(t.TempDir(), "threads.mtrace")
	var b bytes.Buffer
	w := stream.NewStreamWriter(&b)
	w.Process(stream.StreamProcess{PID: 3, Name: "workers"})
	w.Clock(stream.ClockSample{Tick: 0, MonoNanos: 1e9, RateNum: 1, RateDen: 1})
	w.Methods(stream.StreamMethod{ID: 1, Class: "Worker", Selector: "work"})
	// thread 100 the main one, 1 ms; workers 101..106 busy 1..6 ms
	for i := uint64(0); i < 7; i++ {
		flags := uint64(0)
		if i == 0 {
			flags = stream.ThreadMain
		}
		w.Thread(stream.StreamThread{TID: 100 + i, Flags: flags, Name: fmt.Sprintf("t%d", i)})
		w.Events(100+i, 0, []stream.StreamEvent{{ID: 1, Start: 10, End: 10 + max(i, 1)*1e6}})
	}
	w.End(stream.StreamCounters{Calls: 7})
	if err := os.WriteFile(in, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := runCmd(t, mt, "report", "--top", "3", in)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var shown []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "main") || strings.HasPrefix(l, "t") && strings.Contains(l, " of workers") {
			shown = append(shown, l[:strings.Index(l, " of ")])
		}
	}
	if strings.Join(shown, " ") != "main t5 t6" || !strings.Contains(out, "\nand 4 more threads (4 calls, busy 10.000 ms; report --json lists every thread)\n") {
		t.Errorf("threads shown %q:\n%s", shown, out)
	}
	code, out, _ = runCmd(t, mt, "report", "--top", "3", "--json", in)
	var r report.Report
	if err := json.Unmarshal([]byte(out), &r); code != 0 || err != nil || len(r.Threads) != 7 {
		t.Errorf("report --json: exit %d, %v, %d threads", code, err, len(r.Threads))
	}
}
