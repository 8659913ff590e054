/*
 * msgtrace method capture, class by class: puts the trampolines of the pool (trampoline_*.S) into
 * the methods of the classes the Go side selects and takes them out again, through the
 * Objective-C runtime found in the process (objc/runtime.h); the rebound objc_registerClassPair
 * and class_addMethod (classes and methods made at run time); which loaded object a class is in
 * (the selection goes by image).
 *
 * gcc's GNU runtime (libobjc.so.4): a method's IMP is written straight into its struct
 * objc_method under __objc_runtime_mutex, then dispatch tables are refreshed once per class
 * subtree. Not method_setImplementation (it walks every class per call, and writes into
 * __objc_uninstalled_dtable, the table every never-messaged class shares) nor
 * class_replaceMethod (on a subclass it replaces the superclass's method).
 * Apple's runtime: class_replaceMethod on the defining class (flushes only its subtree).
 * GNUstep's libobjc2: method_setImplementation on the very method (its dispatch tables hold the
 * methods themselves, so the next send reads the new IMP: nothing to refresh), the methods
 * listed by class_copyMethodList; its modules' methods before they load: methods_gnustep.c.
 * Depends on: methods_tramps.c (a method given its trampoline), methods_images.c (Apple: a class
 * arriving), objc/runtime.c, trampoline_*.S; the Go side's msgtraceClassRegistered (methods.go).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "methods.h"
#include "methods_internal.h"
#include "objc/ptrmap.h"
#include "rt.h"
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

/* An object's name as dl_iterate_phdr gives it: the main program's is "", its path instead. */
static const char *object_name(const char *name) {
	if (name && !name[0]) {
		static char exe[4096];
		if (!exe[0]) {
			ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
			exe[n > 0 ? n : 0] = 0;
		}
		return exe;
	}
	return name;
}

static const char *object_path(const void *p) {
	struct find_object f = {(uintptr_t)p, NULL};
	dl_iterate_phdr(find_object_one, &f);
	return object_name(f.name);
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

struct segments; /* Linux: the loaded objects' segments, read once (below) */
static const char *segment_path(const struct segments *s, const void *p);

/* The image of cls, looked up in segs where given (else by object_path): a class created at
 * run time lives in the heap, and its superclasses say where it belongs. */
static const char *class_image_in(const struct segments *segs, void *cls) {
	if (mt_objc_kind() == MT_RT_NONE)
		return "";
	for (void *c = cls; c; c = mt_objc_superclass(c)) {
		const char *n = segs ? segment_path(segs, c) : object_path(c);
		if (n)
			return n;
	}
	return "";
}

const char *msgtrace_class_image(void *cls) { return class_image_in(NULL, cls); }

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

/* object_path's answer, from the segments. */
static const char *segment_path(const struct segments *s, const void *p) {
	const struct segment *g = segment_of(s, (uintptr_t)p);
	return g ? object_name(g->name) : NULL;
}
#else
static const char *segment_path(const struct segments *s, const void *p) { return (void)s, object_path(p); }
#endif

void msgtrace_class_images(void **classes, size_t n, const char **out) {
	struct segments *segs = NULL;
#if defined(__linux__)
	/* msgtrace_class_image for each, the segments read once: a dl_iterate_phdr walk of every
	 * object per class was most of the default selection's pick (a few hundred classes); for a
	 * class or a few (one registered, or given a method) a walk each costs less than the table,
	 * and without memory for the table it is a walk each too */
	struct segments s = {0};
	if (n >= 16 && mt_objc_kind() != MT_RT_NONE) {
		dl_iterate_phdr(collect_segment, &s);
		if (!s.failed) {
			qsort(s.v, s.n, sizeof *s.v, segment_cmp);
			segs = &s;
		}
	}
#endif
	for (size_t i = 0; i < n; i++)
		out[i] = class_image_in(segs, classes[i]);
#if defined(__linux__)
	free(s.v);
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

/* Gives the methods of cls trampolines; returns whether any IMP changed. */
static int instrument_class(void *cls, struct mt_methods_stats *st) {
#if !MT_APPLE_API
	if (mt_objc_kind() == MT_RT_GNUSTEP) {
		/* libobjc2: every method of the list, a category's and the class's own of the same
		 * selector alike (method_setImplementation reaches the exact method: none chains into
		 * another's trampoline; dispatch finds the category's, first in the list) */
		unsigned n = 0;
		void **ms = mt_objc_copy_method_list(cls, &n);
		int changed = 0;
		for (unsigned i = 0; i < n; i++)
			changed |= mt_instrument_method(cls, ms[i], st);
		free(ms);
		return changed;
	}
	/* gcc's runtime: the class's method lists walked in place, as its class_copyMethodList
	 * does into an array it allocates (the runtime's lock is held: the lists do not change
	 * meanwhile) */
	int any = 0;
	for (struct mt_gnu_method_list *l = MT_GNU_CLASS_METHODS(cls); l; l = l->next)
		for (int j = 0; j < l->count; j++) {
			void *imp = l->m[j].imp;
			if (imp && !mt_is_trampoline(imp)) /* ours already: nearly all where modules came early */
				any |= mt_instrument_method(cls, &l->m[j], st);
		}
	return any;
#else
	unsigned n = 0;
	void **ms = mt_objc_copy_method_list(cls, &n);
	int changed = 0;
	for (unsigned i = 0; i < n; i++) {
		if (mt_is_apple_load(cls, ms[i])) { /* every +load, shadowed or not: the runtime calls each */
			changed |= mt_instrument_load(cls, ms[i], st);
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
		changed |= mt_instrument_method(cls, ms[i], st);
	}
	free(ms);
	return changed;
#endif
}

#if !MT_APPLE_API
/* gcc's runtime: the classes the selection chose, and their metaclasses (each given to
 * msgtrace_methods_install since the last restore): a method the program adds to one of them
 * later is given a trampoline as it is added (msgtrace_class_addMethod). Under the runtime's
 * lock. */
static struct mt_growmap selected = {NULL, 0, 10, 22};
static struct mt_methods_stats added; /* what msgtrace_class_addMethod instrumented */

static void select_class(void *cls, void *meta) {
	mt_growmap_put(&selected, cls, 1, 0); /* full: methods added to it wait for the next install */
	if (meta)
		mt_growmap_put(&selected, meta, 1, 0);
}
#else
static void select_class(void *cls, void *meta) { (void)cls, (void)meta; }
#endif

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
		select_class(cls, meta);
		if (instrument_class(cls, st) && changed)
			changed[nc++] = cls;
		if (meta && instrument_class(meta, st) && changed)
			changed[nc++] = meta;
	}
	mt_objc_methods_changed(changed, nc);
	st->pool_used = mt_tramps_used;
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
	void **changed = malloc(mt_tramps_used * sizeof *changed + 1);
	size_t nc = 0;
	for (size_t i = 0; i < mt_tramps_used; i++) {
		struct mt_tramp_data *d = &msgtrace_tramp_data[i];
		void *tramp = msgtrace_tramp_text + i * MT_STRIDE;
		if (!d->method || mt_kept[i])
			continue; /* a +load keeps its trampoline: the runtime knows it by that IMP */
		mt_trampoline_home(d->method, i);
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
#if !MT_APPLE_API
	mt_growmap_reset(&selected); /* a reinstall chooses them again */
#endif
	mt_objc_methods_changed(changed, nc);
	st->pool_used = mt_tramps_used;
	mt_objc_unlock();
	free(changed);
}

/* Classes created at run time (objc_allocateClassPair + objc_registerClassPair): reported once
 * registered, with the methods they were given before. */
void (*msgtrace_orig_objc_registerClassPair)(void *);

void msgtrace_objc_registerClassPair(void *cls) {
	msgtrace_orig_objc_registerClassPair(cls);
	mt_class_arrived(cls, __builtin_return_address(0)); /* who made it: where it belongs */
}

/* A method added to a registered class (KVO adds its setters to NSKVONotifying_* so, as they
 * get observed; gnustep-base's +initialize methods add a behaviour's methods so).
 *
 * gcc's runtime: in C, nothing asked of the Go side. A method added to a selected class is given
 * its trampoline before it exists: the runtime is handed the trampoline as the IMP, so the one
 * dispatch-table refresh it does for the new method puts the trampoline there, and we refresh
 * nothing. Most such methods are added inside a +initialize, which gcc's runtime runs holding
 * its lock, and while it runs, other threads run whatever classes it has finished (a subclass
 * it initialized on the way is one: gnustep-base's NSMutableArray inside +[NSArray initialize],
 * before NSArray has set up what NSMutableArray's methods use). Time spent here widens that
 * window: a call into Go per method (a cgo callback, on a thread new to Go a whole M set up),
 * the class's image looked up, a second refresh, made gnustep-base's own first-touch crash
 * several times as frequent (make bench-firsttouch). Here it costs a lookup in the selected
 * classes and, for a selected one, a trampoline handed out. */
unsigned char (*msgtrace_orig_class_addMethod)(void *, void *, void *, const char *);

unsigned char msgtrace_class_addMethod(void *cls, void *sel, void *imp, const char *types) {
#if !MT_APPLE_API
	if (mt_objc_kind() == MT_RT_GNU) {
		/* a class not selected (read without the lock; a restore may forget it meanwhile), or a
		 * behaviour's method, instrumented where it came from: the runtime's alone */
		if (!cls || !imp || mt_is_trampoline(imp) || !mt_growmap_get(&selected, cls))
			return msgtrace_orig_class_addMethod(cls, sel, imp, types);
		mt_objc_lock(); /* recursive; held around the runtime's: the new method list is the class's first */
		struct mt_tramp_data *d = NULL;
		/* a class still being built (never selected) is instrumented when it registers */
		if (mt_growmap_get(&selected, cls) && mt_objc_registered_class(cls) && mt_instrumentable(cls, sel, imp, &added))
			d = mt_new_trampoline(cls, NULL, sel, imp, &added);
		size_t k = d ? (size_t)(d - msgtrace_tramp_data) : 0;
		void *tramp = d ? msgtrace_tramp_text + k * MT_STRIDE : imp;
		unsigned char ok = msgtrace_orig_class_addMethod(cls, sel, tramp, types);
		if (d && ok) {
			/* the runtime links a list of the one method in front of the class's lists */
			struct mt_gnu_method_list *l = MT_GNU_CLASS_METHODS(cls);
			if (l && l->count == 1 && l->m[0].imp == tramp)
				d->method = &l->m[0]; /* for a restore; else the trampoline stays, forwarding */
			added.instrumented++;
		} else if (d && k + 1 == mt_tramps_used) { /* not added (the class has one of that name): never seen */
			*d = (struct mt_tramp_data){0};
			mt_tramps_used--;
		}
		mt_objc_unlock();
		return ok;
	}
#endif
	unsigned char ok = msgtrace_orig_class_addMethod(cls, sel, imp, types);
	if (ok && cls && mt_objc_kind() != MT_RT_NONE) {
		/* a class still being built is reported when it registers */
		void *base = mt_objc_registered_class(cls);
		if (base)
			mt_class_arrived(base, NULL);
	}
	return ok;
}

void msgtrace_added_methods(struct mt_methods_stats *st) {
#if !MT_APPLE_API
	/* counters, read without the runtime's lock (a thread may hold it for long: a +initialize
	 * that never returns must not hang the report at exit) */
	*st = (struct mt_methods_stats){
	    .instrumented = __atomic_load_n(&added.instrumented, __ATOMIC_RELAXED),
	    .never = __atomic_load_n(&added.never, __ATOMIC_RELAXED),
	    .full = __atomic_load_n(&added.full, __ATOMIC_RELAXED),
	    .pool_used = __atomic_load_n(&mt_tramps_used, __ATOMIC_RELAXED),
	};
#else
	*st = (struct mt_methods_stats){0};
#endif
}

#if !MT_APPLE_API
/* gcc's runtime: at once, in the thread that registered the class (the runtime's lock may be
 * held: the callee takes it first, and asks nothing of the loader) */
void mt_class_arrived(void *cls, void *creator) { msgtraceClassRegistered(cls, creator); }
#endif
