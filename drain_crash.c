/*
 * A crash in the tracer's own code says so. When a crashing signal arrives, the handler
 * (drain_signals.c) asks here whether the faulting thread was running the library's own code:
 * the interposers and return stubs (msgsend_*.S), the method trampolines (trampoline_*.S), the
 * recorder's and the drain's C, or anything on the drain thread. If so it leaves one line on
 * stderr naming the frame (and, in the interposer or a trampoline, the receiver and selector
 * being sent, from the registers the signal saved) and a crash instant on that thread in the
 * trace; then the program's own handling runs as before. A fault in the Go runtime's code is
 * the Go runtime's (a panic): nothing is said here.
 *
 * Everything the handler runs is async-signal-safe: where the program counter is and which
 * frame is drain_crash_where.c's (the library's text and the interposers' addresses taken at
 * install, the library file's symbol table); memory that may be bad (an objc_super, a shadow
 * entry) is read with process_vm_readv, which fails instead of faulting (where the system lacks
 * it, qemu-user, a write to /dev/null asks). The selector's name is the drain's to find, as it
 * names every call (mt_sel_name), during the crash's last pass; without the drain (the crash is
 * on it, or it does not answer) the selector is given as a number.
 * Depends on: drain_crash_where.c (where, which frame), rt_launch.c (the instant), rt_thread.c
 * (the thread, its shadow stack), rt.c (the tick), drain_names.c (names, on the drain),
 * drain_encode.c and drain_output.c (a crash on the drain thread appends its instant to the
 * file itself).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "drain_internal.h"
#include "drain_crash.h"
#include "drain_signals.h"
#include "rt_launch.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>
#if defined(__linux__)
#include <fcntl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <ucontext.h>
#endif

static const char *const what_names[] = {"recorder", "interposer slow path", "interposer", "interposer", "interposer",
					 "interposer", "interposer's method entry", "method trampoline", "return stub",
					 "outside the library"};
_Static_assert(sizeof what_names / sizeof what_names[0] == W_FOREIGN + 1, "a name for every W_*");

/* The crash being reported (the first one; a second crash while it is reported is not). */
enum { C_NONE, C_NOTED, C_DRAIN_TOOK, C_HANDLER_TOOK };
static struct {
	int state;
	int sig, what;
	uint64_t tid, tick, pc, recv, sel, cls, super;
	int have_recv, have_sel, have_cls, on_drain;
	char frame[160]; /* "msgtrace_objc_msgSend+0x1d" */
	char frame2[160]; /* a later crash's, while this one is reported */
	char sel_name[128];
	char cls_name[96];
	char line[640];
	char mark[96];
	int composed; /* line and mark are whole */
	int printed;  /* the line was written */
} crash;

static const char *sig_name(int s) {
	switch (s) {
	case SIGSEGV: return "SIGSEGV";
	case SIGBUS: return "SIGBUS";
	case SIGILL: return "SIGILL";
	case SIGFPE: return "SIGFPE";
	case SIGTRAP: return "SIGTRAP";
	case SIGABRT: return "SIGABRT";
	}
	return "signal";
}

/* Reads n bytes at addr without faulting: 0, or -1 where the memory cannot be read.
 * process_vm_readv on ourselves fails instead of faulting. Where the system has none (qemu-user
 * does not emulate it), a write of the bytes to /dev/null asks instead: an emulator checks the
 * guest's memory before the call (a kernel would not read it for /dev/null, but a kernel has
 * process_vm_readv). */
static int safe_read(uintptr_t addr, void *out, size_t n) {
#if defined(__linux__)
	if (!addr || addr + n < addr)
		return -1;
	struct iovec local = {out, n}, remote = {(void *)addr, n};
	int saved = errno;
	long got = syscall(SYS_process_vm_readv, getpid(), &local, 1, &remote, 1, 0);
	int e = errno, ok = 0;
	if (got == (long)n) {
		ok = 1;
	} else if (got < 0 && e == ENOSYS) {
		int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
		if (fd >= 0) {
			if (write(fd, (const void *)addr, n) == (ssize_t)n) {
				memcpy(out, (const void *)addr, n);
				ok = 1;
			}
			close(fd);
		}
	}
	errno = saved;
	return ok ? 0 : -1;
#else
	(void)addr, (void)out, (void)n;
	return -1;
#endif
}

/* The registers the signal saved: pc, the first three arguments, the shadow entry register. */
struct regs {
	uintptr_t pc, a0, a1, a2, entry;
};
static int get_regs(void *ucv, struct regs *r) {
	memset(r, 0, sizeof *r);
#if defined(__linux__) && defined(__x86_64__)
	const ucontext_t *uc = ucv;
	r->pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
	r->a0 = (uintptr_t)uc->uc_mcontext.gregs[REG_RDI];
	r->a1 = (uintptr_t)uc->uc_mcontext.gregs[REG_RSI];
	r->a2 = (uintptr_t)uc->uc_mcontext.gregs[REG_RDX];
	r->entry = (uintptr_t)uc->uc_mcontext.gregs[REG_RBX];
	return 1;
#elif defined(__linux__) && defined(__aarch64__)
	const ucontext_t *uc = ucv;
	r->pc = (uintptr_t)uc->uc_mcontext.pc;
	r->a0 = (uintptr_t)uc->uc_mcontext.regs[0];
	r->a1 = (uintptr_t)uc->uc_mcontext.regs[1];
	r->a2 = (uintptr_t)uc->uc_mcontext.regs[2];
	r->entry = (uintptr_t)uc->uc_mcontext.regs[19];
	return 1;
#else
	(void)ucv;
	return 0; /* Apple: not read (the drain thread's crashes are still told) */
#endif
}

int mt_crash_note(int sig, void *uc, int on_drain) {
	struct regs r;
	if (!mt_crash_ready() || (!get_regs(uc, &r) && !on_drain))
		return MT_CRASH_NOT_OURS;
	uintptr_t pc = r.pc;
	if (crash.state != C_NONE) /* an earlier crash of ours is being reported */
		return mt_crash_classify(pc, on_drain, crash.frame2, sizeof crash.frame2) >= 0 ? MT_CRASH_OURS_AGAIN : MT_CRASH_NOT_OURS;
	char frame[sizeof crash.frame];
	int what = mt_crash_classify(pc, on_drain, frame, sizeof frame);
	if (what == WHERE_GO)
		return MT_CRASH_GO;
	if (what < 0)
		return MT_CRASH_NOT_OURS;
	int expected = C_NONE;
	if (!__atomic_compare_exchange_n(&crash.state, &expected, C_NOTED, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
		return MT_CRASH_OURS_AGAIN;
	memcpy(crash.frame, frame, sizeof frame);
	crash.sig = sig;
	crash.pc = pc;
	crash.tid = msgtrace_thread_id();
	crash.tick = msgtrace_now_ticks();
	if (what == W_TRAMP) {
		crash.cls = (uint64_t)(uintptr_t)mt_crash_tramp_class(pc);
		crash.have_cls = crash.cls != 0;
	}
	crash.what = what;
	crash.on_drain = on_drain;
	crash.have_recv = crash.have_sel = 0;
	switch (what) {
	case W_SEND:
	case W_METHOD:
	case W_TRAMP:
		crash.recv = r.a0, crash.sel = r.a1, crash.have_recv = crash.have_sel = 1;
		break;
	case W_STRET:
		crash.recv = r.a1, crash.sel = r.a2, crash.have_recv = crash.have_sel = 1;
		break;
	case W_SUPER:
	case W_SUPER_STRET: {
		uintptr_t sup = what == W_SUPER ? r.a0 : r.a1;
		uint64_t recv;
		crash.super = sup;
		crash.sel = what == W_SUPER ? r.a1 : r.a2;
		crash.have_sel = 1;
		if (safe_read(sup, &recv, sizeof recv) == 0)
			crash.recv = recv, crash.have_recv = 1;
		break;
	}
	case W_AFTER: {
		/* the entry is in rbx / x19; a method that did not keep that register (it must) leaves
		 * something else there: then the thread's top entry, the call returning */
		struct mt_entry e;
		struct mt_thread *t = msgtrace_current_thread();
		uintptr_t ent = r.entry;
		if (t && t->base && (ent < (uintptr_t)t->base || ent >= (uintptr_t)t->limit ||
				     (ent - (uintptr_t)t->base) % sizeof(struct mt_entry) != 0))
			ent = t->top > t->base && t->top <= t->limit ? (uintptr_t)(t->top - 1) : 0;
		if (safe_read(ent, &e, sizeof e) == 0) {
			crash.sel = e.sel, crash.have_sel = 1;
			uint64_t flags = e.cls >> FLAG_SHIFT;
			if (!(flags & (F_TAGGED | F_MARK | F_SUPER)) && (e.cls & ((1ull << CLS_BITS) - 1)))
				crash.cls = e.cls & ((1ull << CLS_BITS) - 1), crash.have_cls = 1;
		}
		break;
	}
	}
	crash.sel_name[0] = crash.cls_name[0] = 0;
	return on_drain ? MT_CRASH_OURS_ON_DRAIN : MT_CRASH_OURS;
}

/* The line and the mark's name from what was noted (and named). */
static void compose(char *line, size_t line_cap, char *mark, size_t mark_cap) {
	struct mt_fmt l = {line, 0, line_cap}, m = {mark, 0, mark_cap};
	mt_fmt_put(&l, "msgtrace: ");
	mt_fmt_put(&l, sig_name(crash.sig));
	mt_fmt_put(&m, sig_name(crash.sig));
	mt_fmt_put(&l, " in the tracer's own code: ");
	mt_fmt_put(&m, " in ");
	mt_fmt_put(&l, crash.frame);
	mt_fmt_put(&m, crash.frame);
	mt_fmt_put(&l, " (");
	mt_fmt_put(&l, what_names[crash.what]);
	if (crash.on_drain)
		mt_fmt_put(&l, ", on the tracer's drain thread");
	mt_fmt_put(&l, ")");
	if (crash.have_recv || crash.have_sel)
		mt_fmt_put(&l, crash.what == W_AFTER ? " returning from" : " sending");
	if (crash.have_sel) {
		mt_fmt_put(&l, " selector ");
		mt_fmt_put(&m, ": selector ");
		if (crash.sel_name[0]) {
			mt_fmt_put(&l, crash.sel_name);
			mt_fmt_put(&m, crash.sel_name);
			mt_fmt_put(&l, " (");
			mt_fmt_hex(&l, crash.sel);
			mt_fmt_put(&l, ")");
		} else {
			mt_fmt_hex(&l, crash.sel);
			mt_fmt_hex(&m, crash.sel);
		}
	}
	if (crash.have_cls) {
		mt_fmt_put(&l, " of class ");
		mt_fmt_put(&m, " of class ");
		if (crash.cls_name[0]) {
			mt_fmt_put(&l, crash.cls_name);
			mt_fmt_put(&m, crash.cls_name);
		} else {
			mt_fmt_hex(&l, crash.cls);
			mt_fmt_hex(&m, crash.cls);
		}
	}
	if (crash.have_recv) {
		mt_fmt_put(&l, " to receiver ");
		mt_fmt_put(&m, ", receiver ");
		mt_fmt_hex(&l, crash.recv);
		mt_fmt_hex(&m, crash.recv);
	}
	if (crash.what == W_SUPER || crash.what == W_SUPER_STRET) {
		mt_fmt_put(&l, " (objc_super ");
		mt_fmt_hex(&l, crash.super);
		mt_fmt_put(&l, ")");
	}
	mt_fmt_put(&l, " on thread ");
	mt_fmt_dec(&l, crash.tid);
	mt_fmt_put(&l, "\n");
}

void mt_crash_drain(void) {
	int expected = C_NOTED;
	if (__atomic_load_n(&crash.state, __ATOMIC_ACQUIRE) != C_NOTED)
		return;
	/* the names, as the drain gives every call's, of pointers that can be read */
	unsigned char probe[16];
	if (crash.have_sel && safe_read(crash.sel, probe, sizeof probe) == 0) {
		const char *n = mt_sel_name(crash.sel);
		if (n && safe_read((uintptr_t)n, probe, 1) == 0) {
			struct mt_fmt o = {crash.sel_name, 0, sizeof crash.sel_name};
			mt_fmt_put(&o, n);
		}
	}
	if (crash.have_cls && safe_read(crash.cls, probe, sizeof probe) == 0) {
		const char *n = mt_class_name((void *)(uintptr_t)crash.cls);
		if (n && safe_read((uintptr_t)n, probe, 1) == 0) {
			struct mt_fmt o = {crash.cls_name, 0, sizeof crash.cls_name};
			mt_fmt_put(&o, n);
		}
	}
	if (!__atomic_compare_exchange_n(&crash.state, &expected, C_DRAIN_TOOK, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
		return; /* the handler stopped waiting: it says what it has */
	compose(crash.line, sizeof crash.line, crash.mark, sizeof crash.mark);
	msgtrace_crash_instant(crash.tid, crash.tick, crash.mark);
	__atomic_store_n(&crash.composed, 1, __ATOMIC_RELEASE);
}

/* A crash on the drain thread (its own, or one it was telling): nobody will write the instant,
 * so it is appended to the file here, after what the drain wrote (stream mode; a ring dump is a
 * snapshot): a thread frame for the crashing thread first, named as the drain names threads
 * (its comm), so that the reader knows the thread even when none of its calls was written,
 * then the instant. */
static void append_instant(const char *mark) {
	if (mt_out.mode == MT_MODE_RING || mt_out.fd < 0 || mt_out.failed)
		return;
	unsigned char ob[768], pb[256];
	struct mt_buf out = {ob, 0, sizeof ob}, pl = {pb, 0, sizeof pb};
	char name[64] = "", path[64];
#if defined(__linux__)
	struct mt_fmt p = {path, 0, sizeof path};
	mt_fmt_put(&p, "/proc/self/task/");
	mt_fmt_dec(&p, crash.tid);
	mt_fmt_put(&p, "/comm");
	int f = open(path, O_RDONLY | O_CLOEXEC);
	if (f >= 0) {
		ssize_t l = read(f, name, sizeof name - 1);
		close(f);
		if (l > 0 && name[l - 1] == '\n')
			l--;
		name[l > 0 ? l : 0] = 0;
	}
#endif
	mt_enc_thread(&out, &pl, crash.tid, crash.tid == (uint64_t)getpid() ? MT_THREAD_MAIN : 0, name);
	struct mt_instant_frame in = {crash.tid, crash.tick, 0, MT_CLOCK_TICKS, MT_INSTANT_CRASH, mark};
	mt_enc_instant(&out, &pl, &in);
	if (out.p == ob && pl.p == pb) /* nothing grew (it would have taken memory) */
		for (size_t k = 0; k < out.n;) {
			ssize_t w = write(mt_out.fd, out.p + k, out.n - k);
			if (w <= 0)
				break;
			k += (size_t)w;
		}
}

void mt_crash_report(int on_drain_now) {
	int expected = C_NOTED;
	const char *line = crash.line, *mark = crash.mark;
	static char own_line[sizeof crash.line], own_mark[sizeof crash.mark];
	int took = __atomic_compare_exchange_n(&crash.state, &expected, C_HANDLER_TOOK, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
	if (!took && expected != C_DRAIN_TOOK)
		return; /* nothing noted */
	if (__atomic_exchange_n(&crash.printed, 1, __ATOMIC_ACQ_REL))
		return; /* said already */
	if (took) {
		compose(crash.line, sizeof crash.line, crash.mark, sizeof crash.mark);
	} else if (!__atomic_load_n(&crash.composed, __ATOMIC_ACQUIRE)) {
		/* the drain took it and did not finish (it waits, is stuck naming, or crashed): said
		 * without it */
		compose(own_line, sizeof own_line, own_mark, sizeof own_mark);
		line = own_line;
		mark = own_mark;
	}
	if (on_drain_now)
		append_instant(mark); /* the drain is this thread: nobody else writes the file */
	else if (took)
		msgtrace_crash_instant(crash.tid, crash.tick, mark); /* for a pass to come, if any */
	size_t n = strlen(line);
	for (size_t k = 0; k < n;) {
		ssize_t w = write(2, line + k, n - k);
		if (w <= 0)
			break;
		k += (size_t)w;
	}
}
