//go:build linux

package gccsuite

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/msgtrace/msgtrace/internal/testfiles"
)

// tarballGlob is where Debian's gcc-12-source package puts GCC's sources.
const tarballGlob = "/usr/src/gcc-12/gcc-12*.tar.xz"

// configs are the traced configurations every passing test runs in (MSGTRACE_OUT and
// MSGTRACE_KEEP_STREAM are added to each: the trace is converted at exit as by default, and
// its stream kept to be read here).
var configs = []struct {
	name string
	env  []string
}{
	{"default", nil},
	{"all", []string{"MSGTRACE_METHODS=all"}},
	{"ring", []string{"MSGTRACE_MODE=ring"}},
	// most of these programs' calls take well under a microsecond: the filter drops most of
	// them, in the interposer, and keeps the longer ones (+initialize, printf, …)
	{"min-us", []string{"MSGTRACE_MIN_US=2"}},
}

// knownBuildFailures are the tests Debian's gcc 12 cannot build here, and why.
var knownBuildFailures = map[string]string{}

// knownRunFailures are the tests that build but fail untraced here, and why: they are not run
// traced.
var knownRunFailures = map[string]string{}

// missing fails the test in the whole suite and in CI (the setup must have installed
// everything) and skips it in the fast tier (testfiles.Missing).
func missing(t *testing.T, what string) {
	t.Helper()
	testfiles.Missing(t, "GCC's Objective-C suite's "+what)
}

// tools finds gcc with its Objective-C compiler and runtime (gobjc), tar with xz, and GCC's
// source tarball (gcc-12-source).
func tools(t *testing.T) (tarball string) {
	t.Helper()
	for _, tool := range []string{"gcc", "tar", "xz"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing(t, tool)
		}
	}
	if p, err := exec.Command("gcc", "-print-prog-name=cc1obj").Output(); err != nil || !filepath.IsAbs(strings.TrimSpace(string(p))) {
		missing(t, "gcc's Objective-C compiler cc1obj (apt-get install gobjc)")
	}
	if p, err := exec.Command("gcc", "-print-file-name=libobjc.so").Output(); err != nil || !filepath.IsAbs(strings.TrimSpace(string(p))) {
		missing(t, "gcc's Objective-C runtime libobjc.so (apt-get install gobjc)")
	}
	tbs, _ := filepath.Glob(tarballGlob)
	if len(tbs) != 1 {
		missing(t, tarballGlob+" (apt-get install gcc-12-source)")
	}
	return tbs[0]
}

// unpack extracts the suite's directories of tarball into bin/gccsuite (ignored by git, removed
// by make clean), once per tarball, and returns its gcc/testsuite.
func unpack(t *testing.T, tarball string) string {
	t.Helper()
	st, err := os.Stat(tarball)
	if err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(testfiles.Root(t), "bin", "gccsuite")
	dir := filepath.Join(cache, fmt.Sprintf("%s-%d", strings.TrimSuffix(filepath.Base(tarball), ".tar.xz"), st.Size()))
	testsuite := filepath.Join(dir, "gcc", "testsuite")
	if _, err := os.Stat(filepath.Join(dir, ".unpacked")); err == nil {
		return testsuite
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		t.Fatal(err)
	}
	tmp, err := os.MkdirTemp(cache, ".unpack-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	start := time.Now()
	top := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(tarball), ".tar.xz"), "-dfsg")
	args := []string{"-xJf", tarball, "-C", tmp, "--strip-components=1", "--wildcards"}
	for _, d := range []string{"objc", "objc.dg", "objc-obj-c++-shared"} {
		args = append(args, top+"/gcc/testsuite/"+d+"/*")
	}
	if b, err := exec.Command("tar", args...).CombinedOutput(); err != nil {
		t.Fatalf("tar %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	if err := os.WriteFile(filepath.Join(tmp, ".unpacked"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// another run may have unpacked it meanwhile: either copy will do
	if err := os.Rename(tmp, dir); err != nil {
		if _, err2 := os.Stat(filepath.Join(dir, ".unpacked")); err2 != nil {
			t.Fatalf("rename %s: %v", tmp, err)
		}
	}
	t.Logf("unpacked GCC's Objective-C tests from %s in %.1f s", tarball, time.Since(start).Seconds())
	return testsuite
}

// buildLibrary builds libmsgtrace.so and the preload loader next to it into dir, as the Makefile
// does, and returns the loader.
func buildLibrary(t *testing.T, dir string) string {
	t.Helper()
	root := testfiles.Root(t)
	lib := filepath.Join(dir, "libmsgtrace.so")
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-ldflags="+testfiles.LibLDFlags, "-o", lib, "./cmd/libmsgtrace")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building libmsgtrace.so: %v\n%s", err, b)
	}
	loader := filepath.Join(dir, "libmsgtrace-preload.so")
	src := filepath.Join(root, "cmd", "libmsgtrace", "loader", "loader.c")
	if b, err := exec.Command("gcc", "-O2", "-Wall", "-shared", "-fPIC", "-o", loader, src, "-ldl").CombinedOutput(); err != nil {
		t.Fatalf("building libmsgtrace-preload.so: %v\n%s", err, b)
	}
	return loader
}

// builtTest is a test program built, or the compiler's complaint.
type builtTest struct {
	gccTest
	exe string
	err string
}

// buildAll compiles every test with gcc, jobs at a time, into dir.
func buildAll(tests []gccTest, dir string, jobs int) []builtTest {
	out := make([]builtTest, len(tests))
	var wg sync.WaitGroup
	next := make(chan int)
	for range jobs {
		wg.Go(func() {
			for i := range next {
				gt := tests[i]
				exe := filepath.Join(dir, strings.ReplaceAll(gt.name, "/", "__"))
				args := append(append(append(slices.Clone(gt.flags), "-o", exe), gt.srcs...), "-lobjc")
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				b, err := exec.CommandContext(ctx, "gcc", args...).CombinedOutput()
				cancel()
				out[i] = builtTest{gccTest: gt, exe: exe}
				if err != nil {
					out[i].err = fmt.Sprintf("gcc %s: %v\n%s", strings.Join(args, " "), err, b)
				}
			}
		})
	}
	for i := range tests {
		next <- i
	}
	close(next)
	wg.Wait()
	return out
}

// result is what a run of a program did.
type result struct {
	stdout, stderr string
	status         string // "exit 0", "exit 1", "signal: aborted", "timed out"
}

// baseEnv is the test's environment without anything of the tracer's.
func baseEnv() []string {
	return slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "MSGTRACE_") || strings.HasPrefix(kv, "LD_PRELOAD=")
	})
}

// run runs exe in dir with env; a run that takes more than a minute is killed.
func run(exe, dir string, env []string) result {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe)
	cmd.Dir, cmd.Env = dir, env
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	r := result{stdout: so.String(), stderr: se.String()}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		r.status = "timed out"
	case err == nil:
		r.status = "exit 0"
	case errors.As(err, &ee) && ee.Exited():
		r.status = fmt.Sprintf("exit %d", ee.ExitCode())
	default:
		r.status = err.Error()
	}
	return r
}

// addresses are what a program printing pointers prints (%p): different from run to run
// (and long hexadecimal constants, such as foreach-1's 0xffffffffffffffff).
var addresses = regexp.MustCompile(`0x[0-9a-fA-F]{6,}`)

// masked is a program's output with its addresses replaced.
func masked(s string) string { return addresses.ReplaceAllString(s, "0x…") }

// withoutOurLines removes the library's own lines ("msgtrace: …", its summary at exit) from a
// traced program's stderr.
func withoutOurLines(s string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(s, "\n") {
		if !strings.HasPrefix(l, "msgtrace: ") {
			b.WriteString(l)
		}
	}
	return b.String()
}

// TestGCCObjC builds GCC's Objective-C execution tests with Debian's gcc (gobjc: gcc's GNU
// runtime, everything traced through method trampolines), runs each untraced, and each that
// passes preloaded with libmsgtrace-preload.so in every configuration of configs: the same
// stdout, stderr (the library's own lines aside) and exit status, and every trace it wrote
// converted at exit and its stream well formed (treeCheck).
func TestGCCObjC(t *testing.T) {
	testfiles.Slow(t, "builds and runs GCC's Objective-C test suite")
	if runtime.GOARCH != "amd64" {
		t.Skip("Debian's gobjc is installed for the host (amd64) only")
	}
	start := time.Now()
	testsuite := unpack(t, tools(t))
	tests, err := planSuite(testsuite, hostTarget(runtime.GOARCH))
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	libStart := time.Now()
	loader := buildLibrary(t, work)
	libTime := time.Since(libStart)

	var toBuild []gccTest
	for _, gt := range tests {
		if gt.skip != "" {
			t.Logf("skipped %s: %s", gt.name, gt.skip)
			continue
		}
		toBuild = append(toBuild, gt)
	}
	bin := filepath.Join(work, "tests")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	jobs := min(2, runtime.NumCPU())
	buildStart := time.Now()
	built := buildAll(toBuild, bin, jobs)
	buildTime := time.Since(buildStart)
	var ok []builtTest
	for _, b := range built {
		why, known := knownBuildFailures[b.name]
		switch {
		case b.err == "" && known:
			t.Logf("%s builds now (listed as failing: %s)", b.name, why)
		case b.err == "":
		case known:
			t.Logf("%s does not build (known: %s)", b.name, why)
			continue
		default:
			t.Errorf("%s does not build:\n%s", b.name, b.err)
			continue
		}
		ok = append(ok, b)
	}

	var mu sync.Mutex
	passed := 0
	traced := map[string]int{}    // per configuration, runs identical to the untraced one
	withCalls := map[string]int{} // per configuration, runs that recorded calls
	calls := map[string]uint64{}
	runStart := time.Now()
	t.Run("run", func(t *testing.T) {
		for _, b := range ok {
			t.Run(b.name, func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				plain := run(b.exe, dir, baseEnv())
				// a program that prints addresses (foreach-2, -4, -5 print objects with %p)
				// prints others each run, and others again traced (the library allocates too, and
				// ASLR may be off): outputs are compared with their addresses masked; what else a
				// program prints must not change from run to run
				same := func(a, b string) bool { return masked(a) == masked(b) }
				again := run(b.exe, dir, baseEnv())
				if again.status != plain.status || !same(again.stdout, plain.stdout) || !same(again.stderr, plain.stderr) {
					t.Fatalf("two untraced runs differ beyond the addresses they print:\n%s %q %q\n%s %q %q",
						plain.status, plain.stdout, plain.stderr, again.status, again.stdout, again.stderr)
				}
				if masked(plain.stdout+plain.stderr) != plain.stdout+plain.stderr {
					t.Logf("prints hexadecimal numbers (addresses): compared with them masked")
				}
				pass := plain.status == "exit 0"
				if b.xfail != "" {
					pass = !pass
				}
				why, known := knownRunFailures[b.name]
				switch {
				case pass && known:
					t.Logf("passes now (listed as failing: %s)", why)
				case pass:
				case known:
					t.Skipf("fails untraced (known: %s): %s", why, plain.status)
				default:
					t.Fatalf("untraced: %s (xfail: %q)\nstdout:\n%s\nstderr:\n%s", plain.status, b.xfail, plain.stdout, plain.stderr)
				}
				mu.Lock()
				passed++
				mu.Unlock()
				got := map[string]uint64{} // calls each configuration recorded, when its run was good
				for _, c := range configs {
					cdir := filepath.Join(dir, c.name)
					if err := os.Mkdir(cdir, 0o755); err != nil {
						t.Fatal(err)
					}
					out := filepath.Join(cdir, "trace.json")
					env := append(baseEnv(), "LD_PRELOAD="+loader, "MSGTRACE_OUT="+out, "MSGTRACE_KEEP_STREAM=1")
					r := run(b.exe, cdir, append(env, c.env...))
					if r.status != plain.status || !same(r.stdout, plain.stdout) || !same(withoutOurLines(r.stderr), plain.stderr) {
						t.Errorf("%s: traced %s, untraced %s\ntraced stdout:\n%s\nuntraced stdout:\n%s\ntraced stderr:\n%s\nuntraced stderr:\n%s",
							c.name, r.status, plain.status, r.stdout, plain.stdout, r.stderr, plain.stderr)
						continue
					}
					streams, _ := filepath.Glob(filepath.Join(cdir, "*.mtrace"))
					var n uint64
					good := true
					for _, s := range streams {
						tc, err := checkTrace(s)
						if err != nil || len(tc.errs) > 0 {
							t.Errorf("%s: %s: %v %s", c.name, filepath.Base(s), err, strings.Join(tc.errs, "\n"))
							good = false
						}
						n += tc.calls
						conv := strings.TrimSuffix(s, ".mtrace")
						if j, err := os.ReadFile(conv); err != nil || !json.Valid(j) {
							t.Errorf("%s: %s, converted at exit: not there or not JSON (%v)", c.name, filepath.Base(conv), err)
							good = false
						}
					}
					if len(streams) == 0 {
						// a process that recorded nothing writes nothing
						if _, err := os.Stat(out); err == nil {
							t.Errorf("%s: %s written without a stream", c.name, filepath.Base(out))
							good = false
						}
					}
					if good {
						got[c.name] = n
						mu.Lock()
						traced[c.name]++
						calls[c.name] += n
						if n > 0 {
							withCalls[c.name]++
						}
						mu.Unlock()
					}
				}
				t.Logf("calls recorded: %v", got)
				// the same program sends the same messages: the ring (32 MiB) holds them all, the
				// filter keeps some of them and `all` instruments the runtime's classes too
				d, okD := got["default"]
				for name, n := range got {
					if okD && ((name == "ring" && n != d) || (name == "all" && n < d) || (name == "min-us" && n > d)) {
						t.Errorf("%d calls recorded by default, %d with %s", d, n, name)
					}
				}
			})
		}
	})
	runTime := time.Since(runStart)
	t.Logf("%d tests planned, %d skipped by their directives, %d built, %d pass untraced", len(tests), len(tests)-len(toBuild), len(ok), passed)
	for _, c := range configs {
		t.Logf("%-8s %d/%d identical traced, %d with calls recorded, %d calls in all", c.name, traced[c.name], passed, withCalls[c.name], calls[c.name])
	}
	t.Logf("wall: unpacking and planning %.1f s, library %.1f s, %d builds on %d jobs %.1f s, runs %.1f s, in all %.1f s",
		libStart.Sub(start).Seconds(), libTime.Seconds(), len(toBuild), jobs, buildTime.Seconds(), runTime.Seconds(), time.Since(start).Seconds())
}
