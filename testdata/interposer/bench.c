/* ns per call: direct IMP, test dispatcher, a lone jump in front of it (the floor of any stand-in),
 * interposer paused, interposer recording, a per-call-malloc trampoline (React Native profiler
 * style) and one rdtsc read, in one run.
 * Each figure is the best of 7 rounds of N calls on one thread, timed by the thread's CPU clock
 * (a round the scheduler interrupts on a busy machine is not charged for the time it waited). */
#include "common.h"
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <x86intrin.h>

#ifndef N
#define N 5000000
#endif

void *rn_original;
void rn_trampoline(void);
struct rn_frame { struct rn_frame *next; uint64_t ret, start; };
static __thread struct rn_frame *rn_top;
static __thread struct mt_record *rn_rec, *rn_rec_end;
uint64_t rn_dropped;
void rn_enter(uint64_t ret) {
	struct rn_frame *f = malloc(sizeof *f);
	f->ret = ret;
	f->start = __rdtsc();
	f->next = rn_top;
	rn_top = f;
}
uint64_t rn_leave(void) {
	struct rn_frame *f = rn_top;
	uint64_t end = __rdtsc(), ret = f->ret;
	if (rn_rec < rn_rec_end)
		*rn_rec++ = (struct mt_record){f->start, end, 0, 0};
	else
		rn_dropped++;
	rn_top = f->next;
	free(f);
	return ret;
}

static __attribute__((noinline)) int64_t leaf(struct object *self, void *cmd, int64_t x) {
	(void)self, (void)cmd;
	__asm__ volatile("");
	return x + 1;
}
static struct method methods[] = {{(void *)1, (void *)leaf}, {0, 0}};
static struct tclass cls = {0, methods};
static struct object obj = {&cls};

/* the floor of any stand-in the caller calls and that jumps on to the dispatcher: one
 * indirect jump through the same kind of variable the interposer forwards through */
void lone_jump(void);
__asm__(".text\n.p2align 4\nlone_jump:\n\tjmp *msgtrace_orig_objc_msgSend(%rip)\n");

static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* the calling thread's CPU time in ns */
static double cpu_now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static double run_recv(send_fn f, struct object *recv) {
	double best = 1e30;
	for (int round = 0; round < 7; round++) {
		msgtrace_recycle_all(); /* no drain: the chunks of the last round back to the pool */
		struct mt_record *rn_base = malloc((N + 16) * sizeof(struct mt_record));
		rn_rec = rn_base;
		rn_rec_end = rn_base + N + 16;
		int64_t s = 0;
		double t0 = cpu_now();
		for (int64_t i = 0; i < N; i++)
			s += f(recv, (void *)1, i);
		double ns = (cpu_now() - t0) / N;
		if (s != (int64_t)N * (N + 1) / 2)
			abort();
		free(rn_base);
		if (ns < best)
			best = ns;
	}
	return best;
}

static double run(send_fn f) { return run_recv(f, &obj); }

static void *sender(void *arg) {
	(void)arg;
	for (int64_t i = 0; i < N; i++)
		SEND(&obj, (void *)1, i);
	return 0;
}

static double rdtsc_cost(void) {
	double best = 1e30;
	for (int round = 0; round < 7; round++) {
		uint64_t s = 0;
		double t0 = cpu_now();
		for (int i = 0; i < N; i++)
			s += __rdtsc();
		double ns = (cpu_now() - t0) / N;
		__asm__ volatile("" ::"r"(s));
		if (ns < best)
			best = ns;
	}
	return best;
}

int main(void) {
	use_test_runtime();
	msgtrace_configure(512, 512u << 20, 64u << 10);
	rn_original = (void *)test_msgSend;
	double direct = run(leaf);
	double disp = run((send_fn)test_msgSend);
	double lone = run((send_fn)(void *)lone_jump);
	msgtrace_active = 0;
	double paused = run(SEND);
	msgtrace_active = 1;
	SEND(&obj, (void *)1, 0); /* register this thread outside the timing */
	double rec = run(SEND);
	struct mt_counters c;
	msgtrace_counters(&c);
	/* a small-object receiver (libobjc2's low-bit tags: no isa) against an ordinary one, both
	 * forwarded straight to the method (the test dispatcher reads an isa) */
	msgtrace_orig_objc_msgSend = (void *)leaf;
	double rec_obj = run(SEND);
	double rec_small = run_recv(SEND, (struct object *)(uintptr_t)(5 << 3 | 1));
	msgtrace_orig_objc_msgSend = (void *)test_msgSend;
	double rn = run((send_fn)rn_trampoline);
	double tsc = rdtsc_cost();
	printf("%-44s %8s %10s\n", "path", "ns/call", "vs dispatcher");
	printf("%-44s %8.2f %+10.2f\n", "direct IMP call", direct, direct - disp);
	printf("%-44s %8.2f %+10.2f\n", "test dispatcher (objc_msgSend contract)", disp, 0.0);
	printf("%-44s %8.2f %+10.2f\n", "a lone jump to the dispatcher (the floor)", lone, lone - disp);
	printf("%-44s %8.2f %+10.2f\n", "interposer, paused", paused, paused - disp);
	printf("%-44s %8.2f %+10.2f\n", "interposer, recording", rec, rec - disp);
	printf("%-44s %8.2f %+10.2f\n", "interposer, recording, to the IMP directly", rec_obj, rec_obj - disp);
	printf("%-44s %8.2f %+10.2f  (%+.2f vs an object)\n", "  the same, small-object receiver", rec_small, rec_small - disp, rec_small - rec_obj);
	printf("%-44s %8.2f %+10.2f\n", "per-call malloc trampoline (RN style)", rn, rn - disp);
	printf("%-44s %8.2f\n", "one rdtsc", tsc);
	printf("recording overhead = %.2f rdtsc + %.2f ns; recorded %llu, dropped %llu (64 KiB chunks, switched in the slow path)\n",
	       (rec - disp) / tsc, rec - disp - 2 * tsc, (unsigned long long)c.recorded, (unsigned long long)c.dropped);
	int ok = c.recorded == 7ull * N + 1 && c.dropped == 0;

	/* the drain: 4 threads send 4 x N calls while it streams them to /dev/null; its CPU time
	 * gives calls encoded per second on one core */
	struct mt_stream_config sc = {.path = "/dev/null", .period_ms = 100};
	if (msgtrace_stream_start(&sc) != 0)
		return 1;
	msgtrace_counters(&c);
	uint64_t before = c.written;
	pthread_t th[4];
	double t0 = now();
	for (int i = 0; i < 4; i++)
		pthread_create(&th[i], 0, sender, 0);
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], 0);
	double wall = now() - t0;
	msgtrace_stream_flush();
	uint64_t cpu = msgtrace_drain_cpu_ns();
	msgtrace_counters(&c);
	uint64_t written = c.written - before;
	printf("drain: %llu calls streamed in %.0f ms wall (4 threads), drain CPU %.0f ms: %.1f M calls/s on one core; %llu waits (%.1f ms), %llu dropped\n",
	       (unsigned long long)written, wall / 1e6, cpu / 1e6, written / (cpu / 1e9) / 1e6, (unsigned long long)c.waits,
	       c.wait_ticks / 2.5e6, (unsigned long long)c.dropped);
	msgtrace_stream_close();
	/* plus what the main thread left in its chunk from the rounds above */
	return ok && written >= 4ull * N && written <= 4ull * N + 2048 && c.dropped == 0 ? 0 : 1;
}
