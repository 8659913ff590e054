/* A stand-in for Apple's os_unfair_lock and libdispatch's blocking calls, so that the library's
 * replacements of them (waits.c) run on Linux in a test (cmd/libmsgtrace's TestAppleWaitsStandIn):
 * futexes, no pthread calls (which the library would record too). Not libdispatch: a serial
 * "queue" is a lock its dispatch_sync_f holds while the function runs on the caller's thread; a
 * semaphore and a group are counters.
 *   os_unfair_lock   the owner's kernel thread id << 1, bit 0 set while nobody waits (Apple keeps
 *                    the owner's thread port there, with the same bit)
 *   dispatch_semaphore_signal returns 1 when it woke a waiter, as Apple's does
 *   a dispatch_time_t timeout is DISPATCH_TIME_NOW (0) or DISPATCH_TIME_FOREVER (~0) */
#include <linux/futex.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

static void fwait(uint32_t *a, uint32_t v) { syscall(SYS_futex, a, FUTEX_WAIT_PRIVATE, v, NULL, NULL, 0); }
static void fwake(uint32_t *a, int n) { syscall(SYS_futex, a, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0); }
static uint32_t me(void) { return (uint32_t)syscall(SYS_gettid) << 1; }

typedef uint32_t os_unfair_lock;

bool os_unfair_lock_trylock(os_unfair_lock *l) {
	uint32_t z = 0;
	return __atomic_compare_exchange_n(l, &z, me() | 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
}

/* The lock, called directly inside (a call through the slot would be rebound, and recorded) */
static void lock_impl(os_unfair_lock *l) {
	for (;;) {
		uint32_t v = __atomic_load_n(l, __ATOMIC_RELAXED), z = 0;
		if (v == 0) {
			if (__atomic_compare_exchange_n(l, &z, me(), 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
				return; /* taken after a wait: others may wait too (bit 0 clear) */
			continue;
		}
		if ((v & 1) && !__atomic_compare_exchange_n(l, &v, v & ~1u, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
			continue;
		fwait(l, v & ~1u);
	}
}

static void unlock_impl(os_unfair_lock *l) {
	uint32_t v = __atomic_exchange_n(l, 0, __ATOMIC_RELEASE);
	if (!(v & 1))
		fwake(l, 1);
}

void os_unfair_lock_lock(os_unfair_lock *l) { lock_impl(l); }
void os_unfair_lock_unlock(os_unfair_lock *l) { unlock_impl(l); }

struct queue {
	os_unfair_lock busy;
};

void *standin_queue_create(void) { return calloc(1, sizeof(struct queue)); }

void dispatch_sync_f(void *q, void *ctx, void (*fn)(void *)) {
	struct queue *s = q;
	lock_impl(&s->busy);
	fn(ctx);
	unlock_impl(&s->busy);
}

void dispatch_sync(void *q, void *block) {
	(void)q, (void)block;
	abort(); /* blocks are Apple's: the tests use dispatch_sync_f */
}

struct sema {
	uint32_t value, waiters;
};

void *dispatch_semaphore_create(long v) {
	struct sema *s = calloc(1, sizeof *s);
	s->value = (uint32_t)v;
	return s;
}

long dispatch_semaphore_wait(void *p, uint64_t timeout) {
	struct sema *s = p;
	for (;;) {
		uint32_t v = __atomic_load_n(&s->value, __ATOMIC_ACQUIRE);
		if (v > 0) {
			if (__atomic_compare_exchange_n(&s->value, &v, v - 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
				return 0;
			continue;
		}
		if (timeout == 0)
			return 49; /* KERN_OPERATION_TIMED_OUT */
		__atomic_add_fetch(&s->waiters, 1, __ATOMIC_ACQ_REL);
		fwait(&s->value, 0);
		__atomic_sub_fetch(&s->waiters, 1, __ATOMIC_ACQ_REL);
	}
}

long dispatch_semaphore_signal(void *p) {
	struct sema *s = p;
	__atomic_add_fetch(&s->value, 1, __ATOMIC_RELEASE);
	if (__atomic_load_n(&s->waiters, __ATOMIC_ACQUIRE)) {
		fwake(&s->value, 1);
		return 1;
	}
	return 0;
}

struct group {
	uint32_t count;
};

void *dispatch_group_create(void) { return calloc(1, sizeof(struct group)); }
void dispatch_group_enter(void *g) { __atomic_add_fetch(&((struct group *)g)->count, 1, __ATOMIC_ACQ_REL); }
void dispatch_group_leave(void *g) {
	struct group *s = g;
	if (__atomic_sub_fetch(&s->count, 1, __ATOMIC_ACQ_REL) == 0)
		fwake(&s->count, 1 << 30);
}

long dispatch_group_wait(void *g, uint64_t timeout) {
	struct group *s = g;
	for (;;) {
		uint32_t v = __atomic_load_n(&s->count, __ATOMIC_ACQUIRE);
		if (v == 0)
			return 0;
		if (timeout == 0)
			return 49;
		fwait(&s->count, v);
	}
}
