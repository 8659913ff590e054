/*
 * The hand-over between the recording threads and the drain: full chunks go onto a lock-free
 * stack the drain empties at once; a byte written to a pipe wakes the drain (a waiting thread,
 * a flush, the exit, a signal: async-signal-safe); whether a drain runs, and what a thread does
 * when no chunk is free (wait for the drain, or drop and count).
 * Depends on: rt.h only.
 */
#include "rt_internal.h"

#include <fcntl.h>
#include <poll.h>
#include <time.h>
#include <unistd.h>

volatile int msgtrace_drain_running;
int msgtrace_drain_expected;
int msgtrace_drain_urgent;
int msgtrace_drain_begin_req;

static struct {
	struct mt_chunk *handed; /* newest first, through qnext */
	int drop;                /* the full-pool policy: 1 drop (no drain yet: nothing would ever free a chunk) */
	int wake_fd[2];          /* the drain waits on the read end */
} ho = {.drop = 1, .wake_fd = {-1, -1}};

void msgtrace_hand_over(struct mt_chunk *c) {
	struct mt_chunk *h = __atomic_load_n(&ho.handed, __ATOMIC_RELAXED);
	do
		c->qnext = h;
	while (!__atomic_compare_exchange_n(&ho.handed, &h, c, 1, __ATOMIC_RELEASE, __ATOMIC_RELAXED));
	if (!h) /* the first since the drain's last take: it encodes it now, not at its next period or at exit */
		msgtrace_drain_wake();
}

struct mt_chunk *msgtrace_take_handed(void) {
	struct mt_chunk *c = __atomic_exchange_n(&ho.handed, NULL, __ATOMIC_ACQUIRE), *rev = NULL;
	while (c) { /* newest first: reverse, so each thread's chunks come in order */
		struct mt_chunk *n = c->qnext;
		c->qnext = rev;
		rev = c;
		c = n;
	}
	return rev;
}

void msgtrace_set_full_policy(int drop) { __atomic_store_n(&ho.drop, drop, __ATOMIC_RELEASE); }
int msgtrace_full_policy_drop(void) { return __atomic_load_n(&ho.drop, __ATOMIC_ACQUIRE); }

void msgtrace_drain_wake(void) {
	if (ho.wake_fd[1] >= 0) {
		char b = 1;
		ssize_t r = write(ho.wake_fd[1], &b, 1); /* a full pipe wakes it as well */
		(void)r;
	}
}

void msgtrace_drain_wait(int ms) {
	if (ho.wake_fd[0] < 0) {
		struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
		nanosleep(&ts, NULL);
		return;
	}
	struct pollfd p = {ho.wake_fd[0], POLLIN, 0};
	if (poll(&p, 1, ms) > 0) {
		char b[64];
		while (read(ho.wake_fd[0], b, sizeof b) > 0)
			;
	}
}

void msgtrace_drain_make_wake_pipe(void) {
	for (int k = 0; k < 2; k++)
		if (ho.wake_fd[k] >= 0)
			close(ho.wake_fd[k]);
	ho.wake_fd[0] = ho.wake_fd[1] = -1;
	int p[2];
	if (pipe(p) != 0)
		return;
	for (int k = 0; k < 2; k++) {
		fcntl(p[k], F_SETFD, FD_CLOEXEC);
		fcntl(p[k], F_SETFL, fcntl(p[k], F_GETFL) | O_NONBLOCK);
	}
	ho.wake_fd[0] = p[0];
	ho.wake_fd[1] = p[1];
}

/* The handed-over chunks as they are, newest first (tests without a drain). */
struct mt_chunk *msgtrace_handed_peek(void) { return __atomic_load_n(&ho.handed, __ATOMIC_ACQUIRE); }
