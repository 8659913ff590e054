/* Load-time start of the shared library: a constructor runs after the dynamic linker
 * relocated every object and before the program's main. It calls into Go, which waits for the
 * Go runtime (started on its own thread by the library's initializer, which runs before this
 * one) to finish initializing, so the hooks are in place before main's first message. A Go init
 * function alone would race with main: it runs on the runtime's thread, concurrently with the
 * program, and may finish after main has sent its first messages.
 *
 * When this code is part of the main program — the static archive linked into a test host, or
 * this package built as an ordinary Go program, where the Go runtime starts only after every
 * constructor — nothing happens here: the host calls msgtrace_start(), which installs and
 * registers the exit handler then. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

extern int msgtraceLoad(void);
extern void msgtraceExit(void);

static void msgtrace_ctor(void);

#if defined(__APPLE__)
extern const void *_dyld_get_image_header(uint32_t index);
static int in_main_program(void) {
	Dl_info info;
	return dladdr((const void *)msgtrace_ctor, &info) && info.dli_fbase == _dyld_get_image_header(0);
}
#else
#include <link.h>
static int holds_ctor(struct dl_phdr_info *info, size_t size, void *data) {
	(void)size, (void)data;
	uintptr_t a = (uintptr_t)msgtrace_ctor;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *p = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + p->p_vaddr;
		if (p->p_type == PT_LOAD && a >= lo && a < lo + p->p_memsz)
			return 2;
	}
	return 1; /* the first object reported is the main program: stop there */
}
static int in_main_program(void) { return dl_iterate_phdr(holds_ctor, NULL) == 2; }
#endif

static pid_t loaded_pid;

extern void msgtrace_stream_exit_child(void);

/* Exit handlers also run in a child that was forked and calls exit: the Go runtime did not
 * survive the fork there, so the child's stream is closed by the C side alone (it stays a
 * stream file: converting it is Go's work, done by machobind run or machobind trace). */
static void msgtrace_at_exit(void) {
	if (getpid() == loaded_pid)
		msgtraceExit();
	else
		msgtrace_stream_exit_child();
}

/* Registers the exit handler once: from the constructor, or from msgtrace_start() when the
 * library is part of the main program and no constructor installed it. */
void msgtrace_write_at_exit(void) {
	if (__atomic_exchange_n(&loaded_pid, getpid(), __ATOMIC_SEQ_CST) == 0)
		atexit(msgtrace_at_exit);
}

#if defined(__APPLE__)
static int something_to_trace(void) { return 1; } /* every macOS process loads libobjc */
#else
#include <elf.h>
#include <string.h>
/* Whether an object imports a symbol: its relocations (DT_RELA, DT_JMPREL) name it. */
static const char *const traced_imports[] = {"objc_msgSend", "objc_msgSendSuper2", "objc_msg_lookup",
					     "objc_msg_lookup_super", "__objc_exec_class", NULL};
static int imports_objc(struct dl_phdr_info *info, size_t size, void *data) {
	(void)size, (void)data;
	const ElfW(Dyn) *dyn = NULL;
	for (int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
			dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
	if (!dyn)
		return 0;
	const ElfW(Sym) *symtab = NULL;
	const char *strtab = NULL;
	const ElfW(Rela) *rela = NULL, *jmprel = NULL;
	size_t relasz = 0, jmpsz = 0;
	for (const ElfW(Dyn) *d = dyn; d->d_tag != DT_NULL; d++) {
		switch (d->d_tag) {
		case DT_SYMTAB: symtab = (const ElfW(Sym) *)d->d_un.d_ptr; break;
		case DT_STRTAB: strtab = (const char *)d->d_un.d_ptr; break;
		case DT_RELA: rela = (const ElfW(Rela) *)d->d_un.d_ptr; break;
		case DT_RELASZ: relasz = d->d_un.d_val; break;
		case DT_JMPREL: jmprel = (const ElfW(Rela) *)d->d_un.d_ptr; break;
		case DT_PLTRELSZ: jmpsz = d->d_un.d_val; break;
		}
	}
	if (!symtab || !strtab)
		return 0;
	const ElfW(Rela) *tabs[2] = {rela, jmprel};
	size_t sizes[2] = {relasz, jmpsz};
	for (int t = 0; t < 2; t++) {
		if (!tabs[t])
			continue;
		for (size_t k = 0; k < sizes[t] / sizeof(ElfW(Rela)); k++) {
			size_t sym = ELF64_R_SYM(tabs[t][k].r_info);
			if (!sym)
				continue;
			const char *name = strtab + symtab[sym].st_name;
			for (int n = 0; traced_imports[n]; n++)
				if (strcmp(name, traced_imports[n]) == 0)
					return 1;
		}
	}
	return 0;
}
/* The Go part (its runtime start, rebinding every object) is started only where there is
 * something to trace: a loaded object imports the Objective-C runtime's dispatch. */
static int something_to_trace(void) {
	const char *force = getenv("MSGTRACE_ALWAYS");
	return (force && *force == '1') || dl_iterate_phdr(imports_objc, NULL) != 0;
}
#endif

__attribute__((constructor)) static void msgtrace_ctor(void) {
	if (in_main_program() || !something_to_trace())
		return;
	if (msgtraceLoad() == 0)
		msgtrace_write_at_exit();
}
