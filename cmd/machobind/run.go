package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/msgtrace/msgtrace/tracer"
)

// exitStatus ends machobind with the traced program's exit status, printing nothing more.
type exitStatus int

func (e exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// libraryNames are the file names of the library to preload on this platform, preferred
// first: on Linux the small preload loader, which starts the Go library only in processes
// that have something to trace.
func libraryNames() []string {
	if runtime.GOOS == "darwin" {
		return []string{"libmsgtrace.dylib"}
	}
	return []string{"libmsgtrace-preload.so", "libmsgtrace.so"}
}

// findLibrary returns the library to preload: --lib, $MSGTRACE_LIB, or the one next to this
// executable (bin/ after `make build`) or in ../lib.
func findLibrary(flagValue string) (string, error) {
	if flagValue == "" {
		flagValue = os.Getenv("MSGTRACE_LIB")
	}
	if flagValue != "" {
		if _, err := os.Stat(flagValue); err != nil {
			return "", fmt.Errorf("the msgtrace library %s: %w", flagValue, err)
		}
		return filepath.Abs(flagValue)
	}
	exe, err := os.Executable()
	if err == nil {
		exe, _ = filepath.EvalSymlinks(exe)
		for _, dir := range []string{filepath.Dir(exe), filepath.Join(filepath.Dir(exe), "..", "lib")} {
			for _, name := range libraryNames() {
				p := filepath.Join(dir, name)
				if _, err := os.Stat(p); err == nil {
					return filepath.Abs(p)
				}
			}
		}
	}
	return "", fmt.Errorf("%s is not next to machobind: build it with `make build` or give --lib PATH", libraryNames()[0])
}

// preloadEnv returns env with the library preloaded and the streams sent to the pattern raw.
func preloadEnv(env []string, lib, raw string) []string {
	v := "LD_PRELOAD"
	sep := " "
	if runtime.GOOS == "darwin" {
		v, sep = "DYLD_INSERT_LIBRARIES", ":"
	}
	out := make([]string, 0, len(env)+3)
	preload := lib
	for _, kv := range env {
		k, val, _ := strings.Cut(kv, "=")
		switch {
		case k == v && val != "":
			preload = lib + sep + val
		case k == "MSGTRACE_OUT", k == "MSGTRACE_FORMAT", k == "MSGTRACE_QUIET":
		default:
			out = append(out, kv)
		}
	}
	return append(out, v+"="+preload, "MSGTRACE_OUT="+raw, "MSGTRACE_FORMAT=stream", "MSGTRACE_QUIET=1")
}

// injectionAdvice explains why a program may have run without the library.
func injectionAdvice(app string) string {
	if runtime.GOOS == "darwin" {
		return "macOS drops DYLD_INSERT_LIBRARIES for programs protected by System Integrity Protection " +
			"(/usr/bin, /bin, /System, ...) and for programs signed with the hardened runtime unless they carry the " +
			"com.apple.security.cs.allow-dyld-environment-variables entitlement: trace a debug build, or a copy " +
			"re-signed without the hardened runtime (codesign --force --sign - COPY)"
	}
	return "the dynamic linker ignores LD_PRELOAD for static and setuid programs, and no trace is written " +
		"when the program ends by a signal or _exit"
}

func runTraced(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	out := fs.String("out", "trace.json", "the trace, in the format its extension names: .json Chrome JSON, .pftrace Perfetto, .speedscope.json speedscope, .pb.gz pprof, .folded, .svg")
	perfettoOut := fs.String("perfetto", "", "also write a Perfetto protobuf trace (ui.perfetto.dev)")
	speedscopeOut := fs.String("speedscope", "", "also write a speedscope file (speedscope.app)")
	pprofOut := fs.String("pprof", "", "also write a pprof profile (go tool pprof -http=: FILE)")
	foldedOut := fs.String("folded", "", "also write folded stacks (flamegraph.pl, speedscope)")
	streamsOut := fs.String("streams", "", "also keep the stream files (one per process that sent messages) in this directory")
	flameOut := fs.String("flame", "", "also write an SVG flame graph")
	lib := fs.String("lib", "", "the msgtrace library to preload (default: next to machobind)")
	top := fs.Int("top", 10, "how many methods to list by self time")
	minUS := fs.Float64("min-us", 0, "drop calls shorter than this many microseconds")
	maxDepth := fs.Int("max-depth", -1, "drop calls deeper than this (0 = outermost only)")
	threads := fs.String("threads", "all", "all, main, or a comma list of thread names and ids")
	var inc, exc patterns
	fs.Var(&inc, "include", "keep only methods matching this pattern (repeatable)")
	fs.Var(&exc, "exclude", "drop methods matching this pattern (repeatable)")
	if err := fs.Parse(args); err != nil {
		return usageError{err.Error()}
	}
	cmdline := fs.Args()
	if len(cmdline) == 0 {
		return usageError{"run needs a program: machobind run [flags] -- APP [ARGS...]"}
	}
	if *minUS < 0 || *maxDepth < -1 || *top < 0 {
		return usageError{"-min-us, -max-depth and -top must not be negative"}
	}
	if err := tracer.ValidateThreads(*threads); err != nil {
		return usageError{err.Error()}
	}
	libPath, err := findLibrary(*lib)
	if err != nil {
		return err
	}
	app, err := exec.LookPath(cmdline[0])
	if err != nil {
		return fmt.Errorf("cannot start %s: %w", cmdline[0], err)
	}
	// Outputs must be writable before the program runs, not after.
	for _, p := range []string{*out, *pprofOut, *foldedOut, *flameOut, *perfettoOut, *speedscopeOut, filepath.Join(*streamsOut, "x")} {
		if p == "" || p == "x" {
			continue
		}
		f, err := os.CreateTemp(filepath.Dir(p), ".machobind-check-*")
		if err != nil {
			return fmt.Errorf("cannot write %s: %w", p, errors.Unwrap(err))
		}
		f.Close()
		os.Remove(f.Name())
	}
	tmp, err := os.MkdirTemp("", "machobind-run-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	// every process of the tree that loads the library and sends messages writes its own
	// stream here: the program, its children (forked or exec'd), not the wrappers
	pattern := filepath.Join(tmp, "trace-%p.mtrace")

	cmd := exec.Command(app, cmdline[1:]...)
	cmd.Args[0] = cmdline[0]
	cmd.Env = preloadEnv(os.Environ(), libPath, pattern)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
	// The terminal's ^C goes to the program; machobind waits for it to write its trace.
	signal.Ignore(syscall.SIGINT, syscall.SIGQUIT)
	defer signal.Reset(syscall.SIGINT, syscall.SIGQUIT)
	started := time.Now()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("cannot start %s: %w", cmdline[0], err)
	}
	werr := cmd.Wait()
	status := 0
	var ee *exec.ExitError
	if errors.As(werr, &ee) {
		status = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			status = 128 + int(ws.Signal())
			fmt.Fprintf(stderr, "machobind: %s was killed by %v\n", cmdline[0], ws.Signal())
		}
	} else if werr != nil {
		return werr
	}
	streams, _ := filepath.Glob(filepath.Join(tmp, "trace-*.mtrace"))
	if len(streams) == 0 {
		fmt.Fprintf(stderr, "machobind: %s ran without writing a trace (exit status %d): %s\n", cmdline[0], status, injectionAdvice(app))
		if status == 0 {
			status = 1
		}
		return exitStatus(status)
	}
	opt := tracer.Options{MinNanos: *minUS * 1000, MaxDepth: *maxDepth, Include: inc, Exclude: exc, Threads: *threads}
	if *streamsOut != "" {
		for _, s := range streams {
			if err := copyFile(s, filepath.Join(*streamsOut, filepath.Base(s))); err != nil {
				return err
			}
		}
	}
	meta := tracer.Meta{Program: filepath.Base(cmdline[0]), Path: app, TimeNanos: started.UnixNano()}
	if abs, err := filepath.Abs(app); err == nil {
		meta.Path = abs
	}
	sinkFor := func(format string) func(io.Writer) tracer.Sink {
		return func(w io.Writer) tracer.Sink {
			s, _ := tracer.NewSink(format, w, meta) // formats from tracer.FormatOf are all known
			return s
		}
	}
	topSink := &topSink{}
	main := sinkFor(tracer.FormatOf(*out))
	tot, err := convertStreams(streams, *out, opt, func(w io.Writer) tracer.Sink { return teeSink{main(w), topSink} })
	if err != nil {
		return err
	}
	written := []string{*out}
	for _, o := range []struct {
		path   string
		format string
	}{
		{*perfettoOut, "perfetto"},
		{*speedscopeOut, "speedscope"},
		{*pprofOut, "pprof"},
		{*foldedOut, "folded"},
		{*flameOut, "svg"},
	} {
		if o.path == "" {
			continue
		}
		if _, err := convertStreams(streams, o.path, opt, sinkFor(o.format)); err != nil {
			return err
		}
		written = append(written, o.path)
	}
	fmt.Fprintf(stderr, "machobind: %d calls on %d threads of %d processes (%d kept; %d lost: no buffer space; %d past the shadow stack",
		tot.Calls, tot.Threads, len(streams), tot.Kept, tot.Dropped, tot.Overflow)
	if tot.Open > 0 {
		fmt.Fprintf(stderr, "; %d still running at the end", tot.Open)
	}
	if tot.Unended > 0 {
		fmt.Fprintf(stderr, "; %d processes ended without closing their stream (killed or crashed)", tot.Unended)
	}
	fmt.Fprintf(stderr, ") -> %s\n", strings.Join(written, ", "))
	topSink.print(stderr, *top)
	if status != 0 {
		return exitStatus(status)
	}
	return nil
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o644)
}

// convertStreams writes the streams (one per process, on one timeline) through a sink to
// path; nothing is left at path on failure.
func convertStreams(streams []string, path string, opt tracer.Options, sink func(io.Writer) tracer.Sink) (tracer.Totals, error) {
	var ins []tracer.Input
	for _, s := range streams {
		f, err := os.Open(s)
		if err != nil {
			return tracer.Totals{}, err
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return tracer.Totals{}, err
		}
		ins = append(ins, tracer.Input{R: f, Size: st.Size(), Name: s})
	}
	f, err := os.Create(path)
	if err != nil {
		return tracer.Totals{}, err
	}
	tot, err := tracer.ProcessStreams(ins, opt, sink(f))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return tot, fmt.Errorf("writing %s: %w", path, err)
	}
	return tot, nil
}

// teeSink feeds two sinks.
type teeSink [2]tracer.Sink

func (t teeSink) each(f func(tracer.Sink) error) error {
	if err := f(t[0]); err != nil {
		return err
	}
	return f(t[1])
}
func (t teeSink) BeginThread(h *tracer.Header, th *tracer.Thread) error {
	return t.each(func(s tracer.Sink) error { return s.BeginThread(h, th) })
}
func (t teeSink) Call(c *tracer.Call) error {
	return t.each(func(s tracer.Sink) error { return s.Call(c) })
}
func (t teeSink) Skip(d int) error { return t.each(func(s tracer.Sink) error { return s.Skip(d) }) }
func (t teeSink) EndThread() error { return t.each(func(s tracer.Sink) error { return s.EndThread() }) }
func (t teeSink) Mark(m *tracer.Mark) error {
	return t.each(func(s tracer.Sink) error { return s.Mark(m) })
}
func (t teeSink) Close(tot tracer.Totals) error {
	return t.each(func(s tracer.Sink) error { return s.Close(tot) })
}

// topSink adds up self time and calls per method over every thread.
type topSink struct {
	self  map[string]uint64
	calls map[string]uint64
}

func (s *topSink) BeginThread(*tracer.Header, *tracer.Thread) error { return nil }
func (s *topSink) Call(c *tracer.Call) error {
	if s.self == nil {
		s.self, s.calls = map[string]uint64{}, map[string]uint64{}
	}
	s.self[c.Name] += c.SelfNanos
	s.calls[c.Name]++
	return nil
}
func (s *topSink) Skip(int) error            { return nil }
func (s *topSink) Mark(*tracer.Mark) error   { return nil }
func (s *topSink) EndThread() error          { return nil }
func (s *topSink) Close(tracer.Totals) error { return nil }

func (s *topSink) print(w io.Writer, n int) {
	if n == 0 || len(s.self) == 0 {
		return
	}
	names := make([]string, 0, len(s.self))
	for k := range s.self {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool {
		a, b := s.self[names[i]], s.self[names[j]]
		return a > b || a == b && names[i] < names[j]
	})
	if len(names) > n {
		names = names[:n]
	}
	fmt.Fprintf(w, "top %d methods by self time:\n", len(names))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "self ms\tcalls\t\tmethod")
	for _, k := range names {
		fmt.Fprintf(tw, "%.3f\t%d\t\t%s\n", float64(s.self[k])/1e6, s.calls[k], k)
	}
	tw.Flush()
}
