/*
 * common.h - includes, basic types and small macros shared by every module.
 *
 * Nothing here owns state. Keep it small: a module that needs something
 * specific includes that module's header instead.
 */
#ifndef PGVALVE_COMMON_H
#define PGVALVE_COMMON_H

#include "autoconf.h"	/* autoconf results (top build dir) */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <stdlib.h>
#include <stdio.h>
#include <errno.h>
#include <sys/types.h>

/*
 * The version string: first line of --version and SHOW VERSION's value.
 * It names the PgBouncer release whose behaviour pgvalve follows, so
 * tools that look for "PgBouncer x.y.z" in it keep working.
 */
#define PGVALVE_VERSION_STRING "pgvalve " PACKAGE_VERSION " (PgBouncer 1.26.0 compatible)"

/* Microseconds: every duration and timestamp inside pgvalve uses this unit. */
typedef int64_t usec_t;
#define USEC_PER_SEC ((usec_t)1000000)

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

#define container_of(ptr, type, member) \
	((type *)((char *)(ptr) - offsetof(type, member)))

/*
 * Clears memory that held a secret, in a way the compiler may not drop as
 * a dead store: glibc's explicit_bzero, its vectorised memset behind a
 * barrier. (OpenSSL's OPENSSL_cleanse stores a word at a time: clearing a
 * login's state took 1,300 of an md5 login's 24,000 instructions.)
 */
static inline void secret_clear(void *p, size_t len)
{
	explicit_bzero(p, len);
}

#define PRINTF_LIKE(fmt, args) __attribute__((format(printf, fmt, args)))
#define UNLIKELY(x) __builtin_expect(!!(x), 0)
#define LIKELY(x) __builtin_expect(!!(x), 1)

/* Allocation that cannot fail: out of memory aborts with a log line. */
void *xmalloc(size_t size);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t size);
char *xstrdup(const char *s);

/*
 * Wall clock and monotonic clock in microseconds. Between
 * clock_cache_begin and clock_cache_end (netbuf.c brackets every socket
 * callback with them) now_usec returns the time read at the begin, as
 * PgBouncer's cached time: a pooled transaction reads the clock once per
 * wake-up, not at each of its steps (8 reads before). A process global
 * (util.c), one of the documented few.
 */
usec_t now_usec(void);
usec_t monotonic_usec(void);
void clock_cache_begin(void);
void clock_cache_end(void);

/* Bounded string copy that always terminates; returns strlen(src). */
size_t strlcpy_s(char *dst, const char *src, size_t size);

struct sockaddr;
/*
 * The IP address of an AF_INET/AF_INET6 sockaddr as text into buf (and its
 * port into *port unless NULL). False, buf untouched, for other families.
 */
bool sockaddr_ip_text(const struct sockaddr *sa, char *buf, size_t size, int *port);
/* The same as log lines show a peer, as PgBouncer: an IPv6 address in brackets ("[::1]"). */
bool sockaddr_host_text(const struct sockaddr *sa, char *buf, size_t size, int *port);
/*
 * A log line's prefix, "C-0x55d1c0a8: db/user@host:port" (kind 'C' or
 * 'S', obj printed as %p would), into buf; returns buf. Formatted by hand:
 * two of these per connection were a fifth of a login's instructions.
 */
const char *log_prefix_text(char *buf, size_t size, char kind, const void *obj, const char *db, const char *user,
			    const char *host, int port);

/* FNV-1a hash of a NUL-terminated string (hash tables of names). */
uint32_t hash_string(const char *s);

/*
 * Next item of a comma/space separated list (listen_addr,
 * track_extra_parameters, ...) into buf; advances *p. False at the end.
 * Items longer than size - 1 are cut.
 */
bool list_next_item(const char **p, char *buf, size_t size);

/* Constant-time comparison of two byte strings of equal length. */
bool secure_equal(const void *a, const void *b, size_t len);

#endif
