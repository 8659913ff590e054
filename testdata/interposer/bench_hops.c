/* ns per async hop (hops_dispatch.c, hops.c): dispatch_async_f through the library's wrapper
 * (the work item allocated, the hop's id, its enqueue, begin and end marks, the item freed)
 * against the same call straight to a stand-in dispatch_async_f that runs the work at once, and
 * the wrapper with recording paused, in one run. Each figure is the best of 9 rounds of N hops
 * on one thread, timed by the thread's CPU clock. */
#include "common.h"
#include "hops.h"

#include <stdlib.h>
#include <time.h>

#ifndef N
#define N 100000
#endif

/* the stand-in: runs the work item on the calling thread, now */
void dispatch_async_f(void *q, void *ctx, void (*fn)(void *)) {
	(void)q;
	fn(ctx);
}
void dispatch_after_f(uint64_t w, void *q, void *ctx, void (*fn)(void *)) { (void)w, dispatch_async_f(q, ctx, fn); }
void dispatch_barrier_async_f(void *q, void *ctx, void (*fn)(void *)) { dispatch_async_f(q, ctx, fn); }
void dispatch_group_async_f(void *g, void *q, void *ctx, void (*fn)(void *)) { (void)g, dispatch_async_f(q, ctx, fn); }
void _Block_release(const void *b) { (void)b; }
void *_Block_copy(const void *b) { return (void *)b; }

static uint64_t done;
static __attribute__((noinline)) void work(void *ctx) {
	__asm__ volatile("");
	done += (uint64_t)(uintptr_t)ctx;
}

static double cpu_now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

typedef void (*async_fn)(void *, void *, void (*)(void *));

static double round_ns(async_fn f) {
	double best = 1e30;
	for (int r = 0; r < 9; r++) {
		double t0 = cpu_now();
		for (int i = 0; i < N; i++)
			f(NULL, (void *)1, work);
		double ns = (cpu_now() - t0) / N;
		if (ns < best)
			best = ns;
		msgtrace_recycle_all();
	}
	return best;
}

int main(void) {
	use_test_runtime();
	/* room for every mark: 9 rounds x N hops x 3 marks of 32 bytes, and more */
	CHECK("configure", msgtrace_configure(512, 256u << 20, 64u << 10) == 0);
	CHECK("init", msgtrace_hops_dispatch_init());
	double direct = round_ns(dispatch_async_f);
	double hop = round_ns(msgtrace_dispatch_async_f);
	msgtrace_active = 0;
	double paused = round_ns(msgtrace_dispatch_async_f);
	msgtrace_active = 1;
	struct mt_hops_counters c;
	msgtrace_hops_counters(&c);
	printf("path                                          ns/hop   vs direct\n");
	printf("dispatch_async_f, straight to dispatch        %6.2f    %+6.2f\n", direct, 0.0);
	printf("through the wrapper, recording (a hop)        %6.2f    %+6.2f\n", hop, hop - direct);
	printf("through the wrapper, paused                   %6.2f    %+6.2f\n", paused, paused - direct);
	printf("hops %llu, marks not written %llu\n", (unsigned long long)c.enqueued, (unsigned long long)c.unmarked);
	CHECK("every hop marked", c.unmarked == 0 && c.enqueued == 9ull * N);
	CHECK("every work item ran", done == 27ull * N);
	if (failures)
		return 1;
	printf("OK\n");
	return 0;
}
