// Exceptions, forced unwinds, backtraces and longjmp across traced calls: the unwinder must
// walk through the return stubs' CFI (the return address lives in the shadow stack, rbx / x19
// is saved there), reach the handler with the caller's registers intact and run every cleanup
// on the way, and the tracer must close the skipped entries as unwound and go on tracing.
//
// Built once per unwinder (libgcc_s / libgcc_eh, LLVM libunwind) by
// TestCxxExceptionThroughInterposer; every case runs on the main thread and again on a second
// thread. The methods are plain C++ functions reached through msgtrace_objc_msgSend and the
// test dispatcher: any runtime whose exceptions are C++ or _Unwind_RaiseException based (an
// Objective-C @throw) crosses the same frames.
#include "common.h"
#include <pthread.h>
#include <setjmp.h>
#include <stdexcept>
#include <unwind.h>
#if defined(__GLIBC__)
#include <execinfo.h>
#endif

// glibc unwinds a thread on pthread_exit and pthread_cancel (forced unwind: C++ cleanups run);
// musl ends it without unwinding. glibc always unwinds with libgcc_s (it loads it itself): a
// program whose C++ runtime uses LLVM's libunwind crashes there, traced or not (its
// personality routine calls libunwind on libgcc's context), and is built with FORCED_UNWIND=0.
#ifndef FORCED_UNWIND
#define FORCED_UNWIND 1
#endif
#if defined(__GLIBC__)
static const int forced_unwind_runs_cleanups = 1;
#else
static const int forced_unwind_runs_cleanups = 0;
#endif

enum {
	S_THROWER = 1, // thrower(n): throws at 0, else tail-sends itself with n - 1
	S_LEAF,        // leaf(x) = 2x
	S_CLEANUP,     // a destructor, then deep(n)
	S_DEEP,        // deep(n): throws at 0, else deep(n - 1) + 1 (no tail call)
	S_TWO_UP,      // catches what middle lets through: the handler two sends up
	S_MIDDLE,      // deep(0) + 1
	S_RETHROW,     // catches deep(n)'s exception, sends, rethrows from the handler
	S_BT,          // backtraces from inside a traced method
	S_EXITER,      // a destructor, then exit_leaf(mode)
	S_EXIT_LEAF,   // pthread_exit (mode 0) or waits to be cancelled (mode 1)
	S_JUMPER,      // jumper(n): longjmp at 0, else jumper(n - 1) + 1
};

extern struct object obj;
static __thread int dtors;   // destructors run on this thread
static volatile int all_dtors; // on every thread (an exiting thread's own count dies with it)
struct Guard {
	~Guard() {
		dtors++;
		__atomic_add_fetch(&all_dtors, 1, __ATOMIC_SEQ_CST);
	}
};
static __thread jmp_buf jump;

static int64_t thrower(struct object *self, void *, int64_t n) {
	if (n == 0)
		throw std::runtime_error("from a traced method");
	return SEND(self, (void *)S_THROWER, n - 1);
}
static int64_t leaf(struct object *, void *, int64_t x) { return x * 2; }
static int64_t deep(struct object *self, void *, int64_t n) {
	if (n == 0)
		throw std::runtime_error("deep");
	return SEND(self, (void *)S_DEEP, n - 1) + 1;
}
static int64_t cleanup(struct object *self, void *, int64_t n) {
	Guard g;
	return SEND(self, (void *)S_DEEP, n) + 1;
}
static int64_t middle(struct object *self, void *, int64_t) { return SEND(self, (void *)S_DEEP, 0) + 1; }
static int64_t two_up(struct object *self, void *, int64_t n) {
	try {
		return SEND(self, (void *)S_MIDDLE, n);
	} catch (const std::runtime_error &) {
		return 777;
	}
}
static int64_t rethrow(struct object *self, void *, int64_t n) {
	try {
		return SEND(self, (void *)S_DEEP, n);
	} catch (const std::runtime_error &) {
		Guard g;
		// a traced call inside the handler closes the entries thrown through so far
		if (SEND(self, (void *)S_LEAF, 4) != 8)
			return -1;
		throw;
	}
}

// backtrace(): the frames must reach the traced send's caller and main through the stub.
static uintptr_t bt_main_ra; // bt_caller's return address into main
static int bt_seen_caller, bt_seen_main, bt_frames;
static bool near(uintptr_t pc, uintptr_t ra) { return pc + 2 >= ra && pc <= ra; } // ra or ra - 1
static _Unwind_Reason_Code bt_step(struct _Unwind_Context *ctx, void *arg) {
	uintptr_t caller_ra = *(uintptr_t *)arg, pc = _Unwind_GetIP(ctx);
	bt_frames++;
	bt_seen_caller |= near(pc, caller_ra);
	bt_seen_main |= near(pc, bt_main_ra);
	return bt_frames > 64 ? _URC_END_OF_STACK : _URC_NO_REASON;
}
static int64_t bt_method(struct object *, void *, int64_t) {
	// the traced send's caller's return address, as the interposer saved it
	uintptr_t caller_ra = msgtrace_current_thread()->top[-1].ret;
	int ok = 1;
	bt_frames = bt_seen_caller = bt_seen_main = 0;
	_Unwind_Backtrace(bt_step, &caller_ra);
	ok &= bt_seen_caller && bt_seen_main;
#if defined(__GLIBC__)
	void *pcs[64];
	int n = backtrace(pcs, 64), caller = 0, main = 0;
	for (int i = 0; i < n; i++) {
		caller |= near((uintptr_t)pcs[i], caller_ra);
		main |= near((uintptr_t)pcs[i], bt_main_ra);
	}
	ok &= caller && main;
#endif
	return ok;
}
static __attribute__((noinline)) int64_t bt_caller() {
	bt_main_ra = (uintptr_t)__builtin_extract_return_addr(__builtin_return_address(0));
	int64_t r = SEND(&obj, (void *)S_BT, 0);
	asm volatile("" ::: "memory"); // no tail call: this frame must be on the stack
	return r;
}

static volatile int exit_ready;
static int64_t exit_leaf(struct object *self, void *, int64_t mode) {
	if (mode == 0)
		pthread_exit((void *)42);
	exit_ready = 1;
	for (;;) {
		SEND(self, (void *)S_LEAF, 1); // traced calls keep coming until the cancel lands
		pthread_testcancel();
	}
}
static int64_t exiter(struct object *self, void *, int64_t mode) {
	Guard g;
	return SEND(self, (void *)S_EXIT_LEAF, mode) + 1;
}

static int64_t jumper(struct object *self, void *, int64_t n) {
	if (n == 0)
		longjmp(jump, 1);
	return SEND(self, (void *)S_JUMPER, n - 1) + 1;
}

static struct method methods[] = {
	{(void *)S_THROWER, (void *)thrower},
	{(void *)S_LEAF, (void *)leaf},
	{(void *)S_CLEANUP, (void *)cleanup},
	{(void *)S_DEEP, (void *)deep},
	{(void *)S_TWO_UP, (void *)two_up},
	{(void *)S_MIDDLE, (void *)middle},
	{(void *)S_RETHROW, (void *)rethrow},
	{(void *)S_BT, (void *)bt_method},
	{(void *)S_EXITER, (void *)exiter},
	{(void *)S_EXIT_LEAF, (void *)exit_leaf},
	{(void *)S_JUMPER, (void *)jumper},
	{0, 0},
};
static struct tclass cls = {0, methods};
struct object obj = {&cls};

static uint64_t unwound() { return records_with(F_UNWOUND).with; }

// after every case: the next call is traced normally, closes the skipped entries, and the
// shadow stack is empty again; want = entries thrown or jumped through. The call is made in
// the case's own frame (an argument of settle): a traced call from a deeper frame would nest
// in the skipped entries rather than find them stale.
#define SETTLE(name, before, want) settle(name, before, want, SEND(&obj, (void *)S_LEAF, 21))
static void settle(const char *name, uint64_t before, uint64_t want, int64_t next) {
	char what[128];
	snprintf(what, sizeof what, "%s: next call after it", name);
	CHECK(what, next == 42);
	snprintf(what, sizeof what, "%s: no stale shadow entries", name);
	CHECK(what, msgtrace_current_thread()->top == msgtrace_current_thread()->base);
	uint64_t got = unwound() - before;
	if (got != want) {
		printf("FAIL %s: %llu calls flagged unwound, want %llu\n", name, (unsigned long long)got, (unsigned long long)want);
		failures++;
	}
}

// keeps values in callee-saved registers across the throw, so a wrong rbx / x19 rule shows
static __attribute__((noinline)) int64_t catcher(int64_t depth) {
	volatile int64_t keep = 1234;
	int64_t a = depth * 7, b = depth * 11, c = depth * 13;
	try {
		SEND(&obj, (void *)S_THROWER, depth);
	} catch (const std::runtime_error &e) {
		return keep + a + b + c + (strcmp(e.what(), "from a traced method") == 0 ? 1000000 : 0);
	}
	return -1;
}

static __attribute__((noinline)) int64_t catch_deep(int sel, int64_t n) {
	try {
		return SEND(&obj, (void *)(intptr_t)sel, n);
	} catch (const std::runtime_error &) {
		return -100;
	}
}

static void run_cases(const char *where) {
	char name[96];
#define NAME(s) (snprintf(name, sizeof name, "%s: %s", where, s), name)
	// handler in the immediate caller; thrower tail-sends itself, so the stubs nest
	for (int depth = 0; depth < 5; depth++) {
		uint64_t before = unwound();
		CHECK(NAME("caught by the caller with its registers intact"), catcher(depth) == 1234 + depth * 31 + 1000000);
		SETTLE(NAME("caller"), before, depth + 1);
	}
	// a destructor in an intermediate traced method runs (cleanup phase through the stubs)
	{
		uint64_t before = unwound();
		int d = dtors;
		CHECK(NAME("cleanup: caught"), catch_deep(S_CLEANUP, 2) == -100);
		CHECK(NAME("cleanup: destructor ran"), dtors == d + 1);
		SETTLE(NAME("cleanup"), before, 4);
	}
	// the handler two sends up, in a traced method that then returns normally
	{
		uint64_t before = unwound();
		CHECK(NAME("two sends up"), SEND(&obj, (void *)S_TWO_UP, 0) == 777);
		SETTLE(NAME("two sends up"), before, 2);
	}
	// rethrow from a handler (with a traced call and a destructor in it)
	{
		uint64_t before = unwound();
		int d = dtors;
		CHECK(NAME("rethrow: caught"), catch_deep(S_RETHROW, 2) == -100);
		CHECK(NAME("rethrow: destructor ran"), dtors == d + 1);
		SETTLE(NAME("rethrow"), before, 4);
	}
	// 1000 times
	{
		uint64_t before = unwound();
		int ok = 0, d = dtors;
		for (int i = 0; i < 1000; i++)
			ok += catch_deep(S_CLEANUP, i % 3) == -100;
		CHECK(NAME("1000 throws caught"), ok == 1000 && dtors == d + 1000);
		// 334 x 2 + 333 x 3 + 333 x 4 entries (cleanup + deep(n)..deep(0))
		SETTLE(NAME("1000 throws"), before, 334 * 2 + 333 * 3 + 333 * 4);
	}
	// backtrace() and _Unwind_Backtrace from inside a traced method
	{
		uint64_t before = unwound();
		CHECK(NAME("backtrace reaches the caller and main"), bt_caller() == 1);
		SETTLE(NAME("backtrace"), before, 0);
	}
	// longjmp over traced frames
	{
		uint64_t before = unwound();
		volatile int jumped = 0;
		if (setjmp(jump) == 0)
			SEND(&obj, (void *)S_JUMPER, 3);
		else
			jumped = 1;
		CHECK(NAME("longjmp"), jumped);
		SETTLE(NAME("longjmp"), before, 4);
	}
#undef NAME
}

static void *thread_cases(void *) {
	run_cases("thread");
	return 0;
}

// pthread_exit and pthread_cancel deep in traced calls: forced unwinds through the stubs
static void *thread_exit(void *mode) {
	SEND(&obj, (void *)S_EXITER, (int64_t)(intptr_t)mode);
	return (void *)-1;
}
static void forced(int mode) {
	const char *what = mode == 0 ? "pthread_exit" : "pthread_cancel";
	char name[64];
	pthread_t t;
	void *ret = 0;
	exit_ready = 0;
	int d = all_dtors;
	pthread_create(&t, 0, thread_exit, (void *)(intptr_t)mode);
	if (mode == 1) {
		while (!exit_ready)
			sched_yield();
		pthread_cancel(t);
	}
	pthread_join(t, &ret);
	snprintf(name, sizeof name, "%s: thread result", what);
	CHECK(name, ret == (mode == 0 ? (void *)42 : PTHREAD_CANCELED));
	snprintf(name, sizeof name, "%s: destructors", what);
	CHECK(name, all_dtors == d + forced_unwind_runs_cleanups);
	SETTLE(what, unwound(), 0); // this thread still traces normally
}
int main() {
	use_test_runtime();
	SEND(&obj, (void *)S_LEAF, 1);
	run_cases("main");
	pthread_t t;
	pthread_create(&t, 0, thread_cases, 0);
	pthread_join(t, 0);
	// the handler in main itself
	{
		uint64_t before = unwound();
		int64_t got = 0;
		try {
			got = SEND(&obj, (void *)S_DEEP, 3);
		} catch (const std::runtime_error &) {
			got = -5;
		}
		CHECK("main: handler in main", got == -5);
		SETTLE("main: handler in main", before, 4);
	}
	if (FORCED_UNWIND) {
		forced(0);
		forced(1);
	}
	struct flagcount u = records_with(F_UNWOUND);
	printf("%s unwound %llu of %llu records (forced unwinds: %s)\n", failures ? "FAILED" : "OK",
	       (unsigned long long)u.with, (unsigned long long)u.all,
	       !FORCED_UNWIND ? "not run" : forced_unwind_runs_cleanups ? "cleanups run" : "no cleanups");
	return failures != 0;
}
