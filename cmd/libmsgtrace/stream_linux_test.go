//go:build linux

package main

import (
	"bufio"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/msgtrace/msgtrace/tracer/engine"
	"github.com/msgtrace/msgtrace/tracer/stream"
)

// tally is a engine.Sink that counts what a trace holds: calls per process, thread and name,
// calls still running, and marks.
type tally struct {
	thread   *stream.Thread
	header   *stream.Header
	calls    map[string]int            // name -> calls, every thread and process
	perPID   map[uint64]map[string]int // pid -> name -> calls
	perTID   map[uint64]int            // tid -> calls
	names    map[uint64]string         // tid -> thread name
	open     []string                  // "name@depth" of calls still running at the end
	unwound  int
	marks    map[stream.MarkKind]uint64 // kind -> total count (waits: how many)
	waitNs   uint64
	programs map[uint64]string
	instants map[uint64][]stream.Instant // pid -> the process's instants
	mains    map[uint64]bool             // tids of main threads
}

func newTally() *tally {
	return &tally{calls: map[string]int{}, perPID: map[uint64]map[string]int{}, perTID: map[uint64]int{},
		names: map[uint64]string{}, marks: map[stream.MarkKind]uint64{}, programs: map[uint64]string{},
		instants: map[uint64][]stream.Instant{}, mains: map[uint64]bool{}}
}

func (s *tally) BeginThread(h *stream.Header, t *stream.Thread) error {
	s.thread, s.header = t, h
	s.names[t.TID] = t.Name
	s.programs[h.PID] = h.Program
	s.instants[h.PID] = h.Instants
	if t.Main {
		s.mains[t.TID] = true
	}
	return nil
}
func (s *tally) Call(c *engine.Call) error {
	s.calls[c.Name]++
	if s.perPID[s.header.PID] == nil {
		s.perPID[s.header.PID] = map[string]int{}
	}
	s.perPID[s.header.PID][c.Name]++
	s.perTID[s.thread.TID]++
	if c.Flags&stream.FlagOpen != 0 {
		s.open = append(s.open, fmt.Sprintf("%s@%d", c.Name, c.Depth))
	}
	if c.Flags&stream.FlagUnwound != 0 {
		s.unwound++
	}
	return nil
}
func (s *tally) Needs() engine.Needs { return engine.Needs{} }
func (s *tally) Skip(int) error      { return nil }
func (s *tally) Mark(m *stream.Mark) error {
	if m.Kind == stream.MarkWait {
		s.marks[m.Kind]++
		s.waitNs += m.DurNanos
	} else {
		s.marks[m.Kind] += m.Count
	}
	return nil
}
func (s *tally) EndThread() error          { return nil }
func (s *tally) Close(engine.Totals) error { return nil }

// readStreams reads stream files into a tally.
func readStreams(t *testing.T, paths ...string) (*tally, engine.Totals) {
	t.Helper()
	var ins []engine.Input
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		st, _ := f.Stat()
		ins = append(ins, engine.Input{R: f, Size: st.Size(), Name: p})
	}
	s := newTally()
	tot, err := engine.ProcessStreams(ins, engine.Options{MaxDepth: -1}, s)
	if err != nil {
		t.Fatal(err)
	}
	return s, tot
}

// peekStream reads a stream a running program is writing: calls per name, and the calls it
// has open; ok is false while the file cannot be read yet.
func peekStream(path string) (map[string]int, []string, bool) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, false
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, false
	}
	s := newTally()
	if _, err := engine.ProcessStreams([]engine.Input{{R: f, Size: st.Size(), Name: path}}, engine.Options{MaxDepth: -1}, s); err != nil {
		return nil, nil, false
	}
	return s.calls, s.open, true
}

// stress runs the stress program with the library preloaded.
func (b built) stress(env map[string]string, args ...string) *exec.Cmd {
	e := map[string]string{"LD_PRELOAD": b.lib}
	for k, v := range env {
		e[k] = v
	}
	return b.command(e, "stress", args...)
}

// testStream: the recorder on real processes — a soak at defaults (nothing lost, memory
// bounded), drop mode counting exactly, kill -9 and a crash leaving what was running, wrappers
// that load the library too, forked and exec'd children.
func testStream(t *testing.T, b built) {
	small := len(b.run) > 0 // under qemu: smaller counts
	t.Run("soak", func(t *testing.T) {
		calls := 5_000_000
		if small {
			calls = 200_000
		}
		out := filepath.Join(t.TempDir(), "soak.mtrace")
		rssQuiet, _ := peakRSS(t, b, map[string]string{"MSGTRACE_OUT": out}, "quiet")
		if _, err := os.Stat(out); err == nil {
			t.Errorf("a process that sent nothing left %s", out)
		}
		sent, rss, s, tot := soak(t, b, out, nil, calls)
		streamOrder(t, out)
		if want := 4 * (1 + 2*(calls/2)); sent != want || int(tot.Calls) != sent {
			t.Fatalf("sent %d (want %d), the stream holds %d calls (%+v)", sent, want, tot.Calls, tot)
		}
		if s.calls["-[Worker run:]"] != 4 || s.calls["-[Worker step:]"] != 4*(calls/2) || s.calls["-[Worker leaf]"] != 4*(calls/2) {
			t.Errorf("per-method counts %v", s.calls)
		}
		if tot.Dropped != 0 || tot.Unended != 0 || tot.BadFrames != 0 || tot.TornBytes != 0 || len(s.open) != 0 || s.marks[stream.MarkLost] != 0 {
			t.Errorf("totals %+v, open %v, marks %v", tot, s.open, s.marks)
		}
		for tid, n := range s.perTID {
			if n != 1+2*(calls/2) || !strings.HasPrefix(s.names[tid], "soak-") {
				t.Errorf("thread %d (%q): %d calls", tid, s.names[tid], n)
			}
		}
		st, _ := os.Stat(out)
		bound := rssQuiet + 32<<10 + 4*1<<10 // KiB: the library's fixed cost + the pool + 1 MiB a thread
		if small {
			// qemu's own memory grows with the threads it runs (translated code, per-thread
			// state): about 1 MiB each, which the quiet run, one thread, does not show
			bound += 4 << 10
		}
		t.Logf("soak: %d calls, %.2f bytes/call, %d waits for a chunk (%.1f ms), peak RSS %d KiB (sending nothing: %d KiB, bound %d KiB)",
			tot.Calls, float64(st.Size())/float64(tot.Calls), s.marks[stream.MarkWait], float64(s.waitNs)/1e6, rss, rssQuiet, bound)
		if rss > bound {
			t.Errorf("peak RSS %d KiB over the bound %d KiB", rss, bound)
		}
		if bpc := float64(st.Size()) / float64(tot.Calls); bpc > 12 {
			t.Errorf("%.2f bytes per call", bpc)
		}
	})
	t.Run("order", func(t *testing.T) { testOrder(t, b) })
	t.Run("drop", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "drop.mtrace")
		calls := 2_000_000
		if small {
			calls = 200_000
		}
		sent, _, s, tot := soak(t, b, out, map[string]string{"MSGTRACE_FULL": "drop", "MSGTRACE_BUFFER_MB": "1"}, calls)
		streamOrder(t, out)
		if int(tot.Calls+tot.Dropped) != sent {
			t.Fatalf("recorded %d + dropped %d != sent %d", tot.Calls, tot.Dropped, sent)
		}
		if tot.Dropped == 0 || s.marks[stream.MarkLost] == 0 || s.marks[stream.MarkLost] > tot.Dropped {
			t.Errorf("dropped %d, lost marks count %d", tot.Dropped, s.marks[stream.MarkLost])
		}
		t.Logf("drop: %d sent, %d recorded, %d dropped, %d of them marked where they happened", sent, tot.Calls, tot.Dropped, s.marks[stream.MarkLost])
	})
	t.Run("ring", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "ring.mtrace")
		calls := 2_000_000
		if small {
			calls = 200_000
		}
		sent, _, s, tot := soak(t, b, out, map[string]string{"MSGTRACE_MODE": "ring", "MSGTRACE_BUFFER_MB": "2"}, calls)
		streamOrder(t, out)
		st, _ := os.Stat(out)
		// the ring keeps at most 2 MiB of 32-byte records; what it overwrote is counted exactly
		ow := s.marks[stream.MarkOverwritten]
		if int(tot.Calls+ow) != sent || tot.Calls > 2<<20/32 || ow == 0 || tot.Dropped != 0 {
			t.Fatalf("ring: sent %d, kept %d, overwritten %d (%+v)", sent, tot.Calls, ow, tot)
		}
		// the last calls are the ones kept: every thread's outermost call, which ends last
		if s.calls["-[Worker run:]"] != 4 {
			t.Errorf("ring lacks the threads' last calls: %v", s.calls)
		}
		t.Logf("ring: %d sent, last %d kept (%d bytes), %d overwritten", sent, tot.Calls, st.Size(), ow)
	})
	t.Run("ring-nowait", func(t *testing.T) { testRingNoWait(t, b) })
	t.Run("ring-dumps", func(t *testing.T) { testRingDumps(t, b) })
	t.Run("diskfull", func(t *testing.T) {
		// the stream file is /dev/full: every write fails with ENOSPC. The program runs and
		// exits as without us; the library counts and reports what it could not write.
		dir := t.TempDir()
		out := filepath.Join(dir, "full.mtrace")
		if err := os.Symlink("/dev/full", out); err != nil {
			t.Fatal(err)
		}
		cmd := b.stress(map[string]string{"MSGTRACE_OUT": out}, "soak", "2", "20000")
		o, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(o), "sent 40002") || !strings.Contains(string(o), "bytes could not be written") {
			t.Errorf("stress soak writing to /dev/full: %v\n%s", err, o)
		}
	})
	t.Run("kill9", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "hang.json")
		cmd := b.stress(map[string]string{"MSGTRACE_OUT": out}, "hang")
		pipe, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, _ := bufio.NewReader(pipe).ReadString('\n')
		if line != "hanging\n" {
			t.Fatalf("stress hang printed %q", line)
		}
		// the drain writes what is open within its period (100 ms); a loaded machine (qemu,
		// CI) may run it late, so the test waits until the file holds it (no timed
		// assertion), then kills: what the file held must survive the kill intact
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if calls, open, ok := peekStream(out + ".mtrace"); ok && calls["-[App work]"] == 100 && len(open) == 2 {
				break
			}
		}
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		s, tot := readStreams(t, out+".mtrace")
		if s.calls["-[App work]"] != 100 || tot.Unended != 1 {
			t.Errorf("after kill -9: %v, totals %+v", s.calls, tot)
		}
		if strings.Join(s.open, ",") != "-[App hang]@0,-[App wait]@1" && strings.Join(s.open, ",") != "-[App wait]@1,-[App hang]@0" {
			t.Errorf("calls running at the kill: %v", s.open)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("a killed process converted its trace")
		}
		// a busy program killed at a random moment: the file converts, nothing damaged, the
		// threads' outermost calls still running
		busy := filepath.Join(t.TempDir(), "busy.mtrace")
		cmd = b.stress(map[string]string{"MSGTRACE_OUT": busy}, "soak", "4", "400000000")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// the program is sending once its stream holds calls (qemu starts slowly; the file is
		// created, its prologue written, before the first chunk's calls are encoded)
		for i := 0; i < 200; i++ {
			if calls, _, ok := peekStream(busy); ok && len(calls) > 0 {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		delay := time.Duration(rand.Intn(700)) * time.Millisecond
		time.Sleep(delay)
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		s, tot = readStreams(t, busy)
		streamOrder(t, busy)
		if tot.BadFrames != 0 || tot.Unended != 1 || tot.Calls == 0 || s.calls["-[Worker run:]"] > 4 {
			t.Errorf("killed after %v: totals %+v, calls %v", delay, tot, s.calls)
		}
		t.Logf("killed after %v: %d calls read, %d still running, %d torn bytes", delay, tot.Calls, tot.Open, tot.TornBytes)
	})
	t.Run("crash", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "crash.mtrace")
		cmd := b.stress(map[string]string{"MSGTRACE_OUT": out}, "crash")
		o, err := cmd.CombinedOutput()
		ee, ok := err.(*exec.ExitError)
		if !ok || !strings.Contains(string(o), "crashing") {
			t.Fatalf("stress crash: %v\n%s", err, o)
		}
		if ws, ok := ee.Sys().(syscall.WaitStatus); !ok || (ws.Signal() != syscall.SIGSEGV && ee.ExitCode() != 139) {
			t.Errorf("stress crash ended with %v, want SIGSEGV (our handler re-raises)", err)
		}
		s, tot := readStreams(t, out)
		streamOrder(t, out)
		if s.calls["-[App work]"] != 10 || strings.Join(s.open, ",") != "-[App crash]@0" || tot.Unended != 1 {
			t.Errorf("after the crash: calls %v, open %v, totals %+v", s.calls, s.open, tot)
		}
	})
	t.Run("crash-ours", func(t *testing.T) { testCrashOurs(t, b) })
	t.Run("crash-program", func(t *testing.T) { testCrashProgram(t, b) })
	t.Run("crash-drain", func(t *testing.T) { testCrashDrain(t, b) })
	t.Run("crash-stub", func(t *testing.T) { testCrashStub(t, b) })
	t.Run("wrappers", func(t *testing.T) {
		if small {
			t.Skip("the wrappers are host programs: under qemu they cannot load the arm64 library")
		}
		dir := t.TempDir()
		stressBin := filepath.Join(b.dir, "stress")
		for name, wrap := range map[string][]string{
			"timeout": {"timeout", "120"},
			"time":    {"/usr/bin/time", "-o", filepath.Join(dir, "time.txt")},
			"sh":      {"sh", "-c", `"$0" "$@"; true`},
		} {
			out := filepath.Join(dir, name+".json")
			cmd := exec.Command(wrap[0], append(wrap[1:], stressBin, "child")...)
			cmd.Env = append(os.Environ(), "MSGTRACE_OUT="+out, "MSGTRACE_QUIET=1", "LD_PRELOAD="+b.lib)
			if o, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", name, err, o)
			}
			tr := readTrace(t, out)
			if n, _ := tr.count("main", "-[Child work]"); n != 40 {
				t.Errorf("%s: the program's trace holds %d of its 40 calls", name, n)
			}
		}
	})
	t.Run("samename", func(t *testing.T) {
		if small {
			t.Skip("exec of /proc/self/exe needs binfmt_misc under qemu-user")
		}
		sameName(t, b)
	})
	t.Run("rerun", func(t *testing.T) { rerun(t, b) })
	t.Run("fork", func(t *testing.T) {
		if small {
			t.Skip("exec of /proc/self/exe needs binfmt_misc under qemu-user")
		}
		dir := t.TempDir()
		cmd := b.stress(map[string]string{"MSGTRACE_OUT": filepath.Join(dir, "t-%p.mtrace")}, "fork")
		if o, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(o), "forked 0") {
			t.Fatalf("stress fork: %v\n%s", err, o)
		}
		files, _ := filepath.Glob(filepath.Join(dir, "t-*.mtrace"))
		if len(files) != 3 {
			t.Fatalf("files %v, want one per process (parent, forked child, exec'd child)", files)
		}
		s, tot := readStreams(t, files...)
		for _, f := range files {
			streamOrder(t, f)
		}
		var got []string
		for _, m := range s.perPID {
			got = append(got, fmt.Sprint(m))
		}
		want := map[string]bool{"map[-[App work]:40]": true, "map[-[Child work]:30]": true, "map[-[Child work]:40]": true}
		for _, g := range got {
			if !want[g] {
				t.Errorf("a process's calls: %s (all: %v)", g, got)
			}
		}
		if tot.Processes != 3 || tot.Unended != 0 || len(got) != 3 {
			t.Errorf("totals %+v", tot)
		}
	})
}

// sameName: processes that share one MSGTRACE_OUT without %p (an app and a daemon it starts, a
// child exec'd with the parent's environment) never write over each other: a live stream is
// never truncated by another process, and each process's trace lands under its own name.
func sameName(t *testing.T, b built) {
	dir := t.TempDir()
	out := filepath.Join(dir, "t.json")
	env := map[string]string{"MSGTRACE_OUT": out, "MSGTRACE_QUIET": "1"}
	// a process whose stream is live and open (it hangs in a traced call)...
	hang := b.stress(env, "hang")
	pipe, _ := hang.StdoutPipe()
	if err := hang.Start(); err != nil {
		t.Fatal(err)
	}
	defer hang.Process.Kill()
	if line, _ := bufio.NewReader(pipe).ReadString('\n'); line != "hanging\n" {
		t.Fatalf("stress hang printed %q", line)
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if calls, open, ok := peekStream(out + ".mtrace"); ok && calls["-[App work]"] == 100 && len(open) == 2 {
			break
		}
	}
	// ... and another started beside it with the same name, which runs to its end
	child := b.stress(env, "child")
	if o, err := child.CombinedOutput(); err != nil {
		t.Fatalf("stress child: %v\n%s", err, o)
	}
	mine := filepath.Join(dir, fmt.Sprintf("t.%d.json", child.Process.Pid))
	if n, _ := readTrace(t, mine).count("main", "-[Child work]"); n != 40 {
		t.Errorf("the second process's trace %s holds %d of its 40 calls", mine, n)
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("the second process wrote the first one's name %s", out)
	}
	hang.Process.Signal(syscall.SIGKILL)
	hang.Wait()
	s, tot := readStreams(t, out+".mtrace")
	if s.calls["-[App work]"] != 100 || tot.Unended != 1 || tot.BadFrames != 0 || tot.Processes != 1 {
		t.Errorf("the first process's stream after the second ran: %v, totals %+v", s.calls, tot)
	}
	// a child exec'd with its parent's environment, the parent traced too: both traces kept
	// (the parent's under the plain name unless the child's run ended before the parent's
	// stream existed), the forked child's stream under its pid
	dir = t.TempDir()
	out = filepath.Join(dir, "t.json")
	cmd := b.stress(map[string]string{"MSGTRACE_OUT": out, "MSGTRACE_QUIET": "1"}, "fork")
	if o, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(o), "forked 0") {
		t.Fatalf("stress fork: %v\n%s", err, o)
	}
	traces, _ := filepath.Glob(filepath.Join(dir, "t*.json"))
	var got []string
	for _, f := range traces {
		tr := readTrace(t, f)
		app, _ := tr.count("main", "-[App work]")
		kid, _ := tr.count("main", "-[Child work]")
		got = append(got, fmt.Sprintf("app %d child %d", app, kid))
	}
	sort.Strings(got)
	if strings.Join(got, ", ") != "app 0 child 40, app 40 child 0" {
		t.Errorf("traces %v hold %v, want the parent's 40 calls and the exec'd child's 40", traces, got)
	}
	if streams, _ := filepath.Glob(filepath.Join(dir, "t.json.*.mtrace")); len(streams) != 1 {
		t.Errorf("forked child's streams: %v, want one", streams)
	} else if s, _ := readStreams(t, streams[0]); s.calls["-[Child work]"] != 30 {
		t.Errorf("forked child's stream: %v", s.calls)
	}
}

// rerun: a run that finds an earlier run's stream under its name replaces it with a new file
// (the old one's mode kept, nothing left beside it), and one whose old file has another name
// linked to it truncates it in place (the other name shows the new stream); either way the
// stream holds this run's calls alone.
func rerun(t *testing.T, b built) {
	dir := t.TempDir()
	out := filepath.Join(dir, "t.mtrace")
	run := func() os.FileInfo {
		t.Helper()
		if o, err := b.stress(map[string]string{"MSGTRACE_OUT": out, "MSGTRACE_QUIET": "1"}, "child").CombinedOutput(); err != nil {
			t.Fatalf("stress child: %v\n%s", err, o)
		}
		if s, tot := readStreams(t, out); s.calls["-[Child work]"] != 40 || tot.Processes != 1 || tot.BadFrames != 0 {
			t.Errorf("the stream holds %v, totals %+v: want this run's 40 calls alone", s.calls, tot)
		}
		st, err := os.Stat(out)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	first := run()
	if err := os.Chmod(out, 0o600); err != nil {
		t.Fatal(err)
	}
	second := run()
	if os.SameFile(first, second) {
		t.Errorf("the earlier run's stream was truncated in place, not replaced")
	}
	if second.Mode().Perm() != 0o600 {
		t.Errorf("the new stream's mode is %v, want the old one's 0600", second.Mode().Perm())
	}
	if left, _ := os.ReadDir(dir); len(left) != 1 {
		t.Errorf("files beside the stream: %v", left)
	}
	link := filepath.Join(dir, "link.mtrace")
	if err := os.Link(out, link); err != nil {
		t.Fatal(err)
	}
	third := run()
	if l, err := os.Stat(link); err != nil || !os.SameFile(second, third) || !os.SameFile(third, l) {
		t.Errorf("a stream with another name linked to it was not truncated in place")
	}
}

// soak runs "stress soak 4 calls" with the stream at out and env's variables, and returns how
// many calls it sent, its peak RSS in KiB and what the stream holds.
func soak(t *testing.T, b built, out string, env map[string]string, calls int) (sent, rss int, s *tally, tot engine.Totals) {
	t.Helper()
	e := map[string]string{"MSGTRACE_OUT": out}
	for k, v := range env {
		e[k] = v
	}
	rss, stdout := peakRSS(t, b, e, "soak", "4", strconv.Itoa(calls))
	fmt.Sscanf(stdout, "sent %d", &sent)
	s, tot = readStreams(t, out)
	return sent, rss, s, tot
}

// peakRSS runs stress under /usr/bin/time and returns its peak RSS in KiB and its stdout.
func peakRSS(t *testing.T, b built, env map[string]string, args ...string) (int, string) {
	t.Helper()
	timeOut := filepath.Join(t.TempDir(), "time.txt")
	cmd := b.stress(env, args...)
	cmd.Args = append([]string{"/usr/bin/time", "-f", "%M", "-o", timeOut}, cmd.Args...)
	cmd.Path = "/usr/bin/time"
	o, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %v\n%s", cmd.Args, err, o)
	}
	tb, _ := os.ReadFile(timeOut)
	lines := strings.Fields(string(tb))
	if len(lines) == 0 {
		t.Fatalf("no RSS from /usr/bin/time: %q", tb)
	}
	kb, _ := strconv.Atoi(lines[len(lines)-1])
	return kb, string(o)
}

// ran is how a process ended: its stdout, its stderr, and the signal that killed it (or its
// exit status).
type ran struct {
	stdout, stderr string
	signal         syscall.Signal
	status         int
}

func runStress(t *testing.T, b built, env map[string]string, args ...string) ran {
	t.Helper()
	cmd := b.command(env, "stress", args...)
	var so, se strings.Builder
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	r := ran{stdout: so.String(), stderr: se.String()}
	if len(b.run) > 0 { // qemu-user says so when the guest dies of a signal (it then dies of it too)
		var keep []string
		for _, l := range strings.SplitAfter(r.stderr, "\n") {
			if !strings.HasPrefix(l, "qemu: uncaught target signal ") {
				keep = append(keep, l)
			}
		}
		r.stderr = strings.Join(keep, "")
	}
	if ee, ok := err.(*exec.ExitError); ok {
		ws := ee.Sys().(syscall.WaitStatus)
		if ws.Signaled() {
			r.signal = ws.Signal()
		}
		r.status = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("stress %v: %v", args, err)
	}
	return r
}

// crashLines are the lines the library wrote about a crash in its own code.
func crashLines(stderr string) []string {
	var out []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "msgtrace: ") && strings.Contains(l, "in the tracer's own code") {
			out = append(out, l)
		}
	}
	return out
}

// crashInstants are the crash instants of the stream's processes.
func crashInstants(s *tally) []stream.Instant {
	var out []stream.Instant
	for _, ins := range s.instants {
		for _, in := range ins {
			if in.Kind == stream.InstantCrash {
				out = append(out, in)
			}
		}
	}
	return out
}

// testCrashOurs: a send to a receiver that is no object (0x1000) faults in objc_msgSend
// untraced and in the interposer traced. The program's own SIGSEGV handler, set after the
// library installed its own, runs as untraced (same output, same death by SIGSEGV), and the
// library says where it crashed: one line naming the interposer, the selector and the
// receiver, and a crash instant on the thread in the trace, after the calls that ended.
func testCrashOurs(t *testing.T, b built) {
	plain := runStress(t, b, nil, "badsend")
	out := filepath.Join(t.TempDir(), "badsend.mtrace")
	traced := runStress(t, b, map[string]string{"LD_PRELOAD": b.lib, "MSGTRACE_OUT": out}, "badsend")
	if plain.stdout != "crashing\nhandled SIGSEGV\n" || plain.signal != syscall.SIGSEGV || plain.stderr != "" {
		t.Fatalf("untraced: %+v", plain)
	}
	if traced.stdout != plain.stdout || traced.signal != plain.signal || traced.status != plain.status {
		t.Errorf("traced ended otherwise than untraced: %+v, untraced %+v", traced, plain)
	}
	lines := crashLines(traced.stderr)
	if len(lines) != 1 || !strings.Contains(lines[0], "SIGSEGV in the tracer's own code: msgtrace_objc_msgSend+0x") ||
		!strings.Contains(lines[0], "(interposer) sending selector work (0x") || !strings.Contains(lines[0], "to receiver 0x1000 on thread ") {
		t.Errorf("want one line naming the interposer, -work and 0x1000; stderr:\n%s", traced.stderr)
	}
	if strings.Count(traced.stderr, "\n") != 1 {
		t.Errorf("more than the line on stderr:\n%s", traced.stderr)
	}
	s, tot := readStreams(t, out)
	ins := crashInstants(s)
	if s.calls["-[App work]"] != 10 || tot.BadFrames != 0 || len(ins) != 1 ||
		!strings.HasPrefix(ins[0].Name, "SIGSEGV in msgtrace_objc_msgSend+0x") || !strings.HasSuffix(ins[0].Name, ": selector work, receiver 0x1000") {
		t.Errorf("trace: calls %v, crash instants %+v, totals %+v", s.calls, ins, tot)
	}
	if len(ins) == 1 && !s.mains[ins[0].TID] {
		t.Errorf("the crash instant is on thread %d, want the main thread (%v)", ins[0].TID, s.mains)
	}
	t.Logf("%s", lines)
}

// testCrashProgram: a fault in the program's own code (inside a traced call), with the
// program's handler set: nothing from the library, everything as untraced.
func testCrashProgram(t *testing.T, b built) {
	plain := runStress(t, b, nil, "owncrash")
	out := filepath.Join(t.TempDir(), "owncrash.mtrace")
	traced := runStress(t, b, map[string]string{"LD_PRELOAD": b.lib, "MSGTRACE_OUT": out}, "owncrash")
	if plain.stdout != "crashing\nhandled SIGSEGV\n" || plain.signal != syscall.SIGSEGV {
		t.Fatalf("untraced: %+v", plain)
	}
	if traced != plain {
		t.Errorf("traced %+v, untraced %+v", traced, plain)
	}
	s, _ := readStreams(t, out)
	if ins := crashInstants(s); len(ins) != 0 || s.calls["-[App work]"] != 10 {
		t.Errorf("trace: crash instants %+v, calls %v", ins, s.calls)
	}
}

// testCrashDrain: the drain faults naming a class whose name cannot be read (a program's
// damage the untraced run never reads): the line says it was the drain thread, and the crash
// instant, appended to the stream by the crashing drain itself, follows the calls it wrote.
func testCrashDrain(t *testing.T, b built) {
	out := filepath.Join(t.TempDir(), "badclass.mtrace")
	traced := runStress(t, b, map[string]string{"LD_PRELOAD": b.lib, "MSGTRACE_OUT": out}, "badclass")
	lines := crashLines(traced.stderr)
	if traced.signal != syscall.SIGSEGV || len(lines) != 1 || !strings.Contains(lines[0], "on the tracer's drain thread") {
		t.Fatalf("traced: %+v", traced)
	}
	s, tot := readStreams(t, out)
	ins := crashInstants(s)
	if s.calls["-[App work]"] != 10 || len(ins) != 1 || !strings.HasPrefix(ins[0].Name, "SIGSEGV in ") {
		t.Errorf("trace: calls %v, crash instants %+v, totals %+v", s.calls, ins, tot)
	}
	t.Logf("%s", lines)
}

// testCrashStub: a method that returns with rbx / x19 (which the ABI says a callee keeps, and
// the return stub holds its shadow entry in) overwritten makes the return stub trap at once
// (ud2: SIGILL; brk: SIGTRAP): the line names the stub and, from the thread's shadow stack, the
// call returning.
func testCrashStub(t *testing.T, b built) {
	out := filepath.Join(t.TempDir(), "clobber.mtrace")
	traced := runStress(t, b, map[string]string{"LD_PRELOAD": b.lib, "MSGTRACE_OUT": out}, "clobber")
	lines := crashLines(traced.stderr)
	trap := map[string]syscall.Signal{"amd64": syscall.SIGILL, "arm64": syscall.SIGTRAP}[b.goarch]
	if traced.signal != trap || len(lines) != 1 || !strings.Contains(lines[0], ": msgtrace_after+0x") ||
		!strings.Contains(lines[0], "(return stub) returning from selector clobber (0x") || !strings.Contains(lines[0], " of class App on thread ") {
		t.Fatalf("traced: %+v", traced)
	}
	s, _ := readStreams(t, out)
	if ins := crashInstants(s); len(ins) != 1 || !strings.HasSuffix(ins[0].Name, ": selector clobber of class App") {
		t.Errorf("crash instants %+v", ins)
	}
	t.Logf("%s", lines)
}
