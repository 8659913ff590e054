package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/msgtrace/msgtrace/tracer/stream"
)

// fuzzStreamFile writes a small stream of two threads (a call on each, one still open) at path.
func fuzzStreamFile(t *testing.T, path string, pid uint64) {
	var buf bytes.Buffer
	w := stream.NewStreamWriter(&buf)
	w.Process(stream.StreamProcess{PID: pid, Name: "app"})
	w.Clock(stream.ClockSample{Tick: 0, MonoNanos: 0, RateNum: 1000, RateDen: 1})
	w.Methods(stream.StreamMethod{ID: 1, Class: "App", Selector: "run"}, stream.StreamMethod{ID: 2, Class: "View", Selector: "draw:"})
	w.Thread(stream.StreamThread{TID: 1, Flags: stream.ThreadMain})
	w.Thread(stream.StreamThread{TID: 2, Name: "worker"})
	w.Events(1, 0, []stream.StreamEvent{{Type: stream.EventCall, ID: 2, Start: 10, End: 30000, Depth: 1}, {Type: stream.EventCall, ID: 1, Start: 5, End: 40000}})
	w.Events(2, 0, []stream.StreamEvent{{Type: stream.EventCall, ID: 2, Start: 100, End: 200}})
	w.Open(2, 50000, []stream.OpenCall{{ID: 1, Start: 300}})
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// FuzzCommandLine: msgtrace's command line (trace, report, diff, help; not run, which starts
// programs), on any arguments (NUL-separated in the input) in a directory holding a stream
// (a.mtrace) and a directory of runs (runs/): it never panics, exits 0, 1, 2 or 3, says why on
// stderr under the program's name when it does not succeed, and prints usage on stdout for
// help. Arguments cannot name a path outside the directory (a '/' becomes '_').
func FuzzCommandLine(f *testing.F) {
	for _, s := range []string{"", "help", "--help", "help\x00trace", "trace\x00--help", "frobnicate",
		"trace\x00a.mtrace\x00-o\x00out.json", "trace\x00a.mtrace\x00-o\x00out.svg\x00--threads\x00main\x00--json",
		"trace\x00--format\x00pprof\x00a.mtrace\x00-o\x00x", "trace\x00a.mtrace\x00-o\x00out.txt", "trace\x00-o\x00out.folded",
		"trace\x00a.mtrace\x00-o\x00o.pftrace\x00--min-us\x00-1", "trace\x00a.mtrace\x00--max-depth\x000\x00-o\x00o.speedscope.json",
		"report\x00a.mtrace", "report\x00--json\x00--top\x001\x00runs", "report\x00--budget-ms\x00x\x00a.mtrace", "report\x00missing.mtrace",
		"report\x00--idle\x00*\x00--no-idle\x00a.mtrace", "diff\x00a.mtrace\x00a.mtrace", "diff\x00--markdown\x00runs\x00runs",
		"diff\x00--json\x00--threshold\x00-5\x00runs\x00a.mtrace", "diff\x00a.mtrace"} {
		f.Add(s)
	}
	program := Program{Name: "msgtrace"}
	for _, c := range Tracing {
		if c.Name != "run" {
			program.Commands = append(program.Commands, c)
		}
	}
	f.Fuzz(func(t *testing.T, line string) {
		dir := t.TempDir()
		t.Chdir(dir)
		fuzzStreamFile(t, "a.mtrace", 7)
		for _, r := range []string{"1", "2"} {
			os.MkdirAll(filepath.Join("runs", r), 0o755)
			fuzzStreamFile(t, filepath.Join("runs", r, "p.mtrace"), 8)
		}
		var args []string
		if line != "" {
			args = strings.Split(strings.ReplaceAll(line, "/", "_"), "\x00")
		}
		var stdout, stderr bytes.Buffer
		code := program.Main(args, &stdout, &stderr)
		switch {
		case code < 0 || code > 3:
			t.Fatalf("%q: exit status %d", args, code)
		case code != 0 && !strings.HasPrefix(stderr.String(), "msgtrace: "):
			t.Fatalf("%q: exit status %d, stderr %q", args, code, stderr.String())
		case code == 0 && len(args) > 0 && (args[0] == "help" || args[0] == "--help" || args[len(args)-1] == "--help") && !strings.HasPrefix(stdout.String(), "usage: msgtrace"):
			t.Fatalf("%q: help printed %q", args, stdout.String())
		}
	})
}
