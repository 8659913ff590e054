/*
 * libmsgtrace-preload.so: what to preload (LD_PRELOAD) for the cheapest start. A process whose
 * loaded objects do not import the Objective-C runtime's dispatch (a shell, timeout, a build
 * tool, /bin/true) pays for loading this small library and one pass over its objects'
 * relocations, nothing else. Where there is something to trace, it loads libmsgtrace.so (the
 * Go library next to it, whose own constructor then stays out of the way) and starts it
 * before main: dlopen returns once the Go runtime's initializer has started its thread, and
 * msgtraceLoad, called after dlopen released the dynamic linker's lock, waits for the runtime
 * and installs.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../objc_imports.h"

/* Tells libmsgtrace.so's constructor that this loader starts it. */
__attribute__((visibility("default"))) int msgtrace_preload_loader = 1;

static pid_t loaded_pid;
static void (*go_exit)(void), (*child_exit)(void);

/* At exit: the process that loaded the library converts its stream (Go); a child forked
 * without exec closes its own (C; the Go runtime did not survive the fork). */
static void at_exit(void) {
	if (getpid() == loaded_pid) {
		if (go_exit)
			go_exit();
	} else if (child_exit) {
		child_exit();
	}
}

/* gcc's runtime: every object's module constructors call __objc_exec_class, and the preloaded
 * objects come first in the global scope, so they call this one (libmsgtrace.so, loaded
 * RTLD_LOCAL, is not in that scope): those of objects initialized before this loader go straight
 * to the runtime's, the later ones through libmsgtrace.so, which instruments a module's methods
 * before the runtime registers it and sends its +load. */
static void (*exec_class_next)(void *);
static void (*exec_class_hook)(void *, void (*)(void *));

static void exec_class(void *module) {
	void (*next)(void *) = __atomic_load_n(&exec_class_next, __ATOMIC_ACQUIRE);
	if (!next) {
		*(void **)&next = dlsym(RTLD_NEXT, "__objc_exec_class");
		if (!next || next == exec_class) {
			fprintf(stderr, "msgtrace: __objc_exec_class: the Objective-C runtime's is not found after ours\n");
			abort();
		}
		__atomic_store_n(&exec_class_next, next, __ATOMIC_RELEASE);
	}
	void (*hook)(void *, void (*)(void *)) = __atomic_load_n(&exec_class_hook, __ATOMIC_ACQUIRE);
	if (hook)
		hook(module, next);
	else
		next(module);
}

__attribute__((visibility("default"), alias("exec_class"))) void __objc_exec_class(void *module);
/* The same function, by a name libmsgtrace.so looks for to know that the objects bind to it. */
__attribute__((visibility("default"), alias("exec_class"))) void msgtrace_loader_exec_class(void *module);

static void loader_ctor(void);

/* msgtrace_mark (msgtrace.h) for programs that look it up (dlsym(RTLD_DEFAULT, ...)):
 * libmsgtrace.so is loaded RTLD_LOCAL, so its own is not in the global scope. A mark made
 * before it is loaded, or where there is nothing to trace, goes nowhere. */
static void (*mark_fn)(const char *);
__attribute__((visibility("default"))) void msgtrace_mark(const char *name) {
	void (*f)(const char *) = __atomic_load_n(&mark_fn, __ATOMIC_ACQUIRE);
	if (f)
		f(name);
}

__attribute__((constructor)) static void loader_ctor(void) {
	struct timespec ts; /* the "library loaded" launch mark: when our code first ran */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	if (!msgtrace_something_to_trace())
		return;
	Dl_info self;
	char path[PATH_MAX];
	const char *slash;
	if (!dladdr((const void *)loader_ctor, &self) || !self.dli_fname || !(slash = strrchr(self.dli_fname, '/')) ||
	    (size_t)(slash - self.dli_fname) + sizeof "/libmsgtrace.so" > sizeof path) {
		fprintf(stderr, "msgtrace: cannot tell where libmsgtrace-preload.so is; tracing is off\n");
		return;
	}
	memcpy(path, self.dli_fname, (size_t)(slash - self.dli_fname));
	strcpy(path + (slash - self.dli_fname), "/libmsgtrace.so");
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "msgtrace: %s; tracing is off\n", dlerror());
		return;
	}
	int (*load)(void) = (int (*)(void))dlsym(h, "msgtraceLoad");
	go_exit = (void (*)(void))dlsym(h, "msgtraceExit");
	child_exit = (void (*)(void))dlsym(h, "msgtrace_stream_exit_child");
	void (*hook)(void *, void (*)(void *)) = (void (*)(void *, void (*)(void *)))dlsym(h, "msgtrace_exec_class");
	if (!load || !go_exit || !child_exit || !hook) {
		fprintf(stderr, "msgtrace: %s is not the msgtrace library; tracing is off\n", path);
		return;
	}
	/* modules go through libmsgtrace.so from now on: it hands them to the runtime alone until
	 * it watches them */
	__atomic_store_n(&exec_class_hook, hook, __ATOMIC_RELEASE);
	void (*loaded)(uint64_t) = (void (*)(uint64_t))dlsym(h, "msgtrace_launch_loaded");
	if (loaded)
		loaded((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec);
	void (*mark)(const char *) = (void (*)(const char *))dlsym(h, "msgtrace_mark");
	if (mark != msgtrace_mark)
		__atomic_store_n(&mark_fn, mark, __ATOMIC_RELEASE);
	if (load() == 0) {
		loaded_pid = getpid();
		atexit(at_exit);
	}
}
