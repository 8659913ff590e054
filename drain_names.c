/*
 * Method ids and their names: a recorded (class word, selector) becomes a method id, named in
 * a methods frame before its first use. Names come from the namer (the Objective-C runtime's,
 * objc/runtime.h, unless set), selectors preferably from what method capture told the runtime
 * binding (mt_objc_drain_sel_name), so that the drain need not take gcc's runtime lock.
 * Runs on the drain thread only.
 * Depends on: drain_encode.c, objc/runtime.c.
 */
#include "drain_internal.h"
#include "objc/ptrmap.h"
#include "objc/runtime.h"

#include <stdio.h>
#include <stdlib.h>

/* Open-addressing tables: raw (class word, selector) as recorded -> method id, and the
 * resolved (class, selector, name flags) -> method id, so that every receiver of one class
 * (tagged pointers included) is one method. Two-word keys, grown as they fill (objc/ptrmap.h's
 * fixed maps are for single pointers). */
struct slot {
	uint64_t a, b;
	uint32_t id, used;
};
struct table {
	struct slot *s;
	uint64_t cap, n;
};

/* A tagged receiver is a raw key of its own: no more of them are remembered past this many keys. */
#define MAX_TAGGED_KEYS (1u << 20)
/* The canonical key folds the name flags into the selector's top bits (selectors are pointers). */
#define CANON_FLAGS_SHIFT 61

/* The runtime's: what the drain names with where the namer leaves a field unset. */
static const struct mt_namer runtime_namer = {mt_objc_class_name, mt_objc_sel_name, mt_objc_object_class,
					      mt_objc_superclass, mt_objc_is_meta};

static struct {
	struct mt_namer namer;
	struct table raw_ids, canon_ids;
	uint32_t next_id;
	struct mt_buf methods; /* entries named since the last methods frame */
} names = {.namer = runtime_namer, .next_id = 1};

void msgtrace_set_namer(const struct mt_namer *n) {
	struct mt_namer *d = &names.namer;
	*d = *n;
	if (!d->class_name)
		d->class_name = runtime_namer.class_name;
	if (!d->sel_name)
		d->sel_name = runtime_namer.sel_name;
	if (!d->object_class)
		d->object_class = runtime_namer.object_class;
	if (!d->superclass)
		d->superclass = runtime_namer.superclass;
	if (!d->is_meta)
		d->is_meta = runtime_namer.is_meta;
}

static uint64_t mix(uint64_t a, uint64_t b) {
	uint64_t h = a * MT_HASH_MUL ^ (b + 0x632be59bd9b4e019ull) * 0xc2b2ae3d27d4eb4full;
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
#if !defined(__APPLE__)
	/* Off Apple, an unaligned receiver is a small object whose class its low bits alone give
	 * (libobjc2's objc_registerSmallObjectClass_np): one raw key per class, not per value. */
	if (cls >> FLAG_SHIFT & F_TAGGED && cls & MT_UNALIGNED_BITS)
		cls &= ~((1ull << CLS_BITS) - 1) | MT_UNALIGNED_BITS;
#endif
	struct slot *s = table_find(&names.raw_ids, cls, sel, &found);
	if (found)
		return s->id;
	struct mt_namer *nm = &names.namer;
	uint64_t flags = cls >> FLAG_SHIFT, key = cls & ((1ull << CLS_BITS) - 1);
	void *c = (void *)(uintptr_t)key;
	uint64_t nflags = 0;
	if (flags & F_SUPER) {
		nflags |= MT_METHOD_SUPER;
		c = nm->superclass(c);
	} else if (flags & F_TAGGED) {
		nflags |= MT_METHOD_TAGGED;
		c = nm->object_class((void *)(uintptr_t)MT_UNFOLD_TAGGED(key));
	}
	if (c && nm->is_meta(c))
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
		const char *cn = c ? nm->class_name(c) : NULL;
		const char *sn = sel ? mt_objc_drain_sel_name((void *)(uintptr_t)sel) : NULL;
		if (!sn && sel)
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

const char *mt_sel_name(uint64_t sel) {
	const char *sn = sel ? mt_objc_drain_sel_name((void *)(uintptr_t)sel) : NULL;
	return sn || !sel ? sn : names.namer.sel_name((void *)(uintptr_t)sel);
}

const char *mt_class_name(void *cls) { return cls ? names.namer.class_name(cls) : NULL; }

void mt_names_flush(struct mt_buf *out) {
	if (names.methods.n)
		mt_enc_methods(out, &names.methods);
	names.methods.n = 0;
}
