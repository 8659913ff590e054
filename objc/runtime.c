/*
 * The Objective-C runtime of the process (runtime.h): its functions found by dlsym in one
 * table, the first time a runtime is found loaded, and what the library needs of them, one
 * function each, whichever runtime it is.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "runtime.h"
#include "ptrmap.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>

/* The runtime's functions, as each runtime exports them. */
static struct {
	int kind; /* MT_RT_*, 0 until a runtime is found */
	/* the public API every runtime has (gcc's has no object_getClass: a header inline) */
	const char *(*class_getName)(void *);
	const char *(*sel_getName)(void *);
	void *(*class_getSuperclass)(void *);
	unsigned char (*class_isMetaClass)(void *);
	void *(*object_getClass)(void *);
	int (*objc_getClassList)(void **, int);
	void **(*class_copyMethodList)(void *, unsigned *);
	void *(*method_getName)(void *);
	void *(*method_getImplementation)(void *);
	void *(*objc_lookUpClass)(const char *);
	/* gcc's: public, and the internals its dispatch tables and lock are reached by */
	void **objc_runtime_mutex, **uninstalled_dtable;
	int (*objc_mutex_lock)(void *), (*objc_mutex_unlock)(void *);
	void (*update_dispatch_table_for_class)(void *);
	/* libobjc2's (and Apple's method_setImplementation, below) */
	unsigned char (*objc_registerSmallObjectClass_np)(void *, uintptr_t);
	void *objc_msg_lookup_sender;
	/* Apple's */
	void *(*class_replaceMethod)(void *, void *, void *, const char *);
	const char *(*method_getTypeEncoding)(void *);
	const char **(*objc_copyClassNamesForImage)(const char *, unsigned *);
	void (*objc_addLoadImageFunc)(void (*)(const void *));
	void *(*method_setImplementation)(void *, void *);
	void *(*getsectiondata)(const void *, const char *, const char *, unsigned long *);
	void *msgForward, *msgForward_stret;
} rt;
static int rt_found; /* rt complete (release-stored once) */
static pthread_mutex_t rt_mu = PTHREAD_MUTEX_INITIALIZER;

#define SYMBOL(var, name) (*(void **)&(var) = dlsym(RTLD_DEFAULT, name))

/* Which runtime the symbols found make: capture needs the whole set it uses. */
static int kind_of_loaded(void) {
	if (!rt.class_getSuperclass || !rt.class_isMetaClass || !rt.objc_getClassList || !rt.class_copyMethodList ||
	    !rt.method_getName || !rt.method_getImplementation || !rt.objc_lookUpClass)
		return MT_RT_NONE;
#if MT_APPLE_API
	if (!rt.class_replaceMethod || !rt.method_getTypeEncoding || !rt.object_getClass)
		return MT_RT_NONE;
	return MT_RT_APPLE;
#else
	/* gcc's runtime, recognised by its private symbols */
	if (rt.objc_runtime_mutex && rt.uninstalled_dtable && rt.objc_mutex_lock && rt.objc_mutex_unlock &&
	    rt.update_dispatch_table_for_class && dlsym(RTLD_DEFAULT, "objc_msg_lookup"))
		return MT_RT_GNU;
	/* GNUstep's libobjc2, by public functions only it has (its dispatch tables hold the methods
	 * themselves: method_setImplementation is seen by the next send, no table to refresh) */
	if (rt.objc_registerSmallObjectClass_np && rt.objc_msg_lookup_sender && rt.method_setImplementation &&
	    rt.object_getClass)
		return MT_RT_GNUSTEP;
	return MT_RT_NONE;
#endif
}

/* Looks the runtime up unless it was found; 1 once it is. Every runtime exports class_getName
 * and sel_getName: without them none is loaded (yet: one may be dlopened later). */
static int found(void) {
	if (__atomic_load_n(&rt_found, __ATOMIC_ACQUIRE))
		return 1;
	pthread_mutex_lock(&rt_mu);
	if (!rt_found && SYMBOL(rt.class_getName, "class_getName") && SYMBOL(rt.sel_getName, "sel_getName")) {
		SYMBOL(rt.class_getSuperclass, "class_getSuperclass");
		SYMBOL(rt.class_isMetaClass, "class_isMetaClass");
		SYMBOL(rt.object_getClass, "object_getClass");
		SYMBOL(rt.objc_getClassList, "objc_getClassList");
		SYMBOL(rt.class_copyMethodList, "class_copyMethodList");
		SYMBOL(rt.method_getName, "method_getName");
		SYMBOL(rt.method_getImplementation, "method_getImplementation");
		SYMBOL(rt.objc_lookUpClass, "objc_lookUpClass");
		SYMBOL(rt.method_setImplementation, "method_setImplementation");
#if MT_APPLE_API
		SYMBOL(rt.class_replaceMethod, "class_replaceMethod");
		SYMBOL(rt.method_getTypeEncoding, "method_getTypeEncoding");
		SYMBOL(rt.objc_copyClassNamesForImage, "objc_copyClassNamesForImage");
		SYMBOL(rt.objc_addLoadImageFunc, "objc_addLoadImageFunc");
		SYMBOL(rt.getsectiondata, "getsectiondata");
		SYMBOL(rt.msgForward, "_objc_msgForward");
		SYMBOL(rt.msgForward_stret, "_objc_msgForward_stret");
#else
		SYMBOL(rt.objc_runtime_mutex, "__objc_runtime_mutex");
		SYMBOL(rt.uninstalled_dtable, "__objc_uninstalled_dtable");
		SYMBOL(rt.objc_mutex_lock, "objc_mutex_lock");
		SYMBOL(rt.objc_mutex_unlock, "objc_mutex_unlock");
		SYMBOL(rt.update_dispatch_table_for_class, "__objc_update_dispatch_table_for_class");
		SYMBOL(rt.objc_registerSmallObjectClass_np, "objc_registerSmallObjectClass_np");
		SYMBOL(rt.objc_msg_lookup_sender, "objc_msg_lookup_sender");
#endif
		rt.kind = kind_of_loaded();
		__atomic_store_n(&rt_found, 1, __ATOMIC_RELEASE);
	}
	int ok = rt_found;
	pthread_mutex_unlock(&rt_mu);
	return ok;
}

int mt_objc_kind(void) { return found() ? rt.kind : MT_RT_NONE; }

/* The runtime, for the functions capture uses: only where it can instrument. */
static int capturable(void) { return mt_objc_kind() != MT_RT_NONE; }

const char *mt_objc_class_name(void *cls) { return found() && cls ? rt.class_getName(cls) : NULL; }
const char *mt_objc_sel_name(void *sel) { return found() && sel ? rt.sel_getName(sel) : NULL; }
void *mt_objc_superclass(void *cls) { return found() && rt.class_getSuperclass ? rt.class_getSuperclass(cls) : NULL; }
unsigned char mt_objc_is_meta(void *cls) { return found() && rt.class_isMetaClass ? rt.class_isMetaClass(cls) : 0; }
/* A tagged receiver's class. gcc's runtime has no small objects: its object_getClass would read
 * an unaligned receiver as an object (the send itself would have faulted in the runtime first). */
void *mt_objc_object_class(void *obj) {
	if (!found() || !rt.object_getClass || (rt.kind == MT_RT_GNU && (uintptr_t)obj & 7))
		return NULL;
	return rt.object_getClass(obj);
}
/* gcc's runtime sets up its lock, selector and class tables in the first __objc_exec_class
 * call, libobjc2 in the first __objc_load: before it (a module arriving first, instrumented
 * early) its selectors and classes are not asked for. */
static int gs_state; /* libobjc2: 0 no module seen by our hook, 1 inside the first, 2 one came back */
void mt_gs_module_entered(void) {
	int none = 0;
	__atomic_compare_exchange_n(&gs_state, &none, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}
void mt_gs_set_started(void) { __atomic_store_n(&gs_state, 2, __ATOMIC_RELEASE); }
static int gs_tables_ready(void) {
	/* modules never came through our hook (the library started later): long loaded. Inside the
	 * first one that did: loaded before only if some went through the preload loader alone */
	int st = __atomic_load_n(&gs_state, __ATOMIC_ACQUIRE);
	if (st != 1)
		return 1;
	const unsigned long *loads = dlsym(RTLD_DEFAULT, "msgtrace_loader_objc_loads");
	return loads && __atomic_load_n(loads, __ATOMIC_ACQUIRE) > 0;
}
static int tables_ready(void) {
	return rt.kind == MT_RT_GNU ? *rt.objc_runtime_mutex != NULL : rt.kind != MT_RT_GNUSTEP || gs_tables_ready();
}

void *mt_objc_look_up_class(const char *name) {
	return found() && rt.objc_lookUpClass && tables_ready() ? rt.objc_lookUpClass(name) : NULL;
}

void *mt_objc_metaclass(void *cls) {
#if MT_APPLE_API
	return found() && rt.object_getClass ? rt.object_getClass(cls) : NULL;
#else
	return *(void **)cls; /* class_pointer (gcc's), isa (libobjc2's): word 0 of the class */
#endif
}

uintptr_t mt_objc_small_object_mask(void) { return mt_objc_kind() == MT_RT_GNUSTEP ? (sizeof(void *) == 4 ? 1 : 7) : 0; }

size_t mt_objc_small_object_classes(void **out) {
	uintptr_t mask = mt_objc_small_object_mask();
	size_t n = 0;
	if (!mask)
		return 0;
	for (uintptr_t tag = 0; tag <= mask; tag++)
		out[tag] = NULL;
	/* object_getClass of a bare tag: the class registered for it. libobjc2 (2.3) keeps them in a
	 * table of 7 (tags 0-6 on 64-bit): tag 7 reads the word past it (a dispatch table), and
	 * registering it writes there; not asked */
	uintptr_t last = mask == 7 ? 6 : mask;
	for (uintptr_t tag = 1; tag <= last; tag++)
		if ((out[tag] = rt.object_getClass((void *)tag)) != NULL)
			n++;
	return n;
}

void *mt_objc_registered_class(void *c) {
	const char *name = mt_objc_class_name(c);
	void *base = name ? mt_objc_look_up_class(name) : NULL;
	if (!base || base == c)
		return base;
	return mt_objc_metaclass(base) == c ? base : NULL;
}

/* Open addressing, lock-free reads, in a table sized to what it holds (ptrmap.h's growmap,
 * from 2^10 slots; a reader in an older table misses what came after: the drain then asks the
 * runtime, as on any miss). A fixed table big enough for the largest apps (2^16 slots, 1 MiB)
 * had each install touch hundreds of its pages, ~2 µs of page fault each on this VM. Past 2^20
 * slots, or without memory, it stops remembering. */
static struct mt_growmap sel_names = {NULL, 0, 10, 20};

void mt_objc_remember_sel_name(void *sel, const char *name) {
	if (sel && name)
		mt_growmap_put(&sel_names, sel, (uintptr_t)name, 0);
}

const char *mt_objc_remembered_sel_name(void *sel) { return (const char *)mt_growmap_get(&sel_names, sel); }

/* Names remembered for the drain alone (mt_objc_log_sel_name): a log of (selector, name) pairs
 * in blocks that never move, the count release-published after each pair; the drain moves what
 * is new into a table of its own when it misses (mt_objc_drain_sel_name). An append is a few
 * stores, where a sel_names insert is a hash, a probe and, as the table grows, a copy of it
 * and a page fault every few inserts: for the thousands of selectors a module's fixup learns at
 * once (~7,000 before main under MSGTRACE_METHODS=all), on the thread the program starts on.
 * Past SEL_LOG_BLOCKS blocks, or without memory, names go to sel_names. */
#define SEL_LOG_BLOCK 1024
#define SEL_LOG_BLOCKS 1024
struct sel_log_entry {
	void *sel;
	const char *name;
};
static struct sel_log_entry *sel_log[SEL_LOG_BLOCKS];
static size_t sel_log_n; /* entries appended (release-published) */
/* The first blocks: static (untouched pages cost nothing), no malloc on the thread the program
 * starts on (glibc's first mallocs of a size there were ~40,000 instructions each). */
#define SEL_LOG_STATIC 16
static struct sel_log_entry sel_log_static[SEL_LOG_STATIC][SEL_LOG_BLOCK];

void mt_objc_log_sel_name(void *sel, const char *name) {
	if (!sel || !name)
		return;
	size_t n = sel_log_n, b = n / SEL_LOG_BLOCK;
	if (b < SEL_LOG_STATIC && !sel_log[b])
		sel_log[b] = sel_log_static[b];
	if (b >= SEL_LOG_BLOCKS || (!sel_log[b] && !(sel_log[b] = malloc(SEL_LOG_BLOCK * sizeof *sel_log[b])))) {
		mt_objc_remember_sel_name(sel, name);
		return;
	}
	sel_log[b][n % SEL_LOG_BLOCK] = (struct sel_log_entry){sel, name};
	__atomic_store_n(&sel_log_n, n + 1, __ATOMIC_RELEASE);
}

void mt_objc_sel_log_range(size_t entries, void **start, size_t *len) {
	size_t most = sizeof sel_log_static / sizeof sel_log_static[0][0];
	*start = sel_log_static;
	*len = (entries < most ? entries : most) * sizeof sel_log_static[0][0];
}

/* The drain's table: the log's pairs, moved in as the drain misses; how far it has read. */
static struct mt_growmap drain_sel_names = {NULL, 0, 10, 20};
static size_t drain_log_read;

const char *mt_objc_drain_sel_name(void *sel) {
	const char *name = mt_objc_sel_as_name(sel);
	if (name || (name = mt_objc_remembered_sel_name(sel)) || (name = (const char *)mt_growmap_get(&drain_sel_names, sel)))
		return name;
	size_t n = __atomic_load_n(&sel_log_n, __ATOMIC_ACQUIRE);
	if (drain_log_read == n)
		return NULL;
	if (!mt_growmap_table(&drain_sel_names)) /* first made big enough: no copies through smaller ones */
		while (drain_sel_names.min_bits < drain_sel_names.max_bits &&
		       (size_t)1 << drain_sel_names.min_bits < 2 * (n - drain_log_read + 1))
			drain_sel_names.min_bits++;
	for (; drain_log_read < n; drain_log_read++) {
		const struct sel_log_entry *e = &sel_log[drain_log_read / SEL_LOG_BLOCK][drain_log_read % SEL_LOG_BLOCK];
		mt_growmap_put(&drain_sel_names, e->sel, (uintptr_t)e->name, 0); /* full: asked of the runtime */
	}
	return (const char *)mt_growmap_get(&drain_sel_names, sel);
}

size_t mt_objc_class_list(void **out, size_t max) {
	if (!capturable())
		return 0;
	if (rt.kind == MT_RT_GNUSTEP && out && max) {
		/* libobjc2 (2.3) frees its enumerator twice when the buffer has room past the last
		 * class: never more room than there are classes */
		int have = rt.objc_getClassList(NULL, 0);
		if (have <= 0)
			return 0;
		if ((size_t)have < max)
			max = (size_t)have;
	}
	int n = rt.objc_getClassList(out, (int)(max > 0x7fffffff ? 0x7fffffff : max));
	return n < 0 ? 0 : (size_t)n;
}

size_t mt_objc_image_classes(const char *image, void **out, size_t max) {
#if MT_APPLE_API
	/* by name, then one lookup each: only these classes are realized, where objc_getClassList
	 * realizes every class of the process first */
	if (mt_objc_kind() != MT_RT_APPLE || !rt.objc_copyClassNamesForImage)
		return 0;
	unsigned n = 0;
	const char **names = rt.objc_copyClassNamesForImage(image, &n);
	size_t k = 0;
	for (unsigned i = 0; names && i < n; i++) {
		void *c = rt.objc_lookUpClass(names[i]);
		if (c && k < max)
			out[k] = c;
		if (c)
			k++;
	}
	free(names);
	return k;
#else
	(void)image, (void)out, (void)max;
	return 0;
#endif
}

void **mt_objc_copy_method_list(void *cls, unsigned *n) {
	*n = 0;
	return capturable() ? rt.class_copyMethodList(cls, n) : NULL;
}

/* gcc's method_getName and method_getImplementation read struct objc_method's fields
 * (mt_gnu_method): read here, without the call into the runtime, once per method an install
 * looks at. */
void *mt_objc_method_sel(void *m) {
	return rt.kind == MT_RT_GNU ? ((struct mt_gnu_method *)m)->sel : rt.method_getName(m);
}
void *mt_objc_method_imp(void *m) {
	return rt.kind == MT_RT_GNU ? __atomic_load_n(&((struct mt_gnu_method *)m)->imp, __ATOMIC_ACQUIRE) : rt.method_getImplementation(m);
}

int mt_objc_is_forwarder(const void *imp) {
	return imp && ((rt.msgForward && imp == rt.msgForward) || (rt.msgForward_stret && imp == rt.msgForward_stret));
}

/* gcc's: struct objc_method {SEL name; const char *types; IMP imp;}; the dispatch table is word
 * 8 of struct objc_class. */
#define GNU_IMP(m) (((struct mt_gnu_method *)(m))->imp)
#define GNU_DTABLE(c) (((void **)(c))[8])

int mt_objc_method_settable(void *m, void *imp) { return rt.kind != MT_RT_GNU || GNU_IMP(m) == imp; }

void *mt_objc_method_set_imp(void *cls, void *m, void *sel, void *imp) {
#if MT_APPLE_API
	return rt.class_replaceMethod(cls, sel, imp, rt.method_getTypeEncoding(m));
#else
	(void)cls, (void)sel;
	if (rt.kind == MT_RT_GNUSTEP) /* this very method: the dispatch tables hold it */
		return rt.method_setImplementation(m, imp);
	void *old = GNU_IMP(m);
	__atomic_store_n(&GNU_IMP(m), imp, __ATOMIC_RELEASE);
	return old;
#endif
}

int mt_objc_can_set_imp_exact(void) { return MT_APPLE_API && found() && rt.method_setImplementation; }

void *mt_objc_method_set_imp_exact(void *m, void *imp) {
#if MT_APPLE_API
	return rt.method_setImplementation ? rt.method_setImplementation(m, imp) : NULL;
#else
	(void)m, (void)imp;
	return NULL;
#endif
}

size_t mt_objc_image_categories(const void *header, void ***cats) {
	*cats = NULL;
#if MT_APPLE_API
	if (mt_objc_kind() != MT_RT_APPLE || !rt.getsectiondata || !header)
		return 0;
	static const char *const segs[] = {"__DATA_CONST", "__DATA"};
	for (size_t i = 0; i < sizeof segs / sizeof segs[0]; i++) {
		unsigned long size = 0;
		void **p = rt.getsectiondata(header, segs[i], "__objc_catlist", &size);
		if (p && size >= sizeof *p) {
			*cats = p;
			return size / sizeof *p;
		}
	}
#else
	(void)header;
#endif
	return 0;
}

int mt_apple_in_method_list(const void *list, const void *m) {
	if (!list || !m)
		return 0;
	const uint32_t *h = list; /* method_list_t: entsizeAndFlags, count, then the methods */
	uintptr_t first = (uintptr_t)list + 8, entsize = h[0] & 0xfffc, p = (uintptr_t)m;
	return entsize && p >= first && p < first + (uintptr_t)h[1] * entsize && (p - first) % entsize == 0;
}

static int cmp_ptr(const void *a, const void *b) {
	uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
	return x < y ? -1 : x > y;
}

/* A class never messaged shares __objc_uninstalled_dtable and reads the method lists when first
 * messaged: only its prepared table (a class inside +initialize) is redone, which is what the
 * runtime's update does for it. An installed table is rebuilt with its subclasses' by the
 * runtime, so only the topmost changed classes of each hierarchy (classes and metaclasses
 * apart) are passed. */
void mt_objc_methods_changed(void **changed, size_t n) {
	if (rt.kind != MT_RT_GNU || !changed)
		return;
	qsort(changed, n, sizeof *changed, cmp_ptr);
	size_t k = 0; /* each class once */
	for (size_t i = 0; i < n; i++)
		if (k == 0 || changed[k - 1] != changed[i])
			changed[k++] = changed[i];
	n = k;
	for (size_t i = 0; i < n; i++) {
		void *c = changed[i];
		if (GNU_DTABLE(c) == *rt.uninstalled_dtable) {
			rt.update_dispatch_table_for_class(c);
			continue;
		}
		int meta = rt.class_isMetaClass(c), covered = 0;
		for (void *s = rt.class_getSuperclass(c); s && rt.class_isMetaClass(s) == meta; s = rt.class_getSuperclass(s))
			if (bsearch(&s, changed, n, sizeof *changed, cmp_ptr)) {
				covered = 1;
				break;
			}
		if (!covered)
			rt.update_dispatch_table_for_class(c);
	}
}

#if !MT_APPLE_API
/* libobjc2's lock in place of its own: recursive, made once (musl, which the arm64 tests build
 * against, has no static recursive initializer) */
static pthread_mutex_t gs_install_mu;
static pthread_once_t gs_install_once = PTHREAD_ONCE_INIT;
static void gs_install_mu_init(void) {
	pthread_mutexattr_t a;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
	pthread_mutex_init(&gs_install_mu, &a);
	pthread_mutexattr_destroy(&a);
}
#endif

void mt_objc_lock(void) {
	int k = mt_objc_kind();
	if (k == MT_RT_GNU)
		rt.objc_mutex_lock(*rt.objc_runtime_mutex);
#if !MT_APPLE_API
	else if (k == MT_RT_GNUSTEP) {
		pthread_once(&gs_install_once, gs_install_mu_init);
		pthread_mutex_lock(&gs_install_mu);
	}
#endif
}

void mt_objc_unlock(void) {
	int k = mt_objc_kind();
	if (k == MT_RT_GNU)
		rt.objc_mutex_unlock(*rt.objc_runtime_mutex);
#if !MT_APPLE_API
	else if (k == MT_RT_GNUSTEP)
		pthread_mutex_unlock(&gs_install_mu);
#endif
}

int mt_objc_can_add_load_image_func(void) { return mt_objc_kind() == MT_RT_APPLE && rt.objc_addLoadImageFunc; }
void mt_objc_add_load_image_func(void (*fn)(const void *)) { rt.objc_addLoadImageFunc(fn); }

void *mt_objc_exec_class_next(void) { return dlsym(RTLD_NEXT, "__objc_exec_class"); }
void *mt_objc_exec_class_bound(void) { return dlsym(RTLD_DEFAULT, "__objc_exec_class"); }
void *mt_objc_load_next(void) { return dlsym(RTLD_NEXT, "__objc_load"); }
void *mt_objc_load_bound(void) { return dlsym(RTLD_DEFAULT, "__objc_load"); }

/* A method list as the v2 ABI lays it out: a stride no smaller than struct objc_method, a
 * count that is not negative. */
static int gs_list_ok(const struct mt_gs_method_list *l) {
	for (int k = 0; l && k < 1 << 16; l = l->next, k++)
		if (l->count < 0 || l->size < sizeof(struct mt_gs_method) || l->size > 1024)
			return 0;
	return 1;
}

int mt_gs_module_read(void *init, int registered, struct mt_gs_module *m) {
	const struct mt_gs_init *in = init;
	if (!in || in->version != (registered ? UINT64_MAX : 0)) /* ULONG_MAX: loaded; another: not the ABI we know */
		return 0;
	if (in->cls_end < in->cls_begin || (char *)in->cat_end < (char *)in->cat_begin ||
	    (size_t)((char *)in->cat_end - (char *)in->cat_begin) % (MT_GS_CATEGORY_WORDS * sizeof(void *)) != 0)
		return 0;
	m->cls = in->cls_begin;
	m->ncls = (size_t)(in->cls_end - in->cls_begin);
	m->cat = in->cat_begin;
	m->ncat = (size_t)((char *)in->cat_end - (char *)in->cat_begin) / (MT_GS_CATEGORY_WORDS * sizeof(void *));
	m->sel_lo = in->sel_begin, m->sel_hi = in->sel_end;
	for (size_t i = 0; i < m->ncls; i++)
		if (m->cls[i] && (!gs_list_ok(MT_GS_CLASS_METHODS(m->cls[i])) || !MT_GS_CLASS_ISA(m->cls[i]) ||
				  !gs_list_ok(MT_GS_CLASS_METHODS(MT_GS_CLASS_ISA(m->cls[i])))))
			return 0;
	for (size_t i = 0; i < m->ncat; i++) {
		void *cat = mt_gs_category(m, i);
		if (!gs_list_ok(MT_GS_CATEGORY_METHODS(cat, 0)) || !gs_list_ok(MT_GS_CATEGORY_METHODS(cat, 1)))
			return 0;
	}
	return 1;
}

int mt_gnu_module_symtab(void *module, struct mt_gnu_symtab *t) {
	char *symtab = module ? ((char **)module)[3] : NULL;
	if (!symtab)
		return 0;
	t->ncls = *(unsigned short *)(symtab + 16);
	t->ncat = *(unsigned short *)(symtab + 18);
	t->defs = (void **)(symtab + 24);
	return 1;
}
