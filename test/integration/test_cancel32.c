/*
 * test_cancel32.c - protocol 3.2 with clients, and the long cancel keys
 * that find their instance (cancel_key.h, peer.h).
 *
 * Raw sockets throughout: StartupMessages for 3.0, 3.1, 3.2, 3.9999 and
 * 4.0 with and without _pq_ options and what comes back (no
 * NegotiateProtocolVersion for 3.0 and 3.2, 'v' naming 3.2 and the
 * options otherwise); 48-byte BackendKeyData for 3.2 clients; a long-key
 * CancelRequest at the owning instance and at a second instance with the
 * same cancel_key_secret and no [peers] (forwarded to the address in the
 * key); forged, truncated and short forms of a long key, and keys naming
 * an instance that is gone: a log line each, nothing cancelled, other
 * clients unharmed. And peers_dns: a protocol 3.0 cancel sent to every
 * instance a DNS name (dnsmasq, as a Kubernetes headless Service) resolves
 * to, except the one it came in on, with TTL 0; a name that resolves to
 * nothing or to the instance alone costs a log line.
 */
#include "harness.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#define DB "pgvtest"
#define USER "scram_user"
#define SECRET "cancel_key_secret = fleet-secret-for-tests\n"
#define SLEEP_SQL "SELECT pg_sleep(4)"

#define V30 196608u
#define V31 196609u
#define V32 196610u
#define V3_9999 (196608u + 9999u)

static const char *config(const char *extra)
{
	static char buf[2048];

	snprintf(buf, sizeof(buf),
		 "auth_type = trust\n"
		 "pool_mode = transaction\n"
		 "default_pool_size = 10\n"
		 "verbose = 1\n"
		 "%s",
		 extra ? extra : "");
	return buf;
}

static void start_at(struct pgv *p, const char *extra)
{
	memset(p, 0, sizeof(*p));
	pgv_start(p, config(extra), std_databases(), std_userlist());
}

/* What a login said before ReadyForQuery. */
struct login32 {
	int fd;
	bool got_v;			/* NegotiateProtocolVersion came */
	uint32_t v_version;
	uint32_t v_count;
	char v_first[64];		/* the first option it named */
	uint32_t pid;
	unsigned char key[256];
	size_t key_len;
	struct raw_error err;
};

/* One message of the login; false on EOF, timeout or an ErrorResponse (l->err). */
static bool login_message(struct login32 *l, bool *ready)
{
	unsigned char hdr[5], body[2048];

	if (!raw_read_exact(l->fd, hdr, 5, now_s() + 5))
		return false;
	uint32_t len = raw_get_u32(hdr + 1);
	ck_assert_msg(len >= 4 && len - 4 <= sizeof(body), "message '%c' of %u bytes", hdr[0], len);
	if (!raw_read_exact(l->fd, body, len - 4, now_s() + 5))
		return false;
	switch (hdr[0]) {
	case 'E':
		raw_parse_error(body, len - 4, &l->err);
		return false;
	case 'R':
		ck_assert_msg(raw_get_u32(body) == 0, "authentication request %u (trust expected)", raw_get_u32(body));
		break;
	case 'v':
		l->got_v = true;
		l->v_version = raw_get_u32(body);
		l->v_count = raw_get_u32(body + 4);
		if (l->v_count > 0) {
			size_t n = strnlen((const char *)body + 8, len - 12);
			ck_assert_uint_lt(n, sizeof(l->v_first));
			memcpy(l->v_first, body + 8, n);
			l->v_first[n] = 0;
		}
		break;
	case 'K':
		l->pid = raw_get_u32(body);
		l->key_len = len - 8;
		ck_assert_uint_le(l->key_len, sizeof(l->key));
		memcpy(l->key, body + 4, l->key_len);
		break;
	case 'Z':
		*ready = true;
		break;
	default:
		break;
	}
	return true;
}

/* A TCP connection to ip:port. */
static int tcp_connect(const char *ip, int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;

	ck_assert_msg(fd >= 0, "socket: %s", strerror(errno));
	ck_assert_int_eq(inet_pton(AF_INET, ip, &sa.sin_addr), 1);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
		ck_abort_msg("connect to %s:%d: %s", ip, port, strerror(errno));
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

static bool login_version_at(const char *ip, int port, uint32_t version, const char *const *extra,
			     struct login32 *l);

/* A TCP login to 127.0.0.1:port asking for version, with extra (name, value, ..., NULL) parameters. */
static bool login_version(int port, uint32_t version, const char *const *extra, struct login32 *l)
{
	return login_version_at("127.0.0.1", port, version, extra, l);
}

static bool login_version_at(const char *ip, int port, uint32_t version, const char *const *extra,
			     struct login32 *l)
{
	unsigned char pkt[1024];
	size_t off = 8;
	bool ready = false;

	memset(l, 0, sizeof(*l));
	off += (size_t)snprintf((char *)pkt + off, sizeof(pkt) - off, "user%c%s%cdatabase%c%s%c", 0, USER, 0, 0, DB, 0);
	for (int i = 0; extra && extra[i]; i += 2) {
		size_t a = strlen(extra[i]) + 1, b = strlen(extra[i + 1]) + 1;
		memcpy(pkt + off, extra[i], a);
		memcpy(pkt + off + a, extra[i + 1], b);
		off += a + b;
	}
	pkt[off++] = 0;
	raw_put_u32(pkt, (uint32_t)off);
	raw_put_u32(pkt + 4, version);
	l->fd = tcp_connect(ip, port);
	ck_assert(raw_send(l->fd, pkt, off));
	while (!ready)
		if (!login_message(l, &ready))
			return false;
	return true;
}

static void login_ok(struct pgv *p, uint32_t version, const char *const *extra, struct login32 *l)
{
	bool ok = login_version(p->port, version, extra, l);

	ck_assert_msg(ok, "login with version %u.%u failed: %s %s\n%s", version >> 16, version & 0xffff,
		      l->err.sqlstate, l->err.message, pgv_log_tail(p, 1500));
}

static void send_cancel_at(struct pgv *p, const char *ip, int port, uint32_t pid, const unsigned char *key,
			   size_t key_len);

/* A CancelRequest for pid with key_len bytes of key, on a new TCP connection to port; waits for the close. */
static void send_cancel(struct pgv *p, int port, uint32_t pid, const unsigned char *key, size_t key_len)
{
	send_cancel_at(p, "127.0.0.1", port, pid, key, key_len);
}

static void send_cancel_at(struct pgv *p, const char *ip, int port, uint32_t pid, const unsigned char *key,
			   size_t key_len)
{
	unsigned char pkt[12 + 256];
	int fd = tcp_connect(ip, port);

	raw_put_u32(pkt, (uint32_t)(12 + key_len));
	raw_put_u32(pkt + 4, 80877102);
	raw_put_u32(pkt + 8, pid);
	memcpy(pkt + 12, key, key_len);
	ck_assert(raw_send(fd, pkt, 12 + key_len));
	ck_assert_msg(raw_wait_closed(fd, 5000), "the cancel connection stayed open\n%s", pgv_log_tail(p, 1500));
	close(fd);
}


static void start_query(struct login32 *l, const char *sql)
{
	ck_assert(raw_send_query(l->fd, sql));
	pg_wait_running(sql, 1);
}

static void start_sleep(struct login32 *l)
{
	start_query(l, SLEEP_SQL);
}

static void expect_cancelled(struct login32 *l, struct pgv *log_of)
{
	struct raw_error err;
	char value[64];
	double t0 = now_s();
	int rc = raw_read_result(l->fd, value, sizeof(value), &err, 2500);

	ck_assert_msg(rc == -1 && strcmp(err.sqlstate, "57014") == 0, "query not cancelled: rc %d %s %s\n%s", rc,
		      err.sqlstate, err.message, pgv_log_tail(log_of, 2000));
	ck_assert_msg(now_s() - t0 < 2.5, "cancelled only after %.2f s", now_s() - t0);
}

/* The sleep runs to its end: nothing cancelled it. */
static void expect_not_cancelled(struct login32 *l, struct pgv *log_of)
{
	struct raw_error err;
	char value[64];
	int rc = raw_read_result(l->fd, value, sizeof(value), &err, 8000);

	ck_assert_msg(rc == 0, "query failed: rc %d %s %s\n%s", rc, err.sqlstate, err.message, pgv_log_tail(log_of, 2000));
}

/* A simple query still works on l: the instance serves its other clients. */
static void expect_serves(struct login32 *l)
{
	struct raw_error err;
	char value[64];

	ck_assert_int_eq(raw_query(l->fd, "SELECT 42", value, sizeof(value), &err), 0);
	ck_assert_str_eq(value, "42");
}

/* ---------------------------------------------------------------- negotiation */

START_TEST(v32_gets_long_key_without_negotiation)
{
	struct pgv p;
	struct login32 l;

	start_at(&p, NULL);
	login_ok(&p, V32, NULL, &l);
	ck_assert_msg(!l.got_v, "NegotiateProtocolVersion sent to a 3.2 client");
	ck_assert_uint_eq(l.key_len, 48);
	ck_assert_uint_eq(l.pid & 0x80000000u, 0);
	expect_serves(&l);
	close(l.fd);

	login_ok(&p, V30, NULL, &l);
	ck_assert(!l.got_v);
	ck_assert_uint_eq(l.key_len, 4);
	close(l.fd);
	pgv_stop(&p);
}
END_TEST

START_TEST(newer_minor_and_options_negotiated_to_32)
{
	struct pgv p;
	struct login32 l;
	const char *opt[] = { "_pq_.foo", "bar", NULL };

	start_at(&p, NULL);
	login_ok(&p, V3_9999, opt, &l);
	ck_assert_msg(l.got_v, "no NegotiateProtocolVersion for 3.9999");
	ck_assert_uint_eq(l.v_version, V32);
	ck_assert_uint_eq(l.v_count, 1);
	ck_assert_str_eq(l.v_first, "_pq_.foo");
	ck_assert_uint_eq(l.key_len, 48);
	expect_serves(&l);
	close(l.fd);

	login_ok(&p, V3_9999, NULL, &l);
	ck_assert(l.got_v);
	ck_assert_uint_eq(l.v_version, V32);
	ck_assert_uint_eq(l.v_count, 0);
	close(l.fd);

	login_ok(&p, V32, opt, &l);
	ck_assert(l.got_v);
	ck_assert_uint_eq(l.v_version, V32);
	ck_assert_str_eq(l.v_first, "_pq_.foo");
	ck_assert_uint_eq(l.key_len, 48);
	close(l.fd);

	login_ok(&p, V30, opt, &l);
	ck_assert(l.got_v);
	ck_assert_uint_eq(l.v_version, V30);
	ck_assert_uint_eq(l.key_len, 4);
	close(l.fd);

	/* 3.1 was never used: the client is told 3.0 and gets a 3.0 key. */
	login_ok(&p, V31, NULL, &l);
	ck_assert(l.got_v);
	ck_assert_uint_eq(l.v_version, V30);
	ck_assert_uint_eq(l.key_len, 4);
	close(l.fd);

	ck_assert(!login_version(p.port, 4u << 16, NULL, &l));
	ck_assert_str_eq(l.err.sqlstate, "0A000");
	ck_assert_msg(strstr(l.err.message, "3.0 to 3.2") != NULL, "%s", l.err.message);
	close(l.fd);
	pgv_stop(&p);
}
END_TEST

/* ---------------------------------------------------------------- cancels */

START_TEST(long_key_cancels_at_owner)
{
	struct pgv p;
	struct login32 l;

	start_at(&p, NULL);	/* no secret: the key is signed with the process's own */
	login_ok(&p, V32, NULL, &l);
	start_sleep(&l);
	send_cancel(&p, p.port, l.pid, l.key, l.key_len);
	expect_cancelled(&l, &p);
	expect_serves(&l);
	close(l.fd);
	pgv_stop(&p);
}
END_TEST

START_TEST(long_key_cancels_at_owner_with_secret)
{
	struct pgv p;
	struct login32 l;

	start_at(&p, SECRET);
	login_ok(&p, V32, NULL, &l);
	start_sleep(&l);
	send_cancel(&p, p.port, l.pid, l.key, l.key_len);
	expect_cancelled(&l, &p);
	close(l.fd);
	pgv_stop(&p);
}
END_TEST

/* A second instance with the same secret and no [peers] forwards to the owner the key names. */
START_TEST(long_key_forwarded_without_peers)
{
	struct pgv a, b;
	struct login32 l;

	start_at(&a, SECRET);
	start_at(&b, SECRET);
	login_ok(&a, V32, NULL, &l);
	start_sleep(&l);
	send_cancel(&b, b.port, l.pid, l.key, l.key_len);
	expect_cancelled(&l, &a);
	char needle[96];
	snprintf(needle, sizeof(needle), "forwarding cancel request to instance 127.0.0.1:%d", a.port);
	pgv_expect_log(&b, needle, 2);
	close(l.fd);
	pgv_stop(&b);
	pgv_stop(&a);
}
END_TEST

START_TEST(forged_keys_change_nothing)
{
	struct pgv a, b;
	struct login32 l, other;
	unsigned char key[256];

	start_at(&a, SECRET);
	start_at(&b, SECRET);
	login_ok(&a, V32, NULL, &l);
	login_ok(&a, V30, NULL, &other);
	start_sleep(&l);

	/* A flipped HMAC byte, at the owner and at the other instance. */
	memcpy(key, l.key, l.key_len);
	key[47] ^= 0x01;
	send_cancel(&a, a.port, l.pid, key, l.key_len);
	pgv_expect_log(&a, "cancel request with a forged or damaged key", 2);
	send_cancel(&b, b.port, l.pid, key, l.key_len);
	pgv_expect_log(&b, "cancel request with a forged or damaged key", 2);

	/* Another address in an otherwise genuine key: pgvalve must not go there. */
	memcpy(key, l.key, l.key_len);
	key[7] ^= 0x01;
	send_cancel(&b, b.port, l.pid, key, l.key_len);
	ck_assert_int_eq(pgv_log_count(&b, "cancel request with a forged or damaged key"), 2);
	ck_assert_int_eq(pgv_log_count(&b, "forwarding cancel request to instance"), 0);

	/* Truncated: 20 of 48 bytes, and a request too short to hold a key. */
	send_cancel(&a, a.port, l.pid, l.key, 20);
	pgv_expect_log(&a, "cancel request with a 20-byte key, not one pgvalve hands out", 2);
	send_cancel(&a, a.port, l.pid, l.key, 2);
	pgv_expect_log(&a, "cancel request of 14 bytes: not a valid CancelRequest", 2);

	/* The short form (pid and the first 4 bytes) does not cancel a 3.2 client. */
	send_cancel(&a, a.port, l.pid, l.key, 4);

	expect_serves(&other);
	expect_not_cancelled(&l, &a);
	expect_serves(&l);
	close(other.fd);
	close(l.fd);
	pgv_stop(&b);
	pgv_stop(&a);
}
END_TEST

/*
 * An instance with peer_id and [peers] reads a peer id in every key; a
 * long key of an instance without peer_id names one no [peers] entry has,
 * and goes by its address all the same.
 */
START_TEST(long_key_past_unknown_peer_id)
{
	struct pgv a, b;
	struct login32 l;
	char extra[512];

	start_at(&a, SECRET);
	snprintf(extra, sizeof(extra), SECRET "peer_id = 1\n[peers]\n1 = host=127.0.0.1 port=1\n");
	start_at(&b, extra);
	login_ok(&a, V32, NULL, &l);
	start_sleep(&l);
	send_cancel(&b, b.port, l.pid, l.key, l.key_len);
	expect_cancelled(&l, &a);
	ck_assert_int_eq(pgv_log_count(&b, "cancel request for unknown peer"), 0);
	close(l.fd);
	pgv_stop(&b);
	pgv_stop(&a);
}
END_TEST

/*
 * workers = 2, no secret: each worker signs with its own, and a long key
 * that lands on the other worker goes to its owner by peer id (the
 * supervisor's [peers]); the owner checks it in full.
 */
START_TEST(long_keys_across_workers)
{
	enum { N = 10 };
	struct pgv p;
	int forwarded = 0, rounds = 0;

	start_at(&p, "workers = 2\n");
	/* margin for worker 2 to listen (the harness waits for the first); the rounds below retry if all land on one */
	sleep_ms(500);
	while (rounds < 4 && forwarded == 0) {
		struct login32 l[N];
		int before = pgv_log_count(&p, "forwarding cancel request to peer");
		for (int i = 0; i < N; i++) {
			login_ok(&p, V32, NULL, &l[i]);
			ck_assert_uint_eq(l[i].key_len, 48);
			ck_assert(raw_send_query(l[i].fd, "SELECT pg_sleep(30)"));
		}
		pg_wait_running("SELECT pg_sleep(30)", N);
		for (int i = 0; i < N; i++) {
			send_cancel(&p, p.port, l[i].pid, l[i].key, l[i].key_len);
			expect_cancelled(&l[i], &p);
			close(l[i].fd);
		}
		forwarded += pgv_log_count(&p, "forwarding cancel request to peer") - before;
		rounds++;
	}
	ck_assert_msg(forwarded > 0, "no long-key cancel crossed workers in %d rounds of %d", rounds, N);
	pgv_stop(&p);
}
END_TEST

/* Without the fleet's secret an instance cannot tell a genuine key from a forged one: dropped. */
START_TEST(no_secret_no_forward)
{
	struct pgv a, b;
	struct login32 l;

	start_at(&a, SECRET);
	start_at(&b, NULL);
	login_ok(&a, V32, NULL, &l);
	start_sleep(&l);
	send_cancel(&b, b.port, l.pid, l.key, l.key_len);
	pgv_expect_log(&b, "no cancel_key_secret to verify it", 2);
	expect_not_cancelled(&l, &a);
	close(l.fd);
	pgv_stop(&b);
	pgv_stop(&a);
}
END_TEST

START_TEST(key_of_gone_instance)
{
	struct pgv a, b;
	struct login32 l, other;

	start_at(&a, SECRET);
	start_at(&b, SECRET);
	login_ok(&a, V32, NULL, &l);
	login_ok(&b, V32, NULL, &other);
	int a_port = a.port;
	close(l.fd);
	pgv_stop(&a);
	send_cancel(&b, b.port, l.pid, l.key, l.key_len);
	char needle[128];
	snprintf(needle, sizeof(needle), "dropping cancel request for instance 127.0.0.1:%d: could not connect", a_port);
	pgv_expect_log(&b, needle, 5);
	expect_serves(&other);

	/* A new instance at the gone one's address: the key names it, but not its process. */
	struct pgv a2;
	memset(&a2, 0, sizeof(a2));
	pgv_start_on_port(&a2, a_port, config(SECRET), std_databases(), std_userlist());
	send_cancel(&a2, a_port, l.pid, l.key, l.key_len);
	pgv_expect_log(&a2, "key naming this instance's address, from a process that is gone", 2);
	ck_assert_int_eq(pgv_log_count(&a2, "forwarding cancel request"), 0);
	close(other.fd);
	pgv_stop(&a2);
	pgv_stop(&b);
}
END_TEST

/* The key of a client of this instance that is gone: nothing to cancel, nothing forwarded. */
START_TEST(own_key_of_gone_client)
{
	struct pgv a;
	struct login32 l;

	start_at(&a, SECRET);
	login_ok(&a, V32, NULL, &l);
	int eofs = pgv_log_count(&a, "client unexpected eof");
	close(l.fd);
	/* until pgvalve has seen the close (else the cancel would find the client): milliseconds, 5 s on a loaded machine */
	for (double until = now_s() + 5; pgv_log_count(&a, "client unexpected eof") == eofs; sleep_ms(20))
		ck_assert_msg(now_s() < until, "the client's close was not seen\n%s", pgv_log_tail(&a, 1500));
	send_cancel(&a, a.port, l.pid, l.key, l.key_len);
	pgv_expect_log(&a, "cancel request for a client of this instance that is gone", 2);
	ck_assert_int_eq(pgv_log_count(&a, "forwarding cancel request"), 0);
	pgv_stop(&a);
}
END_TEST

/* ---------------------------------------------------------------- peers_dns */

#define FLEET_HOSTS "127.0.0.2 fleet.pgv.test\n127.0.0.3 fleet.pgv.test\n127.0.0.2 self.pgv.test\n"

/*
 * Instance at ip:port with resolv_conf pointing at d and peers_dns = name
 * (no peer_id, no [peers]); 127.0.0.1:port too, shared (so_reuseport), where
 * the harness waits for it.
 */
static void start_dns_instance(struct pgv *p, const struct pgv_dns *d, const char *ip, int port, const char *name)
{
	char extra[1200];

	snprintf(extra, sizeof(extra), "listen_addr = 127.0.0.1,%s\nso_reuseport = 1\nresolv_conf = %s\npeers_dns = %s\n", ip, d->resolv, name);
	memset(p, 0, sizeof(*p));
	pgv_start_on_port(p, port, config(extra), std_databases(), std_userlist());
}

START_TEST(dns_peers_get_30_cancels)
{
	struct pgv_dns d;
	struct pgv a, b;
	struct login32 l;
	int port = pgv_pick_port();

	pgv_dns_start(&d, FLEET_HOSTS);
	start_dns_instance(&a, &d, "127.0.0.2", port, "fleet.pgv.test");
	start_dns_instance(&b, &d, "127.0.0.3", port, "fleet.pgv.test");
	ck_assert(login_version_at("127.0.0.2", port, V30, NULL, &l));
	ck_assert_uint_eq(l.key_len, 4);
	ck_assert_uint_eq(l.key[3] & 3, 3);	/* full TTL, though no peer_id */
	start_sleep(&l);
	send_cancel_at(&b, "127.0.0.3", port, l.pid, l.key, l.key_len);
	expect_cancelled(&l, &a);
	pgv_expect_log(&b, "sending cancel request to the instances of fleet.pgv.test", 2);

	/* A key nobody has: B sends it to A alone, with TTL 0, and A sends it nowhere. */
	unsigned char nokey[4] = { 0x12, 0x34, 0x56, 0x7b };
	send_cancel_at(&b, "127.0.0.3", port, 0x01020304, nokey, 4);
	pgv_expect_log(&a, "cancel request sent on by another instance, for no client here: ignored", 3);
	/* a negative window: a wrong send on would follow A's log line within milliseconds; 300 ms catches it */
	sleep_ms(300);
	ck_assert_int_eq(pgv_log_count(&b, "cancel request sent on by another instance"), 0);
	ck_assert_int_eq(pgv_log_count(&a, "sending cancel request to the instances"), 0);
	expect_serves(&l);
	close(l.fd);
	pgv_stop(&b);
	pgv_stop(&a);
	pgv_dns_stop(&d);
}
END_TEST

/* The instances a name resolves to are looked up again once dns_max_ttl has passed. */
START_TEST(dns_peers_follow_the_name)
{
	struct pgv_dns d;
	struct pgv a, b;
	struct login32 l;
	int port = pgv_pick_port();
	char extra[1200];

	pgv_dns_start(&d, "127.0.0.3 fleet.pgv.test\n");
	start_dns_instance(&a, &d, "127.0.0.2", port, "fleet.pgv.test");
	snprintf(extra, sizeof(extra), "listen_addr = 127.0.0.1,127.0.0.3\nso_reuseport = 1\nresolv_conf = %s\n"
		 "peers_dns = fleet.pgv.test\ndns_max_ttl = 1\n", d.resolv);
	memset(&b, 0, sizeof(b));
	pgv_start_on_port(&b, port, config(extra), std_databases(), std_userlist());
	ck_assert(login_version_at("127.0.0.2", port, V30, NULL, &l));
	start_query(&l, "SELECT pg_sleep(10)");	/* long enough for the DNS change */
	/* The name knows B alone: B has nowhere to send it. */
	send_cancel_at(&b, "127.0.0.3", port, l.pid, l.key, l.key_len);
	pgv_expect_log(&b, "names no instance but this one", 3);

	/* A joins the Service; after dns_max_ttl B's next cancel reaches it. */
	pgv_dns_set_hosts(&d, FLEET_HOSTS);
	sleep_ms(1500);	/* past dns_max_ttl (1 s): a lower bound, which a loaded machine only lengthens */
	send_cancel_at(&b, "127.0.0.3", port, l.pid, l.key, l.key_len);
	expect_cancelled(&l, &a);
	close(l.fd);
	pgv_stop(&b);
	pgv_stop(&a);
	pgv_dns_stop(&d);
}
END_TEST

START_TEST(dns_peers_bad_names)
{
	struct pgv_dns d;
	struct pgv a, b;
	struct login32 l;
	int port = pgv_pick_port();
	unsigned char nokey[4] = { 0x12, 0x34, 0x56, 0x7b };

	pgv_dns_start(&d, FLEET_HOSTS);
	start_dns_instance(&a, &d, "127.0.0.2", port, "nothing.pgv.test");
	ck_assert(login_version_at("127.0.0.2", port, V30, NULL, &l));
	send_cancel_at(&a, "127.0.0.2", port, 0x01020304, nokey, 4);
	pgv_expect_log(&a, "dropping cancel request: peers_dns:", 5);
	expect_serves(&l);
	close(l.fd);
	pgv_stop(&a);

	start_dns_instance(&b, &d, "127.0.0.2", port, "self.pgv.test");
	send_cancel_at(&b, "127.0.0.2", port, 0x01020304, nokey, 4);
	pgv_expect_log(&b, "peers_dns \"self.pgv.test\" names no instance but this one", 5);
	pgv_stop(&b);
	pgv_dns_stop(&d);
}
END_TEST

/* SHOW CONFIG, which stats_users may run too, does not give the secret away. */
START_TEST(secret_not_shown)
{
	struct pgv p;

	start_at(&p, SECRET "admin_users = " USER "\n");
	PGconn *c = pgv_connect(&p, "pgbouncer", USER, NULL);
	ck_assert_msg(PQstatus(c) == CONNECTION_OK, "%s", PQerrorMessage(c));
	PGresult *r = PQexec(c, "SHOW CONFIG");
	ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
	bool seen = false;
	for (int i = 0; i < PQntuples(r); i++) {
		ck_assert_msg(strstr(PQgetvalue(r, i, 1), "fleet-secret") == NULL, "%s shows the secret",
			      PQgetvalue(r, i, 0));
		if (strcmp(PQgetvalue(r, i, 0), "cancel_key_secret") == 0) {
			ck_assert_str_eq(PQgetvalue(r, i, 1), "(set, not shown)");
			seen = true;
		}
	}
	ck_assert(seen);
	PQclear(r);
	PQfinish(c);
	pgv_stop(&p);
}
END_TEST

static Suite *cancel32_suite(void)
{
	Suite *s = suite_create("cancel32");
	TCase *tc = pgv_tcase_create("protocol 3.2", 60);

	tcase_add_test(tc, v32_gets_long_key_without_negotiation);
	tcase_add_test(tc, newer_minor_and_options_negotiated_to_32);
	tcase_add_test(tc, long_key_cancels_at_owner);
	tcase_add_test(tc, long_key_cancels_at_owner_with_secret);
	tcase_add_test(tc, long_key_forwarded_without_peers);
	tcase_add_test(tc, forged_keys_change_nothing);
	tcase_add_test(tc, long_key_past_unknown_peer_id);
	tcase_add_test(tc, long_keys_across_workers);
	tcase_add_test(tc, no_secret_no_forward);
	tcase_add_test(tc, key_of_gone_instance);
	tcase_add_test(tc, own_key_of_gone_client);
	tcase_add_test(tc, secret_not_shown);
	suite_add_tcase(s, tc);

	tc = pgv_tcase_create("peers_dns", 60);
	tcase_add_test(tc, dns_peers_get_30_cancels);
	tcase_add_test(tc, dns_peers_follow_the_name);
	tcase_add_test(tc, dns_peers_bad_names);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return pgv_run_suite(cancel32_suite());
}
