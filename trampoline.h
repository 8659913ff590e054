/*
 * msgtrace method trampolines: a fixed pool assembled into the library (trampoline_*.S), no
 * code generated at run time. Trampoline i sits at msgtrace_tramp_text + i * MT_STRIDE and its
 * data at msgtrace_tramp_data + i * MT_STRIDE: the same distance for every trampoline, reached
 * PC-relatively (rip-relative lea / adrp + add). A trampoline loads its data's address into a
 * scratch register that carries no argument (r11 / x17) and jumps to msgtrace_method_entry,
 * the interposer's own entry path (msgsend_*.S, INTERPOSE mode 2): it touches no argument
 * register and no stack.
 */
#ifndef MSGTRACE_TRAMPOLINE_H
#define MSGTRACE_TRAMPOLINE_H

/* struct mt_tramp_data: one trampoline's data */
#define MD_ORIG 0   /* the original IMP: calls go there (traced or not) */
#define MD_CLS  8   /* the class that implements the method (a metaclass for a class method) */
#define MD_SEL  16  /* the method's selector */
#define MD_METHOD 24 /* the runtime's Method the trampoline was installed into (bookkeeping) */
#define MT_STRIDE 32
/* Pool size: methods past this many are left untraced and counted (msgtrace_methods_full). */
#define MT_POOL 32768

#ifndef __ASSEMBLER__
#include <stdint.h>
struct mt_tramp_data {
	void *orig, *cls, *sel, *method;
};
extern struct mt_tramp_data msgtrace_tramp_data[MT_POOL] __attribute__((visibility("hidden")));
extern char msgtrace_tramp_text[] __attribute__((visibility("hidden")));
void msgtrace_method_entry(void);
#endif
#endif
