package sink

import (
	"errors"
	"io"
)

// outWriter is the buffered output of the text timelines (Chrome JSON, speedscope): blocks of
// outBlock bytes, each written by a goroutine of its own once full, so that the copy into the
// kernel (a JSON of every call of a 12 M-call run is 2 GB) is not on the goroutine that
// formats, which is the conversion's busiest. Two blocks are in flight at most: memory is a
// few hundred KiB whatever the output. A sink appends to the current block in place (tail,
// then commit) or through Write. Flush writes what is left and waits for every block to be
// written; nothing is written on another goroutine until a first block is full, so a small
// output is written by Flush alone.
type outWriter struct {
	w     io.Writer
	b     []byte        // the current block
	full  chan []byte   // blocks to write, in order (nil: no writer goroutine)
	free  chan []byte   // written blocks, for reuse
	done  chan struct{} // closed when the writer goroutine has ended
	werr  error         // the writer goroutine's first error (read once done is closed, or via errc)
	errc  chan error    // the writer goroutine's first error, as soon as there is one (capacity 1)
	err   error         // the first error seen by this side
	spare int
}

const outBlock = 256 << 10

func newOutWriter(w io.Writer) *outWriter {
	return &outWriter{w: w, b: make([]byte, 0, outBlock+outBlock/4)}
}

// tail is the current block, to append to; commit takes it back.
func (o *outWriter) tail() []byte { return o.b }

// commit takes back the block tail returned with what was appended to it, and hands it to
// the writer once it is full.
func (o *outWriter) commit(b []byte) {
	o.b = b
	if len(b) >= outBlock {
		o.send()
	}
}

// Write appends p.
func (o *outWriter) Write(p []byte) (int, error) {
	o.commit(append(o.b, p...))
	return len(p), o.err
}

// WriteString appends s.
func (o *outWriter) WriteString(s string) (int, error) {
	o.commit(append(o.b, s...))
	return len(s), o.err
}

// send hands the current block to the writer goroutine (started on the first full block).
func (o *outWriter) send() {
	if o.err != nil {
		o.b = o.b[:0]
		return
	}
	if o.full == nil {
		o.full, o.free, o.done, o.errc = make(chan []byte, 2), make(chan []byte, 3), make(chan struct{}), make(chan error, 1)
		go o.write()
		o.spare = 2
	}
	select {
	case err := <-o.errc:
		o.err = err
		o.b = o.b[:0]
		return
	default:
	}
	o.full <- o.b
	if o.spare > 0 {
		o.spare--
		o.b = make([]byte, 0, outBlock+outBlock/4)
		return
	}
	o.b = (<-o.free)[:0]
}

func (o *outWriter) write() {
	defer close(o.done)
	for b := range o.full {
		if o.werr == nil {
			if _, err := o.w.Write(b); err != nil {
				o.werr = err
				o.errc <- err
			}
		}
		o.free <- b
	}
}

// Flush writes what is left, and waits until every block is written; it returns the first
// write error.
func (o *outWriter) Flush() error {
	if o.full != nil {
		if o.err == nil && len(o.b) > 0 {
			o.full <- o.b
			o.b = make([]byte, 0, outBlock+outBlock/4)
		}
		close(o.full)
		<-o.done
		o.full, o.free, o.errc = nil, nil, nil
		if o.err == nil {
			o.err = o.werr
		}
		return o.err
	}
	if o.err == nil && len(o.b) > 0 {
		_, o.err = o.w.Write(o.b)
	}
	o.b = o.b[:0]
	return o.err
}

// abort ends the writer goroutine, if one runs, without writing what is left: the conversion
// failed. Later writes fail with errAborted.
func (o *outWriter) abort() {
	if o.full != nil {
		close(o.full)
		<-o.done
		o.full, o.free, o.errc = nil, nil, nil
	}
	if o.err == nil {
		o.err = errAborted
	}
	o.b = o.b[:0]
}

var errAborted = errors.New("the conversion was aborted")
