/*
 * msgtrace method trampolines: a fixed pool assembled into the library (trampoline_*.S), no
 * code generated at run time. Trampoline i sits at msgtrace_tramp_text + i * MT_STRIDE and its
 * data at msgtrace_tramp_data + i * MT_STRIDE: the same distance for every trampoline, reached
 * PC-relatively (rip-relative lea / adrp + add). A trampoline loads its data's address into a
 * scratch register that carries no argument (r11 / x17) and jumps to msgtrace_method_entry,
 * the interposer's own entry path (msgsend_*.S, INTERPOSE in MODE_METHOD): it touches no argument
 * register and no stack.
 */
#ifndef MSGTRACE_TRAMPOLINE_H
#define MSGTRACE_TRAMPOLINE_H

/* MD_* and MD_SIZE: struct mt_tramp_data's offsets and size, measured by the C compiler (go
 * generate; internal/asmoffsets) */
#ifndef MT_OFFSETS_PROBE
#include "asm_offsets.h"
#endif
/* The distance between two trampolines, and between their data (MD_SIZE, checked below) */
#define MT_STRIDE_SHIFT 5
#define MT_STRIDE (1 << MT_STRIDE_SHIFT)
/* Pool size: methods past this many are left untraced and counted (msgtrace_methods_full). */
#define MT_POOL 32768

#ifndef __ASSEMBLER__
#include <stdint.h>
/* one trampoline's data */
struct mt_tramp_data {
	void *orig;   /* the original IMP: calls go there (traced or not) */
	void *cls;    /* the class that implements the method (a metaclass for a class method) */
	void *sel;    /* the method's selector */
	void *method; /* the runtime's Method the trampoline was installed into (bookkeeping) */
};
#ifndef MT_OFFSETS_PROBE
MT_CHECK_MT_TRAMP_DATA;
MT_STATIC_ASSERT(sizeof(struct mt_tramp_data) == MT_STRIDE, "a trampoline's data is MT_STRIDE bytes");
#endif
extern struct mt_tramp_data msgtrace_tramp_data[MT_POOL] __attribute__((visibility("hidden")));
extern char msgtrace_tramp_text[] __attribute__((visibility("hidden")));
void msgtrace_method_entry(void);
#endif
#endif
