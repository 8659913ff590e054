/*
 * msgtrace interposer runtime: what the assembly interposers (msgsend_*.S) read on every call
 * (whether tracing is on, the isa and tagged-pointer masks, the shortest call kept, the XSAVE
 * size, the originals they forward to), the tick counter they read, and the check that rt.h's
 * offsets are the C structs'. The rest of the recorder (rt_internal.h lists its files) builds
 * on this; this file calls none of them.
 */
#include "rt.h"

#include <stddef.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif


_Static_assert(offsetof(struct mt_entry, ret) == E_RET, "E_RET");
_Static_assert(offsetof(struct mt_entry, sp) == E_SP, "E_SP");
_Static_assert(offsetof(struct mt_entry, start) == E_START, "E_START");
_Static_assert(offsetof(struct mt_entry, cls) == E_CLS, "E_CLS");
_Static_assert(offsetof(struct mt_entry, sel) == E_SEL, "E_SEL");
_Static_assert(offsetof(struct mt_entry, save) == E_SAVE, "E_SAVE");
_Static_assert(offsetof(struct mt_entry, rv0) == E_RV0, "E_RV0");
_Static_assert(sizeof(struct mt_entry) == ENTRY_SIZE, "ENTRY_SIZE");
_Static_assert(sizeof(struct mt_record) == RECORD_SIZE, "RECORD_SIZE");
_Static_assert(offsetof(struct mt_thread, top) == T_TOP, "T_TOP");
_Static_assert(offsetof(struct mt_thread, limit) == T_LIMIT, "T_LIMIT");
_Static_assert(offsetof(struct mt_thread, base) == T_BASE, "T_BASE");
_Static_assert(offsetof(struct mt_thread, rec_cur) == T_REC_CUR, "T_REC_CUR");
_Static_assert(offsetof(struct mt_thread, rec_end) == T_REC_END, "T_REC_END");
_Static_assert(offsetof(struct mt_thread, dropped) == T_DROPPED, "T_DROPPED");
_Static_assert(offsetof(struct mt_thread, overflow) == T_OVERFLOW, "T_OVERFLOW");
_Static_assert(offsetof(struct mt_thread, busy) == T_BUSY, "T_BUSY");
_Static_assert(offsetof(struct mt_thread, scratch) == T_SCRATCH, "T_SCRATCH");
_Static_assert(offsetof(struct mt_thread, stack) == T_STACK, "T_STACK");

volatile uint32_t msgtrace_active;
uint64_t msgtrace_min_ticks;
uint32_t msgtrace_sel_by_index;
uint64_t msgtrace_xsave_size;
/* The class is read inline as isa & mask (what object_getClass does for ordinary objects); a
 * tagged pointer has no isa and keeps the receiver itself, named later by the runtime's
 * object_getClass. On Apple platforms Install replaces both with the runtime's own
 * objc_debug_isa_class_mask and objc_debug_taggedpointer_mask (0 when tagged pointers are
 * disabled); these are the fallback, the runtime's values per target as objc4-951 computes them
 * (sources and table: masks.go). Tags: the low bit on x86_64 macOS and Mac Catalyst only, the
 * high bit everywhere else (objc-internal.h). Class: ISA_MASK limited to the address space
 * (objc-runtime-new.mm): 47 bits in a macOS process (x86_64, arm64 = the arm64e runtime, the
 * simulators), 36 bits on arm64 devices. Elsewhere (GNUstep, the test runtime) isa is the class.
 *
 * Every tag mask also holds MT_UNALIGNED_BITS: a receiver that is not 8-byte aligned cannot be
 * an object on any 64-bit runtime (objects are malloc'd, classes are pointer-aligned data), so
 * it is never dereferenced. Those are GNUstep libobjc2's small objects exactly (its
 * OBJC_SMALL_OBJECT_MASK on 64-bit: objc_registerSmallObjectClass_np gives the class of the
 * receivers whose low 3 bits are the class's index), and a runtime we do not know that tags in
 * the low bits is safe too. */
#if defined(__APPLE__)
#include <TargetConditionals.h>
#endif
#if defined(__APPLE__) && defined(__x86_64__) && !TARGET_OS_SIMULATOR /* macOS, Mac Catalyst */
uint64_t msgtrace_isa_mask = 0x00007ffffffffff8ULL;
uint64_t msgtrace_tag_mask = 1 | MT_UNALIGNED_BITS;
#elif defined(__APPLE__) && defined(__x86_64__) /* simulators on Intel Macs */
uint64_t msgtrace_isa_mask = 0x00007ffffffffff8ULL;
uint64_t msgtrace_tag_mask = 0x8000000000000000ULL | MT_UNALIGNED_BITS;
#elif defined(__APPLE__) && defined(__aarch64__) && (TARGET_OS_OSX || TARGET_OS_MACCATALYST || TARGET_OS_SIMULATOR)
uint64_t msgtrace_isa_mask = 0x00007ffffffffff8ULL; /* a macOS process on Apple silicon */
uint64_t msgtrace_tag_mask = 0x8000000000000000ULL | MT_UNALIGNED_BITS;
#elif defined(__APPLE__) && defined(__aarch64__) /* iOS, tvOS, visionOS devices */
uint64_t msgtrace_isa_mask = 0x0000000ffffffff8ULL;
uint64_t msgtrace_tag_mask = 0x8000000000000000ULL | MT_UNALIGNED_BITS;
#else
uint64_t msgtrace_isa_mask = ~(uint64_t)0;
uint64_t msgtrace_tag_mask = MT_UNALIGNED_BITS;
#endif
void *msgtrace_orig_objc_msgSend, *msgtrace_orig_objc_msgSendSuper2;
void *msgtrace_orig_objc_msgSend_stret, *msgtrace_orig_objc_msgSend_fpret;
void *msgtrace_orig_objc_msgSend_fp2ret, *msgtrace_orig_objc_msgSendSuper2_stret;

uint64_t msgtrace_now_ticks(void) {
#if defined(__x86_64__)
	uint32_t lo, hi;
	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	return (uint64_t)hi << 32 | lo;
#elif defined(__aarch64__)
	uint64_t v;
	__asm__ volatile("mrs %0, CNTVCT_EL0" : "=r"(v));
	return v;
#else
	return 0;
#endif
}

uint64_t msgtrace_tick_hz(void) {
#if defined(__aarch64__)
	uint64_t f;
	__asm__ volatile("mrs %0, CNTFRQ_EL0" : "=r"(f));
	return f;
#else
	return 0;
#endif
}

/* amd64: the size of the XSAVE area for every state component the CPU has (CPUID 0xD), so that the slow paths save every vector register (ymm/zmm upper halves included)
 * and the x87 stack before calling C; 0 falls back to FXSAVE. */
__attribute__((constructor)) static void msgtrace_rt_init(void) {
#if defined(__x86_64__)
	unsigned a, b, c, d;
	if (__get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 27)) /* OSXSAVE */ && __get_cpuid_count(0xd, 0, &a, &b, &c, &d) && c >= 576)
		msgtrace_xsave_size = (c + 63) & ~63u; /* ECX: every supported component (macOS enables AVX-512 per thread) */
#endif
}
