/*
 * tobjc dispatch for x86-64, with objc_msgSend's contract: find the IMP for (class, selector)
 * walking superclasses and tail-jump to it with every argument register (rdi rsi rdx rcx r8 r9,
 * rax, xmm0-7) and the stack untouched. Only r10 (class) and r11 (method entry) are used.
 * A small object (low bits set) has no isa: its class comes from tobjc_small_classes.
 */
#include "tobjc.h"

.macro LOOKUP sel
1:	movq TOBJC_CLASS_METHODS(%r10), %r11    /* r11 = the class's method table */
2:	cmpq $0, (%r11)                         /* end of the table: try the superclass */
	je 3f
	cmpq \sel, (%r11)
	je 4f
	addq $TOBJC_METHOD_SIZE, %r11
	jmp 2b
3:	movq TOBJC_CLASS_SUPER(%r10), %r10
	testq %r10, %r10
	jnz 1b
	jmp tobjc_unrecognized@PLT              /* rdi, rsi as for objc_msgSend: it aborts */
4:	jmp *8(%r11)                            /* the IMP, with the caller's registers */
.endm

/* r10 = tobjc_small_classes[recv & TOBJC_SMALL_MASK]; r11 clobbered */
.macro SMALL_CLASS recv
	movq \recv, %r10
	andq $TOBJC_SMALL_MASK, %r10
	leaq tobjc_small_classes(%rip), %r11
	movq (%r11,%r10,8), %r10
.endm

	.text
	.globl objc_msgSend, objc_msgSend_fpret, objc_msgSend_stret, objc_msgSendSuper2
	.type objc_msgSend, @function
	.type objc_msgSend_fpret, @function
	.type objc_msgSend_stret, @function
	.type objc_msgSendSuper2, @function
objc_msgSend:                                   /* rdi = receiver, rsi = selector */
objc_msgSend_fpret:
	.cfi_startproc
	testq %rdi, %rdi
	jz 9f
	testq $TOBJC_SMALL_MASK, %rdi
	jnz 8f
	movq (%rdi), %r10                       /* r10 = class (isa) */
0:	LOOKUP %rsi
8:	SMALL_CLASS %rdi                        /* r10 = the small object's class */
	jmp 0b
9:	xorl %eax, %eax                         /* nil receiver: zero results */
	xorl %edx, %edx
	pxor %xmm0, %xmm0
	pxor %xmm1, %xmm1
	ret
	.cfi_endproc
	.size objc_msgSend, .-objc_msgSend

objc_msgSend_stret:                             /* rdi = result, rsi = receiver, rdx = selector */
	.cfi_startproc
	testq %rsi, %rsi
	jz 9f
	testq $TOBJC_SMALL_MASK, %rsi
	jnz 8f
	movq (%rsi), %r10
0:	LOOKUP %rdx
8:	SMALL_CLASS %rsi
	jmp 0b
9:	movq %rdi, %rax                         /* nil receiver: the result is left as is */
	ret
	.cfi_endproc
	.size objc_msgSend_stret, .-objc_msgSend_stret

objc_msgSendSuper2:                             /* rdi = objc_super {receiver, class}, rsi = sel */
	.cfi_startproc
	movq 8(%rdi), %r10
	movq TOBJC_CLASS_SUPER(%r10), %r10      /* search from the current class's superclass */
	movq (%rdi), %rdi                       /* the method gets the receiver */
	LOOKUP %rsi
	.cfi_endproc
	.size objc_msgSendSuper2, .-objc_msgSendSuper2

	.section .note.GNU-stack,"",@progbits
