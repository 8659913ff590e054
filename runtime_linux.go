//go:build linux

package msgtrace

/*
#cgo LDFLAGS: -ldl
#include "drain_signals.h"
#include "elfimages_linux.h"
#include "rt.h"
#include "rt_launch.h"
*/
import "C"

import (
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/msgtrace/msgtrace/machobind"
)

// linuxRuntime is machobind.Runtime for this Linux process: its ELF objects through
// dl_iterate_phdr, page protections through mprotect and /proc/self/maps, unbound PLT slots
// through dlsym.
type linuxRuntime struct {
	machobind.ProcVM
}

// ELFRuntime returns the Runtime that rebinds the ELF objects of this process. Objects loaded
// later are reported to the Rebinder when dlopen returns, once Install has rebound dlopen.
func ELFRuntime() machobind.Runtime { return linuxRuntime{} }

func (linuxRuntime) Images() ([]machobind.Loaded, error) {
	// the objects are listed again only when the C library's counts of objects loaded and
	// unloaded changed: the install asks several times before main, nothing loaded between
	var adds, subs C.uint64_t
	known := C.msgtrace_elf_generation(&adds, &subs) != 0
	imagesSeen.Lock()
	defer imagesSeen.Unlock()
	if known && imagesSeen.imgs != nil && imagesSeen.adds == adds && imagesSeen.subs == subs {
		return slices.Clone(imagesSeen.imgs), nil
	}
	imgs := elfObjects()
	if known {
		imagesSeen.adds, imagesSeen.subs, imagesSeen.imgs = adds, subs, imgs
	}
	return slices.Clone(imgs), nil
}

// imagesSeen is the last list of objects and the C library's counts it was made at.
var imagesSeen struct {
	sync.Mutex
	adds, subs C.uint64_t
	imgs       []machobind.Loaded
}

// elfObjects lists the loaded objects (dl_iterate_phdr).
func elfObjects() []machobind.Loaded {
	n := int(C.msgtrace_elf_objects(nil, 0))
	objs := make([]C.struct_mt_object, n+16)
	n = min(int(C.msgtrace_elf_objects(&objs[0], C.size_t(len(objs)))), len(objs))
	out := make([]machobind.Loaded, 0, n)
	for _, o := range objs[:n] {
		out = append(out, machobind.Loaded{Name: C.GoString(&o.name[0]), Header: uintptr(o.header), Slide: uintptr(o.slide), ELF: true})
	}
	return out
}

func (linuxRuntime) Self() uintptr { return uintptr(C.msgtrace_elf_self()) }

// watcher remembers the objects already reported and the Rebinder's add-image callbacks.
var watcher struct {
	sync.Mutex
	seen map[uintptr]bool
	fns  []func(machobind.Loaded)
}

// WatchImages: Linux has no add-image callback. The objects present now are remembered; when
// the rebound dlopen returns (msgtraceImagesChanged), those that appeared since are passed to fn.
func (rt linuxRuntime) WatchImages(fn func(machobind.Loaded)) error {
	imgs, err := rt.Images()
	if err != nil {
		return err
	}
	watcher.Lock()
	defer watcher.Unlock()
	if watcher.seen == nil {
		watcher.seen = map[uintptr]bool{}
	}
	for _, l := range imgs {
		watcher.seen[l.Header] = true
	}
	watcher.fns = append(watcher.fns, fn)
	return nil
}

// msgtraceImagesChanged is called by msgtrace_dlopen after the real dlopen loaded something.
//
//export msgtraceImagesChanged
func msgtraceImagesChanged() {
	imgs, err := linuxRuntime{}.Images()
	if err != nil {
		return
	}
	watcher.Lock()
	var added []machobind.Loaded
	present := make(map[uintptr]bool, len(imgs))
	for _, l := range imgs {
		present[l.Header] = true
		if !watcher.seen[l.Header] {
			added = append(added, l)
		}
	}
	watcher.seen = present // an object unloaded since is forgotten: loaded again, it is new
	fns := append([](func(machobind.Loaded)){}, watcher.fns...)
	watcher.Unlock()
	for _, l := range added {
		for _, fn := range fns {
			fn(l)
		}
	}
}

func (linuxRuntime) Resolve(symbol, _ string) (uintptr, error) {
	return purego.Dlsym(purego.RTLD_DEFAULT, symbol) // ELF names carry no leading underscore
}

func (linuxRuntime) Strip(p uintptr) uintptr { return p }

func (linuxRuntime) Sign(p, _ uintptr, _ machobind.AuthInfo) (uintptr, error) { return p, nil }

// platformRebindings are rebound with the interposers: dlopen, so that objects loaded later
// are rebound as soon as dlopen returns; _exit and _Exit, so that a program that ends without
// running exit handlers still runs the exit hook; __libc_start_main, which only the main
// program imports (its _start calls it through its GOT once every shared object's
// constructors ran, ours included), so that "main" is marked on the timeline: the
// replacement hands the C library a main of ours that marks it and calls the program's
// (rt_launch.c). Installed after main started (msgtrace_start from a host), that slot is never
// used again. sigaction, signal and sysv_signal (and __sysv_signal, what signal is under a
// strict standard's mode), so that the library's handler for a crashing signal stays first: a
// handler the program sets goes below it (drain_signals.c), and a crash in the library's own
// code is still told. pthread_create, so that a thread's state is made before it starts and its
// first traced call costs what a later one does (rt_thread.c).
func platformRebindings() []machobind.Rebinding {
	publish := func(p *unsafe.Pointer) func(uintptr) {
		return func(orig uintptr) { *(*uintptr)(unsafe.Pointer(p)) = orig }
	}
	return []machobind.Rebinding{
		{Name: "dlopen", Replacement: uintptr(unsafe.Pointer(C.msgtrace_dlopen)),
			Publish: publish((*unsafe.Pointer)(unsafe.Pointer(&C.msgtrace_orig_dlopen)))},
		{Name: "_exit", Replacement: uintptr(unsafe.Pointer(C.msgtrace__exit)),
			Publish: publish((*unsafe.Pointer)(unsafe.Pointer(&C.msgtrace_orig__exit)))},
		{Name: "_Exit", Replacement: uintptr(unsafe.Pointer(C.msgtrace__Exit)),
			Publish: publish((*unsafe.Pointer)(unsafe.Pointer(&C.msgtrace_orig__Exit)))},
		{Name: "__libc_start_main", Replacement: uintptr(unsafe.Pointer(C.msgtrace___libc_start_main)),
			Publish: publish(&C.msgtrace_orig___libc_start_main)},
		{Name: "pthread_create", Replacement: uintptr(unsafe.Pointer(C.msgtrace_pthread_create)),
			Publish: publish(&C.msgtrace_orig_pthread_create)},
		{Name: "sigaction", Replacement: uintptr(unsafe.Pointer(C.msgtrace_sigaction))},
		{Name: "signal", Replacement: uintptr(unsafe.Pointer(C.msgtrace_signal))},
		{Name: "sysv_signal", Replacement: uintptr(unsafe.Pointer(C.msgtrace_sysv_signal)),
			Publish: publish((*unsafe.Pointer)(unsafe.Pointer(&C.msgtrace_orig_sysv_signal)))},
		{Name: "__sysv_signal", Replacement: uintptr(unsafe.Pointer(C.msgtrace_sysv_signal)),
			Publish: publish((*unsafe.Pointer)(unsafe.Pointer(&C.msgtrace_orig_sysv_signal)))},
	}
}

var exitHook atomic.Pointer[func()]

// SetExitHook sets a function to run when this process calls _exit or _Exit directly (exit
// runs atexit handlers instead). A child forked from this process does not run it.
func SetExitHook(f func()) {
	exitHook.Store(&f)
	C.msgtrace_exit_pid = C.int(os.Getpid())
}

// msgtraceBeforeExit is called by the _exit and _Exit wrappers.
//
//export msgtraceBeforeExit
func msgtraceBeforeExit() {
	if f := exitHook.Load(); f != nil {
		(*f)()
	}
}
