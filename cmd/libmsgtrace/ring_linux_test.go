//go:build linux

package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/msgtrace/msgtrace/internal/testfiles"
	"github.com/msgtrace/msgtrace/tracer/engine"
	"github.com/msgtrace/msgtrace/tracer/stream"
)

// testRingNoWait: in ring mode (the flight recorder) a thread that needs a chunk takes back a
// kept one itself: no thread ever waits, whatever the load, and what was overwritten is
// counted exactly (calls kept + calls the overwritten marks count = calls sent), every thread
// in time order, its last calls kept.
func testRingNoWait(t *testing.T, b built) {
	small := len(b.run) > 0 // under qemu: smaller counts
	calls := 2_000_000
	if small {
		calls = 300_000
	}
	n := strconv.Itoa(calls)
	for _, c := range []struct {
		name    string
		mb      string // MSGTRACE_BUFFER_MB, "" the default
		threads int    // threads sending
		args    []string
	}{
		{"soak4", "", 4, []string{"soak", "4", n}},
		{"soak4-1MiB", "1", 4, []string{"soak", "4", n}},
		{"soak1-1MiB", "1", 1, []string{"soak", "1", n}},
		{"churn4", "", 9, []string{"churn", "4", n}},
		{"churn4-1MiB", "1", 9, []string{"churn", "4", n}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "ring.mtrace")
			env := map[string]string{"MSGTRACE_OUT": out, "MSGTRACE_MODE": "ring"}
			if c.mb != "" {
				env["MSGTRACE_BUFFER_MB"] = c.mb
			}
			o, err := b.stress(env, c.args...).Output()
			var sent uint64
			if _, perr := fmt.Sscanf(string(o), "sent %d", &sent); err != nil || perr != nil {
				t.Fatalf("stress %v: %v\n%s", c.args, err, o)
			}
			st := streamOrder(t, out)
			ow := st.counts[stream.MarkOverwritten]
			if st.end == nil || st.end.Waits != 0 || st.marks[stream.MarkWait] != 0 || st.end.Lost != 0 {
				t.Errorf("end frame %+v, %d wait marks: a thread waited in ring mode", st.end, st.marks[stream.MarkWait])
			}
			if st.calls+ow != sent || (c.mb != "" && ow == 0) {
				t.Errorf("sent %d, kept %d + overwritten %d = %d", sent, st.calls, ow, st.calls+ow)
			}
			if int(st.marks[stream.MarkOverwritten]) > c.threads {
				t.Errorf("%d overwritten marks for %d threads", st.marks[stream.MarkOverwritten], c.threads)
			}
			s, tot := readStreams(t, out)
			if c.args[0] == "soak" && s.calls["-[Worker run:]"] != c.threads {
				t.Errorf("the threads' last calls are not all kept: %v", s.calls)
			}
			if tot.BadFrames != 0 || tot.TornBytes != 0 || tot.Unended != 0 {
				t.Errorf("totals %+v", tot)
			}
			t.Logf("ring, stress %v, pool %s MiB: %d sent, %d kept, %d overwritten, %d waits", c.args, c.mb, sent, st.calls, ow, st.end.Waits)
		})
	}
}

// streamDump says whether a file is a whole stream (it has its end frame) and the tick of its
// first clock frame (a new dump has a new one).
func streamDump(b []byte) (whole bool, tick uint64) {
	engine.ScanFrames(engine.Input{R: bytes.NewReader(b), Size: int64(len(b))}, func(kind uint8, off int64, p []byte) error {
		whole = whole || kind == stream.FrameEnd
		if kind == stream.FrameClock && tick == 0 && len(p) >= 8 {
			tick = binary.LittleEndian.Uint64(p)
		}
		return nil
	})
	return whole, tick
}

// cycleThreads reads a stream of stress cycle-ready frame by frame: per thread, the count of
// its overwritten mark and the selectors of the calls it keeps, in file order.
func cycleThreads(t *testing.T, path string) map[uint64]*cycleThread {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sels := map[uint64]string{}
	threads := map[uint64]*cycleThread{}
	_, err = engine.ScanFrames(engine.Input{R: bytes.NewReader(b), Size: int64(len(b))}, func(kind uint8, off int64, p []byte) error {
		switch kind {
		case stream.FrameMethods:
			for len(p) > 0 {
				var v [2]uint64
				var str [2]string
				for i := range v {
					x, n := binary.Uvarint(p)
					if n <= 0 {
						return fmt.Errorf("methods frame at %d", off)
					}
					v[i], p = x, p[n:]
				}
				for i := range str {
					l, n := binary.Uvarint(p)
					if n <= 0 || uint64(len(p)-n) < l {
						return fmt.Errorf("methods frame at %d", off)
					}
					str[i], p = string(p[n:n+int(l)]), p[n+int(l):]
				}
				sels[v[0]] = str[1]
			}
		case stream.FrameEvents:
			tid, _, evs, err := stream.DecodeEvents(p)
			if err != nil {
				return err
			}
			th := threads[tid]
			if th == nil {
				th = &cycleThread{}
				threads[tid] = th
			}
			for _, e := range evs {
				switch {
				case e.Type == stream.EventMark && stream.MarkKind(e.ID) == stream.MarkOverwritten:
					if len(th.sels) > 0 || th.overwritten > 0 {
						return fmt.Errorf("thread %d: an overwritten mark after its calls", tid)
					}
					th.overwritten = e.Count
				case e.Type != stream.EventMark:
					th.sels = append(th.sels, sels[e.ID])
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return threads
}

type cycleThread struct {
	overwritten uint64
	sels        []string
}

// checkCycle: every thread of a stress cycle-ready dump keeps its last calls and says exactly
// how many it overwrote: its n-th call (from 0) is m(n % 5), so the first one kept is
// m(overwritten % 5) and the others follow in turn, and none goes past the calls it sent.
func checkCycle(t *testing.T, name string, threads map[uint64]*cycleThread, perThread uint64) (kept, ow uint64) {
	t.Helper()
	for tid, th := range threads {
		if th.overwritten+uint64(len(th.sels)) > perThread {
			t.Errorf("%s: thread %d: %d overwritten + %d kept, of %d sent", name, tid, th.overwritten, len(th.sels), perThread)
		}
		for j, s := range th.sels {
			if want := fmt.Sprintf("m%d", (th.overwritten+uint64(j))%5); s != want {
				t.Errorf("%s: thread %d: %d overwritten, then call %d kept is %s, want %s", name, tid, th.overwritten, j, s, want)
				break
			}
		}
		kept += uint64(len(th.sels))
		ow += th.overwritten
	}
	return kept, ow
}

// testRingDumps: dumps taken (SIGUSR2) while the threads record and take chunks back — a dump
// racing the reclaims — are whole, readable, in order, and exact: per thread, what it kept
// follows exactly what its overwritten mark counts; the dump at exit keeps + overwrites every
// call sent; machobind trace converts a dump. Each dump reads rings of 8 MiB while 4 threads
// go round them.
func testRingDumps(t *testing.T, b built) {
	small := len(b.run) > 0
	calls, dumps := 40_000_000, 20
	if small {
		calls, dumps = 20_000_000, 10 // qemu: long enough for 3 dumps on an idle machine
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "ring.mtrace")
	cmd := b.stress(map[string]string{"MSGTRACE_OUT": out, "MSGTRACE_MODE": "ring", "MSGTRACE_BUFFER_MB": "8"},
		"cycle-ready", "4", strconv.Itoa(calls))
	pipe, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(pipe)
	if line, _ := rd.ReadString('\n'); line != "ready\n" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("stress cycle-ready printed %q", line)
	}
	perThread := uint64(calls)
	keptMin, keptMax := uint64(1<<63), uint64(0)
	var last uint64 // the previous dump's first tick
	// the dumps are only copied while the program runs, and checked once it ended: reading
	// each one as it came took longer than the program ran on an idle machine (2 dumps taken)
	var taken []string
	for k := 0; k < dumps; k++ {
		if err := cmd.Process.Signal(syscall.SIGUSR2); err != nil {
			break // it has exited
		}
		var data []byte
		resend := time.Now().Add(2 * time.Second)
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			d, err := os.ReadFile(out)
			if whole, tick := streamDump(d); err == nil && whole && tick != last {
				data, last = d, tick
				break
			}
			if time.Now().After(resend) { // qemu-user may lose a signal sent while threads start
				cmd.Process.Signal(syscall.SIGUSR2)
				resend = time.Now().Add(2 * time.Second)
			}
		}
		if data == nil {
			break // the program ended before the dump (its exit dump follows)
		}
		p := filepath.Join(dir, fmt.Sprintf("dump%d.mtrace", k))
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		taken = append(taken, p)
	}
	rest, _ := rd.ReadString('\n')
	if err := cmd.Wait(); err != nil {
		t.Fatalf("stress: %v", err)
	}
	if len(taken) < 3 {
		t.Errorf("only %d dumps taken while the program ran", len(taken))
	}
	for k, p := range taken {
		st := streamOrder(t, p)
		s, tot := readStreams(t, p)
		if tot.BadFrames != 0 || tot.TornBytes != 0 || len(s.perTID) == 0 || len(s.perTID) > 4 { // the first may come before every thread started
			t.Errorf("dump %d: totals %+v, threads %v", k, tot, s.perTID)
		}
		kept, _ := checkCycle(t, fmt.Sprintf("dump %d", k), cycleThreads(t, p), perThread)
		keptMin, keptMax = min(keptMin, kept), max(keptMax, kept)
		if st.end == nil || st.end.Waits != 0 {
			t.Errorf("dump %d: end frame %+v", k, st.end)
		}
	}
	var sent uint64
	fmt.Sscanf(rest, "sent %d", &sent)
	st := streamOrder(t, out)
	kept, ow := checkCycle(t, "at exit", cycleThreads(t, out), perThread)
	if sent != 4*perThread || st.calls != kept || kept+ow != sent || st.end == nil || st.end.Waits != 0 {
		t.Errorf("at exit: sent %d, kept %d + overwritten %d, end frame %+v", sent, kept, ow, st.end)
	}
	// the dump converts with the command line tool
	mb := filepath.Join(dir, "machobind")
	build := exec.Command("go", "build", "-o", mb, "./cmd/machobind")
	build.Dir = testfiles.Root(t)
	if o, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building machobind: %v\n%s", err, o)
	}
	for _, f := range []string{out, filepath.Join(dir, "dump0.mtrace")} {
		if _, err := os.Stat(f); err != nil {
			continue
		}
		j := f + ".json"
		if o, err := exec.Command(mb, "trace", f, "-o", j).CombinedOutput(); err != nil {
			t.Errorf("machobind trace %s: %v\n%s", filepath.Base(f), err, o)
		} else if tr := readTrace(t, j); len(tr.threads) == 0 {
			t.Errorf("machobind trace %s: no thread in %s", filepath.Base(f), j)
		}
	}
	t.Logf("%d dumps while 4 threads recorded into an 8 MiB ring (%d to %d calls kept: chunks taken back while a dump read them are left out); at exit %d kept + %d overwritten = %d sent",
		len(taken), keptMin, keptMax, kept, ow, sent)
}
