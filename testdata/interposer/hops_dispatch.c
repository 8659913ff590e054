/* Async hops through dispatch (hops_dispatch.c) against a stand-in for Apple's libdispatch:
 * one serial queue, a thread of its own running the work items in order (dispatch_async_f,
 * dispatch_after_f at once, dispatch_barrier_async_f, dispatch_group_async_f with a group that
 * counts), and the Blocks runtime's _Block_copy/_Block_release over hand-made blocks (the
 * Blocks ABI's layout: the invoke takes the block). The program calls the library's
 * replacements as a rebound slot would, each of the eight forms, and checks: every work item
 * ran once, on the queue's thread, with its context; each block was copied and released once;
 * per hop, an enqueue mark on the calling thread and a begin and an end mark on the queue's
 * thread with the same id, the work between them; with recording paused, the items run as
 * before and no mark is made. No drain: the marks are read from the chunks (msgtrace_visit). */
#include "common.h"
#include "hops.h"
#include "rt_internal.h" /* msgtrace_thread_id */
#include "stream_format.h"

#include <pthread.h>
#include <stdlib.h>

/* ---- the stand-in dispatch: a serial queue on a thread ---- */
struct item {
	void *ctx;
	void (*fn)(void *);
	struct item *next;
};
struct queue {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct item *head, *tail;
	int stop, busy;
	pthread_t th;
	uint64_t tid;
};
struct group {
	int pending;
};
static struct queue q = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0, 0, 0, 0};

static void *queue_main(void *arg) {
	(void)arg;
	q.tid = msgtrace_thread_id();
	pthread_mutex_lock(&q.mu);
	for (;;) {
		while (!q.head && !q.stop)
			pthread_cond_wait(&q.cv, &q.mu);
		if (!q.head)
			break;
		struct item *it = q.head;
		q.head = it->next;
		if (!q.head)
			q.tail = NULL;
		q.busy = 1;
		pthread_mutex_unlock(&q.mu);
		it->fn(it->ctx); /* the library's hop_run: begin, the work, end */
		free(it);
		pthread_mutex_lock(&q.mu);
		q.busy = 0;
		pthread_cond_broadcast(&q.cv);
	}
	pthread_mutex_unlock(&q.mu);
	return NULL;
}

static void enqueue(struct queue *qq, void *ctx, void (*fn)(void *)) {
	struct item *it = calloc(1, sizeof *it);
	it->ctx = ctx, it->fn = fn;
	pthread_mutex_lock(&qq->mu);
	if (qq->tail)
		qq->tail->next = it;
	else
		qq->head = it;
	qq->tail = it;
	pthread_cond_broadcast(&qq->cv);
	pthread_mutex_unlock(&qq->mu);
}

/* Every item submitted so far has run and returned. */
static void drain_queue(void) {
	pthread_mutex_lock(&q.mu);
	while (q.head || q.busy)
		pthread_cond_wait(&q.cv, &q.mu);
	pthread_mutex_unlock(&q.mu);
}

/* what the library finds by dlsym (the program is linked -rdynamic) */
int dispatch_calls[8];
void dispatch_async_f(void *qq, void *ctx, void (*fn)(void *)) { dispatch_calls[0]++, enqueue(qq, ctx, fn); }
void dispatch_after_f(uint64_t when, void *qq, void *ctx, void (*fn)(void *)) { (void)when, dispatch_calls[1]++, enqueue(qq, ctx, fn); }
void dispatch_barrier_async_f(void *qq, void *ctx, void (*fn)(void *)) { dispatch_calls[2]++, enqueue(qq, ctx, fn); }
struct group_item {
	struct group *g;
	void *ctx;
	void (*fn)(void *);
};
static void group_run(void *p) {
	struct group_item *gi = p;
	gi->fn(gi->ctx);
	__atomic_sub_fetch(&gi->g->pending, 1, __ATOMIC_RELEASE);
	free(gi);
}
void dispatch_group_async_f(void *g, void *qq, void *ctx, void (*fn)(void *)) {
	struct group_item *gi = malloc(sizeof *gi);
	gi->g = g, gi->ctx = ctx, gi->fn = fn;
	__atomic_add_fetch(&gi->g->pending, 1, __ATOMIC_RELEASE);
	dispatch_calls[3]++;
	enqueue(qq, gi, group_run);
}
/* the block forms (reached only when the library passes a call through): a copy of the block
 * invoked on the queue, then released */
void *_Block_copy(const void *b);
void _Block_release(const void *b);
static void invoke_release(void *b) {
	((void (**)(void *))b)[2](b); /* the layout's invoke: after isa and the two ints */
	_Block_release(b);
}
void dispatch_async(void *qq, void *b) { dispatch_calls[4]++, enqueue(qq, _Block_copy(b), invoke_release); }
void dispatch_after(uint64_t w, void *qq, void *b) { (void)w, dispatch_calls[5]++, enqueue(qq, _Block_copy(b), invoke_release); }
void dispatch_barrier_async(void *qq, void *b) { dispatch_calls[6]++, enqueue(qq, _Block_copy(b), invoke_release); }
void dispatch_group_async(void *g, void *qq, void *b) {
	dispatch_calls[7]++;
	dispatch_group_async_f(g, qq, _Block_copy(b), invoke_release);
	dispatch_calls[3]--;
}

/* ---- blocks: a hand-made block, copied and released by the stand-in runtime ---- */
struct ran {
	int n;
	uint64_t tid, at;
};
struct tblock {
	void *isa;
	int flags, reserved;
	void (*invoke)(void *);
	struct ran *r; /* captured */
};
int copies, releases;
void *_Block_copy(const void *b) {
	struct tblock *c = malloc(sizeof *c);
	memcpy(c, b, sizeof *c);
	copies++;
	return c;
}
void _Block_release(const void *b) {
	__atomic_add_fetch(&releases, 1, __ATOMIC_RELAXED);
	free((void *)b);
}

static struct ran ran[8];
static void block_invoke(void *b) {
	struct ran *r = ((struct tblock *)b)->r;
	r->n++, r->tid = msgtrace_thread_id(), r->at = msgtrace_now_ticks();
}
static void fn_run(void *ctx) {
	struct ran *r = ctx;
	r->n++, r->tid = msgtrace_thread_id(), r->at = msgtrace_now_ticks();
}

/* ---- the marks, read from the chunks ---- */
struct mk {
	uint64_t kind, id, tid, at;
};
static struct mk marks[256];
static int nmarks;
static void collect(void *ctx, uint64_t tid, const struct mt_record *r, uint64_t n, uint64_t d, uint64_t o) {
	(void)ctx, (void)d, (void)o;
	for (uint64_t i = 0; i < n; i++)
		if ((r[i].cls >> FLAG_SHIFT & F_MARK) && nmarks < 256)
			marks[nmarks++] = (struct mk){r[i].cls & 0xffff, r[i].sel, tid, r[i].start};
}
static const struct mk *find(uint64_t kind, uint64_t id) {
	for (int i = 0; i < nmarks; i++)
		if (marks[i].kind == kind && marks[i].id == id)
			return &marks[i];
	return NULL;
}

static void submit_all(struct group *g) {
	static struct tblock blocks[4];
	for (int k = 0; k < 4; k++)
		blocks[k] = (struct tblock){0, 0, 0, block_invoke, &ran[4 + k]};
	msgtrace_dispatch_async_f(&q, &ran[0], fn_run);
	msgtrace_dispatch_after_f(0, &q, &ran[1], fn_run);
	msgtrace_dispatch_barrier_async_f(&q, &ran[2], fn_run);
	msgtrace_dispatch_group_async_f(g, &q, &ran[3], fn_run);
	msgtrace_dispatch_async(&q, &blocks[0]);
	msgtrace_dispatch_after(0, &q, &blocks[1]);
	msgtrace_dispatch_barrier_async(&q, &blocks[2]);
	msgtrace_dispatch_group_async(g, &q, &blocks[3]);
	drain_queue();
}

int main(void) {
	use_test_runtime();
	CHECK("configure", msgtrace_configure(512, 4u << 20, 64u << 10) == 0);
	CHECK("the originals and the Blocks runtime found", msgtrace_hops_dispatch_init());
	pthread_create(&q.th, NULL, queue_main, NULL);
	struct group g = {0};
	uint64_t main_tid = msgtrace_thread_id();

	submit_all(&g);
	for (int k = 0; k < 8; k++) {
		CHECK("each work item ran once", ran[k].n == 1);
		CHECK("on the queue's thread", ran[k].tid == q.tid);
	}
	CHECK("the function forms carried them all", dispatch_calls[0] == 2 && dispatch_calls[1] == 2 && dispatch_calls[2] == 2 && dispatch_calls[3] == 2);
	CHECK("the block forms were not called", dispatch_calls[4] + dispatch_calls[5] + dispatch_calls[6] + dispatch_calls[7] == 0);
	CHECK("the group's items counted and done", g.pending == 0);
	CHECK("each block copied and released once", copies == 4 && releases == 4);

	msgtrace_visit(collect, NULL);
	int hops = 0;
	for (int i = 0; i < nmarks; i++) {
		if (marks[i].kind != MT_MARK_HOP_ENQUEUE)
			continue;
		hops++;
		const struct mk *e = &marks[i], *b = find(MT_MARK_HOP_BEGIN, e->id), *x = find(MT_MARK_HOP_END, e->id);
		CHECK("enqueued on the calling thread", e->tid == main_tid);
		CHECK("a begin and an end", b && x);
		if (!b || !x)
			continue;
		CHECK("begin and end on the queue's thread", b->tid == q.tid && x->tid == q.tid);
		CHECK("enqueued before it began", e->at <= b->at);
		int inside = 0;
		for (int k = 0; k < 8; k++)
			inside += b->at <= ran[k].at && ran[k].at <= x->at;
		CHECK("one work item ran between begin and end", inside == 1);
	}
	CHECK("eight hops", hops == 8);
	printf("hops %d, marks %d\n", hops, nmarks);

	/* paused: the items run as before, no mark (the chunks still hold the marks above) */
	int marked = nmarks;
	msgtrace_active = 0;
	memset(ran, 0, sizeof ran);
	copies = releases = 0;
	nmarks = 0;
	submit_all(&g);
	for (int k = 0; k < 8; k++)
		CHECK("paused: each work item ran once", ran[k].n == 1 && ran[k].tid == q.tid);
	CHECK("paused: the block forms passed through", dispatch_calls[4] == 1 && dispatch_calls[5] == 1 && dispatch_calls[6] == 1 && dispatch_calls[7] == 1);
	CHECK("paused: each block copied and released once", copies == 4 && releases == 4);
	msgtrace_visit(collect, NULL);
	CHECK("paused: no hop marked", nmarks == marked);

	pthread_mutex_lock(&q.mu);
	q.stop = 1;
	pthread_cond_broadcast(&q.cv);
	pthread_mutex_unlock(&q.mu);
	pthread_join(q.th, NULL);
	if (failures)
		return 1;
	printf("OK\n");
	return 0;
}
