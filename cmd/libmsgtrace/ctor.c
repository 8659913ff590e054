/* Load-time start of the shared library: a constructor runs after the dynamic linker
 * relocated every object and before the program's main. It calls into Go, which waits for the
 * Go runtime (started on its own thread by the library's initializer) to finish initializing,
 * so the hooks are in place before main's first message. A Go init function alone would race
 * with main: it runs on the runtime's thread, concurrently with the program. */
#include <stdlib.h>

extern int msgtraceLoad(void);
extern void msgtraceExit(void);

static void msgtrace_at_exit(void) { msgtraceExit(); }

__attribute__((constructor)) static void msgtrace_ctor(void) {
	if (msgtraceLoad() == 0)
		atexit(msgtrace_at_exit);
}
