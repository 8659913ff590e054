/*
 * For comparison only: a trampoline in the style of React Native's profiler (2015), written
 * here from its description: every call mallocs a frame record in C (rn_enter), calls the
 * original, and on return calls C again (rn_leave) to time, free and find the return address.
 */
#include "../../asm.h"

	.text
FUNC(rn_trampoline)                          /* rdi, rsi, ... = the message's arguments */
	subq $120, %rsp                 /* entry rsp = 8 mod 16: 120 keeps the calls aligned */
	movq %rdi, 0(%rsp)
	movq %rsi, 8(%rsp)
	movq %rdx, 16(%rsp)
	movq %rcx, 24(%rsp)
	movq %r8, 32(%rsp)
	movq %r9, 40(%rsp)
	movq %rax, 48(%rsp)
	movsd %xmm0, 56(%rsp)
	movsd %xmm1, 64(%rsp)
	movq 120(%rsp), %rdi            /* return address */
	call rn_enter                   /* mallocs {ret, start}, pushes it on a TLS list */
	movq 0(%rsp), %rdi
	movq 8(%rsp), %rsi
	movq 16(%rsp), %rdx
	movq 24(%rsp), %rcx
	movq 32(%rsp), %r8
	movq 40(%rsp), %r9
	movq 48(%rsp), %rax
	movsd 56(%rsp), %xmm0
	movsd 64(%rsp), %xmm1
	addq $120, %rsp
	leaq rn_exit(%rip), %r11
	movq %r11, (%rsp)
	jmp *rn_original(%rip)
rn_exit:
	subq $40, %rsp                  /* rsp = 0 mod 16 here after the method's ret: 40 + 8 */
	movq %rax, 0(%rsp)
	movq %rdx, 8(%rsp)
	movsd %xmm0, 16(%rsp)
	call rn_leave                   /* pops, records, frees; returns the return address */
	movq %rax, %r11
	movq 0(%rsp), %rax
	movq 8(%rsp), %rdx
	movsd 16(%rsp), %xmm0
	addq $40, %rsp
	jmp *%r11
END(rn_trampoline)
NO_EXEC_STACK
