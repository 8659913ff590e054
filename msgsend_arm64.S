/*
 * msgtrace interposers for arm64 (AAPCS64 / Apple arm64): objc_msgSend and objc_msgSendSuper2.
 *
 * The original sees x0-x8, q0-q7 in full, sp and the stack exactly as the caller left them:
 * the interposer only uses x9-x17 (temporaries that carry no arguments) and x19, whose caller
 * value it saves in the shadow entry. The return address is in x30, so nothing on the stack
 * changes: x30 is parked in the entry and pointed at msgtrace_after.
 *
 * While the method runs, x19 holds the entry's address; the CFI says the caller's return
 * address is at [x19 + E_RET] and its x19 at [x19 + E_SAVE] (DW_CFA_expression, DW_OP_breg19).
 *
 * One macro, INTERPOSE, makes the three kinds of entry, by its mode:
 *   MODE_SEND    objc_msgSend: named by the receiver's class
 *   MODE_SUPER   objc_msgSendSuper2: named by objc_super's class (F_SUPER)
 *   MODE_METHOD  msgtrace_method_entry, where the method trampolines (trampoline_arm64.S) land:
 *                named by the implementing class, forwarded to the trampoline's original IMP
 *
 * Registers
 *   INTERPOSE
 *     x0-x8, q0-q7  the call's arguments (x0 the receiver or objc_super *, x1 the selector):
 *                   never written
 *     x30   the caller's return address; pointed at msgtrace_after(_tail) before the jump
 *     x9    struct mt_thread * (LOAD_SELF)
 *     x10   the new shadow entry (T_TOP); on the close path, the stale entry being closed
 *     x11   the stack's limit, then its base (T_BASE)
 *     x12   the class word being built; x12, x13, x15, x16 temporaries; x14 the tick (close)
 *     x16   the address the call goes to
 *     x17   MODE_METHOD: the trampoline's data (struct mt_tramp_data *) throughout
 *     x19   the entry, from the push until msgtrace_after pops it (caller's x19 in E_SAVE)
 *   msgtrace_after
 *     x0-x8, q0-q7  return values: never written
 *     x19   the entry; x14 the end tick; x9 struct mt_thread *; x10 the top entry; x11 our
 *           entry + 1 (where closing stops); x12 the record; x13, x15, x16 temporaries
 *
 * Nothing is stored on the stack except around calls into C (slow paths), where x29 and x30
 * are pushed as a frame record (FRAME_RECORD bytes) and the CFI follows.
 *
 * A shadow entry (struct mt_entry, ENTRY_SIZE bytes; the thread's stack of them grows up from
 * T_BASE to T_LIMIT, T_TOP the next free one; PREV(x) is field x of the entry below x10):
 *
 *   E_RET     caller's return address (x30)    E_SEL    selector
 *   E_SP      caller's sp: the frame's id      E_SAVE   caller's x19
 *   E_START   start tick                       E_RV0    (unused on arm64)
 *   E_CLS     class word (rt.h)                E_OWNER  while the method runs: OWNER_SEND or
 *                                                       OWNER_METHOD
 *
 * A record (struct mt_record, RECORD_SIZE bytes, written at T_REC_CUR up to T_REC_END):
 * R_START, R_END, R_CLS, R_SEL. Fields side by side are loaded and stored in pairs (ldp/stp):
 * checked below.
 */
#include "asm.h"
#include "rt.h"
#include "trampoline.h"

/* INTERPOSE's modes */
#define MODE_SEND   0
#define MODE_SUPER  1
#define MODE_METHOD 2

/* CLOSE_ONE's argument: whether x30 holds the caller's return address (the entry path), so
 * that the CFI must say where it is while the slow path runs */
#define LR_DEAD 0
#define LR_LIVE 1

/* x29 and x30, pushed around a call */
#define FRAME_RECORD 16
/* the previous entry's field x, from the entry x10 points at */
#define PREV(x) ((x) - ENTRY_SIZE)
/* struct objc_super { id receiver; Class super_class; } */
#define SUPER_CLASS 8

/* DWARF register numbers (AAPCS64's DWARF supplement): x10, x19 and x30, the return address */
#define DWARF_X10 10
#define DWARF_X19 19
#define DWARF_X30 30
.if E_RET > 63 || E_SAVE > 63
.error "E_RET and E_SAVE must fit one-byte SLEB128 offsets in the CFI expressions"
.endif
/* the pairs loaded or stored with one ldp/stp */
.if (E_SP - E_RET - 8) || (E_SEL - E_CLS - 8) || (R_END - R_START - 8) || (R_SEL - R_CLS - 8) || (T_LIMIT - T_TOP - 8) || (T_REC_END - T_REC_CUR - 8)
.error "a pair of fields accessed with ldp/stp is no longer side by side"
.endif
.if OWNER_SEND
.error "OWNER_SEND is stored as xzr"
.endif

#if defined(__APPLE__)
/* darwin: our pthread key's slot in the TSD area that TPIDRRO_EL0 points at (its low 3 bits
 * are not part of the address), 8 bytes a slot */
.macro LOAD_SELF reg, tmp
	mrs \reg, TPIDRRO_EL0
	and \reg, \reg, #~7
	adrp \tmp, SYM(msgtrace_tsd_key)@PAGE
	ldr \tmp, [\tmp, SYM(msgtrace_tsd_key)@PAGEOFF]
	ldr \reg, [\reg, \tmp, lsl #3]
.endm
.macro LOAD_GLOBAL reg, sym
	adrp \reg, SYM(\sym)@PAGE
	ldr \reg, [\reg, SYM(\sym)@PAGEOFF]
.endm
.macro LOAD_GLOBAL_W reg, wreg, sym
	adrp \reg, SYM(\sym)@PAGE
	ldr \wreg, [\reg, SYM(\sym)@PAGEOFF]
.endm
#else
/* ELF: initial-exec TLS variable msgtrace_tls at TPIDR_EL0 + its offset */
.macro LOAD_SELF reg, tmp
	mrs \reg, TPIDR_EL0
	adrp \tmp, :gottprel:msgtrace_tls
	ldr \tmp, [\tmp, #:gottprel_lo12:msgtrace_tls]
	ldr \reg, [\reg, \tmp]
.endm
.macro LOAD_GLOBAL reg, sym
	adrp \reg, \sym
	ldr \reg, [\reg, #:lo12:\sym]
.endm
.macro LOAD_GLOBAL_W reg, wreg, sym
	adrp \reg, \sym
	ldr \wreg, [\reg, #:lo12:\sym]
.endm
#endif

/* CFI: caller's x19 at [\base + E_SAVE], return address (x30) at [\base + E_RET] */
#define CFI_SAVED_IN_X19 \
	.cfi_escape DW_CFA_expression, DWARF_X19, 2, DW_OP_breg(DWARF_X19), E_SAVE SEP \
	.cfi_escape DW_CFA_expression, DWARF_X30, 2, DW_OP_breg(DWARF_X19), E_RET
#define CFI_X19_IN_X10 .cfi_escape DW_CFA_expression, DWARF_X19, 2, DW_OP_breg(DWARF_X10), E_SAVE

/*
 * CFI of the return stub msgtrace_after (see its comment). ELF: a signal frame whose caller's
 * return address is the saved one minus 1:
 *   in the entry: [x19 + E_RET] - 1
 *   in x30:       x30 - 1
 * Apple (and MSGTRACE_APPLE_CFI, which tests these rows on Linux): an ordinary frame, the
 * return address itself.
 */
#if defined(__APPLE__) || defined(MSGTRACE_APPLE_CFI)
#define CFI_AFTER_FRAME
#define CFI_AFTER_RET_IN_X19 .cfi_escape DW_CFA_expression, DWARF_X30, 2, DW_OP_breg(DWARF_X19), E_RET
#define CFI_AFTER_RET_IN_X30 .cfi_restore x30
#else
#define CFI_AFTER_FRAME      .cfi_signal_frame
#define CFI_AFTER_RET_IN_X19 \
	.cfi_escape DW_CFA_val_expression, DWARF_X30, 5, DW_OP_breg(DWARF_X19), E_RET, DW_OP_deref, DW_OP_lit1, DW_OP_minus
#define CFI_AFTER_RET_IN_X30 .cfi_escape DW_CFA_val_expression, DWARF_X30, 2, DW_OP_breg(DWARF_X30), SLEB1(-1)
#endif

/* msgtrace_after_tail is AFTER_TAIL_DIST bytes below msgtrace_after (checked at the end): a
 * return address from after_tail to after is one of the two return stubs. \tmp = \ret -
 * after_tail, compared: flags "lower or same" when \ret is a stub (a tail call from a traced
 * method). */
#define AFTER_TAIL_DIST 8
.macro IS_STUB tmp, ret
	adr \tmp, LOCAL(after_tail)
	sub \tmp, \ret, \tmp
	cmp \tmp, #AFTER_TAIL_DIST
.endm

/* CLOSE_ONE lr: record the entry at x10 as unwound (F_UNWOUND: its call never returned, an
 * exception or a longjmp went past it); end tick x14, x9 = thread; x12 x13 x15 x16 clobbered.
 * A full chunk calls the slow path (every register kept) with x29, x30 pushed; lr is LR_LIVE
 * on the entry path, where x30 is the caller's return address and the CFI says where it went. */
.macro CLOSE_ONE lr
	ldp x12, x13, [x9, #T_REC_CUR]
	cmp x12, x13
	b.lo LOCAL(close_write\@)
	stp x29, x30, [sp, #-FRAME_RECORD]!
	.cfi_adjust_cfa_offset FRAME_RECORD
.if \lr == LR_LIVE
	.cfi_offset x30, -8
.endif
	bl SYM(msgtrace_slow_chunk)             /* a new chunk, or none (dropping) */
	ldp x29, x30, [sp], #FRAME_RECORD
	.cfi_adjust_cfa_offset -FRAME_RECORD
.if \lr == LR_LIVE
	.cfi_restore x30
.endif
	ldp x12, x13, [x9, #T_REC_CUR]
	cmp x12, x13
	b.hs LOCAL(close_drop\@)
LOCAL(close_write\@):                       /* x12 = the record */
	ldr x15, [x10, #E_START]
	stp x15, x14, [x12, #R_START]
	ldp x15, x16, [x10, #E_CLS]
	orr x15, x15, #(F_UNWOUND << FLAG_SHIFT)
	stp x15, x16, [x12, #R_CLS]
	add x12, x12, #RECORD_SIZE
	add x13, x9, #T_REC_CUR
	stlr x12, [x13]
	b LOCAL(close_done\@)
LOCAL(close_drop\@):                        /* no chunk (MSGTRACE_FULL=drop) */
	ldr x12, [x9, #T_DROPPED]
	add x12, x12, #1
	str x12, [x9, #T_DROPPED]
LOCAL(close_done\@):
.endm

/* SLOWCALL name, fn: msgtrace_slow_* call the C function fn with every register as it was:
 * x0-x18, q0-q31 in full, NZCV, FPSR and FPCR saved on the stack (SLOW_FRAME bytes, a
 * multiple of 16), so C may run under a traced call's arguments or return values. Called with
 * bl: the caller saves its own x30.
 *
 *   x29 + 8          | x30                           |
 *   x29              | x29                           |  FRAME_RECORD
 *   sp + SLOW_Q(0)   | q0 ... q31, 16 bytes each     |
 *   sp + SLOW_FPSR   | fpsr, fpcr                    |
 *   sp + SLOW_X18    | x18, nzcv                     |
 *   sp + SLOW_X(0)   | x0 ... x17, 8 bytes each      |  sp = x29 - SLOW_FRAME
 */
#define SLOW_X(n)  ((n) * 8)
#define SLOW_X18   SLOW_X(18)
#define SLOW_FPSR  (SLOW_X18 + 16)
#define SLOW_Q(n)  (SLOW_FPSR + 16 + (n) * 16)
#define SLOW_FRAME SLOW_Q(32)
.if SLOW_FRAME % 16
.error "SLOWCALL's frame must keep sp 16-aligned"
.endif
.macro SLOWCALL name, fn
FUNC(\name)
	.cfi_startproc
	stp x29, x30, [sp, #-FRAME_RECORD]!
	.cfi_def_cfa_offset FRAME_RECORD
	.cfi_offset x29, -FRAME_RECORD
	.cfi_offset x30, -8
	mov x29, sp
	sub sp, sp, #SLOW_FRAME
	stp x0, x1, [sp, #SLOW_X(0)]
	stp x2, x3, [sp, #SLOW_X(2)]
	stp x4, x5, [sp, #SLOW_X(4)]
	stp x6, x7, [sp, #SLOW_X(6)]
	stp x8, x9, [sp, #SLOW_X(8)]
	stp x10, x11, [sp, #SLOW_X(10)]
	stp x12, x13, [sp, #SLOW_X(12)]
	stp x14, x15, [sp, #SLOW_X(14)]
	stp x16, x17, [sp, #SLOW_X(16)]
	mrs x0, nzcv
	stp x18, x0, [sp, #SLOW_X18]
	mrs x0, fpsr
	mrs x1, fpcr
	stp x0, x1, [sp, #SLOW_FPSR]
	stp q0, q1, [sp, #SLOW_Q(0)]
	stp q2, q3, [sp, #SLOW_Q(2)]
	stp q4, q5, [sp, #SLOW_Q(4)]
	stp q6, q7, [sp, #SLOW_Q(6)]
	stp q8, q9, [sp, #SLOW_Q(8)]
	stp q10, q11, [sp, #SLOW_Q(10)]
	stp q12, q13, [sp, #SLOW_Q(12)]
	stp q14, q15, [sp, #SLOW_Q(14)]
	stp q16, q17, [sp, #SLOW_Q(16)]
	stp q18, q19, [sp, #SLOW_Q(18)]
	stp q20, q21, [sp, #SLOW_Q(20)]
	stp q22, q23, [sp, #SLOW_Q(22)]
	stp q24, q25, [sp, #SLOW_Q(24)]
	stp q26, q27, [sp, #SLOW_Q(26)]
	stp q28, q29, [sp, #SLOW_Q(28)]
	stp q30, q31, [sp, #SLOW_Q(30)]
	bl SYM(\fn)
	ldp q0, q1, [sp, #SLOW_Q(0)]
	ldp q2, q3, [sp, #SLOW_Q(2)]
	ldp q4, q5, [sp, #SLOW_Q(4)]
	ldp q6, q7, [sp, #SLOW_Q(6)]
	ldp q8, q9, [sp, #SLOW_Q(8)]
	ldp q10, q11, [sp, #SLOW_Q(10)]
	ldp q12, q13, [sp, #SLOW_Q(12)]
	ldp q14, q15, [sp, #SLOW_Q(14)]
	ldp q16, q17, [sp, #SLOW_Q(16)]
	ldp q18, q19, [sp, #SLOW_Q(18)]
	ldp q20, q21, [sp, #SLOW_Q(20)]
	ldp q22, q23, [sp, #SLOW_Q(22)]
	ldp q24, q25, [sp, #SLOW_Q(24)]
	ldp q26, q27, [sp, #SLOW_Q(26)]
	ldp q28, q29, [sp, #SLOW_Q(28)]
	ldp q30, q31, [sp, #SLOW_Q(30)]
	ldp x0, x1, [sp, #SLOW_FPSR]
	msr fpsr, x0
	msr fpcr, x1
	ldp x18, x0, [sp, #SLOW_X18]
	msr nzcv, x0
	ldp x0, x1, [sp, #SLOW_X(0)]
	ldp x2, x3, [sp, #SLOW_X(2)]
	ldp x4, x5, [sp, #SLOW_X(4)]
	ldp x6, x7, [sp, #SLOW_X(6)]
	ldp x8, x9, [sp, #SLOW_X(8)]
	ldp x10, x11, [sp, #SLOW_X(10)]
	ldp x12, x13, [sp, #SLOW_X(12)]
	ldp x14, x15, [sp, #SLOW_X(14)]
	ldp x16, x17, [sp, #SLOW_X(16)]
	mov sp, x29
	ldp x29, x30, [sp], #FRAME_RECORD
	.cfi_def_cfa_offset 0
	.cfi_restore x29
	.cfi_restore x30
	ret
	.cfi_endproc
END(\name)
.endm

/*
 * INTERPOSE name, orig, mode
 *   name  the interposer; orig  the variable holding the original it forwards to
 *   mode  MODE_SEND (x0 = receiver), MODE_SUPER (x0 = objc_super pointer), selector in x1;
 *         or MODE_METHOD: x17 = the trampoline's data {MD_ORIG, MD_CLS, MD_SEL} (kept in x17
 *         throughout), the call is named by MD_CLS (the implementing class) and goes to
 *         MD_ORIG; orig is unused.
 * E_OWNER of an entry in flight says who made it: OWNER_SEND (no method claimed it yet) or
 * OWNER_METHOD.
 *
 * Its labels (LOCAL(x_\name): one set per interposer):
 *   retry     find the thread and its top entry (again after registering or closing)
 *   push      fill the new entry at x10 and push it
 *   tagged    MODE_SEND: a tagged-pointer receiver
 *   depth     the depth into the class word, then the entry's other fields and the jump
 *   below     the previous entry's frame is at or below ours: nest, claim or close
 *   stale     close stale entries (calls that never returned) down to our frame
 *   close     close the entry below x10, then back to retry
 *   overflow  the shadow stack is full
 *   register  the thread's first traced call
 *   untraced  straight to the original: tracing off or paused falls through into it
 */
.macro INTERPOSE name, orig, mode
FUNC(\name)
	.cfi_startproc
.if \mode == MODE_SEND
	cbz x0, LOCAL(untraced_\name)           /* nil receiver: untraced */
.endif
	LOAD_GLOBAL_W x16, w16, msgtrace_active
	cbnz w16, LOCAL(retry_\name)            /* tracing: record */
LOCAL(untraced_\name):                      /* untraced (off or paused falls through here): */
.if \mode == MODE_METHOD                    /* straight to the original */
	ldr x16, [x17, #MD_ORIG]
.else
	LOAD_GLOBAL x16, \orig
.endif
	br x16
LOCAL(retry_\name):
	LOAD_SELF x9, x16                       /* x9 = struct mt_thread * */
	cbz x9, LOCAL(register_\name)           /* first traced call of this thread */
	ldr x16, [x9, #T_BUSY]
	cbnz x16, LOCAL(untraced_\name)         /* excluded thread, or inside the tracer */
	ldp x10, x11, [x9, #T_TOP]              /* x10 = new entry, x11 = limit */
	cmp x10, x11
	b.hs LOCAL(overflow_\name)              /* shadow stack full */
	ldr x11, [x9, #T_BASE]
	cmp x10, x11
	b.eq LOCAL(push_\name)
	ldr x12, [x10, #PREV(E_SP)]
	mov x13, sp
	cmp x12, x13
	b.ls LOCAL(below_\name)                 /* previous entry's frame at or below ours */
LOCAL(push_\name):
.if \mode == MODE_METHOD
	ldr x12, [x17, #MD_SEL]                 /* selector and implementing class */
	str x12, [x10, #E_SEL]
	ldr x12, [x17, #MD_CLS]
.else
	str x1, [x10, #E_SEL]
.endif
.if \mode == MODE_SEND
	LOAD_GLOBAL x13, msgtrace_tag_mask
	tst x0, x13
	b.ne LOCAL(tagged_\name)
	ldr x12, [x0]                           /* class = isa & mask */
	LOAD_GLOBAL x13, msgtrace_isa_mask
	and x12, x12, x13
	b LOCAL(depth_\name)
LOCAL(tagged_\name):                        /* tagged pointer: keep the receiver, its bits */
	lsr x13, x0, #CLS_BITS                  /* 48-63 (tag bit, index, extended index) folded */
	mov w12, w0                             /* into 32-47 (payload on every layout), leaving */
	orr x12, x12, x13, lsl #TAG_FOLD_SHIFT  /* depth and flags clear; MT_UNFOLD_TAGGED undoes */
	orr x12, x12, #(F_TAGGED << FLAG_SHIFT) /* it */
.elseif \mode == MODE_SUPER
	ldr x12, [x0, #SUPER_CLASS]             /* objc_super.super_class */
	orr x12, x12, #(F_SUPER << FLAG_SHIFT)
.endif
LOCAL(depth_\name):
	sub x13, x10, x11                       /* depth = (entry - base) / ENTRY_SIZE */
	orr x12, x12, x13, lsl #(DEPTH_SHIFT - ENTRY_SHIFT)
	str x12, [x10, #E_CLS]
	mrs x12, CNTVCT_EL0
	str x12, [x10, #E_START]
	mov x13, sp
	stp x30, x13, [x10, #E_RET]             /* caller's return address and sp */
	str x19, [x10, #E_SAVE]
	mov x19, x10                            /* x19 = entry while the method runs */
	CFI_SAVED_IN_X19
	add x10, x10, #ENTRY_SIZE
	str x10, [x9, #T_TOP]                   /* push */
	adr x12, LOCAL(after_tail)              /* x30 = the caller's return address */
	sub x13, x30, x12
	adr x30, LOCAL(after)                   /* the method returns into msgtrace_after, */
	cmp x13, #AFTER_TAIL_DIST
	csel x30, x12, x30, ls                  /* a tail call from a traced method: the inner stub */
.if \mode == MODE_METHOD
	mov x16, #OWNER_METHOD
	str x16, [x19, #E_OWNER]
	ldr x16, [x17, #MD_ORIG]
.else
	str xzr, [x19, #E_OWNER]                /* OWNER_SEND: a method may claim it */
	LOAD_GLOBAL x16, \orig
.endif
	br x16
	.cfi_restore x19
	.cfi_restore x30

LOCAL(below_\name):
	/* a tail call from a traced method (lr = a return stub at the same sp) nests; anything
	 * else at or below is a stale entry: close it as unwound */
	b.lo LOCAL(stale_\name)
	IS_STUB x12, x30
.if \mode == MODE_METHOD
	b.hi LOCAL(stale_\name)                 /* not a return stub: a stale entry */
	/* same frame, returning into a return stub: the interposer recorded the send that landed
	 * here (an unclaimed entry of the same selector: name it by the implementing class, one
	 * call), or a traced method tail-called this one (nests) */
	ldr x12, [x10, #PREV(E_OWNER)]
	cbnz x12, LOCAL(push_\name)             /* not OWNER_SEND (0): a method's, a tail call */
	ldr x12, [x10, #PREV(E_SEL)]
	ldr x13, [x17, #MD_SEL]
	cmp x12, x13
	b.eq LOCAL(claim_\name)
	LOAD_GLOBAL_W x16, w16, msgtrace_sel_by_index
	cbz w16, LOCAL(push_\name)              /* another selector: a tail call */
	ldr x12, [x12]                          /* libobjc2: a selector has a struct in every */
	ldr x13, [x13]                          /* loaded object that uses it, their first word */
	cmp x12, x13                            /* the registered index */
	b.ne LOCAL(push_\name)                  /* another selector: a tail call */
LOCAL(claim_\name):
	ldr x12, [x10, #PREV(E_CLS)]            /* class word = depth | implementing class */
	ubfx x12, x12, #DEPTH_SHIFT, #DEPTH_BITS
	ldr x13, [x17, #MD_CLS]
	orr x12, x13, x12, lsl #DEPTH_SHIFT
	str x12, [x10, #PREV(E_CLS)]
	mov x12, #OWNER_METHOD
	str x12, [x10, #PREV(E_OWNER)]          /* claimed */
	ldr x16, [x17, #MD_ORIG]
	br x16
.else
	b.ls LOCAL(push_\name)                  /* a return stub: a tail call, nests */
.endif
LOCAL(stale_\name):
	mrs x14, CNTVCT_EL0
LOCAL(close_\name):
	sub x10, x10, #ENTRY_SIZE               /* x10 = stale entry */
	CLOSE_ONE LR_LIVE
	str x10, [x9, #T_TOP]
	cmp x10, x11
	b.eq LOCAL(retry_\name)
	ldr x12, [x10, #PREV(E_SP)]
	mov x13, sp
	cmp x12, x13
	b.lo LOCAL(close_\name)                 /* below our frame: stale too */
	b.ne LOCAL(retry_\name)
	IS_STUB x12, x30
	b.hi LOCAL(close_\name)                 /* our frame, not a tail call: stale too */
	b LOCAL(retry_\name)

LOCAL(overflow_\name):
	ldr x12, [x9, #T_OVERFLOW]              /* too deep: untraced, counted */
	add x12, x12, #1
	str x12, [x9, #T_OVERFLOW]
	b LOCAL(untraced_\name)

LOCAL(register_\name):
	stp x29, x30, [sp, #-FRAME_RECORD]!     /* first traced call of this thread: C with */
	.cfi_def_cfa_offset FRAME_RECORD        /* every register kept; x30 saved here */
	.cfi_offset x29, -FRAME_RECORD
	.cfi_offset x30, -8
	bl SYM(msgtrace_slow_register)
	ldp x29, x30, [sp], #FRAME_RECORD
	.cfi_def_cfa_offset 0
	.cfi_restore x29
	.cfi_restore x30
	b LOCAL(retry_\name)

	.cfi_endproc
END(\name)
.endm

	.text
SLOWCALL msgtrace_slow_register, msgtrace_register_thread
SLOWCALL msgtrace_slow_chunk, msgtrace_chunk_full
INTERPOSE msgtrace_objc_msgSend,       msgtrace_orig_objc_msgSend,       MODE_SEND
INTERPOSE msgtrace_objc_msgSendSuper2, msgtrace_orig_objc_msgSendSuper2, MODE_SUPER
/* the shared entry of the method trampolines (trampoline_arm64.S) */
INTERPOSE msgtrace_method_entry,       msgtrace_orig_objc_msgSend,       MODE_METHOD

/*
 * msgtrace_after: every traced method returns here with sp as the caller expects and x19 = the
 * shadow entry. x0-x8 and q0-q7 (every return register, Swift's included) are not touched.
 *
 * Labels: after_record (the call's duration decides), after_write (a record at x12),
 * after_full (the chunk is full), after_return (pop and return), after_close (entries above
 * ours never returned: close them first), after_broken (x19 is not an entry in flight: the
 * method did not keep it; a fault before anything is read or written through it).
 */
/*
 * Unwinding (see msgsend_amd64.S for the reasons): CFA = sp + 0, the caller's sp. ELF:
 * msgtrace_after is a signal frame and every row gives the caller's return address minus 1;
 * inner stubs of a tail-call run return into msgtrace_after_tail, an ordinary frame, the same
 * code 8 bytes earlier. Apple (and MSGTRACE_APPLE_CFI): both ordinary frames. Each FDE starts
 * one instruction before its label: unwinders look up an ordinary frame's caller at
 * (return address - 1).
 */
	.p2align 4
/* names for debuggers and profilers, covering the stubs' whole FDEs; the return targets are
 * local labels. Mach-O allows no global label inside a CFI region, and its linkers keep an FDE
 * only for the symbol it starts at (__unwind_info then points each stub at its DWARF rows). */
STUB_NAME(msgtrace_after_tail)
	.cfi_startproc                          /* msgtrace_after_tail: an ordinary frame */
	.cfi_def_cfa sp, 0
	CFI_SAVED_IN_X19                        /* caller's x19 and return address (a stub) */
	nop
LOCAL(after_tail):
	nop                                     /* falls through into msgtrace_after */
	.cfi_endproc
END(msgtrace_after_tail)
STUB_NAME(msgtrace_after)
	.cfi_startproc                          /* msgtrace_after */
	CFI_AFTER_FRAME
	.cfi_def_cfa sp, 0
	.cfi_escape DW_CFA_expression, DWARF_X19, 2, DW_OP_breg(DWARF_X19), E_SAVE /* caller's x19 */
	CFI_AFTER_RET_IN_X19                    /* its return address from [x19 + E_RET] */
	nop
LOCAL(after):             /* local: ADR to a global needs a relocation Mach-O lacks */
	mrs x14, CNTVCT_EL0                     /* end tick */
	LOAD_SELF x9, x16
	add x11, x19, #ENTRY_SIZE
	ldr x10, [x9, #T_TOP]
	ldr x12, [x9, #T_BASE]                  /* x19 must be an entry of ours in flight: a */
	cmp x19, x12                            /* method that did not keep it (it must) faults */
	b.lo LOCAL(after_broken)                /* here, before anything is read or written */
	cmp x19, x10                            /* through it or closed down to it */
	b.hs LOCAL(after_broken)
	cmp x10, x11
	b.hi LOCAL(after_close)                 /* entries above ours never returned */
LOCAL(after_record):
	ldr x15, [x19, #E_START]                /* x16 = duration */
	sub x16, x14, x15
	LOAD_GLOBAL x13, msgtrace_min_ticks
	cmp x16, x13
	b.lo LOCAL(after_return)                /* shorter than MSGTRACE_MIN_US: not recorded */
	ldp x12, x13, [x9, #T_REC_CUR]          /* record {start, end, class, sel} */
	cmp x12, x13
	b.hs LOCAL(after_full)
LOCAL(after_write):
	ldr x15, [x19, #E_START]
	stp x15, x14, [x12, #R_START]
	ldp x15, x16, [x19, #E_CLS]
	stp x15, x16, [x12, #R_CLS]
	add x12, x12, #RECORD_SIZE
	add x13, x9, #T_REC_CUR
	stlr x12, [x13]                         /* publish after the fields */
	b LOCAL(after_return)
LOCAL(after_full):
	stp x29, x30, [sp, #-FRAME_RECORD]!     /* chunk full: slow path, every register kept */
	.cfi_adjust_cfa_offset FRAME_RECORD
	bl SYM(msgtrace_slow_chunk)
	ldp x29, x30, [sp], #FRAME_RECORD
	.cfi_adjust_cfa_offset -FRAME_RECORD
	ldp x12, x13, [x9, #T_REC_CUR]
	cmp x12, x13
	b.lo LOCAL(after_write)
	ldr x12, [x9, #T_DROPPED]               /* no chunk (MSGTRACE_FULL=drop): drop and count */
	add x12, x12, #1
	str x12, [x9, #T_DROPPED]
LOCAL(after_return):
	.cfi_remember_state                     /* after_close below keeps the rows above */
	ldr x30, [x19, #E_RET]                  /* caller's return address */
	CFI_AFTER_RET_IN_X30
	mov x10, x19
	CFI_X19_IN_X10
	ldr x19, [x10, #E_SAVE]                 /* caller's x19 */
	.cfi_restore x19
	str x10, [x9, #T_TOP]                   /* pop last */
	ret
	.cfi_restore_state

LOCAL(after_close):
	sub x10, x10, #ENTRY_SIZE               /* close entries above ours */
	CLOSE_ONE LR_DEAD
	cmp x10, x11
	b.hi LOCAL(after_close)
	str x10, [x9, #T_TOP]
	b LOCAL(after_record)

LOCAL(after_broken):                        /* x19 is no entry in flight: SIGTRAP in the */
	brk #0xf19                              /* stub, whose crash note names the top entry */
	.cfi_endproc
END(msgtrace_after)
.if LOCAL(after) - LOCAL(after_tail) - AFTER_TAIL_DIST
.error "msgtrace_after_tail must be AFTER_TAIL_DIST bytes below msgtrace_after"
.endif

NO_EXEC_STACK
