package tracer

import (
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
)

// Meta is what the outputs say about the traced program beyond the records.
type Meta struct {
	Program   string // process name shown by the viewers ("" for the base name of Path, or "pid N")
	Path      string // the program's executable, pprof's main mapping
	TimeNanos int64  // wall clock of the trace's base tick, Unix ns (0: unknown)
	Budget    int    // timelines (json, perfetto, speedscope): keep at most this many calls, the longest; 0 the format's DefaultBudget, < 0 every call
}

func (m Meta) process(h *Header) string {
	switch {
	case m.Program != "":
		return m.Program
	case h.Program != "": // streams name their process
		return h.Program
	case m.Path != "":
		return filepath.Base(m.Path)
	}
	return "pid " + strconv.FormatUint(h.PID, 10)
}

// Formats are the output formats NewSink knows, in the order the help text lists them.
var Formats = []string{"json", "perfetto", "speedscope", "pprof", "folded", "svg"}

// FormatOf infers a format from an output file name: .pftrace/.perfetto-trace Perfetto,
// .speedscope.json speedscope, .pb.gz/.pprof/.pb pprof, .folded/.txt folded, .svg a flame
// graph, anything else Chrome JSON.
func FormatOf(path string) string {
	p := strings.ToLower(path)
	switch {
	case strings.HasSuffix(p, ".speedscope.json"):
		return "speedscope"
	case strings.HasSuffix(p, ".pftrace"), strings.HasSuffix(p, ".perfetto-trace"):
		return "perfetto"
	case strings.HasSuffix(p, ".pb.gz"), strings.HasSuffix(p, ".pprof"), strings.HasSuffix(p, ".pb"):
		return "pprof"
	case strings.HasSuffix(p, ".folded"):
		return "folded"
	case strings.HasSuffix(p, ".svg"):
		return "svg"
	}
	return "json"
}

// Extension is the file name extension a format is written with by default.
func Extension(format string) string {
	return map[string]string{"json": ".json", "perfetto": ".pftrace", "speedscope": ".speedscope.json",
		"pprof": ".pb.gz", "folded": ".folded", "svg": ".svg"}[format]
}

// NewSink returns the sink that writes format to w.
func NewSink(format string, w io.Writer, m Meta) (Sink, error) {
	switch format {
	case "json":
		s := NewChromeSink(w)
		s.Meta = m
		return s, nil
	case "perfetto":
		return NewPerfettoSink(w, m), nil
	case "speedscope":
		return NewSpeedscopeSink(w, m), nil
	case "pprof":
		s := NewPprofSink(w)
		s.Meta = m
		return s, nil
	case "folded":
		return NewFoldedSink(w), nil
	case "svg":
		title := "msgtrace flame graph"
		if m.Program != "" || m.Path != "" {
			title = m.process(&Header{})
		}
		s := NewFlameSink(w, title)
		s.Meta = m
		return s, nil
	}
	return nil, fmt.Errorf("unknown format %q (%s)", format, strings.Join(Formats, ", "))
}

// threadLabel is how a thread is named in every output: "main" for the main thread, else its
// own name (a GCD queue label or pthread name) if it has one, else "thread TID".
func threadLabel(t *Thread) string {
	switch {
	case t.Main:
		return "main"
	case t.Name != "":
		return t.Name
	}
	return "thread " + strconv.FormatUint(t.TID, 10)
}

// markLabel names a mark as a frame: "[lost 12]", "[overflow 3]", "[overwritten 40]", "[wait]".
func markLabel(m *Mark) string {
	if m.Kind == MarkWait {
		return "[wait]"
	}
	return "[" + m.Kind.String() + " " + strconv.FormatUint(m.Count, 10) + "]"
}

// Pseudo-frames for calls that did not return normally: the time of a call still running at
// the end of the trace, and of a call an exception (or longjmp, or thread exit) went through.
const (
	frameRunning = "[running]"
	frameUnwound = "[unwound]"
)
