//go:build linux

package main

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/msgtrace/msgtrace/internal/testfiles"
	"github.com/msgtrace/msgtrace/tracer/report"
)

// waitsReport is the report of a stream file.
func waitsReport(t *testing.T, path string) *report.Report {
	t.Helper()
	sink := report.NewReportSink(report.ReportOptions{})
	processStream(t, path, sink)
	return sink.Report()
}

// TestGNUstepWaits: contended waits and who held them (waits.c), in gcc + gnustep-base programs
// (testdata/gnustep/waits.m) preloaded through the preload loader at the defaults. The main
// thread's -[App frame:] blocks while the worker NSThread "indexer" holds the lock in -[Index
// compact] (@synchronized, -[NSLock lock]) or signals the condition in -[Index produce]
// (-[NSCondition wait]): the trace has the wait as a slice under -[App frame:], and the report's
// hitch is -[App frame:] with the wait, the worker and its method named, and who enqueued the
// worker's work (-[App scheduleIndex] started the thread: an async hop). An NSLock nobody else
// wants, taken a million times, records no wait; MSGTRACE_WAITS=0 records none. Ring mode keeps
// the wait like a call, and MSGTRACE_MIN_US leaves out a wait shorter than it as it does a call.
func TestGNUstepWaits(t *testing.T) {
	testfiles.Slow(t, "builds and runs GNUstep programs")
	if runtime.GOARCH != "amd64" {
		t.Skip("Debian's GNUstep is installed for the host (amd64) only")
	}
	testfiles.NeedTools(t, "gnustep-config")
	root := testfiles.Root(t)
	g := gnustep{dir: t.TempDir()}
	buildLib(t, "c-shared", filepath.Join(g.dir, "libmsgtrace.so"), "amd64", "gcc")
	g.lib = filepath.Join(g.dir, "libmsgtrace-preload.so")
	buildLoader(t, "gcc", g.lib)
	mustGNUstepCC(t, g.dir, "waitsapp", filepath.Join(root, "testdata", "gnustep", "waits.m"))
	app := filepath.Join(g.dir, "waitsapp")

	// run runs a mode traced with env, the stream kept; it returns the trace and the stream's report
	run := func(t *testing.T, name, mode string, env map[string]string) (trace, *report.Report) {
		t.Helper()
		plain, _, err := g.run(t, false, "home", nil, nil, app, mode)
		if err != nil {
			t.Fatalf("waitsapp %s: %v", mode, err)
		}
		out := filepath.Join(g.dir, name+".json")
		all := map[string]string{"MSGTRACE_OUT": out, "MSGTRACE_KEEP_STREAM": "1"}
		for k, v := range env {
			all[k] = v
		}
		so, se, err := g.run(t, true, "home", all, nil, app, mode)
		if err != nil || so != plain {
			t.Fatalf("traced waitsapp %s: %v\nstdout %q, want %q\nstderr:\n%s", mode, err, so, plain, se)
		}
		return readTrace(t, out), waitsReport(t, out+".mtrace")
	}
	for _, c := range []struct {
		mode, wait, holderMethod, holderFrom string
	}{
		{"sync", "objc_sync_enter", "-[Index compact]", "owner"},
		{"nslock", "pthread_mutex_lock", "-[Index compact]", "owner"},
		{"condition", "pthread_cond_wait", "-[Index produce]", "release"},
	} {
		t.Run(c.mode, func(t *testing.T) {
			tr, rep := run(t, c.mode, c.mode, nil)
			if ws := tr.find("main", "-[App frame:] > wait "+c.wait); len(ws) != 1 {
				t.Errorf("%d 'wait %s' under -[App frame:] in the trace, want 1", len(ws), c.wait)
			}
			var hitch *report.ReportCall
			for i := range rep.Hitches {
				if rep.Hitches[i].Method == "-[App frame:]" {
					hitch = &rep.Hitches[i]
				}
			}
			if hitch == nil {
				t.Fatalf("no hitch -[App frame:] in %+v", rep.Hitches)
			}
			if len(hitch.Waits) != 1 {
				t.Fatalf("-[App frame:]'s waits %+v, want one", hitch.Waits)
			}
			w := hitch.Waits[0]
			if w.Primitive != c.wait || w.HolderThread != "indexer" || w.HolderMethod != c.holderMethod || w.HolderFrom != c.holderFrom ||
				w.DurNanos == 0 || w.DurNanos > hitch.DurNanos || hitch.WaitingNanos != w.DurNanos {
				t.Errorf("wait %+v (in %d ns), want %s held by indexer in %s (from the %s)", w, hitch.DurNanos, c.wait, c.holderMethod, c.holderFrom)
			}
			want := "waiting in " + c.wait + " "
			if !strings.Contains(hitch.Why, want) || !strings.Contains(hitch.Why, "thread indexer in "+c.holderMethod+" (enqueued by -[App scheduleIndex])") {
				t.Errorf("sentence %q, want %q and the holder", hitch.Why, want)
			}
			t.Logf("%s", hitch.Why)
		})
	}
	t.Run("uncontended", func(t *testing.T) {
		tr, rep := run(t, "uncontended", "uncontended", nil)
		for _, c := range tr.threads["main"] {
			if strings.HasPrefix(c.Name, "wait ") {
				t.Errorf("a wait recorded: %s under %s", c.Name, c.path())
			}
		}
		if n, _ := tr.count("main", "-[App frame:]"); n != 1 {
			t.Errorf("%d -[App frame:], want 1", n)
		}
		for _, h := range rep.Hitches {
			if len(h.Waits) > 0 {
				t.Errorf("hitch %s with waits %+v", h.Method, h.Waits)
			}
		}
	})
	t.Run("off", func(t *testing.T) {
		tr, _ := run(t, "off", "sync", map[string]string{"MSGTRACE_WAITS": "0"})
		if n, _ := tr.count("main", "wait objc_sync_enter"); n != 0 {
			t.Errorf("%d waits recorded under MSGTRACE_WAITS=0", n)
		}
		if n, _ := tr.count("main", "-[App frame:]"); n != 1 {
			t.Errorf("%d -[App frame:], want 1", n)
		}
	})
	// ring mode: the wait is in the snapshot with its holder, as calls are; MSGTRACE_MIN_US:
	// a wait of about 40 ms stays at 1 ms and goes at 1 s, as -[App frame:] itself does
	t.Run("ring", func(t *testing.T) {
		_, rep := run(t, "ring", "sync", map[string]string{"MSGTRACE_MODE": "ring", "MSGTRACE_MIN_US": "1000"})
		var found bool
		for _, h := range rep.Hitches {
			for _, w := range h.Waits {
				found = found || (w.Primitive == "objc_sync_enter" && w.HolderThread == "indexer" && w.HolderMethod == "-[Index compact]")
			}
		}
		if !found {
			t.Errorf("ring mode, MSGTRACE_MIN_US=1000: no objc_sync_enter wait held by indexer in -[Index compact] in %+v", rep.Hitches)
		}
		tr, _ := run(t, "min", "sync", map[string]string{"MSGTRACE_MIN_US": "1000000"})
		if n, _ := tr.count("main", "wait objc_sync_enter"); n != 0 {
			t.Errorf("MSGTRACE_MIN_US=1000000: %d waits of about 40 ms kept", n)
		}
	})
}

// TestAppleWaitsStandIn: the replacements of Apple's blocking calls (os_unfair_lock_lock,
// dispatch_sync_f, dispatch_semaphore_wait, dispatch_group_wait: waits.c) on Linux, against the
// stand-in of testdata/waits/standin_dispatch.c (futexes; its os_unfair_lock keeps the owner as
// Apple's does, by thread, with the no-waiters bit) that testdata/gnustep/waits_apple.m links:
// the same rebinding carries them (the slots are rebound by name wherever an image imports
// them), and the report names the wait under -[App frame:], with the holder where one is known:
// the lock's owner, the thread whose dispatch_semaphore_signal woke the waiter.
func TestAppleWaitsStandIn(t *testing.T) {
	testfiles.Slow(t, "builds and runs GNUstep programs")
	if runtime.GOARCH != "amd64" {
		t.Skip("Debian's GNUstep is installed for the host (amd64) only")
	}
	testfiles.NeedTools(t, "gnustep-config", "gcc")
	root := testfiles.Root(t)
	g := gnustep{dir: t.TempDir()}
	buildLib(t, "c-shared", filepath.Join(g.dir, "libmsgtrace.so"), "amd64", "gcc")
	g.lib = filepath.Join(g.dir, "libmsgtrace-preload.so")
	buildLoader(t, "gcc", g.lib)
	standin := filepath.Join(g.dir, "libstandin_dispatch.so")
	if b, err := exec.Command("gcc", "-O2", "-Wall", "-shared", "-fPIC", "-o", standin, filepath.Join(root, "testdata", "waits", "standin_dispatch.c")).CombinedOutput(); err != nil {
		t.Fatalf("building the stand-in: %v\n%s", err, b)
	}
	mustGNUstepCC(t, g.dir, "waitsapple", filepath.Join(root, "testdata", "gnustep", "waits_apple.m"), "-L"+g.dir, "-lstandin_dispatch", "-Wl,-rpath,"+g.dir)
	app := filepath.Join(g.dir, "waitsapple")
	for _, c := range []struct{ mode, wait, holderMethod string }{
		{"unfair", "os_unfair_lock_lock", "-[Index compact]"},
		{"sync", "dispatch_sync", ""}, // the block runs on the caller's thread: no holder
		{"semaphore", "dispatch_semaphore_wait", "-[Index produce]"},
		{"group", "dispatch_group_wait", ""},
	} {
		t.Run(c.mode, func(t *testing.T) {
			plain, _, err := g.run(t, false, "home", nil, nil, app, c.mode)
			if err != nil {
				t.Fatalf("waitsapple %s: %v", c.mode, err)
			}
			out := filepath.Join(g.dir, c.mode+".mtrace")
			so, se, err := g.run(t, true, "home", map[string]string{"MSGTRACE_OUT": out}, nil, app, c.mode)
			if err != nil || so != plain {
				t.Fatalf("traced waitsapple %s: %v\nstdout %q, want %q\nstderr:\n%s", c.mode, err, so, plain, se)
			}
			rep := waitsReport(t, out)
			if len(rep.Hitches) != 1 || rep.Hitches[0].Method != "-[App frame:]" || len(rep.Hitches[0].Waits) != 1 {
				t.Fatalf("hitches %+v, want -[App frame:] with one wait", rep.Hitches)
			}
			w := rep.Hitches[0].Waits[0]
			holder := ""
			if c.holderMethod != "" {
				holder = "indexer"
			}
			if w.Primitive != c.wait || w.HolderThread != holder || w.HolderMethod != c.holderMethod {
				t.Errorf("wait %+v, want %s held by %q in %q", w, c.wait, holder, c.holderMethod)
			}
			t.Logf("%s", rep.Hitches[0].Why)
		})
	}
}
