package tracer

import (
	"errors"
	"runtime"
	"sync/atomic"
)

// Two cores: the stream reader (decoding, pre-order) on one goroutine, the sink (formatting,
// compressing, aggregating) on another. What the reader tells the sink goes over in batches of
// a few thousand operations, copied, in order; two batches are in flight at most, so memory
// stays a few MiB whatever the trace.

// drive is the TreeSink the reader drives for a Sink: thread and trace boundaries go to the
// Sink, calls and marks to its TreeSink.
type drive struct {
	sink Sink
	ts   TreeSink
}

func (d drive) BeginThread(h *Header, t *Thread) error { return d.sink.BeginThread(h, t) }
func (d drive) Enter(c *Call, depth int) error         { return d.ts.Enter(c, depth) }
func (d drive) Exit(c *Call, depth int) error          { return d.ts.Exit(c, depth) }
func (d drive) Mark(m *Mark, depth int) error          { return d.ts.Mark(m, depth) }
func (d drive) EndThread() error                       { return d.sink.EndThread() }
func (d drive) Close(t Totals) error                   { return d.sink.Close(t) }

// pipeMin is the number of calls from which a conversion uses a second goroutine.
const pipeMin = 200_000

// newDriver returns what the reader drives: the sink itself, or through a pipe when the
// trace is big and there is a second core.
func newDriver(sink Sink, ts TreeSink, calls uint64) TreeSink {
	d := drive{sink, ts}
	if calls < pipeMin || runtime.GOMAXPROCS(0) < 2 {
		return d
	}
	return newPipe(d)
}

const (
	opBegin = iota
	opEnter
	opExit
	opMark
	opEnd
)

// pipeOp is one thing told to the pipe. An exit carries only the call's self time: the
// consumer keeps the calls entered and not yet exited (kept calls nest), so a call crosses
// the pipe once, at its enter.
type pipeOp struct {
	kind  uint8
	depth int32
	i     int32  // opEnter: index in calls; opMark: in marks; opBegin: in hs and ts
	self  uint64 // opExit: SelfNanos
}

type pipeBatch struct {
	ops   []pipeOp
	calls []Call
	marks []Mark
	hs    []*Header
	ts    []*Thread
}

const pipeBatchOps = 4096

// pipe is a TreeSink that hands what it is told to d on another goroutine.
type pipe struct {
	d    TreeSink
	cur  *pipeBatch
	full chan *pipeBatch
	free chan *pipeBatch
	done chan error // the consumer's first error, once it has stopped
	cerr atomic.Pointer[error]
	err  error
	open []Call // the consumer's: entered, not yet exited
	call Call   // the consumer's: the copy an Enter is given
}

func newPipe(d TreeSink) *pipe {
	p := &pipe{d: d, full: make(chan *pipeBatch, 2), free: make(chan *pipeBatch, 3), done: make(chan error, 1)}
	for i := 0; i < 2; i++ {
		p.free <- &pipeBatch{ops: make([]pipeOp, 0, pipeBatchOps), calls: make([]Call, 0, pipeBatchOps)}
	}
	p.cur = &pipeBatch{ops: make([]pipeOp, 0, pipeBatchOps), calls: make([]Call, 0, pipeBatchOps)}
	go p.consume()
	return p
}

func (p *pipe) consume() {
	var err error
	for b := range p.full {
		if err == nil {
			if err = p.apply(b); err != nil {
				p.cerr.Store(&err)
			}
		}
		b.ops, b.calls, b.marks, b.hs, b.ts = b.ops[:0], b.calls[:0], b.marks[:0], b.hs[:0], b.ts[:0]
		p.free <- b
	}
	p.done <- err
}

func (p *pipe) apply(b *pipeBatch) error {
	for i := range b.ops {
		o := &b.ops[i]
		var err error
		switch o.kind {
		case opBegin:
			p.open = p.open[:0]
			err = p.d.BeginThread(b.hs[o.i], b.ts[o.i])
		case opEnter:
			p.open = append(p.open, b.calls[o.i])
			p.call = b.calls[o.i] // what Enter does to it is not seen at Exit
			err = p.d.Enter(&p.call, int(o.depth))
		case opExit:
			k := len(p.open) - 1
			if k < 0 {
				return errors.New("tracer: pipe: a call exited that was not entered")
			}
			c := &p.open[k]
			c.SelfNanos = o.self
			err = p.d.Exit(c, int(o.depth))
			p.open = p.open[:k]
		case opMark:
			err = p.d.Mark(&b.marks[o.i], int(o.depth))
		case opEnd:
			err = p.d.EndThread()
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// send hands the current batch over; it fails with the consumer's error once there is one.
func (p *pipe) send() error {
	if p.err != nil {
		return p.err
	}
	if e := p.cerr.Load(); e != nil {
		p.err = *e
		return p.err
	}
	p.full <- p.cur
	p.cur = <-p.free
	return nil
}

// add appends an op to the current batch, handing the batch over first when it is full, and
// returns it (its index, into the batch's calls, marks or headers, is set by the caller: the
// batch may have changed).
func (p *pipe) add(o pipeOp) (*pipeOp, error) {
	if len(p.cur.ops) == pipeBatchOps {
		if err := p.send(); err != nil {
			return nil, err
		}
	}
	p.cur.ops = append(p.cur.ops, o)
	return &p.cur.ops[len(p.cur.ops)-1], nil
}

func (p *pipe) BeginThread(h *Header, t *Thread) error {
	o, err := p.add(pipeOp{kind: opBegin})
	if err != nil {
		return err
	}
	o.i = int32(len(p.cur.hs))
	p.cur.hs, p.cur.ts = append(p.cur.hs, h), append(p.cur.ts, t)
	return nil
}

func (p *pipe) Enter(c *Call, d int) error {
	o, err := p.add(pipeOp{kind: opEnter, depth: int32(d)})
	if err != nil {
		return err
	}
	o.i = int32(len(p.cur.calls))
	p.cur.calls = append(p.cur.calls, *c)
	return nil
}

// Exit: the call is the one entered last and not exited (the replayer's kept calls nest);
// only its self time is new.
func (p *pipe) Exit(c *Call, d int) error {
	_, err := p.add(pipeOp{kind: opExit, depth: int32(d), self: c.SelfNanos})
	return err
}

func (p *pipe) Mark(m *Mark, d int) error {
	o, err := p.add(pipeOp{kind: opMark, depth: int32(d)})
	if err != nil {
		return err
	}
	o.i = int32(len(p.cur.marks))
	p.cur.marks = append(p.cur.marks, *m)
	return nil
}

func (p *pipe) EndThread() error {
	_, err := p.add(pipeOp{kind: opEnd})
	return err
}

// Close hands over what is left, waits for the consumer and closes the sink on this goroutine.
func (p *pipe) Close(t Totals) error {
	err := p.stop()
	if err != nil {
		return err
	}
	return p.d.Close(t)
}

// stop ends the consumer (after what was handed over) and returns its error.
func (p *pipe) stop() error {
	if p.full == nil {
		return p.err
	}
	if p.err == nil && len(p.cur.ops) > 0 {
		p.full <- p.cur
	}
	close(p.full)
	err := <-p.done
	p.full = nil
	if p.err == nil {
		p.err = err
	}
	return p.err
}
