/* The crashing signals' side that the Go side sees (drain_signals.c, drain_crash.c): the
 * program's sigaction and signal as the rebound slots see them, and the library's text. */
#ifndef MSGTRACE_DRAIN_SIGNALS_H
#define MSGTRACE_DRAIN_SIGNALS_H
#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#if defined(__linux__)
typedef void (*mt_sighandler)(int); /* glibc's sighandler_t, which wants _GNU_SOURCE first */
/* For a crashing signal whose handler is the library's, the program's action goes below it
 * (it runs after ours, as set); otherwise the C library's sigaction / signal / sysv_signal. */
int msgtrace_sigaction(int s, const struct sigaction *act, struct sigaction *old);
mt_sighandler msgtrace_signal(int s, mt_sighandler h);
mt_sighandler msgtrace_sysv_signal(int s, mt_sighandler h);
/* the C library's sysv_signal (set before any slot points at ours) */
extern mt_sighandler (*msgtrace_orig_sysv_signal)(int, mt_sighandler) __attribute__((visibility("hidden")));
#endif

/* The library's executable text, lowest to highest address: 1, or 0 where it is not known. */
int msgtrace_crash_text(uint64_t *lo, uint64_t *hi);
/* What the code at pc is, for the crash handler (tests): 0-9 the library's own (drain_crash.c's
 * W_*: 0 its C, 2-5 an interposer, 7 a trampoline, 8 a return stub...) with the frame named
 * into frame; -1 not the library's, -2 the Go runtime's, -3 not set up yet. */
int msgtrace_crash_where(uint64_t pc, char *frame, size_t cap);
/* The method trampolines' text and data (trampoline.h), where the program links them: a fault
 * there is in a trampoline. */
void msgtrace_crash_trampolines(const void *text, const void *data);
/* The Go runtime's text in it, [lo, hi): a fault there is Go's (a panic), not reported. */
void msgtrace_crash_go_text(uint64_t lo, uint64_t hi);
#endif
