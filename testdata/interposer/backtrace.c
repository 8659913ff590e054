/* Single-threaded target for the debugger test (qemu's gdb stub loses multi-threaded
 * programs): main sends a message through the interposer; gdb stops in the method. */
#include "common.h"

static __attribute__((noinline)) int64_t leaf(struct object *self, void *cmd, int64_t x) {
	(void)self, (void)cmd;
	return x + 1;
}
static struct method methods[] = {{(void *)1, (void *)leaf}, {0, 0}};
static struct tclass cls = {0, methods};
static struct object obj = {&cls};

int main(void) {
	use_test_runtime();
	int64_t r = SEND(&obj, (void *)1, 41);
	printf("%s %lld\n", r == 42 ? "OK" : "FAIL", (long long)r);
	return r != 42;
}
