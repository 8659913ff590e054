/*
 * Method capture on Apple's runtime (objc4), image by image: the +load methods the runtime
 * calls directly through their IMPs, an image's categories on classes of other images, and the
 * images loaded later (objc_addLoadImageFunc) and classes registered or given a method at run
 * time (mt_class_arrived), instrumented on a thread of the library's. A +load given its
 * trampoline is methods_tramps.c's.
 * Depends on: methods_tramps.c, objc/runtime.c, rt_thread.c (the thread untraced), trampoline_*.S;
 * the Go side's msgtraceClassRegistered and msgtraceImagesLoaded (methods.go).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "methods.h"
#include "methods_internal.h"
#include "rt.h"
#include "trampoline.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#if MT_APPLE_API
/* Apple: an image's categories (its __objc_catlist), whatever class they extend: the methods of
 * each that are in the class's list (attached: at launch, since the runtime loaded our own
 * +load; later images, when mapped) get trampolines; a method a later category shadows is left
 * alone, as mt_instrument_class leaves it. Those of a selected class are ours already. */
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
				if (mt_is_apple_load(c, ms[j])) {
					mt_instrument_load(c, ms[j], st);
					continue;
				}
				int shadowed = 0;
				for (unsigned q = 0; q < j && !shadowed; q++)
					shadowed = mt_objc_method_sel(ms[q]) == mt_objc_method_sel(ms[j]);
				if (!shadowed)
					mt_instrument_method(c, ms[j], st);
			}
			free(ms);
		}
	}
	st->pool_used = mt_tramps_used;
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

void mt_class_arrived(void *cls, void *creator) {
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

#endif
