/*
 * msgtrace method trampolines for x86_64: MT_POOL of them, MT_STRIDE bytes apart, and their
 * data in .bss at the same stride (trampoline.h). Trampoline i:
 *   r11 = &msgtrace_tramp_data[i] (rip-relative: the same displacement from every trampoline)
 *   jmp msgtrace_method_entry      (shared recording path, msgsend_amd64.S)
 * Every argument register (rdi rsi rdx rcx r8 r9 rax xmm0-7), rsp and the stack are untouched:
 * any signature passes through, and no return address ever points here.
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
	/* one FDE for the pool: at every instruction the CFA is rsp + 8 and the return address is
	 * the caller's, at [rsp] */
	.cfi_startproc
	.set mt_i, 0
	.rept MT_POOL
	leaq SYM(msgtrace_tramp_data) + mt_i * MT_STRIDE(%rip), %r11
	jmp SYM(msgtrace_method_entry)
	.p2align MT_STRIDE_SHIFT, 0xcc           /* padded with int3 */
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
