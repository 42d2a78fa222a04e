/*
 * util.c - allocation wrappers, clocks and small string helpers.
 *
 * Stateless; safe to call from any module.
 */
#include "common.h"
#include "log.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <time.h>
#include <sys/time.h>

void *xmalloc(size_t size)
{
	void *p = malloc(size ? size : 1);
	if (!p)
		die("out of memory allocating %zu bytes", size);
	return p;
}

void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);
	if (!p)
		die("out of memory allocating %zu x %zu bytes", n, size);
	return p;
}

void *xrealloc(void *old, size_t size)
{
	void *p = realloc(old, size ? size : 1);
	if (!p)
		die("out of memory reallocating %zu bytes", size);
	return p;
}

char *xstrdup(const char *s)
{
	char *p = strdup(s ? s : "");
	if (!p)
		die("out of memory duplicating a string");
	return p;
}

/* The wall clock read at clock_cache_begin; 0 = none (read it). */
static usec_t cached_now;

void clock_cache_begin(void)
{
	cached_now = 0;
	cached_now = now_usec();
}

void clock_cache_end(void)
{
	cached_now = 0;
}

usec_t now_usec(void)
{
	if (cached_now)
		return cached_now;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (usec_t)ts.tv_sec * USEC_PER_SEC + ts.tv_nsec / 1000;
}

usec_t monotonic_usec(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (usec_t)ts.tv_sec * USEC_PER_SEC + ts.tv_nsec / 1000;
}

size_t strlcpy_s(char *dst, const char *src, size_t size)
{
	size_t len = strlen(src);
	if (size) {
		size_t n = len < size - 1 ? len : size - 1;
		memcpy(dst, src, n);
		dst[n] = '\0';
	}
	return len;
}

uint32_t hash_string(const char *s)
{
	uint32_t h = 2166136261u;
	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 16777619u;
	return h;
}

bool list_next_item(const char **p, char *buf, size_t size)
{
	const char *s = *p;
	while (*s == ',' || *s == ' ' || *s == '\t')
		s++;
	if (!*s) {
		*p = s;
		return false;
	}
	const char *start = s;
	while (*s && *s != ',' && *s != ' ' && *s != '\t')
		s++;
	size_t len = MIN((size_t)(s - start), size - 1);
	memcpy(buf, start, len);
	buf[len] = '\0';
	*p = s;
	return true;
}

bool secure_equal(const void *a, const void *b, size_t len)
{
	const volatile unsigned char *x = a, *y = b;
	unsigned char diff = 0;
	for (size_t i = 0; i < len; i++)
		diff |= x[i] ^ y[i];
	return diff == 0;
}

bool sockaddr_host_text(const struct sockaddr *sa, char *buf, size_t size, int *port)
{
	if (sa->sa_family != AF_INET6 || size < 3)
		return sockaddr_ip_text(sa, buf, size, port);
	if (!sockaddr_ip_text(sa, buf + 1, size - 2, port))
		return false;
	size_t n = strlen(buf + 1);
	buf[0] = '[';
	buf[n + 1] = ']';
	buf[n + 2] = '\0';
	return true;
}

/* Dotted quad into buf (size >= INET_ADDRSTRLEN): inet_ntop formats each octet with sprintf, twice per log line. */
static void ipv4_text(const struct in_addr *addr, char *buf)
{
	const uint8_t *o = (const uint8_t *)&addr->s_addr;
	char *p = buf;
	for (int i = 0; i < 4; i++) {
		if (i)
			*p++ = '.';
		if (o[i] >= 100)
			*p++ = (char)('0' + o[i] / 100);
		if (o[i] >= 10)
			*p++ = (char)('0' + o[i] / 10 % 10);
		*p++ = (char)('0' + o[i] % 10);
	}
	*p = '\0';
}

bool sockaddr_ip_text(const struct sockaddr *sa, char *buf, size_t size, int *port)
{
	int p;
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
		if (size >= INET_ADDRSTRLEN)
			ipv4_text(&in->sin_addr, buf);
		else
			inet_ntop(AF_INET, &in->sin_addr, buf, (socklen_t)size);
		p = ntohs(in->sin_port);
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
		inet_ntop(AF_INET6, &in6->sin6_addr, buf, (socklen_t)size);
		p = ntohs(in6->sin6_port);
	} else {
		return false;
	}
	if (port)
		*port = p;
	return true;
}

/* Appends what fits of text to buf (used bytes *len, NUL kept): snprintf's truncation. */
static void put_bounded(char *buf, size_t size, size_t *len, const char *text, size_t n)
{
	size_t room = size - 1 - *len;
	n = MIN(n, room);
	memcpy(buf + *len, text, n);
	*len += n;
	buf[*len] = '\0';
}

const char *log_prefix_text(char *buf, size_t size, char kind, const void *obj, const char *db, const char *user,
			    const char *host, int port)
{
	static const char hex[] = "0123456789abcdef";
	char num[4 + 2 * sizeof(uintptr_t) + 2], *p = num + sizeof(num);	/* "C-0x", the digits, ": " */
	size_t len = 0;
	if (size == 0)
		return buf;
	buf[0] = '\0';
	/* "C-%p: " as glibc prints a pointer: 0x and lower-case hex without leading zeros */
	*--p = ' ', *--p = ':';
	uintptr_t v = (uintptr_t)obj;
	do {
		*--p = hex[v & 15];
		v >>= 4;
	} while (v);
	*--p = 'x', *--p = '0', *--p = '-', *--p = kind;
	put_bounded(buf, size, &len, p, (size_t)(num + sizeof(num) - p));
	put_bounded(buf, size, &len, db, strlen(db));
	put_bounded(buf, size, &len, "/", 1);
	put_bounded(buf, size, &len, user, strlen(user));
	put_bounded(buf, size, &len, "@", 1);
	put_bounded(buf, size, &len, host, strlen(host));
	char digits[12];
	p = digits + sizeof(digits);
	unsigned u = port < 0 ? 0u - (unsigned)port : (unsigned)port;
	do {
		*--p = (char)('0' + u % 10);
		u /= 10;
	} while (u);
	if (port < 0)
		*--p = '-';
	*--p = ':';
	put_bounded(buf, size, &len, p, (size_t)(digits + sizeof(digits) - p));
	return buf;
}
