/*
 * login_bench.c - a login load for test/bench/connect.sh (`make
 * bench-connect --client login_bench`): each of N connection slots logs
 * in over TCP (md5 or SCRAM-SHA-256, whichever the server asks for), runs
 * "SELECT 1", sends Terminate and closes, then starts again; with --rate
 * the logins start on a fixed schedule (R a second, spread over the free
 * slots), as pgbench -C -R does.
 *
 *   login_bench --port P --user U --password PW [--host H] [--dbname D]
 *               [--clients N] [--duration S] [--rate R]
 *
 * Why not pgbench: libpq derives SCRAM's salted password (4,096 rounds of
 * PBKDF2, about 2 ms here) on every connect, so on a 2-core machine
 * pgbench's own SCRAM held both poolers to under 200 logins a second and
 * a pooler's CPU per login was mostly its idle time spread over few
 * logins. This client derives it once per salt and iteration count (a
 * pooler that keeps the same salt for a user, as pgvalve and PgBouncer
 * do, costs one derivation in all) and checks the proof and the server's
 * signature at every login like any client, so SCRAM logins reach the
 * rates md5 ones do and the poolers can be compared at the same rate. The
 * exchange is pgvalve's own client side (scram_client_*, crypto_md5_*, as
 * pgvalve logs in to servers), with a key source that caches the keys.
 *
 * Prints: logins, failed, seconds, logins_per_s, late (scheduled starts
 * that found no free slot on time), one per line. Exits 1 when a login
 * failed. Single-threaded: one poll loop over every slot.
 */
#include "common.h"
#include "crypto.h"
#include "scram.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_SLOTS 1024
#define INBUF 8192

enum slot_state { SLOT_FREE, SLOT_CONNECTING, SLOT_LOGIN, SLOT_QUERY };

struct slot {
	enum slot_state state;
	int fd;
	size_t inlen;
	uint8_t in[INBUF];
	struct scram_client scram;
};

static struct {
	const char *host, *user, *password, *dbname;
	int port, clients;
	double duration, rate;
} opt = { "127.0.0.1", NULL, NULL, "bench", 0, 20, 10, 0 };

static struct slot slots[MAX_SLOTS];
static uint64_t logins, failed, late;

/* The keys derived so far, for one salt and iteration count. */
static struct {
	uint8_t salt[64];
	size_t saltlen;
	int iterations;
	struct scram_keys keys;
} keycache;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = v >> 24; p[1] = v >> 16; p[2] = v >> 8; p[3] = v;
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Sends one whole message; loopback takes a few hundred bytes at once or the login counts as failed. */
static bool send_all(struct slot *s, const void *buf, size_t len)
{
	return send(s->fd, buf, len, MSG_NOSIGNAL) == (ssize_t)len;
}

/* A message of type (0: the startup packet, which has none) with body of len bytes. */
static bool send_msg(struct slot *s, char type, const void *body, size_t len)
{
	uint8_t buf[1024];
	size_t h = type ? 1 : 0;
	if (len + h + 4 > sizeof(buf))
		return false;
	if (type)
		buf[0] = (uint8_t)type;
	put32(buf + h, (uint32_t)(len + 4));
	memcpy(buf + h + 4, body, len);
	return send_all(s, buf, len + h + 4);
}

static bool send_startup(struct slot *s)
{
	uint8_t body[512];
	size_t n = 0;
	put32(body, 196608);	/* protocol 3.0 */
	n = 4;
	n += (size_t)snprintf((char *)body + n, sizeof(body) - n, "user%c%s%cdatabase%c%s%c%c",
			      0, opt.user, 0, 0, opt.dbname, 0, 0);
	return n < sizeof(body) && send_msg(s, 0, body, n);
}

/* AuthenticationMD5Password: "md5" + md5(md5(password user) salt). */
static bool answer_md5(struct slot *s, const uint8_t *salt)
{
	char secret[36], response[36];
	crypto_md5_password(opt.password, opt.user, secret);
	crypto_md5_response(secret, salt, response);
	return send_msg(s, 'p', response, sizeof(response));
}

/* scram_keys_fn: one PBKDF2 per salt and iteration count, not per login. */
static void cached_keys(void *arg, const char *password, const uint8_t *salt, size_t saltlen,
			int iterations, struct scram_keys *out)
{
	(void)arg;
	bool cacheable = saltlen <= sizeof(keycache.salt);
	if (cacheable && saltlen == keycache.saltlen && iterations == keycache.iterations
	    && memcmp(salt, keycache.salt, saltlen) == 0) {
		*out = keycache.keys;
		return;
	}
	scram_keys_derive(password, salt, saltlen, iterations, out);
	if (cacheable) {
		memcpy(keycache.salt, salt, saltlen);
		keycache.saltlen = saltlen;
		keycache.iterations = iterations;
		keycache.keys = *out;
	}
}

/* AuthenticationSASL: SASLInitialResponse with the client-first message. */
static bool answer_sasl(struct slot *s)
{
	uint8_t body[SCRAM_MSG_MAX + 32];
	scram_client_init(&s->scram, NULL, NULL);
	scram_client_set_key_source(&s->scram, cached_keys, NULL);
	size_t n = (size_t)snprintf((char *)body, sizeof(body), "SCRAM-SHA-256%c", 0);
	int len = scram_client_first(&s->scram, (char *)body + n + 4, sizeof(body) - n - 4);
	if (len < 0)
		return false;
	put32(body + n, (uint32_t)len);
	return send_msg(s, 'p', body, n + 4 + (size_t)len);
}

/* AuthenticationSASLContinue (server-first): SASLResponse with the proof. */
static bool answer_sasl_continue(struct slot *s, const char *server_first, size_t len)
{
	char final[SCRAM_MSG_MAX];
	const char *err = NULL;
	int n = scram_client_final(&s->scram, opt.password, server_first, len, final, sizeof(final), &err);
	return n >= 0 && send_msg(s, 'p', final, (size_t)n);
}

/* AuthenticationSASLFinal: the server must prove it knows the password too. */
static bool check_sasl_final(struct slot *s, const char *server_final, size_t len)
{
	const char *err = NULL;
	return scram_client_verify(&s->scram, server_final, len, &err);
}

static bool on_auth(struct slot *s, const uint8_t *body, size_t len)
{
	if (len < 4)
		return false;
	switch (get32(body)) {
	case 0: return true;
	case 5: return len == 8 && answer_md5(s, body + 4);
	case 10: return answer_sasl(s);
	case 11: return answer_sasl_continue(s, (const char *)body + 4, len - 4);
	case 12: return check_sasl_final(s, (const char *)body + 4, len - 4);
	default: return false;
	}
}

static void slot_close(struct slot *s, bool ok)
{
	if (ok) {
		static const uint8_t terminate[5] = { 'X', 0, 0, 0, 4 };
		ok = send_all(s, terminate, sizeof(terminate));
	}
	close(s->fd);
	s->fd = -1;
	s->state = SLOT_FREE;
	if (ok)
		logins++;
	else
		failed++;
}

/* The first failure's message ('M' field of the ErrorResponse), so a misconfigured run says why. */
static void print_error(const uint8_t *body, size_t len)
{
	for (size_t i = 0; i < len && body[i]; i += strnlen((const char *)body + i, len - i) + 1)
		if (body[i] == 'M')
			fprintf(stderr, "login_bench: %.*s\n", (int)strnlen((const char *)body + i + 1, len - i - 1),
				(const char *)body + i + 1);
}

/* One server message; false: the login failed. */
static bool on_message(struct slot *s, char type, const uint8_t *body, size_t len)
{
	static const char query[] = "SELECT 1";
	switch (type) {
	case 'R':
		return s->state == SLOT_LOGIN && on_auth(s, body, len);
	case 'E':
		if (failed == 0)
			print_error(body, len);
		return false;
	case 'Z':
		if (s->state == SLOT_LOGIN) {
			s->state = SLOT_QUERY;
			return send_msg(s, 'Q', query, sizeof(query));
		}
		slot_close(s, true);
		return true;
	default:
		return true;	/* ParameterStatus, BackendKeyData, RowDescription, DataRow, CommandComplete */
	}
}

static void slot_read(struct slot *s)
{
	ssize_t n = recv(s->fd, s->in + s->inlen, INBUF - s->inlen, 0);
	if (n <= 0) {
		if (n < 0 && errno == EAGAIN)
			return;
		slot_close(s, false);
		return;
	}
	s->inlen += (size_t)n;
	size_t pos = 0;
	while (s->inlen - pos >= 5) {
		uint32_t mlen = get32(s->in + pos + 1);
		if (mlen < 4 || mlen > INBUF - 1) {
			slot_close(s, false);
			return;
		}
		if (s->inlen - pos < 1 + (size_t)mlen)
			break;
		char type = (char)s->in[pos];
		bool ok = on_message(s, type, s->in + pos + 5, mlen - 4);
		if (!ok) {
			slot_close(s, false);
			return;
		}
		if (s->state == SLOT_FREE)
			return;	/* the 'Z' after SELECT 1 closed it */
		pos += 1 + mlen;
	}
	memmove(s->in, s->in + pos, s->inlen - pos);
	s->inlen -= pos;
}

static void slot_start(struct slot *s, const struct sockaddr_in *addr)
{
	int one = 1;
	s->inlen = 0;
	s->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (s->fd < 0) {
		failed++;
		return;
	}
	setsockopt(s->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));	/* as libpq does */
	if (connect(s->fd, (const struct sockaddr *)addr, sizeof(*addr)) < 0 && errno != EINPROGRESS) {
		close(s->fd);
		s->fd = -1;
		failed++;
		return;
	}
	s->state = SLOT_CONNECTING;
}

/* A connect finished: the startup packet goes out, or the login failed. */
static void slot_connected(struct slot *s)
{
	int err = 0;
	socklen_t len = sizeof(err);
	if (getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err != 0 || !send_startup(s)) {
		slot_close(s, false);
		return;
	}
	s->state = SLOT_LOGIN;
}

static void usage(void)
{
	fprintf(stderr, "usage: login_bench --port P --user U --password PW [--host H] [--dbname D]"
		" [--clients N] [--duration S] [--rate R]\n");
	exit(2);
}

static void parse_args(int argc, char **argv)
{
	for (int i = 1; i < argc; i += 2) {
		if (i + 1 >= argc)
			usage();
		const char *k = argv[i], *v = argv[i + 1];
		if (!strcmp(k, "--host")) opt.host = v;
		else if (!strcmp(k, "--port")) opt.port = atoi(v);
		else if (!strcmp(k, "--user")) opt.user = v;
		else if (!strcmp(k, "--password")) opt.password = v;
		else if (!strcmp(k, "--dbname")) opt.dbname = v;
		else if (!strcmp(k, "--clients")) opt.clients = atoi(v);
		else if (!strcmp(k, "--duration")) opt.duration = atof(v);
		else if (!strcmp(k, "--rate")) opt.rate = atof(v);
		else usage();
	}
	if (!opt.port || !opt.user || !opt.password || opt.clients < 1 || opt.clients > MAX_SLOTS
	    || opt.duration <= 0 || opt.rate < 0)
		usage();
}

/* Starts the logins that are due: every free slot without --rate, else one per tick the schedule has reached. */
static void start_due(const struct sockaddr_in *addr, double now, double *next_due)
{
	int i = 0;
	if (opt.rate <= 0) {
		for (; i < opt.clients; i++)
			if (slots[i].state == SLOT_FREE)
				slot_start(&slots[i], addr);
		return;
	}
	for (; now >= *next_due; *next_due += 1.0 / opt.rate) {
		while (i < opt.clients && slots[i].state != SLOT_FREE)
			i++;
		if (i == opt.clients)
			late++;		/* every slot busy: this tick's login is dropped, as pgbench -R counts it late */
		else
			slot_start(&slots[i], addr);
	}
}

static void run(const struct sockaddr_in *addr)
{
	struct pollfd pfd[MAX_SLOTS];
	int slot_of[MAX_SLOTS];
	double start = now_s(), end = start + opt.duration, next_due = start;
	for (double now = start; now < end; now = now_s()) {
		start_due(addr, now, &next_due);
		int n = 0;
		for (int i = 0; i < opt.clients; i++) {
			if (slots[i].state == SLOT_FREE)
				continue;
			pfd[n].fd = slots[i].fd;
			pfd[n].events = slots[i].state == SLOT_CONNECTING ? POLLOUT : POLLIN;
			slot_of[n++] = i;
		}
		int timeout = opt.rate > 0 ? (int)((next_due - now) * 1000) : 100;
		if (poll(pfd, (nfds_t)n, timeout < 0 ? 0 : timeout) < 0 && errno != EINTR)
			break;
		for (int j = 0; j < n; j++) {
			struct slot *s = &slots[slot_of[j]];
			if (!pfd[j].revents)
				continue;
			if (s->state == SLOT_CONNECTING)
				slot_connected(s);
			else
				slot_read(s);
		}
	}
	for (int i = 0; i < opt.clients; i++)
		if (slots[i].state != SLOT_FREE) {
			close(slots[i].fd);	/* cut off at the end: neither a login nor a failure */
			slots[i].state = SLOT_FREE;
		}
	double secs = now_s() - start;
	printf("logins %llu\nfailed %llu\nseconds %.3f\nlogins_per_s %.1f\nlate %llu\n",
	       (unsigned long long)logins, (unsigned long long)failed, secs, logins / secs,
	       (unsigned long long)late);
}

int main(int argc, char **argv)
{
	parse_args(argc, argv);
	struct sockaddr_in addr = { .sin_family = AF_INET, .sin_port = htons((uint16_t)opt.port) };
	if (inet_pton(AF_INET, opt.host, &addr.sin_addr) != 1)
		usage();
	for (int i = 0; i < MAX_SLOTS; i++)
		slots[i].fd = -1;
	run(&addr);
	return failed ? 1 : 0;
}
