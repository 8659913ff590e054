/*
 * Ring mode's dump (the flight recorder). The threads keep their chunks in rings of their own
 * and take them back themselves (rt_internal.h, rt_ring.c): the drain only writes them, on
 * msgtrace_stream_flush, at exit and on SIGUSR2. A dump is a whole new file: per thread how
 * much was overwritten (a mark), what its ring keeps, its partial chunk, its open calls. The
 * threads go on recording, and taking chunks back, while it is written: a thread's chunks are
 * read newest first, each copied and kept only if the ring's head had not passed it meanwhile;
 * the first one taken back ends the thread's part, whose overwritten count is then what the
 * chunks before the oldest one kept held. The frames are put back in time order before they
 * are written.
 * Depends on: drain_encode.c, drain_clock.c, drain_output.c, drain_names.c, drain_records.c,
 * drain_cpu.c (the cpu frames kept); the recorder: rt_ring.c (the rings), rt_pool.c (the chunks),
 * rt_thread.c (the registry's lock).
 */
#include "drain_internal.h"

#include <stdlib.h>

/* A thread's part is read again after a change under it, this many times at most. */
#define RING_TRIES 16

static struct {
	struct mt_record *copy; /* one chunk's records */
	struct mt_buf rev;      /* a thread's frames in time order */
	size_t *segs, nsegs, capsegs;
} dump;

static int add_seg(size_t at) {
	if (dump.nsegs == dump.capsegs) {
		size_t cap = dump.capsegs ? 2 * dump.capsegs : 64;
		size_t *p = realloc(dump.segs, cap * sizeof *dump.segs);
		if (!p)
			return -1;
		dump.segs = p;
		dump.capsegs = cap;
	}
	dump.segs[dump.nsegs++] = at;
	return 0;
}

/* One try at a thread's frames; 0 when it put a chunk in between two reads or took back its
 * partial chunk while it was read: what was written must be rolled back and read again. */
static int ring_thread_once(struct mt_ring *r, struct mt_thread_info *live, struct mt_thread_info *id) {
	struct mt_buf *out = &mt_out.out;
	uint32_t n = msgtrace_chunk_records;
	uint64_t t = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
	struct mt_chunk *c = NULL;
	struct mt_record *cur = NULL;
	if (live) {
		c = __atomic_load_n(&live->chunk, __ATOMIC_ACQUIRE);
		cur = __atomic_load_n(&live->t.rec_cur, __ATOMIC_ACQUIRE);
		if (c && (c->seq != t || cur < c->rec || cur > c->rec + n))
			return 0; /* it switched chunks between the reads */
	}
	/* the totals of every chunk before position t: what was overwritten if none is kept */
	uint32_t s1 = __atomic_load_n(&r->seqlock, __ATOMIC_ACQUIRE);
	uint64_t t2 = __atomic_load_n(&r->tail, __ATOMIC_RELAXED);
	uint64_t calls = __atomic_load_n(&r->calls, __ATOMIC_RELAXED);
	uint64_t first = __atomic_load_n(&r->first, __ATOMIC_RELAXED);
	uint64_t last = __atomic_load_n(&r->last, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	if ((s1 & 1) || t2 != t || __atomic_load_n(&r->seqlock, __ATOMIC_RELAXED) != s1)
		return 0;
	mt_announce(id, 0);
	size_t base = out->n;
	dump.nsegs = 0;
	if (c) { /* the partial chunk: it may be put in the ring meanwhile, but not taken back */
		struct mt_record *from = c->drained;
		uint64_t m = from >= c->rec && cur >= from ? (uint64_t)(cur - from) : 0;
		memcpy(dump.copy, from, m * sizeof *from);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&r->head, __ATOMIC_RELAXED) > t)
			return 0;
		if (add_seg(out->n) != 0)
			return 0;
		mt_encode(id, dump.copy, dump.copy + m);
	}
	for (uint64_t p = t; p > 0; p--) { /* the kept chunks, newest first */
		uint64_t q = p - 1;
		if (__atomic_load_n(&r->head, __ATOMIC_ACQUIRE) > q)
			break;
		struct mt_chunk *k = msgtrace_chunk_at(__atomic_load_n(&r->slots[q & r->mask], __ATOMIC_RELAXED));
		struct mt_record *from = k->drained, *to = k->used;
		uint64_t bc = k->before_calls, bf = k->before_first, bl = k->before_last;
		int ok = from >= k->rec && to >= from && to <= k->rec + n;
		uint64_t m = ok ? (uint64_t)(to - from) : 0;
		memcpy(dump.copy, from, m * sizeof *from);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&r->head, __ATOMIC_RELAXED) > q || !ok)
			break; /* taken back while it was read: it and the older ones were overwritten */
		calls = bc, first = bf, last = bl;
		if (add_seg(out->n) != 0)
			return 0;
		mt_encode(id, dump.copy, dump.copy + m);
	}
	/* the overwritten mark, then the chunks oldest first */
	dump.rev.n = 0;
	for (size_t k = dump.nsegs, end = out->n; k-- > 0; end = dump.segs[k])
		mt_put_bytes(&dump.rev, out->p + dump.segs[k], end - dump.segs[k]);
	out->n = base;
	if (calls) {
		struct mt_record mk = {first, last, REC_MARK(MT_MARK_OVERWRITTEN), calls};
		mt_encode(id, &mk, &mk + 1);
	}
	mt_put_bytes(out, dump.rev.p, dump.rev.n);
	return 1;
}

static void ring_thread(struct mt_ring *r) {
	uint32_t st = __atomic_load_n(&r->state, __ATOMIC_ACQUIRE);
	if (st != RING_LIVE && st != RING_EXITED && st != RING_DONE)
		return;
	struct mt_thread_info *live = st == RING_LIVE && r->live && !__atomic_load_n(&r->live->exited, __ATOMIC_ACQUIRE) ? r->live : NULL;
	struct mt_thread_info *id = live ? live : &r->id;
	size_t at = mt_out.out.n;
	uint64_t calls = mt_rec.written_calls, marks = mt_rec.written_marks;
	int ok = 0;
	for (int k = 0; k < RING_TRIES && !ok; k++) {
		mt_dt(id)->announced = 0;
		ok = ring_thread_once(r, live, id);
		if (!ok) {
			mt_out.out.n = at;
			mt_rec.written_calls = calls, mt_rec.written_marks = marks;
		}
	}
	if (!ok)
		return;
	if (live) {
		mt_dt(live)->snap_top = mt_dt(live)->snap_start = 0;
		mt_open_snapshot(live, 0);
	} else if (mt_rec.written_calls + mt_rec.written_marks > calls + marks) {
		mt_thread_frame(id, 1);
	} else {
		mt_out.out.n = at; /* a thread that is gone and left nothing */
	}
}

/* Writes the rings to a new file (replacing the previous dump). */
void mt_ring_dump(void) {
	mt_stream_reset();
	if (!dump.copy && !(dump.copy = malloc((size_t)msgtrace_chunk_records * sizeof *dump.copy)))
		return;
	struct mt_buf *out = &mt_out.out, *pre = &mt_rec.pre;
	mt_rec.dumping = 1;
	pthread_mutex_lock(&msgtrace_registry_lock);
	for (struct mt_ring *r = __atomic_load_n(&msgtrace_rings, __ATOMIC_ACQUIRE); r; r = r->next)
		ring_thread(r);
	pthread_mutex_unlock(&msgtrace_registry_lock);
	mt_rec.dumping = 0;
	mt_names_flush(out);
	if (out->n) { /* the methods frames first, then the threads' frames */
		mt_put_bytes(pre, out->p, out->n);
		struct mt_buf b = *out;
		*out = *pre;
		*pre = b;
		pre->n = 0;
		mt_clock_frame(out, &mt_rec.pl);
		mt_instants_write(1);
		mt_cpu_replay(out);
		mt_end_frame();
	}
	mt_output_write();
	mt_output_close();
}
