//go:build linux

package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/msgtrace/msgtrace/tracer/engine"
	"github.com/msgtrace/msgtrace/tracer/stream"
)

// orderStats is what streamOrder read from a stream, frame by frame.
type orderStats struct {
	calls   uint64                     // call events
	marks   map[stream.MarkKind]uint64 // marks of each kind
	counts  map[stream.MarkKind]uint64 // their counts (calls lost, overflowed, overwritten)
	threads int                        // threads with events
	end     *stream.StreamCounters     // the end frame's counters; nil without one
}

// streamOrder reads a stream frame by frame (engine.ScanFrames, stream.DecodeEvents) and
// checks what the recorder promises about order: every thread's events, across its frames in
// file order, end in order (non-decreasing end ticks, marks included), and its open frames come
// in tick order. (An open frame may list a call whose record is already written: a thread
// stopped between writing a record and popping its entry; the reader matches records and open
// calls by start tick and depth wherever they are.)
func streamOrder(t *testing.T, path string) orderStats {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	st := orderStats{marks: map[stream.MarkKind]uint64{}, counts: map[stream.MarkKind]uint64{}}
	type thread struct {
		events   uint64
		lastEnd  uint64
		lastOpen uint64
	}
	threads := map[uint64]*thread{}
	get := func(tid uint64) *thread {
		th := threads[tid]
		if th == nil {
			th = &thread{}
			threads[tid] = th
		}
		return th
	}
	bad := 0
	fail := func(format string, args ...any) {
		if bad++; bad <= 5 {
			t.Errorf("%s: "+format, append([]any{filepath.Base(path)}, args...)...)
		}
	}
	in := engine.Input{R: bytes.NewReader(b), Size: int64(len(b)), Name: path}
	_, err = engine.ScanFrames(in, func(kind uint8, off int64, p []byte) error {
		switch kind {
		case stream.FrameEvents:
			tid, _, evs, err := stream.DecodeEvents(p)
			if err != nil {
				return fmt.Errorf("events frame at %d: %v", off, err)
			}
			th := get(tid)
			for k, e := range evs {
				if e.End < th.lastEnd {
					fail("thread %d: event %d of the events frame at %d (type %d, id %d) ends at tick %d, before the %d-th event of the thread, at %d",
						tid, k, off, e.Type, e.ID, e.End, th.events, th.lastEnd)
				}
				th.lastEnd = e.End
				th.events++
				if e.Type == stream.EventMark {
					st.marks[stream.MarkKind(e.ID)]++
					st.counts[stream.MarkKind(e.ID)] += e.Count
					continue
				}
				st.calls++
			}
		case stream.FrameOpen:
			if len(p) < 16 {
				return fmt.Errorf("open frame at %d: %d bytes", off, len(p))
			}
			tid, tick := binary.LittleEndian.Uint64(p), binary.LittleEndian.Uint64(p[8:])
			th := get(tid)
			if tick < th.lastOpen {
				fail("thread %d: open frame at %d taken at tick %d, before the previous one (%d)", tid, off, tick, th.lastOpen)
			}
			th.lastOpen = tick
			for q := p[16:]; len(q) > 0; {
				var v [3]uint64 // id, age, depth
				for i := range v {
					x, n := binary.Uvarint(q)
					if n <= 0 {
						return fmt.Errorf("open frame at %d: malformed", off)
					}
					v[i], q = x, q[n:]
				}
			}
		case stream.FrameEnd:
			var c [6]uint64
			q := p
			for i := range c {
				v, n := binary.Uvarint(q)
				if n <= 0 {
					break
				}
				c[i], q = v, q[n:]
			}
			st.end = &stream.StreamCounters{Calls: c[0], Lost: c[1], Overflow: c[2], Waits: c[3], TicksWaited: c[4], Unwritten: c[5]}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	for _, th := range threads {
		if th.events > 0 {
			st.threads++
		}
	}
	return st
}

// testOrder: every thread's events are in the stream in the order its calls ended, whatever
// the drain meets — threads switching chunks while it collects partial ones (the stress soak
// at the defaults), threads exiting mid-run and others starting, a bursty thread whose partial
// chunks are taken while it is quiet, the pool running out (threads wait: the wait marks go in
// order too). Each load runs several times: the defect it guards against showed in most runs.
func testOrder(t *testing.T, b built) {
	small := len(b.run) > 0 // under qemu: smaller counts
	calls, runs := 600_000, 4
	if small {
		calls, runs = 300_000, 3
	}
	for _, c := range []struct {
		name string
		env  map[string]string
		args []string
	}{
		{"soak", nil, []string{"soak", "4", strconv.Itoa(calls)}},
		{"churn", nil, []string{"churn", "4", strconv.Itoa(calls)}},
		{"soak-smallpool", map[string]string{"MSGTRACE_BUFFER_MB": "1"}, []string{"soak", "4", strconv.Itoa(calls)}},
		{"churn-smallpool", map[string]string{"MSGTRACE_BUFFER_MB": "1"}, []string{"churn", "4", strconv.Itoa(calls)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var waits uint64
			for r := 0; r < runs && !t.Failed(); r++ {
				out := filepath.Join(t.TempDir(), "order.mtrace")
				e := map[string]string{"MSGTRACE_OUT": out}
				for k, v := range c.env {
					e[k] = v
				}
				o, err := b.stress(e, c.args...).Output()
				var sent uint64
				if _, perr := fmt.Sscanf(string(o), "sent %d", &sent); err != nil || perr != nil {
					t.Fatalf("stress %v: %v\n%s", c.args, err, o)
				}
				st := streamOrder(t, out)
				if st.end == nil || st.calls != sent || st.end.Calls != sent || st.end.Lost != 0 {
					t.Fatalf("sent %d, the stream holds %d calls, end frame %+v", sent, st.calls, st.end)
				}
				// every wait is on its thread's timeline
				if st.marks[stream.MarkWait] != st.end.Waits {
					t.Errorf("%d wait marks, the end frame counts %d waits", st.marks[stream.MarkWait], st.end.Waits)
				}
				waits += st.end.Waits
			}
			if !t.Failed() {
				t.Logf("%d runs of stress %v: in order; %d waits for a chunk in all", runs, c.args, waits)
			}
		})
	}
}
