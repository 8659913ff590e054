package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/msgtrace/msgtrace/tracer"
)

// patterns is a repeatable flag.
type patterns []string

func (p *patterns) String() string { return strings.Join(*p, ",") }
func (p *patterns) Set(v string) error {
	if err := tracer.ValidatePattern(v); err != nil {
		return err
	}
	*p = append(*p, v)
	return nil
}

func trace(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("trace", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	out := fs.String("o", "", "output file (required; - for standard output)")
	format := fs.String("format", "", "json (Chrome trace events), perfetto, speedscope, pprof, folded or svg (flame graph); default: from -o's extension")
	name := fs.String("name", "", "the program's name, shown as the process name (default: the base name of -program)")
	program := fs.String("program", "", "the traced program's path (pprof's main binary)")
	minUS := fs.Float64("min-us", 0, "drop calls shorter than this many microseconds")
	maxDepth := fs.Int("max-depth", -1, "drop calls deeper than this (0 = outermost only)")
	threads := fs.String("threads", "all", "all, main, or a comma list of thread names and ids")
	var inc, exc patterns
	fs.Var(&inc, "include", "keep only methods matching this pattern (repeatable): -[UIView *], *[RAC* *]")
	fs.Var(&exc, "exclude", "drop methods matching this pattern (repeatable)")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError{fmt.Sprintf("trace takes one RAW file, got %d", len(pos))}
	}
	if *out == "" {
		return usageError{"trace needs -o OUT"}
	}
	if *minUS < 0 || *maxDepth < -1 {
		return usageError{"-min-us and -max-depth must not be negative"}
	}
	if err := tracer.ValidateThreads(*threads); err != nil {
		return usageError{err.Error()}
	}
	if *format != "" && tracer.Extension(*format) == "" {
		return usageError{fmt.Sprintf("unknown format %q (%s)", *format, strings.Join(tracer.Formats, ", "))}
	}
	in, err := os.Open(pos[0])
	if err != nil {
		return err
	}
	defer in.Close()
	var w io.Writer = stdout
	var f *os.File
	if *out != "-" {
		if f, err = os.Create(*out); err != nil {
			return err
		}
		w = f
	}
	if *format == "" {
		*format = tracer.FormatOf(*out)
	}
	sink, err := tracer.NewSink(*format, w, tracer.Meta{Program: *name, Path: *program, TimeNanos: rawTime(in)})
	if err != nil {
		if f != nil {
			f.Close()
			os.Remove(*out)
		}
		return usageError{err.Error()}
	}
	opt := tracer.Options{MinNanos: *minUS * 1000, MaxDepth: *maxDepth, Include: inc, Exclude: exc, Threads: *threads}
	_, perr := tracer.Process(in, opt, sink)
	if f != nil {
		if cerr := f.Close(); perr == nil {
			perr = cerr
		}
		if perr != nil {
			os.Remove(*out) // no half-written output left behind
		}
	}
	return perr
}

// rawTime estimates when a raw dump's trace began: the file's modification time (it is written
// at exit), for pprof's time_nanos; 0 when unknown.
func rawTime(f *os.File) int64 {
	if st, err := f.Stat(); err == nil {
		return st.ModTime().UnixNano()
	}
	return 0
}
