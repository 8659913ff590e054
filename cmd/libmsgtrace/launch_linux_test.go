//go:build linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/msgtrace/msgtrace/internal/testfiles"
)

// launchKit skips where Debian's GNUstep is not installed, and builds the library and the
// preload loader into a directory of the test's: the launch tests' programs go there too (src
// names their sources).
func launchKit(t *testing.T) (g gnustep, lib, loader string, src func(name string) string) {
	t.Helper()
	if runtime.GOARCH != "amd64" {
		t.Skip("Debian's GNUstep is installed for the host (amd64) only")
	}
	testfiles.NeedTools(t, "gnustep-config")
	root := testfiles.Root(t)
	src = func(name string) string { return filepath.Join(root, "testdata", "gnustep", name) }
	g = gnustep{dir: t.TempDir()}
	lib = filepath.Join(g.dir, "libmsgtrace.so")
	loader = filepath.Join(g.dir, "libmsgtrace-preload.so")
	buildLib(t, "c-shared", lib, "amd64", "gcc")
	buildLoader(t, "gcc", loader)
	return g, lib, loader, src
}

// TestGNUstepLaunch traces what a gcc + gnustep-base program does before main
// (testdata/gnustep/launch.m): +load methods and what they send (the runtime sends them while
// it registers the program's module, its lock held), a C constructor sending messages, a slow
// +initialize, a +load that dlopens an object whose constructor sends messages, a +load that
// makes more calls than a small chunk pool holds, and +load methods of a plugin dlopened and
// of an NSBundle loaded at run time. Preloaded both ways (the preload loader, and libmsgtrace.so
// itself), with the default selection and with MSGTRACE_METHODS=all: each call traced once,
// under its caller, the program's output that of its untraced run.
func TestGNUstepLaunch(t *testing.T) {
	testfiles.Slow(t, "builds and runs GNUstep programs")
	g, lib, loader, src := launchKit(t)
	gcc := func(out string, args ...string) {
		t.Helper()
		mustGNUstepCC(t, g.dir, out, args...)
	}
	// launchctor.c last: its constructor runs after the program's module registered
	gcc("launch", src("launch.m"), src("launchctor.c"))
	gcc("launchplugin.so", "-shared", "-fPIC", src("launchplugin.m"))
	gcc("launchctor.so", "-shared", "-fPIC", src("launchctor.c")) // dlopened by +[Loader load]
	bundle := filepath.Join(g.dir, "LBundle.bundle")
	if err := os.MkdirAll(filepath.Join(bundle, "Resources"), 0o755); err != nil {
		t.Fatal(err)
	}
	gcc(filepath.Join(bundle, "LBundle"), "-shared", "-fPIC", src("launchbundle.m"))
	if err := os.WriteFile(filepath.Join(bundle, "Resources", "Info-gnustep.plist"),
		[]byte("{\n    NSExecutable = LBundle;\n    NSPrincipalClass = LBundle;\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	app := filepath.Join(g.dir, "launch")

	// run runs the program untraced, then traced with the preload and selection given, and
	// returns the trace and the traced run's stderr
	run := func(t *testing.T, preload, methods string, env map[string]string, args ...string) (trace, string) {
		t.Helper()
		untraced := map[string]string{}
		for k, v := range env {
			untraced[k] = v
		}
		want, se, err := g.runEnv(t, untraced, app, args...)
		if err != nil {
			t.Fatalf("launch %v: %v\n%s", args, err, se)
		}
		out := filepath.Join(g.dir, fmt.Sprintf("%s-%s-%s.json", filepath.Base(preload), methods, strings.Join(append([]string{"main"}, args[:min(1, len(args))]...), "-")))
		traced := map[string]string{"LD_PRELOAD": preload, "MSGTRACE_OUT": out}
		if methods != "" {
			traced["MSGTRACE_METHODS"] = methods
		}
		for k, v := range env {
			traced[k] = v
		}
		so, se, err := g.runEnv(t, traced, app, args...)
		if err != nil || so != want {
			t.Fatalf("traced: %v\nstdout %q, want %q\nstderr:\n%s", err, so, want, se)
		}
		return readTrace(t, out), se
	}

	for _, preload := range []string{loader, lib} {
		for _, methods := range []string{"", "all"} {
			name := filepath.Base(preload) + "/" + map[string]string{"": "default", "all": "all"}[methods]
			for _, mode := range [][]string{nil, {"plugin", filepath.Join(g.dir, "launchplugin.so")}, {"bundle", bundle}} {
				t.Run(strings.Join(append([]string{name}, mode[:min(1, len(mode))]...), "/"), func(t *testing.T) {
					tr, se := run(t, preload, methods, map[string]string{"LAUNCH_PLUGIN": filepath.Join(g.dir, "launchctor.so"), "MSGTRACE_VERBOSE": "1"}, mode...)
					// the preload loader started the library on its own thread from gnustep-base's
					// first module, before its constructor: what follows holds for that start too
					if early := strings.Contains(se, "prepared on the preload loader's thread"); early != (preload == loader) {
						t.Errorf("prepared early: %v, want %v\nstderr:\n%s", early, preload == loader, se)
					}
					want := map[string]int{
						"+[Early load] > +[Early warm]":                      1, // before main
						"+[Filler load]":                                     1,
						"+[Loader load] > +[Early ctorWork] > +[Early warm]": 1, // launchctor.so's constructor, inside dlopen in +load
						"+[Loader load] > +[Loader found:]":                  1,
						"+[Early ctorWork] > +[Early warm]":                  1, // the program's C constructor
						"+[Early warm]":                                      1, // main
						"+[Slow initialize] > +[Slow warm]":                  1, // inside the runtime's lookup
						"+[Slow warm]":                                       1, // main, once initialized
					}
					for p, n := range want {
						if got := len(tr.find("main", p)); got != n {
							t.Errorf("%d %s, want %d", got, p, n)
						}
					}
					// each of the program's methods as often as it ran, none more
					count := map[string]int{"+[Early load]": 1, "+[Early warm]": 4, "+[Early ctorWork]": 2, "+[Filler load]": 1,
						"+[Loader load]": 1, "+[Loader found:]": 1, "+[Slow initialize]": 1, "+[Slow warm]": 2}
					var plugin string
					if len(mode) > 0 {
						plugin = map[string]string{"plugin": "LPlugin", "bundle": "LBundle"}[mode[0]]
						count["+["+plugin+" load]"], count["+["+plugin+" warm]"], count["-["+plugin+" answer]"] = 1, 1, 1
						// its +load runs as its module registers, inside dlopen (the bundle's:
						// inside -[NSBundle load], traced with `all`)
						loads := tr.find("main", "+["+plugin+" load]")
						if methods == "all" && plugin == "LBundle" {
							loads = nil
							for _, c := range tr.threads["main"] {
								if c.Name == "+[LBundle load]" && strings.Contains(c.path(), "-[NSBundle load] > ") {
									loads = append(loads, c)
								}
							}
						}
						warms := 0 // with `all`, +[NSObject initialize] (LPlugin inherits it) too
						for _, c := range loads {
							for _, k := range c.children {
								if k.Name == "+["+plugin+" warm]" {
									warms++
								} else if methods == "" {
									t.Errorf("%s under %s", k.Name, c.path())
								}
							}
						}
						if len(loads) != 1 || warms != 1 {
							t.Errorf("%s's +load: %d, want one calling +[%s warm]", plugin, len(loads), plugin)
						}
					}
					for _, c := range tr.threads["main"] {
						if n, ok := count[c.Name]; ok {
							count[c.Name] = n - 1
						} else if methods == "" {
							t.Errorf("default selection traced %s (not the program's)", c.path())
						}
					}
					for name, n := range count {
						if n != 0 {
							t.Errorf("%s traced %d times too few", name, n)
						}
					}
					// in the order they ran: the +load methods (the module registers), the
					// constructor, then main
					var top []string
					for _, c := range tops(tr, "main") {
						if strings.Contains(c.Name, "Early") || strings.Contains(c.Name, "Slow") {
							top = append(top, c.Name)
						}
					}
					if want := []string{"+[Early ctorWork]", "+[Early warm]", "+[Slow initialize]", "+[Slow warm]"}; len(top) < 4 || !slices.Equal(top[len(top)-4:], want) {
						t.Errorf("outermost calls of the program in time order: %v, want the last four %v", top, want)
					}
					if first := tops(tr, "main"); len(first) == 0 || methods == "" && !strings.HasSuffix(first[0].Name, " load]") {
						t.Errorf("first call %v, want a +load", first[:min(1, len(first))])
					}
					if tr.orphans != 0 {
						t.Errorf("%d calls without their caller", tr.orphans)
					}
				})
			}
		}
		t.Run(filepath.Base(preload)+"/fill", func(t *testing.T) {
			// +[Filler load] makes 200,000 calls with the runtime's lock held, more than the
			// 1 MiB pool holds: the drain frees chunks meanwhile, naming the methods without
			// the runtime's lock
			tr, se := run(t, preload, "", map[string]string{"LAUNCH_FILL": "200000", "MSGTRACE_BUFFER_MB": "1"})
			if n := len(tr.find("main", "+[Filler load] > +[Filler tick:]")); n != 200000 {
				t.Errorf("%d +[Filler load] > +[Filler tick:], want 200000", n)
			}
			if m := regexp.MustCompile(`(\d+) lost: no buffer space; \d+ past the shadow stack; (\d+) waits`).FindStringSubmatch(se); m == nil || m[1] != "0" {
				t.Errorf("summary %q: want none lost", se)
			} else {
				t.Logf("+load filling the pool: %s waits for buffer space", m[2])
			}
		})
	}
}

// tops is a thread's outermost calls in the order they began.
func tops(tr trace, thread string) []*call {
	var out []*call
	for _, c := range tr.threads[thread] {
		if c.parent == nil {
			out = append(out, c)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Ts < out[j].Ts })
	return out
}

// runEnv runs prog with exactly the variables env adds to the test's environment (LD_PRELOAD
// among them when traced), HOME in the test's directory.
func (g gnustep) runEnv(t *testing.T, env map[string]string, prog string, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a hang fails, not stalls
	defer cancel()
	cmd := exec.CommandContext(ctx, prog, args...)
	cmd.Dir = g.dir
	if err := os.MkdirAll(filepath.Join(g.dir, "home"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd.Env = append(os.Environ(), "HOME="+filepath.Join(g.dir, "home"))
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var so, se strings.Builder
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	return so.String(), se.String(), err
}

// TestGNUstepLibraryLoads traces the +load methods of the libraries a program links, which the
// runtime sends as their modules register, before the preload loader's constructor ran:
// gnustep-base's own (NSObject's, NSProcessInfo's ...) and those of a library of the program's
// (testdata/gnustep/baseloads.m, baseloadslib.m). The program lists every +load the runtime has;
// preloaded through the loader with MSGTRACE_METHODS=all each of those is traced exactly once,
// after the process's start and before main, and the program's output is that of its untraced
// run; at the default selection none of the libraries' is (their classes are not the app's) and
// the early start is what it was. A library's +load that sends more messages than a 1 MiB pool
// holds loses none.
func TestGNUstepLibraryLoads(t *testing.T) {
	testfiles.Slow(t, "builds and runs GNUstep programs")
	g, _, loader, src := launchKit(t)
	mustGNUstepCC(t, g.dir, "libbaseloadslib.so", "-shared", "-fPIC", src("baseloadslib.m"))
	mustGNUstepCC(t, g.dir, "baseloads", src("baseloads.m"), "-L"+g.dir, "-lbaseloadslib", "-Wl,-rpath,"+g.dir)
	app := filepath.Join(g.dir, "baseloads")

	want, se, err := g.runEnv(t, nil, app)
	if err != nil {
		t.Fatalf("untraced: %v\n%s", err, se)
	}
	// the +load methods the runtime has, by class (a class's own and its categories'): all
	// but the program's are the libraries'
	loads := map[string]int{}
	for _, l := range strings.Split(want, "\n") {
		if c, ok := strings.CutPrefix(l, "load "); ok {
			loads["+["+c+" load]"]++
		}
	}
	for _, own := range []string{"+[AppLoad load]", "+[EarlyFill load]"} {
		if loads[own] != 1 {
			t.Fatalf("the program's %s: %d in the list, want 1:\n%s", own, loads[own], want)
		}
	}
	if loads["+[NSObject load]"] != 1 {
		t.Fatalf("gnustep-base's +[NSObject load] not in the list:\n%s", want)
	}
	t.Logf("+load methods: %v", loads)

	// run traces the program and returns its trace, the launch marks' times and stderr
	run := func(t *testing.T, env map[string]string) (trace, map[string]float64, string) {
		t.Helper()
		out := filepath.Join(g.dir, strings.ReplaceAll(t.Name(), "/", "-")+".json")
		traced := map[string]string{"LD_PRELOAD": loader, "MSGTRACE_OUT": out, "MSGTRACE_VERBOSE": "1"}
		for k, v := range env {
			traced[k] = v
		}
		so, se, err := g.runEnv(t, traced, app)
		wantOut := want
		if env["EARLY_FILL"] != "" {
			wantOut = strings.Replace(want, "early fill ticks 0", "early fill ticks "+env["EARLY_FILL"], 1)
		}
		if err != nil || so != wantOut {
			t.Fatalf("traced: %v\nstdout %q, want %q\nstderr:\n%s", err, so, wantOut, se)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			TraceEvents []event `json:"traceEvents"`
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		marks := map[string]float64{}
		for _, e := range doc.TraceEvents {
			if e.Ph == "i" && e.Cat == "msgtrace" {
				if _, ok := marks[e.Name]; !ok {
					marks[e.Name] = e.Ts
				}
			}
		}
		for _, m := range []string{"process start", "library loaded", "main"} {
			if _, ok := marks[m]; !ok {
				t.Fatalf("no %q mark: %v", m, marks)
			}
		}
		return readTrace(t, out), marks, se
	}

	t.Run("all", func(t *testing.T) {
		tr, marks, se := run(t, map[string]string{"MSGTRACE_METHODS": "all"})
		if !strings.Contains(se, "as their modules registered, before main's install") {
			t.Errorf("no early instrumenting said:\n%s", se)
		}
		// started by the libraries' first __cxa_atexit (ICU's, libstdc++'s), not on main at
		// the first module
		if !strings.Contains(se, "loading started on the preload loader's thread as the libraries initialized") {
			t.Errorf("the library was not loaded before the first module:\n%s", se)
		}
		got := map[string]int{}
		for _, c := range tr.threads["main"] {
			if loads[c.Name] == 0 {
				continue
			}
			got[c.Name]++
			if c.Ts < marks["process start"] || c.Ts >= marks["main"] {
				t.Errorf("%s at %.3f µs: not between process start (%.3f) and main (%.3f)", c.path(), c.Ts, marks["process start"], marks["main"])
			}
			if c.parent != nil {
				t.Errorf("%s under a call: %s", c.Name, c.path())
			}
		}
		for name, n := range loads {
			if got[name] != n {
				t.Errorf("%s traced %d times, want %d", name, got[name], n)
			}
		}
		// +[EarlyFill ticks] recorded as its module registered (before msgtrace read the
		// module's selectors: named by the method's name) and from main (by its selector):
		// the same name both times
		if n := len(tr.find("main", "+[EarlyFill load] > +[EarlyFill ticks]")); n != 1 {
			t.Errorf("+[EarlyFill load] > +[EarlyFill ticks] traced %d times, want 1", n)
		}
		// outermost calls of main's thread named name, from main on
		afterMain := func(name string) (n int) {
			for _, c := range tops(tr, "main") {
				if c.Name == name && c.Ts >= marks["main"] {
					n++
				}
			}
			return n
		}
		if late := afterMain("+[EarlyFill ticks]"); late != 1 {
			t.Errorf("%d outermost +[EarlyFill ticks] after main, want 1 (main's)", late)
		}
		// main's [AppLoad isProxy]: the root class's instance method, as its metaclass's copy
		if proxy := afterMain("+[NSObject isProxy]"); proxy != 1 {
			t.Errorf("%d outermost +[NSObject isProxy] after main, want 1 (main's [AppLoad isProxy])", proxy)
		}
		if marks["library loaded"] > marks["first call"] || marks["first call"] >= marks["main"] {
			t.Errorf("launch marks out of order: %v", marks)
		}
		if tr.orphans != 0 {
			t.Errorf("%d calls without their caller", tr.orphans)
		}
	})
	t.Run("default", func(t *testing.T) {
		tr, _, se := run(t, nil)
		if strings.Contains(se, "as their modules registered") || strings.Contains(se, "loading started on the preload loader's thread") ||
			!strings.Contains(se, "prepared on the preload loader's thread") {
			t.Errorf("the default selection's start changed:\n%s", se)
		}
		for _, c := range tr.threads["main"] {
			if strings.HasSuffix(c.Name, " load]") && c.Name != "+[AppLoad load]" && c.Name != "+[EarlyFill load]" {
				t.Errorf("default selection traced %s", c.path())
			}
		}
		if n := len(tr.find("main", "+[AppLoad load]")); n != 1 {
			t.Errorf("+[AppLoad load] traced %d times, want 1", n)
		}
	})
	t.Run("fill", func(t *testing.T) {
		// a library's +load sends 200,000 messages as its module registers, before the
		// loader's constructor: more than a 1 MiB pool holds, maybe before the drain started
		tr, _, se := run(t, map[string]string{"MSGTRACE_METHODS": "all", "EARLY_FILL": "200000", "MSGTRACE_BUFFER_MB": "1"})
		if n := len(tr.find("main", "+[EarlyFill load] > +[EarlyFill tick:]")); n != 200000 {
			t.Errorf("%d +[EarlyFill load] > +[EarlyFill tick:], want 200000", n)
		}
		if m := regexp.MustCompile(`(\d+) lost: no buffer space`).FindStringSubmatch(se); m == nil || m[1] != "0" {
			t.Errorf("summary %q: want none lost", se)
		}
	})
}

// TestGNUstepEarlyStartRefused: under MSGTRACE_METHODS=all the preload loader starts recording
// and instrumenting gnustep-base's modules in C, before the Go side has read the variables only
// it checks. When the Go side then refuses the configuration (a bad MSGTRACE_MIN_US,
// MSGTRACE_MAX_DEPTH, MSGTRACE_FORMAT, MSGTRACE_MAX_CALLS, MSGTRACE_KEEP_STREAM or MSGTRACE_OUT), the
// program must run as untraced: one line on stderr, no trace, and no method left with a
// trampoline of the library (testdata/gnustep/sortapp.m's "where" prints which object
// implements methods of Foundation and of the program). With a good configuration the same
// methods are the library's: the early start ran.
func TestGNUstepEarlyStartRefused(t *testing.T) {
	testfiles.Slow(t, "builds and runs GNUstep programs")
	g, _, loader, src := launchKit(t)
	mustGNUstepCC(t, g.dir, "sortapp", src("sortapp.m"))
	app := filepath.Join(g.dir, "sortapp")
	plain, _, err := g.runEnv(t, nil, app, "where")
	if err != nil || strings.Contains(plain, "libmsgtrace") || strings.Count(plain, "implemented in") != 5 {
		t.Fatalf("untraced: %v\n%s", err, plain)
	}
	out := filepath.Join(g.dir, "refused.mtrace")
	env := func(k, v string) map[string]string {
		e := map[string]string{"LD_PRELOAD": loader, "MSGTRACE_METHODS": "all", "MSGTRACE_OUT": out}
		if k != "" {
			e[k] = v
		}
		return e
	}
	traced, se, err := g.runEnv(t, env("", ""), app, "where")
	if err != nil || strings.Count(traced, "implemented in libmsgtrace.so") != 5 {
		t.Fatalf("accepted configuration: %v\nstdout:\n%s\nstderr:\n%s", err, traced, se)
	}
	os.Remove(out)
	for _, bad := range [][2]string{
		{"MSGTRACE_MIN_US", "fast"},
		{"MSGTRACE_MAX_DEPTH", "deep"},
		{"MSGTRACE_FORMAT", "xml"},
		{"MSGTRACE_MAX_CALLS", "many"},
		{"MSGTRACE_KEEP_STREAM", "2"},
		{"MSGTRACE_OUT", filepath.Join(g.dir, "missing", "t.mtrace")},
	} {
		so, se, err := g.runEnv(t, env(bad[0], bad[1]), app, "where")
		if err != nil || so != plain {
			t.Errorf("%s=%q: %v\nstdout:\n%s\nwant the untraced run's:\n%s", bad[0], bad[1], err, so, plain)
		}
		lines := strings.Split(strings.TrimSpace(se), "\n")
		if len(lines) != 1 || !strings.Contains(lines[0], bad[0]+"=") || !strings.Contains(lines[0], "tracing is off") {
			t.Errorf("%s=%q: stderr %q, want one line naming it", bad[0], bad[1], se)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%s=%q: a trace was written", bad[0], bad[1])
			os.Remove(out)
		}
	}
}
