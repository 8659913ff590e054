/*
 * Test dispatchers with objc_msgSend's contract, standing in for the Objective-C runtime:
 * find the method for (class of receiver, selector) and tail-jump to it with every argument
 * register and the stack untouched. Only r10/r11 are used.
 *   struct class { struct class *super; struct method *methods; }   methods end with sel 0
 *   struct method { void *sel; void *imp; }
 * Labels: LOOKUP's 1 = next class, 2 = next method, 3 = end of this class's methods, 4 = found;
 * test_msgSend's 9 = nil receiver.
 */
#include "../../asm.h"

.macro LOOKUP cls, sel
1:	movq 8(\cls), %r11              /* r11 = methods */
2:	cmpq $0, (%r11)
	je 3f
	cmpq \sel, (%r11)
	je 4f
	addq $16, %r11
	jmp 2b
3:	movq (\cls), \cls               /* superclass */
	testq \cls, \cls
	jnz 1b
	ud2                             /* unrecognized selector */
4:	jmp *8(%r11)
.endm

	.text
FUNC(test_msgSend)                      /* rdi = receiver, rsi = sel */
	testq %rdi, %rdi
	jz 9f
	movq (%rdi), %r10
	LOOKUP %r10, %rsi
9:	xorl %eax, %eax                 /* nil receiver: zero result */
	xorl %edx, %edx
	pxor %xmm0, %xmm0
	pxor %xmm1, %xmm1
	ret
END(test_msgSend)
FUNC(test_msgSend_stret)                /* rdi = result, rsi = receiver, rdx = sel */
	movq (%rsi), %r10
	LOOKUP %r10, %rdx
END(test_msgSend_stret)
FUNC(test_msgSendSuper2)                /* rdi = objc_super {receiver, class}, rsi = sel */
	movq 8(%rdi), %r10
	movq (%r10), %r10               /* search from the superclass of the current class */
	movq (%rdi), %rdi               /* the method gets the receiver */
	LOOKUP %r10, %rsi
END(test_msgSendSuper2)
FUNC(test_msgSendSuper2_stret)          /* rdi = result, rsi = objc_super, rdx = sel */
	movq 8(%rsi), %r10
	movq (%r10), %r10
	movq (%rsi), %rsi
	LOOKUP %r10, %rdx
END(test_msgSendSuper2_stret)

/* uint64_t callee_saved_probe(void *fn, void *obj, void *sel): calls fn(obj, sel) with rbx,
 * rbp, r12-r15 poisoned and returns a mask of those that came back changed (bit 0 rbx, 1 rbp,
 * 2-5 r12-r15); label n: register n checked. */
FUNC(callee_saved_probe)
	pushq %rbx
	pushq %rbp
	pushq %r12
	pushq %r13
	pushq %r14
	pushq %r15
	subq $8, %rsp                   /* align the call */
	movq %rdi, %rax
	movq %rsi, %rdi
	movq %rdx, %rsi
	movabsq $0x1111111111111111, %rbx
	movabsq $0x2222222222222222, %rbp
	movabsq $0x3333333333333333, %r12
	movabsq $0x4444444444444444, %r13
	movabsq $0x5555555555555555, %r14
	movabsq $0x6666666666666666, %r15
	call *%rax
	xorl %eax, %eax
	movabsq $0x1111111111111111, %rcx
	cmpq %rcx, %rbx
	je 1f
	orq $1, %rax
1:	movabsq $0x2222222222222222, %rcx
	cmpq %rcx, %rbp
	je 2f
	orq $2, %rax
2:	movabsq $0x3333333333333333, %rcx
	cmpq %rcx, %r12
	je 3f
	orq $4, %rax
3:	movabsq $0x4444444444444444, %rcx
	cmpq %rcx, %r13
	je 4f
	orq $8, %rax
4:	movabsq $0x5555555555555555, %rcx
	cmpq %rcx, %r14
	je 5f
	orq $16, %rax
5:	movabsq $0x6666666666666666, %rcx
	cmpq %rcx, %r15
	je 6f
	orq $32, %rax
6:	addq $8, %rsp
	popq %r15
	popq %r14
	popq %r13
	popq %r12
	popq %rbp
	popq %rbx
	ret
END(callee_saved_probe)
NO_EXEC_STACK
