//go:build linux

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/msgtrace/msgtrace/internal/testfiles"
	"github.com/msgtrace/msgtrace/tracer/engine"
)

// gnustep runs programs of Debian's GNUstep (gcc's GNU runtime, libobjc.so.4: no objc_msgSend,
// so everything traced here goes through method trampolines) with and without the library.
type gnustep struct {
	dir, lib string
}

// run runs prog with env (and LD_PRELOAD of the library when traced), HOME in a directory of
// its own; it returns stdout, stderr and the exit error.
func (g gnustep) run(t *testing.T, traced bool, home string, env map[string]string, stdin []byte, prog string, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a hang fails, not stalls
	defer cancel()
	cmd := exec.CommandContext(ctx, prog, args...)
	cmd.Dir = g.dir
	cmd.Env = append(os.Environ(), "HOME="+filepath.Join(g.dir, home))
	if err := os.MkdirAll(filepath.Join(g.dir, home), 0o755); err != nil {
		t.Fatal(err)
	}
	if traced {
		cmd.Env = append(cmd.Env, "LD_PRELOAD="+g.lib)
		for k, v := range env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	err := cmd.Run()
	return so.String(), se.String(), err
}

// gnustepCC compiles a program or shared object with gcc against gnustep-base into dir/out:
// args (options such as -shared, then the sources) go between gnustep-config's Objective-C
// flags and its library flags.
func gnustepCC(dir, out string, args ...string) error {
	flags := func(which string) ([]string, error) {
		b, err := exec.Command("gnustep-config", which).Output()
		if err != nil {
			return nil, fmt.Errorf("gnustep-config %s: %v", which, err)
		}
		return strings.Fields(string(b)), nil
	}
	objc, err := flags("--objc-flags")
	if err != nil {
		return err
	}
	libs, err := flags("--base-libs")
	if err != nil {
		return err
	}
	all := append(append(append(append([]string{"-std=gnu11"}, objc...), "-o", out), args...), libs...)
	cc := exec.Command("gcc", append(all, "-ldl", "-lpthread")...)
	cc.Dir = dir
	if b, err := cc.CombinedOutput(); err != nil {
		return fmt.Errorf("gcc -o %s: %v\n%s", out, err, b)
	}
	return nil
}

// mustGNUstepCC is gnustepCC failing the test on error.
func mustGNUstepCC(t *testing.T, dir, out string, args ...string) {
	t.Helper()
	if err := gnustepCC(dir, out, args...); err != nil {
		t.Fatal(err)
	}
}

// buildLoader compiles the preload loader (cmd/libmsgtrace/loader/loader.c) with cc into out.
func buildLoader(t *testing.T, cc, out string) {
	t.Helper()
	src := filepath.Join(testfiles.Root(t), "cmd", "libmsgtrace", "loader", "loader.c")
	if b, err := exec.Command(cc, "-O2", "-Wall", "-shared", "-fPIC", "-o", out, src, "-ldl").CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", filepath.Base(out), err, b)
	}
}

// TestGNUstepMethods traces Foundation programs on Debian's GNUstep through method
// trampolines: a program of ours where Foundation calls back into app methods, an exception
// through traced methods, and gnustep-base's own tools on real input with MSGTRACE_METHODS=all.
func TestGNUstepMethods(t *testing.T) {
	testfiles.Slow(t, "builds and runs GNUstep programs")
	if runtime.GOARCH != "amd64" {
		t.Skip("Debian's GNUstep is installed for the host (amd64) only")
	}
	testfiles.NeedTools(t, "gnustep-config", "plparse", "pldes", "plget", "defaults", "plutil")
	root := testfiles.Root(t)
	g := gnustep{dir: t.TempDir()}
	g.lib = filepath.Join(g.dir, "libmsgtrace.so")
	buildLib(t, "c-shared", g.lib, "amd64", "gcc")
	mustGNUstepCC(t, g.dir, "sortapp", filepath.Join(root, "testdata", "gnustep", "sortapp.m"))
	mustGNUstepCC(t, g.dir, "plugin.so", "-shared", filepath.Join(root, "testdata", "gnustep", "plugin.m"))
	app := filepath.Join(g.dir, "sortapp")
	plain, _, err := g.run(t, false, "home", nil, nil, app)
	if err != nil {
		t.Fatalf("sortapp: %v", err)
	}

	var compares int
	t.Run("app", func(t *testing.T) {
		out := filepath.Join(g.dir, "app.json")
		so, se, err := g.run(t, true, "home", map[string]string{"MSGTRACE_OUT": out}, nil, app)
		if err != nil || so != plain {
			t.Fatalf("traced sortapp: %v\nstdout %q, want %q\nstderr:\n%s", err, so, plain, se)
		}
		tr := readTrace(t, out)
		calls := tr.threads["main"]
		compares, _ = tr.count("main", "-[Num compare:]")
		if n, _ := tr.count("main", "-[Num initWithValue:]"); n != 20 || compares < 19 {
			t.Errorf("%d -[Num initWithValue:] (want 20), %d -[Num compare:] (want 19 or more)", n, compares)
		}
		for _, c := range calls {
			// Foundation (a system library) is not instrumented by default; the inherited
			// -compare: is named by the class that implements it
			if !strings.HasPrefix(c.Name, "-[Num ") && !strings.HasPrefix(c.Name, "-[Counter ") {
				t.Errorf("unexpected call %s", c.Name)
			}
			if c.Name == "-[Num compare:]" && (len(c.children) != 1 || c.children[0].Name != "-[Num value]") {
				t.Errorf("-[Num compare:] calls %d methods, want one -[Num value]", len(c.children))
			}
		}
		// -init sent inside Foundation (+new), and an IMP called directly: each traced once
		if n, _ := tr.count("main", "-[Counter init]"); n != 1 {
			t.Errorf("%d -[Counter init] (sent by +[NSObject new]), want 1", n)
		}
		if n, _ := tr.count("main", "-[Counter bump]"); n != 2 {
			t.Errorf("%d -[Counter bump] (an IMP called directly, then a send), want 2", n)
		}
	})

	t.Run("all", func(t *testing.T) {
		out := filepath.Join(g.dir, "all.json")
		so, se, err := g.run(t, true, "home", map[string]string{"MSGTRACE_OUT": out, "MSGTRACE_METHODS": "all"}, nil, app)
		if err != nil || so != plain {
			t.Fatalf("traced sortapp: %v\nstdout %q, want %q\nstderr:\n%s", err, so, plain, se)
		}
		tr := readTrace(t, out)
		// Foundation calls the app back: the sort's own methods, then ours under them
		sorted := tr.find("main", "-[NSMutableArray sortUsingSelector:] > -[GSMutableArray sortUsingFunction:context:] > -[Num compare:]")
		if len(sorted) != compares || compares == 0 {
			t.Errorf("%d -[Num compare:] under -[NSMutableArray sortUsingSelector:], want %d", len(sorted), compares)
		}
		// [super init] goes through objc_msg_lookup_super: traced, once
		if n := len(tr.find("main", "-[Num initWithValue:] > -[NSObject init]")); n != 20 {
			t.Errorf("%d -[NSObject init] under -[Num initWithValue:] ([super init]), want 20", n)
		}
		if n := len(tr.find("main", "-[Counter init] > -[NSObject init]")); n != 1 {
			t.Errorf("%d -[Counter init] > -[NSObject init] (+new is never instrumented), want 1", n)
		}
		if n, _ := tr.count("main", "-[NSAutoreleasePool drain]"); n == 0 {
			t.Error("no -[NSAutoreleasePool drain]")
		}
		if tr.orphans != 0 {
			t.Errorf("%d calls without their caller", tr.orphans)
		}
	})

	// modes of sortapp whose traced output must equal the untraced one, and what they trace
	for _, c := range []struct {
		mode  string
		args  []string
		calls map[string]int
	}{
		// msgtrace_stop() gives -bump its IMP back (the program prints where its IMP is); the
		// call after the stop is not traced; msgtrace_start() gives it the same trampoline
		// again (the program prints whether its IMP is the one before the stop) and it is
		{"stop", []string{"stop"}, map[string]int{"-[Counter init]": 1, "-[Counter bump]": 2}},
		// a class registered inside dlopen, by the object's own constructor
		{"dlopen", []string{"plugin", filepath.Join(g.dir, "plugin.so")}, map[string]int{"-[Plugin answer]": 1}},
		// the app's category on NSString: its methods are traced by default (the class is
		// Foundation's), named by the class they were added to
		{"category", []string{"category"}, map[string]int{"-[NSString sortappWords]": 1, "+[NSString sortappGreeting]": 1}},
		// +initialize (the runtime's lock held) adds a method while another thread is inside
		// dlopen (the loader's lock held, waiting for the runtime's in the plugin's module
		// constructor): the method is instrumented without waiting for the loader's lock
		// (a deadlock, killed by the timeout, when the object's path came from dladdr)
		// (+initialize itself is traced)
		{"initlock", []string{"initlock", filepath.Join(g.dir, "plugin.so")}, map[string]int{"+[Lazy initialize]": 1, "-[Lazy extra]": 1, "-[Plugin answer]": 1}},
	} {
		t.Run(c.mode, func(t *testing.T) {
			want, _, err := g.run(t, false, "home", nil, nil, app, c.args...)
			if err != nil {
				t.Fatalf("sortapp %s: %v", c.mode, err)
			}
			out := filepath.Join(g.dir, c.mode+".json")
			so, se, err := g.run(t, true, "home", map[string]string{"MSGTRACE_OUT": out}, nil, app, c.args...)
			if err != nil || so != want {
				t.Fatalf("traced: %v\nstdout %q, want %q\nstderr:\n%s", err, so, want, se)
			}
			tr := readTrace(t, out)
			total := 0
			for _, n := range c.calls {
				total += n
			}
			// the methods' calls: a contended wait (MSGTRACE_WAITS: here the main thread may
			// wait for the runtime's lock while the plugin loads) is a slice "wait ..." of its
			// own, and not a method's call
			calls := 0
			for _, c := range tr.threads["main"] {
				if !strings.HasPrefix(c.Name, "wait ") {
					calls++
				}
			}
			if calls != total {
				t.Errorf("%d calls, want %d", calls, total)
			}
			for name, n := range c.calls {
				if got, _ := tr.count("main", name); got != n {
					t.Errorf("%d %s, want %d", got, name, n)
				}
			}
		})
	}

	t.Run("dynamic", func(t *testing.T) {
		// a class created at run time (objc_allocateClassPair, objc_registerClassPair) is
		// instrumented when it registers; a method added to it later when it is added
		out := filepath.Join(g.dir, "dynamic.json")
		so, se, err := g.run(t, true, "home", map[string]string{"MSGTRACE_OUT": out}, nil, app, "dynamic")
		if err != nil || so != "dynamic twice 42\ndynamic thrice 42\n" {
			t.Fatalf("sortapp dynamic: %v\nstdout %q\nstderr:\n%s", err, so, se)
		}
		tr := readTrace(t, out)
		for _, name := range []string{"-[Dyn twice:]", "-[Dyn thrice:]"} {
			if n, _ := tr.count("main", name); n != 1 {
				t.Errorf("%d %s calls traced, want 1", n, name)
			}
		}
	})

	t.Run("initbusy", func(t *testing.T) {
		// +initialize runs with the runtime's lock held and makes 200,000 traced calls, more
		// than a 1 MiB pool holds: the thread waits for the drain, which must name the
		// method without the runtime's lock (gcc's sel_getName takes it: a deadlock before)
		out := filepath.Join(g.dir, "initbusy.json")
		so, se, err := g.run(t, true, "home", map[string]string{"MSGTRACE_OUT": out, "MSGTRACE_BUFFER_MB": "1"}, nil, app, "initbusy")
		if err != nil || so != "initbusy: 100000\n" {
			t.Fatalf("sortapp initbusy: %v\nstdout %q\nstderr:\n%s", err, so, se)
		}
		if n := len(readTrace(t, out).find("main", "+[Busy initialize] > +[Busy tick:]")); n != 200000 {
			t.Errorf("%d +[Busy initialize] > +[Busy tick:], want 200000", n)
		}
	})

	t.Run("kvo", func(t *testing.T) {
		// Key-value observing: Foundation registers a subclass of the observed class at run
		// time (GSKVOObs; Apple's NSKVONotifying_Obs) and adds it a setter that notifies
		// around the original, Foundation calling the app back. By default the subclass
		// belongs to Foundation, which registered it, and is left alone: the app's setter and
		// observer are traced, at the top (gcc's runtime has no sends to catch). With `all`
		// the setter added after registration is traced (named by the class whose
		// implementation it is), the app's setter under it.
		for _, c := range []struct {
			methods string
			want    map[string]int
		}{
			{"app", map[string]int{"-[Obs setV:]": 3, "-[Watcher observeValueForKeyPath:ofObject:change:context:]": 3}},
			{"all", map[string]int{
				"-[GSKVOSetter setterInt:] > -[Obs setV:]": 3,
				"-[GSKVOSetter setterInt:] > -[NSObject didChangeValueForKey:] > -[GSKVOPathInfo notifyForKey:ofInstance:prior:] > -[Watcher observeValueForKeyPath:ofObject:change:context:]": 3,
			}},
		} {
			out := filepath.Join(g.dir, "kvo-"+c.methods+".json")
			so, se, err := g.run(t, true, "home", map[string]string{"MSGTRACE_OUT": out, "MSGTRACE_METHODS": c.methods}, nil, app, "kvo")
			if err != nil || so != "kvo: 3 changes seen, v 3\n" {
				t.Fatalf("sortapp kvo: %v\nstdout %q\nstderr:\n%s", err, so, se)
			}
			tr := readTrace(t, out)
			for p, n := range c.want {
				if got := len(tr.find("main", p)); got != n {
					t.Errorf("%s: %d %s, want %d", c.methods, got, p, n)
				}
			}
			if c.methods == "app" {
				for _, call := range tr.threads["main"] {
					if strings.Contains(call.Name, "GSKVO") {
						t.Errorf("app: %s traced: the class Foundation registered is not the app's", call.path())
					}
				}
			}
		}
	})

	t.Run("firsttouch", func(t *testing.T) {
		// four threads first touch Foundation and the app's class, whose +initialize adds an
		// instance and a class method (class_addMethod, as gnustep-base's behaviours do): the
		// added methods are traced, named by their class. The main thread touches Foundation
		// first (FIRSTTOUCH_MAIN): gnustep-base's own race, which make bench-firsttouch counts,
		// is not run here
		mustGNUstepCC(t, g.dir, "firsttouch", filepath.Join(root, "testdata", "gnustep", "firsttouch.m"), "-lpthread")
		ft := filepath.Join(g.dir, "firsttouch")
		env := map[string]string{"FIRSTTOUCH_MAIN": "1", "FIRSTTOUCH_THREADS": "4"}
		plain, _, err := g.run(t, false, "home", nil, nil, "env", "FIRSTTOUCH_MAIN=1", "FIRSTTOUCH_THREADS=4", ft)
		if err != nil || plain != "firsttouch: 4 threads, 4 touches\n" {
			t.Fatalf("firsttouch: %v\nstdout %q", err, plain)
		}
		for _, methods := range []string{"app", "all"} {
			out := filepath.Join(g.dir, "firsttouch-"+methods+".json")
			env["MSGTRACE_OUT"], env["MSGTRACE_METHODS"], env["MSGTRACE_VERBOSE"] = out, methods, "1"
			so, se, err := g.run(t, true, "home", env, nil, ft)
			if err != nil || so != plain {
				t.Fatalf("%s: traced firsttouch: %v\nstdout %q, want %q\nstderr:\n%s", methods, err, so, plain, se)
			}
			tr := readTrace(t, out)
			// the workers share the program's name; the methods added by +initialize on them
			for name, n := range map[string]int{"+[MTFirstTouch initialize]": 1, "-[MTFirstTouch touch]": 4} {
				if got, _ := tr.count("firsttouch", name); got != n {
					t.Errorf("%s: %d %s on the threads, want %d", methods, got, name, n)
				}
			}
			if got, _ := tr.count("main", "+[MTFirstTouch touches]"); got != 1 {
				t.Errorf("%s: %d +[MTFirstTouch touches] on main, want 1", methods, got)
			}
			if methods == "app" {
				// +initialize and the two methods it added: the app's three
				if !strings.Contains(se, "methods at exit: 3 instrumented") {
					t.Errorf("app: want 3 methods instrumented at exit, stderr:\n%s", se)
				}
				continue
			}
			// gnustep-base's: NSMutableArray is initialized inside +[NSArray initialize], before
			// GSMutableArray (whose +initialize adds GSArray's methods to it)
			for _, p := range []string{"+[NSArray initialize] > +[NSMutableArray initialize]", "+[NSArray initialize] > +[GSMutableArray initialize]"} {
				tr.one(t, "main", p)
			}
			if tr.orphans != 0 {
				t.Errorf("all: %d calls without their caller", tr.orphans)
			}
		}
	})

	t.Run("sends-only", func(t *testing.T) {
		// gcc's runtime has no objc_msgSend: capturing sends alone sees nothing
		out := filepath.Join(g.dir, "sends.json")
		if _, se, err := g.run(t, true, "home", map[string]string{"MSGTRACE_OUT": out, "MSGTRACE_CAPTURE": "sends"}, nil, app); err != nil {
			t.Fatalf("%v\n%s", err, se)
		}
		if _, err := os.Stat(out); err == nil { // nothing recorded: no file
			t.Errorf("MSGTRACE_CAPTURE=sends wrote %s", out)
		}
	})

	t.Run("exception", func(t *testing.T) {
		want, _, err := g.run(t, false, "home", nil, nil, app, "throw")
		if err != nil {
			t.Fatalf("sortapp throw: %v", err)
		}
		out := filepath.Join(g.dir, "throw.json")
		so, se, err := g.run(t, true, "home", map[string]string{"MSGTRACE_OUT": out, "MSGTRACE_METHODS": "all"}, nil, app, "throw")
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGABRT {
				t.Fatal("libgcc's unwinder aborted on an NSException raised through a traced method")
			}
		}
		if err != nil || so != want {
			t.Fatalf("traced sortapp throw: %v\nstdout %q, want %q\nstderr:\n%s", err, so, want, se)
		}
		tr := readTrace(t, out)
		top := tr.one(t, "main", "-[Thrower top]")
		boom := tr.find("main", "-[Thrower top] > -[Thrower middle] > -[Thrower boom]")
		if top.Name == "" || len(boom) != 1 || !boom[0].Args.Unwound || !boom[0].parent.Args.Unwound || top.Args.Unwound {
			t.Errorf("exception path: top %+v, boom %d calls", top.Args, len(boom))
		}
	})

	// firstIdle builds firstidle.so (testdata/gnustep/firstidle.m) once
	firstIdle := func(t *testing.T) {
		if _, err := os.Stat(filepath.Join(g.dir, "firstidle.so")); err == nil {
			return
		}
		mustGNUstepCC(t, g.dir, "firstidle.so", "-shared", filepath.Join(root, "testdata", "gnustep", "firstidle.m"))
	}

	t.Run("gui", func(t *testing.T) {
		// a GNUstep GUI application from Debian, under Xvfb, traced until its run loop is first
		// idle (firstidle.m, preloaded too, exits then), through `machobind run`
		for _, tool := range []string{"xvfb-run", "EdenMath"} {
			if _, err := exec.LookPath(tool); err != nil {
				t.Fatalf("%s missing: run make setup (xvfb, edenmath.app)", tool)
			}
		}
		firstIdle(t)
		mb := filepath.Join(g.dir, "machobind")
		build := exec.Command("go", "build", "-o", mb, "./cmd/machobind")
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build machobind: %v\n%s", err, out)
		}
		out := filepath.Join(g.dir, "gui.json")
		// the application's own classes (its image is EdenMath) and AppKit's application class
		run := exec.Command("xvfb-run", "-a", mb, "run", "--lib", g.lib, "--out", out, "--", "EdenMath")
		run.Dir = g.dir
		run.Env = append(os.Environ(), "HOME="+filepath.Join(g.dir, "home-gui"), "LD_PRELOAD="+filepath.Join(g.dir, "firstidle.so"),
			"MSGTRACE_METHODS=EdenMath,NSApplication")
		b, err := run.CombinedOutput()
		if err != nil || !strings.Contains(string(b), "firstidle: launched and idle") || !strings.Contains(string(b), "top 10 methods by self time") {
			t.Fatalf("EdenMath under xvfb-run and machobind run: %v\n%s", err, b)
		}
		tr := readTrace(t, out)
		for _, name := range []string{"-[NSApplication finishLaunching]", "-[EMController awakeFromNib]"} {
			if n, _ := tr.count("main", name); n != 1 {
				t.Errorf("%d %s, want 1", n, name)
			}
		}
		// launch: the application's first traced call, on its main thread: AppKit's
		// +[NSApplication initialize] where NSApplication is selected; with the default
		// selection firstidle.so's +load (preloaded before the library, which machobind run puts
		// last so that its constructor runs first)
		launched := func(tr trace, what, want string) {
			t.Helper()
			awake := tr.one(t, "main", "-[EMController awakeFromNib]")
			var first *call
			for _, c := range tops(tr, "main") {
				if c.TID == awake.TID { // the application's main thread (a daemon it starts has one too)
					first = c
					break
				}
			}
			if first == nil || first.Name != want || first.Ts > awake.Ts {
				t.Errorf("%s: the application's first call is %v, want %s", what, first, want)
			}
		}
		launched(tr, "EdenMath,NSApplication", "+[NSApplication initialize]")
		// the default selection: Debian installs the application as
		// /usr/lib/GNUstep/Applications/EdenMath.app/EdenMath, under a system directory; the
		// main program is the app's all the same
		out = filepath.Join(g.dir, "gui-app.json")
		run = exec.Command("xvfb-run", "-a", mb, "run", "--lib", g.lib, "--out", out, "--", "EdenMath")
		run.Dir = g.dir
		run.Env = append(os.Environ(), "HOME="+filepath.Join(g.dir, "home-gui"), "LD_PRELOAD="+filepath.Join(g.dir, "firstidle.so"))
		if b, err := run.CombinedOutput(); err != nil || !strings.Contains(string(b), "firstidle: launched and idle") {
			t.Fatalf("EdenMath, default selection: %v\n%s", err, b)
		}
		tr = readTrace(t, out)
		if n, _ := tr.count("main", "-[EMController awakeFromNib]"); n != 1 {
			t.Errorf("default selection: %d -[EMController awakeFromNib], want 1", n)
		}
		launched(tr, "default selection", "+[MTFirstIdle load]")
		for _, calls := range tr.threads {
			for _, c := range calls {
				if strings.HasPrefix(c.Name, "-[NS") || strings.HasPrefix(c.Name, "+[NS") {
					t.Errorf("default selection traced %s (AppKit's)", c.Name)
					break
				}
			}
		}
	})

	t.Run("gui-all", func(t *testing.T) {
		// a second Debian application, every method of the process instrumented: Chess.app
		// makes ~10 M calls to its first idle, many inside +initialize (the runtime's lock
		// held) while its thread waits for the drain; it hung there before the drain stopped
		// asking gcc's runtime for selector names
		for _, tool := range []string{"xvfb-run", "Chess"} {
			if _, err := exec.LookPath(tool); err != nil {
				t.Fatalf("%s missing: run make setup (xvfb, chess.app)", tool)
			}
		}
		firstIdle(t)
		// one stream per process: xvfb-run's own processes load firstidle.so (and so gnustep-base)
		// too, and trace its +load
		out := filepath.Join(g.dir, "chess.%p.mtrace")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		run := exec.CommandContext(ctx, "xvfb-run", "-a", "Chess")
		run.Dir = g.dir
		// the library last: preloaded objects are initialized last to first, so its constructor
		// runs before firstidle.so's module registers (and sends +load)
		run.Env = append(os.Environ(), "HOME="+filepath.Join(g.dir, "home-chess"), "LD_PRELOAD="+filepath.Join(g.dir, "firstidle.so")+":"+g.lib,
			"MSGTRACE_METHODS=all", "MSGTRACE_OUT="+out)
		b, err := run.CombinedOutput()
		if err != nil || !strings.Contains(string(b), "firstidle: launched and idle") {
			t.Fatalf("Chess under xvfb-run, MSGTRACE_METHODS=all: %v\n%s", err, b)
		}
		streams, _ := filepath.Glob(filepath.Join(g.dir, "chess.*.mtrace"))
		var s *tally
		var tot engine.Totals
		for _, p := range streams {
			if ps, pt := readStreams(t, p); ps.calls["-[NSApplication finishLaunching]"] > 0 {
				s, tot = ps, pt
			}
		}
		if s == nil {
			t.Fatalf("no stream of %v holds -[NSApplication finishLaunching]", streams)
		}
		if tot.Calls < 1000000 || tot.Dropped != 0 || tot.BadFrames != 0 || s.calls["-[NSApplication finishLaunching]"] != 1 {
			t.Errorf("Chess: totals %+v, %d -[NSApplication finishLaunching]", tot, s.calls["-[NSApplication finishLaunching]"])
		}
		// launch: firstidle.so's +load once; +initialize of the application's class and of
		// AppKit's (sent again for each subclass that inherits it)
		if s.calls["+[MTFirstIdle load]"] != 1 || s.calls["+[Chess initialize]"] == 0 || s.calls["+[NSApplication initialize]"] == 0 {
			t.Errorf("Chess launch: %d +[MTFirstIdle load] (want 1), %d +[Chess initialize], %d +[NSApplication initialize]",
				s.calls["+[MTFirstIdle load]"], s.calls["+[Chess initialize]"], s.calls["+[NSApplication initialize]"])
		}
		t.Logf("Chess to its first idle, every method: %d calls, %d methods", tot.Calls, len(s.calls))
	})

	t.Run("tools", func(t *testing.T) {
		// real input: a property list gnustep-base ships
		plist := "/usr/share/GNUstep/Libraries/gnustep-base/Versions/1.28/Resources/NSTimeZones/abbreviations.plist"
		if m, _ := filepath.Glob("/usr/share/GNUstep/Libraries/gnustep-base/Versions/*/Resources/NSTimeZones/abbreviations.plist"); len(m) > 0 {
			plist = m[0]
		}
		data, err := os.ReadFile(plist)
		if err != nil {
			t.Fatal(err)
		}
		local := filepath.Join(g.dir, "abbreviations.plist")
		if err := os.WriteFile(local, data, 0o644); err != nil {
			t.Fatal(err)
		}
		for i, c := range []struct {
			args  []string
			stdin []byte
		}{
			{[]string{"plparse", local}, nil},
			{[]string{"pldes", local}, nil},
			{[]string{"plget", "AKST"}, data},
			{[]string{"plutil", "-p", local}, nil},
			{[]string{"defaults", "write", "msgtracetest", "Greeting", "Hello, world"}, nil},
			{[]string{"defaults", "read", "msgtracetest"}, nil},
		} {
			name := strings.Join(c.args, " ")
			want, _, werr := g.run(t, false, "home-plain", nil, c.stdin, c.args[0], c.args[1:]...)
			out := filepath.Join(g.dir, "tool.json")
			os.Remove(out)
			so, se, err := g.run(t, true, "home-traced", map[string]string{"MSGTRACE_OUT": out, "MSGTRACE_METHODS": "all"}, c.stdin, c.args[0], c.args[1:]...)
			if so != want || (err == nil) != (werr == nil) {
				t.Errorf("%s: traced stdout %q (%v), untraced %q (%v)\nstderr:\n%s", name, so, err, want, werr, se)
				continue
			}
			tr := readTrace(t, out)
			foundation := 0
			for _, c := range tr.threads["main"] {
				for _, p := range []string{"-[GSMutableDictionary ", "-[GSDictionary ", "-[NSString ", "-[GSCString ", "-[NSUserDefaults "} {
					if strings.HasPrefix(c.Name, p) {
						foundation++
					}
				}
			}
			if foundation == 0 || tr.orphans != 0 {
				t.Errorf("%s: %d of Foundation's calls, %d without their caller", name, foundation, tr.orphans)
			}
			if i == 0 {
				t.Logf("%s: %d calls traced, %d of them Foundation dictionaries and strings", name, len(tr.threads["main"]), foundation)
			}
		}
	})
	t.Run("daemon-signal", func(t *testing.T) {
		// gnustep-base's notification daemon installs one handler for every signal, SIGURG
		// included, that exits on the first and aborts when re-entered. Interrupted, it
		// exits 2; traced, its exit converts the trace inside that handler, and a
		// preemption signal from the library's Go runtime (SIGURG) would re-enter it.
		gdnc, err := exec.LookPath("gdnc")
		if err != nil {
			t.Fatalf("gdnc missing: run make setup (gnustep-base-runtime)")
		}
		for _, traced := range []bool{false, true} {
			dir := t.TempDir()
			out := filepath.Join(dir, "gdnc.json")
			cmd := exec.Command(gdnc, "--no-fork")
			// its name server files go to $TEMP (or $TMP): one of its own, or a gdnc already
			// running (an application test's) would make it exit at once
			cmd.Env = append(os.Environ(), "HOME="+dir, "TMPDIR="+dir, "TEMP="+dir, "TMP="+dir, "MSGTRACE_QUIET=1")
			if traced {
				cmd.Env = append(cmd.Env, "LD_PRELOAD="+g.lib, "MSGTRACE_METHODS=all", "MSGTRACE_OUT="+out)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			ready := func() bool { // its handler is in (and, traced, its start is in the stream)
				b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
				var caught uint64
				for _, l := range strings.Split(string(b), "\n") {
					if v, ok := strings.CutPrefix(l, "SigCgt:"); ok {
						fmt.Sscanf(strings.TrimSpace(v), "%x", &caught)
					}
				}
				if caught&(1<<(int(syscall.SIGINT)-1)) == 0 {
					return false
				}
				calls, _, ok := peekStream(out + ".mtrace")
				return !traced || (ok && len(calls) > 0)
			}
			for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && !ready(); time.Sleep(50 * time.Millisecond) {
			}
			time.Sleep(500 * time.Millisecond) // past its start
			cmd.Process.Signal(syscall.SIGINT)
			err := cmd.Wait()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 2 {
				t.Fatalf("gdnc (traced %v) interrupted: %v, want exit status 2", traced, err)
			}
			if !traced {
				continue
			}
			tr := readTrace(t, out)
			if n := len(tr.threads["main"]); n == 0 || tr.orphans == 0 {
				t.Errorf("gdnc's trace: %d calls on its main thread, %d open (its run loop's, at least, were running at the exit)", n, tr.orphans)
			}
			if left, _ := filepath.Glob(filepath.Join(dir, "*gdnc.json*")); len(left) != 1 {
				t.Errorf("files left: %v", left)
			}
		}
	})
}

// TestGNUstepThreadStates: a thread made with pthread_create has its state made before it
// starts (the rebound pthread_create), so that its first traced call only registers it; a
// thread that makes no traced call takes no chunk, is not counted, and its state is freed as
// it ends. testdata/gnustep/threadstates.m: the main thread and 4 workers each call
// +[MTWork work:] once, 100 threads (then 300) make no call at all. The drain thread is named
// msgtrace-drain.
func TestGNUstepThreadStates(t *testing.T) {
	testfiles.Slow(t, "builds and runs a GNUstep program")
	if runtime.GOARCH != "amd64" {
		t.Skip("Debian's GNUstep is installed for the host (amd64) only")
	}
	testfiles.NeedTools(t, "gnustep-config")
	root := testfiles.Root(t)
	g := gnustep{dir: t.TempDir()}
	g.lib = filepath.Join(g.dir, "libmsgtrace.so")
	buildLib(t, "c-shared", g.lib, "amd64", "gcc")
	mustGNUstepCC(t, g.dir, "threadstates", filepath.Join(root, "testdata", "gnustep", "threadstates.m"), "-lpthread")
	prog := filepath.Join(g.dir, "threadstates")
	for _, idle := range []int{100, 300} {
		// 1 + (1+2+3+4); the drain is told by its name
		want := fmt.Sprintf("threadstates: %d idle, 4 working, 11\nthreadstates: 1 named msgtrace-drain\n", idle)
		out := filepath.Join(g.dir, fmt.Sprintf("threadstates-%d.json", idle))
		env := map[string]string{"THREADSTATES_IDLE": fmt.Sprint(idle), "THREADSTATES_WORK": "4",
			"MSGTRACE_OUT": out, "MSGTRACE_METHODS": "app", "MSGTRACE_VERBOSE": "1"}
		so, se, err := g.run(t, true, "home", env, nil, "env", "THREADSTATES_IDLE="+fmt.Sprint(idle), prog)
		if err != nil || so != want {
			t.Fatalf("%d idle: traced threadstates: %v\nstdout %q, want %q\nstderr:\n%s", idle, err, so, want, se)
		}
		// every thread the program made got a state as it was created; the 4 workers'
		// first traced calls registered theirs, the idle threads' were freed as they ended
		states := fmt.Sprintf("msgtrace: thread states: %d made as their thread was created, 4 registered at its first traced call, %d freed unused\n", idle+4, idle)
		if !strings.Contains(se, states) {
			t.Errorf("%d idle: want %q, stderr:\n%s", idle, states, se)
		}
		// counted: the main thread and the workers, never the idle threads
		if !strings.Contains(se, "calls on 5 threads") {
			t.Errorf("%d idle: want the calls on 5 threads, stderr:\n%s", idle, se)
		}
		tr := readTrace(t, out)
		if n, _ := tr.count("main", "+[MTWork work:]"); n != 1 {
			t.Errorf("%d idle: %d +[MTWork work:] on main, want 1", idle, n)
		}
		if n, _ := tr.count("threadstates", "+[MTWork work:]"); n != 4 {
			t.Errorf("%d idle: %d +[MTWork work:] on the workers, want 4", idle, n)
		}
		if len(tr.threads) != 2 {
			names := make([]string, 0, len(tr.threads))
			for name := range tr.threads {
				names = append(names, name)
			}
			t.Errorf("%d idle: threads %q in the trace, want main and the workers (threadstates)", idle, names)
		}
	}
}
