/*
 * Thread states made before their thread starts (Linux): pthread_create is rebound with the
 * interposers, and the rebound one makes the new thread's state on the creating thread, so
 * that the new thread's first traced call costs about what a later one does (rt_thread.c's
 * registration takes the state instead of allocating it). Made at that call, the state was
 * the first allocation of a thread new to malloc (its arena made: mmap, mprotect, page
 * faults), some 50 µs on the program's path just when its threads first touch the runtime
 * together (docs/limits.md, poolnew, where it was measured). A thread that never makes a
 * traced call takes no chunk and is not counted: its state is freed as it ends (a pthread key
 * of this file's). Elsewhere (Apple: no pthread_create rebound) there is never a state to take.
 * Depends on: rt_pool.c (the shadow stack's depth).
 */
#include "rt_internal.h"

#include <stdlib.h>

#if !defined(__APPLE__)
#include <sys/syscall.h>
#include <unistd.h>

void *msgtrace_orig_pthread_create;

/* The state made for this thread, not taken yet; the key frees it at the thread's exit. */
static __thread struct mt_thread_info *made_self __attribute__((tls_model("initial-exec")));
static pthread_key_t made_key;
static pthread_once_t made_once = PTHREAD_ONCE_INIT;
/* states made, taken by a registration, freed unused (atomic) */
static uint64_t made, taken, unused;

static void made_gone(void *p) {
	if (p == made_self)
		made_self = NULL;
	free(p);
	__atomic_add_fetch(&unused, 1, __ATOMIC_RELAXED);
}
static void make_key(void) { pthread_key_create(&made_key, made_gone); }

/* The start routine of a thread made through the rebound pthread_create, on the new thread
 * before the program's code: the state made for it becomes its own (its tid, its pthread),
 * then the program's start routine runs. */
static void *made_start(void *p) {
	struct mt_thread_info *info = p;
	void *(*start)(void *) = info->start;
	void *arg = info->start_arg;
	info->start = NULL;
	info->start_arg = NULL;
	info->tid = (uint64_t)syscall(SYS_gettid);
	info->pt = pthread_self();
	made_self = info;
	pthread_once(&made_once, make_key);
	pthread_setspecific(made_key, info);
	return start(arg);
}

int msgtrace_pthread_create(void *thread, const void *attr, void *(*start)(void *), void *arg) {
	int (*create)(void *, const void *, void *(*)(void *), void *) =
		(int (*)(void *, const void *, void *(*)(void *), void *))msgtrace_orig_pthread_create;
	uint32_t depth = msgtrace_stack_depth();
	struct mt_thread_info *info = calloc(1, msgtrace_state_size(depth));
	if (!info)
		return create(thread, attr, start, arg);
	info->start = start;
	info->start_arg = arg;
	info->depth = depth;
	__atomic_add_fetch(&made, 1, __ATOMIC_RELAXED); /* before the thread can take it */
	int err = create(thread, attr, made_start, info);
	if (err) {
		__atomic_sub_fetch(&made, 1, __ATOMIC_RELAXED);
		free(info);
	}
	return err;
}

struct mt_thread_info *msgtrace_take_made_state(uint32_t depth) {
	struct mt_thread_info *info = made_self;
	if (!info)
		return NULL;
	made_self = NULL;
	pthread_setspecific(made_key, NULL);
	if (info->depth != depth) { /* configured since it was made */
		free(info);
		__atomic_add_fetch(&unused, 1, __ATOMIC_RELAXED);
		return NULL;
	}
	__atomic_add_fetch(&taken, 1, __ATOMIC_RELAXED);
	return info;
}

void msgtrace_made_state_counters(uint64_t *m, uint64_t *t, uint64_t *u) {
	*m = __atomic_load_n(&made, __ATOMIC_RELAXED);
	*t = __atomic_load_n(&taken, __ATOMIC_RELAXED);
	*u = __atomic_load_n(&unused, __ATOMIC_RELAXED);
}
#else
struct mt_thread_info *msgtrace_take_made_state(uint32_t depth) {
	(void)depth;
	return NULL;
}

void msgtrace_made_state_counters(uint64_t *m, uint64_t *t, uint64_t *u) { *m = *t = *u = 0; }
#endif
