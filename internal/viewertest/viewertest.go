// Package viewertest loads trace files into the real viewers (speedscope 1.25.0 served locally,
// an SVG flame graph) in Debian's headless Chromium through web/viewers.mjs, and checks what a
// person sees. Used by the browser tests of the tracer and of the library on real programs.
package viewertest

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/msgtrace/msgtrace/internal/testfiles"
)

// Tools finds Chromium, node and the pinned viewers (scripts/setup.sh installs them). The
// browser tests are in the whole suite only (testfiles.Slow); a missing tool fails the test
// there (testfiles.Missing).
func Tools(t testing.TB) string {
	testfiles.Slow(t, "drives headless Chromium")
	web := filepath.Join(testfiles.Root(t), "web")
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
		testfiles.Missing(t, "the browser test's "+strings.Join(missing, ", "))
	}
	return web
}

// Case is one file for web/viewers.mjs.
type Case struct {
	File      string   `json:"file"`
	Viewer    string   `json:"viewer"`
	Names     []string `json:"names,omitempty"`
	TimeoutMs int      `json:"timeoutMs,omitempty"`
}

// Result is what web/viewers.mjs saw: per profile its name, total and sandwich rows (speedscope),
// or how many matches the SVG's search found for each name.
type Result struct {
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

// Run writes the cases and runs web/viewers.mjs on dir; results by file name.
func Run(t testing.TB, web, dir string, cases []Case) map[string]Result {
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
	var rs []Result
	if err := json.Unmarshal(out, &rs); err != nil {
		t.Fatalf("viewers.mjs output: %v\n%s", err, out)
	}
	m := map[string]Result{}
	for _, r := range rs {
		m[r.File] = r
	}
	return m
}

var shownTime = regexp.MustCompile(`^([0-9.,]+)(ns|µs|ms|s|min)?$`)

// ParseShown reads a time as speedscope shows it ("31.84µs", "1.20ms") into ns, with the
// rounding its two decimals allow.
func ParseShown(s string) (v, tol float64, ok bool) {
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

// ShownIs reports whether a time speedscope shows is want nanoseconds, within its rounding.
func ShownIs(s string, want uint64) bool {
	v, tol, ok := ParseShown(s)
	return ok && math.Abs(v-float64(want)) <= tol+1e-9*float64(want)
}

// Times are what speedscope's sandwich view shows for a method on a thread: self time, and
// total time without double counting recursion (time under at least one call of it), in ns.
type Times struct{ Self, Total uint64 }

// Expect is what a thread must look like in speedscope's sandwich view.
type Expect struct {
	Name    string
	Total   uint64
	Methods map[string]Times
}

// Check compares one file speedscope loaded with the expectations, thread by thread (in
// order); nameOf gives the profile name speedscope must show for each. It reports whether all
// matched, each mismatch as a test error.
func Check(t testing.TB, r Result, want []Expect, nameOf func(Expect) string) bool {
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
		if !ShownIs(p.Total, w.Total) {
			fail("%s: total %s, want %.3f µs", p.Name, p.Total, float64(w.Total)/1e3)
		}
		seen := map[string]bool{}
		for _, row := range p.Rows {
			if seen[row.Name] {
				fail("%s: two rows for %q", p.Name, row.Name)
			}
			seen[row.Name] = true
			m, found := w.Methods[row.Name]
			if !found {
				fail("%s: unexpected row %q (%s, %s)", p.Name, row.Name, row.Total, row.Self)
				continue
			}
			if !ShownIs(row.Self, m.Self) || !ShownIs(row.Total, m.Total) {
				fail("%s: %s total %s self %s, want %.3f µs and %.3f µs", p.Name, row.Name, row.Total, row.Self,
					float64(m.Total)/1e3, float64(m.Self)/1e3)
			}
		}
		for name := range w.Methods {
			if !seen[name] {
				fail("%s: no row for %q", p.Name, name)
			}
		}
	}
	return ok
}
