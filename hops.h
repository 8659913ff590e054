/* Async hops (hops.c): work handed to another thread or to later, linked from where it was
 * enqueued to where it ran by marks that share an id (MT_MARK_HOP_*). */
#ifndef MSGTRACE_HOPS_H
#define MSGTRACE_HOPS_H
#include <stdint.h>

/* Hooks what carries the work items of the classes loaded so far (once each), unless
 * MSGTRACE_FLOWS=0. Called after every module the runtime registers and at install; cheap
 * once every hook is in. */
void msgtrace_hops_install(void);
/* MSGTRACE_FLOWS as the hooks read it (rt_env.h's mt_env_flows): 1 on, 0 off. */
int msgtrace_hops_env(void);
/* How many of the hooks are in. */
int msgtrace_hops_installed(void);

/* For the work items a wrapper carries itself (hops_dispatch.c), hidden: a new hop marked as
 * enqueued on the calling thread (0 when not recording); its execution beginning on the calling
 * thread (1: mt_hop_end is to follow, once it returned). */
uint64_t mt_hop_enqueue(void) __attribute__((visibility("hidden")));
int mt_hop_begin(uint64_t id) __attribute__((visibility("hidden")));
void mt_hop_end(uint64_t id) __attribute__((visibility("hidden")));

struct mt_hops_counters {
	uint64_t enqueued;  /* hops given an id */
	uint64_t ran;       /* executions marked */
	uint64_t unmarked;  /* marks not written: the thread untraced, or no chunk */
	uint64_t untracked; /* work items not given an id: no memory for the table */
	uint64_t pending;   /* ids in the table (enqueued, not run yet; timers until invalidated) */
};
void msgtrace_hops_counters(struct mt_hops_counters *c);
/* Apple's dispatch (hops_dispatch.c): the originals found where the rebinding left them out
 * (dlsym); 1 when every function form and the Blocks runtime are there. */
int msgtrace_hops_dispatch_init(void);
typedef void (*mt_dispatch_fn)(void *);
extern void (*msgtrace_orig_dispatch_async)(void *, void *);
extern void (*msgtrace_orig_dispatch_async_f)(void *, void *, mt_dispatch_fn);
extern void (*msgtrace_orig_dispatch_after)(uint64_t, void *, void *);
extern void (*msgtrace_orig_dispatch_after_f)(uint64_t, void *, void *, mt_dispatch_fn);
extern void (*msgtrace_orig_dispatch_barrier_async)(void *, void *);
extern void (*msgtrace_orig_dispatch_barrier_async_f)(void *, void *, mt_dispatch_fn);
extern void (*msgtrace_orig_dispatch_group_async)(void *, void *, void *);
extern void (*msgtrace_orig_dispatch_group_async_f)(void *, void *, void *, mt_dispatch_fn);
/* The replacements the slots are rebound to. */
void msgtrace_dispatch_async(void *q, void *block);
void msgtrace_dispatch_async_f(void *q, void *ctx, mt_dispatch_fn fn);
void msgtrace_dispatch_after(uint64_t when, void *q, void *block);
void msgtrace_dispatch_after_f(uint64_t when, void *q, void *ctx, mt_dispatch_fn fn);
void msgtrace_dispatch_barrier_async(void *q, void *block);
void msgtrace_dispatch_barrier_async_f(void *q, void *ctx, mt_dispatch_fn fn);
void msgtrace_dispatch_group_async(void *g, void *q, void *block);
void msgtrace_dispatch_group_async_f(void *g, void *q, void *ctx, mt_dispatch_fn fn);
#endif
