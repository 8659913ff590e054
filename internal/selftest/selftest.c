/* A small Objective-C-shaped program run through the real interposers inside the test
 * process: classes with names, instance and class methods, a super call, nested calls, sleeps
 * of known length, and a second, named thread. Selectors are C strings, as in Apple's runtime.
 * Depends on: dispatch_*.S (the test dispatcher), msgsend_*.S (the interposers), rt.c (their
 * switches), drain_names.c (the namer). */
#define _GNU_SOURCE
#include "selftest.h"
#include "rt.h"

#include <pthread.h>
#include <stdint.h>
#include <time.h>

void test_msgSend(void), test_msgSendSuper2(void), test_msgSend_stret(void), test_msgSendSuper2_stret(void);
struct method { const char *sel; void *imp; };
struct objc_super { void *receiver; struct st_class *cls; };
/* the interposers (rt.h), called with the one signature this workload sends: through pointers
 * set once, as gcc refuses a direct call through a cast of a declared function */
static intptr_t (*send_p)(void *, const char *, intptr_t);
static intptr_t (*super_p)(struct objc_super *, const char *, intptr_t);
__attribute__((constructor)) static void bind_sends(void) {
	send_p = (intptr_t(*)(void *, const char *, intptr_t))(uintptr_t)msgtrace_objc_msgSend;
	super_p = (intptr_t(*)(struct objc_super *, const char *, intptr_t))(uintptr_t)msgtrace_objc_msgSendSuper2;
}
#define SEND send_p
#define SUPER super_p

static void sleep_ms(int ms) {
	struct timespec ts = {0, ms * 1000000L};
	nanosleep(&ts, 0);
}

extern struct st_class View, ViewMeta, Button, Net;
struct st_object { struct st_class *isa; };
static struct st_object view = {&View}, button = {&Button}, net = {&Net};

static intptr_t view_measure(void *self, const char *cmd, intptr_t ms) { (void)self, (void)cmd; sleep_ms((int)ms); return ms; }
static intptr_t view_layout(void *self, const char *cmd, intptr_t x) {
	(void)cmd;
	return SEND(self, "measure:", 2) + SEND(self, "measure:", 3) + x;
}
static intptr_t view_make(void *self, const char *cmd, intptr_t x) { (void)self, (void)cmd; return x; }
static intptr_t button_layout(void *self, const char *cmd, intptr_t x) {
	struct objc_super sup = {self, &Button};
	return SUPER(&sup, cmd, x) + 1;
}
static intptr_t net_fetch(void *self, const char *cmd, intptr_t ms) { (void)self, (void)cmd; sleep_ms((int)ms); return 0; }

static struct method view_methods[] = {{"layout", view_layout}, {"measure:", view_measure}, {0, 0}};
static struct method view_class_methods[] = {{"make", view_make}, {0, 0}};
static struct method button_methods[] = {{"layout", button_layout}, {0, 0}};
static struct method net_methods[] = {{"fetch:", net_fetch}, {0, 0}};
struct st_class View = {0, view_methods, "View", 0};
struct st_class ViewMeta = {0, view_class_methods, "View", 1};
struct st_class Button = {&View, button_methods, "Button", 0};
struct st_class Net = {0, net_methods, "Net", 0};
static struct st_object view_class_object = {&ViewMeta};

/* A tagged-pointer receiver in Apple's MSB layout: bit 63 the tag, bits 60-62 the class
 * index, no isa; the payload's high bits are set as objc4's obfuscation sets them. */
#define ST_TAG (1ULL << 63)
#define ST_NUM_INDEX 3ULL
struct st_class Num = {0, 0, "Num", 0};
static intptr_t tagged_dispatch(void *self, const char *cmd, intptr_t x) {
	(void)self, (void)cmd;
	return x - 1; /* -[Num intValue] */
}

static void *worker(void *arg) {
	(void)arg;
	pthread_setname_np(pthread_self(), "worker");
	SEND(&net, "fetch:", 5);
	return 0;
}

int selftest_run(void) {
	msgtrace_orig_objc_msgSend = msgtrace_orig_objc_msgSend_fpret = msgtrace_orig_objc_msgSend_fp2ret = (void *)test_msgSend;
	msgtrace_orig_objc_msgSend_stret = (void *)test_msgSend_stret;
	msgtrace_orig_objc_msgSendSuper2 = (void *)test_msgSendSuper2;
	msgtrace_orig_objc_msgSendSuper2_stret = (void *)test_msgSendSuper2_stret;
	msgtrace_active = 1;
	pthread_t t;
	pthread_create(&t, 0, worker, 0);
	intptr_t r = SEND(&view, "layout", 1);    /* -[View layout] > 2x -[View measure:] */
	r += SEND(&view_class_object, "make", 1); /* +[View make] */
	r += SEND(&button, "layout", 1);          /* -[Button layout] > -[View layout] (super) > ... */
	pthread_join(t, 0);
	msgtrace_orig_objc_msgSend = (void *)tagged_dispatch; /* -[Num intValue], a tagged receiver */
	msgtrace_tag_mask = ST_TAG;
	r += SEND((void *)(uintptr_t)(ST_TAG | ST_NUM_INDEX << 60 | 0x0badc0ffee123450ULL), "intValue", 1);
	msgtrace_tag_mask = 0;
	msgtrace_orig_objc_msgSend = (void *)test_msgSend;
	msgtrace_active = 0;
	return (int)r;
}

/* Names for the drain, as the Objective-C runtime's functions give them. */
static const char *st_class_name(void *c) { return ((struct st_class *)c)->name; }
static const char *st_sel_name(void *s) { return (const char *)s; }
static void *st_object_class(void *o) {
	if ((uintptr_t)o & ST_TAG) /* the drain must pass the tag bit and index bits back */
		return ((uintptr_t)o >> 60 & 7) == ST_NUM_INDEX ? &Num : 0;
	return ((struct st_object *)o)->isa;
}
static void *st_superclass(void *c) { return ((struct st_class *)c)->super; }
static unsigned char st_is_meta(void *c) { return ((struct st_class *)c)->meta != 0; }
void selftest_use_namer(void) {
	static const struct mt_namer n = {st_class_name, st_sel_name, st_object_class, st_superclass, st_is_meta};
	msgtrace_set_namer(&n);
}
