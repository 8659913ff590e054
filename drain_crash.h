/*
 * What the crash handler's two files share: drain_crash_where.c (where a program counter is,
 * which frame) and drain_crash.c (the crash noted, named, told). Everything here is
 * async-signal-safe.
 */
#ifndef MSGTRACE_DRAIN_CRASH_H
#define MSGTRACE_DRAIN_CRASH_H
#include <stddef.h>
#include <stdint.h>

#pragma GCC visibility push(hidden)
/* What a frame of ours is, for what the registers say. */
enum {
	W_C,           /* the recorder's or the drain's C (or the Go runtime's C half, runtime/cgo) */
	W_SLOW,        /* msgtrace_slow_*: the interposer's calls into C */
	W_SEND,        /* objc_msgSend(_fpret, _fp2ret): receiver, selector in arguments 0, 1 */
	W_STRET,       /* objc_msgSend_stret: in arguments 1, 2 */
	W_SUPER,       /* objc_msgSendSuper2: objc_super * in argument 0, selector in 1 */
	W_SUPER_STRET, /* objc_msgSendSuper2_stret: in 1, 2 */
	W_METHOD,      /* msgtrace_method_entry, where the trampolines land: receiver, selector in 0, 1 */
	W_TRAMP,       /* a method trampoline: the same, and the method's own class and selector */
	W_AFTER,       /* a return stub: the call's shadow entry in rbx / x19 */
	W_FOREIGN,     /* the drain thread, in code not ours (the runtime's, the C library's) */
};
/* Async-signal-safe formatting into a fixed buffer (always terminated; what does not fit is cut). */
struct mt_fmt {
	char *p;
	size_t n, cap;
};
static inline void mt_fmt_put(struct mt_fmt *o, const char *s) {
	while (s && *s && o->n + 1 < o->cap)
		o->p[o->n++] = *s++;
	o->p[o->n] = 0;
}
static inline void mt_fmt_hex(struct mt_fmt *o, uint64_t v) {
	char b[19], *q = b + sizeof b;
	*--q = 0;
	do {
		*--q = "0123456789abcdef"[v & 15];
		v >>= 4;
	} while (v);
	*--q = 'x';
	*--q = '0';
	mt_fmt_put(o, q);
}
static inline void mt_fmt_dec(struct mt_fmt *o, uint64_t v) {
	char b[21], *q = b + sizeof b;
	*--q = 0;
	do {
		*--q = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	mt_fmt_put(o, q);
}
#define WHERE_NOT_OURS (-1) /* not the library's code */
#define WHERE_GO (-2)       /* the Go runtime's code */

/* ---- drain_crash_where.c ---- */
int mt_crash_ready(void); /* mt_crash_setup has run */
/* What pc is: a W_* of ours (its frame named into frame), WHERE_GO or WHERE_NOT_OURS. On the
 * drain thread (on_drain) code outside the library is W_FOREIGN, its frame named too. */
int mt_crash_classify(uintptr_t pc, int on_drain, char *frame, size_t cap);
void *mt_crash_tramp_class(uintptr_t pc); /* the class of the method whose trampoline holds pc (W_TRAMP) */
#pragma GCC visibility pop
#endif
