// Package agent is msgtrace as a library inside a traced program: its configuration from the
// environment, installing the interposers, and writing traces in the chosen format. The
// libmsgtrace shared library and static archive are thin C wrappers around it.
package agent

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/msgtrace/msgtrace"
	"github.com/msgtrace/msgtrace/tracer"
	"github.com/msgtrace/msgtrace/tracer/engine"
)

// Formats are the values MSGTRACE_FORMAT accepts.
var Formats = append(append([]string(nil), tracer.Formats...), "stream")

// Config is what the MSGTRACE_* variables set.
type Config struct {
	Out      string   // MSGTRACE_OUT: where the trace is written; %p pid, %h host, %t tmpdir, %%
	Format   string   // MSGTRACE_FORMAT: a name of tracer.Registry, or stream
	MinUS    float64  // MSGTRACE_MIN_US: calls shorter than this are left out
	Budget   int      // MSGTRACE_MAX_CALLS: calls a timeline keeps (the longest); 0 the format's default, -1 all
	MaxDepth int      // MSGTRACE_MAX_DEPTH: calls deeper than this are left out; -1: no limit
	Include  []string // MSGTRACE_INCLUDE: comma list of method patterns to keep
	Exclude  []string // MSGTRACE_EXCLUDE: comma list of method patterns to leave out
	Threads  string   // MSGTRACE_THREADS: all, main, or a comma list of thread names and ids
	Paused   bool     // MSGTRACE_START=paused: installed, recording starts with msgtrace_resume
	BufferMB int      // MSGTRACE_BUFFER_MB: the chunk pool every thread records into
	Drop     bool     // MSGTRACE_FULL=drop: drop and count when the pool is empty (default: wait)
	Ring     bool     // MSGTRACE_MODE=ring: the flight recorder
	// Flows (MSGTRACE_FLOWS, on unless 0) links work handed to another thread (performers,
	// timers, operations, threads, queued notifications) from its enqueue to its execution.
	Flows bool
	// KeepStream (MSGTRACE_KEEP_STREAM=1) keeps the stream file next to a converted output.
	KeepStream bool
	// CPU (MSGTRACE_CPU, on unless 0) samples each recording thread's CPU time into the stream.
	CPU     bool
	Methods []string // MSGTRACE_METHODS: app (default), all, or a comma list of image and class patterns
	Capture string   // MSGTRACE_CAPTURE: sends, methods or both; "" = both where objc_msgSend exists, else methods
	NoWaits bool     // MSGTRACE_WAITS=0: contended waits are not recorded (the primitives are not rebound)
}

// Default values (the recorder's, which its early start reads the variable with too).
const (
	DefaultBufferMB = msgtrace.DefaultBufferMB
	MaxBufferMB     = msgtrace.MaxBufferMB
)

// ConfigError names the variable and the value that is wrong.
type ConfigError struct {
	Var, Value, Why string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("msgtrace: %s=%q: %s; tracing is off", e.Var, e.Value, e.Why)
}

// extension is the file name extension each format is written with by default.
func extension(format string) string {
	if format == "stream" {
		return ".mtrace"
	}
	return tracer.Extension(format)
}

// formatOf infers a format from an output file name: .mtrace the stream itself, otherwise as
// tracer.FormatFor (.json Chrome JSON, .pftrace Perfetto, .speedscope.json speedscope,
// .pb.gz/.pprof/.pb pprof, .folded folded, .svg a flame graph); any other name is an error.
func formatOf(path string) (string, error) {
	if strings.HasSuffix(strings.ToLower(path), tracer.StreamExtension) {
		return "stream", nil
	}
	return tracer.FormatFor(path)
}

// FromEnv reads the configuration through getenv (os.Getenv in the library). The first bad
// value is the error.
func FromEnv(getenv func(string) string, pid int) (Config, error) {
	c := Config{MaxDepth: -1, Threads: "all", BufferMB: DefaultBufferMB, Methods: []string{"app"}, CPU: true}
	c.Format = strings.ToLower(strings.TrimSpace(getenv("MSGTRACE_FORMAT")))
	if c.Format != "" && extension(c.Format) == "" {
		return c, &ConfigError{"MSGTRACE_FORMAT", getenv("MSGTRACE_FORMAT"), "must be one of " + strings.Join(Formats, ", ")}
	}
	c.Out = getenv("MSGTRACE_OUT")
	if c.Format == "" {
		c.Format = "json"
		if c.Out != "" {
			f, err := formatOf(c.Out)
			if err != nil {
				return c, &ConfigError{"MSGTRACE_OUT", c.Out, "no format has this extension (name it " + tracer.KnownExtensions() + " or .mtrace (stream), or set MSGTRACE_FORMAT)"}
			}
			c.Format = f
		}
	}
	if c.Out == "" {
		dir := getenv("TMPDIR")
		if dir == "" {
			dir = os.TempDir()
		}
		c.Out = filepath.Join(dir, "msgtrace-%p"+extension(c.Format))
	}
	if err := msgtrace.CheckPath(c.Out); err != nil {
		return c, &ConfigError{"MSGTRACE_OUT", c.Out, "unknown %-sequence (known: %p pid, %h host name, %t temporary directory, %% a percent sign)"}
	}
	if v := getenv("MSGTRACE_MIN_US"); v != "" {
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || f < 0 || f != f || f > 1e12 {
			return c, &ConfigError{"MSGTRACE_MIN_US", v, "must be a number of microseconds, 0 or more"}
		}
		c.MinUS = f
	}
	if v := strings.ToLower(strings.TrimSpace(getenv("MSGTRACE_MAX_CALLS"))); v != "" {
		n, err := strconv.Atoi(v)
		switch {
		case v == "all":
			c.Budget = -1
		case err != nil || n <= 0:
			return c, &ConfigError{"MSGTRACE_MAX_CALLS", getenv("MSGTRACE_MAX_CALLS"), "must be a number of calls (1 or more) or all"}
		default:
			c.Budget = n
		}
	}
	if v := getenv("MSGTRACE_MAX_DEPTH"); v != "" {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 0 {
			return c, &ConfigError{"MSGTRACE_MAX_DEPTH", v, "must be a whole number, 0 (outermost calls only) or more"}
		}
		c.MaxDepth = n
	}
	var err error
	if c.Include, err = patternList("MSGTRACE_INCLUDE", getenv("MSGTRACE_INCLUDE")); err != nil {
		return c, err
	}
	if c.Exclude, err = patternList("MSGTRACE_EXCLUDE", getenv("MSGTRACE_EXCLUDE")); err != nil {
		return c, err
	}
	if v := getenv("MSGTRACE_THREADS"); v != "" {
		if err := engine.ValidateThreads(v); err != nil {
			return c, &ConfigError{"MSGTRACE_THREADS", v, err.Error()}
		}
		c.Threads = v
	}
	switch v := getenv("MSGTRACE_START"); strings.ToLower(strings.TrimSpace(v)) {
	case "", "on":
	case "paused":
		c.Paused = true
	default:
		return c, &ConfigError{"MSGTRACE_START", v, "must be on or paused"}
	}
	switch v := getenv("MSGTRACE_FULL"); strings.ToLower(strings.TrimSpace(v)) {
	case "", "wait":
	case "drop":
		c.Drop = true
	default:
		return c, &ConfigError{"MSGTRACE_FULL", v, "must be wait (default: a thread waits for the drain, nothing is lost) or drop (lost calls are counted and marked)"}
	}
	switch v := getenv("MSGTRACE_MODE"); strings.ToLower(strings.TrimSpace(v)) {
	case "", "stream":
	case "ring":
		c.Ring = true
	default:
		return c, &ConfigError{"MSGTRACE_MODE", v, "must be stream (written as the program runs) or ring (the last MSGTRACE_BUFFER_MB kept, written on flush, at exit, on SIGUSR2)"}
	}
	// rt_env.h's mt_env_flows reads it alike before Go runs (hops.c)
	switch v := getenv("MSGTRACE_FLOWS"); strings.ToLower(strings.TrimSpace(v)) {
	case "", "1":
		c.Flows = true
	case "0":
	default:
		return c, &ConfigError{"MSGTRACE_FLOWS", v, "must be 1 (default: work handed to another thread is linked to where it was enqueued) or 0"}
	}
	switch v := getenv("MSGTRACE_KEEP_STREAM"); strings.TrimSpace(v) {
	case "", "0":
	case "1":
		c.KeepStream = true
	default:
		return c, &ConfigError{"MSGTRACE_KEEP_STREAM", v, "must be 0 or 1"}
	}
	switch v := getenv("MSGTRACE_CPU"); strings.TrimSpace(v) {
	case "", "1":
	case "0":
		c.CPU = false
	default:
		return c, &ConfigError{"MSGTRACE_CPU", v, "must be 1 (default: each thread's CPU time sampled every 10 ms) or 0 (off)"}
	}
	if v := getenv("MSGTRACE_BUFFER_MB"); v != "" {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 || n > MaxBufferMB {
			return c, &ConfigError{"MSGTRACE_BUFFER_MB", v, fmt.Sprintf("must be a whole number of MiB from 1 to %d", MaxBufferMB)}
		}
		c.BufferMB = n
	}
	if c.Methods, err = methodsList(getenv("MSGTRACE_METHODS")); err != nil {
		return c, err
	}
	switch v := strings.ToLower(strings.TrimSpace(getenv("MSGTRACE_CAPTURE"))); v {
	case "", "sends", "methods", "both":
		c.Capture = v
	default:
		return c, &ConfigError{"MSGTRACE_CAPTURE", getenv("MSGTRACE_CAPTURE"), "must be sends, methods or both"}
	}
	switch v := strings.ToLower(strings.TrimSpace(getenv("MSGTRACE_WAITS"))); v {
	case "", "1", "on":
	case "0", "off":
		c.NoWaits = true
	default:
		return c, &ConfigError{"MSGTRACE_WAITS", getenv("MSGTRACE_WAITS"), "must be 1 (default: contended waits recorded with their holder) or 0"}
	}
	return c, nil
}

// methodsList reads MSGTRACE_METHODS: "app" (the default: classes of the main program and of
// objects outside the system library directories), "all", or a comma list of glob patterns,
// each matched against class names and the base names of the objects that define them.
func methodsList(raw string) ([]string, error) {
	v := strings.TrimSpace(raw)
	switch strings.ToLower(v) {
	case "", "app":
		return []string{"app"}, nil
	case "all":
		return []string{"all"}, nil
	}
	var out []string
	for _, p := range strings.Split(v, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if _, err := path.Match(p, ""); err != nil {
			return nil, &ConfigError{"MSGTRACE_METHODS", raw, fmt.Sprintf("bad pattern %q: %v", p, err)}
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, &ConfigError{"MSGTRACE_METHODS", raw, "must be app, all, or a comma list of class and image patterns"}
	}
	return out, nil
}

// patternList splits a comma list of method patterns and checks each.
func patternList(name, v string) ([]string, error) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	var out []string
	for _, p := range strings.Split(v, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if err := engine.ValidatePattern(p); err != nil {
			return nil, &ConfigError{name, v, err.Error()}
		}
		out = append(out, p)
	}
	return out, nil
}

// options are the tracer's output filters for a configuration.
func (c Config) options() engine.Options {
	return engine.Options{MinNanos: c.MinUS * 1000, MaxDepth: c.MaxDepth, Include: c.Include, Exclude: c.Exclude, Threads: c.Threads}
}

// StreamPattern is the path pattern of the stream file: the output itself in the stream
// format, else the output's name with .mtrace added (converted at exit, then removed).
func (c Config) StreamPattern() string {
	if c.Format == "stream" {
		return c.Out
	}
	return c.Out + ".mtrace"
}

// CheckOut makes sure the output's directory takes new files, so that a wrong MSGTRACE_OUT is
// reported when the program starts rather than lost at exit.
func (c Config) CheckOut() error {
	out, err := msgtrace.ExpandPath(c.Out, os.Getpid())
	if err != nil {
		return &ConfigError{"MSGTRACE_OUT", c.Out, err.Error()}
	}
	f, err := os.CreateTemp(filepath.Dir(out), ".msgtrace-check-*")
	if err != nil {
		why := err.Error()
		if pe, ok := err.(*os.PathError); ok {
			why = pe.Err.Error()
		}
		return &ConfigError{"MSGTRACE_OUT", c.Out, "cannot create files in " + filepath.Dir(out) + ": " + why}
	}
	f.Close()
	return os.Remove(f.Name())
}
