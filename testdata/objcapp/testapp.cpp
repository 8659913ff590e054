/*
 * The end-to-end test app: written the way compiled Objective-C is, every message goes through
 * objc_msgSend / objc_msgSendSuper2 (and objc_msgSend_stret for a large struct on x86-64)
 * called through the program's imported slots. Its output does not depend on timing, so it
 * must be the same with and without the tracer preloaded.
 *
 * Main thread: +[App run] sends, in order: -[Worker fib:] 12 (465 sends, 12 deep),
 * -[Worker countdown:] 5 (6 nested), -[Derived describe] (-> super -[Base describe] ->
 * [self name]), +[Sleeper nap:] 200 (sleeps 200 ms), -[Catcher run] (-> -[Thrower boom]
 * throws, Catcher catches), three threads worker-1..3 each -[Worker fib:] 10 (177 sends),
 * -[Worker scale:by:] and -[Worker rect]. `testapp dlopen` then loads libtplugin.so by bare
 * name (found through the app's RUNPATH $ORIGIN) and calls plugin_run: -[Plugin work].
 *
 * `testapp small` instead sends to small objects, as GNUstep's libobjc2 and gnustep-base make
 * them (tagged receivers with no isa, the class registered for their low bits): SmallInt (tag
 * 1), TinyString (tag 4) and SmallDouble (tag 6). +[App small] sends +[SmallInt with:],
 * -[SmallInt plus:] (-> -[SmallInt intValue] on both), -[SmallDouble doubleValue] (a double:
 * objc_msgSend_fpret on x86-64), -[TinyString length] and -[TinyString bounds] (a 32-byte struct:
 * objc_msgSend_stret on x86-64, d0-d3 on arm64) SMALL_ROUNDS times, then three threads small-1..3
 * each +[App small].
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdexcept>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tobjc.h"

struct Rect {
	double x, y, w, h;
};

static SEL s_fib, s_countdown, s_describe, s_name, s_nap, s_run, s_boom, s_scale, s_rect, s_new;
static Class Base, Derived, Worker, Sleeper, Catcher, Thrower, App;

// Typed views of objc_msgSend, as the compiler emits them.
#define SEND(ret, ...) ((ret(*)(id, SEL, ##__VA_ARGS__))objc_msgSend)
#define SEND_SUPER(ret, ...) ((ret(*)(struct objc_super *, SEL, ##__VA_ARGS__))objc_msgSendSuper2)

static id make(Class c) { return SEND(id)((id)c, s_new); }

static id imp_new(id self, SEL) { return class_createInstance((Class)self, 0); }

static long imp_fib(id self, SEL cmd, long n) {
	return n < 2 ? n : SEND(long, long)(self, cmd, n - 1) + SEND(long, long)(self, cmd, n - 2);
}

static long imp_countdown(id self, SEL cmd, long n) { return n == 0 ? 1 : 1 + SEND(long, long)(self, cmd, n - 1); }

static const char *imp_base_name(id self, SEL) { return class_getName(object_getClass(self)); }

static char described[64];
static const char *imp_base_describe(id self, SEL) {
	snprintf(described, sizeof described, "Base<%s>", SEND(const char *)(self, s_name));
	return described;
}

static const char *imp_derived_describe(id self, SEL cmd) {
	struct objc_super sup = {self, Derived};
	return SEND_SUPER(const char *)(&sup, cmd);
}

/* Sleeps ms; with TESTAPP_NAP_OUT set, writes there how long the sleep took by the monotonic
 * clock, in microseconds (a loaded machine oversleeps: the test compares the recorded duration
 * with this, not with ms). */
static long imp_nap(id, SEL, long ms) {
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L}, t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (const char *path = getenv("TESTAPP_NAP_OUT"))
		if (FILE *f = fopen(path, "w")) {
			fprintf(f, "%lld\n", (long long)(t1.tv_sec - t0.tv_sec) * 1000000 + (t1.tv_nsec - t0.tv_nsec) / 1000);
			fclose(f);
		}
	return ms;
}

static void imp_boom(id, SEL) { throw std::runtime_error("boom"); }

static long imp_catcher_run(id self, SEL) {
	id t = make(Thrower);
	try {
		SEND(void)(t, s_boom);
	} catch (const std::exception &e) {
		printf("caught: %s\n", e.what());
		(void)self;
		return 1;
	}
	return 0;
}

static double imp_scale(id, SEL, double v, double by) { return v * by; }

static Rect imp_rect(id, SEL) { return Rect{1, 2, 3, 4}; }

static Class define(Class super, const char *name);
static void add(Class c, SEL s, void *imp);

// Small objects: the value above the 3 tag bits.
static const unsigned long SMALL_INT_TAG = 1, TINY_STRING_TAG = 4, SMALL_DOUBLE_TAG = 6;
static const int SMALL_ROUNDS = 200;
static SEL s_with, s_plus, s_intValue, s_doubleValue, s_length, s_bounds, s_small;
static Class SmallInt, TinyString, SmallDouble;

static id small(long v, unsigned long tag) { return (id)((unsigned long)v << 3 | tag); }
static long payload(id self) { return (long)((unsigned long)self >> 3); }

static id imp_small_with(id, SEL, long v) { return small(v, SMALL_INT_TAG); }
static long imp_small_int_value(id self, SEL) { return payload(self); }
static id imp_small_plus(id self, SEL, id other) {
	return small(SEND(long)(self, s_intValue) + SEND(long)(other, s_intValue), SMALL_INT_TAG);
}
static double imp_small_double_value(id self, SEL) { return payload(self) / 4.0; }
static long imp_tiny_length(id self, SEL) { return payload(self) % 8; }
static Rect imp_tiny_bounds(id self, SEL) {
	double l = (double)SEND(long)(self, s_length);
	return Rect{0, 0, l * 7, 12};
}

// One round of sends to small objects; the same result on every thread.
static double small_round(int i) {
	id a = SEND(id, long)((id)SmallInt, s_with, i), b = SEND(id, long)((id)SmallInt, s_with, 1);
	long sum = SEND(long)(SEND(id, id)(a, s_plus, b), s_intValue);
#if defined(__x86_64__)
	double d = ((double (*)(id, SEL))objc_msgSend_fpret)(small(i, SMALL_DOUBLE_TAG), s_doubleValue);
	Rect r;
	((void (*)(Rect *, id, SEL))objc_msgSend_stret)(&r, small(i, TINY_STRING_TAG), s_bounds);
#else
	double d = SEND(double)(small(i, SMALL_DOUBLE_TAG), s_doubleValue);
	Rect r = SEND(Rect)(small(i, TINY_STRING_TAG), s_bounds);
#endif
	return (double)sum + d + r.w;
}

static double imp_app_small(id, SEL) {
	double total = 0;
	for (int i = 0; i < SMALL_ROUNDS; i++)
		total += small_round(i);
	return total;
}

static double small_results[3];
static void *small_main(void *arg) {
	long i = (long)arg;
	char name[16];
	snprintf(name, sizeof name, "small-%ld", i + 1);
	pthread_setname_np(pthread_self(), name);
	small_results[i] = SEND(double)((id)App, s_small);
	return nullptr;
}

static int run_small(void) {
	s_with = sel_registerName("with:");
	s_plus = sel_registerName("plus:");
	s_intValue = sel_registerName("intValue");
	s_doubleValue = sel_registerName("doubleValue");
	s_length = sel_registerName("length");
	s_bounds = sel_registerName("bounds");
	s_small = sel_registerName("small");
	SmallInt = define(Base, "SmallInt");
	TinyString = define(Base, "TinyString");
	SmallDouble = define(Base, "SmallDouble");
	if (!objc_registerSmallObjectClass_np(SmallInt, SMALL_INT_TAG) ||
	    !objc_registerSmallObjectClass_np(TinyString, TINY_STRING_TAG) ||
	    !objc_registerSmallObjectClass_np(SmallDouble, SMALL_DOUBLE_TAG)) {
		fprintf(stderr, "testapp: registering the small-object classes failed\n");
		return 1;
	}
	add(object_getClass((id)SmallInt), s_with, (void *)imp_small_with);
	add(SmallInt, s_intValue, (void *)imp_small_int_value);
	add(SmallInt, s_plus, (void *)imp_small_plus);
	add(SmallDouble, s_doubleValue, (void *)imp_small_double_value);
	add(TinyString, s_length, (void *)imp_tiny_length);
	add(TinyString, s_bounds, (void *)imp_tiny_bounds);
	add(object_getClass((id)App), s_small, (void *)imp_app_small);
	printf("small = %.2f\n", SEND(double)((id)App, s_small));
	printf("small class = %s\n", class_getName(object_getClass(small(5, TINY_STRING_TAG))));
	pthread_t th[3];
	for (long i = 0; i < 3; i++)
		pthread_create(&th[i], nullptr, small_main, (void *)i);
	for (int i = 0; i < 3; i++)
		pthread_join(th[i], nullptr);
	printf("threads small = %.2f %.2f %.2f\n", small_results[0], small_results[1], small_results[2]);
	printf("done\n");
	return 0;
}

static long thread_results[3];
static void *worker_main(void *arg) {
	long i = (long)arg;
	char name[16];
	snprintf(name, sizeof name, "worker-%ld", i + 1);
	pthread_setname_np(pthread_self(), name);
	id w = make(Worker);
	thread_results[i] = SEND(long, long)(w, s_fib, 10);
	return nullptr;
}

static long imp_app_run(id, SEL) {
	id w = make(Worker);
	printf("fib(12) = %ld\n", SEND(long, long)(w, s_fib, 12));
	printf("countdown = %ld\n", SEND(long, long)(w, s_countdown, 5));
	printf("describe = %s\n", SEND(const char *)(make(Derived), s_describe));
	printf("nap = %ld\n", SEND(long, long)((id)Sleeper, s_nap, 200));
	printf("catcher = %ld\n", SEND(long)(make(Catcher), s_run));
	pthread_t th[3];
	for (long i = 0; i < 3; i++)
		pthread_create(&th[i], nullptr, worker_main, (void *)i);
	for (int i = 0; i < 3; i++)
		pthread_join(th[i], nullptr);
	printf("threads fib(10) = %ld %ld %ld\n", thread_results[0], thread_results[1], thread_results[2]);
	printf("scale = %g\n", SEND(double, double, double)(w, s_scale, 2.5, 3.0));
#if defined(__x86_64__)
	Rect r;
	((void (*)(Rect *, id, SEL))objc_msgSend_stret)(&r, w, s_rect); // 32 bytes: returned in memory
#else
	Rect r = SEND(Rect)(w, s_rect); // arm64: an HFA, returned in d0-d3
#endif
	printf("rect = %g %g %g %g\n", r.x, r.y, r.w, r.h);
	return 0;
}

static Class define(Class super, const char *name) {
	Class c = objc_allocateClassPair(super, name, 0);
	objc_registerClassPair(c);
	return c;
}

static void add(Class c, SEL s, void *imp) { class_addMethod(c, s, (IMP)imp, ""); }

int main(int argc, char **argv) {
	s_fib = sel_registerName("fib:");
	s_countdown = sel_registerName("countdown:");
	s_describe = sel_registerName("describe");
	s_name = sel_registerName("name");
	s_nap = sel_registerName("nap:");
	s_run = sel_registerName("run");
	s_boom = sel_registerName("boom");
	s_scale = sel_registerName("scale:by:");
	s_rect = sel_registerName("rect");
	s_new = sel_registerName("new");

	Base = define(nullptr, "Base");
	add(object_getClass((id)Base), s_new, (void *)imp_new); // +new, inherited by every class
	add(Base, s_describe, (void *)imp_base_describe);
	add(Base, s_name, (void *)imp_base_name);
	Derived = define(Base, "Derived");
	add(Derived, s_describe, (void *)imp_derived_describe);
	Worker = define(Base, "Worker");
	add(Worker, s_fib, (void *)imp_fib);
	add(Worker, s_countdown, (void *)imp_countdown);
	add(Worker, s_scale, (void *)imp_scale);
	add(Worker, s_rect, (void *)imp_rect);
	Sleeper = define(Base, "Sleeper");
	add(object_getClass((id)Sleeper), s_nap, (void *)imp_nap);
	Catcher = define(Base, "Catcher");
	add(Catcher, s_run, (void *)imp_catcher_run);
	Thrower = define(Base, "Thrower");
	add(Thrower, s_boom, (void *)imp_boom);
	App = define(Base, "App");
	if (argc > 1 && strcmp(argv[1], "small") == 0)
		return run_small();
	add(object_getClass((id)App), s_run, (void *)imp_app_run);

	SEND(long)((id)App, s_run);

	if (argc > 1 && strcmp(argv[1], "dlopen") == 0) {
		void *h = dlopen("libtplugin.so", RTLD_NOW); // found through RUNPATH $ORIGIN
		if (!h) {
			fprintf(stderr, "dlopen: %s\n", dlerror());
			return 1;
		}
		long (*plugin_run)(void) = (long (*)(void))dlsym(h, "plugin_run");
		printf("plugin = %ld\n", plugin_run());
	}
	printf("done\n");
	return 0;
}
