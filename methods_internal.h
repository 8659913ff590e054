/*
 * Inside method capture. Its files, each calling only those listed before it (never back):
 *
 *   methods_tramps.c   one method given a trampoline: the never list, the pool's trampolines,
 *                      a method (and on Apple's runtime a +load) instrumented
 *   methods_gnustep.c  libobjc2's modules, before and as they load
 *   methods_modules.c  gcc's modules (and the msgtrace_module_* API over libobjc2's too)
 *   methods_images.c   Apple's images: categories, images loaded later, classes arriving
 *   methods.c          which object a class is in; classes installed and restored; the rebound
 *                      objc_registerClassPair and class_addMethod
 *
 * Hidden: none of it is in the library's dynamic symbol table.
 */
#ifndef MSGTRACE_METHODS_INTERNAL_H
#define MSGTRACE_METHODS_INTERNAL_H
#include <stddef.h>

#include "methods.h"
#include "trampoline.h"

#pragma GCC visibility push(hidden)
/* ---- methods_tramps.c ---- */
extern size_t mt_tramps_used;       /* trampolines handed out (never freed; one no method ever had may be taken back), under the caller's lock */
extern unsigned char mt_kept[];     /* per trampoline: never given back (a +load's) */
/* Whether imp is one of the pool's trampolines. */
static inline int mt_is_trampoline(const void *imp) {
	const char *p = imp;
	return p >= msgtrace_tramp_text && p < msgtrace_tramp_text + (size_t)MT_POOL * MT_STRIDE;
}
/* The entry of the never-instrument list a selector name is (its index + 1), or 0; MT_NEVER_LOAD
 * is load's. */
int mt_never_index(const char *sel);
#define MT_NEVER_LOAD 1
/* The trampoline for method m of cls, its data published: the one m had before if it had one,
 * else a new one; NULL when the pool is used up. The caller writes it into the method. */
struct mt_tramp_data *mt_take_trampoline(void *cls, void *m, void *sel, void *imp, struct mt_methods_stats *st);
/* Before a trampoline is handed out: on libobjc2 the interposers compare selectors by the
 * registered index their structs start with (rt.h msgtrace_sel_by_index), since a send and the
 * method it lands in may hold the structs of two loaded objects. */
void mt_note_selectors(void);
/* A trampoline never handed out before, its data published (a barrier follows), or NULL (counted)
 * when the pool is used up: for a method new to the runtime (a module's, before it registers),
 * which has no trampoline of its own to get back (mt_take_trampoline). Lock held. */
static inline struct mt_tramp_data *mt_new_trampoline(void *cls, void *m, void *sel, void *imp, struct mt_methods_stats *st) {
	if (mt_tramps_used == MT_POOL) {
		st->full++;
		return NULL;
	}
	mt_note_selectors();
	struct mt_tramp_data *d = &msgtrace_tramp_data[mt_tramps_used++];
	d->orig = imp, d->cls = cls, d->sel = sel, d->method = m;
	__atomic_thread_fence(__ATOMIC_RELEASE);
	return d;
}
/* At a restore: trampoline i was method m's, for m to get back at its next install. */
void mt_trampoline_home(void *m, size_t i);
/* Whether a method of cls (selector sel, IMP imp) is one to give a trampoline (counted in st
 * where it is on the never list). */
int mt_instrumentable(void *cls, void *sel, void *imp, struct mt_methods_stats *st);
int mt_instrument_method(void *cls, void *m, struct mt_methods_stats *st); /* 1: its IMP changed */
#if MT_APPLE_API
int mt_is_apple_load(void *cls, void *m);
int mt_instrument_load(void *cls, void *m, struct mt_methods_stats *st);
#endif

#if !MT_APPLE_API
/* ---- methods_gnustep.c ---- */
/* libobjc2 (methods_gnustep.c): what methods.h's msgtrace_module_* do for its modules (the
 * struct objc_init __objc_load is given), and the hook every __objc_load goes through: the
 * early install (early: *early_st adds what it did) or, watched, the Go side's callbacks
 * around the runtime's (real). */
size_t mt_gs_module_defs(void *init, const char **names, size_t max, size_t *nclasses);
void mt_gs_module_install_static(void *init, const unsigned char *selected, size_t n, struct mt_methods_stats *st);
size_t mt_gs_module_classes(void *init, void **out, size_t max);
size_t mt_gs_module_categories(void *init, const char **classes, size_t max);
void mt_gs_module_category_install(void *init, size_t i, struct mt_methods_stats *st);
void mt_gs_objc_load(void *init, void (*real)(void *), int early, int watched, struct mt_methods_stats *early_st);
#endif

/* ---- methods_images.c (Apple's runtime), methods.c (the others) ---- */
void mt_class_arrived(void *cls, void *creator); /* a class registered or given a method at run time */
#pragma GCC visibility pop
#endif
