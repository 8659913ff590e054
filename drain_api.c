/*
 * The stream's public API (rt.h): start, flush, close, the path, the error, the counters.
 * Depends on: drain.c (the pass, the thread), drain_clock.c, drain_output.c, drain_records.c,
 * drain_cpu.c (started with the stream), drain_signals.c; the recorder: rt_handover.c, rt_ring.c, rt_thread.c.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "drain_internal.h"
#include "waits.h"

#include <stdio.h>
#include <time.h>
#include <unistd.h>

/* A flush waits for the drain this long at most. */
#define FLUSH_TIMEOUT_S 30

int msgtrace_stream_start(const struct mt_stream_config *cfg) {
	if (mt_drain.started) {
		snprintf(mt_out.error, sizeof mt_out.error, "the stream is already started");
		return -1;
	}
	char probe[sizeof mt_out.path];
	if (!cfg->path || msgtrace_expand_path(cfg->path, (long)getpid(), probe, sizeof probe) != 0) {
		snprintf(mt_out.error, sizeof mt_out.error, "bad output pattern %s (known: %%p %%h %%t %%%%)", cfg->path ? cfg->path : "(null)");
		return -1;
	}
	snprintf(mt_out.pattern, sizeof mt_out.pattern, "%s", cfg->path);
	snprintf(mt_out.program, sizeof mt_out.program, "%s", cfg->program ? cfg->program : "");
	mt_out.mode = cfg->ring ? MT_MODE_RING : MT_MODE_STREAM;
	mt_drain.period_ms = cfg->period_ms ? cfg->period_ms : 100;
	mt_drain.ring_mode = cfg->ring;
	__atomic_store_n(&msgtrace_ring_mode, cfg->ring, __ATOMIC_RELEASE);
	mt_drain.started = 1;
	mt_cpu_start(cfg->cpu, cfg->ring);
	/* the tick rate: the drain asks the hardware or the kernel, or measures it as it runs */
	mt_clock_start(cfg->min_us);
	msgtrace_drain_make_wake_pipe();
	if (mt_drain_start_thread() != 0) {
		snprintf(mt_out.error, sizeof mt_out.error, "cannot start the drain thread");
		return -1;
	}
	if (cfg->drop)
		msgtrace_set_full_policy(1);
	mt_install_fork_handlers();
	mt_install_signals(cfg->ring);
	return 0;
}

int msgtrace_stream_flush(void) {
	if (!mt_drain.started || mt_drain.closed)
		return -1;
	if (!msgtrace_drain_running) {
		pthread_mutex_lock(&mt_drain.pass_mu);
		mt_pass(1, 1);
		pthread_mutex_unlock(&mt_drain.pass_mu);
		return mt_out.lost_bytes ? -1 : 0;
	}
	msgtrace_inside_tracer(1); /* waiting for the drain: not a wait of the program's (waits.c) */
	pthread_mutex_lock(&mt_drain.req_mu);
	uint64_t my = ++mt_drain.req_seq;
	msgtrace_drain_wake();
	struct timespec dl;
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += FLUSH_TIMEOUT_S;
	while (mt_drain.done_seq < my && msgtrace_drain_running)
		if (pthread_cond_timedwait(&mt_drain.req_cv, &mt_drain.req_mu, &dl) != 0)
			break;
	int ok = mt_drain.done_seq >= my;
	pthread_mutex_unlock(&mt_drain.req_mu);
	msgtrace_inside_tracer(-1);
	return ok ? 0 : -1;
}

int msgtrace_stream_close(void) {
	if (!mt_drain.started || mt_drain.closed)
		return mt_drain.started ? 0 : -1;
	/* The drain thread is not woken and waited for (at exit that is a wake-up and a
	 * scheduling of it, more than the final pass itself): it is told to stop, and the pass
	 * lock waits for a pass it may be in; it does none after this (drain_main sees closed under
	 * the lock) and ends when it next wakes, or with the process. */
	if (msgtrace_drain_running && !pthread_equal(pthread_self(), mt_drain.thread)) {
		__atomic_store_n(&mt_drain.stop_req, 1, __ATOMIC_RELEASE);
		msgtrace_drain_running = 0;
	}
	__atomic_store_n(&mt_drain.closed, 1, __ATOMIC_RELEASE);
	msgtrace_set_full_policy(1);
	pthread_mutex_lock(&mt_drain.pass_mu);
	mt_pass(1, 1);
	if (!mt_drain.ring_mode && (mt_out.fd >= 0 || mt_out.out.n)) {
		mt_clock_frame(&mt_out.out, &mt_rec.pl);
		mt_end_frame();
		mt_output_write();
	}
	mt_output_close();
	pthread_mutex_unlock(&mt_drain.pass_mu);
	return mt_out.lost_bytes ? -1 : 0;
}

/* Exit of a child forked from the process that started the stream (the Go runtime did not
 * survive the fork: the C side closes the child's stream). Not in a vfork child, which shares
 * the parent's memory and ran no fork handler. */
void msgtrace_stream_exit_child(void) {
	if (mt_drain.forked_pid && getpid() == mt_drain.forked_pid)
		msgtrace_stream_close();
}

const char *msgtrace_stream_path(void) { return mt_out.path; }
int msgtrace_stream_pid_added(void) { return mt_out.pid_added; }
const char *msgtrace_stream_error(void) { return mt_out.error; }
uint64_t msgtrace_drain_cpu_ns(void) { return mt_drain.cpu_ns; }

void msgtrace_counters(struct mt_counters *c) {
	msgtrace_recorder_counters(c);
	c->written = mt_rec.written_calls;
	c->lost_bytes = mt_out.lost_bytes;
}
