/*
 * msgtrace drain: one thread that takes the chunks the recording threads hand over, encodes
 * them into the stream file (format: tracer/stream.go) as the program runs, and gives them
 * back to the pool. It also collects the partly filled chunks of quiet threads and what each
 * thread has open (every period), names methods the first time it meets them (in this process:
 * tagged pointers and classes only resolve here), keeps faulted-in chunks ahead of the
 * threads, and writes clock frames. Crashing signals ask it for a last pass; a fork starts a
 * new drain and a new file in the child. Nothing here runs on a recording thread.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "rt_internal.h"
#include "launch.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#if defined(__linux__) && defined(__x86_64__)
#include <linux/perf_event.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#endif
#if defined(__APPLE__) && defined(__x86_64__)
#include <sys/sysctl.h>
#endif

/* ---- configuration and state ---- */
static char path_pattern[4096];
static char stream_path[4096];
static char program_name[256];
static char error_text[4600];
static uint32_t period_ms = 100;
static double min_us;
static int fd = -1;
static int file_failed;             /* the file could not be created: nothing more is tried */
static uint64_t lost_bytes, written_calls, written_marks;
static uint64_t rate_num, rate_den; /* ns = ticks * num / den */
static int rate_final;              /* the rate is the hardware's or the kernel's, or measured over 1 s */
static int rate_news;               /* the rate changed: a clock frame says so */
static uint64_t cal_tick, cal_ns;   /* calibration: the counter and the clock when the stream started */
static uint64_t last_clock_ns;
static pthread_t drain_thread;
static pthread_mutex_t drain_mu = PTHREAD_MUTEX_INITIALIZER; /* held during a pass */
static pthread_mutex_t req_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t req_cv = PTHREAD_COND_INITIALIZER;
static uint64_t req_seq, done_seq;  /* flush requests (req_mu) */
static volatile int stop_req, closed;
static volatile int crash_req, crash_done;
static int started, atfork_set;
static pid_t forked_pid; /* set in a child by the fork handler (vfork runs none) */
static struct mt_namer namer;
static int ring_mode;
static volatile uint64_t drain_cpu; /* the drain thread's CPU time as of its last pass */
static volatile int dump_req;
static int namer_looked_up;
static int wake_fd[2] = {-1, -1};  /* the drain waits on the read end; a byte written wakes it */

static uint64_t mono_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
static uint64_t wall_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
static void sleep_ms(long ms) {
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/* ---- CRC-32C (Castagnoli), slicing by 8 ---- */
static uint32_t crc_table[8][256];
static void crc_init(void) {
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
		crc_table[0][i] = c;
	}
	for (uint32_t i = 0; i < 256; i++)
		for (int t = 1; t < 8; t++)
			crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xff];
}
static uint32_t crc_update(uint32_t crc, const unsigned char *p, size_t n) {
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

/* ---- growable byte buffers ---- */
struct buf {
	unsigned char *p;
	size_t n, cap;
};
static int buf_need(struct buf *b, size_t more) {
	if (b->n + more <= b->cap)
		return 0;
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
static void put_bytes(struct buf *b, const void *p, size_t n) {
	if (buf_need(b, n) == 0) {
		memcpy(b->p + b->n, p, n);
		b->n += n;
	}
}
static void put_u32(struct buf *b, uint32_t v) {
	unsigned char x[4] = {v, v >> 8, v >> 16, v >> 24};
	put_bytes(b, x, 4);
}
static void put_u64(struct buf *b, uint64_t v) {
	put_u32(b, (uint32_t)v);
	put_u32(b, (uint32_t)(v >> 32));
}
static void put_uv(struct buf *b, uint64_t v) {
	if (buf_need(b, 10) != 0)
		return;
	unsigned char *p = b->p + b->n;
	while (v >= 0x80) {
		*p++ = (unsigned char)v | 0x80;
		v >>= 7;
	}
	*p++ = (unsigned char)v;
	b->n = (size_t)(p - b->p);
}
static void put_v(struct buf *b, int64_t v) { put_uv(b, (uint64_t)v << 1 ^ (uint64_t)(v >> 63)); }
static void put_str(struct buf *b, const char *s) {
	size_t n = s ? strlen(s) : 0;
	if (n > 4096)
		n = 4096;
	put_uv(b, n);
	put_bytes(b, s, n);
}

static struct buf out, payload, methods;

/* A frame into the output buffer: header, CRC-32C over header bytes 4..11 and the payload. */
static void frame(int kind, const struct buf *pl) {
	unsigned char h[16] = {'M', 'T', 'S', 'F', (unsigned char)kind, 0, 0, 0};
	uint32_t n = (uint32_t)pl->n;
	h[8] = n, h[9] = n >> 8, h[10] = n >> 16, h[11] = n >> 24;
	uint32_t crc = crc_update(0, h + 4, 8);
	crc = crc_update(crc, pl->p, pl->n);
	h[12] = crc, h[13] = crc >> 8, h[14] = crc >> 16, h[15] = crc >> 24;
	put_bytes(&out, h, 16);
	put_bytes(&out, pl->p, pl->n);
}

/* ---- output ---- */

int msgtrace_expand_path(const char *pat, long pid, char *o, size_t n) {
	size_t k = 0;
	char tmp[256];
	for (const char *s = pat; *s; s++) {
		const char *add = NULL;
		char one[2] = {*s, 0};
		if (*s == '%') {
			s++;
			switch (*s) {
			case 'p':
				snprintf(tmp, sizeof tmp, "%ld", pid);
				add = tmp;
				break;
			case 'h':
				if (gethostname(tmp, sizeof tmp) != 0)
					strcpy(tmp, "localhost");
				tmp[sizeof tmp - 1] = 0;
				add = tmp;
				break;
			case 't':
				add = getenv("TMPDIR");
				if (!add || !*add)
					add = "/tmp";
				break;
			case '%':
				add = "%";
				break;
			default:
				return -1;
			}
		} else {
			add = one;
		}
		size_t l = strlen(add);
		if (k + l + 1 > n)
			return -1;
		memcpy(o + k, add, l);
		k += l;
	}
	o[k] = 0;
	return 0;
}

static void process_frame(struct buf *b) {
	b->n = 0;
	put_u32(b, 1);
	put_u32(b, 0);
	put_u64(b, (uint64_t)getpid());
	put_u64(b, (uint64_t)getppid());
	char exe[4096] = "";
#if defined(__linux__)
	ssize_t l = readlink("/proc/self/exe", exe, sizeof exe - 1);
	exe[l > 0 ? l : 0] = 0;
#endif
	put_str(b, exe);
	const char *name = program_name;
	if (!*name) {
		const char *slash = strrchr(exe, '/');
		name = slash ? slash + 1 : exe;
	}
	put_str(b, name);
#if defined(__x86_64__)
	put_str(b, "amd64");
#elif defined(__aarch64__)
	put_str(b, "arm64");
#else
	put_str(b, "unknown");
#endif
#if defined(__APPLE__)
#include <TargetConditionals.h>
#if TARGET_OS_IPHONE
	put_str(b, "ios");
#else
	put_str(b, "darwin");
#endif
#else
	put_str(b, "linux");
#endif
	put_uv(b, ring_mode ? 1 : 0);
	frame(1, b);
}

static void clock_frame(void) {
	struct buf *b = &payload;
	b->n = 0;
	uint64_t t = msgtrace_now_ticks(), m = mono_ns();
	put_u64(b, t);
	put_u64(b, m);
	put_u64(b, wall_ns());
	put_u64(b, rate_num);
	put_u64(b, rate_den);
	frame(2, b);
	last_clock_ns = m;
}

/* Writes the output buffer; the file is created by the first write, starting with the process
 * and clock frames. What cannot be written is counted. */
static void write_out(void) {
	if (out.n == 0)
		return;
	if (fd < 0 && !file_failed) {
		if (msgtrace_expand_path(path_pattern, (long)getpid(), stream_path, sizeof stream_path) != 0 ||
		    (fd = open(stream_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0) {
			snprintf(error_text, sizeof error_text, "cannot create %s: %s", stream_path, strerror(errno));
			file_failed = 1;
		} else {
			struct buf pro = {0}, save = out;
			out = pro; /* the prologue first */
			process_frame(&payload);
			clock_frame();
			pro = out;
			out = save;
			for (size_t off = 0; off < pro.n;) {
				ssize_t w = write(fd, pro.p + off, pro.n - off);
				if (w < 0 && errno == EINTR)
					continue;
				if (w <= 0) {
					lost_bytes += pro.n - off;
					break;
				}
				off += (size_t)w;
			}
			free(pro.p);
		}
	}
	if (fd < 0) {
		lost_bytes += out.n;
		out.n = 0;
		return;
	}
	for (size_t off = 0; off < out.n;) {
		ssize_t w = write(fd, out.p + off, out.n - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			if (!error_text[0])
				snprintf(error_text, sizeof error_text, "writing %s: %s", stream_path, w < 0 ? strerror(errno) : "short write");
			lost_bytes += out.n - off;
			break;
		}
		off += (size_t)w;
	}
	out.n = 0;
}

/* ---- names ---- */

static void look_up_namer(void) {
	if (namer_looked_up)
		return;
	namer_looked_up = 1;
	if (!namer.class_name)
		namer.class_name = (const char *(*)(void *))dlsym(RTLD_DEFAULT, "class_getName");
	if (!namer.sel_name)
		namer.sel_name = (const char *(*)(void *))dlsym(RTLD_DEFAULT, "sel_getName");
	if (!namer.object_class)
		namer.object_class = (void *(*)(void *))dlsym(RTLD_DEFAULT, "object_getClass");
	if (!namer.superclass)
		namer.superclass = (void *(*)(void *))dlsym(RTLD_DEFAULT, "class_getSuperclass");
	if (!namer.is_meta)
		namer.is_meta = (unsigned char (*)(void *))dlsym(RTLD_DEFAULT, "class_isMetaClass");
}

/* Selector names learnt while instrumenting (methods.c, where the runtime's lock is held
 * anyway): gcc's sel_getName takes the runtime's lock, which a thread may hold for as long as an
 * +initialize runs, and that thread may be waiting for a chunk only the drain can free. The
 * drain asks the runtime only for selectors it has not been told. Open addressing, lock-free
 * reads: the name is published before the key. */
#define SEL_CACHE (1u << 16)
static void *sel_keys[SEL_CACHE];
static const char *sel_names[SEL_CACHE];

static uint32_t sel_slot(const void *sel) {
	return (uint32_t)(((uint64_t)(uintptr_t)sel * 0x9e3779b97f4a7c15ull) >> 48) & (SEL_CACHE - 1);
}

void msgtrace_remember_sel_name(void *sel, const char *name) {
	if (!sel || !name)
		return;
	for (uint32_t i = sel_slot(sel), n = 0; n < SEL_CACHE; i = (i + 1) & (SEL_CACHE - 1), n++) {
		void *k = __atomic_load_n(&sel_keys[i], __ATOMIC_ACQUIRE);
		if (k == sel)
			return;
		if (!k) {
			__atomic_store_n(&sel_names[i], name, __ATOMIC_RELAXED);
			__atomic_store_n(&sel_keys[i], sel, __ATOMIC_RELEASE); /* callers are serialised */
			return;
		}
	}
}

static const char *remembered_sel_name(void *sel) {
	for (uint32_t i = sel_slot(sel), n = 0; n < SEL_CACHE; i = (i + 1) & (SEL_CACHE - 1), n++) {
		void *k = __atomic_load_n(&sel_keys[i], __ATOMIC_ACQUIRE);
		if (k == sel)
			return __atomic_load_n(&sel_names[i], __ATOMIC_RELAXED);
		if (!k)
			return NULL;
	}
	return NULL;
}

void msgtrace_set_namer(const struct mt_namer *n) {
	namer = *n;
	namer_looked_up = 0;
}

/* Open-addressing tables: raw (class word, selector) as recorded -> method id, and the
 * resolved (class, selector, name flags) -> method id, so that every receiver of one class
 * (tagged pointers included) is one method. */
struct slot {
	uint64_t a, b;
	uint32_t id, used;
};
struct table {
	struct slot *s;
	uint64_t cap, n;
};
static struct table raw_ids, canon_ids;
static uint32_t next_id = 1;

static uint64_t mix(uint64_t a, uint64_t b) {
	uint64_t h = a * 0x9e3779b97f4a7c15ull ^ (b + 0x632be59bd9b4e019ull) * 0xc2b2ae3d27d4eb4full;
	return h ^ h >> 29;
}
static struct slot *table_find(struct table *t, uint64_t a, uint64_t b, int *found) {
	if (t->n * 2 >= t->cap) {
		uint64_t cap = t->cap ? t->cap * 2 : 1024;
		struct slot *s = calloc(cap, sizeof *s);
		if (!s) {
			*found = 0;
			return NULL;
		}
		for (uint64_t i = 0; i < t->cap; i++)
			if (t->s[i].used) {
				uint64_t j = mix(t->s[i].a, t->s[i].b) & (cap - 1);
				while (s[j].used)
					j = (j + 1) & (cap - 1);
				s[j] = t->s[i];
			}
		free(t->s);
		t->s = s;
		t->cap = cap;
	}
	uint64_t j = mix(a, b) & (t->cap - 1);
	while (t->s[j].used) {
		if (t->s[j].a == a && t->s[j].b == b) {
			*found = 1;
			return &t->s[j];
		}
		j = (j + 1) & (t->cap - 1);
	}
	*found = 0;
	return &t->s[j];
}
static void table_reset(struct table *t) {
	free(t->s);
	t->s = NULL;
	t->cap = t->n = 0;
}

/* The method id of a recorded class word (depth and unwound flag cleared) and selector; a new
 * one is named (methods buffer) before its first use. */
static uint32_t method_id(uint64_t cls, uint64_t sel) {
	int found;
	struct slot *s = table_find(&raw_ids, cls, sel, &found);
	if (found)
		return s->id;
	look_up_namer();
	uint64_t flags = cls >> FLAG_SHIFT, key = cls & ((1ull << CLS_BITS) - 1);
	void *c = (void *)(uintptr_t)key;
	uint64_t nflags = 0;
	if (flags & F_SUPER) {
		nflags |= 2;
		c = namer.superclass ? namer.superclass(c) : NULL;
	} else if (flags & F_TAGGED) {
		nflags |= 4;
		c = namer.object_class ? namer.object_class((void *)(uintptr_t)MT_UNFOLD_TAGGED(key)) : NULL;
	}
	if (c && namer.is_meta && namer.is_meta(c))
		nflags |= 1;
	int cfound;
	struct slot *cs = table_find(&canon_ids, (uint64_t)(uintptr_t)c, sel ^ nflags << 61, &cfound);
	uint32_t id;
	if (cfound) {
		id = cs->id;
	} else {
		id = next_id++;
		char cbuf[32], sbuf[32];
		const char *cn = c && namer.class_name ? namer.class_name(c) : NULL;
		const char *sn = sel ? remembered_sel_name((void *)(uintptr_t)sel) : NULL;
		if (!sn && sel && namer.sel_name)
			sn = namer.sel_name((void *)(uintptr_t)sel);
		if (!cn) {
			snprintf(cbuf, sizeof cbuf, "0x%llx", (unsigned long long)(c ? (uint64_t)(uintptr_t)c : key));
			cn = cbuf;
		}
		if (!sn) {
			snprintf(sbuf, sizeof sbuf, "0x%llx", (unsigned long long)sel);
			sn = sbuf;
		}
		put_uv(&methods, id);
		put_uv(&methods, nflags);
		put_str(&methods, cn);
		put_str(&methods, sn);
		if (cs) {
			*cs = (struct slot){(uint64_t)(uintptr_t)c, sel ^ nflags << 61, id, 1};
			canon_ids.n++;
		}
	}
	/* every distinct tagged receiver is a raw key: stop remembering them past a million */
	if (s && (!(flags & F_TAGGED) || raw_ids.n < (1u << 20))) {
		*s = (struct slot){cls, sel, id, 1};
		raw_ids.n++;
	}
	return id;
}

static int dumping;      /* a ring dump: methods frames go to pre, nothing is written before the end */
static struct buf pre;
static void flush_methods(void) {
	if (methods.n && dumping) { /* a ring dump: its methods frames come before all its events */
		struct buf o = out;
		out = pre;
		frame(3, &methods);
		pre = out;
		out = o;
	} else if (methods.n) {
		frame(3, &methods);
	}
	methods.n = 0;
}

/* ---- threads ---- */

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

static void thread_frame(struct mt_thread_info *i, int exited) {
	struct buf *b = &payload;
	b->n = 0;
	put_u64(b, i->tid);
	put_uv(b, (uint64_t)(i->main ? 1 : 0) | (exited ? 2 : 0));
	put_str(b, i->announced_name);
	frame(4, b);
}

static void announce(struct mt_thread_info *i, int recheck) {
	if (i->announced && !recheck)
		return;
	char name[64];
	thread_name(i, name, sizeof name);
	if (i->announced && strcmp(name, i->announced_name) == 0)
		return;
	memcpy(i->announced_name, name, sizeof name);
	i->announced = 1;
	thread_frame(i, 0);
}

/* Encodes records [from, to) of a thread as one events frame (methods named first). */
/* A call shorter than MSGTRACE_MIN_US, recorded before the threshold applied (the tick rate
 * was not known yet): left out as the interposer leaves out the later ones. */
static int too_short(const struct mt_record *r, uint64_t min_ticks) {
	return min_ticks && !(r->cls >> FLAG_SHIFT & F_MARK) && (r->end >= r->start ? r->end - r->start : 0) < min_ticks;
}

static void encode(struct mt_thread_info *i, const struct mt_record *from, const struct mt_record *to) {
	uint64_t min_ticks = __atomic_load_n(&msgtrace_min_ticks, __ATOMIC_RELAXED);
	while (from < to && too_short(from, min_ticks))
		from++;
	if (from >= to)
		return;
	announce(i, 0);
	struct buf *b = &payload;
	b->n = 0;
	put_u64(b, i->tid);
	uint64_t prev = from->end;
	put_u64(b, prev);
	for (const struct mt_record *r = from; r < to; r++) {
		uint64_t flags = r->cls >> FLAG_SHIFT, end = r->end, dur = end >= r->start ? end - r->start : 0;
		if (too_short(r, min_ticks))
			continue;
		if (flags & F_MARK) {
			put_uv(b, (r->cls & 0xffff) << 2 | 2);
			put_v(b, (int64_t)(end - prev));
			put_uv(b, dur);
			put_uv(b, r->sel);
			written_marks++;
		} else {
			uint64_t key = r->cls & ~(0xfffull << DEPTH_SHIFT) & ~((uint64_t)F_UNWOUND << FLAG_SHIFT);
			uint32_t id = method_id(key, r->sel);
			put_uv(b, (uint64_t)id << 2 | (flags & F_UNWOUND ? 1 : 0));
			put_v(b, (int64_t)(end - prev));
			put_uv(b, dur);
			put_uv(b, r->cls >> DEPTH_SHIFT & 0xfff);
			written_calls++;
		}
		prev = end;
	}
	flush_methods();
	frame(5, b);
	if (out.n > (256u << 10) && !dumping)
		write_out();
}

/* An open frame: the thread's calls open at tick now, outermost first. */
static void open_frame(struct mt_thread_info *i, uint64_t now, const struct mt_entry *e, uint64_t n) {
	uint32_t *ids = n ? malloc(n * sizeof *ids) : NULL;
	if (n && !ids)
		return;
	for (uint64_t k = 0; k < n; k++) /* ids first: they may add to the methods buffer */
		ids[k] = method_id(e[k].cls & ~(0xfffull << DEPTH_SHIFT) & ~((uint64_t)F_UNWOUND << FLAG_SHIFT), e[k].sel);
	flush_methods();
	struct buf *b = &payload;
	b->n = 0;
	put_u64(b, i->tid);
	put_u64(b, now);
	for (uint64_t k = 0; k < n; k++) {
		put_uv(b, ids[k]);
		put_uv(b, now >= e[k].start ? now - e[k].start : 0);
		put_uv(b, k);
	}
	frame(6, b);
	free(ids);
}

/* What the thread has open: an open frame when it changed since the last one (or always).
 * The thread pushes and pops while this reads: the entries are read twice, with the top
 * before, between and after, and only the prefix that stayed below every top seen and read
 * the same both times is written (the calls that were open all along). */
static void open_snapshot(struct mt_thread_info *i, int force) {
	struct mt_thread *t = &i->t;
	static struct mt_entry a[4096], b2[4096];
	struct mt_entry *top1 = __atomic_load_n(&t->top, __ATOMIC_ACQUIRE);
	if (top1 < t->base || top1 > t->limit)
		return;
	uint64_t n = (uint64_t)(top1 - t->base);
	if (n > 4096)
		n = 4096;
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
	if (!force && n == i->snap_top && start == i->snap_start)
		return;
	announce(i, 0);
	open_frame(i, msgtrace_now_ticks(), a, n);
	i->snap_top = n;
	i->snap_start = start;
}

/* At the end: losses of a live thread that no chunk carried a mark for yet. */
static void final_marks(struct mt_thread_info *i) {
	uint64_t lost = i->t.dropped - i->lost_reported, over = i->t.overflow - i->overflow_reported;
	if (!lost && !over)
		return;
	uint64_t now = msgtrace_now_ticks();
	struct mt_record r[2];
	int n = 0;
	if (lost)
		r[n++] = (struct mt_record){i->lost_since ? i->lost_since : now, now, (uint64_t)MARK_LOST | (uint64_t)F_MARK << FLAG_SHIFT, lost};
	if (over)
		r[n++] = (struct mt_record){now, now, (uint64_t)MARK_OVERFLOW | (uint64_t)F_MARK << FLAG_SHIFT, over};
	i->lost_reported = i->t.dropped;
	i->overflow_reported = i->t.overflow;
	encode(i, r, r + n);
}

/* Instants (launch.c): launch marks and the app's msgtrace_mark, as instant frames (kind 8).
 * Written once the stream has something else (a process that recorded nothing writes
 * nothing); a ring dump, a whole new file, gets every one again. */
static void emit_instant(const unsigned char *p, size_t n) {
	struct buf b = {(unsigned char *)p, n, n};
	frame(8, &b);
}
static void instants(int replay) {
	if (out.n || fd >= 0 || replay)
		msgtrace_instants_drain(emit_instant, replay);
}

/* ---- ring mode (the flight recorder) ----
 * The threads keep their chunks in rings of their own and take them back themselves
 * (rt_internal.h, rt.c): the drain only writes them, on msgtrace_stream_flush, at exit and on
 * SIGUSR2. A dump is a whole new file: per thread how much was overwritten (a mark), what its
 * ring keeps, its partial chunk, its open calls. The threads go on recording, and taking
 * chunks back, while it is written: a thread's chunks are read newest first, each copied and
 * kept only if the ring's head had not passed it meanwhile; the first one taken back ends the
 * thread's part, whose overwritten count is then what the chunks before the oldest one kept
 * held. The frames are put back in time order before they are written. */
static void end_frame(void);
static void calibrate(void);
static struct mt_record *dump_copy; /* one chunk's records */
static struct buf rev;              /* a thread's frames in time order */
static size_t *segs, nsegs, capsegs;

static int add_seg(size_t at) {
	if (nsegs == capsegs) {
		size_t cap = capsegs ? 2 * capsegs : 64;
		size_t *p = realloc(segs, cap * sizeof *segs);
		if (!p)
			return -1;
		segs = p;
		capsegs = cap;
	}
	segs[nsegs++] = at;
	return 0;
}

/* One try at a thread's frames; 0 when it put a chunk in between two reads or took back its
 * partial chunk while it was read: what was written must be rolled back and read again. */
static int ring_thread_once(struct mt_ring *r, struct mt_thread_info *live, struct mt_thread_info *id) {
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
	announce(id, 0);
	size_t base = out.n;
	nsegs = 0;
	if (c) { /* the partial chunk: it may be put in the ring meanwhile, but not taken back */
		struct mt_record *from = c->drained;
		uint64_t m = from >= c->rec && cur >= from ? (uint64_t)(cur - from) : 0;
		memcpy(dump_copy, from, m * sizeof *from);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&r->head, __ATOMIC_RELAXED) > t)
			return 0;
		if (add_seg(out.n) != 0)
			return 0;
		encode(id, dump_copy, dump_copy + m);
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
		memcpy(dump_copy, from, m * sizeof *from);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&r->head, __ATOMIC_RELAXED) > q || !ok)
			break; /* taken back while it was read: it and the older ones were overwritten */
		calls = bc, first = bf, last = bl;
		if (add_seg(out.n) != 0)
			return 0;
		encode(id, dump_copy, dump_copy + m);
	}
	/* the overwritten mark, then the chunks oldest first */
	rev.n = 0;
	for (size_t k = nsegs, end = out.n; k-- > 0; end = segs[k])
		put_bytes(&rev, out.p + segs[k], end - segs[k]);
	out.n = base;
	if (calls) {
		struct mt_record mk = {first, last, (uint64_t)MARK_OVERWRITTEN | (uint64_t)F_MARK << FLAG_SHIFT, calls};
		encode(id, &mk, &mk + 1);
	}
	put_bytes(&out, rev.p, rev.n);
	return 1;
}

static void ring_thread(struct mt_ring *r) {
	uint32_t st = __atomic_load_n(&r->state, __ATOMIC_ACQUIRE);
	if (st != RING_LIVE && st != RING_EXITED && st != RING_DONE)
		return;
	struct mt_thread_info *live = st == RING_LIVE && r->live && !__atomic_load_n(&r->live->exited, __ATOMIC_ACQUIRE) ? r->live : NULL;
	struct mt_thread_info *id = live ? live : &r->id;
	size_t at = out.n;
	uint64_t calls = written_calls, marks = written_marks;
	int ok = 0;
	for (int k = 0; k < 16 && !ok; k++) {
		id->announced = 0;
		ok = ring_thread_once(r, live, id);
		if (!ok) {
			out.n = at;
			written_calls = calls, written_marks = marks;
		}
	}
	if (!ok)
		return;
	if (live) {
		live->snap_top = live->snap_start = 0;
		open_snapshot(live, 0);
	} else if (written_calls + written_marks > calls + marks) {
		thread_frame(id, 1);
	} else {
		out.n = at; /* a thread that is gone and left nothing */
	}
}

/* Writes the rings to a new file (replacing the previous dump). */
static void ring_dump(void) {
	if (fd >= 0)
		close(fd);
	fd = -1;
	file_failed = 0;
	out.n = methods.n = pre.n = 0;
	table_reset(&raw_ids);
	table_reset(&canon_ids);
	next_id = 1;
	written_calls = written_marks = 0;
	if (!dump_copy && !(dump_copy = malloc((size_t)msgtrace_chunk_records * sizeof *dump_copy)))
		return;
	dumping = 1;
	pthread_mutex_lock(&msgtrace_registry_lock);
	for (struct mt_ring *r = __atomic_load_n(&msgtrace_rings, __ATOMIC_ACQUIRE); r; r = r->next)
		ring_thread(r);
	pthread_mutex_unlock(&msgtrace_registry_lock);
	dumping = 0;
	flush_methods();
	if (out.n) { /* the methods frames first, then the threads' frames */
		put_bytes(&pre, out.p, out.n);
		struct buf b = out;
		out = pre;
		pre = b;
		pre.n = 0;
		clock_frame();
		instants(1);
		end_frame();
	}
	write_out();
	if (fd >= 0) {
		close(fd);
		fd = -1;
	}
}

/* ---- the pass ---- */

static uint64_t last_collect_ns, last_names_ns;

/* A thread whose last chunk the drain took: out of the registry, its totals kept, freed. */
static void forget(struct mt_thread_info *i) {
	pthread_mutex_lock(&msgtrace_registry_lock);
	struct mt_thread_info **pp = &msgtrace_registry;
	while (*pp && *pp != i)
		pp = &(*pp)->next;
	if (*pp)
		*pp = i->next;
	msgtrace_thread_gone_mark(i);
	pthread_mutex_unlock(&msgtrace_registry_lock);
	free(i);
}

/* Keeps faulted-in chunks ahead of the threads (first touch is the expensive part: better the
 * drain than a recording thread): twice as many as are in use, 4 at least, up to low. A
 * program that records little faults in (and tears down at exit) little. */
static void grow_pool(uint32_t low) {
	uint32_t made = msgtrace_pool_made(), free_ = msgtrace_pool_free_count();
	uint32_t want = 2 * (made > free_ ? made - free_ : 0);
	if (want < 4)
		want = 4;
	if (want > low)
		want = low;
	while (msgtrace_pool_free_count() < want && msgtrace_pool_grow(1) == 1)
		;
}

/* Handed-over chunks, each thread's oldest first: encoded (kept in ring mode) and returned. */
static void take_handed(void) {
	for (struct mt_chunk *c = msgtrace_take_handed(), *n; c; c = n) {
		n = c->qnext;
		struct mt_thread_info *i = c->owner;
		if (i)
			i->taken = c->seq + 1;
		if (ring_mode) { /* a thread without a ring (no memory for one): not kept */
			if (i && c->last)
				forget(i);
			msgtrace_pool_push(c);
			continue;
		}
		if (i && c->used)
			encode(i, c->drained, c->used);
		if (i && c->last) {
			announce(i, 0);
			if (i->snap_top)
				open_frame(i, c->used > c->rec ? c->used[-1].end : msgtrace_now_ticks(), NULL, 0);
			thread_frame(i, 1);
			forget(i);
		}
		msgtrace_pool_push(c);
	}
}

/* A live thread's partial chunk (what it recorded since the last time), its open calls and, in
 * a final pass, its losses no chunk carried a mark for. Returns 0, writing nothing, while an
 * older chunk of the thread is in flight (handed over after this pass took the handed chunks):
 * a thread's frames are written in the order its calls ended. */
static int collect_thread(struct mt_thread_info *i, int force, int final, int names) {
	struct mt_chunk *c = __atomic_load_n(&i->chunk, __ATOMIC_ACQUIRE);
	struct mt_record *cur = __atomic_load_n(&i->t.rec_cur, __ATOMIC_ACQUIRE);
	if (c ? c->seq != i->taken : i->taken != __atomic_load_n(&i->nchunks, __ATOMIC_RELAXED))
		return 0;
	if (c && cur >= c->drained && cur <= c->rec + msgtrace_chunk_records) {
		encode(i, c->drained, cur);
		c->drained = cur;
		struct mt_record m[3];
		int n = force ? msgtrace_claim_marks(i, c, cur, m) : 0;
		encode(i, m, m + n);
	}
	if (names && i->announced)
		announce(i, 1);
	open_snapshot(i, final);
	if (final)
		final_marks(i);
	return 1;
}

/* Every live thread (or, with retry, those the last call skipped): exited ones without a last
 * chunk are written off and freed once their chunks are in. Returns how many were skipped. */
static int collect(int force, int final, int names, int retry) {
	int skipped = 0;
	pthread_mutex_lock(&msgtrace_registry_lock);
	for (struct mt_thread_info **pp = &msgtrace_registry; *pp;) {
		struct mt_thread_info *i = *pp;
		int ex = __atomic_load_n(&i->exited, __ATOMIC_ACQUIRE);
		if (ex == 2) { /* exited with no chunk to say so */
			if (i->taken != i->nchunks) { /* its last chunks are not in yet */
				skipped++;
				pp = &i->next;
				continue;
			}
			announce(i, 0);
			if (i->snap_top)
				open_frame(i, msgtrace_now_ticks(), NULL, 0);
			thread_frame(i, 1);
			*pp = i->next;
			msgtrace_thread_gone_mark(i);
			free(i);
			continue;
		}
		pp = &i->next;
		if (ex || (retry && !i->skipped))
			continue;
		i->skipped = !collect_thread(i, force, final, names);
		skipped += i->skipped;
	}
	pthread_mutex_unlock(&msgtrace_registry_lock);
	return skipped;
}

/* One pass: handed-over chunks encoded and returned; every period (or when forced) the quiet
 * threads' partial chunks and open calls; exited threads freed; the pool topped up. */
static void pass(int force, int final) {
	if (min_us > 0 && !rate_num) {
		/* calls shorter than MSGTRACE_MIN_US recorded before the rate was known are left out
		 * as they are encoded: nothing is encoded before (2 ms after the start at most) */
		calibrate();
		while (!rate_num && force) {
			sleep_ms(1);
			calibrate();
		}
		if (!rate_num)
			return;
	}
	take_handed();
	uint64_t now = mono_ns();
	uint32_t low = msgtrace_pool_cap() / 8;
	if (low < 4)
		low = 4;
	if (ring_mode) {
		pthread_mutex_lock(&msgtrace_registry_lock);
		for (struct mt_thread_info **pp = &msgtrace_registry; *pp;) {
			struct mt_thread_info *i = *pp;
			if (!__atomic_load_n(&i->exited, __ATOMIC_ACQUIRE) || (!i->ring && i->taken != i->nchunks)) {
				pp = &i->next;
				continue;
			}
			if (i->ring) /* gone: its ring stays, named as it went */
				i->ring->live = NULL;
			*pp = i->next;
			msgtrace_thread_gone_mark(i);
			free(i);
		}
		/* rings that keep nothing of a thread that is gone give their slots back */
		for (struct mt_ring *r = __atomic_load_n(&msgtrace_rings, __ATOMIC_ACQUIRE); r; r = r->next)
			if (__atomic_load_n(&r->state, __ATOMIC_ACQUIRE) == RING_EXITED && !r->live &&
			    __atomic_load_n(&r->head, __ATOMIC_ACQUIRE) == __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE))
				msgtrace_ring_release(r);
		pthread_mutex_unlock(&msgtrace_registry_lock);
		grow_pool(low);
		if (force || dump_req) {
			dump_req = 0;
			ring_dump();
		}
		return;
	}
	int do_collect = force || now - last_collect_ns >= (uint64_t)period_ms * 1000000ull;
	if (do_collect) {
		last_collect_ns = now;
		int names = now - last_names_ns >= 1000000000ull;
		if (names)
			last_names_ns = now;
		int skipped = collect(force, final, names, 0);
		/* forced (a flush, the exit, a crash): what was recorded before it is written now; a
		 * skipped thread's older chunk is handed over by now or within moments */
		for (int round = 0; skipped && force && round < 200; round++) {
			if (round) {
				struct timespec ts = {0, 50000L};
				nanosleep(&ts, NULL);
			}
			take_handed();
			skipped = collect(force, final, 0, 1);
		}
	}
	grow_pool(low);
	if ((out.n || fd >= 0) && (now - last_clock_ns >= 1000000000ull || rate_news) && !file_failed && fd >= 0) {
		clock_frame();
		rate_news = 0;
	}
	instants(0);
	write_out();
}

static void end_frame(void) {
	struct mt_counters c;
	msgtrace_counters(&c);
	struct buf *b = &payload;
	b->n = 0;
	put_uv(b, written_calls);
	put_uv(b, c.dropped);
	put_uv(b, c.overflow);
	put_uv(b, c.waits);
	put_uv(b, c.wait_ticks);
	put_uv(b, lost_bytes);
	frame(7, b);
}

/* The tick rate without waiting: the hardware's where it says (arm64 CNTFRQ_EL0); on x86
 * Linux the kernel's TSC conversion from a perf event's mmap page (time_mult, time_shift: what
 * the vDSO uses), when perf events are allowed; on x86 macOS machdep.tsc.frequency. 0 when
 * none is there. */
static int known_rate(void) {
	uint64_t hz = msgtrace_tick_hz();
	if (hz) {
		rate_num = 1000000000ull;
		rate_den = hz;
		return 1;
	}
#if defined(__linux__) && defined(__x86_64__)
	struct perf_event_attr pe;
	memset(&pe, 0, sizeof pe);
	pe.type = PERF_TYPE_SOFTWARE;
	pe.size = sizeof pe;
	pe.config = PERF_COUNT_SW_DUMMY;
	pe.disabled = 1;
	pe.exclude_kernel = 1;
	pe.exclude_hv = 1;
	int pfd = (int)syscall(SYS_perf_event_open, &pe, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (pfd < 0)
		return 0;
	struct perf_event_mmap_page *pg = mmap(NULL, (size_t)sysconf(_SC_PAGESIZE), PROT_READ, MAP_SHARED, pfd, 0);
	close(pfd);
	if (pg == MAP_FAILED)
		return 0;
	int ok = pg->cap_user_time && pg->time_shift < 63 && pg->time_mult;
	if (ok) {
		rate_num = pg->time_mult;
		rate_den = 1ull << pg->time_shift;
	}
	munmap(pg, (size_t)sysconf(_SC_PAGESIZE));
	return ok;
#elif defined(__APPLE__) && defined(__x86_64__)
	uint64_t f = 0; /* the TSC's rate as the kernel measured it at boot */
	size_t n = sizeof f;
	if (sysctlbyname("machdep.tsc.frequency", &f, &n, NULL, 0) != 0 || !f)
		return 0;
	rate_num = 1000000000ull;
	rate_den = f;
	return 1;
#else
	return 0;
#endif
}

/* The counter and the monotonic clock read together: the counter's midpoint around the clock. */
static void clock_pair(uint64_t *tick, uint64_t *ns) {
	uint64_t a = msgtrace_now_ticks(), m = mono_ns(), b = msgtrace_now_ticks();
	*tick = a + (b - a) / 2;
	*ns = m;
}

static void apply_min_us(void) {
	if (rate_num && rate_den && min_us > 0)
		__atomic_store_n(&msgtrace_min_ticks, (uint64_t)(min_us * 1000.0 * (double)rate_den / (double)rate_num), __ATOMIC_RELAXED);
}

/* Where neither the hardware nor the kernel says, the counter's rate is measured without
 * waiting for it: against the monotonic clock, from the stream's start to now, as the drain
 * runs (2 ms of it give 1e-4, what MSGTRACE_MIN_US needs; refined until a second has passed).
 * Until then calls are recorded whatever their length, and the reader converts ticks through
 * the clock frames (every one carries the rate as known then). */
static void calibrate(void) {
	if (rate_final || !cal_ns)
		return;
	uint64_t t, m;
	clock_pair(&t, &m);
	if (t <= cal_tick || m < cal_ns + 2000000ull)
		return;
	uint64_t dm = m - cal_ns;
	if (rate_num && dm < 2 * rate_num) /* refine at 2x, 4x, ... the last span */
		return;
	rate_num = dm;
	rate_den = t - cal_tick;
	rate_final = dm >= 1000000000ull;
	rate_news = 1;
	apply_min_us();
}

/* Wakes the drain now (async-signal-safe: a write to a pipe). */
void msgtrace_drain_wake(void) {
	if (wake_fd[1] >= 0) {
		char b = 1;
		ssize_t r = write(wake_fd[1], &b, 1); /* a full pipe wakes it as well */
		(void)r;
	}
}

/* Waits up to ms for a wake-up. */
static void drain_wait(int ms) {
	if (wake_fd[0] < 0) {
		sleep_ms(ms);
		return;
	}
	struct pollfd p = {wake_fd[0], POLLIN, 0};
	if (poll(&p, 1, ms) > 0) {
		char b[64];
		while (read(wake_fd[0], b, sizeof b) > 0)
			;
	}
}

static void make_wake_pipe(void) {
	if (wake_fd[0] >= 0)
		close(wake_fd[0]);
	if (wake_fd[1] >= 0)
		close(wake_fd[1]);
	wake_fd[0] = wake_fd[1] = -1;
	int p[2];
	if (pipe(p) != 0)
		return;
	for (int k = 0; k < 2; k++) {
		fcntl(p[k], F_SETFD, FD_CLOEXEC);
		fcntl(p[k], F_SETFL, fcntl(p[k], F_GETFL) | O_NONBLOCK);
	}
	wake_fd[0] = p[0];
	wake_fd[1] = p[1];
}

static void *drain_main(void *arg) {
	(void)arg;
	msgtrace_set_untraced_self();
	if (!rate_final && (rate_final = known_rate()))
		apply_min_us();
	int idle = 0;
	while (!stop_req) {
		calibrate();
		pthread_mutex_lock(&req_mu);
		uint64_t want = req_seq;
		pthread_mutex_unlock(&req_mu);
		/* a crash asked before this pass started is answered by it; one asked during a
		 * pass that was not forced waits for the next (it may not have written a byte) */
		int crash = crash_req;
		int forced = want != done_seq || crash || dump_req;
		pthread_mutex_lock(&drain_mu);
		pass(forced, forced);
		pthread_mutex_unlock(&drain_mu);
		if (crash)
			crash_done = 1;
		struct timespec cpu;
		if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu) == 0)
			drain_cpu = (uint64_t)cpu.tv_sec * 1000000000ull + (uint64_t)cpu.tv_nsec;
		if (want != done_seq) {
			pthread_mutex_lock(&req_mu);
			done_seq = want;
			pthread_cond_broadcast(&req_cv);
			pthread_mutex_unlock(&req_mu);
		}
		if (__atomic_exchange_n(&msgtrace_drain_urgent, 0, __ATOMIC_ACQ_REL)) {
			idle = 0;
			continue;
		}
		if (stop_req)
			break;
		drain_wait(idle ? 10 : 1); /* a flush, the exit, a crash or a waiting thread wakes it */
		idle = 1; /* a quiet period: sleep longer until a chunk comes */
		if (msgtrace_pool_free_count() + 4 < msgtrace_pool_made())
			idle = 0;
	}
	return NULL;
}

/* ---- crashing signals ---- */

static const int crash_signals[] = {SIGSEGV, SIGBUS, SIGABRT, SIGILL, SIGFPE, SIGTRAP};
static const int term_signals[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT};
static struct sigaction old_actions[65];
static volatile int handling;

static void on_signal(int sig, siginfo_t *info, void *uc) {
	if (__atomic_exchange_n(&handling, 1, __ATOMIC_ACQ_REL) == 0 && msgtrace_drain_running &&
	    !pthread_equal(pthread_self(), drain_thread)) {
		crash_req = 1; /* the drain writes what it can: partial chunks, open calls */
		__atomic_store_n(&msgtrace_drain_urgent, 1, __ATOMIC_RELEASE);
		msgtrace_drain_wake();
		for (int k = 0; k < 1000 && !crash_done; k++) { /* 5 s at most: qemu on a loaded machine */
			struct timespec ts = {0, 5000000L};
			nanosleep(&ts, NULL);
		}
	}
	sigaction(sig, &old_actions[sig], NULL);
	struct sigaction *o = &old_actions[sig];
	if (o->sa_flags & SA_SIGINFO) {
		if (o->sa_sigaction) {
			o->sa_sigaction(sig, info, uc);
			return;
		}
	} else if (o->sa_handler != SIG_DFL && o->sa_handler != SIG_IGN) {
		o->sa_handler(sig);
		return;
	}
	/* default action: faults happen again on return; a raised signal is delivered on return */
	if (o->sa_handler == SIG_DFL)
		raise(sig);
}

static void on_dump_signal(int sig) {
	(void)sig;
	dump_req = 1; /* the drain writes the ring now */
	msgtrace_drain_wake();
}

static void install_signals(void) {
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_signal;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
	sigemptyset(&sa.sa_mask);
	for (size_t k = 0; k < sizeof crash_signals / sizeof *crash_signals; k++)
		sigaction(crash_signals[k], &sa, &old_actions[crash_signals[k]]);
	for (size_t k = 0; k < sizeof term_signals / sizeof *term_signals; k++) {
		int s = term_signals[k];
		struct sigaction cur;
		if (sigaction(s, NULL, &cur) == 0 && !(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == SIG_DFL)
			sigaction(s, &sa, &old_actions[s]);
	}
	struct sigaction cur;
	if (ring_mode && sigaction(SIGUSR2, NULL, &cur) == 0 && !(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == SIG_DFL) {
		struct sigaction d;
		memset(&d, 0, sizeof d);
		d.sa_handler = on_dump_signal;
		d.sa_flags = SA_RESTART;
		sigemptyset(&d.sa_mask);
		sigaction(SIGUSR2, &d, NULL);
	}
}

/* ---- fork ---- */

static void fork_prepare(void) { pthread_mutex_lock(&drain_mu); }
static void fork_parent(void) { pthread_mutex_unlock(&drain_mu); }
static void start_thread(void);
static void fork_child(void) {
	forked_pid = getpid();
	pthread_mutex_init(&drain_mu, NULL);
	pthread_mutex_init(&req_mu, NULL);
	pthread_cond_init(&req_cv, NULL);
	msgtrace_reset_after_fork();
	make_wake_pipe(); /* the parent's would wake the parent's drain */
	if (fd >= 0)
		close(fd);
	fd = -1;
	file_failed = 0;
	out.n = payload.n = methods.n = 0;
	table_reset(&raw_ids);
	table_reset(&canon_ids);
	next_id = 1;
	written_calls = written_marks = lost_bytes = 0;
	req_seq = done_seq = 0;
	stop_req = crash_req = crash_done = handling = 0;
	stream_path[0] = 0;
	/* a pattern without %p would name the parent's file: the child's gets its pid */
	if (!strstr(path_pattern, "%p")) {
		char pat[sizeof path_pattern];
		const char *dot = strrchr(path_pattern, '.'), *slash = strrchr(path_pattern, '/');
		if (dot && (!slash || dot > slash))
			snprintf(pat, sizeof pat, "%.*s.%%p%.64s", (int)(dot - path_pattern), path_pattern, dot);
		else
			snprintf(pat, sizeof pat, "%.4000s.%%p", path_pattern);
		memcpy(path_pattern, pat, sizeof pat);
	}
	if (msgtrace_drain_running && !closed) {
		msgtrace_drain_running = 0;
		start_thread();
	}
}

static void start_thread(void) {
	pthread_attr_t a;
	pthread_attr_init(&a);
	pthread_attr_setstacksize(&a, 256 << 10);
	if (pthread_create(&drain_thread, &a, drain_main, NULL) == 0) {
		msgtrace_drain_running = 1;
		msgtrace_set_full_policy(0);
	}
	pthread_attr_destroy(&a);
}

int msgtrace_stream_start(const struct mt_stream_config *cfg) {
	if (started) {
		snprintf(error_text, sizeof error_text, "the stream is already started");
		return -1;
	}
	char probe[4096];
	if (!cfg->path || msgtrace_expand_path(cfg->path, (long)getpid(), probe, sizeof probe) != 0) {
		snprintf(error_text, sizeof error_text, "bad output pattern %s (known: %%p %%h %%t %%%%)", cfg->path ? cfg->path : "(null)");
		return -1;
	}
	crc_init();
	snprintf(path_pattern, sizeof path_pattern, "%s", cfg->path);
	snprintf(program_name, sizeof program_name, "%s", cfg->program ? cfg->program : "");
	period_ms = cfg->period_ms ? cfg->period_ms : 100;
	min_us = cfg->min_us;
	ring_mode = cfg->ring;
	__atomic_store_n(&msgtrace_ring_mode, ring_mode, __ATOMIC_RELEASE);
	started = 1;
	/* the tick rate: the drain asks the hardware or the kernel, or measures it as it runs;
	 * nothing here waits (calls shorter than MSGTRACE_MIN_US recorded before the rate is known
	 * are left out as they are encoded) */
	clock_pair(&cal_tick, &cal_ns);
	make_wake_pipe();
	start_thread();
	if (!msgtrace_drain_running) {
		snprintf(error_text, sizeof error_text, "cannot start the drain thread");
		return -1;
	}
	if (cfg->drop)
		msgtrace_set_full_policy(1);
	if (!atfork_set) {
		atfork_set = 1;
		pthread_atfork(fork_prepare, fork_parent, fork_child);
	}
	install_signals();
	return 0;
}

int msgtrace_stream_flush(void) {
	if (!started || closed)
		return -1;
	if (!msgtrace_drain_running) {
		pthread_mutex_lock(&drain_mu);
		pass(1, 1);
		pthread_mutex_unlock(&drain_mu);
		return lost_bytes ? -1 : 0;
	}
	pthread_mutex_lock(&req_mu);
	uint64_t my = ++req_seq;
	msgtrace_drain_wake();
	struct timespec dl;
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += 30;
	while (done_seq < my && msgtrace_drain_running)
		if (pthread_cond_timedwait(&req_cv, &req_mu, &dl) != 0)
			break;
	int ok = done_seq >= my;
	pthread_mutex_unlock(&req_mu);
	return ok ? 0 : -1;
}

int msgtrace_stream_close(void) {
	if (!started || closed)
		return started ? 0 : -1;
	if (msgtrace_drain_running && !pthread_equal(pthread_self(), drain_thread)) {
		stop_req = 1;
		msgtrace_drain_wake();
		pthread_join(drain_thread, NULL);
		msgtrace_drain_running = 0;
	}
	closed = 1;
	msgtrace_set_full_policy(1);
	pthread_mutex_lock(&drain_mu);
	pass(1, 1);
	if (!ring_mode && (fd >= 0 || out.n)) {
		clock_frame();
		end_frame();
		write_out();
	}
	if (fd >= 0) {
		close(fd);
		fd = -1;
	}
	pthread_mutex_unlock(&drain_mu);
	return lost_bytes ? -1 : 0;
}

/* Exit of a child forked from the process that started the stream (the Go runtime did not
 * survive the fork: the C side closes the child's stream). Not in a vfork child, which shares
 * the parent's memory and ran no fork handler. */
void msgtrace_stream_exit_child(void) {
	if (forked_pid && getpid() == forked_pid)
		msgtrace_stream_close();
}

const char *msgtrace_stream_path(void) { return stream_path; }
const char *msgtrace_stream_error(void) { return error_text; }

uint64_t msgtrace_drain_cpu_ns(void) { return drain_cpu; }

/* Totals the drain owns (rt.c asks). */
uint64_t msgtrace_stream_written(void) { return written_calls; }
uint64_t msgtrace_stream_lost_bytes(void) { return lost_bytes; }
