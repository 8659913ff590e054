/* Linux glue for the ELF rebinder: the loaded objects (dl_iterate_phdr) and the object that
 * holds this code. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <link.h>
#include <stdint.h>
#include <string.h>

#include "elfimages_linux.h"

struct collect {
	struct mt_object *out;
	size_t max, n;
};

static int collect_one(struct dl_phdr_info *info, size_t size, void *data) {
	struct collect *c = data;
	(void)size;
	uintptr_t header = 0;
	for (int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_LOAD && info->dlpi_phdr[i].p_offset == 0) {
			header = info->dlpi_addr + info->dlpi_phdr[i].p_vaddr;
			break;
		}
	if (header && c->n < c->max) {
		c->out[c->n].header = header;
		c->out[c->n].slide = info->dlpi_addr;
		strncpy(c->out[c->n].name, info->dlpi_name ? info->dlpi_name : "", sizeof c->out[c->n].name - 1);
		c->out[c->n].name[sizeof c->out[c->n].name - 1] = 0;
	}
	if (header)
		c->n++;
	return 0;
}

size_t msgtrace_elf_objects(struct mt_object *out, size_t max) {
	struct collect c = {out, max, 0};
	dl_iterate_phdr(collect_one, &c);
	return c.n;
}

uintptr_t msgtrace_elf_self(void) {
	Dl_info info;
	if (!dladdr((void *)msgtrace_elf_self, &info))
		return 0;
	return (uintptr_t)info.dli_fbase;
}
