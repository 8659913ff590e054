/* Method trampolines and the interposer together: which calls are one record and which nest.
 *   - a send the interposer records that lands in an instrumented method: one call, named by
 *     the implementing class (the entry is renamed, not pushed);
 *   - a traced method that tail-calls an instrumented method: the callee nests under it (the
 *     tail-caller's entry is owned by a method, or has another selector);
 * and the trampolines after tracing stops: straight to the original, nothing recorded. */
#include "common.h"
#include "trampoline.h"

#define TRAMP(i) ((void *)(msgtrace_tramp_text + (i) * MT_STRIDE))
#define SEL_A 2001
#define SEL_B 2002
#define SEL_X 2003

void *tramp_b; /* trampoline of B, for the tail calls */
int64_t mA(struct object *self, void *cmd); /* tail-calls B through its trampoline (asm below) */
int64_t mX(struct object *self, void *cmd); /* same, not instrumented */
#if defined(__x86_64__)
__asm__(".text\n.globl mA, mX\nmA:\nmX:\n\tmovl $2002, %esi\n\tjmp *tramp_b(%rip)\n");
#else
__asm__(".text\n.globl mA, mX\nmA:\nmX:\n\tmov x1, #2002\n\tadrp x16, tramp_b\n\tldr x16, [x16, :lo12:tramp_b]\n\tbr x16\n");
#endif
static int64_t mB(struct object *self, void *cmd) {
	(void)self;
	return (int64_t)cmd + 40000;
}

static struct method methods[4];
static struct tclass cls = {0, methods}, implA, implB;
static struct object object = {&cls};

struct rec {
	uint64_t cls, sel, depth;
};
static struct rec got[64];
static int ngot;
static void collect(void *ctx, uint64_t tid, const struct mt_record *r, uint64_t n, uint64_t dropped, uint64_t overflow) {
	(void)ctx, (void)tid, (void)dropped, (void)overflow;
	for (uint64_t i = 0; i < n && ngot < 64; i++)
		got[ngot++] = (struct rec){r[i].cls & ((1ULL << CLS_BITS) - 1), r[i].sel, (r[i].cls >> DEPTH_SHIFT) & 0xfff};
}

int main(void) {
	use_test_runtime();
	msgtrace_tramp_data[0] = (struct mt_tramp_data){(void *)mA, &implA, (void *)SEL_A, 0};
	msgtrace_tramp_data[1] = (struct mt_tramp_data){(void *)mB, &implB, (void *)SEL_B, 0};
	tramp_b = TRAMP(1);
	methods[0] = (struct method){(void *)SEL_A, TRAMP(0)};
	methods[1] = (struct method){(void *)SEL_B, TRAMP(1)};
	methods[2] = (struct method){(void *)SEL_X, (void *)mX}; /* not instrumented */
	typedef int64_t (*fn)(struct object *, void *);
	struct object *o = &object;
	msgtrace_active = 1;
	CHECK("A through its trampoline", ((fn)TRAMP(0))(o, (void *)SEL_A) == SEL_B + 40000);
	CHECK("send to A", ((fn)msgtrace_objc_msgSend)(o, (void *)SEL_A) == SEL_B + 40000);
	CHECK("send to B", ((fn)msgtrace_objc_msgSend)(o, (void *)SEL_B) == SEL_B + 40000);
	CHECK("send to X", ((fn)msgtrace_objc_msgSend)(o, (void *)SEL_X) == SEL_B + 40000);
	msgtrace_active = 0;
	CHECK("after stop", ((fn)TRAMP(0))(o, (void *)SEL_A) == SEL_B + 40000);
	msgtrace_visit(collect, 0);
	struct rec want[] = {
	    {(uint64_t)&implB, SEL_B, 1}, {(uint64_t)&implA, SEL_A, 0}, /* A tail-calls B: nests */
	    {(uint64_t)&implB, SEL_B, 1}, {(uint64_t)&implA, SEL_A, 0}, /* the send renamed to A; B nests */
	    {(uint64_t)&implB, SEL_B, 0},                               /* the send renamed to B: once */
	    {(uint64_t)&implB, SEL_B, 1}, {(uint64_t)&cls, SEL_X, 0},   /* X (a send) tail-calls B: nests */
	};
	int n = sizeof want / sizeof want[0];
	CHECK("record count", ngot == n);
	for (int i = 0; i < n && i < ngot; i++)
		if (got[i].cls != want[i].cls || got[i].sel != want[i].sel || got[i].depth != want[i].depth) {
			printf("FAIL record %d: cls %#llx sel %llu depth %llu, want cls %#llx sel %llu depth %llu\n", i,
			       (unsigned long long)got[i].cls, (unsigned long long)got[i].sel, (unsigned long long)got[i].depth,
			       (unsigned long long)want[i].cls, (unsigned long long)want[i].sel, (unsigned long long)want[i].depth);
			failures++;
		}
	printf("%s %d records\n", failures ? "FAILED" : "OK", ngot);
	return failures != 0;
}
