/*
 * msgtrace method capture: puts the trampolines of the pool (trampoline_*.S) into methods and
 * takes them out again, through the Objective-C runtime found in the process (objc/runtime.h).
 *
 * gcc's GNU runtime (libobjc.so.4): a method's IMP is written straight into its struct
 * objc_method under __objc_runtime_mutex, then dispatch tables are refreshed once per class
 * subtree. Not method_setImplementation (it walks every class per call, and writes into
 * __objc_uninstalled_dtable, the table every never-messaged class shares) nor
 * class_replaceMethod (on a subclass it replaces the superclass's method).
 * Apple's runtime: class_replaceMethod on the defining class (flushes only its subtree).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "methods.h"
#include "objc/ptrmap.h"
#include "rt.h"
#include "rt_launch.h"
#include "trampoline.h"

#include <dlfcn.h>
#include <pthread.h>
#if defined(__linux__)
#include <link.h>
#include <unistd.h>
#endif
#include <stdlib.h>
#include <string.h>

#if defined(__linux__)
/* The object holding an address, from the loaded objects' segments (dl_iterate_phdr), not
 * dladdr: glibc's dladdr takes the loader's lock, which dlopen holds while module
 * constructors register classes (and take the runtime's lock); this runs with the runtime's
 * lock held (an +initialize adding a method), so it must not wait for the loader's. */
struct find_object {
	uintptr_t addr;
	const char *name;
};

static int find_object_one(struct dl_phdr_info *info, size_t size, void *data) {
	(void)size;
	struct find_object *f = data;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
		if (ph->p_type == PT_LOAD && f->addr >= lo && f->addr - lo < ph->p_memsz) {
			f->name = info->dlpi_name;
			return 1;
		}
	}
	return 0;
}

static const char *object_path(const void *p) {
	struct find_object f = {(uintptr_t)p, NULL};
	dl_iterate_phdr(find_object_one, &f);
	if (f.name && !f.name[0]) { /* the main program */
		static char exe[4096];
		if (!exe[0]) {
			ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
			exe[n > 0 ? n : 0] = 0;
		}
		return exe;
	}
	return f.name;
}
#else
static const char *object_path(const void *p) {
	Dl_info info;
	return dladdr(p, &info) ? info.dli_fname : NULL;
}
#endif

const char *msgtrace_image_of(const void *p) {
	const char *n = object_path(p);
	return n ? n : "";
}

const char *msgtrace_class_image(void *cls) {
	if (mt_objc_kind() == MT_RT_NONE)
		return "";
	/* a class created at run time lives in the heap: its superclasses say where it belongs */
	for (void *c = cls; c; c = mt_objc_superclass(c)) {
		const char *n = object_path(c);
		if (n)
			return n;
	}
	return "";
}

#if defined(__linux__)
/* The loaded objects' segments, read once (dl_iterate_phdr) for many lookups. */
struct segment {
	uintptr_t lo, hi;
	const char *name;
};
struct segments {
	struct segment *v;
	size_t n, cap;
	int failed;
};

static int collect_segment(struct dl_phdr_info *info, size_t size, void *data) {
	(void)size;
	struct segments *s = data;
	for (int i = 0; i < info->dlpi_phnum && !s->failed; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD || ph->p_memsz == 0)
			continue;
		if (s->n == s->cap) {
			size_t c = s->cap ? 2 * s->cap : 256;
			struct segment *v = realloc(s->v, c * sizeof *v);
			if (!v) {
				s->failed = 1;
				break;
			}
			s->v = v, s->cap = c;
		}
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
		s->v[s->n++] = (struct segment){lo, lo + ph->p_memsz, info->dlpi_name};
	}
	return 0;
}

static int segment_cmp(const void *a, const void *b) {
	uintptr_t x = ((const struct segment *)a)->lo, y = ((const struct segment *)b)->lo;
	return x < y ? -1 : x > y;
}

/* The segment holding p (segments sorted, not overlapping), or NULL. */
static const struct segment *segment_of(const struct segments *s, uintptr_t p) {
	size_t lo = 0, hi = s->n;
	while (lo < hi) { /* the first segment starting past p */
		size_t mid = lo + (hi - lo) / 2;
		if (s->v[mid].lo <= p)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo > 0 && p < s->v[lo - 1].hi ? &s->v[lo - 1] : NULL;
}
#endif

void msgtrace_class_images(void **classes, size_t n, const char **out) {
#if defined(__linux__)
	/* msgtrace_class_image for each, the segments read once: a dl_iterate_phdr walk of every
	 * object per class was most of the default selection's pick (a few hundred classes) */
	struct segments s = {0};
	/* a class or a few (one registered, or given a method): a walk each costs less than the
	 * table; no memory for the table: a walk each too */
	int each = n < 16 || mt_objc_kind() == MT_RT_NONE;
	if (!each) {
		dl_iterate_phdr(collect_segment, &s);
		if (!(each = s.failed))
			qsort(s.v, s.n, sizeof *s.v, segment_cmp);
	}
	for (size_t i = 0; i < n; i++) {
		if (each) {
			out[i] = msgtrace_class_image(classes[i]);
			continue;
		}
		out[i] = "";
		for (void *c = classes[i]; c && s.n; c = mt_objc_superclass(c)) {
			const struct segment *g = segment_of(&s, (uintptr_t)c);
			if (g) {
				out[i] = g->name[0] ? g->name : object_path(c); /* the main program: its path */
				break;
			}
		}
	}
	free(s.v);
#else
	for (size_t i = 0; i < n; i++)
		out[i] = msgtrace_class_image(classes[i]);
#endif
}

int msgtrace_in_shared_cache(const char *path) {
#if MT_APPLE_API
	static int (*contains)(const char *); /* dyld's */
	if (!contains && !(*(void **)&contains = dlsym(RTLD_DEFAULT, "_dyld_shared_cache_contains_path")))
		return 0;
	return contains(path);
#else
	(void)path;
	return 0;
#endif
}

/* The methods never instrumented: replacing them changes the runtime's own fast paths,
 * object lifecycle, forwarding or resolution. `load` means the class method (an instance method
 * of that name, -[NSBundle load], is ordinary); it has two exceptions, where a +load is given a
 * trampoline it keeps (never restored):
 *   - gcc's runtime, before a module registers (msgtrace_module_install_static): the runtime
 *     remembers each +load it sent by its IMP and sends a +load whose IMP it has not seen again
 *     when a category of the class arrives, so only before the runtime first sees it;
 *   - Apple's (instrument_load): objc4 calls each class's and each category's +load once,
 *     directly through the IMP it read from that method when it scheduled the image's +loads
 *     (prepare_load_methods), never again; a trampoline given before that is the call traced.
 * `initialize` is an ordinary method: the runtime sends it once, through its IMP. */
static const char *const never[] = {
    "retain", "release", "autorelease", "retainCount", "_tryRetain", "_isDeallocating",
    "allowsWeakReference", "retainWeakReference", "alloc", "allocWithZone:", "new", "self",
    "class", "isKindOfClass:", "respondsToSelector:", "dealloc", ".cxx_construct",
    ".cxx_destruct", "load", "forwardInvocation:", "forwardingTargetForSelector:",
    "methodSignatureForSelector:", "instanceMethodSignatureForSelector:", "resolveInstanceMethod:",
    "resolveClassMethod:", "doesNotRecognizeSelector:", "forward::", "performv::",
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

int msgtrace_never_instrument(const char *sel) {
	if (!__atomic_load_n(&never_built, __ATOMIC_ACQUIRE))
		pthread_once(&never_once, never_build);
	uint32_t h = head4(sel);
	for (unsigned k = never_first[NEVER_BUCKET(h)]; k; k = never_next[k - 1])
		if (never_head[k - 1] == h && strcmp(sel, never[k - 1]) == 0)
			return 1;
	return 0;
}

static size_t used; /* trampolines handed out (never freed), under the caller's lock */
static unsigned char kept[MT_POOL]; /* never given back: a +load instrumented before registration */

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
static void add_home(void *m, size_t i) { mt_ptrmap_put(&homes, m, i + 1, 1); }

static int is_trampoline(const void *imp) {
	const char *p = imp;
	return p >= msgtrace_tramp_text && p < msgtrace_tramp_text + (size_t)MT_POOL * MT_STRIDE;
}

/* The trampoline for method m of cls, its data published (a barrier follows): the one m had
 * before a restore if it still leads to imp, else a new one from the pool; NULL (counted) when
 * the pool is used up. The caller writes the trampoline into the method. */
static struct mt_tramp_data *take_trampoline(void *cls, void *m, void *sel, void *imp, struct mt_methods_stats *st) {
	long k = find_home(m);
	if (k >= 0 && (msgtrace_tramp_data[k].method || msgtrace_tramp_data[k].orig != imp))
		k = -1; /* in use, or the method was given another IMP since: a new trampoline */
	if (k < 0 && used == MT_POOL) {
		st->full++;
		return NULL;
	}
	if (k < 0)
		k = (long)used++;
	struct mt_tramp_data *d = &msgtrace_tramp_data[k];
	/* publish the data, then a barrier, then (the caller) the IMP */
	d->orig = imp, d->cls = cls, d->sel = sel, d->method = m;
	__atomic_thread_fence(__ATOMIC_RELEASE);
	return d;
}

/* Gives one method of cls a trampoline; returns whether its IMP changed. */
static int instrument_method(void *cls, void *m, struct mt_methods_stats *st) {
	void *imp = mt_objc_method_imp(m);
	if (!imp || is_trampoline(imp))
		return 0; /* ours already (a class looked at again): no name needed */
	void *sel = mt_objc_method_sel(m);
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
	int never = msgtrace_never_instrument(name) && (strcmp(name, "load") != 0 || mt_objc_is_meta(cls));
	if (never || (MT_APPLE_API && mt_objc_is_forwarder(imp))) { /* forwarders: Apple's runtime */
		st->never++;
		return 0;
	}
	if (!mt_objc_method_settable(m, imp)) { /* not the layout we know: hands off */
		st->foreign++;
		return 0;
	}
	struct mt_tramp_data *d = take_trampoline(cls, m, sel, imp, st);
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
static int is_apple_load(void *cls, void *m);
static int instrument_load(void *cls, void *m, struct mt_methods_stats *st);
#endif

static int instrument_class(void *cls, struct mt_methods_stats *st) {
#if !MT_APPLE_API
	/* gcc's runtime (the only one msgtrace_methods_install lets through here): the class's
	 * method lists walked in place, as its class_copyMethodList does into an array it
	 * allocates (the runtime's lock is held: the lists do not change meanwhile) */
	int any = 0;
	for (struct mt_gnu_method_list *l = MT_GNU_CLASS_METHODS(cls); l; l = l->next)
		for (int j = 0; j < l->count; j++)
			any |= instrument_method(cls, &l->m[j], st);
	return any;
#else
	unsigned n = 0;
	void **ms = mt_objc_copy_method_list(cls, &n);
	int changed = 0;
	for (unsigned i = 0; i < n; i++) {
		if (is_apple_load(cls, ms[i])) { /* every +load, shadowed or not: the runtime calls each */
			changed |= instrument_load(cls, ms[i], st);
			continue;
		}
		/* Apple's: a category's method shadows the class's own of the same selector and comes
		 * first in the list; class_replaceMethod reaches only that one, so the others are left
		 * alone (instrumenting them would chain a trampoline into a trampoline) */
		int shadowed = 0;
		for (unsigned j = 0; j < i && !shadowed; j++)
			shadowed = mt_objc_method_sel(ms[j]) == mt_objc_method_sel(ms[i]);
		if (shadowed)
			continue;
		changed |= instrument_method(cls, ms[i], st);
	}
	free(ms);
	return changed;
#endif
}

void msgtrace_methods_install(void **classes, size_t n, struct mt_methods_stats *st) {
	if (mt_objc_kind() == MT_RT_NONE)
		return;
	void **changed = malloc(2 * n * sizeof *changed + 1);
	size_t nc = 0;
	mt_objc_lock();
	for (size_t i = 0; i < n; i++) {
		void *cls = classes[i];
		void *meta = mt_objc_metaclass(cls);
		st->classes++;
		if (instrument_class(cls, st) && changed)
			changed[nc++] = cls;
		if (meta && instrument_class(meta, st) && changed)
			changed[nc++] = meta;
	}
	mt_objc_methods_changed(changed, nc);
	st->pool_used = used;
	mt_objc_unlock();
	free(changed);
}

#if !MT_APPLE_API
/* gcc's runtime: the first method list of each class and metaclass when msgtrace_classes_unseen
 * last looked at it, | 1 (never 0, NULL included). The runtime links a category's list, or the
 * list of a method added, in front of a class's lists: an unchanged first list is a class
 * given no method since. Written under the runtime's lock. */
static struct mt_growmap seen = {NULL, 0, 10, 22};

/* Whether c's first method list changed since it was last recorded; records it. */
static int seen_changed(void *c) {
	uintptr_t v = (uintptr_t)MT_GNU_CLASS_METHODS(c) | 1;
	if (mt_growmap_get(&seen, c) == v)
		return 0;
	mt_growmap_put(&seen, c, v, 1); /* full: not recorded, so looked at each time */
	return 1;
}
#endif

size_t msgtrace_classes_unseen(void **classes, size_t n) {
#if MT_APPLE_API
	(void)classes;
	return n;
#else
	if (mt_objc_kind() != MT_RT_GNU)
		return n;
	mt_objc_lock();
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		void *meta = mt_objc_metaclass(classes[i]);
		int changed = seen_changed(classes[i]);
		if (meta && seen_changed(meta))
			changed = 1;
		if (changed)
			classes[k++] = classes[i];
	}
	mt_objc_unlock();
	return k;
#endif
}

void msgtrace_methods_restore(struct mt_methods_stats *st) {
	if (mt_objc_kind() == MT_RT_NONE)
		return;
	mt_objc_lock();
	void **changed = malloc(used * sizeof *changed + 1);
	size_t nc = 0;
	for (size_t i = 0; i < used; i++) {
		struct mt_tramp_data *d = &msgtrace_tramp_data[i];
		void *tramp = msgtrace_tramp_text + i * MT_STRIDE;
		if (!d->method || kept[i])
			continue; /* a +load keeps its trampoline: the runtime knows it by that IMP */
		add_home(d->method, i);
		/* only where the IMP is still ours: the app may have swizzled since */
		if (mt_objc_method_imp(d->method) == tramp) {
			mt_objc_method_set_imp(d->cls, d->method, d->sel, d->orig);
			if (changed && (nc == 0 || changed[nc - 1] != d->cls))
				changed[nc++] = d->cls;
			st->instrumented++;
		} else {
			st->foreign++;
		}
		d->method = NULL; /* the trampoline stays, forwarding to the original */
	}
	homes_filled = 1;
	mt_objc_methods_changed(changed, nc);
	st->pool_used = used;
	mt_objc_unlock();
	free(changed);
}

/* GNU modules: what the compiler hands __objc_exec_class (objc/runtime.h has the layouts).
 * Once a module is registered, its categories' lists are linked into their classes, names
 * turned into selectors: these are the methods dispatch finds. */
size_t msgtrace_module_classes(void *module, void **out, size_t max) {
	struct mt_gnu_symtab t;
	if (mt_objc_kind() != MT_RT_GNU || !mt_gnu_module_symtab(module, &t))
		return 0;
	size_t k = 0;
	for (unsigned i = 0; i < t.ncls && k < max; i++)
		out[k++] = t.defs[i];
	for (unsigned i = 0; i < t.ncat && k < max; i++) {
		const char *cname = MT_GNU_CATEGORY_CLASS(t.defs[t.ncls + i]);
		void *c = cname ? mt_objc_look_up_class(cname) : NULL;
		if (c)
			out[k++] = c;
	}
	return k;
}

size_t msgtrace_module_categories(void *module, const char **classes, size_t max) {
	struct mt_gnu_symtab t;
	if (mt_objc_kind() != MT_RT_GNU || !mt_gnu_module_symtab(module, &t))
		return 0;
	size_t k = 0;
	for (unsigned i = 0; i < t.ncat && k < max; i++)
		classes[k++] = MT_GNU_CATEGORY_CLASS(t.defs[t.ncls + i]);
	return k;
}

void msgtrace_module_category_install(void *module, size_t i, struct mt_methods_stats *st) {
	struct mt_gnu_symtab t;
	if (mt_objc_kind() != MT_RT_GNU || !mt_gnu_module_symtab(module, &t) || i >= t.ncat)
		return;
	void *cat = t.defs[t.ncls + i];
	void *cls = MT_GNU_CATEGORY_CLASS(cat) ? mt_objc_look_up_class(MT_GNU_CATEGORY_CLASS(cat)) : NULL;
	if (!cls)
		return;
	mt_objc_lock();
	void *changed[2];
	size_t nc = 0;
	for (int meta = 0; meta < 2; meta++) {
		void *c = meta ? mt_objc_metaclass(cls) : cls; /* class methods: the metaclass */
		struct mt_gnu_method_list *l = MT_GNU_CATEGORY_METHODS(cat, meta); /* one list per category */
		int any = 0;
		for (int j = 0; l && j < l->count; j++)
			any |= instrument_method(c, &l->m[j], st);
		if (any)
			changed[nc++] = c;
	}
	mt_objc_methods_changed(changed, nc);
	st->pool_used = used;
	mt_objc_unlock();
}

/* Gives the methods of one compiled list (a module not registered yet: each method's name still
 * the selector's name, its IMP the compiled function) a trampoline each (before registration,
 * nothing else reads the list: no dispatch table to refresh). The selector is registered here,
 * with the method's types, so the trampoline has the SEL the runtime will put in the method (it
 * returns the one registered first for a name and matching types); a +load gets one too, kept. */
static void install_static_list(void *cls, int meta, struct mt_gnu_method_list *l, struct mt_methods_stats *st) {
	for (; l; l = l->next)
		for (int j = 0; j < l->count; j++) {
			const char *name = l->m[j].sel; /* a name: not registered yet */
			void *imp = l->m[j].imp;
			if (!name || !imp || is_trampoline(imp))
				continue;
			int load = strcmp(name, "load") == 0;
			if (!load && msgtrace_never_instrument(name)) {
				st->never++;
				continue;
			}
			void *sel = mt_objc_sel_register_typed(name, l->m[j].types);
			if (!sel)
				sel = (void *)name; /* named by its string until msgtrace_module_fixup */
			mt_objc_remember_sel_name(sel, sel == name ? name : mt_objc_sel_name(sel));
			struct mt_tramp_data *d = take_trampoline(cls, &l->m[j], sel, imp, st);
			if (!d)
				continue;
			kept[d - msgtrace_tramp_data] |= (unsigned char)(load && meta);
			__atomic_store_n(&l->m[j].imp, msgtrace_tramp_text + (size_t)(d - msgtrace_tramp_data) * MT_STRIDE, __ATOMIC_RELEASE);
			st->instrumented++;
		}
}

size_t msgtrace_module_defs(void *module, const char **names, size_t max, size_t *nclasses) {
	*nclasses = 0;
	struct mt_gnu_symtab t;
	if (mt_objc_kind() != MT_RT_GNU || !mt_gnu_module_symtab(module, &t))
		return 0;
	*nclasses = t.ncls;
	size_t k = 0;
	for (unsigned i = 0; i < t.ncls && k < max; i++)
		names[k++] = MT_GNU_CLASS_NAME(t.defs[i]);
	for (unsigned i = 0; i < t.ncat && k < max; i++)
		names[k++] = MT_GNU_CATEGORY_CLASS(t.defs[t.ncls + i]);
	return (size_t)t.ncls + t.ncat;
}

void msgtrace_module_install_static(void *module, const unsigned char *selected, size_t n, struct mt_methods_stats *st) {
	struct mt_gnu_symtab t;
	if (mt_objc_kind() != MT_RT_GNU || !mt_gnu_module_symtab(module, &t))
		return;
	mt_objc_lock();
	for (size_t i = 0; i < t.ncls && i < n; i++) {
		if (!selected[i])
			continue;
		void *cls = t.defs[i], *meta = mt_objc_metaclass(cls); /* the compiled metaclass */
		st->classes++;
		install_static_list(cls, 0, MT_GNU_CLASS_METHODS(cls), st);
		if (meta)
			install_static_list(meta, 1, MT_GNU_CLASS_METHODS(meta), st);
	}
	/* a category on a class registered before: its lists are added to that class's */
	for (size_t i = 0; i < t.ncat && t.ncls + i < n; i++) {
		void *cat = t.defs[t.ncls + i];
		void *cls = selected[t.ncls + i] && MT_GNU_CATEGORY_CLASS(cat) ? mt_objc_look_up_class(MT_GNU_CATEGORY_CLASS(cat)) : NULL;
		if (!cls)
			continue; /* not selected, or its class comes later: instrumented when both are in */
		install_static_list(cls, 0, MT_GNU_CATEGORY_METHODS(cat, 0), st);
		install_static_list(mt_objc_metaclass(cls), 1, MT_GNU_CATEGORY_METHODS(cat, 1), st);
	}
	st->pool_used = used;
	mt_objc_unlock();
}

#if !MT_APPLE_API
/* After registration: each trampoline given before it gets the SEL the runtime put in its method
 * (the one registered before it, unless the runtime chose another). */
static void fixup_list(struct mt_gnu_method_list *l) {
	for (; l; l = l->next)
		for (int j = 0; j < l->count; j++) {
			void *imp = l->m[j].imp;
			if (!is_trampoline(imp))
				continue;
			struct mt_tramp_data *d = &msgtrace_tramp_data[((char *)imp - msgtrace_tramp_text) / MT_STRIDE];
			void *sel = l->m[j].sel;
			if (d->method == &l->m[j] && sel && d->sel != sel) {
				mt_objc_remember_sel_name(sel, mt_objc_sel_name(sel));
				__atomic_store_n(&d->sel, sel, __ATOMIC_RELEASE);
			}
		}
}

static void module_fixup(void *module) {
	struct mt_gnu_symtab t;
	if (!mt_gnu_module_symtab(module, &t))
		return;
	mt_objc_lock();
	for (unsigned i = 0; i < t.ncls; i++) {
		fixup_list(MT_GNU_CLASS_METHODS(t.defs[i]));
		fixup_list(MT_GNU_CLASS_METHODS(mt_objc_metaclass(t.defs[i])));
	}
	for (unsigned i = 0; i < t.ncat; i++) {
		void *cat = t.defs[t.ncls + i];
		fixup_list(MT_GNU_CATEGORY_METHODS(cat, 0));
		fixup_list(MT_GNU_CATEGORY_METHODS(cat, 1));
	}
	mt_objc_unlock();
}
#endif

/* Set by the Go side once its module callbacks are in place: until then (the Go runtime may
 * not even be started: objects initialized before ours register their modules through the
 * interposer below) a module only goes to the runtime. */
static int modules_watched;

void msgtrace_watch_modules(int on) { __atomic_store_n(&modules_watched, on, __ATOMIC_RELEASE); }

/* Early modules (MSGTRACE_METHODS=all through the preload loader): from the first module a
 * library registers (gnustep-base's, long before the loader's constructor, the Go runtime and
 * the drain) until the Go side has its selection (msgtrace_early_methods_end), every module is
 * instrumented here, in C, with the selection `all` needs no Go for: every class and category
 * of the module. Its methods get trampolines before the runtime registers it and sends its
 * +load, as the Go side's would. Recording runs meanwhile (msgtrace_launch_record_early):
 * records wait in the pool's chunks for the drain. */
static int early_modules;
static struct mt_methods_stats early_stats; /* under the runtime's lock */

int msgtrace_early_methods(void) {
#if MT_APPLE_API
	return 0;
#else
	if (mt_objc_kind() != MT_RT_GNU || !msgtrace_launch_record_early())
		return 0;
	__atomic_store_n(&early_modules, 1, __ATOMIC_RELEASE);
	return 1;
#endif
}

void msgtrace_early_methods_end(struct mt_methods_stats *st) {
	mt_objc_lock();
	__atomic_store_n(&early_modules, 0, __ATOMIC_RELEASE);
	msgtrace_launch_record_early_end();
	*st = early_stats;
	memset(&early_stats, 0, sizeof early_stats);
	mt_objc_unlock();
}

#if !MT_APPLE_API
/* gcc's runtime copies a root class's instance methods into its metaclass as it registers the
 * class or a category of it, IMP and all: a copy of an instance method given a trampoline before
 * registration leads to that trampoline, which names the call -[Root x] where a class was sent
 * x. Each such copy of cls's gets its original IMP back and a trampoline of its own (+[Root x]).
 * Lock held. */
static void root_copies(void *cls, struct mt_methods_stats *st) {
	void *meta = cls ? mt_objc_metaclass(cls) : NULL;
	if (!meta || MT_GNU_CLASS_SUPER(cls))
		return;
	int any = 0;
	for (struct mt_gnu_method_list *l = MT_GNU_CLASS_METHODS(meta); l; l = l->next)
		for (int j = 0; j < l->count; j++) {
			void *imp = l->m[j].imp;
			if (!is_trampoline(imp))
				continue;
			struct mt_tramp_data *d = &msgtrace_tramp_data[((char *)imp - msgtrace_tramp_text) / MT_STRIDE];
			if (d->method == &l->m[j] || d->cls == meta)
				continue;
			__atomic_store_n(&l->m[j].imp, d->orig, __ATOMIC_RELEASE);
			instrument_method(meta, &l->m[j], st);
			any = 1;
		}
	if (any) {
		void *changed[1] = {meta};
		mt_objc_methods_changed(changed, 1);
	}
	st->pool_used = used;
}

/* One module, early: every class and category selected before it registers; a category on a
 * class not registered before (say, one of the same module) instrumented once it is (its +load
 * was sent untraced then; one on a class of a later module is left to the Go side's install). */
static void early_module(void *module, void (*real)(void *)) {
	struct mt_gnu_symtab t;
	if (!mt_gnu_module_symtab(module, &t)) {
		real(module);
		return;
	}
	size_t n = (size_t)t.ncls + t.ncat;
	unsigned char buf[512], *selected = n <= sizeof buf ? buf : malloc(n);
	if (selected) {
		memset(selected, 1, n);
		msgtrace_module_install_static(module, selected, n, &early_stats);
		/* which categories' classes were not there: those the install left */
		for (size_t i = 0; i < t.ncat; i++) {
			const char *c = MT_GNU_CATEGORY_CLASS(t.defs[t.ncls + i]);
			selected[t.ncls + i] = c && !mt_objc_look_up_class(c);
		}
	}
	real(module); /* registers, sends +load (its lock held) */
	module_fixup(module);
	for (size_t i = 0; selected && i < t.ncat; i++)
		if (selected[t.ncls + i])
			msgtrace_module_category_install(module, i, &early_stats);
	if (selected != buf)
		free(selected);
	/* root classes the module defines or extends: their metaclass's copies */
	mt_objc_lock();
	for (size_t i = 0; i < n; i++) {
		void *cls = i < t.ncls ? t.defs[i] : NULL;
		const char *c = i >= t.ncls ? MT_GNU_CATEGORY_CLASS(t.defs[i]) : NULL;
		if (c)
			cls = mt_objc_look_up_class(c);
		root_copies(cls, &early_stats);
	}
	mt_objc_unlock();
}
#endif

void msgtrace_exec_class(void *module, void (*real)(void *)) {
#if MT_APPLE_API
	real(module); /* Apple's runtime has no modules: never called there */
#else
	if (__atomic_load_n(&early_modules, __ATOMIC_ACQUIRE) && module) {
		early_module(module, real);
		return;
	}
	int watched = __atomic_load_n(&modules_watched, __ATOMIC_ACQUIRE) && module && mt_objc_kind() == MT_RT_GNU;
	if (watched)
		msgtraceModuleArriving(module); /* the selected methods get trampolines: +load too */
	real(module);                       /* registers, sends +load (its lock held) */
	if (watched) {
		module_fixup(module);
		msgtraceModuleLoaded(module);
	}
#endif
}

void (*msgtrace_orig___objc_exec_class)(void *);

void msgtrace___objc_exec_class(void *module) { msgtrace_exec_class(module, msgtrace_orig___objc_exec_class); }

#if !MT_APPLE_API && defined(__linux__)
/* __objc_exec_class as every object binds it where this library is preloaded: the preloaded
 * objects come first in the global scope, so module constructors of the main program, of the
 * libraries and of objects dlopened later (whose slots no rebinding reaches before their
 * constructors run) call this. The runtime's own is the next definition. Where the preload
 * loader (libmsgtrace-preload.so) loaded this library, the loader's definition is the one bound
 * and it calls msgtrace_exec_class. */
static void (*next_exec_class)(void *);

static void exec_class_entry(void *module) {
	void (*next)(void *) = __atomic_load_n(&next_exec_class, __ATOMIC_ACQUIRE);
	if (!next) {
		*(void **)&next = mt_objc_exec_class_next();
		if (!next || next == exec_class_entry) { /* libobjc comes before us: not how we are loaded */
			static const char msg[] = "msgtrace: __objc_exec_class: the Objective-C runtime's is not found after ours\n";
			if (write(2, msg, sizeof msg - 1) < 0)
				abort();
			abort();
		}
		__atomic_store_n(&next_exec_class, next, __ATOMIC_RELEASE);
	}
	msgtrace_exec_class(module, next);
}

void __objc_exec_class(void *module) __attribute__((alias("exec_class_entry"), visibility("default")));

int msgtrace_exec_class_interposed(void) {
	void *bound = mt_objc_exec_class_bound();
	return bound && (bound == (void *)exec_class_entry || bound == dlsym(RTLD_DEFAULT, "msgtrace_loader_exec_class"));
}
#else
int msgtrace_exec_class_interposed(void) { return 0; }
#endif

/* Classes created at run time (objc_allocateClassPair + objc_registerClassPair): reported once
 * registered, with the methods they were given before. */
void (*msgtrace_orig_objc_registerClassPair)(void *);

static void class_arrived(void *cls, void *creator);

void msgtrace_objc_registerClassPair(void *cls) {
	msgtrace_orig_objc_registerClassPair(cls);
	class_arrived(cls, __builtin_return_address(0)); /* who made it: where it belongs */
}

/* A method added to a registered class (KVO adds its setters to NSKVONotifying_* so, as they
 * get observed): the class is reported again once the method is there. */
unsigned char (*msgtrace_orig_class_addMethod)(void *, void *, void *, const char *);

unsigned char msgtrace_class_addMethod(void *cls, void *sel, void *imp, const char *types) {
	unsigned char ok = msgtrace_orig_class_addMethod(cls, sel, imp, types);
	if (ok && cls && mt_objc_kind() != MT_RT_NONE) {
		/* a class still being built is reported when it registers */
		void *base = mt_objc_registered_class(cls);
		if (base)
			class_arrived(base, NULL);
	}
	return ok;
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
static int is_apple_load(void *cls, void *m) {
	if (!mt_objc_is_meta(cls)) /* a bit of the class: the name only for class methods */
		return 0;
	void *sel = mt_objc_method_sel(m);
	const char *name = sel ? mt_objc_sel_name(sel) : NULL;
	return name && strcmp(name, "load") == 0;
}

static int instrument_load(void *cls, void *m, struct mt_methods_stats *st) {
	void *sel = mt_objc_method_sel(m), *imp = mt_objc_method_imp(m);
	if (!imp || is_trampoline(imp))
		return 0;
	if (mt_objc_is_forwarder(imp) || !mt_objc_can_set_imp_exact()) {
		st->never++;
		return 0;
	}
	mt_objc_remember_sel_name(sel, "load");
	struct mt_tramp_data *d = take_trampoline(cls, m, sel, imp, st);
	if (!d)
		return 0;
	size_t k = (size_t)(d - msgtrace_tramp_data);
	kept[k] = 1;
	void *old = mt_objc_method_set_imp_exact(m, msgtrace_tramp_text + k * MT_STRIDE);
	if (old && old != imp)
		__atomic_store_n(&d->orig, old, __ATOMIC_RELEASE); /* swizzled meanwhile */
	st->instrumented++;
	return 1;
}

/* Apple: an image's categories (its __objc_catlist), whatever class they extend: the methods of
 * each that are in the class's list (attached: at launch, since the runtime loaded our own
 * +load; later images, when mapped) get trampolines; a method a later category shadows is left
 * alone, as instrument_class leaves it. Those of a selected class are ours already. */
void msgtrace_image_categories_install(const void *header, struct mt_methods_stats *st) {
	void **cats;
	size_t n = mt_objc_image_categories(header, &cats);
	for (size_t i = 0; i < n; i++) {
		void *cls = cats[i] ? MT_APPLE_CATEGORY_CLASS(cats[i]) : NULL;
		for (int meta = 0; cls && meta < 2; meta++) {
			void *c = meta ? mt_objc_metaclass(cls) : cls, *list = MT_APPLE_CATEGORY_METHODS(cats[i], meta);
			if (!c || !list)
				continue;
			unsigned k = 0;
			void **ms = mt_objc_copy_method_list(c, &k);
			for (unsigned j = 0; j < k; j++) {
				if (!mt_apple_in_method_list(list, ms[j]))
					continue;
				if (is_apple_load(c, ms[j])) {
					instrument_load(c, ms[j], st);
					continue;
				}
				int shadowed = 0;
				for (unsigned q = 0; q < j && !shadowed; q++)
					shadowed = mt_objc_method_sel(ms[q]) == mt_objc_method_sel(ms[j]);
				if (!shadowed)
					instrument_method(c, ms[j], st);
			}
			free(ms);
		}
	}
	st->pool_used = used;
}

/* Apple: images loaded later. objc_addLoadImageFunc calls back once the runtime has read an
 * image's classes and categories, with the runtime lock held: nothing that takes it
 * (class_replaceMethod, class_copyMethodList) may run there. The callback only marks work;
 * a thread of ours instruments (msgtraceImagesLoaded), once the loading thread let go of the
 * lock. The images loaded before the registration are reported to the registering thread
 * inside the call and ignored (the install already covered them).
 * An image's +load methods: objc4 calls the callbacks at the end of map_images, and dyld has it
 * schedule the image's +loads (load_images, reading their IMPs) on the loading thread right after
 * map_images let go of the lock, with nothing of ours in between; every function that sets an IMP
 * takes that lock. So a later image's +load is traced only when our thread got there first: a
 * race, not a promise. The images loaded at launch are instrumented by the initializer, before
 * the app image's load_images (README, launch). */
static pthread_mutex_t later_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t later_cv = PTHREAD_COND_INITIALIZER;
static int later_pending, registering;
static pthread_t registrar;

static void on_load_image(const void *header) {
	(void)header;
	if (registering && pthread_equal(pthread_self(), registrar))
		return;
	pthread_mutex_lock(&later_mu);
	later_pending = 1;
	pthread_cond_signal(&later_cv);
	pthread_mutex_unlock(&later_mu);
}

/* Classes registered or given a method, queued for the same thread: the hooks may run where
 * dyld holds its lock (+load) and must not wait for ours, which a thread of ours may hold
 * while it asks dyld (dladdr). */
struct arrival {
	void *cls, *creator;
};
static struct arrival *arrivals;
static size_t narrivals, carrivals;
static int later_running;

static void *later_main(void *arg) {
	(void)arg;
	msgtrace_set_untraced_self();
	for (;;) {
		pthread_mutex_lock(&later_mu);
		while (!later_pending && !narrivals)
			pthread_cond_wait(&later_cv, &later_mu);
		int images = later_pending;
		later_pending = 0;
		struct arrival *batch = arrivals;
		size_t n = narrivals;
		arrivals = NULL, narrivals = carrivals = 0;
		pthread_mutex_unlock(&later_mu);
		for (size_t i = 0; i < n; i++)
			msgtraceClassRegistered(batch[i].cls, batch[i].creator);
		free(batch);
		if (images)
			msgtraceImagesLoaded();
	}
	return NULL;
}

static void class_arrived(void *cls, void *creator) {
	if (__atomic_load_n(&later_running, __ATOMIC_ACQUIRE)) {
		pthread_mutex_lock(&later_mu);
		if (narrivals == carrivals) {
			size_t c = carrivals ? 2 * carrivals : 64;
			struct arrival *a = realloc(arrivals, c * sizeof *a);
			if (a)
				arrivals = a, carrivals = c;
		}
		int queued = narrivals < carrivals;
		if (queued) {
			arrivals[narrivals++] = (struct arrival){cls, creator};
			pthread_cond_signal(&later_cv);
		}
		pthread_mutex_unlock(&later_mu);
		if (queued)
			return;
	}
	msgtraceClassRegistered(cls, creator); /* no thread of ours (before macOS 10.15): here */
}

int msgtrace_watch_loaded_images(void) {
	if (!mt_objc_can_add_load_image_func())
		return 0; /* before macOS 10.15 / iOS 13: dyld's add-image callback instead */
	pthread_t t;
	pthread_attr_t at;
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	int err = pthread_create(&t, &at, later_main, NULL);
	pthread_attr_destroy(&at);
	if (err)
		return 0;
	__atomic_store_n(&later_running, 1, __ATOMIC_RELEASE);
	registrar = pthread_self();
	registering = 1;
	mt_objc_add_load_image_func(on_load_image);
	registering = 0;
	return 1;
}
#else
int msgtrace_watch_loaded_images(void) { return 0; }

void msgtrace_image_categories_install(const void *header, struct mt_methods_stats *st) { (void)header, (void)st; }

/* gcc's runtime: at once, in the thread that registered the class or added the method (the
 * runtime's lock may be held: the callee takes it first, and asks nothing of the loader) */
static void class_arrived(void *cls, void *creator) { msgtraceClassRegistered(cls, creator); }
#endif
