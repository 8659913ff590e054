/*
 * Contended waits and who held them: the replacements rebound over the slots of the blocking
 * primitives (waits.go lists them; the same rebinding that carries objc_msgSend). A lock is
 * tried first (pthread_mutex_trylock, sem_trywait, os_unfair_lock_trylock, a semaphore or
 * group waited on with DISPATCH_TIME_NOW): when it is free, the replacement returns, and that
 * is all it costs. Only when it would block is the wait timed and recorded, on the waiting
 * thread, at its shadow stack's depth (nested under the method that waited): the primitive,
 * its address, how long, and the holder where the C library keeps it (glibc: a mutex's
 * __owner, a rwlock's __cur_writer, both kernel thread ids as thread frames name threads;
 * Apple: an os_unfair_lock's owner port). The other side records a release (unlock, signal,
 * post) only when the primitive says someone waits on it (glibc: the mutex's lock word is 2,
 * or has FUTEX_WAITERS; the condition's __wrefs counts waiters; the semaphore's nwaiters;
 * os_unfair_lock's no-waiters bit clear; dispatch_semaphore_signal woke a thread), so that the
 * reader can name the thread whose release ended a wait and the call it made it in.
 *
 * @synchronized: objc_sync_enter has no try; gcc's libobjc locks a pthread mutex inside it,
 * through its own slots, which are rebound too: a wait inside objc_sync_enter is labelled so,
 * with the object's address, and so is the release inside objc_sync_exit. Apple's runtime
 * locks inside the shared cache, out of reach: there objc_sync_enter (like dispatch_sync, which
 * waits until its block starts) is timed whole and recorded when it took longer than a floor
 * (WAIT_FLOOR_US), without a holder.
 *
 * MSGTRACE_WAITS=0 leaves all of it out: Go makes none of these rebindings, and the
 * replacements only forward while msgtrace_waits_on is 0.
 * Depends on: rt.c (ticks, msgtrace_min_ticks), rt_thread.c (msgtrace_put_wait, thread ids).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* RTLD_DEFAULT */
#endif
#define MT_WAITS_IMPL
#include "waits.h"
#include "rt_env.h"
#include "rt_internal.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <time.h>

volatile uint32_t msgtrace_waits_on = 1;

static void forget_tid(void);

/* MSGTRACE_WAITS at load: the replacements forward only, whatever Go does, when it is off. */
__attribute__((constructor)) static void waits_env(void) {
	if (mt_env_waits() == 0)
		msgtrace_waits_on = 0;
	pthread_atfork(NULL, NULL, forget_tid);
}

#define MT_WAIT_DEFINE_ORIG(name) void *msgtrace_orig_w_##name;
MT_WAIT_FNS(MT_WAIT_DEFINE_ORIG)
MT_WAIT_FNS_APPLE(MT_WAIT_DEFINE_ORIG)
#undef MT_WAIT_DEFINE_ORIG

static struct mt_wait_counters counters;

void msgtrace_wait_counters(struct mt_wait_counters *c) {
	c->waits = __atomic_load_n(&counters.waits, __ATOMIC_RELAXED);
	c->releases = __atomic_load_n(&counters.releases, __ATOMIC_RELAXED);
}

/* The original of a replacement: as the rebinding published it, else the symbol's definition
 * (a replacement reached before its slot's original was published, or one forwarding to a
 * function it did not rebind). */
static void *resolve(void **slot, const char *name) {
	void *p = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
	if (!p) {
		p = dlsym(RTLD_DEFAULT, name);
		__atomic_store_n(slot, p, __ATOMIC_RELEASE);
	}
	return p;
}
#define ORIG(name, type) ((type)resolve(&msgtrace_orig_w_##name, #name))

/* The object of the objc_sync_enter or objc_sync_exit this thread is in (its lock's waits and
 * releases are labelled with it), or NULL. */
static __thread void *sync_obj __attribute__((tls_model("initial-exec")));

/* The calling thread's id as thread frames name it, read once per thread (a system call on
 * Linux); a fork child's forking thread reads it again. */
static __thread uint64_t self_tid __attribute__((tls_model("initial-exec")));
static uint64_t my_tid(void) {
	if (!self_tid)
		self_tid = msgtrace_thread_id();
	return self_tid;
}
static void forget_tid(void) { self_tid = 0; }

/* Inside a wait timed whole (dispatch_sync before its block starts, Apple's objc_sync_enter):
 * the waits it makes inside (its own lock's) are part of it, not recorded apart. */
static __thread int timed_whole __attribute__((tls_model("initial-exec")));

/* Waits shorter than this are not recorded: MSGTRACE_MIN_US, as for calls. */
static int too_short(uint64_t t0, uint64_t t1) {
	uint64_t min = __atomic_load_n(&msgtrace_min_ticks, __ATOMIC_RELAXED);
	return t1 < t0 || t1 - t0 < min;
}

static void record_wait(int prim, const void *addr, uint64_t holder, uint64_t t0, uint64_t t1) {
	if (timed_whole || too_short(t0, t1))
		return;
	if (holder && holder == my_tid())
		return; /* its own lock (an error-checking mutex's EDEADLK): no wait */
	msgtrace_put_wait(t0, t1, (holder & REC_WAIT_HOLDER_MASK) << REC_WAIT_HOLDER_SHIFT | REC_WAIT,
			  (uint64_t)prim << REC_WAIT_PRIM_SHIFT | ((uint64_t)(uintptr_t)addr & REC_WAIT_ADDR_MASK));
	__atomic_add_fetch(&counters.waits, 1, __ATOMIC_RELAXED);
}

static void record_release_at(const void *addr, uint64_t t) {
	msgtrace_put_wait(t, t, MT_MARK_RELEASE, (uint64_t)(uintptr_t)addr & REC_WAIT_ADDR_MASK);
	__atomic_add_fetch(&counters.releases, 1, __ATOMIC_RELAXED);
}
static void record_release(const void *addr) { record_release_at(addr, msgtrace_now_ticks()); }

/* Timed whole (no try): the floor past which dispatch_sync and Apple's objc_sync_enter count as
 * having waited, in ticks (the counter's rate where the hardware says; else a 3 GHz guess). */
#define WAIT_FLOOR_US 50
static uint64_t floor_ticks(void) {
	uint64_t hz = msgtrace_tick_hz(), min = __atomic_load_n(&msgtrace_min_ticks, __ATOMIC_RELAXED);
	uint64_t f = (hz ? hz : 3000000000ull) / 1000000 * WAIT_FLOOR_US;
	return f > min ? f : min;
}

/* ---- pthread mutexes ---- */

int msgtrace_w_pthread_mutex_lock(pthread_mutex_t *m) {
	int (*lock)(pthread_mutex_t *) = ORIG(pthread_mutex_lock, int (*)(pthread_mutex_t *));
	if (!msgtrace_waits_on)
		return lock(m);
#if defined(__GLIBC__)
	/* A free lock word (0, every kind but priority-protected, whose word keeps the ceiling) is
	 * taken as untraced: glibc's trylock costs three times its lock, and this look costs a
	 * load. A wait on a lock another thread takes between this look and the lock's own
	 * compare-and-swap (a window of a few instructions) goes unrecorded. */
	if (__atomic_load_n(&m->__data.__lock, __ATOMIC_RELAXED) == 0 && !(m->__data.__kind & 0x40))
		return lock(m);
#endif
	int r = pthread_mutex_trylock(m);
	if (r != EBUSY)
		return r; /* taken (or a robust mutex's owner died: the same news lock would give) */
	uint64_t holder = 0;
#if defined(__GLIBC__)
	holder = (uint32_t)__atomic_load_n(&m->__data.__owner, __ATOMIC_RELAXED);
#endif
	void *obj = sync_obj;
	uint64_t t0 = msgtrace_now_ticks();
	r = lock(m);
	uint64_t t1 = msgtrace_now_ticks();
	if (obj)
		record_wait(MT_WAIT_SYNC_ENTER, obj, holder, t0, t1);
	else
		record_wait(MT_WAIT_MUTEX_LOCK, m, holder, t0, t1);
	return r;
}

int msgtrace_w_pthread_mutex_unlock(pthread_mutex_t *m) {
	int (*unlock)(pthread_mutex_t *) = ORIG(pthread_mutex_unlock, int (*)(pthread_mutex_t *));
#if defined(__GLIBC__)
	if (msgtrace_waits_on) {
		/* glibc's lock word: 0 free, 1 taken, 2 taken with waiters (lll_lock); robust and
		 * priority-inheritance mutexes hold the owner's id with FUTEX_WAITERS (bit 31);
		 * priority-protected ones (0x40) are left out. A recursive mutex is released at its
		 * count's last unlock. */
		int lock = __atomic_load_n(&m->__data.__lock, __ATOMIC_RELAXED), kind = m->__data.__kind & 0x7f;
		int waiters = (kind & 0x40) ? 0 : (kind & 0x30) ? lock < 0 : lock > 1;
		if (waiters && m->__data.__count <= 1)
			record_release(sync_obj ? sync_obj : (void *)m);
	}
#endif
	return unlock(m);
}

/* ---- pthread rwlocks ---- */

static uint64_t rwlock_writer(pthread_rwlock_t *l) {
#if defined(__GLIBC__)
	return (uint32_t)__atomic_load_n(&l->__data.__cur_writer, __ATOMIC_RELAXED);
#else
	(void)l;
	return 0;
#endif
}

int msgtrace_w_pthread_rwlock_rdlock(pthread_rwlock_t *l) {
	int (*lock)(pthread_rwlock_t *) = ORIG(pthread_rwlock_rdlock, int (*)(pthread_rwlock_t *));
	if (!msgtrace_waits_on)
		return lock(l);
	int r = pthread_rwlock_tryrdlock(l);
	if (r != EBUSY)
		return r;
	uint64_t holder = rwlock_writer(l), t0 = msgtrace_now_ticks();
	r = lock(l);
	record_wait(MT_WAIT_RWLOCK_RDLOCK, l, holder, t0, msgtrace_now_ticks());
	return r;
}

int msgtrace_w_pthread_rwlock_wrlock(pthread_rwlock_t *l) {
	int (*lock)(pthread_rwlock_t *) = ORIG(pthread_rwlock_wrlock, int (*)(pthread_rwlock_t *));
	if (!msgtrace_waits_on)
		return lock(l);
	int r = pthread_rwlock_trywrlock(l);
	if (r != EBUSY)
		return r;
	uint64_t holder = rwlock_writer(l), t0 = msgtrace_now_ticks();
	r = lock(l);
	record_wait(MT_WAIT_RWLOCK_WRLOCK, l, holder, t0, msgtrace_now_ticks());
	return r;
}

int msgtrace_w_pthread_rwlock_unlock(pthread_rwlock_t *l) {
	int (*unlock)(pthread_rwlock_t *) = ORIG(pthread_rwlock_unlock, int (*)(pthread_rwlock_t *));
#if defined(__GLIBC__)
	/* glibc (pthread_rwlock_common.c): readers waiting (__readers' RWAITING bit, 4), writers
	 * waiting (__writers_futex's or __wrphase_futex's FUTEX_USED bit, 2) */
	if (msgtrace_waits_on && ((__atomic_load_n(&l->__data.__readers, __ATOMIC_RELAXED) & 4) ||
				  (__atomic_load_n(&l->__data.__writers_futex, __ATOMIC_RELAXED) & 2) ||
				  (__atomic_load_n(&l->__data.__wrphase_futex, __ATOMIC_RELAXED) & 2)))
		record_release(l);
#endif
	return unlock(l);
}

/* ---- conditions: every wait blocks until a signal (or the time limit) ---- */

int msgtrace_w_pthread_cond_wait(pthread_cond_t *c, pthread_mutex_t *m) {
	int (*wait)(pthread_cond_t *, pthread_mutex_t *) = ORIG(pthread_cond_wait, int (*)(pthread_cond_t *, pthread_mutex_t *));
	if (!msgtrace_waits_on)
		return wait(c, m);
	uint64_t t0 = msgtrace_now_ticks();
	int r = wait(c, m);
	record_wait(MT_WAIT_COND_WAIT, c, 0, t0, msgtrace_now_ticks());
	return r;
}

int msgtrace_w_pthread_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *abstime) {
	int (*wait)(pthread_cond_t *, pthread_mutex_t *, const struct timespec *) =
		ORIG(pthread_cond_timedwait, int (*)(pthread_cond_t *, pthread_mutex_t *, const struct timespec *));
	if (!msgtrace_waits_on)
		return wait(c, m, abstime);
	uint64_t t0 = msgtrace_now_ticks();
	int r = wait(c, m, abstime);
	record_wait(MT_WAIT_COND_TIMEDWAIT, c, 0, t0, msgtrace_now_ticks());
	return r;
}

/* glibc (2.25 on): __wrefs >> 3 is the number of waiters, what pthread_cond_signal itself tests */
static void cond_release(pthread_cond_t *c) {
#if defined(__GLIBC__)
	if (msgtrace_waits_on && __atomic_load_n(&c->__data.__wrefs, __ATOMIC_RELAXED) >> 3)
		record_release(c);
#else
	(void)c;
#endif
}

int msgtrace_w_pthread_cond_signal(pthread_cond_t *c) {
	int (*sig)(pthread_cond_t *) = ORIG(pthread_cond_signal, int (*)(pthread_cond_t *));
	cond_release(c);
	return sig(c);
}

int msgtrace_w_pthread_cond_broadcast(pthread_cond_t *c) {
	int (*sig)(pthread_cond_t *) = ORIG(pthread_cond_broadcast, int (*)(pthread_cond_t *));
	cond_release(c);
	return sig(c);
}

/* ---- POSIX semaphores ---- */

int msgtrace_w_sem_wait(sem_t *s) {
	int (*wait)(sem_t *) = ORIG(sem_wait, int (*)(sem_t *));
	if (!msgtrace_waits_on)
		return wait(s);
	int e = errno;
	if (sem_trywait(s) == 0)
		return 0;
	errno = e;
	uint64_t t0 = msgtrace_now_ticks();
	int r = wait(s);
	record_wait(MT_WAIT_SEM_WAIT, s, 0, t0, msgtrace_now_ticks());
	return r;
}

int msgtrace_w_sem_timedwait(sem_t *s, const struct timespec *abstime) {
	int (*wait)(sem_t *, const struct timespec *) = ORIG(sem_timedwait, int (*)(sem_t *, const struct timespec *));
	if (!msgtrace_waits_on)
		return wait(s, abstime);
	int e = errno;
	if (sem_trywait(s) == 0)
		return 0;
	errno = e;
	uint64_t t0 = msgtrace_now_ticks();
	int r = wait(s, abstime);
	record_wait(MT_WAIT_SEM_TIMEDWAIT, s, 0, t0, msgtrace_now_ticks());
	return r;
}

int msgtrace_w_sem_post(sem_t *s) {
	int (*post)(sem_t *) = ORIG(sem_post, int (*)(sem_t *));
#if defined(__GLIBC__) && defined(__LP64__)
	/* glibc's 64-bit semaphore: value in the low 32 bits of its first word, waiters above */
	if (msgtrace_waits_on && __atomic_load_n((uint64_t *)(void *)s, __ATOMIC_RELAXED) >> 32)
		record_release(s);
#endif
	return post(s);
}

/* ---- @synchronized ---- */

int msgtrace_w_objc_sync_enter(void *obj) {
	int (*enter)(void *) = ORIG(objc_sync_enter, int (*)(void *));
	if (!msgtrace_waits_on)
		return enter(obj);
	void *prev = sync_obj;
	sync_obj = obj;
#if defined(__APPLE__)
	uint64_t t0 = msgtrace_now_ticks();
	timed_whole++;
	int r = enter(obj);
	timed_whole--;
	uint64_t t1 = msgtrace_now_ticks();
	if (t1 - t0 >= floor_ticks())
		record_wait(MT_WAIT_SYNC_ENTER, obj, 0, t0, t1);
#else
	int r = enter(obj); /* the lock inside is gcc's libobjc's pthread mutex (above) */
#endif
	sync_obj = prev;
	return r;
}

int msgtrace_w_objc_sync_exit(void *obj) {
	int (*exit_)(void *) = ORIG(objc_sync_exit, int (*)(void *));
	if (!msgtrace_waits_on)
		return exit_(obj);
	void *prev = sync_obj;
	sync_obj = obj;
	int r = exit_(obj);
	sync_obj = prev;
	return r;
}

/* ---- Apple: os_unfair_lock and libdispatch ----
 * Declared here rather than from the SDK's headers: the functions the replacements call that
 * they do not replace are looked up at their first use, so that this file builds (and runs
 * against a stand-in libdispatch in the tests) where they do not exist. */
typedef uint32_t mt_unfair_lock;                /* os_unfair_lock: the owner's port, bit 0 "no waiters" */
typedef uint64_t mt_dispatch_time;              /* dispatch_time_t */
#define MT_DISPATCH_TIME_NOW 0ull

static void *apple_fn(void **cache, const char *name) {
	void *p = __atomic_load_n(cache, __ATOMIC_ACQUIRE);
	if (!p) {
		p = dlsym(RTLD_DEFAULT, name);
		__atomic_store_n(cache, p, __ATOMIC_RELEASE);
	}
	return p;
}
#define APPLE_FN(name, type) \
	({ static void *cache_; (type)apple_fn(&cache_, #name); })

/* os_unfair_lock's value names its owner by its thread port with bit 0 set while nobody waits
 * (libplatform's OS_ULOCK_NOWAITERS_BIT): the owner as thread frames name it. The stand-in the
 * tests use on Linux keeps the owner's kernel thread id shifted left by one instead. */
static uint64_t unfair_owner(uint32_t v) {
	if (!v)
		return 0;
#if defined(__APPLE__)
	void *(*from_port)(uint32_t) = APPLE_FN(pthread_from_mach_thread_np, void *(*)(uint32_t));
	int (*threadid)(void *, uint64_t *) = APPLE_FN(pthread_threadid_np, int (*)(void *, uint64_t *));
	uint64_t id = 0;
	void *pt = from_port ? from_port(v | 1) : NULL;
	if (pt && threadid)
		threadid(pt, &id);
	return id;
#else
	return v >> 1;
#endif
}

void msgtrace_w_os_unfair_lock_lock(mt_unfair_lock *l) {
	void (*lock)(mt_unfair_lock *) = ORIG(os_unfair_lock_lock, void (*)(mt_unfair_lock *));
	_Bool (*trylock)(mt_unfair_lock *) = APPLE_FN(os_unfair_lock_trylock, _Bool (*)(mt_unfair_lock *));
	if (!msgtrace_waits_on || !trylock) {
		lock(l);
		return;
	}
	if (trylock(l))
		return;
	uint64_t holder = unfair_owner(__atomic_load_n(l, __ATOMIC_RELAXED)), t0 = msgtrace_now_ticks();
	lock(l);
	record_wait(MT_WAIT_UNFAIR_LOCK, l, holder, t0, msgtrace_now_ticks());
}

void msgtrace_w_os_unfair_lock_unlock(mt_unfair_lock *l) {
	void (*unlock)(mt_unfair_lock *) = ORIG(os_unfair_lock_unlock, void (*)(mt_unfair_lock *));
	uint32_t v = __atomic_load_n(l, __ATOMIC_RELAXED);
	if (msgtrace_waits_on && v && !(v & 1))
		record_release(l);
	unlock(l);
}

/* dispatch_sync waits until its block starts, on this thread or the queue's: the block runs
 * through a trampoline that notes when and where. A wait the block starts on this thread is
 * recorded there, before the block's own calls (the timeline's end order); one it starts on
 * another thread (the main queue's, a busy serial queue's), when dispatch_sync returns, with
 * that thread as the holder. */
struct sync_ctx {
	void *ctx;
	void (*fn)(void *);
	const void *queue;
	uint64_t t0, t1, waiter, runner;
};

static void sync_tramp(void *p) {
	struct sync_ctx *s = p;
	s->t1 = msgtrace_now_ticks();
	s->runner = my_tid();
	if (s->runner == s->waiter) {
		timed_whole--; /* the block's own waits are recorded */
		if (s->t1 - s->t0 >= floor_ticks())
			record_wait(MT_WAIT_DISPATCH_SYNC, s->queue, 0, s->t0, s->t1);
		s->fn(s->ctx);
		timed_whole++;
		return;
	}
	s->fn(s->ctx);
}

static void sync_via(void *queue, void *ctx, void (*fn)(void *)) {
	void (*sync_f)(void *, void *, void (*)(void *)) = ORIG(dispatch_sync_f, void (*)(void *, void *, void (*)(void *)));
	if (!msgtrace_waits_on) {
		sync_f(queue, ctx, fn);
		return;
	}
	struct sync_ctx s = {ctx, fn, queue, msgtrace_now_ticks(), 0, my_tid(), 0};
	timed_whole++;
	sync_f(queue, &s, sync_tramp);
	timed_whole--;
	if (s.runner && s.runner != s.waiter && s.t1 - s.t0 >= floor_ticks())
		record_wait(MT_WAIT_DISPATCH_SYNC, queue, s.runner, s.t0, s.t1);
}

void msgtrace_w_dispatch_sync_f(void *queue, void *ctx, void (*fn)(void *)) { sync_via(queue, ctx, fn); }

/* A block's function is its invoke pointer, the third word of the block (the Blocks ABI). */
static void call_block(void *b) { ((void (*)(void *))((void **)b)[2])(b); }

void msgtrace_w_dispatch_sync(void *queue, void *block) {
	if (!msgtrace_waits_on) {
		ORIG(dispatch_sync, void (*)(void *, void *))(queue, block);
		return;
	}
	sync_via(queue, block, call_block);
}

long msgtrace_w_dispatch_semaphore_wait(void *sema, mt_dispatch_time timeout) {
	long (*wait)(void *, mt_dispatch_time) = ORIG(dispatch_semaphore_wait, long (*)(void *, mt_dispatch_time));
	if (!msgtrace_waits_on)
		return wait(sema, timeout);
	long r = wait(sema, MT_DISPATCH_TIME_NOW);
	if (r == 0 || timeout == MT_DISPATCH_TIME_NOW)
		return r;
	uint64_t t0 = msgtrace_now_ticks();
	r = wait(sema, timeout);
	record_wait(MT_WAIT_DISPATCH_SEMAPHORE, sema, 0, t0, msgtrace_now_ticks());
	return r;
}

long msgtrace_w_dispatch_semaphore_signal(void *sema) {
	long (*sig)(void *) = ORIG(dispatch_semaphore_signal, long (*)(void *));
	uint64_t t = msgtrace_now_ticks();
	long r = sig(sema);
	if (r && msgtrace_waits_on) /* non-zero: it woke a waiting thread */
		record_release_at(sema, t);
	return r;
}

long msgtrace_w_dispatch_group_wait(void *group, mt_dispatch_time timeout) {
	long (*wait)(void *, mt_dispatch_time) = ORIG(dispatch_group_wait, long (*)(void *, mt_dispatch_time));
	if (!msgtrace_waits_on)
		return wait(group, timeout);
	long r = wait(group, MT_DISPATCH_TIME_NOW);
	if (r == 0 || timeout == MT_DISPATCH_TIME_NOW)
		return r;
	uint64_t t0 = msgtrace_now_ticks();
	r = wait(group, timeout);
	record_wait(MT_WAIT_DISPATCH_GROUP, group, 0, t0, msgtrace_now_ticks());
	return r;
}
