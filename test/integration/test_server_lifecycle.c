/*
 * test_server_lifecycle.c - end-to-end tests of a server connection's
 * life against a real PostgreSQL 15: server_connect_timeout,
 * server_login_retry, a database that goes away and comes back,
 * server_lifetime, server_idle_timeout, server_check_query/_delay, and
 * the idle timeouts that drop auto-databases and unused pools.
 *
 * A database that goes away is the TCP proxy of limits_kit.c, stopped,
 * or a listening socket that never accepts; the timeouts fire within
 * their value plus one janitor period plus some slack.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE	/* accept4, pipe2 */
#endif
#include "limits_kit.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>

START_TEST(server_connect_timeout_fires)
{
	struct pgv p;
	struct proxy px = { 0 };
	char dbs[512] = "";
	int bh_port;
	int blackhole = listen_port_in_range(&bh_port);	/* never accepts: logins hang in its backlog */
	proxy_start(&px, 0, PX_FORWARD, 400);		/* answers 0.4 s late */
	add_db(dbs, sizeof(dbs), "blackhole", bh_port, NULL);
	add_db(dbs, sizeof(dbs), "slow", px.port, NULL);
	pgv_start(&p, BASE "server_connect_timeout = 1.5\nquery_wait_timeout = 4\n", dbs, std_userlist());

	/*
	 * As PgBouncer, a connect timeout closes only the server: the login
	 * stays queued for the next try until query_wait_timeout.
	 */
	double t0 = now_s();
	PGconn *c = pgv_connect(&p, "blackhole", "scram_user", "scram_pass");
	double took = now_s() - t0;
	ck_assert_msg(PQstatus(c) == CONNECTION_BAD, "logged in through a server that never answers");
	ck_assert_msg(strstr(PQerrorMessage(c), "query_wait_timeout") != NULL, "error: %s", PQerrorMessage(c));
	assert_fired("query_wait_timeout", took, 4);
	PQfinish(c);
	pgv_expect_log(&p, "closing because: connect timeout (age=", 2);

	t0 = now_s();
	c = scram(&p, "slow");
	ck_assert_msg(now_s() - t0 >= 0.35, "the slow server answered in %.2f s?", now_s() - t0);
	ck_assert_str_eq(query_value(c, "SELECT 'slow but fine'"), "slow but fine");
	PQfinish(c);
	pgv_stop(&p);
	proxy_stop(&px);
	close(blackhole);
}
END_TEST

/* Logins to a server that accepts and hangs up at once: retried every server_login_retry, not per client. */
START_TEST(server_login_retry_paces_attempts)
{
	struct pgv p;
	struct proxy px = { 0 };
	char dbs[512] = "";
	proxy_start(&px, 0, PX_CLOSE, 0);
	add_db(dbs, sizeof(dbs), "flaky", px.port, NULL);
	pgv_start(&p, BASE "server_login_retry = 2\nclient_login_timeout = 30\n", dbs, std_userlist());

	enum { N = 20 };
	struct aconn a[N];
	double t0 = now_s();
	int started = 0, at5 = -1;
	while (started < N || aconn_step(a, started, 0) > 0) {
		if (started < N && now_s() >= t0 + 0.25 * started) {
			aconn_start(&a[started], &p, "flaky", "scram_user", "scram_pass");
			started++;
		}
		aconn_step(a, started, 20);
		if (at5 < 0 && now_s() >= t0 + 5.0)
			at5 = proxy_accepts(&px);
		ck_assert_msg(now_s() - t0 < 15, "clients still waiting after 15 s");
	}
	if (at5 < 0)
		at5 = proxy_accepts(&px);
	for (int i = 0; i < N; i++) {
		ck_assert_msg(!a[i].ok, "client %d logged in through a server that hangs up", i);
		ck_assert_msg(strstr(a[i].err, "FATAL") != NULL, "client %d: no error from pgvalve: %s", i, a[i].err);
		ck_assert_msg(a[i].at <= 2 + TICK_S + SLACK_S, "client %d waited %.2f s for its error", i, a[i].at);
		PQfinish(a[i].c);
	}
	ck_assert_msg(at5 >= 2 && at5 <= 4,
		      "%d server connection attempts in 5 s for 20 clients with server_login_retry = 2", at5);
	pgv_stop(&p);
	proxy_stop(&px);
}
END_TEST

/*
 * After proxy_stop(): the relay's processes die asynchronously; wait until
 * PostgreSQL has lost scram_user's backends (the relay closed both sides),
 * then give pgvalve a moment to read the end of its server connection.
 */
static void wait_relayed_servers_gone(void)
{
	ck_assert_msg(wait_backends("scram_user", 0, 5) >= 0, "scram_user still has %d backends after the relay stopped",
		      pg_count_backends("scram_user"));
	sleep_s(0.2);
}

/* The database goes away under a queued client and comes back: the client is served. */
START_TEST(database_down_then_back)
{
	struct pgv p;
	struct proxy px = { 0 };
	char dbs[512] = "";
	proxy_start(&px, 0, PX_FORWARD, 0);
	add_db(dbs, sizeof(dbs), "viaproxy", px.port, NULL);
	pgv_start(&p, TXN "server_login_retry = 1\nquery_wait_timeout = 10\n", dbs, std_userlist());
	PGconn *a = scram(&p, "viaproxy");
	ck_assert_str_eq(query_value(a, "SELECT 1"), "1");

	proxy_stop(&px);	/* its server connection goes too */
	wait_relayed_servers_gone();
	struct outcome o[2];
	send_query(&o[0], a, "SELECT 'back'");
	sleep_s(0.5);
	/* a client arriving during the outage (login needs no server once the pool knows its parameters) */
	PGconn *b = scram(&p, "viaproxy");
	PQsetNoticeReceiver(b, quiet_notice, NULL);
	send_query(&o[1], b, "SELECT 'b back'");
	collect(o, 2, 1.2, NULL);
	ck_assert_msg(o[0].at < 0, "the queued client got an answer while the database was down: %s%s", o[0].value,
		      o[0].msg);

	proxy_start(&px, px.port, PX_FORWARD, 0);
	double up = now_s();
	collect(o, 2, 8, NULL);
	assert_ok(&o[0], "client queued while the database was down", "back");
	double waited = o[0].sent + o[0].at - up;
	ck_assert_msg(waited <= 1 + TICK_S + SLACK_S, "served %.2f s after the database came back (retry 1 s)", waited);
	/* PgBouncer fails fast a client that needs a server while logins fail; a queued one is served */
	ck_assert_msg((o[1].ok && strcmp(o[1].value, "b back") == 0) ||
		      (!o[1].ok && strstr(o[1].msg, "server_login_retry") != NULL),
		      "client that came during the outage: %s%s", o[1].value, o[1].msg);
	PQfinish(a);
	PQfinish(b);
	pgv_stop(&p);
	proxy_stop(&px);
}
END_TEST

/* The database stays away: the queued client gets query_wait_timeout; later clients work once it is back. */
START_TEST(database_down_query_wait_timeout)
{
	struct pgv p;
	struct proxy px = { 0 };
	char dbs[512] = "";
	proxy_start(&px, 0, PX_FORWARD, 0);
	add_db(dbs, sizeof(dbs), "viaproxy", px.port, NULL);
	pgv_start(&p, TXN "server_login_retry = 0.5\nquery_wait_timeout = 2\n", dbs, std_userlist());
	PGconn *a = scram(&p, "viaproxy");
	ck_assert_str_eq(query_value(a, "SELECT 1"), "1");
	proxy_stop(&px);
	wait_relayed_servers_gone();
	struct outcome o;
	send_query(&o, a, "SELECT 'never'");
	collect(&o, 1, 5, NULL);
	assert_fatal(&o, "client queued while the database is down", "query_wait_timeout");
	assert_fired("query_wait_timeout", o.at, 2);
	PQfinish(a);

	proxy_start(&px, px.port, PX_FORWARD, 0);
	sleep_s(0.6);
	PGconn *b = scram(&p, "viaproxy");
	ck_assert_str_eq(query_value(b, "SELECT 'recovered'"), "recovered");
	PQfinish(b);
	pgv_stop(&p);
	proxy_stop(&px);
}
END_TEST

START_TEST(server_lifetime_closes_idle_and_released_servers)
{
	struct pgv p;
	pgv_start(&p, TXN "server_lifetime = 2\nserver_idle_timeout = 0\n", std_databases(), std_userlist());
	double t0 = now_s();
	PGconn *c = scram(&p, DB);
	int pid1 = atoi(query_value(c, "SELECT pg_backend_pid()"));

	/* idle: closed after its lifetime */
	double gone = -1;
	while (now_s() - t0 < 2 + TICK_S + SLACK_S + 1) {
		if (!backend_alive(pid1)) {
			gone = now_s() - t0;
			break;
		}
		sleep_s(0.1);
	}
	assert_fired("server_lifetime (idle server)", gone, 2);
	pgv_expect_log(&p, "closing because: server lifetime over (age=", 2);

	/* in use: kept through a transaction longer than its lifetime, closed when released */
	exec_ok(c, "BEGIN");
	int pid2 = atoi(query_value(c, "SELECT pg_backend_pid()"));
	ck_assert_int_ne(pid1, pid2);
	for (int i = 0; i < 6; i++) {
		sleep_s(0.5);
		ck_assert_int_eq(atoi(query_value(c, "SELECT pg_backend_pid()")), pid2);
	}
	exec_ok(c, "COMMIT");
	double t1 = now_s();
	while (backend_alive(pid2) && now_s() - t1 < 1.5)
		sleep_s(0.05);
	ck_assert_msg(!backend_alive(pid2), "server past its lifetime still open %.2f s after release", now_s() - t1);
	ck_assert_int_ne(atoi(query_value(c, "SELECT pg_backend_pid()")), pid2);
	PQfinish(c);
	pgv_stop(&p);
}
END_TEST

START_TEST(server_idle_timeout_closes_unused_servers)
{
	struct pgv p;
	pgv_start(&p, TXN "server_idle_timeout = 1.5\n", std_databases(), std_userlist());
	PGconn *c = scram(&p, DB);
	int pid = atoi(query_value(c, "SELECT pg_backend_pid()"));
	/* used every 0.6 s for 3 s: stays */
	for (int i = 0; i < 5; i++) {
		sleep_s(0.6);
		ck_assert_int_eq(atoi(query_value(c, "SELECT pg_backend_pid()")), pid);
	}
	double t0 = now_s(), gone = -1;
	while (now_s() - t0 < 1.5 + TICK_S + SLACK_S + 1) {
		if (!backend_alive(pid)) {
			gone = now_s() - t0;
			break;
		}
		sleep_s(0.1);
	}
	assert_fired("server_idle_timeout", gone, 1.5);
	pgv_expect_log(&p, "closing because: server idle timeout (age=", 2);
	ck_assert_str_eq(query_value(c, "SELECT 'new server'"), "new server");
	PQfinish(c);
	pgv_stop(&p);
}
END_TEST

START_TEST(autodb_idle_timeout_drops_database)
{
	struct pgv p;
	char dbs[256];
	snprintf(dbs, sizeof(dbs), "* = host=127.0.0.1 port=%d\n", pg_port());
	pgv_start(&p, BASE "admin_users = admin_u\nautodb_idle_timeout = 1.5\nserver_idle_timeout = 0.5\n", dbs,
		  userlist());
	PGconn *admin = connect_ok(&p, "pgbouncer", "admin_u", "admin_pass");
	PQsetNoticeReceiver(admin, quiet_notice, NULL);
	ck_assert(!show_databases_lists(admin, DB));
	PGconn *c = scram(&p, DB);
	ck_assert_str_eq(query_value(c, "SELECT current_database()"), DB);
	ck_assert(show_databases_lists(admin, DB));
	PQfinish(c);
	double t0 = now_s(), gone = -1;
	while (now_s() - t0 < 1.5 + TICK_S + SLACK_S + 1) {
		if (!show_databases_lists(admin, DB)) {
			gone = now_s() - t0;
			break;
		}
		sleep_s(0.1);
	}
	assert_fired("autodb_idle_timeout", gone, 1.5);
	pgv_expect_log(&p, "auto-database pgvtest unused for", 2);
	/* and it comes back on demand */
	c = scram(&p, DB);
	ck_assert_str_eq(query_value(c, "SELECT 'again'"), "again");
	ck_assert(show_databases_lists(admin, DB));
	PQfinish(c);
	PQfinish(admin);
	pgv_stop(&p);
}
END_TEST

/* A pgvalve whose server_check_query (server_check_delay 1 s) adds a row to pgv_check_log per check. */
static void start_with_check_log(struct pgv *p)
{
	direct_exec("CREATE TABLE IF NOT EXISTS pgv_check_log (at timestamptz DEFAULT clock_timestamp())");
	direct_exec("GRANT SELECT, INSERT ON pgv_check_log TO PUBLIC");
	direct_exec("TRUNCATE pgv_check_log");
	pgv_start(p, TXN "server_check_delay = 1\nserver_check_query = INSERT INTO pgv_check_log DEFAULT VALUES\n"
		  "admin_users = md5_user\n", std_databases(), std_userlist());
}

/* SHOW POOLS' column col for DB's pool of user; -1 when there is no such pool. */
static int pools_count(PGconn *admin, const char *user, const char *col)
{
	PGresult *r = PQexec(admin, "SHOW POOLS");
	ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
	int v = -1, f = PQfnumber(r, col);
	ck_assert_msg(f >= 0, "SHOW POOLS has no column %s", col);
	for (int i = 0; i < PQntuples(r); i++)
		if (strcmp(PQgetvalue(r, i, 0), DB) == 0 && strcmp(PQgetvalue(r, i, 1), user) == 0)
			v = atoi(PQgetvalue(r, i, f));
	PQclear(r);
	return v;
}

/* SHOW SERVERS rows of user in state. */
static int servers_in_state(PGconn *admin, const char *user, const char *state)
{
	PGresult *r = PQexec(admin, "SHOW SERVERS");
	ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
	int n = 0, fu = PQfnumber(r, "user"), fs = PQfnumber(r, "state");
	ck_assert(fu >= 0 && fs >= 0);
	for (int i = 0; i < PQntuples(r); i++)
		n += strcmp(PQgetvalue(r, i, fu), user) == 0 && strcmp(PQgetvalue(r, i, fs), state) == 0;
	PQclear(r);
	return n;
}

/* Column col of SHOW WORKERS's "total" row (pgvalve's own view of the same counts). */
static int workers_total(PGconn *admin, const char *col)
{
	PGresult *r = PQexec(admin, "SHOW WORKERS");
	ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
	int v = -1, f = PQfnumber(r, col);
	ck_assert_msg(f >= 0, "SHOW WORKERS has no column %s", col);
	for (int i = 0; i < PQntuples(r); i++)
		if (strcmp(PQgetvalue(r, i, 0), "total") == 0)
			v = atoi(PQgetvalue(r, i, f));
	PQclear(r);
	return v;
}

START_TEST(server_check_query_after_delay)
{
	struct pgv p;
	start_with_check_log(&p);
	PGconn *c = scram(&p, DB);
	for (int i = 0; i < 3; i++) {
		ck_assert_str_eq(query_value(c, "SELECT 'quick'"), "quick");
		sleep_s(0.2);
	}
	ck_assert_msg(direct_int("SELECT count(*) FROM pgv_check_log") == 0,
		      "server_check_query ran for a server used within server_check_delay");
	sleep_s(1.5);
	ck_assert_str_eq(query_value(c, "SELECT 'after a pause'"), "after a pause");
	ck_assert_msg(direct_int("SELECT count(*) FROM pgv_check_log") == 1,
		      "server_check_query ran %d times for a server unused for 1.5 s (delay 1 s)",
		      direct_int("SELECT count(*) FROM pgv_check_log"));
	ck_assert_str_eq(query_value(c, "SELECT 'quick again'"), "quick again");
	ck_assert_int_eq(direct_int("SELECT count(*) FROM pgv_check_log"), 1);
	PQfinish(c);
	pgv_stop(&p);
	direct_exec("DROP TABLE pgv_check_log");
}
END_TEST

/*
 * After a quiet spell every idle server is past server_check_delay: one
 * query checks one of them (not the whole pool), and waiters arriving
 * together get a check each and are all served, without a new connection
 * while stale servers are left.
 */
START_TEST(server_check_query_once_per_waiter)
{
	clean_users();
	struct pgv p;
	start_with_check_log(&p);
	enum { N = 4 };
	PGconn *c[N];
	struct outcome o[N];
	for (int i = 0; i < N; i++)
		c[i] = scram(&p, DB);
	for (int i = 0; i < N; i++)
		send_query(&o[i], c[i], "SELECT pg_sleep(0.3), 'busy'");
	collect(o, N, 10, NULL);
	for (int i = 0; i < N; i++)
		assert_ok(&o[i], "filling the pool", "busy");
	ck_assert_int_eq(pg_count_backends("scram_user"), N);
	ck_assert_int_eq(direct_int("SELECT count(*) FROM pgv_check_log"), 0);

	PGconn *admin = connect_ok(&p, "pgbouncer", "md5_user", "md5_pass");
	/*
	 * All N back in the pool, none active: idle, "used" (on a loaded
	 * machine the checks and logins above may take longer than
	 * server_check_delay, 1 s, after the first release, and the janitor
	 * then counts that server as used), or "tested" (the pool's first
	 * servers read the database's function table, volatility.h, on an
	 * idle one, which the test can catch at it).
	 */
	ck_assert_int_eq(pools_count(admin, "scram_user", "sv_idle") + pools_count(admin, "scram_user", "sv_used") +
			 pools_count(admin, "scram_user", "sv_tested"), N);
	ck_assert_int_eq(pools_count(admin, "scram_user", "sv_active"), 0);
	/* the function table read done (it takes milliseconds; 5 s is a ceiling for a loaded machine) */
	for (int t = 0; t < 50 && pools_count(admin, "scram_user", "sv_tested") > 0; t++)
		sleep_s(0.1);
	ck_assert_int_eq(pools_count(admin, "scram_user", "sv_tested"), 0);
	sleep_s(1.5);	/* all N idle servers are now past server_check_delay */
	/* PgBouncer's janitor moves such servers to SV_USED: SHOW POOLS counts them there */
	ck_assert_int_eq(pools_count(admin, "scram_user", "sv_idle"), 0);
	ck_assert_int_eq(pools_count(admin, "scram_user", "sv_used"), N);
	ck_assert_int_eq(servers_in_state(admin, "scram_user", "used"), N);
	ck_assert_int_eq(servers_in_state(admin, "scram_user", "idle"), 0);
	/* and so does SHOW WORKERS (this pgvalve has no other server) */
	ck_assert_int_eq(workers_total(admin, "sv_idle"), 0);
	ck_assert_int_eq(workers_total(admin, "sv_used"), N);
	ck_assert_str_eq(query_value(c[0], "SELECT 'one'"), "one");
	ck_assert_msg(direct_int("SELECT count(*) FROM pgv_check_log") == 1,
		      "one query after a quiet spell ran server_check_query %d times (%d idle servers)",
		      direct_int("SELECT count(*) FROM pgv_check_log"), N);
	ck_assert_int_eq(pools_count(admin, "scram_user", "sv_idle"), 1);
	ck_assert_int_eq(pools_count(admin, "scram_user", "sv_used"), N - 1);
	ck_assert_int_eq(workers_total(admin, "sv_idle"), 1);
	ck_assert_int_eq(workers_total(admin, "sv_used"), N - 1);

	sleep_s(1.5);
	struct watch w;
	watch_init(&w, "scram_user", NULL, NULL);
	for (int i = 0; i < N; i++)
		send_query(&o[i], c[i], "SELECT 'together'");
	collect(o, N, 10, &w);
	for (int i = 0; i < N; i++)
		assert_ok(&o[i], "waiters after a quiet spell", "together");
	int checks = direct_int("SELECT count(*) FROM pgv_check_log") - 1;
	ck_assert_msg(checks >= 1 && checks <= N, "%d waiters after a quiet spell ran %d checks", N, checks);
	ck_assert_msg(w.peak[0] <= N && pg_count_backends("scram_user") == N,
		      "servers opened while stale ones were idle: peak %d, now %d (pool had %d)", w.peak[0],
		      pg_count_backends("scram_user"), N);
	for (int i = 0; i < N; i++)
		PQfinish(c[i]);
	PQfinish(admin);
	pgv_stop(&p);
	direct_exec("DROP TABLE pgv_check_log");
}
END_TEST

/* ================================================================ pool_idle_timeout */

/* Whether SHOW POOLS has DB's pool of user. */
static bool pools_list_user(PGconn *a, const char *user)
{
	return pools_count(a, user, "cl_active") >= 0;
}

/* A pool with no clients and no servers for pool_idle_timeout is freed; one in use is kept. */
START_TEST(pool_idle_timeout_frees_unused_pools)
{
	struct pgv p;
	pgv_start(&p, "auth_type = md5\npool_mode = transaction\npool_idle_timeout = 1\nserver_idle_timeout = 1\n"
		  "admin_users = md5_user\n", std_databases(), std_userlist());
	PGconn *keep = pgv_connect(&p, DB, "md5_user", "md5_pass");
	ck_assert_str_eq(query_value(keep, "SELECT 1"), "1");
	PGconn *c = pgv_connect(&p, DB, "scram_user", "scram_pass");
	ck_assert_str_eq(query_value(c, "SELECT 1"), "1");
	PQfinish(c);
	PGconn *a = pgv_connect(&p, "pgbouncer", "md5_user", "md5_pass");
	ck_assert(pools_list_user(a, "scram_user"));	/* just used: still there */
	/* server_idle_timeout, pool_idle_timeout, a janitor tick, and 3 s of slack for a loaded machine */
	double t0 = now_s();
	while (pools_list_user(a, "scram_user") && now_s() - t0 < 1 + 1 + 0.34 + 3)
		usleep(100 * 1000);
	ck_assert_msg(!pools_list_user(a, "scram_user"), "an unused pool was not freed\n%s", pgv_log_tail(&p, 1000));
	ck_assert(pools_list_user(a, "md5_user"));	/* a client is connected: kept */
	ck_assert(pgv_log_contains(&p, "cleaning up idle pool for user scram_user on db " DB
				   " because: pool idle timeout (age= "));
	/* and the pool comes back on the next login */
	c = pgv_connect(&p, DB, "scram_user", "scram_pass");
	ck_assert_str_eq(query_value(c, "SELECT 2"), "2");
	PQfinish(c);
	PQfinish(a);
	PQfinish(keep);
	pgv_stop(&p);
}
END_TEST

/* ================================================================ suite */


int main(void)
{
	Suite *s = suite_create("server_lifecycle");
	struct {
		const char *name;
		const TTest *test;
		double timeout;
	} tests[] = {
		{ "server_connect_timeout", server_connect_timeout_fires, 25 },
		{ "server_login_retry", server_login_retry_paces_attempts, 30 },
		{ "database_down_then_back", database_down_then_back, 30 },
		{ "database_down_wait_timeout", database_down_query_wait_timeout, 25 },
		{ "server_lifetime", server_lifetime_closes_idle_and_released_servers, 30 },
		{ "server_idle_timeout", server_idle_timeout_closes_unused_servers, 25 },
		{ "autodb_idle_timeout", autodb_idle_timeout_drops_database, 25 },
		{ "server_check_query", server_check_query_after_delay, 20 },
		{ "server_check_query_once_per_waiter", server_check_query_once_per_waiter, 30 },
		{ "pool_idle_timeout", pool_idle_timeout_frees_unused_pools, 25 },
	};
	for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
		TCase *tc = pgv_tcase_create(tests[i].name, tests[i].timeout);
		tcase_add_test(tc, tests[i].test);
		suite_add_tcase(s, tc);
	}
	return pgv_run_suite(s);
}
