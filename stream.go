package msgtrace

/*
#include <stdlib.h>
#include "rt.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"strings"
	"unsafe"
)

// StreamConfig says where and how the drain writes the stream (format: tracer/stream/stream.go).
type StreamConfig struct {
	// Path of the stream file: %p is the process id, %h the host name, %t the temporary
	// directory, %% a percent sign. The file is created when there is something to write:
	// a process that records nothing leaves no file. A child forked without exec writes its
	// own file (the pid is added to a path without %p).
	Path string
	// PeriodMS bounds the delay before the calls of a quiet thread and what each thread has
	// open reach the file (100 when 0).
	PeriodMS int
	// Drop: when the pool is empty, threads drop calls and count them (marked in the trace)
	// instead of waiting for the drain.
	Drop bool
	// MinUS: calls shorter than this many microseconds are not recorded, decided in the
	// interposer once the tick rate is known (a kept call's self time then includes its
	// discarded children).
	MinUS float64
	// Program names the process in the trace ("" = the executable's name).
	Program string
	// Ring: the flight recorder. Nothing is written as the program runs; the last chunks are
	// kept in the pool (each thread keeps at least two) and written, replacing the file, by
	// FlushStream, CloseStream, a crash, and SIGUSR2 (when the program leaves it at its
	// default), with per thread how many calls were overwritten.
	Ring bool
	// CPU: every 10 ms the drain reads each recording thread's CPU time (Linux: the time it
	// ran, the time it waited runnable on a run queue, its timeslices; Apple: the time it ran)
	// into the stream's cpu frames (MSGTRACE_CPU; in ring mode the last 1,024 are kept).
	CPU bool
}

// CheckPath reports whether a path pattern is one StartStream accepts.
func CheckPath(pattern string) error {
	if strings.IndexByte(pattern, 0) >= 0 {
		return fmt.Errorf("%q: a NUL byte in the path", pattern)
	}
	cs := C.CString(pattern)
	defer C.free(unsafe.Pointer(cs))
	var buf [4096]C.char
	if C.msgtrace_expand_path(cs, 1, &buf[0], C.size_t(len(buf))) != 0 {
		return fmt.Errorf("%q: unknown %%-sequence or too long (known: %%p pid, %%h host, %%t temporary directory, %%%%)", pattern)
	}
	return nil
}

// ExpandPath expands a path pattern for a process id.
func ExpandPath(pattern string, pid int) (string, error) {
	if err := CheckPath(pattern); err != nil {
		return "", err
	}
	cs := C.CString(pattern)
	defer C.free(unsafe.Pointer(cs))
	var buf [4096]C.char
	if C.msgtrace_expand_path(cs, C.long(pid), &buf[0], C.size_t(len(buf))) != 0 {
		return "", fmt.Errorf("%q: too long once expanded for pid %d", pattern, pid)
	}
	return C.GoString(&buf[0]), nil
}

// StartStream starts the drain thread: from now on full chunks are encoded into the stream as
// the program runs, quiet threads' calls and open calls at least every PeriodMS, and threads
// wait for buffer space instead of dropping (unless Drop). Crashing signals (SIGSEGV, SIGBUS,
// SIGABRT, SIGILL, SIGFPE, SIGTRAP) and terminating ones left at their default (SIGTERM,
// SIGINT, SIGHUP, SIGQUIT) get the drain's last pass before the program's own handling; a
// crashing signal that arrives while the thread runs the library's own code (the interposer, a
// trampoline, the recorder, the drain) also leaves a line on stderr and a crash instant.
func StartStream(cfg StreamConfig) error {
	if err := CheckPath(cfg.Path); err != nil {
		return err
	}
	if cfg.PeriodMS < 0 || cfg.PeriodMS > 60000 {
		return fmt.Errorf("stream period %d ms: want 1 to 60000", cfg.PeriodMS)
	}
	path := C.CString(cfg.Path)
	prog := C.CString(cfg.Program)
	// the drain keeps copies of both
	defer C.free(unsafe.Pointer(path))
	defer C.free(unsafe.Pointer(prog))
	c := C.struct_mt_stream_config{path: path, period_ms: C.uint32_t(cfg.PeriodMS), min_us: C.double(cfg.MinUS), program: prog}
	if cfg.Drop {
		c.drop = 1
	}
	if cfg.Ring {
		c.ring = 1
	}
	if cfg.CPU {
		c.cpu = 1
	}
	markGoText()
	if C.msgtrace_stream_start(&c) != 0 {
		return errors.New(C.GoString(C.msgtrace_stream_error()))
	}
	return nil
}

// FlushStream writes everything recorded so far (partly filled chunks, open calls) to the
// stream before it returns.
func FlushStream() error {
	if C.msgtrace_stream_flush() != 0 {
		if e := C.GoString(C.msgtrace_stream_error()); e != "" {
			return errors.New(e)
		}
		return errors.New("the stream is not running")
	}
	return nil
}

// CloseStream writes what is left and the end frame, closes the file and stops the drain.
// Calls recorded afterwards are not written. Closing twice is a no-op.
func CloseStream() error {
	if C.msgtrace_stream_close() != 0 {
		if e := C.GoString(C.msgtrace_stream_error()); e != "" {
			return errors.New(e)
		}
		return errors.New("the stream was not started")
	}
	return nil
}

// StreamPath is the stream file's path ("" while nothing was written).
func StreamPath() string { return C.GoString(C.msgtrace_stream_path()) }

// StreamTookPID reports whether the output pattern (without %p) named a stream another live
// process was writing, so that this process's stream took its pid (name.<pid>.ext): its
// converted output should too.
func StreamTookPID() bool { return C.msgtrace_stream_pid_added() != 0 }

// CPUSampleCost returns what sampling CPU time (StreamConfig.CPU) cost so far: the threads read,
// and the time the samples took on the drain thread, ns.
func CPUSampleCost() (reads, nanos uint64) {
	var r, n C.uint64_t
	C.msgtrace_cpu_cost(&r, &n)
	return uint64(r), uint64(n)
}
