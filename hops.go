package msgtrace

/*
#include "hops.h"
*/
import "C"

// HopCounters are the async hops' counters (hops.c): work items handed to another thread or
// to later, whose enqueue and execution the recorder links by an id.
type HopCounters struct {
	Enqueued  uint64 // hops given an id where they were enqueued
	Ran       uint64 // executions marked
	Unmarked  uint64 // marks not written: the thread untraced, or no chunk
	Untracked uint64 // work items not given an id: no memory for the table
	Pending   uint64 // ids waiting for their execution (timers: until invalidated)
}

// InstallHops hooks the methods that carry the framework's work items (gnustep-base's
// performers, timers, operations, threads, queued notifications) in the classes loaded so far,
// each once, unless MSGTRACE_FLOWS=0. Later classes are hooked as their modules register.
func InstallHops() { C.msgtrace_hops_install() }

// HopsInstalled reports how many of the hooks are in.
func HopsInstalled() int { return int(C.msgtrace_hops_installed()) }

// Hops reads the async hops' counters.
func Hops() HopCounters {
	var c C.struct_mt_hops_counters
	C.msgtrace_hops_counters(&c)
	return HopCounters{uint64(c.enqueued), uint64(c.ran), uint64(c.unmarked), uint64(c.untracked), uint64(c.pending)}
}

// hopsEnv is MSGTRACE_FLOWS as the C reads it before Go runs (rt_env.h): on or off.
func hopsEnv() bool { return C.msgtrace_hops_env() != 0 }
