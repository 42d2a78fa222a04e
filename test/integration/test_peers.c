/*
 * test_peers.c - peering for cancel requests: two pgvalve processes on one
 * port (so_reuseport) with peer_id 1 and 2 and [peers] naming each other.
 * The peer id in BackendKeyData, cancels forwarded to the process that
 * runs the query (over Unix sockets and over TCP), requests that must be
 * dropped (unknown peer, TTL 0, a peer that is gone), pool_size queueing
 * in SHOW PEER_POOLS, and libpq's PQcancel from 50 clients the kernel
 * spreads over both processes.
 */
#include "harness.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#define DB "pgvtest"
#define USER "scram_user"
#define PASS "scram_pass"
#define NCLIENTS 50

static const char *userlist(void)
{
	static char buf[1024];

	snprintf(buf, sizeof(buf), "%s\"admin_u\" \"admin_pass\"\n", std_userlist());
	return buf;
}

enum peer_transport { VIA_UNIX, VIA_TCP };

/*
 * The [pgvalve] lines and [peers] of instance `id` (1 or 2) in a pair
 * sharing `port`. Over TCP each also listens on its own 127.0.0.<id+1>, so
 * a peer can be reached by itself while 127.0.0.1 is shared.
 */
static void pair_config(char *buf, size_t size, int id, const struct pgv *one, const struct pgv *two,
			int port, enum peer_transport how, const char *more_peers)
{
	char peers[1400];

	if (how == VIA_UNIX)
		snprintf(peers, sizeof(peers), "1 = host=%s port=%d\n2 = host=%s port=%d\n", one->dir, port,
			 two->dir, port);
	else
		snprintf(peers, sizeof(peers), "1 = host=127.0.0.2 port=%d\n2 = host=127.0.0.3 port=%d\n", port,
			 port);
	snprintf(buf, size,
		 "auth_type = md5\n"
		 "pool_mode = transaction\n"
		 "default_pool_size = 60\n"
		 "max_client_conn = 300\n"
		 "admin_users = admin_u\n"
		 "so_reuseport = 1\n"
		 "verbose = 1\n"
		 "peer_id = %d\n"
		 "%s\n"
		 "[peers]\n%s%s",
		 id, how == VIA_TCP ? (id == 1 ? "listen_addr = 127.0.0.1,127.0.0.2\n" :
					      "listen_addr = 127.0.0.1,127.0.0.3\n") : "",
		 peers, more_peers ? more_peers : "");
}

/* Two peered instances on one port. more_peers (may be NULL): extra [peers] lines for both. */
static int start_pair(struct pgv *one, struct pgv *two, enum peer_transport how, const char *more_peers)
{
	char cfg[4096];
	int port = pgv_pick_port();

	pgv_reserve_dir(one);
	pgv_reserve_dir(two);
	pair_config(cfg, sizeof(cfg), 1, one, two, port, how, more_peers);
	pgv_start_on_port(one, port, cfg, std_databases(), userlist());
	pair_config(cfg, sizeof(cfg), 2, one, two, port, how, more_peers);
	pgv_start_on_port(two, port, cfg, std_databases(), userlist());
	return port;
}

/* One instance; returns once its Unix socket accepts too (the tests talk to it there). */
static void start_one(struct pgv *p, const char *extra)
{
	memset(p, 0, sizeof(*p));
	pgv_start_on_port(p, pgv_pick_port(), extra, std_databases(), userlist());
}

/* A raw client logged in over p's own Unix socket; key gets its BackendKeyData. */
static int login_at(struct pgv *p, unsigned char key[8])
{
	struct raw_error err;
	int fd = raw_connect_unix(p->dir, p->port);

	ck_assert_msg(fd >= 0, "connect to %s: %s", p->dir, strerror(errno));
	int rc = raw_login_fd(fd, DB, USER, PASS, key, &err);
	ck_assert_msg(rc == 0, "login at %s: %d %s %s", p->dir, rc, err.sqlstate, err.message);
	return fd;
}

/* A raw client at p (over its Unix socket) running sql on a server. */
static int query_at(struct pgv *p, const char *sql, unsigned char key[8])
{
	int fd = login_at(p, key);

	ck_assert(raw_send_query(fd, sql));
	pg_wait_running(sql, 1);
	return fd;
}

/* The query on fd ends with query_canceled within 2 s. */
static void expect_cancelled(int fd, struct pgv *log_of)
{
	struct raw_error err;
	char value[64];
	double t0 = now_s();
	int rc = raw_read_result(fd, value, sizeof(value), &err, 2000);

	ck_assert_msg(rc == -1 && strcmp(err.sqlstate, "57014") == 0, "query not cancelled: rc %d %s %s\n%s", rc,
		      err.sqlstate, err.message, pgv_log_tail(log_of, 1500));
	ck_assert_msg(now_s() - t0 < 2.0, "cancelled only after %.2f s", now_s() - t0);
}

/*
 * Sends a CancelRequest with key to p's own Unix socket and waits until p
 * closes that connection (it holds it while forwarding).
 */
static void cancel_at(struct pgv *p, const unsigned char key[8])
{
	int fd = raw_connect_unix(p->dir, p->port);

	ck_assert_msg(fd >= 0, "connect to %s: %s", p->dir, strerror(errno));
	ck_assert(raw_send_cancel(fd, key));
	ck_assert_msg(raw_wait_closed(fd, 5000), "%s kept the cancel connection open\n%s", p->dir,
		      pgv_log_tail(p, 1500));
	close(fd);
}

static int peer_id_in_key(const unsigned char key[8])
{
	return key[1] | key[2] << 8;
}

static PGconn *admin_at(struct pgv *p)
{
	char port[16];
	const char *kw[] = { "host", "port", "dbname", "user", "password", "connect_timeout", NULL };
	const char *val[] = { p->dir, port, "pgbouncer", "admin_u", "admin_pass", "10", NULL };

	snprintf(port, sizeof(port), "%d", p->port);
	PGconn *c = PQconnectdbParams(kw, val, 0);
	ck_assert_msg(PQstatus(c) == CONNECTION_OK, "admin console of %s: %s", p->dir, PQerrorMessage(c));
	return c;
}

/* SHOW PEER_POOLS's column col on the row of peer_id, or -1 without one. */
static int peer_pool_value(PGconn *admin, int peer_id, const char *col)
{
	PGresult *r = PQexec(admin, "SHOW PEER_POOLS");
	int v = -1;

	ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
	int c = PQfnumber(r, col);
	ck_assert_msg(c >= 0, "no column %s", col);
	for (int i = 0; i < PQntuples(r); i++)
		if (atoi(PQgetvalue(r, i, 0)) == peer_id)
			v = atoi(PQgetvalue(r, i, c));
	PQclear(r);
	return v;
}

static int show_lists_value(PGconn *admin, const char *list)
{
	PGresult *r = PQexec(admin, "SHOW LISTS");
	int v = -1;

	ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
	for (int i = 0; i < PQntuples(r); i++)
		if (strcmp(PQgetvalue(r, i, 0), list) == 0)
			v = atoi(PQgetvalue(r, i, 1));
	PQclear(r);
	return v;
}

/* ---------------------------------------------------------------- keys */

START_TEST(backend_key_carries_peer_id)
{
	struct pgv p, q;
	unsigned char key[8];

	/* 258 = 0x0102: byte 1 is the low byte, byte 2 the high one */
	start_one(&p, "auth_type = md5\npeer_id = 258\n");
	for (int i = 0; i < 8; i++) {
		int fd = login_at(&p, key);
		ck_assert_msg(peer_id_in_key(key) == 258, "key bytes 1-2 %02x %02x", key[1], key[2]);
		ck_assert_msg((key[7] & 3) == 3, "TTL bits %d", key[7] & 3);
		ck_assert_msg((key[0] & 0x80) == 0, "negative pid %02x", key[0]);
		close(fd);
	}
	/* libpq sees the same positive pid */
	PGconn *c = pgv_connect(&p, DB, USER, PASS);
	ck_assert_int_eq(PQstatus(c), CONNECTION_OK);
	ck_assert_int_gt(PQbackendPID(c), 0);
	ck_assert_int_eq((PQbackendPID(c) >> 8) & 0xFFFF, 0x0201);	/* bytes 1-2 of the big-endian pid */
	PQfinish(c);
	pgv_stop(&p);

	/* without peering the pid is still positive, and a plain cancel works as before */
	start_one(&q, "auth_type = md5\npool_mode = transaction\n");
	for (int i = 0; i < 8; i++) {
		int fd = login_at(&q, key);
		ck_assert_msg((key[0] & 0x80) == 0, "negative pid %02x", key[0]);
		close(fd);
	}
	int fd = query_at(&q, "SELECT pg_sleep(30)", key);
	cancel_at(&q, key);
	expect_cancelled(fd, &q);
	close(fd);
	pgv_stop(&q);
}
END_TEST

/* peer_id and [peers] change on RELOAD: new keys carry the new id, SHOW PEERS the new list. */
START_TEST(peer_id_reloads)
{
	struct pgv p;
	unsigned char key[8];

	start_one(&p, "auth_type = md5\nadmin_users = admin_u\npeer_id = 5\n\n[peers]\n6 = host=/nowhere\n");
	int fd = login_at(&p, key);
	ck_assert_int_eq(peer_id_in_key(key), 5);
	close(fd);

	/* the same file with other values (later keys win, a section may open again) */
	FILE *f = fopen(p.ini, "a");
	ck_assert_ptr_nonnull(f);
	fputs("\n[pgvalve]\npeer_id = 300\n[peers]\n7 = host=127.0.0.1 port=1\n", f);
	fclose(f);
	PGconn *a = admin_at(&p);
	PGresult *r = PQexec(a, "RELOAD");
	ck_assert_int_eq(PQresultStatus(r), PGRES_COMMAND_OK);
	PQclear(r);
	fd = login_at(&p, key);
	ck_assert_int_eq(peer_id_in_key(key), 300);
	close(fd);
	ck_assert_int_eq(show_lists_value(a, "peers"), 2);
	ck_assert_int_eq(peer_pool_value(a, 7, "sv_login"), 0);
	ck_assert_int_eq(peer_pool_value(a, 8, "sv_login"), -1);
	PQfinish(a);
	pgv_stop(&p);
}
END_TEST

/* ---------------------------------------------------------------- forwarding */

/* A query at one process, its cancel sent to the other: forwarded, the query ends with 57014. */
static void forward_one(enum peer_transport how)
{
	struct pgv one, two;
	unsigned char key[8];
	struct raw_error err;
	char value[64];

	start_pair(&one, &two, how, NULL);
	int fd = query_at(&one, "SELECT pg_sleep(30)", key);
	ck_assert_int_eq(peer_id_in_key(key), 1);
	cancel_at(&two, key);
	expect_cancelled(fd, &two);
	ck_assert_msg(pgv_log_contains(&two, "forwarding cancel request to peer 1"), "%s", pgv_log_tail(&two, 1500));
	ck_assert_int_eq(pgv_log_count(&one, "forwarding cancel request"), 0);

	/* the server is usable again, and the forward left nothing behind */
	ck_assert_int_eq(raw_query(fd, "SELECT 'alive'", value, sizeof(value), &err), 0);
	ck_assert_str_eq(value, "alive");
	PGconn *a = admin_at(&two);
	ck_assert_int_eq(peer_pool_value(a, 1, "cl_active_cancel_req"), 0);
	ck_assert_int_eq(peer_pool_value(a, 1, "cl_waiting_cancel_req"), 0);
	ck_assert_int_eq(peer_pool_value(a, 1, "sv_login"), 0);
	ck_assert_int_eq(peer_pool_value(a, 2, "sv_active_cancel"), 0);
	ck_assert_int_eq(show_lists_value(a, "peers"), 2);
	ck_assert_int_eq(show_lists_value(a, "peer_pools"), 2);
	PQfinish(a);
	close(fd);
	pgv_stop(&two);
	pgv_stop(&one);
}

START_TEST(cancel_forwarded_over_unix_socket)
{
	forward_one(VIA_UNIX);
}
END_TEST

START_TEST(cancel_forwarded_over_tcp)
{
	forward_one(VIA_TCP);
}
END_TEST

/* A key the process runs itself matches whatever its TTL bits say. */
START_TEST(local_key_matches_any_ttl)
{
	struct pgv one, two;
	unsigned char key[8];

	start_pair(&one, &two, VIA_UNIX, NULL);
	int fd = query_at(&one, "SELECT pg_sleep(30)", key);
	key[7] &= (unsigned char)~3;	/* TTL 0, as after three forwards */
	cancel_at(&one, key);
	expect_cancelled(fd, &one);
	close(fd);
	pgv_stop(&two);
	pgv_stop(&one);
}
END_TEST

/* ---------------------------------------------------------------- dropped */

START_TEST(bad_cancels_are_dropped)
{
	struct pgv one, two;
	unsigned char key[8], bad[8];
	struct raw_error err;
	char value[64], gone[800];

	/* peer 3 is configured but nothing listens there */
	snprintf(gone, sizeof(gone), "3 = host=%s/no-such-dir\n", getenv("PGV_TEST_DIR"));
	start_pair(&one, &two, VIA_UNIX, gone);

	int fd = query_at(&one, "SELECT 'finished', pg_sleep(3)", key);

	/* Each a variation of the running query's key that must not reach it. */
	static const struct { int peer_id; bool ttl0; const char *logged; } drops[] = {
		{ 1, true, "peer 1: TTL exhausted, dropped" },
		{ 99, false, "cancel request for unknown peer 99, dropped" },
		{ 3, false, "dropping cancel request for peer 3: could not connect" },	/* nobody there */
		{ 2, false, "unknown key of this peer, ignored" },			/* two's own id */
	};
	for (size_t i = 0; i < sizeof(drops) / sizeof(drops[0]); i++) {
		memcpy(bad, key, 8);
		bad[1] = (unsigned char)drops[i].peer_id;
		bad[2] = 0;
		if (drops[i].ttl0)
			bad[7] &= (unsigned char)~3;
		cancel_at(&two, bad);
		ck_assert_msg(pgv_log_wait(&two, drops[i].logged, 2), "case %zu\n%s", i, pgv_log_tail(&two, 1500));
	}
	/* hostile shapes: short, long, and a header that claims more than is sent */
	static const unsigned char shapes[][20] = {
		{ 0, 0, 0, 12, 0x04, 0xd2, 0x16, 0x2e, 1, 2, 3, 4 },
		{ 0, 0, 0, 20, 0x04, 0xd2, 0x16, 0x2e, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12 },
		{ 0, 0, 0, 16, 0x04, 0xd2, 0x16, 0x2e, 1, 2 },
	};
	static const size_t shape_len[] = { 12, 20, 10 };
	for (size_t i = 0; i < 3; i++) {
		int c = raw_connect_unix(two.dir, two.port);
		ck_assert_int_ge(c, 0);
		raw_send(c, shapes[i], shape_len[i]);
		if (i == 2)
			shutdown(c, SHUT_WR);	/* half a request, then EOF */
		ck_assert_msg(raw_wait_closed(c, 3000), "shape %zu left open", i);
		close(c);
	}

	/* the query was not hit by any of it */
	int rc = raw_read_result(fd, value, sizeof(value), &err, 8000);
	ck_assert_msg(rc == 0, "query hit: %d %s %s", rc, err.sqlstate, err.message);
	ck_assert_str_eq(value, "finished");
	close(fd);
	ck_assert(pgv_running(&two));
	ck_assert(pgv_running(&one));
	ck_assert_int_eq(pgv_log_count(&one, "forwarding cancel request"), 0);
	pgv_stop(&two);
	pgv_stop(&one);
}
END_TEST

/* ---------------------------------------------------------------- pool_size */

/* A peer that accepts and never answers: pool_size caps the forwards, the rest queue, timeouts clear them. */
/* A peer at <dir>/.s.PGSQL.7777 that accepts (the kernel does) and never answers. Returns the listening socket. */
static int mute_peer(char *dir, size_t size)
{
	char path[800];
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	static int seq;

	snprintf(dir, size, "%s/mute-peer-%d-%d", getenv("PGV_TEST_DIR"), (int)getpid(), seq++);
	ck_assert_int_eq(mkdir(dir, 0777), 0);
	chmod(dir, 0777);	/* pgvalve may run as another user */
	snprintf(path, sizeof(path), "%s/.s.PGSQL.7777", dir);
	ck_assert_msg(strlen(path) < sizeof(sa.sun_path), "path too long: %s", path);
	memcpy(sa.sun_path, path, strlen(path) + 1);
	int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_eq(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	chmod(path, 0777);
	ck_assert_int_eq(listen(lfd, 16), 0);
	return lfd;
}

/* One instance with peer 5 = the mute peer at dir, pool_size 1, and more settings. */
static void start_with_mute_peer(struct pgv *p, const char *dir, const char *more)
{
	char extra[1400];

	snprintf(extra, sizeof(extra),
		 "auth_type = md5\nadmin_users = admin_u\npeer_id = 1\nverbose = 1\n%s\n"
		 "[peers]\n5 = host=%s port=7777 pool_size=1\n", more, dir);
	start_one(p, extra);
}

START_TEST(peer_pool_size_queues)
{
	struct pgv p;
	char sock_dir[700];
	int lfd = mute_peer(sock_dir, sizeof(sock_dir));

	start_with_mute_peer(&p, sock_dir, "cancel_wait_timeout = 3\n");
	PGconn *a = admin_at(&p);
	ck_assert_int_eq(show_lists_value(a, "peers"), 1);
	ck_assert_int_eq(show_lists_value(a, "peer_pools"), 1);
	ck_assert_int_eq(peer_pool_value(a, 5, "sv_active_cancel"), 0);

	unsigned char key[8] = { 0x11, 5, 0, 0x22, 0x33, 0x44, 0x55, 0x67 };
	int held[3];
	for (int i = 0; i < 3; i++) {
		held[i] = raw_connect_unix(p.dir, p.port);
		ck_assert_int_ge(held[i], 0);
		ck_assert(raw_send_cancel(held[i], key));
	}
	/* the requests queue as they arrive (milliseconds); 3 s, as long as cancel_wait_timeout keeps them queued */
	double deadline = now_s() + 3;
	while (peer_pool_value(a, 5, "cl_waiting_cancel_req") != 2 && now_s() < deadline)
		usleep(50 * 1000);
	ck_assert_int_eq(peer_pool_value(a, 5, "sv_active_cancel"), 1);
	ck_assert_int_eq(peer_pool_value(a, 5, "cl_active_cancel_req"), 1);
	ck_assert_int_eq(peer_pool_value(a, 5, "cl_waiting_cancel_req"), 2);
	ck_assert_int_eq(peer_pool_value(a, 5, "sv_login"), 0);

	/* the requester is held while its forward is pending; cancel_wait_timeout ends it */
	struct pollfd pfd = { .fd = held[0], .events = POLLIN };
	ck_assert_int_eq(poll(&pfd, 1, 200), 0);
	for (int i = 0; i < 3; i++) {
		ck_assert_msg(raw_wait_closed(held[i], 6000), "requester %d still held", i);
		close(held[i]);
	}
	ck_assert_int_eq(peer_pool_value(a, 5, "cl_waiting_cancel_req"), 0);
	ck_assert_int_eq(peer_pool_value(a, 5, "sv_active_cancel"), 0);
	ck_assert(pgv_log_contains(&p, "dropping cancel request for peer 5: cancel_wait_timeout"));
	PQfinish(a);
	close(lfd);
	pgv_stop(&p);
}
END_TEST

/* Requesters closed by pgvalve (client_login_timeout) before their forwards end: the forwards go on alone. */
START_TEST(requester_closed_before_forward_ends)
{
	struct pgv p;
	char sock_dir[700];
	int lfd = mute_peer(sock_dir, sizeof(sock_dir));
	unsigned char key[8] = { 0x12, 5, 0, 0x23, 0x34, 0x45, 0x56, 0x03 };
	int held[2];

	start_with_mute_peer(&p, sock_dir, "client_login_timeout = 1\ncancel_wait_timeout = 4\n");
	PGconn *a = admin_at(&p);
	for (int i = 0; i < 2; i++) {
		held[i] = raw_connect_unix(p.dir, p.port);
		ck_assert_int_ge(held[i], 0);
		ck_assert(raw_send_cancel(held[i], key));
	}
	for (int i = 0; i < 2; i++) {
		ck_assert_msg(raw_wait_closed(held[i], 3000), "requester %d not closed by client_login_timeout", i);
		close(held[i]);
	}
	/* both forwards outlive their requesters */
	ck_assert_int_eq(peer_pool_value(a, 5, "sv_active_cancel"), 1);
	ck_assert_int_eq(peer_pool_value(a, 5, "cl_waiting_cancel_req"), 1);
	/* until cancel_wait_timeout (4 s here, begun over a second ago) ends both forwards; 5 s leaves slack */
	double deadline = now_s() + 5;
	while (peer_pool_value(a, 5, "sv_active_cancel") + peer_pool_value(a, 5, "cl_waiting_cancel_req") > 0 &&
	       now_s() < deadline)
		usleep(100 * 1000);
	ck_assert_int_eq(peer_pool_value(a, 5, "sv_active_cancel"), 0);
	ck_assert_int_eq(peer_pool_value(a, 5, "cl_waiting_cancel_req"), 0);
	ck_assert_int_eq(pgv_log_count(&p, "dropping cancel request for peer 5: cancel_wait_timeout"), 2);
	PQfinish(a);
	close(lfd);
	pgv_stop(&p);
}
END_TEST

/* ---------------------------------------------------------------- libpq, 50 clients */

/* The result of c's running query within timeout_s, or NULL. */
static PGresult *result_within(PGconn *c, double timeout_s)
{
	double deadline = now_s() + timeout_s;

	while (PQisBusy(c)) {
		struct pollfd pfd = { .fd = PQsocket(c), .events = POLLIN };
		int left = (int)((deadline - now_s()) * 1000);

		if (left <= 0)
			return NULL;
		if (poll(&pfd, 1, left) > 0 && !PQconsumeInput(c))
			break;
	}
	return PQgetResult(c);
}

/* One round: NCLIENTS queries, each cancelled with PQcancel. Returns how many cancels were forwarded. */
static int pqcancel_round(struct pgv *one, struct pgv *two)
{
	PGconn *conns[NCLIENTS];
	int before = pgv_log_count(one, "forwarding cancel request") + pgv_log_count(two, "forwarding cancel request");

	for (int i = 0; i < NCLIENTS; i++) {
		conns[i] = pgv_connect(one, DB, USER, PASS);	/* one->port is both processes' port */
		ck_assert_msg(PQstatus(conns[i]) == CONNECTION_OK, "client %d: %s", i, PQerrorMessage(conns[i]));
		ck_assert_int_eq(PQsendQuery(conns[i], "SELECT pg_sleep(30)"), 1);
	}
	pg_wait_running("SELECT pg_sleep(30)", NCLIENTS);
	for (int i = 0; i < NCLIENTS; i++) {
		char errbuf[256];
		PGcancel *cancel = PQgetCancel(conns[i]);
		double t0 = now_s();

		ck_assert_msg(PQcancel(cancel, errbuf, sizeof(errbuf)) == 1, "PQcancel %d: %s", i, errbuf);
		PQfreeCancel(cancel);
		PGresult *r = result_within(conns[i], 2.0);
		double took = now_s() - t0;
		ck_assert_msg(r != NULL, "client %d: no result 2 s after its cancel\n%s\n%s", i,
			      pgv_log_tail(one, 800), pgv_log_tail(two, 800));
		ck_assert_msg(PQresultStatus(r) == PGRES_FATAL_ERROR && PQresultErrorField(r, PG_DIAG_SQLSTATE) &&
			      strcmp(PQresultErrorField(r, PG_DIAG_SQLSTATE), "57014") == 0,
			      "client %d: %s", i, PQresultErrorMessage(r));
		ck_assert_msg(took < 2.0, "client %d: cancel took %.2f s", i, took);
		PQclear(r);
		while ((r = PQgetResult(conns[i])) != NULL)
			PQclear(r);
	}
	for (int i = 0; i < NCLIENTS; i++)
		PQfinish(conns[i]);
	return pgv_log_count(one, "forwarding cancel request") + pgv_log_count(two, "forwarding cancel request") - before;
}

START_TEST(pqcancel_from_many_clients)
{
	struct pgv one, two;
	int forwarded = 0;

	start_pair(&one, &two, VIA_UNIX, NULL);
	/* The kernel picks the process for each connection: with 50 a forward is all but certain; retry, never assume. */
	int rounds = 0;
	while (rounds < 4 && forwarded == 0) {
		forwarded += pqcancel_round(&one, &two);
		rounds++;
	}
	printf("pqcancel_from_many_clients: %d of %d cancels forwarded (%d round(s))\n", forwarded,
	       rounds * NCLIENTS, rounds);
	ck_assert_msg(forwarded > 0, "no cancel was forwarded in 4 rounds of %d", NCLIENTS);
	/* both processes served clients */
	ck_assert_int_gt(pgv_log_count(&one, "login attempt"), 0);
	ck_assert_int_gt(pgv_log_count(&two, "login attempt"), 0);
	pgv_stop(&two);
	pgv_stop(&one);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("peers");
	TCase *tc = pgv_tcase_create("keys", 60);
	tcase_add_test(tc, backend_key_carries_peer_id);
	tcase_add_test(tc, local_key_matches_any_ttl);
	tcase_add_test(tc, peer_id_reloads);
	suite_add_tcase(s, tc);

	tc = pgv_tcase_create("forwarding", 60);
	tcase_add_test(tc, cancel_forwarded_over_unix_socket);
	tcase_add_test(tc, cancel_forwarded_over_tcp);
	tcase_add_test(tc, bad_cancels_are_dropped);
	tcase_add_test(tc, peer_pool_size_queues);
	tcase_add_test(tc, requester_closed_before_forward_ends);
	suite_add_tcase(s, tc);

	tc = pgv_tcase_create("pqcancel", 240);
	tcase_add_test(tc, pqcancel_from_many_clients);
	suite_add_tcase(s, tc);
	return pgv_run_suite(s);
}
