#include <stddef.h>
#include <stdint.h>
struct mt_object {
	uintptr_t header, slide;
	char name[256];
};
/* Fills up to max loaded objects; returns how many there are. */
size_t msgtrace_elf_objects(struct mt_object *out, size_t max);
/* dl_iterate_phdr's counts of objects loaded and unloaded so far (they change whenever the set of
 * objects does); 0 where the C library does not give them. */
int msgtrace_elf_generation(uint64_t *adds, uint64_t *subs);
/* Address of the ELF header of the object that holds this code. */
uintptr_t msgtrace_elf_self(void);
/* dlopen as the rebound slots see it: the real dlopen (msgtrace_orig_dlopen, set before any
 * slot points here), resolving a bare file name the way the caller's own dlopen would, then a
 * call into Go to rebind the objects it loaded. */
extern void *(*msgtrace_orig_dlopen)(const char *, int) __attribute__((visibility("hidden")));
void *msgtrace_dlopen(const char *file, int mode);
/* The search dlopen(file) does from the object holding caller: writes the first existing
 * candidate to out and returns 1, or 0 when the name is to be left to dlopen (it has a '/', or
 * no directory of the caller's RPATH, LD_LIBRARY_PATH or RUNPATH holds it). */
int msgtrace_caller_path(const char *file, const void *caller, char *out, size_t outsz);
/* _exit and _Exit as the rebound slots see them: the exit hook first (in the process that set
 * it, never in a forked child), then the real function. */
extern void (*msgtrace_orig__exit)(int) __attribute__((visibility("hidden")));
extern void (*msgtrace_orig__Exit)(int) __attribute__((visibility("hidden")));
extern int msgtrace_exit_pid __attribute__((visibility("hidden")));
void msgtrace__exit(int status);
void msgtrace__Exit(int status);
