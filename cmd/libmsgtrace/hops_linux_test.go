//go:build linux

package main

import (
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/msgtrace/msgtrace/internal/testfiles"
	"github.com/msgtrace/msgtrace/tracer/engine"
	"github.com/msgtrace/msgtrace/tracer/stream"
)

// hopSink keeps every call and mark of a trace, with its thread's name.
type hopSink struct {
	calls []hopCall
	marks []hopMark
}

type hopCall struct {
	name, thread string
	start, end   uint64
	depth        int
}

type hopMark struct {
	kind   stream.MarkKind
	id     uint64
	thread string
	at     uint64
}

func (s *hopSink) BeginThread(*stream.Header, *stream.Thread) error { return nil }

// threadName is the thread's name ("main" for the main thread), or its id.
func threadName(t *stream.Thread) string {
	if t.Main {
		return "main"
	}
	if t.Name != "" {
		return t.Name
	}
	return strconv.FormatUint(t.TID, 10)
}
func (s *hopSink) Call(c *engine.Call) error {
	s.calls = append(s.calls, hopCall{c.Name, threadName(c.Thread), c.StartNanos, c.StartNanos + c.DurNanos, c.Depth})
	return nil
}
func (s *hopSink) Skip(int) error      { return nil }
func (s *hopSink) Needs() engine.Needs { return engine.Needs{} }
func (s *hopSink) Mark(m *stream.Mark) error {
	s.marks = append(s.marks, hopMark{m.Kind, m.Count, threadName(m.Thread), m.StartNanos})
	return nil
}
func (s *hopSink) EndThread() error          { return nil }
func (s *hopSink) Close(engine.Totals) error { return nil }

// innermost is the deepest call of the thread that encloses the moment, or "".
func (s *hopSink) innermost(thread string, at uint64) string {
	best, depth := "", -1
	for _, c := range s.calls {
		if c.thread == thread && c.start <= at && at <= c.end && c.depth > depth {
			best, depth = c.name, c.depth
		}
	}
	return best
}

// within is the calls of the thread that start inside [from, to], outermost first.
func (s *hopSink) within(thread string, from, to uint64) []string {
	var in []hopCall
	for _, c := range s.calls {
		if c.thread == thread && c.start >= from && c.end <= to {
			in = append(in, c)
		}
	}
	sort.SliceStable(in, func(i, j int) bool { return in[i].depth < in[j].depth })
	var names []string
	for _, c := range in {
		names = append(names, c.name)
	}
	return names
}

// hop is one work item as the marks tell it: where it was enqueued, where it ran.
type hop struct {
	enqThread, enqIn string // the enqueuing thread and its innermost call at the enqueue
	runThread        string
	ran              []string // calls inside the execution (begin..end), outermost first
	begins, ends     int
}

func (s *hopSink) hops() map[uint64]*hop {
	hs := map[uint64]*hop{}
	get := func(id uint64) *hop {
		if hs[id] == nil {
			hs[id] = &hop{}
		}
		return hs[id]
	}
	begin := map[uint64]hopMark{}
	for _, m := range s.marks {
		switch m.kind {
		case stream.MarkHopEnqueue:
			h := get(m.id)
			h.enqThread, h.enqIn = m.thread, s.innermost(m.thread, m.at)
		case stream.MarkHopBegin:
			get(m.id).begins++
			begin[m.id] = m
		case stream.MarkHopEnd:
			h := get(m.id)
			h.ends++
			if b, ok := begin[m.id]; ok && b.thread == m.thread {
				h.runThread = m.thread
				h.ran = append(h.ran, s.within(m.thread, b.at, m.at)...)
			}
		}
	}
	return hs
}

// TestGNUstepHopsRecorded runs a gcc + gnustep-base program that hands work to a worker
// NSThread (detachNewThreadSelector:, performSelector:onThread: with waitUntilDone: NO and YES),
// to an NSOperationQueue, and to the main run loop (performSelector:withObject:afterDelay:, a
// repeating NSTimer, an NSNotificationQueue post), preloaded at the defaults: each work item's
// enqueue is marked inside the app method that enqueued it, on its thread, and its execution,
// on the thread that ran it, brackets the app method it ran, under the same id; with
// MSGTRACE_FLOWS=0 there is no hop at all.
func TestGNUstepHopsRecorded(t *testing.T) {
	testfiles.Slow(t, "builds and runs a GNUstep program")
	testfiles.NeedTools(t, "gnustep-config", "gcc")
	root := testfiles.Root(t)
	dir := t.TempDir()
	mustGNUstepCC(t, dir, "hops", filepath.Join(root, "testdata", "gnustep", "hops.m"))
	g := gnustep{dir: dir, lib: filepath.Join(root, "bin", "libmsgtrace-preload.so")}
	if _, err := os.Stat(g.lib); err != nil {
		t.Skip("bin/libmsgtrace-preload.so not built (make build)")
	}
	run := func(name string, env map[string]string) *hopSink {
		out := filepath.Join(dir, name+".mtrace")
		env["MSGTRACE_OUT"] = out
		so, se, err := g.run(t, true, "home", env, nil, filepath.Join(dir, "hops"))
		if err != nil || !strings.Contains(so, "done") {
			t.Fatalf("hops: %v\n%s\n%s", err, so, se)
		}
		f, err := os.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		var s hopSink
		if _, err := engine.Process(f, engine.Options{MaxDepth: -1}, &s); err != nil {
			t.Fatal(err)
		}
		return &s
	}
	s := run("on", map[string]string{})
	hs := s.hops()
	// each work item: the app method that enqueued it, the thread and app method that ran it
	want := []struct{ enq, enqThread, runThread, ran string }{
		{"-[App startWorker]", "main", "worker", "-[Worker loop:]"},
		{"-[App schedulePerform]", "main", "worker", "-[Worker performed:]"},
		{"-[App schedulePerformWait]", "main", "worker", "-[Worker performedWait:]"},
		{"-[App scheduleOperation]", "main", "", "-[Worker operated:]"}, // a queue's thread
		{"-[App scheduleDelayed]", "main", "main", "-[App delayedRan:]"},
		{"-[App scheduleTimer]", "main", "main", "-[App ticked:]"},
		{"-[App scheduleNote]", "main", "main", "-[App noted:]"},
		{"-[App stopWorker]", "main", "worker", "-[Worker stop:]"},
	}
	for _, w := range want {
		found := false
		for id, h := range hs {
			if h.enqIn != w.enq || h.enqThread != w.enqThread || !contains(h.ran, w.ran) {
				continue
			}
			if w.runThread != "" && h.runThread != w.runThread {
				t.Errorf("hop %d from %s ran %s on %q, want %q", id, w.enq, w.ran, h.runThread, w.runThread)
			}
			if w.ran == "-[App ticked:]" && h.begins != 2 {
				t.Errorf("the repeating timer's hop %d began %d times, want 2 (one per firing)", id, h.begins)
			}
			found = true
		}
		if !found {
			t.Errorf("no hop from %s (thread %s) to %s", w.enq, w.enqThread, w.ran)
		}
	}
	if t.Failed() || testing.Verbose() {
		for id, h := range hs {
			t.Logf("hop %d: enqueued on %q in %s; ran on %q: %v (%d begins, %d ends)", id, h.enqThread, h.enqIn, h.runThread, h.ran, h.begins, h.ends)
		}
	}
	// a work item that never returns has no end: the operation queue's threads leave their
	// -[NSThread main] by +[NSThread exit]
	for id, h := range hs {
		if h.ends > h.begins {
			t.Errorf("hop %d: %d begins, %d ends", id, h.begins, h.ends)
		}
	}

	off := run("off", map[string]string{"MSGTRACE_FLOWS": "0"})
	if n := len(off.hops()); n != 0 {
		t.Errorf("MSGTRACE_FLOWS=0: %d hops recorded, want none", n)
	}
	if len(off.calls) == 0 {
		t.Errorf("MSGTRACE_FLOWS=0: no calls recorded")
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
