/*
 * Method ids and their names: a recorded (class word, selector) becomes a method id, named in
 * a methods frame before its first use. Names come from the namer (the Objective-C runtime's
 * functions, looked up in the process unless set), selectors preferably from what method
 * capture told us (msgtrace_remember_sel_name), so that the drain need not take gcc's runtime
 * lock. Runs on the drain thread only, except msgtrace_remember_sel_name.
 * Depends on: drain_encode.c.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "drain_internal.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

/* Open-addressing tables: raw (class word, selector) as recorded -> method id, and the
 * resolved (class, selector, name flags) -> method id, so that every receiver of one class
 * (tagged pointers included) is one method. */
struct slot {
	uint64_t a, b;
	uint32_t id, used;
};
struct table {
	struct slot *s;
	uint64_t cap, n;
};

/* Fibonacci hashing's multiplier (2^64 / golden ratio). */
#define HASH_MUL 0x9e3779b97f4a7c15ull
/* A tagged receiver is a raw key of its own: no more of them are remembered past this many keys. */
#define MAX_TAGGED_KEYS (1u << 20)
/* The canonical key folds the name flags into the selector's top bits (selectors are pointers). */
#define CANON_FLAGS_SHIFT 61

static struct {
	struct mt_namer namer;
	int namer_looked_up;
	struct table raw_ids, canon_ids;
	uint32_t next_id;
	struct mt_buf methods; /* entries named since the last methods frame */
} names = {.next_id = 1};

static void look_up_namer(void) {
	struct mt_namer *n = &names.namer;
	if (names.namer_looked_up)
		return;
	names.namer_looked_up = 1;
	if (!n->class_name)
		n->class_name = (const char *(*)(void *))dlsym(RTLD_DEFAULT, "class_getName");
	if (!n->sel_name)
		n->sel_name = (const char *(*)(void *))dlsym(RTLD_DEFAULT, "sel_getName");
	if (!n->object_class)
		n->object_class = (void *(*)(void *))dlsym(RTLD_DEFAULT, "object_getClass");
	if (!n->superclass)
		n->superclass = (void *(*)(void *))dlsym(RTLD_DEFAULT, "class_getSuperclass");
	if (!n->is_meta)
		n->is_meta = (unsigned char (*)(void *))dlsym(RTLD_DEFAULT, "class_isMetaClass");
}

void msgtrace_set_namer(const struct mt_namer *n) {
	names.namer = *n;
	names.namer_looked_up = 0;
}

/* Selector names learnt while instrumenting (methods.c, where the runtime's lock is held
 * anyway): gcc's sel_getName takes the runtime's lock, which a thread may hold for as long as an
 * +initialize runs, and that thread may be waiting for a chunk only the drain can free. The
 * drain asks the runtime only for selectors it has not been told. Open addressing, lock-free
 * reads: the name is published before the key. Never reset (selectors outlive a stream). */
#define SEL_CACHE (1u << 16)
static void *sel_keys[SEL_CACHE];
static const char *sel_names[SEL_CACHE];

static uint32_t sel_slot(const void *sel) {
	return (uint32_t)(((uint64_t)(uintptr_t)sel * HASH_MUL) >> 48) & (SEL_CACHE - 1);
}

void msgtrace_remember_sel_name(void *sel, const char *name) {
	if (!sel || !name)
		return;
	for (uint32_t i = sel_slot(sel), n = 0; n < SEL_CACHE; i = (i + 1) & (SEL_CACHE - 1), n++) {
		void *k = __atomic_load_n(&sel_keys[i], __ATOMIC_ACQUIRE);
		if (k == sel)
			return;
		if (!k) {
			__atomic_store_n(&sel_names[i], name, __ATOMIC_RELAXED);
			__atomic_store_n(&sel_keys[i], sel, __ATOMIC_RELEASE); /* callers are serialised */
			return;
		}
	}
}

static const char *remembered_sel_name(void *sel) {
	for (uint32_t i = sel_slot(sel), n = 0; n < SEL_CACHE; i = (i + 1) & (SEL_CACHE - 1), n++) {
		void *k = __atomic_load_n(&sel_keys[i], __ATOMIC_ACQUIRE);
		if (k == sel)
			return __atomic_load_n(&sel_names[i], __ATOMIC_RELAXED);
		if (!k)
			return NULL;
	}
	return NULL;
}

static uint64_t mix(uint64_t a, uint64_t b) {
	uint64_t h = a * HASH_MUL ^ (b + 0x632be59bd9b4e019ull) * 0xc2b2ae3d27d4eb4full;
	return h ^ h >> 29;
}

static struct slot *table_find(struct table *t, uint64_t a, uint64_t b, int *found) {
	if (t->n * 2 >= t->cap) {
		uint64_t cap = t->cap ? t->cap * 2 : 1024;
		struct slot *s = calloc(cap, sizeof *s);
		if (!s) {
			*found = 0;
			return NULL;
		}
		for (uint64_t i = 0; i < t->cap; i++)
			if (t->s[i].used) {
				uint64_t j = mix(t->s[i].a, t->s[i].b) & (cap - 1);
				while (s[j].used)
					j = (j + 1) & (cap - 1);
				s[j] = t->s[i];
			}
		free(t->s);
		t->s = s;
		t->cap = cap;
	}
	uint64_t j = mix(a, b) & (t->cap - 1);
	while (t->s[j].used) {
		if (t->s[j].a == a && t->s[j].b == b) {
			*found = 1;
			return &t->s[j];
		}
		j = (j + 1) & (t->cap - 1);
	}
	*found = 0;
	return &t->s[j];
}

static void table_reset(struct table *t) {
	free(t->s);
	t->s = NULL;
	t->cap = t->n = 0;
}

void mt_names_reset(void) {
	table_reset(&names.raw_ids);
	table_reset(&names.canon_ids);
	names.next_id = 1;
	names.methods.n = 0;
}

/* The method id of a recorded class word (depth and unwound flag cleared) and selector; a new
 * one is named (methods buffer) before its first use. */
uint32_t mt_method_id(uint64_t cls, uint64_t sel) {
	int found;
	struct slot *s = table_find(&names.raw_ids, cls, sel, &found);
	if (found)
		return s->id;
	look_up_namer();
	struct mt_namer *nm = &names.namer;
	uint64_t flags = cls >> FLAG_SHIFT, key = cls & ((1ull << CLS_BITS) - 1);
	void *c = (void *)(uintptr_t)key;
	uint64_t nflags = 0;
	if (flags & F_SUPER) {
		nflags |= MT_METHOD_SUPER;
		c = nm->superclass ? nm->superclass(c) : NULL;
	} else if (flags & F_TAGGED) {
		nflags |= MT_METHOD_TAGGED;
		c = nm->object_class ? nm->object_class((void *)(uintptr_t)MT_UNFOLD_TAGGED(key)) : NULL;
	}
	if (c && nm->is_meta && nm->is_meta(c))
		nflags |= MT_METHOD_CLASS;
	int cfound;
	uint64_t canon_sel = sel ^ nflags << CANON_FLAGS_SHIFT;
	struct slot *cs = table_find(&names.canon_ids, (uint64_t)(uintptr_t)c, canon_sel, &cfound);
	uint32_t id;
	if (cfound) {
		id = cs->id;
	} else {
		id = names.next_id++;
		char cbuf[32], sbuf[32];
		const char *cn = c && nm->class_name ? nm->class_name(c) : NULL;
		const char *sn = sel ? remembered_sel_name((void *)(uintptr_t)sel) : NULL;
		if (!sn && sel && nm->sel_name)
			sn = nm->sel_name((void *)(uintptr_t)sel);
		if (!cn) {
			snprintf(cbuf, sizeof cbuf, "0x%llx", (unsigned long long)(c ? (uint64_t)(uintptr_t)c : key));
			cn = cbuf;
		}
		if (!sn) {
			snprintf(sbuf, sizeof sbuf, "0x%llx", (unsigned long long)sel);
			sn = sbuf;
		}
		mt_enc_method(&names.methods, id, nflags, cn, sn);
		if (cs) {
			*cs = (struct slot){(uint64_t)(uintptr_t)c, canon_sel, id, 1};
			names.canon_ids.n++;
		}
	}
	if (s && (!(flags & F_TAGGED) || names.raw_ids.n < MAX_TAGGED_KEYS)) {
		*s = (struct slot){cls, sel, id, 1};
		names.raw_ids.n++;
	}
	return id;
}

void mt_names_flush(struct mt_buf *out) {
	if (names.methods.n)
		mt_enc_methods(out, &names.methods);
	names.methods.n = 0;
}
