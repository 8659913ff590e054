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

struct mt_hops_counters {
	uint64_t enqueued;  /* hops given an id */
	uint64_t ran;       /* executions marked */
	uint64_t unmarked;  /* marks not written: the thread untraced, or no chunk */
	uint64_t untracked; /* work items not given an id: no memory for the table */
	uint64_t pending;   /* ids in the table (enqueued, not run yet; timers until invalidated) */
};
void msgtrace_hops_counters(struct mt_hops_counters *c);
#endif
