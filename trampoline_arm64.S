/*
 * msgtrace method trampolines for arm64: MT_POOL of them, MT_STRIDE bytes apart, and their data
 * at the same stride (trampoline.h). Trampoline i:
 *   x17 = &msgtrace_tramp_data[i] (adrp + add: the same distance from every trampoline)
 *   b msgtrace_method_entry        (shared recording path, msgsend_arm64.S)
 * x17 (IP1) carries no argument; x0-x8, q0-q7, x30, sp and the stack are untouched: any
 * signature passes through, and no return address ever points here.
 */
#include "asm.h"
#include "trampoline.h"

	.text
	HIDDEN(msgtrace_tramp_text)
#if !defined(__APPLE__)
	.type msgtrace_tramp_text, %function
#endif
	.p2align MT_STRIDE_SHIFT
SYM(msgtrace_tramp_text):
	/* one FDE for the pool: at every instruction the CFA is sp and the return address is x30 */
	.cfi_startproc
	.set mt_i, 0
	.rept MT_POOL
#if defined(__APPLE__)
	adrp x17, SYM(msgtrace_tramp_data)@PAGE + mt_i * MT_STRIDE
	add x17, x17, SYM(msgtrace_tramp_data)@PAGEOFF + mt_i * MT_STRIDE
#else
	adrp x17, msgtrace_tramp_data + mt_i * MT_STRIDE
	add x17, x17, #:lo12:msgtrace_tramp_data + mt_i * MT_STRIDE
#endif
	b SYM(msgtrace_method_entry)
	.p2align MT_STRIDE_SHIFT
	.set mt_i, mt_i + 1
	.endr
	.cfi_endproc
#if !defined(__APPLE__)
	.size SYM(msgtrace_tramp_text), .-SYM(msgtrace_tramp_text)
#endif

	HIDDEN(msgtrace_tramp_data)
#if defined(__APPLE__)
	.zerofill __DATA,__bss,SYM(msgtrace_tramp_data),MT_POOL * MT_STRIDE,MT_STRIDE_SHIFT
#else
	.bss
	.type msgtrace_tramp_data, %object
	.p2align MT_STRIDE_SHIFT
msgtrace_tramp_data:
	.zero MT_POOL * MT_STRIDE
	.size msgtrace_tramp_data, MT_POOL * MT_STRIDE
#endif
NO_EXEC_STACK
