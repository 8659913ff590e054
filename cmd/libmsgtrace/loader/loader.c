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
#include <string.h>
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

static void loader_ctor(void);

__attribute__((constructor)) static void loader_ctor(void) {
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
	if (!load || !go_exit || !child_exit) {
		fprintf(stderr, "msgtrace: %s is not the msgtrace library; tracing is off\n", path);
		return;
	}
	if (load() == 0) {
		loaded_pid = getpid();
		atexit(at_exit);
	}
}
