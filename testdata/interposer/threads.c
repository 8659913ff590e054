/* 8 threads x 1,000,000 traced calls, no drain, a 24 MiB pool: recorded + dropped == calls
 * exactly, and what was recorded fits the pool.
 * Recursion deeper than the shadow stack: the calls past it go untraced, counted, no crash.
 * longjmp over traced frames: the skipped entries are closed, flagged unwound. */
#include "common.h"
#include <pthread.h>
#include <setjmp.h>

#define THREADS 8
#define CALLS 1000000

static int64_t leaf(struct object *self, void *cmd, int64_t x) { (void)self, (void)cmd; return x + 1; }
static int64_t recurse(struct object *self, void *cmd, int64_t n) {
	return n == 0 ? 0 : 1 + SEND(self, cmd, n - 1);
}
static jmp_buf jb;
static int64_t jumper(struct object *self, void *cmd, int64_t n) {
	(void)self, (void)cmd;
	if (n == 0)
		longjmp(jb, 1);
	return SEND(self, (void *)3, n - 1); /* deeper traced frames, then longjmp over them */
}

static struct method methods[] = {{(void *)1, (void *)leaf}, {(void *)2, (void *)recurse}, {(void *)3, (void *)jumper}, {0, 0}};
static struct tclass cls = {0, methods};
static struct object obj = {&cls};

static void *worker(void *arg) {
	int64_t s = 0;
	for (int64_t i = 0; i < CALLS; i++)
		s += SEND(&obj, (void *)1, i);
	*(int64_t *)arg = s;
	return 0;
}

int main(void) {
	use_test_runtime();
	CHECK("configure", msgtrace_configure(512, 24u << 20, 64u << 10) == 0);
	pthread_t th[THREADS];
	int64_t sums[THREADS];
	for (int i = 0; i < THREADS; i++)
		pthread_create(&th[i], 0, worker, &sums[i]);
	for (int i = 0; i < THREADS; i++) {
		pthread_join(th[i], 0);
		CHECK("results through the interposer", sums[i] == (int64_t)CALLS * (CALLS + 1) / 2);
	}
	struct mt_counters c;
	msgtrace_counters(&c);
	printf("threads %llu recorded %llu dropped %llu\n", (unsigned long long)c.threads, (unsigned long long)c.recorded, (unsigned long long)c.dropped);
	CHECK("8 threads registered", c.threads == THREADS);
	CHECK("recorded + dropped == calls", c.recorded + c.dropped == (uint64_t)THREADS * CALLS);
	CHECK("pool bounded", c.chunks == 384 && c.recorded <= c.chunks * ((65536 - 64) / 32));
	CHECK("pool used up before dropping", c.recorded > (c.chunks - THREADS) * ((65536 - 64) / 32));
	msgtrace_recycle_all(); /* no drain: give the chunks back by hand */

	/* recursion 2000 deep with a 512-entry shadow stack (this thread registers now) */
	CHECK("deep recursion result", SEND(&obj, (void *)2, 2000) == 2000);
	msgtrace_counters(&c);
	CHECK("calls past the shadow stack counted", c.overflow == 2001 - 512);
	CHECK("shadow stack empty after", msgtrace_current_thread()->top == msgtrace_current_thread()->base);

	/* longjmp from 4 traced frames deep back to main */
	if (setjmp(jb) == 0) {
		SEND(&obj, (void *)3, 3);
		CHECK("longjmp happened", 0);
	}
	CHECK("stale entries still there before the next call", msgtrace_current_thread()->top - msgtrace_current_thread()->base == 4);
	CHECK("call after longjmp", SEND(&obj, (void *)1, 41) == 42);
	CHECK("stale entries closed", msgtrace_current_thread()->top == msgtrace_current_thread()->base);
	struct flagcount u = records_with(F_UNWOUND);
	CHECK("4 records flagged unwound", u.with == 4);
	printf("%s overflow %llu unwound %llu\n", failures ? "FAILED" : "OK", (unsigned long long)c.overflow, (unsigned long long)u.with);
	return failures != 0;
}
