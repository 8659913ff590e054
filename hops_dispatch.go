package msgtrace

/*
#include "hops.h"
*/
import "C"

import (
	"runtime"
	"unsafe"

	"github.com/msgtrace/msgtrace/machobind"
)

// DispatchRebindings are the rebindings that make Grand Central Dispatch's async calls hops
// (hops_dispatch.c): dispatch_async, dispatch_after, dispatch_barrier_async and
// dispatch_group_async, block and function forms, rebound in every image's pointer tables to
// wrappers that mark the enqueue and run the work item between a begin and an end mark. Apple
// platforms only (nil elsewhere), and nil where the process lacks a function form or the Blocks
// runtime (dlsym finds them first; each slot's own original is published over it).
func DispatchRebindings() []machobind.Rebinding {
	if runtime.GOOS != "darwin" && runtime.GOOS != "ios" {
		return nil
	}
	return dispatchRebindings()
}

// dispatchRebindings is DispatchRebindings on any platform.
func dispatchRebindings() []machobind.Rebinding {
	if C.msgtrace_hops_dispatch_init() == 0 {
		return nil
	}
	return dispatchRebindingList()
}

// dispatchRebindingList is the rebindings themselves (the tests rebind a simulated image's).
func dispatchRebindingList() []machobind.Rebinding {
	publish := func(p *unsafe.Pointer) func(uintptr) {
		return func(orig uintptr) { *(*uintptr)(unsafe.Pointer(p)) = orig }
	}
	return []machobind.Rebinding{
		{Name: "dispatch_async", Replacement: uintptr(unsafe.Pointer(C.msgtrace_dispatch_async)),
			Publish: publish((*unsafe.Pointer)(unsafe.Pointer(&C.msgtrace_orig_dispatch_async)))},
		{Name: "dispatch_async_f", Replacement: uintptr(unsafe.Pointer(C.msgtrace_dispatch_async_f)),
			Publish: publish((*unsafe.Pointer)(unsafe.Pointer(&C.msgtrace_orig_dispatch_async_f)))},
		{Name: "dispatch_after", Replacement: uintptr(unsafe.Pointer(C.msgtrace_dispatch_after)),
			Publish: publish((*unsafe.Pointer)(unsafe.Pointer(&C.msgtrace_orig_dispatch_after)))},
		{Name: "dispatch_after_f", Replacement: uintptr(unsafe.Pointer(C.msgtrace_dispatch_after_f)),
			Publish: publish((*unsafe.Pointer)(unsafe.Pointer(&C.msgtrace_orig_dispatch_after_f)))},
		{Name: "dispatch_barrier_async", Replacement: uintptr(unsafe.Pointer(C.msgtrace_dispatch_barrier_async)),
			Publish: publish((*unsafe.Pointer)(unsafe.Pointer(&C.msgtrace_orig_dispatch_barrier_async)))},
		{Name: "dispatch_barrier_async_f", Replacement: uintptr(unsafe.Pointer(C.msgtrace_dispatch_barrier_async_f)),
			Publish: publish((*unsafe.Pointer)(unsafe.Pointer(&C.msgtrace_orig_dispatch_barrier_async_f)))},
		{Name: "dispatch_group_async", Replacement: uintptr(unsafe.Pointer(C.msgtrace_dispatch_group_async)),
			Publish: publish((*unsafe.Pointer)(unsafe.Pointer(&C.msgtrace_orig_dispatch_group_async)))},
		{Name: "dispatch_group_async_f", Replacement: uintptr(unsafe.Pointer(C.msgtrace_dispatch_group_async_f)),
			Publish: publish((*unsafe.Pointer)(unsafe.Pointer(&C.msgtrace_orig_dispatch_group_async_f)))},
	}
}
