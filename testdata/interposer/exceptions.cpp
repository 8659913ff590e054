// A C++ exception thrown inside a traced method and caught by its caller crosses the
// interposer's frame: the unwinder must find the caller through msgtrace_after's CFI (the
// return address lives in the shadow stack, rbx is saved there), reach the handler, and the
// tracer must close the skipped entries afterwards.
#include "common.h"
#include <stdexcept>

static int64_t thrower(struct object *self, void *cmd, int64_t n) {
	(void)self, (void)cmd;
	if (n == 0)
		throw std::runtime_error("from a traced method");
	return SEND(self, cmd, n - 1);
}
static int64_t leaf(struct object *, void *, int64_t x) { return x * 2; }

static struct method methods[] = {{(void *)1, (void *)thrower}, {(void *)2, (void *)leaf}, {0, 0}};
static struct tclass cls = {0, methods};
static struct object obj = {&cls};

// keeps values in callee-saved registers across the throw, so a wrong rbx rule shows
static __attribute__((noinline)) int64_t catcher(int64_t depth) {
	volatile int64_t keep = 1234;
	int64_t a = depth * 7, b = depth * 11, c = depth * 13;
	try {
		SEND(&obj, (void *)1, depth);
	} catch (const std::runtime_error &e) {
		return keep + a + b + c + (strcmp(e.what(), "from a traced method") == 0 ? 1000000 : 0);
	}
	return -1;
}

int main() {
	use_test_runtime();
	for (int depth = 0; depth < 5; depth++) {
		int64_t got = catcher(depth);
		CHECK("caught by the caller with its registers intact", got == 1234 + depth * 31 + 1000000);
		CHECK("next call after the throw", SEND(&obj, (void *)2, 21) == 42);
		CHECK("no stale entries remain", msgtrace_current_thread()->top == msgtrace_current_thread()->base);
	}
	struct flagcount u = records_with(F_UNWOUND);
	// depth d: d+1 traced frames thrown through
	CHECK("unwound frames flagged", u.with == 1 + 2 + 3 + 4 + 5);
	printf("%s unwound %llu of %llu records\n", failures ? "FAILED" : "OK", (unsigned long long)u.with, (unsigned long long)u.all);
	return failures != 0;
}
