/*
 * libmsgtrace-preload.so: what to preload (LD_PRELOAD) for the cheapest start. A process whose
 * loaded objects do not import the Objective-C runtime's dispatch (a shell, timeout, a build
 * tool, /bin/true) pays for loading this small library and one pass over its objects'
 * relocations, nothing else. Where there is something to trace, it loads libmsgtrace.so (the
 * Go library next to it, whose own constructor then stays out of the way) and starts it
 * before main: dlopen returns once the Go runtime's initializer has started its thread, and
 * msgtraceLoad, called after dlopen released the dynamic linker's lock, waits for the runtime
 * and installs. Where a library registers Objective-C modules before our constructor runs
 * (gnustep-base), the loading and msgtracePrepare are started then, on a thread of the loader's
 * (start_early), and the constructor waits for it and installs what is left.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../../rt_env.h"
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

static void start_early(void);

static void exec_class(void *module) {
	start_early();
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

/* GNUstep's libobjc2: its modules (the v2 ABI's) come through __objc_load, the same way: the
 * runtime's own first, from its constructor, then every library's and the program's; the hook
 * is libmsgtrace.so's msgtrace_objc_load. */
static void (*objc_load_next)(void *);
static void (*objc_load_hook)(void *, void (*)(void *));
/* Modules libobjc2 has loaded through here: it makes its tables in the first one, so
 * libmsgtrace.so looks no class up before one came back (its own hook sees only the later). */
__attribute__((visibility("default"))) unsigned long msgtrace_loader_objc_loads;

static void objc_load(void *init) {
	start_early();
	void (*next)(void *) = __atomic_load_n(&objc_load_next, __ATOMIC_ACQUIRE);
	if (!next) {
		*(void **)&next = dlsym(RTLD_NEXT, "__objc_load");
		if (!next || next == objc_load) {
			fprintf(stderr, "msgtrace: __objc_load: the Objective-C runtime's is not found after ours\n");
			abort();
		}
		__atomic_store_n(&objc_load_next, next, __ATOMIC_RELEASE);
	}
	void (*hook)(void *, void (*)(void *)) = __atomic_load_n(&objc_load_hook, __ATOMIC_ACQUIRE);
	if (hook)
		hook(init, next);
	else
		next(init);
	__atomic_fetch_add(&msgtrace_loader_objc_loads, 1, __ATOMIC_RELEASE);
}

__attribute__((visibility("default"), alias("objc_load"))) void __objc_load(void *init);
__attribute__((visibility("default"), alias("objc_load"))) void msgtrace_loader_objc_load(void *init);

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

static void loader_ctor(void);

/* What open_library found in libmsgtrace.so. */
static int (*go_load)(void);
static void (*go_prepare)(void);
static void (*exec_hook)(void *, void (*)(void *));
static void (*load_hook)(void *, void (*)(void *)); /* libobjc2's modules (NULL: an older library) */
static void (*go_loaded)(uint64_t);
static int (*early_methods)(void);
static void (*early_prefault)(void);

/* Loads libmsgtrace.so (the Go runtime starts on a thread of its own, as dlopen runs its
 * initializer) and looks up what the loader calls; started is when our code first ran (the
 * "library loaded" mark). 0, or -1 (said on stderr: tracing is off). */
/* libmsgtrace.so's path (next to this loader) in path; 0, or -1 when it cannot be told. */
static int library_path(char path[PATH_MAX]) {
	Dl_info self;
	const char *slash;
	if (!dladdr((const void *)loader_ctor, &self) || !self.dli_fname || !(slash = strrchr(self.dli_fname, '/')) ||
	    (size_t)(slash - self.dli_fname) + sizeof "/libmsgtrace.so" > PATH_MAX)
		return -1;
	memcpy(path, self.dli_fname, (size_t)(slash - self.dli_fname));
	strcpy(path + (slash - self.dli_fname), "/libmsgtrace.so");
	return 0;
}

static int open_library(const struct timespec *started) {
	char path[PATH_MAX];
	if (library_path(path) != 0) {
		fprintf(stderr, "msgtrace: cannot tell where libmsgtrace-preload.so is; tracing is off\n");
		return -1;
	}
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "msgtrace: %s; tracing is off\n", dlerror());
		return -1;
	}
	go_load = (int (*)(void))dlsym(h, "msgtraceLoad");
	go_prepare = (void (*)(void))dlsym(h, "msgtracePrepare");
	go_exit = (void (*)(void))dlsym(h, "msgtraceExit");
	child_exit = (void (*)(void))dlsym(h, "msgtrace_stream_exit_child");
	exec_hook = (void (*)(void *, void (*)(void *)))dlsym(h, "msgtrace_exec_class");
	if (!go_load || !go_prepare || !go_exit || !child_exit || !exec_hook) {
		fprintf(stderr, "msgtrace: %s is not the msgtrace library; tracing is off\n", path);
		return -1;
	}
	load_hook = (void (*)(void *, void (*)(void *)))dlsym(h, "msgtrace_objc_load");
	early_methods = (int (*)(void))dlsym(h, "msgtrace_early_methods");
	early_prefault = (void (*)(void))dlsym(h, "msgtrace_early_prefault");
	go_loaded = (void (*)(uint64_t))dlsym(h, "msgtrace_launch_loaded");
	if (go_loaded)
		go_loaded((uint64_t)started->tv_sec * 1000000000ull + (uint64_t)started->tv_nsec);
	void (*mark)(const char *) = (void (*)(const char *))dlsym(h, "msgtrace_mark");
	if (mark != msgtrace_mark)
		__atomic_store_n(&mark_fn, mark, __ATOMIC_RELEASE);
	return 0;
}

/* The early start. Libraries the program links (libobjc, gnustep-base: every object the preloaded
 * one does not depend on and that is not the program) are initialized before this loader, and
 * those with Objective-C modules register them through __objc_exec_class, ours. The first such
 * call, long before our constructor (gnustep-base's initialization is ~10 ms of one core),
 * starts a thread that loads libmsgtrace.so and prepares it (msgtracePrepare: the Go runtime,
 * the configuration, the pool, the drain and its clock), on the other core while the
 * libraries' initialization goes on. It changes nothing the program sees: the interposers and
 * the module hook are put in place by the constructor, as without it, which waits for the
 * thread first. A program none of whose libraries register modules before us starts it all in
 * the constructor.
 * With MSGTRACE_METHODS=all the libraries' classes are traced too, their +load methods among
 * them, which the runtime sends as each module registers: there the first module loads
 * libmsgtrace.so on the calling thread (~0.7 ms; its Go runtime starts on a thread of its own,
 * and nothing here waits for it), which starts recording and instruments every module from
 * then on in C (msgtrace_early_methods), and the thread only prepares. */
enum { EARLY_NONE, EARLY_STARTED, EARLY_CLOSED };
static int early_state;
static pthread_t early_thread;
static int early_thread_made;
static struct timespec early_ts;
static int early_status = -1;
static int early_opened; /* the library was loaded by start_early on the calling thread */
static int early_installing; /* and it instruments the modules from then on (msgtrace_early_methods) */

static void *early_main(void *arg) {
	(void)arg;
	if (!early_opened)
		early_status = open_library(&early_ts);
	else if (early_installing && early_prefault) /* the pages the early install writes on the thread registering the modules */
		early_prefault();
	if (early_status == 0)
		go_prepare();
	return NULL;
}

/* The earlier start of MSGTRACE_METHODS=all. The libraries initialized before libobjc (the
 * C library's dependants: ICU, GnuTLS, libstdc++, ... ~0.7 ms for gnustep-base) register
 * their destructors through __cxa_atexit, ours first in the scope: the first such call starts
 * a thread (open_main) that loads libmsgtrace.so, so that its relocations and its runtime's
 * start overlap the other libraries' initializers instead of taking ~0.5 ms of the main
 * thread at the first module. The first module still loads it itself (open_library: dlopen
 * again, which finds it loaded, or waits for the dynamic linker's lock the thread holds, or,
 * when the main thread holds that lock itself, a library's initializer inside a dlopen, loads
 * it: the thread's dlopen then finds it loaded) and nothing waits for the thread: no order of
 * the two can deadlock. A program whose libraries make no such call loads it at the first
 * module, as before; one with nothing to trace loads nothing. The early recording and
 * instrumenting still start at the first module, on the thread registering it. */
enum { OPEN_NONE, OPEN_STARTING, OPEN_STARTED, OPEN_CLOSED };
static int open_state;
static struct timespec open_ts; /* when the thread was started: our code's first run */
static int open_loaded;         /* the thread's dlopen returned the library */

static void *open_main(void *arg) {
	(void)arg;
	char path[PATH_MAX];
	if (msgtrace_something_to_trace() && library_path(path) == 0 && dlopen(path, RTLD_NOW | RTLD_LOCAL))
		__atomic_store_n(&open_loaded, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void start_open(void) {
	int none = OPEN_NONE;
	if (!__atomic_compare_exchange_n(&open_state, &none, OPEN_STARTING, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return;
	int made = 0;
	if (mt_env_methods_all()) {
		clock_gettime(CLOCK_MONOTONIC, &open_ts);
		pthread_attr_t attr;
		pthread_t t;
		if (pthread_attr_init(&attr) == 0) {
			pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
			made = pthread_create(&t, &attr, open_main, NULL) == 0;
			pthread_attr_destroy(&attr);
		}
	}
	__atomic_store_n(&open_state, made ? OPEN_STARTED : OPEN_CLOSED, __ATOMIC_RELEASE);
}

/* Ends the earlier start's window: 1 when its thread was started (when, in *ts), else 0. */
static int close_open(struct timespec *ts) {
	int st = __atomic_exchange_n(&open_state, OPEN_CLOSED, __ATOMIC_ACQ_REL);
	while (st == OPEN_STARTING) { /* another thread is starting it: moments */
		sched_yield();
		st = __atomic_exchange_n(&open_state, OPEN_CLOSED, __ATOMIC_ACQ_REL);
	}
	if (st != OPEN_STARTED)
		return 0;
	*ts = open_ts;
	return 1;
}

static int (*cxa_atexit_next)(void (*)(void *), void *, void *);

__attribute__((visibility("default"))) int __cxa_atexit(void (*fn)(void *), void *arg, void *dso) {
	int (*next)(void (*)(void *), void *, void *) = __atomic_load_n(&cxa_atexit_next, __ATOMIC_ACQUIRE);
	if (!next) {
		*(void **)&next = dlsym(RTLD_NEXT, "__cxa_atexit");
		if (!next) {
			fprintf(stderr, "msgtrace: __cxa_atexit: the C library's is not found after ours\n");
			abort();
		}
		__atomic_store_n(&cxa_atexit_next, next, __ATOMIC_RELEASE);
	}
	if (__atomic_load_n(&open_state, __ATOMIC_RELAXED) == OPEN_NONE)
		start_open();
	return next(fn, arg, dso);
}

static void start_early(void) {
	if (__atomic_load_n(&early_state, __ATOMIC_ACQUIRE) != EARLY_NONE)
		return;
	int none = EARLY_NONE;
	if (!__atomic_compare_exchange_n(&early_state, &none, EARLY_STARTED, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return;
	clock_gettime(CLOCK_MONOTONIC, &early_ts);
	if (mt_env_methods_all()) {
		int started = close_open(&early_ts), loaded = __atomic_load_n(&open_loaded, __ATOMIC_ACQUIRE);
		early_status = open_library(&early_ts);
		if (started && early_status == 0 && getenv("MSGTRACE_VERBOSE") && *getenv("MSGTRACE_VERBOSE"))
			fprintf(stderr, "msgtrace: loading started on the preload loader's thread as the libraries initialized (%s by their first module)\n",
				loaded ? "done" : "not done");
		early_opened = 1;
		if (early_status != 0)
			return; /* said on stderr: tracing is off */
		/* this module and the next go through libmsgtrace.so, which instruments them */
		if (early_methods && early_methods()) {
			early_installing = 1;
			__atomic_store_n(&exec_class_hook, exec_hook, __ATOMIC_RELEASE);
			__atomic_store_n(&objc_load_hook, load_hook, __ATOMIC_RELEASE);
		}
	}
	early_thread_made = pthread_create(&early_thread, NULL, early_main, NULL) == 0;
}

__attribute__((constructor)) static void loader_ctor(void) {
	struct timespec ts; /* the "library loaded" launch mark: when our code first ran */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	int none = EARLY_NONE;
	int status;
	if (__atomic_compare_exchange_n(&early_state, &none, EARLY_CLOSED, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		close_open(&ts); /* no module came: if open_main ran, our code first ran then */
		if (!msgtrace_something_to_trace())
			return;
		status = open_library(&ts);
	} else {
		if (early_thread_made)
			pthread_join(early_thread, NULL);
		__atomic_store_n(&early_state, EARLY_CLOSED, __ATOMIC_RELEASE);
		status = early_status;
		if (!early_thread_made && !early_opened) /* the thread could not be started */
			status = open_library(&early_ts);
	}
	if (status != 0)
		return;
	/* modules go through libmsgtrace.so from now on: it hands them to the runtime alone until
	 * it watches them */
	__atomic_store_n(&exec_class_hook, exec_hook, __ATOMIC_RELEASE);
	__atomic_store_n(&objc_load_hook, load_hook, __ATOMIC_RELEASE);
	if (go_load() == 0) {
		loaded_pid = getpid();
		atexit(at_exit);
	}
}
