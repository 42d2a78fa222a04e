/*
 * pg_standin.c - a PostgreSQL stand-in for benchmarks: speaks just enough
 * of the protocol (v3, simple queries) to log in a pooler's server
 * connections and answer every query at once with one row, so that a
 * pooler's own cost per transaction can be measured without PostgreSQL
 * taking the CPUs (test/bench/workers.sh --standin).
 *
 *   pg_standin PORT      listens on 127.0.0.1:PORT until killed
 *
 * Any user and database log in without a password (AuthenticationOk);
 * SSLRequest is refused ('N'). A query gets RowDescription, one DataRow
 * ("1"), CommandComplete and ReadyForQuery; a query setting parameters
 * with set_config('name', 'value', ...) also gets their ParameterStatus,
 * as PostgreSQL reports them. One thread, epoll; not a server for
 * anything else.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define BUF 65536
#define SSL_REQUEST 80877103u
#define CANCEL_REQUEST 80877102u

struct conn {
	int fd;
	int started;		/* the startup packet was answered */
	size_t in_len;
	char in[BUF];
	size_t out_len;
	char out[BUF];
};

static uint32_t get32(const char *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return ntohl(v);
}

static void put(struct conn *c, const void *data, size_t len)
{
	if (c->out_len + len <= sizeof(c->out)) {
		memcpy(c->out + c->out_len, data, len);
		c->out_len += len;
	}
}

/* One message: type, then body parts concatenated (each a string with its NUL if str). */
static void msg(struct conn *c, char type, const void *body, size_t len)
{
	uint32_t n = htonl((uint32_t)(len + 4));
	put(c, &type, 1);
	put(c, &n, 4);
	put(c, body, len);
}

static void param(struct conn *c, const char *name, const char *value)
{
	char body[512];
	size_t a = strlen(name) + 1, b = strlen(value) + 1;
	if (a + b > sizeof(body))
		return;
	memcpy(body, name, a);
	memcpy(body + a, value, b);
	msg(c, 'S', body, a + b);
}

static void ready(struct conn *c)
{
	msg(c, 'Z', "I", 1);
}

static void login(struct conn *c)
{
	static const char *const params[][2] = {
		{ "server_version", "16.0" }, { "server_encoding", "UTF8" }, { "client_encoding", "UTF8" },
		{ "DateStyle", "ISO, MDY" }, { "TimeZone", "UTC" }, { "integer_datetimes", "on" },
		{ "IntervalStyle", "postgres" }, { "is_superuser", "off" }, { "session_authorization", "bench" },
		{ "standard_conforming_strings", "on" }, { "application_name", "" },
		{ "default_transaction_read_only", "off" }, { "in_hot_standby", "off" },
	};
	uint32_t ok = 0;
	msg(c, 'R', &ok, 4);
	for (size_t i = 0; i < sizeof(params) / sizeof(params[0]); i++)
		param(c, params[i][0], params[i][1]);
	uint32_t key[2] = { htonl((uint32_t)getpid()), htonl((uint32_t)c->fd) };
	msg(c, 'K', key, 8);
	ready(c);
}

/* set_config('name', 'value' ...) in sql: their ParameterStatus (quotes doubled inside are not undone). */
static void report_set_config(struct conn *c, const char *sql, size_t len)
{
	const char *p = sql, *end = sql + len;
	static const char tag[] = "set_config('";
	while ((p = memmem(p, (size_t)(end - p), tag, sizeof(tag) - 1)) != NULL) {
		p += sizeof(tag) - 1;
		const char *q = memchr(p, '\'', (size_t)(end - p));
		if (!q || end - q < 4 || q[1] != ',' || q[2] != ' ' || q[3] != '\'')
			return;
		const char *v = q + 4, *w = memchr(v, '\'', (size_t)(end - v));
		if (!w)
			return;
		char name[128], value[256];
		snprintf(name, sizeof(name), "%.*s", (int)(q - p), p);
		snprintf(value, sizeof(value), "%.*s", (int)(w - v), v);
		param(c, name, value);
		p = w;
	}
}

static void answer_query(struct conn *c, const char *sql, size_t len)
{
	/* RowDescription: one column "v": no table (0, 0), type text (25), size -1, typmod -1, text format */
	static const char rd[] = { 0, 1, 'v', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 25, -1, -1, -1, -1, -1, -1, 0, 0 };
	static const char dr[] = { 0, 1, 0, 0, 0, 1, '1' };
	/* pgbench's look at pgbench_accounts (search path rank, partitioning, partitions): 1, NULL, 0 */
	static const char rd3[] = { 0, 3,
		'a', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 25, -1, -1, -1, -1, -1, -1, 0, 0,
		'b', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 25, -1, -1, -1, -1, -1, -1, 0, 0,
		'c', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 25, -1, -1, -1, -1, -1, -1, 0, 0 };
	static const char dr3[] = { 0, 3, 0, 0, 0, 1, '1', -1, -1, -1, -1, 0, 0, 0, 1, '0' };
	report_set_config(c, sql, len);
	if (memmem(sql, len, "partstrat", 9)) {
		msg(c, 'T', rd3, sizeof(rd3));
		msg(c, 'D', dr3, sizeof(dr3));
	} else {
		msg(c, 'T', rd, sizeof(rd));
		msg(c, 'D', dr, sizeof(dr));
	}
	msg(c, 'C', "SELECT 1", 9);
	ready(c);
}

/* Whole messages in c->in; 0 to keep the connection, -1 to close it. */
static int consume(struct conn *c)
{
	size_t pos = 0;
	while (!c->started) {
		if (c->in_len - pos < 8)
			goto keep;
		uint32_t len = get32(c->in + pos), code = get32(c->in + pos + 4);
		if (len < 8 || len > BUF)
			return -1;
		if (c->in_len - pos < len)
			goto keep;
		pos += len;
		if (code == SSL_REQUEST) {
			put(c, "N", 1);
			continue;
		}
		if (code == CANCEL_REQUEST)
			return -1;
		c->started = 1;
		login(c);
	}
	for (;;) {
		if (c->in_len - pos < 5)
			break;
		char type = c->in[pos];
		uint32_t len = get32(c->in + pos + 1);
		if (len < 4 || len > BUF - 1)
			return -1;
		if (c->in_len - pos < 1 + len)
			break;
		if (type == 'X')
			return -1;
		if (type == 'Q')
			answer_query(c, c->in + pos + 5, len - 4);
		pos += 1 + len;
	}
keep:
	memmove(c->in, c->in + pos, c->in_len - pos);
	c->in_len -= pos;
	return 0;
}

static int flush_out(struct conn *c)
{
	size_t done = 0;
	while (done < c->out_len) {
		ssize_t n = send(c->fd, c->out + done, c->out_len - done, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				break;
			return -1;
		}
		done += (size_t)n;
	}
	memmove(c->out, c->out + done, c->out_len - done);
	c->out_len -= done;
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: pg_standin PORT\n");
		return 2;
	}
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), one = 1;
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1])) };
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(lfd, 512) < 0) {
		perror("pg_standin: bind/listen");
		return 1;
	}
	int ep = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };
	epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
	struct epoll_event evs[64];
	for (;;) {
		int n = epoll_wait(ep, evs, 64, -1);
		for (int i = 0; i < n; i++) {
			struct conn *c = evs[i].data.ptr;
			if (!c) {
				int fd;
				while ((fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
					setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
					struct conn *nc = calloc(1, sizeof(*nc));
					if (!nc) {
						close(fd);
						continue;
					}
					nc->fd = fd;
					struct epoll_event cev = { .events = EPOLLIN, .data.ptr = nc };
					epoll_ctl(ep, EPOLL_CTL_ADD, fd, &cev);
				}
				continue;
			}
			ssize_t got = recv(c->fd, c->in + c->in_len, sizeof(c->in) - c->in_len, 0);
			if (got < 0 && (errno == EAGAIN || errno == EINTR))
				continue;
			if (got <= 0 || (c->in_len += (size_t)got, consume(c) < 0) || flush_out(c) < 0) {
				flush_out(c);
				epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
				close(c->fd);
				free(c);
			}
		}
	}
}
