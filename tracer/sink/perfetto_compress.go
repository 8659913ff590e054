// The Perfetto sink's compressed_packets (perfetto.go): packets cut into batches of
// pfBatchBytes, each compressed on a worker goroutine (by pfDeflater, perfetto_deflate.go, or
// compress/zlib at a level) while the next is encoded, and written in order.

package sink

import (
	"compress/zlib"
	"io"
	"runtime"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"
)

// pfBatchBytes is how many bytes of packets go into one compressed_packets: Perfetto wants
// each such packet under 512 KB (trace_packet.proto), and neither pfDeflater nor
// compress/zlib grows its input by more than a few bytes per 64 KiB (both fall back to
// stored blocks), so a batch cut past this (by one packet) stays under it compressed.
const pfBatchBytes = 448 << 10

// pfCompressor compresses batches of packets on worker goroutines (as many as there are
// cores but one, at least one: the caller encodes the next batch meanwhile) and writes them
// in order, each a TracePacket of compressed_packets.
type pfCompressor struct {
	w     io.Writer
	level int
	jobs  chan *pfBatch // to the workers
	order chan *pfBatch // to the writer, in order
	free  chan *pfBatch // batches written, to reuse
	done  chan struct{} // the writer has finished
	mu    sync.Mutex
	werr  error
}

type pfBatch struct {
	raw   []byte
	pkts  []pfPkt
	obuf  []byte // the compressed packet, with room in front
	out   []byte // the compressed packet, in obuf
	ready chan struct{}
}

// A worker compresses several times faster than the encoder fills batches: two are plenty.
const pfMaxWorkers = 2

func newPfCompressor(w io.Writer, level int) *pfCompressor {
	n := min(pfMaxWorkers, max(1, runtime.GOMAXPROCS(0)-1))
	// n+1 batches: n compressing (or being written), one to swap with the batch just filled;
	// made now, so that what is allocated does not depend on the pace of the workers
	z := &pfCompressor{w: w, level: level, jobs: make(chan *pfBatch, n+1), order: make(chan *pfBatch, n+1),
		free: make(chan *pfBatch, n+1), done: make(chan struct{})}
	for i := 0; i <= n; i++ {
		// a packet is at least 12 bytes; compressed, a batch is rarely half its size
		z.free <- &pfBatch{raw: make([]byte, 0, pfBatchBytes+4096), pkts: make([]pfPkt, 0, pfBatchBytes/12+512),
			obuf: make([]byte, 0, pfBatchBytes/2)}
	}
	for i := 0; i < n; i++ {
		go z.work()
	}
	go z.write()
	return z
}

func (z *pfCompressor) err() error {
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.werr
}

func (z *pfCompressor) setErr(err error) {
	z.mu.Lock()
	if z.werr == nil {
		z.werr = err
	}
	z.mu.Unlock()
}

// submit queues a batch (blocking while the workers are behind) and returns empty buffers
// for the next.
func (z *pfCompressor) submit(raw []byte, pkts []pfPkt) ([]byte, []pfPkt) {
	b := <-z.free
	nextRaw, nextPkts := b.raw[:0], b.pkts[:0]
	b.raw, b.pkts, b.ready = raw, pkts, make(chan struct{})
	z.order <- b
	z.jobs <- b
	return nextRaw, nextPkts
}

// pfSliceWriter appends what is written to it.
type pfSliceWriter struct{ b []byte }

func (w *pfSliceWriter) Write(p []byte) (int, error) { w.b = append(w.b, p...); return len(p), nil }

func (z *pfCompressor) work() {
	var zw *zlib.Writer
	var df pfDeflater
	out := &pfSliceWriter{}
	// room for the packet's header in front: Trace.packet's tag and length, then
	// compressed_packets' tag and length; lengths of at most 3 bytes (under 2 MiB)
	const head = 1 + 3 + 2 + 3
	var zeros [head]byte
	for b := range z.jobs {
		buf := append(b.obuf[:0], zeros[:]...)
		switch {
		case z.level == 0:
			buf = df.compress(buf, b.raw, b.pkts)
		case zw == nil:
			var err error
			out.b = buf
			if zw, err = zlib.NewWriterLevel(out, z.level); err != nil {
				z.setErr(err)
				close(b.ready)
				continue
			}
			fallthrough
		default:
			out.b = buf
			zw.Reset(out)
			_, err := zw.Write(b.raw)
			if err == nil {
				err = zw.Close()
			}
			if err != nil {
				z.setErr(err)
			}
			buf = out.b
		}
		b.obuf = buf
		n := uint64(len(buf) - head)
		var h [head + 8]byte
		hp := protowire.AppendVarint(protowire.AppendTag(h[8:8], pfPacketCompressed, protowire.BytesType), n)
		inner := len(hp)
		hp = append(protowire.AppendVarint(append(h[:0], tagPacket), uint64(inner)+n), hp...)
		if len(hp) > head { // never, for batches of pfBatchBytes
			b.out = append(hp, buf[head:]...)
		} else {
			b.out = buf[head-len(hp):]
			copy(b.out, hp)
		}
		close(b.ready)
	}
}

func (z *pfCompressor) write() {
	defer close(z.done)
	for b := range z.order {
		<-b.ready
		if z.err() == nil {
			if _, err := z.w.Write(b.out); err != nil {
				z.setErr(err)
			}
		}
		b.out = nil
		z.free <- b // never blocks: there are no more batches than room
	}
}

// close waits for every batch to be written.
func (z *pfCompressor) close() error {
	close(z.jobs)
	close(z.order)
	<-z.done
	return z.err()
}
