/*
 * msgtrace interposers for x86_64 (SysV / darwin): objc_msgSend and its variants.
 *
 * Each interposer stands in for the runtime function in the importer's pointer slot and
 * tail-jumps to the original with every argument register (rdi rsi rdx rcx r8 r9, rax = the
 * vector count of variadic calls, xmm0-7), the stack pointer and the stack exactly as the caller
 * left them. Only r10 and r11 (caller-saved, no arguments) are used freely; rax and rdx are
 * parked in the shadow entry around rdtsc.
 *
 * Tracing: the caller's return address moves from the stack into a per-thread shadow-stack
 * entry and the stack slot is pointed at msgtrace_after, so the method returns through us with
 * the stack as the caller expects. While the method runs, rbx holds the entry's address (the
 * caller's rbx is saved in the entry) and the CFI says so with DWARF expressions: a debugger,
 * a crash reporter or the C++ unwinder finds the caller's return address at [rbx + E_RET] and
 * its rbx at [rbx + E_SAVE].
 */
#include "asm.h"
#include "rt.h"
#include "trampoline.h"

#if defined(__APPLE__)
/* darwin: our pthread key's slot in the thread's TSD area, %gs:key*8 */
.macro LOAD_SELF reg
	movq SYM(msgtrace_tsd_key)(%rip), \reg
	movq %gs:(,\reg,8), \reg
.endm
#else
/* ELF: initial-exec TLS variable msgtrace_tls at %fs:offset */
.macro LOAD_SELF reg
	movq msgtrace_tls@gottpoff(%rip), \reg
	movq %fs:(\reg), \reg
.endm
#endif

/* msgtrace_after_tail is 2 bytes below msgtrace_after (checked below): a return address in
 * [LOCAL(after_tail), LOCAL(after)] is one of the two return stubs. \reg = the return slot - LOCAL(after_tail), then
 * compared: flags "below or equal" when the slot holds a stub (a tail call from a traced method). */
#define AFTER_TAIL_DIST 2
.macro SLOT_IS_STUB reg
	leaq LOCAL(after_tail)(%rip), \reg
	negq \reg
	addq (%rsp), \reg
	cmpq $(AFTER_TAIL_DIST), \reg
.endm

/* rdtsc into rax as one 64-bit tick; clobbers rdx */
.macro TICK
	rdtsc
	shlq $(32), %rdx
	orq %rdx, %rax
.endm

/* CFI: the caller's rbx is saved at [\base + E_SAVE], its return address at [\base + E_RET].
 * DW_CFA_expression (0x10), register, length 2, DW_OP_bregN (0x70 + N), offset. */
#define CFI_SAVED_IN_RBX .cfi_escape 0x10, 0x03, 0x02, 0x73, E_SAVE; .cfi_escape 0x10, 0x10, 0x02, 0x73, E_RET
#define CFI_RBX_IN_R10   .cfi_escape 0x10, 0x03, 0x02, 0x7a, E_SAVE

/*
 * CFI of the return stub msgtrace_after (see its comment). ELF: a signal frame whose caller's
 * return address is the saved one minus 1, DW_CFA_val_expression (0x16), rip (0x10), length 5:
 *   in the entry:    DW_OP_breg3 (0x73) E_RET, DW_OP_deref (0x06), DW_OP_lit1 (0x31), DW_OP_minus (0x1c)
 *   in the red zone: DW_OP_breg7 (0x77) -8 (0x78), DW_OP_deref, DW_OP_lit1, DW_OP_minus
 * Apple (and MSGTRACE_APPLE_CFI, which tests these rows on Linux): an ordinary frame, the
 * return address itself.
 */
#if defined(__APPLE__) || defined(MSGTRACE_APPLE_CFI)
#define CFI_AFTER_FRAME
#define CFI_AFTER_RET_IN_RBX     .cfi_escape 0x10, 0x10, 0x02, 0x73, E_RET
#define CFI_AFTER_RET_IN_REDZONE .cfi_offset rip, -8
#else
#define CFI_AFTER_FRAME          .cfi_signal_frame
#define CFI_AFTER_RET_IN_RBX     .cfi_escape 0x16, 0x10, 0x05, 0x73, E_RET, 0x06, 0x31, 0x1c
#define CFI_AFTER_RET_IN_REDZONE .cfi_escape 0x16, 0x10, 0x05, 0x77, 0x78, 0x06, 0x31, 0x1c
#endif

/*
 * CLOSE_ONE after: record the shadow entry at r10 as unwound (its call never returned: an
 * exception or a longjmp went past it). r11 = thread, rax = end tick, rdx clobbered. The red
 * zone below rsp carries the push/pop copies. A full chunk calls the slow path (every register
 * kept); after = 1 in msgtrace_after, whose scratch is in the red zone: rsp steps over it.
 */
.macro CLOSE_ONE after
	movq T_REC_CUR(%r11), %rdx
	cmpq T_REC_END(%r11), %rdx
	jb 90f
.if \after
	leaq -128(%rsp), %rsp
	.cfi_adjust_cfa_offset 128
.endif
	call SYM(msgtrace_slow_chunk)           /* a new chunk, or none (dropping) */
.if \after
	leaq 128(%rsp), %rsp
	.cfi_adjust_cfa_offset -128
.endif
	movq T_REC_CUR(%r11), %rdx
	cmpq T_REC_END(%r11), %rdx
	jae 91f
90:	pushq E_START(%r10)
	popq R_START(%rdx)
	movq %rax, R_END(%rdx)
	pushq E_CLS(%r10)
	popq R_CLS(%rdx)
	btsq $(FLAG_SHIFT + 2), R_CLS(%rdx)      /* F_UNWOUND */
	pushq E_SEL(%r10)
	popq R_SEL(%rdx)
	addq $(RECORD_SIZE), T_REC_CUR(%r11)
	jmp 92f
91:	incq T_DROPPED(%r11)
92:
.endm

/*
 * SLOWCALL name, fn: msgtrace_slow_* call the C function fn with every register as it was:
 * general registers and flags pushed, and the whole vector/x87 state (ymm/zmm upper halves,
 * mask registers, st0-st7, MXCSR) saved with XSAVE (area size from CPUID at load; FXSAVE where
 * there is no XSAVE). C code (calloc, glibc's AVX memset ending in vzeroupper, nanosleep) may
 * then run under a traced call's arguments or return values. Callers need no alignment.
 */
.macro SLOWCALL name, fn
FUNC(\name)
	.cfi_startproc
	pushq %rbp
	.cfi_adjust_cfa_offset 8
	.cfi_offset rbp, -16
	movq %rsp, %rbp
	.cfi_def_cfa_register rbp
	pushfq
	pushq %rax
	pushq %rcx
	pushq %rdx
	pushq %rsi
	pushq %rdi
	pushq %r8
	pushq %r9
	pushq %r10
	pushq %r11
	movq SYM(msgtrace_xsave_size)(%rip), %rax
	testq %rax, %rax
	jz 1f
	subq %rax, %rsp                         /* rsp = 64-aligned XSAVE area */
	andq $-64, %rsp
	xorl %eax, %eax                         /* XSAVE header must start zeroed */
	movq %rax, 512(%rsp)
	movq %rax, 520(%rsp)
	movq %rax, 528(%rsp)
	movq %rax, 536(%rsp)
	movq %rax, 544(%rsp)
	movq %rax, 552(%rsp)
	movq %rax, 560(%rsp)
	movq %rax, 568(%rsp)
	movl $-1, %eax                          /* edx:eax = every state component */
	movl $-1, %edx
	xsave64 (%rsp)
	call SYM(\fn)
	movl $-1, %eax
	movl $-1, %edx
	xrstor64 (%rsp)
	jmp 2f
1:	subq $(512), %rsp                       /* no XSAVE: x87 + SSE with FXSAVE */
	andq $-16, %rsp
	fxsave64 (%rsp)
	call SYM(\fn)
	fxrstor64 (%rsp)
2:	leaq -80(%rbp), %rsp                    /* back to the pushed registers */
	popq %r11
	popq %r10
	popq %r9
	popq %r8
	popq %rdi
	popq %rsi
	popq %rdx
	popq %rcx
	popq %rax
	popfq
	popq %rbp
	.cfi_def_cfa rsp, 8
	ret
	.cfi_endproc
END(\name)
.endm

/*
 * INTERPOSE name, orig, recv, sel, super
 *   recv: register with the receiver (super = 0) or the objc_super pointer (super = 1)
 *   sel:  register with the selector
 *   super = 2: the method entry (trampoline_amd64.S): r11 = the trampoline's data
 *   {MD_ORIG, MD_CLS, MD_SEL}, kept at -16(%rsp) in the red zone; the call is named by MD_CLS
 *   (the implementing class) and goes to MD_ORIG; recv, sel and orig are unused.
 * E_RV1 of an entry in flight says who owns it: 0 a send (no method claimed it yet), 1 a method.
 */
.macro INTERPOSE name, orig, recv, sel, super
FUNC(\name)
	.cfi_startproc
.if \super == 2
	movq %r11, -16(%rsp)                    /* method: data pointer into the red zone */
.endif
.if \super == 0
	testq \recv, \recv
	jz 9f                                   /* nil receiver: untraced */
.endif
	cmpl $(0), SYM(msgtrace_active)(%rip)
	je 9f                                   /* tracing off or paused */
1:	LOAD_SELF %r11                          /* r11 = struct mt_thread * */
	testq %r11, %r11
	jz 8f                                   /* first traced call of this thread */
	cmpq $(0), T_BUSY(%r11)
	jne 9f                                  /* excluded thread, or inside the tracer */
	movq T_TOP(%r11), %r10                  /* r10 = the new shadow entry */
	cmpq T_LIMIT(%r11), %r10
	jae 7f                                  /* shadow stack full */
	cmpq T_BASE(%r11), %r10
	je 2f
	cmpq %rsp, E_SP-ENTRY_SIZE(%r10)        /* previous entry's frame at or below ours? */
	jbe 6f
2:	movq %rax, E_RV0(%r10)                  /* park rax (al: vector args) and rdx (arg) */
	movq %rdx, E_RV1(%r10)
.if \super == 2
	movq -16(%rsp), %rax                    /* rax = data: selector and implementing class */
	movq MD_SEL(%rax), %rdx
	movq %rdx, E_SEL(%r10)
	movq MD_CLS(%rax), %rax
.else
	movq \sel, E_SEL(%r10)
.endif
.if \super == 0
	testq SYM(msgtrace_tag_mask)(%rip), \recv
	jnz 3f
	movq (\recv), %rax                      /* class = isa & mask */
	andq SYM(msgtrace_isa_mask)(%rip), %rax
	jmp 4f
3:	movq \recv, %rax                        /* tagged pointer: keep the receiver itself, */
	movq %rax, %rdx                         /* its bits 48-63 (tag bit, index and extended */
	shrq $48, %rdx                          /* index on the MSB layouts) folded into bits */
	shlq $32, %rdx                          /* 32-47, payload on every layout, to leave the */
	movl %eax, %eax                         /* depth and flags bits clear: rax = bits 0-31 */
	orq %rdx, %rax                          /* | bits 48-63 << 32 (the drain unfolds it) */
	btsq $(FLAG_SHIFT + 1), %rax
.elseif \super == 1
	movq 8(\recv), %rax                     /* objc_super.super_class */
	btsq $(FLAG_SHIFT), %rax
.endif
4:	movq %r10, %rdx                         /* depth = (entry - base) / ENTRY_SIZE */
	subq T_BASE(%r11), %rdx
	shlq $(DEPTH_SHIFT - 6), %rdx
	orq %rdx, %rax
	movq %rax, E_CLS(%r10)
	TICK
	movq %rax, E_START(%r10)
	movq (%rsp), %rax
	movq %rax, E_RET(%r10)                  /* caller's return address */
	movq %rsp, E_SP(%r10)
	movq %rbx, E_SAVE(%r10)
	movq %r10, %rbx                         /* rbx = entry while the method runs */
	CFI_SAVED_IN_RBX
	addq $(ENTRY_SIZE), %r10
	movq %r10, T_TOP(%r11)                  /* push */
	leaq LOCAL(after)(%rip), %r10                  /* rax = the caller's return address */
	leaq -AFTER_TAIL_DIST(%r10), %rdx
	subq %rdx, %rax
	cmpq $(AFTER_TAIL_DIST), %rax
	cmovbeq %rdx, %r10                      /* a tail call from a traced method: the inner stub */
	movq %r10, (%rsp)                       /* the method returns into msgtrace_after(_tail) */
	movq E_RV0(%rbx), %rax
	movq E_RV1(%rbx), %rdx
.if \super == 2
	movq $(1), E_RV1(%rbx)                  /* owned by a method */
	movq -16(%rsp), %r10
	jmp *MD_ORIG(%r10)
.else
	movq $(0), E_RV1(%rbx)                  /* a send: a method may claim it */
	jmp *SYM(\orig)(%rip)
.endif
	.cfi_restore rbx
	.cfi_offset rip, -8

6:	/* previous entry's frame is at or below ours: a tail call from a traced method (its return
	 * slot still holds a return stub) nests; anything else is a stale entry to close */
	jb 65f
	movq %rax, T_SCRATCH(%r11)
	SLOT_IS_STUB %rax
	movq T_SCRATCH(%r11), %rax
.if \super == 2
	ja 65f                                  /* not a return stub: a stale entry */
	/* same frame, returning into a return stub: the interposer recorded the send that landed
	 * here (an unclaimed entry of the same selector: name it by the implementing class, one
	 * call), or a traced method tail-called this one (nests) */
	cmpq $(0), E_RV1-ENTRY_SIZE(%r10)
	jne 2b                                  /* owned by a method: a tail call */
	movq %rax, -24(%rsp)
	movq -16(%rsp), %rax
	movq MD_SEL(%rax), %rax
	cmpq %rax, E_SEL-ENTRY_SIZE(%r10)
	movq -24(%rsp), %rax
	jne 2b                                  /* another selector: a tail call */
	movq E_CLS-ENTRY_SIZE(%r10), %rax       /* class word = depth | implementing class */
	shrq $(DEPTH_SHIFT), %rax
	andl $(0xfff), %eax
	shlq $(DEPTH_SHIFT), %rax
	movq -16(%rsp), %r11
	orq MD_CLS(%r11), %rax
	movq %rax, E_CLS-ENTRY_SIZE(%r10)
	movq $(1), E_RV1-ENTRY_SIZE(%r10)       /* claimed */
	movq -24(%rsp), %rax
	jmp *MD_ORIG(%r11)
.else
	jbe 2b
.endif
65:	movq $(1), T_BUSY(%r11)                   /* scratch in use: a signal handler passes through */
	movq %rax, T_SCRATCH(%r11)
	movq %rdx, T_SCRATCH+8(%r11)
	TICK
66:	subq $(ENTRY_SIZE), %r10                  /* r10 = stale entry */
.if \super == 2
	CLOSE_ONE 1                             /* the method entry's data is in the red zone */
.else
	CLOSE_ONE 0
.endif
	movq %r10, T_TOP(%r11)
	cmpq T_BASE(%r11), %r10
	je 68f
	cmpq %rsp, E_SP-ENTRY_SIZE(%r10)
	jb 66b
	jne 68f
	SLOT_IS_STUB %rdx
	ja 66b
68:	movq T_SCRATCH(%r11), %rax
	movq T_SCRATCH+8(%r11), %rdx
	movq $(0), T_BUSY(%r11)
	jmp 1b

7:	incq T_OVERFLOW(%r11)                   /* too deep: this call goes untraced */
	jmp 9f

8:	/* first traced call of this thread: C with every register kept (msgtrace_slow_register);
	 * a method entry keeps its data at -16(rsp): step over the red zone first */
.if \super == 2
	leaq -128(%rsp), %rsp
	.cfi_adjust_cfa_offset 128
.endif
	call SYM(msgtrace_slow_register)
.if \super == 2
	leaq 128(%rsp), %rsp
	.cfi_adjust_cfa_offset -128
.endif
	jmp 1b

.if \super == 2
9:	movq -16(%rsp), %r11                    /* untraced: straight to the original */
	jmp *MD_ORIG(%r11)
.else
9:	jmp *SYM(\orig)(%rip)                   /* untraced: straight to the original */
.endif
	.cfi_endproc
END(\name)
.endm

	.text
SLOWCALL msgtrace_slow_register, msgtrace_register_thread
SLOWCALL msgtrace_slow_chunk, msgtrace_chunk_full
INTERPOSE msgtrace_objc_msgSend,             msgtrace_orig_objc_msgSend,             %rdi, %rsi, 0
INTERPOSE msgtrace_objc_msgSend_fpret,       msgtrace_orig_objc_msgSend_fpret,       %rdi, %rsi, 0
INTERPOSE msgtrace_objc_msgSend_fp2ret,      msgtrace_orig_objc_msgSend_fp2ret,      %rdi, %rsi, 0
INTERPOSE msgtrace_objc_msgSend_stret,       msgtrace_orig_objc_msgSend_stret,       %rsi, %rdx, 0
INTERPOSE msgtrace_objc_msgSendSuper2,       msgtrace_orig_objc_msgSendSuper2,       %rdi, %rsi, 1
INTERPOSE msgtrace_objc_msgSendSuper2_stret, msgtrace_orig_objc_msgSendSuper2_stret, %rsi, %rdx, 1
/* the shared entry of the method trampolines (trampoline_amd64.S) */
INTERPOSE msgtrace_method_entry,             msgtrace_orig_objc_msgSend,             %rdi, %rsi, 2

/*
 * msgtrace_after: every traced method returns here, rsp = the caller's stack pointer after the
 * return, rbx = the shadow entry. Return registers (rax rdx xmm0 xmm1 st0 st1) are kept: rax
 * and rdx are parked in the entry around rdtsc, the others are not touched and no C is called.
 */
/*
 * Unwinding. CFA = rsp + 0: unwinders set the caller's stack pointer to the CFA (LLVM
 * libunwind, the unwinder Apple ships, does so whatever other rule is given), and the caller's
 * stack pointer is exactly this one, so the stub computes the same CFA as the method that
 * returned into it. libgcc's unwinder names a frame by the CFA its callee's FDE computes,
 * minus 1 when that callee is a signal frame, and in its cleanup phase takes the first frame
 * with the handler's name for the handler: an ordinary stub would share its name with the
 * traced send's caller, be taken for the handler, and libgcc aborts the program.
 *
 * ELF: msgtrace_after is a signal frame, so the caller's name is CFA - 1 and the stub's stays
 * CFA. Unwinders look up a signal frame's caller at its exact return address (libgcc's
 * personality routines too), so every row gives the caller's return address minus 1, inside
 * the call instruction, where an ordinary callee's unwind would look: the caller's FDE and its
 * call-site (cleanup, handler) entries are found. LLVM libunwind versions that still subtract
 * 1 land inside the call instruction too.
 *
 * A traced method that tail-calls a traced send leaves msgtrace_after in the return slot: the
 * nested entry's return address is a stub and several stubs share one CFA. Only the outermost
 * may be a signal frame (its callee's name would otherwise equal the caller's), so the inner
 * ones return into msgtrace_after_tail: an ordinary frame, the same code, 2 bytes earlier.
 *
 * Apple (and MSGTRACE_APPLE_CFI, which runs these rows on Linux): LLVM libunwind skips frames
 * without a personality in its cleanup phase, so both stubs stay ordinary frames there.
 *
 * Each stub's FDE starts one byte before its label: unwinders look up an ordinary frame's
 * caller at (return address - 1). msgtrace_after_tail falls through into msgtrace_after: the
 * object has no .subsections_via_symbols, so Mach-O linkers keep the two together.
 */
	.p2align 4
STUB_NAME(msgtrace_after_tail)
	.cfi_startproc                              /* msgtrace_after_tail: an ordinary frame */
	.cfi_def_cfa %rsp, 0
	.cfi_escape 0x10, 0x03, 0x02, 0x73, E_SAVE  /* caller's rbx at [rbx + E_SAVE] */
	.cfi_escape 0x10, 0x10, 0x02, 0x73, E_RET   /* its return address (a stub) at [rbx + E_RET] */
	nop
LOCAL(after_tail):
	nop                                         /* falls through into msgtrace_after */
	.cfi_endproc
#if !defined(__APPLE__)
END(msgtrace_after_tail)
#endif
STUB_NAME(msgtrace_after)
	.cfi_startproc                              /* msgtrace_after */
	CFI_AFTER_FRAME
	.cfi_def_cfa %rsp, 0
	.cfi_escape 0x10, 0x03, 0x02, 0x73, E_SAVE  /* caller's rbx at [rbx + E_SAVE] */
	CFI_AFTER_RET_IN_RBX                        /* its return address from [rbx + E_RET] */
	nop
LOCAL(after):
	movq %rax, E_RV0(%rbx)
	movq %rdx, E_RV1(%rbx)
	TICK                                    /* rax = end tick */
	LOAD_SELF %r11
	leaq ENTRY_SIZE(%rbx), %rdx
	movq T_TOP(%r11), %r10
	cmpq %rdx, %r10
	ja 5f                                   /* entries above ours never returned: close them */
3:	movq %rax, %rdx                         /* rdx = duration */
	subq E_START(%rbx), %rdx
	cmpq SYM(msgtrace_min_ticks)(%rip), %rdx
	jb 6f                                   /* shorter than MSGTRACE_MIN_US: not recorded */
	movq T_REC_CUR(%r11), %r10              /* record {start, end, class, sel} */
	cmpq T_REC_END(%r11), %r10
	jae 4f
31:	movq E_START(%rbx), %rdx
	movq %rdx, R_START(%r10)
	movq %rax, R_END(%r10)
	movq E_CLS(%rbx), %rdx
	movq %rdx, R_CLS(%r10)
	movq E_SEL(%rbx), %rdx
	movq %rdx, R_SEL(%r10)
	addq $(RECORD_SIZE), %r10
	movq %r10, T_REC_CUR(%r11)              /* publish after the fields (x86 stores are ordered) */
	jmp 6f
4:	leaq -128(%rsp), %rsp                   /* chunk full: over the red zone, slow path (every */
	.cfi_adjust_cfa_offset 128              /* register kept: return values, st0/st1, ymm) */
	call SYM(msgtrace_slow_chunk)
	leaq 128(%rsp), %rsp
	.cfi_adjust_cfa_offset -128
	movq T_REC_CUR(%r11), %r10
	cmpq T_REC_END(%r11), %r10
	jb 31b
	incq T_DROPPED(%r11)                    /* no chunk (MSGTRACE_FULL=drop): drop and count */
6:	.cfi_remember_state                     /* path 5 below keeps the rows above */
	movq E_RET(%rbx), %r10
	movq %r10, -8(%rsp)                     /* return address into the red zone */
	CFI_AFTER_RET_IN_REDZONE
	movq %rbx, %r10                         /* r10 = entry */
	CFI_RBX_IN_R10
	movq E_RV0(%r10), %rax
	movq E_RV1(%r10), %rdx
	movq E_SAVE(%r10), %rbx                 /* caller's rbx back */
	.cfi_restore rbx
	movq %r10, T_TOP(%r11)                  /* pop last: the entry stayed ours until here */
	jmp *-8(%rsp)
	.cfi_restore_state

5:	movq %rdx, -16(%rsp)                    /* r10 = top; close down to our entry + 1 */
51:	subq $(ENTRY_SIZE), %r10
	CLOSE_ONE 1
	cmpq -16(%rsp), %r10
	ja 51b
	movq %r10, T_TOP(%r11)
	jmp 3b
	.cfi_endproc
#if !defined(__APPLE__)
END(msgtrace_after)
#endif
.if LOCAL(after) - LOCAL(after_tail) - AFTER_TAIL_DIST
.error "msgtrace_after_tail must be AFTER_TAIL_DIST bytes below msgtrace_after"
.endif

NO_EXEC_STACK
