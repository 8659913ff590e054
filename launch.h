/* Instants (launch.c): marks on the timeline that are not calls, written as instant frames
 * (tracer/stream.go, kind 8). */
#ifndef MSGTRACE_LAUNCH_H
#define MSGTRACE_LAUNCH_H

#include <stddef.h>
#include <stdint.h>

/* An instant's kind, as numbered in the stream format. */
enum {
	MT_INSTANT_APP = 0,           /* msgtrace_mark */
	MT_INSTANT_PROCESS_START = 1, /* the kernel's record of the process's start */
	MT_INSTANT_LOADED = 2,        /* the library's constructor ran */
	MT_INSTANT_FIRST_CALL = 3,    /* the first recorded call (the reader derives it) */
	MT_INSTANT_MAIN = 4,          /* main entered */
};
/* An instant's clock: the interposers' counter, or CLOCK_MONOTONIC in ns. */
enum { MT_CLOCK_TICKS = 0, MT_CLOCK_MONOTONIC = 1 };

#define MT_INSTANT_PAYLOAD_MAX 160

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
 * before: a ring dump) as payloads, oldest first, to emit. Returns how many. */
int msgtrace_instants_drain(void (*emit)(const unsigned char *payload, size_t n), int replay);

#endif
