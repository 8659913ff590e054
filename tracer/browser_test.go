package tracer

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/msgtrace/msgtrace/internal/viewertest"
	"github.com/msgtrace/msgtrace/tracer/engine"
	"github.com/msgtrace/msgtrace/tracer/sink"
)

// TestViewersInBrowser loads outputs of traces full of touching calls (siblings that end
// at the tick the next begins, children at their parent's tick, calls of no ticks, equal-bounds
// recursion, as a 24 MHz counter makes them) into speedscope 1.25.0, served locally and driven
// in Debian's headless Chromium, through speedscope's own import path (a .speedscope.json of
// 1,000,000 calls, Chrome JSON of 40,000), and checks what a person
// sees: one profile per thread, named after it, with the thread's total; one row per method in
// the sandwich table with its self and total time. The SVG flame graph is opened in Chromium
// too, and every method must be found by its search. Screenshots of every view are kept when a
// check fails.
func TestViewersInBrowser(t *testing.T) {
	web := viewertest.Tools(t)
	dir, err := os.MkdirTemp("", "msgtrace-viewers-")
	if err != nil {
		t.Fatal(err)
	}
	keep := false
	defer func() {
		if keep || t.Failed() {
			t.Logf("outputs and screenshots kept in %s", dir)
		} else {
			os.RemoveAll(dir)
		}
	}()

	// a trace of 1,000,000 calls for speedscope's own format, one of 40,000 for the JSON (whose
	// import in speedscope is slower) and the SVG
	big := synthTrace(11, 1000000, 20000, "", "worker", "com.apple.root.default-qos")
	small := synthTrace(12, 40000, 3000, "", "worker", "com.apple.root.default-qos")
	edge := synthEdge()
	for _, o := range []struct {
		threads []synthThread
		format  string
		file    string
		opt     engine.Options
	}{
		{append(big, edge), "speedscope", "trace.speedscope.json", engine.Options{MaxDepth: -1}},
		{small, "json", "trace.json", engine.Options{MaxDepth: -1}},
		{append(small, edge), "svg", "trace.svg", engine.Options{MaxDepth: -1}},
	} {
		f, err := os.Create(filepath.Join(dir, o.file))
		if err != nil {
			t.Fatal(err)
		}
		sink, _ := NewSink(o.format, f, sink.Meta{Program: "touching"})
		if _, err = engine.Process(bytes.NewReader(writeSynth(t, o.threads)), o.opt, sink); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	// (speedscope ends a call left open in Chrome JSON at the last event of its thread, not at
	// the end of the trace, so the hang thread is checked in the .speedscope.json, which is exact)

	expect := func(threads []synthThread) ([]viewertest.Expect, map[string]bool) {
		var want []viewertest.Expect
		names := map[string]bool{}
		for _, st := range threads {
			m, total := synthExpect(st)
			want = append(want, viewertest.Expect{Name: engine.ThreadLabel(&st.th), Total: total, Methods: m})
			for n := range m {
				names[n] = true
			}
		}
		return want, names
	}
	want, _ := expect(big)
	wantSmall, names := expect(small)
	// the hang thread as its .speedscope.json shows it (see SpeedscopeSink): the open calls'
	// self time is on "[running]": -[Worker fib:]'s, and -[App run]'s before and between its
	// children
	n := ns
	hang := viewertest.Expect{Name: "hang", Total: (n(100) - n(10)) + (n(400) - n(100)), Methods: map[string]viewertest.Times{
		"-[Worker step]": {Self: n(40) - n(20), Total: n(40) - n(20)},
		"-[Cell value]":  {Self: n(130) - n(110), Total: n(130) - n(110)},
		"-[Worker fib:]": {Self: 0, Total: n(400) - n(150)},
		"[running]": {Self: n(400) - n(150) + n(110) - n(100) + n(150) - n(130),
			Total: n(400) - n(150) + n(110) - n(100) + n(150) - n(130)},
		"[unwound]": {},
		"[lost 5]":  {},
	}}
	hang.Methods["-[App run]"] = viewertest.Times{Self: (n(100) - n(10)) - (n(40) - n(20)), Total: hang.Total}
	var sorted []string
	for k := range names {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)

	res := viewertest.Run(t, web, dir, []viewertest.Case{
		{File: "trace.speedscope.json", Viewer: "speedscope", TimeoutMs: 300000},
		{File: "trace.json", Viewer: "speedscope"},
		{File: "trace.svg", Viewer: "svg", Names: append(sorted, "[running]", "[unwound]")},
	})
	ss := res["trace.speedscope.json"]
	t.Logf("speedscope opened trace.speedscope.json in %d ms, trace.json in %d ms, the SVG in %d ms", ss.LoadMs, res["trace.json"].LoadMs, res["trace.svg"].LoadMs)
	ok := viewertest.Check(t, ss, append(want, hang), func(e viewertest.Expect) string {
		if e.Name == "main" {
			return "main (tid 1000)"
		}
		return e.Name
	})
	ok = viewertest.Check(t, res["trace.json"], wantSmall, func(e viewertest.Expect) string {
		tid := map[string]int{"main": 1000, "worker": 1001, "com.apple.root.default-qos": 1002}[e.Name]
		return fmt.Sprintf("touching (pid 777), %s (tid %d)", e.Name, tid)
	}) && ok
	sv := res["trace.svg"]
	if sv.Error != "" || len(sv.Found) != len(sorted)+2 || sv.Zoom < 1179 {
		t.Errorf("svg: %+v", sv)
		ok = false
	}
	for i, c := range sv.Found {
		if c == 0 {
			t.Errorf("svg: search finds no %q", append(sorted, "[running]", "[unwound]")[i])
			ok = false
		}
	}
	keep = !ok
}
