/*
 * msgtrace interposer runtime, the threads' side: registration (the first traced call of a
 * thread), the chunk pool and the chunk switch (a full chunk), thread exit. Called from the
 * assembly's slow paths through msgtrace_slow_* with every register preserved, so C may do
 * anything here, except take a lock a signal handler on this thread could want.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* pthread_getname_np */
#endif
#include "rt_internal.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#if defined(__APPLE__)
#include <dlfcn.h>
#include <stdio.h>
extern int pthread_threadid_np(pthread_t, uint64_t *);
extern int pthread_main_np(void);
extern int pthread_getname_np(pthread_t, char *, size_t);
#else
#include <sys/syscall.h>
#endif
#if defined(__x86_64__)
#include <cpuid.h>
#endif

_Static_assert(offsetof(struct mt_entry, ret) == E_RET, "E_RET");
_Static_assert(offsetof(struct mt_entry, sp) == E_SP, "E_SP");
_Static_assert(offsetof(struct mt_entry, start) == E_START, "E_START");
_Static_assert(offsetof(struct mt_entry, cls) == E_CLS, "E_CLS");
_Static_assert(offsetof(struct mt_entry, sel) == E_SEL, "E_SEL");
_Static_assert(offsetof(struct mt_entry, save) == E_SAVE, "E_SAVE");
_Static_assert(offsetof(struct mt_entry, rv0) == E_RV0, "E_RV0");
_Static_assert(sizeof(struct mt_entry) == ENTRY_SIZE, "ENTRY_SIZE");
_Static_assert(sizeof(struct mt_record) == RECORD_SIZE, "RECORD_SIZE");
_Static_assert(offsetof(struct mt_thread, top) == T_TOP, "T_TOP");
_Static_assert(offsetof(struct mt_thread, limit) == T_LIMIT, "T_LIMIT");
_Static_assert(offsetof(struct mt_thread, base) == T_BASE, "T_BASE");
_Static_assert(offsetof(struct mt_thread, rec_cur) == T_REC_CUR, "T_REC_CUR");
_Static_assert(offsetof(struct mt_thread, rec_end) == T_REC_END, "T_REC_END");
_Static_assert(offsetof(struct mt_thread, dropped) == T_DROPPED, "T_DROPPED");
_Static_assert(offsetof(struct mt_thread, overflow) == T_OVERFLOW, "T_OVERFLOW");
_Static_assert(offsetof(struct mt_thread, busy) == T_BUSY, "T_BUSY");
_Static_assert(offsetof(struct mt_thread, scratch) == T_SCRATCH, "T_SCRATCH");
_Static_assert(offsetof(struct mt_thread, stack) == T_STACK, "T_STACK");

volatile uint32_t msgtrace_active;
uint64_t msgtrace_min_ticks;
uint64_t msgtrace_xsave_size;
/* The class is read inline as isa & mask (what object_getClass does for ordinary objects); a
 * tagged pointer has no isa and keeps the receiver itself. On Apple platforms Install replaces
 * both with the runtime's own objc_debug_isa_class_mask and objc_debug_taggedpointer_mask (0
 * when tagged pointers are disabled); these are the fallback, the runtime's values per target
 * as objc4-951 computes them (sources and table: masks.go). Tags: the low bit on x86_64 macOS
 * and Mac Catalyst only, the high bit everywhere else (objc-internal.h). Class: ISA_MASK
 * limited to the address space (objc-runtime-new.mm): 47 bits in a macOS process (x86_64,
 * arm64 = the arm64e runtime, the simulators), 36 bits on arm64 devices. Elsewhere (the test
 * runtime, GNUstep) isa is the class and nothing is tagged. */
#if defined(__APPLE__)
#include <TargetConditionals.h>
#endif
#if defined(__APPLE__) && defined(__x86_64__) && !TARGET_OS_SIMULATOR /* macOS, Mac Catalyst */
uint64_t msgtrace_isa_mask = 0x00007ffffffffff8ULL;
uint64_t msgtrace_tag_mask = 1;
#elif defined(__APPLE__) && defined(__x86_64__) /* simulators on Intel Macs */
uint64_t msgtrace_isa_mask = 0x00007ffffffffff8ULL;
uint64_t msgtrace_tag_mask = 0x8000000000000000ULL;
#elif defined(__APPLE__) && defined(__aarch64__) && (TARGET_OS_OSX || TARGET_OS_MACCATALYST || TARGET_OS_SIMULATOR)
uint64_t msgtrace_isa_mask = 0x00007ffffffffff8ULL; /* a macOS process on Apple silicon */
uint64_t msgtrace_tag_mask = 0x8000000000000000ULL;
#elif defined(__APPLE__) && defined(__aarch64__) /* iOS, tvOS, visionOS devices */
uint64_t msgtrace_isa_mask = 0x0000000ffffffff8ULL;
uint64_t msgtrace_tag_mask = 0x8000000000000000ULL;
#else
uint64_t msgtrace_isa_mask = ~(uint64_t)0;
uint64_t msgtrace_tag_mask;
#endif
void *msgtrace_orig_objc_msgSend, *msgtrace_orig_objc_msgSendSuper2;
void *msgtrace_orig_objc_msgSend_stret, *msgtrace_orig_objc_msgSend_fpret;
void *msgtrace_orig_objc_msgSend_fp2ret, *msgtrace_orig_objc_msgSendSuper2_stret;

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
uint64_t msgtrace_exited_totals[4];
static uint32_t cfg_depth = 512;
static uint64_t cfg_pool_bytes = 32ull << 20;
static uint32_t cfg_chunk_bytes = 64 << 10;
static int cfg_drop = 1; /* no drain yet: nothing would ever free a chunk */
static uint64_t threads_registered, waits, wait_ticks;
uint32_t msgtrace_chunk_records;
volatile int msgtrace_drain_running;
int msgtrace_drain_urgent;

/* ---- the pool ----
 * One reserved region, carved into chunks as they are needed (faulted in by the drain ahead of
 * the threads where it can), up to the cap. Free chunks form a lock-free stack of indices whose
 * head carries a version count in its upper half (no ABA: a chunk popped and pushed back
 * changes the version). */
static char *pool_base;
static uint64_t pool_chunk_bytes;
static uint32_t pool_cap, pool_made;
static uint64_t free_head; /* version << 32 | (index + 1) */
static uint32_t free_count;
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER; /* reserving the region */

static struct mt_chunk *chunk_at(uint32_t i) { return (struct mt_chunk *)(pool_base + (uint64_t)i * pool_chunk_bytes); }
static uint32_t chunk_index(struct mt_chunk *c) { return (uint32_t)(((char *)c - pool_base) / pool_chunk_bytes); }
struct mt_chunk *msgtrace_chunk_at(uint32_t i) { return chunk_at(i); }

int msgtrace_configure(uint32_t stack_depth, uint64_t pool_bytes, uint32_t chunk_bytes) {
	if (stack_depth == 0 || stack_depth > (1u << 20) || chunk_bytes < 4096 || chunk_bytes > (16u << 20) ||
	    (chunk_bytes & (chunk_bytes - 1)) || pool_bytes < chunk_bytes || pool_bytes > (64ull << 30))
		return -1;
	pthread_mutex_lock(&pool_lock);
	cfg_depth = stack_depth;
	if (!pool_base) { /* sizes are fixed once the region exists */
		cfg_pool_bytes = pool_bytes;
		cfg_chunk_bytes = chunk_bytes;
	}
	pthread_mutex_unlock(&pool_lock);
	return 0;
}

void msgtrace_set_full_policy(int drop) { __atomic_store_n(&cfg_drop, drop, __ATOMIC_RELEASE); }

static int pool_reserve(void) {
	if (__atomic_load_n(&pool_base, __ATOMIC_ACQUIRE))
		return 0;
	pthread_mutex_lock(&pool_lock);
	if (!pool_base) {
		uint64_t cap = cfg_pool_bytes / cfg_chunk_bytes;
		void *p = mmap(NULL, cap * cfg_chunk_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANON
#ifdef MAP_NORESERVE
				| MAP_NORESERVE
#endif
			       , -1, 0);
		if (p != MAP_FAILED) {
			pool_chunk_bytes = cfg_chunk_bytes;
			pool_cap = (uint32_t)cap;
			msgtrace_chunk_records = (uint32_t)((cfg_chunk_bytes - sizeof(struct mt_chunk)) / sizeof(struct mt_record));
			__atomic_store_n(&pool_base, (char *)p, __ATOMIC_RELEASE);
		}
	}
	pthread_mutex_unlock(&pool_lock);
	return pool_base ? 0 : -1;
}

void msgtrace_pool_push(struct mt_chunk *c) {
	uint32_t i = chunk_index(c);
	c->owner = NULL;
	c->qnext = NULL;
	c->last = 0;
	uint64_t h = __atomic_load_n(&free_head, __ATOMIC_ACQUIRE);
	for (;;) {
		c->next_free = (uint32_t)h;
		uint64_t n = ((h >> 32) + 1) << 32 | (uint64_t)(i + 1);
		if (__atomic_compare_exchange_n(&free_head, &h, n, 1, __ATOMIC_RELEASE, __ATOMIC_ACQUIRE))
			break;
	}
	__atomic_add_fetch(&free_count, 1, __ATOMIC_RELAXED);
}

struct mt_chunk *msgtrace_pool_pop(void) {
	if (!pool_base)
		return NULL;
	uint64_t h = __atomic_load_n(&free_head, __ATOMIC_ACQUIRE);
	for (;;) {
		uint32_t i = (uint32_t)h;
		if (i == 0)
			return NULL;
		/* the chunk stays mapped whatever happens to it: a stale read only fails the CAS */
		uint32_t next = __atomic_load_n(&chunk_at(i - 1)->next_free, __ATOMIC_RELAXED);
		uint64_t n = ((h >> 32) + 1) << 32 | next;
		if (__atomic_compare_exchange_n(&free_head, &h, n, 1, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
			__atomic_sub_fetch(&free_count, 1, __ATOMIC_RELAXED);
			return chunk_at(i - 1);
		}
	}
}

/* Carves one more chunk out of the region, touching every page of it (first touch is the
 * expensive part: better the drain than a recording thread). NULL at the cap. */
static struct mt_chunk *pool_make(void) {
	if (pool_reserve() != 0)
		return NULL;
	uint32_t i = __atomic_load_n(&pool_made, __ATOMIC_RELAXED);
	do {
		if (i >= pool_cap)
			return NULL;
	} while (!__atomic_compare_exchange_n(&pool_made, &i, i + 1, 1, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED));
	struct mt_chunk *c = chunk_at(i);
	for (uint64_t off = 0; off < pool_chunk_bytes; off += 4096)
		((volatile char *)c)[off] = 0;
	return c;
}

int msgtrace_pool_grow(int n) {
	int made = 0;
	for (; made < n; made++) {
		struct mt_chunk *c = pool_make();
		if (!c)
			break;
		msgtrace_pool_push(c);
	}
	return made;
}
uint32_t msgtrace_pool_free_count(void) { return __atomic_load_n(&free_count, __ATOMIC_RELAXED); }
uint32_t msgtrace_pool_made(void) { return __atomic_load_n(&pool_made, __ATOMIC_RELAXED); }
uint32_t msgtrace_pool_cap(void) { return pool_cap; }

/* ---- handed-over chunks: a lock-free stack the drain empties at once ---- */
static struct mt_chunk *handed;

static void hand_over(struct mt_chunk *c) {
	struct mt_chunk *h = __atomic_load_n(&handed, __ATOMIC_RELAXED);
	do
		c->qnext = h;
	while (!__atomic_compare_exchange_n(&handed, &h, c, 1, __ATOMIC_RELEASE, __ATOMIC_RELAXED));
	if (!h) /* the first since the drain's last take: it encodes it now, not at its next period or at exit */
		msgtrace_drain_wake();
}

struct mt_chunk *msgtrace_take_handed(void) {
	struct mt_chunk *c = __atomic_exchange_n(&handed, NULL, __ATOMIC_ACQUIRE), *rev = NULL;
	while (c) { /* newest first: reverse, so each thread's chunks come in order */
		struct mt_chunk *n = c->qnext;
		c->qnext = rev;
		rev = c;
		c = n;
	}
	return rev;
}

/* ---- ring mode: each thread's kept chunks (rt_internal.h) ---- */
int msgtrace_ring_mode;
struct mt_ring *msgtrace_rings;
static uint32_t *free_slots; /* slot arrays given back, linked through their first 8 bytes (registry_lock) */

/* The thread's ring, made at its first chunk switch in ring mode: positions start at the seq
 * of the chunk it will put in first. NULL without memory (its chunks then go to the drain). */
static struct mt_ring *ring_make(struct mt_thread_info *i) {
	uint64_t n = 4;
	while (n < pool_cap)
		n <<= 1;
	uint32_t *slots = NULL;
	pthread_mutex_lock(&msgtrace_registry_lock);
	if (free_slots) {
		slots = free_slots;
		memcpy(&free_slots, slots, sizeof free_slots);
	}
	pthread_mutex_unlock(&msgtrace_registry_lock);
	if (!slots)
		slots = calloc(n, sizeof *slots);
	struct mt_ring *r = calloc(1, sizeof *r);
	if (!slots || !r) {
		free(slots);
		free(r);
		return NULL;
	}
	r->slots = slots;
	r->mask = n - 1;
	r->head = r->tail = i->chunk ? i->chunk->seq : i->nchunks;
	r->first = UINT64_MAX;
	r->id.tid = i->tid;
	r->id.pt = i->pt;
	r->id.main = i->main;
	memcpy(r->id.name, i->name, sizeof r->id.name);
	r->live = i;
	r->state = RING_LIVE;
	struct mt_ring *h = __atomic_load_n(&msgtrace_rings, __ATOMIC_RELAXED);
	do
		r->next = h;
	while (!__atomic_compare_exchange_n(&msgtrace_rings, &h, r, 1, __ATOMIC_RELEASE, __ATOMIC_RELAXED));
	return r;
}

void msgtrace_ring_release(struct mt_ring *r) {
	memcpy(r->slots, &free_slots, sizeof free_slots); /* r->slots stays: a late reader fails its CAS */
	free_slots = r->slots;
	__atomic_store_n(&r->state, RING_DONE, __ATOMIC_RELEASE);
}

/* The owner puts its full chunk in (at position == its seq), with the totals before it. */
static void ring_push(struct mt_ring *r, struct mt_chunk *c) {
	uint64_t calls = 0, first = UINT64_MAX, last = 0;
	for (const struct mt_record *x = c->drained; x < c->used; x++) {
		if (x->cls >> FLAG_SHIFT & F_MARK)
			continue;
		calls++;
		if (x->start < first)
			first = x->start;
		if (x->end > last)
			last = x->end;
	}
	uint32_t s = r->seqlock;
	__atomic_store_n(&r->seqlock, s + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	c->before_calls = r->calls;
	c->before_first = r->first;
	c->before_last = r->last;
	__atomic_store_n(&r->calls, r->calls + calls, __ATOMIC_RELAXED);
	if (first < r->first)
		__atomic_store_n(&r->first, first, __ATOMIC_RELAXED);
	if (last > r->last)
		__atomic_store_n(&r->last, last, __ATOMIC_RELAXED);
	uint64_t t = r->tail;
	__atomic_store_n(&r->slots[t & r->mask], chunk_index(c), __ATOMIC_RELAXED);
	__atomic_store_n(&r->tail, t + 1, __ATOMIC_RELEASE);
	__atomic_store_n(&r->seqlock, s + 2, __ATOMIC_RELEASE);
}

static uint64_t ring_count(struct mt_ring *r) {
	uint64_t h = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE), t = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
	return t > h ? t - h : 0;
}

/* The pool is empty: a kept chunk taken back, the oldest of the thread's own ring when it keeps
 * more than RING_SHARE, else of the ring keeping the most (its own when none keeps more than
 * RING_SHARE). Lock-free: a failed compare-and-swap means another thread took one. NULL when
 * no ring keeps anything (every chunk is some thread's current one). */
static struct mt_chunk *ring_take(struct mt_thread_info *i) {
	struct mt_ring *own = i->ring;
	for (int k = 0; k < 64; k++) {
		uint64_t on = own ? ring_count(own) : 0, vn = 0;
		struct mt_ring *v = NULL;
		if (on > RING_SHARE) {
			v = own, vn = on;
		} else {
			for (struct mt_ring *r = __atomic_load_n(&msgtrace_rings, __ATOMIC_ACQUIRE); r; r = r->next) {
				uint32_t st = __atomic_load_n(&r->state, __ATOMIC_ACQUIRE);
				uint64_t n = st == RING_LIVE || st == RING_EXITED ? ring_count(r) : 0;
				if (n > vn)
					v = r, vn = n;
			}
			if (vn <= RING_SHARE && on)
				v = own, vn = on;
		}
		if (!v)
			return NULL;
		uint64_t h = __atomic_load_n(&v->head, __ATOMIC_ACQUIRE), t = __atomic_load_n(&v->tail, __ATOMIC_ACQUIRE);
		if (h >= t)
			continue;
		uint32_t idx = __atomic_load_n(&v->slots[h & v->mask], __ATOMIC_RELAXED);
		if (__atomic_compare_exchange_n(&v->head, &h, h + 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED) && idx < pool_cap)
			return chunk_at(idx);
	}
	return NULL;
}

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
		i->ring = ring_make(i);
	if (old) {
		settle(i);
		old->used = t->rec_cur;
		i->handed += (uint64_t)(t->rec_cur - old->rec);
		__atomic_store_n(&i->chunk, NULL, __ATOMIC_RELEASE);
		t->rec_cur = t->rec_end = NULL;
		if (i->ring)
			ring_push(i->ring, old);
		else
			hand_over(old);
	}
	uint64_t wait_start = 0;
	struct mt_chunk *c = msgtrace_pool_pop();
	if (!c)
		c = pool_make();
	if (!c && i->ring) /* ring mode: never waits */
		c = ring_take(i);
	if (!c && !i->ring && !__atomic_load_n(&cfg_drop, __ATOMIC_ACQUIRE) && msgtrace_drain_running) {
		wait_start = msgtrace_now_ticks();
		if (!__atomic_exchange_n(&msgtrace_drain_urgent, 1, __ATOMIC_ACQ_REL))
			msgtrace_drain_wake();
		long us = 20;
		while (!(c = msgtrace_pool_pop()) && msgtrace_drain_running) {
			sleep_us(us);
			if (us < 1000)
				us *= 2;
		}
	}
	if (!c) {
		if (t->dropped == i->lost_reported && !i->lost_since)
			i->lost_since = msgtrace_now_ticks();
		return;
	}
	uint64_t now = msgtrace_now_ticks();
	struct mt_record m[3];
	uint32_t n = 0;
	if (wait_start) {
		__atomic_add_fetch(&waits, 1, __ATOMIC_RELAXED);
		__atomic_add_fetch(&wait_ticks, now - wait_start, __ATOMIC_RELAXED);
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
	pthread_mutex_lock(&pool_lock);
	uint32_t depth = cfg_depth;
	pthread_mutex_unlock(&pool_lock);
	struct mt_thread_info *info = calloc(1, sizeof *info + (size_t)depth * sizeof(struct mt_entry));
	if (!info || pool_reserve() != 0) {
		free(info);
		return; /* stays untraced */
	}
	info->tid = msgtrace_thread_id();
	info->pt = pthread_self();
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
	threads_registered++;
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
	for (int k = 0; k < 200 && (t->dropped != i->lost_reported || t->overflow != i->overflow_reported); k++) {
		next_chunk(i, 0); /* hands the current chunk over; a new one starts with the marks */
		if (!i->chunk)
			sleep_us(500);
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
			ring_push(r, c);
			__atomic_store_n(&r->state, RING_EXITED, __ATOMIC_RELEASE);
			__atomic_store_n(&i->exited, 1, __ATOMIC_RELEASE);
		} else {
			__atomic_store_n(&i->exited, 1, __ATOMIC_RELEASE);
			hand_over(c);
		}
	} else {
		if (r)
			__atomic_store_n(&r->state, RING_EXITED, __ATOMIC_RELEASE);
		__atomic_store_n(&i->exited, 2, __ATOMIC_RELEASE); /* exited without a last chunk */
	}
}

/* Totals of a thread the drain is about to free. */
void msgtrace_thread_gone_mark(struct mt_thread_info *i) {
	msgtrace_exited_totals[0] += i->handed;
	msgtrace_exited_totals[1] += i->marks;
	msgtrace_exited_totals[2] += i->t.dropped;
	msgtrace_exited_totals[3] += i->t.overflow;
}

void msgtrace_counters(struct mt_counters *c) {
	memset(c, 0, sizeof *c);
	pthread_mutex_lock(&msgtrace_registry_lock);
	c->threads = threads_registered;
	uint64_t recs = msgtrace_exited_totals[0], marks = msgtrace_exited_totals[1];
	c->dropped = msgtrace_exited_totals[2];
	c->overflow = msgtrace_exited_totals[3];
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
	c->waits = __atomic_load_n(&waits, __ATOMIC_RELAXED);
	c->wait_ticks = __atomic_load_n(&wait_ticks, __ATOMIC_RELAXED);
	c->chunks = msgtrace_pool_made();
	c->written = msgtrace_stream_written();
	c->lost_bytes = msgtrace_stream_lost_bytes();
}

/* Tests without a drain. */
void msgtrace_visit(mt_visit_fn fn, void *ctx) {
	pthread_mutex_lock(&msgtrace_registry_lock);
	struct mt_chunk *h = __atomic_load_n(&handed, __ATOMIC_ACQUIRE);
	for (struct mt_chunk *c = h; c; c = c->qnext) {
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
	pthread_mutex_init(&pool_lock, NULL);
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
		free(i); /* its thread does not exist here */
	}
	msgtrace_registry = keep;
	/* rings: the parent's history; the chunks they keep go back to the pool */
	for (struct mt_ring *r = msgtrace_rings; r; r = r->next) {
		if (r->state == RING_LIVE || r->state == RING_EXITED)
			for (uint64_t p = r->head; p < r->tail; p++)
				msgtrace_pool_push(chunk_at(r->slots[p & r->mask]));
		r->head = r->tail;
		if (!keep || keep->ring != r)
			r->state = RING_GONE;
	}
	memset(msgtrace_exited_totals, 0, sizeof msgtrace_exited_totals);
	threads_registered = keep ? 1 : 0;
	waits = wait_ticks = 0;
	if (keep) {
		keep->next = NULL;
		keep->tid = msgtrace_thread_id();
		keep->main = 1;
		keep->announced = 0;
		keep->snap_top = keep->snap_start = 0;
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

uint64_t msgtrace_now_ticks(void) {
#if defined(__x86_64__)
	uint32_t lo, hi;
	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	return (uint64_t)hi << 32 | lo;
#elif defined(__aarch64__)
	uint64_t v;
	__asm__ volatile("mrs %0, CNTVCT_EL0" : "=r"(v));
	return v;
#else
	return 0;
#endif
}

uint64_t msgtrace_tick_hz(void) {
#if defined(__aarch64__)
	uint64_t f;
	__asm__ volatile("mrs %0, CNTFRQ_EL0" : "=r"(f));
	return f;
#else
	return 0;
#endif
}

/* amd64: the size of the XSAVE area for every state component the CPU has (CPUID 0xD), so that the slow paths save every vector register (ymm/zmm upper halves included)
 * and the x87 stack before calling C; 0 falls back to FXSAVE. */
__attribute__((constructor)) static void msgtrace_rt_init(void) {
#if defined(__x86_64__)
	unsigned a, b, c, d;
	if (__get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 27)) /* OSXSAVE */ && __get_cpuid_count(0xd, 0, &a, &b, &c, &d) && c >= 576)
		msgtrace_xsave_size = (c + 63) & ~63u; /* ECX: every supported component (macOS enables AVX-512 per thread) */
#endif
	pthread_once(&key_once, make_key); /* darwin: the assembly reads the key's slot from the first call */
}
