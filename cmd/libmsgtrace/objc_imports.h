/* Whether a loaded object imports the Objective-C runtime's dispatch: shared by the library's
 * constructor (ctor.c) and the preload loader (loader/loader.c). Linux only. */
#ifndef MSGTRACE_OBJC_IMPORTS_H
#define MSGTRACE_OBJC_IMPORTS_H
#include <link.h>
#include <elf.h>
#include <string.h>
/* Whether an object imports a symbol: its relocations (DT_RELA, DT_JMPREL) name it. */
static const char *const traced_imports[] = {"objc_msgSend", "objc_msgSendSuper2", "objc_msg_lookup",
					     "objc_msg_lookup_super", "__objc_exec_class", "objc_msg_lookup_sender",
					     "__objc_load", NULL};
static int msgtrace_object_imports_objc(struct dl_phdr_info *info, size_t size, void *data) {
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
	/* glibc relocates these in place; an object it did not (the vDSO) holds offsets */
#define MT_ADDR(p) ((p) < info->dlpi_addr ? (p) + info->dlpi_addr : (p))
	for (const ElfW(Dyn) *d = dyn; d->d_tag != DT_NULL; d++) {
		switch (d->d_tag) {
		case DT_SYMTAB: symtab = (const ElfW(Sym) *)MT_ADDR(d->d_un.d_ptr); break;
		case DT_STRTAB: strtab = (const char *)MT_ADDR(d->d_un.d_ptr); break;
		case DT_RELA: rela = (const ElfW(Rela) *)MT_ADDR(d->d_un.d_ptr); break;
		case DT_RELASZ: relasz = d->d_un.d_val; break;
		case DT_JMPREL: jmprel = (const ElfW(Rela) *)MT_ADDR(d->d_un.d_ptr); break;
		case DT_PLTRELSZ: jmpsz = d->d_un.d_val; break;
		}
	}
#undef MT_ADDR
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
/* Whether any loaded object imports it (MSGTRACE_ALWAYS=1: as if one did). */
static int msgtrace_something_to_trace(void) {
	const char *force = getenv("MSGTRACE_ALWAYS");
	return (force && *force == '1') || dl_iterate_phdr(msgtrace_object_imports_objc, NULL) != 0;
}
#endif
