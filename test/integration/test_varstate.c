/*
 * test_varstate.c - session state never crosses clients in transaction
 * mode (issue 14), against a real PostgreSQL (15, or 18 from
 * scripts/test-pg18.sh) with one server shared by every client
 * (default_pool_size = 1): tracked parameters are applied
 * all or nothing and client_encoding first, a client's bad startup value
 * fails its own login with PostgreSQL's error (and only its login: known
 * values cost no server), every reported parameter follows its client,
 * and a client's plain SET of an unreported parameter is kept for it and
 * for nobody else.
 */
#include "harness.h"

#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DB "pgvtest"
#define ONE_SERVER "auth_type = md5\npool_mode = transaction\ndefault_pool_size = 1\n"

/* scram_user's libpq keywords and values, then extra ones (name, value, ..., NULL). */
static void conn_params_with(struct pgv *p, const char *const *extra, const char *kw[20], const char *val[20],
			     char port[16])
{
	const char *kw0[10], *val0[10];
	int n = 0;
	pgv_conn_params(p, DB, "scram_user", "scram_pass", kw0, val0, port);
	for (; kw0[n]; n++)
		kw[n] = kw0[n], val[n] = val0[n];
	for (int i = 0; extra && extra[i] && n < 18; i += 2, n++)
		kw[n] = extra[i], val[n] = extra[i + 1];
	kw[n] = NULL, val[n] = NULL;
}

/* A libpq client with extra connection keywords (name, value, ..., NULL). */
static PGconn *connect_with(struct pgv *p, const char *const *extra)
{
	const char *kw[20], *val[20];
	char port[16];
	conn_params_with(p, extra, kw, val, port);
	PGconn *c = PQconnectdbParams(kw, val, 0);
	ck_assert_msg(c && PQstatus(c) == CONNECTION_OK, "connect: %s\n%s", c ? PQerrorMessage(c) : "oom",
		      pgv_log_tail(p, 1500));
	return c;
}

static PGconn *connect_ok(struct pgv *p)
{
	return connect_with(p, NULL);
}

/* A libpq client of md5_user: the pool raw_login_ex() clients use. */
static PGconn *connect_md5(struct pgv *p)
{
	PGconn *c = pgv_connect(p, DB, "md5_user", "md5_pass");
	ck_assert_msg(PQstatus(c) == CONNECTION_OK, "%s", PQerrorMessage(c));
	return c;
}

/* PQconnectStartParams() with extra connection keywords, as connect_with(). */
static PGconn *connect_start_with(struct pgv *p, const char *const *extra)
{
	const char *kw[20], *val[20];
	char port[16];
	conn_params_with(p, extra, kw, val, port);
	PGconn *c = PQconnectStartParams(kw, val, 0);
	ck_assert_msg(c && PQstatus(c) != CONNECTION_BAD, "connect start: %s", c ? PQerrorMessage(c) : "oom");
	return c;
}

/*
 * Drives a PQconnectStart connection for up to timeout_ms. *st carries
 * PQconnectPoll's last answer between calls (PGRES_POLLING_WRITING to
 * begin); returns true once it is OK or FAILED, false if still going.
 */
static bool poll_connect(PGconn *c, PostgresPollingStatusType *st, int timeout_ms)
{
	double deadline = now_s() + timeout_ms / 1000.0;
	while (*st != PGRES_POLLING_OK && *st != PGRES_POLLING_FAILED) {
		int left = (int)((deadline - now_s()) * 1000);
		if (left <= 0)
			return false;
		struct pollfd pfd = { .fd = PQsocket(c), .events = *st == PGRES_POLLING_READING ? POLLIN : POLLOUT };
		if (poll(&pfd, 1, left) == 0)
			return false;
		*st = PQconnectPoll(c);
	}
	return true;
}

/* A libpq login that must fail, at PQconnectdb, with a message containing want. */
static void connect_fails(struct pgv *p, const char *const *extra, const char *want)
{
	const char *kw[20], *val[20];
	char port[16];
	conn_params_with(p, extra, kw, val, port);
	PGconn *c = PQconnectdbParams(kw, val, 0);
	ck_assert_ptr_nonnull(c);
	ck_assert_msg(PQstatus(c) == CONNECTION_BAD, "login went through; wanted: %s", want);
	ck_assert_msg(strstr(PQerrorMessage(c), want), "got \"%s\", wanted \"%s\"", PQerrorMessage(c), want);
	PQfinish(c);
}

/* connect_fails() with PGDATESTYLE set, which libpq sends as the startup parameter datestyle. */
static void connect_fails_pgdatestyle(struct pgv *p, const char *datestyle, const char *want)
{
	ck_assert_int_eq(setenv("PGDATESTYLE", datestyle, 1), 0);
	connect_fails(p, NULL, want);
	unsetenv("PGDATESTYLE");
}

static void exec_ok(PGconn *c, const char *sql)
{
	PGresult *r = PQexec(c, sql);
	ExecStatusType st = PQresultStatus(r);
	ck_assert_msg(st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK, "%s: %s", sql, PQerrorMessage(c));
	PQclear(r);
}

/* sql fails with PostgreSQL's error sqlstate. */
static void exec_fails(PGconn *c, const char *sql, const char *sqlstate)
{
	PGresult *r = PQexec(c, sql);
	ck_assert_msg(PQresultStatus(r) == PGRES_FATAL_ERROR, "%s: went through", sql);
	ck_assert_str_eq(PQresultErrorField(r, PG_DIAG_SQLSTATE), sqlstate);
	PQclear(r);
}

/* query_value() copies into one static buffer: keep a result across the next query. */
static char *value_of(PGconn *c, const char *sql)
{
	return strdup(query_value(c, sql));
}

static void expect_value(PGconn *c, const char *sql, const char *want)
{
	char *got = value_of(c, sql);
	ck_assert_msg(strcmp(got, want) == 0, "%s: got \"%s\", want \"%s\"", sql, got, want);
	free(got);
}

/* Terminates the backend pid from PostgreSQL's side and waits until it is gone. */
static void terminate_backend(const char *pid)
{
	PGconn *d = pg_direct();
	char sql[160];
	snprintf(sql, sizeof(sql), "SELECT pg_terminate_backend(%s)", pid);
	expect_value(d, sql, "t");
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", pid);
	for (int i = 0; i < 100 && strcmp(query_value(d, sql), "0") != 0; i++)	/* gone in milliseconds; 5 s */
		sleep_ms(50);
	PQfinish(d);
}

/* Ends the server connection with backend pid and waits until pgvalve closed it: the next query gets a new one. */
static void end_server(struct pgv *p, const char *pid)
{
	static const char closed[] = "terminating connection due to administrator command";
	int before = pgv_log_count(p, closed);
	terminate_backend(pid);
	for (int i = 0; i < 100 && pgv_log_count(p, closed) == before; i++)	/* logged as read; 5 s */
		sleep_ms(50);
	ck_assert_msg(pgv_log_count(p, closed) > before, "%s", pgv_log_tail(p, 1500));
}

/* ---------------------------------------------------------------- all or nothing */

/*
 * The repro: the first client leaves SJIS and German on the one
 * server; the second (application_name with a non-ASCII character, which
 * does not parse in SJIS) must run in its own UTF8 and ISO, and what it
 * inserts is stored as UTF8.
 */
START_TEST(encoding_and_datestyle_stay_with_their_client)
{
	struct pgv p;
	pgv_start(&p, ONE_SERVER, std_databases(), std_userlist());
	PGconn *setup = connect_ok(&p);
	exec_ok(setup, "DROP TABLE IF EXISTS varstate_enc");
	exec_ok(setup, "CREATE TABLE varstate_enc (x text)");
	PQfinish(setup);

	PGconn *a = connect_ok(&p);
	exec_ok(a, "SET client_encoding = 'SJIS'");
	exec_ok(a, "SET DateStyle = German");
	char *pid_a = value_of(a, "SELECT pg_backend_pid()");

	static const char *const appname[] = { "application_name", "\xc4\x80", NULL };
	PGconn *b = connect_with(&p, appname);
	expect_value(b, "SELECT pg_backend_pid()", pid_a);	/* one server for both */
	expect_value(b, "SHOW client_encoding", "UTF8");
	expect_value(b, "SHOW DateStyle", "ISO, MDY");
	expect_value(b, "SELECT '2026-11-24'::date::text", "2026-11-24");
	exec_ok(b, "INSERT INTO varstate_enc VALUES ('\xc3\xa9')");
	/* and the first client still has its own */
	expect_value(a, "SHOW client_encoding", "SJIS");
	expect_value(a, "SHOW DateStyle", "German, DMY");
	expect_value(b, "SHOW client_encoding", "UTF8");

	PGconn *d = pg_direct();
	expect_value(d, "SELECT encode(convert_to(x, 'UTF8'), 'hex') FROM varstate_enc", "c3a9");
	exec_ok(d, "DROP TABLE varstate_enc");
	PQfinish(d);
	ck_assert(!pgv_log_contains(&p, "internal query failed"));
	free(pid_a);
	PQfinish(a);
	PQfinish(b);
	pgv_stop(&p);
}
END_TEST

/*
 * A client asking for an invalid DateStyle at login gets PostgreSQL's own
 * error for it (FATAL 22023) during the login, as PostgreSQL fails it, not
 * the previous client's German nor an error at its first query; the
 * shared server is neither closed nor changed, and keeps serving the
 * others.
 */
START_TEST(invalid_startup_value_gets_its_own_error)
{
	struct pgv p;
	struct raw_error err;
	int fd = -1;
	pgv_start(&p, ONE_SERVER, std_databases(), std_userlist());
	PGconn *a = connect_md5(&p);
	exec_ok(a, "SET DateStyle = German");
	char *pid_a = value_of(a, "SELECT pg_backend_pid()");

	/* in the startup packet, and in options: the same error, at login */
	const char *const in_packet[] = { "DateStyle", "bogus", NULL };
	const char *const in_options[] = { "options", "-c DateStyle=bogus", NULL };
	const char *const *ways[] = { in_packet, in_options };
	for (size_t i = 0; i < 2; i++) {
		ck_assert_int_eq(raw_login_ex(p.port, DB, "md5_user", "md5_pass", ways[i], &err, &fd), -1);
		ck_assert_int_eq(fd, -1);
		ck_assert_str_eq(err.severity, "FATAL");
		ck_assert_str_eq(err.sqlstate, "22023");
		ck_assert_msg(strstr(err.message, "invalid value for parameter \"DateStyle\": \"bogus\""), "%s",
			      err.message);
	}

	/* the server was not closed for it, and nobody's settings moved */
	expect_value(a, "SHOW DateStyle", "German, DMY");
	expect_value(a, "SELECT pg_backend_pid()", pid_a);
	PGconn *b = connect_md5(&p);
	expect_value(b, "SHOW DateStyle", "ISO, MDY");
	expect_value(b, "SELECT pg_backend_pid()", pid_a);
	ck_assert(!pgv_log_contains(&p, "closing because: could not apply"));
	free(pid_a);
	PQfinish(a);
	PQfinish(b);
	pgv_stop(&p);
}
END_TEST

/*
 * Through libpq: options=-c DateStyle=bogus and PGDATESTYLE=bogus fail
 * PQconnectdb with the server's message; a good client right after gets
 * its own (default) DateStyle on the same server; valid values of a
 * client's own log in and are in force.
 */
START_TEST(startup_values_are_checked_at_login)
{
	struct pgv p;
	pgv_start(&p, ONE_SERVER, std_databases(), std_userlist());
	PGconn *a = connect_ok(&p);
	exec_ok(a, "SET DateStyle = German");
	char *pid = value_of(a, "SELECT pg_backend_pid()");

	static const char bad[] = "invalid value for parameter \"DateStyle\": \"bogus\"";
	connect_fails(&p, (const char *const[]){ "options", "-c DateStyle=bogus", NULL }, bad);
	connect_fails_pgdatestyle(&p, "bogus", bad);
	/* a bad value next to good ones: still refused, and the good ones do not stay behind */
	connect_fails(&p, (const char *const[]){ "options", "-c search_path=varstate_left -c DateStyle=bogus", NULL },
		      bad);

	PGconn *b = connect_ok(&p);
	expect_value(b, "SHOW DateStyle", "ISO, MDY");
	expect_value(b, "SHOW search_path", "\"$user\", public");
	expect_value(b, "SELECT pg_backend_pid()", pid);
	expect_value(a, "SHOW DateStyle", "German, DMY");

	/* valid values of its own: the login goes through and they are in force */
	PGconn *c = connect_with(&p, (const char *const[]){ "options", "-c DateStyle=Postgres", NULL });
	expect_value(c, "SHOW DateStyle", "Postgres, MDY");
	ck_assert_int_eq(setenv("PGDATESTYLE", "German", 1), 0);
	PGconn *d = connect_ok(&p);
	unsetenv("PGDATESTYLE");
	expect_value(d, "SHOW DateStyle", "German, DMY");
	expect_value(b, "SHOW DateStyle", "ISO, MDY");
	expect_value(d, "SELECT pg_backend_pid()", pid);
	free(pid);
	PQfinish(a);
	PQfinish(b);
	PQfinish(c);
	PQfinish(d);
	pgv_stop(&p);
}
END_TEST

/*
 * A client_encoding PostgreSQL refuses: the login fails with its error,
 * and the other values that came with it (search_path, which PostgreSQL
 * 15 does not report) are not left on the server for the next client.
 */
START_TEST(refused_encoding_leaves_nothing_behind)
{
	struct pgv p;
	struct raw_error err;
	int fd = -1;
	pgv_start(&p, ONE_SERVER, std_databases(), std_userlist());
	PGconn *a = connect_md5(&p);
	char *pid = value_of(a, "SELECT pg_backend_pid()");
	const char *const extra[] = { "client_encoding", "bogus", "search_path", "varstate_left, public", NULL };
	ck_assert_int_eq(raw_login_ex(p.port, DB, "md5_user", "md5_pass", extra, &err, &fd), -1);
	ck_assert_str_eq(err.severity, "FATAL");
	ck_assert_str_eq(err.sqlstate, "22023");
	ck_assert_msg(strstr(err.message, "invalid value for parameter \"client_encoding\": \"bogus\""), "%s",
		      err.message);
	PGconn *b = connect_md5(&p);
	expect_value(b, "SELECT pg_backend_pid()", pid);
	expect_value(b, "SHOW search_path", "\"$user\", public");
	expect_value(b, "SHOW client_encoding", "UTF8");
	free(pid);
	PQfinish(a);
	PQfinish(b);
	pgv_stop(&p);
}
END_TEST

/*
 * A login with a value new to the pool waits for a server like a query
 * (query_wait_timeout applies, and it gets the server once it is free);
 * logins with the pool's values, or with a value a server already took
 * from an earlier login, need no server at all.
 */
START_TEST(login_check_waits_like_a_query)
{
	struct pgv p;
	pgv_start(&p, ONE_SERVER "query_wait_timeout = 2\n", std_databases(), std_userlist());
	PGconn *a = connect_ok(&p);
	exec_ok(a, "BEGIN");	/* holds the one server */

	double t0 = now_s();
	PGconn *plain = connect_ok(&p);
	ck_assert_msg(now_s() - t0 < pgv_time_bound(1.5, 1.9), "a login with the pool's values waited for a server");
	connect_fails(&p, (const char *const[]){ "options", "-c DateStyle=SQL", NULL }, "query_wait_timeout");

	/* queued, then served when the server comes free: two with the same new value, one check */
	const char *const postgres[] = { "options", "-c DateStyle=Postgres", NULL };
	PostgresPollingStatusType st = PGRES_POLLING_WRITING, st2 = PGRES_POLLING_WRITING;
	PGconn *w = connect_start_with(&p, postgres);
	PGconn *w2 = connect_start_with(&p, postgres);
	ck_assert_msg(!poll_connect(w, &st, 500), "logged in while the only server was busy: %s", PQerrorMessage(w));
	ck_assert_msg(!poll_connect(w2, &st2, 100), "logged in while the only server was busy: %s", PQerrorMessage(w2));
	exec_ok(a, "COMMIT");
	ck_assert_msg(poll_connect(w, &st, 5000) && st == PGRES_POLLING_OK, "%s", PQerrorMessage(w));
	ck_assert_msg(poll_connect(w2, &st2, 5000) && st2 == PGRES_POLLING_OK, "%s", PQerrorMessage(w2));
	expect_value(w, "SHOW DateStyle", "Postgres, MDY");
	expect_value(w2, "SHOW DateStyle", "Postgres, MDY");

	/* known now: no server needed */
	exec_ok(a, "BEGIN");
	t0 = now_s();
	PGconn *again = connect_with(&p, (const char *const[]){ "options", "-c DateStyle=Postgres", NULL });
	ck_assert_msg(now_s() - t0 < pgv_time_bound(1.5, 1.9), "a login with a value taken before waited for a server");
	exec_ok(a, "COMMIT");
	expect_value(again, "SHOW DateStyle", "Postgres, MDY");
	expect_value(plain, "SHOW DateStyle", "ISO, MDY");

	/* a new value the server happens to have already (nothing to set): the login still finishes */
	exec_ok(a, "SET DateStyle = 'SQL, DMY'");
	PGconn *same = connect_with(&p, (const char *const[]){ "options", "-c DateStyle=SQL,\\ DMY", NULL });
	expect_value(same, "SHOW DateStyle", "SQL, DMY");
	PQfinish(a);
	PQfinish(plain);
	PQfinish(w);
	PQfinish(w2);
	PQfinish(again);
	PQfinish(same);
	pgv_stop(&p);
}
END_TEST

/*
 * Session mode: the same check; a login whose values were taken keeps the
 * server they were tried on, and a refused login leaves the server to the
 * next client.
 */
START_TEST(login_check_in_session_mode)
{
	struct pgv p;
	pgv_start(&p, "auth_type = md5\npool_mode = session\ndefault_pool_size = 1\n", std_databases(),
		  std_userlist());
	PGconn *a = connect_ok(&p);
	char *pid = value_of(a, "SELECT pg_backend_pid()");
	PQfinish(a);
	connect_fails(&p, (const char *const[]){ "options", "-c DateStyle=bogus", NULL },
		      "invalid value for parameter \"DateStyle\": \"bogus\"");
	ck_assert_int_eq(setenv("PGDATESTYLE", "German", 1), 0);
	PGconn *c = connect_ok(&p);
	unsetenv("PGDATESTYLE");
	expect_value(c, "SHOW DateStyle", "German, DMY");
	expect_value(c, "SELECT pg_backend_pid()", pid);
	PQfinish(c);
	PGconn *b = connect_ok(&p);
	expect_value(b, "SHOW DateStyle", "ISO, MDY");
	expect_value(b, "SELECT pg_backend_pid()", pid);
	free(pid);
	PQfinish(b);
	pgv_stop(&p);
}
END_TEST

/*
 * A startup DateStyle naming only its output style ("Postgres") completes
 * the server's own default order (MDY), as at a login to PostgreSQL, not
 * the order a previous client left on the shared server (German, DMY).
 */
START_TEST(partial_datestyle_completes_the_servers_own)
{
	struct pgv p;
	pgv_start(&p, ONE_SERVER, std_databases(), std_userlist());
	PGconn *a = connect_ok(&p);
	exec_ok(a, "SET DateStyle = German");
	char *pid = value_of(a, "SELECT pg_backend_pid()");
	PGconn *c = connect_with(&p, (const char *const[]){ "options", "-c DateStyle=Postgres", NULL });
	expect_value(c, "SELECT pg_backend_pid()", pid);
	expect_value(c, "SHOW DateStyle", "Postgres, MDY");
	expect_value(a, "SHOW DateStyle", "German, DMY");
	expect_value(c, "SHOW DateStyle", "Postgres, MDY");
	free(pid);
	PQfinish(a);
	PQfinish(c);
	pgv_stop(&p);
}
END_TEST

/*
 * The server dies while it takes a client's parameters (pgvalve is stopped
 * while the client's query arrives and the server is terminated, so it
 * learns of both at once): the client's query never runs on it, nor fails,
 * but runs on a new server in the client's own settings.
 */
START_TEST(server_lost_while_applying)
{
	struct pgv p;
	pgv_start(&p, ONE_SERVER, std_databases(), std_userlist());
	PGconn *a = connect_ok(&p);
	PGconn *b = connect_ok(&p);
	exec_ok(a, "SET DateStyle = German");
	char *pid_a = value_of(a, "SELECT pg_backend_pid()");

	ck_assert_int_eq(kill(p.pid, SIGSTOP), 0);
	ck_assert_int_eq(PQsendQuery(b, "SHOW DateStyle"), 1);
	sleep_ms(200);	/* margin: the query sits in pgvalve's socket as soon as the local send returns */
	terminate_backend(pid_a);
	ck_assert_int_eq(kill(p.pid, SIGCONT), 0);

	PGresult *r = PQgetResult(b);
	ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "%s\n%s", PQerrorMessage(b), pgv_log_tail(&p, 2000));
	ck_assert_str_eq(PQgetvalue(r, 0, 0), "ISO, MDY");
	PQclear(r);
	while ((r = PQgetResult(b)))
		PQclear(r);
	ck_assert_str_ne(query_value(b, "SELECT pg_backend_pid()"), pid_a);
	expect_value(a, "SHOW DateStyle", "German, DMY");
	free(pid_a);
	PQfinish(a);
	PQfinish(b);
	pgv_stop(&p);
}
END_TEST

/* ---------------------------------------------------------------- following the client */

/*
 * Reported parameters (default_transaction_read_only), an unreported one
 * from the startup packet (search_path on PostgreSQL 15) and a
 * track_extra_parameters one follow their client to another server, and
 * never reach the client that shares its server.
 */
START_TEST(parameters_follow_their_client_across_servers)
{
	struct pgv p;
	struct raw_error err;
	char value[256];
	int fd = -1;
	pgv_start(&p, ONE_SERVER "track_extra_parameters = extra_float_digits\n", std_databases(), std_userlist());
	const char *extra[] = { "search_path", "varstate_a, public", "extra_float_digits", "3", NULL };
	ck_assert_int_eq(raw_login_ex(p.port, DB, "md5_user", "md5_pass", extra, &err, &fd), 0);
	ck_assert_int_eq(raw_query(fd, "SET default_transaction_read_only = on", value, sizeof(value), &err), 0);
	PGconn *b = pgv_connect(&p, DB, "md5_user", "md5_pass");	/* the same pool */
	ck_assert_msg(PQstatus(b) == CONNECTION_OK, "%s", PQerrorMessage(b));
	for (int round = 0; round < 3; round++) {
		ck_assert_int_eq(raw_query(fd, "SELECT pg_backend_pid()", value, sizeof(value), &err), 0);
		char *pid_a = strdup(value);
		/* b shares a's server, in its own settings */
		expect_value(b, "SELECT pg_backend_pid()", pid_a);
		expect_value(b, "SHOW default_transaction_read_only", "off");
		expect_value(b, "SHOW search_path", "\"$user\", public");
		expect_value(b, "SHOW extra_float_digits", "1");
		/* a on a new server has everything it had */
		end_server(&p, pid_a);
		ck_assert_int_eq(raw_query(fd, "SHOW default_transaction_read_only", value, sizeof(value), &err), 0);
		ck_assert_str_eq(value, "on");
		ck_assert_int_eq(raw_query(fd, "SHOW search_path", value, sizeof(value), &err), 0);
		ck_assert_str_eq(value, "varstate_a, public");
		ck_assert_int_eq(raw_query(fd, "SHOW extra_float_digits", value, sizeof(value), &err), 0);
		ck_assert_str_eq(value, "3");
		ck_assert_int_eq(raw_query(fd, "SELECT pg_backend_pid()", value, sizeof(value), &err), 0);
		ck_assert_str_ne(value, pid_a);
		free(pid_a);
	}
	raw_send(fd, "X\0\0\0\4", 5);
	close(fd);
	PQfinish(b);
	pgv_stop(&p);
}
END_TEST

/* ---------------------------------------------------------------- a client's own SET */

/*
 * A plain SET statement_timeout / search_path (not reported by
 * PostgreSQL 15) applies to its client's next transactions on any server
 * and never to another client's; RESET and RESET ALL take it away.
 */
START_TEST(client_set_follows_its_client_only)
{
	struct pgv p;
	pgv_start(&p, ONE_SERVER, std_databases(), std_userlist());
	PGconn *a = connect_ok(&p);
	PGconn *b = connect_ok(&p);
	exec_ok(a, "SET statement_timeout = '1234ms'");
	exec_ok(a, "set search_path to varstate_x, public;");
	exec_ok(a, "SET SESSION work_mem = '5MB'");
	exec_ok(a, "SET DateStyle = German");
	exec_ok(a, "SET ROLE scram_user");
	/* the same server again, nobody in between */
	expect_value(a, "SHOW search_path", "varstate_x, public");
	expect_value(a, "SHOW statement_timeout", "1234ms");
	for (int round = 0; round < 2; round++) {
		char *pid = value_of(a, "SELECT pg_backend_pid()");
		/* b on a's server: none of a's SETs */
		expect_value(b, "SELECT pg_backend_pid()", pid);
		expect_value(b, "SHOW statement_timeout", "0");
		expect_value(b, "SHOW search_path", "\"$user\", public");
		expect_value(b, "SHOW work_mem", "4MB");
		expect_value(b, "SHOW DateStyle", "ISO, MDY");
		expect_value(b, "SHOW role", "none");
		expect_value(a, "SHOW statement_timeout", "1234ms");
		/* a on a new server: all of them */
		end_server(&p, pid);
		expect_value(a, "SHOW statement_timeout", "1234ms");
		expect_value(a, "SHOW search_path", "varstate_x, public");
		expect_value(a, "SHOW work_mem", "5MB");
		expect_value(a, "SHOW DateStyle", "German, DMY");
		expect_value(a, "SHOW role", "scram_user");
		char *pid2 = value_of(a, "SELECT pg_backend_pid()");
		ck_assert_str_ne(pid2, pid);
		free(pid);
		free(pid2);
	}
	/* a's timeout is really in force for a, and not for b */
	exec_fails(a, "SELECT pg_sleep(2)", "57014");
	exec_ok(b, "SELECT pg_sleep(1.5)");
	exec_ok(a, "RESET work_mem");
	expect_value(a, "SHOW work_mem", "4MB");
	expect_value(a, "SHOW statement_timeout", "1234ms");
	exec_ok(a, "RESET ALL");
	expect_value(a, "SHOW statement_timeout", "0");
	expect_value(a, "SHOW search_path", "\"$user\", public");
	char *pid = value_of(a, "SELECT pg_backend_pid()");
	end_server(&p, pid);
	expect_value(a, "SHOW statement_timeout", "0");
	expect_value(a, "SHOW search_path", "\"$user\", public");
	expect_value(b, "SHOW statement_timeout", "0");
	free(pid);
	PQfinish(a);
	PQfinish(b);
	pgv_stop(&p);
}
END_TEST

/*
 * SETs pgvalve cannot follow for the client (in a transaction block,
 * through the extended protocol, several statements in one query) still
 * never reach another client.
 */
START_TEST(unfollowed_set_never_leaks)
{
	struct pgv p;
	pgv_start(&p, ONE_SERVER, std_databases(), std_userlist());
	PGconn *a = connect_ok(&p);
	PGconn *b = connect_ok(&p);
	char *pid = value_of(a, "SELECT pg_backend_pid()");
	exec_ok(a, "BEGIN");
	exec_ok(a, "SET work_mem = '7MB'");
	exec_ok(a, "COMMIT");
	expect_value(b, "SHOW work_mem", "4MB");
	PGresult *r = PQexecParams(a, "SET work_mem = '9MB'", 0, NULL, NULL, NULL, NULL, 0);
	ck_assert_int_eq(PQresultStatus(r), PGRES_COMMAND_OK);
	PQclear(r);
	expect_value(b, "SHOW work_mem", "4MB");
	exec_ok(a, "SELECT 1; SET lock_timeout = '3s'");
	expect_value(b, "SHOW lock_timeout", "0");
	exec_ok(a, "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL SERIALIZABLE");
	expect_value(b, "SHOW default_transaction_isolation", "read committed");
	/* what a reset of the whole session must take back too */
	exec_ok(a, "SELECT 1; SET ROLE scram_user");
	expect_value(b, "SHOW role", "none");
	exec_ok(a, "BEGIN; SET ROLE scram_user; COMMIT");
	expect_value(b, "SHOW role", "none");
	/* all on the one server */
	expect_value(b, "SELECT pg_backend_pid()", pid);
	free(pid);
	PQfinish(a);
	PQfinish(b);
	pgv_stop(&p);
}
END_TEST

/* track_client_set = off: PgBouncer's behaviour (the SET stays on the server), and a warning says so. */
START_TEST(client_set_tracking_off)
{
	struct pgv p;
	pgv_start(&p, ONE_SERVER "track_client_set = off\n", std_databases(), std_userlist());
	pgv_expect_log(&p, "track_client_set is off", 5);
	PGconn *a = connect_ok(&p);
	PGconn *b = connect_ok(&p);
	exec_ok(a, "SET statement_timeout = '4321ms'");
	expect_value(b, "SHOW statement_timeout", "4321ms");
	PQfinish(a);
	PQfinish(b);
	pgv_stop(&p);
}
END_TEST

/*
 * PostgreSQL 18 reports search_path in ParameterStatus (15 does not): the
 * client sees its own value at login and after its SET, and on the one
 * shared server each client still runs with its own.
 */
START_TEST(reported_search_path_follows_its_client)
{
	struct pgv p;
	pgv_start(&p, ONE_SERVER, std_databases(), std_userlist());
	PGconn *a = connect_ok(&p);
	const char *reported = PQparameterStatus(a, "search_path");
	if (pgv_pg_major() < 18) {
		ck_assert_msg(reported == NULL, "PostgreSQL %d reported search_path \"%s\"", pgv_pg_major(), reported);
	} else {
		ck_assert_msg(reported && strcmp(reported, "\"$user\", public") == 0, "search_path at login: %s",
			      reported ? reported : "(not reported)");
	}
	exec_ok(a, "SET search_path = varstate_rp, public");
	if (pgv_pg_major() >= 18)
		ck_assert_str_eq(PQparameterStatus(a, "search_path"), "varstate_rp, public");
	PGconn *b = connect_ok(&p);
	expect_value(b, "SHOW search_path", "\"$user\", public");
	if (pgv_pg_major() >= 18)
		ck_assert_str_eq(PQparameterStatus(b, "search_path"), "\"$user\", public");
	expect_value(a, "SHOW search_path", "varstate_rp, public");
	expect_value(b, "SHOW search_path", "\"$user\", public");
	if (pgv_pg_major() >= 18) {
		ck_assert_str_eq(PQparameterStatus(a, "search_path"), "varstate_rp, public");
		ck_assert_str_eq(PQparameterStatus(b, "search_path"), "\"$user\", public");
	}
	PQfinish(a);
	PQfinish(b);
	pgv_stop(&p);
}
END_TEST

/* ---------------------------------------------------------------- learned after the transaction */

/* The client's way of sending one statement: PQexec (simple Query) or PQexecParams (Parse, Bind, Execute). */
static void run_ok(PGconn *c, const char *sql, bool extended)
{
	PGresult *r = extended ? PQexecParams(c, sql, 0, NULL, NULL, NULL, NULL, 0) : PQexec(c, sql);
	ExecStatusType st = PQresultStatus(r);
	ck_assert_msg(st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK, "%s (%s): %s", sql,
		      extended ? "extended" : "simple", PQerrorMessage(c));
	PQclear(r);
}

/* How a case's statements are sent. */
enum send_mode {
	SEND_JOINED,		/* one simple Query, joined by "; " (SETs among statements: learned from pg_settings) */
	SEND_EXTENDED,		/* one by one through the extended protocol */
	SEND_SIMPLE_EACH,	/* one simple Query each (parsed SETs in a block: learned by name) */
	SEND_MODES
};
static const char *const send_mode_names[] = { "simple, one Query", "extended", "simple, a Query each" };

/* Several statements, as mode says. */
static void run_all(PGconn *c, const char *const *sqls, enum send_mode mode)
{
	if (mode != SEND_JOINED) {
		for (int i = 0; sqls[i]; i++)
			run_ok(c, sqls[i], mode == SEND_EXTENDED);
		return;
	}
	char joined[1024] = "";
	for (int i = 0; sqls[i]; i++) {
		strncat(joined, sqls[i], sizeof(joined) - strlen(joined) - 3);
		if (sqls[i + 1])
			strcat(joined, "; ");
	}
	run_ok(c, joined, false);
}

/*
 * a's value of what (SHOW or current_setting) is want, on its server and
 * then on a new one, and b, on the one server before that, sees other.
 */
static void expect_own(struct pgv *p, PGconn *a, PGconn *b, const char *what, const char *want, const char *other)
{
	char *pid = value_of(a, "SELECT pg_backend_pid()");
	expect_value(a, what, want);
	expect_value(b, "SELECT pg_backend_pid()", pid);	/* the one server: what a left there */
	expect_value(b, what, other);
	expect_value(a, what, want);
	end_server(p, pid);
	expect_value(a, what, want);	/* a new server */
	char *pid2 = value_of(a, "SELECT pg_backend_pid()");
	ck_assert_str_ne(pid, pid2);
	expect_value(b, what, other);
	free(pid);
	free(pid2);
}

struct learn_case {
	const char *name;
	const char *setup;	/* run alone before, or NULL */
	const char *sqls[6];
	bool simple_only;	/* several statements in one Query */
	const char *show;
	const char *want;
	const char *other;
};

static const struct learn_case learn_cases[] = {
	{ "set_config", NULL, { "SELECT set_config('work_mem', '7777kB', false)" }, false,
	  "SHOW work_mem", "7777kB", "4MB" },
	{ "DO", NULL, { "DO $$BEGIN SET work_mem = '7777kB'; END$$" }, false, "SHOW work_mem", "7777kB", "4MB" },
	{ "committed", NULL, { "BEGIN", "SET work_mem = '7777kB'", "COMMIT" }, false, "SHOW work_mem", "7777kB", "4MB" },
	{ "one query", NULL, { "SET work_mem = '7777kB'; SELECT 1" }, true, "SHOW work_mem", "7777kB", "4MB" },
	{ "search_path", NULL, { "BEGIN", "SET search_path = pg_catalog, public", "COMMIT" }, false,
	  "SHOW search_path", "pg_catalog, public", "\"$user\", public" },
	{ "rolled back", "SET lock_timeout = '2s'", { "BEGIN", "SET lock_timeout = '7s'", "ROLLBACK" }, false,
	  "SHOW lock_timeout", "2s", "0" },
	{ "SET LOCAL", NULL, { "BEGIN", "SET statement_timeout = '11s'", "SET LOCAL statement_timeout = '12s'", "COMMIT" },
	  false, "SHOW statement_timeout", "11s", "0" },
	{ "savepoint", NULL, { "BEGIN", "SET work_mem = '5MB'", "SAVEPOINT s", "SET work_mem = '6MB'", "ROLLBACK TO s",
	  "COMMIT" }, false, "SHOW work_mem", "5MB", "4MB" },
	{ "RESET in a transaction", "SET work_mem = '5MB'", { "BEGIN", "RESET work_mem", "COMMIT" }, false,
	  "SHOW work_mem", "4MB", "4MB" },
	{ "role", NULL, { "BEGIN", "SET ROLE scram_user", "COMMIT" }, false, "SHOW role", "scram_user", "none" },
	{ "characteristics", NULL, { "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL SERIALIZABLE" }, false,
	  "SHOW default_transaction_isolation", "serializable", "read committed" },
	{ "custom set_config", NULL, { "BEGIN", "SELECT set_config('myapp.tenant', 't42', false)", "COMMIT" }, false,
	  "SELECT coalesce(current_setting('myapp.tenant', true), '')", "t42", "" },
	{ "custom SET", NULL, { "BEGIN", "SET myapp.tenant = 't43'", "COMMIT" }, false,
	  "SELECT coalesce(current_setting('myapp.tenant', true), '')", "t43", "" },
};

/*
 * Issue 55: every way a session setting changes (a SET in a transaction
 * that commits, rolls back or has savepoints, SET LOCAL, a SET among other
 * statements, set_config(), DO, SET ROLE, SESSION CHARACTERISTICS, custom
 * parameters) leaves the client seeing what PostgreSQL shows it, on its
 * server and on a new one, and the next client on that server sees none
 * of it; through the simple protocol (statements joined in one Query, and
 * one Query each: learned from pg_settings, and by name) and the extended.
 */
START_TEST(session_changes_are_learned)
{
	struct pgv p;
	pgv_start(&p, ONE_SERVER, std_databases(), std_userlist());
	for (int mode = 0; mode < SEND_MODES; mode++) {
		for (size_t i = 0; i < sizeof(learn_cases) / sizeof(learn_cases[0]); i++) {
			const struct learn_case *lc = &learn_cases[i];
			if (mode == SEND_EXTENDED && lc->simple_only)
				continue;
			PGconn *a = connect_ok(&p);
			PGconn *b = connect_ok(&p);
			fprintf(stderr, "case %s (%s)\n", lc->name, send_mode_names[mode]);
			if (lc->setup)
				exec_ok(a, lc->setup);
			run_all(a, lc->sqls, (enum send_mode)mode);
			expect_own(&p, a, b, lc->show, lc->want, lc->other);
			PQfinish(a);
			PQfinish(b);
		}
	}
	pgv_stop(&p);
}
END_TEST

/* A raw client a (md5_user, over the one server of ONE_SERVER) and a libpq client b of the same pool. */
static int raw_and_libpq_clients(struct pgv *p, PGconn **b)
{
	struct raw_error err;
	int a = -1;
	pgv_start(p, ONE_SERVER, std_databases(), std_userlist());
	*b = connect_md5(p);
	ck_assert_int_eq(raw_login_ex(p->port, DB, "md5_user", "md5_pass", NULL, &err, &a), 0);
	return a;
}

/* BEGIN, set, COMMIT on raw client a, each answered: a transaction whose settings are learned. */
static void raw_learned_transaction(int a, const char *set)
{
	struct raw_error err;
	char value[128];
	ck_assert_int_eq(raw_query(a, "BEGIN", value, sizeof(value), &err), 0);
	ck_assert_int_eq(raw_query(a, set, value, sizeof(value), &err), 0);
	ck_assert_int_eq(raw_query(a, "COMMIT", value, sizeof(value), &err), 0);
}

/*
 * The client's next transaction, sent the moment the COMMIT is answered,
 * comes while its last one is learned (from pg_settings that takes the
 * server about half a millisecond): it waits for the learn's answer (let
 * through behind it, a client sending transaction after transaction kept
 * its server from the pool for good), and either order must give the
 * same answers. Its SHOW sees the committed value; the other client, on
 * the one server next, sees none of it; both ways of learning, 20 rounds
 * each.
 */
START_TEST(next_transaction_follows_the_learn)
{
	struct pgv p;
	PGconn *b;
	int a = raw_and_libpq_clients(&p, &b);
	struct raw_error err;
	char value[128];
	for (int i = 0; i < 40; i++) {
		char set[96], want[32];
		snprintf(want, sizeof(want), "%dkB", 5000 + i);
		/* even rounds: a SET among statements (pg_settings); odd: a parsed SET in a block (by name) */
		snprintf(set, sizeof(set), i % 2 ? "SET work_mem = '%s'" : "SET work_mem = '%s'; SELECT 1", want);
		raw_learned_transaction(a, set);
		ck_assert(raw_send_query(a, "SHOW work_mem"));	/* at once: while the learn runs */
		ck_assert_int_eq(raw_read_result(a, value, sizeof(value), &err, 10000), 0);
		ck_assert_msg(strcmp(value, want) == 0, "round %d: SHOW work_mem gave %s, not %s", i, value, want);
		expect_value(b, "SHOW work_mem", "4MB");
		ck_assert_int_eq(raw_query(a, "SHOW work_mem", value, sizeof(value), &err), 0);
		ck_assert_str_eq(value, want);
	}
	close(a);
	PQfinish(b);
	pgv_stop(&p);
}
END_TEST

/*
 * A plain SET sent the moment the COMMIT is answered (while the learn
 * runs) is its client's, and nothing of it is left on the server for the
 * next client, whose own SET is its own. (When such a SET went to the
 * server behind the learn, the learn's reply went uncounted: the SET was
 * matched one reply late, stayed queued on the server, and the next
 * client's SET took its statement, on PostgreSQL 15 where search_path is
 * not reported.)
 */
START_TEST(set_behind_the_learn_stays_its_own)
{
	struct pgv p;
	PGconn *b;
	int a = raw_and_libpq_clients(&p, &b);
	struct raw_error err;
	char value[128];
	for (int i = 0; i < 10; i++) {
		char sql[96], a_path[32], b_path[32];
		snprintf(a_path, sizeof(a_path), "a%d, public", i);
		snprintf(b_path, sizeof(b_path), "b%d, public", i);
		raw_learned_transaction(a, "SET search_path = pg_catalog");
		snprintf(sql, sizeof(sql), "SET search_path = %s", a_path);
		ck_assert(raw_send_query(a, sql));	/* at once: while the learn runs */
		ck_assert_int_eq(raw_read_result(a, value, sizeof(value), &err, 10000), 0);
		snprintf(sql, sizeof(sql), "SET search_path = %s", b_path);
		exec_ok(b, sql);
		expect_value(b, "SHOW search_path", b_path);
		ck_assert_int_eq(raw_query(a, "SHOW search_path", value, sizeof(value), &err), 0);
		ck_assert_msg(strcmp(value, a_path) == 0, "round %d: a sees %s, not %s", i, value, a_path);
		/* each on a new server: what its set replays there */
		char *pid = value_of(b, "SELECT pg_backend_pid()");
		end_server(&p, pid);
		free(pid);
		expect_value(b, "SHOW search_path", b_path);
		ck_assert_int_eq(raw_query(a, "SHOW search_path", value, sizeof(value), &err), 0);
		ck_assert_msg(strcmp(value, a_path) == 0, "round %d, new server: a sees %s, not %s", i, value, a_path);
		exec_ok(b, "RESET search_path");
	}
	close(a);
	PQfinish(b);
	pgv_stop(&p);
}
END_TEST

/*
 * A SET refused inside a transaction aborts it, as in PostgreSQL; the
 * client's earlier settings stay, and the ones of the aborted transaction
 * are gone.
 */
START_TEST(refused_set_in_a_transaction_keeps_earlier_settings)
{
	struct pgv p;
	pgv_start(&p, ONE_SERVER, std_databases(), std_userlist());
	PGconn *a = connect_ok(&p);
	PGconn *b = connect_ok(&p);
	exec_ok(a, "BEGIN; SET work_mem = '5MB'; COMMIT");
	exec_ok(a, "BEGIN");
	exec_ok(a, "SET lock_timeout = '9s'");
	exec_fails(a, "SET work_mem = 'plenty'", "22023");
	exec_fails(a, "SET no_such_parameter = 1", "25P02");
	exec_ok(a, "ROLLBACK");
	expect_own(&p, a, b, "SHOW work_mem", "5MB", "4MB");
	expect_value(a, "SHOW lock_timeout", "0");
	exec_fails(a, "BEGIN; SET no_such_parameter = 1; COMMIT", "42704");
	ck_assert_int_eq(PQtransactionStatus(a), PQTRANS_INERROR);	/* the rest of the Query was not run */
	exec_ok(a, "ROLLBACK");
	expect_own(&p, a, b, "SHOW work_mem", "5MB", "4MB");
	PQfinish(a);
	PQfinish(b);
	pgv_stop(&p);
}
END_TEST

/*
 * A function of the database that changes a setting (its body calls
 * set_config(), or runs SET), called from a plain SELECT, by another
 * function, through a view or as a trigger: once pgvalve has read pg_proc
 * (at the janitor's first tick with an idle server), the client keeps
 * what it set, on its server and on a new one, and the next client on
 * that server sees none of it; through both protocols.
 */
/*
 * Until pgvalve has read pg_proc, a setting function's SET leaks as in
 * PgBouncer: call (a SELECT of the function, with the value 6MB) until the
 * next client on the one server no longer sees it. The janitor reads
 * pg_proc at its next tick (1 s) with an idle server; 15 s leaves a loaded
 * machine plenty, and is far below load_balance_functions_refresh (300 s).
 */
static void wait_setter_known(struct pgv *p, PGconn *a, PGconn *b, const char *call)
{
	bool known = false;
	for (double deadline = now_s() + 15; !known && now_s() < deadline; sleep_ms(100)) {
		exec_ok(a, call);
		char *other = value_of(b, "SHOW work_mem");
		known = strcmp(other, "4MB") == 0;
		free(other);
		exec_ok(a, "RESET work_mem");
	}
	ck_assert_msg(known, "%s: the setting function never known: %s", call, pgv_log_tail(p, 1500));
}

START_TEST(setting_functions_are_learned)
{
	PGconn *d = pg_direct();
	exec_ok(d, "CREATE OR REPLACE FUNCTION varstate_set_mem(m text) RETURNS text LANGUAGE plpgsql AS "
		   "$$BEGIN PERFORM set_config('work_mem', m, false); RETURN m; END$$");
	exec_ok(d, "CREATE OR REPLACE FUNCTION varstate_set_path() RETURNS int LANGUAGE plpgsql AS "
		   "$$BEGIN\n  SET search_path = pg_catalog, public;\n  RETURN 1;\nEND$$");
	/* one that calls a setter, a view that calls one, a trigger that is one */
	exec_ok(d, "CREATE OR REPLACE FUNCTION varstate_outer() RETURNS text LANGUAGE sql AS "
		   "'SELECT varstate_set_mem(''8MB'')'");
	exec_ok(d, "CREATE OR REPLACE VIEW varstate_mem_view AS SELECT varstate_set_mem('9MB') AS m");
	exec_ok(d, "GRANT SELECT ON varstate_mem_view TO PUBLIC");
	exec_ok(d, "CREATE TABLE IF NOT EXISTS varstate_trig (x int)");
	exec_ok(d, "GRANT ALL ON varstate_trig TO PUBLIC");
	exec_ok(d, "CREATE OR REPLACE FUNCTION varstate_trig_fn() RETURNS trigger LANGUAGE plpgsql AS "
		   "$$BEGIN PERFORM set_config('lock_timeout', '4s', false); RETURN NEW; END$$");
	exec_ok(d, "CREATE OR REPLACE TRIGGER varstate_trig_set BEFORE INSERT ON varstate_trig "
		   "FOR EACH ROW EXECUTE FUNCTION varstate_trig_fn()");
	PQfinish(d);
	struct pgv p;
	pgv_start(&p, ONE_SERVER, std_databases(), std_userlist());
	PGconn *a = connect_ok(&p);
	PGconn *b = connect_ok(&p);
	wait_setter_known(&p, a, b, "SELECT varstate_set_mem('6MB')");
	for (int ext = 0; ext < 2; ext++) {
		run_ok(a, "SELECT varstate_set_mem('7MB')", ext);
		expect_own(&p, a, b, "SHOW work_mem", "7MB", "4MB");
		run_ok(a, "SELECT VARSTATE_SET_PATH()", ext);
		expect_own(&p, a, b, "SHOW search_path", "pg_catalog, public", "\"$user\", public");
		run_ok(a, "SELECT varstate_outer()", ext);
		expect_own(&p, a, b, "SHOW work_mem", "8MB", "4MB");
		run_ok(a, "SELECT m FROM varstate_mem_view", ext);
		expect_own(&p, a, b, "SHOW work_mem", "9MB", "4MB");
		run_ok(a, "INSERT INTO varstate_trig VALUES (1)", ext);
		expect_own(&p, a, b, "SHOW lock_timeout", "4s", "0");
		exec_ok(a, "RESET ALL");
	}
	/* made through pgvalve: read again at the next tick, not load_balance_functions_refresh (300 s) later */
	d = pg_direct();
	exec_ok(d, "GRANT CREATE ON SCHEMA public TO scram_user");
	PQfinish(d);
	exec_ok(a, "CREATE OR REPLACE FUNCTION varstate_late(m text) RETURNS text LANGUAGE plpgsql AS "
		   "$$BEGIN PERFORM set_config('work_mem', m, false); RETURN m; END$$");
	wait_setter_known(&p, a, b, "SELECT varstate_late('6MB')");
	exec_ok(a, "SELECT varstate_late('3MB')");
	expect_own(&p, a, b, "SHOW work_mem", "3MB", "4MB");
	PQfinish(a);
	PQfinish(b);
	pgv_stop(&p);
}
END_TEST

static Suite *varstate_suite(void)
{
	Suite *s = suite_create("varstate");
	TCase *tc = pgv_tcase_create("apply", 60);
	tcase_add_test(tc, encoding_and_datestyle_stay_with_their_client);
	tcase_add_test(tc, invalid_startup_value_gets_its_own_error);
	tcase_add_test(tc, partial_datestyle_completes_the_servers_own);
	tcase_add_test(tc, startup_values_are_checked_at_login);
	tcase_add_test(tc, refused_encoding_leaves_nothing_behind);
	tcase_add_test(tc, login_check_waits_like_a_query);
	tcase_add_test(tc, login_check_in_session_mode);
	tcase_add_test(tc, server_lost_while_applying);
	suite_add_tcase(s, tc);
	tc = pgv_tcase_create("follow", 60);
	tcase_add_test(tc, parameters_follow_their_client_across_servers);
	tcase_add_test(tc, client_set_follows_its_client_only);
	tcase_add_test(tc, unfollowed_set_never_leaks);
	tcase_add_test(tc, client_set_tracking_off);
	tcase_add_test(tc, reported_search_path_follows_its_client);
	suite_add_tcase(s, tc);
	tc = pgv_tcase_create("learned", 120);
	tcase_add_test(tc, session_changes_are_learned);
	tcase_add_test(tc, next_transaction_follows_the_learn);
	tcase_add_test(tc, set_behind_the_learn_stays_its_own);
	tcase_add_test(tc, refused_set_in_a_transaction_keeps_earlier_settings);
	tcase_add_test(tc, setting_functions_are_learned);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return pgv_run_suite(varstate_suite());
}
