/* methods.c's Apple path (built with MT_APPLE_API=1) against a stand-in for objc4's public
 * API: the same functions, found by dlsym as on a device, with objc4's documented behaviour
 * where method capture depends on it:
 *   - class_copyMethodList lists a category's methods before the class's own, and
 *     class_replaceMethod replaces the first method of that selector (the one dispatch uses);
 *   - the runtime lock is not recursive (an error-checking mutex here: taking it again on the
 *     thread that holds it is reported, not a hang); the API takes it;
 *   - objc_addLoadImageFunc calls back for the images already loaded, inside the call, and for
 *     each image loaded later after its classes and categories are in, with the lock held.
 * Checked: which methods get trampolines (categories, the never list), calls through them
 * recorded once and named by the implementing class, an image loaded later instrumented by a
 * thread of the library's once the lock is free, class_addMethod and objc_registerClassPair
 * rebound (their classes instrumented on that thread too), restore only where the IMP is
 * still ours, and a second install reusing each method's trampoline. */
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
struct mclass {
	struct mclass *isa, *super; /* a class's isa is its metaclass; a metaclass's isa is NULL */
	const char *name;
	int meta, registered;
	struct mmethod *m[16]; /* dispatch order: newest first (categories in front) */
	int n;
};
struct mobj {
	struct mclass *isa;
};

static pthread_mutex_t rt_lock;
static pthread_t rt_holder;
static int rt_held;
static struct mclass *classes[32];
static int nclasses;
static void (*load_funcs[4])(const void *);
static int nload_funcs;

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

static void add_method(struct mclass *c, const char *name, void *imp) {
	struct mmethod *m = calloc(1, sizeof *m);
	m->sel = sel(name), m->types = "q@:q", m->imp = imp;
	memmove(c->m + 1, c->m, c->n * sizeof c->m[0]);
	c->m[0] = m, c->n++;
}

static struct mclass *new_class(const char *name, struct mclass *super) {
	struct mclass *c = calloc(1, sizeof *c), *mc = calloc(1, sizeof *mc);
	c->name = mc->name = name;
	c->isa = mc, c->super = super;
	mc->meta = 1, mc->super = super ? super->isa : c;
	return c;
}

static void register_class(struct mclass *c) {
	c->registered = 1;
	classes[nclasses++] = c;
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
/* every class registered so far belongs to the image "app" here */
const char **objc_copyClassNamesForImage(const char *image, unsigned *count) {
	*count = 0;
	if (strcmp(image, "app") != 0 || !lock_rt("objc_copyClassNamesForImage"))
		return NULL;
	const char **names = malloc((nclasses + 1) * sizeof *names);
	for (int i = 0; i < nclasses; i++)
		names[i] = classes[i]->name;
	*count = (unsigned)nclasses;
	unlock_rt();
	return names;
}
void objc_registerClassPair(void *cls) {
	if (!lock_rt("objc_registerClassPair"))
		return;
	register_class(cls);
	unlock_rt();
}
void objc_addLoadImageFunc(void (*fn)(const void *)) {
	if (!lock_rt("objc_addLoadImageFunc"))
		return;
	load_funcs[nload_funcs++] = fn;
	static const char images[2] = {0};
	for (int i = 0; i < 2; i++) /* the images loaded before: main program, libobjc */
		fn(&images[i]);
	unlock_rt();
}
/* an image loaded later: its classes and categories, then the callbacks, under the lock */
static void load_image(struct mclass *cls, struct mclass *cat_on, const char *cat_sel, void *cat_imp) {
	if (!lock_rt("load_image"))
		return;
	register_class(cls);
	if (cat_on)
		add_method(cat_on, cat_sel, cat_imp);
	static const char header;
	for (int i = 0; i < nload_funcs; i++)
		load_funcs[i](&header);
	unlock_rt();
}

/* objc_msgSend's contract, in C: look the method up from the class, call it */
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
static int64_t send(void *o, const char *name, int64_t x) {
	return ((imp_fn)lookup(((struct mobj *)o)->isa, sel(name)))(o, sel(name), x);
}
static int64_t send_super(struct mclass *super, void *o, const char *name, int64_t x) {
	return ((imp_fn)lookup(super, sel(name)))(o, sel(name), x);
}

/* ---- the program ---- */
static struct mclass *Base, *App, *Plugin, *Dyn;

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

/* what the library's Go side does, in C */
static struct mt_methods_stats stats;
static volatile int images_loaded, off_loader;
static pthread_t loader;
static volatile int arrived, arrived_off_caller = 1;
static void *created_by;
static void install_all(void) {
	void *buf[32];
	size_t n = mt_objc_class_list(buf, 32);
	msgtrace_methods_install(buf, n, &stats);
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
	msgtrace_methods_install(&cls, 1, &stats);
	__atomic_store_n(&arrived, arrived + 1, __ATOMIC_RELEASE);
}
void msgtraceModuleLoaded(void *module) { (void)module; }

struct rec {
	void *cls;
	const char *sel;
	uint64_t depth;
};
static struct rec got[64];
static int ngot;
static void collect(void *ctx, uint64_t tid, const struct mt_record *r, uint64_t n, uint64_t d, uint64_t o) {
	(void)ctx, (void)tid, (void)d, (void)o;
	for (uint64_t i = 0; i < n && ngot < 64; i++)
		got[ngot++] = (struct rec){(void *)(uintptr_t)(r[i].cls & ((1ULL << CLS_BITS) - 1)), (const char *)(uintptr_t)r[i].sel,
					   (r[i].cls >> DEPTH_SHIFT) & 0xfff};
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

int main(void) {
	pthread_mutexattr_t a;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ERRORCHECK);
	pthread_mutex_init(&rt_lock, &a);
	loader = pthread_self();
	use_test_runtime();

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

	CHECK("the runtime is Apple's API", mt_objc_kind() == MT_RT_APPLE);
	void *listed[2] = {0};
	CHECK("the classes of an image", mt_objc_image_classes("app", listed, 1) == 2 && listed[0] == Base && !listed[1]);
	CHECK("no classes of another", mt_objc_image_classes("other", listed, 2) == 0);
	install_all();
	CHECK("instrumented: -[Base work] +[Base make] -[App work] -[App tick] (the category's)", stats.instrumented == 4);
	CHECK("never: retain", stats.never == 1);
	CHECK("the category's -tick has a trampoline", is_tramp(cat->imp));
	CHECK("the shadowed -tick is left alone", own_tick->imp == (void *)app_tick);

	struct mobj app = {App}, base = {Base};
	CHECK("-[App tick] runs the category's", send(&app, "tick", 1) == 201);
	CHECK("-[App work] calls [super work]", send(&app, "work", 1) == 20);
	CHECK("+[Base make]", send(Base, "make", 1) == 4);
	CHECK("-[Base retain] untouched", send(&base, "retain", 9) == 9);

	/* an image loaded later: a class and a category on App */
	CHECK("images loaded later are watched", msgtrace_watch_loaded_images() == 1);
	wait_images(1);
	CHECK("the images loaded before are not reported", images_loaded == 0);
	Plugin = new_class("Plugin", Base);
	add_method(Plugin, "ping", (void *)plugin_ping);
	load_image(Plugin, App, "late", (void *)app_late);
	wait_images(1);
	CHECK("the later image reported once", images_loaded == 1);
	CHECK("and instrumented on a thread of the library's", off_loader);
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

	/* stop: restore where the IMP is still ours; the app swizzled -[Base work] meanwhile */
	void *before[3] = {cat->imp, first(Base->isa, "make")->imp, first(App, "added")->imp};
	msgtrace_active = 0;
	class_replaceMethod(Base, sel("work"), (void *)swizzled, "q@:q");
	struct mt_methods_stats rs = {0};
	msgtrace_methods_restore(&rs);
	CHECK("restored all but the swizzled one", rs.foreign == 1 && rs.instrumented == stats.instrumented - 1);
	CHECK("the category's -tick is the category's again", cat->imp == (void *)cat_tick);
	CHECK("the swizzled IMP is left", lookup(Base, sel("work")) == (void *)swizzled);
	CHECK("a cached trampoline forwards, untraced", ((imp_fn)before[0])(&app, sel("tick"), 1) == 201);

	/* start again: each method gets its own trampoline back; the swizzled one a new one */
	uint64_t pool = stats.pool_used;
	msgtrace_active = 1;
	install_all();
	CHECK("the same trampolines", cat->imp == before[0] && first(Base->isa, "make")->imp == before[1] && first(App, "added")->imp == before[2]);
	CHECK("one new trampoline: the swizzled method", stats.pool_used == pool + 1);
	CHECK("-[Base work] traced into the swizzled IMP", send(&base, "work", 1) == 8);

	msgtrace_active = 0;
	msgtrace_visit(collect, 0);
	struct rec want[] = {
	    {App, "tick", 0},   {Base, "work", 1}, {App, "work", 0}, {Base->isa, "make", 0},
	    {Plugin, "ping", 0}, {App, "late", 0}, {App, "added", 0}, {Dyn, "ping", 0},
	    {Base, "work", 0},
	};
	int n = sizeof want / sizeof want[0];
	CHECK("record count", ngot == n);
	for (int i = 0; i < n && i < ngot; i++)
		if (got[i].cls != want[i].cls || got[i].sel != sel(want[i].sel) || got[i].depth != want[i].depth) {
			printf("FAIL record %d: -[%s %s] depth %llu, want -[%s %s] depth %llu\n", i, ((struct mclass *)got[i].cls)->name,
			       got[i].sel, (unsigned long long)got[i].depth, ((struct mclass *)want[i].cls)->name, want[i].sel, (unsigned long long)want[i].depth);
			failures++;
		}
	printf("%s %d records, %llu methods instrumented\n", failures ? "FAILED" : "OK", ngot, (unsigned long long)stats.instrumented);
	return failures != 0;
}
