package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/msgtrace/msgtrace/tracer"
	"github.com/msgtrace/msgtrace/tracer/engine"
	"github.com/msgtrace/msgtrace/tracer/report"
	"github.com/msgtrace/msgtrace/tracer/sink"
)

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
func findLibrary(flagValue, prog string) (string, error) {
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
	return "", fmt.Errorf("%s is not next to %s: build it with `make build` or give --lib PATH", libraryNames()[0], prog)
}

// preloadEnv returns env with the library preloaded and the streams sent to the pattern raw.
// On Linux the library goes after the objects env already preloads: glibc initializes the
// preloaded objects last to first, so its constructor runs before theirs and the +load methods
// their modules send are traced.
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
		case k == v && val != "" && runtime.GOOS == "linux":
			preload = val + sep + lib
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

func (s *Session) runTraced(args []string) error {
	stdout, stderr := s.Stdout, s.Stderr
	fs := NewFlags("run")
	out := fs.String("out", "trace.json", "the trace, in the format its extension names (see below)")
	// one flag per format of the registry that has one: also write that format
	type output struct {
		flag, format string
		path         *string
	}
	var extra []output
	for _, f := range tracer.Registry {
		if f.RunFlag != "" {
			extra = append(extra, output{f.RunFlag, f.Name, fs.String(f.RunFlag, "", fmt.Sprintf("also write %s (%s): %s", f.Name, f.Extensions[0], f.Help))})
		}
	}
	streamsOut := fs.String("streams", "", "also keep the stream files (one per process that sent messages) in this directory (created if missing)")
	reportOut := fs.String("report", "", "also write the whole report as JSON (what report --json prints) to this file")
	lib := fs.String("lib", "", "the msgtrace library to preload (default: next to this program)")
	top := fs.Int("top", 10, "how many methods and hitches the summary lists (0: no summary)")
	budgetMS := fs.Float64("budget-ms", 16, "the main thread's budget: a call busy longer, none of whose children is, is a hitch")
	filt := addFilterFlags(fs, "")
	if err := ParseFlags(fs, args); err != nil {
		return err
	}
	cmdline := fs.Args()
	if len(cmdline) == 0 {
		return usageError("run needs a program: " + s.Prog + " run [flags] -- APP [ARGS...]")
	}
	if *filt.minUS < 0 || *filt.maxDepth < -1 || *top < 0 || *budgetMS <= 0 {
		return usageError("-min-us, -max-depth and -top must not be negative, -budget-ms must be positive")
	}
	if err := filt.check(); err != nil {
		return err
	}
	outFormat, err := tracer.FormatFor(*out)
	if err != nil {
		return usageError("--out " + err.Error())
	}
	for _, o := range extra {
		if *o.path == "" {
			continue
		}
		if *o.path == "-" {
			return usageError(fmt.Sprintf("--%s -: run writes files, not standard output (the program has it)", o.flag))
		}
		if err := tracer.CheckOutputName(*o.path, o.format); err != nil {
			return usageError("--" + o.flag + " " + err.Error())
		}
	}
	if *reportOut == "-" {
		return usageError("--report -: run writes files, not standard output (the program has it)")
	}
	if *reportOut != "" && tracer.CheckOutputName(*reportOut, "json") != nil {
		return usageError(fmt.Sprintf("--report %s: the report is JSON; name it .json", *reportOut))
	}
	libPath, err := findLibrary(*lib, s.Prog)
	if err != nil {
		return err
	}
	app, err := exec.LookPath(cmdline[0])
	if err != nil {
		return fmt.Errorf("cannot start %s: %w", cmdline[0], err)
	}
	if *streamsOut != "" {
		if err := os.MkdirAll(*streamsOut, 0o755); err != nil {
			return fmt.Errorf("cannot create --streams %s: %w", *streamsOut, errors.Unwrap(err))
		}
	}
	// Outputs must be writable before the program runs, not after.
	check := []string{*out, *reportOut, filepath.Join(*streamsOut, "x")}
	for _, o := range extra {
		check = append(check, *o.path)
	}
	for _, p := range check {
		if p == "" || p == "x" {
			continue
		}
		f, err := os.CreateTemp(filepath.Dir(p), "."+s.Prog+"-check-*")
		if err != nil {
			return fmt.Errorf("cannot write %s: %w", p, errors.Unwrap(err))
		}
		f.Close()
		os.Remove(f.Name())
	}
	tmp, err := os.MkdirTemp("", s.Prog+"-run-")
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
	// The terminal's ^C goes to the program; the command waits for it to write its trace.
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
			fmt.Fprintf(stderr, "%s: %s was killed by %v\n", s.Prog, cmdline[0], ws.Signal())
		}
	} else if werr != nil {
		return werr
	}
	streams, _ := filepath.Glob(filepath.Join(tmp, "trace-*.mtrace"))
	if len(streams) == 0 {
		fmt.Fprintf(stderr, "%s: %s ran without writing a trace (exit status %d): %s\n", s.Prog, cmdline[0], status, injectionAdvice(app))
		if status == 0 {
			status = 1
		}
		return ExitStatus(status)
	}
	opt := filt.options()
	var kept []string
	if *streamsOut != "" {
		for _, s := range streams {
			to := filepath.Join(*streamsOut, filepath.Base(s))
			if err := copyFile(s, to); err != nil {
				return err
			}
			kept = append(kept, to)
		}
	}
	meta := sink.Meta{Program: filepath.Base(cmdline[0]), Path: app, TimeNanos: started.UnixNano(), Budget: int(filt.keep)}
	if abs, err := filepath.Abs(app); err == nil {
		meta.Path = abs
	}
	// every output and the report from one reading of the streams (a Tee)
	paths, pathFormat := []string{*out}, map[string]string{*out: outFormat}
	for _, o := range extra {
		if *o.path == "" {
			continue
		}
		if _, ok := pathFormat[*o.path]; !ok { // (one name given twice: written once)
			paths = append(paths, *o.path)
			pathFormat[*o.path] = o.format
		}
	}
	made := map[string]engine.Sink{} // by output, to say what their budgets folded
	rep := report.NewReportSink(report.ReportOptions{BudgetNanos: uint64(*budgetMS * 1e6), Top: max(*top, 1)})
	tot, err := s.convertStreams(streams, paths, opt, func(path string, w io.Writer) engine.Sink {
		sk, _ := tracer.NewSink(pathFormat[path], w, meta) // formats from tracer.FormatFor are all known
		made[path] = sk
		return sk
	}, rep)
	if err != nil {
		return err
	}
	files := slices.Clone(paths)
	if *reportOut != "" {
		if err := writeJSONFile(*reportOut, rep.Report()); err != nil {
			return err
		}
	}
	if *reportOut != "" {
		files = append(files, *reportOut)
	}
	pathFormat[*reportOut] = "report"
	s.reportWritten(written(tot, uint64(len(streams)), files, pathFormat, made))
	if *top > 0 {
		writeSummary(stderr, rep.Report(), *top)
		if len(kept) > 0 {
			fmt.Fprintf(stderr, "the whole report: %s report %s\n", s.Prog, shellQuote(*streamsOut))
		}
	}
	if status != 0 {
		return ExitStatus(status)
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

// convertStreams writes the streams (one per process, on one timeline) to each of paths through
// the sink sinkFor makes for it, and to more (sinks that write no file: the report), reading the
// streams once for all of them (a Tee), showing progress on a terminal; nothing is left at any
// of paths on failure.
func (s *Session) convertStreams(streams, paths []string, opt engine.Options, sinkFor func(path string, w io.Writer) engine.Sink, more ...engine.Sink) (tot engine.Totals, err error) {
	var ins []engine.Input
	var total int64
	for _, name := range streams {
		f, err := os.Open(name)
		if err != nil {
			return engine.Totals{}, err
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return engine.Totals{}, err
		}
		ins = append(ins, engine.Input{R: f, Size: st.Size(), Name: name})
		total += st.Size()
	}
	var files []*os.File
	defer func() {
		for i, f := range files {
			if cerr := f.Close(); err == nil && cerr != nil {
				err = fmt.Errorf("writing %s: %w", paths[i], cerr)
			}
		}
		if err != nil {
			for _, p := range paths[:len(files)] {
				os.Remove(p)
			}
		}
	}()
	sinks := slices.Clone(more)
	for _, p := range paths {
		f, err := os.Create(p)
		if err != nil {
			return engine.Totals{}, err
		}
		files = append(files, f)
		sinks = append(sinks, sinkFor(p, f))
	}
	sink := engine.Tee(sinks...)
	p := newProgress(s, strings.Join(paths, ", "), int64(engine.Readings(sink, opt))*total)
	defer p.finish()
	for i := range ins {
		ins[i].R = countingReaderAt{ins[i].R, p}
	}
	tot, err = engine.ProcessStreams(ins, opt, sink)
	if err != nil {
		if len(paths) == 1 {
			return tot, fmt.Errorf("writing %s: %w", paths[0], err)
		}
		return tot, fmt.Errorf("writing %s: %w", strings.Join(paths, ", "), err)
	}
	return tot, nil
}
