/*
 * Signals and fork. Crashing signals (and terminating ones left at their default) ask the
 * drain for a last pass before the program's own handling; in ring mode SIGUSR2 (left at its
 * default) asks for a dump. A fork child gets a drain and a stream file of its own.
 * Depends on: drain.c (the drain's state and thread), drain_output.c, the recorder.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "drain_internal.h"

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
	struct sigaction old_actions[MAX_SIGNAL];
	volatile int handling; /* a crash is being handled: the first one asks for the pass */
	int atfork_set;
} sig;

static void on_signal(int s, siginfo_t *info, void *uc) {
	if (__atomic_exchange_n(&sig.handling, 1, __ATOMIC_ACQ_REL) == 0 && msgtrace_drain_running &&
	    !pthread_equal(pthread_self(), mt_drain.thread)) {
		mt_drain.crash_req = 1; /* the drain writes what it can: partial chunks, open calls */
		__atomic_store_n(&msgtrace_drain_urgent, 1, __ATOMIC_RELEASE);
		msgtrace_drain_wake();
		for (int k = 0; k < CRASH_WAITS && !mt_drain.crash_done; k++) {
			struct timespec ts = {0, CRASH_WAIT_NS};
			nanosleep(&ts, NULL);
		}
	}
	sigaction(s, &sig.old_actions[s], NULL);
	struct sigaction *o = &sig.old_actions[s];
	if (o->sa_flags & SA_SIGINFO) {
		if (o->sa_sigaction) {
			o->sa_sigaction(s, info, uc);
			return;
		}
	} else if (o->sa_handler != SIG_DFL && o->sa_handler != SIG_IGN) {
		o->sa_handler(s);
		return;
	}
	/* default action: faults happen again on return; a raised signal is delivered on return */
	if (o->sa_handler == SIG_DFL)
		raise(s);
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
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_signal;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
	sigemptyset(&sa.sa_mask);
	for (size_t k = 0; k < sizeof crash_signals / sizeof *crash_signals; k++)
		sigaction(crash_signals[k], &sa, &sig.old_actions[crash_signals[k]]);
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
