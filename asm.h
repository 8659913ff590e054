/*
 * The macros every assembly file of msgtrace shares (msgsend_*.S, trampoline_*.S and the test
 * dispatchers in testdata/interposer/, which internal/selftest/ includes), for ELF (Linux) and
 * Mach-O (macOS, iOS), amd64 and arm64, assembled by gcc or clang:
 *
 *   SYM(x)        x's name in the object: Mach-O prefixes C names with '_'
 *   HIDDEN(x)     x is global to the link but not exported from the library
 *   FUNC(x)       starts function x: hidden, typed (ELF), aligned to 16, labelled
 *   END(x)        ends it: its size (ELF; Mach-O records none)
 *   STUB_NAME(x)  a hidden function name placed where it stands, with no alignment (the return
 *                 stubs, whose FDEs start exactly at their names)
 *   LOCAL(x)      an assembler-local label (.Lx on ELF, Lx on Mach-O): no symbol, so debuggers
 *                 and profilers name the code after it by the function that contains it
 *   SEP           separates statements on one line: Apple's arm64 assembler reads ';' as a
 *                 comment, and takes "%%" instead
 *   NO_EXEC_STACK ELF's note that the object needs no executable stack (ends every file)
 *
 * and the DWARF numbers the interposers' hand-written CFI expressions (.cfi_escape) are made of.
 */
#ifndef MSGTRACE_ASM_H
#define MSGTRACE_ASM_H

#if defined(__APPLE__)
#if defined(__aarch64__)
#define SEP %%
#else
#define SEP ;
#endif
#define SYM(x) _##x
#define HIDDEN(x) .globl SYM(x) SEP .private_extern SYM(x)
#define FUNC(x) HIDDEN(x) SEP .p2align 4 SEP SYM(x):
#define END(x)
#define STUB_NAME(x) HIDDEN(x) SEP SYM(x):
#define LOCAL(x) L##x
#define NO_EXEC_STACK
#else
#define SEP ;
#define SYM(x) x
#define HIDDEN(x) .globl x SEP .hidden x
#define FUNC(x) HIDDEN(x) SEP .type x, %function SEP .p2align 4 SEP x:
#define END(x) .size x, .-x
#define STUB_NAME(x) HIDDEN(x) SEP .type x, %function SEP x:
#define LOCAL(x) .L##x
#define NO_EXEC_STACK .section .note.GNU-stack, "", %progbits
#endif

/* DWARF call frame instructions and expression operators (DWARF 5, 6.4.2 and 2.5) */
#define DW_CFA_expression     0x10 /* reg, length, expr: the register is saved at address expr */
#define DW_CFA_val_expression 0x16 /* reg, length, expr: the register's value is expr */
#define DW_OP_deref 0x06
#define DW_OP_lit1  0x31
#define DW_OP_minus 0x1c
#define DW_OP_breg(n) (0x70 + (n)) /* register n + a SLEB128 offset */
/* a SLEB128 offset of one byte: -64 to 63 */
#define SLEB1(x) ((x) & 0x7f)

#endif
