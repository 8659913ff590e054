/*
 * Async hops: work one thread hands to another (or to later), linked from the call that
 * enqueued it to its execution. A hop is a work item the framework carries as an object: the
 * enqueue hook gives it an id (kept in a table keyed by the object) and marks the id on the
 * enqueuing thread, inside the enqueuing call (MT_MARK_HOP_ENQUEUE, zero length); the execution
 * hook finds the id by the same object and marks where the work item begins and ends on the
 * executing thread (MT_MARK_HOP_BEGIN, MT_MARK_HOP_END). The reader pairs them by id.
 *
 * gnustep-base (gcc's runtime and libobjc2), the internal objects and methods that carry each
 * work item (found in libs-base 1.28's sources):
 *
 *   performSelector:onThread:withObject:waitUntilDone:  -[GSRunLoopThreadInfo addPerformer:]
 *     (another thread; YES or NO)                        (a GSPerformHolder) -> -[GSPerformHolder fire]
 *   performSelector:withObject:afterDelay: and timers     -[NSRunLoop addTimer:forMode:] (the
 *                                                         GSTimedPerformer's timer, or the app's)
 *                                                         -> -[NSTimer fire] (each firing of a
 *                                                         repeating timer; forgotten at -invalidate)
 *   NSOperationQueue addOperation:/addOperationWithBlock: -[NSOperationQueue addOperation:]
 *                                                         -> -[NSOperation start]
 *   NSThread detachNewThreadSelector:toTarget:withObject: -[NSThread start] -> -[NSThread main]
 *   NSNotificationQueue (NSPostASAP, NSPostWhenIdle)      -[NSNotificationQueue enqueueNotification:
 *                                                         postingStyle:coalesceMask:forModes:] ->
 *                                                         -[NSNotificationCenter postNotification:]
 *                                                         (forgotten at -[GSNotification dealloc]:
 *                                                         one coalesced away never posts)
 *
 * The hooks are wrappers under the method: where the method has a trampoline of ours, the
 * trampoline's original IMP becomes the wrapper (the call is traced as before and the marks fall
 * inside it); elsewhere the method's IMP, and a trampoline given to it later calls the wrapper.
 * Either way one call, one record, and a restore of the trampolines keeps the wrapper. They are
 * installed as the classes arrive (after each module registers, msgtrace_hops_install) unless
 * MSGTRACE_FLOWS says not to (rt_env.h), and cost nothing on the sends' path. Each hooked
 * method takes pointer and integer arguments only, so one wrapper shape forwards them all.
 * Depends on: objc/runtime.c (the runtime), trampoline_*.S (the trampolines' data), rt.c (the
 * tick, recording on or off), rt_thread.c (msgtrace_thread_mark), rt_env.h.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "hops.h"
#include "methods_internal.h"
#include "rt_env.h"
#include "rt_internal.h"
#include "stream_format.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ---- the table: work item object -> hop id ---- */

struct hop_slot {
	uintptr_t key; /* 0 empty, 1 deleted */
	uint64_t id;
};
static struct {
	pthread_mutex_t lock;
	struct hop_slot *s;
	size_t cap, used, live; /* used counts deleted slots too */
	uint64_t next_id;
	struct mt_hops_counters c;
} tab = {.lock = PTHREAD_MUTEX_INITIALIZER};

static size_t slot_of(uintptr_t key, size_t cap) {
	uint64_t h = (uint64_t)key * 0x9e3779b97f4a7c15ull;
	return (size_t)(h >> 20) & (cap - 1);
}

/* Lock held: a table with room for one more key, rebuilt without deleted slots. */
static int room(void) {
	if (tab.s && (tab.used + 1) * 2 <= tab.cap)
		return 0;
	size_t cap = tab.cap ? tab.cap : 256;
	while ((tab.live + 1) * 4 > cap)
		cap *= 2;
	struct hop_slot *s = calloc(cap, sizeof *s);
	if (!s)
		return -1;
	for (size_t i = 0; i < tab.cap; i++)
		if (tab.s[i].key > 1) {
			size_t k = slot_of(tab.s[i].key, cap);
			while (s[k].key)
				k = (k + 1) & (cap - 1);
			s[k] = tab.s[i];
		}
	free(tab.s);
	tab.s = s, tab.cap = cap, tab.used = tab.live;
	return 0;
}

/* Lock held: the key's slot, or NULL. */
static struct hop_slot *find(uintptr_t key) {
	if (!tab.s)
		return NULL;
	for (size_t k = slot_of(key, tab.cap);; k = (k + 1) & (tab.cap - 1)) {
		if (tab.s[k].key == key)
			return &tab.s[k];
		if (!tab.s[k].key)
			return NULL;
	}
}

/* A new hop for the object, 0 without memory; with again, the hop it has if any (*fresh 0): a
 * timer added to a second mode is the same work item (a timer's entry goes at -invalidate, which
 * its -dealloc sends, so it never outlives the timer). Anything else enqueued again (a dead
 * object's address reused) gets a new one. */
static uint64_t hop_new(const void *obj, int again, int *fresh) {
	uintptr_t key = (uintptr_t)obj;
	pthread_mutex_lock(&tab.lock);
	struct hop_slot *s = find(key);
	*fresh = !s || !again;
	if (!*fresh) {
		uint64_t id = s->id;
		pthread_mutex_unlock(&tab.lock);
		return id;
	}
	uint64_t id = __atomic_add_fetch(&tab.next_id, 1, __ATOMIC_RELAXED); /* mt_hop_enqueue takes ids without the lock */
	if (!s) {
		if (room() != 0) {
			tab.c.untracked++;
			pthread_mutex_unlock(&tab.lock);
			return 0;
		}
		size_t k = slot_of(key, tab.cap);
		while (tab.s[k].key > 1)
			k = (k + 1) & (tab.cap - 1);
		if (!tab.s[k].key)
			tab.used++;
		s = &tab.s[k];
		s->key = key;
		tab.live++;
	}
	s->id = id;
	__atomic_add_fetch(&tab.c.enqueued, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&tab.lock);
	return id;
}

/* The object's hop: kept (a repeating timer fires again) or forgotten; 0 when it has none. */
static uint64_t hop_take(const void *obj, int keep) {
	if (!__atomic_load_n(&tab.live, __ATOMIC_RELAXED))
		return 0;
	pthread_mutex_lock(&tab.lock);
	struct hop_slot *s = find((uintptr_t)obj);
	uint64_t id = s ? s->id : 0;
	if (s && !keep) {
		s->key = 1;
		tab.live--;
	}
	pthread_mutex_unlock(&tab.lock);
	return id;
}

void msgtrace_hops_counters(struct mt_hops_counters *c) {
	pthread_mutex_lock(&tab.lock);
	*c = tab.c;
	c->pending = tab.live;
	pthread_mutex_unlock(&tab.lock);
}

/* ---- the marks ---- */

uint64_t mt_hop_enqueue(void) {
	if (!__atomic_load_n(&msgtrace_active, __ATOMIC_RELAXED))
		return 0;
	uint64_t id = __atomic_add_fetch(&tab.next_id, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&tab.c.enqueued, 1, __ATOMIC_RELAXED);
	uint64_t now = msgtrace_now_ticks();
	if (msgtrace_thread_mark(MT_MARK_HOP_ENQUEUE, now, now, id) != 0)
		__atomic_add_fetch(&tab.c.unmarked, 1, __ATOMIC_RELAXED);
	return id;
}

static void mark_enqueue(uint64_t id) {
	if (!id || !__atomic_load_n(&msgtrace_active, __ATOMIC_RELAXED))
		return;
	uint64_t now = msgtrace_now_ticks();
	if (msgtrace_thread_mark(MT_MARK_HOP_ENQUEUE, now, now, id) != 0)
		__atomic_add_fetch(&tab.c.unmarked, 1, __ATOMIC_RELAXED);
}

int mt_hop_begin(uint64_t id) {
	if (!id || !__atomic_load_n(&msgtrace_active, __ATOMIC_RELAXED))
		return 0;
	uint64_t now = msgtrace_now_ticks();
	if (msgtrace_thread_mark(MT_MARK_HOP_BEGIN, now, now, id) != 0) {
		__atomic_add_fetch(&tab.c.unmarked, 1, __ATOMIC_RELAXED);
		return 0;
	}
	__atomic_add_fetch(&tab.c.ran, 1, __ATOMIC_RELAXED);
	return 1;
}

void mt_hop_end(uint64_t id) {
	uint64_t now = msgtrace_now_ticks();
	msgtrace_thread_mark(MT_MARK_HOP_END, now, now, id);
}

/* ---- the hooks ---- */

/* What a hooked method does with its work item. */
enum hop_role {
	ENQUEUE_ARG,       /* the first argument is enqueued */
	ENQUEUE_TIMER,     /* the first argument, once (a timer added to several modes) */
	ENQUEUE_SELF,      /* the receiver is */
	ENQUEUE_NOTE,      /* the first argument, unless the posting style (second) is NSPostNow */
	RUN_SELF,          /* the receiver runs: its hop forgotten */
	RUN_SELF_KEEP,     /* the receiver runs, and may again (a repeating timer) */
	RUN_ARG,           /* the first argument runs */
	FORGET_SELF,       /* the receiver will not run (again) */
};

typedef void *(*hop_imp)(void *, void *, void *, void *, void *, void *);

struct hop_hook {
	const char *cls, *sel;
	enum hop_role role;
	hop_imp orig;      /* the IMP the wrapper forwards to */
	hop_imp wrapper;
	int done;
};

#define NS_POST_NOW 3 /* NSPostingStyle's NSPostNow */

static void *hop_call(struct hop_hook *h, void *self, void *cmd, void *a, void *b, void *c, void *d) {
	hop_imp orig = __atomic_load_n(&h->orig, __ATOMIC_ACQUIRE);
	switch (h->role) {
	case ENQUEUE_ARG:
	case ENQUEUE_TIMER:
	case ENQUEUE_SELF:
	case ENQUEUE_NOTE:
		if (__atomic_load_n(&msgtrace_active, __ATOMIC_RELAXED)) {
			void *item = h->role == ENQUEUE_SELF ? self : a;
			int fresh;
			if (item && (h->role != ENQUEUE_NOTE || (uintptr_t)b != NS_POST_NOW)) {
				uint64_t id = hop_new(item, h->role == ENQUEUE_TIMER, &fresh);
				if (fresh)
					mark_enqueue(id);
			}
		}
		return orig(self, cmd, a, b, c, d);
	case RUN_SELF:
	case RUN_SELF_KEEP:
	case RUN_ARG: {
		uint64_t id = hop_take(h->role == RUN_ARG ? a : self, h->role == RUN_SELF_KEEP);
		int end = mt_hop_begin(id);
		void *r = orig(self, cmd, a, b, c, d);
		if (end)
			mt_hop_end(id);
		return r;
	}
	case FORGET_SELF:
		hop_take(self, 0);
		return orig(self, cmd, a, b, c, d);
	}
	return orig(self, cmd, a, b, c, d);
}

static struct hop_hook hooks[];
#define WRAP(n)                                                                                \
	static void *wrap_##n(void *self, void *cmd, void *a, void *b, void *c, void *d) {    \
		return hop_call(&hooks[n], self, cmd, a, b, c, d);                            \
	}
WRAP(0) WRAP(1) WRAP(2) WRAP(3) WRAP(4) WRAP(5) WRAP(6) WRAP(7) WRAP(8) WRAP(9) WRAP(10) WRAP(11)
#define HOOK(n, c, s, r) {c, s, r, NULL, wrap_##n, 0}
static struct hop_hook hooks[] = {
	HOOK(0, "GSRunLoopThreadInfo", "addPerformer:", ENQUEUE_ARG),
	HOOK(1, "GSPerformHolder", "fire", RUN_SELF),
	HOOK(2, "NSRunLoop", "addTimer:forMode:", ENQUEUE_TIMER),
	HOOK(3, "NSTimer", "fire", RUN_SELF_KEEP),
	HOOK(4, "NSTimer", "invalidate", FORGET_SELF),
	HOOK(5, "NSOperationQueue", "addOperation:", ENQUEUE_ARG),
	HOOK(6, "NSOperation", "start", RUN_SELF),
	HOOK(7, "NSThread", "start", ENQUEUE_SELF),
	HOOK(8, "NSThread", "main", RUN_SELF),
	HOOK(9, "NSNotificationQueue", "enqueueNotification:postingStyle:coalesceMask:forModes:", ENQUEUE_NOTE),
	HOOK(10, "NSNotificationCenter", "postNotification:", RUN_ARG),
	HOOK(11, "GSNotification", "dealloc", FORGET_SELF),
};
#define NHOOKS (sizeof hooks / sizeof hooks[0])

/* Lock held: the method the class itself defines for the selector, or NULL. */
static void *own_method(void *cls, const char *sel) {
	unsigned n = 0;
	void **ms = mt_objc_copy_method_list(cls, &n);
	void *found = NULL;
	for (unsigned i = 0; ms && i < n && !found; i++) {
		void *s = mt_objc_method_sel(ms[i]);
		const char *name = s ? mt_objc_remembered_sel_name(s) : NULL;
		if (s && !name)
			name = mt_objc_sel_name(s);
		if (name && strcmp(name, sel) == 0)
			found = ms[i];
	}
	free(ms);
	return found;
}

/* Lock held: the hook under the method's IMP (or its trampoline's). 1 when installed. */
static int install_one(struct hop_hook *h, void *cls, void **changed, size_t *nchanged) {
	void *m = own_method(cls, h->sel);
	void *imp = m ? mt_objc_method_imp(m) : NULL;
	if (!imp)
		return 0;
	if (mt_is_trampoline(imp)) {
		struct mt_tramp_data *d = &msgtrace_tramp_data[((const char *)imp - msgtrace_tramp_text) / MT_STRIDE];
		if (d->orig == (void *)h->wrapper)
			return 1;
		__atomic_store_n(&h->orig, (hop_imp)d->orig, __ATOMIC_RELEASE);
		__atomic_store_n(&d->orig, (void *)h->wrapper, __ATOMIC_RELEASE);
		return 1;
	}
	if (imp == (void *)h->wrapper)
		return 1;
	if (!mt_objc_method_settable(m, imp))
		return 0;
	__atomic_store_n(&h->orig, (hop_imp)imp, __ATOMIC_RELEASE);
	void *old = mt_objc_method_set_imp(cls, m, mt_objc_method_sel(m), (void *)h->wrapper);
	if (old && old != imp)
		__atomic_store_n(&h->orig, (hop_imp)old, __ATOMIC_RELEASE); /* swizzled meanwhile */
	changed[(*nchanged)++] = cls;
	return 1;
}

static int hops_state; /* 0 not decided, 1 on, 2 off (MSGTRACE_FLOWS=0, or every hook in) */

/* A fork child: the table's lock may have been held by a thread the child does not have; the
 * entries stay (work enqueued before the fork may run in the child). */
static void hops_after_fork(void) { pthread_mutex_init(&tab.lock, NULL); }

void msgtrace_hops_install(void) {
	int st = __atomic_load_n(&hops_state, __ATOMIC_ACQUIRE);
	if (st == 2)
		return;
	if (st == 0) {
		st = mt_env_flows() ? 1 : 2;
		__atomic_store_n(&hops_state, st, __ATOMIC_RELEASE);
		if (st == 2)
			return;
		pthread_atfork(NULL, NULL, hops_after_fork);
	}
	int k = mt_objc_kind();
	if (k != MT_RT_GNU && k != MT_RT_GNUSTEP)
		return; /* Apple's: dispatch (to come); none: nothing to hook yet */
	void *cls[NHOOKS];
	size_t want = 0;
	for (size_t i = 0; i < NHOOKS; i++) /* without the lock: a class is there or not */
		if (!__atomic_load_n(&hooks[i].done, __ATOMIC_ACQUIRE) && (cls[i] = mt_objc_look_up_class(hooks[i].cls)))
			want++;
		else
			cls[i] = NULL;
	if (!want)
		return;
	void *changed[NHOOKS];
	size_t nchanged = 0, done = 0;
	mt_objc_lock();
	for (size_t i = 0; i < NHOOKS; i++) {
		if (cls[i] && !hooks[i].done && install_one(&hooks[i], cls[i], changed, &nchanged))
			__atomic_store_n(&hooks[i].done, 1, __ATOMIC_RELEASE);
		done += hooks[i].done;
	}
	if (nchanged)
		mt_objc_methods_changed(changed, nchanged);
	mt_objc_unlock();
	if (done == NHOOKS)
		__atomic_store_n(&hops_state, 2, __ATOMIC_RELEASE);
}

int msgtrace_hops_env(void) { return mt_env_flows(); }

int msgtrace_hops_installed(void) {
	int n = 0;
	for (size_t i = 0; i < NHOOKS; i++)
		n += __atomic_load_n(&hooks[i].done, __ATOMIC_ACQUIRE);
	return n;
}
