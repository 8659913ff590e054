/*
 * msgtrace interposer runtime: the per-thread state the assembly interposers read and write.
 * This header is included by the C runtime (rt.c, drain.c) and by the assembly (msgsend_*.S),
 * which reads the structs through the offsets generated into asm_offsets.h.
 *
 * Records go into chunks: fixed-size blocks taken from a shared pool. A thread writes its
 * current chunk with a cursor bump and a compare (the hot path); when it is full, the slow
 * path (msgtrace_slow_chunk, every register preserved) hands it to the drain thread and takes
 * another from the pool. The drain (drain.c) encodes chunks into the stream file as the program
 * runs and gives them back to the pool.
 */
#ifndef MSGTRACE_RT_H
#define MSGTRACE_RT_H

/* The offsets and sizes of the structs below, for the assembly: E_* (struct mt_entry), R_*
 * (struct mt_record), T_* (struct mt_thread), ENTRY_SIZE, ENTRY_SHIFT, RECORD_SIZE, measured
 * from these definitions by the C compiler (go generate; internal/asmoffsets). */
#ifndef MT_OFFSETS_PROBE
#include "asm_offsets.h"
#endif

/* E_OWNER while the method runs: who made the entry. A send's entry (the interposer's) may be
 * claimed by the method trampoline it lands in, which names the call by its implementing
 * class; an entry a trampoline made is a method's own. */
#define OWNER_SEND   0
#define OWNER_METHOD 1

/* The class word (mt_entry.cls, mt_record.cls):
 *   bits  0-47  class (CLS_BITS), or a tagged receiver folded (F_TAGGED)
 *   bits 48-59  depth in the shadow stack (DEPTH_SHIFT, DEPTH_BITS)
 *   bits 60-63  flags (FLAG_SHIFT): F_x = 1 << F_x_BIT */
#define CLS_BITS    48
#define DEPTH_SHIFT 48
#define DEPTH_BITS  12
#define DEPTH_MAX   ((1 << DEPTH_BITS) - 1)
#define FLAG_SHIFT  60
#define F_SUPER_BIT   0
#define F_TAGGED_BIT  1
#define F_UNWOUND_BIT 2
#define F_MARK_BIT    3
#define F_SUPER   (1 << F_SUPER_BIT)   /* class is the objc_super class: the method ran in its superclass */
#define F_TAGGED  (1 << F_TAGGED_BIT)  /* receiver was a tagged pointer: the field holds the receiver
					* folded (MT_UNFOLD_TAGGED gives it back with bits 32-47,
					* payload, cleared) */
#define F_UNWOUND (1 << F_UNWOUND_BIT) /* the call did not return: closed when an exception or longjmp skipped it */
#define F_MARK    (1 << F_MARK_BIT)    /* not a call: a mark (class bits = kind, selector = count) */
/* A tagged receiver's bits 48-63 (the tag bit and index on Apple's MSB and split layouts), where
 * depth and flags go, are recorded in bits 32-47 (TAG_FOLD_SHIFT: payload on every layout). */
#define TAG_FOLD_SHIFT 32
#define MT_UNFOLD_TAGGED(f) \
	(((f) & ((1ull << TAG_FOLD_SHIFT) - 1)) | \
	 (((f) >> TAG_FOLD_SHIFT & ((1ull << (64 - CLS_BITS)) - 1)) << CLS_BITS))

/* mark kinds (as in the stream format, tracer/stream/stream.go) */
#define MARK_LOST 1
#define MARK_WAIT 2
#define MARK_OVERFLOW 3
#define MARK_OVERWRITTEN 4

#ifndef __ASSEMBLER__
#include <stddef.h>
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif

/* One traced call in flight: a shadow-stack entry. ENTRY_SIZE is a power of two: an entry's
 * depth is its distance from the stack's base >> ENTRY_SHIFT. */
struct mt_entry {
	uint64_t ret;   /* caller's return address (replaced on the real stack by msgtrace_after) */
	uint64_t sp;    /* caller's stack pointer after the call returns: identifies the frame */
	uint64_t start; /* start tick */
	uint64_t cls;   /* class | depth << DEPTH_SHIFT | flags << FLAG_SHIFT */
	uint64_t sel;   /* selector */
	uint64_t save;  /* caller's value of the register that holds the entry meanwhile (rbx / x19) */
	uint64_t rv0;   /* amd64: rax, parked while the interposer or the return stub runs */
	union {
		uint64_t rv1;   /* amd64: rdx, parked as rv0 */
		uint64_t owner; /* while the method runs: OWNER_SEND or OWNER_METHOD */
	};
};

/* One finished call (32 bytes). */
struct mt_record {
	uint64_t start, end;
	uint64_t cls; /* as mt_entry's */
	uint64_t sel;
};

/* Per-thread state, found through TLS. */
struct mt_thread {
	struct mt_entry *top;      /* next free shadow entry */
	struct mt_entry *limit;    /* end of the shadow stack */
	struct mt_entry *base;     /* first shadow entry */
	struct mt_record *rec_cur; /* next free record in the current chunk */
	struct mt_record *rec_end; /* end of the current chunk */
	uint64_t dropped;          /* records dropped: no buffer space (MSGTRACE_FULL=drop) */
	uint64_t overflow;         /* calls passed through untraced: shadow stack full */
	uint64_t busy;             /* non-zero: pass through (excluded thread, or inside the tracer) */
	uint64_t scratch[3];       /* scratch for the interposer's slow paths */
	struct mt_entry stack[];   /* shadow stack, then bookkeeping in struct mt_thread_info */
};
#ifndef MT_OFFSETS_PROBE
MT_CHECK_MT_ENTRY;
MT_CHECK_MT_RECORD;
MT_CHECK_MT_THREAD;
#endif

/* Hidden: the assembly reaches these PC-relatively, which a shared library allows only for
 * symbols that cannot be preempted. */
#define MT_HIDDEN __attribute__((visibility("hidden")))
/* Interposer configuration, read by the assembly on every call. */
extern volatile uint32_t msgtrace_active MT_HIDDEN; /* 0: every call is a pass-through */
extern uint64_t msgtrace_isa_mask MT_HIDDEN;        /* object's isa & mask = class */
extern uint64_t msgtrace_tag_mask MT_HIDDEN;        /* receiver & mask != 0: tagged pointer */
/* In every tag mask: a receiver with any of these bits set is not an aligned object pointer
 * (libobjc2's small objects, OBJC_SMALL_OBJECT_MASK on 64-bit), never dereferenced (rt.c). */
#define MT_UNALIGNED_BITS 7ULL
extern uint64_t msgtrace_min_ticks MT_HIDDEN;       /* calls shorter than this are not recorded */
extern uint32_t msgtrace_sel_by_index MT_HIDDEN;    /* 1: a selector is the first word of what SEL
						       points at (libobjc2: one struct per loaded
						       object, the registered index first) */
extern uint64_t msgtrace_xsave_size MT_HIDDEN;      /* amd64: XSAVE area bytes; 0: FXSAVE */
/* The originals the interposers forward to (set before any slot points at an interposer). */
extern void *msgtrace_orig_objc_msgSend MT_HIDDEN, *msgtrace_orig_objc_msgSendSuper2 MT_HIDDEN;
extern void *msgtrace_orig_objc_msgSend_stret MT_HIDDEN, *msgtrace_orig_objc_msgSend_fpret MT_HIDDEN;
extern void *msgtrace_orig_objc_msgSend_fp2ret MT_HIDDEN, *msgtrace_orig_objc_msgSendSuper2_stret MT_HIDDEN;

/* The interposers (msgsend_*.S). */
void msgtrace_objc_msgSend(void);
void msgtrace_objc_msgSendSuper2(void);
void msgtrace_objc_msgSend_stret(void);
void msgtrace_objc_msgSend_fpret(void);
void msgtrace_objc_msgSend_fp2ret(void);
void msgtrace_objc_msgSendSuper2_stret(void);

/* Slow paths, called by the assembly through msgtrace_slow_* (which preserve every register):
 * the first traced call of a thread, and a full chunk. */
void msgtrace_register_thread(void);
void msgtrace_chunk_full(void);
#if !defined(__APPLE__)
/* pthread_create as the rebound slots see it (Linux): the thread's state is made before it
 * starts, so that its first traced call costs what a later one does (rt_newthread.c); the real
 * pthread_create is msgtrace_orig_pthread_create, set before any slot points here. */
extern void *msgtrace_orig_pthread_create MT_HIDDEN;
int msgtrace_pthread_create(void *thread, const void *attr, void *(*start)(void *), void *arg);
#endif

/* MSGTRACE_BUFFER_MB, the pool's cap in MiB: its default and its largest value (the Go side's
 * configuration and the early recording before it, rt_launch.c, read the variable alike). */
#define MT_DEFAULT_BUFFER_MB 32
#define MT_MAX_BUFFER_MB 4096
/* Sizes: shadow stack entries per thread, the pool's cap in bytes, the chunk size in bytes
 * (power of two, 4 KiB to 16 MiB). Takes effect for chunks and threads made afterwards. */
int msgtrace_configure(uint32_t stack_depth, uint64_t pool_bytes, uint32_t chunk_bytes);
/* What a thread does when the pool is empty: 0 waits for the drain (default once the drain
 * runs; nothing is lost), 1 drops and counts (always, while no drain runs). */
void msgtrace_set_full_policy(int drop);

struct mt_counters {
	uint64_t threads;  /* threads that registered */
	uint64_t recorded; /* calls written into chunks */
	uint64_t dropped;  /* calls not recorded: no chunk */
	uint64_t overflow; /* calls past the shadow stack */
	uint64_t waits;    /* times a thread waited for a chunk */
	uint64_t wait_ticks;
	uint64_t written;  /* calls the drain encoded into the stream */
	uint64_t lost_bytes; /* stream bytes that could not be written */
	uint64_t chunks;   /* chunks made (pool memory in use = chunks * chunk size) */
	/* Linux: thread states made by the rebound pthread_create before their thread started,
	 * those of them registered at their thread's first traced call, and those freed unused
	 * as their thread ended */
	uint64_t states_made, states_registered, states_unused;
};
void msgtrace_counters(struct mt_counters *c);

/* Tests without a drain: visit every chunk still held (current and handed over, not drained). */
typedef void (*mt_visit_fn)(void *ctx, uint64_t tid, const struct mt_record *r, uint64_t n,
			    uint64_t dropped, uint64_t overflow);
void msgtrace_visit(mt_visit_fn fn, void *ctx);
/* Tests without a drain: every handed-over chunk back to the pool, unread. */
void msgtrace_recycle_all(void);
struct mt_thread *msgtrace_current_thread(void);
/* This thread is never traced (the drain, threads of ours). */
void msgtrace_set_untraced_self(void);

/* The counter the interposers read (rdtsc / CNTVCT_EL0), and its frequency in Hz where the
 * hardware says (CNTFRQ_EL0); 0 where it must be measured (x86). */
uint64_t msgtrace_now_ticks(void);
uint64_t msgtrace_tick_hz(void);

/* Names for the drain: how to turn what the interposers recorded into class and selector
 * names. Unset fields are the Objective-C runtime's (objc/runtime.h). */
struct mt_namer {
	const char *(*class_name)(void *cls);
	const char *(*sel_name)(void *sel);
	void *(*object_class)(void *obj);
	void *(*superclass)(void *cls);
	unsigned char (*is_meta)(void *cls); /* BOOL: only the low byte is the answer */
};
void msgtrace_set_namer(const struct mt_namer *n);

/* The drain (drain.c). */
struct mt_stream_config {
	const char *path;    /* stream file; %p pid, %h host name, %t temporary directory, %% */
	uint32_t period_ms;  /* quiet threads' chunks and open calls collected at least this often */
	int drop;            /* MSGTRACE_FULL=drop */
	double min_us;       /* MSGTRACE_MIN_US: applied in the interposer once the tick rate is known */
	const char *program; /* program name for the process frame ("" = from the system) */
	int ring;            /* MSGTRACE_MODE=ring: keep the last chunks in memory, write them on
			      * msgtrace_stream_flush, at exit, and on SIGUSR2 (when at its default) */
	int cpu;             /* MSGTRACE_CPU (on unless 0): the recording threads' CPU time sampled
			      * into cpu frames (drain_cpu.c) */
};
/* Starts the drain thread; the file is created when there is something to write. Returns 0,
 * or -1 with a message in msgtrace_stream_error(). */
int msgtrace_stream_start(const struct mt_stream_config *cfg);
/* Everything recorded so far (partial chunks, open calls) is written before this returns. */
int msgtrace_stream_flush(void);
/* Final flush, end frame, file closed, drain stopped. Safe to call more than once. */
int msgtrace_stream_close(void);
/* The CPU sampling's cost so far: threads read, and the ns the samples took on the drain. */
void msgtrace_cpu_cost(uint64_t *reads, uint64_t *ns);
/* CPU time the drain thread used so far, in ns (0 when it is not running). */
uint64_t msgtrace_drain_cpu_ns(void);
/* At the exit of a child forked without exec: closes the child's stream. */
void msgtrace_stream_exit_child(void);
/* The stream file's path in this process ("" before anything was written). */
const char *msgtrace_stream_path(void);
/* 1 when the output name was another live process's stream and this one took its pid. */
int msgtrace_stream_pid_added(void);
const char *msgtrace_stream_error(void);
/* Expands a path pattern for a pid; returns 0 or -1 (unknown %-sequence, too long). */
int msgtrace_expand_path(const char *pattern, long pid, char *out, size_t n);
#ifdef __cplusplus
}
#endif
#endif
#endif
