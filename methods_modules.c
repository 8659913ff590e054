/*
 * Method capture on gcc's GNU runtime, module by module: what the compiler hands
 * __objc_exec_class (a module's classes and categories, their compiled method lists), methods
 * given trampolines before the runtime registers a module and sends its +load, the SELs fixed
 * up after, the early modules of MSGTRACE_METHODS=all (before the Go side is up), and the
 * __objc_exec_class this library defines where it is preloaded. The msgtrace_module_* functions
 * and the early start serve libobjc2's modules too (__objc_load: methods_gnustep.c does the
 * work).
 * Depends on: methods_tramps.c (the trampolines), methods_gnustep.c (libobjc2's modules),
 * objc/runtime.c, rt_launch.c (the early recording), trampoline_*.S, hops.c (the work items'
 * classes hooked as they arrive).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "hops.h"
#include "methods.h"
#include "methods_internal.h"
#include "rt.h"
#include "rt_launch.h"
#include "trampoline.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/mman.h>
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif
#endif

/* GNU modules: what the compiler hands __objc_exec_class (objc/runtime.h has the layouts).
 * Once a module is registered, its categories' lists are linked into their classes, names
 * turned into selectors: these are the methods dispatch finds. */
size_t msgtrace_module_classes(void *module, void **out, size_t max) {
#if !MT_APPLE_API
	if (mt_objc_kind() == MT_RT_GNUSTEP)
		return mt_gs_module_classes(module, out, max);
#endif
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
#if !MT_APPLE_API
	if (mt_objc_kind() == MT_RT_GNUSTEP)
		return mt_gs_module_categories(module, classes, max);
#endif
	struct mt_gnu_symtab t;
	if (mt_objc_kind() != MT_RT_GNU || !mt_gnu_module_symtab(module, &t))
		return 0;
	size_t k = 0;
	for (unsigned i = 0; i < t.ncat && k < max; i++)
		classes[k++] = MT_GNU_CATEGORY_CLASS(t.defs[t.ncls + i]);
	return k;
}

/* Category cat's methods, on cls (registered). */
static void category_install(void *cat, void *cls, struct mt_methods_stats *st) {
	mt_objc_lock();
	void *changed[2];
	size_t nc = 0;
	for (int meta = 0; meta < 2; meta++) {
		void *c = meta ? mt_objc_metaclass(cls) : cls; /* class methods: the metaclass */
		struct mt_gnu_method_list *l = MT_GNU_CATEGORY_METHODS(cat, meta); /* one list per category */
		int any = 0;
		for (int j = 0; l && j < l->count; j++)
			any |= mt_instrument_method(c, &l->m[j], st);
		if (any)
			changed[nc++] = c;
	}
	mt_objc_methods_changed(changed, nc);
	st->pool_used = mt_tramps_used;
	mt_objc_unlock();
}

void msgtrace_module_category_install(void *module, size_t i, struct mt_methods_stats *st) {
#if !MT_APPLE_API
	if (mt_objc_kind() == MT_RT_GNUSTEP) {
		mt_gs_module_category_install(module, i, st);
		return;
	}
#endif
	struct mt_gnu_symtab t;
	if (mt_objc_kind() != MT_RT_GNU || !mt_gnu_module_symtab(module, &t) || i >= t.ncat)
		return;
	void *cat = t.defs[t.ncls + i];
	void *cls = MT_GNU_CATEGORY_CLASS(cat) ? mt_objc_look_up_class(MT_GNU_CATEGORY_CLASS(cat)) : NULL;
	if (cls)
		category_install(cat, cls, st);
}

/* Gives the methods of one compiled list (a module not registered yet: each method's name still
 * the selector's name, its IMP the compiled function) a trampoline each (before registration,
 * nothing else reads the list: no dispatch table to refresh). No selector is registered here:
 * the runtime registers every method's name as it registers the module, and writes the SEL into
 * the method, where the module's fixup reads it into the trampoline (fixup_list). Until then the
 * trampoline names its calls by the name itself (mt_objc_named_sel): a +load, sent while the
 * module registers, is recorded so. Per method: a look at its name (the never-instrument list's
 * hash) and a new trampoline (a method the runtime never had has none to get back), no lock, no
 * table. A +load gets a trampoline too, kept. */
static void install_static_list(void *cls, int meta, struct mt_gnu_method_list *l, struct mt_methods_stats *st) {
	for (; l; l = l->next)
		for (int j = 0; j < l->count; j++) {
			struct mt_gnu_method *m = &l->m[j];
			const char *name = m->sel; /* a name: not registered yet */
			void *imp = m->imp;
			if (!name || !imp || mt_is_trampoline(imp))
				continue;
			int never = mt_never_index(name), load = never == MT_NEVER_LOAD;
			if (never && !load) {
				st->never++;
				continue;
			}
			struct mt_tramp_data *d = mt_new_trampoline(cls, m, mt_objc_named_sel(name), imp, st);
			if (!d)
				continue;
			size_t k = (size_t)(d - msgtrace_tramp_data);
			if (load && meta)
				mt_kept[k] = 1;
			__atomic_store_n(&m->imp, msgtrace_tramp_text + k * MT_STRIDE, __ATOMIC_RELEASE);
			st->instrumented++;
		}
}

size_t msgtrace_module_defs(void *module, const char **names, size_t max, size_t *nclasses) {
	*nclasses = 0;
#if !MT_APPLE_API
	if (mt_objc_kind() == MT_RT_GNUSTEP)
		return mt_gs_module_defs(module, names, max, nclasses);
#endif
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

/* msgtrace_module_install_static's, for module's symtab t; catcls (NULL: looked up here) is the
 * class of each category, looked up already (NULL: not registered); selected NULL: every
 * class and category of the module. */
static void install_static(const struct mt_gnu_symtab *tp, void *const *catcls, const unsigned char *selected, size_t n,
			   struct mt_methods_stats *st) {
	struct mt_gnu_symtab t = *tp;
	mt_objc_lock();
	for (size_t i = 0; i < t.ncls && i < n; i++) {
		if (selected && !selected[i])
			continue;
		void *cls = t.defs[i], *meta = mt_objc_metaclass(cls); /* the compiled metaclass */
		st->classes++;
		install_static_list(cls, 0, MT_GNU_CLASS_METHODS(cls), st);
		if (meta)
			install_static_list(meta, 1, MT_GNU_CLASS_METHODS(meta), st);
	}
	/* a category on a class registered before: its lists are added to that class's */
	for (size_t i = 0; i < t.ncat && t.ncls + i < n; i++) {
		void *cat = t.defs[t.ncls + i], *cls = NULL;
		if (!selected || selected[t.ncls + i])
			cls = catcls ? catcls[i] : MT_GNU_CATEGORY_CLASS(cat) ? mt_objc_look_up_class(MT_GNU_CATEGORY_CLASS(cat)) : NULL;
		if (!cls)
			continue; /* not selected, or its class comes later: instrumented when both are in */
		install_static_list(cls, 0, MT_GNU_CATEGORY_METHODS(cat, 0), st);
		install_static_list(mt_objc_metaclass(cls), 1, MT_GNU_CATEGORY_METHODS(cat, 1), st);
	}
	st->pool_used = mt_tramps_used;
	mt_objc_unlock();
}

void msgtrace_module_install_static(void *module, const unsigned char *selected, size_t n, struct mt_methods_stats *st) {
#if !MT_APPLE_API
	if (mt_objc_kind() == MT_RT_GNUSTEP) {
		mt_gs_module_install_static(module, selected, n, st);
		return;
	}
#endif
	struct mt_gnu_symtab t;
	if (mt_objc_kind() == MT_RT_GNU && mt_gnu_module_symtab(module, &t))
		install_static(&t, NULL, selected, n, st);
}

#if !MT_APPLE_API
/* After registration: each trampoline given before it gets the SEL the runtime put in its method
 * in place of the name it was named by (install_static_list), the name logged for the drain
 * (the string the trampoline had: no sel_getName, which takes the runtime's lock, and no hash
 * insert: mt_objc_log_sel_name), or, where it had a SEL already, the one the runtime chose if
 * another. */
static void fixup_list(struct mt_gnu_method_list *l, int chain) {
	for (; l; l = chain ? l->next : NULL)
		for (int j = 0; j < l->count; j++) {
			struct mt_gnu_method *m = &l->m[j];
			void *imp = m->imp;
			if (!mt_is_trampoline(imp))
				continue;
			struct mt_tramp_data *d = &msgtrace_tramp_data[((char *)imp - msgtrace_tramp_text) / MT_STRIDE];
			void *sel = m->sel;
			if (d->method != m || !sel || d->sel == sel)
				continue;
			const char *name = mt_objc_sel_as_name(d->sel);
			if (name && sel == (void *)name)
				continue; /* not registered (the runtime left the name): named by it still */
			if (name)
				mt_objc_log_sel_name(sel, name);
			else
				mt_objc_remember_sel_name(sel, mt_objc_sel_name(sel));
			__atomic_store_n(&d->sel, sel, __ATOMIC_RELEASE);
		}
}

static void module_fixup(void *module) {
	struct mt_gnu_symtab t;
	if (!mt_gnu_module_symtab(module, &t))
		return;
	mt_objc_lock();
	for (unsigned i = 0; i < t.ncls; i++) {
		fixup_list(MT_GNU_CLASS_METHODS(t.defs[i]), 1);
		fixup_list(MT_GNU_CLASS_METHODS(mt_objc_metaclass(t.defs[i])), 1);
	}
	/* a category's one list: once registered, it is linked in front of its class's (of this
	 * module or an earlier one: fixed up then) */
	for (unsigned i = 0; i < t.ncat; i++) {
		void *cat = t.defs[t.ncls + i];
		fixup_list(MT_GNU_CATEGORY_METHODS(cat, 0), 0);
		fixup_list(MT_GNU_CATEGORY_METHODS(cat, 1), 0);
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
	int k = mt_objc_kind();
	if ((k != MT_RT_GNU && k != MT_RT_GNUSTEP) || !msgtrace_launch_record_early())
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

/* How many methods msgtrace_early_prefault readies pages for: gnustep-base's ~7,100 and a margin
 * (256 KiB of trampoline data, 128 KiB of selector log). */
#define EARLY_PREFAULT_METHODS 8192
_Static_assert(EARLY_PREFAULT_METHODS <= MT_POOL, "no more than the pool");

#if !MT_APPLE_API && defined(__linux__)
/* Faults in [p, p + len) writable without changing a byte (the installer may be writing there
 * at the same time). */
static void populate(void *p, size_t len) {
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	if (!len || !page)
		return;
	uintptr_t a = (uintptr_t)p & ~(page - 1), e = ((uintptr_t)p + len + page - 1) & ~(page - 1);
	(void)madvise((void *)a, e - a, MADV_POPULATE_WRITE); /* failing (an older kernel): faulted in as written */
}
#endif

static int prefaulted;

void msgtrace_early_prefault(void) {
	if (__atomic_exchange_n(&prefaulted, 1, __ATOMIC_ACQ_REL))
		return;
#if !MT_APPLE_API && defined(__linux__)
	populate(msgtrace_tramp_data, EARLY_PREFAULT_METHODS * sizeof msgtrace_tramp_data[0]);
	populate(mt_kept, EARLY_PREFAULT_METHODS * sizeof mt_kept[0]);
	void *log;
	size_t len;
	mt_objc_sel_log_range(EARLY_PREFAULT_METHODS, &log, &len);
	populate(log, len);
#endif
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
			if (!mt_is_trampoline(imp))
				continue;
			struct mt_tramp_data *d = &msgtrace_tramp_data[((char *)imp - msgtrace_tramp_text) / MT_STRIDE];
			if (d->method == &l->m[j] || d->cls == meta)
				continue;
			__atomic_store_n(&l->m[j].imp, d->orig, __ATOMIC_RELEASE);
			mt_instrument_method(meta, &l->m[j], st);
			any = 1;
		}
	if (any) {
		void *changed[1] = {meta};
		mt_objc_methods_changed(changed, 1);
	}
	st->pool_used = mt_tramps_used;
}

/* One module, early: every class and category selected before it registers; a category on a
 * class not registered before (say, one of the same module) instrumented once it is (its +load
 * was sent untraced then; one on a class of a later module is left to the Go side's install).
 * Each category's class is looked up once before registration and, where it was not there, once
 * after. */
static void early_module(void *module, void (*real)(void *)) {
	struct mt_gnu_symtab t;
	if (!mt_gnu_module_symtab(module, &t)) {
		real(module);
		return;
	}
	size_t n = (size_t)t.ncls + t.ncat;
	void *cbuf[64], **catcls = t.ncat <= 64 ? cbuf : malloc(t.ncat * sizeof *catcls);
	if (!catcls) { /* no memory: registered untraced */
		real(module);
		return;
	}
	for (size_t i = 0; i < t.ncat; i++) {
		const char *c = MT_GNU_CATEGORY_CLASS(t.defs[t.ncls + i]);
		catcls[i] = c ? mt_objc_look_up_class(c) : NULL;
	}
	install_static(&t, catcls, NULL, n, &early_stats);
	real(module); /* registers, sends +load (its lock held) */
	module_fixup(module);
	for (size_t i = 0; i < t.ncat; i++) {
		const char *c = MT_GNU_CATEGORY_CLASS(t.defs[t.ncls + i]);
		if (catcls[i] || !c || !(catcls[i] = mt_objc_look_up_class(c)))
			continue; /* instrumented before, or its class is not here yet */
		category_install(t.defs[t.ncls + i], catcls[i], &early_stats);
	}
	/* root classes the module defines or extends: their metaclass's copies */
	mt_objc_lock();
	for (size_t i = 0; i < n; i++)
		root_copies(i < t.ncls ? t.defs[i] : catcls[i - t.ncls], &early_stats);
	mt_objc_unlock();
	if (catcls != cbuf)
		free(catcls);
}
#endif

void msgtrace_exec_class(void *module, void (*real)(void *)) {
#if MT_APPLE_API
	real(module); /* Apple's runtime has no modules: never called there */
#else
	if (mt_objc_kind() != MT_RT_GNU) { /* libobjc2's older ABI: its classes are instrumented once loaded */
		real(module);
		msgtrace_hops_install();
		return;
	}
	if (__atomic_load_n(&early_modules, __ATOMIC_ACQUIRE) && module) {
		early_module(module, real);
		msgtrace_hops_install();
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
	msgtrace_hops_install(); /* the work items' classes, as they arrive */
#endif
}

void (*msgtrace_orig___objc_exec_class)(void *);

void msgtrace___objc_exec_class(void *module) { msgtrace_exec_class(module, msgtrace_orig___objc_exec_class); }

void msgtrace_objc_load(void *init, void (*real)(void *)) {
#if MT_APPLE_API
	real(init); /* Apple's runtime has no modules: never called there */
#else
	if (mt_objc_kind() != MT_RT_GNUSTEP) {
		real(init);
		return;
	}
	int early = __atomic_load_n(&early_modules, __ATOMIC_ACQUIRE);
	int watched = __atomic_load_n(&modules_watched, __ATOMIC_ACQUIRE);
	mt_gs_objc_load(init, real, early, watched, &early_stats);
	msgtrace_hops_install();
#endif
}

void (*msgtrace_orig___objc_load)(void *);

void msgtrace___objc_load(void *init) { msgtrace_objc_load(init, msgtrace_orig___objc_load); }

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

/* libobjc2's __objc_load (its v2 ABI's modules), the same way. */
static void (*next_objc_load)(void *);

static void objc_load_entry(void *init) {
	void (*next)(void *) = __atomic_load_n(&next_objc_load, __ATOMIC_ACQUIRE);
	if (!next) {
		*(void **)&next = mt_objc_load_next();
		if (!next || next == objc_load_entry) {
			static const char msg[] = "msgtrace: __objc_load: the Objective-C runtime's is not found after ours\n";
			if (write(2, msg, sizeof msg - 1) < 0)
				abort();
			abort();
		}
		__atomic_store_n(&next_objc_load, next, __ATOMIC_RELEASE);
	}
	msgtrace_objc_load(init, next);
}

void __objc_load(void *init) __attribute__((alias("objc_load_entry"), visibility("default")));

int msgtrace_exec_class_interposed(void) {
	if (mt_objc_kind() == MT_RT_GNUSTEP) {
		void *bound = mt_objc_load_bound();
		return bound && (bound == (void *)objc_load_entry || bound == dlsym(RTLD_DEFAULT, "msgtrace_loader_objc_load"));
	}
	void *bound = mt_objc_exec_class_bound();
	return bound && (bound == (void *)exec_class_entry || bound == dlsym(RTLD_DEFAULT, "msgtrace_loader_exec_class"));
}
#else
int msgtrace_exec_class_interposed(void) { return 0; }
#endif
