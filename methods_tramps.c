/*
 * One method given a trampoline, the layer every way of method capture builds on: the
 * never-instrument list, the pool's trampolines handed out (a method gets its own back after a
 * restore: its home), whether a method is one to instrument, a method instrumented through the
 * runtime (objc/runtime.h), and on Apple's runtime a +load, which keeps its trampoline.
 * Classes (methods.c), gcc's modules (methods_modules.c), libobjc2's (methods_gnustep.c) and
 * Apple's images (methods_images.c) call it; it calls none of them.
 * Depends on: objc/runtime.c (the runtime), trampoline_*.S (the pool), rt.c
 * (msgtrace_sel_by_index).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "methods.h"
#include "methods_internal.h"
#include "objc/ptrmap.h"
#include "rt.h"
#include "trampoline.h"

#include <pthread.h>
#include <string.h>

/* The methods never instrumented: replacing them changes the runtime's own fast paths,
 * object lifecycle, forwarding or resolution. `load` means the class method (an instance method
 * of that name, -[NSBundle load], is ordinary); it has two exceptions, where a +load is given a
 * trampoline it keeps (never restored):
 *   - gcc's runtime, before a module registers (msgtrace_module_install_static): the runtime
 *     remembers each +load it sent by its IMP and sends a +load whose IMP it has not seen again
 *     when a category of the class arrives, so only before the runtime first sees it;
 *   - Apple's (mt_instrument_load): objc4 calls each class's and each category's +load once,
 *     directly through the IMP it read from that method when it scheduled the image's +loads
 *     (prepare_load_methods), never again; a trampoline given before that is the call traced.
 * `initialize` is an ordinary method: the runtime sends it once, through its IMP. */
static const char *const never[] = {
    [MT_NEVER_LOAD - 1] = "load", /* first: mt_never_index's answer for it is a constant */
    "retain", "release", "autorelease", "retainCount", "_tryRetain", "_isDeallocating",
    "allowsWeakReference", "retainWeakReference", "alloc", "allocWithZone:", "new", "self",
    "class", "isKindOfClass:", "respondsToSelector:", "dealloc", ".cxx_construct",
    ".cxx_destruct", "forwardInvocation:", "forwardingTargetForSelector:",
    "methodSignatureForSelector:", "instanceMethodSignatureForSelector:", "resolveInstanceMethod:",
    "resolveClassMethod:", "doesNotRecognizeSelector:", "forward::", "performv::",
    "methodForSelector:", "instanceMethodForSelector:",
};

#define NNEVER (sizeof never / sizeof never[0])
_Static_assert(NNEVER < 255, "never_first holds an index + 1 in a byte");

/* A name's first four bytes as one word (zeros past its end): what the lookup compares first.
 * Nothing past the name's terminator is read. */
static uint32_t head4(const char *s) {
	const unsigned char *u = (const unsigned char *)s;
	uint32_t h = u[0];
	if (h && u[1]) {
		h |= (uint32_t)u[1] << 8;
		if (u[2])
			h |= (uint32_t)u[2] << 16 | (uint32_t)u[3] << 24;
	}
	return h;
}

/* The list by head4, chained in 256 buckets: a name whose head no entry has (nearly all) is
 * ruled out without a strcmp. Built once (pthread_once): every install asks for every method. */
#define NEVER_BUCKET(h) ((uint32_t)((h) * 0x9e3779b1u) >> 24)
static uint32_t never_head[NNEVER];
static unsigned char never_first[256], never_next[NNEVER]; /* index + 1; 0 ends a chain */
static pthread_once_t never_once = PTHREAD_ONCE_INIT;
static int never_built; /* release-stored once the tables are: no pthread_once call after */

static void never_build(void) {
	for (size_t i = NNEVER; i-- > 0;) { /* chains in the list's order */
		uint32_t b = NEVER_BUCKET(never_head[i] = head4(never[i]));
		never_next[i] = never_first[b];
		never_first[b] = (unsigned char)(i + 1);
	}
	__atomic_store_n(&never_built, 1, __ATOMIC_RELEASE);
}

/* The entry of never a name is (index + 1), or 0. */
int mt_never_index(const char *sel) {
	if (!__atomic_load_n(&never_built, __ATOMIC_ACQUIRE))
		pthread_once(&never_once, never_build);
	uint32_t h = head4(sel);
	for (unsigned k = never_first[NEVER_BUCKET(h)]; k; k = never_next[k - 1])
		if (never_head[k - 1] == h && strcmp(sel, never[k - 1]) == 0)
			return (int)k;
	return 0;
}

int msgtrace_never_instrument(const char *sel) { return mt_never_index(sel) != 0; }

size_t mt_tramps_used; /* trampolines handed out (never freed), under the caller's lock */
unsigned char mt_kept[MT_POOL]; /* never given back: a +load instrumented before registration */

/* The trampoline (index + 1) each Method was last given, kept after a restore: a method
 * instrumented again after msgtrace_stop gets its own trampoline back instead of a new one from
 * the pool. Filled by the restore (from each trampoline's method), not by every install: until
 * a restore no method has one to get back, and an install then touches no page of it.
 * Twice the pool's slots: never full. */
_Static_assert((2 * MT_POOL & (2 * MT_POOL - 1)) == 0, "the pool is a power of two");
MT_PTRMAP(homes, __builtin_ctz(2 * MT_POOL));
static int homes_filled; /* a restore filled homes (under the caller's lock) */

static long find_home(const void *m) { return homes_filled ? (long)mt_ptrmap_get(&homes, m) - 1 : -1; }

/* the method of trampoline i, at a restore: trampolines are handed out in order, so a method
 * given several (swizzled between installs) ends with its newest */
void mt_trampoline_home(void *m, size_t i) {
	mt_ptrmap_put(&homes, m, i + 1, 1);
	homes_filled = 1;
}

void mt_note_selectors(void) {
#if !MT_APPLE_API
	if (!msgtrace_sel_by_index && mt_objc_kind() == MT_RT_GNUSTEP)
		__atomic_store_n(&msgtrace_sel_by_index, 1, __ATOMIC_RELEASE);
#endif
}

/* The trampoline for method m of cls, its data published (a barrier follows): the one m had
 * before a restore if it still leads to imp, else a new one from the pool; NULL (counted) when
 * the pool is used up. The caller writes the trampoline into the method. */
struct mt_tramp_data *mt_take_trampoline(void *cls, void *m, void *sel, void *imp, struct mt_methods_stats *st) {
	mt_note_selectors();
	long k = find_home(m);
	if (k >= 0 && (msgtrace_tramp_data[k].method || msgtrace_tramp_data[k].orig != imp))
		k = -1; /* in use, or the method was given another IMP since: a new trampoline */
	if (k < 0 && mt_tramps_used == MT_POOL) {
		st->full++;
		return NULL;
	}
	if (k < 0)
		k = (long)mt_tramps_used++;
	struct mt_tramp_data *d = &msgtrace_tramp_data[k];
	/* publish the data, then a barrier, then (the caller) the IMP */
	d->orig = imp, d->cls = cls, d->sel = sel, d->method = m;
	__atomic_thread_fence(__ATOMIC_RELEASE);
	return d;
}

/* Whether a method of cls (selector sel, IMP imp) is one to give a trampoline: not ours already,
 * named, not on the never-instrument list (counted there), not a forwarder. */
int mt_instrumentable(void *cls, void *sel, void *imp, struct mt_methods_stats *st) {
	if (!imp || mt_is_trampoline(imp))
		return 0; /* ours already (a class looked at again): no name needed */
	/* the selector's name: remembered once asked for (gcc's sel_getName takes the runtime's
	 * lock each time), so that neither the drain nor the next install asks the runtime */
	const char *name = sel ? mt_objc_remembered_sel_name(sel) : NULL;
	if (sel && !name) {
		name = mt_objc_sel_name(sel);
		mt_objc_remember_sel_name(sel, name);
	}
	if (!name)
		return 0;
	/* `load` is the class method the runtime sends itself; an instance method of that name
	 * (-[NSBundle load]) is an ordinary one */
	int k = mt_never_index(name);
	int never = k && (k != MT_NEVER_LOAD || mt_objc_is_meta(cls));
	if (never || (MT_APPLE_API && mt_objc_is_forwarder(imp))) { /* forwarders: Apple's runtime */
		st->never++;
		return 0;
	}
	return 1;
}

/* Gives one method of cls a trampoline; returns whether its IMP changed. */
int mt_instrument_method(void *cls, void *m, struct mt_methods_stats *st) {
	void *imp = mt_objc_method_imp(m);
	void *sel = imp && !mt_is_trampoline(imp) ? mt_objc_method_sel(m) : NULL;
	if (!mt_instrumentable(cls, sel, imp, st))
		return 0;
	if (!mt_objc_method_settable(m, imp)) { /* not the layout we know: hands off */
		st->foreign++;
		return 0;
	}
	struct mt_tramp_data *d = mt_take_trampoline(cls, m, sel, imp, st);
	if (!d)
		return 0;
	void *tramp = msgtrace_tramp_text + (size_t)(d - msgtrace_tramp_data) * MT_STRIDE;
	void *old = mt_objc_method_set_imp(cls, m, sel, tramp);
	if (old && old != imp)
		__atomic_store_n(&d->orig, old, __ATOMIC_RELEASE); /* swizzled meanwhile */
	st->instrumented++;
	return 1;
}

#if MT_APPLE_API
/* Apple: a +load (a metaclass's `load`: the class's own, or a category's). objc4 reads its IMP
 * from this very method when it schedules the image's +loads (load_images: prepare_load_methods,
 * method_t::imp, which honours method_setImplementation, small methods' remap table included)
 * and calls it once, directly: not through dispatch, so only a trampoline in the method sees it.
 * method_setImplementation, not class_replaceMethod: the latter reaches only the first `load` of
 * the metaclass's list, a category's where one has a +load too. The trampoline is kept (a
 * restore leaves it: the call it traces does not come again, and a category's +load could not
 * be given back by selector). Instrumented after the runtime scheduled it (a class of the
 * process that already ran its +load), nothing changes but a later [X load] being traced. */
int mt_is_apple_load(void *cls, void *m) {
	if (!mt_objc_is_meta(cls)) /* a bit of the class: the name only for class methods */
		return 0;
	void *sel = mt_objc_method_sel(m);
	const char *name = sel ? mt_objc_sel_name(sel) : NULL;
	return name && strcmp(name, "load") == 0;
}

int mt_instrument_load(void *cls, void *m, struct mt_methods_stats *st) {
	void *sel = mt_objc_method_sel(m), *imp = mt_objc_method_imp(m);
	if (!imp || mt_is_trampoline(imp))
		return 0;
	if (mt_objc_is_forwarder(imp) || !mt_objc_can_set_imp_exact()) {
		st->never++;
		return 0;
	}
	mt_objc_remember_sel_name(sel, "load");
	struct mt_tramp_data *d = mt_take_trampoline(cls, m, sel, imp, st);
	if (!d)
		return 0;
	size_t k = (size_t)(d - msgtrace_tramp_data);
	mt_kept[k] = 1;
	void *old = mt_objc_method_set_imp_exact(m, msgtrace_tramp_text + k * MT_STRIDE);
	if (old && old != imp)
		__atomic_store_n(&d->orig, old, __ATOMIC_RELEASE); /* swizzled meanwhile */
	st->instrumented++;
	return 1;
}
#endif
