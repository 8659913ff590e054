/*
 * The drain's clock: the tick counter's rate (asked of the hardware or the kernel, or measured
 * against the monotonic clock as the drain runs), MSGTRACE_MIN_US turned into ticks for the
 * interposers once the rate is known, and clock frames.
 * Depends on: drain_encode.c (frames), rt.c (the counter). Called by the other drain files.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "drain_internal.h"

#include <string.h>
#include <time.h>
#include <unistd.h>
#if defined(__linux__) && defined(__x86_64__)
#include <linux/perf_event.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#endif
#if defined(__APPLE__) && defined(__x86_64__)
#include <sys/sysctl.h>
#endif

struct mt_clock mt_clock;

uint64_t mt_mono_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t wall_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void mt_sleep_ms(long ms) {
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

void mt_clock_frame(struct mt_buf *out, struct mt_buf *pl) {
	struct mt_clock_frame c = {msgtrace_now_ticks(), mt_mono_ns(), wall_ns(), mt_clock.rate_num, mt_clock.rate_den};
	mt_enc_clock(out, pl, &c);
	mt_clock.last_clock_ns = c.mono_ns;
}

/* The tick rate without waiting: the hardware's where it says (arm64 CNTFRQ_EL0); on x86
 * Linux the kernel's TSC conversion from a perf event's mmap page (time_mult, time_shift: what
 * the vDSO uses), when perf events are allowed; on x86 macOS machdep.tsc.frequency. 0 when
 * none is there. */
static int known_rate(void) {
	uint64_t hz = msgtrace_tick_hz();
	if (hz) {
		mt_clock.rate_num = 1000000000ull;
		mt_clock.rate_den = hz;
		return 1;
	}
#if defined(__linux__) && defined(__x86_64__)
	struct perf_event_attr pe;
	memset(&pe, 0, sizeof pe);
	pe.type = PERF_TYPE_SOFTWARE;
	pe.size = sizeof pe;
	pe.config = PERF_COUNT_SW_DUMMY;
	pe.disabled = 1;
	pe.exclude_kernel = 1;
	pe.exclude_hv = 1;
	int pfd = (int)syscall(SYS_perf_event_open, &pe, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (pfd < 0)
		return 0;
	struct perf_event_mmap_page *pg = mmap(NULL, (size_t)sysconf(_SC_PAGESIZE), PROT_READ, MAP_SHARED, pfd, 0);
	close(pfd);
	if (pg == MAP_FAILED)
		return 0;
	int ok = pg->cap_user_time && pg->time_shift < 63 && pg->time_mult;
	if (ok) {
		mt_clock.rate_num = pg->time_mult;
		mt_clock.rate_den = 1ull << pg->time_shift;
	}
	munmap(pg, (size_t)sysconf(_SC_PAGESIZE));
	return ok;
#elif defined(__APPLE__) && defined(__x86_64__)
	uint64_t f = 0; /* the TSC's rate as the kernel measured it at boot */
	size_t n = sizeof f;
	if (sysctlbyname("machdep.tsc.frequency", &f, &n, NULL, 0) != 0 || !f)
		return 0;
	mt_clock.rate_num = 1000000000ull;
	mt_clock.rate_den = f;
	return 1;
#else
	return 0;
#endif
}

/* The counter and the monotonic clock read together: the counter's midpoint around the clock. */
static void clock_pair(uint64_t *tick, uint64_t *ns) {
	uint64_t a = msgtrace_now_ticks(), m = mt_mono_ns(), b = msgtrace_now_ticks();
	*tick = a + (b - a) / 2;
	*ns = m;
}

static void apply_min_us(void) {
	struct mt_clock *k = &mt_clock;
	if (k->rate_num && k->rate_den && k->min_us > 0)
		__atomic_store_n(&msgtrace_min_ticks, (uint64_t)(k->min_us * 1000.0 * (double)k->rate_den / (double)k->rate_num), __ATOMIC_RELAXED);
}

/* Nothing here waits (calls shorter than MSGTRACE_MIN_US recorded before the rate is known are
 * left out as they are encoded). */
void mt_clock_start(double min_us) {
	mt_clock.min_us = min_us;
	clock_pair(&mt_clock.cal_tick, &mt_clock.cal_ns);
}

void mt_clock_ask_rate(void) {
	if (!mt_clock.rate_final && (mt_clock.rate_final = known_rate()))
		apply_min_us();
}

/* Where neither the hardware nor the kernel says, the counter's rate is measured without
 * waiting for it: against the monotonic clock, from the stream's start to now, as the drain
 * runs (2 ms of it give 1e-4, what MSGTRACE_MIN_US needs; refined until a second has passed).
 * Until then calls are recorded whatever their length, and the reader converts ticks through
 * the clock frames (every one carries the rate as known then). */
void mt_clock_calibrate(void) {
	struct mt_clock *k = &mt_clock;
	if (k->rate_final || !k->cal_ns)
		return;
	uint64_t t, m;
	clock_pair(&t, &m);
	if (t <= k->cal_tick || m < k->cal_ns + 2000000ull)
		return;
	uint64_t dm = m - k->cal_ns;
	if (k->rate_num && dm < 2 * k->rate_num) /* refine at 2x, 4x, ... the last span */
		return;
	k->rate_num = dm;
	k->rate_den = t - k->cal_tick;
	k->rate_final = dm >= 1000000000ull;
	k->rate_news = 1;
	apply_min_us();
}
