/* Contended waits and their holders (waits.c): the replacements rebound over the blocking
 * primitives' slots (waits.go lists them), the originals they forward to, and the chunk records
 * they write (rt_thread.c's msgtrace_put_wait), which the drain encodes as wait events and
 * release marks (tracer/stream.go). */
#ifndef MSGTRACE_WAITS_H
#define MSGTRACE_WAITS_H

#include <stdint.h>

#include "rt.h"
#include "stream_format.h"

/* A chunk record's kind (mark class bits, below the holder) for a wait: not a stream mark kind,
 * the drain writes it as a wait event (MT_EVENT_WAIT). 6 is of the waits' reserved range (5-9);
 * a release is MT_MARK_RELEASE (5) as it is in the stream. The wait record:
 *   cls  F_MARK << FLAG_SHIFT | depth << DEPTH_SHIFT | holder << REC_WAIT_HOLDER_SHIFT | REC_WAIT
 *   sel  primitive << REC_WAIT_PRIM_SHIFT | address (56 bits)
 * The release record: a mark of kind MT_MARK_RELEASE, start = end = the tick before the
 * release, sel = the address, depth as a wait's. */
#define REC_WAIT 6
#define REC_WAIT_HOLDER_SHIFT 16
#define REC_WAIT_HOLDER_MASK 0xffffffffull /* holder ids are thread frames' ids, cut to 32 bits */
#define REC_WAIT_PRIM_SHIFT 56
#define REC_WAIT_ADDR_MASK ((1ull << REC_WAIT_PRIM_SHIFT) - 1)

#ifdef __cplusplus
extern "C" {
#endif

/* 1 while waits are recorded: MSGTRACE_WAITS (rt_env.h) at load, then what Go sets. A
 * replacement reached while it is 0 only forwards. */
extern volatile uint32_t msgtrace_waits_on MT_HIDDEN;

/* Writes a wait or release record on the calling thread at its shadow stack's depth (rt_thread.c);
 * nothing on a thread that made no traced call, inside the tracer, or with recording off. */
void msgtrace_put_wait(uint64_t start, uint64_t end, uint64_t kind_holder, uint64_t sel);
/* The calling thread waits inside the tracer (a flush waiting for the drain) while delta > 0
 * is in force: its waits are the tracer's, not recorded (where the library is linked into the
 * program, its own pthread calls go through the replacements too). */
void msgtrace_inside_tracer(int delta);

/* Counters for the tests and the cost measurement: waits and releases recorded. */
struct mt_wait_counters {
	uint64_t waits, releases;
};
void msgtrace_wait_counters(struct mt_wait_counters *c);

/* The replacements and the originals they forward to (set by the rebinding's Publish; a
 * replacement whose original is not set resolves it with dlsym first). */
#define MT_WAIT_FNS(X)                 \
	X(pthread_mutex_lock)          \
	X(pthread_mutex_unlock)        \
	X(pthread_rwlock_rdlock)       \
	X(pthread_rwlock_wrlock)       \
	X(pthread_rwlock_unlock)       \
	X(pthread_cond_wait)           \
	X(pthread_cond_timedwait)      \
	X(pthread_cond_signal)         \
	X(pthread_cond_broadcast)      \
	X(sem_wait)                    \
	X(sem_timedwait)               \
	X(sem_post)                    \
	X(objc_sync_enter)             \
	X(objc_sync_exit)
#define MT_WAIT_FNS_APPLE(X)           \
	X(os_unfair_lock_lock)         \
	X(os_unfair_lock_unlock)       \
	X(dispatch_sync)               \
	X(dispatch_sync_f)             \
	X(dispatch_semaphore_wait)     \
	X(dispatch_semaphore_signal)   \
	X(dispatch_group_wait)
#define MT_WAIT_DECLARE_ORIG(name) extern void *msgtrace_orig_w_##name MT_HIDDEN;
MT_WAIT_FNS(MT_WAIT_DECLARE_ORIG)
MT_WAIT_FNS_APPLE(MT_WAIT_DECLARE_ORIG)
#undef MT_WAIT_DECLARE_ORIG
#ifndef MT_WAITS_IMPL /* for Go: the replacements' addresses (waits.c defines them with their types) */
#define MT_WAIT_DECLARE(name) void msgtrace_w_##name(void);
MT_WAIT_FNS(MT_WAIT_DECLARE)
MT_WAIT_FNS_APPLE(MT_WAIT_DECLARE)
#undef MT_WAIT_DECLARE
#endif

#ifdef __cplusplus
}
#endif
#endif
