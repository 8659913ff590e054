package msgtrace

import (
	"bytes"
	"encoding/binary"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/msgtrace/msgtrace/internal/selftest"
	"github.com/msgtrace/msgtrace/tracer/stream"
)

// fuzzInput hands out values from a fuzzer's bytes; past the end, zeros and empty strings.
type fuzzInput struct{ b []byte }

func (in *fuzzInput) byte() byte {
	if len(in.b) == 0 {
		return 0
	}
	c := in.b[0]
	in.b = in.b[1:]
	return c
}

// u64 takes a length byte (0 to 8, modulo 9), then that many bytes little-endian: small
// values and full 64-bit ones are both common.
func (in *fuzzInput) u64() uint64 {
	n := int(in.byte() % 9)
	var b [8]byte
	k := copy(b[:n], in.b)
	in.b = in.b[k:]
	return binary.LittleEndian.Uint64(b[:])
}

// str takes a length byte (times 17, so that names past MT_MAX_STRING occur), then the bytes.
func (in *fuzzInput) str() string {
	n := min(int(in.byte())*17, len(in.b))
	s := string(in.b[:n])
	in.b = in.b[n:]
	return s
}

// cString is what the C encoder receives for s: a C string (cut at the first NUL) of which it
// writes at most MT_MAX_STRING bytes.
func cString(s string) string {
	if i := strings.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	return s[:min(len(s), maxCString)]
}

const maxCString = 4096 // MT_MAX_STRING (stream_format.h)

// FuzzEncoder: the C encoder (drain_encode.c, through internal/selftest) and the Go reference
// writer (stream.StreamWriter) make the same bytes for every frame kind on any values, and
// the reader gives the events frame's events back. TestEncoderMatchesGoWriter is its fixed
// cases; `make fuzz` runs it.
func FuzzEncoder(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\x00\x08\x01\x02\x03\x04\x05\x06\x07\x08\x02\x01\x00\x03démo\x02arm64"))
	f.Add(bytes.Repeat([]byte{0xff}, 300))
	f.Add(bytes.Repeat([]byte{5, 8, 0x80, 0, 0, 0, 0, 0, 0, 0x80, 3, 1}, 40))
	f.Fuzz(func(t *testing.T, data []byte) {
		in := &fuzzInput{b: data}
		var c []byte
		var want bytes.Buffer
		w := stream.NewStreamWriter(&want)
		switch kind := in.byte() % 8; kind {
		case 0:
			p := stream.StreamProcess{PID: in.u64(), PPID: in.u64(), Path: in.str(), Name: in.str(), Arch: in.str(), OS: in.str(), Mode: in.u64()}
			c = selftest.EncodeProcess(p)
			p.Path, p.Name, p.Arch, p.OS = cString(p.Path), cString(p.Name), cString(p.Arch), cString(p.OS)
			w.Process(p)
		case 1:
			s := stream.ClockSample{Tick: in.u64(), MonoNanos: in.u64(), WallNanos: in.u64(), RateNum: in.u64(), RateDen: in.u64()}
			c = selftest.EncodeClock(s)
			w.Clock(s)
		case 2:
			var ms []stream.StreamMethod
			for n := in.byte() % 8; n > 0; n-- {
				ms = append(ms, stream.StreamMethod{ID: in.u64(), Flags: in.u64(), Class: in.str(), Selector: in.str()})
			}
			c = selftest.EncodeMethods(ms...)
			for i := range ms {
				ms[i].Class, ms[i].Selector = cString(ms[i].Class), cString(ms[i].Selector)
			}
			w.Methods(ms...)
		case 3:
			th := stream.StreamThread{TID: in.u64(), Flags: in.u64(), Name: in.str()}
			c = selftest.EncodeThread(th)
			th.Name = cString(th.Name)
			w.Thread(th)
		case 4:
			tid, prev := in.u64(), in.u64()
			var evs []stream.StreamEvent
			for n := int(in.byte()); n > 0; n-- {
				e := stream.StreamEvent{Type: int(in.byte() % 3), ID: in.u64() >> stream.EventTypeBits, End: in.u64()}
				e.Start = e.End - in.u64()
				if e.Type == stream.EventMark {
					e.Count = in.u64()
				} else {
					e.Depth = in.u64()
				}
				evs = append(evs, e)
			}
			c = selftest.EncodeEvents(tid, prev, evs)
			w.Events(tid, prev, evs)
			if len(c) < 16 {
				t.Fatalf("events frame of %d bytes", len(c))
			}
			// the reader takes back exactly the events it can represent: ends that do not
			// wrap around the previous one, starts not before tick 0, depths to 1<<16
			valid, p := true, prev
			for _, e := range evs {
				d := int64(e.End - p)
				valid = valid && !(d < 0 && e.End > p) && !(d > 0 && e.End < p) && e.Start <= e.End && (e.Type == stream.EventMark || e.Depth <= 1<<16)
				p = e.End
			}
			gtid, gprev, got, err := stream.DecodeEvents(c[16:])
			if !valid {
				if err == nil {
					t.Fatalf("events the reader cannot represent were read back: %+v", got)
				}
				break
			}
			if err != nil || gtid != tid || gprev != prev || len(got) != len(evs) {
				t.Fatalf("events frame read back: tid %d prev %d, %d events (%v); wrote tid %d prev %d, %d events", gtid, gprev, len(got), err, tid, prev, len(evs))
			}
			for i := range evs {
				if got[i] != evs[i] {
					t.Fatalf("event %d read back as %+v, written %+v", i, got[i], evs[i])
				}
			}
		case 5:
			tid, tick := in.u64(), in.u64()
			var calls []stream.OpenCall
			for n := in.byte() % 16; n > 0; n-- {
				calls = append(calls, stream.OpenCall{ID: in.u64(), Start: tick - in.u64(), Depth: in.u64()})
			}
			c = selftest.EncodeOpen(tid, tick, calls)
			w.Open(tid, tick, calls)
		case 6:
			e := stream.StreamCounters{Calls: in.u64(), Lost: in.u64(), Overflow: in.u64(), Waits: in.u64(), TicksWaited: in.u64(), Unwritten: in.u64()}
			c = selftest.EncodeEnd(e)
			w.End(e)
		case 7:
			i := stream.StreamInstant{TID: in.u64(), Clock: in.byte(), Time: in.u64(), Kind: stream.InstantKind(in.byte()), Precision: in.u64(), Name: in.str()}
			c = selftest.EncodeInstant(i)
			i.Name = cString(i.Name)
			w.Instant(i)
		}
		if w.Err() != nil {
			t.Fatal(w.Err())
		}
		if !bytes.Equal(c, want.Bytes()) {
			t.Fatalf("the C encoder wrote\n%x\nthe Go writer\n%x", c, want.Bytes())
		}
	})
}

// FuzzExpandPath: the output-path pattern (MSGTRACE_OUT, StreamConfig.Path) expands as its
// documentation says — %p the pid, %h the host name, %t $TMPDIR (else /tmp), %% a percent
// sign, every other byte as is — and any other %-sequence, a % at the end, a NUL, or a result
// past the C buffer (4095 bytes) is refused; CheckPath refuses exactly the patterns that
// cannot expand with a one-digit pid.
func FuzzExpandPath(f *testing.F) {
	for _, s := range []string{"", "trace-%p.mtrace", "%t/msgtrace-%p.json", "%h.%p%%.out", "%", "a%", "%x", "%%p", "100%%", "%p%p%p%p",
		"/tmp/trace\x00%p", strings.Repeat("%p", 300), strings.Repeat("x", 4094) + "%%", strings.Repeat("x", 4095) + "%%", "é%t∂"} {
		f.Add(s, 4242)
	}
	host, err := os.Hostname()
	if err != nil {
		f.Fatal(err)
	}
	tmp := os.Getenv("TMPDIR")
	if tmp == "" {
		tmp = "/tmp"
	}
	// expand is the documented expansion; ok false when the pattern is refused
	expand := func(pattern string, pid int) (string, bool) {
		if strings.ContainsRune(pattern, 0) {
			return "", false
		}
		var b strings.Builder
		for i := 0; i < len(pattern); i++ {
			if pattern[i] != '%' {
				b.WriteByte(pattern[i])
				continue
			}
			if i++; i == len(pattern) {
				return "", false
			}
			switch pattern[i] {
			case 'p':
				b.WriteString(strconv.FormatInt(int64(pid), 10))
			case 'h':
				b.WriteString(host)
			case 't':
				b.WriteString(tmp)
			case '%':
				b.WriteByte('%')
			default:
				return "", false
			}
		}
		return b.String(), b.Len() < 4096
	}
	f.Fuzz(func(t *testing.T, pattern string, pid int) {
		want, ok := expand(pattern, pid)
		got, err := ExpandPath(pattern, pid)
		if ok != (err == nil) || ok && got != want {
			t.Fatalf("ExpandPath(%q, %d) = %q, %v; want %q, ok %v", pattern, pid, got, err, want, ok)
		}
		if _, ok1 := expand(pattern, 1); (CheckPath(pattern) == nil) != ok1 {
			t.Fatalf("CheckPath(%q) = %v, want ok %v (the pattern with pid 1)", pattern, CheckPath(pattern), ok1)
		}
	})
}
