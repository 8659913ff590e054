package tracer

import (
	"fmt"
	"io"
	"strings"

	"github.com/msgtrace/msgtrace/tracer/engine"
	"github.com/msgtrace/msgtrace/tracer/sink"
	"github.com/msgtrace/msgtrace/tracer/stream"
)

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
	New           func(w io.Writer, m sink.Meta) engine.Sink
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
	{Name: "json", Extensions: []string{".json"}, Kind: Timeline, DefaultBudget: sink.ChromeBudget,
		Help: "Chrome trace events: ui.perfetto.dev, chrome://tracing, speedscope",
		New: func(w io.Writer, m sink.Meta) engine.Sink {
			s := sink.NewChromeSink(w)
			s.Meta = m
			return s
		}},
	{Name: "perfetto", Extensions: []string{".pftrace", ".perfetto-trace"}, Kind: Timeline, RunFlag: "perfetto", DefaultBudget: sink.PerfettoBudget,
		Help: "Perfetto protobuf trace: ui.perfetto.dev (the smallest timeline)",
		New:  func(w io.Writer, m sink.Meta) engine.Sink { return sink.NewPerfettoSink(w, m) }},
	{Name: "speedscope", Extensions: []string{".speedscope.json"}, Kind: Timeline, RunFlag: "speedscope", DefaultBudget: sink.SpeedscopeBudget,
		Help: "speedscope's own format: www.speedscope.app (hot methods per thread)",
		New:  func(w io.Writer, m sink.Meta) engine.Sink { return sink.NewSpeedscopeSink(w, m) }},
	{Name: "pprof", Extensions: []string{".pb.gz", ".pprof", ".pb"}, Kind: Aggregate, RunFlag: "pprof",
		Help: "pprof profile: go tool pprof -http=: FILE (calls, self time)",
		New: func(w io.Writer, m sink.Meta) engine.Sink {
			s := sink.NewPprofSink(w)
			s.Meta = m
			return s
		}},
	{Name: "folded", Extensions: []string{".folded"}, Kind: Aggregate, RunFlag: "folded",
		Help: "folded stacks: flamegraph.pl, inferno, speedscope",
		New:  func(w io.Writer, m sink.Meta) engine.Sink { return sink.NewFoldedSink(w) }},
	{Name: "svg", Extensions: []string{".svg"}, Kind: Aggregate, RunFlag: "flame",
		Help: "a flame graph for a browser, per thread, zoom and search",
		New: func(w io.Writer, m sink.Meta) engine.Sink {
			title := "msgtrace flame graph"
			if m.Program != "" || m.Path != "" {
				title = m.ProcessName(&stream.Header{})
			}
			s := sink.NewFlameSink(w, title)
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
func NewSink(format string, w io.Writer, m sink.Meta) (engine.Sink, error) {
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

// DefaultBudget is the number of calls a timeline format keeps unless told otherwise (0: every
// call): Chrome JSON 1 M (150 MB of JSON), speedscope 2 M (its .speedscope.json, 147 MB, opens
// in 10 s in Chromium on a 2-core machine; 4 M take 42 s), Perfetto 20 M (7-10 bytes a call in
// the file, about 27 inflated: 540 MB that the browser's trace processor holds in its 2 GB).
func DefaultBudget(format string) int {
	if f := FormatNamed(format); f != nil {
		return f.DefaultBudget // set in Registry from the sinks' defaults
	}
	return 0
}
