/* ns per call through a method trampoline against a direct IMP call and the interposer, in one
 * run: direct IMP, the test dispatcher, trampoline paused and recording, interposer recording,
 * and a send the interposer records that lands in an instrumented method (one record, renamed).
 * Each figure is the best of 7 rounds of N calls on one thread. */
#include "common.h"
#include "trampoline.h"
#include <stdlib.h>
#include <time.h>

#ifndef N
#define N 5000000
#endif

static __attribute__((noinline)) int64_t leaf(struct object *self, void *cmd, int64_t x) {
	(void)self, (void)cmd;
	__asm__ volatile("");
	return x + 1;
}
static struct method methods[] = {{(void *)1, (void *)leaf}, {0, 0}};
static struct tclass cls = {0, methods}, impl;
static struct object obj = {&cls};

static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static double run(send_fn f) {
	double best = 1e30;
	for (int round = 0; round < 7; round++) {
		msgtrace_recycle_all(); /* no drain: the chunks of the last round back to the pool */
		int64_t s = 0;
		double t0 = now();
		for (int64_t i = 0; i < N; i++)
			s += f(&obj, (void *)1, i);
		double ns = (now() - t0) / N;
		if (s != (int64_t)N * (N + 1) / 2)
			abort();
		if (ns < best)
			best = ns;
	}
	return best;
}

int main(void) {
	use_test_runtime();
	msgtrace_configure(512, 256u << 20, 64u << 10);
	msgtrace_tramp_data[0] = (struct mt_tramp_data){(void *)leaf, &impl, (void *)1, 0};
	send_fn tramp = (send_fn)(void *)msgtrace_tramp_text;
	double direct = run(leaf);
	double disp = run((send_fn)test_msgSend);
	msgtrace_active = 0;
	double paused = run(tramp);
	msgtrace_active = 1;
	tramp(&obj, (void *)1, 0); /* register this thread outside the timing */
	double rec = run(tramp);
	double sends = run(SEND);
	methods[0].imp = (void *)tramp; /* the method instrumented: sends land in its trampoline */
	struct mt_counters c0, c;
	msgtrace_counters(&c0);
	double both = run(SEND);
	msgtrace_counters(&c);
	printf("%-52s %8s %10s\n", "path", "ns/call", "vs direct");
	printf("%-52s %8.2f %10.2f\n", "direct IMP call", direct, 1.0);
	printf("%-52s %8.2f %10.2f\n", "test dispatcher (objc_msgSend contract)", disp, disp / direct);
	printf("%-52s %8.2f %10.2f\n", "trampoline, paused", paused, paused / direct);
	printf("%-52s %8.2f %10.2f\n", "trampoline, recording", rec, rec / direct);
	printf("%-52s %8.2f %10.2f\n", "interposer + dispatcher, recording", sends, sends / direct);
	printf("%-52s %8.2f %10.2f\n", "interposer + dispatcher + trampoline (one record)", both, both / direct);
	printf("sends landing in the trampoline recorded %llu (7 rounds of %d: once each), dropped %llu\n",
	       (unsigned long long)(c.recorded - c0.recorded), N, (unsigned long long)c.dropped);
	return c.recorded - c0.recorded == 7ull * N && c.dropped == 0 ? 0 : 1;
}
