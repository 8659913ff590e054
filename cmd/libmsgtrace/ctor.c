/* Load-time start of the shared library: a constructor runs after the dynamic linker
 * relocated every object and before the program's main. It calls into Go, which waits for the
 * Go runtime (started on its own thread by the library's initializer, which runs before this
 * one) to finish initializing, so the hooks are in place before main's first message. A Go init
 * function alone would race with main: it runs on the runtime's thread, concurrently with the
 * program, and may finish after main has sent its first messages.
 *
 * When this code is part of the main program — the static archive linked into a test host, or
 * this package built as an ordinary Go program, where the Go runtime starts only after every
 * constructor — nothing happens here: the host calls msgtrace_start(), which installs and
 * registers the exit handler then.
 * Depends on: rt_launch.c (the library-loaded mark), drain_api.c (a child's stream closed); the
 * Go side (main.go). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

extern int msgtraceLoad(void);
extern void msgtraceExit(void);

static void msgtrace_ctor(void);

#if defined(__APPLE__)
/* The main program is the image whose header says MH_EXECUTE (filetype: the header's fourth
 * 32-bit word). Not dyld's image 0: dyld4 moves inserted libraries ahead of the main executable
 * in its list (RuntimeState::loadInsertedLibraries), so with DYLD_INSERT_LIBRARIES image 0 is
 * the first inserted library. A framework or an XCTest bundle is not the main program. */
static int in_main_program(void) {
	Dl_info info;
	return dladdr((const void *)msgtrace_ctor, &info) && info.dli_fbase &&
	       ((const uint32_t *)info.dli_fbase)[3] == 2 /* MH_EXECUTE */;
}
#else
#include <link.h>
static int holds_ctor(struct dl_phdr_info *info, size_t size, void *data) {
	(void)size, (void)data;
	uintptr_t a = (uintptr_t)msgtrace_ctor;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *p = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + p->p_vaddr;
		if (p->p_type == PT_LOAD && a >= lo && a < lo + p->p_memsz)
			return 2;
	}
	return 1; /* the first object reported is the main program: stop there */
}
static int in_main_program(void) { return dl_iterate_phdr(holds_ctor, NULL) == 2; }
#endif

static pid_t loaded_pid;

extern void msgtrace_stream_exit_child(void);

/* Exit handlers also run in a child that was forked and calls exit: the Go runtime did not
 * survive the fork there, so the child's stream is closed by the C side alone (it stays a
 * stream file: converting it is Go's work, done by machobind run or machobind trace). */
static void msgtrace_at_exit(void) {
	if (getpid() == loaded_pid)
		msgtraceExit();
	else
		msgtrace_stream_exit_child();
}

/* Registers the exit handler once: from the constructor, or from msgtrace_start() when the
 * library is part of the main program and no constructor installed it. */
void msgtrace_write_at_exit(void) {
	if (__atomic_exchange_n(&loaded_pid, getpid(), __ATOMIC_SEQ_CST) == 0)
		atexit(msgtrace_at_exit);
}

#if defined(__APPLE__)
static int something_to_trace(void) { return 1; } /* every macOS process loads libobjc */
#else
#include "objc_imports.h"
/* The Go part (its runtime start, rebinding every object) is started only where there is
 * something to trace: a loaded object imports the Objective-C runtime's dispatch. */
static int something_to_trace(void) { return msgtrace_something_to_trace(); }
#endif

extern void msgtrace_launch_loaded(uint64_t loaded_mono_ns);

__attribute__((constructor)) static void msgtrace_ctor(void) {
	/* the "library loaded" launch mark: when our code first ran */
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	/* loaded by the preload loader (libmsgtrace-preload.so), which starts us itself */
	if (dlsym(RTLD_DEFAULT, "msgtrace_preload_loader"))
		return;
	if (in_main_program() || !something_to_trace())
		return;
	msgtrace_launch_loaded((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec);
	if (msgtraceLoad() == 0)
		msgtrace_write_at_exit();
}

#if defined(__linux__) && defined(__GLIBC__)
#include <errno.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/syscall.h>

/* What the main thread's stack may be taken to span below its top end at most. */
#define MAIN_STACK_MAX (8ul << 20)

extern void *__libc_stack_end;

/* The Go runtime asks for the stack of every thread that first calls into Go (the bounds of its
 * system stack: runtime/cgo's x_cgo_getstackbound calls pthread_getattr_np). For the main thread
 * glibc answers by reading and parsing /proc/self/maps: ~670,000 instructions and the kernel's
 * rendering of every mapping (hundreds in a gnustep-base process), on the main thread before main
 * (msgtraceLoad's first call into Go). This library is linked with --wrap=pthread_getattr_np, so
 * that its own calls (runtime/cgo's) come here and the program's still go to glibc: the main
 * thread's stack is answered from what the C library already knows, its top as the program's
 * start left it (__libc_stack_end: argc's place, below the arguments' and the environment's
 * strings) and the stack limit (at most MAIN_STACK_MAX) below it, as glibc does but for its look
 * at the mapping underneath (the kernel keeps the limit's worth below the stack free). Another
 * thread, or a main thread running on a stack of its own (a coroutine's), goes to glibc's, looked
 * up by name (not __real_pthread_getattr_np: the static archive, linked into a host without
 * --wrap, must not need it). */
__attribute__((visibility("hidden"))) int __wrap_pthread_getattr_np(pthread_t thread, pthread_attr_t *attr) {
	uintptr_t hi = (uintptr_t)__libc_stack_end, sp = (uintptr_t)__builtin_frame_address(0);
	struct rlimit rl;
	if (hi && sp < hi && pthread_equal(thread, pthread_self()) && syscall(SYS_gettid) == getpid() &&
	    getrlimit(RLIMIT_STACK, &rl) == 0) {
		uintptr_t size = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > MAIN_STACK_MAX ? MAIN_STACK_MAX : (uintptr_t)rl.rlim_cur;
		uintptr_t lo = (hi - size + 4095) & ~(uintptr_t)4095;
		if (size <= hi && sp > lo && pthread_attr_init(attr) == 0 && pthread_attr_setstack(attr, (void *)lo, hi - lo) == 0)
			return 0;
	}
	static int (*real)(pthread_t, pthread_attr_t *);
	int (*f)(pthread_t, pthread_attr_t *) = __atomic_load_n(&real, __ATOMIC_ACQUIRE);
	if (!f) {
		*(void **)&f = dlsym(RTLD_DEFAULT, "pthread_getattr_np");
		if (!f || f == __wrap_pthread_getattr_np)
			return ENOSYS; /* the caller then takes the stack as unknown */
		__atomic_store_n(&real, f, __ATOMIC_RELEASE);
	}
	return f(thread, attr);
}
#endif
