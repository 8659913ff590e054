/*
 * tobjc dispatch for arm64, with objc_msgSend's contract: find the IMP and branch to it with
 * x0-x8, q0-q7 and the stack untouched. x16 holds the class, x17 the method entry, x9 its
 * selector. A small object (low bits set) has no isa: its class comes from tobjc_small_classes.
 */
#include "tobjc.h"

.macro LOOKUP
1:	ldr x17, [x16, #TOBJC_CLASS_METHODS]    /* x17 = the class's method table */
2:	ldr x9, [x17]
	cbz x9, 3f                              /* end of the table: try the superclass */
	cmp x9, x1
	b.eq 4f
	add x17, x17, #TOBJC_METHOD_SIZE
	b 2b
3:	ldr x16, [x16, #TOBJC_CLASS_SUPER]
	cbnz x16, 1b
	b tobjc_unrecognized                    /* x0, x1 as for objc_msgSend: it aborts */
4:	ldr x17, [x17, #8]
	br x17                                  /* the IMP, with the caller's registers */
.endm

	.text
	.globl objc_msgSend, objc_msgSendSuper2
	.type objc_msgSend, %function
	.type objc_msgSendSuper2, %function
objc_msgSend:                                   /* x0 = receiver, x1 = selector */
	.cfi_startproc
	cbz x0, 9f
	tst x0, #TOBJC_SMALL_MASK
	b.ne 8f
	ldr x16, [x0]                           /* x16 = class (isa) */
0:	LOOKUP
8:	and x16, x0, #TOBJC_SMALL_MASK          /* a small object: x16 = its class by its low bits */
	adrp x17, tobjc_small_classes
	add x17, x17, :lo12:tobjc_small_classes
	ldr x16, [x17, x16, lsl #3]
	b 0b
9:	mov x0, #0                              /* nil receiver: zero results */
	mov x1, #0
	movi v0.2d, #0
	movi v1.2d, #0
	movi v2.2d, #0
	movi v3.2d, #0
	ret
	.cfi_endproc
	.size objc_msgSend, .-objc_msgSend

objc_msgSendSuper2:                             /* x0 = objc_super {receiver, class} */
	.cfi_startproc
	ldr x16, [x0, #8]
	ldr x16, [x16, #TOBJC_CLASS_SUPER]      /* search from the current class's superclass */
	ldr x0, [x0]                            /* the method gets the receiver */
	LOOKUP
	.cfi_endproc
	.size objc_msgSendSuper2, .-objc_msgSendSuper2

	.section .note.GNU-stack,"",%progbits
