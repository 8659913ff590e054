/*
 * A small open-addressing map from pointers to words, for the tables that are keyed by a
 * runtime pointer and must be read where nothing may be allocated or locked: the selector names
 * method capture tells the drain (runtime.c, which grows it by copying into a bigger one), and
 * the method each trampoline was made for (methods.c). Fixed capacity (2^bits slots, static
 * arrays or the caller's), linear probing from a Fibonacci hash, no removal. One writer at a
 * time (the caller serialises); readers need no lock: a slot's value is published before its
 * key.
 */
#ifndef MSGTRACE_OBJC_PTRMAP_H
#define MSGTRACE_OBJC_PTRMAP_H
#include <stddef.h>
#include <stdint.h>

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
#endif
