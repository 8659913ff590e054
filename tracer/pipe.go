package tracer

import (
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

type pipeOp struct {
	kind  uint8
	depth int32
	c     Call // opEnter, opExit; opMark: c.Depth indexes the batch's marks
}

type pipeBatch struct {
	ops   []pipeOp
	marks []Mark
	hs    []*Header // opBegin: c.Depth indexes these and ts
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
}

func newPipe(d TreeSink) *pipe {
	p := &pipe{d: d, full: make(chan *pipeBatch, 2), free: make(chan *pipeBatch, 3), done: make(chan error, 1)}
	for i := 0; i < 2; i++ {
		p.free <- &pipeBatch{ops: make([]pipeOp, 0, pipeBatchOps)}
	}
	p.cur = &pipeBatch{ops: make([]pipeOp, 0, pipeBatchOps)}
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
		b.ops, b.marks, b.hs, b.ts = b.ops[:0], b.marks[:0], b.hs[:0], b.ts[:0]
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
			err = p.d.BeginThread(b.hs[o.c.Depth], b.ts[o.c.Depth])
		case opEnter:
			err = p.d.Enter(&o.c, int(o.depth))
		case opExit:
			err = p.d.Exit(&o.c, int(o.depth))
		case opMark:
			err = p.d.Mark(&b.marks[o.c.Depth], int(o.depth))
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

func (p *pipe) add(kind uint8, depth int, c *Call) (*pipeOp, error) {
	if len(p.cur.ops) == pipeBatchOps {
		if err := p.send(); err != nil {
			return nil, err
		}
	}
	p.cur.ops = append(p.cur.ops, pipeOp{kind: kind, depth: int32(depth)})
	o := &p.cur.ops[len(p.cur.ops)-1]
	if c != nil {
		o.c = *c
	}
	return o, nil
}

func (p *pipe) BeginThread(h *Header, t *Thread) error {
	o, err := p.add(opBegin, 0, nil)
	if err == nil {
		o.c.Depth = len(p.cur.hs)
		p.cur.hs, p.cur.ts = append(p.cur.hs, h), append(p.cur.ts, t)
	}
	return err
}

func (p *pipe) Enter(c *Call, d int) error {
	_, err := p.add(opEnter, d, c)
	return err
}

func (p *pipe) Exit(c *Call, d int) error {
	_, err := p.add(opExit, d, c)
	return err
}

func (p *pipe) Mark(m *Mark, d int) error {
	o, err := p.add(opMark, d, nil)
	if err == nil {
		o.c.Depth = len(p.cur.marks)
		p.cur.marks = append(p.cur.marks, *m)
	}
	return err
}

func (p *pipe) EndThread() error {
	_, err := p.add(opEnd, 0, nil)
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
