package cli

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/msgtrace/msgtrace/tracer"
	"github.com/msgtrace/msgtrace/tracer/engine"
	"github.com/msgtrace/msgtrace/tracer/sink"
	"github.com/msgtrace/msgtrace/tracer/stream"
)

// patterns is a repeatable flag.
type patterns []string

func (p *patterns) String() string { return strings.Join(*p, ",") }
func (p *patterns) Set(v string) error {
	if err := engine.ValidatePattern(v); err != nil {
		return err
	}
	*p = append(*p, v)
	return nil
}

// budget is the --max-calls flag: calls a timeline keeps (the longest), "all", or unset (0:
// each format's default).
type budget int

func (b *budget) String() string {
	switch {
	case *b < 0:
		return "all"
	case *b == 0:
		return "default"
	}
	return strconv.Itoa(int(*b))
}

func (b *budget) Set(v string) error {
	if strings.EqualFold(v, "all") {
		*b = -1
		return nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return errors.New("--max-calls takes a number of calls (1 or more) or all")
	}
	*b = budget(n)
	return nil
}

// budgetUsage is --max-calls's help, with the timelines of the format registry.
func budgetUsage() string {
	var names, defaults []string
	for _, f := range tracer.Registry {
		if f.Kind == tracer.Timeline {
			names = append(names, f.Name)
			defaults = append(defaults, fmt.Sprintf("%s %d", f.Name, f.DefaultBudget))
		}
	}
	return fmt.Sprintf("timelines (%s): keep at most N calls, the longest, folding the others into their callers' self time, or all (default: %s)",
		strings.Join(names, ", "), strings.Join(defaults, ", "))
}

// Written is what a conversion wrote: trace --json prints it.
type Written struct {
	Processes uint64        `json:"processes"`
	Threads   uint64        `json:"threads"`
	Calls     uint64        `json:"calls"`    // calls the recorder saw
	Kept      uint64        `json:"kept"`     // past the filters
	Dropped   uint64        `json:"dropped"`  // lost: no buffer space
	Overflow  uint64        `json:"overflow"` // past the shadow stack
	Open      uint64        `json:"open"`     // still running at the end
	Unended   uint64        `json:"unended"`  // processes that did not close their stream
	Files     []WrittenFile `json:"files"`
	Streams   engine.Totals `json:"-"`
	sinks     map[string]engine.Sink
}

// WrittenFile is one output of a conversion; a timeline's budget may have folded calls.
type WrittenFile struct {
	Path     string `json:"path"`
	Format   string `json:"format,omitempty"`
	Calls    uint64 `json:"calls,omitempty"`  // calls in the file (timelines with a budget)
	Budget   uint64 `json:"budget,omitempty"` // the timeline's budget
	Folded   uint64 `json:"folded,omitempty"` // calls folded into their callers' self time
	FoldedNs uint64 `json:"folded_below_ns,omitempty"`
}

// written gathers what a conversion wrote.
func written(tot engine.Totals, procs uint64, files []string, formats map[string]string, sinks map[string]engine.Sink) Written {
	w := Written{Processes: procs, Threads: tot.Threads, Calls: tot.Calls, Kept: tot.Kept, Dropped: tot.Dropped,
		Overflow: tot.Overflow, Open: tot.Open, Unended: tot.Unended, Files: []WrittenFile{}, sinks: sinks}
	for _, f := range files {
		wf := WrittenFile{Path: f, Format: formats[f]}
		if r := engine.Folded(sinks[f]); r != nil && r.FoldNanos != 0 {
			wf.Calls, wf.Budget, wf.Folded, wf.FoldedNs = uint64(r.Kept), uint64(r.Budget), uint64(r.Folded), uint64(r.FoldNanos)
		}
		w.Files = append(w.Files, wf)
	}
	return w
}

// reportWritten says on stderr, in one line, what a conversion read and wrote, then what each
// timeline's budget folded.
func (s *Session) reportWritten(w Written) {
	fmt.Fprintf(s.Stderr, "%s: %s on %s of %s (%d kept; %d lost: no buffer space; %d past the shadow stack",
		s.Prog, plural(w.Calls, "call", "calls"), plural(w.Threads, "thread", "threads"), plural(w.Processes, "process", "processes"), w.Kept, w.Dropped, w.Overflow)
	if w.Open > 0 {
		fmt.Fprintf(s.Stderr, "; %d still running at the end", w.Open)
	}
	if w.Unended > 0 {
		fmt.Fprintf(s.Stderr, "; %d processes ended without closing their stream (killed or crashed)", w.Unended)
	}
	var paths []string
	for _, f := range w.Files {
		paths = append(paths, f.Path)
	}
	fmt.Fprintf(s.Stderr, ") -> %s\n", strings.Join(paths, ", "))
	for _, f := range w.Files {
		s.reportFolded(f.Path, w.sinks[f.Path])
	}
}

// writeJSONFile writes v as indented JSON to path; nothing is left at path on failure.
func writeJSONFile(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err == nil {
		err = os.WriteFile(path, append(b, '\n'), 0o644)
	}
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// reportFolded says what a timeline's budget left out, and how to see everything.
func (s *Session) reportFolded(out string, sink engine.Sink) {
	r := engine.Folded(sink)
	if r == nil || r.FoldNanos == 0 {
		return
	}
	fmt.Fprintf(s.Stderr, "%s: %s keeps the %d longest calls (budget %d): %d calls shorter than %.3f µs are folded into their callers' self time (--max-calls all keeps every call; a .pftrace of every call opens without the browser's memory limit through Perfetto's trace_processor --httpd)\n",
		s.Prog, out, r.Kept, r.Budget, r.Folded, float64(r.FoldNanos)/1e3)
}

// filterFlags are the flags trace and run share: what calls a conversion keeps, and a timeline's
// budget.
type filterFlags struct {
	minUS    *float64
	maxDepth *int
	threads  *string
	keep     budget
	inc, exc patterns
}

// addFilterFlags defines the filter flags on fs; includeExamples ends -include's help line.
func addFilterFlags(fs *flag.FlagSet, includeExamples string) *filterFlags {
	f := &filterFlags{
		minUS:    fs.Float64("min-us", 0, "drop calls shorter than this many microseconds"),
		maxDepth: fs.Int("max-depth", -1, "drop calls deeper than this (0 = outermost only)"),
		threads:  fs.String("threads", "all", "all, main, or a comma list of thread names and ids"),
	}
	fs.Var(&f.keep, "max-calls", budgetUsage())
	fs.Var(&f.inc, "include", "keep only methods matching this pattern (repeatable)"+includeExamples)
	fs.Var(&f.exc, "exclude", "drop methods matching this pattern (repeatable)")
	return f
}

// check refuses values no conversion can use, as a usage error.
func (f *filterFlags) check() error {
	if *f.minUS < 0 || *f.maxDepth < -1 {
		return usageError("-min-us and -max-depth must not be negative")
	}
	if err := engine.ValidateThreads(*f.threads); err != nil {
		return usageError(err.Error())
	}
	return nil
}

// options are the filters as the tracer takes them.
func (f *filterFlags) options() engine.Options {
	return engine.Options{MinNanos: *f.minUS * 1000, MaxDepth: *f.maxDepth, Include: f.inc, Exclude: f.exc, Threads: *f.threads}
}

func (s *Session) trace(args []string) error {
	stdout := s.Stdout
	fs := NewFlags("trace")
	out := fs.String("o", "", "output file (required; - for standard output, JSON unless --format says otherwise)")
	format := fs.String("format", "", strings.Join(tracer.Formats, ", ")+" (see below); default: from -o's extension")
	asJSON := fs.Bool("json", false, "say what was written as JSON on stdout, not as a line on stderr (not with -o -)")
	name := fs.String("name", "", "the program's name, shown as the process name (default: the base name of -program)")
	program := fs.String("program", "", "the traced program's path (pprof's main binary)")
	filt := addFilterFlags(fs, ": -[UIView *], *[RAC* *]")
	pos, err := ParseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usageError("trace takes one raw dump, or one or more streams (one per process)")
	}
	if *out == "" {
		return usageError("trace needs -o OUT")
	}
	if *asJSON && *out == "-" {
		return usageError("--json writes on stdout: give -o a file")
	}
	if err := filt.check(); err != nil {
		return err
	}
	if *format != "" && tracer.Extension(*format) == "" {
		return usageError(fmt.Sprintf("unknown format %q (%s)", *format, strings.Join(tracer.Formats, ", ")))
	}
	if *format == "" && *out == "-" {
		*format = "json"
	}
	if *format == "" {
		f, err := tracer.FormatFor(*out)
		if err != nil {
			return usageError(err.Error())
		}
		*format = f
	} else if err := tracer.CheckOutputName(*out, *format); err != nil {
		return usageError(err.Error())
	}
	in, err := openTraces(pos)
	if err != nil {
		return err
	}
	defer in.close()
	var w io.Writer = stdout
	var f *os.File
	if *out != "-" {
		if f, err = os.Create(*out); err != nil {
			return err
		}
		w = f
	}
	sink, err := tracer.NewSink(*format, w, sink.Meta{Program: *name, Path: *program, TimeNanos: rawTime(in), Budget: int(filt.keep)})
	if err != nil {
		if f != nil {
			f.Close()
			os.Remove(*out)
		}
		return usageError(err.Error())
	}
	opt := filt.options()
	tot, perr := in.process(opt, sink, s)
	if f != nil {
		if cerr := f.Close(); perr == nil {
			perr = cerr
		}
		if perr != nil {
			os.Remove(*out) // no half-written output left behind
		}
	}
	if perr != nil {
		return perr
	}
	s.reportStreams(tot)
	wr := written(tot, max(tot.Processes, 1), []string{*out}, map[string]string{*out: *format}, map[string]engine.Sink{*out: sink})
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(wr)
	}
	if *out == "-" {
		wr.Files[0].Path = "standard output"
	}
	s.reportWritten(wr)
	return nil
}

// traces are the input files of a conversion: one raw dump, or streams.
type traces struct {
	files []*os.File
	sizes []int64
	raw   bool
}

// openTraces opens the inputs and tells their format by the magic.
func openTraces(paths []string) (*traces, error) {
	t := &traces{}
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			t.close()
			return nil, err
		}
		t.files = append(t.files, f)
		st, err := f.Stat()
		if err != nil {
			t.close()
			return nil, err
		}
		t.sizes = append(t.sizes, st.Size())
		var m [len(stream.StreamMagic)]byte
		n, _ := f.ReadAt(m[:], 0)
		if string(m[:n]) != stream.StreamMagic {
			t.raw = true
		}
	}
	if t.raw && len(paths) > 1 {
		t.close()
		return nil, usageError("only streams (MTSF) merge: give a raw dump on its own")
	}
	return t, nil
}

func (t *traces) close() {
	for _, f := range t.files {
		f.Close()
	}
}

// process converts, showing progress on a terminal.
func (t *traces) process(opt engine.Options, sink engine.Sink, s *Session) (engine.Totals, error) {
	var total int64
	for _, s := range t.sizes {
		total += s
	}
	label := t.files[0].Name()
	if len(t.files) > 1 {
		label = fmt.Sprintf("%d streams", len(t.files))
	}
	if t.raw {
		p := newProgress(s, label, total)
		defer p.finish()
		return engine.Process(countingReader{t.files[0], p}, opt, sink)
	}
	p := newProgress(s, label, 2*total) // streams are read twice
	defer p.finish()
	ins := make([]engine.Input, len(t.files))
	for i, f := range t.files {
		ins[i] = engine.Input{R: countingReaderAt{f, p}, Size: t.sizes[i], Name: f.Name()}
	}
	return engine.ProcessStreams(ins, opt, sink)
}

// reportStreams says on stderr what a stream's reader skipped or completed.
func (s *Session) reportStreams(t engine.Totals) {
	if t.BadFrames > 0 {
		fmt.Fprintf(s.Stderr, "%s: %d damaged frames skipped (%d bytes)\n", s.Prog, t.BadFrames, t.BadBytes)
	}
	if t.TornBytes > 0 {
		fmt.Fprintf(s.Stderr, "%s: %d bytes of incomplete frames at the end (a cut, a kill mid-write, or still being written)\n", s.Prog, t.TornBytes)
	}
	if t.Unended > 0 {
		fmt.Fprintf(s.Stderr, "%s: %d of %d streams did not end cleanly (killed, crashed or still running); %d calls still running shown open\n", s.Prog, t.Unended, t.Processes, t.Open)
	}
	if t.Unwritten > 0 {
		fmt.Fprintf(s.Stderr, "%s: the tracer could not write %d bytes\n", s.Prog, t.Unwritten)
	}
}

// rawTime estimates when a raw dump's trace began: the file's modification time (it is written
// at exit), for pprof's time_nanos; 0 when unknown or for streams (their clock frames carry
// the wall time).
func rawTime(t *traces) int64 {
	if !t.raw {
		return 0
	}
	if st, err := t.files[0].Stat(); err == nil {
		return st.ModTime().UnixNano()
	}
	return 0
}
