/* Instants (rt_launch.c): marks on the timeline that are not calls, written as instant frames
 * (tracer/stream/stream.go, kind 8). */
#ifndef MSGTRACE_RT_LAUNCH_H
#define MSGTRACE_RT_LAUNCH_H

#include <stddef.h>
#include <stdint.h>

#include "drain_encode.h"
#include "stream_format.h"

/* Instant kinds (MT_INSTANT_*) and clocks (MT_CLOCK_*): stream_format.h. */

/* Public (msgtrace.h): a mark the app sets, on the calling thread, now. */
void msgtrace_mark(const char *name);
/* A crash in the tracer's own code (drain_crash.c), on thread tid at ticks; async-signal-safe. */
void msgtrace_crash_instant(uint64_t tid, uint64_t ticks, const char *name);
/* Marks dropped because the queue was full. */
uint64_t msgtrace_instants_lost(void);
/* From the library's constructor (or the preload loader's, which passes the time its own
 * started): queues "process start" and "library loaded" (at loaded_mono_ns; 0: now). Once. */
void msgtrace_launch_loaded(uint64_t loaded_mono_ns);
/* The early recording of MSGTRACE_METHODS=all (methods_modules.c's msgtrace_early_methods, from the
 * preload loader at the first module a library registers, before the Go runtime or the drain
 * exist): reads the variables the recorder needs then as the Go side will (MSGTRACE_START,
 * MSGTRACE_CAPTURE, MSGTRACE_BUFFER_MB, MSGTRACE_MODE, MSGTRACE_FULL), sizes the pool, and turns recording
 * on. 1 when recording is on; 0 (nothing changed) when the variables say not to record now, or
 * say something the Go side will reject. */
int msgtrace_launch_record_early(void);
/* What msgtrace_launch_record_early reads of the variables, without acting on it: 1 when they
 * let recording start early (ring, drop and buffer_mb then set), 0 when not; methods_all either
 * way (MSGTRACE_METHODS is all, as the preload loader reads it). */
struct mt_early_config {
	int methods_all, ring, drop;
	uint64_t buffer_mb;
};
int msgtrace_launch_early_config(struct mt_early_config *c);
/* The Go side has its selection, or gave up: a thread whose pool is full waits for the drain
 * only if it runs (the wait for a drain expected to start ends). */
void msgtrace_launch_record_early_end(void);
/* The rebound __libc_start_main (launch.go) and the original it forwards to. */
extern void *msgtrace_orig___libc_start_main;
int msgtrace___libc_start_main(int (*main)(int, char **, char **), int argc, char **argv, void (*init)(void),
			       void (*fini)(void), void (*rtld_fini)(void), void *stack_end);
/* The drain: every instant queued since the last call (with replay, first every one taken
 * before: a ring dump), oldest first, to emit (which encodes it: mt_enc_instant). Returns how
 * many. */
int msgtrace_instants_drain(void (*emit)(const struct mt_instant_frame *in), int replay);

#endif
