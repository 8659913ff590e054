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

// Format is one output format. Registry is the one list of them: the command line (trace's
// --format, the output name's extension), run's extra-output flags, MSGTRACE_FORMAT and the
// help text all read it.
type Format struct {
	Name string // what --format and MSGTRACE_FORMAT take
	// Extensions are the output name endings the format owns (case-insensitive), the one it is
	// written with first.
	Extensions []string
	Kind       FormatKind
	// RunFlag is the flag of `run` that writes this format beside --out ("": none).
	RunFlag string
	Help    string // what it is and what opens it, one line
	// DefaultBudget is the number of calls a timeline keeps unless told otherwise (0: every
	// call; budget.go says why these numbers).
	DefaultBudget int
	New           func(w io.Writer, m Meta) Sink
}

// FormatKind tells a timeline (every call at its time, kept within a budget) from an
// aggregate (one node per distinct stack: pprof, folded stacks, flame graphs).
type FormatKind int

// The kinds of formats.
const (
	Timeline FormatKind = iota
	Aggregate
)

func (k FormatKind) String() string {
	if k == Timeline {
		return "timeline"
	}
	return "aggregate"
}

// Registry lists the output formats in the order the help text shows them.
var Registry = []Format{
	{Name: "json", Extensions: []string{".json"}, Kind: Timeline, DefaultBudget: 1_000_000,
		Help: "Chrome trace events: ui.perfetto.dev, chrome://tracing, speedscope",
		New: func(w io.Writer, m Meta) Sink {
			s := NewChromeSink(w)
			s.Meta = m
			return s
		}},
	{Name: "perfetto", Extensions: []string{".pftrace", ".perfetto-trace"}, Kind: Timeline, RunFlag: "perfetto", DefaultBudget: 20_000_000,
		Help: "Perfetto protobuf trace: ui.perfetto.dev (the smallest timeline)",
		New:  func(w io.Writer, m Meta) Sink { return NewPerfettoSink(w, m) }},
	{Name: "speedscope", Extensions: []string{".speedscope.json"}, Kind: Timeline, RunFlag: "speedscope", DefaultBudget: 2_000_000,
		Help: "speedscope's own format: www.speedscope.app (hot methods per thread)",
		New:  func(w io.Writer, m Meta) Sink { return NewSpeedscopeSink(w, m) }},
	{Name: "pprof", Extensions: []string{".pb.gz", ".pprof", ".pb"}, Kind: Aggregate, RunFlag: "pprof",
		Help: "pprof profile: go tool pprof -http=: FILE (calls, self time)",
		New: func(w io.Writer, m Meta) Sink {
			s := NewPprofSink(w)
			s.Meta = m
			return s
		}},
	{Name: "folded", Extensions: []string{".folded"}, Kind: Aggregate, RunFlag: "folded",
		Help: "folded stacks: flamegraph.pl, inferno, speedscope",
		New:  func(w io.Writer, m Meta) Sink { return NewFoldedSink(w) }},
	{Name: "svg", Extensions: []string{".svg"}, Kind: Aggregate, RunFlag: "flame",
		Help: "a flame graph for a browser, per thread, zoom and search",
		New: func(w io.Writer, m Meta) Sink {
			title := "msgtrace flame graph"
			if m.Program != "" || m.Path != "" {
				title = m.process(&Header{})
			}
			s := NewFlameSink(w, title)
			s.Meta = m
			return s
		}},
}

// Formats are the names of the output formats, in Registry's order.
var Formats = formatNames()

func formatNames() []string {
	var n []string
	for _, f := range Registry {
		n = append(n, f.Name)
	}
	return n
}

// FormatNamed returns the format called name, or nil.
func FormatNamed(name string) *Format {
	for i := range Registry {
		if Registry[i].Name == name {
			return &Registry[i]
		}
	}
	return nil
}

// Extension is the file name extension a format is written with by default ("" for a name
// no format has).
func Extension(format string) string {
	if f := FormatNamed(format); f != nil {
		return f.Extensions[0]
	}
	return ""
}

// NewSink returns the sink that writes format to w.
func NewSink(format string, w io.Writer, m Meta) (Sink, error) {
	if f := FormatNamed(format); f != nil {
		return f.New(w, m), nil
	}
	return nil, fmt.Errorf("unknown format %q (%s)", format, strings.Join(Formats, ", "))
}

// FormatsHelp is the help text's table of the output formats: each one's default extension,
// name and help line, then the other extensions.
func FormatsHelp() string {
	var b strings.Builder
	var also []string
	for _, f := range Registry {
		fmt.Fprintf(&b, "  %-17s %-11s %s\n", f.Extensions[0], f.Name, f.Help)
		if len(f.Extensions) > 1 {
			also = append(also, strings.Join(f.Extensions[1:], " and ")+" "+f.Name)
		}
	}
	fmt.Fprintf(&b, "  (%s too; any other name is refused)\n", strings.Join(also, ", "))
	return b.String()
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
