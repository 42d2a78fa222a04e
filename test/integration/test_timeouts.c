/*
 * test_timeouts.c - end-to-end tests of pgvalve's client-side timeouts
 * against a real PostgreSQL 15: client_login_timeout, client_idle_timeout,
 * query_timeout, query_wait_timeout, idle_transaction_timeout,
 * transaction_timeout, their [users] overrides, and cancel_wait_timeout.
 *
 * Each fires within its value plus one janitor period (1/3 s) plus some
 * slack for a busy machine, not before about two thirds of its value,
 * with PgBouncer's error text, and a connection just under the limit is
 * left alone. The helpers are limits_kit.c's.
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

START_TEST(client_login_timeout_fires)
{
	struct pgv p;
	pgv_start(&p, "auth_type = plain\nclient_login_timeout = 1.5\n", std_databases(), std_userlist());
	/* The pool's first login also logs in to PostgreSQL (TLS, SCRAM): done here, outside the timing. */
	PGconn *warm = pgv_connect(&p, DB, "scram_user", "scram_pass");
	ck_assert_str_eq(query_value(warm, "SELECT 1"), "1");
	PQfinish(warm);
	/* slow: never answers the password request */
	double t0 = now_s();
	int slow = raw_startup_until_password(p.port, "scram_user", DB);
	/* in time: answers after 0.9 s, then stays */
	int ontime = raw_startup_until_password(p.port, "scram_user", DB);
	struct rcli r[2];
	rcli_init(&r[0], slow, NULL, 0);
	r[0].t0 = t0;
	sleep_until(t0 + 0.9);
	raw_send_password_message(ontime, "scram_pass", 11);
	rcli_init(&r[1], ontime, NULL, 0);
	r[1].t0 = t0;
	rcli_run(r, 2, 3.5);

	assert_fired("client_login_timeout", r[0].err_at, 1.5);
	assert_raw_fatal(&r[0].err, "client that did not log in", "client_login_timeout");
	ck_assert_msg(r[0].closed, "the slow client was not disconnected");
	ck_assert_msg(r[1].err_at < 0 && !r[1].closed, "the client that logged in at 0.9 s was cut off: %s",
		      r[1].err.message);
	ck_assert_msg(r[1].ready == 1, "the client that logged in at 0.9 s got %d ReadyForQuery", r[1].ready);
	raw_query_ok(ontime, "SELECT 'still here'", "still here");
	pgv_expect_log(&p, "closing because: client_login_timeout (age=", 2);
	close(slow);
	close(ontime);
	pgv_stop(&p);
}
END_TEST

/* A client whose login waits for a server that never answers is cut off by client_login_timeout too. */
START_TEST(client_login_timeout_server_down)
{
	struct pgv p;
	char dbs[512] = "";
	int bh_port;
	int blackhole = listen_port_in_range(&bh_port);	/* never accepts */
	add_db(dbs, sizeof(dbs), "blackhole", bh_port, NULL);
	pgv_start(&p, BASE "client_login_timeout = 1.5\nserver_connect_timeout = 20\n", dbs, std_userlist());
	double t0 = now_s();
	PGconn *c = pgv_connect(&p, "blackhole", "scram_user", "scram_pass");
	double took = now_s() - t0;
	ck_assert_msg(PQstatus(c) == CONNECTION_BAD, "logged in through a server that never answers");
	ck_assert_msg(strstr(PQerrorMessage(c), "client_login_timeout") != NULL, "error: %s", PQerrorMessage(c));
	assert_fired("client_login_timeout while the server is down", took, 1.5);
	PQfinish(c);
	pgv_expect_log(&p, "closing because: client_login_timeout", 2);
	pgv_stop(&p);
	close(blackhole);
}
END_TEST

START_TEST(client_idle_timeout_fires)
{
	struct pgv p;
	pgv_start(&p, TXN "client_idle_timeout = 1.5\n", std_databases(), std_userlist());
	struct rcli r[2];
	rcli_init(&r[0], raw_client(&p, DB, "scram_user", "scram_pass"), NULL, 0);
	/* busy: a query every 0.7 s, so never idle for 1.5 s */
	rcli_init(&r[1], raw_client(&p, DB, "md5_user", "md5_pass"), "SELECT 1", 0.7);
	rcli_run(r, 2, 3.6);
	assert_fired("client_idle_timeout", r[0].err_at, 1.5);
	assert_raw_fatal(&r[0].err, "idle client", "client_idle_timeout");
	ck_assert(r[0].closed);
	ck_assert_msg(r[1].err_at < 0 && !r[1].closed, "the busy client was cut off: %s", r[1].err.message);
	ck_assert_int_ge(r[1].ready, 4);
	pgv_expect_log(&p, "closing because: client_idle_timeout (age=", 2);
	close(r[0].fd);
	close(r[1].fd);
	pgv_stop(&p);
}
END_TEST

START_TEST(query_timeout_fires)
{
	struct pgv p;
	pgv_start(&p, TXN "query_timeout = 1.5\ndefault_pool_size = 3\n", std_databases(), std_userlist());
	PGconn *a = scram(&p, DB), *b = scram(&p, DB);
	struct outcome o[2];
	send_query(&o[0], a, "SELECT pg_sleep(4), 'long'");
	send_query(&o[1], b, "SELECT pg_sleep(0.5), 'short'");
	collect(o, 2, 6, NULL);
	assert_fatal(&o[0], "long query", "query timeout");
	assert_fired("query timeout", o[0].at, 1.5);
	assert_ok(&o[1], "a 0.5 s query under a 1.5 s query_timeout", "short");
	pgv_expect_log(&p, "closing because: query timeout (age=", 2);
	/* the pool serves on */
	ck_assert_str_eq(query_value(b, "SELECT 'after'"), "after");
	PQfinish(a);
	PQfinish(b);
	pgv_stop(&p);
	terminate_backends("scram_user", false);
}
END_TEST

START_TEST(query_wait_timeout_and_notify)
{
	struct pgv p;
	pgv_start(&p, TXN "default_pool_size = 1\nquery_wait_timeout = 2\nquery_wait_notify = 0.5\n",
		  std_databases(), std_userlist());
	PGconn *holder = scram(&p, DB), *w1 = scram(&p, DB), *w2 = scram(&p, DB);
	int notices1 = 0, notices2 = 0;
	PQsetNoticeReceiver(w1, count_queued_notice, &notices1);
	PQsetNoticeReceiver(w2, count_queued_notice, &notices2);

	/* Under the limit: queued behind a 1 s query, served when it ends. */
	struct outcome o[2];
	send_query(&o[0], holder, "SELECT pg_sleep(1), 'held'");
	sleep_s(0.1);
	send_query(&o[1], w1, "SELECT 'w1'");
	collect(o, 2, 5, NULL);
	assert_ok(&o[0], "holder", "held");
	assert_ok(&o[1], "client queued for 0.9 s (query_wait_timeout 2 s)", "w1");
	ck_assert_msg(o[1].at >= 0.6, "w1 was not queued (answered after %.2f s)", o[1].at);
	ck_assert_int_le(notices1, 1);

	/* Over it: queued behind a 5 s query, refused at 2 s, told once that it is queued. */
	send_query(&o[0], holder, "SELECT pg_sleep(5), 'held'");
	sleep_s(0.1);
	send_query(&o[1], w2, "SELECT 'w2'");
	collect(&o[1], 1, 5, NULL);
	assert_fatal(&o[1], "client queued for too long", "query_wait_timeout");
	assert_fired("query_wait_timeout", o[1].at, 2);
	ck_assert_msg(notices2 == 1, "%d \"client being queued\" notices, expected exactly 1", notices2);
	pgv_expect_log(&p, "closing because: query_wait_timeout (age=", 2);
	PQfinish(holder);
	PQfinish(w1);
	PQfinish(w2);
	pgv_stop(&p);
	terminate_backends("scram_user", false);
}
END_TEST

START_TEST(idle_transaction_timeout_fires)
{
	struct pgv p;
	pgv_start(&p, TXN "idle_transaction_timeout = 1.5\n", std_databases(), std_userlist());
	struct rcli r[3];
	int idle_tx = raw_client(&p, DB, "scram_user", "scram_pass");
	int busy_tx = raw_client(&p, DB, "scram_user", "scram_pass");
	int idle = raw_client(&p, DB, "scram_user", "scram_pass");
	raw_query_ok(idle_tx, "BEGIN", NULL);
	rcli_init(&r[0], idle_tx, NULL, 0);
	raw_query_ok(busy_tx, "BEGIN", NULL);
	rcli_init(&r[1], busy_tx, "SELECT 1", 0.7);
	rcli_init(&r[2], idle, NULL, 0);	/* idle outside a transaction */
	rcli_run(r, 3, 3.6);
	assert_fired("idle transaction timeout", r[0].err_at, 1.5);
	assert_raw_fatal(&r[0].err, "client idle in a transaction", "idle transaction timeout");
	ck_assert(r[0].closed);
	ck_assert_msg(r[1].err_at < 0 && !r[1].closed, "busy transaction was cut off: %s", r[1].err.message);
	raw_query_ok(busy_tx, "COMMIT", NULL);
	ck_assert_msg(r[2].err_at < 0 && !r[2].closed, "idle client outside a transaction was cut off: %s",
		      r[2].err.message);
	raw_query_ok(idle, "SELECT 'fine'", "fine");
	pgv_expect_log(&p, "closing because: idle transaction timeout (age=", 2);
	close(idle_tx);
	close(busy_tx);
	close(idle);
	pgv_stop(&p);
}
END_TEST

START_TEST(transaction_timeout_fires)
{
	struct pgv p;
	pgv_start(&p, TXN "transaction_timeout = 2\n", std_databases(), std_userlist());
	int long_tx = raw_client(&p, DB, "scram_user", "scram_pass");
	int short_tx = raw_client(&p, DB, "scram_user", "scram_pass");
	struct rcli r[1];
	double t0 = now_s();
	raw_query_ok(long_tx, "BEGIN", NULL);
	rcli_init(&r[0], long_tx, "SELECT 1", 0.3);	/* never idle, but the transaction goes on */
	r[0].t0 = t0;

	/* A transaction of 0.6 s with a 2 s limit commits; outside a transaction nothing counts. */
	raw_query_ok(short_tx, "BEGIN", NULL);
	rcli_run(r, 1, 0.3);
	raw_query_ok(short_tx, "SELECT 1", "1");
	rcli_run(r, 1, 0.3);
	raw_query_ok(short_tx, "COMMIT", NULL);
	rcli_run(r, 1, 2.6);
	raw_query_ok(short_tx, "SELECT 'idle is fine'", "idle is fine");

	ck_assert_msg(r[0].err_at >= 0, "the 3.2 s transaction was not cut off (%d queries ran)", r[0].ready);
	ck_assert_msg(r[0].err_at >= EARLY_SHARE * 2 && r[0].err_at <= 2 + TICK_S + SLACK_S + 0.3,
		      "transaction timeout after %.2f s (timeout 2 s)", r[0].err_at);
	assert_raw_fatal(&r[0].err, "long transaction", "transaction timeout");
	ck_assert(r[0].closed);
	pgv_expect_log(&p, "closing because: transaction timeout (age=", 2);
	close(long_tx);
	close(short_tx);
	pgv_stop(&p);
}
END_TEST

/* [users] overrides: md5_user gets short query/idle-transaction/client-idle timeouts, pgbench_user a transaction_timeout. */
START_TEST(user_overrides_of_timeouts)
{
	struct pgv p;
	pgv_start(&p,
		  TXN "default_pool_size = 8\n"
		  "\n[users]\n"
		  "md5_user = query_timeout=1 idle_transaction_timeout=1 client_idle_timeout=1.5\n"
		  "pgbench_user = transaction_timeout=1.5\n",
		  std_databases(), std_userlist());
	enum { M_QUERY, M_IDLE_TX, M_IDLE, B_TX, S_QUERY, S_IDLE_TX, S_IDLE, S_TX, N };
	struct rcli r[N];
	int fd[N];
	/* Each timeout's clock starts at that client's own last step (login or BEGIN), not after the set-up. */
	double since[N];
	for (int i = 0; i < N; i++) {
		const char *user = i < B_TX ? "md5_user" : i == B_TX ? "pgbench_user" : "scram_user";
		const char *pw = i < B_TX ? "md5_pass" : i == B_TX ? "bench_pass" : "scram_pass";
		fd[i] = raw_client(&p, DB, user, pw);
		since[i] = now_s();
	}
	const int in_tx[] = { M_IDLE_TX, S_IDLE_TX, B_TX, S_TX };
	for (int i = 0; i < 4; i++) {
		since[in_tx[i]] = now_s();
		raw_query_ok(fd[in_tx[i]], "BEGIN", NULL);
	}
	double t0 = now_s();
	rcli_init(&r[M_QUERY], fd[M_QUERY], "SELECT pg_sleep(3)", 0);
	rcli_init(&r[M_IDLE_TX], fd[M_IDLE_TX], NULL, 0);
	rcli_init(&r[M_IDLE], fd[M_IDLE], NULL, 0);
	rcli_init(&r[B_TX], fd[B_TX], "SELECT 1", 0.3);
	rcli_init(&r[S_QUERY], fd[S_QUERY], "SELECT pg_sleep(2)", 0);
	rcli_init(&r[S_IDLE_TX], fd[S_IDLE_TX], NULL, 0);
	rcli_init(&r[S_IDLE], fd[S_IDLE], NULL, 0);
	rcli_init(&r[S_TX], fd[S_TX], "SELECT 1", 0.3);
	for (int i = 0; i < N; i++)
		r[i].t0 = i == M_QUERY || i == S_QUERY ? t0 : since[i];
	rcli_run(r, N, 3.6);

	assert_fired("[users] query_timeout", r[M_QUERY].err_at, 1);
	assert_raw_fatal(&r[M_QUERY].err, "md5_user's long query", "query timeout");
	assert_fired("[users] idle_transaction_timeout", r[M_IDLE_TX].err_at, 1);
	assert_raw_fatal(&r[M_IDLE_TX].err, "md5_user idle in a transaction", "idle transaction timeout");
	assert_fired("[users] client_idle_timeout", r[M_IDLE].err_at, 1.5);
	assert_raw_fatal(&r[M_IDLE].err, "idle md5_user", "client_idle_timeout");
	ck_assert_msg(r[B_TX].err_at >= 0 && r[B_TX].err_at <= 1.5 + TICK_S + SLACK_S + 0.3 &&
		      r[B_TX].err_at >= EARLY_SHARE * 1.5, "[users] transaction_timeout after %.2f s (1.5 s)",
		      r[B_TX].err_at);
	assert_raw_fatal(&r[B_TX].err, "pgbench_user's long transaction", "transaction timeout");
	/* scram_user has no override and the global values are off */
	for (int i = S_QUERY; i < N; i++)
		ck_assert_msg(r[i].err_at < 0 && !r[i].closed, "scram_user connection %d was cut off: %s",
			      i - S_QUERY, r[i].err.message);
	ck_assert_int_eq(r[S_QUERY].ready, 1);
	raw_query_ok(fd[S_IDLE_TX], "COMMIT", NULL);
	raw_query_ok(fd[S_TX], "COMMIT", NULL);
	raw_query_ok(fd[S_IDLE], "SELECT 'ok'", "ok");
	for (int i = 0; i < N; i++)
		close(fd[i]);
	pgv_stop(&p);
	terminate_backends("md5_user", false);
}
END_TEST

/* ================================================================ server timeouts */

/* A cancel that never completes holds its server; cancel_wait_timeout closes it. */
START_TEST(cancel_wait_timeout_closes_held_server)
{
	struct pgv p;
	struct proxy px = { 0 };
	char dbs[512] = "";
	proxy_start(&px, 0, PX_HOLD_CANCELS, 0);
	add_db(dbs, sizeof(dbs), "viaproxy", px.port, NULL);
	pgv_start(&p, TXN "default_pool_size = 1\ncancel_wait_timeout = 2\n", dbs, std_userlist());
	PGconn *c = scram(&p, "viaproxy");
	char pid1[32];
	snprintf(pid1, sizeof(pid1), "%s", query_value(c, "SELECT pg_backend_pid()"));

	struct outcome o;
	send_query(&o, c, "SELECT pg_sleep(1), 'slept'");
	double t0 = o.sent;
	sleep_s(0.3);
	PGcancel *cancel = PQgetCancel(c);
	char errbuf[256];
	ck_assert_int_eq(PQcancel(cancel, errbuf, sizeof(errbuf)), 1);
	PQfreeCancel(cancel);
	collect(&o, 1, 5, NULL);
	/* the proxy held the cancel back: the query ran to its end */
	assert_ok(&o, "query whose cancel never arrived", "slept");

	/* Its server is held until the cancel completes or cancel_wait_timeout (from when it was taken). */
	send_query(&o, c, "SELECT pg_backend_pid()");
	collect(&o, 1, 8, NULL);
	assert_ok(&o, "query after the held server", NULL);
	double at = o.sent + o.at - t0;
	ck_assert_msg(at >= 1.6, "served after %.2f s: the server a cancel was still in flight for was reused", at);
	ck_assert_msg(at <= 2 + TICK_S + SLACK_S, "served after %.2f s: cancel_wait_timeout (2 s) did not free the pool",
		      at);
	ck_assert_str_ne(o.value, pid1);
	pgv_expect_log(&p, "closing because: cancel_wait_timeout (age=", 2);
	PQfinish(c);
	pgv_stop(&p);
	proxy_stop(&px);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("timeouts");
	struct {
		const char *name;
		const TTest *test;
		double timeout;
	} tests[] = {
		{ "client_login_timeout", client_login_timeout_fires, 20 },
		{ "client_login_timeout_server_down", client_login_timeout_server_down, 20 },
		{ "client_idle_timeout", client_idle_timeout_fires, 20 },
		{ "query_timeout", query_timeout_fires, 20 },
		{ "query_wait_timeout", query_wait_timeout_and_notify, 25 },
		{ "idle_transaction_timeout", idle_transaction_timeout_fires, 20 },
		{ "transaction_timeout", transaction_timeout_fires, 20 },
		{ "user_overrides", user_overrides_of_timeouts, 20 },
		{ "cancel_wait_timeout", cancel_wait_timeout_closes_held_server, 25 },
	};
	for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
		TCase *tc = pgv_tcase_create(tests[i].name, tests[i].timeout);
		tcase_add_test(tc, tests[i].test);
		suite_add_tcase(s, tc);
	}
	return pgv_run_suite(s);
}
