package agent

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/msgtrace/msgtrace"
	"github.com/msgtrace/msgtrace/machobind"
	"github.com/msgtrace/msgtrace/tracer"
	"github.com/msgtrace/msgtrace/tracer/engine"
	"github.com/msgtrace/msgtrace/tracer/sink"
)

// Agent is the tracer inside the traced process. Its methods are safe for concurrent use.
type Agent struct {
	mu   sync.Mutex
	cfg  Config
	hook *machobind.Hook
	// dispatch is GCD's async calls rebound (hops_dispatch.c); nil where there are none
	dispatch *machobind.Hook
	flushes  int    // successful flushes
	written  uint64 // calls in the stream at the last flush
	closed   bool
	started  bool // the pool sized and the drain started (Prepare, or Install's first step)
	plan     *prepared
	lastErr  string
	methods  methodState // method capture (methods.go)
	born     time.Time   // when the agent was made (the process's start, near enough)
	output   string      // the last output this agent wrote to its configured name
	park     parking     // the send slots given their originals while paused (park.go)
}

// New returns an agent with a configuration; nothing is installed yet.
func New(cfg Config) *Agent { return &Agent{cfg: cfg, born: time.Now()} }

// Config returns the current configuration.
func (a *Agent) Config() Config {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cfg
}

// LastError is the message of the last failed call ("" after a success).
func (a *Agent) LastError() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.lastErr
}

func (a *Agent) fail(err error) error {
	if err == nil {
		a.lastErr = ""
	} else {
		a.lastErr = err.Error()
	}
	return err
}

// ChunkBytes is the size of the chunks threads record into.
const ChunkBytes = 64 << 10

// Install sizes the pool, starts the drain (the stream file appears with the first calls),
// and rebinds objc_msgSend and its variants in every image but the library's own, and in
// images loaded later. When the library is linked into the main program (the static archive),
// no image is exempt: the host's own sends are traced. Recording starts unless the
// configuration says paused. Installing again is a no-op, but after a Stop it instruments the
// methods the Stop restored again (each with the trampoline it had).
func (a *Agent) Install() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.hook != nil { // installed: after a Stop, the methods it restored are instrumented again
		return a.fail(a.reinstallMethods())
	}
	if err := a.start(); err != nil {
		return a.fail(err)
	}
	p := a.plan
	a.plan = nil
	if p == nil {
		var err error
		if p, err = a.planCapture(); err != nil {
			return a.fail(err)
		}
	}
	h, more, err := p.capture.Commit()
	if err != nil {
		return a.fail(fmt.Errorf("msgtrace: installing: %w", err))
	}
	a.hook, a.dispatch = h, more[1]
	if p.methods {
		if err := a.installMethodsWith(p.rt, more[0]); err != nil {
			return a.fail(err)
		}
	}
	a.parkHook(h, a.cfg.Paused)
	return a.fail(nil)
}

// Prepare does the part of Install that changes nothing the program sees: it sizes the pool,
// starts the drain (the stream, its clock and the launch marks queued so far) and finds the
// slots to rebind in the objects loaded now (machobind.Plan: the walk of their relocations),
// handing each original to its interposer. The preload loader calls it on a thread of its own
// while the program's libraries are still being initialized, so that the Install that must
// come before main has the slots to write and the methods to instrument left. Install
// without Prepare does it all.
func (a *Agent) Prepare() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.start(); err != nil {
		return a.fail(err)
	}
	if a.hook != nil || a.plan != nil {
		return a.fail(nil)
	}
	p, err := a.planCapture()
	if err != nil {
		return a.fail(err)
	}
	a.plan = p
	return a.fail(nil)
}

// prepared is the rebinding found before Install writes it.
type prepared struct {
	rt      machobind.Runtime
	methods bool // method capture: the watch's rebindings are the capture's second set
	capture *msgtrace.CapturePlan
}

// planCapture finds the capture's slots (and, with method capture, the watch's). a.mu held.
func (a *Agent) planCapture() (*prepared, error) {
	rt, err := platformRuntime()
	if err != nil {
		return nil, fmt.Errorf("msgtrace: %w", err)
	}
	p := &prepared{rt: scope(rt), methods: a.capturesMethods()}
	// the rebindings that report classes registered later are made in the same pass over the
	// objects as the capture's (one walk of each object's relocations)
	var watch []machobind.Rebinding
	if p.methods {
		watch = a.methods.watchRebindings() // methods.go
	}
	// and GCD's async calls, where flows are on (Apple platforms: nothing elsewhere)
	var dispatch []machobind.Rebinding
	if a.cfg.Flows {
		dispatch = msgtrace.DispatchRebindings()
	}
	msgtrace.SetWaits(!a.cfg.NoWaits)
	if p.capture, err = msgtrace.PlanCapture(machobind.NewRebinder(p.rt), a.cfg.captureSends(), watch, dispatch); err != nil {
		return nil, fmt.Errorf("msgtrace: installing: %w", err)
	}
	return p, nil
}

func (a *Agent) start() error {
	if a.started {
		return nil
	}
	if err := msgtrace.Configure(512, uint64(a.cfg.BufferMB)<<20, ChunkBytes); err != nil {
		return fmt.Errorf("msgtrace: %w", err)
	}
	if err := msgtrace.StartStream(msgtrace.StreamConfig{Path: a.cfg.StreamPattern(), Drop: a.cfg.Drop, MinUS: a.cfg.MinUS, Ring: a.cfg.Ring, CPU: a.cfg.CPU}); err != nil {
		return fmt.Errorf("msgtrace: %w", err)
	}
	a.started = true
	return nil
}

// Installed reports whether the interposers are in place, and how many slots they took.
func (a *Agent) Installed() (bool, int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.hook == nil {
		return false, 0
	}
	return true, a.hook.Slots()
}

// Skipped lists the images the interposers could not be put into, with the reasons.
func (a *Agent) Skipped() []error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.hook == nil {
		return nil
	}
	return a.hook.Skipped()
}

// Pause stops recording: every interposed call becomes a pass-through, and after ParkAfter the
// send slots get their originals back (park.go). Resume binds them again and starts recording.
func (a *Agent) Pause()  { a.setRecording(false) }
func (a *Agent) Resume() { a.setRecording(true) }

// SetFilters replaces the include and exclude patterns used by the next conversions.
func (a *Agent) SetFilters(include, exclude []string) error {
	for _, p := range append(append([]string(nil), include...), exclude...) {
		if err := engine.ValidatePattern(p); err != nil {
			a.mu.Lock()
			defer a.mu.Unlock()
			return a.fail(fmt.Errorf("msgtrace: %w", err))
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.cfg.Include, a.cfg.Exclude = include, exclude
	return a.fail(nil)
}

// SetLimits replaces the minimum duration and maximum depth used by the next conversions.
func (a *Agent) SetLimits(minUS float64, maxDepth int) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if minUS < 0 || minUS != minUS || maxDepth < -1 {
		return a.fail(fmt.Errorf("msgtrace: bad limits: min %v us, max depth %d", minUS, maxDepth))
	}
	a.cfg.MinUS, a.cfg.MaxDepth = minUS, maxDepth
	return a.fail(nil)
}

// Flushed is what one flush wrote.
type Flushed struct {
	Path    string
	Records int // calls in the trace written
	Totals  engine.Totals
}

// Flush makes everything recorded so far reach the stream, then writes the trace so far
// (every call up to now; calls still running shown open) to path ("" = the configured
// output) in the configured format. With the stream format and no path, the stream file is
// the output and nothing else is written. Threads keep recording meanwhile. The file appears
// whole or not at all.
func (a *Agent) Flush(path string) (Flushed, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	f, err := a.flush(path, false)
	return f, a.fail(err)
}

func (a *Agent) flush(path string, final bool) (Flushed, error) {
	res := Flushed{Path: path}
	var err error
	if !a.closed { // closed (at exit): everything is in the file already
		if err = msgtrace.FlushStream(); err != nil {
			return res, fmt.Errorf("msgtrace: %w", err)
		}
	}
	stream := msgtrace.StreamPath()
	if path == "" {
		if a.cfg.Format == "stream" {
			res.Path = stream
			res.Records = int(msgtrace.ReadCounters().Written)
			a.flushes++
			a.written = uint64(res.Records)
			return res, nil
		}
		if res.Path, err = msgtrace.ExpandPath(a.cfg.Out, os.Getpid()); err != nil {
			return res, fmt.Errorf("msgtrace: %w", err)
		}
		if a.othersOutput(res.Path) {
			res.Path = tracer.WithPID(res.Path, os.Getpid())
		}
	}
	format := a.cfg.Format
	if path != "" {
		if format, err = formatOf(path); err != nil {
			return res, fmt.Errorf("msgtrace: %w", err)
		}
	}
	tmp, err := os.CreateTemp(filepath.Dir(res.Path), "."+filepath.Base(res.Path)+".*")
	if err != nil {
		return res, fmt.Errorf("msgtrace: cannot write %s: %w", res.Path, errors.Unwrap(err))
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	if stream == "" {
		err = errors.New("nothing was recorded")
	} else if in, oerr := os.Open(stream); oerr != nil {
		err = oerr
	} else {
		if format == "stream" {
			_, err = io.Copy(tmp, in)
		} else {
			var out engine.Sink
			exe, _ := os.Executable()
			if out, err = tracer.NewSink(format, tmp, sink.Meta{Path: exe, Budget: a.cfg.Budget}); err == nil {
				res.Totals, err = engine.Process(in, a.cfg.options(), out)
				res.Records = int(res.Totals.Calls)
			}
		}
		in.Close()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), res.Path)
	}
	if err != nil {
		return res, fmt.Errorf("msgtrace: writing %s: %w", res.Path, err)
	}
	if path == "" {
		a.output = res.Path
	}
	if final && path == "" && !a.cfg.KeepStream {
		os.Remove(stream) // converted: the stream was only the way there
	}
	a.flushes++
	a.written = msgtrace.ReadCounters().Written
	return res, nil
}

// othersOutput reports whether the configured output name (a pattern without %p) belongs to
// another process of the same run: one whose live stream had the name when this one's was
// created (a parent, or a daemon it started, with the same MSGTRACE_OUT), or one that wrote the
// output itself while this process ran (a child exec'd with the same MSGTRACE_OUT that exited
// first). This process's output then takes its pid, instead of replacing theirs. A file left by
// an earlier run is older than this process and is replaced, as before.
func (a *Agent) othersOutput(p string) bool {
	if strings.Contains(a.cfg.Out, "%p") {
		return false
	}
	if msgtrace.StreamTookPID() {
		return true
	}
	st, err := os.Stat(p)
	return err == nil && p != a.output && st.ModTime().After(a.born)
}

// Stop pauses recording, gives instrumented methods their IMPs back where they are still ours,
// and flushes to the configured output.
func (a *Agent) Stop() (Flushed, error) {
	a.Pause()
	a.restoreMethods()
	return a.Flush("")
}

// AtExit closes the stream (what the threads still hold, the calls still open, the end frame)
// and, unless the format is the stream itself, converts it to the configured output. A process
// that recorded nothing writes nothing: a wrapper (timeout, a shell, a test runner) that loaded
// the library too never replaces the trace of the program it ran. It reports whether it
// wrote a file.
func (a *Agent) AtExit() (Flushed, bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.hook == nil || a.closed {
		return Flushed{}, false, nil
	}
	if err := msgtrace.CloseStream(); err != nil && msgtrace.StreamPath() == "" {
		a.closed = true
		return Flushed{}, false, a.fail(fmt.Errorf("msgtrace: %w", err))
	}
	a.closed = true
	if msgtrace.StreamPath() == "" {
		return Flushed{}, false, nil
	}
	f, err := a.flush("", true)
	return f, err == nil, a.fail(err)
}

// Written is the number of calls in the stream at the last flush.
func (a *Agent) Written() uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.written
}
