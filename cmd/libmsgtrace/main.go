// Command libmsgtrace is msgtrace as a C library: built with -buildmode=c-shared it is the
// library users preload (LD_PRELOAD on Linux, DYLD_INSERT_LIBRARIES on macOS), which installs
// itself before main and writes the trace at exit; built with -buildmode=c-archive it is the
// archive linked into iOS test hosts, driven through msgtrace.h.
package main

/*
#cgo darwin LDFLAGS: -lobjc
// the Go runtime's calls to pthread_getattr_np go to ctor.c's first (the main thread's stack)
#cgo linux LDFLAGS: -Wl,--wrap=pthread_getattr_np
#include <stdlib.h>
// The API's types come from msgtrace.h. It declares msgtrace_flush, msgtrace_set_filters and
// msgtrace_last_error with const char *, which cgo exports as char *: those declarations are
// renamed out of the way here (the exported functions are what msgtrace.h says).
#define msgtrace_flush msgtrace_flush_as_declared
#define msgtrace_set_filters msgtrace_set_filters_as_declared
#define msgtrace_last_error msgtrace_last_error_as_declared
#include "msgtrace.h"
#undef msgtrace_flush
#undef msgtrace_set_filters
#undef msgtrace_last_error

void msgtrace_write_at_exit(void); // ctor.c
*/
import "C"

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"unsafe"

	"github.com/msgtrace/msgtrace"
	"github.com/msgtrace/msgtrace/internal/agent"
)

var (
	mu      sync.Mutex
	ag      *agent.Agent
	loadErr error
	errStr  *C.char // last error as returned to C, freed on the next call
	// stderr is a copy of the program's standard error taken at load time: programs may close
	// theirs in an exit handler that runs before ours (coreutils do).
	stderr io.Writer = os.Stderr
)

func init() {
	if fd, err := syscall.Dup(2); err == nil {
		syscall.CloseOnExec(fd)
		stderr = os.NewFile(uintptr(fd), "stderr")
	}
	procs = runtime.GOMAXPROCS(0)
}

// procs is the number of processors the Go runtime would use (GOMAXPROCS's default or the
// variable's): the load runs with them, then the Go side keeps one (oneProc), and a conversion
// is given them again (withProcs). Every call from C into Go (the load, a class registered
// later) returns to C with its processor parked in a system call; while another one is idle,
// Go's monitor thread takes it back only after 10 ms, waking every 20 µs for the first of them
// (then 40, 80 ... µs): 50 to 60 wake-ups, each preempting one of the program's threads on a
// busy machine, from the moment the program's main starts its threads. With one processor it
// takes it back at its next wake-up and sleeps. Those wake-ups made a race of gnustep-base's
// own crash more often (testdata/gnustep/poolnew.m, make bench-firsttouch).
var procs = 1

// oneProc leaves the Go runtime one processor (above), at the end of the load and of a start.
func oneProc() { runtime.GOMAXPROCS(1) }

// withProcs runs f (a conversion) with the Go runtime's usual processors, then one again.
func withProcs(f func()) {
	runtime.GOMAXPROCS(procs)
	defer runtime.GOMAXPROCS(1)
	f()
}

// get returns the agent, configured from the environment on first use.
func get() (*agent.Agent, error) {
	mu.Lock()
	defer mu.Unlock()
	if ag == nil && loadErr == nil {
		cfg, err := agent.FromEnv(os.Getenv, os.Getpid())
		if err == nil {
			err = cfg.CheckOut()
		}
		if err != nil {
			loadErr = err
		} else {
			ag = agent.New(cfg)
		}
	}
	return ag, loadErr
}

// msgtraceLoad runs from the library's constructor: configure, install, record. A bad
// variable or a failed install prints one line on stderr and leaves the program alone.
//
//export msgtraceLoad
func msgtraceLoad() (status C.int) {
	defer survive("installing", func() {
		giveUp()
		status = -1
	})
	defer oneProc()
	a, err := get()
	if err == nil {
		err = a.Install()
	}
	if err != nil {
		giveUp()
		fmt.Fprintln(stderr, err)
		return -1
	}
	msgtrace.SetExitHook(msgtraceExit) // programs that end with _exit
	if preparedEarly && os.Getenv("MSGTRACE_VERBOSE") != "" {
		fmt.Fprintln(stderr, "msgtrace: prepared on the preload loader's thread while the libraries initialized")
	}
	return 0
}

// giveUp leaves the program as it would run untraced when the configuration is refused or the
// install fails: recording stops, and what the preload loader's early start began
// (MSGTRACE_METHODS=all on gcc's runtime, in C, before the Go side could read the variables it
// alone checks) is undone: the methods it gave trampolines get their IMPs back (a +load keeps
// its trampoline, which forwards to the original untraced), so the refused run costs the
// program nothing past its start.
func giveUp() {
	msgtrace.SetActive(false)
	msgtrace.EndEarlyMethods()
	msgtrace.RestoreMethods()
}

// msgtracePrepare runs from the preload loader's own thread while the program's libraries
// are still being initialized (the first module they register): configure and start the
// drain (agent.Prepare), so that msgtraceLoad, which must finish before main, has less to do.
// An error is kept for msgtraceLoad to report.
//
//export msgtracePrepare
func msgtracePrepare() {
	defer survive("preparing", nil)
	if a, err := get(); err == nil && a.Prepare() == nil { // a failure is Install's to report: it tries again
		preparedEarly = true
	}
}

// preparedEarly: msgtracePrepare ran and succeeded (MSGTRACE_VERBOSE says so at load).
var preparedEarly bool

// msgtraceExit runs at exit: the calls no flush took yet go to MSGTRACE_OUT.
//
//export msgtraceExit
func msgtraceExit() {
	defer survive("writing the trace at exit", func() {
		if p := msgtrace.StreamPath(); p != "" {
			fmt.Fprintf(stderr, "msgtrace: the stream stays in %s (msgtrace trace converts it)\n", p)
		}
	})
	a, err := get()
	if err != nil {
		return
	}
	var f agent.Flushed
	var wrote bool
	withProcs(func() { f, wrote, err = a.AtExit() })
	if err != nil {
		fmt.Fprintln(stderr, err)
		return
	}
	if os.Getenv("MSGTRACE_VERBOSE") != "" {
		if c := msgtrace.ReadCounters(); c.StatesMade > 0 {
			fmt.Fprintf(stderr, "msgtrace: thread states: %d made as their thread was created, %d registered at its first traced call, %d freed unused\n",
				c.StatesMade, c.StatesRegistered, c.StatesUnused)
		}
		if st, _ := a.MethodStats(); st.Classes > 0 {
			fmt.Fprintf(stderr, "msgtrace: methods at exit: %d instrumented, %d trampolines used (%d class visits, %d never instrumented)\n",
				st.Instrumented, st.PoolUsed, st.Classes, st.Never)
		}
		if slots, parks, err := a.ParkState(); parks > 0 || err != nil {
			fmt.Fprintf(stderr, "msgtrace: pauses that parked the send and wait slots: %d (%d slots parked now)", parks, slots)
			if err != nil {
				fmt.Fprintf(stderr, "; the last time: %v", err)
			}
			fmt.Fprintln(stderr)
		}
		var small []string // libobjc2: the small-object classes the program registered
		for tag, c := range msgtrace.SmallObjectClasses() {
			if c != 0 {
				small = append(small, fmt.Sprintf("%d %s", tag, msgtrace.ClassName(c)))
			}
		}
		if len(small) > 0 {
			fmt.Fprintf(stderr, "msgtrace: small objects by tag: %s\n", strings.Join(small, ", "))
		}
		if reads, ns := msgtrace.CPUSampleCost(); reads > 0 {
			fmt.Fprintf(stderr, "msgtrace: CPU time sampled: %d thread reads in %.3f ms of the drain's CPU time (%.0f ns a thread)\n",
				reads, float64(ns)/1e6, float64(ns)/float64(reads))
		}
	}
	if wrote && os.Getenv("MSGTRACE_QUIET") == "" {
		c := msgtrace.ReadCounters()
		fmt.Fprintf(stderr, "msgtrace: %s: %d calls on %d threads (%d lost: no buffer space; %d past the shadow stack; %d waits for buffer space",
			f.Path, c.Written, c.Threads, c.Dropped, c.Overflow, c.Waits)
		if c.LostBytes > 0 {
			fmt.Fprintf(stderr, "; %d bytes could not be written", c.LostBytes)
		}
		fmt.Fprintln(stderr, ")")
	}
}

// survive is deferred by the library's entry points that run its Go code on the program's
// threads (the load, the exit): a panic there (a fault in that code turns into one) would end
// the program with the Go runtime's report and status 2, which it would not have had
// untraced. It is said in one line on stderr, naming where it happened, then after (if
// any) runs and the program goes on.
func survive(what string, after func()) {
	r := recover()
	if r == nil {
		return
	}
	fmt.Fprintf(stderr, "msgtrace: %s failed in the tracer's own code: panic: %v (in %s)\n", what, r, panicSite())
	if after != nil {
		after()
	}
}

// panicSite names the function that panicked, from a deferred call during the panic: the
// first frame past the runtime's own (gopanic, sigpanic, panicmem ...) and survive's.
func panicSite() string {
	pcs := make([]uintptr, 32)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)])
	for {
		f, more := frames.Next()
		if !strings.HasPrefix(f.Function, "runtime.") && !strings.HasSuffix(f.Function, ".survive") && f.Function != "" {
			return fmt.Sprintf("%s at %s:%d", f.Function, filepath.Base(f.File), f.Line)
		}
		if !more {
			return "an unknown frame"
		}
	}
}

func status(a *agent.Agent, err error) C.int {
	if err != nil {
		return -1
	}
	return 0
}

//export msgtrace_start
func msgtrace_start() C.int {
	defer oneProc()
	a, err := get()
	if err != nil {
		return -1
	}
	if err := a.Install(); err != nil {
		return -1
	}
	// Linked into the main program, no constructor ran: the exit write starts here.
	C.msgtrace_write_at_exit()
	msgtrace.SetExitHook(msgtraceExit)
	a.Resume()
	return 0
}

//export msgtrace_stop
func msgtrace_stop() C.int {
	a, err := get()
	if err != nil {
		return -1
	}
	_, err = a.Stop()
	return status(a, err)
}

//export msgtrace_pause
func msgtrace_pause() {
	if a, err := get(); err == nil {
		a.Pause()
	}
}

//export msgtrace_resume
func msgtrace_resume() {
	if a, err := get(); err == nil {
		a.Resume()
	}
}

//export msgtrace_flush
func msgtrace_flush(path *C.char) C.int {
	a, err := get()
	if err != nil {
		return -1
	}
	p := ""
	if path != nil {
		p = C.GoString(path)
	}
	withProcs(func() { _, err = a.Flush(p) })
	return status(a, err)
}

func splitList(s *C.char) []string {
	if s == nil {
		return nil
	}
	var out []string
	for _, p := range strings.Split(C.GoString(s), ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

//export msgtrace_set_filters
func msgtrace_set_filters(include, exclude *C.char, minUS C.double, maxDepth C.int) C.int {
	a, err := get()
	if err != nil {
		return -1
	}
	if err := a.SetLimits(float64(minUS), int(maxDepth)); err != nil {
		return -1
	}
	return status(a, a.SetFilters(splitList(include), splitList(exclude)))
}

//export msgtrace_get_counters
func msgtrace_get_counters(out *C.struct_msgtrace_counters) {
	if out == nil {
		return
	}
	c := msgtrace.ReadCounters()
	written := c.Written
	*out = C.struct_msgtrace_counters{C.uint64_t(c.Threads), C.uint64_t(c.Recorded), C.uint64_t(c.Dropped), C.uint64_t(c.Overflow), C.uint64_t(written)}
}

//export msgtrace_last_error
func msgtrace_last_error() *C.char {
	a, err := get()
	msg := ""
	if err != nil {
		msg = err.Error()
	} else {
		msg = a.LastError()
	}
	mu.Lock()
	defer mu.Unlock()
	if errStr != nil {
		C.free(unsafe.Pointer(errStr))
	}
	errStr = C.CString(msg)
	return errStr
}

func main() {}
