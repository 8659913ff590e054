/*
 * Thread records, the threads' side of the recorder: a thread's state found through TLS
 * (registration at its first traced call, with the state made as the thread was created where
 * there is one, rt_newthread.c), the chunk switch when its chunk is full (a chunk
 * from the pool, the ring or, after a wait, the drain), the marks a switch makes (a wait,
 * losses, overflow), its exit (open calls closed as unwound, the last chunk handed over), the
 * registry of threads and the counters, and the reset of all of it in a fork child. Called
 * from the assembly's slow paths through msgtrace_slow_* with every register preserved, so C
 * may do anything here, except take a lock a signal handler on this thread could want.
 * Depends on: rt.c, rt_pool.c, rt_handover.c, rt_ring.c, rt_newthread.c.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* pthread_getname_np */
#endif
#include "rt_internal.h"
#include "waits.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#if defined(__APPLE__)
#include <dlfcn.h>
#include <mach/mach.h>
#include <stdio.h>
extern int pthread_threadid_np(pthread_t, uint64_t *);
extern int pthread_main_np(void);
extern int pthread_getname_np(pthread_t, char *, size_t);
#else
#include <sys/syscall.h>
#endif

/* Losses at a thread's exit need a chunk to carry their mark: it tries this many times,
 * EXIT_RETRY_US apart (100 ms). */
#define EXIT_TRIES 200
#define EXIT_RETRY_US 500
/* A thread waiting for a chunk sleeps from WAIT_FIRST_US, doubling up to WAIT_MAX_US. */
#define WAIT_FIRST_US 20
#define WAIT_MAX_US 1000
/* ... and for a drain expected to start (msgtrace_drain_expected) up to EXPECT_MAX_US. */
#define EXPECT_MAX_US 2000000

static void thread_exit(void *);

/* A thread's state is found through TLS by the assembly; a pthread key with a destructor
 * tells us when the thread goes. */
static pthread_key_t exit_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
#if defined(__APPLE__)
/* darwin: the key's slot is what the assembly reads straight from the thread's TSD area
 * (%gs:key*8 on x86_64, TPIDRRO_EL0 on arm64): no call on the hot path. */
uint64_t msgtrace_tsd_key MT_HIDDEN;
static void make_key(void) {
	if (pthread_key_create(&exit_key, thread_exit) == 0)
		msgtrace_tsd_key = exit_key;
}
static void set_self(struct mt_thread *t, int track_exit) {
	(void)track_exit;
	pthread_once(&key_once, make_key);
	pthread_setspecific(exit_key, t);
}
static struct mt_thread *get_self(void) {
	pthread_once(&key_once, make_key);
	return pthread_getspecific(exit_key);
}
uint64_t msgtrace_thread_id(void) {
	uint64_t id = 0;
	pthread_threadid_np(NULL, &id);
	return id;
}
#else
/* ELF: an initial-exec TLS variable, read by the assembly as %fs:offset / TPIDR_EL0+offset;
 * the key only carries the destructor. */
__thread struct mt_thread *msgtrace_tls __attribute__((tls_model("initial-exec")));
static void make_key(void) { pthread_key_create(&exit_key, thread_exit); }
static void set_self(struct mt_thread *t, int track_exit) {
	msgtrace_tls = t;
	if (track_exit) {
		pthread_once(&key_once, make_key);
		pthread_setspecific(exit_key, t);
	}
}
static struct mt_thread *get_self(void) { return msgtrace_tls; }
uint64_t msgtrace_thread_id(void) { return (uint64_t)syscall(SYS_gettid); }
#endif

/* Threads we could not give state to, and threads on their way out: always pass through. */
static struct mt_thread untraced = {.busy = 1};
void msgtrace_set_untraced_self(void) { set_self(&untraced, 0); }

pthread_mutex_t msgtrace_registry_lock = PTHREAD_MUTEX_INITIALIZER;
struct mt_thread_info *msgtrace_registry;

/* Counters of the registry's threads (registry lock), and of the waits (atomic). */
static struct {
	uint64_t registered;                      /* threads that registered */
	uint64_t waits, wait_ticks;               /* waits for a chunk, and their length */
	/* totals of the threads the drain freed */
	uint64_t gone_records, gone_marks, gone_dropped, gone_overflow;
} totals;

/* ---- a thread's chunks ---- */

static struct mt_thread_info *info_of(struct mt_thread *t) {
	return (struct mt_thread_info *)((char *)t - offsetof(struct mt_thread_info, t));
}

static void sleep_us(long us) {
	struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
	nanosleep(&ts, NULL);
}

/* A record written from C (marks, calls closed at thread exit), or dropped and counted. */
static void put(struct mt_thread_info *i, struct mt_record r);

static struct mt_record mark(int kind, uint64_t start, uint64_t end, uint64_t count) {
	return (struct mt_record){start, end, (uint64_t)kind | (uint64_t)F_MARK << FLAG_SHIFT, count};
}

/* The chunk becomes the thread's current one, with room for n records. */
static void adopt(struct mt_thread_info *i, struct mt_chunk *c, uint32_t n) {
	struct mt_thread *t = &i->t;
	c->owner = i;
	c->used = NULL;
	c->drained = c->rec;
	c->last = 0;
	c->seq = i->nchunks;
	__atomic_store_n(&i->nchunks, c->seq + 1, __ATOMIC_RELAXED); /* published with the chunk */
	t->rec_end = c->rec + n;
	__atomic_store_n(&i->chunk, c, __ATOMIC_RELEASE);
	__atomic_store_n(&t->rec_cur, c->rec, __ATOMIC_RELEASE);
}

/* The current chunk was given room for one record (marks wait for it, see defer_gen): the
 * marks follow it, unless the drain took them, and the chunk's whole room is back. */
static void settle(struct mt_thread_info *i) {
	struct mt_thread *t = &i->t;
	struct mt_chunk *c = i->chunk;
	if (!c || t->rec_end == c->rec + msgtrace_chunk_records)
		return;
	t->rec_end = c->rec + msgtrace_chunk_records;
	uint64_t g = __atomic_load_n(&i->defer_gen, __ATOMIC_RELAXED);
	if (!(g & 1) || !__atomic_compare_exchange_n(&i->defer_gen, &g, g & ~1ull, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
		return;
	for (uint32_t k = 0; k < i->ndefer && t->rec_cur < t->rec_end; k++) {
		*t->rec_cur = i->defer[k];
		i->marks++;
		__atomic_store_n(&t->rec_cur, t->rec_cur + 1, __ATOMIC_RELEASE);
	}
}

int msgtrace_claim_marks(struct mt_thread_info *i, struct mt_chunk *c, struct mt_record *cur, struct mt_record *out) {
	uint64_t g = __atomic_load_n(&i->defer_gen, __ATOMIC_ACQUIRE);
	if (!(g & 1) || cur != c->rec + 1 || __atomic_load_n(&i->defer_seq, __ATOMIC_RELAXED) != c->seq)
		return 0;
	uint32_t n = __atomic_load_n(&i->ndefer, __ATOMIC_RELAXED);
	if (n > 3)
		return 0;
	for (uint32_t k = 0; k < n; k++) { /* the thread changes them only after a new generation */
		out[k].start = __atomic_load_n(&i->defer[k].start, __ATOMIC_RELAXED);
		out[k].end = __atomic_load_n(&i->defer[k].end, __ATOMIC_RELAXED);
		out[k].cls = __atomic_load_n(&i->defer[k].cls, __ATOMIC_RELAXED);
		out[k].sel = __atomic_load_n(&i->defer[k].sel, __ATOMIC_RELAXED);
	}
	/* the chunk was current and waiting for its first record when the marks were made, and
	 * stays so until the thread settles (which changes the generation) */
	if (!__atomic_compare_exchange_n(&i->defer_gen, &g, g & ~1ull, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
		return 0;
	return (int)n;
}

/* Gives the thread a new chunk: from the pool, or a fresh one while under the cap, or (no
 * drain or MSGTRACE_FULL=drop) none; otherwise it waits for the drain to free one, and the
 * wait goes on its timeline. Marks for what happened since the last chunk (the wait, losses,
 * overflow) come first; with pending set, a record that ended before them (the one the
 * assembly or put is about to write) is still to come: it goes first and the marks follow. */
static void next_chunk(struct mt_thread_info *i, int pending) {
	struct mt_thread *t = &i->t;
	struct mt_chunk *old = i->chunk;
	if (!i->ring && __atomic_load_n(&msgtrace_ring_mode, __ATOMIC_ACQUIRE))
		i->ring = msgtrace_ring_make(i);
	if (old) {
		settle(i);
		old->used = t->rec_cur;
		i->handed += (uint64_t)(t->rec_cur - old->rec);
		__atomic_store_n(&i->chunk, NULL, __ATOMIC_RELEASE);
		t->rec_cur = t->rec_end = NULL;
		if (i->ring)
			msgtrace_ring_push(i->ring, old);
		else
			msgtrace_hand_over(old);
	}
	uint64_t wait_start = 0;
	struct mt_chunk *c = msgtrace_pool_pop();
	if (!c)
		c = msgtrace_pool_make();
	if (!c && i->ring) /* ring mode: never waits */
		c = msgtrace_ring_take(i);
	/* recording started before the drain (the early start), the pool at its cap: the drain is
	 * on its way (a Go runtime's start, ms); a bound keeps a start that never comes from
	 * holding the thread (then the calls are dropped and counted) */
	for (long waited = 0; !c && !i->ring && __atomic_load_n(&msgtrace_drain_expected, __ATOMIC_ACQUIRE) &&
			      !msgtrace_drain_running && waited < EXPECT_MAX_US; waited += WAIT_MAX_US)
		sleep_us(WAIT_MAX_US);
	if (!c && !i->ring && !msgtrace_full_policy_drop() && msgtrace_drain_running) {
		wait_start = msgtrace_now_ticks();
		if (!__atomic_exchange_n(&msgtrace_drain_urgent, 1, __ATOMIC_ACQ_REL))
			msgtrace_drain_wake();
		long us = WAIT_FIRST_US;
		while (!(c = msgtrace_pool_pop()) && msgtrace_drain_running) {
			sleep_us(us);
			if (us < WAIT_MAX_US)
				us *= 2;
		}
	}
	if (!c) {
		if (t->dropped == i->lost_reported && !i->lost_since)
			i->lost_since = msgtrace_now_ticks();
		return;
	}
	/* the process's first chunk: the drain creates and begins the stream file now, on its
	 * thread, rather than the exit on this one (a short program's only write) */
	static int begun;
	if (!old && !i->ring && !__atomic_load_n(&begun, __ATOMIC_RELAXED) && !__atomic_exchange_n(&begun, 1, __ATOMIC_ACQ_REL)) {
		__atomic_store_n(&msgtrace_drain_begin_req, 1, __ATOMIC_RELEASE);
		msgtrace_drain_wake();
	}
	uint64_t now = msgtrace_now_ticks();
	struct mt_record m[3];
	uint32_t n = 0;
	if (wait_start) {
		__atomic_add_fetch(&totals.waits, 1, __ATOMIC_RELAXED);
		__atomic_add_fetch(&totals.wait_ticks, now - wait_start, __ATOMIC_RELAXED);
		m[n++] = mark(MARK_WAIT, wait_start, now, 0);
	}
	if (t->dropped != i->lost_reported) {
		m[n++] = mark(MARK_LOST, i->lost_since ? i->lost_since : now, now, t->dropped - i->lost_reported);
		i->lost_reported = t->dropped;
		i->lost_since = 0;
	}
	if (t->overflow != i->overflow_reported) {
		m[n++] = mark(MARK_OVERFLOW, now, now, t->overflow - i->overflow_reported);
		i->overflow_reported = t->overflow;
	}
	if (n && pending) {
		memcpy(i->defer, m, n * sizeof *m);
		i->ndefer = n;
		i->defer_seq = i->nchunks;
		__atomic_store_n(&i->defer_gen, ((i->defer_gen >> 1) + 1) << 1 | 1, __ATOMIC_RELEASE);
		adopt(i, c, 1);
		return;
	}
	adopt(i, c, msgtrace_chunk_records);
	for (uint32_t k = 0; k < n; k++)
		put(i, m[k]);
}

static void put(struct mt_thread_info *i, struct mt_record r) {
	struct mt_thread *t = &i->t;
	if (t->rec_cur >= t->rec_end) {
		settle(i);
		if (t->rec_cur >= t->rec_end) {
			if (r.cls >> FLAG_SHIFT & F_MARK)
				return; /* no room for a mark: it is made again with the next chunk */
			next_chunk(i, 1);
			if (t->rec_cur >= t->rec_end) {
				t->dropped++;
				return;
			}
		}
	}
	*t->rec_cur = r;
	if (r.cls >> FLAG_SHIFT & F_MARK)
		i->marks++;
	__atomic_store_n(&t->rec_cur, t->rec_cur + 1, __ATOMIC_RELEASE);
}

/* A mark made by the library's C on the calling thread (hops.c): registered first if it made no
 * traced call yet. Unlike put's marks it is never made again: with no room it takes a chunk as a
 * call's record would (the marks a switch makes follow it). */
int msgtrace_thread_mark(int kind, uint64_t start, uint64_t end, uint64_t count) {
	struct mt_thread *t = get_self();
	if (!t) {
		msgtrace_register_thread();
		t = get_self();
	}
	if (!t || t == &untraced || t->busy)
		return -1;
	t->busy++;
	struct mt_thread_info *i = info_of(t);
	if (t->rec_cur >= t->rec_end) {
		settle(i);
		if (t->rec_cur >= t->rec_end)
			next_chunk(i, 1);
	}
	int ok = t->rec_cur < t->rec_end;
	if (ok) {
		*t->rec_cur = mark(kind, start, end, count);
		i->marks++;
		__atomic_store_n(&t->rec_cur, t->rec_cur + 1, __ATOMIC_RELEASE);
	}
	t->busy--;
	return ok ? 0 : -1;
}

/* A wait or a release (waits.c, waits.h): a mark record at the shadow stack's depth, written
 * as a call's is (a full chunk is switched, never dropped while one can be had). */
static __thread int inside_tracer __attribute__((tls_model("initial-exec")));
void msgtrace_inside_tracer(int delta) { inside_tracer += delta; }

void msgtrace_put_wait(uint64_t start, uint64_t end, uint64_t kind_holder, uint64_t sel) {
	struct mt_thread *t = get_self();
	if (!t || t == &untraced || t->busy || inside_tracer || !msgtrace_active)
		return;
	t->busy++;
	struct mt_thread_info *i = info_of(t);
	uint64_t depth = (uint64_t)(t->top - t->base);
	if (depth > DEPTH_MAX)
		depth = DEPTH_MAX;
	if (t->rec_cur >= t->rec_end) {
		settle(i);
		if (t->rec_cur >= t->rec_end)
			next_chunk(i, 1);
	}
	if (t->rec_cur < t->rec_end) {
		*t->rec_cur = (struct mt_record){start, end, kind_holder | depth << DEPTH_SHIFT | (uint64_t)F_MARK << FLAG_SHIFT, sel};
		i->marks++;
		__atomic_store_n(&t->rec_cur, t->rec_cur + 1, __ATOMIC_RELEASE);
	}
	t->busy--;
}

/* Slow path: the thread's chunk is full (or it has none, or room for one record only); the
 * assembly writes its record when this returns. */
void msgtrace_chunk_full(void) {
	struct mt_thread *t = get_self();
	if (!t || t == &untraced)
		return;
	t->busy++;
	struct mt_thread_info *i = info_of(t);
	settle(i);
	if (t->rec_cur >= t->rec_end)
		next_chunk(i, 1);
	t->busy--;
}

struct mt_thread *msgtrace_current_thread(void) { return get_self(); }

/* Slow path: the first traced call of this thread. */
void msgtrace_register_thread(void) {
	if (get_self())
		return;
	set_self(&untraced, 0); /* a signal handler's sends pass through meanwhile */
	uint32_t depth = msgtrace_stack_depth();
	if (msgtrace_pool_reserve() != 0)
		return; /* stays untraced */
	/* made before the thread started (Linux), else made now */
	struct mt_thread_info *info = msgtrace_take_made_state(depth);
	if (!info) {
		info = calloc(1, msgtrace_state_size(depth));
		if (!info)
			return;
		info->tid = msgtrace_thread_id();
		info->pt = pthread_self();
	}
	pthread_getname_np(pthread_self(), info->name, sizeof info->name);
#if defined(__APPLE__)
	if (!info->name[0]) {
		/* a GCD worker has no pthread name: the label of the queue its first traced call ran
		 * on (dispatch_queue_get_label(DISPATCH_CURRENT_QUEUE_LABEL)) names it */
		static const char *(*queue_label)(void *);
		if (!queue_label)
			queue_label = (const char *(*)(void *))dlsym(RTLD_DEFAULT, "dispatch_queue_get_label");
		const char *l = queue_label ? queue_label(NULL) : NULL;
		if (l && l[0])
			snprintf(info->name, sizeof info->name, "%s", l);
	}
	info->main = pthread_main_np();
	info->port = mach_thread_self(); /* a send right of our own: the name stays this thread's */
#else
	info->main = info->tid == (uint64_t)getpid();
#endif
	struct mt_thread *t = &info->t;
	t->base = t->top = t->stack;
	t->limit = t->stack + depth;
	t->busy = 1;
	pthread_mutex_lock(&msgtrace_registry_lock);
	info->next = msgtrace_registry;
	msgtrace_registry = info;
	totals.registered++;
	pthread_mutex_unlock(&msgtrace_registry_lock);
	next_chunk(info, 0);
	t->busy = 0;
	set_self(t, 1);
}

/* TLS destructor: calls still open are closed as unwound (pthread_exit, a cancellation), the
 * last chunk goes to the drain, which frees the state. */
static void thread_exit(void *p) {
	struct mt_thread *t = p;
	if (!t || t == &untraced)
		return;
	struct mt_thread_info *i = info_of(t);
	set_self(&untraced, 0); /* later destructors' sends pass through */
	t->busy = 1;
	settle(i);
	/* losses not marked yet need a chunk to carry their mark: exits are rare, so the thread
	 * may wait a little for one (up to 100 ms) even under MSGTRACE_FULL=drop */
	for (int k = 0; k < EXIT_TRIES && (t->dropped != i->lost_reported || t->overflow != i->overflow_reported); k++) {
		next_chunk(i, 0); /* hands the current chunk over; a new one starts with the marks */
		if (!i->chunk)
			sleep_us(EXIT_RETRY_US);
	}
	uint64_t now = msgtrace_now_ticks();
	while (t->top > t->base) {
		struct mt_entry *e = --t->top;
		put(i, (struct mt_record){e->start, now, e->cls | (uint64_t)F_UNWOUND << FLAG_SHIFT, e->sel});
	}
	settle(i);
	struct mt_chunk *c = i->chunk;
	if (!c) { /* no chunk to carry the news: take one if any, else the drain finds exited */
		c = msgtrace_pool_pop();
		if (c)
			adopt(i, c, 0);
	}
	struct mt_ring *r = i->ring;
	if (r) { /* its name as it goes, for dumps after it is gone */
		pthread_getname_np(pthread_self(), r->id.name, sizeof r->id.name);
		if (!r->id.name[0])
			memcpy(r->id.name, i->name, sizeof r->id.name);
	}
	if (c) {
		c->used = t->rec_cur;
		c->last = 1;
		i->handed += (uint64_t)(t->rec_cur - c->rec);
		__atomic_store_n(&i->chunk, NULL, __ATOMIC_RELEASE);
		if (r) {
			msgtrace_ring_push(r, c);
			__atomic_store_n(&r->state, RING_EXITED, __ATOMIC_RELEASE);
			__atomic_store_n(&i->exited, EXITED_LAST_CHUNK, __ATOMIC_RELEASE);
		} else {
			__atomic_store_n(&i->exited, EXITED_LAST_CHUNK, __ATOMIC_RELEASE);
			msgtrace_hand_over(c);
		}
	} else {
		if (r)
			__atomic_store_n(&r->state, RING_EXITED, __ATOMIC_RELEASE);
		__atomic_store_n(&i->exited, EXITED_NO_CHUNK, __ATOMIC_RELEASE);
	}
}

/* Totals of a thread the drain is about to free. */
void msgtrace_thread_gone_mark(struct mt_thread_info *i) {
	totals.gone_records += i->handed;
	totals.gone_marks += i->marks;
	totals.gone_dropped += i->t.dropped;
	totals.gone_overflow += i->t.overflow;
}

void msgtrace_recorder_counters(struct mt_counters *c) {
	memset(c, 0, sizeof *c);
	pthread_mutex_lock(&msgtrace_registry_lock);
	c->threads = totals.registered;
	uint64_t recs = totals.gone_records, marks = totals.gone_marks;
	c->dropped = totals.gone_dropped;
	c->overflow = totals.gone_overflow;
	for (struct mt_thread_info *i = msgtrace_registry; i; i = i->next) {
		struct mt_chunk *ch = __atomic_load_n(&i->chunk, __ATOMIC_ACQUIRE);
		struct mt_record *cur = __atomic_load_n(&i->t.rec_cur, __ATOMIC_ACQUIRE);
		recs += __atomic_load_n(&i->handed, __ATOMIC_RELAXED);
		if (ch && cur >= ch->rec && cur <= ch->rec + msgtrace_chunk_records)
			recs += (uint64_t)(cur - ch->rec);
		marks += __atomic_load_n(&i->marks, __ATOMIC_RELAXED);
		c->dropped += __atomic_load_n(&i->t.dropped, __ATOMIC_RELAXED);
		c->overflow += __atomic_load_n(&i->t.overflow, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&msgtrace_registry_lock);
	c->recorded = recs - marks;
	c->waits = __atomic_load_n(&totals.waits, __ATOMIC_RELAXED);
	c->wait_ticks = __atomic_load_n(&totals.wait_ticks, __ATOMIC_RELAXED);
	c->chunks = msgtrace_pool_made();
	msgtrace_made_state_counters(&c->states_made, &c->states_registered, &c->states_unused);
}

/* Tests without a drain. */
void msgtrace_visit(mt_visit_fn fn, void *ctx) {
	pthread_mutex_lock(&msgtrace_registry_lock);
	for (struct mt_chunk *c = msgtrace_handed_peek(); c; c = c->qnext) {
		fn(ctx, c->owner ? c->owner->tid : 0, c->rec, (uint64_t)(c->used - c->rec), 0, 0);
	}
	for (struct mt_thread_info *i = msgtrace_registry; i; i = i->next) {
		struct mt_chunk *c = i->chunk;
		uint64_t n = c ? (uint64_t)(i->t.rec_cur - c->rec) : 0;
		fn(ctx, i->tid, c ? c->rec : NULL, n, i->t.dropped, i->t.overflow);
	}
	pthread_mutex_unlock(&msgtrace_registry_lock);
}

void msgtrace_recycle_all(void) {
	for (struct mt_chunk *c = msgtrace_take_handed(), *n; c; c = n) {
		n = c->qnext;
		msgtrace_pool_push(c);
	}
}

/* Child after fork: only the forking thread exists. Other threads' state and every chunk
 * handed over belong to the parent's stream; the forking thread's current chunk continues
 * from where it is (the drain starts it where the fork left it). */
void msgtrace_reset_after_fork(void) {
	pthread_mutex_init(&msgtrace_registry_lock, NULL);
	msgtrace_pool_after_fork();
	struct mt_thread *self = get_self();
	struct mt_thread_info *keep = NULL;
	msgtrace_recycle_all();
	for (struct mt_thread_info *i = msgtrace_registry, *n; i; i = n) {
		n = i->next;
		if (self && &i->t == self) {
			keep = i;
			continue;
		}
		if (i->chunk)
			msgtrace_pool_push(i->chunk);
		free(i->drain);
		free(i); /* its thread does not exist here */
	}
	msgtrace_registry = keep;
	/* rings: the parent's history; the chunks they keep go back to the pool */
	msgtrace_rings_after_fork(keep ? keep->ring : NULL);
	memset(&totals, 0, sizeof totals);
	totals.registered = keep ? 1 : 0;
	if (keep) {
		keep->next = NULL;
		keep->tid = msgtrace_thread_id();
		keep->main = 1;
#if defined(__APPLE__)
		keep->port = mach_thread_self(); /* ports are not inherited */
#endif
		free(keep->drain); /* the drain knew the parent's stream */
		keep->drain = NULL;
		keep->handed = keep->marks = 0;
		keep->t.dropped = keep->lost_reported = 0;
		keep->t.overflow = keep->overflow_reported = 0;
		keep->defer_gen &= ~1ull; /* marks of the parent's */
		keep->taken = keep->nchunks;
		if (keep->ring) {
			struct mt_ring *r = keep->ring;
			r->head = r->tail = keep->chunk ? keep->chunk->seq : keep->nchunks;
			r->calls = r->last = r->seqlock = 0;
			r->first = UINT64_MAX;
			r->id.tid = keep->tid;
			r->id.main = 1;
			r->live = keep;
		}
		if (keep->chunk) {
			keep->chunk->drained = keep->t.rec_cur;
			keep->handed = -(uint64_t)(keep->t.rec_cur - keep->chunk->rec); /* count from here */
			keep->taken = keep->chunk->seq; /* the older ones are the parent's */
		}
	}
}


/* darwin: the assembly reads the key's slot from the first call. */
__attribute__((constructor)) static void thread_key_init(void) { pthread_once(&key_once, make_key); }
