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
 * Registers: x9 = struct mt_thread *, x10 = entry, x11 = base or limit, x12-x16 temporaries,
 * x14 = tick on the close paths.
 */
#include "asm.h"
#include "rt.h"
#include "trampoline.h"

#if defined(__APPLE__)
/* darwin: our pthread key's slot in the TSD area that TPIDRRO_EL0 points at */
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

/* CFI: caller's x19 at [\base + E_SAVE], return address (x30) at [\base + E_RET]:
 * DW_CFA_expression (0x10), register, length 2, DW_OP_bregN (0x70 + N), offset */
#define CFI_SAVED_IN_X19 .cfi_escape 0x10, 19, 0x02, 0x83, E_SAVE SEP .cfi_escape 0x10, 30, 0x02, 0x83, E_RET
#define CFI_X19_IN_X10   .cfi_escape 0x10, 19, 0x02, 0x7a, E_SAVE

/*
 * CFI of the return stub msgtrace_after (see its comment). ELF: a signal frame whose caller's
 * return address is the saved one minus 1, DW_CFA_val_expression (0x16), x30, length 5 or 2:
 *   in the entry: DW_OP_breg19 (0x83) E_RET, DW_OP_deref (0x06), DW_OP_lit1 (0x31), DW_OP_minus (0x1c)
 *   in x30:       DW_OP_breg30 (0x8e) -1 (0x7f)
 * Apple (and MSGTRACE_APPLE_CFI, which tests these rows on Linux): an ordinary frame, the
 * return address itself.
 */
#if defined(__APPLE__) || defined(MSGTRACE_APPLE_CFI)
#define CFI_AFTER_FRAME
#define CFI_AFTER_RET_IN_X19 .cfi_escape 0x10, 30, 0x02, 0x83, E_RET
#define CFI_AFTER_RET_IN_X30 .cfi_restore x30
#else
#define CFI_AFTER_FRAME      .cfi_signal_frame
#define CFI_AFTER_RET_IN_X19 .cfi_escape 0x16, 30, 0x05, 0x83, E_RET, 0x06, 0x31, 0x1c
#define CFI_AFTER_RET_IN_X30 .cfi_escape 0x16, 30, 0x02, 0x8e, 0x7f
#endif

/* msgtrace_after_tail is 8 bytes below msgtrace_after (checked below): a return address in
 * [after_tail, after] is one of the two return stubs. \tmp = \ret - after_tail, compared:
 * flags "lower or same" when \ret is a stub (a tail call from a traced method). */
#define AFTER_TAIL_DIST 8
.macro IS_STUB tmp, ret
	adr \tmp, LOCAL(after_tail)
	sub \tmp, \ret, \tmp
	cmp \tmp, #AFTER_TAIL_DIST
.endm

/* CLOSE_ONE entry: record the entry at x10 as unwound (end tick x14); x9 = thread; x12 x13 x15
 * x16. A full chunk calls the slow path (every register kept); entry = 1 on the entry path,
 * where x30 is the caller's return address (saved around the call, and the CFI says where). */
.macro CLOSE_ONE entry
	ldp x12, x13, [x9, #T_REC_CUR]
	cmp x12, x13
	b.lo 90f
	stp x29, x30, [sp, #-16]!
	.cfi_adjust_cfa_offset 16
.if \entry
	.cfi_offset x30, -8
.endif
	bl SYM(msgtrace_slow_chunk)             /* a new chunk, or none (dropping) */
	ldp x29, x30, [sp], #16
	.cfi_adjust_cfa_offset -16
.if \entry
	.cfi_restore x30
.endif
	ldp x12, x13, [x9, #T_REC_CUR]
	cmp x12, x13
	b.hs 91f
90:	ldr x15, [x10, #E_START]
	stp x15, x14, [x12, #R_START]
	ldp x15, x16, [x10, #E_CLS]
	orr x15, x15, #(F_UNWOUND << FLAG_SHIFT)
	stp x15, x16, [x12, #R_CLS]
	add x12, x12, #RECORD_SIZE
	add x13, x9, #T_REC_CUR
	stlr x12, [x13]
	b 92f
91:	ldr x12, [x9, #T_DROPPED]
	add x12, x12, #1
	str x12, [x9, #T_DROPPED]
92:
.endm

/* SLOWCALL name, fn: msgtrace_slow_* call the C function fn with every register as it was:
 * x0-x18, q0-q31 in full, NZCV, FPSR and FPCR saved on the stack (688 bytes, 16-aligned), so C
 * may run under a traced call's arguments or return values. Called with bl: the caller saves
 * its own x30. */
.macro SLOWCALL name, fn
FUNC(\name)
	.cfi_startproc
	stp x29, x30, [sp, #-16]!
	.cfi_def_cfa_offset 16
	.cfi_offset x29, -16
	.cfi_offset x30, -8
	mov x29, sp
	sub sp, sp, #688
	stp x0, x1, [sp, #0]
	stp x2, x3, [sp, #16]
	stp x4, x5, [sp, #32]
	stp x6, x7, [sp, #48]
	stp x8, x9, [sp, #64]
	stp x10, x11, [sp, #80]
	stp x12, x13, [sp, #96]
	stp x14, x15, [sp, #112]
	stp x16, x17, [sp, #128]
	mrs x0, nzcv
	stp x18, x0, [sp, #144]
	mrs x0, fpsr
	mrs x1, fpcr
	stp x0, x1, [sp, #160]
	stp q0, q1, [sp, #176]
	stp q2, q3, [sp, #208]
	stp q4, q5, [sp, #240]
	stp q6, q7, [sp, #272]
	stp q8, q9, [sp, #304]
	stp q10, q11, [sp, #336]
	stp q12, q13, [sp, #368]
	stp q14, q15, [sp, #400]
	stp q16, q17, [sp, #432]
	stp q18, q19, [sp, #464]
	stp q20, q21, [sp, #496]
	stp q22, q23, [sp, #528]
	stp q24, q25, [sp, #560]
	stp q26, q27, [sp, #592]
	stp q28, q29, [sp, #624]
	stp q30, q31, [sp, #656]
	bl SYM(\fn)
	ldp q0, q1, [sp, #176]
	ldp q2, q3, [sp, #208]
	ldp q4, q5, [sp, #240]
	ldp q6, q7, [sp, #272]
	ldp q8, q9, [sp, #304]
	ldp q10, q11, [sp, #336]
	ldp q12, q13, [sp, #368]
	ldp q14, q15, [sp, #400]
	ldp q16, q17, [sp, #432]
	ldp q18, q19, [sp, #464]
	ldp q20, q21, [sp, #496]
	ldp q22, q23, [sp, #528]
	ldp q24, q25, [sp, #560]
	ldp q26, q27, [sp, #592]
	ldp q28, q29, [sp, #624]
	ldp q30, q31, [sp, #656]
	ldp x0, x1, [sp, #160]
	msr fpsr, x0
	msr fpcr, x1
	ldp x18, x0, [sp, #144]
	msr nzcv, x0
	ldp x0, x1, [sp, #0]
	ldp x2, x3, [sp, #16]
	ldp x4, x5, [sp, #32]
	ldp x6, x7, [sp, #48]
	ldp x8, x9, [sp, #64]
	ldp x10, x11, [sp, #80]
	ldp x12, x13, [sp, #96]
	ldp x14, x15, [sp, #112]
	ldp x16, x17, [sp, #128]
	mov sp, x29
	ldp x29, x30, [sp], #16
	.cfi_def_cfa_offset 0
	.cfi_restore x29
	.cfi_restore x30
	ret
	.cfi_endproc
END(\name)
.endm

/* INTERPOSE name, orig, super: receiver (super = 0) or objc_super pointer (super = 1) in x0,
 * selector in x1. super = 2: the method entry (trampoline_arm64.S): x17 = the trampoline's data
 * {MD_ORIG, MD_CLS, MD_SEL} (kept in x17 throughout), the call is named by MD_CLS (the
 * implementing class) and goes to MD_ORIG; orig is unused.
 * E_RV1 of an entry in flight says who owns it: 0 a send (no method claimed it yet), 1 a method. */
.macro INTERPOSE name, orig, super
FUNC(\name)
	.cfi_startproc
.if \super == 0
	cbz x0, 9f                              /* nil receiver: untraced */
.endif
	LOAD_GLOBAL_W x16, w16, msgtrace_active
	cbz w16, 9f                             /* off or paused */
1:	LOAD_SELF x9, x16                       /* x9 = struct mt_thread * */
	cbz x9, 8f                              /* first traced call of this thread */
	ldr x16, [x9, #T_BUSY]
	cbnz x16, 9f                            /* excluded thread, or inside the tracer */
	ldp x10, x11, [x9, #T_TOP]              /* x10 = new entry, x11 = limit */
	cmp x10, x11
	b.hs 7f                                 /* shadow stack full */
	ldr x11, [x9, #T_BASE]
	cmp x10, x11
	b.eq 2f
	ldr x12, [x10, #(E_SP - ENTRY_SIZE)]
	mov x13, sp
	cmp x12, x13
	b.ls 6f                                 /* previous entry's frame at or below ours */
.if \super == 2
2:	ldr x12, [x17, #MD_SEL]                 /* method: selector and implementing class */
	str x12, [x10, #E_SEL]
	ldr x12, [x17, #MD_CLS]
.else
2:	str x1, [x10, #E_SEL]
.endif
.if \super == 0
	LOAD_GLOBAL x13, msgtrace_tag_mask
	tst x0, x13
	b.ne 3f
	ldr x12, [x0]                           /* class = isa & mask */
	LOAD_GLOBAL x13, msgtrace_isa_mask
	and x12, x12, x13
	b 4f
3:	lsr x13, x0, #48                        /* tagged pointer: keep the receiver, its bits */
	mov w12, w0                             /* 48-63 (tag bit, index, extended index) folded */
	orr x12, x12, x13, lsl #32              /* into 32-47 (payload on every layout), leaving */
	orr x12, x12, #(F_TAGGED << FLAG_SHIFT) /* depth and flags clear; the drain unfolds it */
.elseif \super == 1
	ldr x12, [x0, #8]                       /* objc_super.super_class */
	orr x12, x12, #(F_SUPER << FLAG_SHIFT)
.endif
4:	sub x13, x10, x11                       /* depth = (entry - base) / ENTRY_SIZE */
	orr x12, x12, x13, lsl #(DEPTH_SHIFT - 6)
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
.if \super == 2
	mov x16, #1
	str x16, [x19, #E_RV1]                  /* owned by a method */
	ldr x16, [x17, #MD_ORIG]
.else
	str xzr, [x19, #E_RV1]                  /* a send: a method may claim it */
	LOAD_GLOBAL x16, \orig
.endif
	br x16
	.cfi_restore x19
	.cfi_restore x30

6:	/* a tail call from a traced method (lr = a return stub at the same sp) nests; anything
	 * else at or below is a stale entry: close it as unwound */
	b.lo 65f
	IS_STUB x12, x30
.if \super == 2
	b.hi 65f                                /* not a return stub: a stale entry */
	/* same frame, returning into a return stub: the interposer recorded the send that landed
	 * here (an unclaimed entry of the same selector: name it by the implementing class, one
	 * call), or a traced method tail-called this one (nests) */
	ldr x12, [x10, #(E_RV1 - ENTRY_SIZE)]
	cbnz x12, 2b                            /* owned by a method: a tail call */
	ldr x12, [x10, #(E_SEL - ENTRY_SIZE)]
	ldr x13, [x17, #MD_SEL]
	cmp x12, x13
	b.ne 2b                                 /* another selector: a tail call */
	ldr x12, [x10, #(E_CLS - ENTRY_SIZE)]   /* class word = depth | implementing class */
	ubfx x12, x12, #DEPTH_SHIFT, #12
	ldr x13, [x17, #MD_CLS]
	orr x12, x13, x12, lsl #DEPTH_SHIFT
	str x12, [x10, #(E_CLS - ENTRY_SIZE)]
	mov x12, #1
	str x12, [x10, #(E_RV1 - ENTRY_SIZE)]   /* claimed */
	ldr x16, [x17, #MD_ORIG]
	br x16
.else
	b.ls 2b
.endif
65:	mrs x14, CNTVCT_EL0
66:	sub x10, x10, #ENTRY_SIZE
	CLOSE_ONE 1
	str x10, [x9, #T_TOP]
	cmp x10, x11
	b.eq 1b
	ldr x12, [x10, #(E_SP - ENTRY_SIZE)]
	mov x13, sp
	cmp x12, x13
	b.lo 66b
	b.ne 1b
	IS_STUB x12, x30
	b.hi 66b
	b 1b

7:	ldr x12, [x9, #T_OVERFLOW]              /* too deep: untraced, counted */
	add x12, x12, #1
	str x12, [x9, #T_OVERFLOW]
	b 9f

8:	stp x29, x30, [sp, #-16]!               /* first traced call of this thread: C with */
	.cfi_def_cfa_offset 16                  /* every register kept; x30 saved here */
	.cfi_offset x29, -16
	.cfi_offset x30, -8
	bl SYM(msgtrace_slow_register)
	ldp x29, x30, [sp], #16
	.cfi_def_cfa_offset 0
	.cfi_restore x29
	.cfi_restore x30
	b 1b

.if \super == 2
9:	ldr x16, [x17, #MD_ORIG]                /* untraced: straight to the original */
.else
9:	LOAD_GLOBAL x16, \orig                  /* untraced: straight to the original */
.endif
	br x16
	.cfi_endproc
END(\name)
.endm

	.text
SLOWCALL msgtrace_slow_register, msgtrace_register_thread
SLOWCALL msgtrace_slow_chunk, msgtrace_chunk_full
INTERPOSE msgtrace_objc_msgSend,       msgtrace_orig_objc_msgSend,       0
INTERPOSE msgtrace_objc_msgSendSuper2, msgtrace_orig_objc_msgSendSuper2, 1
/* the shared entry of the method trampolines (trampoline_arm64.S) */
INTERPOSE msgtrace_method_entry,       msgtrace_orig_objc_msgSend,       2

/*
 * msgtrace_after: every traced method returns here with sp as the caller expects and x19 = the
 * shadow entry. x0-x8 and q0-q7 (every return register, Swift's included) are not touched.
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
#if !defined(__APPLE__)
END(msgtrace_after_tail)
#endif
STUB_NAME(msgtrace_after)
	.cfi_startproc                          /* msgtrace_after */
	CFI_AFTER_FRAME
	.cfi_def_cfa sp, 0
	.cfi_escape 0x10, 19, 0x02, 0x83, E_SAVE  /* caller's x19 at [x19 + E_SAVE] */
	CFI_AFTER_RET_IN_X19                    /* its return address from [x19 + E_RET] */
	nop
LOCAL(after):             /* local: ADR to a global needs a relocation Mach-O lacks */
	mrs x14, CNTVCT_EL0                     /* end tick */
	LOAD_SELF x9, x16
	add x11, x19, #ENTRY_SIZE
	ldr x10, [x9, #T_TOP]
	cmp x10, x11
	b.hi 5f                                 /* entries above ours never returned */
3:	ldr x15, [x19, #E_START]                /* x16 = duration */
	sub x16, x14, x15
	LOAD_GLOBAL x13, msgtrace_min_ticks
	cmp x16, x13
	b.lo 6f                                 /* shorter than MSGTRACE_MIN_US: not recorded */
	ldp x12, x13, [x9, #T_REC_CUR]          /* record {start, end, class, sel} */
	cmp x12, x13
	b.hs 4f
31:	ldr x15, [x19, #E_START]
	stp x15, x14, [x12, #R_START]
	ldp x15, x16, [x19, #E_CLS]
	stp x15, x16, [x12, #R_CLS]
	add x12, x12, #RECORD_SIZE
	add x13, x9, #T_REC_CUR
	stlr x12, [x13]                         /* publish after the fields */
	b 6f
4:	stp x29, x30, [sp, #-16]!               /* chunk full: slow path, every register kept */
	.cfi_adjust_cfa_offset 16
	bl SYM(msgtrace_slow_chunk)
	ldp x29, x30, [sp], #16
	.cfi_adjust_cfa_offset -16
	ldp x12, x13, [x9, #T_REC_CUR]
	cmp x12, x13
	b.lo 31b
	ldr x12, [x9, #T_DROPPED]               /* no chunk (MSGTRACE_FULL=drop): drop and count */
	add x12, x12, #1
	str x12, [x9, #T_DROPPED]
6:	.cfi_remember_state                     /* path 5 below keeps the rows above */
	ldr x30, [x19, #E_RET]                  /* caller's return address */
	CFI_AFTER_RET_IN_X30
	mov x10, x19
	CFI_X19_IN_X10
	ldr x19, [x10, #E_SAVE]                 /* caller's x19 */
	.cfi_restore x19
	str x10, [x9, #T_TOP]                   /* pop last */
	ret
	.cfi_restore_state

5:	sub x10, x10, #ENTRY_SIZE               /* close entries above ours */
	CLOSE_ONE 0
	cmp x10, x11
	b.hi 5b
	str x10, [x9, #T_TOP]
	b 3b
	.cfi_endproc
#if !defined(__APPLE__)
END(msgtrace_after)
#endif
.if LOCAL(after) - LOCAL(after_tail) - AFTER_TAIL_DIST
.error "msgtrace_after_tail must be AFTER_TAIL_DIST bytes below msgtrace_after"
.endif

NO_EXEC_STACK
