// A stream's frames off its bytes: a window over the file (one buffer, with read-ahead), each
// frame checked (magic, length, CRC), resyncing past bad bytes to the next valid frame and
// stopping at a torn tail; a frame pass 1 indexed read again; ScanFrames, the same walk for
// checking a writer's output.

package engine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"

	"github.com/msgtrace/msgtrace/tracer/stream"
)

// window reads a file through one buffer: a frame is served from it when it is inside, and
// otherwise the buffer is refilled from the frame's offset (with read-ahead).
type window struct {
	r     io.ReaderAt
	size  int64
	ahead int
	back  bool // reading backwards: a refill ends where the bytes asked for end
	buf   []byte
	start int64
}

// at returns n bytes at off, valid until the next call.
func (w *window) at(off int64, n int) ([]byte, error) {
	if off < 0 || n < 0 || off > w.size-int64(n) {
		return nil, io.ErrUnexpectedEOF
	}
	if off >= w.start && off+int64(n) <= w.start+int64(len(w.buf)) {
		return w.buf[off-w.start:][:n], nil
	}
	m := max(n, w.ahead)
	from := off
	if w.back {
		from = max(0, off+int64(n)-int64(m))
	}
	if int64(m) > w.size-from {
		m = int(w.size - from)
	}
	if cap(w.buf) < m {
		w.buf = make([]byte, m)
	}
	w.buf = w.buf[:m]
	k, err := w.r.ReadAt(w.buf, from)
	if k < m {
		w.buf = w.buf[:0]
		if err == nil || err == io.EOF {
			err = errors.New("file shrank while being read")
		}
		return nil, err
	}
	w.start = from
	return w.buf[off-from:][:n], nil
}

// check says whether a whole, valid frame starts at off, or the start of one that runs past
// the end of the file (torn).
func (sf *streamFile) check(off int64, resync bool) (length int, ok, torn bool, err error) {
	rem := sf.w.size - off
	if rem < stream.FrameHeader {
		b, err := sf.w.at(off, int(rem))
		if err != nil {
			return 0, false, false, err
		}
		return 0, false, bytes.HasPrefix(b, []byte(stream.StreamMagic)) || bytes.HasPrefix([]byte(stream.StreamMagic), b), nil
	}
	h, err := sf.w.at(off, stream.FrameHeader)
	if err != nil {
		return 0, false, false, err
	}
	if string(h[:4]) != stream.StreamMagic {
		return 0, false, false, nil
	}
	n := binary.LittleEndian.Uint32(h[stream.FrameLenAt:])
	if n > stream.MaxFramePayload {
		return 0, false, false, nil
	}
	if int64(n) > rem-stream.FrameHeader {
		return int(n), false, true, nil
	}
	if resync {
		if sf.resyncBudget < 0 {
			return 0, false, false, nil
		}
		sf.resyncBudget -= int64(n)
	}
	b, err := sf.w.at(off, stream.FrameHeader+int(n))
	if err != nil {
		return 0, false, false, err
	}
	tab := stream.Castagnoli()
	crc := crc32.Update(crc32.Update(0, tab, b[stream.FrameKindAt:stream.FrameCRCAt]), tab, b[stream.FrameHeader:])
	return int(n), crc == binary.LittleEndian.Uint32(b[stream.FrameCRCAt:]), false, nil
}

// resync finds the next valid frame from off (-1: none), and the first torn frame met on the
// way (-1: none).
func (sf *streamFile) resync(off int64) (valid, torn int64, err error) {
	torn = -1
	size := sf.w.size
	for p := off; p < size && sf.resyncBudget >= 0; {
		n := int(min(1<<20, size-p))
		b, err := sf.w.at(p, n)
		if err != nil {
			return -1, torn, err
		}
		i := bytes.Index(b, []byte(stream.StreamMagic))
		if i < 0 {
			if p+int64(n) >= size {
				// a magic cut short at the very end
				for k := min(3, n); k > 0; k-- {
					if bytes.Equal(b[n-k:], []byte(stream.StreamMagic[:k])) && torn < 0 {
						torn = size - int64(k)
						break
					}
				}
				break
			}
			p += int64(n - 3)
			sf.resyncBudget -= int64(n)
			continue
		}
		q := p + int64(i)
		_, ok, isTorn, err := sf.check(q, true)
		if err != nil {
			return -1, torn, err
		}
		if ok {
			return q, torn, nil
		}
		if isTorn && torn < 0 {
			torn = q
		}
		p = q + 1
	}
	return -1, torn, nil
}

// next returns the next valid frame, counting bad and torn bytes on the way, or io.EOF.
func (sf *streamFile) next() (kind uint8, off int64, payload []byte, err error) {
	size := sf.w.size
	for sf.off < size {
		n, ok, torn, err := sf.check(sf.off, false)
		if err != nil {
			return 0, 0, nil, err
		}
		if ok {
			off := sf.off
			b, err := sf.w.at(off, stream.FrameHeader+n)
			if err != nil {
				return 0, 0, nil, err
			}
			sf.off += int64(stream.FrameHeader + n)
			return b[stream.FrameKindAt], off, b[stream.FrameHeader:], nil
		}
		valid, tornAt, err := sf.resync(sf.off + 1)
		if err != nil {
			return 0, 0, nil, err
		}
		switch {
		case valid >= 0:
			sf.badFrames++
			sf.badBytes += uint64(valid - sf.off)
			sf.off = valid
		case torn:
			sf.tornBytes += uint64(size - sf.off)
			sf.off = size
		default:
			end := size
			if tornAt >= 0 {
				end = tornAt
				sf.tornBytes += uint64(size - tornAt)
			}
			sf.badFrames++
			sf.badBytes += uint64(end - sf.off)
			sf.off = size
		}
	}
	return 0, 0, nil, io.EOF
}

// frameAt reads the payload of a frame pass 1 indexed.
func (sf *streamFile) frameAt(off int64) ([]byte, error) { return frameAtWith(&sf.w, off) }

// frameAtWith is frameAt reading through w.
func frameAtWith(w *window, off int64) ([]byte, error) {
	h, err := w.at(off, stream.FrameHeader)
	if err != nil {
		return nil, err
	}
	n := binary.LittleEndian.Uint32(h[stream.FrameLenAt:])
	if n > stream.MaxFramePayload {
		return nil, errors.New("stream changed while being read")
	}
	b, err := w.at(off+stream.FrameHeader, int(n))
	return b, err
}

// FrameStats are what ScanFrames skipped.
type FrameStats struct {
	BadFrames, BadBytes, TornBytes uint64
}

// ScanFrames calls fn with every frame of a stream that checks, in file order (payload valid
// during the call only), resyncing past bad frames and stopping at a torn tail as the reader
// does. It is the low-level view for checking a writer's output frame by frame.
func ScanFrames(in Input, fn func(kind uint8, off int64, payload []byte) error) (FrameStats, error) {
	sf := &streamFile{w: window{r: in.R, size: in.Size, ahead: 1 << 20}, resyncBudget: 8*in.Size + 64<<20}
	for {
		kind, off, p, err := sf.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return FrameStats{}, err
		}
		if err := fn(kind, off, p); err != nil {
			return FrameStats{}, err
		}
	}
	return FrameStats{sf.badFrames, sf.badBytes, sf.tornBytes}, nil
}
