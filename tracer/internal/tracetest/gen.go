package tracetest

import (
	"bytes"
	"fmt"
	"math/rand"
	"testing"

	"github.com/msgtrace/msgtrace/tracer/stream"
)

// GenStream is a generated stream and what a reader must make of it.
type GenStream struct {
	B      []byte
	Frames []GenFrame // events frames
	Names  map[uint64]string
	Flags  map[uint64]int
	PID    uint64
	Line   GenLine
	Ends   []int // offsets where frames end
}

// GenFrame is one events frame: where it is and what it holds.
type GenFrame struct {
	Off, End int
	TID      uint64
	Evs      []stream.StreamEvent
}

// GenLine is the process's clock: mono = mono0 + (tick - tick0) * num / den, exactly at
// ticks tick0 + k*den.
type GenLine struct{ Tick0, Mono0, Num, Den uint64 }

// Mono is tick t on CLOCK_MONOTONIC.
func (l GenLine) Mono(t uint64) uint64 { return l.Mono0 + (t-l.Tick0)*l.Num/l.Den }

// GenOpts shape a generated stream.
type GenOpts struct {
	Seed             int64
	PID              uint64
	Threads, PerTh   int // threads, calls per thread
	FrameEvents      int
	Line             GenLine
	Marks, NoEnd     bool
	Program          string
	OpenAfterFrame   int // > 0: also write open frames
	Methods, MaxKids int
}

// genEvents makes a thread's events in post-order: random trees, marks between calls.
func genEvents(r *rand.Rand, o GenOpts, tick *uint64, n int) []stream.StreamEvent {
	var evs []stream.StreamEvent
	var emit func(depth uint64)
	count := 0
	emit = func(depth uint64) {
		start := *tick
		*tick += uint64(r.Intn(50) + 1)
		if depth < 6 {
			for k := r.Intn(o.MaxKids + 1); k > 0 && count < n; k-- {
				emit(depth + 1)
				if o.Marks && r.Intn(8) == 0 {
					ms := *tick
					*tick += uint64(r.Intn(30))
					kind := uint64(r.Intn(4) + 1)
					cnt := uint64(r.Intn(5) + 1)
					if stream.MarkKind(kind) == stream.MarkWait {
						cnt = 0
					}
					evs = append(evs, stream.StreamEvent{Type: stream.EventMark, ID: kind, Start: ms, End: *tick, Count: cnt})
				}
			}
		}
		*tick += uint64(r.Intn(50) + 1)
		typ := stream.EventCall
		if r.Intn(20) == 0 {
			typ = stream.EventUnwound
		}
		count++
		evs = append(evs, stream.StreamEvent{Type: typ, ID: uint64(r.Intn(o.Methods) + 1), Start: start, End: *tick, Depth: depth})
	}
	for count < n {
		emit(0)
		*tick += uint64(r.Intn(100))
	}
	return evs
}

// Gen writes a stream: process, clock, methods, thread frames, then the threads' events in
// frames of frameEvents, round-robin, with a clock frame every third frame, then an end frame.
func Gen(t testing.TB, o GenOpts) *GenStream {
	if o.Methods == 0 {
		o.Methods = 12
	}
	if o.MaxKids == 0 {
		o.MaxKids = 3
	}
	r := rand.New(rand.NewSource(o.Seed))
	var buf bytes.Buffer
	w := stream.NewStreamWriter(&buf)
	g := &GenStream{Names: map[uint64]string{}, Flags: map[uint64]int{}, PID: o.PID, Line: o.Line}
	mark := func() { g.Ends = append(g.Ends, buf.Len()) }
	w.Process(stream.StreamProcess{PID: o.PID, PPID: 1, Path: "/bin/" + o.Program, Name: o.Program, Arch: "amd64", OS: "linux"})
	mark()
	l := o.Line
	clockAt := func(tick uint64) {
		// a tick on the line's grid at or after tick
		k := (tick - l.Tick0 + l.Den - 1) / l.Den
		ct := l.Tick0 + k*l.Den
		w.Clock(stream.ClockSample{Tick: ct, MonoNanos: l.Mono(ct), WallNanos: 1e18 + l.Mono(ct), RateNum: l.Num, RateDen: l.Den})
		mark()
	}
	clockAt(l.Tick0)
	var ms []stream.StreamMethod
	for id := uint64(1); id <= uint64(o.Methods); id++ {
		m := stream.StreamMethod{ID: id, Flags: id % 8, Class: fmt.Sprintf("Class%d", id%5), Selector: fmt.Sprintf("sel%d:", id)}
		ms = append(ms, m)
		sign := "-"
		if m.Flags&stream.MethodClass != 0 {
			sign = "+"
		}
		g.Names[id] = sign + "[" + m.Class + " " + m.Selector + "]"
		if m.Flags&stream.MethodSuper != 0 {
			g.Flags[id] |= stream.FlagSuper
		}
		if m.Flags&stream.MethodTagged != 0 {
			g.Flags[id] |= stream.FlagTagged
		}
	}
	w.Methods(ms...)
	mark()
	type th struct {
		tid  uint64
		evs  []stream.StreamEvent
		prev uint64
	}
	var ths []*th
	for i := 0; i < o.Threads; i++ {
		tid := o.PID*1000 + uint64(i)
		tick := l.Tick0 + uint64(r.Intn(1000))
		fl := uint64(0)
		if i == 0 {
			fl = stream.ThreadMain
		}
		w.Thread(stream.StreamThread{TID: tid, Flags: fl, Name: fmt.Sprintf("t%d", i)})
		mark()
		ths = append(ths, &th{tid: tid, evs: genEvents(r, o, &tick, o.PerTh), prev: l.Tick0})
	}
	var maxTick uint64
	for n := 0; ; n++ {
		left := false
		for _, x := range ths {
			if len(x.evs) == 0 {
				continue
			}
			left = true
			k := min(len(x.evs), 1+r.Intn(o.FrameEvents))
			off := buf.Len()
			prev, err := w.Events(x.tid, x.prev, x.evs[:k])
			if err != nil {
				t.Fatal(err)
			}
			mark()
			g.Frames = append(g.Frames, GenFrame{off, buf.Len(), x.tid, x.evs[:k]})
			for _, e := range x.evs[:k] {
				maxTick = max(maxTick, e.End)
			}
			x.prev, x.evs = prev, x.evs[k:]
		}
		if !left {
			break
		}
		if n%3 == 2 {
			clockAt(maxTick)
		}
	}
	if !o.NoEnd {
		clockAt(maxTick)
		w.End(stream.StreamCounters{Calls: 1})
		mark()
	}
	if w.Err() != nil {
		t.Fatal(w.Err())
	}
	g.B = buf.Bytes()
	return g
}

// Line24MHz is a clock of 24 MHz ticks.
var Line24MHz = GenLine{Tick0: 3_000_000, Mono0: 5_000_000_000, Num: 125, Den: 3} // 24 MHz ticks
