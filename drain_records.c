/*
 * A thread's records as frames: its calls and marks (events frames, methods named first), the
 * calls it has open (open frames, from a snapshot of its shadow stack), its identity and name
 * (thread frames), its last frames when it is gone.
 * Depends on: drain_encode.c, drain_output.c (frames go to mt_out.out), drain_names.c; the
 * recorder: rt_launch.c (the instants queued), rt_thread.c (the counters), rt.c (ticks).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "drain_internal.h"
#include "rt_launch.h"
#include "waits.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* An events frame is written out once this much is waiting (not during a ring dump). */
#define WRITE_AT (256u << 10)
/* An open frame lists at most this many calls (the outermost). */
#define SNAPSHOT_MAX 4096

struct mt_records mt_rec;

/* A new file from the next write on: nothing of the last one is known to it (a ring dump,
 * a fork child's stream): the output, the method ids, the counts of what was written. */
void mt_stream_reset(void) {
	mt_output_reset();
	mt_names_reset();
	mt_rec.pl.n = mt_rec.pre.n = 0;
	mt_rec.written_calls = mt_rec.written_marks = 0;
}

struct mt_drain_thread *mt_dt(struct mt_thread_info *i) {
	static struct mt_drain_thread blank;
	if (!i->drain)
		i->drain = calloc(1, sizeof *i->drain);
	if (i->drain)
		return i->drain;
	memset(&blank, 0, sizeof blank);
	return &blank;
}

/* New method names go before the frame that uses them: a ring dump's all before its events. */
static void flush_methods(void) { mt_names_flush(mt_rec.dumping ? &mt_rec.pre : &mt_out.out); }

static void thread_name(struct mt_thread_info *i, char *name, size_t n) {
	name[0] = 0;
#if defined(__linux__)
	char p[64];
	snprintf(p, sizeof p, "/proc/self/task/%llu/comm", (unsigned long long)i->tid);
	int f = open(p, O_RDONLY | O_CLOEXEC);
	if (f >= 0) {
		ssize_t l = read(f, name, n - 1);
		close(f);
		if (l > 0 && name[l - 1] == '\n')
			l--;
		name[l > 0 ? l : 0] = 0;
	}
#else
	pthread_getname_np(i->pt, name, n);
#endif
	if (!name[0])
		snprintf(name, n, "%s", i->name);
}

void mt_thread_frame(struct mt_thread_info *i, int exited) {
	uint64_t flags = (i->main ? MT_THREAD_MAIN : 0) | (exited ? MT_THREAD_EXITED : 0);
	mt_enc_thread(&mt_out.out, &mt_rec.pl, i->tid, flags, mt_dt(i)->announced_name);
}

void mt_announce(struct mt_thread_info *i, int recheck) {
	struct mt_drain_thread *d = mt_dt(i);
	if (d->announced && !recheck)
		return;
	char name[sizeof d->announced_name];
	thread_name(i, name, sizeof name);
	if (d->announced && strcmp(name, d->announced_name) == 0)
		return;
	memcpy(d->announced_name, name, sizeof name);
	d->announced = 1;
	mt_thread_frame(i, 0);
}

/* A call shorter than MSGTRACE_MIN_US, recorded before the threshold applied (the tick rate
 * was not known yet): left out as the interposer leaves out the later ones. */
static int too_short(const struct mt_record *r, uint64_t min_ticks) {
	return min_ticks && !(r->cls >> FLAG_SHIFT & F_MARK) && (r->end >= r->start ? r->end - r->start : 0) < min_ticks;
}

/* Records [from, to) of a thread as one events frame (methods named first). */
void mt_encode(struct mt_thread_info *i, const struct mt_record *from, const struct mt_record *to) {
	uint64_t min_ticks = __atomic_load_n(&msgtrace_min_ticks, __ATOMIC_RELAXED);
	while (from < to && too_short(from, min_ticks))
		from++;
	if (from >= to)
		return;
	mt_announce(i, 0);
	struct mt_buf *b = &mt_rec.pl;
	uint64_t prev = from->end;
	mt_enc_events_begin(b, i->tid, prev);
	for (const struct mt_record *r = from; r < to; r++) {
		uint64_t flags = r->cls >> FLAG_SHIFT, end = r->end, dur = end >= r->start ? end - r->start : 0;
		if (too_short(r, min_ticks))
			continue;
		if (flags & F_MARK && (r->cls & REC_MARK_KIND_MASK) == REC_WAIT) {
			mt_enc_wait(b, &prev, r->sel >> REC_WAIT_PRIM_SHIFT, end, dur, r->cls >> DEPTH_SHIFT & REC_DEPTH_MASK,
				    r->sel & REC_WAIT_ADDR_MASK, r->cls >> REC_WAIT_HOLDER_SHIFT & REC_WAIT_HOLDER_MASK);
			mt_rec.written_marks++;
		} else if (flags & F_MARK) {
			mt_enc_mark(b, &prev, r->cls & REC_MARK_KIND_MASK, end, dur, r->sel);
			mt_rec.written_marks++;
		} else {
			uint32_t id = mt_method_id(REC_METHOD_KEY(r->cls), r->sel);
			mt_enc_call(b, &prev, id, flags & F_UNWOUND, end, dur, r->cls >> DEPTH_SHIFT & REC_DEPTH_MASK);
			mt_rec.written_calls++;
		}
	}
	flush_methods();
	mt_enc_events_end(&mt_out.out, b);
	if (mt_out.out.n > WRITE_AT && !mt_rec.dumping)
		mt_output_write();
}

/* An open frame: the thread's calls open at tick now, outermost first. */
static void open_frame(struct mt_thread_info *i, uint64_t now, const struct mt_entry *e, uint64_t n) {
	uint32_t *ids = n ? malloc(n * sizeof *ids) : NULL;
	if (n && !ids)
		return;
	for (uint64_t k = 0; k < n; k++) /* ids first: they may add to the methods buffer */
		ids[k] = mt_method_id(REC_METHOD_KEY(e[k].cls), e[k].sel);
	flush_methods();
	struct mt_buf *b = &mt_rec.pl;
	mt_enc_open_begin(b, i->tid, now);
	mt_dt(i)->snap_tick = now;
	for (uint64_t k = 0; k < n; k++)
		mt_enc_open_call(b, ids[k], now >= e[k].start ? now - e[k].start : 0, k);
	mt_enc_open_end(&mt_out.out, b);
	free(ids);
}

/* What the thread has open: an open frame when it changed since the last one (or always).
 * The thread pushes and pops while this reads: the entries are read twice, with the top
 * before, between and after, and only the prefix that stayed below every top seen and read
 * the same both times is written (the calls that were open all along). */
void mt_open_snapshot(struct mt_thread_info *i, int force) {
	struct mt_thread *t = &i->t;
	static struct mt_entry a[SNAPSHOT_MAX], b2[SNAPSHOT_MAX];
	struct mt_entry *top1 = __atomic_load_n(&t->top, __ATOMIC_ACQUIRE);
	if (top1 < t->base || top1 > t->limit)
		return;
	uint64_t n = (uint64_t)(top1 - t->base);
	if (n > SNAPSHOT_MAX)
		n = SNAPSHOT_MAX;
	memcpy(a, t->base, n * sizeof *a);
	struct mt_entry *top2 = __atomic_load_n(&t->top, __ATOMIC_ACQUIRE);
	memcpy(b2, t->base, n * sizeof *b2);
	struct mt_entry *top3 = __atomic_load_n(&t->top, __ATOMIC_ACQUIRE);
	uint64_t m = n;
	if (top2 >= t->base && (uint64_t)(top2 - t->base) < m)
		m = (uint64_t)(top2 - t->base);
	if (top3 >= t->base && (uint64_t)(top3 - t->base) < m)
		m = (uint64_t)(top3 - t->base);
	uint64_t k = 0;
	while (k < m && a[k].start == b2[k].start && a[k].cls == b2[k].cls && a[k].sel == b2[k].sel && a[k].sp == b2[k].sp)
		k++;
	n = k;
	uint64_t start = n ? a[n - 1].start : 0;
	struct mt_drain_thread *d = mt_dt(i);
	if (!force && n == d->snap_top && start == d->snap_start)
		return;
	mt_announce(i, 0);
	open_frame(i, msgtrace_now_ticks(), a, n);
	d->snap_top = n;
	d->snap_start = start;
}

/* At the end: losses of a live thread that no chunk carried a mark for yet. */
void mt_final_marks(struct mt_thread_info *i) {
	uint64_t lost = i->t.dropped - i->lost_reported, over = i->t.overflow - i->overflow_reported;
	if (!lost && !over)
		return;
	uint64_t now = msgtrace_now_ticks();
	struct mt_record r[2];
	int n = 0;
	if (lost)
		r[n++] = (struct mt_record){i->lost_since ? i->lost_since : now, now, REC_MARK(MT_MARK_LOST), lost};
	if (over)
		r[n++] = (struct mt_record){now, now, REC_MARK(MT_MARK_OVERFLOW), over};
	i->lost_reported = i->t.dropped;
	i->overflow_reported = i->t.overflow;
	mt_encode(i, r, r + n);
}

/* A thread that is gone: the calls it had open closed by an empty open frame at tick (its last
 * record's end), then its thread frame marked exited. A snapshot may have been taken after that
 * end, while the thread had written its last record and not yet popped the entry: the empty
 * frame then comes at the snapshot's tick, so that a thread's open frames stay in tick order
 * (the record closes the call either way). */
void mt_thread_gone(struct mt_thread_info *i, uint64_t tick) {
	mt_announce(i, 0);
	struct mt_drain_thread *d = mt_dt(i);
	if (tick < d->snap_tick)
		tick = d->snap_tick;
	if (d->snap_top)
		open_frame(i, tick, NULL, 0);
	mt_thread_frame(i, 1);
}

/* The end frame: the stream's totals (the last frame of a stream closed cleanly). */
void mt_end_frame(void) {
	struct mt_counters c;
	msgtrace_recorder_counters(&c);
	struct mt_end_frame e = {mt_rec.written_calls, c.dropped, c.overflow, c.waits, c.wait_ticks, mt_out.lost_bytes};
	mt_enc_end(&mt_out.out, &mt_rec.pl, &e);
}

/* Instants (rt_launch.c: launch marks and the app's msgtrace_mark) as instant frames, written once
 * the stream has something else (a process that recorded nothing writes nothing); a ring
 * dump, a whole new file, gets every one again (replay). */
static void emit_instant(const struct mt_instant_frame *in) { mt_enc_instant(&mt_out.out, &mt_rec.pl, in); }
void mt_instants_write(int replay) {
	if (mt_out.out.n || mt_out.fd >= 0 || replay)
		msgtrace_instants_drain(emit_instant, replay);
}
