/*
 * Per-thread CPU time, sampled by the drain (MSGTRACE_CPU, on unless 0). Every CPU_PERIOD_NS
 * (10 ms), and in every forced pass (a flush, the exit), a cpu frame (kind 9) lists each live
 * recording thread whose counters moved since its last entry: the time it ran, the time it
 * waited runnable on a run queue, its timeslices (totals since it started). A thread absent
 * from a frame had then the counters of its last entry (it did not run): a quiet thread costs a
 * read, not bytes. The next sample comes no sooner than CPU_SHARE times the drain's CPU time the
 * last one took: sampling takes at most 1 % of a core, however many threads there are.
 * Linux: the scheduler's per-task counters, /proc/self/task/TID/schedstat, each thread's file
 * kept open and read with pread (0.4-0.5 µs a thread in a tight loop, 2-3 µs as the drain reads
 * them, cold; opening the file each time is 2 µs more), up to CPU_FDS open files (fewer under a
 * low RLIMIT_NOFILE); past them, or where the file cannot be read (a kernel without
 * CONFIG_SCHED_INFO), the thread's CPU clock (clock_gettime, 0.15-0.19 µs: the time it ran
 * only, not the time it waited for a CPU). A file the program closed under us (its number may
 * be the program's file now) is told by its identity (fstat, only when a read fails or reads
 * something else) and then never closed by us.
 * Apple: thread_info(THREAD_BASIC_INFO) on the port the thread took at registration (user +
 * system time, µs: the time it ran only).
 * Ring mode (the flight recorder): the last CPU_KEEP frames are kept in memory and written with
 * each dump, after its other frames.
 * Depends on: drain_encode.c, drain_clock.c (mt_mono_ns), drain_output.c (frames go to
 * mt_out.out), drain_records.c (mt_dt); the recorder: rt_thread.c (the registry), rt.c (ticks).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "drain_internal.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#if defined(__APPLE__)
#include <mach/mach.h>
#endif

/* A cpu frame at most this often (and at every forced pass)... */
#define CPU_PERIOD_NS 10000000ull
/* ... and the next no sooner than CPU_SHARE times the drain's CPU time this one took. */
#define CPU_SHARE 100
/* schedstat files kept open at most (and at most an eighth of RLIMIT_NOFILE's soft limit). */
#define CPU_FDS 256
/* Ring mode: frames kept for the dump (~10 s at the period while threads run). */
#define CPU_KEEP 1024

static struct {
	int on, ring;
	uint64_t next_ns;     /* when the next frame is sampled */
	int fds, fds_max;     /* schedstat files open, and the bound */
	struct mt_buf pl;
	struct {
		unsigned char *p;
		size_t n;
	} kept[CPU_KEEP];     /* ring mode: frames, by nkept modulo CPU_KEEP */
	uint64_t nkept;
	uint64_t reads, ns;   /* threads read, and the drain's CPU time the samples took (msgtrace_cpu_cost) */
} cpu;

/* The calling thread's CPU time, ns. */
static uint64_t self_cpu_ns(void) {
	struct timespec ts;
	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void mt_cpu_start(int on, int ring) {
	cpu.on = on;
	cpu.ring = ring;
	cpu.fds_max = CPU_FDS;
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur / 8 < (rlim_t)cpu.fds_max)
		cpu.fds_max = (int)(rl.rlim_cur / 8);
}

void msgtrace_cpu_cost(uint64_t *reads, uint64_t *ns) {
	*reads = cpu.reads;
	*ns = cpu.ns;
}

#if defined(__linux__)
/* "RUN WAIT SLICES\n", as the kernel writes it. */
static int parse3(const char *p, uint64_t v[3]) {
	for (int k = 0; k < 3; k++) {
		if (*p < '0' || *p > '9')
			return 0;
		uint64_t x = 0;
		while (*p >= '0' && *p <= '9')
			x = x * 10 + (uint64_t)(*p++ - '0');
		v[k] = x;
		if (*p++ != (k < 2 ? ' ' : '\n'))
			return 0;
	}
	return 1;
}

/* The file open as the thread's is still the one we opened (not closed and reused by the program). */
static int still_ours(const struct mt_drain_thread *d) {
	struct stat st;
	return fstat(d->cpu_fd - 1, &st) == 0 && (uint64_t)st.st_dev == d->cpu_dev && (uint64_t)st.st_ino == d->cpu_ino;
}

static void drop_file(struct mt_drain_thread *d) {
	if (!d->cpu_fd)
		return;
	if (still_ours(d))
		close(d->cpu_fd - 1);
	d->cpu_fd = 0;
	cpu.fds--;
}

/* The thread's schedstat into v: 1, or 0 when it cannot be read this way. */
static int read_schedstat(const struct mt_thread_info *i, struct mt_drain_thread *d, uint64_t v[3]) {
	if (d->cpu_nofile)
		return 0;
	if (!d->cpu_fd) {
		if (cpu.fds >= cpu.fds_max)
			return 0;
		char p[64];
		snprintf(p, sizeof p, "/proc/self/task/%llu/schedstat", (unsigned long long)i->tid);
		int fd = open(p, O_RDONLY | O_CLOEXEC);
		struct stat st;
		if (fd < 0 || fstat(fd, &st) != 0) {
			if (fd >= 0)
				close(fd);
			d->cpu_nofile = 1;
			return 0;
		}
		d->cpu_fd = fd + 1;
		d->cpu_dev = (uint64_t)st.st_dev;
		d->cpu_ino = (uint64_t)st.st_ino;
		cpu.fds++;
	}
	char b[96];
	ssize_t n = pread(d->cpu_fd - 1, b, sizeof b - 1, 0);
	if (n > 0) {
		b[n] = 0;
		if (parse3(b, v))
			return 1;
	}
	drop_file(d); /* the thread is gone, or the number is not our file any more: opened again next time */
	return 0;
}
#endif

/* The thread's counters into v (running, runnable, slices): the MT_CPU_* bits known, 0 none. */
static uint64_t read_thread(const struct mt_thread_info *i, struct mt_drain_thread *d, uint64_t v[3]) {
#if defined(__linux__)
	if (read_schedstat(i, d, v))
		return MT_CPU_RUNNING | MT_CPU_RUNNABLE | MT_CPU_SLICES;
	/* the thread's CPU clock: Linux's MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED) */
	clockid_t c = (clockid_t)(~(uint32_t)i->tid << 3 | 6u);
	struct timespec ts;
	if (clock_gettime(c, &ts) != 0)
		return 0;
	v[0] = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	return MT_CPU_RUNNING;
#elif defined(__APPLE__)
	(void)d;
	thread_basic_info_data_t bi;
	mach_msg_type_number_t n = THREAD_BASIC_INFO_COUNT;
	if (!i->port || thread_info(i->port, THREAD_BASIC_INFO, (thread_info_t)&bi, &n) != KERN_SUCCESS)
		return 0;
	v[0] = ((uint64_t)bi.user_time.seconds + (uint64_t)bi.system_time.seconds) * 1000000000ull +
	       ((uint64_t)bi.user_time.microseconds + (uint64_t)bi.system_time.microseconds) * 1000ull;
	return MT_CPU_RUNNING;
#else
	(void)i, (void)d, (void)v;
	return 0;
#endif
}

void mt_cpu_sample(int force) {
	if (!cpu.on)
		return;
	uint64_t now = mt_mono_ns();
	if (!force && now < cpu.next_ns)
		return;
	if (!cpu.ring && !mt_out.out.n && mt_out.fd < 0)
		return; /* nothing else written yet: a process that records nothing writes nothing */
	uint64_t cost = self_cpu_ns();
	struct mt_buf *pl = &cpu.pl;
	mt_enc_cpu_begin(pl, msgtrace_now_ticks());
	size_t empty = pl->n;
	pthread_mutex_lock(&msgtrace_registry_lock);
	for (struct mt_thread_info *i = msgtrace_registry; i; i = i->next) {
		if (__atomic_load_n(&i->exited, __ATOMIC_ACQUIRE) || !mt_dt(i) || !i->drain)
			continue;
		struct mt_drain_thread *d = i->drain;
		uint64_t v[3] = {0, 0, 0}, known = read_thread(i, d, v);
		cpu.reads++;
		if (!known || (known == d->cpu_known && v[0] == d->cpu_run && v[1] == d->cpu_wait && v[2] == d->cpu_slices))
			continue;
		mt_enc_cpu_thread(pl, i->tid, known, v[0], v[1], v[2]);
		d->cpu_known = known;
		d->cpu_run = v[0];
		d->cpu_wait = v[1];
		d->cpu_slices = v[2];
	}
	pthread_mutex_unlock(&msgtrace_registry_lock);
	cost = self_cpu_ns() - cost;
	cpu.ns += cost;
	cpu.next_ns = now + (CPU_SHARE * cost > CPU_PERIOD_NS ? CPU_SHARE * cost : CPU_PERIOD_NS);
	if (pl->n == empty)
		return;
	if (!cpu.ring) {
		mt_enc_cpu_end(&mt_out.out, pl);
		return;
	}
	struct mt_buf f = {0};
	mt_enc_cpu_end(&f, pl);
	if (!f.p || f.n != MT_FRAME_HEADER + pl->n) {
		mt_buf_free(&f);
		return;
	}
	uint64_t k = cpu.nkept++ % CPU_KEEP;
	free(cpu.kept[k].p);
	cpu.kept[k].p = f.p;
	cpu.kept[k].n = f.n;
}

void mt_cpu_replay(struct mt_buf *out) {
	for (uint64_t k = cpu.nkept > CPU_KEEP ? cpu.nkept - CPU_KEEP : 0; k < cpu.nkept; k++)
		mt_put_bytes(out, cpu.kept[k % CPU_KEEP].p, cpu.kept[k % CPU_KEEP].n);
}

void mt_cpu_forget(struct mt_thread_info *i) {
#if defined(__linux__)
	if (i->drain)
		drop_file(i->drain);
#elif defined(__APPLE__)
	if (i->port)
		mach_port_deallocate(mach_task_self(), i->port);
	i->port = 0;
#else
	(void)i;
#endif
}

void mt_cpu_after_fork(void) {
#if defined(__linux__)
	for (struct mt_thread_info *i = msgtrace_registry; i; i = i->next)
		if (i->drain)
			drop_file(i->drain); /* the parent's threads' files */
#endif
	for (uint64_t k = 0; k < CPU_KEEP; k++) {
		free(cpu.kept[k].p);
		cpu.kept[k].p = NULL;
		cpu.kept[k].n = 0;
	}
	cpu.nkept = 0;
}
