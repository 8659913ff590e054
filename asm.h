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

#endif
