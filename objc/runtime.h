/*
 * The Objective-C runtime of the process, for the library's C (runtime.c; the package comment,
 * doc.go, says why this half is C): which runtime it is, its functions looked up once, class and
 * selector names, the class list, method lists and IMPs, gcc's dispatch-table refresh and its
 * lock, libobjc2's small-object classes, and the layouts of the compiled structures (gcc's
 * modules, libobjc2's v2 ABI) that method capture reads before the runtime has seen them. Never
 * linked against: found in the process (dlsym) the first time it is asked for, and asked again
 * until a runtime is loaded.
 *
 * Every name here is the library's own (hidden from its dynamic symbol table).
 */
#ifndef MSGTRACE_OBJC_RUNTIME_H
#define MSGTRACE_OBJC_RUNTIME_H
#include <stddef.h>
#include <stdint.h>

/* Apple's runtime API (objc4) is what the process has on Apple platforms; a test builds it on
 * Linux against a stand-in runtime (testdata/interposer/objc4.c). */
#ifndef MT_APPLE_API
#if defined(__APPLE__)
#define MT_APPLE_API 1
#else
#define MT_APPLE_API 0
#endif
#endif

/* Which runtime: one whose methods capture can instrument, or none. */
#define MT_RT_NONE 1    /* none loaded, or one whose internals we do not know */
#define MT_RT_GNU 2     /* gcc's GNU runtime (libobjc.so.4) */
#define MT_RT_APPLE 3   /* Apple's objc4 */
#define MT_RT_GNUSTEP 4 /* GNUstep's libobjc2 (its v2 ABI: modules arrive through __objc_load) */

#pragma GCC visibility push(hidden)

int mt_objc_kind(void); /* MT_RT_*: settled the first time a runtime is found loaded */

/* ---- names (NULL or 0 where no runtime is loaded, or it lacks the function) ---- */
const char *mt_objc_class_name(void *cls);
/* The runtime's name of a selector: gcc's sel_getName takes the runtime's lock (the drain asks
 * mt_objc_remembered_sel_name first). */
const char *mt_objc_sel_name(void *sel);
void *mt_objc_superclass(void *cls);
unsigned char mt_objc_is_meta(void *cls); /* BOOL: only its low byte is defined */
/* object_getClass: Apple's (tagged pointers too) and libobjc2's (small objects too); NULL on
 * gcc's, where it is a header inline. */
void *mt_objc_object_class(void *obj);
void *mt_objc_metaclass(void *cls);       /* a class's metaclass (gcc's: its class_pointer) */
/* libobjc2's small objects: a receiver whose low bits (OBJC_SMALL_OBJECT_MASK: 7 on 64-bit, 1 on
 * 32-bit) are not all clear is no pointer but a value of the class the program registered for
 * those bits (objc_registerSmallObjectClass_np(cls, mask); gnustep-base: small integers,
 * floats, doubles and tiny strings). The mask (0 on other runtimes), and the class registered
 * for each value of the tag bits, out[tag] (NULL: none), found through object_getClass, which
 * reads the runtime's hidden table: out has mask + 1 entries; returns how many are registered.
 * Tag 7 is never asked: libobjc2 2.3's table has 7 entries, and its tag 7 is the word after it. */
uintptr_t mt_objc_small_object_mask(void);
size_t mt_objc_small_object_classes(void **out);
void *mt_objc_look_up_class(const char *name);
/* The registered class a class or metaclass belongs to; NULL while it is still being built
 * (between objc_allocateClassPair and objc_registerClassPair). */
void *mt_objc_registered_class(void *c);

/* Selector names learnt while instrumenting (where gcc's lock is held anyway), so that the drain
 * need not take the lock to name them. Remembering is serialised by the caller; reading takes
 * no lock. Never forgotten (selectors outlive a stream). */
void mt_objc_remember_sel_name(void *sel, const char *name);
const char *mt_objc_remembered_sel_name(void *sel);
/* Remembers sel's name for the drain only, cheaply (a log the drain reads when it misses):
 * for many selectors at once, where the installer will not ask for them again. Serialised by
 * the caller, as mt_objc_remember_sel_name. */
void mt_objc_log_sel_name(void *sel, const char *name);
/* The first blocks of that log (entries pairs' worth, within its static blocks) as memory
 * range(s): [*start, *start + *len). What msgtrace_early_prefault populates ahead of the log. */
void mt_objc_sel_log_range(size_t entries, void **start, size_t *len);
/* The drain's name of sel (the drain thread only): sel's own where mt_objc_named_sel made it,
 * else one remembered or logged; NULL: ask the runtime. */
const char *mt_objc_drain_sel_name(void *sel);

/* A selector's name standing in for the selector (gcc's runtime: a method of a module not
 * registered yet, whose SEL the runtime has not made): the name's address with a bit no pointer
 * has. A trampoline names its calls by it until the module's fixup puts the SEL in its place; the
 * drain names such a call by the string (mt_objc_drain_sel_name), never asking the
 * runtime. Bit 60: clear of every user address and of the flags the drain folds into bits 61-63
 * of a selector. */
#define MT_OBJC_SEL_NAME_TAG ((uintptr_t)1 << 60)
static inline void *mt_objc_named_sel(const char *name) { return (void *)((uintptr_t)name | MT_OBJC_SEL_NAME_TAG); }
static inline const char *mt_objc_sel_as_name(void *sel) {
	return (uintptr_t)sel & MT_OBJC_SEL_NAME_TAG ? (const char *)((uintptr_t)sel & ~MT_OBJC_SEL_NAME_TAG) : NULL;
}

/* ---- classes and methods (MT_RT_GNU or MT_RT_APPLE only) ---- */
/* objc_getClassList: how many classes there are; those past max are not stored. */
size_t mt_objc_class_list(void **out, size_t max);
/* Apple: the classes an image defines (objc_copyClassNamesForImage), realizing only those;
 * returns how many there are (those past max are not stored). 0 elsewhere. */
size_t mt_objc_image_classes(const char *image, void **out, size_t max);
void **mt_objc_copy_method_list(void *cls, unsigned *n); /* free() it */
void *mt_objc_method_sel(void *m);
void *mt_objc_method_imp(void *m);
/* Whether an IMP is the runtime's forwarding entry (Apple's _objc_msgForward*). */
int mt_objc_is_forwarder(const void *imp);
/* Whether mt_objc_method_set_imp can write m's IMP: gcc's runtime, where it is written in
 * place, only when the method's IMP is where its layout says (imp is method_getImplementation's). */
int mt_objc_method_settable(void *m, void *imp);
/* Gives method m (of cls, selector sel) a new IMP; returns the IMP it replaced. Apple:
 * class_replaceMethod on cls (it flushes cls's subtree). gcc's: a release store into the
 * method; the dispatch tables are refreshed by mt_objc_methods_changed. */
void *mt_objc_method_set_imp(void *cls, void *m, void *sel, void *imp);
/* Apple: method_setImplementation, the IMP of this very method (class_replaceMethod reaches only
 * the first method of a selector in the class's list: a category's, where one shadows the class's
 * own); it flushes every class's method cache, so only where the exact method matters (+load:
 * the runtime calls each class's and each category's through its own method). Returns the IMP
 * it replaced; NULL (nothing done) where the runtime lacks it and off Apple. */
int mt_objc_can_set_imp_exact(void);
void *mt_objc_method_set_imp_exact(void *m, void *imp);
/* gcc's runtime, after IMPs of these classes were set (lock held): their dispatch tables
 * refreshed, each subtree once. Sorts changed and drops its repeats. Nothing to do on Apple's. */
void mt_objc_methods_changed(void **changed, size_t n);

/* ---- the install-time lock ---- */
/* gcc's __objc_runtime_mutex (recursive, owned by the calling thread): every path that sets
 * IMPs takes it first, before any lock of ours, as the runtime calls out with it held
 * (+initialize, which may call class_addMethod). libobjc2's is hidden: a recursive mutex of
 * ours in its place (nothing capture asks of libobjc2 with it held takes the runtime's). No-op
 * on Apple's. */
void mt_objc_lock(void);
void mt_objc_unlock(void);

/* ---- Apple: images loaded later ---- */
/* objc_addLoadImageFunc (macOS 10.15, iOS 13 on): whether the runtime has it, and adding fn. */
int mt_objc_can_add_load_image_func(void);
void mt_objc_add_load_image_func(void (*fn)(const void *header));

/* ---- Apple: an image's categories (the compiled metadata, a stable ABI) ----
 * The categories an image defines: its __objc_catlist (getsectiondata, __DATA_CONST or __DATA),
 * each a compiled category_t {name, cls, instanceMethods, classMethods, ...}: *cats points into
 * the section; returns how many (0 off Apple, or where the image has none). */
size_t mt_objc_image_categories(const void *header, void ***cats);
#define MT_APPLE_CATEGORY_CLASS(cat) (((void **)(cat))[1])
#define MT_APPLE_CATEGORY_METHODS(cat, meta) (((void **)(cat))[2 + (meta)])
/* Whether Method m is one of a compiled method_list_t's entries (the runtime attaches a
 * category's list to its class as it is: class_copyMethodList's Methods point into it). */
int mt_apple_in_method_list(const void *list, const void *m);

/* ---- libobjc2's v2 ABI: what a module hands __objc_load (ABIDoc, loader.c) ----
 * struct objc_init {uint64_t version; SEL sel_begin, sel_end; Class *cls_begin, *cls_end;
 * Class *cls_ref_begin, *cls_ref_end; struct objc_category *cat_begin, *cat_end; ...}: version
 * is 0 until the runtime loaded it (then ULONG_MAX). The runtime registers the compiled
 * structures themselves: a class, its metaclass (its isa, word 0) and its method lists keep
 * their addresses once registered. struct objc_class has methods at word 7, as gcc's
 * (MT_GNU_CLASS_METHODS); struct objc_method_list {next; int count; size_t size (the stride of
 * methods[]); struct objc_method methods[];}, struct objc_method {IMP imp; SEL selector; const
 * char *types;}: selector points at one of the module's selectors, {const char *name; const
 * char *types;} until the runtime registers it in place (the first word then an index), the
 * SEL the module's own sends use. struct objc_category {name, class_name, instance_methods,
 * class_methods, protocols, properties, class_properties}: seven words, an array of them. */
struct mt_gs_init {
	uint64_t version;
	void *sel_begin, *sel_end;
	void **cls_begin, **cls_end;
	void **cls_ref_begin, **cls_ref_end;
	void *cat_begin, *cat_end;
};
struct mt_gs_method {
	void *imp;
	void *sel;
	const char *types;
};
struct mt_gs_method_list {
	struct mt_gs_method_list *next;
	int count;
	size_t size;
	char methods[];
};
#define MT_GS_METHOD(l, i) ((struct mt_gs_method *)((l)->methods + (size_t)(i) * (l)->size))
#define MT_GS_CLASS_METHODS(c) (((struct mt_gs_method_list **)(c))[7])
#define MT_GS_CLASS_ISA(c) (((void **)(c))[0])
#define MT_GS_CLASS_NAME(c) (((const char **)(c))[2])
#define MT_GS_CATEGORY_WORDS 7
#define MT_GS_CATEGORY_CLASS(cat) (((const char **)(cat))[1])
#define MT_GS_CATEGORY_METHODS(cat, meta) (((struct mt_gs_method_list **)(cat))[2 + (meta)])
/* A module's classes and categories, read; 0 when there is none, its lists are not what the ABI
 * says, or it is not as asked: registered 0, not loaded yet (version 0); 1, loaded (ULONG_MAX). */
struct mt_gs_module {
	void **cls;     /* ncls class pointers (NULL entries skipped by the runtime) */
	char *cat;      /* ncat categories of MT_GS_CATEGORY_WORDS words */
	char *sel_lo, *sel_hi; /* the module's selectors: [sel_lo, sel_hi) */
	size_t ncls, ncat;
};
int mt_gs_module_read(void *init, int registered, struct mt_gs_module *m);
static inline void *mt_gs_category(const struct mt_gs_module *m, size_t i) {
	return m->cat + i * MT_GS_CATEGORY_WORDS * sizeof(void *);
}
/* The definition of __objc_load after this library's (RTLD_NEXT) and the one the global scope
 * binds. */
void *mt_objc_load_next(void);
void *mt_objc_load_bound(void);
/* Whether the runtime has set up its tables: libobjc2 does it in the first __objc_load (its
 * own modules', from its constructor). The hook says when a module enters it and when the
 * runtime's __objc_load came back: inside the first module it sees, no class is looked up
 * unless the preload loader saw one come back before (msgtrace_loader_objc_loads). */
void mt_gs_module_entered(void);
void mt_gs_set_started(void);

/* ---- gcc's __objc_exec_class (modules) ---- */
/* The definition after this library's (RTLD_NEXT): the runtime's, where the library is
 * preloaded. */
void *mt_objc_exec_class_next(void);
/* The definition the global scope binds. */
void *mt_objc_exec_class_bound(void);

/* ---- gcc's compiled structures (what a module hands __objc_exec_class) ----
 * struct objc_method {SEL name; const char *types; IMP imp;}: before registration, name is
 * still the selector's name (the runtime turns it into a SEL in place). struct
 * objc_method_list {next, int method_count, struct objc_method list[]}. */
struct mt_gnu_method {
	void *sel;
	const char *types;
	void *imp;
};
struct mt_gnu_method_list {
	struct mt_gnu_method_list *next;
	int count;
	struct mt_gnu_method m[];
};
/* struct objc_class {class_pointer, super_class, name, version, info, instance_size, ivars,
 * methods, dtable, ...}: methods is the class's list (a metaclass's: its class methods). */
#define MT_GNU_CLASS_METHODS(c) (((struct mt_gnu_method_list **)(c))[7])
#define MT_GNU_CLASS_NAME(c) (((const char **)(c))[2])
/* super_class: NULL for a root class (before registration, else the superclass's name, then the
 * class once the runtime resolved it) */
#define MT_GNU_CLASS_SUPER(c) (((void **)(c))[1])
/* struct objc_category {category_name, class_name, instance_methods, class_methods, ...} */
#define MT_GNU_CATEGORY_CLASS(cat) (((const char **)(cat))[1])
#define MT_GNU_CATEGORY_METHODS(cat, meta) (((struct mt_gnu_method_list **)(cat))[2 + (meta)])
/* struct objc_module {version, size, name, symtab}; struct objc_symtab {sel_ref_cnt, refs,
 * unsigned short cls_def_cnt, cat_def_cnt, defs[]}: classes, then categories. */
struct mt_gnu_symtab {
	unsigned ncls, ncat;
	void **defs;
};
/* A module's symtab read; 0 when there is no module or it has none. */
int mt_gnu_module_symtab(void *module, struct mt_gnu_symtab *t);

#pragma GCC visibility pop
#endif
