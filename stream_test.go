package msgtrace

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/msgtrace/msgtrace/internal/selftest"
	"github.com/msgtrace/msgtrace/internal/streamspec"
	"github.com/msgtrace/msgtrace/tracer/engine"
	"github.com/msgtrace/msgtrace/tracer/sink"
	"github.com/msgtrace/msgtrace/tracer/stream"
)

// TestStreamRealRun traces a real run through the interposers in this process with the drain
// writing the stream, converts the file with the tracer, and checks the call tree: names (a
// super call named by the class whose method ran, a class method with +), nesting, the sleeping
// methods' durations, the worker thread's name and the main thread's flag.
func TestStreamRealRun(t *testing.T) {
	selftest.UseNamer()
	path := filepath.Join(t.TempDir(), "run-%p.mtrace")
	Mark("before the stream") // waits in the queue for the stream
	if err := StartStream(StreamConfig{Path: path, PeriodMS: 20, CPU: true}); err != nil {
		t.Fatal(err)
	}
	if got := selftest.Run(); got != 14 {
		t.Fatalf("workload returned %d through the interposers, want 14", got)
	}
	// marks from 8 threads at once while the drain runs: none lost, each thread's in order
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				Mark(fmt.Sprintf("g%d %03d", g, i))
			}
		}()
	}
	wg.Wait()
	// mid-run: the file as it is now (flushed, not closed) reads cut at every byte
	if err := FlushStream(); err != nil {
		t.Fatal(err)
	}
	mid, err := os.ReadFile(StreamPath())
	if err != nil {
		t.Fatal(err)
	}
	for cut := 0; cut <= len(mid); cut++ {
		tot, err := engine.ProcessStreams([]engine.Input{{R: bytes.NewReader(mid[:cut]), Size: int64(cut)}}, engine.Options{MaxDepth: -1}, sink.NewChromeSink(io.Discard))
		if err != nil || tot.BadFrames != 0 {
			t.Fatalf("mid-run file cut at %d of %d: %v %+v", cut, len(mid), err, tot)
		}
	}
	if err := CloseStream(); err != nil {
		t.Fatal(err)
	}
	crossCheckFrames(t, StreamPath())
	checkMarks(t, StreamPath())
	want := filepath.Join(filepath.Dir(path), "run-"+strconv.Itoa(os.Getpid())+".mtrace")
	if StreamPath() != want {
		t.Fatalf("stream at %q, want %q", StreamPath(), want)
	}
	file, err := os.Open(want)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	st, _ := file.Stat()
	var out bytes.Buffer
	tot, err := engine.Process(file, engine.Options{MaxDepth: -1}, sink.NewChromeSink(&out))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		TraceEvents []struct {
			Ph, Name string
			Ts, Dur  float64
			Tid      uint64
			Args     map[string]any
		}
	}
	if err := json.Unmarshal(out.Bytes(), &f); err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	threadName := map[uint64]string{}
	var layoutTid uint64
	durs := map[string][]float64{}
	open := map[uint64][]float64{} // begin times of the calls open per thread
	for _, e := range f.TraceEvents {
		if e.Ph == "M" {
			if e.Name == "thread_name" {
				threadName[e.Tid] = e.Args["name"].(string)
			}
			continue
		}
		if e.Ph == "E" { // a call is its begin ("B") and end ("E"), or an instant ("i") if it took no time
			st := open[e.Tid]
			durs[e.Name] = append(durs[e.Name], e.Ts-st[len(st)-1])
			open[e.Tid] = st[:len(st)-1]
			continue
		}
		if e.Ph == "B" {
			open[e.Tid] = append(open[e.Tid], e.Ts)
		}
		if e.Name == "-[View layout]" {
			layoutTid = e.Tid
		}
		count[e.Name]++
		if e.Ph == "i" {
			durs[e.Name] = append(durs[e.Name], 0)
		}
	}
	// [self measure:] inside -[View layout] run for a Button is named by the receiver's class;
	// the super call by the class whose method ran; the tagged receiver by its class
	wantCalls := map[string]int{"-[View layout]": 2, "-[View measure:]": 2, "-[Button measure:]": 2, "+[View make]": 1,
		"-[Button layout]": 1, "-[Net fetch:]": 1, "-[Num intValue]": 1}
	for k, v := range wantCalls {
		if count[k] != v {
			t.Errorf("%s: %d events, want %d (all: %v)", k, count[k], v, count)
		}
	}
	if tot.Kept != 10 || tot.Dropped != 0 || tot.Unended != 0 || tot.BadFrames != 0 {
		t.Errorf("totals %+v", tot)
	}
	for _, d := range append(durs["-[View measure:]"], durs["-[Button measure:]"]...) {
		if d < 2000 || d > 200000 {
			t.Errorf("-[View measure:] took %.1f µs, slept 2 or 3 ms", d)
		}
	}
	// a sleep never ends early; a loaded 2-core CI machine may wake it late, so the upper bound
	// only catches a wrong tick ratio (a calibration off by a factor)
	if d := durs["-[Net fetch:]"]; len(d) != 1 || d[0] < 5000 || d[0] > 15000 {
		t.Errorf("-[Net fetch:] took %v µs, slept 5 ms", d)
	}
	// the workload runs on whatever OS thread the test goroutine has: the process's main
	// thread (tid == pid) is named as such, any other by its pthread name
	wantName := threadName[layoutTid] != ""
	if layoutTid == uint64(os.Getpid()) {
		wantName = threadName[layoutTid] == "main"
	}
	if !wantName || threadName[uint64(0)] != "" {
		t.Errorf("thread of the workload (tid %d, pid %d) named %q", layoutTid, os.Getpid(), threadName[layoutTid])
	}
	var worker bool
	for _, n := range threadName {
		worker = worker || n == "worker"
	}
	if !worker {
		t.Errorf("no thread named worker: %v", threadName)
	}
	c := ReadCounters()
	if c.Written != 10 || c.Recorded != 10 || c.Dropped != 0 || c.LostBytes != 0 {
		t.Errorf("counters %+v", c)
	}
	t.Logf("%d events, %d stream bytes", len(f.TraceEvents), st.Size())
}

// crossCheckFrames re-encodes every events, instant and cpu frame the C drain wrote in a real
// run with the Go reference writer (stream.StreamWriter): the bytes must be the same; the run
// has cpu frames (the thread that ran the workload, sampled at least by the close's pass).
// (Every frame kind is checked with fixed values by TestEncoderMatchesGoWriter.)
func crossCheckFrames(t *testing.T, path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	frames, cpu := 0, 0
	st, err := engine.ScanFrames(engine.Input{R: bytes.NewReader(b), Size: int64(len(b))}, func(kind uint8, off int64, p []byte) error {
		if kind == stream.FrameCPU {
			cpu++
			c, err := stream.DecodeCPU(p)
			var buf bytes.Buffer
			stream.NewStreamWriter(&buf).CPU(c)
			if err != nil || !bytes.Equal(buf.Bytes()[16:], p) || len(c.Entries) == 0 {
				t.Errorf("cpu frame at %d (%v, %+v): the Go writer encodes %x, the drain wrote %x", off, err, c, buf.Bytes()[16:], p)
			}
			return nil
		}
		if kind == stream.FrameInstant {
			in, err := stream.DecodeInstant(p)
			var buf bytes.Buffer
			stream.NewStreamWriter(&buf).Instant(in)
			if err != nil || !bytes.Equal(buf.Bytes()[16:], p) {
				t.Errorf("instant frame at %d (%v): the Go writer encodes %x, the drain wrote %x", off, err, buf.Bytes()[16:], p)
			}
			return nil
		}
		if kind != stream.FrameEvents {
			return nil
		}
		frames++
		tid, prev, evs, err := stream.DecodeEvents(p)
		if err != nil {
			t.Errorf("events frame at %d: %v", off, err)
			return nil
		}
		var buf bytes.Buffer
		stream.NewStreamWriter(&buf).Events(tid, prev, evs)
		if !bytes.Equal(buf.Bytes()[16:], p) {
			t.Errorf("events frame at %d: the Go writer encodes %d bytes, the drain wrote %d", off, buf.Len()-16, len(p))
		}
		return nil
	})
	if err != nil || st != (engine.FrameStats{}) || frames == 0 || cpu == 0 {
		t.Fatalf("frames of %s: %v %+v, %d events frames, %d cpu frames", path, err, st, frames, cpu)
	}
}

// TestEncoderMatchesGoWriter calls the C encoder (drain_encode.c) with fixed values for every
// frame kind and compares its frames, header and checksum included, byte for byte with the Go
// reference writer's (stream.StreamWriter).
func TestEncoderMatchesGoWriter(t *testing.T) {
	long := string(bytes.Repeat([]byte("x"), 300)) // a 2-byte length
	evs := []stream.StreamEvent{
		{Type: stream.EventCall, ID: 1, Start: 1000, End: 1100, Depth: 2},
		{Type: stream.EventCall, ID: 70000, Start: 900, End: 1200, Depth: 1},
		{Type: stream.EventUnwound, ID: 3, Start: 1150, End: 1190, Depth: 4095}, // ends before the last: a negative delta
		{Type: stream.EventMark, ID: uint64(stream.MarkLost), Start: 1200, End: 1300, Count: 17},
		{Type: stream.EventMark, ID: uint64(stream.MarkWait), Start: 1300, End: 1<<40 + 5},
		{Type: stream.EventMark, ID: uint64(stream.MarkOverflow), Start: 1<<40 + 5, End: 1<<40 + 5, Count: 3},
		{Type: stream.EventMark, ID: uint64(stream.MarkOverwritten), Start: 10, End: 1 << 41, Count: 1 << 33},
		{Type: stream.EventCall, ID: 1<<32 + 1, Start: 0, End: 1<<63 + 7, Depth: 0},
	}
	cpuEntries := []stream.CPUEntry{
		{TID: 77, Known: stream.CPURunning | stream.CPURunnable | stream.CPUSlices, Running: 1 << 40, Runnable: 300, Slices: 2},
		{TID: 1 << 40, Known: stream.CPURunning, Running: 5, Runnable: 9, Slices: 9}, // Apple: the time run only
		{TID: 78, Known: stream.CPURunnable, Runnable: 1},
	}
	cases := []struct {
		kind  uint8
		c     []byte
		write func(w *stream.StreamWriter)
	}{
		{stream.FrameProcess,
			selftest.EncodeProcess(stream.StreamProcess{PID: 4242, PPID: 1, Path: "/usr/bin/démo", Name: "démo", Arch: "arm64", OS: "ios", Mode: stream.ModeRing}),
			func(w *stream.StreamWriter) {
				w.Process(stream.StreamProcess{PID: 4242, PPID: 1, Path: "/usr/bin/démo", Name: "démo", Arch: "arm64", OS: "ios", Mode: stream.ModeRing})
			}},
		{stream.FrameClock,
			selftest.EncodeClock(stream.ClockSample{Tick: 1<<63 + 3, MonoNanos: 123456789, WallNanos: 1 << 60, RateNum: 1000000000, RateDen: 24000000}),
			func(w *stream.StreamWriter) {
				w.Clock(stream.ClockSample{Tick: 1<<63 + 3, MonoNanos: 123456789, WallNanos: 1 << 60, RateNum: 1000000000, RateDen: 24000000})
			}},
		{stream.FrameMethods,
			selftest.EncodeMethods(stream.StreamMethod{ID: 1, Flags: stream.MethodClass, Class: "View", Selector: "make"},
				stream.StreamMethod{ID: 200, Flags: stream.MethodSuper | stream.MethodTagged, Class: long, Selector: "initWithFrame:style:"}),
			func(w *stream.StreamWriter) {
				w.Methods(stream.StreamMethod{ID: 1, Flags: stream.MethodClass, Class: "View", Selector: "make"},
					stream.StreamMethod{ID: 200, Flags: stream.MethodSuper | stream.MethodTagged, Class: long, Selector: "initWithFrame:style:"})
			}},
		{stream.FrameThread,
			selftest.EncodeThread(stream.StreamThread{TID: 77, Flags: stream.ThreadMain | stream.ThreadExited, Name: "worker"}),
			func(w *stream.StreamWriter) {
				w.Thread(stream.StreamThread{TID: 77, Flags: stream.ThreadMain | stream.ThreadExited, Name: "worker"})
			}},
		{stream.FrameEvents,
			selftest.EncodeEvents(77, 1050, evs),
			func(w *stream.StreamWriter) { w.Events(77, 1050, evs) }},
		{stream.FrameOpen,
			selftest.EncodeOpen(77, 5000, []stream.OpenCall{{ID: 1, Start: 100, Depth: 0}, {ID: 300, Start: 4999, Depth: 1}, {ID: 2, Start: 5000, Depth: 2}}),
			func(w *stream.StreamWriter) {
				w.Open(77, 5000, []stream.OpenCall{{ID: 1, Start: 100, Depth: 0}, {ID: 300, Start: 4999, Depth: 1}, {ID: 2, Start: 5000, Depth: 2}})
			}},
		{stream.FrameOpen, selftest.EncodeOpen(78, 9, nil), func(w *stream.StreamWriter) { w.Open(78, 9, nil) }},
		{stream.FrameEnd,
			selftest.EncodeEnd(stream.StreamCounters{Calls: 1 << 35, Lost: 1, Overflow: 200, Waits: 3, TicksWaited: 1 << 50, Unwritten: 0}),
			func(w *stream.StreamWriter) {
				w.End(stream.StreamCounters{Calls: 1 << 35, Lost: 1, Overflow: 200, Waits: 3, TicksWaited: 1 << 50, Unwritten: 0})
			}},
		{stream.FrameInstant,
			selftest.EncodeInstant(stream.StreamInstant{TID: 0, Clock: stream.InstantClockMonotonic, Time: 1<<62 + 9, Kind: stream.InstantProcessStart, Precision: 10_000_000, Name: "process start"}),
			func(w *stream.StreamWriter) {
				w.Instant(stream.StreamInstant{TID: 0, Clock: stream.InstantClockMonotonic, Time: 1<<62 + 9, Kind: stream.InstantProcessStart, Precision: 10_000_000, Name: "process start"})
			}},
		{stream.FrameInstant,
			selftest.EncodeInstant(stream.StreamInstant{TID: 77, Clock: stream.InstantClockTicks, Time: 5001, Kind: stream.InstantApp, Name: "first frame ✓ " + long}),
			func(w *stream.StreamWriter) {
				w.Instant(stream.StreamInstant{TID: 77, Clock: stream.InstantClockTicks, Time: 5001, Kind: stream.InstantApp, Name: "first frame ✓ " + long})
			}},
		{stream.FrameCPU,
			selftest.EncodeCPU(1<<62+5, cpuEntries),
			func(w *stream.StreamWriter) { w.CPU(stream.StreamCPU{Tick: 1<<62 + 5, Entries: cpuEntries}) }},
		{stream.FrameCPU, selftest.EncodeCPU(9, nil), func(w *stream.StreamWriter) { w.CPU(stream.StreamCPU{Tick: 9}) }},
	}
	seen := map[uint8]bool{}
	for _, c := range cases {
		var want bytes.Buffer
		w := stream.NewStreamWriter(&want)
		c.write(w)
		if w.Err() != nil {
			t.Fatal(w.Err())
		}
		if !bytes.Equal(c.c, want.Bytes()) {
			t.Errorf("frame kind %d: the C encoder wrote\n%x\nthe Go writer\n%x", c.kind, c.c, want.Bytes())
		}
		if len(c.c) < 5 || c.c[4] != c.kind {
			t.Errorf("frame kind %d: the C encoder wrote kind %v", c.kind, c.c[:min(5, len(c.c))])
		}
		seen[c.kind] = true
	}
	for _, k := range streamspec.FrameKinds.Values { // a new frame kind needs its case here
		if !seen[uint8(k.N)] {
			t.Errorf("frame kind %s (%d) not checked", k.Name, k.N)
		}
	}
}

// checkMarks reads the app's marks (msgtrace_mark) of TestStreamRealRun's stream: the one made
// before the stream started first, then each goroutine's hundred in order, none lost, each on
// a thread (in the order they were queued: threads read the time, then queue).
func checkMarks(t *testing.T, path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	next := map[string]int{}
	engine.ScanFrames(engine.Input{R: bytes.NewReader(b), Size: int64(len(b))}, func(kind uint8, off int64, p []byte) error {
		if kind != stream.FrameInstant {
			return nil
		}
		in, _ := stream.DecodeInstant(p)
		if in.Kind != stream.InstantApp || in.Clock != stream.InstantClockTicks || in.TID == 0 {
			t.Errorf("mark %+v", in)
		}
		names = append(names, in.Name)
		if g, i, ok := strings.Cut(in.Name, " "); ok {
			if n, _ := strconv.Atoi(i); n != next[g] {
				t.Errorf("%s after %d of its thread", in.Name, next[g])
			}
			next[g]++
		}
		return nil
	})
	if len(names) != 801 || names[0] != "before the stream" || InstantsLost() != 0 {
		t.Errorf("%d marks (want 801), first %q, %d lost", len(names), names[0], InstantsLost())
	}
}
