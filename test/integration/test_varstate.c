/*
 * test_varstate.c - session state never crosses clients in transaction
 * mode (issue 14), against a real PostgreSQL 15 with one server shared by
 * every client (default_pool_size = 1): tracked parameters are applied
 * all or nothing and client_encoding first, a client's bad value gets its
 * own error, every reported parameter follows its client, and a client's
 * plain SET of an unreported parameter is kept for it and for nobody else.
 */
#include "harness.h"

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
	PGconn *a = connect_ok(&p);
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
	PGconn *b = connect_ok(&p);
	expect_value(b, "SHOW DateStyle", "ISO, MDY");
	free(pid_a);
	PQfinish(a);
	PQfinish(b);
	pgv_stop(&p);
}
END_TEST

/*
 * A failure of the server's own (here: the server is terminated while it
 * applies) never lets the client's query run on it: another server is
 * used, in the client's settings.
 */
START_TEST(failed_apply_moves_to_another_server)
{
	struct pgv p;
	pgv_start(&p, ONE_SERVER "server_login_retry = 0\n", std_databases(), std_userlist());
	PGconn *a = connect_ok(&p);
	exec_ok(a, "SET DateStyle = German");
	char *pid_a = value_of(a, "SELECT pg_backend_pid()");
	/* The shared server dies between transactions: the next apply meets a closed connection. */
	PGconn *d = pg_direct();
	char sql[128];
	snprintf(sql, sizeof(sql), "SELECT pg_terminate_backend(%s)", pid_a);
	exec_ok(d, sql);
	PQfinish(d);
	sleep_ms(300);
	PGconn *b = connect_ok(&p);
	PGresult *r = PQexec(b, "SHOW DateStyle");
	/* either refused (the server died under it) or run in its own settings, never in German */
	if (PQresultStatus(r) == PGRES_TUPLES_OK)
		ck_assert_str_eq(PQgetvalue(r, 0, 0), "ISO, MDY");
	PQclear(r);
	PQfinish(b);
	b = connect_ok(&p);
	expect_value(b, "SHOW DateStyle", "ISO, MDY");
	expect_value(a, "SHOW DateStyle", "German, DMY");
	free(pid_a);
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
	tcase_add_test(tc, failed_apply_moves_to_another_server);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return pgv_run_suite(varstate_suite());
}
