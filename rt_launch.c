/*
 * msgtrace instants: marks on the timeline that are not calls. The launch marks (the process's
 * start as the kernel recorded it, the library loaded, main entered) and the app's own
 * (msgtrace_mark) go through one bounded queue that any thread fills without a lock, a signal
 * handler included, at any time (before the stream started too: they wait in the queue); the
 * drain empties it into instant frames (tracer/stream/stream.go, kind 8) once per pass. A full queue
 * drops the mark and counts it (msgtrace_instants_lost). The drain keeps the last ones it took
 * so that every ring-mode dump holds them.
 * Depends on: rt_thread.c (thread ids), rt.c (ticks), rt_handover.c, rt_pool.c and rt_ring.c
 * (the early recording's start); encoding is the drain's (drain_encode.c, through the struct it
 * takes).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "rt_internal.h"
#include "rt_env.h"
#include "rt_launch.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#if defined(__APPLE__)
#include <sys/sysctl.h>
#include <sys/time.h>
#endif

#define QCAP 1024u /* a power of 2 */
#define NAME_MAX_BYTES 96

struct instant {
	uint64_t seq; /* position + 1 once written (release); the drain sets it to 0 again */
	uint64_t tid, time, precision;
	uint8_t clock, kind;
	char name[NAME_MAX_BYTES];
};

static struct instant queue[QCAP];
static uint64_t q_head; /* positions claimed (producers, compare-and-swap) */
static uint64_t q_tail; /* positions taken (the drain) */
static uint64_t q_lost; /* marks dropped: the queue was full */
static struct instant kept[QCAP]; /* drain only: the last ones taken, for ring dumps */
static uint64_t kept_n;

static uint64_t clock_ns(clockid_t id) {
	struct timespec ts;
	if (clock_gettime(id, &ts) != 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Queues one instant; async-signal-safe (atomics, no lock, no allocation). */
static void push(uint8_t kind, uint64_t tid, uint8_t clock, uint64_t time, uint64_t precision, const char *name) {
	uint64_t h = __atomic_load_n(&q_head, __ATOMIC_RELAXED);
	do {
		if (h - __atomic_load_n(&q_tail, __ATOMIC_ACQUIRE) >= QCAP) {
			__atomic_add_fetch(&q_lost, 1, __ATOMIC_RELAXED);
			return;
		}
	} while (!__atomic_compare_exchange_n(&q_head, &h, h + 1, 1, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED));
	struct instant *s = &queue[h & (QCAP - 1)];
	s->tid = tid;
	s->time = time;
	s->precision = precision;
	s->clock = clock;
	s->kind = kind;
	size_t n = 0;
	if (name)
		while (n < NAME_MAX_BYTES - 1 && name[n])
			n++;
	memcpy(s->name, name ? name : "", n);
	s->name[n] = 0;
	__atomic_store_n(&s->seq, h + 1, __ATOMIC_RELEASE);
}

void msgtrace_mark(const char *name) {
	push(MT_INSTANT_APP, msgtrace_thread_id(), MT_CLOCK_TICKS, msgtrace_now_ticks(), 0, name);
}

void msgtrace_crash_instant(uint64_t tid, uint64_t ticks, const char *name) {
	push(MT_INSTANT_CRASH, tid, MT_CLOCK_TICKS, ticks, 0, name);
}

uint64_t msgtrace_instants_lost(void) { return __atomic_load_n(&q_lost, __ATOMIC_RELAXED); }

/* The process's start on CLOCK_MONOTONIC, in ns, and how far before that it may have been.
 * Linux: /proc/self/stat's starttime, the task's creation (the fork; the exec follows in the
 * same task) in clock ticks (USER_HZ) since boot on CLOCK_BOOTTIME, truncated: the start lies in
 * [t, t + 1 tick). Called on the main thread, the thread's CPU time narrows the top of that
 * interval: the task has existed for at least as long as it ran, so it started no later than
 * now minus that (a launch is mostly CPU: that is often within a fraction of a millisecond).
 * The time given is the interval's top; precision its width. (taskstats' ac_etime, in µs, asks
 * for CAP_NET_ADMIN: not used.) Apple: sysctl KERN_PROC's p_starttime (wall clock, µs),
 * moved onto the monotonic clock. Returns 0 when nothing says. */
static int process_start(uint64_t *mono, uint64_t *precision) {
#if defined(__linux__)
	char b[1024];
	int f = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
	if (f < 0)
		return 0;
	ssize_t n = read(f, b, sizeof b - 1);
	close(f);
	if (n <= 0)
		return 0;
	b[n] = 0;
	char *p = strrchr(b, ')'); /* after the command name, which may hold spaces and ')' */
	if (!p)
		return 0;
	p++;
	for (int field = 3; field <= 22; field++) { /* starttime is field 22 */
		while (*p == ' ')
			p++;
		if (!*p)
			return 0;
		if (field == 22)
			break;
		while (*p && *p != ' ')
			p++;
	}
	char *end;
	unsigned long long ticks = strtoull(p, &end, 10);
	long hz = sysconf(_SC_CLK_TCK);
	if (end == p || hz <= 0)
		return 0;
	uint64_t cpu = msgtrace_thread_id() == (uint64_t)getpid() ? clock_ns(CLOCK_THREAD_CPUTIME_ID) : 0;
	uint64_t mo = clock_ns(CLOCK_MONOTONIC), bt = clock_ns(CLOCK_BOOTTIME);
	uint64_t tick_ns = 1000000000ull / (uint64_t)hz;
	uint64_t start_bt = (uint64_t)ticks * tick_ns;
	if (!mo || bt < mo || start_bt > bt)
		return 0;
	uint64_t suspended = bt - mo; /* CLOCK_BOOTTIME counts time suspended, CLOCK_MONOTONIC not */
	if (start_bt < suspended)
		return 0;
	uint64_t lo = start_bt - suspended, hi = lo + tick_ns;
	if (hi > mo)
		hi = mo;
	if (cpu && mo > cpu && mo - cpu < hi)
		hi = mo - cpu > lo ? mo - cpu : lo;
	*mono = hi;
	*precision = hi - lo;
	return 1;
#elif defined(__APPLE__)
	int mib[4] = {CTL_KERN, KERN_PROC, KERN_PROC_PID, (int)getpid()};
	struct kinfo_proc kp;
	size_t len = sizeof kp;
	if (sysctl(mib, 4, &kp, &len, NULL, 0) != 0 || len == 0)
		return 0;
	uint64_t st = (uint64_t)kp.kp_proc.p_starttime.tv_sec * 1000000000ull + (uint64_t)kp.kp_proc.p_starttime.tv_usec * 1000ull;
	uint64_t mo = clock_ns(CLOCK_MONOTONIC), wall = clock_ns(CLOCK_REALTIME);
	if (!st || wall < st || mo < wall - st)
		return 0;
	*mono = mo - (wall - st);
	*precision = 1000; /* the kernel keeps it in µs */
	return 1;
#else
	(void)mono, (void)precision;
	return 0;
#endif
}

static int launched;

/* A child forked without exec starts a stream of its own: the parent's instants (kept, or still
 * queued) are not its. Registered before the drain's own fork handlers, so it runs first. */
static void fork_child(void) {
	kept_n = 0;
	for (uint64_t k = 0; k < QCAP; k++)
		queue[k].seq = 0;
	q_tail = q_head;
}

void msgtrace_launch_loaded(uint64_t loaded_mono_ns) {
	if (__atomic_exchange_n(&launched, 1, __ATOMIC_ACQ_REL))
		return;
	pthread_atfork(NULL, NULL, fork_child);
	uint64_t start, precision;
	if (process_start(&start, &precision)) {
		if (loaded_mono_ns && start > loaded_mono_ns) /* the bound above is a bound: never after */
			start = loaded_mono_ns;
		push(MT_INSTANT_PROCESS_START, 0, MT_CLOCK_MONOTONIC, start, precision, "process start");
	}
	if (!loaded_mono_ns)
		loaded_mono_ns = clock_ns(CLOCK_MONOTONIC);
	push(MT_INSTANT_LOADED, 0, MT_CLOCK_MONOTONIC, loaded_mono_ns, 0, "library loaded");
}

/* ---- early recording ---- */

/* The values the Go side accepts (internal/agent/config.go): anything else turns tracing off
 * there, and leaves recording off here. */
int msgtrace_launch_early_config(struct mt_early_config *c) {
	char w[32];
	memset(c, 0, sizeof *c);
	c->methods_all = mt_env_methods_all();
	if (!mt_env_word("MSGTRACE_START", w, sizeof w) || (strcmp(w, "") != 0 && strcmp(w, "on") != 0))
		return 0; /* paused: recording starts with msgtrace_resume, after install */
	if (!mt_env_word("MSGTRACE_CAPTURE", w, sizeof w) ||
	    (strcmp(w, "") != 0 && strcmp(w, "methods") != 0 && strcmp(w, "both") != 0))
		return 0; /* sends only: no method is instrumented */
	if (!mt_env_word("MSGTRACE_MODE", w, sizeof w) || (strcmp(w, "") != 0 && strcmp(w, "stream") != 0 && strcmp(w, "ring") != 0))
		return 0;
	c->ring = strcmp(w, "ring") == 0;
	if (!mt_env_word("MSGTRACE_FULL", w, sizeof w) || (strcmp(w, "") != 0 && strcmp(w, "wait") != 0 && strcmp(w, "drop") != 0))
		return 0;
	c->drop = strcmp(w, "drop") == 0;
	if (mt_env_cpu() < 0) /* the drain samples CPU time (Go starts it): only a refusal matters here */
		return 0;
	c->buffer_mb = MT_DEFAULT_BUFFER_MB;
	const char *raw = getenv("MSGTRACE_BUFFER_MB");
	if (raw && *raw) { /* Go: strconv.Atoi(strings.TrimSpace(v)) of a set, non-empty value */
		char n[256]; /* longer: refused here (Go may take a number padded with that many zeros) */
		if (!mt_env_word("MSGTRACE_BUFFER_MB", n, sizeof n))
			return 0;
		const char *d = n[0] == '+' ? n + 1 : n; /* a sign, as strconv.Atoi takes; "-" is below 1 */
		if (!*d)
			return 0;
		uint64_t v = 0;
		for (; *d; d++) {
			if (*d < '0' || *d > '9')
				return 0;
			if (v <= MT_MAX_BUFFER_MB) /* past the bound it stays past it */
				v = v * 10 + (uint64_t)(*d - '0');
		}
		if (v < 1 || v > MT_MAX_BUFFER_MB)
			return 0;
		c->buffer_mb = v;
	}
	return 1;
}

int msgtrace_launch_record_early(void) {
	struct mt_early_config c;
	if (!msgtrace_launch_early_config(&c))
		return 0;
	/* the sizes the Go side asks for later are these: the region, once reserved, keeps them */
	if (msgtrace_pool_bytes(c.buffer_mb << 20) != 0 || msgtrace_pool_reserve() != 0)
		return 0;
	if (c.ring) /* the drain sets it again as it starts: a thread's chunks go to its ring from the first */
		__atomic_store_n(&msgtrace_ring_mode, 1, __ATOMIC_RELEASE);
	/* a full pool waits for the drain on its way, unless MSGTRACE_FULL=drop */
	__atomic_store_n(&msgtrace_drain_expected, !c.drop, __ATOMIC_RELEASE);
	__atomic_store_n(&msgtrace_active, 1, __ATOMIC_RELEASE);
	return 1;
}

void msgtrace_launch_record_early_end(void) { __atomic_store_n(&msgtrace_drain_expected, 0, __ATOMIC_RELEASE); }

/* ---- main entered (Linux): the main program's _start calls __libc_start_main through its
 * GOT after every shared object's constructors ran, ours included; that slot is rebound to
 * msgtrace___libc_start_main (launch.go), which hands the C library a main of ours that marks
 * "main" and calls the program's. ---- */
typedef int (*main_fn)(int, char **, char **);
void *msgtrace_orig___libc_start_main;
static main_fn program_main;
static int main_marked;

static int msgtrace_main(int argc, char **argv, char **envp) {
	if (!__atomic_exchange_n(&main_marked, 1, __ATOMIC_ACQ_REL))
		push(MT_INSTANT_MAIN, 0, MT_CLOCK_TICKS, msgtrace_now_ticks(), 0, "main");
	return program_main(argc, argv, envp);
}

int msgtrace___libc_start_main(main_fn main, int argc, char **argv, void (*init)(void), void (*fini)(void),
			       void (*rtld_fini)(void), void *stack_end) {
	int (*orig)(main_fn, int, char **, void (*)(void), void (*)(void), void (*)(void), void *) =
	    (int (*)(main_fn, int, char **, void (*)(void), void (*)(void), void (*)(void), void *))msgtrace_orig___libc_start_main;
	program_main = main;
	return orig(program_main ? msgtrace_main : main, argc, argv, init, fini, rtld_fini, stack_end);
}

/* ---- the drain's side ---- */

/* What the drain's encoder (mt_enc_instant) takes of a queued instant. */
static struct mt_instant_frame frame_of(const struct instant *s) {
	return (struct mt_instant_frame){s->tid, s->time, s->precision, s->clock, s->kind, s->name};
}

int msgtrace_instants_drain(void (*emit)(const struct mt_instant_frame *in), int replay) {
	int count = 0;
	if (replay) /* a ring dump is a whole new file: every instant kept, oldest first */
		for (uint64_t k = kept_n > QCAP ? kept_n - QCAP : 0; k < kept_n; k++, count++)
		{
			struct mt_instant_frame f = frame_of(&kept[k & (QCAP - 1)]);
			emit(&f);
		}
	for (;;) {
		uint64_t t = q_tail;
		struct instant *s = &queue[t & (QCAP - 1)];
		if (__atomic_load_n(&s->seq, __ATOMIC_ACQUIRE) != t + 1)
			break; /* none, or one claimed and still being written: the next pass takes it */
		kept[kept_n++ & (QCAP - 1)] = *s;
		__atomic_store_n(&s->seq, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&q_tail, t + 1, __ATOMIC_RELEASE);
		struct mt_instant_frame f = frame_of(&kept[(kept_n - 1) & (QCAP - 1)]);
		emit(&f);
		count++;
	}
	return count;
}
