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
 * Everything the handler runs is async-signal-safe: the library's text ranges and the
 * interposers' addresses are taken at install (mt_crash_setup; from the Go side the Go
 * runtime's text and the trampolines', msgtrace_crash_go_text and msgtrace_crash_trampolines),
 * a frame is named from the library file's symbol table read with open/mmap in the handler (no
 * dladdr, no stdio, no malloc), code outside the library by glibc's _dl_find_object, and memory
 * that may be bad (an objc_super, a shadow entry) is read with process_vm_readv, which fails
 * instead of faulting (where the system lacks it, qemu-user, a write to /dev/null asks).
 * The selector's name is the drain's to find, as it names every call (mt_sel_name), during
 * the crash's last pass; without the drain (the crash is on it, or it does not answer) the
 * selector is given as a number.
 * Depends on: rt_launch.c (the instant), drain_names.c (names, on the drain), drain_encode.c
 * and drain_output.c (a crash on the drain thread appends its instant to the file itself).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "drain_internal.h"
#include "drain_signals.h"
#include "rt_launch.h"
#include "trampoline.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>
#if defined(__linux__)
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <ucontext.h>
#endif

/* What a frame of ours is, for what the registers say. */
enum {
	W_C,           /* the recorder's or the drain's C (or the Go runtime's C half, runtime/cgo) */
	W_SLOW,        /* msgtrace_slow_*: the interposer's calls into C */
	W_SEND,        /* objc_msgSend(_fpret, _fp2ret): receiver, selector in arguments 0, 1 */
	W_STRET,       /* objc_msgSend_stret: in arguments 1, 2 */
	W_SUPER,       /* objc_msgSendSuper2: objc_super * in argument 0, selector in 1 */
	W_SUPER_STRET, /* objc_msgSendSuper2_stret: in 1, 2 */
	W_METHOD,      /* msgtrace_method_entry, where the trampolines land: receiver, selector in 0, 1 */
	W_TRAMP,       /* a method trampoline: the same, and the method's own class and selector */
	W_AFTER,       /* a return stub: the call's shadow entry in rbx / x19 */
	W_FOREIGN,     /* the drain thread, in code not ours (the runtime's, the C library's) */
};
static const char *const what_names[] = {"recorder", "interposer slow path", "interposer", "interposer", "interposer",
					 "interposer", "interposer's method entry", "method trampoline", "return stub",
					 "outside the library"};

/* Interposer symbols by address: start, name, kind. The interposers are hidden symbols of
 * msgsend_*.S; each is taken to end where the next one starts (msgtrace_after: at most
 * LAST_EXTENT bytes) unless the file's symbol table gives its size. */
struct known {
	uintptr_t start;
	const char *name;
	int what;
};
#define LAST_EXTENT 1024
#if defined(__linux__)
/* glibc's struct dl_find_object (2.35), declared here: the library is built against older C
 * libraries too, where _dl_find_object is then not found (dlsym at install) */
struct mt_dl_find_object {
	unsigned long long dlfo_flags;
	void *dlfo_map_start, *dlfo_map_end;
	struct link_map *dlfo_link_map;
	void *dlfo_eh_frame;
	unsigned long long dlfo_rest[11]; /* eh_dbase and eh_count where the architecture has them, then 7 reserved */
};
#endif
#define MAX_KNOWN 16
#define MAX_SEGS 8

static struct {
	int ready;
	uintptr_t base;                       /* the object's load bias */
	uintptr_t seg_lo[MAX_SEGS], seg_hi[MAX_SEGS]; /* its executable segments */
	int nseg;
	uintptr_t go_lo, go_hi;               /* the Go runtime's text (msgtrace_crash_go_text) */
	const char *tramp_text;               /* the method trampolines and their data, where linked */
	const struct mt_tramp_data *tramp_data;
	struct known known[MAX_KNOWN];
	int nknown;
	char path[1024];                      /* the object's file, its device and inode at install */
	uint64_t dev, ino;
#if defined(__linux__)
	int (*find_object)(void *, struct mt_dl_find_object *); /* glibc's _dl_find_object, if it has it */
#endif
} lib;

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

/* ---- async-signal-safe formatting ---- */
struct out {
	char *p;
	size_t n, cap;
};
static void put(struct out *o, const char *s) {
	while (s && *s && o->n + 1 < o->cap)
		o->p[o->n++] = *s++;
	o->p[o->n] = 0;
}
static void put_hex(struct out *o, uint64_t v) {
	char b[19], *q = b + sizeof b;
	*--q = 0;
	do {
		*--q = "0123456789abcdef"[v & 15];
		v >>= 4;
	} while (v);
	*--q = 'x';
	*--q = '0';
	put(o, q);
}
static void put_dec(struct out *o, uint64_t v) {
	char b[21], *q = b + sizeof b;
	*--q = 0;
	do {
		*--q = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	put(o, q);
}

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

/* ---- at install ---- */

#if defined(__linux__)
static int find_self(struct dl_phdr_info *info, size_t size, void *data) {
	(void)size;
	uintptr_t a = (uintptr_t)data;
	int holds = 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *p = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + p->p_vaddr;
		if (p->p_type == PT_LOAD && a >= lo && a < lo + p->p_memsz)
			holds = 1;
	}
	if (!holds)
		return 0;
	lib.base = info->dlpi_addr;
	for (int i = 0; i < info->dlpi_phnum && lib.nseg < MAX_SEGS; i++) {
		const ElfW(Phdr) *p = &info->dlpi_phdr[i];
		if (p->p_type == PT_LOAD && (p->p_flags & PF_X)) {
			lib.seg_lo[lib.nseg] = info->dlpi_addr + p->p_vaddr;
			lib.seg_hi[lib.nseg++] = info->dlpi_addr + p->p_vaddr + p->p_memsz;
		}
	}
	const char *name = info->dlpi_name && info->dlpi_name[0] ? info->dlpi_name : "/proc/self/exe";
	size_t n = strlen(name);
	if (n < sizeof lib.path)
		memcpy(lib.path, name, n + 1);
	return 1;
}
#endif

static void add_known(void (*fn)(void), const char *name, int what) {
	if (lib.nknown < MAX_KNOWN)
		lib.known[lib.nknown++] = (struct known){(uintptr_t)fn, name, what};
}

void msgtrace_slow_register(void);
void msgtrace_slow_chunk(void);
void msgtrace_after(void);
void msgtrace_after_tail(void);

void mt_crash_setup(void) {
	if (lib.ready)
		return;
	add_known(msgtrace_slow_register, "msgtrace_slow_register", W_SLOW);
	add_known(msgtrace_slow_chunk, "msgtrace_slow_chunk", W_SLOW);
	add_known(msgtrace_objc_msgSend, "msgtrace_objc_msgSend", W_SEND);
	add_known(msgtrace_objc_msgSendSuper2, "msgtrace_objc_msgSendSuper2", W_SUPER);
#if defined(__x86_64__)
	add_known(msgtrace_objc_msgSend_fpret, "msgtrace_objc_msgSend_fpret", W_SEND);
	add_known(msgtrace_objc_msgSend_fp2ret, "msgtrace_objc_msgSend_fp2ret", W_SEND);
	add_known(msgtrace_objc_msgSend_stret, "msgtrace_objc_msgSend_stret", W_STRET);
	add_known(msgtrace_objc_msgSendSuper2_stret, "msgtrace_objc_msgSendSuper2_stret", W_SUPER_STRET);
#endif
	add_known(msgtrace_method_entry, "msgtrace_method_entry", W_METHOD);
	add_known(msgtrace_after_tail, "msgtrace_after_tail", W_AFTER);
	add_known(msgtrace_after, "msgtrace_after", W_AFTER);
	for (int i = 1; i < lib.nknown; i++) /* by address */
		for (int j = i; j > 0 && lib.known[j].start < lib.known[j - 1].start; j--) {
			struct known t = lib.known[j];
			lib.known[j] = lib.known[j - 1];
			lib.known[j - 1] = t;
		}
#if defined(__linux__)
	dl_iterate_phdr(find_self, (void *)(uintptr_t)mt_crash_setup);
	lib.find_object = (int (*)(void *, struct mt_dl_find_object *))dlsym(RTLD_DEFAULT, "_dl_find_object");
	struct stat st;
	if (lib.path[0] && stat(lib.path, &st) == 0) {
		lib.dev = (uint64_t)st.st_dev;
		lib.ino = (uint64_t)st.st_ino;
	}
#endif
	__atomic_store_n(&lib.ready, 1, __ATOMIC_RELEASE);
}

int msgtrace_crash_text(uint64_t *lo, uint64_t *hi) {
	mt_crash_setup();
	uintptr_t l = 0, h = 0;
	for (int i = 0; i < lib.nseg; i++) {
		if (!l || lib.seg_lo[i] < l)
			l = lib.seg_lo[i];
		if (lib.seg_hi[i] > h)
			h = lib.seg_hi[i];
	}
	*lo = l;
	*hi = h;
	return l != 0;
}

void msgtrace_crash_trampolines(const void *text, const void *data) {
	lib.tramp_data = data;
	__atomic_store_n(&lib.tramp_text, (const char *)text, __ATOMIC_RELEASE);
}

void msgtrace_crash_go_text(uint64_t lo, uint64_t hi) {
	lib.go_lo = (uintptr_t)lo;
	lib.go_hi = (uintptr_t)hi;
}

/* ---- in the handler ---- */

static int in_lib(uintptr_t pc) {
	for (int i = 0; i < lib.nseg; i++)
		if (pc >= lib.seg_lo[i] && pc < lib.seg_hi[i])
			return 1;
	return 0;
}

int mt_crash_in_library(uintptr_t pc) { return __atomic_load_n(&lib.ready, __ATOMIC_ACQUIRE) && in_lib(pc); }

/* The function of our object holding pc, from the file's symbol table: its name into name
 * and its start into *start; 0 when the file cannot say (stripped, replaced since, unreadable). */
static int symtab_lookup(const char *path, uintptr_t base, int ours, uintptr_t pc, char *name, size_t cap, uintptr_t *start,
			 uintptr_t *size) {
#if defined(__linux__) && defined(__LP64__)
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	struct stat st;
	int ok = 0;
	if (fstat(fd, &st) != 0 || (ours && ((uint64_t)st.st_dev != lib.dev || (uint64_t)st.st_ino != lib.ino)) ||
	    st.st_size < (off_t)sizeof(Elf64_Ehdr)) {
		close(fd);
		return 0;
	}
	size_t len = (size_t)st.st_size;
	const unsigned char *m = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return 0;
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)m;
	uint64_t off = pc - base;
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_shoff > len || eh->e_shnum > (len - eh->e_shoff) / sizeof(Elf64_Shdr))
		goto done;
	const Elf64_Shdr *sh = (const Elf64_Shdr *)(m + eh->e_shoff);
	/* the full symbol table, or where it was stripped the dynamic one (exported names only) */
	for (int pass = 0; pass < 2 * eh->e_shnum && !ok; pass++) {
		int i = pass % eh->e_shnum;
		if (sh[i].sh_type != (pass < eh->e_shnum ? SHT_SYMTAB : SHT_DYNSYM) || sh[i].sh_link >= eh->e_shnum || sh[i].sh_offset > len ||
		    sh[i].sh_size > len - sh[i].sh_offset)
			continue;
		const Elf64_Shdr *strs = &sh[sh[i].sh_link];
		if (strs->sh_offset > len || strs->sh_size > len - strs->sh_offset)
			continue;
		const Elf64_Sym *syms = (const Elf64_Sym *)(m + sh[i].sh_offset);
		size_t nsyms = sh[i].sh_size / sizeof(Elf64_Sym);
		const Elf64_Sym *best = NULL;
		for (size_t k = 0; k < nsyms; k++) {
			const Elf64_Sym *s = &syms[k];
			if (ELF64_ST_TYPE(s->st_info) != STT_FUNC || s->st_shndx == SHN_UNDEF || s->st_value > off)
				continue;
			if (s->st_size && off >= s->st_value + s->st_size)
				continue;
			if (!best || s->st_value > best->st_value)
				best = s;
		}
		if (best && best->st_name < strs->sh_size) {
			const char *nm = (const char *)(m + strs->sh_offset + best->st_name);
			size_t n = 0, most = strs->sh_size - best->st_name;
			while (n + 1 < cap && n < most && nm[n])
				name[n] = nm[n], n++;
			name[n] = 0;
			*start = base + best->st_value;
			*size = best->st_size;
			ok = n > 0;
		}
	}
done:
	munmap((void *)m, len);
	return ok;
#else
	(void)path, (void)base, (void)ours, (void)pc, (void)name, (void)cap, (void)start, (void)size;
	return 0;
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

/* Code outside the library, run by the drain (the Objective-C runtime naming a class, the C
 * library): "function+0xoff in object", or "pc 0x... in object", or "pc 0x...". The object is
 * _dl_find_object's (glibc 2.35 and later: async-signal-safe, unlike dladdr), the function
 * the object file's symbol table's. */
static void foreign_frame(uintptr_t pc, struct out *f) {
#if defined(__linux__)
	struct mt_dl_find_object r;
	if (lib.find_object && lib.find_object((void *)pc, &r) == 0 && r.dlfo_link_map) {
		const struct link_map *lm = r.dlfo_link_map;
		const char *path = lm->l_name && lm->l_name[0] ? lm->l_name : "/proc/self/exe";
		const char *base = path;
		for (const char *q = path; *q; q++)
			if (*q == '/')
				base = q + 1;
		char sym[128];
		uintptr_t start = 0, size = 0;
		if (symtab_lookup(path, (uintptr_t)lm->l_addr, 0, pc, sym, sizeof sym, &start, &size)) {
			put(f, sym);
			put(f, "+");
			put_hex(f, pc - start);
		} else {
			put(f, "pc ");
			put_hex(f, pc);
		}
		put(f, " in ");
		put(f, base);
		return;
	}
#endif
	put(f, "pc ");
	put_hex(f, pc);
}

#define WHERE_NOT_OURS (-1)
#define WHERE_GO (-2)

/* What pc is: a W_* of ours (its frame named into frame), WHERE_GO or WHERE_NOT_OURS. */
static int classify(uintptr_t pc, int on_drain, char *frame, size_t cap) {
	const uintptr_t tramp_lo = (uintptr_t)lib.tramp_text, tramp_hi = tramp_lo ? tramp_lo + (uintptr_t)MT_POOL * MT_STRIDE : 0;
	struct out f = {frame, 0, cap};
	frame[0] = 0;
	if (pc >= tramp_lo && pc < tramp_hi) {
		put(&f, "msgtrace_tramp_text+");
		put_hex(&f, pc - tramp_lo);
		put(&f, " (trampoline ");
		put_dec(&f, (pc - tramp_lo) / MT_STRIDE);
		put(&f, ")");
		return W_TRAMP;
	}
	if (!pc || !in_lib(pc)) {
		if (!on_drain)
			return WHERE_NOT_OURS;
		foreign_frame(pc, &f);
		return W_FOREIGN;
	}
	if (pc >= lib.go_lo && pc < lib.go_hi)
		return WHERE_GO;
	/* an interposer or stub by its address; the symbol table names C (and gives sizes) */
	int what = W_C;
	const struct known *k = NULL;
	for (int i = 0; i < lib.nknown; i++)
		if (lib.known[i].start <= pc)
			k = &lib.known[i];
	char sym[128];
	uintptr_t start = 0, size = 0;
	int have = symtab_lookup(lib.path, lib.base, 1, pc, sym, sizeof sym, &start, &size);
	if (k) {
		uintptr_t end = k + 1 < lib.known + lib.nknown ? k[1].start : k->start + LAST_EXTENT;
		if (have && start == k->start && size)
			end = start + size;
		if (pc < end)
			what = k->what;
		else
			k = NULL;
	}
	if (k) {
		put(&f, k->name);
		put(&f, "+");
		put_hex(&f, pc - k->start);
	} else if (have) {
		put(&f, sym);
		put(&f, "+");
		put_hex(&f, pc - start);
	} else {
		put(&f, "libmsgtrace+");
		put_hex(&f, pc - lib.base);
	}
	return what;
}

int msgtrace_crash_where(uint64_t pc, char *frame, size_t cap) {
	if (!__atomic_load_n(&lib.ready, __ATOMIC_ACQUIRE))
		return -3;
	return classify((uintptr_t)pc, 0, frame, cap);
}

int mt_crash_note(int sig, void *uc, int on_drain) {
	struct regs r;
	if (!__atomic_load_n(&lib.ready, __ATOMIC_ACQUIRE) || (!get_regs(uc, &r) && !on_drain))
		return MT_CRASH_NOT_OURS;
	uintptr_t pc = r.pc;
	if (crash.state != C_NONE) /* an earlier crash of ours is being reported */
		return classify(pc, on_drain, crash.frame2, sizeof crash.frame2) >= 0 ? MT_CRASH_OURS_AGAIN : MT_CRASH_NOT_OURS;
	char frame[sizeof crash.frame];
	int what = classify(pc, on_drain, frame, sizeof frame);
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
		size_t i = (pc - (uintptr_t)lib.tramp_text) / MT_STRIDE;
		crash.cls = (uint64_t)(uintptr_t)lib.tramp_data[i].cls;
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
	struct out l = {line, 0, line_cap}, m = {mark, 0, mark_cap};
	put(&l, "msgtrace: ");
	put(&l, sig_name(crash.sig));
	put(&m, sig_name(crash.sig));
	put(&l, " in the tracer's own code: ");
	put(&m, " in ");
	put(&l, crash.frame);
	put(&m, crash.frame);
	put(&l, " (");
	put(&l, what_names[crash.what]);
	if (crash.on_drain)
		put(&l, ", on the tracer's drain thread");
	put(&l, ")");
	if (crash.have_recv || crash.have_sel)
		put(&l, crash.what == W_AFTER ? " returning from" : " sending");
	if (crash.have_sel) {
		put(&l, " selector ");
		put(&m, ": selector ");
		if (crash.sel_name[0]) {
			put(&l, crash.sel_name);
			put(&m, crash.sel_name);
			put(&l, " (");
			put_hex(&l, crash.sel);
			put(&l, ")");
		} else {
			put_hex(&l, crash.sel);
			put_hex(&m, crash.sel);
		}
	}
	if (crash.have_cls) {
		put(&l, " of class ");
		put(&m, " of class ");
		if (crash.cls_name[0]) {
			put(&l, crash.cls_name);
			put(&m, crash.cls_name);
		} else {
			put_hex(&l, crash.cls);
			put_hex(&m, crash.cls);
		}
	}
	if (crash.have_recv) {
		put(&l, " to receiver ");
		put(&m, ", receiver ");
		put_hex(&l, crash.recv);
		put_hex(&m, crash.recv);
	}
	if (crash.what == W_SUPER || crash.what == W_SUPER_STRET) {
		put(&l, " (objc_super ");
		put_hex(&l, crash.super);
		put(&l, ")");
	}
	put(&l, " on thread ");
	put_dec(&l, crash.tid);
	put(&l, "\n");
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
			struct out o = {crash.sel_name, 0, sizeof crash.sel_name};
			put(&o, n);
		}
	}
	if (crash.have_cls && safe_read(crash.cls, probe, sizeof probe) == 0) {
		const char *n = mt_class_name((void *)(uintptr_t)crash.cls);
		if (n && safe_read((uintptr_t)n, probe, 1) == 0) {
			struct out o = {crash.cls_name, 0, sizeof crash.cls_name};
			put(&o, n);
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
	struct out p = {path, 0, sizeof path};
	put(&p, "/proc/self/task/");
	put_dec(&p, crash.tid);
	put(&p, "/comm");
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
