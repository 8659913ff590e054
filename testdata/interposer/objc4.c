/* methods.c's Apple path (built with MT_APPLE_API=1) against a stand-in for objc4's public
 * API: the same functions, found by dlsym as on a device, with objc4's behaviour where method
 * capture depends on it (objc4-951 and dyld-1378's sources):
 *   - class_copyMethodList lists a category's methods before the class's own, and
 *     class_replaceMethod replaces the first method of that selector (the one dispatch uses);
 *     method_setImplementation replaces that very method;
 *   - the runtime lock is not recursive (an error-checking mutex here: taking it again on the
 *     thread that holds it is reported, not a hang); the API takes it;
 *   - images: dyld maps them, and the runtime reads their classes (map_images, the lock held);
 *     objc_addLoadImageFunc's callbacks run at the end of that, the lock still held; it calls
 *     them for the images already mapped inside the call. At launch, an image's categories are
 *     attached in the first load_images after the runtime registered with dyld that finds an
 *     image with a +load (loadAllCategoriesIfNeeded); later, when mapped;
 *   - +load: dyld has the runtime run an image's +load methods (load_images) right before the
 *     image's initializers, dependencies first. load_images takes the +load lock (recursive), then
 *     the runtime lock to schedule them (prepare_load_methods): superclasses first, each class's
 *     IMP read then from its metaclass's compiled list (getLoadMethod: not a category's), each
 *     category's from its own list; then, without the runtime lock, calls each through the IMP
 *     it read (call_load_methods: classes, then categories; a call made inside a +load, by an
 *     image a +load loads, only schedules: the outer call runs them after);
 *   - +initialize is sent through dispatch before a class's first message;
 *   - an image's categories are compiled category_t {name, cls, instanceMethods, classMethods}
 *     with method_list_t lists, in its __objc_catlist (getsectiondata), attached as they are.
 * Checked: which methods get trampolines (categories, the never list, +load), calls through them
 * recorded once and named by the implementing class; launch: the library's initializer runs
 * between the images' mapping and the app image's load_images, so the app's +load methods (a
 * class's and a category's), the +initialize and the calls they make are traced, nested, before
 * main; the app's category on a class of the system (not selected): its +load and methods
 * traced, the class's own not; a +load that loads a plugin; an image loaded later instrumented by a thread of the
 * library's once the lock is free, class_addMethod and objc_registerClassPair rebound (their
 * classes instrumented on that thread too), restore only where the IMP is still ours (+load
 * trampolines kept), and a second install reusing each method's trampoline.
 * With the argument "busy": a +load making 200,000 traced calls with a 64 KiB pool and the drain
 * running (the thread waits for chunks): no deadlock, nothing dropped. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "common.h"
#include "methods.h"
#include "trampoline.h"

/* ---- the stand-in runtime ---- */
struct mmethod {
	void *sel;
	const char *types;
	void *imp;
};
struct mimage;
struct mclass {
	struct mclass *isa, *super; /* a class's isa is its metaclass; a metaclass's isa is NULL */
	struct mclass *cls;         /* a metaclass's class */
	const char *name;
	int meta, registered, loaded, initialized;
	struct mimage *image;  /* NULL: registered by hand (image "app") */
	struct mmethod *m[16]; /* dispatch order: newest first (categories in front) */
	int n;
	struct mmethod *base[8]; /* the compiled list (class_ro_t's baseMethods) */
	int nbase;
};
struct mobj {
	struct mclass *isa;
};
/* compiled metadata: method_list_t (an mmethod is a big method_t) and category_t */
struct mlist {
	uint32_t entsize_flags, count;
	struct mmethod m[4];
};
struct mcat {
	const char *name;
	struct mclass *cls;
	struct mlist *lists[2]; /* instance, class methods */
	int attached;
};
struct mimage {
	const char *name;
	struct mclass *cls[4]; /* __objc_classlist (those with +load: __objc_nlclslist) */
	int ncls;
	struct mcat *cat[4]; /* __objc_catlist (those with +load: __objc_nlcatlist) */
	int ncat;
	void (*init)(void); /* its initializer (C constructors) */
	int mapped;
};

static pthread_mutex_t rt_lock, load_lock;
static pthread_t rt_holder;
static int rt_held;
static struct mclass *classes[32];
static int nclasses;
static void (*load_funcs[4])(const void *);
static int nload_funcs;
static struct mimage *mapped[8];
static int nmapped, registered_with_dyld, categories_attached;

static int lock_rt(const char *who) {
	int e = pthread_mutex_lock(&rt_lock);
	if (e == EDEADLK) {
		printf("FAIL %s: the runtime lock taken again by the thread that holds it\n", who);
		failures++;
		return 0;
	}
	rt_holder = pthread_self(), rt_held = 1;
	return 1;
}
static void unlock_rt(void) {
	rt_held = 0;
	pthread_mutex_unlock(&rt_lock);
}

/* selectors are interned names */
static const char *sels[64];
static void *sel(const char *name) {
	for (int i = 0; i < 64 && sels[i]; i++)
		if (strcmp(sels[i], name) == 0)
			return (void *)sels[i];
	for (int i = 0; i < 64; i++)
		if (!sels[i])
			return (void *)(sels[i] = name);
	abort();
}

static struct mmethod *new_method(const char *name, void *imp) {
	struct mmethod *m = calloc(1, sizeof *m);
	m->sel = sel(name), m->types = "q@:q", m->imp = imp;
	return m;
}
static void put_method(struct mclass *c, struct mmethod *m) {
	memmove(c->m + 1, c->m, c->n * sizeof c->m[0]);
	c->m[0] = m, c->n++;
}
static void add_method(struct mclass *c, const char *name, void *imp) { put_method(c, new_method(name, imp)); }
/* a method of the class's compiled list */
static void compile_method(struct mclass *c, const char *name, void *imp) {
	add_method(c, name, imp);
	c->base[c->nbase++] = c->m[0];
}

static struct mclass *new_class(const char *name, struct mclass *super) {
	struct mclass *c = calloc(1, sizeof *c), *mc = calloc(1, sizeof *mc);
	c->name = mc->name = name;
	c->isa = mc, c->super = super;
	mc->meta = 1, mc->super = super ? super->isa : c, mc->cls = c;
	return c;
}

static struct mcat *new_category(const char *name, struct mclass *cls) {
	struct mcat *k = calloc(1, sizeof *k);
	k->name = name, k->cls = cls;
	return k;
}
static void category_method(struct mcat *k, int meta, const char *name, void *imp) {
	if (!k->lists[meta])
		k->lists[meta] = calloc(1, sizeof *k->lists[meta]), k->lists[meta]->entsize_flags = sizeof(struct mmethod);
	struct mmethod *m = &k->lists[meta]->m[k->lists[meta]->count++];
	m->sel = sel(name), m->types = "q@:q", m->imp = imp;
}

static void register_class(struct mclass *c) {
	c->registered = 1;
	classes[nclasses++] = c;
}

/* attachCategories: the category's lists in front of the class's (lock held) */
static void attach(struct mcat *k) {
	for (int meta = 0; meta < 2; meta++)
		for (int i = k->lists[meta] ? (int)k->lists[meta]->count - 1 : -1; i >= 0; i--)
			put_method(meta ? k->cls->isa : k->cls, &k->lists[meta]->m[i]);
	k->attached = 1;
}
static void attach_all(void) {
	for (int i = 0; i < nmapped; i++)
		for (int j = 0; j < mapped[i]->ncat; j++)
			if (!mapped[i]->cat[j]->attached)
				attach(mapped[i]->cat[j]);
	categories_attached = 1;
}

/* map_images: classes read, categories attached (after launch), then the load-image callbacks,
 * every one with the lock held */
static void map_images(struct mimage **imgs, int n) {
	if (!lock_rt("map_images"))
		return;
	for (int i = 0; i < n; i++) {
		struct mimage *img = imgs[i];
		img->mapped = 1, mapped[nmapped++] = img;
		for (int j = 0; j < img->ncls; j++)
			img->cls[j]->image = img, register_class(img->cls[j]);
		for (int j = 0; j < img->ncat && categories_attached; j++)
			attach(img->cat[j]);
	}
	for (int f = 0; f < nload_funcs; f++)
		for (int i = 0; i < n; i++)
			load_funcs[f](imgs[i]);
	unlock_rt();
}

/* +load: the IMPs read when scheduled (getLoadMethod: the metaclass's compiled list) */
static struct mmethod *compiled_load(struct mclass *meta) {
	for (int i = 0; i < meta->nbase; i++)
		if (meta->base[i]->sel == sel("load"))
			return meta->base[i];
	return NULL;
}
static struct mmethod *category_load(struct mcat *k) {
	for (int i = 0; k->lists[1] && i < (int)k->lists[1]->count; i++)
		if (k->lists[1]->m[i].sel == sel("load"))
			return &k->lists[1]->m[i];
	return NULL;
}
typedef void (*load_fn)(void *, void *);
static struct {
	void *cls;
	load_fn imp;
} loadable[16];
static int nloadable, nloadable_cats;
static struct {
	struct mcat *cat;
	load_fn imp;
} loadable_cats[16];

static void schedule_class_load(struct mclass *c) {
	if (!c || c->loaded)
		return;
	schedule_class_load(c->super); /* superclasses first */
	struct mmethod *m = compiled_load(c->isa);
	if (m)
		loadable[nloadable].cls = c, loadable[nloadable++].imp = (load_fn)m->imp;
	c->loaded = 1;
}

static void call_load_methods(void) {
	static int loading;
	if (loading)
		return; /* inside a +load: the outer call runs what was scheduled */
	loading = 1;
	int more;
	do {
		while (nloadable > 0) {
			int n = nloadable;
			void *cls[16];
			load_fn imp[16];
			for (int i = 0; i < n; i++)
				cls[i] = loadable[i].cls, imp[i] = loadable[i].imp;
			nloadable = 0;
			for (int i = 0; i < n; i++)
				imp[i](cls[i], sel("load"));
		}
		int n = nloadable_cats;
		struct mcat *cat[16];
		load_fn imp[16];
		for (int i = 0; i < n; i++)
			cat[i] = loadable_cats[i].cat, imp[i] = loadable_cats[i].imp;
		nloadable_cats = 0;
		for (int i = 0; i < n; i++)
			imp[i](cat[i]->cls, sel("load"));
		more = nloadable_cats > 0;
	} while (nloadable > 0 || more);
	loading = 0;
}

static int has_load(struct mimage *img) {
	for (int i = 0; i < img->ncls; i++)
		if (compiled_load(img->cls[i]->isa))
			return 1;
	for (int i = 0; i < img->ncat; i++)
		if (category_load(img->cat[i]))
			return 1;
	return 0;
}

static void load_images(struct mimage *img) {
	if (!has_load(img))
		return;
	pthread_mutex_lock(&load_lock);
	if (lock_rt("load_images")) {
		if (!categories_attached && registered_with_dyld)
			attach_all();
		for (int i = 0; i < img->ncls; i++)
			schedule_class_load(img->cls[i]);
		for (int i = 0; i < img->ncat; i++) {
			struct mmethod *m = category_load(img->cat[i]);
			if (m)
				loadable_cats[nloadable_cats].cat = img->cat[i], loadable_cats[nloadable_cats++].imp = (load_fn)m->imp;
		}
		unlock_rt();
	}
	call_load_methods();
	pthread_mutex_unlock(&load_lock);
}

/* dyld's dlopen of an image: mapped, then its +load methods, then its initializer */
static void load_image(struct mimage *img) {
	map_images(&img, 1);
	load_images(img);
	if (img->init)
		img->init();
}

int objc_getClassList(void **buf, int max) {
	if (!lock_rt("objc_getClassList"))
		return 0;
	for (int i = 0; i < nclasses && i < max && buf; i++)
		buf[i] = classes[i];
	int n = nclasses;
	unlock_rt();
	return n;
}
void **class_copyMethodList(void *cls, unsigned *count) {
	struct mclass *c = cls;
	if (!lock_rt("class_copyMethodList"))
		return NULL;
	void **out = malloc((c->n + 1) * sizeof *out);
	for (int i = 0; i < c->n; i++)
		out[i] = c->m[i];
	*count = (unsigned)c->n;
	unlock_rt();
	return out;
}
void *method_getName(void *m) { return ((struct mmethod *)m)->sel; }
void *method_getImplementation(void *m) { return __atomic_load_n(&((struct mmethod *)m)->imp, __ATOMIC_ACQUIRE); }
const char *method_getTypeEncoding(void *m) { return ((struct mmethod *)m)->types; }
void *method_setImplementation(void *m, void *imp) {
	if (!lock_rt("method_setImplementation"))
		return NULL;
	void *old = ((struct mmethod *)m)->imp;
	__atomic_store_n(&((struct mmethod *)m)->imp, imp, __ATOMIC_RELEASE);
	unlock_rt();
	return old;
}
const char *sel_getName(void *s) { return s; }
const char *class_getName(void *c) { return ((struct mclass *)c)->name; }
void *class_getSuperclass(void *c) { return ((struct mclass *)c)->super; }
_Bool class_isMetaClass(void *c) { return ((struct mclass *)c)->meta; }
void *object_getClass(void *o) { return ((struct mobj *)o)->isa; }
void _objc_msgForward(void) { abort(); }
void *objc_lookUpClass(const char *name) {
	if (!lock_rt("objc_lookUpClass"))
		return NULL;
	void *found = NULL;
	for (int i = 0; i < nclasses; i++)
		if (strcmp(classes[i]->name, name) == 0)
			found = classes[i];
	unlock_rt();
	return found;
}
void *class_replaceMethod(void *cls, void *s, void *imp, const char *types) {
	struct mclass *c = cls;
	if (!lock_rt("class_replaceMethod"))
		return NULL;
	void *old = NULL;
	int i = 0;
	while (i < c->n && c->m[i]->sel != s)
		i++;
	if (i < c->n) {
		old = c->m[i]->imp;
		__atomic_store_n(&c->m[i]->imp, imp, __ATOMIC_RELEASE);
	} else {
		add_method(c, s, imp);
		c->m[0]->types = types;
	}
	unlock_rt();
	return old;
}
_Bool class_addMethod(void *cls, void *s, void *imp, const char *types) {
	struct mclass *c = cls;
	if (!lock_rt("class_addMethod"))
		return 0;
	int i = 0;
	while (i < c->n && c->m[i]->sel != s)
		i++;
	int add = i == c->n; /* objc4 adds only a selector the class does not define */
	if (add) {
		add_method(c, s, imp);
		c->m[0]->types = types;
	}
	unlock_rt();
	return add;
}
/* the classes registered by hand belong to the image "app" here */
const char **objc_copyClassNamesForImage(const char *image, unsigned *count) {
	*count = 0;
	if (!lock_rt("objc_copyClassNamesForImage"))
		return NULL;
	const char **names = malloc((nclasses + 1) * sizeof *names);
	for (int i = 0; i < nclasses; i++)
		if (strcmp(classes[i]->image ? classes[i]->image->name : "app", image) == 0)
			names[(*count)++] = classes[i]->name;
	unlock_rt();
	return names;
}
void objc_registerClassPair(void *cls) {
	if (!lock_rt("objc_registerClassPair"))
		return;
	register_class(cls);
	unlock_rt();
}
/* dyld's: an image's section (the header is the image here); only __DATA,__objc_catlist */
void *getsectiondata(const void *header, const char *seg, const char *sect, unsigned long *size) {
	struct mimage *img = (struct mimage *)header;
	*size = 0;
	if (strcmp(seg, "__DATA") != 0 || strcmp(sect, "__objc_catlist") != 0 || !img->ncat)
		return NULL;
	*size = img->ncat * sizeof img->cat[0];
	return img->cat;
}
void objc_addLoadImageFunc(void (*fn)(const void *)) {
	if (!lock_rt("objc_addLoadImageFunc"))
		return;
	load_funcs[nload_funcs++] = fn;
	for (int i = 0; i < nmapped; i++) /* the images mapped before */
		fn(mapped[i]);
	unlock_rt();
}

/* objc_msgSend's contract, in C: +initialize the class first, look the method up from the
 * class, call it */
static struct mmethod *first(struct mclass *c, const char *name) {
	for (int i = 0; i < c->n; i++)
		if (c->m[i]->sel == sel(name))
			return c->m[i];
	return NULL;
}
static void *lookup(struct mclass *c, void *s) {
	for (; c; c = c->super)
		for (int i = 0; i < c->n; i++)
			if (c->m[i]->sel == s)
				return method_getImplementation(c->m[i]);
	return NULL;
}
typedef int64_t (*imp_fn)(void *, void *, int64_t);
static void initialize(struct mclass *c) {
	if (!c || c->initialized)
		return;
	c->initialized = 1;
	initialize(c->super);
	void *imp = lookup(c->isa, sel("initialize")); /* sent: dispatch finds it */
	if (imp)
		((imp_fn)imp)(c, sel("initialize"), 0);
}
static int64_t send(void *o, const char *name, int64_t x) {
	struct mclass *isa = ((struct mobj *)o)->isa;
	initialize(isa->meta ? isa->cls : isa);
	return ((imp_fn)lookup(isa, sel(name)))(o, sel(name), x);
}
static int64_t send_super(struct mclass *super, void *o, const char *name, int64_t x) {
	return ((imp_fn)lookup(super, sel(name)))(o, sel(name), x);
}

/* ---- the program ---- */
static struct mclass *Base, *App, *Plugin, *Dyn, *Anchor, *Early, *Loader, *Boot, *PlugLoad, *View;
/* the images at launch, dependencies first (the app links the library first; a framework of the
 * system comes before it), and two loaded later: one by a +load, one by main */
static struct mimage img_objc = {.name = "libobjc.A.dylib"}, img_uikit = {.name = "UIKit.framework/UIKit"}, img_msgtrace = {.name = "msgtrace.framework/msgtrace"},
		     img_app = {.name = "Early.app/Early"}, img_boot = {.name = "Boot.bundle/Boot"}, img_plugin = {.name = "Plugin.bundle/Plugin"};

static int64_t base_work(void *self, void *cmd, int64_t x) { (void)self, (void)cmd; return x + 1; }
static int64_t app_work(void *self, void *cmd, int64_t x) { (void)cmd; return send_super(Base, self, "work", x) * 10; }
static int64_t app_tick(void *self, void *cmd, int64_t x) { (void)self, (void)cmd; return x + 100; }
static int64_t cat_tick(void *self, void *cmd, int64_t x) { (void)self, (void)cmd; return x + 200; }
static int64_t base_make(void *self, void *cmd, int64_t x) { (void)self, (void)cmd; return x + 3; }
static int64_t retain_imp(void *self, void *cmd, int64_t x) { (void)self, (void)cmd; return x; }
static int64_t plugin_ping(void *self, void *cmd, int64_t x) { (void)self, (void)cmd; return x + 4; }
static int64_t app_late(void *self, void *cmd, int64_t x) { (void)self, (void)cmd; return x + 5; }
static int64_t added(void *self, void *cmd, int64_t x) { (void)self, (void)cmd; return x + 6; }
static int64_t swizzled(void *self, void *cmd, int64_t x) { (void)self, (void)cmd; return x + 7; }

/* launch: +load methods (a class's, a category's, one loading a plugin), a +initialize */
static int busy; /* "busy": +[Early load] sends 200,000 messages */
static int64_t warmed;
static int anchor_loads, early_loads, category_loads, loader_loads, boot_loads, plug_loads, initialized_early, view_loads, view_layouts;
static void anchor_load(void *self, void *cmd) { (void)self, (void)cmd, anchor_loads++; }
static void early_load(void *self, void *cmd) {
	(void)cmd;
	early_loads++;
	for (int i = 0; i < (busy ? 200000 : 1); i++)
		warmed += send(self, "warm", 1);
}
static int64_t early_initialize(void *self, void *cmd, int64_t x) { (void)self, (void)cmd, initialized_early++; return x; }
static int64_t early_warm(void *self, void *cmd, int64_t x) { (void)self, (void)cmd; return x; }
static void early_category_load(void *self, void *cmd) { (void)cmd, category_loads++, send(self, "extra", 1); }
static int64_t early_extra(void *self, void *cmd, int64_t x) { (void)self, (void)cmd; return x + 1; }
static void loader_load(void *self, void *cmd) { (void)self, (void)cmd, loader_loads++, load_image(&img_boot); }
static void boot_load(void *self, void *cmd) { (void)self, (void)cmd, boot_loads++; }
static void plug_load(void *self, void *cmd) { (void)self, (void)cmd, plug_loads++; }
/* the system's class and the app's category on it (swizzling, as apps do in +load) */
static int64_t view_layout(void *self, void *cmd, int64_t x) { (void)self, (void)cmd, view_layouts++; return x; }
static void view_swizzle_load(void *self, void *cmd) { (void)cmd, view_loads++, send(self, "swizzleSetup", send(self, "layout", 1)); }
static int64_t view_swizzle_setup(void *self, void *cmd, int64_t x) { (void)self, (void)cmd; return x; }

/* what the library's Go side does, in C (installs serialized, as methodsMu does) */
static struct mt_methods_stats stats;
static pthread_mutex_t install_mu = PTHREAD_MUTEX_INITIALIZER;
static volatile int images_loaded, off_loader;
static pthread_t loader;
static volatile int arrived, arrived_off_caller = 1;
static void *created_by;
static int watching;
/* every class but the system's (UIKit's), as the default selection */
static void install_all(void) {
	void *buf[32];
	pthread_mutex_lock(&install_mu);
	size_t n = mt_objc_class_list(buf, 32), k = 0;
	for (size_t i = 0; i < n; i++)
		if (((struct mclass *)buf[i])->image != &img_uikit)
			buf[k++] = buf[i];
	msgtrace_methods_install(buf, k, &stats);
	pthread_mutex_unlock(&install_mu);
}
/* the library's initializer (ctor.c's, msgtraceLoad, the agent's install): the classes of the
 * images the default selection takes (not the system's), then the methods their categories add
 * to other classes; then watch the images loaded later */
static void library_initializer(void) {
	struct mimage *selected[] = {&img_msgtrace, &img_app};
	pthread_mutex_lock(&install_mu);
	for (int i = 0; i < 2; i++) {
		void *buf[16];
		size_t n = mt_objc_image_classes(selected[i]->name, buf, 16);
		msgtrace_methods_install(buf, n, &stats);
		msgtrace_image_categories_install(selected[i], &stats);
	}
	pthread_mutex_unlock(&install_mu);
	watching = msgtrace_watch_loaded_images();
}
void msgtraceImagesLoaded(void) {
	/* on the library's thread: it waits for the lock the loading thread holds, if it still
	 * does (the error-checking lock reports a thread taking it again) */
	off_loader = !pthread_equal(pthread_self(), loader);
	install_all();
	__atomic_store_n(&images_loaded, images_loaded + 1, __ATOMIC_RELEASE);
}
void msgtraceClassRegistered(void *cls, void *creator) {
	/* queued by the hooks for the library's thread: they may run where dyld holds its lock */
	arrived_off_caller &= !pthread_equal(pthread_self(), loader);
	if (creator)
		created_by = creator;
	pthread_mutex_lock(&install_mu);
	msgtrace_methods_install(&cls, 1, &stats);
	pthread_mutex_unlock(&install_mu);
	__atomic_store_n(&arrived, arrived + 1, __ATOMIC_RELEASE);
}
void msgtraceModuleLoaded(void *module) { (void)module; }

struct rec {
	void *cls;
	const char *sel;
	uint64_t depth, start, end;
};
static struct rec got[64];
static int ngot;
static void collect(void *ctx, uint64_t tid, const struct mt_record *r, uint64_t n, uint64_t d, uint64_t o) {
	(void)ctx, (void)tid, (void)d, (void)o;
	for (uint64_t i = 0; i < n && ngot < 64; i++)
		got[ngot++] = (struct rec){(void *)(uintptr_t)(r[i].cls & ((1ULL << CLS_BITS) - 1)), (const char *)(uintptr_t)r[i].sel,
					   (r[i].cls >> DEPTH_SHIFT) & 0xfff, r[i].start, r[i].end};
}

static int is_tramp(void *imp) {
	return (char *)imp >= msgtrace_tramp_text && (char *)imp < msgtrace_tramp_text + (size_t)MT_POOL * MT_STRIDE;
}

static void wait_arrived(int n) {
	for (int i = 0; i < 2000 && __atomic_load_n(&arrived, __ATOMIC_ACQUIRE) < n; i++) {
		struct timespec ts = {0, 1000000};
		nanosleep(&ts, NULL);
	}
}

static void wait_images(int n) {
	for (int i = 0; i < 2000 && __atomic_load_n(&images_loaded, __ATOMIC_ACQUIRE) < n; i++) {
		struct timespec ts = {0, 1000000};
		nanosleep(&ts, NULL);
	}
}

/* The process's launch as dyld and objc4 run it: every image mapped (the runtime registers with
 * dyld and reads them all), then each image's +load methods and initializer, dependencies
 * first: libobjc, the library (its +load, then its initializer: the install), the app (its
 * +load methods: the install came first). Returns the tick main starts at. */
static uint64_t launch(void) {
	Anchor = new_class("MsgtraceLoadAnchor", NULL); /* cmd/libmsgtrace/anchor_darwin.m */
	compile_method(Anchor->isa, "load", (void *)anchor_load);
	img_msgtrace.cls[img_msgtrace.ncls++] = Anchor;
	img_msgtrace.init = library_initializer;

	Early = new_class("Early", NULL);
	compile_method(Early->isa, "load", (void *)early_load);
	compile_method(Early->isa, "initialize", (void *)early_initialize);
	compile_method(Early->isa, "warm", (void *)early_warm);
	struct mcat *launch_cat = new_category("Launch", Early); /* Early (Launch) */
	category_method(launch_cat, 1, "load", (void *)early_category_load);
	category_method(launch_cat, 1, "extra", (void *)early_extra);
	Loader = new_class("Loader", NULL);
	compile_method(Loader->isa, "load", (void *)loader_load);
	img_app.cls[img_app.ncls++] = Early, img_app.cls[img_app.ncls++] = Loader;
	img_app.cat[img_app.ncat++] = launch_cat;
	View = new_class("UIView", NULL); /* the system's */
	compile_method(View->isa, "layout", (void *)view_layout);
	img_uikit.cls[img_uikit.ncls++] = View;
	struct mcat *swizzle = new_category("Swizzle", View); /* the app's: UIView (Swizzle) */
	category_method(swizzle, 1, "load", (void *)view_swizzle_load);
	category_method(swizzle, 1, "swizzleSetup", (void *)view_swizzle_setup);
	img_app.cat[img_app.ncat++] = swizzle;

	Boot = new_class("Boot", NULL); /* the plugin +[Loader load] loads */
	compile_method(Boot->isa, "load", (void *)boot_load);
	img_boot.cls[img_boot.ncls++] = Boot;

	struct mimage *at_launch[] = {&img_objc, &img_uikit, &img_msgtrace, &img_app};
	map_images(at_launch, 4);
	registered_with_dyld = 1;
	for (int i = 0; i < 4; i++) {
		load_images(at_launch[i]);
		if (at_launch[i]->init)
			at_launch[i]->init();
	}
	return msgtrace_now_ticks();
}

/* "busy": a +load that fills the pool many times over, the drain streaming meanwhile */
static int run_busy(const char *path) {
	busy = 1;
	CHECK("a 64 KiB pool of 4 KiB chunks", msgtrace_configure(4096, 64 << 10, 4096) == 0);
	struct mt_stream_config sc = {.path = path, .period_ms = 10};
	if (msgtrace_stream_start(&sc) != 0) {
		printf("FAIL stream: %s\n", msgtrace_stream_error());
		return 1;
	}
	launch();
	warmed += send(Early, "warm", 1);
	msgtrace_stream_close();
	struct mt_counters c;
	msgtrace_counters(&c);
	CHECK("the +load ran its 200,000 sends", warmed == 200001);
	CHECK("the pool filled: the +load waited for the drain", c.waits > 0);
	CHECK("nothing dropped", c.dropped == 0);
	CHECK("every call streamed", c.recorded == c.written && c.written >= 200000 + 4);
	printf("%s busy: %llu calls streamed, %llu waits for chunks, %llu dropped\n", failures ? "FAILED" : "OK",
	       (unsigned long long)c.written, (unsigned long long)c.waits, (unsigned long long)c.dropped);
	return failures != 0;
}

/* the +load methods' trampolines: kept by a restore */
static int kept_loads(void) {
	struct mclass *with_load[] = {Anchor, Early, Loader, Boot, PlugLoad, View};
	int n = 0;
	for (int i = 0; i < 6; i++)
		for (int j = 0; j < with_load[i]->isa->n; j++)
			n += with_load[i]->isa->m[j]->sel == sel("load") && is_tramp(with_load[i]->isa->m[j]->imp);
	return n;
}

int main(int argc, char **argv) {
	pthread_mutexattr_t a;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ERRORCHECK);
	pthread_mutex_init(&rt_lock, &a);
	pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
	pthread_mutex_init(&load_lock, &a);
	loader = pthread_self();
	use_test_runtime();
	if (argc > 2 && strcmp(argv[1], "busy") == 0)
		return run_busy(argv[2]);

	uint64_t main_tick = launch();
	CHECK("the runtime is Apple's API", mt_objc_kind() == MT_RT_APPLE);
	CHECK("images loaded later are watched", watching == 1);
	CHECK("every +load ran once", anchor_loads == 1 && early_loads == 1 && category_loads == 1 && loader_loads == 1 && boot_loads == 1 && view_loads == 1);
	CHECK("the app's category on the system's class: its methods instrumented, the class's own not",
	      is_tramp(first(View->isa, "load")->imp) && is_tramp(first(View->isa, "swizzleSetup")->imp) &&
		  first(View->isa, "layout")->imp == (void *)view_layout && view_layouts == 1);
	CHECK("+[Early initialize] ran once, before +[Early warm]", initialized_early == 1 && warmed == 1);
	CHECK("the library's own +load (run before its initializer, untraced) has a trampoline since", is_tramp(first(Anchor->isa, "load")->imp));
	CHECK("the category's +load and the class's both have trampolines",
	      is_tramp(Early->isa->m[0]->imp) && Early->isa->m[0]->sel == sel("load") && is_tramp(compiled_load(Early->isa)->imp) &&
		  Early->isa->m[0] != compiled_load(Early->isa));
	warmed += send(Early, "warm", 1); /* main */
	wait_images(1);
	CHECK("the launch images are not reported; the one a +load loaded is, once", images_loaded == 1);

	Base = new_class("Base", NULL);
	add_method(Base, "work", (void *)base_work);
	add_method(Base, "retain", (void *)retain_imp); /* never instrumented */
	add_method(Base->isa, "make", (void *)base_make);
	App = new_class("App", Base);
	add_method(App, "work", (void *)app_work);
	add_method(App, "tick", (void *)app_tick);
	add_method(App, "tick", (void *)cat_tick); /* a category's, in front: it shadows App's own */
	register_class(Base), register_class(App);
	struct mmethod *cat = App->m[0], *own_tick = App->m[1];

	void *listed[2] = {0};
	CHECK("the classes of an image", mt_objc_image_classes("app", listed, 1) == 2 && listed[0] == Base && !listed[1]);
	CHECK("no classes of another", mt_objc_image_classes("other", listed, 2) == 0);
	struct mt_methods_stats before = stats;
	install_all();
	CHECK("instrumented: -[Base work] +[Base make] -[App work] -[App tick] (the category's)", stats.instrumented - before.instrumented == 4);
	CHECK("never: retain", stats.never - before.never == 1);
	CHECK("the category's -tick has a trampoline", is_tramp(cat->imp));
	CHECK("the shadowed -tick is left alone", own_tick->imp == (void *)app_tick);

	struct mobj app = {App}, base = {Base};
	CHECK("-[App tick] runs the category's", send(&app, "tick", 1) == 201);
	CHECK("-[App work] calls [super work]", send(&app, "work", 1) == 20);
	CHECK("+[Base make]", send(Base, "make", 1) == 4);
	CHECK("-[Base retain] untouched", send(&base, "retain", 9) == 9);

	/* an image loaded later: a class, a class with +load and a category on App */
	Plugin = new_class("Plugin", Base);
	add_method(Plugin, "ping", (void *)plugin_ping);
	PlugLoad = new_class("PlugLoad", NULL);
	compile_method(PlugLoad->isa, "load", (void *)plug_load);
	struct mcat *late = new_category("Late", App);
	category_method(late, 0, "late", (void *)app_late);
	img_plugin.cls[img_plugin.ncls++] = Plugin, img_plugin.cls[img_plugin.ncls++] = PlugLoad;
	img_plugin.cat[img_plugin.ncat++] = late;
	load_image(&img_plugin);
	wait_images(2);
	CHECK("the later image reported once", images_loaded == 2);
	CHECK("and instrumented on a thread of the library's", off_loader);
	CHECK("its +load ran once", plug_loads == 1);
	CHECK("its +load has a trampoline now", is_tramp(first(PlugLoad->isa, "load")->imp));
	struct mobj plugin = {Plugin};
	CHECK("-[Plugin ping]", send(&plugin, "ping", 1) == 5);
	CHECK("-[App late] (a category of the later image)", send(&app, "late", 1) == 6);

	/* class_addMethod to a registered class, and a class created at run time */
	msgtrace_orig_class_addMethod = (unsigned char (*)(void *, void *, void *, const char *))class_addMethod;
	msgtrace_orig_objc_registerClassPair = (void (*)(void *))objc_registerClassPair;
	CHECK("class_addMethod", msgtrace_class_addMethod(App, sel("added"), (void *)added, "q@:q") == 1);
	wait_arrived(1);
	CHECK("-[App added]", send(&app, "added", 1) == 7);
	Dyn = new_class("Dyn", App);
	msgtrace_class_addMethod(Dyn, sel("ping"), (void *)plugin_ping, "q@:q"); /* being built: later */
	CHECK("a class being built is left to its registration", !is_tramp(first(Dyn, "ping")->imp));
	msgtrace_objc_registerClassPair(Dyn);
	wait_arrived(2);
	CHECK("registered: instrumented", is_tramp(first(Dyn, "ping")->imp));
	CHECK("both arrivals instrumented by the library's thread", arrived == 2 && arrived_off_caller);
	CHECK("registered: the caller is reported", created_by != NULL);
	struct mobj dyn = {Dyn};
	CHECK("-[Dyn ping]", send(&dyn, "ping", 2) == 6);

	/* stop: restore where the IMP is still ours (not the +load methods'); the app swizzled
	 * -[Base work] meanwhile */
	void *before_imps[3] = {cat->imp, first(Base->isa, "make")->imp, first(App, "added")->imp};
	void *early_load_tramp = compiled_load(Early->isa)->imp;
	msgtrace_active = 0;
	class_replaceMethod(Base, sel("work"), (void *)swizzled, "q@:q");
	struct mt_methods_stats rs = {0};
	int kept = kept_loads();
	CHECK("seven +load trampolines", kept == 7);
	msgtrace_methods_restore(&rs);
	CHECK("restored all but the swizzled one and the +load methods", rs.foreign == 1 && rs.instrumented == stats.instrumented - 1 - (uint64_t)kept);
	CHECK("the +load methods keep their trampolines", kept_loads() == kept && compiled_load(Early->isa)->imp == early_load_tramp);
	CHECK("the category's -tick is the category's again", cat->imp == (void *)cat_tick);
	CHECK("the swizzled IMP is left", lookup(Base, sel("work")) == (void *)swizzled);
	CHECK("a cached trampoline forwards, untraced", ((imp_fn)before_imps[0])(&app, sel("tick"), 1) == 201);

	/* start again: each method gets its own trampoline back; the swizzled one a new one */
	uint64_t pool = stats.pool_used;
	msgtrace_active = 1;
	install_all();
	CHECK("the same trampolines", cat->imp == before_imps[0] && first(Base->isa, "make")->imp == before_imps[1] && first(App, "added")->imp == before_imps[2]);
	CHECK("one new trampoline: the swizzled method", stats.pool_used == pool + 1);
	CHECK("-[Base work] traced into the swizzled IMP", send(&base, "work", 1) == 8);

	msgtrace_active = 0;
	msgtrace_visit(collect, 0);
	/* A +load of an image loaded later (Boot: by a +load; PlugLoad: by main) is traced only when
	 * the library's thread instrumented it before the loading thread scheduled it: objc4 calls
	 * the load-image callbacks holding its lock, and schedules the +load methods right after it
	 * lets go of it. Recorded at most once; left out of the list. */
	int racy[2] = {0, 0}, k = 0;
	for (int i = 0; i < ngot; i++) {
		if (got[i].sel == sel("load") && (got[i].cls == Boot->isa || got[i].cls == PlugLoad->isa)) {
			racy[got[i].cls == PlugLoad->isa]++;
			CHECK("a later image's +load, if traced, at the top", got[i].depth == 0);
			continue;
		}
		got[k++] = got[i];
	}
	ngot = k;
	CHECK("a later image's +load recorded at most once", racy[0] <= 1 && racy[1] <= 1);
	struct rec want[] = {
	    /* launch: +[Early load] > (+[Early initialize], +[Early warm]); +[Loader load] (it loaded
	     * Boot); Early (Launch)'s +[Early load] > +[Early extra] */
	    {Early->isa, "initialize", 1}, {Early->isa, "warm", 1}, {Early->isa, "load", 0}, {Loader->isa, "load", 0},
	    {Early->isa, "extra", 1}, {Early->isa, "load", 0},
	    /* UIView (Swizzle)'s +load > +[UIView swizzleSetup:] (+[UIView layout] is the system's) */
	    {View->isa, "swizzleSetup", 1}, {View->isa, "load", 0},
	    /* main */
	    {Early->isa, "warm", 0},
	    {App, "tick", 0},   {Base, "work", 1}, {App, "work", 0}, {Base->isa, "make", 0},
	    {Plugin, "ping", 0}, {App, "late", 0}, {App, "added", 0}, {Dyn, "ping", 0},
	    {Base, "work", 0},
	};
	int n = sizeof want / sizeof want[0], before_main = 8;
	CHECK("record count", ngot == n);
	for (int i = 0; i < n && i < ngot; i++) {
		if (got[i].cls != want[i].cls || got[i].sel != sel(want[i].sel) || got[i].depth != want[i].depth) {
			printf("FAIL record %d: [%s %s] depth %llu, want [%s %s] depth %llu\n", i, ((struct mclass *)got[i].cls)->name,
			       got[i].sel, (unsigned long long)got[i].depth, ((struct mclass *)want[i].cls)->name, want[i].sel, (unsigned long long)want[i].depth);
			failures++;
		}
		if (i < before_main && got[i].end > main_tick) {
			printf("FAIL record %d: [%s %s] ends after main started\n", i, ((struct mclass *)got[i].cls)->name, got[i].sel);
			failures++;
		}
		if (i >= before_main && got[i].start < main_tick) {
			printf("FAIL record %d: [%s %s] starts before main\n", i, ((struct mclass *)got[i].cls)->name, got[i].sel);
			failures++;
		}
	}
	printf("%s %d records (+ later images' +load: %d, %d), %llu methods instrumented\n", failures ? "FAILED" : "OK", ngot, racy[0],
	       racy[1], (unsigned long long)stats.instrumented);
	return failures != 0;
}
