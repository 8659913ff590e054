package agent

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/msgtrace/msgtrace"
	"github.com/msgtrace/msgtrace/machobind"
	"github.com/msgtrace/msgtrace/objc"
	"github.com/msgtrace/msgtrace/tracer"
)

// Agent is the tracer inside the traced process. Its methods are safe for concurrent use.
type Agent struct {
	mu      sync.Mutex
	cfg     Config
	hook    *machobind.Hook
	flusher msgtrace.Flusher
	namer   msgtrace.Namer
	flushes int    // successful flushes
	written uint64 // records written by them
	lastErr string
}

// New returns an agent with a configuration; nothing is installed yet.
func New(cfg Config) *Agent { return &Agent{cfg: cfg} }

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

// Install sizes the per-thread buffers and rebinds objc_msgSend and its variants in every
// image but the library's own, and in images loaded later. When the library is linked into the
// main program (the static archive), no image is exempt: the host's own sends are traced.
// Recording starts unless the configuration says paused. Installing twice is a no-op.
func (a *Agent) Install() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.hook != nil {
		return a.fail(nil)
	}
	records := uint64(a.cfg.BufferMB) << 20 / recordBytes
	if err := msgtrace.Configure(512, records); err != nil {
		return a.fail(fmt.Errorf("msgtrace: %w", err))
	}
	rt, err := platformRuntime()
	if err != nil {
		return a.fail(fmt.Errorf("msgtrace: %w", err))
	}
	rt = scope(rt)
	h, err := msgtrace.Install(machobind.NewRebinder(rt))
	if err != nil {
		return a.fail(fmt.Errorf("msgtrace: installing: %w", err))
	}
	a.hook = h
	msgtrace.SetActive(!a.cfg.Paused)
	return a.fail(nil)
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

// Pause stops recording (every interposed call becomes a pass-through); Resume starts it.
func (a *Agent) Pause()  { msgtrace.SetActive(false) }
func (a *Agent) Resume() { msgtrace.SetActive(true) }

// SetFilters replaces the include and exclude patterns used by the next flushes.
func (a *Agent) SetFilters(include, exclude []string) error {
	for _, p := range append(append([]string(nil), include...), exclude...) {
		if err := tracer.ValidatePattern(p); err != nil {
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

// SetLimits replaces the minimum duration and maximum depth used by the next flushes.
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
	Records int // calls taken from the buffers
	Totals  tracer.Totals
}

// Flush writes the calls recorded since the previous flush to path ("" = the configured
// output) in the configured format. Threads keep recording meanwhile; what they record after
// the snapshot goes to the next flush. The file is written whole or not at all.
func (a *Agent) Flush(path string) (Flushed, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if path == "" {
		path = a.cfg.Out
	}
	f, err := a.flush(path)
	return f, a.fail(err)
}

func (a *Agent) flush(path string) (Flushed, error) {
	res := Flushed{Path: path}
	if a.namer == nil {
		// The runtime the program uses; never one loaded here (a program without one sent
		// no message, and loading a library at exit would run its initializers).
		if nm, err := objc.Loaded(); err == nil {
			a.namer = nm
		} else {
			a.namer = addressNamer{}
		}
	}
	var raw bytes.Buffer
	n, err := a.flusher.WriteRaw(&raw, a.namer)
	if err != nil {
		return res, fmt.Errorf("msgtrace: %w", err)
	}
	res.Records = n
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return res, fmt.Errorf("msgtrace: cannot write %s: %w", path, errors.Unwrap(err))
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	if a.cfg.Format == "raw" {
		_, err = io.Copy(tmp, &raw)
	} else {
		var sink tracer.Sink
		exe, _ := os.Executable()
		if sink, err = tracer.NewSink(a.cfg.Format, tmp, tracer.Meta{Path: exe}); err == nil {
			res.Totals, err = tracer.Process(&raw, a.cfg.options(), sink)
		}
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return res, fmt.Errorf("msgtrace: writing %s: %w", path, err)
	}
	a.flushes++
	a.written += uint64(n)
	return res, nil
}

// Stop pauses recording and flushes to the configured output.
func (a *Agent) Stop() (Flushed, error) {
	a.Pause()
	return a.Flush("")
}

// AtExit writes what no flush took yet to the configured output (always when nothing was
// flushed, so a run leaves a trace file even when it sent no message). It reports
// whether it wrote a file.
func (a *Agent) AtExit() (Flushed, bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.hook == nil {
		return Flushed{}, false, nil
	}
	if a.flushes > 0 && msgtrace.ReadCounters().Recorded == a.written {
		return Flushed{}, false, nil
	}
	f, err := a.flush(a.cfg.Out)
	return f, err == nil, a.fail(err)
}

// Written is the number of calls the flushes wrote so far.
func (a *Agent) Written() uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.written
}

// addressNamer names classes and selectors by address, for a process without an Objective-C
// runtime in its global scope.
type addressNamer struct{}

func (addressNamer) ObjectClass(obj uintptr) uintptr { return 0 }
func (addressNamer) Superclass(cls uintptr) uintptr  { return 0 }
func (addressNamer) IsMetaClass(cls uintptr) bool    { return false }
func (addressNamer) ClassName(cls uintptr) string    { return fmt.Sprintf("class@%#x", cls) }
func (addressNamer) SelectorName(sel uintptr) string { return fmt.Sprintf("sel@%#x", sel) }
