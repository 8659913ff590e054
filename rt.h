/*
 * msgtrace interposer runtime: the per-thread state the assembly interposers read and write.
 * This header is included by the C runtime (rt.c) and by the assembly (msgsend_*.S), so the
 * layout is spelled as offsets; rt.c checks them against the C structs at compile time.
 */
#ifndef MSGTRACE_RT_H
#define MSGTRACE_RT_H

/* struct mt_entry: one traced call in flight (shadow stack). */
#define E_RET   0   /* caller's return address (replaced on the real stack by mt_after) */
#define E_SP    8   /* caller's stack pointer after the call returns: identifies the frame */
#define E_START 16  /* start tick */
#define E_CLS   24  /* class | depth << 48 | flags << 60 */
#define E_SEL   32  /* selector */
#define E_SAVE  40  /* caller's callee-saved register that holds the entry meanwhile (rbx / x19) */
#define E_RV0   48  /* scratch for return registers while recording */
#define E_RV1   56
#define ENTRY_SIZE 64

/* struct mt_record: one finished call (32 bytes). */
#define R_START 0
#define R_END   8
#define R_CLS   16  /* as E_CLS */
#define R_SEL   24
#define RECORD_SIZE 32

/* struct mt_thread: per-thread state, found through TLS. */
#define T_TOP      0   /* next free shadow entry */
#define T_LIMIT    8   /* end of the shadow stack */
#define T_BASE     16  /* first shadow entry */
#define T_REC_CUR  24  /* next free record */
#define T_REC_END  32  /* end of the record buffer */
#define T_DROPPED  40  /* records dropped: buffer full */
#define T_OVERFLOW 48  /* calls passed through untraced: shadow stack full */
#define T_BUSY     56  /* non-zero: pass through (excluded thread, or inside the tracer) */
#define T_SCRATCH  64  /* three words of scratch for the entry slow paths */
#define T_STACK    88  /* the shadow stack itself */

/* flags in the top 4 bits of E_CLS / R_CLS */
#define F_SUPER   1  /* class is the objc_super class: the method ran in its superclass */
#define F_TAGGED  2  /* receiver was a tagged pointer: the field holds the receiver itself */
#define F_UNWOUND 4  /* the call did not return: closed when an exception or longjmp skipped it */
#define CLS_BITS  48
#define DEPTH_SHIFT 48
#define FLAG_SHIFT 60

#ifndef __ASSEMBLER__
#include <stddef.h>
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif

struct mt_entry {
	uint64_t ret, sp, start, cls, sel, save, rv0, rv1;
};

struct mt_record {
	uint64_t start, end, cls, sel;
};

struct mt_thread {
	struct mt_entry *top, *limit, *base;
	struct mt_record *rec_cur, *rec_end;
	uint64_t dropped, overflow;
	uint64_t busy;
	uint64_t scratch[3];
	struct mt_entry stack[]; /* shadow stack, then bookkeeping in struct mt_thread_info */
};

/* Hidden: the assembly reaches these PC-relatively, which a shared library allows only for
 * symbols that cannot be preempted. */
#define MT_HIDDEN __attribute__((visibility("hidden")))
/* Interposer configuration, read by the assembly on every call. */
extern volatile uint32_t msgtrace_active MT_HIDDEN; /* 0: every call is a pass-through */
extern uint64_t msgtrace_isa_mask MT_HIDDEN;        /* object's isa & mask = class */
extern uint64_t msgtrace_tag_mask MT_HIDDEN;        /* receiver & mask != 0: tagged pointer */
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

/* C side (rt.c). */
struct mt_thread *msgtrace_register_thread(void); /* slow path: first traced call of a thread */
int msgtrace_configure(uint32_t stack_depth, uint64_t buffer_records);
struct mt_counters {
	uint64_t threads, recorded, dropped, overflow;
};
void msgtrace_counters(struct mt_counters *c);
/* Visit every registered thread's records (under the registry lock). */
typedef void (*mt_visit_fn)(void *ctx, uint64_t tid, const struct mt_record *r, uint64_t n,
			    uint64_t dropped, uint64_t overflow);
void msgtrace_visit(mt_visit_fn fn, void *ctx);
struct mt_thread *msgtrace_current_thread(void);
/* A copy of every registered thread's bookkeeping (the records themselves are not copied):
 * fills up to max entries and returns the number of threads. */
struct mt_snapshot {
	uint64_t tid, count, dropped, overflow;
	const struct mt_record *records;
	int main;
	char name[64];
};
size_t msgtrace_snapshot(struct mt_snapshot *out, size_t max);
/* The counter the interposers read (rdtsc / CNTVCT_EL0), and its frequency in Hz where the
 * hardware says (CNTFRQ_EL0); 0 where it must be calibrated against a clock (x86). */
uint64_t msgtrace_now_ticks(void);
uint64_t msgtrace_tick_hz(void);
#ifdef __cplusplus
}
#endif
#endif
#endif
