/* Instants (rt_launch.c): marks on the timeline that are not calls, written as instant frames
 * (tracer/stream.go, kind 8). */
#ifndef MSGTRACE_RT_LAUNCH_H
#define MSGTRACE_RT_LAUNCH_H

#include <stddef.h>
#include <stdint.h>

#include "drain_encode.h"
#include "stream_format.h"

/* Instant kinds (MT_INSTANT_*) and clocks (MT_CLOCK_*): stream_format.h. */

/* Public (msgtrace.h): a mark the app sets, on the calling thread, now. */
void msgtrace_mark(const char *name);
/* Marks dropped because the queue was full. */
uint64_t msgtrace_instants_lost(void);
/* From the library's constructor (or the preload loader's, which passes the time its own
 * started): queues "process start" and "library loaded" (at loaded_mono_ns; 0: now). Once. */
void msgtrace_launch_loaded(uint64_t loaded_mono_ns);
/* The rebound __libc_start_main (launch.go) and the original it forwards to. */
extern void *msgtrace_orig___libc_start_main;
int msgtrace___libc_start_main(int (*main)(int, char **, char **), int argc, char **argv, void (*init)(void),
			       void (*fini)(void), void (*rtld_fini)(void), void *stack_end);
/* The drain: every instant queued since the last call (with replay, first every one taken
 * before: a ring dump), oldest first, to emit (which encodes it: mt_enc_instant). Returns how
 * many. */
int msgtrace_instants_drain(void (*emit)(const struct mt_instant_frame *in), int replay);

#endif
