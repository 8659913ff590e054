/*
 * What the drain's files share (the drain: the thread that turns the chunks the recording
 * threads hand over into the stream file). Each file is one job, and calls only the files
 * listed before it here (never back):
 *
 *   drain_encode.c       frames and payloads, pure (drain_encode.h)
 *   drain_clock.c        the tick rate (asked or measured), clock frames
 *   drain_output.c       the stream file: path patterns, creation with its prologue, writes
 *   drain_names.c        method ids and their names (the namer, the methods frames)
 *   drain_records.c      a thread's records, open calls and identity as frames
 *   drain_cpu.c          per-thread CPU time sampled (cpu frames)
 *   drain_ring.c         ring mode's dump (the flight recorder)
 *   drain_crash_where.c  where a crashing pc is: the library's code or not, which frame
 *   drain_crash.c        a crash in the library's own code noted, named, told: the line, the instant
 *   drain.c              the pass and the drain thread
 *   drain_signals.c      crashing, terminating and dump signals; fork
 *   drain_api.c          the public API (rt.h): start, flush, close, counters
 *
 * The drain reads the recorder (rt_internal.h: the registry, the pool, the hand-over, the
 * rings); the recorder never calls the drain.
 */
#ifndef MSGTRACE_DRAIN_INTERNAL_H
#define MSGTRACE_DRAIN_INTERNAL_H
#include "rt_internal.h"
#include "drain_encode.h"

#include <sys/types.h>

/* Everything declared from here on is the library's own: hidden from the dynamic symbol table,
 * so that a program defining the same name can neither interpose it nor be shadowed by it. */
#pragma GCC visibility push(hidden)

/* A record's depth field (bits DEPTH_SHIFT.. below the flags) and a mark's kind (its class bits). */
#define REC_DEPTH_MASK ((1ull << (FLAG_SHIFT - DEPTH_SHIFT)) - 1)
#define REC_MARK_KIND_MASK 0xffffull
/* A recorded class word as a method key: depth and the unwound flag cleared. */
#define REC_METHOD_KEY(cls) ((cls) & ~(REC_DEPTH_MASK << DEPTH_SHIFT) & ~((uint64_t)F_UNWOUND << FLAG_SHIFT))
#define REC_MARK(kind) ((uint64_t)(kind) | (uint64_t)F_MARK << FLAG_SHIFT)
_Static_assert(MARK_LOST == MT_MARK_LOST && MARK_WAIT == MT_MARK_WAIT && MARK_OVERFLOW == MT_MARK_OVERFLOW &&
		       MARK_OVERWRITTEN == MT_MARK_OVERWRITTEN,
	       "rt.h's mark kinds are the stream's");

/* ---- drain_clock.c ---- */
struct mt_clock {
	uint64_t rate_num, rate_den; /* ns = ticks * num / den; 0, 0 while unknown */
	int rate_final;              /* the hardware's or the kernel's rate, or measured over 1 s */
	int rate_news;               /* the rate changed: the next clock frame says so */
	uint64_t cal_tick, cal_ns;   /* the counter and the clock when the stream started */
	uint64_t last_clock_ns;      /* when the last clock frame was written */
	double min_us;               /* MSGTRACE_MIN_US */
};
extern struct mt_clock mt_clock;
uint64_t mt_mono_ns(void);
void mt_sleep_ms(long ms);
void mt_clock_start(double min_us); /* the stream starts: calibration starts */
void mt_clock_ask_rate(void);       /* on the drain thread: the rate from the hardware or kernel */
void mt_clock_calibrate(void);      /* measure the rate where nobody says it */
void mt_clock_frame(struct mt_buf *out, struct mt_buf *pl);

/* ---- drain_output.c ---- */
struct mt_output {
	char pattern[4096];      /* path pattern */
	char path[4096];         /* the file's path once created */
	char program[256];       /* program name for the process frame ("" = the executable's) */
	char error[4600];
	int mode;                /* MT_MODE_* for the process frame */
	int fd;                  /* -1 until the first write */
	int failed;              /* the file could not be created: nothing more is tried */
	int pid_added;           /* the name was another live process's: the pattern took ".%p" */
	struct mt_buf out;       /* frames not written yet */
	struct mt_buf pl;        /* the prologue's payloads */
	uint64_t lost_bytes;     /* bytes that could not be written */
};
extern struct mt_output mt_out;
void mt_output_write(void);  /* writes mt_out.out (creating the file, prologue first) */
void mt_output_close(void);
void mt_output_begin(void); /* creates the file now if it is not (its process and clock frames) */
void mt_output_reset(void);  /* the next write starts a new file */
void mt_output_add_pid(void); /* a pattern without %p gets ".%p" before its last extension */

/* ---- drain_names.c ---- */
uint32_t mt_method_id(uint64_t key, uint64_t sel); /* key: REC_METHOD_KEY of a class word */
void mt_names_flush(struct mt_buf *out);           /* the methods frame of ids named since */
void mt_names_reset(void);                         /* ids start again at 1 */
const char *mt_sel_name(uint64_t sel);             /* a selector's name as calls get theirs; NULL: none */
const char *mt_class_name(void *cls);              /* a class's name from the namer; NULL: none */

/* ---- drain_records.c ---- */
/* The drain's record of a thread (mt_thread_info.drain), made when the drain first needs it. */
struct mt_drain_thread {
	int skipped;                   /* the last collect could not read its current chunk */
	int announced;                 /* a thread frame was written (in this file) */
	char announced_name[64];       /* with this name */
	uint64_t snap_top, snap_start; /* identity of the last open snapshot written */
	uint64_t snap_tick;            /* the tick it was taken at */
	/* drain_cpu.c: the thread's counters as last written, and where they are read */
	uint64_t cpu_run, cpu_wait, cpu_slices, cpu_known;
	int cpu_fd;                    /* its schedstat file + 1 (0: none open) */
	int cpu_nofile;                /* no schedstat file to read: its CPU clock instead */
	uint64_t cpu_dev, cpu_ino;     /* the open file's identity (fstat) */
};
/* i's record; without memory a blank one (the thread is then announced and snapshotted again). */
struct mt_drain_thread *mt_dt(struct mt_thread_info *i);
struct mt_records {
	struct mt_buf pl;                 /* the frame being built */
	struct mt_buf pre;                /* a ring dump: its methods frames (they go first) */
	int dumping;                      /* a ring dump: methods frames to pre, nothing written early */
	uint64_t written_calls, written_marks;
};
extern struct mt_records mt_rec;
void mt_stream_reset(void);           /* a new file next: output, method ids, counts (ring dump, fork) */
void mt_announce(struct mt_thread_info *i, int recheck); /* a thread frame if not written yet (or its name changed) */
void mt_thread_frame(struct mt_thread_info *i, int exited);
void mt_encode(struct mt_thread_info *i, const struct mt_record *from, const struct mt_record *to);
void mt_open_snapshot(struct mt_thread_info *i, int force);
void mt_final_marks(struct mt_thread_info *i);
void mt_thread_gone(struct mt_thread_info *i, uint64_t tick); /* its last frames: open calls closed, exited */
void mt_end_frame(void);
/* Instants queued since the last call (rt_launch.c) as frames; replay: every one kept first. */
void mt_instants_write(int replay);

/* ---- drain_cpu.c ---- */
void mt_cpu_start(int on, int ring); /* MSGTRACE_CPU; ring mode keeps the last frames for the dump */
void mt_cpu_sample(int force);       /* a cpu frame when the period is up (or forced) */
void mt_cpu_forget(struct mt_thread_info *i); /* before the drain frees a thread: its file, its port */
void mt_cpu_after_fork(void);        /* fork child, before the registry is reset: the parent's files */
void mt_cpu_replay(struct mt_buf *out); /* ring mode: the frames kept, oldest first */

/* ---- drain_ring.c ---- */
void mt_ring_dump(void);

/* ---- drain.c ---- */
struct mt_drain {
	pthread_t thread;
	pthread_mutex_t pass_mu;          /* held during a pass */
	pthread_mutex_t req_mu;
	pthread_cond_t req_cv;
	uint64_t req_seq, done_seq;       /* flush requests (req_mu) */
	volatile int stop_req, closed;
	volatile int crash_req, crash_done; /* a crashing signal asks for a last pass */
	volatile int dump_req;            /* ring mode: SIGUSR2 asks for a dump */
	int started, ring_mode;
	uint32_t period_ms;
	uint64_t last_collect_ns, last_names_ns;
	volatile uint64_t cpu_ns;         /* the drain thread's CPU time as of its last pass */
	pid_t forked_pid;                 /* set in a child by the fork handler (vfork runs none) */
};
extern struct mt_drain mt_drain;
void mt_pass(int force, int final);
int mt_drain_start_thread(void);      /* 0, or -1 */

/* ---- drain_crash_where.c (drain_crash.h has what the two crash files share) ---- */
int mt_crash_in_library(uintptr_t pc);  /* pc is in the library's text (Go's included) */
void mt_crash_setup(void);              /* at install: the library's text, the interposers' addresses */

/* ---- drain_crash.c ---- */
/* What the faulting thread ran (mt_crash_note): */
#define MT_CRASH_NOT_OURS 0       /* the program's code (or the C library's, called by it) */
#define MT_CRASH_OURS 1           /* the library's own code: noted for the line and the mark */
#define MT_CRASH_OURS_ON_DRAIN 2  /* the same, on the drain thread */
#define MT_CRASH_OURS_AGAIN 3     /* ours, while an earlier crash of ours is being reported */
#define MT_CRASH_GO 4             /* the Go runtime's code: a Go panic, Go's to report */
int mt_crash_note(int sig, void *uc, int on_drain); /* in the handler: MT_CRASH_* */
void mt_crash_drain(void);              /* on the drain, in the crash's pass: names, the instant */
/* In the handler, after the pass: the instant if the drain did not queue it (on the drain
 * thread: appended to the file), and the line on stderr; once. From any crashing signal while a
 * crash of ours is noted and not yet said (another crash would end the process first). */
void mt_crash_report(int on_drain_now);

/* ---- drain_signals.c ---- */
void mt_install_signals(int ring_mode);
void mt_install_fork_handlers(void);
#pragma GCC visibility pop
#endif
