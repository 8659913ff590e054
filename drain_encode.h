/*
 * The stream encoder (drain_encode.c): byte buffers, varints, CRC-32C, frames, and each frame
 * kind's payload (format: tracer/stream/stream.go; numbers: stream_format.h, generated). Pure: no
 * threads, no state but the buffers it is given, so a test calls it with fixed inputs and
 * compares its bytes with tracer.StreamWriter's (internal/selftest/encode.go). The small
 * writers are inline: the events loop calls them for every call.
 * Depends on: nothing of msgtrace's but stream_format.h.
 */
#ifndef MSGTRACE_DRAIN_ENCODE_H
#define MSGTRACE_DRAIN_ENCODE_H
#include "stream_format.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Everything declared from here on is the library's own: hidden from the dynamic symbol table,
 * so that a program defining the same name can neither interpose it nor be shadowed by it. */
#pragma GCC visibility push(hidden)

/* A growable byte buffer. A write that finds no memory is left out (the frame is then short,
 * and the reader skips it: its checksum fails). */
struct mt_buf {
	unsigned char *p;
	size_t n, cap;
};
int mt_buf_grow(struct mt_buf *b, size_t more); /* 0, or -1 without memory */
void mt_buf_free(struct mt_buf *b);

static inline int mt_buf_need(struct mt_buf *b, size_t more) {
	return b->n + more <= b->cap ? 0 : mt_buf_grow(b, more);
}
static inline void mt_put_bytes(struct mt_buf *b, const void *p, size_t n) {
	if (mt_buf_need(b, n) == 0) {
		memcpy(b->p + b->n, p, n);
		b->n += n;
	}
}
static inline void mt_put_u32(struct mt_buf *b, uint32_t v) {
	unsigned char x[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16), (unsigned char)(v >> 24)};
	mt_put_bytes(b, x, 4);
}
static inline void mt_put_u64(struct mt_buf *b, uint64_t v) {
	mt_put_u32(b, (uint32_t)v);
	mt_put_u32(b, (uint32_t)(v >> 32));
}
/* unsigned LEB128 */
static inline void mt_put_uv(struct mt_buf *b, uint64_t v) {
	if (mt_buf_need(b, 10) != 0)
		return;
	unsigned char *p = b->p + b->n;
	while (v >= 0x80) {
		*p++ = (unsigned char)v | 0x80;
		v >>= 7;
	}
	*p++ = (unsigned char)v;
	b->n = (size_t)(p - b->p);
}
/* zigzag LEB128 */
static inline void mt_put_v(struct mt_buf *b, int64_t v) { mt_put_uv(b, (uint64_t)v << 1 ^ (uint64_t)(v >> 63)); }
/* a uvarint length, then the bytes (at most MT_MAX_STRING of them; NULL is "") */
static inline void mt_put_str(struct mt_buf *b, const char *s) {
	size_t n = s ? strlen(s) : 0;
	if (n > MT_MAX_STRING)
		n = MT_MAX_STRING;
	mt_put_uv(b, n);
	mt_put_bytes(b, s, n);
}

/* Appends a frame of the kind to out: header (CRC-32C over the header from the kind byte and
 * the payload), then the payload. */
void mt_frame(struct mt_buf *out, int kind, const struct mt_buf *payload);

/* Each frame kind. Those that take pl build their payload in it (emptied first), then append
 * the frame to out. */
struct mt_process_frame {
	uint64_t pid, ppid;
	const char *path, *name, *arch, *os;
	uint64_t mode; /* MT_MODE_* */
};
void mt_enc_process(struct mt_buf *out, struct mt_buf *pl, const struct mt_process_frame *p);
struct mt_clock_frame {
	uint64_t tick, mono_ns, wall_ns, rate_num, rate_den;
};
void mt_enc_clock(struct mt_buf *out, struct mt_buf *pl, const struct mt_clock_frame *c);
/* A methods frame is its entries, appended one by one to a payload of their own, then framed. */
void mt_enc_method(struct mt_buf *methods, uint64_t id, uint64_t flags, const char *cls, const char *sel);
void mt_enc_methods(struct mt_buf *out, const struct mt_buf *methods);
void mt_enc_thread(struct mt_buf *out, struct mt_buf *pl, uint64_t tid, uint64_t flags, const char *name);
struct mt_end_frame {
	uint64_t calls, lost, overflow, waits, wait_ticks, unwritten;
};
void mt_enc_end(struct mt_buf *out, struct mt_buf *pl, const struct mt_end_frame *e);
struct mt_instant_frame {
	uint64_t tid;       /* 0: process-wide */
	uint64_t time;      /* on clock */
	uint64_t precision; /* ns: the moment lies between time minus precision and time */
	uint8_t clock;      /* MT_CLOCK_* */
	uint8_t kind;       /* MT_INSTANT_* */
	const char *name;
};
void mt_enc_instant(struct mt_buf *out, struct mt_buf *pl, const struct mt_instant_frame *in);

/* An events frame: begin, then one event at a time (prev: the previous event's end tick, the
 * header's for the first), then end. */
void mt_enc_events_begin(struct mt_buf *pl, uint64_t tid, uint64_t prev_end);
static inline void mt_enc_call(struct mt_buf *pl, uint64_t *prev, uint64_t id, int unwound, uint64_t end, uint64_t dur, uint64_t depth) {
	mt_put_uv(pl, id << MT_EVENT_TYPE_BITS | (unwound ? MT_EVENT_UNWOUND : MT_EVENT_CALL));
	mt_put_v(pl, (int64_t)(end - *prev));
	mt_put_uv(pl, dur);
	mt_put_uv(pl, depth);
	*prev = end;
}
static inline void mt_enc_mark(struct mt_buf *pl, uint64_t *prev, uint64_t kind, uint64_t end, uint64_t dur, uint64_t count) {
	mt_put_uv(pl, kind << MT_EVENT_TYPE_BITS | MT_EVENT_MARK);
	mt_put_v(pl, (int64_t)(end - *prev));
	mt_put_uv(pl, dur);
	mt_put_uv(pl, count);
	*prev = end;
}
/* A wait (MT_EVENT_WAIT): the primitive in the code, then end delta, duration, depth (the
 * waiting call's shadow-stack depth: nested under the innermost call open), address, holder
 * (the thread id the primitive named as its owner; 0 unknown). */
static inline void mt_enc_wait(struct mt_buf *pl, uint64_t *prev, uint64_t prim, uint64_t end, uint64_t dur, uint64_t depth,
			       uint64_t addr, uint64_t holder) {
	mt_put_uv(pl, prim << MT_EVENT_TYPE_BITS | MT_EVENT_WAIT);
	mt_put_v(pl, (int64_t)(end - *prev));
	mt_put_uv(pl, dur);
	mt_put_uv(pl, depth);
	mt_put_uv(pl, addr);
	mt_put_uv(pl, holder);
	*prev = end;
}
static inline void mt_enc_events_end(struct mt_buf *out, const struct mt_buf *pl) { mt_frame(out, MT_FRAME_EVENTS, pl); }

/* An open frame: begin, the calls outermost first (age: tick minus the call's start), end. */
void mt_enc_open_begin(struct mt_buf *pl, uint64_t tid, uint64_t tick);
static inline void mt_enc_open_call(struct mt_buf *pl, uint64_t id, uint64_t age, uint64_t depth) {
	mt_put_uv(pl, id);
	mt_put_uv(pl, age);
	mt_put_uv(pl, depth);
}
static inline void mt_enc_open_end(struct mt_buf *out, const struct mt_buf *pl) { mt_frame(out, MT_FRAME_OPEN, pl); }

/* A cpu frame (drain_cpu.c): begin at the tick the counters were read, one entry per thread
 * (known: MT_CPU_* bits, the counters given in that order), end. */
void mt_enc_cpu_begin(struct mt_buf *pl, uint64_t tick);
static inline void mt_enc_cpu_thread(struct mt_buf *pl, uint64_t tid, uint64_t known, uint64_t running, uint64_t runnable, uint64_t slices) {
	mt_put_uv(pl, tid);
	mt_put_uv(pl, known);
	if (known & MT_CPU_RUNNING)
		mt_put_uv(pl, running);
	if (known & MT_CPU_RUNNABLE)
		mt_put_uv(pl, runnable);
	if (known & MT_CPU_SLICES)
		mt_put_uv(pl, slices);
}
static inline void mt_enc_cpu_end(struct mt_buf *out, const struct mt_buf *pl) { mt_frame(out, MT_FRAME_CPU, pl); }
#pragma GCC visibility pop
#endif
