/*
 * The stream encoder: CRC-32C, frames, and the payloads of every frame kind (declared, with
 * the inline varint writers, in drain_encode.h). Pure: nothing here knows threads, chunks or
 * files; the drain calls it, and so does the test that checks it byte for byte against
 * tracer.StreamWriter (stream_test.go).
 * Depends on: drain_encode.h, stream_format.h only.
 */
#include "drain_encode.h"

#include <stdlib.h>

int mt_buf_grow(struct mt_buf *b, size_t more) {
	size_t cap = b->cap ? b->cap : 4096;
	while (cap < b->n + more)
		cap *= 2;
	unsigned char *p = realloc(b->p, cap);
	if (!p)
		return -1;
	b->p = p;
	b->cap = cap;
	return 0;
}

void mt_buf_free(struct mt_buf *b) {
	free(b->p);
	b->p = NULL;
	b->n = b->cap = 0;
}

/* ---- CRC-32C (Castagnoli), slicing by 8 ----
 * The table is a constant, computed before the first frame (twice at worst, with the same
 * values, if two threads start at once). */
static uint32_t crc_table[8][256];
static int crc_ready;

static void crc_init(void) {
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ MT_CRC32C_POLY : c >> 1;
		crc_table[0][i] = c;
	}
	for (uint32_t i = 0; i < 256; i++)
		for (int t = 1; t < 8; t++)
			crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xff];
	__atomic_store_n(&crc_ready, 1, __ATOMIC_RELEASE);
}

static uint32_t crc32c(uint32_t crc, const unsigned char *p, size_t n) {
	if (!__atomic_load_n(&crc_ready, __ATOMIC_ACQUIRE))
		crc_init();
	crc = ~crc;
	while (n >= 8) {
		uint32_t lo = crc ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
		crc = crc_table[7][lo & 0xff] ^ crc_table[6][(lo >> 8) & 0xff] ^ crc_table[5][(lo >> 16) & 0xff] ^
		      crc_table[4][lo >> 24] ^ crc_table[3][p[4]] ^ crc_table[2][p[5]] ^ crc_table[1][p[6]] ^ crc_table[0][p[7]];
		p += 8;
		n -= 8;
	}
	while (n--)
		crc = (crc >> 8) ^ crc_table[0][(crc ^ *p++) & 0xff];
	return ~crc;
}

static void put_le32(unsigned char *p, uint32_t v) {
	p[0] = (unsigned char)v, p[1] = (unsigned char)(v >> 8), p[2] = (unsigned char)(v >> 16), p[3] = (unsigned char)(v >> 24);
}

void mt_frame(struct mt_buf *out, int kind, const struct mt_buf *pl) {
	unsigned char h[MT_FRAME_HEADER] = {0};
	memcpy(h, MT_STREAM_MAGIC, MT_STREAM_MAGIC_LEN);
	h[MT_FRAME_KIND_AT] = (unsigned char)kind; /* reserved bytes stay 0 */
	put_le32(h + MT_FRAME_LEN_AT, (uint32_t)pl->n);
	uint32_t crc = crc32c(0, h + MT_FRAME_KIND_AT, MT_FRAME_CRC_AT - MT_FRAME_KIND_AT);
	put_le32(h + MT_FRAME_CRC_AT, crc32c(crc, pl->p, pl->n));
	mt_put_bytes(out, h, sizeof h);
	mt_put_bytes(out, pl->p, pl->n);
}

void mt_enc_process(struct mt_buf *out, struct mt_buf *pl, const struct mt_process_frame *p) {
	pl->n = 0;
	mt_put_u32(pl, MT_STREAM_VERSION);
	mt_put_u32(pl, 0); /* reserved */
	mt_put_u64(pl, p->pid);
	mt_put_u64(pl, p->ppid);
	mt_put_str(pl, p->path);
	mt_put_str(pl, p->name);
	mt_put_str(pl, p->arch);
	mt_put_str(pl, p->os);
	mt_put_uv(pl, p->mode);
	mt_frame(out, MT_FRAME_PROCESS, pl);
}

void mt_enc_clock(struct mt_buf *out, struct mt_buf *pl, const struct mt_clock_frame *c) {
	pl->n = 0;
	mt_put_u64(pl, c->tick);
	mt_put_u64(pl, c->mono_ns);
	mt_put_u64(pl, c->wall_ns);
	mt_put_u64(pl, c->rate_num);
	mt_put_u64(pl, c->rate_den);
	mt_frame(out, MT_FRAME_CLOCK, pl);
}

void mt_enc_method(struct mt_buf *methods, uint64_t id, uint64_t flags, const char *cls, const char *sel) {
	mt_put_uv(methods, id);
	mt_put_uv(methods, flags);
	mt_put_str(methods, cls);
	mt_put_str(methods, sel);
}

void mt_enc_methods(struct mt_buf *out, const struct mt_buf *methods) { mt_frame(out, MT_FRAME_METHODS, methods); }

void mt_enc_thread(struct mt_buf *out, struct mt_buf *pl, uint64_t tid, uint64_t flags, const char *name) {
	pl->n = 0;
	mt_put_u64(pl, tid);
	mt_put_uv(pl, flags);
	mt_put_str(pl, name);
	mt_frame(out, MT_FRAME_THREAD, pl);
}

void mt_enc_end(struct mt_buf *out, struct mt_buf *pl, const struct mt_end_frame *e) {
	pl->n = 0;
	mt_put_uv(pl, e->calls);
	mt_put_uv(pl, e->lost);
	mt_put_uv(pl, e->overflow);
	mt_put_uv(pl, e->waits);
	mt_put_uv(pl, e->wait_ticks);
	mt_put_uv(pl, e->unwritten);
	mt_frame(out, MT_FRAME_END, pl);
}

void mt_enc_instant(struct mt_buf *out, struct mt_buf *pl, const struct mt_instant_frame *in) {
	pl->n = 0;
	mt_put_u64(pl, in->tid);
	mt_put_bytes(pl, &in->clock, 1);
	mt_put_u64(pl, in->time);
	mt_put_uv(pl, in->kind);
	mt_put_uv(pl, in->precision);
	mt_put_str(pl, in->name);
	mt_frame(out, MT_FRAME_INSTANT, pl);
}

void mt_enc_events_begin(struct mt_buf *pl, uint64_t tid, uint64_t prev_end) {
	pl->n = 0;
	mt_put_u64(pl, tid);
	mt_put_u64(pl, prev_end);
}

void mt_enc_open_begin(struct mt_buf *pl, uint64_t tid, uint64_t tick) {
	pl->n = 0;
	mt_put_u64(pl, tid);
	mt_put_u64(pl, tick);
}

void mt_enc_cpu_begin(struct mt_buf *pl, uint64_t tick) {
	pl->n = 0;
	mt_put_u64(pl, tick);
}
