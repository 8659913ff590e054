/* Tagged-pointer receivers through the interposer. On Apple's MSB and split layouts (arm64,
 * the x86_64 simulator) the tag bit is bit 63 and the index sits in bits 60-62 or 0-2, and
 * objc4 obfuscates the payload (random high bits on every layout): none of it may leak into
 * the record's depth and flag bits, and the bits that decide the class must survive. */
#include "common.h"

#define TAG (1ULL << 63)
#define SEL_OUTER 3001
#define SEL_INNER 3002

/* the receivers: MSB layout (index 5 in bits 60-62, payload with high bits set) and one with
 * every payload bit set */
static const uint64_t recv1 = TAG | (5ULL << 60) | 0x0fa5a5123456789aULL;
static const uint64_t recv2 = 0xffffffffffffffffULL;

static int64_t inner(uint64_t self, void *cmd, int64_t x) { (void)self, (void)cmd; return x + 1; }
static int64_t outer(uint64_t self, void *cmd, int64_t x);
/* objc_msgSend's contract for tagged receivers: the method by selector */
static int64_t dispatch(uint64_t self, void *cmd, int64_t x) {
	return (uintptr_t)cmd == SEL_OUTER ? outer(self, cmd, x) : inner(self, cmd, x);
}
typedef int64_t (*tsend_fn)(uint64_t, void *, int64_t);
#define TSEND ((tsend_fn)(void *)msgtrace_objc_msgSend)
static int64_t outer(uint64_t self, void *cmd, int64_t x) { (void)cmd; return TSEND(self, (void *)SEL_INNER, x) * 2; }

struct rec {
	uint64_t cls, sel;
};
static struct rec got[8];
static int ngot;
static void collect(void *ctx, uint64_t tid, const struct mt_record *r, uint64_t n, uint64_t d, uint64_t o) {
	(void)ctx, (void)tid, (void)d, (void)o;
	for (uint64_t i = 0; i < n && ngot < 8; i++)
		got[ngot++] = (struct rec){r[i].cls, r[i].sel};
}

int main(void) {
	use_test_runtime();
	msgtrace_orig_objc_msgSend = (void *)dispatch;
	msgtrace_tag_mask = TAG;
	CHECK("outer(recv1)", TSEND(recv1, (void *)SEL_OUTER, 1) == 4);
	CHECK("outer(recv2)", TSEND(recv2, (void *)SEL_OUTER, 2) == 6);
	msgtrace_active = 0;
	msgtrace_visit(collect, 0);
	CHECK("record count", ngot == 4);
	const uint64_t recvs[] = {recv1, recv1, recv2, recv2}, depths[] = {1, 0, 1, 0}, sels[] = {SEL_INNER, SEL_OUTER, SEL_INNER, SEL_OUTER};
	for (int i = 0; i < ngot && i < 4; i++) {
		uint64_t flags = got[i].cls >> FLAG_SHIFT, depth = (got[i].cls >> DEPTH_SHIFT) & 0xfff;
		uint64_t back = MT_UNFOLD_TAGGED(got[i].cls & ((1ULL << CLS_BITS) - 1));
		uint64_t want = recvs[i] & ~0x0000ffff00000000ULL; /* the payload bits 32-47 are not kept */
		if (flags != F_TAGGED || depth != depths[i] || got[i].sel != sels[i] || back != want) {
			printf("FAIL record %d: flags %llu depth %llu sel %llu receiver %#llx, want flags %d depth %llu sel %llu receiver %#llx\n", i,
			       (unsigned long long)flags, (unsigned long long)depth, (unsigned long long)got[i].sel, (unsigned long long)back, F_TAGGED,
			       (unsigned long long)depths[i], (unsigned long long)sels[i], (unsigned long long)want);
			failures++;
		}
	}
	printf("%s %d records\n", failures ? "FAILED" : "OK", ngot);
	return failures != 0;
}
