/*
 * ns per send through the program's own objc_msgSend slot, with libmsgtrace linked in (the
 * static archive: nothing is rebound before msgtrace_start), on the project's test runtime
 * (libtobjc), measured in one run:
 *   untraced            before msgtrace_start: the slot holds objc_msgSend
 *   recording           started
 *   paused, interposer  just paused: the slot holds the interposer, which tests the flag and
 *                       jumps on (measured within the library's park delay)
 *   paused, parked      paused for longer: the slot holds objc_msgSend again
 *   resumed             recording again after the parked pause
 * Each figure is the best of ROUNDS rounds of N sends; the differences are against untraced.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "msgtrace.h"
#include "tobjc.h"

#define ROUNDS 7

static SEL sel_leaf;

/* objc_msgSend under the method's own prototype, as a compiler calls it (through the PLT) */
extern long send_leaf(id, SEL, long) __asm__("objc_msgSend");

static long leaf(id self, SEL cmd, long x) {
	(void)self, (void)cmd;
	__asm__ volatile("");
	return x + 1;
}

static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* the best ns per send of ROUNDS rounds of n sends through the slot */
static __attribute__((noinline)) double run(id obj, long n) {
	double best = 1e300;
	for (int r = 0; r < ROUNDS; r++) {
		long x = 0;
		double t0 = now();
		for (long i = 0; i < n; i++)
			x = send_leaf(obj, sel_leaf, x);
		double t = (now() - t0) / (double)n;
		if (x != n)
			fprintf(stderr, "bench_park: %ld of %ld sends returned\n", x, n), _exit(1);
		if (t < best)
			best = t;
	}
	return best;
}

__attribute__((noinline)) static void *msgsend_slot(void) {
	void *volatile p = (void *)&objc_msgSend;
	return p;
}

static const char *state(void) {
	return msgsend_slot() == dlsym(RTLD_DEFAULT, "objc_msgSend") ? "objc_msgSend" : "the interposer";
}

int main(void) {
	Class cls = objc_allocateClassPair(NULL, "Bench", 0);
	sel_leaf = sel_registerName("leaf:");
	class_addMethod(cls, sel_leaf, (IMP)leaf, "l@:l");
	objc_registerClassPair(cls);
	id obj = class_createInstance(cls, 0);
	const long n = 20000000, quick = 1000000;

	run(obj, n); /* warm up */
	double untraced = run(obj, n);
	printf("%-22s %8.2f ns/send            (slot: %s)\n", "untraced", untraced, state());
	if (msgtrace_start() != 0) {
		fprintf(stderr, "bench_park: msgtrace_start: %s\n", msgtrace_last_error());
		return 1;
	}
	/* recording a few million sends takes buffer space: fewer, the best of the rounds */
	double rec = run(obj, quick);
	msgtrace_pause();
	const char *s = state();
	double paused = run(obj, quick / 4); /* ~ 7 x 250k sends: well within the park delay */
	printf("%-22s %8.2f ns/send  %+7.2f ns  (slot: %s)\n", "recording", rec, rec - untraced, "the interposer");
	printf("%-22s %8.2f ns/send  %+7.2f ns  (slot: %s)\n", "paused, interposer", paused, paused - untraced, s);
	usleep(300000);
	double parked = run(obj, n);
	printf("%-22s %8.2f ns/send  %+7.2f ns  (slot: %s)\n", "paused, parked", parked, parked - untraced, state());
	double again = run(obj, n);
	printf("%-22s %8.2f ns/send  %+7.2f ns  (a second measure)\n", "paused, parked", again, again - untraced);
	msgtrace_resume();
	double resumed = run(obj, quick);
	printf("%-22s %8.2f ns/send  %+7.2f ns  (slot: %s)\n", "resumed, recording", resumed, resumed - untraced, state());
	msgtrace_stop();
	return 0;
}
