/*
 * msgtrace interposers for x86_64 (SysV / darwin): objc_msgSend and its variants.
 * One job, in one file of over 600 lines: the interposers, their slow-path calls into C and the
 * return stub share the shadow entry's layout, the red-zone slots and the CFI rows.
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
 *
 * One macro, INTERPOSE, makes the three kinds of entry, by its mode:
 *   MODE_SEND    objc_msgSend(_fpret, _fp2ret, _stret): named by the receiver's class
 *   MODE_SUPER   objc_msgSendSuper2(_stret): named by objc_super's class (F_SUPER)
 *   MODE_METHOD  msgtrace_method_entry, where the method trampolines (trampoline_amd64.S) land:
 *                named by the implementing class, forwarded to the trampoline's original IMP
 *
 * Registers
 *   INTERPOSE
 *     rdi rsi rdx rcx r8 r9 rax xmm0-7  the call's arguments: as the caller left them when the
 *                              original is entered (rax, rdx parked in E_RV0/E_RV1 meanwhile)
 *     recv, sel                the macro's registers with the receiver (or objc_super *) and
 *                              the selector: rdi, rsi; rsi, rdx for the _stret variants
 *     r11   on entry in MODE_METHOD: the trampoline's data (struct mt_tramp_data *), moved to
 *           RZ_DATA; then struct mt_thread * (LOAD_SELF)
 *     r10   the new shadow entry (T_TOP); on the close path, the stale entry being closed
 *     rax   the class word being built, then the start tick, then the caller's return address
 *     rdx   scratch: the depth, the tick's high half, the return stub
 *     rbx   the entry, from the push until msgtrace_after pops it (caller's rbx in E_SAVE)
 *   msgtrace_after
 *     rbx   the entry; rax rdx xmm0 xmm1 st0 st1: return values (rax, rdx parked in E_RV0/E_RV1)
 *     rax   the end tick; r11 struct mt_thread *; r10 the top entry, then the record; rdx scratch
 *
 * The stack, as the interposer finds it (nothing is pushed: rsp stays the caller's):
 *
 *   rsp + 8     | the call's stack arguments          |
 *   rsp         | return address                      |  -> E_RET; the slot then returns into
 *               +-------------------------------------+     msgtrace_after(_tail)
 *   rsp - 8     | RZ_RET     msgtrace_after: the caller's return address, jumped through
 *   rsp - 16    | RZ_DATA    MODE_METHOD: the trampoline's data pointer
 *               | RZ_LIMIT   msgtrace_after: where closing stale entries stops
 *   rsp - 24    | RZ_RAX     MODE_METHOD, claiming a send's entry: rax
 *   rsp - 32    | RZ_RDX     MODE_METHOD, comparing libobjc2's selector indexes: rdx
 *   ...         |   the red zone (REDZONE bytes): code that calls first steps rsp over it
 *   rsp - 128   |                                     |
 *
 * A shadow entry (struct mt_entry, ENTRY_SIZE bytes; the thread's stack of them grows up from
 * T_BASE to T_LIMIT, T_TOP the next free one; PREV(x) is field x of the entry below r10):
 *
 *   E_RET     caller's return address          E_SEL    selector
 *   E_SP      caller's rsp: the frame's id     E_SAVE   caller's rbx
 *   E_START   start tick                       E_RV0    rax, parked
 *   E_CLS     class word (rt.h)                E_RV1    rdx, parked
 *                                              E_OWNER  the same slot while the method runs:
 *                                                       OWNER_SEND or OWNER_METHOD
 *
 * A record (struct mt_record, RECORD_SIZE bytes, written at T_REC_CUR up to T_REC_END):
 * R_START, R_END, R_CLS, R_SEL.
 */
#include "asm.h"
#include "rt.h"
#include "trampoline.h"

/* INTERPOSE's modes */
#define MODE_SEND   0
#define MODE_SUPER  1
#define MODE_METHOD 2

/* the red zone: 128 bytes below rsp that the SysV ABI keeps from signal handlers */
#define REDZONE  128
#define RZ_RET   -8
#define RZ_DATA  -16
#define RZ_LIMIT -16
#define RZ_RAX   -24
#define RZ_RDX   -32
/* CLOSE_ONE's argument: whether the red zone holds live values the slow path must step over */
#define REDZONE_FREE   0
#define REDZONE_IN_USE 1

/* the previous entry's field x, from the entry r10 points at */
#define PREV(x) ((x) - ENTRY_SIZE)
/* mt_thread.scratch: rax and rdx while the entry path closes stale entries */
#define T_SCRATCH_RAX T_SCRATCH
#define T_SCRATCH_RDX (T_SCRATCH + 8)
/* struct objc_super { id receiver; Class super_class; } */
#define SUPER_CLASS 8

/* DWARF register numbers (the x86_64 psABI): rbx, rsp, r10 and the return address column */
#define DWARF_RBX 3
#define DWARF_RSP 7
#define DWARF_R10 10
#define DWARF_RIP 16
.if E_RET > 63 || E_SAVE > 63
.error "E_RET and E_SAVE must fit one-byte SLEB128 offsets in the CFI expressions"
.endif

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

/* msgtrace_after_tail is AFTER_TAIL_DIST bytes below msgtrace_after (checked at the end): a
 * return address from after_tail to after is one of the two return stubs. \reg = the return
 * slot - after_tail, then compared: flags "below or equal" when the slot holds a stub (a tail
 * call from a traced method). */
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
	shlq $(32), %rdx                        /* edx:eax = the counter's high:low halves */
	orq %rdx, %rax
.endm

/* CFI: the caller's rbx is saved at [\base + E_SAVE], its return address at [\base + E_RET]. */
#define CFI_SAVED_IN_RBX \
	.cfi_escape DW_CFA_expression, DWARF_RBX, 2, DW_OP_breg(DWARF_RBX), E_SAVE SEP \
	.cfi_escape DW_CFA_expression, DWARF_RIP, 2, DW_OP_breg(DWARF_RBX), E_RET
#define CFI_RBX_IN_R10 .cfi_escape DW_CFA_expression, DWARF_RBX, 2, DW_OP_breg(DWARF_R10), E_SAVE

/*
 * CFI of the return stub msgtrace_after (see its comment). ELF: a signal frame whose caller's
 * return address is the saved one minus 1:
 *   in the entry:    [rbx + E_RET] - 1
 *   in the red zone: [rsp + RZ_RET] - 1
 * Apple (and MSGTRACE_APPLE_CFI, which tests these rows on Linux): an ordinary frame, the
 * return address itself.
 */
#if defined(__APPLE__) || defined(MSGTRACE_APPLE_CFI)
#define CFI_AFTER_FRAME
#define CFI_AFTER_RET_IN_RBX     .cfi_escape DW_CFA_expression, DWARF_RIP, 2, DW_OP_breg(DWARF_RBX), E_RET
#define CFI_AFTER_RET_IN_REDZONE .cfi_offset rip, RZ_RET
#else
#define CFI_AFTER_FRAME          .cfi_signal_frame
#define CFI_AFTER_RET_IN_RBX \
	.cfi_escape DW_CFA_val_expression, DWARF_RIP, 5, DW_OP_breg(DWARF_RBX), E_RET, DW_OP_deref, DW_OP_lit1, DW_OP_minus
#define CFI_AFTER_RET_IN_REDZONE \
	.cfi_escape DW_CFA_val_expression, DWARF_RIP, 5, DW_OP_breg(DWARF_RSP), SLEB1(RZ_RET), DW_OP_deref, DW_OP_lit1, DW_OP_minus
#endif

/*
 * CLOSE_ONE redzone: record the shadow entry at r10 as unwound (F_UNWOUND: its call never
 * returned, an exception or a longjmp went past it). r11 = thread, rax = end tick, rdx
 * clobbered; the fields are copied with push/pop, through the red zone. A full chunk calls the
 * slow path (every register kept), over the red zone when redzone is REDZONE_IN_USE (the caller
 * keeps values there).
 */
.macro CLOSE_ONE redzone
	movq T_REC_CUR(%r11), %rdx
	cmpq T_REC_END(%r11), %rdx
	jb LOCAL(close_write\@)
.if \redzone == REDZONE_IN_USE
	leaq -REDZONE(%rsp), %rsp
	.cfi_adjust_cfa_offset REDZONE
.endif
	call SYM(msgtrace_slow_chunk)           /* a new chunk, or none (dropping) */
.if \redzone == REDZONE_IN_USE
	leaq REDZONE(%rsp), %rsp
	.cfi_adjust_cfa_offset -REDZONE
.endif
	movq T_REC_CUR(%r11), %rdx
	cmpq T_REC_END(%r11), %rdx
	jae LOCAL(close_drop\@)
LOCAL(close_write\@):                       /* rdx = the record */
	pushq E_START(%r10)
	popq R_START(%rdx)
	movq %rax, R_END(%rdx)
	pushq E_CLS(%r10)
	popq R_CLS(%rdx)
	btsq $(FLAG_SHIFT + F_UNWOUND_BIT), R_CLS(%rdx)
	pushq E_SEL(%r10)
	popq R_SEL(%rdx)
	addq $(RECORD_SIZE), T_REC_CUR(%r11)
	jmp LOCAL(close_done\@)
LOCAL(close_drop\@):                        /* no chunk (MSGTRACE_FULL=drop) */
	incq T_DROPPED(%r11)
LOCAL(close_done\@):
.endm

/*
 * SLOWCALL name, fn: msgtrace_slow_* call the C function fn with every register as it was:
 * general registers and flags pushed, and the whole vector/x87 state (ymm/zmm upper halves,
 * mask registers, st0-st7, MXCSR) saved with XSAVE (area size from CPUID at load; FXSAVE where
 * there is no XSAVE). C code (calloc, glibc's AVX memset ending in vzeroupper, nanosleep) may
 * then run under a traced call's arguments or return values. Callers need no alignment.
 *
 *   rbp + 8               | return address                  |
 *   rbp                   | caller's rbp                    |
 *   rbp - 8               | flags                           |
 *   rbp - 16 ... rbp - 80 | rax rcx rdx rsi rdi r8 r9 r10 r11 |  SLOW_PUSHED bytes
 *                         | (alignment)                     |
 *   rsp                   | XSAVE area, XSAVE_ALIGN-aligned, msgtrace_xsave_size bytes
 *                         | (its header at XSAVE_HEADER, zeroed first), or FXSAVE's
 *                         | FXSAVE_SIZE bytes, FXSAVE_ALIGN-aligned
 */
#define SLOW_PUSHED       (10 * 8)
#define XSAVE_ALIGN       64
#define XSAVE_HEADER      512 /* the XSAVE header: after the legacy FXSAVE region ... */
#define XSAVE_HEADER_SIZE 64  /* ... 64 bytes that XRSTOR requires valid: zero is */
#define FXSAVE_SIZE       512
#define FXSAVE_ALIGN      16
.if XSAVE_HEADER_SIZE - 8 * 8
.error "the XSAVE header is zeroed in eight words"
.endif
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
	jz LOCAL(fxsave_\name)
	subq %rax, %rsp                         /* rsp = the XSAVE area */
	andq $(-XSAVE_ALIGN), %rsp
	xorl %eax, %eax                         /* the XSAVE header must start zeroed */
	.irp word, 0, 1, 2, 3, 4, 5, 6, 7       /* its XSAVE_HEADER_SIZE / 8 words */
	movq %rax, XSAVE_HEADER + \word * 8(%rsp)
	.endr
	movl $-1, %eax                          /* edx:eax = every state component */
	movl $-1, %edx
	xsave64 (%rsp)
	call SYM(\fn)
	movl $-1, %eax
	movl $-1, %edx
	xrstor64 (%rsp)
	jmp LOCAL(restore_\name)
LOCAL(fxsave_\name):                        /* no XSAVE: x87 + SSE with FXSAVE */
	subq $(FXSAVE_SIZE), %rsp
	andq $(-FXSAVE_ALIGN), %rsp
	fxsave64 (%rsp)
	call SYM(\fn)
	fxrstor64 (%rsp)
LOCAL(restore_\name):
	leaq -SLOW_PUSHED(%rbp), %rsp           /* back to the pushed registers */
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
 * INTERPOSE name, orig, recv, sel, mode
 *   name  the interposer; orig  the variable holding the original it forwards to
 *   recv  register with the receiver (MODE_SEND) or the objc_super pointer (MODE_SUPER)
 *   sel   register with the selector
 *   mode  MODE_SEND, MODE_SUPER or MODE_METHOD. MODE_METHOD: r11 = the trampoline's data
 *         {MD_ORIG, MD_CLS, MD_SEL}, kept at RZ_DATA; the call is named by MD_CLS (the
 *         implementing class) and goes to MD_ORIG; orig, recv and sel are unused.
 * E_OWNER of an entry in flight says who made it: OWNER_SEND (no method claimed it yet) or
 * OWNER_METHOD.
 *
 * Its labels (LOCAL(x_\name): one set per interposer):
 *   retry     find the thread and its top entry (again after registering or closing)
 *   push      fill the new entry at r10 and push it
 *   tagged    MODE_SEND: a tagged-pointer receiver
 *   depth     the depth into the class word, then the entry's other fields and the jump
 *   below     the previous entry's frame is at or below ours: nest, claim or close
 *   stale     close stale entries (calls that never returned) down to our frame
 *   close     close the entry below r10; closed: back to retry
 *   overflow  the shadow stack is full
 *   register  the thread's first traced call
 *   untraced  straight to the original: tracing off or paused falls through into it
 *   traced    tracing: the nil receiver test (MODE_SEND), then retry
 */
.macro INTERPOSE name, orig, recv, sel, mode
FUNC(\name)
	.cfi_startproc
.if \mode == MODE_METHOD
	movq %r11, RZ_DATA(%rsp)                /* the trampoline's data into the red zone */
.endif
	cmpl $(0), SYM(msgtrace_active)(%rip)
	jne LOCAL(traced_\name)                 /* tracing: record */
LOCAL(untraced_\name):                      /* untraced (off or paused falls through here): */
.if \mode == MODE_METHOD                    /* straight to the original */
	movq RZ_DATA(%rsp), %r11
	jmp *MD_ORIG(%r11)
.else
	jmp *SYM(\orig)(%rip)
.endif
LOCAL(traced_\name):
.if \mode == MODE_SEND                      /* the nil test after the flag's: the paused path */
	testq \recv, \recv                     /* is the flag's test and the jump alone */
	jz LOCAL(untraced_\name)                /* nil receiver: untraced */
.endif
LOCAL(retry_\name):
	LOAD_SELF %r11                          /* r11 = struct mt_thread * */
	testq %r11, %r11
	jz LOCAL(register_\name)                /* first traced call of this thread */
	cmpq $(0), T_BUSY(%r11)
	jne LOCAL(untraced_\name)               /* excluded thread, or inside the tracer */
	movq T_TOP(%r11), %r10                  /* r10 = the new shadow entry */
	cmpq T_LIMIT(%r11), %r10
	jae LOCAL(overflow_\name)               /* shadow stack full */
	cmpq T_BASE(%r11), %r10
	je LOCAL(push_\name)
	cmpq %rsp, PREV(E_SP)(%r10)             /* previous entry's frame at or below ours? */
	jbe LOCAL(below_\name)
LOCAL(push_\name):
	movq %rax, E_RV0(%r10)                  /* park rax (al: vector args) and rdx (arg) */
	movq %rdx, E_RV1(%r10)
.if \mode == MODE_METHOD
	movq RZ_DATA(%rsp), %rax                /* rax = data: selector and implementing class */
	movq MD_SEL(%rax), %rdx
	movq %rdx, E_SEL(%r10)
	movq MD_CLS(%rax), %rax
.else
	movq \sel, E_SEL(%r10)
.endif
.if \mode == MODE_SEND
	testq SYM(msgtrace_tag_mask)(%rip), \recv
	jnz LOCAL(tagged_\name)
	movq (\recv), %rax                      /* class = isa & mask */
	andq SYM(msgtrace_isa_mask)(%rip), %rax
	jmp LOCAL(depth_\name)
LOCAL(tagged_\name):                        /* tagged pointer: keep the receiver itself, */
	movq \recv, %rax                        /* its bits 48-63 (tag bit, index and extended */
	movq %rax, %rdx                         /* index on the MSB layouts) folded into bits */
	shrq $(CLS_BITS), %rdx                  /* 32-47, payload on every layout, to leave the */
	shlq $(TAG_FOLD_SHIFT), %rdx            /* depth and flags bits clear: rax = bits 0-31 */
	movl %eax, %eax                         /* | bits 48-63 << 32 (MT_UNFOLD_TAGGED undoes */
	orq %rdx, %rax                          /* it) */
	btsq $(FLAG_SHIFT + F_TAGGED_BIT), %rax
.elseif \mode == MODE_SUPER
	movq SUPER_CLASS(\recv), %rax           /* objc_super.super_class */
	btsq $(FLAG_SHIFT + F_SUPER_BIT), %rax
.endif
LOCAL(depth_\name):
	movq %r10, %rdx                         /* depth = (entry - base) / ENTRY_SIZE */
	subq T_BASE(%r11), %rdx
	shlq $(DEPTH_SHIFT - ENTRY_SHIFT), %rdx
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
	leaq LOCAL(after)(%rip), %r10           /* rax = the caller's return address */
	leaq -AFTER_TAIL_DIST(%r10), %rdx
	subq %rdx, %rax
	cmpq $(AFTER_TAIL_DIST), %rax
	cmovbeq %rdx, %r10                      /* a tail call from a traced method: the inner stub */
	movq %r10, (%rsp)                       /* the method returns into msgtrace_after(_tail) */
	movq E_RV0(%rbx), %rax
	movq E_RV1(%rbx), %rdx
.if \mode == MODE_METHOD
	movq $(OWNER_METHOD), E_OWNER(%rbx)
	movq RZ_DATA(%rsp), %r10
	jmp *MD_ORIG(%r10)
.else
	movq $(OWNER_SEND), E_OWNER(%rbx)       /* a method may claim it */
	jmp *SYM(\orig)(%rip)
.endif
	.cfi_restore rbx
	.cfi_offset rip, -8

LOCAL(below_\name):
	/* previous entry's frame is at or below ours: a tail call from a traced method (its return
	 * slot still holds a return stub) nests; anything else is a stale entry to close */
	jb LOCAL(stale_\name)
	movq %rax, T_SCRATCH_RAX(%r11)
	SLOT_IS_STUB %rax
	movq T_SCRATCH_RAX(%r11), %rax
.if \mode == MODE_METHOD
	ja LOCAL(stale_\name)                   /* not a return stub: a stale entry */
	/* same frame, returning into a return stub: the interposer recorded the send that landed
	 * here (an unclaimed entry of the same selector: name it by the implementing class, one
	 * call), or a traced method tail-called this one (nests) */
	cmpq $(OWNER_SEND), PREV(E_OWNER)(%r10)
	jne LOCAL(push_\name)                   /* owned by a method: a tail call */
	movq %rax, RZ_RAX(%rsp)
	movq RZ_DATA(%rsp), %rax
	movq MD_SEL(%rax), %rax                 /* rax = the method's selector */
	cmpq %rax, PREV(E_SEL)(%r10)
	je LOCAL(claim_\name)
	cmpl $(0), SYM(msgtrace_sel_by_index)(%rip)
	je LOCAL(unclaimed_\name)
	/* libobjc2: a selector has a struct in every loaded object that uses it, their first word
	 * the registered index: the same index is the same selector (rdx parked meanwhile) */
	movq %rdx, RZ_RDX(%rsp)
	movq PREV(E_SEL)(%r10), %rdx
	movq (%rdx), %rdx
	cmpq (%rax), %rdx
	movq RZ_RDX(%rsp), %rdx
	je LOCAL(claim_\name)
LOCAL(unclaimed_\name):
	movq RZ_RAX(%rsp), %rax
	jmp LOCAL(push_\name)                   /* another selector: a tail call */
LOCAL(claim_\name):
	movq PREV(E_CLS)(%r10), %rax            /* class word = depth | implementing class */
	shrq $(DEPTH_SHIFT), %rax
	andl $(DEPTH_MAX), %eax
	shlq $(DEPTH_SHIFT), %rax
	movq RZ_DATA(%rsp), %r11
	orq MD_CLS(%r11), %rax
	movq %rax, PREV(E_CLS)(%r10)
	movq $(OWNER_METHOD), PREV(E_OWNER)(%r10) /* claimed */
	movq RZ_RAX(%rsp), %rax
	jmp *MD_ORIG(%r11)
.else
	jbe LOCAL(push_\name)                   /* a return stub: a tail call, nests */
.endif
LOCAL(stale_\name):
	movq $(1), T_BUSY(%r11)                 /* scratch in use: a signal handler passes through */
	movq %rax, T_SCRATCH_RAX(%r11)
	movq %rdx, T_SCRATCH_RDX(%r11)
	TICK
LOCAL(close_\name):
	subq $(ENTRY_SIZE), %r10                /* r10 = stale entry */
.if \mode == MODE_METHOD
	CLOSE_ONE REDZONE_IN_USE                /* the trampoline's data is at RZ_DATA */
.else
	CLOSE_ONE REDZONE_FREE
.endif
	movq %r10, T_TOP(%r11)
	cmpq T_BASE(%r11), %r10
	je LOCAL(closed_\name)
	cmpq %rsp, PREV(E_SP)(%r10)
	jb LOCAL(close_\name)                   /* below our frame: stale too */
	jne LOCAL(closed_\name)
	SLOT_IS_STUB %rdx
	ja LOCAL(close_\name)                   /* our frame, not a tail call: stale too */
LOCAL(closed_\name):
	movq T_SCRATCH_RAX(%r11), %rax
	movq T_SCRATCH_RDX(%r11), %rdx
	movq $(0), T_BUSY(%r11)
	jmp LOCAL(retry_\name)

LOCAL(overflow_\name):
	incq T_OVERFLOW(%r11)                   /* too deep: this call goes untraced */
	jmp LOCAL(untraced_\name)

LOCAL(register_\name):
	/* first traced call of this thread: C with every register kept (msgtrace_slow_register);
	 * a method entry keeps its data at RZ_DATA: step over the red zone first */
.if \mode == MODE_METHOD
	leaq -REDZONE(%rsp), %rsp
	.cfi_adjust_cfa_offset REDZONE
.endif
	call SYM(msgtrace_slow_register)
.if \mode == MODE_METHOD
	leaq REDZONE(%rsp), %rsp
	.cfi_adjust_cfa_offset -REDZONE
.endif
	jmp LOCAL(retry_\name)

	.cfi_endproc
END(\name)
.endm

	.text
SLOWCALL msgtrace_slow_register, msgtrace_register_thread
SLOWCALL msgtrace_slow_chunk, msgtrace_chunk_full
INTERPOSE msgtrace_objc_msgSend,             msgtrace_orig_objc_msgSend,             %rdi, %rsi, MODE_SEND
INTERPOSE msgtrace_objc_msgSend_fpret,       msgtrace_orig_objc_msgSend_fpret,       %rdi, %rsi, MODE_SEND
INTERPOSE msgtrace_objc_msgSend_fp2ret,      msgtrace_orig_objc_msgSend_fp2ret,      %rdi, %rsi, MODE_SEND
INTERPOSE msgtrace_objc_msgSend_stret,       msgtrace_orig_objc_msgSend_stret,       %rsi, %rdx, MODE_SEND
INTERPOSE msgtrace_objc_msgSendSuper2,       msgtrace_orig_objc_msgSendSuper2,       %rdi, %rsi, MODE_SUPER
INTERPOSE msgtrace_objc_msgSendSuper2_stret, msgtrace_orig_objc_msgSendSuper2_stret, %rsi, %rdx, MODE_SUPER
/* the shared entry of the method trampolines (trampoline_amd64.S) */
INTERPOSE msgtrace_method_entry,             msgtrace_orig_objc_msgSend,             %rdi, %rsi, MODE_METHOD

/*
 * msgtrace_after: every traced method returns here, rsp = the caller's stack pointer after the
 * return, rbx = the shadow entry. Return registers (rax rdx xmm0 xmm1 st0 st1) are kept: rax
 * and rdx are parked in the entry around rdtsc, the others are not touched and no C is called.
 *
 * Labels: after_record (the call's duration decides), after_write (a record at r10),
 * after_full (the chunk is full), after_return (pop and return), after_close (entries above
 * ours never returned: close them first), after_broken (rbx is not an entry in flight: the
 * method did not keep it; a fault before anything is read or written through it).
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
 * object has no .subsections_via_symbols, so Mach-O linkers keep the two together. The return
 * targets are local labels: Mach-O allows no global label inside a CFI region, and its linkers
 * keep an FDE only for the symbol it starts at (__unwind_info then points each stub at its
 * DWARF rows); on ELF the stubs' names cover their whole FDEs, for debuggers and profilers.
 */
	.p2align 4
STUB_NAME(msgtrace_after_tail)
	.cfi_startproc                          /* msgtrace_after_tail: an ordinary frame */
	.cfi_def_cfa %rsp, 0
	CFI_SAVED_IN_RBX                        /* caller's rbx and return address (a stub) */
	nop
LOCAL(after_tail):
	nop                                     /* falls through into msgtrace_after */
	.cfi_endproc
END(msgtrace_after_tail)
STUB_NAME(msgtrace_after)
	.cfi_startproc                          /* msgtrace_after */
	CFI_AFTER_FRAME
	.cfi_def_cfa %rsp, 0
	.cfi_escape DW_CFA_expression, DWARF_RBX, 2, DW_OP_breg(DWARF_RBX), E_SAVE /* caller's rbx */
	CFI_AFTER_RET_IN_RBX                    /* its return address from [rbx + E_RET] */
	nop
LOCAL(after):
	LOAD_SELF %r11                          /* r11 = struct mt_thread * */
	cmpq T_BASE(%r11), %rbx                 /* rbx must be an entry of ours in flight: a */
	jb LOCAL(after_broken)                  /* method that did not keep it (it must) faults */
	cmpq T_TOP(%r11), %rbx                  /* here, before anything is read or written */
	jae LOCAL(after_broken)                 /* through it or closed down to it */
	movq %rax, E_RV0(%rbx)
	movq %rdx, E_RV1(%rbx)
	TICK                                    /* rax = end tick */
	leaq ENTRY_SIZE(%rbx), %rdx
	movq T_TOP(%r11), %r10
	cmpq %rdx, %r10
	ja LOCAL(after_close)                   /* entries above ours never returned: close them */
LOCAL(after_record):
	movq %rax, %rdx                         /* rdx = duration */
	subq E_START(%rbx), %rdx
	cmpq SYM(msgtrace_min_ticks)(%rip), %rdx
	jb LOCAL(after_return)                  /* shorter than MSGTRACE_MIN_US: not recorded */
	movq T_REC_CUR(%r11), %r10              /* record {start, end, class, sel} */
	cmpq T_REC_END(%r11), %r10
	jae LOCAL(after_full)
LOCAL(after_write):
	movq E_START(%rbx), %rdx
	movq %rdx, R_START(%r10)
	movq %rax, R_END(%r10)
	movq E_CLS(%rbx), %rdx
	movq %rdx, R_CLS(%r10)
	movq E_SEL(%rbx), %rdx
	movq %rdx, R_SEL(%r10)
	addq $(RECORD_SIZE), %r10
	movq %r10, T_REC_CUR(%r11)              /* publish after the fields (x86 stores are ordered) */
	jmp LOCAL(after_return)
LOCAL(after_full):
	leaq -REDZONE(%rsp), %rsp               /* chunk full: over the red zone, slow path (every */
	.cfi_adjust_cfa_offset REDZONE          /* register kept: return values, st0/st1, ymm) */
	call SYM(msgtrace_slow_chunk)
	leaq REDZONE(%rsp), %rsp
	.cfi_adjust_cfa_offset -REDZONE
	movq T_REC_CUR(%r11), %r10
	cmpq T_REC_END(%r11), %r10
	jb LOCAL(after_write)
	incq T_DROPPED(%r11)                    /* no chunk (MSGTRACE_FULL=drop): drop and count */
LOCAL(after_return):
	.cfi_remember_state                     /* after_close below keeps the rows above */
	movq E_RET(%rbx), %r10
	movq %r10, RZ_RET(%rsp)                 /* return address into the red zone */
	CFI_AFTER_RET_IN_REDZONE
	movq %rbx, %r10                         /* r10 = entry */
	CFI_RBX_IN_R10
	movq E_RV0(%r10), %rax
	movq E_RV1(%r10), %rdx
	movq E_SAVE(%r10), %rbx                 /* caller's rbx back */
	.cfi_restore rbx
	movq %r10, T_TOP(%r11)                  /* pop last: the entry stayed ours until here */
	jmp *RZ_RET(%rsp)
	.cfi_restore_state

LOCAL(after_close):
	movq %rdx, RZ_LIMIT(%rsp)               /* r10 = top; close down to our entry + 1 */
LOCAL(after_close_next):
	subq $(ENTRY_SIZE), %r10
	CLOSE_ONE REDZONE_IN_USE                /* RZ_LIMIT is live */
	cmpq RZ_LIMIT(%rsp), %r10
	ja LOCAL(after_close_next)
	movq %r10, T_TOP(%r11)
	jmp LOCAL(after_record)

LOCAL(after_broken):                        /* rbx is no entry in flight: SIGILL in the stub, */
	ud2                                     /* whose crash note names the thread's top entry */
	.cfi_endproc
END(msgtrace_after)
.if LOCAL(after) - LOCAL(after_tail) - AFTER_TAIL_DIST
.error "msgtrace_after_tail must be AFTER_TAIL_DIST bytes below msgtrace_after"
.endif

NO_EXEC_STACK
