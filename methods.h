/* msgtrace method capture (methods.c): trampolines into methods, through the Objective-C
 * runtime found in the process. */
#ifndef MSGTRACE_METHODS_H
#define MSGTRACE_METHODS_H
#include <stddef.h>
#include <stdint.h>

#define MT_RT_NONE 1  /* no runtime we can instrument */
#define MT_RT_GNU 2   /* gcc's GNU runtime (libobjc.so.4) */
#define MT_RT_APPLE 3 /* Apple's objc4 */

struct mt_methods_stats {
	uint64_t classes;      /* classes visited (each with its metaclass) */
	uint64_t instrumented; /* methods given a trampoline (restore: given back) */
	uint64_t never;        /* left alone: the never-instrument list, forwarding IMPs */
	uint64_t full;         /* left untraced: the pool was used up */
	uint64_t foreign;      /* left alone: unknown layout (install), no longer ours (restore) */
	uint64_t pool_used;    /* trampolines handed out so far */
};

int msgtrace_methods_runtime(void);
size_t msgtrace_class_list(void **out, size_t max);
const char *msgtrace_class_name(void *cls);
/* Apple: the classes an image defines (objc_copyClassNamesForImage), without realizing any
 * other; returns how many there are (those past max are not stored). 0 elsewhere. */
size_t msgtrace_image_classes(const char *image, void **out, size_t max);
const char *msgtrace_image_of(const void *p);
/* The image that defines a class, or for a class created at run time (not in any image) its
 * nearest superclass that an image defines ("" when none does). */
const char *msgtrace_class_image(void *cls);
int msgtrace_in_shared_cache(const char *path); /* Apple: dyld's shared cache holds it */
int msgtrace_never_instrument(const char *sel);
/* gcc's runtime: takes and gives back __objc_runtime_mutex (recursive, owned by the calling
 * thread). Every path that instruments takes it first, before any lock of ours: the runtime
 * calls out with it held (+initialize, which may call class_addMethod). No-op on Apple's. */
void msgtrace_runtime_lock(void);
void msgtrace_runtime_unlock(void);
/* Instruments the methods each class (and its metaclass) defines; adds to *st. */
void msgtrace_methods_install(void **classes, size_t n, struct mt_methods_stats *st);
/* Gives every method we instrumented its original IMP back where the IMP is still ours. */
void msgtrace_methods_restore(struct mt_methods_stats *st);
/* GNU: the classes a module defines and the loaded classes its categories extend. */
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
void msgtrace_watch_modules(int on);
/* GNU: whether the objects bind __objc_exec_class to this library's (or the preload loader's)
 * definition, so that no slot needs rebinding for it. */
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
/* class_addMethod rebound: the original, then msgtraceClassRegistered for a registered class. */
extern unsigned char (*msgtrace_orig_class_addMethod)(void *, void *, void *, const char *) __attribute__((visibility("hidden")));
unsigned char msgtrace_class_addMethod(void *cls, void *sel, void *imp, const char *types);
/* Apple: watches images loaded later through objc_addLoadImageFunc; msgtraceImagesLoaded runs
 * on a thread of ours after each. 0 where that is not available. */
int msgtrace_watch_loaded_images(void);
extern void msgtraceImagesLoaded(void); /* Go (methods.go) */
#endif
