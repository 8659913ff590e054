package msgtrace

/*
#include "rt_env.h"
#include "waits.h"
*/
import "C"

import (
	"sync/atomic"
	"unsafe"

	"github.com/msgtrace/msgtrace/machobind"
)

// waitsOn is whether Install rebinds the blocking primitives (SetWaits).
var waitsOn atomic.Bool

func init() { waitsOn.Store(C.msgtrace_waits_on != 0) }

// SetWaits turns the recording of contended waits on or off (MSGTRACE_WAITS): an Install after
// SetWaits(false) leaves the primitives' slots alone, and replacements already in place only
// forward.
func SetWaits(on bool) {
	waitsOn.Store(on)
	v := C.uint32_t(0)
	if on {
		v = 1
	}
	C.msgtrace_waits_on = v
}

// envWaits is how the C reads MSGTRACE_WAITS (rt_env.h): 1 on, 0 off, -1 a value Go refuses.
func envWaits() int { return int(C.mt_env_waits()) }

// Waits reports whether contended waits are recorded.
func Waits() bool { return waitsOn.Load() }

// WaitCounters are the waits and releases recorded so far (waits.c).
type WaitCounters struct {
	Waits    uint64 // contended waits recorded
	Releases uint64 // releases recorded (an unlock, signal or post with waiters)
}

// ReadWaitCounters returns the waits and releases recorded so far.
func ReadWaitCounters() WaitCounters {
	var c C.struct_mt_wait_counters
	C.msgtrace_wait_counters(&c)
	return WaitCounters{uint64(c.waits), uint64(c.releases)}
}

// waitRebinding is one blocking primitive's replacement and the C variable holding its
// original.
func waitRebinding(name string, repl unsafe.Pointer, orig *unsafe.Pointer) machobind.Rebinding {
	return machobind.Rebinding{Name: name, Replacement: uintptr(repl),
		Publish: func(o uintptr) { atomicStorePointer(orig, o) }}
}

func atomicStorePointer(p *unsafe.Pointer, v uintptr) {
	atomic.StorePointer(p, *(*unsafe.Pointer)(unsafe.Pointer(&v)))
}

// WaitRebindings are the rebindings that record contended waits (waits.c): the pthread mutex,
// rwlock, condition and semaphore calls, objc_sync_enter and objc_sync_exit, and Apple's
// os_unfair_lock, dispatch_sync, dispatch_semaphore and dispatch_group waits (rebound where an
// image imports them, Linux programs using swift-corelibs-libdispatch included). Nil when
// SetWaits(false).
func WaitRebindings() []machobind.Rebinding {
	if !Waits() {
		return nil
	}
	p := func(v *unsafe.Pointer) *unsafe.Pointer { return v }
	return []machobind.Rebinding{
		waitRebinding("pthread_mutex_lock", C.msgtrace_w_pthread_mutex_lock, p(&C.msgtrace_orig_w_pthread_mutex_lock)),
		waitRebinding("pthread_mutex_unlock", C.msgtrace_w_pthread_mutex_unlock, p(&C.msgtrace_orig_w_pthread_mutex_unlock)),
		waitRebinding("pthread_rwlock_rdlock", C.msgtrace_w_pthread_rwlock_rdlock, p(&C.msgtrace_orig_w_pthread_rwlock_rdlock)),
		waitRebinding("pthread_rwlock_wrlock", C.msgtrace_w_pthread_rwlock_wrlock, p(&C.msgtrace_orig_w_pthread_rwlock_wrlock)),
		waitRebinding("pthread_rwlock_unlock", C.msgtrace_w_pthread_rwlock_unlock, p(&C.msgtrace_orig_w_pthread_rwlock_unlock)),
		waitRebinding("pthread_cond_wait", C.msgtrace_w_pthread_cond_wait, p(&C.msgtrace_orig_w_pthread_cond_wait)),
		waitRebinding("pthread_cond_timedwait", C.msgtrace_w_pthread_cond_timedwait, p(&C.msgtrace_orig_w_pthread_cond_timedwait)),
		waitRebinding("pthread_cond_signal", C.msgtrace_w_pthread_cond_signal, p(&C.msgtrace_orig_w_pthread_cond_signal)),
		waitRebinding("pthread_cond_broadcast", C.msgtrace_w_pthread_cond_broadcast, p(&C.msgtrace_orig_w_pthread_cond_broadcast)),
		waitRebinding("sem_wait", C.msgtrace_w_sem_wait, p(&C.msgtrace_orig_w_sem_wait)),
		waitRebinding("sem_timedwait", C.msgtrace_w_sem_timedwait, p(&C.msgtrace_orig_w_sem_timedwait)),
		waitRebinding("sem_post", C.msgtrace_w_sem_post, p(&C.msgtrace_orig_w_sem_post)),
		waitRebinding("objc_sync_enter", C.msgtrace_w_objc_sync_enter, p(&C.msgtrace_orig_w_objc_sync_enter)),
		waitRebinding("objc_sync_exit", C.msgtrace_w_objc_sync_exit, p(&C.msgtrace_orig_w_objc_sync_exit)),
		waitRebinding("os_unfair_lock_lock", C.msgtrace_w_os_unfair_lock_lock, p(&C.msgtrace_orig_w_os_unfair_lock_lock)),
		waitRebinding("os_unfair_lock_unlock", C.msgtrace_w_os_unfair_lock_unlock, p(&C.msgtrace_orig_w_os_unfair_lock_unlock)),
		waitRebinding("dispatch_sync", C.msgtrace_w_dispatch_sync, p(&C.msgtrace_orig_w_dispatch_sync)),
		waitRebinding("dispatch_sync_f", C.msgtrace_w_dispatch_sync_f, p(&C.msgtrace_orig_w_dispatch_sync_f)),
		waitRebinding("dispatch_semaphore_wait", C.msgtrace_w_dispatch_semaphore_wait, p(&C.msgtrace_orig_w_dispatch_semaphore_wait)),
		waitRebinding("dispatch_semaphore_signal", C.msgtrace_w_dispatch_semaphore_signal, p(&C.msgtrace_orig_w_dispatch_semaphore_signal)),
		waitRebinding("dispatch_group_wait", C.msgtrace_w_dispatch_group_wait, p(&C.msgtrace_orig_w_dispatch_group_wait)),
	}
}
