/* Linux glue for the ELF rebinder: the loaded objects (dl_iterate_phdr) and the object that
 * holds this code, a library found as dlopen would find it (msgtrace_caller_path), and the
 * rebound dlopen, _exit and _Exit.
 * Depends on: drain_api.c (a child's stream closed at _exit); the Go side (runtime_linux.go). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <link.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

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

struct generation {
	uint64_t adds, subs;
	int known;
};

static int generation_one(struct dl_phdr_info *info, size_t size, void *data) {
	struct generation *g = data;
	if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs) {
		g->adds = info->dlpi_adds;
		g->subs = info->dlpi_subs;
		g->known = 1;
	}
	return 1; /* the first object says it */
}

int msgtrace_elf_generation(uint64_t *adds, uint64_t *subs) {
	struct generation g = {0, 0, 0};
	dl_iterate_phdr(generation_one, &g);
	*adds = g.adds;
	*subs = g.subs;
	return g.known;
}

uintptr_t msgtrace_elf_self(void) {
	Dl_info info;
	if (!dladdr((void *)msgtrace_elf_self, &info))
		return 0;
	return (uintptr_t)info.dli_fbase;
}

void *(*msgtrace_orig_dlopen)(const char *, int);

/* Go side (runtime_linux.go): rebinds the objects that appeared since the last call. */
extern void msgtraceImagesChanged(void);

/* The dynamic entry tag of an object, as an address ("" strings, d_ptr relocated by glibc on
 * most targets but not all: an address below the load bias is still an offset). */
static const char *dyn_string(const struct link_map *lm, ElfW(Sxword) tag) {
	const char *strtab = NULL;
	ElfW(Addr) off = 0;
	int found = 0;
	for (const ElfW(Dyn) *d = lm->l_ld; d && d->d_tag != DT_NULL; d++) {
		if (d->d_tag == DT_STRTAB)
			strtab = (const char *)(d->d_un.d_ptr < lm->l_addr ? d->d_un.d_ptr + lm->l_addr : d->d_un.d_ptr);
		else if (d->d_tag == tag) {
			off = d->d_un.d_val;
			found = 1;
		}
	}
	return found && strtab ? strtab + off : NULL;
}

/* The directory of an object, for $ORIGIN: its path's directory, /proc/self/exe's for the
 * main program. */
static void origin_of(const struct link_map *lm, char *out, size_t outsz) {
	out[0] = 0;
	if (lm->l_name && lm->l_name[0]) {
		strncpy(out, lm->l_name, outsz - 1);
		out[outsz - 1] = 0;
	} else {
		ssize_t n = readlink("/proc/self/exe", out, outsz - 1);
		out[n > 0 ? n : 0] = 0;
	}
	char *slash = strrchr(out, '/');
	if (slash)
		*(slash == out ? slash + 1 : slash) = 0;
	else
		strcpy(out, ".");
}

/* Tries each directory of a ':'-separated list ($ORIGIN and ${ORIGIN} expanded). */
static int search_list(const char *list, const char *origin, const char *file, char *out, size_t outsz) {
	if (!list)
		return 0;
	while (*list) {
		const char *end = strchr(list, ':');
		size_t len = end ? (size_t)(end - list) : strlen(list);
		char dir[4096];
		size_t n = 0;
		for (size_t i = 0; i < len && n < sizeof dir - 1;) {
			if (strncmp(list + i, "$ORIGIN", 7) == 0 || strncmp(list + i, "${ORIGIN}", 9) == 0) {
				size_t skip = list[i + 1] == '{' ? 9 : 7, ol = strlen(origin);
				if (n + ol >= sizeof dir - 1)
					break;
				memcpy(dir + n, origin, ol);
				n += ol, i += skip;
			} else
				dir[n++] = list[i++];
		}
		dir[n] = 0;
		if (n == 0)
			strcpy(dir, "."); /* an empty entry is the current directory */
		size_t need = strlen(dir) + 1 + strlen(file) + 1;
		if (need <= outsz) {
			strcpy(out, dir);
			strcat(out, "/");
			strcat(out, file);
			if (access(out, F_OK) == 0)
				return 1;
		}
		if (!end)
			break;
		list = end + 1;
	}
	return 0;
}

int msgtrace_caller_path(const char *file, const void *caller, char *out, size_t outsz) {
	if (!file || strchr(file, '/'))
		return 0;
	Dl_info info;
	struct link_map *lm = NULL, *main_map = NULL;
	if (!dladdr1(caller, &info, (void **)&lm, RTLD_DL_LINKMAP) || !lm)
		return 0;
	for (main_map = lm; main_map->l_prev; main_map = main_map->l_prev)
		;
	char origin[4096], main_origin[4096];
	origin_of(lm, origin, sizeof origin);
	origin_of(main_map, main_origin, sizeof main_origin);
	const char *runpath = dyn_string(lm, DT_RUNPATH);
	/* The order of glibc's search: the caller's DT_RPATH (and the program's) unless the caller
	 * has a DT_RUNPATH, LD_LIBRARY_PATH, the caller's DT_RUNPATH; then the cache and the
	 * default directories, which do not depend on the caller and are left to dlopen. */
	if (!runpath) {
		if (search_list(dyn_string(lm, DT_RPATH), origin, file, out, outsz))
			return 1;
		if (main_map != lm && !dyn_string(main_map, DT_RUNPATH) &&
		    search_list(dyn_string(main_map, DT_RPATH), main_origin, file, out, outsz))
			return 1;
	}
	if (getauxval(AT_SECURE) == 0 && search_list(getenv("LD_LIBRARY_PATH"), origin, file, out, outsz))
		return 1;
	return search_list(runpath, origin, file, out, outsz);
}

void *msgtrace_dlopen(const char *file, int mode) {
	/* dlopen searches the caller's RPATH/RUNPATH and expands $ORIGIN against the caller:
	 * called from here, the caller would be this library, so a bare name is resolved for the
	 * real caller first. An object already loaded under that name is found by name. */
	void *caller = __builtin_extract_return_addr(__builtin_return_address(0));
	void *h = NULL;
	char path[4096];
	if (file && !strchr(file, '/')) {
		h = msgtrace_orig_dlopen(file, mode | RTLD_NOLOAD);
		if (!h && msgtrace_caller_path(file, caller, path, sizeof path))
			h = msgtrace_orig_dlopen(path, mode);
	}
	if (!h)
		h = msgtrace_orig_dlopen(file, mode);
	if (h && file && !(mode & RTLD_NOLOAD))
		msgtraceImagesChanged();
	return h;
}

void (*msgtrace_orig__exit)(int), (*msgtrace_orig__Exit)(int);
int msgtrace_exit_pid;

/* Go side (runtime_linux.go): runs the exit hook. */
extern void msgtraceBeforeExit(void);

void msgtrace_stream_exit_child(void);

void msgtrace__exit(int status) {
	if (msgtrace_exit_pid && getpid() == msgtrace_exit_pid)
		msgtraceBeforeExit();
	else
		msgtrace_stream_exit_child();
	msgtrace_orig__exit(status);
	__builtin_unreachable();
}

void msgtrace__Exit(int status) {
	if (msgtrace_exit_pid && getpid() == msgtrace_exit_pid)
		msgtraceBeforeExit();
	else
		msgtrace_stream_exit_child();
	msgtrace_orig__Exit(status);
	__builtin_unreachable();
}
