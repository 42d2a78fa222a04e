/*
 * test_drain.c - draining at transaction boundaries (DRAIN, SIGTERM with
 * shutdown_drain, drain_timeout, workers = N) and the readiness and
 * liveness probes beside /metrics (/ready, /live), against the real
 * PostgreSQL: which client is closed when, with what, that no transaction
 * is cut, that the process exits after the last client, and what /ready
 * says while paused, draining, and while no database can be reached.
 *
 * Clients that must see exactly when the pooler closes them speak the
 * protocol by hand (harness.h raw_*): a FATAL arriving unasked is read as
 * it comes.
 */
#include "admin_console.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define DRAINED_TEXT "terminating connection due to administrator command: the pooler is shutting down"
/*
 * How soon a client at a boundary must be closed: "at once", well inside
 * drain.c's 5 s backstop sweep, so that only the core's boundary hooks
 * (a client went idle, a session server answered 'I') can make it.
 */
#define AT_ONCE_MS 1500

/* ---------------------------------------------------------------- clients */

/* md5_user logged in to DB by hand: the socket. */
static int raw_client(struct pgv *p)
{
	struct raw_error err;
	int fd = -1;
	int rc = raw_login_ex(p->port, DB, "md5_user", "md5_pass", NULL, &err, &fd);
	ck_assert_msg(rc == 0, "login: rc %d %s %s\n%s", rc, err.sqlstate, err.message, pgv_log_tail(p, 1500));
	return fd;
}

/* One query up to ReadyForQuery; its first value must be expect (unless NULL). */
static void q_ok(int fd, const char *sql, const char *expect)
{
	char v[128];
	struct raw_error err;
	int rc = raw_query(fd, sql, v, sizeof(v), &err);
	ck_assert_msg(rc == 0, "%s: rc %d %s %s", sql, rc, err.sqlstate, err.message);
	if (expect)
		ck_assert_str_eq(v, expect);
}

/* The pooler closes fd with FATAL 57P01 within timeout_ms (its message holding extra, if given). */
static void expect_drained(int fd, int timeout_ms, const char *what, const char *extra)
{
	struct raw_error err;
	memset(&err, 0, sizeof(err));
	int rc = raw_read_result(fd, NULL, 0, &err, timeout_ms);
	ck_assert_msg(rc == -1, "%s: not closed with an error within %d ms (rc %d)", what, timeout_ms, rc);
	ck_assert_msg(strcmp(err.severity, "FATAL") == 0, "%s: severity %s", what, err.severity);
	ck_assert_msg(strcmp(err.sqlstate, "57P01") == 0, "%s: SQLSTATE %s (%s)", what, err.sqlstate, err.message);
	ck_assert_msg(strstr(err.message, DRAINED_TEXT), "%s: message '%s'", what, err.message);
	if (extra)
		ck_assert_msg(strstr(err.message, extra), "%s: message '%s' lacks '%s'", what, err.message, extra);
	ck_assert_msg(raw_wait_closed(fd, 2000), "%s: still open after the FATAL", what);
	close(fd);
}

/* Nothing arrives on fd for ms: not closed, not told anything. */
static void expect_open(int fd, int ms, const char *what)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	ck_assert_msg(poll(&pfd, 1, ms) == 0, "%s: the pooler sent something or closed it", what);
}

/* Whether p exits within seconds: callers wait for an exit that follows at once (milliseconds). */
static bool wait_exit(struct pgv *p, double seconds)
{
	double t0 = now_s();
	while (pgv_running(p) && now_s() - t0 < seconds)
		sleep_ms(50);
	return !pgv_running(p);
}

/* fd, the last client, commits its transaction, is closed at once, and the process exits. */
static void commit_then_exit(struct pgv *p, int fd, const char *what)
{
	q_ok(fd, "COMMIT", NULL);
	expect_drained(fd, AT_ONCE_MS, what, NULL);
	ck_assert_msg(wait_exit(p, 10), "still running after the last client left\n%s", pgv_log_tail(p, 2000));
}

/* A pgbench_history row only this test writes. */
static int marker(void)
{
	return 900000000 + (int)(getpid() % 1000000);
}

static long long committed_rows(int aid)
{
	char sql[128];
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM pgbench_history WHERE aid = %d", aid);
	PGconn *pg = pg_direct();
	long long n = atoll(query_value(pg, sql));
	PQfinish(pg);
	return n;
}

static void insert_marker(int fd, int aid)
{
	char sql[160];
	snprintf(sql, sizeof(sql), "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (0, 0, %d, 0, now())",
		 aid);
	q_ok(fd, sql, NULL);
}

/* ---------------------------------------------------------------- HTTP */

/* A TCP port nothing listens on (bound and released: the kernel gave it to nobody else yet). */
static int dead_port(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	close(fd);
	return ntohs(sa.sin_port);
}

/* pgv_start with TXN, extra and the HTTP endpoint on a free port: that port. */
static int start_probed(struct pgv *p, const char *extra, const char *databases)
{
	char cfg[512];
	int mport = pgv_pick_http_port(0);
	snprintf(cfg, sizeof(cfg), TXN "metrics_port = %d\n%s", mport, extra);
	pgv_start(p, cfg, databases, userlist());
	return mport;
}

/* GET path: the status (0 if none came), the body's first line into body. */
static int http_get(int port, const char *path, char *body, size_t size)
{
	char req[256], buf[4096];
	int n = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", path);
	int fd = raw_connect(port);
	raw_send(fd, req, (size_t)n);
	size_t len = 0;
	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		if (len >= sizeof(buf) - 1 || poll(&pfd, 1, 5000) <= 0)
			break;
		ssize_t r = read(fd, buf + len, sizeof(buf) - 1 - len);
		if (r <= 0)
			break;
		len += (size_t)r;
	}
	close(fd);
	buf[len] = '\0';
	int status = 0;
	if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1)
		status = 0;
	const char *b = strstr(buf, "\r\n\r\n");
	snprintf(body, size, "%s", b ? b + 4 : "");
	body[strcspn(body, "\r\n")] = '\0';
	return status;
}

static void expect_http(int port, const char *path, int status, const char *body)
{
	char got[512];
	int st = http_get(port, path, got, sizeof(got));
	ck_assert_msg(st == status && strcmp(got, body) == 0, "GET %s: %d '%s', expected %d '%s'", path, st, got,
		      status, body);
}

/* Waits up to timeout_s for path to answer status with body (callers: a few publishing seconds, plus slack). */
static void wait_http(int port, const char *path, int status, const char *body, double timeout_s)
{
	char got[512] = "";
	int st = 0;
	double deadline = now_s() + timeout_s;
	while (now_s() < deadline) {
		st = http_get(port, path, got, sizeof(got));
		if (st == status && strcmp(got, body) == 0)
			return;
		sleep_ms(100);
	}
	ck_abort_msg("GET %s: still %d '%s' after %.1f s, expected %d '%s'", path, st, got, timeout_s, status, body);
}

/* ================================================================ drain */

/*
 * Transaction mode: DRAIN closes an idle client at once; a client inside a
 * transaction goes on, commits, gets the ReadyForQuery, and only then the
 * FATAL; new logins are refused; the console stays and does not hold the
 * drain up; the process exits after the last client.
 */
START_TEST(drain_transaction_mode)
{
	struct pgv p;
	int aid = marker();
	pgv_start(&p, TXN, std_databases(), userlist());
	PGconn *a = admin_conn(&p);
	int idle = raw_client(&p);
	q_ok(idle, "SELECT 1", "1");
	int intx = raw_client(&p);
	q_ok(intx, "BEGIN", NULL);
	insert_marker(intx, aid);

	admin_ok(a, "DRAIN", "DRAIN");
	expect_drained(idle, AT_ONCE_MS, "idle client", NULL);
	expect_open(intx, 300, "client inside a transaction");
	q_ok(intx, "SELECT 2", "2");
	ck_assert_msg(pgv_running(&p), "exited with a transaction open");

	/*
	 * No new client once the TCP listeners are closed (200 ms after the
	 * DRAIN, drain.h; the log says when, so a loaded machine's late timer
	 * cannot make this connect early); the Unix socket refuses pooled
	 * logins but lets the console in.
	 */
	pgv_expect_log(&p, "the TCP listeners are closed", 5);
	PGconn *late = pgv_connect(&p, DB, "md5_user", "md5_pass");
	ck_assert_int_eq(PQstatus(late), CONNECTION_BAD);
	PQfinish(late);
	unsigned char key[8];
	struct raw_error err;
	int ufd = raw_connect_unix(p.dir, p.port);
	ck_assert_int_ge(ufd, 0);
	ck_assert_int_eq(raw_login_fd(ufd, DB, "md5_user", "md5_pass", key, &err), -1);
	ck_assert_str_eq(err.sqlstate, "57P03");
	close(ufd);
	ufd = raw_connect_unix(p.dir, p.port);
	ck_assert_int_eq(raw_login_fd(ufd, "pgbouncer", "admin_u", "admin_pass", key, &err), 0);
	close(ufd);

	commit_then_exit(&p, intx, "client after its COMMIT");
	ck_assert_int_eq(committed_rows(aid), 1);
	ck_assert(pgv_log_contains(&p, "DRAIN command issued"));
	ck_assert(pgv_log_contains(&p, "drain: the last client has left"));
	PQfinish(a);
	pgv_stop(&p);
}
END_TEST

/* A client queued for the only server is served once the transaction ahead ends, then closed. */
START_TEST(drain_serves_waiting_clients)
{
	struct pgv p;
	pgv_start(&p, TXN "default_pool_size = 1\n", std_databases(), userlist());
	PGconn *a = admin_conn(&p);
	int intx = raw_client(&p);
	q_ok(intx, "BEGIN", NULL);
	q_ok(intx, "SELECT 1", "1");
	int waiter = raw_client(&p);
	ck_assert(raw_send_query(waiter, "SELECT 'served'"));
	/*
	 * queued before the drain. If a loaded machine delays it, the waiter is
	 * a fresh client in its first-request grace and is served the same way:
	 * the check is weaker, not wrong.
	 */
	sleep_ms(200);

	admin_ok(a, "DRAIN", "DRAIN");
	expect_open(waiter, 300, "queued client");
	q_ok(intx, "COMMIT", NULL);
	expect_drained(intx, AT_ONCE_MS, "client after its COMMIT", NULL);
	char v[64];
	struct raw_error err;
	ck_assert_int_eq(raw_read_result(waiter, v, sizeof(v), &err, 5000), 0);
	ck_assert_str_eq(v, "served");
	expect_drained(waiter, AT_ONCE_MS, "queued client after its query", NULL);
	ck_assert_msg(wait_exit(&p, 5), "still running\n%s", pgv_log_tail(&p, 2000));
	PQfinish(a);
	pgv_stop(&p);
}
END_TEST

/*
 * Session mode: a client that never asked for a server and one idle on its
 * server are closed at once; a running query and an open transaction end
 * first.
 */
START_TEST(drain_session_mode)
{
	struct pgv p;
	int aid = marker();
	pgv_start(&p, ADMIN_CFG "pool_mode = session\n", std_databases(), userlist());
	PGconn *a = admin_conn(&p);
	int fresh = raw_client(&p);
	double fresh_connected = now_s();
	int used = raw_client(&p);
	q_ok(used, "SELECT 1", "1");
	int intx = raw_client(&p);
	q_ok(intx, "BEGIN", NULL);
	insert_marker(intx, aid);
	int sleeper = raw_client(&p);
	ck_assert(raw_send_query(sleeper, "SELECT pg_sleep(0.7)::text || 'slept'"));
	/* running before the drain; if later, it is served in its first-request grace (weaker, not wrong) */
	sleep_ms(100);

	admin_ok(a, "DRAIN", "DRAIN");
	expect_drained(used, AT_ONCE_MS, "client idle on its server", NULL);
	char v[64];
	struct raw_error err;
	ck_assert_int_eq(raw_read_result(sleeper, v, sizeof(v), &err, 5000), 0);
	ck_assert_str_eq(v, "slept");
	expect_drained(sleeper, AT_ONCE_MS, "client after its query", NULL);
	/* logged in just before the drain, never served: it had 2 s from its connect to send a request */
	expect_drained(fresh, 3000, "client never served, at the end of its first-request grace", NULL);
	double after = now_s() - fresh_connected;
	ck_assert_msg(after >= 1.8, "a new client was closed %.2f s after its login, before its 2 s grace", after);

	expect_open(intx, 200, "session client inside a transaction");
	q_ok(intx, "SELECT 3", "3");
	commit_then_exit(&p, intx, "session client after its COMMIT");
	ck_assert_int_eq(committed_rows(aid), 1);
	PQfinish(a);
	pgv_stop(&p);
}
END_TEST

/* A StartupMessage for md5_user on DB, sent by hand: the login then waits for its password. */
static int half_login(struct pgv *p)
{
	unsigned char pkt[128];
	static const char params[] = "user\0md5_user\0database\0" DB "\0";
	uint32_t len = 8 + sizeof(params);	/* the terminating NUL of params ends the list */
	uint32_t nlen = htonl(len), version = htonl(196608);
	memcpy(pkt, &nlen, 4);
	memcpy(pkt + 4, &version, 4);
	memcpy(pkt + 8, params, sizeof(params));
	int fd = raw_connect(p->port);
	ck_assert(raw_send(fd, pkt, len));
	return fd;
}

/*
 * Logins not finished and replication connections have no transaction to
 * wait for: closed at once, while a transaction elsewhere goes on.
 */
START_TEST(drain_closes_replication_at_once_and_logins_after_grace)
{
	struct pgv p;
	char users[1200];
	snprintf(users, sizeof(users), "%s\"repl_user\" \"repl_pass\"\n", userlist());
	pgv_start(&p, TXN, std_databases(), users);
	PGconn *a = admin_conn(&p);
	int intx = raw_client(&p);
	q_ok(intx, "BEGIN", NULL);
	char conninfo[256];
	snprintf(conninfo, sizeof(conninfo),
		 "host=127.0.0.1 port=%d dbname=" DB " user=repl_user password=repl_pass replication=database "
		 "sslmode=disable connect_timeout=10", p.port);
	PGconn *repl = PQconnectdb(conninfo);
	ck_assert_msg(PQstatus(repl) == CONNECTION_OK, "replication login: %s", PQerrorMessage(repl));
	PGresult *r = PQexec(repl, "IDENTIFY_SYSTEM");
	ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
	PQclear(r);
	int login = half_login(&p);
	double login_connected = now_s();
	pgv_expect_log(&p, "login attempt: db=" DB " user=md5_user", 5);

	admin_ok(a, "DRAIN", "DRAIN");
	/* read on libpq's socket: libpq has read nothing since IDENTIFY_SYSTEM */
	expect_drained(dup(PQsocket(repl)), AT_ONCE_MS, "replication connection", NULL);
	/* a login under way when the drain began may finish within 2 s of its connect; this one never does */
	expect_drained(login, 3000, "login waiting for its password, after its grace", NULL);
	double after = now_s() - login_connected;
	ck_assert_msg(after >= 1.8, "a login under way was closed %.2f s after its connect, before its 2 s grace", after);
	PQfinish(repl);
	q_ok(intx, "SELECT 5", "5");
	commit_then_exit(&p, intx, "client after its COMMIT");
	PQfinish(a);
	pgv_stop(&p);
}
END_TEST

/*
 * A client that logged in just before the drain (a connection per
 * transaction, sent there by a load balancer that had not seen the drain
 * yet) runs its first transaction and is closed after it, not before it.
 */
START_TEST(drain_serves_a_new_clients_first_transaction)
{
	struct pgv p;
	int aid = marker();
	pgv_start(&p, TXN, std_databases(), userlist());
	PGconn *a = admin_conn(&p);
	int old_idle = raw_client(&p);
	q_ok(old_idle, "SELECT 1", "1");
	int fresh = raw_client(&p);
	admin_ok(a, "DRAIN", "DRAIN");
	expect_drained(old_idle, AT_ONCE_MS, "idle client served before the drain", NULL);
	/* pacing: the first transaction well after the drain, well inside the 2 s first-request grace */
	sleep_ms(300);
	q_ok(fresh, "BEGIN", NULL);
	insert_marker(fresh, aid);
	commit_then_exit(&p, fresh, "new client after its first transaction");
	ck_assert_int_eq(committed_rows(aid), 1);
	PQfinish(a);
	pgv_stop(&p);
}
END_TEST

/*
 * fd, connected before a DRAIN on a, the only pooled client: DRAIN; its
 * login, begun only now, goes through; its first transaction runs; then
 * it is closed with 57P01 and the process exits.
 */
static void drain_then_first_login(struct pgv *p, PGconn *a, int fd, const char *what)
{
	admin_ok(a, "DRAIN", "DRAIN");
	unsigned char key[8];
	struct raw_error err;
	memset(&err, 0, sizeof(err));
	int rc = raw_login_fd(fd, DB, "md5_user", "md5_pass", key, &err);
	ck_assert_msg(rc == 0, "%s: login rc %d %s %s\n%s", what, rc, err.sqlstate, err.message, pgv_log_tail(p, 2000));
	q_ok(fd, "SELECT 1", "1");
	expect_drained(fd, AT_ONCE_MS, what, NULL);
	ck_assert_msg(wait_exit(p, 5), "still running after the last client left\n%s", pgv_log_tail(p, 2000));
}

/*
 * A client accepted before the drain whose startup packet has not come
 * yet (libpq's SSLRequest answered 'N' first; a load balancer's
 * connection whose bytes are on their way) holds the exit as a logged-in
 * client does: its login goes on, its first transaction runs, then
 * 57P01. The drain used to count only clients with a pool, so with no
 * other client it exited at once and this one saw its connection closed
 * with nothing said (test/fleet's "server closed the connection
 * unexpectedly" under pgbench -C). No time bound is checked but the 2 s
 * grace after its connect, which the few milliseconds this login takes
 * stay far inside.
 */
START_TEST(drain_waits_for_a_startup_packet_on_its_way)
{
	struct pgv p;
	pgv_start(&p, TXN, std_databases(), userlist());
	PGconn *a = admin_conn(&p);
	int fd = raw_connect(p.port);
	unsigned char ssl_request[8];
	raw_put_u32(ssl_request, 8);
	raw_put_u32(ssl_request + 4, 80877103);
	ck_assert(raw_send(fd, ssl_request, sizeof(ssl_request)));
	char answer = 0;
	ck_assert(raw_read_exact(fd, &answer, 1, now_s() + 5));
	ck_assert_int_eq(answer, 'N');
	drain_then_first_login(&p, a, fd, "client with its startup packet after its SSLRequest");
	PQfinish(a);
	pgv_stop(&p);
}
END_TEST

/*
 * A TCP connection the kernel completed but holds back until its first
 * bytes (tcp_defer_accept, on by default), as a load balancer's is for a
 * moment: its client counts it as connected. The drain keeps accepting
 * for 200 ms with TCP_DEFER_ACCEPT off before it closes the listeners;
 * closing at once reset such a connection when its bytes came. The bound
 * checked: the startup packet, sent as soon as DRAIN has answered, reaches
 * the kernel within those 200 ms (milliseconds even on a loaded machine:
 * one write after one read).
 */
START_TEST(drain_takes_in_a_connection_held_for_its_first_bytes)
{
	struct pgv p;
	pgv_start(&p, TXN, std_databases(), userlist());
	PGconn *a = admin_conn(&p);
	int fd = raw_connect(p.port);	/* connected; nothing sent, so not accepted yet */
	drain_then_first_login(&p, a, fd, "connection held for its first bytes");
	PQfinish(a);
	pgv_stop(&p);
}
END_TEST

/* drain_timeout: a transaction that never ends is cut when it passes, with a message that says so. */
START_TEST(drain_timeout_cuts_the_rest)
{
	struct pgv p;
	pgv_start(&p, TXN "drain_timeout = 2\n", std_databases(), userlist());
	PGconn *a = admin_conn(&p);
	int intx = raw_client(&p);
	q_ok(intx, "BEGIN", NULL);
	double t0 = now_s();
	admin_ok(a, "DRAIN", "DRAIN");
	expect_open(intx, 1200, "client inside a transaction before drain_timeout");
	ck_assert(pgv_running(&p));
	expect_drained(intx, 4000, "client at drain_timeout", "(drain_timeout)");
	double waited = now_s() - t0;
	ck_assert_msg(waited >= 1.8 && waited < 4, "cut after %.2f s, drain_timeout is 2 s", waited);
	ck_assert_msg(wait_exit(&p, 5), "still running after drain_timeout\n%s", pgv_log_tail(&p, 2000));
	ck_assert(pgv_log_contains(&p, "drain: drain_timeout (2 s) passed with 1 clients left"));
	PQfinish(a);
	pgv_stop(&p);
}
END_TEST

/* drain_timeout = 0 (the default) is no limit, and the log says so: the transaction finishes. */
START_TEST(drain_timeout_zero_waits)
{
	struct pgv p;
	pgv_start(&p, TXN "drain_timeout = 0\n", std_databases(), userlist());
	PGconn *a = admin_conn(&p);
	int intx = raw_client(&p);
	q_ok(intx, "BEGIN", NULL);
	admin_ok(a, "DRAIN", "DRAIN");
	pgv_expect_log(&p, "drain_timeout = 0: no time limit", 3);
	expect_open(intx, 2500, "client inside a transaction");
	ck_assert(pgv_running(&p));
	commit_then_exit(&p, intx, "client after its COMMIT");
	PQfinish(a);
	pgv_stop(&p);
}
END_TEST

/* DRAIN needs admin rights and takes no argument; a second DRAIN says it is under way. */
START_TEST(drain_rights)
{
	struct pgv p;
	pgv_start(&p, TXN, std_databases(), userlist());
	PGconn *s = stats_conn(&p);
	admin_err(s, "DRAIN", "08P01", "admin access needed");
	PGconn *a = admin_conn(&p);
	admin_invalid(a, "DRAIN now");
	int c = raw_client(&p);
	q_ok(c, "SELECT 'still serving'", "still serving");
	ck_assert(!pgv_log_contains(&p, "draining"));

	struct notice_log log;
	memset(&log, 0, sizeof(log));
	PQsetNoticeReceiver(a, capture_notice, &log);
	q_ok(c, "BEGIN", NULL);	/* keeps the process until the second DRAIN */
	admin_ok(a, "DRAIN", "DRAIN");
	admin_ok(a, "DRAIN", "DRAIN");
	ck_assert_int_eq(log.n, 1);
	ck_assert_str_eq(log.message, "already draining");
	commit_then_exit(&p, c, "client after its COMMIT");
	PQfinish(s);
	PQfinish(a);
	pgv_stop(&p);
}
END_TEST

/*
 * SIGTERM keeps PgBouncer's meaning (wait for clients, nobody is closed)
 * unless shutdown_drain = 1: then it drains, and a second SIGTERM does
 * not cut the drain short.
 */
START_TEST(sigterm_drains_with_shutdown_drain)
{
	struct pgv p;
	pgv_start(&p, TXN "shutdown_drain = 0\n", std_databases(), userlist());
	int idle = raw_client(&p);
	q_ok(idle, "SELECT 1", "1");
	ck_assert_int_eq(kill(p.pid, SIGTERM), 0);
	pgv_expect_log(&p, "got SIGTERM", 5);
	expect_open(idle, 700, "idle client under SHUTDOWN WAIT_FOR_CLIENTS");
	q_ok(idle, "SELECT 'waited'", "waited");
	close(idle);
	ck_assert_msg(wait_exit(&p, 5), "still running\n%s", pgv_log_tail(&p, 2000));
	ck_assert(!pgv_log_contains(&p, "draining"));
	pgv_stop(&p);

	struct pgv q;
	pgv_start(&q, TXN "shutdown_drain = 1\n", std_databases(), userlist());
	idle = raw_client(&q);
	q_ok(idle, "SELECT 1", "1");
	int intx = raw_client(&q);
	q_ok(intx, "BEGIN", NULL);
	ck_assert_int_eq(kill(q.pid, SIGTERM), 0);
	pgv_expect_log(&q, "SIGTERM: draining", 5);
	expect_drained(idle, AT_ONCE_MS, "idle client after SIGTERM", NULL);
	ck_assert_int_eq(kill(q.pid, SIGTERM), 0);
	pgv_expect_log(&q, "got SIGTERM while draining, still draining", 5);
	ck_assert(pgv_running(&q));
	q_ok(intx, "SELECT 4", "4");
	commit_then_exit(&q, intx, "client after its COMMIT");
	pgv_stop(&q);
}
END_TEST

/* ================================================================ workers */

/* Worker k's private socket directory (workers.h). */
static void worker_dir(const struct pgv *p, int k, char *buf, size_t size)
{
	snprintf(buf, size, "%s/pgvalve-%d-%d-w%d", p->dir, p->port, (int)p->pid, k);
}

/* user logged in to dbname on worker k (its private socket); NULL if it does not accept yet. */
static PGconn *worker_login(struct pgv *p, int k, const char *dbname, const char *user, const char *password)
{
	char dir[700], port[16];
	worker_dir(p, k, dir, sizeof(dir));
	snprintf(port, sizeof(port), "%d", p->port);
	const char *kw[] = { "host", "port", "dbname", "user", "password", "connect_timeout", NULL };
	const char *val[] = { dir, port, dbname, user, password, "10", NULL };
	PGconn *c = PQconnectdbParams(kw, val, 0);
	if (PQstatus(c) == CONNECTION_OK) {
		PQsetNoticeReceiver(c, quiet_notice, NULL);
		return c;
	}
	PQfinish(c);
	return NULL;
}

static PGconn *worker_conn(struct pgv *p, int k, const char *dbname, const char *user, const char *password)
{
	PGconn *c = NULL;
	/* a worker (re)started a moment ago may not listen yet: a fork, milliseconds; 10 s on a loaded machine */
	double deadline = now_s() + 10;
	while (!(c = worker_login(p, k, dbname, user, password)) && now_s() < deadline)
		sleep_ms(100);
	ck_assert_msg(c, "no login to %s on worker %d\n%s", dbname, k, pgv_log_tail(p, 2000));
	return c;
}

/* md5_user logged in to DB by hand on worker k (its private socket). */
static int worker_raw_client(struct pgv *p, int k)
{
	char dir[700];
	unsigned char key[8];
	struct raw_error err;
	worker_dir(p, k, dir, sizeof(dir));
	/* a worker (re)started a moment ago may not listen yet, on a loaded machine */
	int fd = -1;
	double deadline = now_s() + 10;
	while ((fd = raw_connect_unix(dir, p->port)) < 0 && now_s() < deadline)
		sleep_ms(100);
	ck_assert_msg(fd >= 0, "worker %d's socket in %s", k, dir);
	int rc = raw_login_fd(fd, DB, "md5_user", "md5_pass", key, &err);
	ck_assert_msg(rc == 0, "login on worker %d: rc %d %s %s", k, rc, err.sqlstate, err.message);
	return fd;
}

/*
 * workers = 2: DRAIN on worker 2's console drains worker 1 too (/ready,
 * served by worker 1, says so); each closes its clients at their
 * boundaries, and the whole instance exits.
 */
START_TEST(drain_reaches_every_worker)
{
	struct pgv p;
	int mport = start_probed(&p, "workers = 2\n", std_databases());
	PGconn *a2 = worker_conn(&p, 2, "pgbouncer", "admin_u", "admin_pass");	/* both workers are up */
	int c1 = worker_raw_client(&p, 1);
	q_ok(c1, "BEGIN", NULL);
	int i1 = worker_raw_client(&p, 1);
	q_ok(i1, "SELECT 1", "1");
	int i2 = worker_raw_client(&p, 2);
	q_ok(i2, "SELECT 1", "1");
	expect_http(mport, "/ready", 200, "ready");

	admin_ok(a2, "DRAIN", "DRAIN");
	expect_drained(i2, AT_ONCE_MS, "idle client of worker 2", NULL);
	expect_drained(i1, AT_ONCE_MS, "idle client of worker 1", NULL);
	wait_http(mport, "/ready", 503, "draining", 5);
	expect_http(mport, "/live", 200, "live");
	q_ok(c1, "SELECT 'in txn'", "in txn");
	commit_then_exit(&p, c1, "worker 1's client after its COMMIT");
	ck_assert(pgv_log_contains(&p, "[w1] SIGTERM: draining"));
	ck_assert(pgv_log_contains(&p, "[w2] DRAIN command: draining"));
	PQfinish(a2);
	pgv_stop(&p);
}
END_TEST

/*
 * workers = 2: SIGINT during a drain exits at once in every worker, the
 * one whose console asked for the drain too (a SIGTERM would not); the
 * transactions left open are cut.
 */
START_TEST(sigint_ends_a_drain)
{
	struct pgv p;
	pgv_start(&p, TXN "workers = 2\n", std_databases(), userlist());
	PGconn *a2 = worker_conn(&p, 2, "pgbouncer", "admin_u", "admin_pass");
	int t1 = worker_raw_client(&p, 1);
	q_ok(t1, "BEGIN", NULL);
	int t2 = worker_raw_client(&p, 2);
	q_ok(t2, "BEGIN", NULL);
	admin_ok(a2, "DRAIN", "DRAIN");
	pgv_expect_log(&p, "[w1] SIGTERM: draining", 5);
	ck_assert_int_eq(kill(p.pid, SIGTERM), 0);
	pgv_expect_log(&p, "[w2] got SIGTERM while draining, still draining", 5);
	ck_assert(pgv_running(&p));
	ck_assert_int_eq(kill(p.pid, SIGINT), 0);
	ck_assert_msg(wait_exit(&p, 5), "SIGINT did not end the drain\n%s", pgv_log_tail(&p, 2000));
	ck_assert(raw_wait_closed(t1, 2000) && raw_wait_closed(t2, 2000));
	close(t1);
	close(t2);
	PQfinish(a2);
	pgv_stop(&p);
}
END_TEST

/* ================================================================ probes */

/* /ready: 200, 503 from the moment PAUSE starts, 200 after RESUME, 503 draining; /live 200 throughout. */
START_TEST(ready_follows_pause_and_drain)
{
	struct pgv p;
	int mport = start_probed(&p, "metrics_auth_token = s3cret\n", std_databases());
	expect_http(mport, "/ready", 200, "ready");
	expect_http(mport, "/live", 200, "live");
	PGconn *a = admin_conn(&p);
	int intx = raw_client(&p);
	q_ok(intx, "BEGIN", NULL);
	/* PAUSE waits for the transaction: /ready says no from its start, before PAUSE has answered */
	ck_assert_int_eq(PQsendQuery(a, "PAUSE"), 1);
	wait_http(mport, "/ready", 503, "paused", 3);
	expect_http(mport, "/live", 200, "live");
	q_ok(intx, "COMMIT", NULL);
	PGresult *r;
	while ((r = PQgetResult(a)) != NULL) {
		ck_assert_int_eq(PQresultStatus(r), PGRES_COMMAND_OK);
		PQclear(r);
	}
	admin_ok(a, "RESUME", "RESUME");
	expect_http(mport, "/ready", 200, "ready");

	q_ok(intx, "BEGIN", NULL);
	admin_ok(a, "DRAIN", "DRAIN");
	expect_http(mport, "/ready", 503, "draining");
	expect_http(mport, "/live", 200, "live");
	commit_then_exit(&p, intx, "client after its COMMIT");
	PQfinish(a);
	pgv_stop(&p);
}
END_TEST

/* A login to dbname in a child process (it may wait for ever: the parent kills it). */
static pid_t background_login(struct pgv *p, const char *dbname, int worker)
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		PGconn *c;
		if (worker) {
			c = worker_login(p, worker, dbname, "md5_user", "md5_pass");
		} else {
			c = pgv_connect(p, dbname, "md5_user", "md5_pass");
		}
		_exit(c && PQstatus(c) == CONNECTION_OK ? 0 : 1);
	}
	return pid;
}

static void end_child(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/* Replaces the first `from` in p's ini with `to`. */
/*
 * /ready is 503 while the only database's last server login failed and it
 * has no server; 200 before anything was tried, and again once a server
 * logs in. /live stays 200.
 */
START_TEST(ready_503_when_no_database_reachable)
{
	struct pgv p;
	char dbs[256], dead[64], live[64];
	snprintf(dead, sizeof(dead), "port=%d", dead_port());
	snprintf(live, sizeof(live), "port=%d", pg_port_env());
	snprintf(dbs, sizeof(dbs), "elsewhere = host=127.0.0.1 %s dbname=pgvtest\n", dead);
	int mport = start_probed(&p, "server_login_retry = 1\n", dbs);
	expect_http(mport, "/ready", 200, "ready");	/* nothing tried yet */
	pid_t child = background_login(&p, "elsewhere", 0);
	wait_http(mport, "/ready", 503, "no database reachable", 5);
	expect_http(mport, "/live", 200, "live");
	expect_http(mport, "/health", 200, "OK");

	/* the database comes back (here: its address is fixed): the next login attempt makes it ready */
	pgv_ini_replace(&p, dead, live);
	pgv_reload(&p);
	wait_http(mport, "/ready", 200, "ready", 8);
	end_child(child);
	pgv_stop(&p);
}
END_TEST

/* One reachable database is enough: another failing does not make the instance unready. */
START_TEST(ready_200_while_one_database_reachable)
{
	struct pgv p;
	char dbs[512];
	snprintf(dbs, sizeof(dbs), "%selsewhere = host=127.0.0.1 port=%d dbname=pgvtest\n", std_databases(),
		 dead_port());
	int mport = start_probed(&p, "", dbs);
	int c = raw_client(&p);
	q_ok(c, "SELECT 1", "1");
	pid_t child = background_login(&p, "elsewhere", 0);
	pgv_expect_log(&p, "closing because: connect failed", 5);
	expect_http(mport, "/ready", 200, "ready");
	end_child(child);
	close(c);
	pgv_stop(&p);
}
END_TEST

/* workers = 2: no database is reachable only when every worker has found so. */
START_TEST(ready_with_workers_asks_every_worker)
{
	struct pgv p;
	char dbs[256];
	snprintf(dbs, sizeof(dbs), "elsewhere = host=127.0.0.1 port=%d dbname=pgvtest\n", dead_port());
	int mport = start_probed(&p, "workers = 2\n", dbs);
	PQfinish(worker_conn(&p, 2, "pgbouncer", "admin_u", "admin_pass"));	/* worker 2 is up */
	pid_t on1 = background_login(&p, "elsewhere", 1);
	pgv_expect_log(&p, "closing because: connect failed", 5);
	/*
	 * worker 2 publishes every second: it has tried nothing. A negative
	 * window of two publications, in which a wrong "unreachable" from
	 * worker 1 alone would show.
	 */
	sleep_ms(2500);
	expect_http(mport, "/ready", 200, "ready");
	pid_t on2 = background_login(&p, "elsewhere", 2);
	wait_http(mport, "/ready", 503, "no database reachable", 5);
	end_child(on1);
	end_child(on2);
	pgv_stop(&p);
}
END_TEST

/*
 * A flood of probe requests (bounded, loopback): more connections than the
 * endpoint takes at once, for 3 s. A client's queries meanwhile all run,
 * none slowly; the flood is logged; the probes answer afterwards.
 */
START_TEST(probe_flood_leaves_clients_alone)
{
	struct pgv p;
	int mport = start_probed(&p, "", std_databases());
	int c = raw_client(&p);
	int pipefd[2];
	ck_assert_int_eq(pipe(pipefd), 0);
	pid_t flooder = fork();
	ck_assert_int_ge(flooder, 0);
	if (flooder == 0) {
		enum { CONNS = 48 };
		static const char req[] = "GET /ready HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
		int ok = 0, bad = 0;
		double end = now_s() + 3;	/* the flood's length: pacing, the verdict is on the client's queries */
		while (now_s() < end && ok + bad < 6000) {
			int fds[CONNS];
			for (int i = 0; i < CONNS; i++) {
				fds[i] = raw_connect(mport);
				raw_send(fds[i], req, sizeof(req) - 1);
			}
			for (int i = 0; i < CONNS; i++) {
				char buf[512] = "";
				struct pollfd pfd = { .fd = fds[i], .events = POLLIN };
				ssize_t n = poll(&pfd, 1, 10000) == 1 ? read(fds[i], buf, sizeof(buf) - 1) : -1;
				if (n > 0 && strncmp(buf, "HTTP/1.1 200", 12) == 0)
					ok++;
				else
					bad++;
				close(fds[i]);
			}
		}
		int res[2] = { ok, bad };
		ssize_t w = write(pipefd[1], res, sizeof(res));
		_exit(w == sizeof(res) ? 0 : 1);
	}
	close(pipefd[1]);
	double end = now_s() + 3, worst = 0;
	int queries = 0;
	while (now_s() < end) {
		char want[32];
		snprintf(want, sizeof(want), "%d", queries);
		char sql[64];
		snprintf(sql, sizeof(sql), "SELECT %d", queries);
		double t = now_s();
		q_ok(c, sql, want);
		if (now_s() - t > worst)
			worst = now_s() - t;
		queries++;
	}
	int res[2] = { 0, 0 };
	ck_assert_int_eq(read(pipefd[0], res, sizeof(res)), (ssize_t)sizeof(res));
	int status;
	waitpid(flooder, &status, 0);
	close(pipefd[0]);
	ck_assert_msg(res[0] > 200 && res[1] == 0, "flood: %d answered 200, %d not", res[0], res[1]);
	ck_assert_msg(queries > 100 && worst < 1.0, "%d queries during the flood, the slowest %.3f s", queries, worst);
	ck_assert(pgv_log_contains(&p, "HTTP connections open, not accepting more for now"));
	expect_http(mport, "/ready", 200, "ready");
	expect_http(mport, "/live", 200, "live");
	q_ok(c, "SELECT 'after'", "after");
	close(c);
	pgv_stop(&p);
}
END_TEST

static Suite *drain_suite(void)
{
	Suite *s = suite_create("drain");
	TCase *tc = pgv_tcase_create("drain", 60);
	tcase_add_test(tc, drain_transaction_mode);
	tcase_add_test(tc, drain_serves_waiting_clients);
	tcase_add_test(tc, drain_session_mode);
	tcase_add_test(tc, drain_closes_replication_at_once_and_logins_after_grace);
	tcase_add_test(tc, drain_serves_a_new_clients_first_transaction);
	tcase_add_test(tc, drain_waits_for_a_startup_packet_on_its_way);
	tcase_add_test(tc, drain_takes_in_a_connection_held_for_its_first_bytes);
	tcase_add_test(tc, drain_timeout_cuts_the_rest);
	tcase_add_test(tc, drain_timeout_zero_waits);
	tcase_add_test(tc, drain_rights);
	tcase_add_test(tc, sigterm_drains_with_shutdown_drain);
	tcase_add_test(tc, sigint_ends_a_drain);
	tcase_add_test(tc, drain_reaches_every_worker);
	suite_add_tcase(s, tc);
	tc = pgv_tcase_create("probes", 60);
	tcase_add_test(tc, ready_follows_pause_and_drain);
	tcase_add_test(tc, ready_503_when_no_database_reachable);
	tcase_add_test(tc, ready_200_while_one_database_reachable);
	tcase_add_test(tc, ready_with_workers_asks_every_worker);
	tcase_add_test(tc, probe_flood_leaves_clients_alone);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return pgv_run_suite(drain_suite());
}
