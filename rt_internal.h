/*
 * The recorder's internals: what its files share, and what the drain (drain_*.c) reads. Not
 * part of the interface the assembly or Go see. The recorder's files, each calling only those
 * before it (never the drain):
 *
 *   rt.c           what the assembly reads (configuration, masks, the originals), the tick
 *                  counter, the struct offsets checked
 *   rt_pool.c      the chunk pool and the recorder's sizes
 *   rt_handover.c  full chunks handed to the drain, waking it, the full-pool policy
 *   rt_ring.c      ring mode: each thread's kept chunks
 *   rt_thread.c    thread records: registration, the chunk switch, marks, exit, counters, fork
 *   rt_launch.c    instants: launch marks and msgtrace_mark, queued for the drain (rt_launch.h)
 */
#ifndef MSGTRACE_RT_INTERNAL_H
#define MSGTRACE_RT_INTERNAL_H
#include "rt.h"
#include <pthread.h>

/* A chunk: this header, then records up to the chunk's end. */
struct mt_chunk {
	struct mt_chunk *qnext;          /* handed-over queue (drain) */
	struct mt_thread_info *owner;    /* thread that filled it */
	struct mt_record *used;          /* end of its records, set when handed over */
	struct mt_record *drained;       /* stream: records before this are in the stream (drain
					  * only); ring: this process's first record (a forked child
					  * starts mid-chunk) */
	uint32_t next_free;              /* free list: index + 1 of the next free chunk, 0 = none */
	uint32_t last;                   /* its thread exited: nothing follows */
	uint64_t seq;                    /* its place among the owner's chunks (0, 1, ...): set by
					  * the owner before the chunk is published in ->chunk; in
					  * ring mode also its place in the owner's ring */
	/* ring mode, set as the chunk goes into its thread's ring: what the chunks the thread put
	 * there before it held (calls, lowest start tick, latest end tick) */
	uint64_t before_calls, before_first, before_last;
	uint64_t pad[7];
	struct mt_record rec[];
};
_Static_assert(sizeof(struct mt_chunk) == 128, "chunk header");

struct mt_ring;
struct mt_drain_thread;

/* mt_thread_info.exited: still running (0), gone with a last chunk that says so (the drain
 * forgets the thread when it takes that chunk), or gone without one (the drain writes it off
 * once its other chunks are in). */
enum { EXITED_LAST_CHUNK = 1, EXITED_NO_CHUNK = 2 };

/* Registry of every thread that made a traced call. */
struct mt_thread_info {
	struct mt_thread_info *next;     /* registry list (registry_lock) */
	uint64_t tid;
	pthread_t pt;
	uint32_t port;                   /* Apple: the thread's Mach port, a send right taken at
					  * registration (drain_cpu.c reads its CPU time; given back
					  * when the drain frees the thread); 0 elsewhere */
	int main;
	int exited;                      /* EXITED_*: set by the thread as it goes */
	char name[64];
	struct mt_chunk *chunk;          /* current chunk (owner writes; drain reads) */
	uint64_t handed;                 /* records in chunks handed over (owner) */
	uint64_t marks;                  /* marks written (owner) */
	uint64_t lost_reported;          /* t.dropped already marked (owner) */
	uint64_t lost_since;             /* tick of the first unmarked drop (owner) */
	uint64_t overflow_reported;      /* t.overflow already marked (owner) */
	uint64_t nchunks;                /* chunks the thread took so far: the next one's seq (owner;
					  * final once exited is set) */
	/* Marks made by a chunk switch (a wait, losses, overflow) end after the record the switch
	 * was made for, which the assembly writes when the slow path returns: they wait here, and
	 * that record's chunk is given room for it alone (rec_end = rec + 1), so the next record
	 * comes back to the slow path, which writes them after it (settle in rt_thread.c). A flush or the
	 * final pass may write them instead (msgtrace_claim_marks). */
	uint64_t defer_gen;              /* generation << 1 | 1 while marks wait (owner sets, owner
					  * or drain claims) */
	uint64_t defer_seq;              /* seq of the chunk that waits for them */
	uint32_t ndefer;
	struct mt_record defer[3];
	/* the hand-over's order, written by the drain: chunks of this thread the drain has taken
	 * (encoded or kept); its current chunk is read only when taken equals the chunk's seq, so
	 * that no older chunk is still in flight */
	uint64_t taken;
	struct mt_drain_thread *drain;   /* the drain's own record of the thread (drain_records.c;
					  * made by the drain, freed with the thread) */
	struct mt_ring *ring;            /* ring mode: the thread's kept chunks */
	/* Linux: a state made by the rebound pthread_create before its thread started
	 * (rt_newthread.c): the thread's start routine and its argument until it starts, and the
	 * depth its shadow stack was made for */
	void *(*start)(void *);
	void *start_arg;
	uint32_t depth;
	struct mt_thread t;              /* last: its shadow stack follows */
};

/* Ring mode (the flight recorder, MSGTRACE_MODE=ring). Every thread keeps its full chunks in
 * a ring of its own, oldest first: positions head..tail-1 (a chunk's position is its seq). A
 * thread that needs a chunk when the pool is empty takes one back itself, never waiting: its
 * own oldest, or (when it keeps RING_SHARE or fewer) the oldest of the thread keeping the
 * most; head moves by compare-and-swap, so the owner and any other thread may take at once,
 * while only the owner adds (tail). What was taken back is counted exactly without a counter:
 * every chunk carries the totals of the chunks before it (before_*), so a ring's oldest kept
 * chunk says how much was overwritten, and the ring's totals (under a sequence lock the
 * owner never waits on) say it when nothing is kept. The drain reads rings only to dump them,
 * copying each chunk and checking afterwards that head had not passed it. Rings are never
 * freed (an exited thread's stays for its overwritten count); their slot arrays are reused. */
#define RING_SHARE 2
enum { RING_LIVE = 1, RING_EXITED = 2, RING_DONE = 3, RING_GONE = 4 };
struct mt_ring {
	struct mt_ring *next;            /* every ring made (msgtrace_rings; pushed, never removed) */
	uint64_t head;                   /* oldest kept chunk's position (CAS) */
	uint64_t tail;                   /* next position (owner; release) */
	uint32_t *slots;                 /* chunk index at position & mask */
	uint64_t mask;
	uint32_t state;                  /* RING_*: LIVE, EXITED (owner), DONE (nothing kept and
					  * the slots given back: drain), GONE (a fork child's other
					  * threads) */
	uint32_t seqlock;                /* odd while the owner changes tail and the totals */
	uint64_t calls, first, last;     /* totals of every chunk the owner put in */
	struct mt_thread_info *live;     /* the thread while it lives (drain only) */
	struct mt_thread_info id;        /* identity (tid, main, name) for the frames; last: it ends
					  * in an empty shadow stack */
};
/* ---- rt_pool.c ---- */
extern uint32_t msgtrace_chunk_records;        /* records per chunk */
struct mt_chunk *msgtrace_pool_pop(void);
void msgtrace_pool_push(struct mt_chunk *c);
struct mt_chunk *msgtrace_pool_make(void);     /* one more chunk faulted in; NULL at the cap */
int msgtrace_pool_reserve(void);               /* the region reserved: 0, or -1 */
/* The pool's cap in bytes, the other sizes as they are (msgtrace_configure's checks): 0, -1. */
int msgtrace_pool_bytes(uint64_t pool_bytes);
int msgtrace_pool_grow(int n);                 /* fault in up to n new chunks; returns how many */
uint32_t msgtrace_pool_free_count(void);
uint32_t msgtrace_pool_made(void);
uint32_t msgtrace_pool_cap(void);
struct mt_chunk *msgtrace_chunk_at(uint32_t index);
uint32_t msgtrace_chunk_index(struct mt_chunk *c);
uint32_t msgtrace_stack_depth(void);           /* shadow stack entries of threads made now */
void msgtrace_pool_after_fork(void);

/* rt_newthread.c: a thread's state with a shadow stack of depth entries is this many bytes */
static inline size_t msgtrace_state_size(uint32_t depth) {
	return sizeof(struct mt_thread_info) + (size_t)depth * sizeof(struct mt_entry);
}
/* The state made for this thread before it started (Linux, the rebound pthread_create), now
 * the caller's; NULL if there is none or it was made for another depth (then freed). */
struct mt_thread_info *msgtrace_take_made_state(uint32_t depth);
/* States made, taken by a registration, freed unused (their thread made no traced call). */
void msgtrace_made_state_counters(uint64_t *made, uint64_t *taken, uint64_t *unused);

/* ---- rt_handover.c ---- */
extern volatile int msgtrace_drain_running;
/* Recording started before the drain (msgtrace_launch_record_early), which is on its way: a
 * thread that finds the pool at its cap waits for it to start rather than drop (atomic; cleared
 * once the Go side has its selection, or gave up). */
extern int msgtrace_drain_expected;
extern int msgtrace_drain_urgent;               /* a thread waits for a chunk (atomic) */
extern int msgtrace_drain_begin_req;            /* the first chunk was taken: begin the stream file (atomic) */
void msgtrace_hand_over(struct mt_chunk *c);
struct mt_chunk *msgtrace_take_handed(void);    /* every handed-over chunk, oldest first */
struct mt_chunk *msgtrace_handed_peek(void);
int msgtrace_full_policy_drop(void);            /* MSGTRACE_FULL=drop, or no drain */
void msgtrace_drain_make_wake_pipe(void);       /* a new pipe (the drain's start, a fork child) */
/* The calling thread's id, as thread frames name it (rt_thread.c). */
uint64_t msgtrace_thread_id(void);
void msgtrace_drain_wake(void);                 /* the drain runs a pass now (async-signal-safe) */
void msgtrace_drain_wait(int ms);               /* the drain: waits up to ms for a wake-up */

/* ---- rt_ring.c ---- */
extern struct mt_ring *msgtrace_rings;
extern int msgtrace_ring_mode;                  /* set before the drain starts */
struct mt_ring *msgtrace_ring_make(struct mt_thread_info *i);
void msgtrace_ring_push(struct mt_ring *r, struct mt_chunk *c);
struct mt_chunk *msgtrace_ring_take(struct mt_thread_info *i);
/* The drain: rings whose thread exited and that keep nothing give their slots back. */
void msgtrace_ring_release(struct mt_ring *r);
/* Fork child: the parent's chunks back to the pool; keep (the forking thread's ring, or NULL)
 * starts again empty, the others are gone. */
void msgtrace_rings_after_fork(struct mt_ring *keep);

/* ---- rt_thread.c ---- */
extern pthread_mutex_t msgtrace_registry_lock;
extern struct mt_thread_info *msgtrace_registry;
void msgtrace_reset_after_fork(void);           /* child: other threads' state is gone */
void msgtrace_thread_gone_mark(struct mt_thread_info *i); /* final bookkeeping before free */
/* The drain takes the marks a chunk switch left waiting (see defer_gen), having read c (the
 * thread's current chunk) and cur (its cursor) in that order and written the chunk up to cur:
 * copies them into out (3 records) and returns how many; 0 when none wait, or their record is
 * not written yet, or the thread took them. */
int msgtrace_claim_marks(struct mt_thread_info *i, struct mt_chunk *c, struct mt_record *cur, struct mt_record *out);
/* A mark (kind, start and end ticks, count) on the calling thread, from the library's C outside
 * the assembly's slow paths (hops.c): 0, or -1 when the thread is not traced (excluded, inside
 * the tracer) or no chunk had room. */
int msgtrace_thread_mark(int kind, uint64_t start, uint64_t end, uint64_t count);
/* The recorder's counters (every field but the drain's: written, lost_bytes). */
void msgtrace_recorder_counters(struct mt_counters *c);
#endif
