/*
 * msgtrace: trace Objective-C message sends in this process.
 *
 * Preloaded (DYLD_INSERT_LIBRARIES / LD_PRELOAD) the library starts by itself: it reads the
 * MSGTRACE_* variables, rebinds objc_msgSend before main runs, streams what the threads record
 * to MSGTRACE_OUT's stream file (MSGTRACE_OUT + ".mtrace") as the program runs, and at exit
 * converts it to MSGTRACE_OUT in the chosen format.
 * Linked into a test host (libmsgtrace.a) nothing happens until msgtrace_start(); from then on
 * the host's own sends are traced too (the library is part of its image), and the calls no
 * flush took are written to MSGTRACE_OUT at exit.
 *
 * Every function is safe to call from any thread. Functions returning int return 0 on
 * success and -1 on failure; msgtrace_last_error() then says why.
 */
#ifndef MSGTRACE_H
#define MSGTRACE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Reads the MSGTRACE_* variables (first call only), rebinds objc_msgSend and its variants in
 * every loaded image and in images loaded later, and starts recording. */
int msgtrace_start(void);

/* Stops recording and flushes to MSGTRACE_OUT. The send hooks stay: later calls pass through;
 * instrumented methods get their IMPs back where the IMP is still ours (trampolines stay,
 * forwarding untraced, for code that cached them). */
int msgtrace_stop(void);

/* Pause / resume recording. Just paused, an interposed call costs a load, a compare and a jump;
 * paused for 50 ms or more, the send slots hold objc_msgSend itself again (nothing over
 * untraced). Resuming binds them again before recording starts. */
void msgtrace_pause(void);
void msgtrace_resume(void);

/* Makes everything recorded so far reach the stream file, then writes the whole trace so far
 * (calls still running shown open) to path (NULL: MSGTRACE_OUT) in the format of its extension
 * (MSGTRACE_FORMAT for MSGTRACE_OUT). Threads keep recording. The file appears whole or not at
 * all. With MSGTRACE_FORMAT=stream and path NULL, the stream file is the output. */
int msgtrace_flush(const char *path);

/* Replaces the output filters used by later flushes. include and exclude are comma lists of
 * method patterns ("-[UIView *]", "+[NSObject new]", "*[RAC* *]"); NULL or "" for none.
 * min_us drops calls shorter than that many microseconds; max_depth drops deeper calls
 * (-1: no limit). */
int msgtrace_set_filters(const char *include, const char *exclude, double min_us, int max_depth);

/* Totals over every thread since the start. */
struct msgtrace_counters {
	uint64_t threads;  /* threads that made a traced call */
	uint64_t recorded; /* calls recorded */
	uint64_t dropped;  /* calls not recorded: no buffer space under MSGTRACE_FULL=drop */
	uint64_t overflow; /* calls not recorded: nested deeper than the shadow stack (512) */
	uint64_t flushed;  /* calls written into the stream file so far */
};
void msgtrace_get_counters(struct msgtrace_counters *out);

/* Puts a mark named name (UTF-8, up to 95 bytes kept) on the calling thread's timeline, now:
 * "first frame", "login shown", whatever the app wants to see next to its calls. Shown as an
 * instant in Perfetto and Chrome JSON, and by machobind report (the launch section ends at
 * the first one). Callable from any thread at any time, from a signal handler too: it takes
 * no lock, allocates nothing and never waits. A mark made before recording starts (from a
 * constructor) waits for the stream; when 1024 marks wait for the drain, further ones are
 * dropped. Preloaded, the library also marks the launch by itself: the process's start (the
 * kernel's record), the library loaded, the first recorded call and main entered. A program
 * that must run untraced too looks it up: dlsym(RTLD_DEFAULT, "msgtrace_mark"). */
void msgtrace_mark(const char *name);

/* The reason of the last failure of this library ("" when the last call succeeded). The
 * string stays valid until the next call. */
const char *msgtrace_last_error(void);

#ifdef __cplusplus
}
#endif
#endif
