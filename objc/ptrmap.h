/*
 * A small open-addressing map from pointers to words, for the tables that are keyed by a
 * runtime pointer and must be read where nothing may be allocated or locked: the selector names
 * method capture tells the drain (runtime.c, which grows it by copying into a bigger one), and
 * the method each trampoline was made for (methods_tramps.c). Fixed capacity (2^bits slots, static
 * arrays or the caller's), linear probing from a Fibonacci hash, no removal. One writer at a
 * time (the caller serialises); readers need no lock: a slot's value is published before its
 * key.
 */
#ifndef MSGTRACE_OBJC_PTRMAP_H
#define MSGTRACE_OBJC_PTRMAP_H
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* Fibonacci hashing's multiplier (2^64 / golden ratio): a pointer times it, top bits kept. */
#define MT_HASH_MUL 0x9e3779b97f4a7c15ull

struct mt_ptrmap {
	void **keys;      /* NULL: a free slot */
	uintptr_t *vals;
	unsigned bits;    /* 2^bits slots */
};

/* A map over static storage: MT_PTRMAP(name, bits) defines name (a struct mt_ptrmap). */
#define MT_PTRMAP(name, nbits)                                                                                 \
	static void *name##_keys[1u << (nbits)];                                                               \
	static uintptr_t name##_vals[1u << (nbits)];                                                           \
	static struct mt_ptrmap name = {name##_keys, name##_vals, (nbits)}

static inline size_t mt_ptrmap_home(const struct mt_ptrmap *m, const void *key) {
	return (size_t)(((uint64_t)(uintptr_t)key * MT_HASH_MUL) >> (64 - m->bits));
}

/* The value stored for key, or 0. */
static inline uintptr_t mt_ptrmap_get(const struct mt_ptrmap *m, const void *key) {
	size_t mask = ((size_t)1 << m->bits) - 1;
	for (size_t i = mt_ptrmap_home(m, key), n = 0; n <= mask; i = (i + 1) & mask, n++) {
		void *k = __atomic_load_n(&m->keys[i], __ATOMIC_ACQUIRE);
		if (k == key)
			return __atomic_load_n(&m->vals[i], __ATOMIC_RELAXED);
		if (!k)
			return 0;
	}
	return 0;
}

/* Stores val (not 0) for key (not NULL); a key already there keeps its value unless replace.
 * Returns 2 when the key was added, 1 when it was there, 0 when the map is full. */
static inline int mt_ptrmap_put(struct mt_ptrmap *m, void *key, uintptr_t val, int replace) {
	size_t mask = ((size_t)1 << m->bits) - 1;
	for (size_t i = mt_ptrmap_home(m, key), n = 0; n <= mask; i = (i + 1) & mask, n++) {
		void *k = __atomic_load_n(&m->keys[i], __ATOMIC_ACQUIRE);
		if (k == key) {
			if (replace)
				__atomic_store_n(&m->vals[i], val, __ATOMIC_RELEASE);
			return 1;
		}
		if (!k) {
			__atomic_store_n(&m->vals[i], val, __ATOMIC_RELAXED);
			__atomic_store_n(&m->keys[i], key, __ATOMIC_RELEASE);
			return 2;
		}
	}
	return 0;
}
/* A map that grows with what it holds (the caller's writes serialised, reads lock-free): a
 * table of 2^min_bits slots at the first put, doubled when half full, the entries copied into
 * the new one before it is published (release); a reader still in an older one finds what that
 * one had. Older tables are never freed (readers may be in them; together they are smaller
 * than the current one). Past 2^max_bits slots, or without memory, puts fail (0). Reset starts
 * an empty one, the old ones kept likewise. Zero-initialised: empty. */
struct mt_growmap {
	struct mt_ptrmap *cur; /* release-published */
	size_t n;              /* entries in cur (the writer's) */
	unsigned min_bits, max_bits;
};

static inline struct mt_ptrmap *mt_growmap_table(const struct mt_growmap *g) {
	return __atomic_load_n(&g->cur, __ATOMIC_ACQUIRE);
}

/* The value stored for key, or 0. */
static inline uintptr_t mt_growmap_get(const struct mt_growmap *g, const void *key) {
	struct mt_ptrmap *m = mt_growmap_table(g);
	return m ? mt_ptrmap_get(m, key) : 0;
}

static inline struct mt_ptrmap *mt_growmap_grow(struct mt_growmap *g) {
	struct mt_ptrmap *old = g->cur;
	unsigned bits = old ? old->bits + 1 : g->min_bits;
	if (bits > g->max_bits)
		return NULL;
	size_t n = (size_t)1 << bits;
	struct mt_ptrmap *m = malloc(sizeof *m);
	void **keys = calloc(n, sizeof *keys);
	uintptr_t *vals = calloc(n, sizeof *vals);
	if (!m || !keys || !vals) {
		free(m), free(keys), free(vals);
		return NULL;
	}
	*m = (struct mt_ptrmap){keys, vals, bits};
	for (size_t i = 0; old && i < (size_t)1 << old->bits; i++)
		if (old->keys[i])
			mt_ptrmap_put(m, old->keys[i], old->vals[i], 0);
	__atomic_store_n(&g->cur, m, __ATOMIC_RELEASE);
	return m;
}

/* mt_ptrmap_put's, on a table that grows first when it would be more than half full. */
static inline int mt_growmap_put(struct mt_growmap *g, void *key, uintptr_t val, int replace) {
	struct mt_ptrmap *m = g->cur;
	if ((!m || 2 * (g->n + 1) > (size_t)1 << m->bits) && !(m = mt_growmap_grow(g)))
		return 0;
	int r = mt_ptrmap_put(m, key, val, replace);
	if (r == 2)
		g->n++;
	return r;
}

static inline void mt_growmap_reset(struct mt_growmap *g) {
	__atomic_store_n(&g->cur, NULL, __ATOMIC_RELEASE);
	g->n = 0;
}
#endif
