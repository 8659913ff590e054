//go:build linux

package main

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"
	"github.com/msgtrace/msgtrace/internal/testfiles"
	"github.com/msgtrace/msgtrace/tracer/engine"
	"github.com/msgtrace/msgtrace/tracer/stream"
	"google.golang.org/protobuf/encoding/protowire"
)

// TestOneLongCallAtScale records a real program nobody here wrote the runtime of at the scale
// users reach, its whole run one long outermost call as a GUI application's run loop is:
// testdata/gnustep/oneloop.m on Debian's gnustep-base (gcc's GNU runtime), every method
// instrumented (MSGTRACE_METHODS=all), at two sizes (about 1 M and 4 M calls, a second NSThread
// whose work is one call too). Each stream is converted to every format by `machobind trace`
// in a child process: the converter's peak RSS must not grow with the number of calls, the
// counts must be the recorder's exactly, and the timelines (Chrome JSON, speedscope, Perfetto)
// must be in time order and properly nested per thread. At the big size the library's own
// conversion at exit must not cost the traced process more memory than the stream alone, much.
func TestOneLongCallAtScale(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("Debian's GNUstep is installed for the host (amd64) only")
	}
	testfiles.Slow(t, "records and converts 5 M calls of a GNUstep program")
	testfiles.NeedTools(t, "gnustep-config", "gcc", "/usr/bin/time")
	root := testfiles.Root(t)
	dir := t.TempDir()
	lib := filepath.Join(dir, "libmsgtrace.so")
	buildLib(t, "c-shared", lib, "amd64", "gcc")
	mb := filepath.Join(dir, "machobind")
	build := exec.Command("go", "build", "-o", mb, "./cmd/machobind")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build machobind: %v\n%s", err, out)
	}
	app := filepath.Join(dir, "oneloop")
	if err := buildOneloop(root, app); err != nil {
		t.Fatal(err)
	}

	type size struct {
		name         string
		main, worker int // turns of each thread: about 3,300 calls a turn
		calls        uint64
		peak         map[string]int64 // format -> converter's peak RSS, KiB
	}
	sizes := []*size{{name: "1M", main: 200, worker: 100}, {name: "4M", main: 800, worker: 400}}
	formats := []string{".json", ".pftrace", ".speedscope.json", ".pb.gz", ".folded", ".svg"}
	for _, sz := range sizes {
		sz.peak = map[string]int64{}
		args := []string{strconv.Itoa(sz.main), strconv.Itoa(sz.worker)}
		plain, _, err := runOneloop(app, dir, nil, args...)
		if err != nil {
			t.Fatalf("oneloop %v: %v", args, err)
		}
		stream := filepath.Join(dir, sz.name+".mtrace")
		traced, rss, err := runOneloop(app, dir, map[string]string{"LD_PRELOAD": lib, "MSGTRACE_OUT": stream, "MSGTRACE_METHODS": "all"}, args...)
		if err != nil || traced != plain {
			t.Fatalf("traced oneloop %v: %v\nstdout %q, want %q", args, err, traced, plain)
		}
		// the recorder's own count, from the stream's end frame
		end, err := streamEndCounters(stream)
		if err != nil {
			t.Fatal(err)
		}
		sz.calls = end[0]
		if end[1] != 0 || end[2] != 0 || end[5] != 0 {
			t.Errorf("%s: end frame: %d lost, %d past the shadow stack, %d bytes unwritten", sz.name, end[1], end[2], end[5])
		}
		// read in process: the totals are the recorder's, on two threads (main and the worker)
		cs := &bigCountSink{perThread: map[uint64]uint64{}}
		tot := bigReadStream(t, stream, cs)
		if tot.Calls != sz.calls || tot.Kept != sz.calls || tot.Dropped != 0 || tot.Overflow != 0 || tot.BadFrames != 0 ||
			tot.TornBytes != 0 || tot.Unended != 0 || tot.Open != 0 || cs.calls != sz.calls || tot.Threads != 2 || len(cs.perThread) != 2 {
			t.Errorf("%s: recorder counted %d calls; reader totals %+v, sink %d calls", sz.name, sz.calls, tot, cs.calls)
		}
		st, _ := os.Stat(stream)
		t.Logf("%s: oneloop %d+%d turns: %d calls recorded on %d threads, stream %d bytes (%.2f bytes/call), traced process peak RSS %d MiB",
			sz.name, sz.main, sz.worker, sz.calls, tot.Threads, st.Size(), float64(st.Size())/float64(sz.calls), rss>>10)

		for _, ext := range formats {
			out := filepath.Join(dir, sz.name+ext)
			peak, wall, err := bigConvert(mb, stream, out)
			if err != nil {
				t.Fatalf("%s: machobind trace -o %s: %v", sz.name, filepath.Base(out), err)
			}
			sz.peak[ext] = peak
			ost, _ := os.Stat(out)
			t.Logf("%s -> %-16s %6.2f s  %5.1f M calls/s  peak RSS %4d MiB  %11d bytes (%.2f bytes/call)",
				sz.name, ext, wall.Seconds(), float64(sz.calls)/wall.Seconds()/1e6, peak>>10, ost.Size(), float64(ost.Size())/float64(sz.calls))
			if peak > 160<<10 {
				t.Errorf("%s -> %s: converter peak RSS %d MiB, over 160 MiB", sz.name, ext, peak>>10)
			}
			var err2 error
			checked := time.Now()
			switch ext {
			case ".json":
				err2 = checkChromeOrder(out, sz.calls)
			case ".speedscope.json":
				err2 = checkSpeedscopeOrder(out)
			case ".pftrace":
				err2 = checkPerfettoNesting(out, sz.calls)
			case ".pb.gz":
				err2 = checkPprofCalls(out, sz.calls)
			case ".folded":
				// Foundation calling the app back, and a super call under it
				err2 = fileHolds(out, "\nmain;-[App run:worker:];+[Work turn:];-[NSArray sortedArrayUsingSelector:];", ";-[Shape compareArea:];-[Square area];-[Rect area]")
			case ".svg":
				err2 = fileHolds(out, "<svg", "-[Shape compareArea:]", "-[Worker work:]")
			}
			if err2 != nil {
				t.Errorf("%s -> %s: %v", sz.name, ext, err2)
			}
			if d := time.Since(checked); d > 2*time.Second {
				t.Logf("%s -> %s checked in %.1f s", sz.name, ext, d.Seconds())
			}
		}
	}
	small, big := sizes[0], sizes[1]
	if small.calls < 800_000 || big.calls < 3*small.calls {
		t.Errorf("calls recorded: %d and %d, want about 1 M and 4 M", small.calls, big.calls)
	}
	for _, ext := range formats {
		if big.peak[ext] > small.peak[ext]+32<<10 {
			t.Errorf("%s: converter peak RSS %d MiB for %d calls against %d MiB for %d: it grows with the number of calls",
				ext, big.peak[ext]>>10, big.calls, small.peak[ext]>>10, small.calls)
		}
	}

	t.Run("at-exit", func(t *testing.T) {
		// the library converts at exit in the traced process: no more memory than writing the
		// stream alone, give or take a converter's
		args := []string{strconv.Itoa(big.main), strconv.Itoa(big.worker)}
		rss := map[string]int64{}
		for _, ext := range []string{".mtrace", ".pftrace", ".json"} {
			out := filepath.Join(dir, "exit"+ext)
			start := time.Now()
			env := map[string]string{"LD_PRELOAD": lib, "MSGTRACE_OUT": out, "MSGTRACE_METHODS": "all", "MSGTRACE_KEEP_STREAM": "1"}
			if ext == ".mtrace" {
				delete(env, "MSGTRACE_KEEP_STREAM")
			}
			_, peak, err := runOneloop(app, dir, env, args...)
			if err != nil {
				t.Fatalf("oneloop, MSGTRACE_OUT=%s: %v", filepath.Base(out), err)
			}
			rss[ext] = peak
			st, err := os.Stat(out)
			if err != nil {
				t.Fatalf("MSGTRACE_OUT=%s: nothing written: %v", filepath.Base(out), err)
			}
			t.Logf("MSGTRACE_OUT=exit%s: %.2f s, traced process peak RSS %d MiB, %d bytes", ext, time.Since(start).Seconds(), peak>>10, st.Size())
		}
		// each converted its own stream (kept: MSGTRACE_KEEP_STREAM=1) with every call
		for ext, check := range map[string]func(string, uint64) error{".json": checkChromeOrder, ".pftrace": checkPerfettoNesting} {
			out := filepath.Join(dir, "exit"+ext)
			end, err := streamEndCounters(out + ".mtrace")
			if err != nil {
				t.Fatal(err)
			}
			if err := check(out, end[0]); err != nil {
				t.Errorf("%s: %v", filepath.Base(out), err)
			}
		}
		for _, ext := range []string{".pftrace", ".json"} {
			if rss[ext] > rss[".mtrace"]+64<<10 {
				t.Errorf("converting to %s at exit: peak RSS %d MiB against %d MiB writing the stream alone", ext, rss[ext]>>10, rss[".mtrace"]>>10)
			}
		}
	})
}

// buildOneloop compiles testdata/gnustep/oneloop.m with gcc against gnustep-base.
func buildOneloop(root, out string) error {
	return gnustepCC(filepath.Dir(out), out, filepath.Join(root, "testdata", "gnustep", "oneloop.m"))
}

// runOneloop runs the program (env added to the environment, HOME in dir), and returns its
// stdout and peak RSS (KiB).
func runOneloop(app, dir string, env map[string]string, args ...string) (string, int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, app, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+filepath.Join(dir, "home"))
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	peak, err := peakRSSOf(cmd)
	if err != nil {
		return so.String(), 0, fmt.Errorf("%v\nstderr:\n%s", err, se.String())
	}
	return so.String(), peak, nil
}

// bigConvert runs `machobind trace STREAM -o OUT` and returns its peak RSS (KiB) and wall time.
func bigConvert(mb, stream, out string) (int64, time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, mb, "trace", stream, "-o", out)
	var se bytes.Buffer
	cmd.Stderr = &se
	start := time.Now()
	peak, err := peakRSSOf(cmd)
	if err != nil {
		return 0, 0, fmt.Errorf("%v\n%s", err, se.String())
	}
	return peak, time.Since(start), nil
}

// peakRSSOf runs cmd under /usr/bin/time and returns its peak RSS in KiB. Not the child's own
// rusage (cmd.ProcessState.SysUsage's Maxrss): os/exec starts a child with
// CLONE_VM|CLONE_VFORK, and at exec the kernel counts the address space the child leaves (this
// test process's) into the child's maxrss, so that Maxrss is never below this process's own
// peak (a Go program at 300 MiB exec'ing /bin/true reads 310 MiB). time forks for real.
func peakRSSOf(cmd *exec.Cmd) (int64, error) {
	f, err := os.CreateTemp("", "peak")
	if err != nil {
		return 0, err
	}
	f.Close()
	defer os.Remove(f.Name())
	cmd.Args = append([]string{"/usr/bin/time", "-f", "%M", "-o", f.Name()}, cmd.Args...)
	cmd.Path = "/usr/bin/time"
	if err := cmd.Run(); err != nil {
		return 0, err
	}
	b, err := os.ReadFile(f.Name())
	if err != nil {
		return 0, err
	}
	lines := strings.Fields(string(b))
	if len(lines) == 0 {
		return 0, fmt.Errorf("no peak RSS from /usr/bin/time")
	}
	return strconv.ParseInt(lines[len(lines)-1], 10, 64)
}

// streamEndCounters returns the counters of a stream's end frame: calls recorded, calls lost,
// calls past the shadow stack, waits, ticks waited, bytes that could not be written.
func streamEndCounters(path string) ([6]uint64, error) {
	var c [6]uint64
	f, err := os.Open(path)
	if err != nil {
		return c, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return c, err
	}
	ends := 0
	fs, err := engine.ScanFrames(engine.Input{R: f, Size: st.Size(), Name: path}, func(kind uint8, _ int64, p []byte) error {
		if kind != stream.FrameEnd {
			return nil
		}
		ends++
		for i := range c {
			v, n := binary.Uvarint(p)
			if n <= 0 {
				break
			}
			c[i], p = v, p[n:]
		}
		return nil
	})
	if err != nil {
		return c, err
	}
	if ends != 1 || fs != (engine.FrameStats{}) {
		return c, fmt.Errorf("%s: %d end frames, %+v", path, ends, fs)
	}
	return c, nil
}

// bigCountSink counts the calls a reader hands it.
type bigCountSink struct {
	calls     uint64
	thread    uint64
	perThread map[uint64]uint64
}

func (s *bigCountSink) BeginThread(_ *stream.Header, t *stream.Thread) error {
	s.thread = t.TID
	return nil
}
func (s *bigCountSink) Call(*engine.Call) error {
	s.calls++
	s.perThread[s.thread]++
	return nil
}
func (s *bigCountSink) Needs() engine.Needs       { return engine.Needs{} }
func (s *bigCountSink) Skip(int) error            { return nil }
func (s *bigCountSink) Mark(*stream.Mark) error   { return nil }
func (s *bigCountSink) EndThread() error          { return nil }
func (s *bigCountSink) Close(engine.Totals) error { return nil }

// bigReadStream reads a stream into s with engine.ProcessStreams and returns the totals.
func bigReadStream(t *testing.T, path string, s engine.Sink) engine.Totals {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	tot, err := engine.ProcessStreams([]engine.Input{{R: f, Size: st.Size(), Name: path}}, engine.Options{MaxDepth: -1}, s)
	if err != nil {
		t.Fatal(err)
	}
	return tot
}

// chromeNanos parses a Chrome JSON time (microseconds with three decimals) into nanoseconds.
func chromeNanos(s string) (uint64, error) {
	i, f, _ := strings.Cut(s, ".")
	for len(f) < 3 {
		f += "0"
	}
	us, err := strconv.ParseUint(i, 10, 64)
	if err != nil {
		return 0, err
	}
	ns, err := strconv.ParseUint(f[:3], 10, 64)
	if err != nil || len(f) > 3 {
		return 0, fmt.Errorf("time %q: not whole nanoseconds", s)
	}
	return us*1000 + ns, nil
}

// checkChromeOrder reads a Chrome JSON trace event by event (the writer puts one a line): per
// thread, times never go back and every "E" ends the latest open "B"; nothing is left open;
// otherData counts calls (want of them, when want > 0) all kept, and the calls the timeline
// shows (B and call instants) are its timeline_kept (all of them without a budget), the rest
// folded.
func checkChromeOrder(path string, want uint64) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(bufio.NewReaderSize(f, 1<<20))
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	type thread struct {
		last  uint64
		stack []string
	}
	threads := map[[2]uint64]*thread{}
	var shown, line uint64
	var other map[string]uint64
	var e struct {
		Ph   string      `json:"ph"`
		Name string      `json:"name"`
		Cat  string      `json:"cat"`
		Ts   json.Number `json:"ts"`
		Pid  uint64      `json:"pid"`
		Tid  uint64      `json:"tid"`
	}
	for sc.Scan() {
		line++
		b := sc.Bytes()
		if line == 1 {
			if !bytes.HasSuffix(b, []byte(`"traceEvents":[`)) {
				return fmt.Errorf("line 1: %.100s", b)
			}
			continue
		}
		if bytes.HasPrefix(b, []byte(`],"otherData":`)) {
			var doc struct{ OtherData map[string]uint64 }
			if err := json.Unmarshal(append([]byte("{"), b[2:]...), &doc); err != nil {
				return fmt.Errorf("otherData: %v", err)
			}
			other = doc.OtherData
			continue
		}
		b = bytes.TrimSuffix(b, []byte(","))
		e.Ph, e.Name, e.Cat, e.Ts = "", "", "", ""
		if err := json.Unmarshal(b, &e); err != nil {
			return fmt.Errorf("line %d: %v: %.200s", line, err, b)
		}
		if e.Ph == "M" {
			continue
		}
		th := threads[[2]uint64{e.Pid, e.Tid}]
		if th == nil {
			th = &thread{}
			threads[[2]uint64{e.Pid, e.Tid}] = th
		}
		ts, err := chromeNanos(string(e.Ts))
		if err != nil {
			return fmt.Errorf("line %d: %v", line, err)
		}
		if ts < th.last {
			return fmt.Errorf("line %d: thread %d goes back in time, %d ns after %d: %.200s", line, e.Tid, ts, th.last, b)
		}
		th.last = ts
		switch e.Ph {
		case "B":
			th.stack = append(th.stack, e.Name)
			shown++
		case "E":
			if n := len(th.stack); n == 0 || th.stack[n-1] != e.Name {
				return fmt.Errorf("line %d: thread %d: end of %s, open %v", line, e.Tid, e.Name, th.stack[max(0, n-3):])
			}
			th.stack = th.stack[:len(th.stack)-1]
		case "i":
			if e.Cat != "msgtrace" { // a call of no time; a mark is in category msgtrace
				shown++
			}
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if other == nil {
		return fmt.Errorf("no otherData (%d lines)", line)
	}
	for tid, th := range threads {
		if len(th.stack) != 0 {
			return fmt.Errorf("thread %v: %d calls never end: %v", tid, len(th.stack), th.stack)
		}
	}
	if want > 0 && other["calls"] != want {
		return fmt.Errorf("otherData.calls %d, the recorder's %d", other["calls"], want)
	}
	timeline, folded := other["kept"], uint64(0)
	if _, ok := other["timeline_budget"]; ok {
		timeline, folded = other["timeline_kept"], other["folded_calls"]
	}
	if other["kept"] != other["calls"] || shown != timeline || timeline+folded != other["kept"] {
		return fmt.Errorf("%d calls shown, otherData %v", shown, other)
	}
	return nil
}

// checkSpeedscopeOrder reads a speedscope file profile by profile: in each, "at" never goes back,
// every close ("C") closes the frame of the latest open ("O"), nothing is left open, and the
// events lie within startValue..endValue.
func checkSpeedscopeOrder(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	dec := json.NewDecoder(bufio.NewReaderSize(f, 1<<20))
	if _, err := dec.Token(); err != nil {
		return err
	}
	profiles := 0
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return err
		}
		if k != "profiles" {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return err
			}
			continue
		}
		if _, err := dec.Token(); err != nil { // [
			return err
		}
		for dec.More() {
			var p struct {
				Type       string
				Name       string
				StartValue float64
				EndValue   float64
				Events     []struct {
					Type  string
					Frame int
					At    float64
				}
			}
			if err := dec.Decode(&p); err != nil {
				return err
			}
			profiles++
			if p.Type != "evented" || len(p.Events) == 0 {
				return fmt.Errorf("profile %q: type %q, %d events", p.Name, p.Type, len(p.Events))
			}
			var stack []int
			last := p.StartValue
			for i, e := range p.Events {
				if e.At < last {
					return fmt.Errorf("profile %q: event %d at %.0f goes back before %.0f", p.Name, i, e.At, last)
				}
				last = e.At
				switch e.Type {
				case "O":
					stack = append(stack, e.Frame)
				case "C":
					if n := len(stack); n == 0 || stack[n-1] != e.Frame {
						return fmt.Errorf("profile %q: event %d closes frame %d, open %v", p.Name, i, e.Frame, stack[max(0, n-3):])
					}
					stack = stack[:len(stack)-1]
				default:
					return fmt.Errorf("profile %q: event %d of type %q", p.Name, i, e.Type)
				}
			}
			if len(stack) != 0 || last > p.EndValue {
				return fmt.Errorf("profile %q: %d frames left open, last event at %.0f past the end %.0f", p.Name, len(stack), last, p.EndValue)
			}
		}
		if _, err := dec.Token(); err != nil { // ]
			return err
		}
	}
	if profiles < 2 {
		return fmt.Errorf("%d profiles, want one a thread (2)", profiles)
	}
	return nil
}

// checkPprofCalls: the calls sample values add up to the calls kept, and each thread's calls are
// almost all inside one outermost call (the sample's root frame): -[App run:worker:] on the
// main thread, -[Worker work:] on the worker.
func checkPprofCalls(path string, want uint64) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		return err
	}
	ci := -1
	for i, st := range p.SampleType {
		if st.Type == "calls" {
			ci = i
		}
	}
	if ci < 0 {
		return fmt.Errorf("no calls sample type: %v", p.SampleType)
	}
	var sum int64
	perThread := map[string]int64{}
	perRoot := map[string]int64{}
	for _, s := range p.Sample {
		v := s.Value[ci]
		sum += v
		th := strings.Join(s.Label["thread"], ",")
		perThread[th] += v
		if n := len(s.Location); n > 0 && len(s.Location[n-1].Line) > 0 {
			perRoot[th+" "+s.Location[n-1].Line[0].Function.Name] += v
		}
	}
	if uint64(sum) != want {
		return fmt.Errorf("calls add up to %d, the recorder's %d", sum, want)
	}
	for root, want := range map[string]string{"main": "-[App run:worker:]", "": "-[Worker work:]"} {
		for th, n := range perThread {
			if (root == "main") != (th == "main") {
				continue
			}
			if in := perRoot[th+" "+want]; float64(in) < 0.99*float64(n) {
				return fmt.Errorf("thread %q: %d of its %d calls under %s", th, in, n, want)
			}
		}
	}
	if len(perThread) != 2 {
		return fmt.Errorf("threads %v", perThread)
	}
	return nil
}

// checkPerfettoNesting walks a Perfetto trace (compressed_packets inflated): per packet sequence (one
// a thread) slice begins and ends nest (never more ends than begins, none open at the end), and
// without a budget the calls are all there (want > 0: begins = want).
func checkPerfettoNesting(path string, want uint64) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	depth := map[uint64]int{}
	var begins, ends, instants uint64
	var walk func(b []byte) error
	walk = func(b []byte) error {
		for len(b) > 0 {
			num, typ, n := protowire.ConsumeTag(b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			b = b[n:]
			if num != 1 || typ != protowire.BytesType {
				n = protowire.ConsumeFieldValue(num, typ, b)
				if n < 0 {
					return protowire.ParseError(n)
				}
				b = b[n:]
				continue
			}
			pkt, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			b = b[n:]
			var seq, evType uint64
			event := false
			for len(pkt) > 0 {
				num, typ, n := protowire.ConsumeTag(pkt)
				if n < 0 {
					return protowire.ParseError(n)
				}
				pkt = pkt[n:]
				switch {
				case num == 10 && typ == protowire.VarintType: // trusted_packet_sequence_id
					seq, n = protowire.ConsumeVarint(pkt)
				case num == 11 && typ == protowire.BytesType: // track_event
					var ev []byte
					ev, n = protowire.ConsumeBytes(pkt)
					event = true
					for len(ev) > 0 {
						fnum, ftyp, m := protowire.ConsumeTag(ev)
						if m < 0 {
							return protowire.ParseError(m)
						}
						ev = ev[m:]
						if fnum == 9 && ftyp == protowire.VarintType { // type
							evType, m = protowire.ConsumeVarint(ev)
						} else {
							m = protowire.ConsumeFieldValue(fnum, ftyp, ev)
						}
						if m < 0 {
							return protowire.ParseError(m)
						}
						ev = ev[m:]
					}
				case num == 50 && typ == protowire.BytesType: // compressed_packets: a zlib Trace
					var z []byte
					z, n = protowire.ConsumeBytes(pkt)
					if n >= 0 {
						zr, err := zlib.NewReader(bytes.NewReader(z))
						if err != nil {
							return err
						}
						inner, err := io.ReadAll(zr)
						if err != nil {
							return fmt.Errorf("compressed_packets: %v", err)
						}
						if err := walk(inner); err != nil {
							return err
						}
					}
				default:
					n = protowire.ConsumeFieldValue(num, typ, pkt)
				}
				if n < 0 {
					return protowire.ParseError(n)
				}
				pkt = pkt[n:]
			}
			if !event {
				continue
			}
			switch evType {
			case 1: // TYPE_SLICE_BEGIN
				begins++
				depth[seq]++
			case 2: // TYPE_SLICE_END
				ends++
				if depth[seq]--; depth[seq] < 0 {
					return fmt.Errorf("sequence %d: an end without a begin (slice end %d)", seq, ends)
				}
			case 3:
				instants++
			}
		}
		return nil
	}
	if err := walk(b); err != nil {
		return err
	}
	for seq, d := range depth {
		if d != 0 {
			return fmt.Errorf("sequence %d: %d slices never end", seq, d)
		}
	}
	if begins != ends || (want > 0 && begins != want) || len(depth) < 2 {
		return fmt.Errorf("%d slice begins, %d ends, %d instants on %d sequences; %d calls recorded", begins, ends, instants, len(depth), want)
	}
	return nil
}

// fileHolds: the file holds both strings.
func fileHolds(path string, want ...string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	for _, w := range want {
		if !bytes.Contains(b, []byte(w)) {
			return fmt.Errorf("no %q", w)
		}
	}
	return nil
}
