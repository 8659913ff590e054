package gccsuite

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/msgtrace/msgtrace/tracer/engine"
	"github.com/msgtrace/msgtrace/tracer/stream"
)

// treeCheck is a engine.Sink that checks a trace's shape: per thread, calls come in the order
// they ended (no end before the previous one's), every call lies inside its parent (the next
// call to end at a smaller depth; calls at depth d+1 that ended before it are its children),
// calls that are not nested do not overlap, and every call but the outermost has its parent.
type treeCheck struct {
	calls, threads, open uint64
	errs                 []string
	thread               *stream.Thread
	lastEnd              uint64
	pend                 []engine.Call // calls not yet claimed by a parent, in the order they ended
}

func (s *treeCheck) fail(format string, args ...any) {
	if len(s.errs) < 5 {
		tid := uint64(0)
		if s.thread != nil {
			tid = s.thread.TID
		}
		s.errs = append(s.errs, fmt.Sprintf("thread %d: ", tid)+fmt.Sprintf(format, args...))
	}
}

func (s *treeCheck) BeginThread(_ *stream.Header, t *stream.Thread) error {
	s.threads++
	s.thread, s.lastEnd, s.pend = t, 0, s.pend[:0]
	return nil
}

func (s *treeCheck) Call(c *engine.Call) error {
	s.calls++
	if c.Flags&stream.FlagOpen != 0 {
		s.open++
	}
	end := c.StartNanos + c.DurNanos
	if end < s.lastEnd {
		s.fail("%s (depth %d) ends at %d ns, before the call that ended before it (%d ns)", c.Name, c.Depth, end, s.lastEnd)
	}
	s.lastEnd = max(s.lastEnd, end)
	k := len(s.pend)
	for k > 0 && s.pend[k-1].Depth > c.Depth {
		k--
	}
	for _, ch := range s.pend[k:] {
		chEnd := ch.StartNanos + ch.DurNanos
		if ch.Depth != c.Depth+1 {
			s.fail("%s at depth %d ended before %s at depth %d with no call between them", ch.Name, ch.Depth, c.Name, c.Depth)
		}
		if ch.StartNanos < c.StartNanos || chEnd > end {
			s.fail("%s [%d, %d] is not inside its parent %s [%d, %d]", ch.Name, ch.StartNanos, chEnd, c.Name, c.StartNanos, end)
		}
	}
	s.pend = s.pend[:k]
	if k > 0 { // a call that ended before this one and is not inside it: before it
		if p := s.pend[k-1]; p.StartNanos+p.DurNanos > c.StartNanos {
			s.fail("%s [%d, %d] overlaps %s [%d, …], which is not inside it", p.Name, p.StartNanos, p.StartNanos+p.DurNanos, c.Name, c.StartNanos)
		}
	}
	s.pend = append(s.pend, *c)
	return nil
}

func (s *treeCheck) Needs() engine.Needs { return engine.Needs{} }
func (s *treeCheck) Skip(depth int) error {
	s.fail("a call at depth %d dropped by the reader, which was given no filter", depth)
	return nil
}

func (s *treeCheck) Mark(*stream.Mark) error { return nil }

func (s *treeCheck) EndThread() error {
	for _, c := range s.pend {
		if c.Depth != 0 {
			s.fail("%s at depth %d has no caller", c.Name, c.Depth)
		}
	}
	return nil
}

func (s *treeCheck) Close(engine.Totals) error { return nil }

// checkTrace reads a stream with the tracer and checks it (treeCheck); it returns the calls.
func checkTrace(path string) (treeCheck, error) {
	var s treeCheck
	f, err := os.Open(path)
	if err != nil {
		return s, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return s, err
	}
	tot, err := engine.ProcessStreams([]engine.Input{{R: f, Size: st.Size(), Name: path}}, engine.Options{MaxDepth: -1}, &s)
	if err != nil {
		return s, err
	}
	if tot.BadFrames != 0 || tot.BadBytes != 0 || tot.TornBytes != 0 || tot.Unended != 0 || tot.Unwritten != 0 {
		s.fail("stream damaged or not ended: %+v", tot)
	}
	if tot.Kept != s.calls {
		s.fail("totals say %d calls kept, the sink got %d", tot.Kept, s.calls)
	}
	return s, nil
}

// TestTreeCheck feeds treeCheck well-formed and broken threads of calls (in the order they end).
func TestTreeCheck(t *testing.T) {
	c := func(name string, depth int, start, dur uint64) engine.Call {
		return engine.Call{Name: name, Depth: depth, StartNanos: start, DurNanos: dur}
	}
	for _, tc := range []struct {
		name  string
		calls []engine.Call
		want  string // in the first complaint; "" none
	}{
		{"tree", []engine.Call{c("a", 1, 10, 5), c("b", 2, 20, 1), c("c", 1, 18, 10), c("p", 0, 0, 40), c("q", 0, 40, 0)}, ""},
		{"touching", []engine.Call{c("a", 1, 0, 0), c("b", 1, 0, 0), c("p", 0, 0, 0)}, ""},
		{"child outside", []engine.Call{c("a", 1, 10, 50), c("p", 0, 0, 40)}, "ends at"},
		{"child before parent", []engine.Call{c("a", 1, 0, 5), c("p", 0, 1, 40)}, "not inside its parent"},
		{"overlap", []engine.Call{c("a", 0, 0, 10), c("b", 0, 5, 10)}, "overlaps"},
		{"gap", []engine.Call{c("a", 2, 1, 1), c("p", 0, 0, 40)}, "no call between"},
		{"orphan", []engine.Call{c("a", 1, 1, 1)}, "no caller"},
		{"order", []engine.Call{c("a", 0, 0, 10), c("b", 1, 0, 5)}, "ends at"},
	} {
		var s treeCheck
		s.BeginThread(nil, &stream.Thread{TID: 1})
		for _, call := range tc.calls {
			s.Call(&call)
		}
		s.EndThread()
		got := strings.Join(s.errs, "; ")
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want a complaint with %q", tc.name, got, tc.want)
		}
	}
}
