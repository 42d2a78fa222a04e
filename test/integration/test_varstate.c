/*
 * test_varstate.c - session state never crosses clients in transaction
 * mode (issue 14), against a real PostgreSQL 15 with one server shared by
 * every client (default_pool_size = 1): tracked parameters are applied
 * all or nothing and client_encoding first, a client's bad value gets its
 * own error, every reported parameter follows its client, and a client's
 * plain SET of an unreported parameter is kept for it and for nobody else.
 */
#include "harness.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DB "pgvtest"
#define ONE_SERVER "auth_type = md5\npool_mode = transaction\ndefault_pool_size = 1\n"

/* A libpq client with extra connection keywords (name, value, ..., NULL). */
static PGconn *connect_with(struct pgv *p, const char *const *extra)
{
	const char *kw0[10], *val0[10], *kw[20], *val[20];
	char port[16];
	int n = 0;
	pgv_conn_params(p, DB, "scram_user", "scram_pass", kw0, val0, port);
	for (; kw0[n]; n++)
		kw[n] = kw0[n], val[n] = val0[n];
	for (int i = 0; extra && extra[i] && n < 18; i += 2, n++)
		kw[n] = extra[i], val[n] = extra[i + 1];
	kw[n] = NULL, val[n] = NULL;
	PGconn *c = PQconnectdbParams(kw, val, 0);
	ck_assert_msg(c && PQstatus(c) == CONNECTION_OK, "connect: %s\n%s", c ? PQerrorMessage(c) : "oom",
		      pgv_log_tail(p, 1500));
	return c;
}

static PGconn *connect_ok(struct pgv *p)
{
	return connect_with(p, NULL);
}

static void exec_ok(PGconn *c, const char *sql)
{
	PGresult *r = PQexec(c, sql);
	ExecStatusType st = PQresultStatus(r);
	ck_assert_msg(st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK, "%s: %s", sql, PQerrorMessage(c));
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
	for (int i = 0; i < 100 && strcmp(query_value(d, sql), "0") != 0; i++)
		sleep_ms(50);
	PQfinish(d);
}

/* Ends the server connection with backend pid and waits until pgvalve closed it: the next query gets a new one. */
static void end_server(struct pgv *p, const char *pid)
{
	static const char closed[] = "terminating connection due to administrator command";
	int before = pgv_log_count(p, closed);
	terminate_backend(pid);
	for (int i = 0; i < 100 && pgv_log_count(p, closed) == before; i++)
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
 * error for it (FATAL 22023), not the previous client's German, and the
 * shared server keeps serving the others.
 */
START_TEST(invalid_startup_value_gets_its_own_error)
{
	struct pgv p;
	struct raw_error err;
	char value[256];
	int fd = -1;
	pgv_start(&p, ONE_SERVER, std_databases(), std_userlist());
	PGconn *a = pgv_connect(&p, DB, "md5_user", "md5_pass");	/* the raw client's pool */
	ck_assert_msg(PQstatus(a) == CONNECTION_OK, "%s", PQerrorMessage(a));
	exec_ok(a, "SET DateStyle = German");
	char *pid_a = value_of(a, "SELECT pg_backend_pid()");

	const char *extra[] = { "DateStyle", "bogus", NULL };
	ck_assert_int_eq(raw_login_ex(p.port, DB, "md5_user", "md5_pass", extra, &err, &fd), 0);
	memset(&err, 0, sizeof(err));
	ck_assert_int_eq(raw_query(fd, "SHOW DateStyle", value, sizeof(value), &err), -1);
	ck_assert_str_eq(err.severity, "FATAL");
	ck_assert_str_eq(err.sqlstate, "22023");
	ck_assert_msg(strstr(err.message, "invalid value for parameter \"DateStyle\": \"bogus\""), "%s", err.message);
	ck_assert(raw_wait_closed(fd, 5000));
	close(fd);

	/* the server was not closed for it, and nobody's settings moved */
	expect_value(a, "SHOW DateStyle", "German, DMY");
	expect_value(a, "SELECT pg_backend_pid()", pid_a);
	PGconn *b = pgv_connect(&p, DB, "md5_user", "md5_pass");
	expect_value(b, "SHOW DateStyle", "ISO, MDY");
	expect_value(b, "SELECT pg_backend_pid()", pid_a);
	free(pid_a);
	PQfinish(a);
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
	sleep_ms(200);
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
	PGresult *r = PQexec(a, "SELECT pg_sleep(2)");
	ck_assert_int_eq(PQresultStatus(r), PGRES_FATAL_ERROR);
	ck_assert_str_eq(PQresultErrorField(r, PG_DIAG_SQLSTATE), "57014");
	PQclear(r);
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

static Suite *varstate_suite(void)
{
	Suite *s = suite_create("varstate");
	TCase *tc = pgv_tcase_create("apply", 60);
	tcase_add_test(tc, encoding_and_datestyle_stay_with_their_client);
	tcase_add_test(tc, invalid_startup_value_gets_its_own_error);
	tcase_add_test(tc, partial_datestyle_completes_the_servers_own);
	tcase_add_test(tc, server_lost_while_applying);
	suite_add_tcase(s, tc);
	tc = pgv_tcase_create("follow", 60);
	tcase_add_test(tc, parameters_follow_their_client_across_servers);
	tcase_add_test(tc, client_set_follows_its_client_only);
	tcase_add_test(tc, unfollowed_set_never_leaks);
	tcase_add_test(tc, client_set_tracking_off);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return pgv_run_suite(varstate_suite());
}
