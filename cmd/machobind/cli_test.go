package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHelp: every command's --help and -h print its usage on stdout and exit 0; the global
// usage names every command and output format.
func TestHelp(t *testing.T) {
	for _, c := range program.Commands {
		for _, h := range [][]string{{c.Name, "--help"}, {c.Name, "-h"}, {"help", c.Name}} {
			code, out, stderr := runCLI(h...)
			if code != 0 || stderr != "" || !strings.HasPrefix(out, "usage: machobind "+c.Name+" ") || !strings.Contains(out, "flags:\n") {
				t.Errorf("machobind %v: exit %d, stderr %q, stdout:\n%s", h, code, stderr, out)
			}
		}
	}
	// flags after positional arguments too, and run's flags before the program's
	if code, out, _ := runCLI("report", "x.mtrace", "--help"); code != 0 || !strings.Contains(out, "--budget-ms") {
		t.Errorf("report x --help: exit %d\n%s", code, out)
	}
	if code, out, _ := runCLI("trace", "--help"); code != 0 || !strings.Contains(out, ".speedscope.json") || !strings.Contains(out, "-format") {
		t.Errorf("trace --help: exit %d\n%s", code, out)
	}
	for _, h := range [][]string{{"help"}, {"--help"}, {"-h"}} {
		code, out, _ := runCLI(h...)
		if code != 0 {
			t.Errorf("machobind %v: exit %d", h, code)
		}
		for _, w := range []string{"dump ", "trace ", "run ", "report ", "diff ", ".json", ".pftrace", "perfetto", ".speedscope.json", "speedscope", ".pb.gz", ".folded", ".svg"} {
			if !strings.Contains(out, w) {
				t.Errorf("machobind %v does not name %q:\n%s", h, w, out)
			}
		}
	}
	// a usage error shows the command's synopsis, not every command's
	code, _, stderr := runCLI("report")
	if code != 2 || !strings.Contains(stderr, "usage: machobind report") || strings.Contains(stderr, "machobind dump") {
		t.Errorf("report without a trace: exit %d\n%s", code, stderr)
	}
	if code, _, stderr := runCLI("help", "frobnicate"); code != 2 || !strings.Contains(stderr, "unknown command") {
		t.Errorf("help frobnicate: exit %d\n%s", code, stderr)
	}
}

// TestRunUsage: run refuses output names no format owns, or another format's, before it
// starts anything (exit 2); --streams DIR is created (tested with a real program in
// TestGNUstepReportDiff).
func TestRunUsage(t *testing.T) {
	dir := t.TempDir()
	lib := filepath.Join(dir, "lib.so")
	os.WriteFile(lib, nil, 0o644)
	for _, c := range []struct {
		args []string
		err  string
	}{
		{[]string{"--out", filepath.Join(dir, "t.txt")}, "no output format has this extension"},
		{[]string{"--out", filepath.Join(dir, "x.bogus")}, "no output format has this extension"},
		{[]string{"--out", filepath.Join(dir, "x.mtrace")}, "stream format"},
		{[]string{"--out", filepath.Join(dir, "trace")}, "no output format has this extension"},
		{[]string{"--pprof", filepath.Join(dir, "p.json")}, "names the json format, not pprof"},
		{[]string{"--flame", filepath.Join(dir, "f.mtrace")}, "stream format"},
		{[]string{"--budget-ms", "0"}, "budget-ms"},
	} {
		args := append(append([]string{"run", "--lib", lib}, c.args...), "--", "true")
		code, _, stderr := runCLI(args...)
		if code != 2 || !strings.Contains(stderr, c.err) {
			t.Errorf("machobind %v: exit %d, stderr %q; want 2 and %q", args, code, stderr, c.err)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("a refused run left files: %v", ents)
	}
}

// TestReportDiffUsage: report and diff on what is not a trace, and their bad usage.
func TestReportDiffUsage(t *testing.T) {
	dir := t.TempDir()
	raw := writeRaw(t, dir)
	empty := filepath.Join(dir, "empty")
	os.Mkdir(empty, 0o755)
	for _, c := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"report"}, 2, "one or more traces"},
		{[]string{"report", "--top", "0", raw}, 2, "positive"},
		{[]string{"report", filepath.Join(dir, "missing")}, 1, "no such file"},
		{[]string{"report", empty}, 1, "holds no trace"},
		{[]string{"diff", raw}, 2, "BASE and HEAD"},
		{[]string{"diff", "--json", "--markdown", raw, raw}, 2, "not both"},
		{[]string{"diff", "--pprof-base", filepath.Join(dir, "b.pb.gz"), raw, raw}, 2, "go together"},
		{[]string{"diff", "--pprof-base", filepath.Join(dir, "b.json"), "--pprof-head", filepath.Join(dir, "h.pb.gz"), raw, raw}, 2, "names the json format"},
		{[]string{"diff", raw, empty}, 1, "holds no trace"},
		{[]string{"diff", "--alpha", "0", raw, raw}, 2, "alpha"},
	} {
		code, _, stderr := runCLI(c.args...)
		if code != c.code || !strings.Contains(stderr, c.err) {
			t.Errorf("machobind %v: exit %d, stderr %q; want %d and %q", c.args, code, stderr, c.code, c.err)
		}
	}
	// a raw dump reports, and diffs against itself with nothing regressed
	if code, out, stderr := runCLI("report", raw); code != 0 || !strings.Contains(out, "-[View layout]") {
		t.Errorf("report raw: exit %d %s\n%s", code, stderr, out)
	}
	if code, out, stderr := runCLI("diff", raw, raw); code != 0 || !strings.Contains(out, "nothing regressed") || !strings.Contains(out, "too few runs") {
		t.Errorf("diff raw raw: exit %d %s\n%s", code, stderr, out)
	}
}
