/*
 * Ring mode (the flight recorder), the threads' side: each thread's ring of kept chunks
 * (rt_internal.h explains the scheme): made at a thread's first chunk switch, a full chunk put
 * in with the totals before it, a chunk taken back when the pool is empty (lock-free, never
 * waiting), slot arrays given back by the drain and reused. The drain's side, the dump, is
 * drain_ring.c.
 * Depends on: rt_pool.c.
 */
#include "rt_internal.h"

#include <stdlib.h>
#include <string.h>

int msgtrace_ring_mode;
struct mt_ring *msgtrace_rings;
/* Slot arrays given back, linked through their first 8 bytes. The lock is taken after the
 * registry lock where both are held (the drain's release). */
static struct {
	uint32_t *free;
	pthread_mutex_t lock;
} spare = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* The thread's ring, made at its first chunk switch in ring mode: positions start at the seq
 * of the chunk it will put in first. NULL without memory (its chunks then go to the drain). */
struct mt_ring *msgtrace_ring_make(struct mt_thread_info *i) {
	uint64_t n = 4;
	while (n < msgtrace_pool_cap())
		n <<= 1;
	uint32_t *slots = NULL;
	pthread_mutex_lock(&spare.lock);
	if (spare.free) {
		slots = spare.free;
		memcpy(&spare.free, slots, sizeof spare.free);
	}
	pthread_mutex_unlock(&spare.lock);
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
	pthread_mutex_lock(&spare.lock);
	memcpy(r->slots, &spare.free, sizeof spare.free); /* r->slots stays: a late reader fails its CAS */
	spare.free = r->slots;
	pthread_mutex_unlock(&spare.lock);
	__atomic_store_n(&r->state, RING_DONE, __ATOMIC_RELEASE);
}

/* The owner puts its full chunk in (at position == its seq), with the totals before it. */
void msgtrace_ring_push(struct mt_ring *r, struct mt_chunk *c) {
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
	__atomic_store_n(&r->slots[t & r->mask], msgtrace_chunk_index(c), __ATOMIC_RELAXED);
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
struct mt_chunk *msgtrace_ring_take(struct mt_thread_info *i) {
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
		if (__atomic_compare_exchange_n(&v->head, &h, h + 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED) && idx < msgtrace_pool_cap())
			return msgtrace_chunk_at(idx);
	}
	return NULL;
}

void msgtrace_rings_after_fork(struct mt_ring *keep) {
	pthread_mutex_init(&spare.lock, NULL);
	for (struct mt_ring *r = msgtrace_rings; r; r = r->next) {
		if (r->state == RING_LIVE || r->state == RING_EXITED)
			for (uint64_t p = r->head; p < r->tail; p++)
				msgtrace_pool_push(msgtrace_chunk_at(r->slots[p & r->mask]));
		r->head = r->tail;
		if (r != keep)
			r->state = RING_GONE;
	}
}
