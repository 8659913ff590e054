/* A shared library whose imports the ELF rebinding test rewrites: strlen through the PLT
 * (JUMP_SLOT), abs through a function pointer loaded from the GOT (GLOB_DAT, in RELRO). */
#include <stdlib.h>
#include <string.h>

size_t call_strlen(const char *s) { return strlen(s); }
int call_abs(int x) {
	int (*volatile p)(int) = abs; /* address loaded from the GOT: a GLOB_DAT slot */
	return p(x);
}
size_t fake_strlen(const char *s) { (void)s; return 4242; }
int fake_abs(int x) { return -x * 1000; }
