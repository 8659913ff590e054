/* msgtrace method capture (methods*.c: methods_internal.h lists them): trampolines into
 * methods, through the Objective-C runtime found in the process (objc/runtime.h: which runtime,
 * class lists, the lock). */
#ifndef MSGTRACE_METHODS_H
#define MSGTRACE_METHODS_H
#include <stddef.h>
#include <stdint.h>

#include "objc/runtime.h"

struct mt_methods_stats {
	uint64_t classes;      /* classes visited (each with its metaclass) */
	uint64_t instrumented; /* methods given a trampoline (restore: given back) */
	uint64_t never;        /* left alone: the never-instrument list, forwarding IMPs */
	uint64_t full;         /* left untraced: the pool was used up */
	uint64_t foreign;      /* left alone: unknown layout (install), no longer ours (restore) */
	uint64_t pool_used;    /* trampolines handed out so far */
};

const char *msgtrace_image_of(const void *p);
/* The image that defines a class, or for a class created at run time (not in any image) its
 * nearest superclass that an image defines ("" when none does). */
const char *msgtrace_class_image(void *cls);
/* msgtrace_class_image of n classes into out (the loaded objects' segments read once). */
void msgtrace_class_images(void **classes, size_t n, const char **out);
int msgtrace_in_shared_cache(const char *path); /* Apple: dyld's shared cache holds it */
int msgtrace_never_instrument(const char *sel);
/* Instruments the methods each class (and its metaclass) defines; adds to *st. Takes the
 * runtime's lock (mt_objc_lock), as every path that instruments does. */
void msgtrace_methods_install(void **classes, size_t n, struct mt_methods_stats *st);
/* Keeps, of classes (n of them, compacted in place; returns how many are kept), those this
 * function has not seen before and those given methods since it last did (gcc's runtime: a
 * class's first method list changed, for the class or its metaclass), and remembers the others
 * as they are now. Elsewhere it keeps them all. Takes the runtime's lock. */
size_t msgtrace_classes_unseen(void **classes, size_t n);
/* Gives every method we instrumented its original IMP back where the IMP is still ours. */
void msgtrace_methods_restore(struct mt_methods_stats *st);
/* GNU and libobjc2 (a module: gcc's struct objc_module, libobjc2's struct objc_init): the classes a
 * module defines and the loaded classes its categories extend. */
size_t msgtrace_module_classes(void *module, void **out, size_t max);
/* GNU: the class names a module's categories extend, in order (up to max; returns how many). */
size_t msgtrace_module_categories(void *module, const char **classes, size_t max);
/* GNU: instruments the methods category i of a registered module adds (to a class of any
 * image: an app's category on a system class). */
void msgtrace_module_category_install(void *module, size_t i, struct mt_methods_stats *st);
/* GNU, a module about to register (its compiled structures): the names of the classes it defines,
 * then of the classes its categories extend, in order (up to max); returns how many there are,
 * *nclasses how many of them are classes. */
size_t msgtrace_module_defs(void *module, const char **names, size_t max, size_t *nclasses);
/* GNU, a module about to register: gives the methods of the classes and categories selected
 * (selected[i] for name i of msgtrace_module_defs) trampolines in the compiled method lists, so
 * that the runtime registers them so and +load (sent while it registers) is traced; adds to *st. */
void msgtrace_module_install_static(void *module, const unsigned char *selected, size_t n, struct mt_methods_stats *st);
/* GNU: what every module registration goes through (the interposed and the rebound
 * __objc_exec_class): msgtraceModuleArriving, the runtime's (real), the selectors the runtime
 * registered given to the trampolines, msgtraceModuleLoaded; only the runtime's until
 * msgtrace_watch_modules(1). */
void msgtrace_exec_class(void *module, void (*real)(void *));
/* libobjc2: what every module's __objc_load goes through (the interposed and the rebound), as
 * msgtrace_exec_class for gcc's: module is its struct objc_init (methods_gnustep.c). */
void msgtrace_objc_load(void *init, void (*real)(void *));
extern void (*msgtrace_orig___objc_load)(void *) __attribute__((visibility("hidden")));
void msgtrace___objc_load(void *init);
void msgtrace_watch_modules(int on);
/* GNU, MSGTRACE_METHODS=all started by the preload loader at the first module a library
 * registers: recording on (msgtrace_launch_record_early) and every module instrumented by
 * msgtrace_exec_class in C until msgtrace_early_methods_end. 1 when it started; 0 (nothing
 * changed) when the variables say not to record yet, or this is neither gcc's runtime nor libobjc2. */
int msgtrace_early_methods(void);
/* The Go side has its selection (or gave up): modules go its way from now on; *st is what the
 * early modules instrumented. */
void msgtrace_early_methods_end(struct mt_methods_stats *st);
/* MSGTRACE_METHODS=all through the preload loader: populates, from the loader's early thread, the
 * pages the early install writes first on the thread registering the modules (the trampolines'
 * data, the +load marks, the selector log: ~90 page faults for gnustep-base's ~7,100 methods),
 * so that it finds them there. Once; harmless at any time, and where the kernel cannot (before
 * Linux 5.14) it does nothing. */
void msgtrace_early_prefault(void);
/* GNU: whether the objects bind __objc_exec_class (libobjc2: __objc_load) to this library's (or
 * the preload loader's) definition, so that no slot needs rebinding for it. */
int msgtrace_exec_class_interposed(void);
/* GNU: __objc_exec_class as the rebound slots see it: msgtrace_exec_class with the original. */
extern void (*msgtrace_orig___objc_exec_class)(void *) __attribute__((visibility("hidden")));
void msgtrace___objc_exec_class(void *module);
extern void msgtraceModuleArriving(void *module); /* Go (methods.go) */
extern void msgtraceModuleLoaded(void *module);   /* Go (methods.go) */
/* GNU: objc_registerClassPair rebound: the original, then msgtraceClassRegistered. */
extern void (*msgtrace_orig_objc_registerClassPair)(void *) __attribute__((visibility("hidden")));
void msgtrace_objc_registerClassPair(void *cls);
extern void msgtraceClassRegistered(void *cls, void *creator); /* Go (methods.go) */
/* class_addMethod rebound. gcc's runtime: a method added to a class the selection chose (given to
 * msgtrace_methods_install) gets a trampoline as it is added, in C; elsewhere the original, then
 * msgtraceClassRegistered for a registered class. */
extern unsigned char (*msgtrace_orig_class_addMethod)(void *, void *, void *, const char *) __attribute__((visibility("hidden")));
unsigned char msgtrace_class_addMethod(void *cls, void *sel, void *imp, const char *types);
/* What msgtrace_class_addMethod instrumented so far and the trampolines handed out (gcc's
 * runtime; zeros elsewhere): counters read without a lock. */
void msgtrace_added_methods(struct mt_methods_stats *st);
/* Apple: watches images loaded later through objc_addLoadImageFunc; msgtraceImagesLoaded runs
 * on a thread of ours after each. 0 where that is not available. */
int msgtrace_watch_loaded_images(void);
/* Apple: instruments the methods the categories of an image (its mach header) add to their
 * classes, whatever image the class is of (an app's category on a class of the system), their
 * +load among them; adds to *st. Nothing elsewhere. */
void msgtrace_image_categories_install(const void *header, struct mt_methods_stats *st);
extern void msgtraceImagesLoaded(void); /* Go (methods.go) */
#endif
