/*
 * harness_raw.c - the integration tests' hand-driven protocol clients
 * (see harness.h): raw TCP and Unix sockets to pgvalve, a startup and
 * login done by hand (cleartext, md5, SCRAM), simple queries, cancel
 * requests, and extended-protocol messages built and their answers read,
 * for what libpq will not send or does not show.
 *
 * Owns nothing but the sockets it is given; no registry, no state.
 */
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <openssl/evp.h>

/* ---------------------------------------------------------------- raw sockets */

int raw_connect(int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;

	ck_assert_msg(fd >= 0, "socket: %s", strerror(errno));
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
		ck_abort_msg("connect to 127.0.0.1:%d: %s", port, strerror(errno));
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

int pgv_refusing_port(int *fd)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);
	*fd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(*fd, 0);
	ck_assert_int_eq(bind(*fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(getsockname(*fd, (struct sockaddr *)&sa, &len), 0);
	return ntohs(sa.sin_port);
}

int raw_connect_unix(const char *dir, int port)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;

	if ((size_t)snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/.s.PGSQL.%d", dir, port) >= sizeof(sa.sun_path))
		ck_abort_msg("unix socket path too long: %s", dir);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_msg(fd >= 0, "socket: %s", strerror(errno));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		int save = errno;

		close(fd);
		errno = save;
		return -1;
	}
	return fd;
}

bool raw_send(int fd, const void *buf, size_t len)
{
	const char *b = buf;

	while (len > 0) {
		ssize_t n = send(fd, b, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		b += n;
		len -= (size_t)n;
	}
	return true;
}

bool raw_wait_closed(int fd, int timeout_ms)
{
	double deadline = now_s() + timeout_ms / 1000.0;
	char buf[4096];

	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int left = (int)((deadline - now_s()) * 1000);
		ssize_t n;

		if (left <= 0)
			return false;
		if (poll(&pfd, 1, left) <= 0)
			continue;
		n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n == 0)
			return true;
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return true;	/* ECONNRESET and the like */
	}
}

bool raw_read_exact(int fd, void *buf, size_t len, double deadline)
{
	char *b = buf;

	while (len > 0) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int left = (int)((deadline - now_s()) * 1000);
		ssize_t n;

		if (left <= 0 || poll(&pfd, 1, left) <= 0)
			return false;
		n = recv(fd, b, len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		b += n;
		len -= (size_t)n;
	}
	return true;
}

static void md5_hex(const void *data, size_t len, char out[33])
{
	unsigned char digest[EVP_MAX_MD_SIZE];
	unsigned int dlen = 0;

	if (EVP_Digest(data, len, digest, &dlen, EVP_md5(), NULL) != 1 || dlen != 16)
		ck_abort_msg("MD5 unavailable from OpenSSL");
	for (int i = 0; i < 16; i++)
		snprintf(out + 2 * i, 3, "%02x", digest[i]);
}

void md5_secret(const char *user, const char *password, char out[36])
{
	size_t lp = strlen(password), lu = strlen(user);
	char *buf = malloc(lp + lu + 1);

	ck_assert_ptr_nonnull(buf);
	memcpy(buf, password, lp);
	memcpy(buf + lp, user, lu);
	memcpy(out, "md5", 3);
	md5_hex(buf, lp + lu, out + 3);
	free(buf);
}

void raw_put_u32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24);
	p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8);
	p[3] = (unsigned char)v;
}

uint32_t raw_get_u32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

bool raw_read_message(int fd, char *type, unsigned char *body, size_t size, size_t *len, int timeout_ms)
{
	unsigned char hdr[5];
	double deadline = now_s() + timeout_ms / 1000.0;
	if (!raw_read_exact(fd, hdr, 5, deadline))
		return false;
	uint32_t mlen = raw_get_u32(hdr + 1);
	if (mlen < 4 || mlen - 4 >= size || !raw_read_exact(fd, body, mlen - 4, deadline))
		return false;
	body[mlen - 4] = '\0';
	*type = (char)hdr[0];
	*len = mlen - 4;
	return true;
}

void raw_send_password_message(int fd, const void *data, size_t len)
{
	unsigned char pkt[1024];
	ck_assert_uint_lt(len + 5, sizeof(pkt));
	pkt[0] = 'p';
	raw_put_u32(pkt + 1, (uint32_t)(len + 4));
	memcpy(pkt + 5, data, len);
	ck_assert(raw_send(fd, pkt, len + 5));
}

static bool send_password(int fd, const char *text)
{
	size_t len = strlen(text) + 1;
	unsigned char hdr[5];

	hdr[0] = 'p';
	raw_put_u32(hdr + 1, (uint32_t)(len + 4));
	return raw_send(fd, hdr, 5) && raw_send(fd, text, len);
}

void raw_parse_error(const unsigned char *body, size_t len, struct raw_error *err)
{
	size_t i = 0;

	while (i < len && body[i] != 0) {
		char field = (char)body[i++];
		const char *value = (const char *)body + i;
		size_t vlen = strnlen(value, len - i);

		if (field == 'S' && err->severity[0] == '\0')
			snprintf(err->severity, sizeof(err->severity), "%.*s", (int)vlen, value);
		else if (field == 'V')
			snprintf(err->severity, sizeof(err->severity), "%.*s", (int)vlen, value);
		else if (field == 'C')
			snprintf(err->sqlstate, sizeof(err->sqlstate), "%.*s", (int)vlen, value);
		else if (field == 'M')
			snprintf(err->message, sizeof(err->message), "%.*s", (int)vlen, value);
		i += vlen + 1;
	}
}

/* The login exchange on a connected socket; the socket stays open. key (may be NULL) gets BackendKeyData. */
static int login_on_fd(int fd, const char *dbname, const char *user, const char *password,
		       const char *const *extra, struct raw_error *err, unsigned char *key)
{
	double deadline = now_s() + 10;
	unsigned char startup[10000], hdr[5], *body = NULL;	/* PostgreSQL's MAX_STARTUP_PACKET_LENGTH */
	size_t off = 8;
	int rc = -2;

	memset(err, 0, sizeof(*err));
	off += (size_t)snprintf((char *)startup + off, sizeof(startup) - off - 1, "user%c%s%cdatabase%c%s%c",
				0, user, 0, 0, dbname, 0);
	for (int i = 0; extra && extra[i] && extra[i + 1]; i += 2) {
		size_t a = strlen(extra[i]) + 1, b = strlen(extra[i + 1]) + 1;
		ck_assert_msg(off + a + b < sizeof(startup) - 1, "startup packet too long");
		memcpy(startup + off, extra[i], a);
		off += a;
		memcpy(startup + off, extra[i + 1], b);
		off += b;
	}
	ck_assert_msg(off < sizeof(startup) - 1, "startup packet too long");
	startup[off++] = 0;
	raw_put_u32(startup, (uint32_t)off);
	raw_put_u32(startup + 4, 196608);	/* protocol 3.0 */

	if (!raw_send(fd, startup, off))
		goto out;
	for (;;) {
		uint32_t len;

		if (!raw_read_exact(fd, hdr, 5, deadline))
			goto out;
		len = raw_get_u32(hdr + 1);
		if (len < 4 || len > 1024 * 1024)
			goto out;
		free(body);
		body = malloc(len - 4 + 1);
		ck_assert_ptr_nonnull(body);
		if (!raw_read_exact(fd, body, len - 4, deadline))
			goto out;
		body[len - 4] = 0;
		switch (hdr[0]) {
		case 'R': {
			uint32_t code = len >= 8 ? raw_get_u32(body) : 99;

			if (code == 0)
				break;
			if (code == 3) {
				if (!send_password(fd, password))
					goto out;
			} else if (code == 5 && len >= 12) {
				char secret[36], reply[36], salted[32 + 4];

				md5_secret(user, password, secret);
				memcpy(salted, secret + 3, 32);
				memcpy(salted + 32, body + 4, 4);
				memcpy(reply, "md5", 3);
				md5_hex(salted, sizeof(salted), reply + 3);
				if (!send_password(fd, reply))
					goto out;
			} else {
				goto out;	/* SASL and others: not spoken here */
			}
			break;
		}
		case 'E':
			raw_parse_error(body, len - 4, err);
			rc = -1;
			goto out;
		case 'Z':
			rc = 0;
			goto out;
		case 'K':
			if (key != NULL && len == 12)
				memcpy(key, body, 8);
			break;
		case 'S':
		case 'N':
			break;
		default:
			goto out;
		}
	}
out:
	free(body);
	return rc;
}

int raw_login_ex(int port, const char *dbname, const char *user, const char *password,
		 const char *const *extra, struct raw_error *err, int *fd_out)
{
	int fd = raw_connect(port);
	int rc = login_on_fd(fd, dbname, user, password, extra, err, NULL);

	if (rc == 0 && fd_out) {
		*fd_out = fd;
		return rc;
	}
	if (rc == 0)
		raw_send(fd, "X\0\0\0\4", 5);
	close(fd);
	if (fd_out)
		*fd_out = -1;
	return rc;
}

int raw_login_fd(int fd, const char *dbname, const char *user, const char *password,
		 unsigned char backend_key[8], struct raw_error *err)
{
	memset(backend_key, 0, 8);
	return login_on_fd(fd, dbname, user, password, NULL, err, backend_key);
}

bool raw_send_cancel(int fd, const unsigned char key[8])
{
	unsigned char pkt[16];

	raw_put_u32(pkt, 16);
	raw_put_u32(pkt + 4, 80877102);	/* CancelRequest code */
	memcpy(pkt + 8, key, 8);
	return raw_send(fd, pkt, sizeof(pkt));
}

int raw_login(int port, const char *dbname, const char *user, const char *password, struct raw_error *err)
{
	return raw_login_ex(port, dbname, user, password, NULL, err, NULL);
}

bool raw_send_query(int fd, const char *sql)
{
	size_t n = strlen(sql) + 1;
	unsigned char *msg = malloc(n + 5);
	bool sent;

	ck_assert_ptr_nonnull(msg);
	msg[0] = 'Q';
	raw_put_u32(msg + 1, (uint32_t)(n + 4));
	memcpy(msg + 5, sql, n);
	sent = raw_send(fd, msg, n + 5);
	free(msg);
	return sent;
}

int raw_read_result(int fd, char *value, size_t size, struct raw_error *err, int timeout_ms)
{
	double deadline = now_s() + timeout_ms / 1000.0;
	unsigned char hdr[5], *body = NULL;
	int rc = -2;

	memset(err, 0, sizeof(*err));
	if (value && size)
		value[0] = '\0';
	for (;;) {
		if (!raw_read_exact(fd, hdr, 5, deadline))
			break;
		uint32_t len = raw_get_u32(hdr + 1);
		if (len < 4 || len > 16 * 1024 * 1024)
			break;
		free(body);
		body = malloc(len - 4 + 1);
		ck_assert_ptr_nonnull(body);
		if (!raw_read_exact(fd, body, len - 4, deadline))
			break;
		body[len - 4] = 0;
		if (hdr[0] == 'D' && value && size && value[0] == '\0' && len >= 4 + 6) {
			uint32_t vlen = raw_get_u32(body + 2);
			if (vlen != 0xFFFFFFFFu && 6 + vlen <= len - 4) {
				size_t c = vlen < size - 1 ? vlen : size - 1;
				memcpy(value, body + 6, c);
				value[c] = '\0';
			}
		} else if (hdr[0] == 'E') {
			raw_parse_error(body, len - 4, err);
			rc = -1;
		} else if (hdr[0] == 'Z') {
			if (rc != -1)
				rc = 0;
			break;
		}
	}
	free(body);
	return rc;
}

int raw_query(int fd, const char *sql, char *value, size_t size, struct raw_error *err)
{
	memset(err, 0, sizeof(*err));
	if (value && size)
		value[0] = '\0';
	if (!raw_send_query(fd, sql))
		return -2;
	return raw_read_result(fd, value, size, err, 10000);
}

/* ---------------------------------------------------------------- hand-built messages */

void raw_put(struct raw_msgs *m, char type, const void *body, size_t n)
{
	ck_assert_msg(m->len + 5 + n <= sizeof(m->data), "raw_msgs full");
	m->data[m->len] = (unsigned char)type;
	raw_put_u32(m->data + m->len + 1, (uint32_t)(n + 4));
	if (n)
		memcpy(m->data + m->len + 5, body, n);
	m->len += 5 + n;
}

/* Appends s with its NUL to body at *n. */
static void put_cstr(unsigned char *body, size_t size, size_t *n, const char *s)
{
	size_t l = strlen(s) + 1;
	ck_assert(*n + l <= size);
	memcpy(body + *n, s, l);
	*n += l;
}

void raw_put_parse(struct raw_msgs *m, const char *name, const char *sql)
{
	unsigned char body[4096];
	size_t n = 0;
	put_cstr(body, sizeof(body), &n, name);
	put_cstr(body, sizeof(body) - 2, &n, sql);
	body[n++] = 0;	/* no parameter types */
	body[n++] = 0;
	raw_put(m, 'P', body, n);
}

void raw_put_bind(struct raw_msgs *m, const char *portal, const char *stmt, const char *param)
{
	unsigned char body[4096];
	size_t n = 0;
	put_cstr(body, sizeof(body), &n, portal);
	put_cstr(body, sizeof(body), &n, stmt);
	ck_assert(n + 16 + (param ? strlen(param) : 0) <= sizeof(body));
	body[n++] = 0;	/* parameters in text */
	body[n++] = 0;
	body[n++] = 0;
	body[n++] = param ? 1 : 0;
	if (param) {
		raw_put_u32(body + n, (uint32_t)strlen(param));
		memcpy(body + n + 4, param, strlen(param));
		n += 4 + strlen(param);
	}
	body[n++] = 0;	/* results in text */
	body[n++] = 0;
	raw_put(m, 'B', body, n);
}

void raw_put_named(struct raw_msgs *m, char type, char what, const char *name)
{
	unsigned char body[1024];
	size_t n = 1;
	body[0] = (unsigned char)what;
	put_cstr(body, sizeof(body), &n, name);
	raw_put(m, type, body, n);
}

void raw_put_execute(struct raw_msgs *m, const char *portal, uint32_t max_rows)
{
	unsigned char body[1024];
	size_t n = 0;
	put_cstr(body, sizeof(body) - 4, &n, portal);
	raw_put_u32(body + n, max_rows);
	raw_put(m, 'E', body, n + 4);
}

void raw_put_query(struct raw_msgs *m, const char *sql)
{
	raw_put(m, 'Q', sql, strlen(sql) + 1);
}

void raw_put_select(struct raw_msgs *m, const char *sql)
{
	raw_put_parse(m, "", sql);
	raw_put_bind(m, "", "", NULL);
	raw_put_named(m, 'D', 'P', "");
	raw_put_execute(m, "", 0);
}

void raw_send_msgs(int fd, struct raw_msgs *m)
{
	ck_assert_msg(raw_send(fd, m->data, m->len), "pgvalve closed the connection");
	m->len = 0;
}

/* One answer into a: its type, and what the caller may look at. */
static void note_answer(struct raw_answers *a, char type, const unsigned char *body, uint32_t len)
{
	size_t nt = strlen(a->types);
	if (nt + 1 < sizeof(a->types)) {
		a->types[nt] = type;
		a->types[nt + 1] = '\0';
	}
	if (type == 'D' && !a->value[0] && len >= 6) {
		uint32_t vlen = raw_get_u32(body + 2);
		if (vlen != 0xFFFFFFFFu && 6 + vlen <= len)
			snprintf(a->value, sizeof(a->value), "%.*s", (int)vlen, (const char *)body + 6);
	} else if (type == 'E' && !a->error.sqlstate[0]) {
		raw_parse_error(body, len, &a->error);
	} else if (type == 'Z' && len >= 1) {
		a->status = (char)body[0];
	}
}

bool raw_read_answers(int fd, int syncs, int timeout_ms, struct raw_answers *a)
{
	return raw_read_until(fd, "Z", syncs, timeout_ms, a);
}

bool raw_read_until(int fd, const char *stops, int count, int timeout_ms, struct raw_answers *a)
{
	double deadline = now_s() + timeout_ms / 1000.0;
	unsigned char hdr[5], *body = NULL;
	bool ok = true;

	memset(a, 0, sizeof(*a));
	while (count > 0) {
		if (!raw_read_exact(fd, hdr, 5, deadline)) {
			ok = false;
			break;
		}
		uint32_t len = raw_get_u32(hdr + 1);
		ck_assert_msg(len >= 4 && len <= 16 * 1024 * 1024, "bad message length %u", len);
		free(body);
		body = malloc(len - 4 + 1);
		ck_assert_ptr_nonnull(body);
		if (!raw_read_exact(fd, body, len - 4, deadline)) {
			ok = false;
			break;
		}
		if (hdr[0] == 'N' || hdr[0] == 'S')
			continue;
		note_answer(a, (char)hdr[0], body, len - 4);
		if (strchr(stops, hdr[0]))
			count--;
	}
	free(body);
	return ok;
}
