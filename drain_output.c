/*
 * The stream file: path patterns (%p %h %t %%), the file created by the first write with its
 * prologue (the process frame, a clock frame), the writes, and the bytes that could not be
 * written. A process holds an advisory lock on its stream while it has it open: a name another
 * live process is writing (a child it exec'd with the same MSGTRACE_OUT, a daemon it started)
 * is never truncated; this process's stream takes its pid instead (mt_output_add_pid).
 * Depends on: drain_encode.c, drain_clock.c.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "drain_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#if defined(__APPLE__)
#include <TargetConditionals.h>
#endif

#if defined(__x86_64__)
#define ARCH_NAME "amd64"
#elif defined(__aarch64__)
#define ARCH_NAME "arm64"
#else
#define ARCH_NAME "unknown"
#endif
#if !defined(__APPLE__)
#define OS_NAME "linux"
#elif TARGET_OS_IPHONE
#define OS_NAME "ios"
#else
#define OS_NAME "darwin"
#endif

struct mt_output mt_out = {.fd = -1};

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

static void process_frame(struct mt_buf *out) {
	char exe[4096] = "";
#if defined(__linux__)
	ssize_t l = readlink("/proc/self/exe", exe, sizeof exe - 1);
	exe[l > 0 ? l : 0] = 0;
#endif
	const char *name = mt_out.program;
	if (!*name) {
		const char *slash = strrchr(exe, '/');
		name = slash ? slash + 1 : exe;
	}
	struct mt_process_frame p = {(uint64_t)getpid(), (uint64_t)getppid(), exe, name, ARCH_NAME, OS_NAME, (uint64_t)mt_out.mode};
	mt_enc_process(out, &mt_out.pl, &p);
}

/* Writes all of b, or counts what it could not. */
static void write_all(const struct mt_buf *b, int report) {
	for (size_t off = 0; off < b->n;) {
		ssize_t w = write(mt_out.fd, b->p + off, b->n - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			if (report && !mt_out.error[0])
				snprintf(mt_out.error, sizeof mt_out.error, "writing %s: %s", mt_out.path, w < 0 ? strerror(errno) : "short write");
			mt_out.lost_bytes += b->n - off;
			break;
		}
		off += (size_t)w;
	}
}

void mt_output_add_pid(void) {
	char *pattern = mt_out.pattern;
	if (strstr(pattern, "%p"))
		return;
	char pat[sizeof mt_out.pattern];
	const char *dot = strrchr(pattern, '.'), *slash = strrchr(pattern, '/');
	if (dot && (!slash || dot > slash))
		snprintf(pat, sizeof pat, "%.*s.%%p%.64s", (int)(dot - pattern), pattern, dot);
	else
		snprintf(pat, sizeof pat, "%.4000s.%%p", pattern);
	memcpy(pattern, pat, sizeof pat);
}

/* An earlier run's stream (a regular file of this user's, not empty, no other link, that no live
 * process holds) is replaced, not truncated: a new file, locked before it takes the name, is renamed
 * over it, with the old one's mode. On ext4 a file truncated to nothing and written again is pushed
 * to the disk when it is closed (auto_da_alloc, the guard for programs that rewrite a file in
 * place): at exit that was 50-120 us of the program's time for every run that reused a name. The
 * old file's lock is held until the new one has the name, so that a process that opened the old one
 * meanwhile fails to lock it, or finds it unlinked (open_locked tries again). -1 when the new file
 * cannot be made: the caller truncates instead. */
static int replace_old(int old, const struct stat *st) {
	struct stat l;
	if (!S_ISREG(st->st_mode) || st->st_nlink != 1 || st->st_uid != geteuid() || lstat(mt_out.path, &l) != 0 ||
	    !S_ISREG(l.st_mode) || l.st_ino != st->st_ino || l.st_dev != st->st_dev)
		return -1;
	char tmp[sizeof mt_out.path + 48];
	const char *slash = strrchr(mt_out.path, '/');
	int dir = slash ? (int)(slash - mt_out.path) + 1 : 0;
	if (snprintf(tmp, sizeof tmp, "%.*s.%s.%ld.new", dir, mt_out.path, mt_out.path + dir, (long)getpid()) >= (int)sizeof tmp)
		return -1;
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, st->st_mode & 07777);
	if (fd < 0)
		return -1;
	if (fchmod(fd, st->st_mode & 07777) != 0 || flock(fd, LOCK_EX | LOCK_NB) != 0 || rename(tmp, mt_out.path) != 0) {
		unlink(tmp);
		close(fd);
		return -1;
	}
	close(old);
	return fd;
}

/* Opens the stream's path and locks it; -1 with errno EWOULDBLOCK when another live process
 * holds the lock (its file is left as it is). Where the file system has no locks, the file is
 * taken as before. */
static int open_locked(void) {
	for (int try = 0;; try++) {
		int fd = open(mt_out.path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
		if (fd < 0)
			return -1;
		if (flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK) {
			close(fd);
			errno = EWOULDBLOCK;
			return -1;
		}
		struct stat st;
		if (fstat(fd, &st) != 0)
			st.st_size = -1;
		if (st.st_size > 0 && st.st_nlink == 0 && try < 8) { /* replaced by another process (replace_old) since it was opened */
			close(fd);
			continue;
		}
		if (st.st_size == 0)
			return fd; /* a new file, or an empty one: nothing to truncate */
		if (st.st_size > 0) {
			int nfd = replace_old(fd, &st);
			if (nfd >= 0)
				return nfd;
		}
		if (ftruncate(fd, 0) != 0) {
			int e = errno;
			close(fd);
			errno = e;
			return -1;
		}
		return fd;
	}
}

/* The file is created by the first write, starting with the process and clock frames. */
static void create(void) {
	for (int try = 0;; try++) {
		if (msgtrace_expand_path(mt_out.pattern, (long)getpid(), mt_out.path, sizeof mt_out.path) != 0) {
			snprintf(mt_out.error, sizeof mt_out.error, "cannot create %s: bad output pattern", mt_out.pattern);
			mt_out.failed = 1;
			return;
		}
		if ((mt_out.fd = open_locked()) >= 0)
			break;
		if (errno == EWOULDBLOCK && try == 0 && !strstr(mt_out.pattern, "%p")) {
			mt_output_add_pid(); /* another process's live stream: this one is named for its pid */
			mt_out.pid_added = 1;
			continue;
		}
		snprintf(mt_out.error, sizeof mt_out.error, "cannot create %s: %s", mt_out.path,
			 errno == EWOULDBLOCK ? "another process is writing it" : strerror(errno));
		mt_out.failed = 1;
		return;
	}
	struct mt_buf pro = {0};
	process_frame(&pro);
	mt_clock_frame(&pro, &mt_out.pl);
	write_all(&pro, 0);
	mt_buf_free(&pro);
}

void mt_output_write(void) {
	if (mt_out.out.n == 0)
		return;
	if (mt_out.fd < 0 && !mt_out.failed)
		create();
	if (mt_out.fd < 0)
		mt_out.lost_bytes += mt_out.out.n;
	else
		write_all(&mt_out.out, 1);
	mt_out.out.n = 0;
}

void mt_output_begin(void) {
	if (mt_out.fd < 0 && !mt_out.failed)
		create();
}

void mt_output_close(void) {
	if (mt_out.fd >= 0)
		close(mt_out.fd);
	mt_out.fd = -1;
}

void mt_output_reset(void) {
	mt_output_close();
	mt_out.failed = 0;
	mt_out.out.n = mt_out.pl.n = 0;
}
