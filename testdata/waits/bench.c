/* What recording waits costs (make bench-waits), in one run on one thread, each figure the best
 * of 7 rounds timed by the thread's CPU clock:
 *   an uncontended pthread mutex, lock + unlock: called directly (untraced), through the
 *   replacements (waits.c) with waits on, and with waits off (MSGTRACE_WAITS=0);
 *   a recorded wait: pthread_cond_timedwait with a time limit already past (returns at once,
 *   recorded every time) through the replacement against the direct call, and the record alone
 *   (two tick reads and the record written, the part of a contended wait that is ours).
 * The thread is registered (as its first traced call would) and recording is on. */
#include "rt.h"
#define MT_WAITS_IMPL /* the replacements declared below with their types */
#include "waits.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#ifndef N
#define N 5000000
#endif

int msgtrace_w_pthread_mutex_lock(pthread_mutex_t *);
int msgtrace_w_pthread_mutex_unlock(pthread_mutex_t *);
int msgtrace_w_pthread_cond_timedwait(pthread_cond_t *, pthread_mutex_t *, const struct timespec *);
void msgtrace_recycle_all(void);

static double cpu_now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static volatile long sink;
typedef int (*lock_fn)(pthread_mutex_t *);
typedef int (*wait_fn)(pthread_cond_t *, pthread_mutex_t *, const struct timespec *);

static double locks(lock_fn lock, lock_fn unlock) {
	double best = 1e30;
	for (int round = 0; round < 7; round++) {
		double t0 = cpu_now();
		for (long i = 0; i < N; i++) {
			lock(&m);
			sink++;
			unlock(&m);
		}
		double ns = (cpu_now() - t0) / N;
		if (ns < best)
			best = ns;
	}
	return best;
}

static double waits(wait_fn wait, long n) {
	double best = 1e30;
	struct timespec past = {1, 0};
	for (int round = 0; round < 7; round++) {
		msgtrace_recycle_all(); /* no drain: the last round's chunks back to the pool */
		pthread_mutex_lock(&m);
		double t0 = cpu_now();
		for (long i = 0; i < n; i++)
			wait(&c, &m, &past);
		double ns = (cpu_now() - t0) / n;
		pthread_mutex_unlock(&m);
		if (ns < best)
			best = ns;
	}
	return best;
}

static double records(long n) {
	double best = 1e30;
	for (int round = 0; round < 7; round++) {
		msgtrace_recycle_all();
		double t0 = cpu_now();
		for (long i = 0; i < n; i++) {
			uint64_t a = msgtrace_now_ticks(), b = msgtrace_now_ticks();
			msgtrace_put_wait(a, b, 1234ull << REC_WAIT_HOLDER_SHIFT | REC_WAIT, (uint64_t)MT_WAIT_MUTEX_LOCK << REC_WAIT_PRIM_SHIFT | 0x1000);
		}
		double ns = (cpu_now() - t0) / n;
		if (ns < best)
			best = ns;
	}
	return best;
}

int main(void) {
	msgtrace_configure(512, 512u << 20, 64u << 10);
	msgtrace_active = 1;
	msgtrace_register_thread();
	msgtrace_orig_w_pthread_mutex_lock = (void *)pthread_mutex_lock;
	msgtrace_orig_w_pthread_mutex_unlock = (void *)pthread_mutex_unlock;
	msgtrace_orig_w_pthread_cond_timedwait = (void *)pthread_cond_timedwait;
	double direct = locks(pthread_mutex_lock, pthread_mutex_unlock);
	double on = locks(msgtrace_w_pthread_mutex_lock, msgtrace_w_pthread_mutex_unlock);
	msgtrace_waits_on = 0;
	double off = locks(msgtrace_w_pthread_mutex_lock, msgtrace_w_pthread_mutex_unlock);
	msgtrace_waits_on = 1;
	long nw = N / 100; /* a timed wait is a system call: 50,000 a round */
	double wdirect = waits(pthread_cond_timedwait, nw);
	struct mt_wait_counters before, after;
	msgtrace_wait_counters(&before);
	double won = waits(msgtrace_w_pthread_cond_timedwait, nw);
	msgtrace_wait_counters(&after);
	double rec = records(nw);
	printf("uncontended pthread mutex, lock + unlock (ns): direct %.2f, waits on %.2f (x%.2f, %+.2f ns), waits off %.2f (x%.2f, %+.2f ns)\n",
	       direct, on, on / direct, on - direct, off, off / direct, off - direct);
	printf("recorded wait (ns): timedwait past its limit direct %.1f, through the replacement %.1f (%+.1f ns, %llu waits recorded); the record alone %.1f\n",
	       wdirect, won, won - wdirect, (unsigned long long)(after.waits - before.waits), rec);
	return after.waits - before.waits == 7ull * (uint64_t)nw ? 0 : 1;
}
