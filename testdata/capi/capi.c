/*
 * The C API of libmsgtrace from a program linked against it (as a test host would): start
 * paused, resume, flush twice while another thread keeps sending, filters, errors. Prints
 * what it sent; the Go test compares that with the flushed files. Built with -DMSGTRACE_STATIC
 * it is linked with libmsgtrace.a, where nothing starts before msgtrace_start() and the sends
 * to trace are the program's own.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "msgtrace.h"
#include "tobjc.h"

static SEL sel_tick;
static atomic_int stop;
static long thread_sent;

static long tick(id self, SEL cmd) {
	(void)self, (void)cmd;
	static _Thread_local long n;
	return ++n;
}

/* what the program's own pointer slot for objc_msgSend holds now (PIE: &objc_msgSend is read
 * from the GOT, a slot the library rebinds) */
__attribute__((noinline)) static void *msgsend_slot(void) {
	void *volatile p = (void *)&objc_msgSend;
	return p;
}

#define SEND_TICK(obj) ((long (*)(id, SEL))objc_msgSend)((obj), sel_tick)

static void *sender(void *arg) {
	id obj = arg;
	pthread_setname_np(pthread_self(), "sender");
	while (!atomic_load(&stop) || thread_sent < 1000) {
		SEND_TICK(obj);
		if (++thread_sent % 100 == 0)
			usleep(20); /* keeps sending through both flushes without filling its buffer */
	}
	return NULL;
}

int main(void) {
	Class cls = objc_allocateClassPair(NULL, "Counter", 0);
	sel_tick = sel_registerName("tick");
	class_addMethod(cls, sel_tick, (IMP)tick, "l@:");
	objc_registerClassPair(cls);
	id a = class_createInstance(cls, 0), b = class_createInstance(cls, 0);

	struct msgtrace_counters c;
#ifdef MSGTRACE_STATIC
	if (msgtrace_start() != 0) {
		printf("start: %s\n", msgtrace_last_error());
		return 1;
	}
	msgtrace_pause();
#endif
	for (int i = 0; i < 100; i++) /* paused (MSGTRACE_START=paused): not recorded */
		SEND_TICK(a);
	msgtrace_get_counters(&c);
	printf("paused recorded %llu\n", (unsigned long long)c.recorded);
	/* paused long enough, the slot holds the original again; resumed, the interposer */
	usleep(300000);
	printf("parked %d\n", msgsend_slot() == dlsym(RTLD_DEFAULT, "objc_msgSend"));
	for (int i = 0; i < 100; i++) /* through the original: not recorded either */
		SEND_TICK(a);
	/* a library loaded while parked: its slot parked as it loads, bound again at the resume */
	void *plugin = dlopen("libtplugin.so", RTLD_NOW);
	long (*plugin_run)(void) = plugin ? (long (*)(void))dlsym(plugin, "plugin_run") : NULL;
	if (!plugin_run) {
		printf("dlopen: %s\n", dlerror());
		return 1;
	}

	msgtrace_resume();
	printf("bound %d\n", msgsend_slot() != dlsym(RTLD_DEFAULT, "objc_msgSend"));
	pthread_t th;
	pthread_create(&th, NULL, sender, b);
	for (int i = 0; i < 1000; i++)
		SEND_TICK(a);
	printf("flush1 %d\n", msgtrace_flush("flush1.json"));
	for (int i = 0; i < 1000; i++)
		SEND_TICK(a);
	atomic_store(&stop, 1);
	pthread_join(th, NULL);
	msgtrace_pause();
	for (int i = 0; i < 100; i++)
		SEND_TICK(a);
	printf("flush2 %d\n", msgtrace_flush("flush2.json"));
	msgtrace_get_counters(&c);
	printf("sent %ld\n", 2000 + thread_sent);
	printf("recorded %llu flushed %llu threads %llu dropped %llu\n", (unsigned long long)c.recorded,
	       (unsigned long long)c.flushed, (unsigned long long)c.threads, (unsigned long long)c.dropped);

	printf("bad pattern %d", msgtrace_set_filters("UIView", NULL, 0, -1));
	printf(" [%s]\n", msgtrace_last_error());
	printf("bad path %d", msgtrace_flush("missing/dir/x.json"));
	printf(" [%s]\n", msgtrace_last_error());
	printf("filters %d", msgtrace_set_filters("-[Counter tick]", "", 0, 0));
	printf(" [%s]\n", msgtrace_last_error());

	msgtrace_set_filters(NULL, NULL, 0, -1); /* the exit write: every call */
	msgtrace_resume(); /* not flushed: the exit handler writes these to MSGTRACE_OUT */
	for (int i = 0; i < 10; i++)
		SEND_TICK(a);
	printf("plugin %ld\n", plugin_run());
	return 0;
}
