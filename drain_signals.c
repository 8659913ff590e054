/*
 * Signals and fork. Crashing signals (and terminating ones left at their default) ask the
 * drain for a last pass before the program's own handling; a crash in the library's own code
 * also leaves a line and a mark (drain_crash.c). For crashing signals ours stays first: the
 * program's sigaction and signal are rebound to msgtrace_sigaction / msgtrace_signal, which put
 * the program's handler below ours. In ring mode SIGUSR2 (left at its default) asks for a dump.
 * A fork child gets a drain and a stream file of its own.
 * Depends on: drain.c (the drain's state and thread), drain_crash_where.c and drain_crash.c,
 * drain_output.c, drain_records.c (a fork child's new stream), drain_cpu.c (a fork child closes
 * the parent's files); the recorder: rt_handover.c (the wake pipe), rt_thread.c (the reset after
 * fork).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "drain_internal.h"
#include "drain_signals.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* A crashing thread waits for the drain's pass this many times CRASH_WAIT_NS at most (5 s:
 * qemu on a loaded machine). */
#define CRASH_WAITS 1000
#define CRASH_WAIT_NS 5000000L
#define MAX_SIGNAL 65

static const int crash_signals[] = {SIGSEGV, SIGBUS, SIGABRT, SIGILL, SIGFPE, SIGTRAP};
static const int term_signals[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT};

static struct {
	/* what the program's handling of each signal is below ours: the action found at install,
	 * or the one the program set since through the rebound sigaction / signal */
	struct sigaction old_actions[MAX_SIGNAL];
	volatile int handling; /* a crash is being handled: the first one asks for the pass */
	int atfork_set;
	int interposed[MAX_SIGNAL]; /* a crashing signal whose handler is ours: sigaction answers for it */
} sig;

static int is_crash_signal(int s) {
	for (size_t k = 0; k < sizeof crash_signals / sizeof *crash_signals; k++)
		if (crash_signals[k] == s)
			return 1;
	return 0;
}

/* The program's own handler is next (a function outside the library: not the Go runtime's),
 * which may handle the signal and carry on. */
static int program_handler_next(int s) {
	const struct sigaction *o = &sig.old_actions[s];
	uintptr_t h = (o->sa_flags & SA_SIGINFO) ? (uintptr_t)o->sa_sigaction : (uintptr_t)o->sa_handler;
	return h != (uintptr_t)SIG_DFL && h != (uintptr_t)SIG_IGN && !mt_crash_in_library(h);
}

/* Hands the signal to what is below us, as the kernel would have. The default action:
 * ours is taken away and the signal raised again (delivered on return: the process dies of
 * it, a core as the default makes one). Ignored: a fault is not ignored by the kernel (it
 * kills), a sent signal is. A handler is called with the mask and flags the program gave it. */
static void chain(int s, siginfo_t *info, void *uc) {
	struct sigaction o = sig.old_actions[s];
	uintptr_t h = (o.sa_flags & SA_SIGINFO) ? (uintptr_t)o.sa_sigaction : (uintptr_t)o.sa_handler;
	if (h == (uintptr_t)SIG_IGN) {
		if (!(is_crash_signal(s) && info && info->si_code > 0))
			return;
		o.sa_handler = SIG_DFL; /* a fault with the signal ignored: the kernel kills */
		o.sa_flags = 0;
		h = (uintptr_t)SIG_DFL;
	}
	if (h == (uintptr_t)SIG_DFL) {
		sig.interposed[s] = 0;
		sigaction(s, &o, NULL);
		raise(s);
		return;
	}
	if (o.sa_flags & SA_RESETHAND) { /* once: then the default, as the kernel does */
		sig.old_actions[s].sa_handler = SIG_DFL;
		sig.old_actions[s].sa_flags &= ~SA_SIGINFO;
	}
	sigset_t prev;
	pthread_sigmask(SIG_BLOCK, &o.sa_mask, &prev);
	if (o.sa_flags & SA_SIGINFO)
		o.sa_sigaction(s, info, uc);
	else
		o.sa_handler(s);
	pthread_sigmask(SIG_SETMASK, &prev, NULL);
}

static void on_signal(int s, siginfo_t *info, void *uc) {
	int saved_errno = errno;
	int on_drain = msgtrace_drain_running && pthread_equal(pthread_self(), mt_drain.thread);
	int where = is_crash_signal(s) ? mt_crash_note(s, uc, on_drain) : MT_CRASH_NOT_OURS;
	if (where == MT_CRASH_GO) { /* a fault in Go code: the Go runtime's (a panic) */
		chain(s, info, uc);
		errno = saved_errno;
		return;
	}
	int ours = where == MT_CRASH_OURS || where == MT_CRASH_OURS_ON_DRAIN;
	if (!ours && is_crash_signal(s))
		mt_crash_report(on_drain); /* a crash of ours noted on another thread, not said yet: now */
	/* the last pass, unless the program's own handler is next (it may carry on: a fault it
	 * expects) and the code is not ours */
	if ((ours || !program_handler_next(s)) && __atomic_exchange_n(&sig.handling, 1, __ATOMIC_ACQ_REL) == 0 &&
	    msgtrace_drain_running && !on_drain) {
		mt_drain.crash_req = 1; /* the drain writes what it can: partial chunks, open calls */
		__atomic_store_n(&msgtrace_drain_urgent, 1, __ATOMIC_RELEASE);
		msgtrace_drain_wake();
		for (int k = 0; k < CRASH_WAITS && !mt_drain.crash_done; k++) {
			struct timespec ts = {0, CRASH_WAIT_NS};
			nanosleep(&ts, NULL);
		}
	}
	if (ours)
		mt_crash_report(on_drain);
	chain(s, info, uc);
	errno = saved_errno;
}

static void on_dump_signal(int s) {
	(void)s;
	mt_drain.dump_req = 1; /* the drain writes the ring now */
	msgtrace_drain_wake();
}

static int at_default(int s) {
	struct sigaction cur;
	return sigaction(s, NULL, &cur) == 0 && !(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == SIG_DFL;
}

void mt_install_signals(int ring_mode) {
	mt_crash_setup();
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_signal;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
	sigemptyset(&sa.sa_mask);
	for (size_t k = 0; k < sizeof crash_signals / sizeof *crash_signals; k++) {
		int s = crash_signals[k];
		if (sigaction(s, &sa, &sig.old_actions[s]) == 0)
			__atomic_store_n(&sig.interposed[s], 1, __ATOMIC_RELEASE);
	}
	for (size_t k = 0; k < sizeof term_signals / sizeof *term_signals; k++)
		if (at_default(term_signals[k]))
			sigaction(term_signals[k], &sa, &sig.old_actions[term_signals[k]]);
	if (ring_mode && at_default(SIGUSR2)) {
		struct sigaction d;
		memset(&d, 0, sizeof d);
		d.sa_handler = on_dump_signal;
		d.sa_flags = SA_RESTART;
		sigemptyset(&d.sa_mask);
		sigaction(SIGUSR2, &d, NULL);
	}
}

/* ---- the program's sigaction and signal (rebound on Linux: runtime_linux.go) ----
 * A program that sets a handler for a crashing signal after the library installed its own
 * would replace it, and a crash in the library's code would go unsaid. For those signals,
 * while ours is the kernel's, the program's action goes below ours instead: ours stays first
 * (installed with the program's mask and its SA_NODEFER / SA_RESTART, so delivery is as the
 * program asked) and hands every signal on to it (chain), and sigaction answers with the
 * program's own previous action, as it would untraced. Anything else goes to the C library. */
static int ours_installed(int s) {
	if (s <= 0 || s >= MAX_SIGNAL || !__atomic_load_n(&sig.interposed[s], __ATOMIC_ACQUIRE))
		return 0;
	struct sigaction cur; /* someone went past us (a raw system call): no longer ours */
	if (sigaction(s, NULL, &cur) != 0 || !(cur.sa_flags & SA_SIGINFO) || cur.sa_sigaction != on_signal) {
		sig.interposed[s] = 0;
		return 0;
	}
	return 1;
}

int msgtrace_sigaction(int s, const struct sigaction *act, struct sigaction *old) {
	if (!ours_installed(s))
		return sigaction(s, act, old);
	struct sigaction prev = sig.old_actions[s];
	if (act) {
		struct sigaction k;
		memset(&k, 0, sizeof k);
		k.sa_sigaction = on_signal;
		k.sa_mask = act->sa_mask;
		k.sa_flags = SA_SIGINFO | SA_ONSTACK | (act->sa_flags & (SA_NODEFER | SA_RESTART));
		sig.old_actions[s] = *act;
		sigaction(s, &k, NULL);
	}
	if (old)
		*old = prev;
	return 0;
}

#if defined(__linux__)
/* signal(): BSD semantics, as glibc's (the handler stays, the signal is blocked while it runs,
 * system calls restart) */
mt_sighandler msgtrace_signal(int s, mt_sighandler h) {
	if (!ours_installed(s))
		return signal(s, h);
	struct sigaction a, o;
	memset(&a, 0, sizeof a);
	a.sa_handler = h;
	sigemptyset(&a.sa_mask);
	sigaddset(&a.sa_mask, s);
	a.sa_flags = SA_RESTART;
	if (msgtrace_sigaction(s, &a, &o) != 0)
		return SIG_ERR;
	return o.sa_handler; /* sa_sigaction's too: one union */
}

mt_sighandler (*msgtrace_orig_sysv_signal)(int, mt_sighandler);

/* sysv_signal() (what signal() is under strict standards modes): once, not blocked while it runs */
mt_sighandler msgtrace_sysv_signal(int s, mt_sighandler h) {
	if (!ours_installed(s))
		return msgtrace_orig_sysv_signal ? msgtrace_orig_sysv_signal(s, h) : SIG_ERR;
	struct sigaction a, o;
	memset(&a, 0, sizeof a);
	a.sa_handler = h;
	sigemptyset(&a.sa_mask);
	a.sa_flags = SA_RESETHAND | SA_NODEFER;
	if (msgtrace_sigaction(s, &a, &o) != 0)
		return SIG_ERR;
	return o.sa_handler; /* sa_sigaction's too: one union */
}
#endif

/* ---- fork ---- */

static void fork_prepare(void) { pthread_mutex_lock(&mt_drain.pass_mu); }
static void fork_parent(void) { pthread_mutex_unlock(&mt_drain.pass_mu); }

/* The child: only the forking thread exists. Everything the parent's drain knew is reset here,
 * in one place: the recorder's threads and chunks (msgtrace_reset_after_fork), the wake-up
 * pipe, the stream (a new file, named for the child), the drain's requests; then a drain of
 * its own starts. */
static void fork_child(void) {
	mt_drain.forked_pid = getpid();
	pthread_mutex_init(&mt_drain.pass_mu, NULL);
	pthread_mutex_init(&mt_drain.req_mu, NULL);
	pthread_cond_init(&mt_drain.req_cv, NULL);
	mt_cpu_after_fork();
	msgtrace_reset_after_fork();
	msgtrace_drain_make_wake_pipe(); /* the parent's would wake the parent's drain */
	mt_stream_reset();
	mt_out.lost_bytes = 0;
	mt_out.path[0] = 0;
	mt_drain.req_seq = mt_drain.done_seq = 0;
	mt_drain.stop_req = mt_drain.crash_req = mt_drain.crash_done = sig.handling = 0;
	mt_output_add_pid(); /* a pattern without %p would name the parent's file */
	if (msgtrace_drain_running && !mt_drain.closed) {
		msgtrace_drain_running = 0;
		mt_drain_start_thread();
	}
}

void mt_install_fork_handlers(void) {
	if (!sig.atfork_set) {
		sig.atfork_set = 1;
		pthread_atfork(fork_prepare, fork_parent, fork_child);
	}
}
