/* Shared by the hand-written interposer tests: a tiny object model for the test dispatcher. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "rt.h"

#ifdef __cplusplus
extern "C" {
#endif
struct method { void *sel; void *imp; };
struct tclass { struct tclass *super; struct method *methods; };
struct object { struct tclass *isa; };
void test_msgSend(void), test_msgSend_stret(void), test_msgSendSuper2(void), test_msgSendSuper2_stret(void);
#ifdef __cplusplus
}
#endif

static int failures;
#define CHECK(name, cond)                                                  \
	do {                                                               \
		if (!(cond)) {                                             \
			printf("FAIL %s (line %d)\n", name, __LINE__);     \
			failures++;                                        \
		}                                                          \
	} while (0)

static void use_test_runtime(void) {
	msgtrace_orig_objc_msgSend = msgtrace_orig_objc_msgSend_fpret = msgtrace_orig_objc_msgSend_fp2ret = (void *)test_msgSend;
	msgtrace_orig_objc_msgSend_stret = (void *)test_msgSend_stret;
	msgtrace_orig_objc_msgSendSuper2 = (void *)test_msgSendSuper2;
	msgtrace_orig_objc_msgSendSuper2_stret = (void *)test_msgSendSuper2_stret;
	msgtrace_active = 1;
}

typedef int64_t (*send_fn)(struct object *, void *, int64_t);
#define SEND ((send_fn)(void *)msgtrace_objc_msgSend)

/* totals over every thread's records: all of them, and those with a flag */
struct flagcount { uint64_t flag, with, all, maxdepth; };
static void count_flag(void *ctx, uint64_t tid, const struct mt_record *r, uint64_t n, uint64_t d, uint64_t o) {
	struct flagcount *c = (struct flagcount *)ctx;
	(void)tid, (void)d, (void)o;
	for (uint64_t i = 0; i < n; i++) {
		uint64_t flags = r[i].cls >> FLAG_SHIFT, depth = (r[i].cls >> DEPTH_SHIFT) & 0xfff;
		c->all++;
		if (flags & c->flag)
			c->with++;
		if (depth > c->maxdepth)
			c->maxdepth = depth;
	}
}
static struct flagcount records_with(uint64_t flag) {
	struct flagcount c = {flag, 0, 0, 0};
	msgtrace_visit(count_flag, &c);
	return c;
}
