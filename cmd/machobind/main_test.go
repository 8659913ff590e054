package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/msgtrace/msgtrace/internal/testfiles"
	"github.com/msgtrace/msgtrace/machobind"
	"github.com/msgtrace/msgtrace/tracer"
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
	w := tracer.NewWriter(f, tracer.Header{PID: 7, TickNum: 1, TickDen: 1})
	w.WriteNames([]tracer.NameEntry{{Key: 0x10, Kind: tracer.NameClass, Name: "View"}, {Key: 0x20, Kind: tracer.NameSelector, Name: "layout"}})
	w.WriteThread(tracer.Thread{TID: 1, Main: true}, []tracer.Record{{Start: 10, End: 5010, Class: 0x10, Sel: 0x20}})
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
		if format != "pprof" && !strings.Contains(string(b), "-[View layout]") {
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
		{[]string{"trace", raw, "-o", filepath.Join(dir, "x"), "--format", "xml"}, 2, "unknown format"},
		{[]string{"trace", raw, "-o", filepath.Join(dir, "x"), "--include", "View"}, 2, "names no method"},
		{[]string{"trace", raw, "-o", filepath.Join(dir, "x"), "--min-us", "-1"}, 2, "negative"},
		{[]string{"trace", garbage, "-o", filepath.Join(dir, "x")}, 1, "byte offset"},
		{[]string{"trace", raw, "-o", filepath.Join(dir, "no", "such", "dir", "x")}, 1, "no such file"},
	} {
		code, _, stderr := runCLI(c.args...)
		if code != c.code || !strings.Contains(stderr, c.err) {
			t.Errorf("machobind %v: exit %d, stderr %q; want %d and %q", c.args, code, stderr, c.code, c.err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "x")); err == nil {
		t.Error("a failed conversion left its output behind")
	}
}
