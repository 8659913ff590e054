package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/msgtrace/msgtrace/internal/testfiles"
	"github.com/msgtrace/msgtrace/machobind"
	"github.com/msgtrace/msgtrace/tracer"
	"github.com/msgtrace/msgtrace/tracer/stream"
)

func runCLI(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func fixture(t *testing.T, name string) string {
	p := filepath.Join(testfiles.Root(t), "testdata", "fixtures", name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%v: run `make fixtures`", err)
	}
	return p
}

func TestExitCodes(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage")
	os.WriteFile(garbage, []byte("not a Mach-O file at all"), 0o644)
	exe := fixture(t, "objc-macos-arm64-exe-chained")
	for _, c := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"dump", exe}, 0, ""},
		{[]string{"dump", "--json", exe}, 0, ""},
		{[]string{"dump", exe, "--arch", "arm64"}, 0, ""},
		{[]string{}, 2, "no command"},
		{[]string{"frobnicate"}, 2, "unknown command"},
		{[]string{"dump"}, 2, "one FILE"},
		{[]string{"dump", "--bogus", exe}, 2, "bogus"},
		{[]string{"dump", exe, exe}, 2, "one FILE"},
		{[]string{"dump", filepath.Join(dir, "missing")}, 1, "no such file"},
		{[]string{"dump", garbage}, 1, "not a Mach-O"},
		{[]string{"dump", dir}, 1, "not a regular file"},
		{[]string{"dump", "--arch", "ppc", exe}, 1, "no ppc slice"},
	} {
		code, _, stderr := runCLI(c.args...)
		if code != c.code || !strings.Contains(stderr, c.err) {
			t.Errorf("machobind %v: exit %d, stderr %q; want %d and %q", c.args, code, stderr, c.code, c.err)
		}
		if code == 1 && strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("machobind %v: error is not one line: %q", c.args, stderr)
		}
	}
}

// TestDumpSymbolJSON checks the documented JSON keys and that --symbol lists exactly the
// named symbol's slots.
func TestDumpSymbolJSON(t *testing.T) {
	file := fixture(t, "objc-macos-universal-exe-chained")
	code, out, stderr := runCLI("dump", "--json", "--symbol", "objc_msgSend", file)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var raw map[string]any
	if err := json.Unmarshal([]byte(out), &raw); err != nil {
		t.Fatal(err)
	}
	var d machobind.Dump
	json.Unmarshal([]byte(out), &d)
	if !d.Fat || len(d.Slices) != 2 || raw["file"] != file {
		t.Fatalf("dump: fat=%v slices=%d file=%v", d.Fat, len(d.Slices), raw["file"])
	}
	for _, s := range d.Slices {
		if s.Fixups != "chained" || s.Filetype != "execute" || len(s.Dylibs) == 0 {
			t.Errorf("%s: fixups %q filetype %q dylibs %d", s.Arch, s.Fixups, s.Filetype, len(s.Dylibs))
		}
		if len(s.Pointers) == 0 {
			t.Errorf("%s: no _objc_msgSend slot", s.Arch)
		}
		for _, p := range s.Pointers {
			if p.Symbol != "_objc_msgSend" || p.Library != "/usr/lib/libobjc.A.dylib" || p.Kind != "non-lazy" ||
				!strings.HasPrefix(p.Address, "0x") || p.Section != "__DATA_CONST,__got" {
				t.Errorf("%s: unexpected pointer %+v", s.Arch, p)
			}
		}
	}
	slice := raw["slices"].([]any)[0].(map[string]any)
	for _, k := range []string{"arch", "filetype", "fixups", "dylibs", "pointers", "segments"} {
		if _, ok := slice[k]; !ok {
			t.Errorf("JSON slice lacks %q", k)
		}
	}
}

// writeRaw writes a small raw trace for the trace command's tests.
func writeRaw(t *testing.T, dir string) string {
	p := filepath.Join(dir, "t.raw")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	w := stream.NewWriter(f, stream.Header{PID: 7, TickNum: 1, TickDen: 1})
	w.WriteNames([]stream.NameEntry{{Key: 0x10, Kind: stream.NameClass, Name: "View"}, {Key: 0x20, Kind: stream.NameSelector, Name: "layout"}})
	w.WriteThread(stream.Thread{TID: 1, Main: true}, []stream.Record{{Start: 10, End: 5010, Class: 0x10, Sel: 0x20}})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return p
}

func TestTraceCommand(t *testing.T) {
	dir := t.TempDir()
	raw := writeRaw(t, dir)
	for _, format := range tracer.Formats {
		out := filepath.Join(dir, "out."+format)
		if code, _, stderr := runCLI("trace", raw, "-o", out, "--format", format, "--include", "-[View *]"); code != 0 {
			t.Fatalf("%s: exit %d: %s", format, code, stderr)
		}
		b, _ := os.ReadFile(out)
		compressed := format == "pprof" || format == "perfetto" // gzip; zlib'd packets
		if !compressed && !strings.Contains(string(b), "-[View layout]") {
			t.Errorf("%s output lacks the call:\n%s", format, b)
		}
		// the same format from the extension alone
		byExt := filepath.Join(dir, "out"+tracer.Extension(format))
		if code, _, stderr := runCLI("trace", raw, "-o", byExt); code != 0 {
			t.Fatalf("%s: exit %d: %s", byExt, code, stderr)
		}
		if b2, _ := os.ReadFile(byExt); format != "pprof" && !bytes.Equal(b, b2) {
			t.Errorf("%s differs from --format %s", byExt, format)
		}
	}
	garbage := filepath.Join(dir, "garbage.raw")
	os.WriteFile(garbage, []byte("MSGTRACE\x01\x00\x00\x00"), 0o644)
	for _, c := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"trace", raw}, 2, "-o"},
		{[]string{"trace", raw, "-o", filepath.Join(dir, "x.json"), "--format", "xml"}, 2, "unknown format"},
		{[]string{"trace", raw, "-o", filepath.Join(dir, "x.json"), "--include", "View"}, 2, "names no method"},
		{[]string{"trace", raw, "-o", filepath.Join(dir, "x.json"), "--min-us", "-1"}, 2, "negative"},
		{[]string{"trace", garbage, "-o", filepath.Join(dir, "x.json")}, 1, "byte offset"},
		{[]string{"trace", raw, "-o", filepath.Join(dir, "no", "such", "dir", "x.json")}, 1, "no such file"},
		// names no format owns, or another format's
		{[]string{"trace", raw, "-o", filepath.Join(dir, "x")}, 2, "no output format has this extension"},
		{[]string{"trace", raw, "-o", filepath.Join(dir, "x.txt")}, 2, "no output format has this extension"},
		{[]string{"trace", raw, "-o", filepath.Join(dir, "x.mtrace")}, 2, "stream format"},
		{[]string{"trace", raw, "-o", filepath.Join(dir, "x.mtrace"), "--format", "json"}, 2, "stream format"},
		{[]string{"trace", raw, "-o", filepath.Join(dir, "x.svg"), "--format", "json"}, 2, "names the svg format"},
	} {
		code, _, stderr := runCLI(c.args...)
		if code != c.code || !strings.Contains(stderr, c.err) {
			t.Errorf("machobind %v: exit %d, stderr %q; want %d and %q", c.args, code, stderr, c.code, c.err)
		}
	}
	for _, x := range []string{"x", "x.json", "x.txt", "x.mtrace", "x.svg"} {
		if _, err := os.Stat(filepath.Join(dir, x)); err == nil {
			t.Errorf("a failed conversion left %s behind", x)
		}
	}
}

// TestDump32BitAndUnsupported: the text output of an i386 executable lists its jump-table
// slots with 4-byte pointers; Go's universal i386 + x86_64 executable prints both slices.
func TestDump32BitAndUnsupported(t *testing.T) {
	var exe, fat string
	for _, f := range testfiles.GoDebugMachO(t) {
		switch filepath.Base(f) {
		case "gcc-386-darwin-exec":
			exe = f
		case "fat-gcc-386-amd64-darwin-exec":
			fat = f
		}
	}
	code, out, stderr := runCLI("dump", exe)
	if code != 0 || !strings.Contains(out, "4-byte pointers") || !strings.Contains(out, "__IMPORT,__jump_table") ||
		!strings.Contains(out, "fixups: relocations") {
		t.Errorf("dump %s: exit %d, stderr %q, output:\n%s", exe, code, stderr, out)
	}
	code, out, stderr = runCLI("dump", fat)
	if code != 0 || !strings.Contains(out, "slice i386") || !strings.Contains(out, "slice x86_64") || strings.Count(out, "pointers: 2") != 2 {
		t.Errorf("dump %s: exit %d, stderr %q, output:\n%s", fat, code, stderr, out)
	}
}

// writeStream writes a stream of one process with one call on its main thread, cut short of
// its end frame when killed.
func writeStream(t *testing.T, path string, pid uint64, program string, mono uint64, killed bool) {
	var b bytes.Buffer
	w := stream.NewStreamWriter(&b)
	w.Process(stream.StreamProcess{PID: pid, Name: program})
	w.Clock(stream.ClockSample{Tick: 0, MonoNanos: mono, RateNum: 1, RateDen: 1})
	w.Methods(stream.StreamMethod{ID: 1, Class: "View", Selector: "layout"})
	w.Thread(stream.StreamThread{TID: pid + 1, Flags: stream.ThreadMain})
	w.Events(pid+1, 0, []stream.StreamEvent{{ID: 1, Start: 10, End: 5010}})
	if killed {
		w.Open(pid+1, 6000, []stream.OpenCall{{ID: 1, Start: 5500}})
		w.Clock(stream.ClockSample{Tick: 9000, MonoNanos: mono + 9000, RateNum: 1, RateDen: 1})
		b.WriteString("MTSF\x05") // a frame cut short
	} else {
		w.End(stream.StreamCounters{Calls: 1})
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestTraceStreams: several streams (one per process) merge into one Chrome trace with a
// process track each; a killed process's running call is shown open and its torn tail
// reported; raw dumps do not merge.
func TestTraceStreams(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "trace-100.mtrace"), filepath.Join(dir, "trace-200.mtrace")
	writeStream(t, a, 100, "parent", 1_000_000, false)
	writeStream(t, b, 200, "child", 1_002_000, true)
	out := filepath.Join(dir, "out.json")
	code, _, stderr := runCLI("trace", a, b, "-o", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stderr, "5 bytes of incomplete frames") || !strings.Contains(stderr, "1 of 2 streams did not end cleanly") || !strings.Contains(stderr, "1 calls still running") {
		t.Errorf("stderr: %s", stderr)
	}
	var f struct {
		TraceEvents []struct {
			Ph, Name string
			Ts       float64
			Pid, Tid uint64
			Args     map[string]any
		}
	}
	raw, _ := os.ReadFile(out)
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatalf("%v\n%s", err, raw)
	}
	got := map[string]bool{}
	begins := map[[2]uint64][]float64{} // open begins per thread: calls are B/E pairs
	for _, e := range f.TraceEvents {
		k := [2]uint64{e.Pid, e.Tid}
		switch e.Ph {
		case "M":
			if e.Name == "process_name" {
				got[fmt.Sprintf("%d=%s", e.Pid, e.Args["name"])] = true
			}
		case "B":
			begins[k] = append(begins[k], e.Ts)
		case "E":
			st := begins[k]
			got[fmt.Sprintf("%d %s %.3f %.3f", e.Pid, e.Name, st[len(st)-1], e.Ts-st[len(st)-1])] = true
			begins[k] = st[:len(st)-1]
		}
	}
	for k, st := range begins { // calls still running: a begin with no end
		for _, ts := range st {
			got[fmt.Sprintf("%d open %.3f", k[0], ts)] = true
		}
	}
	for _, w := range []string{"100=parent", "200=child", "100 -[View layout] 0.000 5.000", "200 -[View layout] 2.000 5.000", "200 open 7.490"} {
		if !got[w] {
			t.Errorf("no %q in %v", w, got)
		}
	}
	if code, _, stderr := runCLI("trace", a, writeRaw(t, dir), "-o", out); code != 2 || !strings.Contains(stderr, "merge") {
		t.Errorf("raw with a stream: exit %d: %s", code, stderr)
	}
}

// TestTraceMaxCalls: a timeline with a budget keeps the longest calls, says what it folded and
// how to keep everything; aggregates keep every call; a bad budget is bad usage.
func TestTraceMaxCalls(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "loop.mtrace")
	var b bytes.Buffer
	w := stream.NewStreamWriter(&b)
	w.Process(stream.StreamProcess{PID: 5, Name: "loop"})
	w.Clock(stream.ClockSample{Tick: 0, MonoNanos: 1e9, RateNum: 1, RateDen: 1})
	w.Methods(stream.StreamMethod{ID: 1, Class: "App", Selector: "run"}, stream.StreamMethod{ID: 2, Class: "App", Selector: "tick:"})
	w.Thread(stream.StreamThread{TID: 6, Flags: stream.ThreadMain})
	var evs []stream.StreamEvent
	for i := uint64(0); i < 100; i++ { // tick i lasts i+1 ns
		start := 10 + i*200
		evs = append(evs, stream.StreamEvent{ID: 2, Start: start, End: start + i + 1, Depth: 1})
	}
	evs = append(evs, stream.StreamEvent{ID: 1, Start: 5, End: 30000})
	w.Events(6, 0, evs)
	w.End(stream.StreamCounters{Calls: 101})
	if err := os.WriteFile(in, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "t.json")
	code, _, stderr := runCLI("trace", in, "-o", out, "--max-calls", "20")
	if code != 0 || !strings.Contains(stderr, "keeps the 18 longest calls (budget 20): 83 calls shorter than 0.084 µs are folded") || !strings.Contains(stderr, "--max-calls all") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	raw, _ := os.ReadFile(out)
	var f struct {
		TraceEvents []struct{ Ph, Name string }
		OtherData   map[string]float64
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	ends := 0
	for _, e := range f.TraceEvents {
		if e.Ph == "E" {
			ends++
		}
	}
	if ends != 18 || f.OtherData["folded_calls"] != 83 || f.OtherData["timeline_kept"] != 18 {
		t.Errorf("%d calls kept, otherData %v", ends, f.OtherData)
	}
	if code, _, stderr := runCLI("trace", in, "-o", filepath.Join(dir, "t.folded"), "--max-calls", "20"); code != 0 || strings.Contains(stderr, "folded into") {
		t.Errorf("folded stacks keep every call: exit %d: %s", code, stderr)
	}
	if code, _, stderr := runCLI("trace", in, "-o", out, "--max-calls", "all"); code != 0 || strings.Contains(stderr, "folded into") {
		t.Errorf("all: exit %d: %s", code, stderr)
	}
	if code, _, stderr := runCLI("trace", in, "-o", out, "--max-calls", "0"); code != 2 || !strings.Contains(stderr, "--max-calls") {
		t.Errorf("0: exit %d: %s", code, stderr)
	}
}
