package sink

import (
	"io"
	"strconv"

	"github.com/msgtrace/msgtrace/tracer/engine"
	"github.com/msgtrace/msgtrace/tracer/stream"
)

// SpeedscopeSink writes speedscope's own file format (https://www.speedscope.app/file-format-schema.json,
// written as NAME.speedscope.json): one shared frame table, one "evented" profile per thread in
// nanoseconds, its open ("O") and close ("C") events in time order. They come in time order
// because PreOrder replays each thread's calls in pre-order (see order.go for how, and for the
// memory that takes: one outermost call tree at a time); the frame table is written last, so
// the file is a stream too.
//
// A call still running at the end of the trace has "[running]" frames wherever none of its
// children runs (so that they add up to its self time, as the "[running]" frame of pprof and
// folded does), a call an exception unwound a zero-length "[unwound]" child at its end, a mark a zero-length "[lost N]", "[overflow N]", "[overwritten N]" or "[wait]" frame
// where it happened (speedscope shows no instants).
type SpeedscopeSink struct {
	engine.Sink
	w        *outWriter
	buf      []byte
	meta     Meta
	frames   map[string]*ssFrame // by name
	byMethod []*ssFrame          // a call's, by its Method
	shown    []string            // by frame id: the name shown (DisplayName)
	label    string
	started  bool // the file's head is written
	inProf   bool // a profile's head is written
	nprof    int
	first    bool // no event yet in this profile
	lastAt   uint64
	startAt  uint64
	open     []bool // per depth: is the call open at that depth still running at the end
	err      error
	fold     engine.FoldReport
	times    decCache
}

// ssFrame is a frame's open event and close event up to the time (`,{"type":"O","frame":ID,"at":`,
// the comma that goes before every event but a profile's first included).
type ssFrame struct {
	o, c []byte
}

// NewSpeedscopeSink writes to w.
func NewSpeedscopeSink(w io.Writer, m Meta) *SpeedscopeSink {
	s := &SpeedscopeSink{w: newOutWriter(w), meta: m, frames: map[string]*ssFrame{}}
	s.Sink = engine.PreOrder(speedscopeTree{s})
	return s
}

// frame returns name's frame, made when new (shown as show).
func (s *SpeedscopeSink) frame(name, show string) *ssFrame {
	f := s.frames[name]
	if f == nil {
		id := len(s.shown)
		f = &ssFrame{o: frameEvent(nil, 'O', id), c: frameEvent(nil, 'C', id)}
		s.frames[name] = f
		s.shown = append(s.shown, show)
	}
	return f
}

// named is frame for a name that is not a call's.
func (s *SpeedscopeSink) named(name string) *ssFrame {
	if f := s.frames[name]; f != nil {
		return f
	}
	return s.frame(name, engine.DisplayName(name))
}

// callFrame is frame for a call's method, by its Method.
func (s *SpeedscopeSink) callFrame(c *engine.Call) *ssFrame {
	m := c.Method
	if m != 0 && int(m) < len(s.byMethod) {
		if f := s.byMethod[m]; f != nil {
			return f
		}
	}
	f := s.frames[c.Name]
	if f == nil {
		f = s.frame(c.Name, c.Display())
	}
	if m != 0 {
		s.byMethod = engine.Grow(s.byMethod, m)
		s.byMethod[m] = f
	}
	return f
}

func (s *SpeedscopeSink) head(h *stream.Header) {
	if s.started {
		return
	}
	s.started = true
	b := append(s.buf[:0], `{"$schema":"https://www.speedscope.app/file-format-schema.json","exporter":"msgtrace","name":`...)
	b = appendJSONString(b, s.meta.ProcessName(h))
	b = append(b, `,"activeProfileIndex":0,"profiles":[`...)
	s.buf = b
	s.w.Write(b)
}

// event writes one open or close event at time at (clamped so that time never goes back).
func (s *SpeedscopeSink) event(typ byte, f *ssFrame, at uint64) {
	b := s.w.tail() // in place
	if !s.inProf {
		s.inProf, s.first, s.startAt, s.lastAt = true, true, at, at
		if s.nprof > 0 {
			b = append(b, ',')
		}
		s.nprof++
		b = append(b, "\n"+`{"type":"evented","name":`...)
		b = appendJSONString(b, s.label)
		b = append(b, `,"unit":"nanoseconds","events":[`...)
	}
	at = max(at, s.lastAt)
	s.lastAt = at
	q := f.o
	if typ == 'C' {
		q = f.c
	}
	if s.first {
		q, s.first = q[1:], false
	}
	b = s.times.dec(append(b, q...), at)
	b = append(b, '}')
	s.w.commit(b)
	s.err = s.w.err
}

// frameEvent appends an event of frame id up to its time, after a comma.
func frameEvent(b []byte, typ byte, id int) []byte {
	b = append(b, `,{"type":"`...)
	b = append(b, typ)
	b = append(b, `","frame":`...)
	b = strconv.AppendInt(b, int64(id), 10)
	return append(b, `,"at":`...)
}

type speedscopeTree struct{ s *SpeedscopeSink }

// Needs: a timeline, in pre-order, within its budget; its writer goroutine ended on a failure.
func (s *SpeedscopeSink) Needs() engine.Needs {
	return engine.Needs{Tree: speedscopeTree{s}, Fold: &s.fold, Budget: s.meta.budget(SpeedscopeBudget), Abort: s.abort}
}

func (t speedscopeTree) BeginThread(h *stream.Header, th *stream.Thread) error {
	t.s.head(h)
	t.s.label = engine.ThreadLabel(th)
	if th.Name == "" || th.Main {
		t.s.label += " (tid " + strconv.FormatUint(th.TID, 10) + ")"
	}
	return nil
}

// runs says whether the call around depth d (at d-1) is still running at the end of the
// trace (the test of running, in line: rarely true).
func (s *SpeedscopeSink) runs(d int) bool { return d > 0 && d <= len(s.open) && s.open[d-1] }

// running covers the time since the last event with a "[running]" frame when the call
// around (at depth d-1) is still running at the end of the trace.
func (s *SpeedscopeSink) running(d int, until uint64) {
	if d > 0 && d <= len(s.open) && s.open[d-1] && until > s.lastAt {
		f := s.named(engine.FrameRunning)
		s.event('O', f, s.lastAt)
		s.event('C', f, until)
	}
}

func (t speedscopeTree) Enter(c *engine.Call, d int) error {
	s := t.s
	if s.runs(d) {
		s.running(d, c.StartNanos)
	}
	s.event('O', s.callFrame(c), c.StartNanos)
	s.open = append(s.open[:d], c.Flags&stream.FlagOpen != 0)
	return s.err
}

func (t speedscopeTree) Exit(c *engine.Call, d int) error {
	s := t.s
	end := c.StartNanos + c.DurNanos
	if s.runs(d + 1) {
		s.running(d+1, end)
	}
	switch {
	case c.Flags&stream.FlagUnwound != 0:
		f := s.named(engine.FrameUnwound)
		s.event('O', f, end)
		s.event('C', f, end)
	}
	s.event('C', s.callFrame(c), end)
	return s.err
}

func (t speedscopeTree) Mark(m *stream.Mark, d int) error {
	if m.Kind == stream.MarkRelease { // a lock's release: no event of its own
		return nil
	}
	t.s.running(d, m.StartNanos)
	f := t.s.named(engine.MarkLabel(m))
	t.s.event('O', f, m.StartNanos)
	t.s.event('C', f, m.StartNanos)
	return t.s.err
}

func (t speedscopeTree) EndThread() error {
	s := t.s
	if !s.inProf {
		return nil // a thread without events has no profile
	}
	s.inProf = false
	b := append(s.buf[:0], `],"startValue":`...)
	b = appendDec(b, s.startAt)
	b = append(b, `,"endValue":`...)
	b = appendDec(b, s.lastAt)
	b = append(b, '}')
	s.buf = b
	_, err := s.w.Write(b)
	return err
}

func (t speedscopeTree) Close(engine.Totals) error {
	s := t.s
	s.head(&stream.Header{})
	b := append(s.buf[:0], "\n"+`],"shared":{"frames":[`...)
	for i, n := range s.shown {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"name":`...)
		b = appendJSONString(b, n)
		b = append(b, '}')
		if len(b) > 1<<15 {
			s.w.Write(b)
			b = b[:0]
		}
	}
	b = append(b, "]}}\n"...)
	s.buf = b
	if _, err := s.w.Write(b); err != nil {
		return err
	}
	return s.w.Flush()
}

// abort ends the output's writer goroutine: the conversion failed before Close.
func (s *SpeedscopeSink) abort() { s.w.abort() }
