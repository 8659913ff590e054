/*
 * Test dispatchers with objc_msgSend's contract for arm64 (see runtime_amd64.S): find the
 * method and branch to it with x0-x8, q0-q7 and the stack untouched; x9, x16, x17 only.
 * Labels: LOOKUP's 1 = next class, 2 = next method, 3 = end of this class's methods, 4 = found;
 * test_msgSend's 9 = nil receiver.
 */
#include "../../asm.h"

.macro LOOKUP
1:	ldr x17, [x16, #8]              /* x16 = class, x17 = methods */
2:	ldr x9, [x17]
	cbz x9, 3f
	cmp x9, x1
	b.eq 4f
	add x17, x17, #16
	b 2b
3:	ldr x16, [x16]                  /* superclass */
	cbnz x16, 1b
	brk #0                          /* unrecognized selector */
4:	ldr x17, [x17, #8]
	br x17
.endm

	.text
FUNC(test_msgSend_stret)                /* arm64 has no stret variants: x8 carries the result */
FUNC(test_msgSend)
	cbz x0, 9f
	ldr x16, [x0]
	LOOKUP
9:	mov x0, #0
	mov x1, #0
	movi v0.2d, #0
	movi v1.2d, #0
	movi v2.2d, #0
	movi v3.2d, #0
	ret
END(test_msgSend)
END(test_msgSend_stret)
FUNC(test_msgSendSuper2_stret)
FUNC(test_msgSendSuper2)                /* x0 = objc_super {receiver, class} */
	ldr x16, [x0, #8]
	ldr x16, [x16]
	ldr x0, [x0]
	LOOKUP
END(test_msgSendSuper2)
END(test_msgSendSuper2_stret)

/* uint64_t callee_saved_probe(void *fn, void *obj, void *sel): calls fn(obj, sel) with
 * x19-x28 and d8-d15 poisoned; returns a mask of those that came back changed. */
FUNC(callee_saved_probe)
	stp x29, x30, [sp, #-160]!
	mov x29, sp
	stp x19, x20, [sp, #16]
	stp x21, x22, [sp, #32]
	stp x23, x24, [sp, #48]
	stp x25, x26, [sp, #64]
	stp x27, x28, [sp, #80]
	stp d8, d9, [sp, #96]
	stp d10, d11, [sp, #112]
	stp d12, d13, [sp, #128]
	stp d14, d15, [sp, #144]
	mov x9, x0
	mov x0, x1
	mov x1, x2
	.irp r, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28
	mov x\r, #\r
	movk x\r, #0x5a5a, lsl #48
	.endr
	.irp r, 8, 9, 10, 11, 12, 13, 14, 15
	mov x10, #\r
	movk x10, #0xa5a5, lsl #48
	fmov d\r, x10
	.endr
	blr x9
	mov x0, #0
	.irp r, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28
	mov x10, #\r
	movk x10, #0x5a5a, lsl #48
	cmp x\r, x10
	cset x11, ne
	orr x0, x0, x11, lsl #\r
	.endr
	.irp r, 8, 9, 10, 11, 12, 13, 14, 15
	mov x10, #\r
	movk x10, #0xa5a5, lsl #48
	fmov x11, d\r
	cmp x11, x10
	cset x11, ne
	orr x0, x0, x11, lsl #\r
	.endr
	ldp x19, x20, [sp, #16]
	ldp x21, x22, [sp, #32]
	ldp x23, x24, [sp, #48]
	ldp x25, x26, [sp, #64]
	ldp x27, x28, [sp, #80]
	ldp d8, d9, [sp, #96]
	ldp d10, d11, [sp, #112]
	ldp d12, d13, [sp, #128]
	ldp d14, d15, [sp, #144]
	ldp x29, x30, [sp], #160
	ret
END(callee_saved_probe)
NO_EXEC_STACK
