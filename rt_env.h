/* Reading a MSGTRACE_* word in C as the Go side reads it (internal/agent/config.go:
 * strings.ToLower(strings.TrimSpace(v))), for the code that runs before Go does: the early
 * recording (rt_launch.c) and the preload loader (cmd/libmsgtrace/loader), which cannot link
 * the library. Header-only for that reason. TestEarlyConfigAgrees checks the two readings agree.
 */
#ifndef MSGTRACE_RT_ENV_H
#define MSGTRACE_RT_ENV_H

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* The length of the white space (Unicode's, as Go's unicode.IsSpace, UTF-8 encoded) at p, or 0. */
static inline size_t mt_env_space_at(const unsigned char *p) {
	if (*p == ' ' || (*p >= '\t' && *p <= '\r'))
		return 1;
	if (p[0] == 0xc2 && (p[1] == 0x85 || p[1] == 0xa0)) /* U+0085, U+00A0 */
		return 2;
	if (p[0] == 0xe1 && p[1] == 0x9a && p[2] == 0x80) /* U+1680 */
		return 3;
	if (p[0] == 0xe2 && p[1] == 0x80 && ((p[2] >= 0x80 && p[2] <= 0x8a) || p[2] == 0xa8 || p[2] == 0xa9 || p[2] == 0xaf))
		return 3; /* U+2000-U+200A, U+2028, U+2029, U+202F */
	if (p[0] == 0xe2 && p[1] == 0x81 && p[2] == 0x9f) /* U+205F */
		return 3;
	if (p[0] == 0xe3 && p[1] == 0x80 && p[2] == 0x80) /* U+3000 */
		return 3;
	return 0;
}

/* The white space that ends the k bytes at v, by length, or 0. */
static inline size_t mt_env_space_before(const unsigned char *v, size_t k) {
	for (size_t w = 3; w >= 1; w--)
		if (k >= w && mt_env_space_at(v + k - w) == w)
			return w;
	return 0;
}

/* The variable's value without the white space around it, ASCII letters lower-cased, in out (n
 * bytes; "" when unset). 0 when it does not fit: no word the recorder accepts is that long. */
static inline int mt_env_word(const char *name, char *out, size_t n) {
	const unsigned char *v = (const unsigned char *)getenv(name);
	if (!v)
		v = (const unsigned char *)"";
	for (size_t w; (w = mt_env_space_at(v)) != 0;)
		v += w;
	size_t k = strlen((const char *)v);
	for (size_t w; k && (w = mt_env_space_before(v, k)) != 0;)
		k -= w;
	if (k >= n)
		return 0;
	for (size_t i = 0; i < k; i++)
		out[i] = v[i] >= 'A' && v[i] <= 'Z' ? (char)(v[i] - 'A' + 'a') : (char)v[i];
	out[k] = 0;
	return 1;
}

/* MSGTRACE_CPU as Go reads it (strings.TrimSpace; unset, "" and "1" on, "0" off): 1 on, 0 off,
 * -1 a value Go refuses (tracing off). */
static inline int mt_env_cpu(void) {
	char w[4];
	if (!mt_env_word("MSGTRACE_CPU", w, sizeof w))
		return -1;
	return strcmp(w, "") == 0 || strcmp(w, "1") == 0 ? 1 : strcmp(w, "0") == 0 ? 0 : -1;
}

/* MSGTRACE_METHODS is all (any case, white space around it). */
static inline int mt_env_methods_all(void) {
	char w[8];
	return mt_env_word("MSGTRACE_METHODS", w, sizeof w) && strcmp(w, "all") == 0;
}

/* MSGTRACE_FLOWS is 1 or unset (on, the default; hops.c): 0 turns it off, and any other value
 * is one internal/agent rejects (nothing is traced), so it is off here too. */
static inline int mt_env_flows(void) {
	char w[4];
	return mt_env_word("MSGTRACE_FLOWS", w, sizeof w) && (w[0] == 0 || strcmp(w, "1") == 0);
}

/* MSGTRACE_WAITS: 1 on (unset, "", 1, on), 0 off (0, off), -1 anything else (which Go refuses,
 * tracing nothing). internal/agent reads it alike (TestEarlyConfigAgrees). */
static inline int mt_env_waits(void) {
	char w[8];
	if (!mt_env_word("MSGTRACE_WAITS", w, sizeof w))
		return -1;
	if (!w[0] || strcmp(w, "1") == 0 || strcmp(w, "on") == 0)
		return 1;
	if (strcmp(w, "0") == 0 || strcmp(w, "off") == 0)
		return 0;
	return -1;
}

#endif
