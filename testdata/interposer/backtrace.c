/* Single-threaded target for the debugger test (qemu's gdb stub loses multi-threaded
 * programs): main sends two messages through the interposer; gdb stops in the first method,
 * walks back to main, finishes it and steps over the second send. The line numbers of main
 * are part of the test (TestGDBBacktraceThroughInterposer). */
#include "common.h"

static __attribute__((noinline)) int64_t leaf(struct object *self, void *cmd, int64_t x) {
	(void)self, (void)cmd;
	return x + 1;
}
static __attribute__((noinline)) int64_t other(struct object *self, void *cmd, int64_t x) {
	(void)self, (void)cmd;
	return x + 1;
}
static struct method methods[] = {{(void *)1, (void *)leaf}, {(void *)2, (void *)other}, {0, 0}};
static struct tclass cls = {0, methods};
static struct object obj = {&cls};

int main(void) {
	use_test_runtime();
	int64_t r = SEND(&obj, (void *)1, 41); /* line 21: gdb stops in leaf, called from here */
	int64_t s = SEND(&obj, (void *)2, r);  /* line 22: `next` steps over this traced send */
	printf("%s %lld\n", r == 42 && s == 43 ? "OK" : "FAIL", (long long)s);
	return s != 43;
}
