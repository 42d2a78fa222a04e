/*
 * test_notify.c - LISTEN/NOTIFY in transaction and statement pooling
 * (issue 25, notify.h) against a real PostgreSQL 15: more clients than
 * servers (default_pool_size = 2), one listener per pool, commit
 * semantics, self-notification PIDs, a lost listener, a client that does
 * not read.
 */
#include "harness.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DB "pgvtest"
#define USER "scram_user"
#define PASS "scram_pass"
#define TXN_INI "auth_type = md5\npool_mode = transaction\ndefault_pool_size = 2\nmax_client_conn = 100\n"
#define STMT_INI "auth_type = md5\npool_mode = statement\ndefault_pool_size = 2\nmax_client_conn = 100\n"

static PGconn *conn(struct pgv *p)
{
	PGconn *c = pgv_connect(p, DB, USER, PASS);
	ck_assert_msg(PQstatus(c) == CONNECTION_OK, "connect: %s\n%s", PQerrorMessage(c), pgv_log_tail(p, 1500));
	return c;
}

static void exec_ok(struct pgv *p, PGconn *c, const char *sql)
{
	PGresult *r = PQexec(c, sql);
	ExecStatusType st = PQresultStatus(r);
	ck_assert_msg(st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK, "%s: %s\n%s", sql, PQerrorMessage(c),
		      pgv_log_tail(p, 1500));
	PQclear(r);
}

/* The next notification within timeout_ms, or NULL. Free with PQfreemem. */
static PGnotify *wait_notify(PGconn *c, int timeout_ms)
{
	PGnotify *n;
	PQconsumeInput(c);
	while (!(n = PQnotifies(c))) {
		struct pollfd pfd = { .fd = PQsocket(c), .events = POLLIN };
		if (poll(&pfd, 1, timeout_ms) <= 0)
			return NULL;
		if (!PQconsumeInput(c))
			return NULL;
	}
	return n;
}

static void expect_notify(struct pgv *p, PGconn *c, const char *channel, const char *payload)
{
	PGnotify *n = wait_notify(c, 5000);
	ck_assert_msg(n != NULL, "no notification on %s\n%s", channel, pgv_log_tail(p, 1500));
	ck_assert_str_eq(n->relname, channel);
	if (payload)
		ck_assert_str_eq(n->extra, payload);
	PQfreemem(n);
}

static void expect_none(PGconn *c, int timeout_ms)
{
	PGnotify *n = wait_notify(c, timeout_ms);
	ck_assert_msg(n == NULL, "unexpected notification on %s: %s", n ? n->relname : "", n ? n->extra : "");
}

/* Listening clients and notifying ones, more of them than servers. */
START_TEST(listen_notify_many_clients)
{
	struct pgv p;
	PGconn *l[10], *s[10];
	pgv_start(&p, TXN_INI, std_databases(), std_userlist());
	for (int i = 0; i < 10; i++) {
		l[i] = conn(&p);
		exec_ok(&p, l[i], "LISTEN jobs");
		s[i] = conn(&p);
	}
	exec_ok(&p, s[3], "NOTIFY jobs, 'hello'");
	for (int i = 0; i < 10; i++)
		expect_notify(&p, l[i], "jobs", "hello");
	/* A notification's PID, seen by others, is not the sender's login PID (the real backend's). */
	exec_ok(&p, s[4], "SELECT pg_notify('jobs', 'two')");
	PGnotify *n = wait_notify(l[0], 5000);
	ck_assert_ptr_nonnull(n);
	ck_assert_str_eq(n->extra, "two");
	ck_assert_int_ne(n->be_pid, PQbackendPID(s[4]));
	PQfreemem(n);
	for (int i = 0; i < 10; i++) {
		PQfinish(l[i]);
		PQfinish(s[i]);
	}
	pgv_stop(&p);
}
END_TEST

START_TEST(self_notify_shows_login_pid)
{
	struct pgv p;
	pgv_start(&p, TXN_INI, std_databases(), std_userlist());
	PGconn *a = conn(&p), *b = conn(&p);
	exec_ok(&p, a, "LISTEN self");
	exec_ok(&p, b, "LISTEN self");
	exec_ok(&p, a, "NOTIFY self, 'mine'");
	PGnotify *n = wait_notify(a, 5000);
	ck_assert_ptr_nonnull(n);
	ck_assert_int_eq(n->be_pid, PQbackendPID(a));
	PQfreemem(n);
	n = wait_notify(b, 5000);
	ck_assert_ptr_nonnull(n);
	ck_assert_int_ne(n->be_pid, PQbackendPID(b));
	ck_assert_int_ne(n->be_pid, PQbackendPID(a));
	PQfreemem(n);
	PQfinish(a);
	PQfinish(b);
	pgv_stop(&p);
}
END_TEST

START_TEST(rolled_back_listen_and_notify)
{
	struct pgv p;
	pgv_start(&p, TXN_INI, std_databases(), std_userlist());
	PGconn *a = conn(&p), *b = conn(&p);
	exec_ok(&p, a, "BEGIN");
	exec_ok(&p, a, "LISTEN rb");
	exec_ok(&p, a, "ROLLBACK");
	PGresult *r = PQexec(a, "BEGIN; LISTEN rb2; SELECT 1/0");
	PQclear(r);
	exec_ok(&p, a, "ROLLBACK");
	exec_ok(&p, b, "NOTIFY rb, 'x'");
	exec_ok(&p, b, "NOTIFY rb2, 'x'");
	expect_none(a, 500);
	/* A NOTIFY in a rolled-back transaction is never delivered. */
	exec_ok(&p, a, "LISTEN rb3");
	exec_ok(&p, b, "BEGIN");
	exec_ok(&p, b, "NOTIFY rb3, 'no'");
	exec_ok(&p, b, "ROLLBACK");
	expect_none(a, 500);
	/* A LISTEN inside a committed transaction listens from its COMMIT on. */
	exec_ok(&p, a, "BEGIN; LISTEN rb4; COMMIT");
	exec_ok(&p, b, "NOTIFY rb4, 'yes'");
	expect_notify(&p, a, "rb4", "yes");
	PQfinish(a);
	PQfinish(b);
	pgv_stop(&p);
}
END_TEST

START_TEST(thousand_in_order)
{
	struct pgv p;
	pgv_start(&p, TXN_INI, std_databases(), std_userlist());
	PGconn *a = conn(&p), *b = conn(&p);
	exec_ok(&p, a, "LISTEN ord");
	char sql[64];
	for (int i = 1; i <= 1000; i++) {
		snprintf(sql, sizeof(sql), "NOTIFY ord, '%d'", i);
		exec_ok(&p, b, sql);
	}
	for (int i = 1; i <= 1000; i++) {
		PGnotify *n = wait_notify(a, 5000);
		ck_assert_msg(n != NULL, "notification %d missing", i);
		ck_assert_int_eq(atoi(n->extra), i);
		PQfreemem(n);
	}
	expect_none(a, 300);
	PQfinish(a);
	PQfinish(b);
	pgv_stop(&p);
}
END_TEST

START_TEST(unlisten_stops_delivery)
{
	struct pgv p;
	pgv_start(&p, TXN_INI, std_databases(), std_userlist());
	PGconn *a = conn(&p), *b = conn(&p);
	exec_ok(&p, a, "LISTEN u1; LISTEN u2");
	exec_ok(&p, a, "LISTEN u1");	/* again: no error, nothing doubled */
	exec_ok(&p, a, "UNLISTEN nothing_here");
	exec_ok(&p, b, "NOTIFY u1, 'a'");
	expect_notify(&p, a, "u1", "a");
	expect_none(a, 300);
	exec_ok(&p, a, "UNLISTEN u1");
	exec_ok(&p, b, "NOTIFY u1, 'b'; NOTIFY u2, 'c'");
	expect_notify(&p, a, "u2", "c");
	exec_ok(&p, a, "UNLISTEN *");
	exec_ok(&p, b, "NOTIFY u2, 'd'");
	expect_none(a, 500);
	/* Nothing was left listening on the pooled servers: b gets nothing of a's channels. */
	expect_none(b, 100);
	PQfinish(a);
	PQfinish(b);
	pgv_stop(&p);
}
END_TEST

START_TEST(channel_names)
{
	struct pgv p;
	pgv_start(&p, TXN_INI, std_databases(), std_userlist());
	PGconn *a = conn(&p), *b = conn(&p);
	char long_name[80];
	memset(long_name, 'k', 70);
	long_name[70] = '\0';
	exec_ok(&p, a, "LISTEN \"Mixed\"\"Quote\"; LISTEN MiXeD");
	char sql[200];
	snprintf(sql, sizeof(sql), "LISTEN %s", long_name);
	exec_ok(&p, a, sql);
	exec_ok(&p, b, "SELECT pg_notify('Mixed\"Quote', '1')");
	expect_notify(&p, a, "Mixed\"Quote", "1");
	exec_ok(&p, b, "NOTIFY mixed, '2'");
	expect_notify(&p, a, "mixed", "2");
	snprintf(sql, sizeof(sql), "NOTIFY %s, '3'", long_name);	/* cut to 63 bytes, as the LISTEN */
	exec_ok(&p, b, sql);
	long_name[63] = '\0';
	expect_notify(&p, a, long_name, "3");
	/* A LISTEN with a syntax error: PostgreSQL's error, nothing registered. */
	PGresult *r = PQexec(a, "LISTEN bad bad");
	ck_assert_int_eq(PQresultStatus(r), PGRES_FATAL_ERROR);
	ck_assert_str_eq(PQresultErrorField(r, PG_DIAG_SQLSTATE), "42601");
	PQclear(r);
	exec_ok(&p, b, "NOTIFY bad, 'x'");
	expect_none(a, 300);
	PQfinish(a);
	PQfinish(b);
	pgv_stop(&p);
}
END_TEST

START_TEST(extended_protocol_listen)
{
	struct pgv p;
	pgv_start(&p, TXN_INI, std_databases(), std_userlist());
	PGconn *a = conn(&p), *b = conn(&p), *c = conn(&p);
	PGresult *r = PQexecParams(a, "LISTEN ext1", 0, NULL, NULL, NULL, NULL, 0);
	ck_assert_int_eq(PQresultStatus(r), PGRES_COMMAND_OK);
	PQclear(r);
	r = PQprepare(c, "l", "LISTEN ext2", 0, NULL);
	ck_assert_int_eq(PQresultStatus(r), PGRES_COMMAND_OK);
	PQclear(r);
	r = PQexecPrepared(c, "l", 0, NULL, NULL, NULL, 0);
	ck_assert_int_eq(PQresultStatus(r), PGRES_COMMAND_OK);
	PQclear(r);
	r = PQexecParams(b, "SELECT pg_notify($1, 'e')", 1, NULL, (const char *const[]){ "ext1" }, NULL, NULL, 0);
	ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
	PQclear(r);
	exec_ok(&p, b, "NOTIFY ext2, 'f'");
	expect_notify(&p, a, "ext1", "e");
	expect_notify(&p, c, "ext2", "f");
	PQfinish(a);
	PQfinish(b);
	PQfinish(c);
	pgv_stop(&p);
}
END_TEST

START_TEST(statement_mode)
{
	struct pgv p;
	pgv_start(&p, STMT_INI, std_databases(), std_userlist());
	PGconn *a = conn(&p), *b = conn(&p), *c = conn(&p);
	exec_ok(&p, a, "LISTEN st");
	exec_ok(&p, c, "LISTEN st");
	exec_ok(&p, b, "NOTIFY st, 'x'");
	expect_notify(&p, a, "st", "x");
	expect_notify(&p, c, "st", "x");
	PQfinish(a);
	PQfinish(b);
	PQfinish(c);
	pgv_stop(&p);
}
END_TEST

static char notices[1024];

static void keep_notice(void *arg, const char *message)
{
	(void)arg;
	strncat(notices, message, sizeof(notices) - strlen(notices) - 1);
}

/* The listener killed: every client listening through it is closed with a reason. */
START_TEST(listener_killed)
{
	struct pgv p;
	pgv_start(&p, TXN_INI, std_databases(), std_userlist());
	PGconn *a = conn(&p), *b = conn(&p), *other = conn(&p);
	exec_ok(&p, a, "LISTEN k");
	exec_ok(&p, b, "LISTEN k2");
	PGconn *d = pg_direct();
	PGresult *r = PQexec(d, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
			     "WHERE usename = '" USER "' AND query LIKE 'LISTEN %'");
	ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
	ck_assert_int_eq(PQntuples(r), 1);
	PQclear(r);
	PQfinish(d);
	PGconn *both[2] = { a, b };
	for (int i = 0; i < 2; i++) {
		notices[0] = '\0';
		PQsetNoticeProcessor(both[i], keep_notice, NULL);
		PGnotify *n = wait_notify(both[i], 5000);
		ck_assert_ptr_null(n);
		r = PQexec(both[i], "SELECT 1");
		ck_assert_int_ne(PQresultStatus(r), PGRES_TUPLES_OK);
		PQclear(r);
		/* libpq reports a FATAL that arrives between queries through the notice processor */
		ck_assert_msg(strstr(notices, "notification listener was lost") != NULL ||
			      strstr(PQerrorMessage(both[i]), "notification listener was lost") != NULL, "%s / %s",
			      notices, PQerrorMessage(both[i]));
	}
	ck_assert(pgv_log_contains(&p, "notification listener of " DB "/" USER " lost"));
	/* Others go on; a new LISTEN gets a new listener. */
	exec_ok(&p, other, "LISTEN k");
	PGconn *e = conn(&p);
	exec_ok(&p, e, "NOTIFY k, 'again'");
	expect_notify(&p, other, "k", "again");
	PQfinish(a);
	PQfinish(b);
	PQfinish(e);
	PQfinish(other);
	pgv_stop(&p);
}
END_TEST

/* A client that never reads is cut off at notify_buffer_limit; the others get everything. */
START_TEST(slow_client_cut_off)
{
	struct pgv p;
	pgv_start(&p, TXN_INI "notify_buffer_limit = 1048576\n", std_databases(), std_userlist());
	PGconn *slow = conn(&p), *fast = conn(&p), *b = conn(&p);
	exec_ok(&p, slow, "LISTEN big");
	exec_ok(&p, fast, "LISTEN big");
	/*
	 * 42 MB in rounds of 700 kB (under the limit: the fast client reads
	 * each round whole), more than the slow client's socket buffers take.
	 */
	for (int round = 0; round < 60; round++) {
		exec_ok(&p, b, "SELECT pg_notify('big', repeat('x', 7000) || g) FROM generate_series(1, 100) g");
		for (int i = 1; i <= 100; i++) {
			PGnotify *n = wait_notify(fast, 5000);
			ck_assert_msg(n != NULL, "round %d: notification %d missing\n%s", round, i, pgv_log_tail(&p, 1500));
			PQfreemem(n);
		}
	}
	ck_assert_msg(pgv_log_contains(&p, "notify_buffer_limit"), "%s", pgv_log_tail(&p, 1500));
	PGresult *r = PQexec(slow, "SELECT 1");
	ck_assert_int_ne(PQresultStatus(r), PGRES_TUPLES_OK);
	PQclear(r);
	exec_ok(&p, fast, "SELECT 1");
	PQfinish(slow);
	PQfinish(fast);
	PQfinish(b);
	pgv_stop(&p);
}
END_TEST

/* A LISTEN and a NOTIFY in one transaction: delivered with its COMMIT, with the client's login PID. */
START_TEST(listen_and_notify_in_one_transaction)
{
	struct pgv p;
	pgv_start(&p, TXN_INI, std_databases(), std_userlist());
	PGconn *a = conn(&p), *b = conn(&p);
	exec_ok(&p, a, "BEGIN; LISTEN one; NOTIFY one, 'same'; COMMIT");
	PGnotify *n = wait_notify(a, 5000);
	ck_assert_ptr_nonnull(n);
	ck_assert_str_eq(n->extra, "same");
	ck_assert_int_eq(n->be_pid, PQbackendPID(a));
	PQfreemem(n);
	expect_none(a, 300);	/* once, not again through the listener */
	exec_ok(&p, b, "NOTIFY one, 'later'");
	expect_notify(&p, a, "one", "later");
	PQfinish(a);
	PQfinish(b);
	pgv_stop(&p);
}
END_TEST

/* SHOW LISTENERS; the listener is a server of the pool (SHOW POOLS, SHOW SERVERS). */
START_TEST(show_listeners)
{
	struct pgv p;
	pgv_start(&p, TXN_INI "admin_users = " USER "\n", std_databases(), std_userlist());
	PGconn *a = conn(&p), *b = conn(&p);
	exec_ok(&p, a, "LISTEN s1; LISTEN s2");
	exec_ok(&p, b, "LISTEN s1");
	PGconn *adm = pgv_connect(&p, "pgbouncer", USER, PASS);
	ck_assert_int_eq(PQstatus(adm), CONNECTION_OK);
	PGresult *r = PQexec(adm, "SHOW LISTENERS");
	ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
	ck_assert_int_eq(PQntuples(r), 2);
	int found = 0;
	for (int i = 0; i < PQntuples(r); i++) {
		ck_assert_str_eq(PQgetvalue(r, i, 0), DB);
		ck_assert_str_eq(PQgetvalue(r, i, 1), USER);
		if (strcmp(PQgetvalue(r, i, 2), "s1") == 0 && strcmp(PQgetvalue(r, i, 3), "2") == 0)
			found++;
		if (strcmp(PQgetvalue(r, i, 2), "s2") == 0 && strcmp(PQgetvalue(r, i, 3), "1") == 0)
			found++;
	}
	ck_assert_int_eq(found, 2);
	PQclear(r);
	r = PQexec(adm, "SHOW POOLS");
	ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
	int col = PQfnumber(r, "sv_active");
	for (int i = 0; i < PQntuples(r); i++)
		if (strcmp(PQgetvalue(r, i, 0), DB) == 0)
			ck_assert_str_eq(PQgetvalue(r, i, col), "1");	/* the listener */
	PQclear(r);
	PQfinish(a);
	PQfinish(b);
	/* The last listener gone: the listener server closes. */
	for (int tries = 0; tries < 50 && !pgv_log_contains(&p, "no client listens any more"); tries++)
		usleep(100000);
	ck_assert(pgv_log_contains(&p, "no client listens any more"));
	r = PQexec(adm, "SHOW LISTENERS");
	ck_assert_int_eq(PQntuples(r), 0);
	PQclear(r);
	PQfinish(adm);
	pgv_stop(&p);
}
END_TEST

/* A client in a transaction gets a notification when its transaction ends, as from PostgreSQL. */
START_TEST(delivered_after_transaction)
{
	struct pgv p;
	/* a holds a server through its transaction, the listener another: b needs a third */
	pgv_start(&p, TXN_INI "default_pool_size = 3\n", std_databases(), std_userlist());
	PGconn *a = conn(&p), *b = conn(&p);
	exec_ok(&p, a, "LISTEN mid");
	exec_ok(&p, a, "BEGIN");
	exec_ok(&p, a, "SELECT 1");
	exec_ok(&p, b, "NOTIFY mid, 'x'");
	usleep(300000);
	exec_ok(&p, a, "SELECT 2");
	PQconsumeInput(a);
	PGnotify *n = PQnotifies(a);
	ck_assert_msg(n == NULL, "delivered inside the transaction");
	exec_ok(&p, a, "COMMIT");
	expect_notify(&p, a, "mid", "x");
	PQfinish(a);
	PQfinish(b);
	pgv_stop(&p);
}
END_TEST

/* notify_support = 0: today's behaviour, no listener (a LISTEN stays on its server). */
START_TEST(notify_support_off)
{
	struct pgv p;
	pgv_start(&p, TXN_INI "notify_support = 0\n", std_databases(), std_userlist());
	PGconn *a = conn(&p);
	exec_ok(&p, a, "LISTEN off");
	exec_ok(&p, a, "NOTIFY off, 'y'");	/* the same server (the only one in use): PostgreSQL delivers */
	expect_notify(&p, a, "off", "y");
	ck_assert(!pgv_log_contains(&p, "notification listener"));
	PQfinish(a);
	pgv_stop(&p);
}
END_TEST

/* RECONNECT retires the listener: its clients are told, a new LISTEN gets a new one. */
START_TEST(reconnect_closes_listener)
{
	struct pgv p;
	pgv_start(&p, TXN_INI "admin_users = " USER "\n", std_databases(), std_userlist());
	PGconn *a = conn(&p), *b = conn(&p);
	exec_ok(&p, a, "LISTEN rc");
	PGconn *adm = pgv_connect(&p, "pgbouncer", USER, PASS);
	PGresult *r = PQexec(adm, "RECONNECT");
	ck_assert_int_eq(PQresultStatus(r), PGRES_COMMAND_OK);
	PQclear(r);
	for (int tries = 0; tries < 50 && !pgv_log_contains(&p, "notification listener of"); tries++)
		usleep(100000);
	ck_assert_msg(pgv_log_contains(&p, "notification listener of"), "%s", pgv_log_tail(&p, 1500));
	ck_assert_ptr_null(wait_notify(a, 2000));
	exec_ok(&p, b, "LISTEN rc");
	PGconn *c = conn(&p);
	exec_ok(&p, c, "NOTIFY rc, 'z'");
	expect_notify(&p, b, "rc", "z");
	PQfinish(a);
	PQfinish(b);
	PQfinish(c);
	PQfinish(adm);
	pgv_stop(&p);
}
END_TEST

/* A LISTEN pgvalve cannot see (in a DO block) stays on its server, but its notifications reach nobody else. */
START_TEST(unseen_listen_does_not_leak)
{
	struct pgv p;
	/* the listener, the server that carries the hidden LISTEN, one for the notifying client */
	pgv_start(&p, TXN_INI "default_pool_size = 3\n", std_databases(), std_userlist());
	PGconn *a = conn(&p), *b = conn(&p), *c = conn(&p);
	exec_ok(&p, b, "LISTEN other");	/* opens the listener */
	exec_ok(&p, a, "DO $$ BEGIN EXECUTE 'LISTEN hidden'; END $$");
	exec_ok(&p, b, "BEGIN; LISTEN other2");	/* b now holds a server, maybe the one with the hidden LISTEN */
	exec_ok(&p, c, "NOTIFY hidden, 'leak'");
	exec_ok(&p, b, "SELECT pg_sleep(0.2)");
	exec_ok(&p, b, "COMMIT");
	exec_ok(&p, a, "SELECT 1");
	expect_none(b, 300);
	expect_none(a, 100);
	PQfinish(a);
	PQfinish(b);
	PQfinish(c);
	pgv_stop(&p);
}
END_TEST

static Suite *notify_suite(void)
{
	Suite *s = suite_create("notify");
	TCase *tc = pgv_tcase_create("notify", 60);
	tcase_add_test(tc, listen_notify_many_clients);
	tcase_add_test(tc, self_notify_shows_login_pid);
	tcase_add_test(tc, rolled_back_listen_and_notify);
	tcase_add_test(tc, thousand_in_order);
	tcase_add_test(tc, unlisten_stops_delivery);
	tcase_add_test(tc, channel_names);
	tcase_add_test(tc, extended_protocol_listen);
	tcase_add_test(tc, statement_mode);
	tcase_add_test(tc, listener_killed);
	tcase_add_test(tc, slow_client_cut_off);
	tcase_add_test(tc, listen_and_notify_in_one_transaction);
	tcase_add_test(tc, show_listeners);
	tcase_add_test(tc, delivered_after_transaction);
	tcase_add_test(tc, notify_support_off);
	tcase_add_test(tc, reconnect_closes_listener);
	tcase_add_test(tc, unseen_listen_does_not_leak);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return pgv_run_suite(notify_suite());
}
