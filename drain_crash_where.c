/*
 * Where a program counter is, for the crash handler (drain_crash.c): in the library's own code
 * or not, and which frame of it. The library's executable segments and the interposers'
 * addresses are taken at install (mt_crash_setup; the Go runtime's text and the trampolines'
 * come from the Go side: msgtrace_crash_go_text, msgtrace_crash_trampolines); in the handler a
 * frame is named from the library file's symbol table read with open/mmap (no dladdr, no
 * stdio, no malloc), code outside the library, on the drain thread, by glibc's
 * _dl_find_object. Everything after the install is async-signal-safe.
 * Depends on: msgsend_*.S (the interposers' and stubs' addresses), rt_thread.c (the slow paths'
 * addresses).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "drain_internal.h"
#include "drain_crash.h"
#include "drain_signals.h"
#include "trampoline.h"

#include <string.h>
#if defined(__linux__)
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#endif

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

/* Code outside the library, run by the drain (the Objective-C runtime naming a class, the C
 * library): "function+0xoff in object", or "pc 0x... in object", or "pc 0x...". The object is
 * _dl_find_object's (glibc 2.35 and later: async-signal-safe, unlike dladdr), the function
 * the object file's symbol table's. */
static void foreign_frame(uintptr_t pc, struct mt_fmt *f) {
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
			mt_fmt_put(f, sym);
			mt_fmt_put(f, "+");
			mt_fmt_hex(f, pc - start);
		} else {
			mt_fmt_put(f, "pc ");
			mt_fmt_hex(f, pc);
		}
		mt_fmt_put(f, " in ");
		mt_fmt_put(f, base);
		return;
	}
#endif
	mt_fmt_put(f, "pc ");
	mt_fmt_hex(f, pc);
}

int mt_crash_ready(void) { return __atomic_load_n(&lib.ready, __ATOMIC_ACQUIRE); }

void *mt_crash_tramp_class(uintptr_t pc) {
	size_t i = (pc - (uintptr_t)lib.tramp_text) / MT_STRIDE;
	return lib.tramp_data[i].cls;
}

int mt_crash_classify(uintptr_t pc, int on_drain, char *frame, size_t cap) {
	const uintptr_t tramp_lo = (uintptr_t)lib.tramp_text, tramp_hi = tramp_lo ? tramp_lo + (uintptr_t)MT_POOL * MT_STRIDE : 0;
	struct mt_fmt f = {frame, 0, cap};
	frame[0] = 0;
	if (pc >= tramp_lo && pc < tramp_hi) {
		mt_fmt_put(&f, "msgtrace_tramp_text+");
		mt_fmt_hex(&f, pc - tramp_lo);
		mt_fmt_put(&f, " (trampoline ");
		mt_fmt_dec(&f, (pc - tramp_lo) / MT_STRIDE);
		mt_fmt_put(&f, ")");
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
		mt_fmt_put(&f, k->name);
		mt_fmt_put(&f, "+");
		mt_fmt_hex(&f, pc - k->start);
	} else if (have) {
		mt_fmt_put(&f, sym);
		mt_fmt_put(&f, "+");
		mt_fmt_hex(&f, pc - start);
	} else {
		mt_fmt_put(&f, "libmsgtrace+");
		mt_fmt_hex(&f, pc - lib.base);
	}
	return what;
}

int msgtrace_crash_where(uint64_t pc, char *frame, size_t cap) {
	if (!__atomic_load_n(&lib.ready, __ATOMIC_ACQUIRE))
		return -3;
	return mt_crash_classify((uintptr_t)pc, 0, frame, cap);
}
