/*
 * Async hops through Grand Central Dispatch (Apple's libdispatch): dispatch_async,
 * dispatch_after, dispatch_barrier_async and dispatch_group_async, each with its _f form,
 * rebound in every image's pointer tables as objc_msgSend is (the Go side's rebindings,
 * hops_dispatch.go). The wrapper marks a new hop on the enqueuing thread (hops.c) and hands
 * dispatch a work item of its own, the function form's context: it marks the hop's begin on
 * the thread that runs it, calls the app's function (or invokes its block, copied at the
 * enqueue and released after), then marks the end. A block goes to the same queue through the
 * _f form of its call, so dispatch runs it where and when it would have run the block. The
 * *_and_wait and sync forms are left alone (the caller waits: no hop).
 *
 * Left as they were: a block made by dispatch_block_create with flags keeps its own invoke
 * (cancellation and waiting work), but the flags dispatch reads at submission (a barrier's,
 * QoS) are not seen through the wrapper's context. The originals are the rebinding's (what each
 * slot held), else dlsym's; without one of them, or memory, the call goes through unchanged.
 * Depends on: hops.c (the marks), rt.c (msgtrace_active).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "hops.h"
#include "rt.h"

#include <dlfcn.h>
#include <stdlib.h>

/* The originals (rebinding's Publish; dlsym fills what it left out). */
void (*msgtrace_orig_dispatch_async)(void *, void *);
void (*msgtrace_orig_dispatch_async_f)(void *, void *, mt_dispatch_fn);
void (*msgtrace_orig_dispatch_after)(uint64_t, void *, void *);
void (*msgtrace_orig_dispatch_after_f)(uint64_t, void *, void *, mt_dispatch_fn);
void (*msgtrace_orig_dispatch_barrier_async)(void *, void *);
void (*msgtrace_orig_dispatch_barrier_async_f)(void *, void *, mt_dispatch_fn);
void (*msgtrace_orig_dispatch_group_async)(void *, void *, void *);
void (*msgtrace_orig_dispatch_group_async_f)(void *, void *, void *, mt_dispatch_fn);
static void *(*block_copy)(const void *);
static void (*block_release)(const void *);

#define FILL(var, name)                                                        \
	do {                                                                   \
		if (!__atomic_load_n(&(var), __ATOMIC_ACQUIRE))                  \
			__atomic_store_n((void **)&(var), dlsym(RTLD_DEFAULT, name), __ATOMIC_RELEASE); \
	} while (0)

int msgtrace_hops_dispatch_init(void) {
	FILL(msgtrace_orig_dispatch_async, "dispatch_async");
	FILL(msgtrace_orig_dispatch_async_f, "dispatch_async_f");
	FILL(msgtrace_orig_dispatch_after, "dispatch_after");
	FILL(msgtrace_orig_dispatch_after_f, "dispatch_after_f");
	FILL(msgtrace_orig_dispatch_barrier_async, "dispatch_barrier_async");
	FILL(msgtrace_orig_dispatch_barrier_async_f, "dispatch_barrier_async_f");
	FILL(msgtrace_orig_dispatch_group_async, "dispatch_group_async");
	FILL(msgtrace_orig_dispatch_group_async_f, "dispatch_group_async_f");
	FILL(block_copy, "_Block_copy");
	FILL(block_release, "_Block_release");
	return msgtrace_orig_dispatch_async_f && msgtrace_orig_dispatch_after_f && msgtrace_orig_dispatch_barrier_async_f &&
	       msgtrace_orig_dispatch_group_async_f && block_copy && block_release;
}

/* A block's layout (the Blocks ABI): its invoke takes the block first. */
struct mt_block {
	void *isa;
	int flags, reserved;
	void (*invoke)(void *);
};

/* The work item dispatch runs in the app's place. */
struct hop_work {
	void *ctx;
	mt_dispatch_fn fn;
	void *block; /* or the app's block (a copy of its) */
	uint64_t id;
};

static void hop_run(void *p) {
	struct hop_work *w = p;
	int end = mt_hop_begin(w->id);
	if (w->block) {
		((struct mt_block *)w->block)->invoke(w->block);
		block_release(w->block);
	} else {
		w->fn(w->ctx);
	}
	if (end)
		mt_hop_end(w->id);
	free(w);
}

/* The work item for a function (block NULL) or a block, its hop marked enqueued; NULL: pass
 * the call through unchanged (not recording, no memory, a function form missing). */
static struct hop_work *hop_work(void *ctx, mt_dispatch_fn fn, const void *block, int have_f) {
	if (!__atomic_load_n(&msgtrace_active, __ATOMIC_RELAXED) || !have_f || (block && (!block_copy || !block_release)))
		return NULL;
	struct hop_work *w = malloc(sizeof *w);
	if (!w)
		return NULL;
	w->ctx = ctx, w->fn = fn, w->block = NULL;
	if (block && !(w->block = block_copy(block))) {
		free(w);
		return NULL;
	}
	w->id = mt_hop_enqueue();
	return w;
}

void msgtrace_dispatch_async_f(void *q, void *ctx, mt_dispatch_fn fn) {
	struct hop_work *w = hop_work(ctx, fn, NULL, msgtrace_orig_dispatch_async_f != NULL);
	if (w)
		msgtrace_orig_dispatch_async_f(q, w, hop_run);
	else
		msgtrace_orig_dispatch_async_f(q, ctx, fn);
}

void msgtrace_dispatch_async(void *q, void *block) {
	struct hop_work *w = hop_work(NULL, NULL, block, msgtrace_orig_dispatch_async_f != NULL);
	if (w)
		msgtrace_orig_dispatch_async_f(q, w, hop_run);
	else
		msgtrace_orig_dispatch_async(q, block);
}

void msgtrace_dispatch_after_f(uint64_t when, void *q, void *ctx, mt_dispatch_fn fn) {
	struct hop_work *w = hop_work(ctx, fn, NULL, msgtrace_orig_dispatch_after_f != NULL);
	if (w)
		msgtrace_orig_dispatch_after_f(when, q, w, hop_run);
	else
		msgtrace_orig_dispatch_after_f(when, q, ctx, fn);
}

void msgtrace_dispatch_after(uint64_t when, void *q, void *block) {
	struct hop_work *w = hop_work(NULL, NULL, block, msgtrace_orig_dispatch_after_f != NULL);
	if (w)
		msgtrace_orig_dispatch_after_f(when, q, w, hop_run);
	else
		msgtrace_orig_dispatch_after(when, q, block);
}

void msgtrace_dispatch_barrier_async_f(void *q, void *ctx, mt_dispatch_fn fn) {
	struct hop_work *w = hop_work(ctx, fn, NULL, msgtrace_orig_dispatch_barrier_async_f != NULL);
	if (w)
		msgtrace_orig_dispatch_barrier_async_f(q, w, hop_run);
	else
		msgtrace_orig_dispatch_barrier_async_f(q, ctx, fn);
}

void msgtrace_dispatch_barrier_async(void *q, void *block) {
	struct hop_work *w = hop_work(NULL, NULL, block, msgtrace_orig_dispatch_barrier_async_f != NULL);
	if (w)
		msgtrace_orig_dispatch_barrier_async_f(q, w, hop_run);
	else
		msgtrace_orig_dispatch_barrier_async(q, block);
}

void msgtrace_dispatch_group_async_f(void *g, void *q, void *ctx, mt_dispatch_fn fn) {
	struct hop_work *w = hop_work(ctx, fn, NULL, msgtrace_orig_dispatch_group_async_f != NULL);
	if (w)
		msgtrace_orig_dispatch_group_async_f(g, q, w, hop_run);
	else
		msgtrace_orig_dispatch_group_async_f(g, q, ctx, fn);
}

void msgtrace_dispatch_group_async(void *g, void *q, void *block) {
	struct hop_work *w = hop_work(NULL, NULL, block, msgtrace_orig_dispatch_group_async_f != NULL);
	if (w)
		msgtrace_orig_dispatch_group_async_f(g, q, w, hop_run);
	else
		msgtrace_orig_dispatch_group_async(g, q, block);
}
