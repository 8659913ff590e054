/*
 * Method capture on GNUstep's libobjc2, module by module: what the compiler hands __objc_load
 * (its v2 ABI: a module's classes and categories and their compiled method lists, whose layouts
 * objc/runtime.h has), methods given trampolines before the runtime loads a module and sends its
 * +load methods, the early modules of MSGTRACE_METHODS=all (before the Go side is up), and the
 * __objc_load this library defines where it is preloaded. A loaded module's methods are
 * instrumented through the runtime's public API (class_copyMethodList, method_setImplementation:
 * methods.c); only a module not loaded yet is read through the ABI's layouts.
 *
 * libobjc2 sends a class's +load methods (its own and its categories') by calling each method's
 * IMP, once per IMP it has not called before, when it resolves the class or loads a category of
 * it: a +load is traced only when its trampoline was there before the runtime first saw it, and
 * keeps it (a +load instrumented later would be sent again at the next category).
 * Depends on: objc/runtime.c (the runtime; the ABI's layouts are objc/runtime.h's),
 * methods_tramps.c (the trampolines), trampoline_*.S. Built off Apple platforms only.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "methods.h"
#include "methods_internal.h"
#include "rt_launch.h"
#include "trampoline.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if !MT_APPLE_API
/* The class named name: a class of the module itself (registered with it, at the same address)
 * or one loaded before (the runtime's tables up); NULL when neither. */
static void *gs_class_named(const struct mt_gs_module *mod, const char *name) {
	if (!name)
		return NULL;
	for (size_t i = 0; i < mod->ncls; i++)
		if (mod->cls[i] && MT_GS_CLASS_NAME(mod->cls[i]) && strcmp(MT_GS_CLASS_NAME(mod->cls[i]), name) == 0)
			return mod->cls[i];
	return mt_objc_look_up_class(name);
}

/* Gives the methods of one compiled list of a module not loaded yet a trampoline each. A method's
 * selector is one of the module's (checked: else not the layout we know), not registered yet:
 * its first word is its name, logged for the drain under the selector's address, which the
 * runtime keeps as the SEL when it registers it in place (the trampoline's selector is right
 * from its first call: no fixup after). A +load (meta) keeps its trampoline. */
static void gs_install_list(const struct mt_gs_module *mod, void *cls, int meta, struct mt_gs_method_list *l,
			    struct mt_methods_stats *st) {
	for (; l; l = l->next)
		for (int j = 0; j < l->count; j++) {
			struct mt_gs_method *m = MT_GS_METHOD(l, j);
			void *imp = m->imp, *sel = m->sel;
			if (!imp || !sel || mt_is_trampoline(imp))
				continue;
			if ((char *)sel < mod->sel_lo || (char *)sel >= mod->sel_hi) {
				st->foreign++;
				continue;
			}
			const char *name = *(const char *const *)sel;
			if (!name)
				continue;
			int never = mt_never_index(name), load = never == MT_NEVER_LOAD;
			if (never && !load) {
				st->never++;
				continue;
			}
			struct mt_tramp_data *d = mt_new_trampoline(cls, m, sel, imp, st);
			if (!d)
				continue;
			size_t k = (size_t)(d - msgtrace_tramp_data);
			if (load && meta)
				mt_kept[k] = 1;
			mt_objc_log_sel_name(sel, name);
			__atomic_store_n(&m->imp, msgtrace_tramp_text + k * MT_STRIDE, __ATOMIC_RELEASE);
			st->instrumented++;
		}
}

/* The module's classes and categories selected (selected[i] for name i of msgtrace_module_defs;
 * NULL: all), before it loads: a category whose class is neither in the module nor loaded is
 * left to the install after its class arrives. Install lock held. */
static void gs_install_static(const struct mt_gs_module *mod, const unsigned char *selected, size_t n,
			      struct mt_methods_stats *st) {
	for (size_t i = 0; i < mod->ncls && i < n; i++) {
		void *cls = mod->cls[i];
		if (!cls || (selected && !selected[i]))
			continue;
		st->classes++;
		gs_install_list(mod, cls, 0, MT_GS_CLASS_METHODS(cls), st);
		gs_install_list(mod, MT_GS_CLASS_ISA(cls), 1, MT_GS_CLASS_METHODS(MT_GS_CLASS_ISA(cls)), st);
	}
	for (size_t i = 0; i < mod->ncat && mod->ncls + i < n; i++) {
		if (selected && !selected[mod->ncls + i])
			continue;
		void *cat = mt_gs_category(mod, i), *cls = gs_class_named(mod, MT_GS_CATEGORY_CLASS(cat));
		if (!cls)
			continue;
		gs_install_list(mod, cls, 0, MT_GS_CATEGORY_METHODS(cat, 0), st);
		gs_install_list(mod, MT_GS_CLASS_ISA(cls), 1, MT_GS_CATEGORY_METHODS(cat, 1), st);
	}
	st->pool_used = mt_tramps_used;
}

size_t mt_gs_module_defs(void *init, const char **names, size_t max, size_t *nclasses) {
	struct mt_gs_module mod;
	*nclasses = 0;
	if (!mt_gs_module_read(init, 0, &mod))
		return 0;
	*nclasses = mod.ncls;
	size_t k = 0;
	for (size_t i = 0; i < mod.ncls && k < max; i++, k++)
		names[k] = mod.cls[i] ? MT_GS_CLASS_NAME(mod.cls[i]) : "";
	for (size_t i = 0; i < mod.ncat && k < max; i++, k++)
		names[k] = MT_GS_CATEGORY_CLASS(mt_gs_category(&mod, i));
	return mod.ncls + mod.ncat;
}

void mt_gs_module_install_static(void *init, const unsigned char *selected, size_t n, struct mt_methods_stats *st) {
	struct mt_gs_module mod;
	if (!mt_gs_module_read(init, 0, &mod))
		return;
	mt_objc_lock();
	gs_install_static(&mod, selected, n, st);
	mt_objc_unlock();
}

size_t mt_gs_module_classes(void *init, void **out, size_t max) {
	struct mt_gs_module mod;
	if (!mt_gs_module_read(init, 1, &mod))
		return 0;
	size_t k = 0;
	for (size_t i = 0; i < mod.ncls && k < max; i++)
		if (mod.cls[i])
			out[k++] = mod.cls[i];
	for (size_t i = 0; i < mod.ncat && k < max; i++) {
		void *c = mt_objc_look_up_class(MT_GS_CATEGORY_CLASS(mt_gs_category(&mod, i)));
		if (c)
			out[k++] = c;
	}
	return k;
}

size_t mt_gs_module_categories(void *init, const char **classes, size_t max) {
	struct mt_gs_module mod;
	if (!mt_gs_module_read(init, 1, &mod))
		return 0;
	size_t k = 0;
	for (size_t i = 0; i < mod.ncat && k < max; i++)
		classes[k++] = MT_GS_CATEGORY_CLASS(mt_gs_category(&mod, i));
	return k;
}

/* Category cat's methods, on its class cls (both loaded): each of its two lists alone (once
 * loaded, a list's next is the class's list it was put in front of), through the public API.
 * +load is left alone (mt_instrument_method: the never list). Install lock held. */
static void gs_category_install(void *cat, void *cls, struct mt_methods_stats *st) {
	for (int meta = 0; meta < 2; meta++) {
		struct mt_gs_method_list *l = MT_GS_CATEGORY_METHODS(cat, meta);
		void *c = meta ? mt_objc_metaclass(cls) : cls;
		for (int j = 0; l && c && j < l->count; j++)
			mt_instrument_method(c, MT_GS_METHOD(l, j), st);
	}
	st->pool_used = mt_tramps_used;
}

void mt_gs_module_category_install(void *init, size_t i, struct mt_methods_stats *st) {
	struct mt_gs_module mod;
	if (!mt_gs_module_read(init, 1, &mod) || i >= mod.ncat)
		return;
	void *cat = mt_gs_category(&mod, i), *cls = mt_objc_look_up_class(MT_GS_CATEGORY_CLASS(cat));
	if (!cls)
		return;
	mt_objc_lock();
	gs_category_install(cat, cls, st);
	mt_objc_unlock();
}

/* Early modules (MSGTRACE_METHODS=all through the preload loader; methods_modules.c has the
 * switch): every class and category of the module before it loads, the categories whose class
 * was not there after. The first module is the runtime's own, loaded from its constructor: its
 * tables are made inside that call, so nothing is looked up before it returns
 * (mt_objc_look_up_class knows). */
static void gs_early_module(void *init, void (*real)(void *), struct mt_methods_stats *st) {
	struct mt_gs_module mod;
	if (!mt_gs_module_read(init, 0, &mod)) {
		real(init);
		return;
	}
	unsigned char before[64], *found = mod.ncat <= sizeof before ? before : malloc(mod.ncat);
	mt_objc_lock();
	for (size_t i = 0; found && i < mod.ncat; i++)
		found[i] = gs_class_named(&mod, MT_GS_CATEGORY_CLASS(mt_gs_category(&mod, i))) != NULL;
	gs_install_static(&mod, NULL, mod.ncls + mod.ncat, st);
	mt_objc_unlock();
	real(init); /* loads, sends +load */
	mt_gs_set_started();
	mt_objc_lock();
	for (size_t i = 0; found && i < mod.ncat; i++) {
		void *cat = mt_gs_category(&mod, i), *cls;
		if (!found[i] && (cls = mt_objc_look_up_class(MT_GS_CATEGORY_CLASS(cat))) != NULL)
			gs_category_install(cat, cls, st);
	}
	mt_objc_unlock();
	if (found != before)
		free(found);
}

void mt_gs_objc_load(void *init, void (*real)(void *), int early, int watched, struct mt_methods_stats *early_st) {
	mt_gs_module_entered();
	if (early && init) {
		gs_early_module(init, real, early_st);
		return;
	}
	if (watched && init)
		msgtraceModuleArriving(init); /* the selected methods get trampolines: +load too */
	real(init);                           /* loads, sends +load */
	mt_gs_set_started();
	if (watched && init)
		msgtraceModuleLoaded(init);
}
#endif
