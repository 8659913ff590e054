/*
 * msgtrace interposer runtime: thread registration (the one slow path of the interposers) and
 * access to what they recorded. Nothing here runs per call.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* pthread_getname_np */
#endif
#include "rt.h"

#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#if defined(__APPLE__)
#include <stdint.h>
extern int pthread_threadid_np(pthread_t, uint64_t *);
extern int pthread_main_np(void);
extern int pthread_getname_np(pthread_t, char *, size_t);
#else
#include <sys/syscall.h>
#include <unistd.h>
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
/* The class is read inline as isa & mask (what object_getClass does for ordinary objects); a
 * tagged pointer has no isa and keeps the receiver itself. On Apple platforms Install replaces
 * both with the runtime's own objc_debug_isa_class_mask and objc_debug_taggedpointer_mask (0
 * when tagged pointers are disabled); these are the fallback, the runtime's values per target
 * as objc4-951 computes them (sources and table: masks.go). Tags: the low bit on x86_64 macOS
 * and Mac Catalyst only, the high bit everywhere else (objc-internal.h). Class: ISA_MASK
 * limited to the address space (objc-runtime-new.mm): 47 bits in a macOS process (x86_64,
 * arm64 = the arm64e runtime, the simulators), 36 bits on arm64 devices. Elsewhere (the test
 * runtime, GNUstep) isa is the class and nothing is tagged. */
#if defined(__APPLE__)
#include <TargetConditionals.h>
#endif
#if defined(__APPLE__) && defined(__x86_64__) && !TARGET_OS_SIMULATOR /* macOS, Mac Catalyst */
uint64_t msgtrace_isa_mask = 0x00007ffffffffff8ULL;
uint64_t msgtrace_tag_mask = 1;
#elif defined(__APPLE__) && defined(__x86_64__) /* simulators on Intel Macs */
uint64_t msgtrace_isa_mask = 0x00007ffffffffff8ULL;
uint64_t msgtrace_tag_mask = 0x8000000000000000ULL;
#elif defined(__APPLE__) && defined(__aarch64__) && (TARGET_OS_OSX || TARGET_OS_MACCATALYST || TARGET_OS_SIMULATOR)
uint64_t msgtrace_isa_mask = 0x00007ffffffffff8ULL; /* a macOS process on Apple silicon */
uint64_t msgtrace_tag_mask = 0x8000000000000000ULL;
#elif defined(__APPLE__) && defined(__aarch64__) /* iOS, tvOS, visionOS devices */
uint64_t msgtrace_isa_mask = 0x0000000ffffffff8ULL;
uint64_t msgtrace_tag_mask = 0x8000000000000000ULL;
#else
uint64_t msgtrace_isa_mask = ~(uint64_t)0;
uint64_t msgtrace_tag_mask;
#endif
void *msgtrace_orig_objc_msgSend, *msgtrace_orig_objc_msgSendSuper2;
void *msgtrace_orig_objc_msgSend_stret, *msgtrace_orig_objc_msgSend_fpret;
void *msgtrace_orig_objc_msgSend_fp2ret, *msgtrace_orig_objc_msgSendSuper2_stret;

#if defined(__APPLE__)
/* darwin: a pthread key whose slot the assembly reads straight from the thread's TSD area
 * (%gs:key*8 on x86_64, TPIDRRO_EL0 on arm64): no call on the hot path. */
uint64_t msgtrace_tsd_key MT_HIDDEN;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static void make_key(void) {
	pthread_key_t k;
	if (pthread_key_create(&k, NULL) == 0)
		msgtrace_tsd_key = k;
}
static void set_self(struct mt_thread *t) {
	pthread_once(&key_once, make_key);
	pthread_setspecific((pthread_key_t)msgtrace_tsd_key, t);
}
static struct mt_thread *get_self(void) {
	pthread_once(&key_once, make_key);
	return pthread_getspecific((pthread_key_t)msgtrace_tsd_key);
}
static uint64_t thread_id(void) {
	uint64_t id = 0;
	pthread_threadid_np(NULL, &id);
	return id;
}
#else
/* ELF: an initial-exec TLS variable, read by the assembly as %fs:offset / TPIDR_EL0+offset. */
__thread struct mt_thread *msgtrace_tls __attribute__((tls_model("initial-exec")));
static void set_self(struct mt_thread *t) { msgtrace_tls = t; }
static struct mt_thread *get_self(void) { return msgtrace_tls; }
static uint64_t thread_id(void) { return (uint64_t)syscall(SYS_gettid); }
#endif

/* Registry of every thread that made a traced call; records outlive their threads. */
struct mt_thread_info {
	struct mt_thread_info *next;
	uint64_t tid;
	int main;
	char name[64];
	struct mt_record *records;
	struct mt_thread t; /* last: its shadow stack follows */
};

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mt_thread_info *registry;
static uint32_t cfg_depth = 512;
static uint64_t cfg_records = 1 << 16;
static struct mt_thread untraced = {.busy = 1}; /* threads we could not give buffers to */

int msgtrace_configure(uint32_t stack_depth, uint64_t buffer_records) {
	if (stack_depth == 0 || buffer_records == 0)
		return -1;
	pthread_mutex_lock(&registry_lock);
	cfg_depth = stack_depth;
	cfg_records = buffer_records;
	pthread_mutex_unlock(&registry_lock);
	return 0;
}

struct mt_thread *msgtrace_current_thread(void) { return get_self(); }

struct mt_thread *msgtrace_register_thread(void) {
	struct mt_thread *self = get_self();
	if (self)
		return self;
	pthread_mutex_lock(&registry_lock);
	uint32_t depth = cfg_depth;
	uint64_t nrec = cfg_records;
	pthread_mutex_unlock(&registry_lock);
	struct mt_thread_info *info = calloc(1, sizeof *info + (size_t)depth * sizeof(struct mt_entry));
	struct mt_record *rec = malloc(nrec * sizeof(struct mt_record));
	if (!info || !rec) {
		free(info);
		free(rec);
		set_self(&untraced);
		return &untraced;
	}
	info->tid = thread_id();
	pthread_getname_np(pthread_self(), info->name, sizeof info->name);
#if defined(__APPLE__)
	info->main = pthread_main_np();
#else
	info->main = info->tid == (uint64_t)getpid();
#endif
	info->records = rec;
	struct mt_thread *t = &info->t;
	t->base = t->top = t->stack;
	t->limit = t->stack + depth;
	t->rec_cur = rec;
	t->rec_end = rec + nrec;
	pthread_mutex_lock(&registry_lock);
	info->next = registry;
	registry = info;
	pthread_mutex_unlock(&registry_lock);
	set_self(t);
	return t;
}

size_t msgtrace_snapshot(struct mt_snapshot *out, size_t max) {
	size_t n = 0;
	pthread_mutex_lock(&registry_lock);
	for (struct mt_thread_info *i = registry; i; i = i->next, n++) {
		if (n >= max)
			continue;
		out[n].tid = i->tid;
		out[n].main = i->main;
		memcpy(out[n].name, i->name, sizeof out[n].name);
		out[n].records = i->records;
		out[n].count = (uint64_t)(__atomic_load_n(&i->t.rec_cur, __ATOMIC_ACQUIRE) - i->records);
		out[n].dropped = __atomic_load_n(&i->t.dropped, __ATOMIC_RELAXED);
		out[n].overflow = __atomic_load_n(&i->t.overflow, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&registry_lock);
	return n;
}

void msgtrace_visit(mt_visit_fn fn, void *ctx) {
	pthread_mutex_lock(&registry_lock);
	for (struct mt_thread_info *i = registry; i; i = i->next)
		fn(ctx, i->tid, i->records, (uint64_t)(__atomic_load_n(&i->t.rec_cur, __ATOMIC_ACQUIRE) - i->records),
		   __atomic_load_n(&i->t.dropped, __ATOMIC_RELAXED), __atomic_load_n(&i->t.overflow, __ATOMIC_RELAXED));
	pthread_mutex_unlock(&registry_lock);
}

static void count(void *ctx, uint64_t tid, const struct mt_record *r, uint64_t n, uint64_t dropped, uint64_t overflow) {
	(void)tid;
	(void)r;
	struct mt_counters *c = ctx;
	c->threads++;
	c->recorded += n;
	c->dropped += dropped;
	c->overflow += overflow;
}

void msgtrace_counters(struct mt_counters *c) {
	memset(c, 0, sizeof *c);
	msgtrace_visit(count, c);
}

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
