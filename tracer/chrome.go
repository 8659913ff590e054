package tracer

import (
	"bufio"
	"io"
	"strconv"
	"unicode/utf8"
)

// ChromeSink writes Chrome trace event JSON as a stream: complete ("X") events with ts/dur in
// microseconds to the nanosecond, the real pid and tid, self time and depth in args, thread
// and process names as metadata, and the drop counters in otherData. Memory does not grow
// with the number of events.
type ChromeSink struct {
	w       *bufio.Writer
	buf     []byte
	pid     uint64
	tid     uint64
	first   bool
	started bool
	Process string // process name for the metadata; "" for "pid N"
}

// NewChromeSink writes to w.
func NewChromeSink(w io.Writer) *ChromeSink {
	return &ChromeSink{w: bufio.NewWriterSize(w, 1<<16), first: true}
}

// appendMicros writes integer nanoseconds as microseconds with three decimals, exactly, so
// that events nest in the output exactly as they do in ticks.
func appendMicros(b []byte, ns uint64) []byte {
	b = strconv.AppendUint(b, ns/1000, 10)
	f := ns % 1000
	return append(b, '.', byte('0'+f/100), byte('0'+f/10%10), byte('0'+f%10))
}

func (s *ChromeSink) event(b []byte) error {
	if !s.started {
		s.started = true
		if _, err := s.w.WriteString(`{"displayTimeUnit":"ns","traceEvents":[` + "\n"); err != nil {
			return err
		}
	}
	if !s.first {
		s.w.WriteString(",\n")
	}
	s.first = false
	_, err := s.w.Write(b)
	return err
}

func (s *ChromeSink) meta(name string, tid uint64, value string) error {
	b := s.buf[:0]
	b = append(b, `{"ph":"M","name":"`...)
	b = append(b, name...)
	b = append(b, `","pid":`...)
	b = strconv.AppendUint(b, s.pid, 10)
	b = append(b, `,"tid":`...)
	b = strconv.AppendUint(b, tid, 10)
	b = append(b, `,"args":{"name":`...)
	b = appendJSONString(b, value)
	b = append(b, `}}`...)
	s.buf = b
	return s.event(b)
}

// BeginThread writes the thread's (and, the first time, the process's) name.
func (s *ChromeSink) BeginThread(h *Header, t *Thread) error {
	if !s.started || h.PID != s.pid { // a process track for each process of a merged trace
		s.pid = h.PID
		p := s.Process
		if h.Program != "" {
			p = h.Program
		}
		if p == "" {
			p = "pid " + strconv.FormatUint(h.PID, 10)
		}
		if err := s.meta("process_name", 0, p); err != nil {
			return err
		}
	}
	s.tid = t.TID
	name := t.Name
	switch {
	case t.Main:
		name = "main thread"
	case name == "":
		name = "thread " + strconv.FormatUint(t.TID, 10)
	}
	return s.meta("thread_name", t.TID, name)
}

// Call writes one complete event.
func (s *ChromeSink) Call(c *Call) error {
	b := s.buf[:0]
	b = append(b, `{"ph":"X","cat":"objc","name":`...)
	b = appendJSONString(b, c.Name)
	b = append(b, `,"ts":`...)
	b = appendMicros(b, c.StartNanos)
	b = append(b, `,"dur":`...)
	b = appendMicros(b, c.DurNanos)
	b = append(b, `,"pid":`...)
	b = strconv.AppendUint(b, s.pid, 10)
	b = append(b, `,"tid":`...)
	b = strconv.AppendUint(b, s.tid, 10)
	b = append(b, `,"args":{"self_us":`...)
	b = appendMicros(b, c.SelfNanos)
	b = append(b, `,"depth":`...)
	b = strconv.AppendInt(b, int64(c.Depth), 10)
	if c.Flags&FlagUnwound != 0 {
		b = append(b, `,"unwound":true`...)
	}
	b = append(b, `}}`...)
	s.buf = b
	return s.event(b)
}

// Skip does nothing: a dropped call simply has no event.
func (s *ChromeSink) Skip(int) error { return nil }

// EndThread does nothing.
func (s *ChromeSink) EndThread() error { return nil }

// Close ends the JSON with the counters and flushes.
func (s *ChromeSink) Close(t Totals) error {
	if !s.started {
		s.started = true
		s.w.WriteString(`{"displayTimeUnit":"ns","traceEvents":[` + "\n")
	}
	b := s.buf[:0]
	b = append(b, "\n],\"otherData\":{\"calls\":"...)
	b = strconv.AppendUint(b, t.Calls, 10)
	b = append(b, `,"kept":`...)
	b = strconv.AppendUint(b, t.Kept, 10)
	b = append(b, `,"dropped_buffer_full":`...)
	b = strconv.AppendUint(b, t.Dropped, 10)
	b = append(b, `,"untraced_stack_full":`...)
	b = strconv.AppendUint(b, t.Overflow, 10)
	b = append(b, "}}\n"...)
	if _, err := s.w.Write(b); err != nil {
		return err
	}
	return s.w.Flush()
}

// appendJSONString appends s as a JSON string (strconv.AppendQuote's \x escapes are not JSON).
// Runs of plain bytes are copied at once; control characters are escaped and invalid UTF-8
// becomes U+FFFD.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		b = append(b, s[start:i]...)
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
			i++
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
			i++
		default:
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n == 1 {
				b = append(b, `\ufffd`...)
			} else {
				b = append(b, s[i:i+n]...)
			}
			i += n
		}
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// Mark is not shown yet.
func (s *ChromeSink) Mark(*Mark) error { return nil }
