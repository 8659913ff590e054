/*
 * The chunk pool. One reserved region, carved into chunks as they are needed (faulted in by
 * the drain ahead of the threads where it can), up to the cap. Free chunks form a lock-free
 * stack of indices whose head carries a version count in its upper half (no ABA: a chunk
 * popped and pushed back changes the version). Also the recorder's sizes (msgtrace_configure).
 * Depends on: rt.h only.
 */
#include "rt_internal.h"

#include <sys/mman.h>

/* Shadow stack entries per thread, pool bytes and chunk bytes by default. */
#define DEFAULT_DEPTH 512
#define DEFAULT_POOL_BYTES (32ull << 20)
#define DEFAULT_CHUNK_BYTES (64u << 10)
#define PAGE_TOUCH 4096

static struct {
	char *base;
	uint64_t chunk_bytes;
	uint32_t cap, made;
	uint64_t free_head; /* version << 32 | (index + 1) */
	uint32_t free_count;
	pthread_mutex_t lock; /* reserving the region, the sizes */
	uint32_t cfg_depth;
	uint64_t cfg_pool_bytes;
	uint32_t cfg_chunk_bytes;
} pool = {.lock = PTHREAD_MUTEX_INITIALIZER, .cfg_depth = DEFAULT_DEPTH, .cfg_pool_bytes = DEFAULT_POOL_BYTES, .cfg_chunk_bytes = DEFAULT_CHUNK_BYTES};

uint32_t msgtrace_chunk_records;

static struct mt_chunk *chunk_at(uint32_t i) { return (struct mt_chunk *)(pool.base + (uint64_t)i * pool.chunk_bytes); }
uint32_t msgtrace_chunk_index(struct mt_chunk *c) { return (uint32_t)(((char *)c - pool.base) / pool.chunk_bytes); }
struct mt_chunk *msgtrace_chunk_at(uint32_t i) { return chunk_at(i); }

int msgtrace_configure(uint32_t stack_depth, uint64_t pool_bytes, uint32_t chunk_bytes) {
	if (stack_depth == 0 || stack_depth > (1u << 20) || chunk_bytes < 4096 || chunk_bytes > (16u << 20) ||
	    (chunk_bytes & (chunk_bytes - 1)) || pool_bytes < chunk_bytes || pool_bytes > (64ull << 30))
		return -1;
	pthread_mutex_lock(&pool.lock);
	pool.cfg_depth = stack_depth;
	if (!pool.base) { /* sizes are fixed once the region exists */
		pool.cfg_pool_bytes = pool_bytes;
		pool.cfg_chunk_bytes = chunk_bytes;
	}
	pthread_mutex_unlock(&pool.lock);
	return 0;
}

int msgtrace_pool_bytes(uint64_t pool_bytes) {
	pthread_mutex_lock(&pool.lock);
	uint32_t depth = pool.cfg_depth, chunk = pool.cfg_chunk_bytes;
	pthread_mutex_unlock(&pool.lock);
	return msgtrace_configure(depth, pool_bytes, chunk);
}

int msgtrace_pool_reserve(void) {
	if (__atomic_load_n(&pool.base, __ATOMIC_ACQUIRE))
		return 0;
	pthread_mutex_lock(&pool.lock);
	if (!pool.base) {
		uint64_t cap = pool.cfg_pool_bytes / pool.cfg_chunk_bytes;
		void *p = mmap(NULL, cap * pool.cfg_chunk_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANON
#ifdef MAP_NORESERVE
				| MAP_NORESERVE
#endif
			       , -1, 0);
		if (p != MAP_FAILED) {
			pool.chunk_bytes = pool.cfg_chunk_bytes;
			pool.cap = (uint32_t)cap;
			msgtrace_chunk_records = (uint32_t)((pool.cfg_chunk_bytes - sizeof(struct mt_chunk)) / sizeof(struct mt_record));
			__atomic_store_n(&pool.base, (char *)p, __ATOMIC_RELEASE);
		}
	}
	pthread_mutex_unlock(&pool.lock);
	return pool.base ? 0 : -1;
}

void msgtrace_pool_push(struct mt_chunk *c) {
	uint32_t i = msgtrace_chunk_index(c);
	c->owner = NULL;
	c->qnext = NULL;
	c->last = 0;
	uint64_t h = __atomic_load_n(&pool.free_head, __ATOMIC_ACQUIRE);
	for (;;) {
		c->next_free = (uint32_t)h;
		uint64_t n = ((h >> 32) + 1) << 32 | (uint64_t)(i + 1);
		if (__atomic_compare_exchange_n(&pool.free_head, &h, n, 1, __ATOMIC_RELEASE, __ATOMIC_ACQUIRE))
			break;
	}
	__atomic_add_fetch(&pool.free_count, 1, __ATOMIC_RELAXED);
}

struct mt_chunk *msgtrace_pool_pop(void) {
	if (!pool.base)
		return NULL;
	uint64_t h = __atomic_load_n(&pool.free_head, __ATOMIC_ACQUIRE);
	for (;;) {
		uint32_t i = (uint32_t)h;
		if (i == 0)
			return NULL;
		/* the chunk stays mapped whatever happens to it: a stale read only fails the CAS */
		uint32_t next = __atomic_load_n(&chunk_at(i - 1)->next_free, __ATOMIC_RELAXED);
		uint64_t n = ((h >> 32) + 1) << 32 | next;
		if (__atomic_compare_exchange_n(&pool.free_head, &h, n, 1, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
			__atomic_sub_fetch(&pool.free_count, 1, __ATOMIC_RELAXED);
			return chunk_at(i - 1);
		}
	}
}

/* Carves one more chunk out of the region, touching every page of it (first touch is the
 * expensive part: better the drain than a recording thread). NULL at the cap. */
struct mt_chunk *msgtrace_pool_make(void) {
	if (msgtrace_pool_reserve() != 0)
		return NULL;
	uint32_t i = __atomic_load_n(&pool.made, __ATOMIC_RELAXED);
	do {
		if (i >= pool.cap)
			return NULL;
	} while (!__atomic_compare_exchange_n(&pool.made, &i, i + 1, 1, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED));
	struct mt_chunk *c = chunk_at(i);
	for (uint64_t off = 0; off < pool.chunk_bytes; off += PAGE_TOUCH)
		((volatile char *)c)[off] = 0;
	return c;
}

int msgtrace_pool_grow(int n) {
	int made = 0;
	for (; made < n; made++) {
		struct mt_chunk *c = msgtrace_pool_make();
		if (!c)
			break;
		msgtrace_pool_push(c);
	}
	return made;
}
uint32_t msgtrace_pool_free_count(void) { return __atomic_load_n(&pool.free_count, __ATOMIC_RELAXED); }
uint32_t msgtrace_pool_made(void) { return __atomic_load_n(&pool.made, __ATOMIC_RELAXED); }
uint32_t msgtrace_pool_cap(void) { return pool.cap; }

uint32_t msgtrace_stack_depth(void) {
	pthread_mutex_lock(&pool.lock);
	uint32_t depth = pool.cfg_depth;
	pthread_mutex_unlock(&pool.lock);
	return depth;
}

void msgtrace_pool_after_fork(void) { pthread_mutex_init(&pool.lock, NULL); }
