/*
 * The drain: one thread that takes the chunks the recording threads hand over, encodes them
 * into the stream file (format: tracer/stream/stream.go) as the program runs, and gives them back to
 * the pool. Every period (or when forced: a flush, the exit, a crash) it also collects the
 * partly filled chunks of quiet threads and what each thread has open, writes threads that
 * are gone off, keeps faulted-in chunks ahead of the threads, and writes clock frames. In ring
 * mode it only frees what threads left and dumps the rings when asked. Nothing here runs on a
 * recording thread.
 * Depends on: drain_clock.c, drain_output.c, drain_records.c, drain_cpu.c (the samples),
 * drain_ring.c, drain_crash.c (a crash's pass); the recorder (rt_internal.h): rt.c,
 * rt_handover.c, rt_pool.c, rt_ring.c, rt_thread.c.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "drain_internal.h"

#include <stdlib.h>
#include <time.h>

/* A forced pass retries threads whose older chunk is still in flight this many times, every
 * FORCED_RETRY_NS. */
#define FORCED_ROUNDS 200
#define FORCED_RETRY_NS 50000L
/* Thread names are checked again at most this often, clock frames written at least this often. */
#define NAMES_NS 1000000000ull
#define CLOCK_NS 1000000000ull
/* Faulted-in free chunks kept ahead: twice those in use, at least POOL_AHEAD_MIN, at most an
 * eighth of the pool's cap. */
#define POOL_AHEAD_MIN 4
/* The drain's wait for a wake-up (ms): a chunk handed over while none waits (rt_handover.c), a
 * thread short of chunks, a flush, the exit or a crash wake it before. Not shorter while chunks
 * are in use: each wake-up takes a processor from the program's threads (on one processor it
 * preempts one, in the middle of whatever it holds), and a drain that woke every millisecond
 * while more than four threads held chunks did so a thousand times a second for nothing. */
#define WAIT_MS 10

struct mt_drain mt_drain = {
	.pass_mu = PTHREAD_MUTEX_INITIALIZER,
	.req_mu = PTHREAD_MUTEX_INITIALIZER,
	.req_cv = PTHREAD_COND_INITIALIZER,
	.period_ms = 100,
};

/* A thread the drain is done with (registry lock held): out of the registry if *pp is in it,
 * its totals kept, freed. */
static void drop_thread(struct mt_thread_info **pp, struct mt_thread_info *i) {
	if (pp)
		*pp = i->next;
	msgtrace_thread_gone_mark(i);
	mt_cpu_forget(i);
	free(i->drain);
	free(i);
}

/* A thread whose last chunk the drain took. */
static void forget(struct mt_thread_info *i) {
	pthread_mutex_lock(&msgtrace_registry_lock);
	struct mt_thread_info **pp = &msgtrace_registry;
	while (*pp && *pp != i)
		pp = &(*pp)->next;
	drop_thread(*pp ? pp : NULL, i);
	pthread_mutex_unlock(&msgtrace_registry_lock);
}

/* Threads that exited with no last chunk to say so (in ring mode: every exited thread, whose
 * last chunk went to its ring) are written off and freed once all their chunks are in; a
 * thread's ring stays, named as it went. Registry lock held. Returns how many still wait for
 * their chunks. */
static int reap_exited(void) {
	int waiting = 0;
	for (struct mt_thread_info **pp = &msgtrace_registry; *pp;) {
		struct mt_thread_info *i = *pp;
		int ex = __atomic_load_n(&i->exited, __ATOMIC_ACQUIRE);
		int all_in = i->taken == i->nchunks, done;
		if (mt_drain.ring_mode) {
			done = ex && (i->ring || all_in);
		} else {
			done = ex == EXITED_NO_CHUNK && all_in; /* EXITED_LAST_CHUNK: take_handed forgets it */
			waiting += ex == EXITED_NO_CHUNK && !all_in;
		}
		if (!done) {
			pp = &i->next;
			continue;
		}
		if (i->ring)
			i->ring->live = NULL;
		if (!mt_drain.ring_mode)
			mt_thread_gone(i, msgtrace_now_ticks());
		drop_thread(pp, i);
	}
	return waiting;
}

/* Keeps faulted-in chunks ahead of the threads (first touch is the expensive part: better the
 * drain than a recording thread): twice as many as are in use, POOL_AHEAD_MIN at least, up to
 * an eighth of the cap. A program that records little faults in (and tears down at exit)
 * little. */
static void grow_pool(void) {
	uint32_t low = msgtrace_pool_cap() / 8;
	if (low < POOL_AHEAD_MIN)
		low = POOL_AHEAD_MIN;
	uint32_t made = msgtrace_pool_made(), free_ = msgtrace_pool_free_count();
	uint32_t want = 2 * (made > free_ ? made - free_ : 0);
	if (want < POOL_AHEAD_MIN)
		want = POOL_AHEAD_MIN;
	if (want > low)
		want = low;
	while (msgtrace_pool_free_count() < want && msgtrace_pool_grow(1) == 1)
		;
}

/* Handed-over chunks, each thread's oldest first: encoded (dropped in ring mode, where only a
 * thread without a ring hands chunks over) and returned. */
static void take_handed(void) {
	for (struct mt_chunk *c = msgtrace_take_handed(), *n; c; c = n) {
		n = c->qnext;
		struct mt_thread_info *i = c->owner;
		if (i)
			i->taken = c->seq + 1;
		if (i && c->used && !mt_drain.ring_mode)
			mt_encode(i, c->drained, c->used);
		if (i && c->last) {
			if (!mt_drain.ring_mode)
				mt_thread_gone(i, c->used > c->rec ? c->used[-1].end : msgtrace_now_ticks());
			forget(i);
		}
		msgtrace_pool_push(c);
	}
}

/* A live thread's partial chunk (what it recorded since the last time), its open calls and, in
 * a final pass, its losses no chunk carried a mark for. Returns 0, writing nothing, while an
 * older chunk of the thread is in flight (handed over after this pass took the handed chunks):
 * a thread's frames are written in the order its calls ended. */
static int collect_thread(struct mt_thread_info *i, int force, int final, int names) {
	struct mt_chunk *c = __atomic_load_n(&i->chunk, __ATOMIC_ACQUIRE);
	struct mt_record *cur = __atomic_load_n(&i->t.rec_cur, __ATOMIC_ACQUIRE);
	if (c ? c->seq != i->taken : i->taken != __atomic_load_n(&i->nchunks, __ATOMIC_RELAXED))
		return 0;
	if (c && cur >= c->drained && cur <= c->rec + msgtrace_chunk_records) {
		mt_encode(i, c->drained, cur);
		c->drained = cur;
		struct mt_record m[3];
		int n = force ? msgtrace_claim_marks(i, c, cur, m) : 0;
		mt_encode(i, m, m + n);
	}
	if (names && mt_dt(i)->announced)
		mt_announce(i, 1);
	mt_open_snapshot(i, final);
	if (final)
		mt_final_marks(i);
	return 1;
}

/* Every live thread (or, with retry, those the last call skipped), after the exited ones are
 * written off. Returns how many were skipped. */
static int collect(int force, int final, int names, int retry) {
	pthread_mutex_lock(&msgtrace_registry_lock);
	int skipped = reap_exited();
	for (struct mt_thread_info *i = msgtrace_registry; i; i = i->next) {
		if (__atomic_load_n(&i->exited, __ATOMIC_ACQUIRE))
			continue;
		struct mt_drain_thread *d = mt_dt(i);
		if (retry && !d->skipped)
			continue;
		d->skipped = !collect_thread(i, force, final, names);
		skipped += d->skipped;
	}
	pthread_mutex_unlock(&msgtrace_registry_lock);
	return skipped;
}

/* Ring mode's pass: what exited threads left freed, rings that keep nothing of a thread that
 * is gone give their slots back, the pool topped up, the rings dumped when asked. */
static void ring_pass(int force) {
	pthread_mutex_lock(&msgtrace_registry_lock);
	reap_exited();
	for (struct mt_ring *r = __atomic_load_n(&msgtrace_rings, __ATOMIC_ACQUIRE); r; r = r->next)
		if (__atomic_load_n(&r->state, __ATOMIC_ACQUIRE) == RING_EXITED && !r->live &&
		    __atomic_load_n(&r->head, __ATOMIC_ACQUIRE) == __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE))
			msgtrace_ring_release(r);
	pthread_mutex_unlock(&msgtrace_registry_lock);
	grow_pool();
	mt_cpu_sample(force);
	if (force || mt_drain.dump_req) {
		mt_drain.dump_req = 0;
		mt_ring_dump();
	}
}

/* One pass: handed-over chunks encoded and returned; every period (or when forced) the quiet
 * threads' partial chunks and open calls; exited threads freed; the pool topped up. */
void mt_pass(int force, int final) {
	if (mt_clock.min_us > 0 && !mt_clock.rate_num) {
		/* calls shorter than MSGTRACE_MIN_US recorded before the rate was known are left out
		 * as they are encoded: nothing is encoded before (2 ms after the start at most) */
		mt_clock_calibrate();
		while (!mt_clock.rate_num && force) {
			mt_sleep_ms(1);
			mt_clock_calibrate();
		}
		if (!mt_clock.rate_num)
			return;
	}
	take_handed();
	if (mt_drain.ring_mode) {
		ring_pass(force);
		return;
	}
	uint64_t now = mt_mono_ns();
	if (force || now - mt_drain.last_collect_ns >= (uint64_t)mt_drain.period_ms * 1000000ull) {
		mt_drain.last_collect_ns = now;
		int names = now - mt_drain.last_names_ns >= NAMES_NS;
		if (names)
			mt_drain.last_names_ns = now;
		int skipped = collect(force, final, names, 0);
		/* forced (a flush, the exit, a crash): what was recorded before it is written now; a
		 * skipped thread's older chunk is handed over by now or within moments */
		for (int round = 0; skipped && force && round < FORCED_ROUNDS; round++) {
			if (round) {
				struct timespec ts = {0, FORCED_RETRY_NS};
				nanosleep(&ts, NULL);
			}
			take_handed();
			skipped = collect(force, final, 0, 1);
		}
	}
	grow_pool();
	mt_cpu_sample(force);
	if (mt_out.fd >= 0 && !mt_out.failed && (now - mt_clock.last_clock_ns >= CLOCK_NS || mt_clock.rate_news)) {
		mt_clock_frame(&mt_out.out, &mt_rec.pl);
		mt_clock.rate_news = 0;
	}
	mt_instants_write(0);
	mt_output_write();
}

static void *drain_main(void *arg) {
	(void)arg;
	msgtrace_set_untraced_self();
	/* named, so that it is told from the program's threads (top, gdb, perf, /proc) */
#if defined(__APPLE__)
	pthread_setname_np("msgtrace-drain");
#else
	pthread_setname_np(pthread_self(), "msgtrace-drain");
#endif
	mt_clock_ask_rate();
	while (!mt_drain.stop_req) {
		pthread_mutex_lock(&mt_drain.req_mu);
		uint64_t want = mt_drain.req_seq;
		pthread_mutex_unlock(&mt_drain.req_mu);
		/* a crash asked before this pass started is answered by it; one asked during a
		 * pass that was not forced waits for the next (it may not have written a byte) */
		int crash = mt_drain.crash_req;
		int forced = want != mt_drain.done_seq || crash || mt_drain.dump_req;
		pthread_mutex_lock(&mt_drain.pass_mu);
		if (__atomic_load_n(&mt_drain.closed, __ATOMIC_ACQUIRE)) { /* the stream was closed without us */
			pthread_mutex_unlock(&mt_drain.pass_mu);
			break;
		}
		mt_clock_calibrate(); /* under the lock: the close writes the last clock frame under it */
		/* a first call was recorded: the file is begun now, off the recording threads' way
		 * (not before the rate MSGTRACE_MIN_US needs is known: mt_pass writes nothing then) */
		if (__atomic_exchange_n(&msgtrace_drain_begin_req, 0, __ATOMIC_ACQ_REL) && !mt_drain.ring_mode &&
		    !(mt_clock.min_us > 0 && !mt_clock.rate_num))
			mt_output_begin();
		if (crash)
			mt_crash_drain(); /* a crash in our code: named, and its instant queued for this pass */
		mt_pass(forced, forced);
		pthread_mutex_unlock(&mt_drain.pass_mu);
		if (crash)
			mt_drain.crash_done = 1;
		struct timespec cpu;
		if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu) == 0)
			mt_drain.cpu_ns = (uint64_t)cpu.tv_sec * 1000000000ull + (uint64_t)cpu.tv_nsec;
		if (want != mt_drain.done_seq) {
			pthread_mutex_lock(&mt_drain.req_mu);
			mt_drain.done_seq = want;
			pthread_cond_broadcast(&mt_drain.req_cv);
			pthread_mutex_unlock(&mt_drain.req_mu);
		}
		if (__atomic_exchange_n(&msgtrace_drain_urgent, 0, __ATOMIC_ACQ_REL))
			continue;
		if (mt_drain.stop_req)
			break;
		msgtrace_drain_wait(WAIT_MS);
	}
	return NULL;
}

int mt_drain_start_thread(void) {
	pthread_attr_t a;
	pthread_attr_init(&a);
	pthread_attr_setstacksize(&a, 256 << 10);
	int ok = pthread_create(&mt_drain.thread, &a, drain_main, NULL) == 0;
	if (ok) {
		msgtrace_drain_running = 1;
		msgtrace_set_full_policy(0);
	}
	pthread_attr_destroy(&a);
	return ok ? 0 : -1;
}
