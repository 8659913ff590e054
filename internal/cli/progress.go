package cli

import (
	"fmt"
	"io"
	"os"
	"time"
)

// progress shows on a terminal how far a conversion has read: a line rewritten in place,
// first after half a second (small files never show it), then every 200 ms.
type progress struct {
	w       io.Writer
	prog    string
	label   string
	total   int64 // bytes the conversion will read
	done    int64
	start   time.Time
	last    time.Time
	delay   time.Duration
	shown   bool
	enabled bool
}

// newProgress reports to stderr when it is a terminal, and otherwise stays silent.
func newProgress(s *Session, label string, total int64) *progress {
	f, ok := s.Stderr.(*os.File)
	return &progress{w: s.Stderr, prog: s.Prog, label: label, total: total, start: time.Now(), delay: 500 * time.Millisecond,
		enabled: ok && isTerminal(f.Fd())}
}

func (p *progress) add(n int) {
	if !p.enabled || n <= 0 {
		return
	}
	p.done += int64(n)
	now := time.Now()
	if now.Sub(p.start) < p.delay || now.Sub(p.last) < 200*time.Millisecond {
		return
	}
	p.last, p.shown = now, true
	pct := 100 * float64(min(p.done, p.total)) / float64(max(p.total, 1))
	fmt.Fprintf(p.w, "\r%s: converting %s: %3.0f%% (%.1f of %.1f MB read)\x1b[K", p.prog, p.label, pct, float64(p.done)/1e6, float64(p.total)/1e6)
}

// finish clears the line.
func (p *progress) finish() {
	if p.shown {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
}

// countingReaderAt tells a progress what it reads.
type countingReaderAt struct {
	r io.ReaderAt
	p *progress
}

func (c countingReaderAt) ReadAt(b []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(b, off)
	c.p.add(n)
	return n, err
}

// countingReader tells a progress what it reads.
type countingReader struct {
	r io.Reader
	p *progress
}

func (c countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.p.add(n)
	return n, err
}
