/*
 * test_compat126.c - PgBouncer 1.26's new settings and behaviour, and the
 * behaviour PgBouncer has that pgvalve lacked (issue 30, points 1 and 2),
 * against a real PostgreSQL: one Check case per point, so that each can be
 * run on its own (CK_RUN_CASE=name) against an older binary too.
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
#include <openssl/ssl.h>

/* ================================================================ helpers */

static void direct_exec(const char *sql)
{
	PGconn *d = pg_direct();
	PGresult *r = PQexec(d, sql);
	ck_assert_msg(PQresultStatus(r) == PGRES_COMMAND_OK, "%s: %s", sql, PQerrorMessage(d));
	PQclear(r);
	PQfinish(d);
}

/* GET path from 127.0.0.1:port; the whole answer, headers included (malloc'd). */
static char *http_get_all(int port, const char *path)
{
	int fd = raw_connect(port);
	ck_assert_msg(fd >= 0, "connect to %d", port);
	char req[256];
	int n = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", path);
	ck_assert(raw_send(fd, req, (size_t)n));
	size_t cap = 1 << 16, len = 0;
	char *buf = malloc(cap);
	ck_assert_ptr_nonnull(buf);
	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		if (poll(&pfd, 1, 5000) <= 0)
			break;
		if (len + 4096 > cap) {
			cap *= 2;
			buf = realloc(buf, cap);
			ck_assert_ptr_nonnull(buf);
		}
		ssize_t got = read(fd, buf + len, cap - len - 1);
		if (got <= 0)
			break;
		len += (size_t)got;
	}
	buf[len] = '\0';
	close(fd);
	return buf;
}

/* A free port from the kernel's ephemeral range, apart from the ones the harness picks for pgvalve. */
static int ephemeral_port(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	close(fd);
	return ntohs(sa.sin_port);
}

/* A SHOW view's value in column col of the row whose column key_col is key, as a number. */
static long long show_number(PGconn *a, const char *cmd, const char *key_col, const char *key, const char *col)
{
	return atoll(show_value(a, cmd, key_col, key, col));
}

/* A StartupMessage for user and dbname on a new connection; the socket. */
static int raw_startup(int port, const char *user, const char *dbname)
{
	unsigned char pkt[512];
	size_t off = 8;
	off += (size_t)snprintf((char *)pkt + off, sizeof(pkt) - off, "user%c%s%cdatabase%c%s%c", 0, user, 0, 0, dbname, 0);
	pkt[off++] = 0;
	raw_put_u32(pkt, (uint32_t)off);
	raw_put_u32(pkt + 4, 196608);
	int fd = raw_connect(port);
	ck_assert_int_ge(fd, 0);
	ck_assert(raw_send(fd, pkt, off));
	return fd;
}

/* ================================================================ 1: version */

/* --version, SHOW VERSION, the console's server_version and the start-up log name PgBouncer 1.26.0. */
START_TEST(version_1_26)
{
	struct pgv p;
	pgv_start(&p, ADMIN_CFG, std_databases(), userlist());
	char out[700];
	snprintf(out, sizeof(out), "%s/version.out", p.dir);
	char *argv[] = { getenv("PGV_BINARY"), "--version", NULL };
	ck_assert_int_eq(run_program(argv, NULL, out, 10), 0);
	ck_assert_msg(strstr(read_file_tail(out, 4000), "(PgBouncer 1.26.0 compatible)"), "%s", read_file_tail(out, 4000));
	pgv_expect_log(&p, "(PgBouncer 1.26.0 compatible)", 5);
	PGconn *a = admin_conn(&p);
	ck_assert_msg(strstr(query_value(a, "SHOW VERSION"), "PgBouncer 1.26.0"), "%s", query_value(a, "SHOW VERSION"));
	const char *v = PQparameterStatus(a, "server_version");
	ck_assert_msg(v && strncmp(v, "1.26.0/", 7) == 0, "server_version %s", v ? v : "(none)");
	PQfinish(a);
	pgv_stop(&p);
}
END_TEST

/* ================================================================ 1: the client login counter */

/*
 * Every successful login counts, in SHOW STATS, STATS_TOTALS,
 * STATS_AVERAGES and TOTALS (the last column or row of each kind, as in
 * 1.26), in the log_stats line and on /metrics; failed logins do not.
 */
START_TEST(client_login_counter)
{
	struct pgv p;
	int mport = ephemeral_port();
	char ini[512];
	snprintf(ini, sizeof(ini), ADMIN_CFG "stats_period = 1\nmetrics_port = %d\n", mport);
	pgv_start(&p, ini, std_databases(), userlist());
	for (int i = 0; i < 3; i++)
		PQfinish(client_conn(&p));
	PGconn *bad = pgv_connect(&p, DB, "scram_user", "wrong");
	ck_assert_int_eq(PQstatus(bad), CONNECTION_BAD);
	PQfinish(bad);

	PGconn *a = admin_conn(&p);
	PGresult *r = show(a, "SHOW STATS");
	ck_assert_str_eq(PQfname(r, 12), "total_client_login_count");
	ck_assert_str_eq(PQfname(r, PQnfields(r) - 1), "avg_client_login_count");
	ck_assert_int_eq(PQnfields(r), 25);
	PQclear(r);
	ck_assert_int_eq(show_number(a, "SHOW STATS", "database", DB, "total_client_login_count"), 3);
	r = show(a, "SHOW STATS_TOTALS");
	ck_assert_str_eq(PQfname(r, PQnfields(r) - 1), "client_login_count");
	PQclear(r);
	ck_assert_int_eq(show_number(a, "SHOW STATS_TOTALS", "database", DB, "client_login_count"), 3);
	r = show(a, "SHOW STATS_AVERAGES");
	ck_assert_str_eq(PQfname(r, PQnfields(r) - 1), "avg_client_login_count");
	PQclear(r);
	r = show(a, "SHOW TOTALS");
	ck_assert_int_eq(PQntuples(r), 24);
	ck_assert_str_eq(PQgetvalue(r, 11, 0), "total_client_login_count");
	ck_assert_str_eq(PQgetvalue(r, 23, 0), "avg_client_login_count");
	ck_assert_int_ge(atoll(PQgetvalue(r, 11, 1)), 4);	/* the console's own login counts on its database */
	PQclear(r);
	PQfinish(a);

	pgv_expect_log(&p, " binds/s, ", 5);
	pgv_expect_log(&p, " client logins/s, in ", 5);
	char *m = http_get_all(mport, "/metrics");
	ck_assert_msg(strstr(m, "pgbouncer_stats_client_logins_total{database=\"" DB "\"} 3"), "%.3000s", m);
	free(m);
	pgv_stop(&p);
}
END_TEST

/* ================================================================ 1: login_notify_message */

/* The order of the messages a raw login gets up to ReadyForQuery ("RSSSKNZ"...), and the NOTICE's text. */
static void login_message_types_v(int port, uint32_t version, const char *dbname, const char *user,
				  const char *password, char *types, size_t tsize, struct raw_error *notice)
{
	int fd = raw_connect(port);
	ck_assert_int_ge(fd, 0);
	unsigned char pkt[512];
	size_t n = 8;
	/* a protocol extension no server speaks yet: NegotiateProtocolVersion names it */
	const char *kv[] = { "user", user, "database", dbname, "_pq_.pgv_test", "on" };
	for (size_t i = 0; i < (version == 196608 ? 4 : 6); i++) {
		memcpy(pkt + n, kv[i], strlen(kv[i]) + 1);
		n += strlen(kv[i]) + 1;
	}
	pkt[n++] = 0;
	uint32_t len = htonl((uint32_t)n), ver = htonl(version);
	memcpy(pkt, &len, 4);
	memcpy(pkt + 4, &ver, 4);
	ck_assert(raw_send(fd, pkt, n));
	size_t t = 0;
	for (;;) {
		unsigned char hdr[5];
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		ck_assert_int_eq(poll(&pfd, 1, 5000), 1);
		ck_assert_int_eq(recv(fd, hdr, 5, MSG_WAITALL), 5);
		uint32_t blen;
		memcpy(&blen, hdr + 1, 4);
		blen = ntohl(blen) - 4;
		static unsigned char body[65536];
		ck_assert_uint_lt(blen, sizeof(body));
		if (blen)
			ck_assert_int_eq(recv(fd, body, blen, MSG_WAITALL), (ssize_t)blen);
		if (t + 1 < tsize)
			types[t++] = (char)hdr[0];
		if (hdr[0] == 'N')
			raw_parse_error(body, blen, notice);
		if (hdr[0] == 'R' && blen >= 4 && body[3] == 3) {	/* cleartext password */
			unsigned char pw[256];
			uint32_t plen = (uint32_t)strlen(password) + 5;
			pw[0] = 'p';
			uint32_t nl = htonl(plen);
			memcpy(pw + 1, &nl, 4);
			memcpy(pw + 5, password, strlen(password) + 1);
			ck_assert(raw_send(fd, pw, plen + 1));
		}
		if (hdr[0] == 'Z' || hdr[0] == 'E')
			break;
	}
	types[t] = '\0';
	close(fd);
}

static void login_message_types(int port, const char *dbname, const char *user, const char *password, char *types,
				size_t tsize, struct raw_error *notice)
{
	login_message_types_v(port, 196608, dbname, user, password, types, tsize, notice);
}

/*
 * login_notify_message: a NOTICE after BackendKeyData, before the first
 * ReadyForQuery, for pooled clients and the console; set at run time, the
 * next login gets the new text; empty (the default), none.
 */
START_TEST(login_notify_message)
{
	struct pgv p;
	pgv_start(&p, "auth_type = plain\nadmin_users = admin_u\nlogin_notify_message = you reached a pooler\n",
		  std_databases(), userlist());
	char types[64];
	struct raw_error notice;
	memset(&notice, 0, sizeof(notice));
	login_message_types(p.port, DB, "scram_user", "scram_pass", types, sizeof(types), &notice);
	ck_assert_msg(strstr(types, "KNZ") != NULL, "messages: %s", types);
	ck_assert_str_eq(notice.severity, "NOTICE");
	ck_assert_str_eq(notice.message, "you reached a pooler");
	memset(&notice, 0, sizeof(notice));
	login_message_types(p.port, "pgbouncer", "admin_u", "admin_pass", types, sizeof(types), &notice);
	ck_assert_msg(strstr(types, "KNZ") != NULL, "console messages: %s", types);
	/* libpq hands it to the notice processor */
	PGconn *c = pgv_connect(&p, DB, "scram_user", "scram_pass");
	ck_assert_int_eq(PQstatus(c), CONNECTION_OK);
	PQfinish(c);
	PGconn *a = admin_conn(&p);
	admin_ok(a, "SET login_notify_message = ''", "SET login_notify_message=");
	PQfinish(a);
	memset(&notice, 0, sizeof(notice));
	login_message_types(p.port, DB, "scram_user", "scram_pass", types, sizeof(types), &notice);
	ck_assert_msg(strchr(types, 'N') == NULL, "a notice without login_notify_message: %s", types);
	pgv_stop(&p);
}
END_TEST

/* ================================================================ 1: pool_idle_timeout */

/* Whether SHOW POOLS has a row for database db and user user. */
static bool pools_has(PGconn *a, const char *db, const char *user)
{
	PGresult *r = show(a, "SHOW POOLS");
	bool found = find_row2(r, "database", db, "user", user) >= 0;
	PQclear(r);
	return found;
}

/*
 * pool_idle_timeout counts from when the pool last had a client or a
 * server, logs 1.26's line, and never frees the console's pool or a
 * forced-user pool kept at min_pool_size (here: its server is down).
 */
START_TEST(pool_idle_timeout_126)
{
	int hold;
	int down = pgv_refusing_port(&hold);
	char dbs[512];
	snprintf(dbs, sizeof(dbs), "%sforced = host=127.0.0.1 port=%d dbname=" DB " user=md5_user password=md5_pass "
		 "min_pool_size=1\n", std_databases(), down);
	struct pgv p;
	pgv_start(&p, ADMIN_CFG "pool_mode = transaction\npool_idle_timeout = 1\nserver_idle_timeout = 2\n"
		  "server_login_retry = 0.2\n", dbs, userlist());
	PGconn *c = client_conn(&p);
	ck_assert_str_eq(query_value(c, "SELECT 1"), "1");
	PQfinish(c);
	PGconn *a = admin_conn(&p);
	double t0 = now_s();
	while (!pools_has(a, "forced", "md5_user") && now_s() - t0 < 3)
		sleep_ms(100);	/* made at the janitor's next tick (a third of a second); 3 s on a loaded machine */
	ck_assert(pools_has(a, "forced", "md5_user"));
	/* the server stays 2 s (server_idle_timeout): the pool is in use until it goes, then idle for 1 s */
	t0 = now_s();	/* 3 s by the settings; 8 s leaves a loaded machine's janitor 5 s late */
	while (pools_has(a, DB, "scram_user") && now_s() - t0 < 8)
		sleep_ms(100);
	double took = now_s() - t0;
	ck_assert_msg(!pools_has(a, DB, "scram_user"), "not freed\n%s", pgv_log_tail(&p, 1500));
	ck_assert_msg(took >= 2.5, "freed after %.1f s, while its server was still open for 2 s", took);
	pgv_expect_log(&p, "cleaning up idle pool for user scram_user on db " DB
		       " because: pool idle timeout (age= 1s)", 1);
	ck_assert(pools_has(a, "forced", "md5_user"));
	ck_assert(pools_has(a, "pgbouncer", "pgbouncer"));
	ck_assert_int_eq(pgv_log_count(&p, "on db forced because"), 0);
	PQfinish(a);
	pgv_stop(&p);
	close(hold);
}
END_TEST

/* ================================================================ 1: query_wait_timeout per database and user */

/* Seconds until the query c sent fails; its error message in err. Fails the test if it succeeds. */
static double seconds_until_error(PGconn *c, const char *sql, char *err, size_t size)
{
	double t0 = now_s();
	ck_assert(PQsendQuery(c, sql));
	PGresult *r;
	bool failed = false;
	while ((r = PQgetResult(c))) {
		failed |= PQresultStatus(r) == PGRES_FATAL_ERROR;
		PQclear(r);
	}
	ck_assert_msg(failed, "%s did not fail", sql);
	snprintf(err, size, "%s", PQerrorMessage(c));
	return now_s() - t0;
}

/* One server per pool, held by a session client; a second client of the same pool waits until cut. */
static double wait_cut_after(struct pgv *p, const char *db, const char *user, const char *password)
{
	PGconn *holder = connect_ok(p, db, user, password);
	ck_assert_str_eq(query_value(holder, "SELECT 1"), "1");
	PGconn *waiter = connect_ok(p, db, user, password);
	PQsetNoticeReceiver(waiter, quiet_notice, NULL);
	char err[512];
	double t = seconds_until_error(waiter, "SELECT 2", err, sizeof(err));
	ck_assert_msg(strstr(err, "query_wait_timeout"), "%s", err);
	PQfinish(waiter);
	PQfinish(holder);
	return t;
}

/* query_wait_timeout: the login user's ([users]), else the database's, else the global one; -1 is "not set". */
START_TEST(query_wait_timeout_levels)
{
	char dbs[512];
	snprintf(dbs, sizeof(dbs),
		 "wq = host=127.0.0.1 port=%d dbname=" DB " pool_size=1 query_wait_timeout=1\n"
		 "wqdef = host=127.0.0.1 port=%d dbname=" DB " pool_size=1 query_wait_timeout=-1\n",
		 pg_port_env(), pg_port_env());
	struct pgv p;
	pgv_start(&p, ADMIN_CFG "query_wait_timeout = 2\n[users]\nmd5_user = query_wait_timeout=3\n"
		  "scram_user = query_wait_timeout=-1\n", dbs, userlist());
	double t = wait_cut_after(&p, "wq", "scram_user", "scram_pass");
	ck_assert_msg(t >= 0.9 && t < 1.9, "database's 1 s: cut after %.2f s", t);
	t = wait_cut_after(&p, "wq", "md5_user", "md5_pass");
	ck_assert_msg(t >= 2.9 && t < 3.9, "user's 3 s over the database's 1 s: cut after %.2f s", t);
	t = wait_cut_after(&p, "wqdef", "scram_user", "scram_pass");
	ck_assert_msg(t >= 1.9 && t < 2.9, "global 2 s: cut after %.2f s", t);
	pgv_stop(&p);
}
END_TEST

/* ================================================================ 1: query_timeout counts only while a query runs */

/*
 * A client idle inside a transaction for longer than query_timeout keeps
 * its connection (idle_transaction_timeout is for that); a query running
 * longer is cut.
 */
START_TEST(query_timeout_only_running)
{
	struct pgv p;
	pgv_start(&p, ADMIN_CFG "pool_mode = transaction\nquery_timeout = 1\n", std_databases(), userlist());
	PGconn *c = client_conn(&p);
	exec_ok(c, "BEGIN");
	ck_assert_str_eq(query_value(c, "SELECT 1"), "1");
	/* idle in the transaction past query_timeout (1 s), twice: a lower bound, which a loaded machine only lengthens */
	sleep_ms(2500);
	ck_assert_str_eq(query_value(c, "SELECT 2"), "2");
	exec_ok(c, "COMMIT");
	/* extended protocol, idle between Sync and the next Bind inside the transaction */
	exec_ok(c, "BEGIN");
	PGresult *r = PQexecParams(c, "SELECT $1::int", 1, NULL, (const char *const[]){ "3" }, NULL, NULL, 0);
	ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
	PQclear(r);
	sleep_ms(2500);	/* the same lower bound */
	r = PQexecParams(c, "SELECT $1::int", 1, NULL, (const char *const[]){ "4" }, NULL, NULL, 0);
	ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "%s", PQerrorMessage(c));
	PQclear(r);
	exec_ok(c, "COMMIT");
	char err[512];
	double t = seconds_until_error(c, "SELECT pg_sleep(10)", err, sizeof(err));
	ck_assert_msg(t < 3, "a running query was cut after %.1f s", t);
	ck_assert_msg(strstr(err, "query timeout"), "%s", err);
	PQfinish(c);
	pgv_stop(&p);
}
END_TEST

/* ================================================================ 1: COPY in transaction mode */

/* The rows of pgv_copy126 as "1,2,3" (static buffer). */
static const char *copy_rows(PGconn *c)
{
	return query_value(c, "SELECT coalesce(string_agg(i::text, ',' ORDER BY i), '') FROM pgv_copy126");
}

/*
 * COPY FROM STDIN with rows sent in pieces, outside a transaction block:
 * all arrive. extended: through PQexecParams, whose Sync reaches
 * PostgreSQL in copy mode, which ignores it.
 */
static void copy_in_pieces(PGconn *c, int first, int n, bool extended)
{
	PGresult *r = extended ? PQexecParams(c, "COPY pgv_copy126(i) FROM STDIN", 0, NULL, NULL, NULL, NULL, 0) :
		PQexec(c, "COPY pgv_copy126(i) FROM STDIN");
	ck_assert_int_eq(PQresultStatus(r), PGRES_COPY_IN);
	PQclear(r);
	for (int i = first; i < first + n; i++) {
		char row[32];
		int len = snprintf(row, sizeof(row), "%d\n", i);
		ck_assert_int_eq(PQputCopyData(c, row, len), 1);
		ck_assert_int_eq(PQflush(c), 0);
		sleep_ms(100);	/* pacing: each row its own packet */
	}
	ck_assert_int_eq(PQputCopyEnd(c, NULL), 1);
	r = PQgetResult(c);
	ck_assert_msg(PQresultStatus(r) == PGRES_COMMAND_OK, "%s", PQerrorMessage(c));
	PQclear(r);
	ck_assert_ptr_null(PQgetResult(c));
}

/*
 * A bad row: PostgreSQL answers ErrorResponse and ReadyForQuery before
 * the client's CopyDone, which arrives late. The late CopyData and
 * CopyDone must reach that server (which ignores them), not start a
 * transaction on another one, and the server must go back to the pool.
 */
static void copy_error_before_copy_done(PGconn *c)
{
	ck_assert(PQsendQuery(c, "COPY pgv_copy126(i) FROM STDIN"));
	PGresult *r = PQgetResult(c);
	ck_assert_int_eq(PQresultStatus(r), PGRES_COPY_IN);
	PQclear(r);
	ck_assert_int_eq(PQputCopyData(c, "x\n", 2), 1);
	ck_assert_int_eq(PQflush(c), 0);
	/* the error and ReadyForQuery arrive meanwhile (if later on a loaded machine, the check is weaker, not wrong) */
	sleep_ms(700);
	ck_assert_int_eq(PQputCopyData(c, "5\n", 2), 1);
	ck_assert_int_eq(PQputCopyEnd(c, NULL), 1);
	r = PQgetResult(c);
	ck_assert_int_eq(PQresultStatus(r), PGRES_FATAL_ERROR);
	ck_assert_msg(strstr(PQerrorMessage(c), "invalid input syntax"), "%s", PQerrorMessage(c));
	PQclear(r);
	ck_assert_ptr_null(PQgetResult(c));
}

/*
 * COPY FROM STDIN in transaction pooling outside BEGIN/COMMIT works, with
 * the data in pieces; after a COPY that failed before its CopyDone the
 * client goes on and the pool's one server serves others (no stuck server,
 * no late COPY message on another server).
 */
START_TEST(copy_transaction_mode)
{
	struct pgv p;
	pgv_start(&p, ADMIN_CFG "pool_mode = transaction\ndefault_pool_size = 1\nquery_wait_timeout = 3\n",
		  std_databases(), userlist());
	PGconn *c = client_conn(&p);
	exec_ok(c, "DROP TABLE IF EXISTS pgv_copy126");
	exec_ok(c, "CREATE TABLE pgv_copy126 (i int)");
	copy_in_pieces(c, 1, 3, false);
	ck_assert_str_eq(copy_rows(c), "1,2,3");
	PGconn *other = client_conn(&p);
	copy_in_pieces(c, 10, 2, true);
	ck_assert_str_eq(query_value(other, "SELECT 'served after an extended COPY'"), "served after an extended COPY");
	/* the Sync PostgreSQL ignored in copy mode leaves no awaited answer behind for named statements */
	for (int i = 0; i < 2; i++) {
		PGconn *who = i ? other : c;
		PGresult *r = PQprepare(who, "after_copy", "SELECT 41 + 1", 0, NULL);
		ck_assert_msg(PQresultStatus(r) == PGRES_COMMAND_OK, "%s", PQerrorMessage(who));
		PQclear(r);
		r = PQexecPrepared(who, "after_copy", 0, NULL, NULL, NULL, 0);
		ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "%s", PQerrorMessage(who));
		ck_assert_str_eq(PQgetvalue(r, 0, 0), "42");
		PQclear(r);
	}
	exec_ok(c, "DELETE FROM pgv_copy126 WHERE i >= 10");

	copy_error_before_copy_done(c);
	ck_assert_str_eq(query_value(other, "SELECT 'other client served'"), "other client served");
	ck_assert_str_eq(query_value(c, "SELECT 7"), "7");
	ck_assert_str_eq(copy_rows(other), "1,2,3");

	/* the same inside a transaction block, then ROLLBACK */
	exec_ok(c, "BEGIN");
	copy_error_before_copy_done(c);
	exec_ok(c, "ROLLBACK");
	ck_assert_str_eq(query_value(other, "SELECT 'served again'"), "served again");
	ck_assert_str_eq(query_value(c, "SELECT 8"), "8");
	copy_in_pieces(c, 4, 2, false);
	ck_assert_str_eq(copy_rows(other), "1,2,3,4,5");
	exec_ok(c, "DROP TABLE pgv_copy126");
	PQfinish(other);
	PQfinish(c);
	/* PQfinish does not wait for pgvalve: its close lines come a moment later */
	/* 50 x 100 ms: 5 s for two log lines written at once */
	for (int i = 0; i < 50 && pgv_log_count(&p, "closing because: client close request") < 2; i++)
		sleep_ms(100);
	/* the one server served everything: none was closed or opened again */
	ck_assert_int_eq(pgv_log_count(&p, "new connection to server"), 1);
	ck_assert_int_eq(pgv_log_count(&p, "closing because: client close request"), 2);
	ck_assert_int_eq(pgv_log_count(&p, "closing because"), 2);
	pgv_stop(&p);
}
END_TEST

/* ================================================================ 1: passwords up to 65,530 bytes */

#define LONG_PW_LEN 65530	/* the longest a PasswordMessage to PostgreSQL can carry */

/* A password of LONG_PW_LEN bytes of c (static buffer per c). */
static const char *long_password(char c)
{
	static char pw[2][LONG_PW_LEN + 1];
	char *p = pw[c == 'x' ? 0 : 1];
	memset(p, c, LONG_PW_LEN);
	p[LONG_PW_LEN] = '\0';
	return p;
}

/*
 * A role whose password is 65,530 bytes (a cloud IAM token): the client
 * sends it in clear (a PasswordMessage far over pkt_buf), pgvalve checks it
 * against auth_file, then against an auth_query answer of that size, and
 * logs in to PostgreSQL with it (SCRAM).
 */
START_TEST(long_password_login)
{
	static char sql[2 * LONG_PW_LEN + 128], users[2 * LONG_PW_LEN + 2048];
	direct_exec("DROP ROLE IF EXISTS pgv_longpw");
	snprintf(sql, sizeof(sql), "CREATE ROLE pgv_longpw LOGIN PASSWORD '%s'", long_password('x'));
	direct_exec(sql);
	snprintf(users, sizeof(users), "%s\"pgv_longpw\" \"%s\"\n", userlist(), long_password('x'));
	struct pgv p;
	pgv_start(&p, "auth_type = plain\npkt_buf = 512\n", std_databases(), users);
	PGconn *c = pgv_connect(&p, DB, "pgv_longpw", long_password('x'));
	ck_assert_msg(PQstatus(c) == CONNECTION_OK, "auth_file: %s\n%s", PQerrorMessage(c), pgv_log_tail(&p, 1500));
	ck_assert_str_eq(query_value(c, "SELECT current_user"), "pgv_longpw");
	PQfinish(c);
	c = pgv_connect(&p, DB, "pgv_longpw", long_password('y'));
	ck_assert_int_eq(PQstatus(c), CONNECTION_BAD);
	ck_assert_msg(strstr(PQerrorMessage(c), "password authentication failed"), "%s", PQerrorMessage(c));
	PQfinish(c);
	pgv_stop(&p);

	/* the same password as an auth_query answer */
	char ini[512];
	snprintf(ini, sizeof(ini), "auth_type = plain\nauth_user = md5_user\n"
		 "auth_query = SELECT $1::text, repeat('x', %d)\n", LONG_PW_LEN);
	pgv_start(&p, ini, std_databases(), userlist());
	c = pgv_connect(&p, DB, "pgv_longpw", long_password('x'));
	ck_assert_msg(PQstatus(c) == CONNECTION_OK, "auth_query: %s\n%s", PQerrorMessage(c), pgv_log_tail(&p, 1500));
	ck_assert_str_eq(query_value(c, "SELECT current_user"), "pgv_longpw");
	PQfinish(c);
	pgv_stop(&p);
	direct_exec("DROP ROLE pgv_longpw");
}
END_TEST

/* ================================================================ 2: a refused server login */

/* pgv_pwrole's password in PostgreSQL (ALTER ROLE over the superuser's socket). */
static void set_role_password(const char *pw)
{
	char sql[200];
	snprintf(sql, sizeof(sql), "ALTER ROLE pgv_pwrole PASSWORD '%s'", pw);
	direct_exec(sql);
}

/* A client of pwdb in session mode, logged in; its first query will need a server of its own. */
static PGconn *pwdb_client(struct pgv *p)
{
	PGconn *c = connect_ok(p, "pwdb", "scram_user", "scram_pass");
	PQsetNoticeReceiver(c, quiet_notice, NULL);
	return c;
}

/*
 * The role's password is changed in PostgreSQL while pgvalve holds the old
 * one: a new server login is refused. Every client queued for the pool
 * gets PostgreSQL's message and SQLSTATE at once, unless the pool still
 * has a server that can serve them; a server marked to close (RECONNECT)
 * does not count.
 */
START_TEST(refused_login_fails_queue)
{
	direct_exec("DROP ROLE IF EXISTS pgv_pwrole");
	direct_exec("CREATE ROLE pgv_pwrole LOGIN PASSWORD 'right'");
	char dbs[512];
	snprintf(dbs, sizeof(dbs), "pwdb = host=127.0.0.1 port=%d dbname=" DB " user=pgv_pwrole password=right "
		 "pool_size=3\n", pg_port_env());
	struct pgv p;
	pgv_start(&p, ADMIN_CFG "server_login_retry = 0.5\nquery_wait_timeout = 10\n", dbs, userlist());
	PGconn *holder = pwdb_client(&p);
	ck_assert_str_eq(query_value(holder, "SELECT current_user"), "pgv_pwrole");
	set_role_password("changed");

	/* the holder's server can still serve the queue: the queued client keeps waiting */
	PGconn *waiter = pwdb_client(&p);
	ck_assert(PQsendQuery(waiter, "SELECT 'waited'"));
	pgv_expect_log(&p, "password authentication failed for user \"pgv_pwrole\"", 5);
	still_waiting(waiter, 1000, "the queued client");
	PQfinish(holder);	/* its server goes back to the pool and takes the queued client */
	PGresult *r = result_within(waiter, 5000, "the queued client");
	ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
	PQclear(r);
	PQfinish(waiter);

	/* RECONNECT: the pool's one server is retiring, so a refused login fails the whole queue */
	holder = pwdb_client(&p);
	ck_assert_str_eq(query_value(holder, "SELECT 1"), "1");
	PGconn *a = admin_conn(&p);
	admin_ok(a, "RECONNECT pwdb", "RECONNECT");
	PGconn *w1 = pwdb_client(&p), *w2 = pwdb_client(&p);
	double t0 = now_s();
	ck_assert(PQsendQuery(w1, "SELECT 1"));
	ck_assert(PQsendQuery(w2, "SELECT 2"));
	PGconn *ws[] = { w1, w2 };
	for (int i = 0; i < 2; i++) {
		r = result_within(ws[i], 5000, "a queued client");
		ck_assert_ptr_nonnull(r);
		ck_assert_int_eq(PQresultStatus(r), PGRES_FATAL_ERROR);
		ck_assert_str_eq(PQresultErrorField(r, PG_DIAG_SQLSTATE), "28P01");
		ck_assert_msg(strstr(PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY),
				     "password authentication failed for user \"pgv_pwrole\""), "%s",
			      PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY));
		PQclear(r);
		PQfinish(ws[i]);
	}
	ck_assert_msg(now_s() - t0 < 3, "the queue was failed after %.1f s", now_s() - t0);
	PQfinish(holder);
	PQfinish(a);
	pgv_stop(&p);
	direct_exec("DROP ROLE pgv_pwrole");
}
END_TEST

/*
 * A login failure is cached for server_login_retry; RECONNECT, and a SET of
 * a server TLS setting, forget it: once the password is put right, the
 * next client gets a fresh server at once.
 */
START_TEST(reconnect_forgets_cached_failure)
{
	direct_exec("DROP ROLE IF EXISTS pgv_pwrole");
	direct_exec("CREATE ROLE pgv_pwrole LOGIN PASSWORD 'changed'");
	char dbs[512];
	snprintf(dbs, sizeof(dbs), "pwdb = host=127.0.0.1 port=%d dbname=" DB " user=pgv_pwrole password=right\n",
		 pg_port_env());
	const char *fixes[] = { "RECONNECT pwdb", "SET server_tls_sslmode = 'allow'" };
	const char *tags[] = { "RECONNECT", "SET server_tls_sslmode=allow" };
	for (int i = 0; i < 2; i++) {
		struct pgv p;
		pgv_start(&p, ADMIN_CFG "server_login_retry = 60\n", dbs, userlist());
		PGconn *a = admin_conn(&p);
		struct raw_error err;
		memset(&err, 0, sizeof(err));
		ck_assert_int_eq(raw_login(p.port, "pwdb", "md5_user", "md5_pass", &err), -1);
		ck_assert_msg(strstr(err.message, "password authentication failed"), "%s", err.message);
		memset(&err, 0, sizeof(err));
		ck_assert_int_eq(raw_login(p.port, "pwdb", "md5_user", "md5_pass", &err), -1);
		ck_assert_msg(strstr(err.message, "server login has been failing, cached error"), "%s", err.message);
		set_role_password("right");
		admin_ok(a, fixes[i], tags[i]);
		PGconn *c = pgv_connect(&p, "pwdb", "md5_user", "md5_pass");
		ck_assert_msg(PQstatus(c) == CONNECTION_OK, "after %s: %s", fixes[i], PQerrorMessage(c));
		ck_assert_str_eq(query_value(c, "SELECT current_user"), "pgv_pwrole");
		PQfinish(c);
		set_role_password("changed");
		PQfinish(a);
		pgv_stop(&p);
	}
	direct_exec("DROP ROLE pgv_pwrole");
}
END_TEST

/* ================================================================ 2: query_timeout bounds a wait */

/*
 * query_timeout, and then query_wait_timeout, bound a client's wait for a
 * server: a login waiting for a server still connecting (it accepted TCP,
 * never answers) and a query queued behind a busy pool are cut with
 * query_timeout (08P01).
 */
START_TEST(query_timeout_bounds_wait)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);
	int mute = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(mute, 0);
	ck_assert_int_eq(bind(mute, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(mute, 16), 0);	/* connects complete in the backlog; nothing is ever answered */
	ck_assert_int_eq(getsockname(mute, (struct sockaddr *)&sa, &len), 0);
	char dbs[512];
	snprintf(dbs, sizeof(dbs), "%smute = host=127.0.0.1 port=%d dbname=" DB "\n"
		 "one = host=127.0.0.1 port=%d dbname=" DB " pool_size=1\n", std_databases(), ntohs(sa.sin_port),
		 pg_port_env());
	struct pgv p;
	pgv_start(&p, ADMIN_CFG "query_timeout = 1\nquery_wait_timeout = 30\nserver_connect_timeout = 30\n", dbs,
		  userlist());
	struct raw_error err;
	memset(&err, 0, sizeof(err));
	double t0 = now_s();
	ck_assert_int_eq(raw_login(p.port, "mute", "md5_user", "md5_pass", &err), -1);
	double t = now_s() - t0;
	ck_assert_str_eq(err.message, "query_timeout");
	ck_assert_str_eq(err.sqlstate, "08P01");
	ck_assert_msg(t >= 0.9 && t < 3, "cut after %.1f s", t);

	PGconn *holder = connect_ok(&p, "one", "md5_user", "md5_pass");
	exec_ok(holder, "BEGIN");
	PGconn *waiter = connect_ok(&p, "one", "md5_user", "md5_pass");
	PQsetNoticeReceiver(waiter, quiet_notice, NULL);
	char msg[512];
	t = seconds_until_error(waiter, "SELECT 1", msg, sizeof(msg));
	ck_assert_msg(strstr(msg, "query_timeout"), "%s", msg);
	ck_assert_msg(t >= 0.9 && t < 3, "cut after %.1f s", t);
	PQfinish(waiter);
	PQfinish(holder);
	pgv_stop(&p);
	close(mute);
}
END_TEST

/* ================================================================ 1: NegotiateProtocolVersion once */

/* Occurrences of c in s. */
static int count_char(const char *s, char c)
{
	int n = 0;
	for (; *s; s++)
		n += *s == c;
	return n;
}

/*
 * A client asking for protocol 3.2 with a _pq_ option gets exactly one
 * NegotiateProtocolVersion, first, even when its login waits: for
 * auth_query on a cold pool, then for the pool's first server.
 */
START_TEST(negotiate_protocol_once)
{
	char users[256], md5[40];
	md5_secret("md5_user", "md5_pass", md5);
	snprintf(users, sizeof(users), "\"md5_user\" \"%s\"\n", md5);
	struct pgv p;
	pgv_start(&p, "auth_type = plain\nauth_user = md5_user\nauth_query = SELECT $1::text, 'scram_pass'::text\n",
		  std_databases(), users);
	char types[64];
	struct raw_error notice;
	memset(&notice, 0, sizeof(notice));
	login_message_types_v(p.port, 196610, DB, "scram_user", "scram_pass", types, sizeof(types), &notice);
	ck_assert_msg(types[0] == 'v' && count_char(types, 'v') == 1 && types[strlen(types) - 1] == 'Z',
		      "messages: %s", types);
	/* and again on a warm pool */
	login_message_types_v(p.port, 196610, DB, "scram_user", "scram_pass", types, sizeof(types), &notice);
	ck_assert_msg(types[0] == 'v' && count_char(types, 'v') == 1 && types[strlen(types) - 1] == 'Z',
		      "messages: %s", types);
	pgv_stop(&p);
}
END_TEST

/* ================================================================ 1: gone in 1.26 */

/*
 * PgBouncer 1.26 dropped the online restart: -R and --reboot are unknown
 * options, SUSPEND and SHOW FDS unknown console commands; SHOW STATE still
 * has its suspended row, always "no".
 */
START_TEST(gone_in_126)
{
	struct pgv p;
	pgv_start(&p, ADMIN_CFG, std_databases(), userlist());
	const char *opts[] = { "-R", "--reboot" };
	for (int i = 0; i < 2; i++) {
		char out[700];
		snprintf(out, sizeof(out), "%s/reboot%d.out", p.dir, i);
		char *argv[] = { getenv("PGV_BINARY"), (char *)opts[i], p.ini, NULL };
		ck_assert_int_eq(run_program(argv, NULL, out, 10), 1);
		ck_assert_msg(strstr(read_file_tail(out, 8000), i ? "unrecognized option '--reboot'" :
				     "invalid option -- 'R'"), "%s", read_file_tail(out, 8000));
	}
	PGconn *a = admin_conn(&p);
	admin_invalid(a, "SUSPEND");
	admin_invalid(a, "SHOW FDS");
	ck_assert_str_eq(state_value(a, "suspended"), "no");
	PGconn *c = client_conn(&p);
	ck_assert_str_eq(query_value(c, "SELECT 'still serving'"), "still serving");
	PQfinish(c);
	PQfinish(a);
	pgv_stop(&p);
}
END_TEST

/* ================================================================ 1: the 1.26 security fixes' classes */

/*
 * SCRAM as a client speaks it, up to pgvalve's server-first-message, then
 * client_final (NULL: the usual one with the server's nonce) and the
 * ErrorResponse it earns into err. False if pgvalve answered anything else.
 */
static bool scram_client_final_refused(int port, const char *client_final, struct raw_error *err)
{
	unsigned char pkt[512], body[2048];
	size_t len = 0;
	char type = 0;
	int fd = raw_startup(port, "scram_user", DB);
	ck_assert(raw_read_message(fd, &type, body, sizeof(body), &len, 5000) && type == 'R' && raw_get_u32(body) == 10);
	static const char first[] = "n,,n=,r=pgv126clientnonce";
	size_t off = (size_t)snprintf((char *)pkt, sizeof(pkt), "SCRAM-SHA-256") + 1;
	raw_put_u32(pkt + off, sizeof(first) - 1);
	memcpy(pkt + off + 4, first, sizeof(first) - 1);
	raw_send_password_message(fd, pkt, off + 4 + sizeof(first) - 1);
	ck_assert(raw_read_message(fd, &type, body, sizeof(body), &len, 5000) && type == 'R' && raw_get_u32(body) == 11);
	const char *sfirst = (const char *)body + 4, *sp = strstr(sfirst, ",s=");
	ck_assert_ptr_nonnull(sp);
	char final[600];
	int n = client_final ? snprintf(final, sizeof(final), "%s", client_final) :
		snprintf(final, sizeof(final), "c=biws,r=%.*s,p=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
			 (int)(sp - sfirst - 2), sfirst + 2);
	raw_send_password_message(fd, final, (size_t)n);
	bool refused = raw_read_message(fd, &type, body, sizeof(body), &len, 5000) && type == 'E';
	if (refused)
		raw_parse_error(body, len, err);
	ck_assert(raw_wait_closed(fd, 3000));
	close(fd);
	return refused;
}

/*
 * The classes of PgBouncer 1.25.2's and 1.26.1's security fixes, tried on
 * pgvalve: a SCRAM client-final-message without the nonce (or with a
 * foreign one, or attributes out of order) is refused as a failed SASL
 * login; packet lengths past every limit (above 2^31, above
 * max_packet_size, a PasswordMessage over 65,535 bytes) close that
 * connection at the header, before any buffer grows, and
 * max_packet_size cannot be set above 2^31 - 1. Nothing else is disturbed.
 * (The iteration count a server asks for: test_auth's
 * server_scram_absurd_iterations.)
 */
START_TEST(security_fix_classes)
{
	struct pgv p;
	pgv_start(&p, ADMIN_CFG "auth_type = scram-sha-256\nmax_packet_size = 100000\n", std_databases(), userlist());
	static const char *const finals[] = {
		"c=biws,p=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",				/* no nonce */
		"c=biws,r=,p=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",			/* empty nonce */
		"c=biws,r=pgv126clientnonceFORGED,p=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",	/* not the server's */
		"r=pgv126clientnonce,c=biws,p=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",	/* out of order */
		"c=biws,r=pgv126clientnonce",							/* no proof */
		NULL,										/* a wrong proof */
	};
	for (size_t i = 0; i < ARRAY_LEN(finals); i++) {
		struct raw_error err;
		memset(&err, 0, sizeof(err));
		ck_assert_msg(scram_client_final_refused(p.port, finals[i], &err), "client-final %zu not refused", i);
		ck_assert_msg(strcmp(err.sqlstate, "08P01") == 0 || strcmp(err.sqlstate, "28P01") == 0,
			      "client-final %zu: %s %s", i, err.sqlstate, err.message);
	}

	/* lengths: a startup packet and a typed message above 2^31, a message above max_packet_size */
	unsigned char huge_startup[8];
	raw_put_u32(huge_startup, 0x80000001u);
	raw_put_u32(huge_startup + 4, 196608);
	int fd = raw_connect(p.port);
	ck_assert(raw_send(fd, huge_startup, sizeof(huge_startup)));
	ck_assert(raw_wait_closed(fd, 3000));
	close(fd);
	unsigned char body[2048];
	size_t len;
	char type;
	fd = raw_startup(p.port, "scram_user", DB);
	ck_assert(raw_read_message(fd, &type, body, sizeof(body), &len, 5000) && type == 'R');
	unsigned char huge_password[5] = { 'p' };
	raw_put_u32(huge_password + 1, 0xFFFFFFF0u);
	ck_assert(raw_send(fd, huge_password, sizeof(huge_password)));
	ck_assert(raw_wait_closed(fd, 3000));
	close(fd);
	fd = raw_startup(p.port, "scram_user", DB);
	ck_assert(raw_read_message(fd, &type, body, sizeof(body), &len, 5000) && type == 'R');
	raw_put_u32(huge_password + 1, 65536 + 4);	/* a password message longer than PostgreSQL takes */
	ck_assert(raw_send(fd, huge_password, sizeof(huge_password)));
	ck_assert(raw_wait_closed(fd, 3000));
	close(fd);
	PGconn *c = client_conn(&p);
	unsigned char big_query[5] = { 'Q' };
	raw_put_u32(big_query + 1, 100000 + 4);
	ck_assert(raw_send(PQsocket(c), big_query, sizeof(big_query)));
	PGresult *r = PQgetResult(c);
	ck_assert_int_eq(PQresultStatus(r), PGRES_FATAL_ERROR);
	PQclear(r);
	PQfinish(c);

	PGconn *a = admin_conn(&p);
	admin_err(a, "SET max_packet_size = 2147483649", "08P01", "SET failed");
	ck_assert_str_eq(config_value(a, "max_packet_size"), "100000");
	PQfinish(a);
	c = client_conn(&p);
	ck_assert_str_eq(query_value(c, "SELECT 'still serving'"), "still serving");
	PQfinish(c);
	pgv_stop(&p);
}
END_TEST

/* ================================================================ 1: OpenSSL errors in the log */

/* pgvalve with client TLS allowed (the harness's server certificate), then extra settings. */
static void start_with_client_tls(struct pgv *p, const char *extra)
{
	const char *certs = getenv("PGV_TEST_CERTDIR");
	ck_assert_ptr_nonnull(certs);
	char ini[1024];
	snprintf(ini, sizeof(ini), ADMIN_CFG "client_tls_sslmode = allow\nclient_tls_key_file = %s/server.key\n"
		 "client_tls_cert_file = %s/server.crt\n%s", certs, certs, extra);
	pgv_start(p, ini, std_databases(), userlist());
}

/* A libpq client over TLS (sslmode=require and the extra conninfo). */
static PGconn *tls_client(struct pgv *p, const char *extra)
{
	char conninfo[512];
	snprintf(conninfo, sizeof(conninfo), "host=127.0.0.1 port=%d dbname=" DB " user=md5_user password=md5_pass "
		 "sslmode=require %s", p->port, extra);
	return PQconnectdb(conninfo);
}

/*
 * As PgBouncer 1.26 logs them: a TLS client that hangs up without
 * close_notify after the handshake is an ordinary "client unexpected eof"
 * (no warning, no OpenSSL error); a TLS file that cannot be read is
 * "TLS setup failed: ..." with the system's reason.
 */
START_TEST(tls_errors_logged)
{
	struct pgv p;
	start_with_client_tls(&p, "");
	PGconn *c = tls_client(&p, "");
	ck_assert_msg(PQstatus(c) == CONNECTION_OK, "%s", PQerrorMessage(c));
	ck_assert(PQsslInUse(c));
	ck_assert_str_eq(query_value(c, "SELECT 1"), "1");
	shutdown(PQsocket(c), SHUT_RDWR);	/* gone without a TLS close_notify */
	pgv_expect_log(&p, "closing because: client unexpected eof", 5);
	PQfinish(c);
	ck_assert_msg(pgv_log_count(&p, "WARNING") == 0 && pgv_log_count(&p, "ERROR") == 0, "%s",
		      pgv_log_tail(&p, 2000));

	PGconn *a = admin_conn(&p);
	exec_ok(a, "SET client_tls_cert_file = '/nonexistent/pgv126.crt'");
	pgv_expect_log(&p, "TLS setup failed: failed to load certificate file \"/nonexistent/pgv126.crt\": error:", 5);
	pgv_expect_log(&p, "No such file or directory", 1);
	PQfinish(a);
	pgv_stop(&p);
}
END_TEST

/* ================================================================ 2: server TLS, verify-full */

/* Whether a login to dbname as md5_user works, with TLS to the server; the error otherwise. */
static bool tls_login_works(struct pgv *p, const char *dbname, char *err, size_t size)
{
	PGconn *c = pgv_connect(p, dbname, "md5_user", "md5_pass");
	PGresult *r = PQexec(c, "SELECT ssl::text FROM pg_stat_ssl WHERE pid = pg_backend_pid()");
	bool ok = PQresultStatus(r) == PGRES_TUPLES_OK && strcmp(PQgetvalue(r, 0, 0), "true") == 0;
	snprintf(err, size, "%s", ok ? "" : PQerrorMessage(c));
	PQclear(r);
	PQfinish(c);
	return ok;
}

/*
 * server_tls_sslmode = verify-full with a host list checks each
 * connection's certificate against the entry it reached (the whole
 * "host=a,b" string is no host name); without server_tls_ca_file the
 * system's CA store is used (here SSL_CERT_FILE names the test CA: without
 * it, the test CA is unknown and the login fails on the certificate).
 */
START_TEST(verify_full_host_list)
{
	const char *certs = getenv("PGV_TEST_CERTDIR");
	ck_assert_ptr_nonnull(certs);
	char dbs[512], ini[512], err[512];
	snprintf(dbs, sizeof(dbs), "multi = host=127.0.0.1,localhost port=%d dbname=" DB "\n", pg_port_env());
	snprintf(ini, sizeof(ini), "auth_type = md5\npool_mode = transaction\nserver_tls_sslmode = verify-full\n"
		 "server_tls_ca_file = %s/ca.crt\nserver_lifetime = 0\n", certs);
	struct pgv p;
	pgv_start(&p, ini, dbs, userlist());
	for (int i = 0; i < 4; i++)	/* round robin: both entries, each server used once */
		ck_assert_msg(tls_login_works(&p, "multi", err, sizeof(err)), "login %d: %s\n%s", i, err,
			      pgv_log_tail(&p, 1500));
	pgv_stop(&p);

	snprintf(ini, sizeof(ini), "auth_type = md5\nserver_tls_sslmode = verify-full\n");
	char cafile[600];
	snprintf(cafile, sizeof(cafile), "%s/ca.crt", certs);
	setenv("SSL_CERT_FILE", cafile, 1);
	pgv_start(&p, ini, dbs, userlist());
	ck_assert_msg(tls_login_works(&p, "multi", err, sizeof(err)), "system store with the test CA: %s\n%s", err,
		      pgv_log_tail(&p, 1500));
	pgv_stop(&p);
	unsetenv("SSL_CERT_FILE");
	setenv("SSL_CERT_FILE", "/nonexistent/pgv126-ca.crt", 1);
	pgv_start(&p, ini, dbs, userlist());
	ck_assert(!tls_login_works(&p, "multi", err, sizeof(err)));
	pgv_expect_log(&p, "certificate verify failed", 5);
	pgv_stop(&p);
	unsetenv("SSL_CERT_FILE");
}
END_TEST

/*
 * A fake server for SNI: answers each SSLRequest with 'S', completes the
 * TLS handshake with the harness's server certificate and writes the name
 * the client sent (or "-" for none) as one line to out_fd, then hangs up.
 * Runs in a forked child until killed.
 */
static void sni_recorder(int listen_fd, int out_fd)
{
	const char *certs = getenv("PGV_TEST_CERTDIR");
	char crt[600], key[600];
	snprintf(crt, sizeof(crt), "%s/server.crt", certs);
	snprintf(key, sizeof(key), "%s/server.key", certs);
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
	if (!ctx || SSL_CTX_use_certificate_chain_file(ctx, crt) != 1 ||
	    SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1)
		_exit(2);
	for (;;) {
		int fd = accept(listen_fd, NULL, NULL);
		unsigned char req[8];
		if (fd < 0)
			_exit(1);
		if (recv(fd, req, 8, MSG_WAITALL) == 8 && raw_get_u32(req + 4) == 80877103 && raw_send(fd, "S", 1)) {
			SSL *ssl = SSL_new(ctx);
			SSL_set_fd(ssl, fd);
			if (SSL_accept(ssl) == 1) {
				const char *name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
				dprintf(out_fd, "%s\n", name ? name : "-");
			}
			SSL_free(ssl);
		}
		close(fd);
	}
}

/*
 * SNI names the entry of the host list a connection reached: nothing for
 * an address, the name for a name; never the whole "a,b" list.
 */
START_TEST(sni_per_host)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);
	int lfd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(lfd, 0);
	ck_assert_int_eq(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(lfd, 16), 0);
	ck_assert_int_eq(getsockname(lfd, (struct sockaddr *)&sa, &len), 0);
	int pipefd[2];
	ck_assert_int_eq(pipe(pipefd), 0);
	pid_t rec = fork();
	ck_assert_int_ge(rec, 0);
	if (rec == 0) {
		close(pipefd[0]);
		sni_recorder(lfd, pipefd[1]);
	}
	close(lfd);
	close(pipefd[1]);
	char dbs[256];
	snprintf(dbs, sizeof(dbs), "sni = host=127.0.0.1,localhost port=%d dbname=" DB "\n", ntohs(sa.sin_port));
	struct pgv p;
	pgv_start(&p, ADMIN_CFG "server_tls_sslmode = require\nserver_login_retry = 0\nquery_wait_timeout = 2\n",
		  dbs, userlist());
	struct raw_error err;
	char names[256] = "";
	size_t got = 0;
	double t0 = now_s();
	while (now_s() - t0 < 10 && strchr(names, '\n') == strrchr(names, '\n')) {
		memset(&err, 0, sizeof(err));
		raw_login(p.port, "sni", "md5_user", "md5_pass", &err);	/* the fake server hangs up after TLS */
		struct pollfd pfd = { .fd = pipefd[0], .events = POLLIN };
		while (poll(&pfd, 1, 200) == 1 && got < sizeof(names) - 1) {
			ssize_t n = read(pipefd[0], names + got, sizeof(names) - 1 - got);
			if (n <= 0)
				break;
			got += (size_t)n;
			names[got] = '\0';
		}
	}
	kill(rec, SIGKILL);
	waitpid(rec, NULL, 0);
	close(pipefd[0]);
	pgv_stop(&p);
	/* round robin: one connection to each entry, in either order */
	ck_assert_msg(strstr(names, "-\n") && strstr(names, "localhost\n") && !strstr(names, ","), "SNI seen: %s",
		      names);
}
END_TEST

/* SET client_tls13_ciphers to something OpenSSL refuses: PgBouncer's NOTICE, and TLS goes on as before. */
START_TEST(tls13_ciphers_invalid_set)
{
	struct pgv p;
	start_with_client_tls(&p, "client_tls13_ciphers = TLS_AES_256_GCM_SHA384\n");
	PGconn *a = admin_conn(&p);
	struct notice_log log;
	memset(&log, 0, sizeof(log));
	PQsetNoticeReceiver(a, capture_notice, &log);
	exec_ok(a, "SET client_tls13_ciphers = 'NO_SUCH_SUITE'");
	ck_assert_int_eq(log.n, 1);
	ck_assert_str_eq(log.message, "TLS settings could not be applied, still using old configuration");
	/* and the log line in PgBouncer's words */
	pgv_expect_log(&p, "TLS setup failed: failed to set the TLSv1.3 cipher suites", 5);
	PGconn *c = tls_client(&p, "ssl_min_protocol_version=TLSv1.3");
	ck_assert_msg(PQstatus(c) == CONNECTION_OK, "%s", PQerrorMessage(c));
	ck_assert_str_eq(PQsslAttribute(c, "cipher"), "TLS_AES_256_GCM_SHA384");
	PQfinish(c);
	PQfinish(a);
	pgv_stop(&p);
}
END_TEST

/* ================================================================ 2: host lists: DNS failures, IPv6 */

/*
 * host=nope.pgv.test,127.0.0.1 (load_balance_hosts=disable): the name that
 * does not resolve ends that attempt ("server DNS lookup failed") and
 * makes the next entry current; the waiting client gets a server from the
 * next attempt. A server at an IPv6 address appears in brackets, [::1]:port.
 */
START_TEST(host_list_dns_failure)
{
	struct pgv_dns d;
	pgv_dns_start(&d, "127.0.0.1 db1.pgv.test\n");
	int hold6 = socket(AF_INET6, SOCK_STREAM, 0);	/* bound, never listening: connects are refused */
	ck_assert_int_ge(hold6, 0);
	struct sockaddr_in6 sa6 = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT };
	socklen_t len = sizeof(sa6);
	ck_assert_int_eq(bind(hold6, (struct sockaddr *)&sa6, sizeof(sa6)), 0);
	ck_assert_int_eq(getsockname(hold6, (struct sockaddr *)&sa6, &len), 0);
	char dbs[512], ini[1024];
	snprintf(dbs, sizeof(dbs), "mixed = host=nope.pgv.test,127.0.0.1 port=%d dbname=" DB " load_balance_hosts=disable\n"
		 "v6 = host=::1 port=%d dbname=" DB "\n", pg_port_env(), ntohs(sa6.sin6_port));
	snprintf(ini, sizeof(ini), ADMIN_CFG "resolv_conf = %s\nserver_login_retry = 0.5\nquery_wait_timeout = 2\n",
		 d.resolv);
	struct pgv p;
	pgv_start(&p, ini, dbs, userlist());
	PGconn *c = connect_ok(&p, "mixed", "md5_user", "md5_pass");
	ck_assert_str_eq(query_value(c, "SELECT 'served by the next entry'"), "served by the next entry");
	PQfinish(c);
	pgv_expect_log(&p, "closing because: server DNS lookup failed", 1);
	ck_assert_msg(!pgv_log_contains(&p, "trying the next host"), "%s", pgv_log_tail(&p, 2000));

	struct raw_error err;
	memset(&err, 0, sizeof(err));
	ck_assert_int_eq(raw_login(p.port, "v6", "md5_user", "md5_pass", &err), -1);
	char want[128];
	snprintf(want, sizeof(want), "v6/md5_user@[::1]:%d", ntohs(sa6.sin6_port));
	pgv_expect_log(&p, want, 1);
	snprintf(want, sizeof(want), "could not connect to server [::1] port %d", ntohs(sa6.sin6_port));
	pgv_expect_log(&p, want, 1);
	pgv_stop(&p);
	pgv_dns_stop(&d);
	close(hold6);
}
END_TEST

/* ================================================================ 2: options with "options" ignored */

/*
 * ignore_startup_parameters = options: -c settings of tracked parameters
 * (TimeZone, DateStyle) in the options startup parameter still apply, the
 * others are dropped.
 */
START_TEST(options_tracked_when_ignored)
{
	struct pgv p;
	pgv_start(&p, ADMIN_CFG "pool_mode = transaction\nignore_startup_parameters = options\n", std_databases(),
		  userlist());
	char port[16];
	snprintf(port, sizeof(port), "%d", p.port);
	const char *const k[] = { "host", "port", "dbname", "user", "password", "sslmode", "options", NULL };
	const char *const v[] = { "127.0.0.1", port, DB, "md5_user", "md5_pass", "disable",
				  "-c TimeZone=Asia/Tokyo -c DateStyle=German -c work_mem=77MB", NULL };
	PGconn *c = PQconnectdbParams(k, v, 0);
	ck_assert_msg(PQstatus(c) == CONNECTION_OK, "%s", PQerrorMessage(c));
	ck_assert_str_eq(PQparameterStatus(c, "TimeZone"), "Asia/Tokyo");
	ck_assert_str_eq(query_value(c, "SHOW TimeZone"), "Asia/Tokyo");
	ck_assert_str_eq(query_value(c, "SHOW DateStyle"), "German, DMY");
	ck_assert_str_ne(query_value(c, "SHOW work_mem"), "77MB");
	PQfinish(c);
	pgv_stop(&p);
}
END_TEST

/*
 * PgBouncer's test_equivalent_startup_param: a login's DateStyle=ISO is
 * applied to the server once, with PgBouncer's debug line, and the client
 * then takes PostgreSQL's spelling ("ISO, MDY", logged as PgBouncer logs
 * it), so the next statement needs no SET. Its users grep for both lines.
 */
START_TEST(equivalent_startup_param_logged)
{
	struct pgv p;
	pgv_start(&p, ADMIN_CFG "pool_mode = transaction\nverbose = 2\n", std_databases(), userlist());
	char port[16];
	snprintf(port, sizeof(port), "%d", p.port);
	const char *const k[] = { "host", "port", "dbname", "user", "password", "sslmode", "options", NULL };
	const char *const v[] = { "127.0.0.1", port, DB, "md5_user", "md5_pass", "disable", "-c DateStyle=ISO", NULL };
	PGconn *c = PQconnectdbParams(k, v, 0);
	ck_assert_msg(PQstatus(c) == CONNECTION_OK, "%s", PQerrorMessage(c));
	ck_assert_str_eq(query_value(c, "SELECT 1"), "1");
	ck_assert_str_eq(query_value(c, "SHOW DateStyle"), "ISO, MDY");
	ck_assert_str_eq(query_value(c, "SELECT 1"), "1");
	PQfinish(c);
	ck_assert_int_eq(pgv_log_count(&p, "varcache_apply: SET DateStyle='ISO';"), 1);
	ck_assert_int_eq(pgv_log_count(&p, "varcache_set_canonical: setting DateStyle to its canonical version ISO -> ISO, MDY"), 1);
	pgv_stop(&p);
}
END_TEST

/* ================================================================ 2: no auth_query for a database that does not exist */

/*
 * A login to a database nothing matches never runs auth_query: a user
 * only auth_query could know fails as a wrong password (no server is
 * opened for the lookup); an auth_file user with the right password hears
 * "no such database".
 */
START_TEST(no_auth_query_for_missing_db)
{
	struct pgv p;
	pgv_start(&p, ADMIN_CFG "auth_user = md5_user\nauth_dbname = " DB "\n"
		  "auth_query = SELECT $1::text, 'bench_pass'::text\n", std_databases(), userlist());
	struct raw_error err;
	memset(&err, 0, sizeof(err));
	ck_assert_int_eq(raw_login(p.port, "nosuchdb", "pgv_ghost", "bench_pass", &err), -1);
	ck_assert_msg(strstr(err.message, "password authentication failed"), "%s", err.message);
	memset(&err, 0, sizeof(err));
	ck_assert_int_eq(raw_login(p.port, "nosuchdb", "md5_user", "md5_pass", &err), -1);
	ck_assert_str_eq(err.message, "no such database: nosuchdb");
	/* a negative window: a lookup's server login would be logged within milliseconds of the refusal; 300 ms catches it */
	sleep_ms(300);
	ck_assert_msg(!pgv_log_contains(&p, "new connection to server"), "auth_query ran:\n%s", pgv_log_tail(&p, 2000));
	/* the same lookup for an existing database does run */
	PGconn *c = pgv_connect(&p, DB, "pgbench_user", "bench_pass");
	ck_assert_msg(PQstatus(c) == CONNECTION_OK, "%s", PQerrorMessage(c));
	PQfinish(c);
	pgv_stop(&p);
}
END_TEST

/* ================================================================ 1: split server login packets */

/*
 * A TCP relay to PostgreSQL that hands pgvalve the server's first bytes
 * one at a time (every login message split across many reads, as a proxy
 * in between may do). Serves connections until killed; runs in a child.
 */
static void split_relay(int listen_fd, int pg_port)
{
	for (;;) {
		int in = accept(listen_fd, NULL, NULL);
		if (in < 0)
			_exit(1);
		if (fork() != 0) {
			close(in);
			continue;
		}
		struct sockaddr_in pg = { .sin_family = AF_INET, .sin_port = htons((uint16_t)pg_port),
					  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		int out = socket(AF_INET, SOCK_STREAM, 0);
		if (out < 0 || connect(out, (struct sockaddr *)&pg, sizeof(pg)) != 0)
			_exit(2);
		size_t from_server = 0;
		for (;;) {
			struct pollfd pfd[2] = { { .fd = in, .events = POLLIN }, { .fd = out, .events = POLLIN } };
			if (poll(pfd, 2, -1) < 0)
				_exit(3);
			char buf[8192];
			if (pfd[0].revents) {
				ssize_t n = read(in, buf, sizeof(buf));
				if (n <= 0 || !raw_send(out, buf, (size_t)n))
					_exit(0);
			}
			if (pfd[1].revents) {
				/* the login's messages byte by byte, the rest as it comes */
				ssize_t n = read(out, buf, from_server < 4096 ? 1 : sizeof(buf));
				if (n <= 0 || !raw_send(in, buf, (size_t)n))
					_exit(0);
				from_server += (size_t)n;
				if (from_server < 4096)
					usleep(500);	/* pacing: the login's bytes one at a time */
			}
		}
	}
}

/*
 * Server login messages that arrive in pieces (through a relay splitting
 * them byte by byte, with the smallest pkt_buf) are put together: the
 * login works, and so do queries after it.
 */
START_TEST(split_server_login_packets)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);
	int lfd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(lfd, 0);
	ck_assert_int_eq(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(lfd, 16), 0);
	ck_assert_int_eq(getsockname(lfd, (struct sockaddr *)&sa, &len), 0);
	pid_t relay = fork();
	ck_assert_int_ge(relay, 0);
	if (relay == 0)
		split_relay(lfd, pg_port_env());
	close(lfd);
	char dbs[256];
	snprintf(dbs, sizeof(dbs), "split = host=127.0.0.1 port=%d dbname=" DB "\n", ntohs(sa.sin_port));
	struct pgv p;
	pgv_start(&p, ADMIN_CFG "pkt_buf = 256\nserver_tls_sslmode = disable\n", dbs, userlist());
	for (const char *const *u = (const char *const[]){ "md5_user", "scram_user", NULL }; *u; u++) {
		PGconn *c = connect_ok(&p, "split", *u, strcmp(*u, "md5_user") == 0 ? "md5_pass" : "scram_pass");
		ck_assert_str_eq(query_value(c, "SELECT current_user"), *u);
		ck_assert_str_eq(query_value(c, "SELECT string_agg(name, ',') FROM pg_settings WHERE name LIKE 'client_enc%'"),
				 "client_encoding");
		PQfinish(c);
	}
	pgv_stop(&p);
	kill(-relay, SIGKILL);
	kill(relay, SIGKILL);
	waitpid(relay, NULL, 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("compat126");
	struct {
		const char *name;
		const TTest *test;
		double timeout;
	} tests[] = {
		{ "version", version_1_26, 20 },
		{ "login_counter", client_login_counter, 20 },
		{ "login_notify_message", login_notify_message, 20 },
		{ "pool_idle_timeout", pool_idle_timeout_126, 25 },
		{ "query_wait_timeout_levels", query_wait_timeout_levels, 30 },
		{ "query_timeout_only_running", query_timeout_only_running, 30 },
		{ "copy_transaction_mode", copy_transaction_mode, 30 },
		{ "long_password", long_password_login, 30 },
		{ "refused_login_fails_queue", refused_login_fails_queue, 30 },
		{ "reconnect_forgets_cached_failure", reconnect_forgets_cached_failure, 30 },
		{ "query_timeout_bounds_wait", query_timeout_bounds_wait, 30 },
		{ "negotiate_protocol_once", negotiate_protocol_once, 20 },
		{ "gone_in_126", gone_in_126, 20 },
		{ "security_fix_classes", security_fix_classes, 30 },
		{ "tls_errors_logged", tls_errors_logged, 20 },
		{ "verify_full_host_list", verify_full_host_list, 30 },
		{ "sni_per_host", sni_per_host, 30 },
		{ "tls13_ciphers_invalid_set", tls13_ciphers_invalid_set, 20 },
		{ "host_list_dns_failure", host_list_dns_failure, 30 },
		{ "options_tracked_when_ignored", options_tracked_when_ignored, 20 },
		{ "equivalent_startup_param_logged", equivalent_startup_param_logged, 20 },
		{ "no_auth_query_for_missing_db", no_auth_query_for_missing_db, 20 },
		{ "split_server_login_packets", split_server_login_packets, 30 },
	};
	for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
		TCase *tc = pgv_tcase_create(tests[i].name, tests[i].timeout);
		tcase_add_test(tc, tests[i].test);
		suite_add_tcase(s, tc);
	}
	return pgv_run_suite(s);
}
