package engine

import (
	"runtime"
	"sync/atomic"

	"github.com/msgtrace/msgtrace/tracer/stream"
)

// Two cores: the stream reader (decoding, pass 2's segment trees, the walk in pre-order, each
// call's start converted to ns) on one goroutine, and on another what is done per call once
// its place is known (converting its end, naming it, filtering it, the kept calls' nesting
// and self times) and the sink (formatting, compressing, aggregating): the two conversions
// are split between the sides so that each does about as much per call. The reader tells the
// other side a call's fields (method id, ticks, start in ns, depth), pointer-free, in
// batches of a few thousand operations, in order; two batches are in flight at most, so
// memory stays a few MiB whatever the trace. A small trace, or one core, applies each batch
// on the reader's goroutine instead.

// pipeMin is the number of calls from which a conversion uses a second goroutine.
const pipeMin = 200_000

const (
	opBegin = iota
	opEnter
	opExit
	opMark
	opEnd
)

// rawOp is one thing the reader tells the applier (40 bytes).
type rawOp struct {
	kind       uint8
	flags      uint8  // opEnter: FlagUnwound, FlagOpen
	depth      uint32 // on the thread's shadow stack
	id         uint64 // opEnter: the method; opMark: index in marks; opBegin: in begins
	start      uint64 // ticks: opEnter, and opExit (with depth, which call it closes)
	startNanos uint64 // opEnter: start on the trace's timeline
	end        uint64 // opEnter: ticks
}

// rawBegin is a thread's start: its stream, header and thread, and a copy of the stream's
// clock made by the reader (the reader's own converts starts meanwhile).
type rawBegin struct {
	sf    *streamFile
	h     *stream.Header
	t     *stream.Thread
	clock clockMap
}

type opBatch struct {
	ops    []rawOp
	marks  []stream.Mark
	begins []rawBegin
}

const pipeBatchOps = 4096

func newOpBatch() *opBatch { return &opBatch{ops: make([]rawOp, 0, pipeBatchOps)} }

// next appends an op to be filled in place, every field (see appendSlot). The caller has made
// room.
func (b *opBatch) next() *rawOp {
	n := len(b.ops)
	b.ops = b.ops[:n+1]
	return &b.ops[n]
}

// AppendSlot appends an element to s for the caller to fill, every field: in place, not
// appended as a struct literal, which is built on the stack and copied back with wider loads
// than its stores and stalls on store forwarding (the reader's, the applier's and the JSON
// sink's busiest instructions before). The element is zeroed only where s had to grow.
func AppendSlot[T any](s []T) ([]T, *T) {
	n := len(s)
	if n < cap(s) {
		s = s[:n+1]
	} else {
		var zero T
		s = append(s, zero)
	}
	return s, &s[n]
}

// emitter is the reader's side: it fills batches and hands them to the applier, on another
// goroutine (piped) or on its own.
type emitter struct {
	a     *applier
	cur   *opBatch
	piped bool
	full  chan *opBatch
	free  chan *opBatch
	done  chan error // the applier's first error, once it has stopped
	cerr  atomic.Pointer[error]
	err   error
}

// newEmitter returns the emitter for a trace of calls calls.
func newEmitter(a *applier, calls uint64) *emitter {
	e := &emitter{a: a, cur: newOpBatch()}
	if calls < pipeMin || runtime.GOMAXPROCS(0) < 2 {
		return e
	}
	e.piped = true
	e.full, e.free, e.done = make(chan *opBatch, 2), make(chan *opBatch, 3), make(chan error, 1)
	for i := 0; i < 2; i++ {
		e.free <- newOpBatch()
	}
	go e.consume()
	return e
}

func (e *emitter) consume() {
	var err error
	for b := range e.full {
		if err == nil {
			if err = e.a.apply(b); err != nil {
				e.cerr.Store(&err)
			}
		}
		b.reset()
		e.free <- b
	}
	e.done <- err
}

func (b *opBatch) reset() {
	clear(b.marks) // no pointers kept from one batch to the next
	clear(b.begins)
	b.ops, b.marks, b.begins = b.ops[:0], b.marks[:0], b.begins[:0]
}

// flush hands the current batch over (or applies it); it fails with the applier's error once
// there is one.
func (e *emitter) flush() error {
	if e.err != nil {
		return e.err
	}
	if !e.piped {
		e.err = e.a.apply(e.cur)
		e.cur.reset()
		return e.err
	}
	if c := e.cerr.Load(); c != nil {
		e.err = *c
		return e.err
	}
	e.full <- e.cur
	e.cur = <-e.free
	return nil
}

// op appends an op, handing the batch over first when it is full.
func (e *emitter) op(o rawOp) error {
	if len(e.cur.ops) == pipeBatchOps {
		if err := e.flush(); err != nil {
			return err
		}
	}
	e.cur.ops = append(e.cur.ops, o)
	return nil
}

func (e *emitter) begin(sf *streamFile, h *stream.Header, t *stream.Thread) error {
	if len(e.cur.ops) == pipeBatchOps {
		if err := e.flush(); err != nil {
			return err
		}
	}
	e.cur.ops = append(e.cur.ops, rawOp{kind: opBegin, id: uint64(len(e.cur.begins))})
	e.cur.begins = append(e.cur.begins, rawBegin{sf, h, t, sf.clock})
	return nil
}

func (e *emitter) mark(m *stream.Mark) error {
	if len(e.cur.ops) == pipeBatchOps {
		if err := e.flush(); err != nil {
			return err
		}
	}
	e.cur.ops = append(e.cur.ops, rawOp{kind: opMark, id: uint64(len(e.cur.marks))})
	e.cur.marks = append(e.cur.marks, *m)
	return nil
}

// stop applies what is left, ends the applier's goroutine and returns the first error.
func (e *emitter) stop() error {
	if e.err == nil && len(e.cur.ops) > 0 {
		if !e.piped {
			e.flush()
		} else if e.full != nil {
			e.full <- e.cur
			e.cur = newOpBatch()
		}
	}
	if e.piped && e.full != nil {
		close(e.full)
		err := <-e.done
		e.full = nil
		if e.err == nil {
			e.err = err
		}
	}
	return e.err
}

// applier is the other side: the calls entered and not yet exited, and the sink.
type applier struct {
	sink   Sink     // thread and trace boundaries
	ts     TreeSink // calls and marks
	flt    *treeFilter
	sf     *streamFile
	thread *stream.Thread
	clock  clockMap // the stream's clock, this goroutine's copy (conversions cache a segment)
	out    []outEntry
	call   Call   // what the sink is given (rebuilt for each Enter and Exit)
	calls  uint64 // counted here: added to the trace's Totals at the end
	open   uint64
	kept   uint64

	foldKeys bool    // a budget folds calls: each entered Call gets its foldKey
	skip     skipper // told the dropped calls (the Sinks without a tree of their own), or nil
}

// skipper is told the calls a filter dropped, at their exits: a Sink without a TreeSink of its
// own takes them (Sink.Skip), in the order calls ended.
type skipper interface{ Skip(depth int) error }

// skipperOf returns what tells ts the dropped calls (nil: none takes them).
func skipperOf(ts TreeSink) skipper {
	switch t := ts.(type) {
	case postOrder:
		return t.s
	case teeTree:
		var sk teeSkip
		for _, m := range t {
			if s := skipperOf(m); s != nil {
				sk = append(sk, s)
			}
		}
		if len(sk) > 0 {
			return sk
		}
	}
	return nil
}

type teeSkip []skipper

func (t teeSkip) Skip(d int) error {
	for _, s := range t {
		if err := s.Skip(d); err != nil {
			return err
		}
	}
	return nil
}

// outEntry is a call entered and not yet exited, on the output stack: what its Call is made
// of again at its exit.
type outEntry struct {
	name       string // the method's (looked up once, at its entry)
	start      uint64 // ticks, to match the record that closes it
	startNanos uint64
	durNanos   uint64
	children   uint64 // total duration of its kept children
	depth      uint32 // on the thread's shadow stack
	flags      int32  // the Call's
	keptUp     int32  // index of the nearest kept entry below, -1 none
	kdepth     int32  // depth among kept calls (of this entry if kept; of its children otherwise)
	method     Method
	kept       bool
}

func (a *applier) apply(b *opBatch) error {
	for i := range b.ops {
		o := &b.ops[i]
		var err error
		switch o.kind {
		case opEnter:
			err = a.enter(o)
		case opExit:
			err = a.exit(o.start, o.depth)
		case opMark:
			err = a.mark(&b.marks[o.id])
		case opBegin:
			bg := &b.begins[o.id]
			if a.sf != bg.sf {
				a.sf, a.clock = bg.sf, bg.clock
			}
			a.thread, a.out = bg.t, a.out[:0]
			err = a.sink.BeginThread(bg.h, bg.t)
		case opEnd:
			if err = a.end(); err == nil {
				err = a.sink.EndThread()
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// ns converts a tick of the current stream to ns on the trace's timeline.
func (a *applier) ns(tick uint64) uint64 {
	m := a.clock.mono(tick)
	if m < a.sf.base {
		return 0
	}
	return m - a.sf.base
}

// enter opens a call on the output stack, and tells the sink when it is kept.
func (a *applier) enter(o *rawOp) error {
	start, e := o.startNanos, a.ns(o.end)
	dur := e - min(e, start)
	up, kd := int32(-1), int32(0)
	if k := len(a.out); k > 0 {
		top := &a.out[k-1]
		if top.kept {
			up, kd = int32(k-1), top.kdepth+1
		} else {
			up, kd = top.keptUp, top.kdepth
		}
	}
	a.calls++
	if o.flags&stream.FlagOpen != 0 {
		a.open++
	}
	name, mflags, m := a.sf.method(o.id)
	flags := mflags | int(o.flags)
	kept := a.flt.all || a.flt.keep(a.sf, o.id, name, dur, int(o.depth))
	var oe *outEntry
	a.out, oe = AppendSlot(a.out)
	oe.name, oe.method, oe.start, oe.startNanos, oe.durNanos, oe.children, oe.depth = name, m, o.start, start, dur, 0, o.depth
	oe.flags, oe.keptUp, oe.kdepth, oe.kept = int32(flags), up, kd, kept
	if !kept {
		return nil
	}
	a.kept++
	c := &a.call
	c.Name, c.Method, c.names, c.Thread, c.Depth, c.Flags, c.ID = name, m, a.sf.names, a.thread, int(o.depth), flags, o.id
	c.StartNanos, c.DurNanos, c.SelfNanos, c.Folded = start, dur, 0, 0
	if a.foldKeys {
		c.foldKey = a.sf.durKey(o.end - min(o.end, o.start))
	}
	return a.ts.Enter(c, int(kd))
}

// exit closes the call recorded at start and depth (calls above it that a damaged stream
// never closed are closed first).
func (a *applier) exit(start uint64, depth uint32) error {
	k := len(a.out) - 1
	for k >= 0 && !(a.out[k].start == start && a.out[k].depth == depth) {
		k--
	}
	if k < 0 {
		return nil
	}
	for len(a.out) > k {
		if err := a.pop(); err != nil {
			return err
		}
	}
	return nil
}

func (a *applier) pop() error {
	k := len(a.out) - 1
	e := &a.out[k]
	a.out = a.out[:k]
	if !e.kept {
		if a.skip != nil {
			return a.skip.Skip(int(e.depth))
		}
		return nil
	}
	if e.keptUp >= 0 {
		a.out[e.keptUp].children += e.durNanos
	}
	c := &a.call
	c.Name, c.Method, c.names, c.Thread, c.Depth, c.Flags = e.name, e.method, a.sf.names, a.thread, int(e.depth), int(e.flags)
	c.StartNanos, c.DurNanos, c.SelfNanos, c.Folded = e.startNanos, e.durNanos, e.durNanos-min(e.durNanos, e.children), 0
	return a.ts.Exit(c, int(e.kdepth))
}

// mark tells the sink a mark, inside the kept calls open.
func (a *applier) mark(m *stream.Mark) error {
	d := 0
	if k := len(a.out); k > 0 {
		if a.out[k-1].kept {
			d = int(a.out[k-1].kdepth) + 1
		} else {
			d = int(a.out[k-1].kdepth)
		}
	}
	return a.ts.Mark(m, d)
}

// end closes what is still open at the end of the thread, innermost first.
func (a *applier) end() error {
	for len(a.out) > 0 {
		if err := a.pop(); err != nil {
			return err
		}
	}
	return nil
}
