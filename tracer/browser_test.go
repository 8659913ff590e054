package tracer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// browserTools finds Chromium, node and the pinned viewers (scripts/setup.sh installs them);
// outside CI the test is skipped, with the reason, when one is missing.
func browserTools(t *testing.T) string {
	web, _ := filepath.Abs("../web")
	var missing []string
	if _, err := os.Stat("/usr/bin/chromium"); err != nil && os.Getenv("CHROMIUM") == "" {
		missing = append(missing, "/usr/bin/chromium (apt-get install chromium)")
	}
	if _, err := exec.LookPath("node"); err != nil {
		missing = append(missing, "node")
	}
	for _, m := range []string{"speedscope", "playwright-core"} {
		if _, err := os.Stat(filepath.Join(web, "node_modules", m, "package.json")); err != nil {
			missing = append(missing, "web/node_modules/"+m+" (npm ci in web/, as scripts/setup.sh does)")
		}
	}
	if len(missing) > 0 {
		msg := "browser test needs " + strings.Join(missing, ", ") + ": run scripts/setup.sh"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return web
}

// viewerCase is one file for web/viewers.mjs.
type viewerCase struct {
	File      string   `json:"file"`
	Viewer    string   `json:"viewer"`
	Names     []string `json:"names,omitempty"`
	TimeoutMs int      `json:"timeoutMs,omitempty"`
}

// viewerResult is what web/viewers.mjs saw.
type viewerResult struct {
	File     string
	Error    string
	LoadMs   int
	Profiles []struct {
		Name, Total string
		Rows        []struct{ Name, Total, Self string }
	}
	Warnings []string
	Found    []int
	Zoom     float64
}

// runViewers writes the cases and runs web/viewers.mjs on dir.
func runViewers(t *testing.T, web, dir string, cases []viewerCase) map[string]viewerResult {
	b, _ := json.Marshal(cases)
	if err := os.WriteFile(filepath.Join(dir, "cases.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", filepath.Join(web, "viewers.mjs"), dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("viewers.mjs: %v\n%s", err, stderr.String())
	}
	var rs []viewerResult
	if err := json.Unmarshal(out, &rs); err != nil {
		t.Fatalf("viewers.mjs output: %v\n%s", err, out)
	}
	m := map[string]viewerResult{}
	for _, r := range rs {
		m[r.File] = r
	}
	return m
}

var shownTime = regexp.MustCompile(`^([0-9.,]+)(ns|µs|ms|s|min)?$`)

// parseShown reads a time as speedscope shows it ("31.84µs", "1.20ms") into ns, with the
// rounding its two decimals allow.
func parseShown(s string) (v, tol float64, ok bool) {
	m := shownTime.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, 0, false
	}
	f, err := strconv.ParseFloat(strings.ReplaceAll(m[1], ",", ""), 64)
	if err != nil {
		return 0, 0, false
	}
	scale := map[string]float64{"": 1, "ns": 1, "µs": 1e3, "ms": 1e6, "s": 1e9, "min": 60e9}[m[2]]
	return f * scale, 0.0051 * scale, true
}

func shownIs(s string, want uint64) bool {
	v, tol, ok := parseShown(s)
	return ok && math.Abs(v-float64(want)) <= tol+1e-9*float64(want)
}

// browserExpect is what a thread must look like in speedscope's sandwich view.
type browserExpect struct {
	name    string
	total   uint64
	methods map[string]methodTimes
}

// checkSpeedscope compares one loaded file with the expectations, thread by thread.
func checkSpeedscope(t *testing.T, r viewerResult, want []browserExpect, nameOf func(browserExpect) string) bool {
	t.Helper()
	ok := true
	fail := func(f string, a ...any) { t.Errorf(r.File+": "+f, a...); ok = false }
	if r.Error != "" {
		fail("%s", r.Error)
		return false
	}
	if len(r.Profiles) != len(want) {
		fail("%d profiles, want one per thread: %d", len(r.Profiles), len(want))
		return false
	}
	for i, w := range want {
		p := r.Profiles[i]
		if p.Name != nameOf(w) {
			fail("profile %d is %q, want %q", i, p.Name, nameOf(w))
		}
		if !shownIs(p.Total, w.total) {
			fail("%s: total %s, want %.3f µs", p.Name, p.Total, float64(w.total)/1e3)
		}
		seen := map[string]bool{}
		for _, row := range p.Rows {
			if seen[row.Name] {
				fail("%s: two rows for %q", p.Name, row.Name)
			}
			seen[row.Name] = true
			m, found := w.methods[row.Name]
			if !found {
				fail("%s: unexpected row %q (%s, %s)", p.Name, row.Name, row.Total, row.Self)
				continue
			}
			if !shownIs(row.Self, m.Self) || !shownIs(row.Total, m.Total) {
				fail("%s: %s total %s self %s, want %.3f µs and %.3f µs", p.Name, row.Name, row.Total, row.Self,
					float64(m.Total)/1e3, float64(m.Self)/1e3)
			}
		}
		for name := range w.methods {
			if !seen[name] {
				fail("%s: no row for %q", p.Name, name)
			}
		}
	}
	return ok
}

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
	web := browserTools(t)
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
		opt     Options
	}{
		{append(big, edge), "speedscope", "trace.speedscope.json", Options{MaxDepth: -1}},
		{small, "json", "trace.json", Options{MaxDepth: -1}},
		{append(small, edge), "svg", "trace.svg", Options{MaxDepth: -1}},
	} {
		f, err := os.Create(filepath.Join(dir, o.file))
		if err != nil {
			t.Fatal(err)
		}
		sink, _ := NewSink(o.format, f, Meta{Program: "touching"})
		if _, err = Process(bytes.NewReader(writeSynth(t, o.threads)), o.opt, sink); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	// (speedscope ends a call left open in Chrome JSON at the last event of its thread, not at
	// the end of the trace, so the hang thread is checked in the .speedscope.json, which is exact)

	expect := func(threads []synthThread) ([]browserExpect, map[string]bool) {
		var want []browserExpect
		names := map[string]bool{}
		for _, st := range threads {
			m, total := synthExpect(st)
			want = append(want, browserExpect{threadLabel(&st.th), total, m})
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
	hang := browserExpect{"hang", (n(100) - n(10)) + (n(400) - n(100)), map[string]methodTimes{
		"-[Worker step]": {Self: n(40) - n(20), Total: n(40) - n(20)},
		"-[Cell value]":  {Self: n(130) - n(110), Total: n(130) - n(110)},
		"-[Worker fib:]": {Self: 0, Total: n(400) - n(150)},
		"[running]": {Self: n(400) - n(150) + n(110) - n(100) + n(150) - n(130),
			Total: n(400) - n(150) + n(110) - n(100) + n(150) - n(130)},
		"[unwound]": {},
		"[lost 5]":  {},
	}}
	hang.methods["-[App run]"] = methodTimes{Self: (n(100) - n(10)) - (n(40) - n(20)), Total: hang.total}
	var sorted []string
	for k := range names {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)

	res := runViewers(t, web, dir, []viewerCase{
		{File: "trace.speedscope.json", Viewer: "speedscope", TimeoutMs: 300000},
		{File: "trace.json", Viewer: "speedscope"},
		{File: "trace.svg", Viewer: "svg", Names: append(sorted, "[running]", "[unwound]")},
	})
	ss := res["trace.speedscope.json"]
	t.Logf("speedscope opened trace.speedscope.json in %d ms, trace.json in %d ms, the SVG in %d ms", ss.LoadMs, res["trace.json"].LoadMs, res["trace.svg"].LoadMs)
	ok := checkSpeedscope(t, ss, append(want, hang), func(e browserExpect) string {
		if e.name == "main" {
			return "main (tid 1000)"
		}
		return e.name
	})
	ok = checkSpeedscope(t, res["trace.json"], wantSmall, func(e browserExpect) string {
		tid := map[string]int{"main": 1000, "worker": 1001, "com.apple.root.default-qos": 1002}[e.name]
		return fmt.Sprintf("touching (pid 777), %s (tid %d)", e.name, tid)
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
