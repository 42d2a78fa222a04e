/*
 * test_balance.c - the read balancer (load_balance_reads, issue 49) against
 * a real PostgreSQL. So far: its classifier (sql_classify.c) checked by
 * PostgreSQL itself. Every text it calls a read, from a list of reads and
 * writes, the fuzz seed corpora and a few thousand texts glued from
 * hostile pieces, must run in a READ ONLY transaction without SQLSTATE
 * 25006 (what a standby answers to a write), with
 * standard_conforming_strings on and off; and the known writes of the
 * list must be both refused by PostgreSQL there and called writes. The
 * function table is PostgreSQL's own: the names no VOLATILE function has.
 */
#include "harness.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pgvalve/common.h"
#include "pgvalve/sql_classify.h"

/* ---------------------------------------------------------------- pg_proc */

static char **safe_names;
static size_t safe_count;

static int compare_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names of functions none of whose overloads is VOLATILE, sorted for bsearch. */
static void load_safe_functions(PGconn *conn)
{
	PGresult *r = PQexec(conn, "SELECT proname FROM pg_catalog.pg_proc GROUP BY proname "
				   "HAVING bool_and(provolatile <> 'v')");
	ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "pg_proc: %s", PQerrorMessage(conn));
	safe_count = (size_t)PQntuples(r);
	ck_assert_uint_gt(safe_count, 1000);
	safe_names = calloc(safe_count, sizeof(*safe_names));
	for (size_t i = 0; i < safe_count; i++)
		safe_names[i] = strdup(PQgetvalue(r, (int)i, 0));
	qsort(safe_names, safe_count, sizeof(*safe_names), compare_names);
	PQclear(r);
}

static bool function_safe(void *arg, const char *name)
{
	(void)arg;
	return bsearch(&name, safe_names, safe_count, sizeof(*safe_names), compare_names) != NULL;
}

/* ---------------------------------------------------------------- the oracle */

static void exec_ok(PGconn *conn, const char *sql)
{
	PGresult *r = PQexec(conn, sql);
	ck_assert_msg(PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK, "%s: %s", sql,
		      PQerrorMessage(conn));
	PQclear(r);
}

/* text's SQLSTATE in a READ ONLY transaction ("" if it ran); the transaction is rolled back. */
static const char *sqlstate_read_only(PGconn *conn, const char *text)
{
	static char state[8];
	exec_ok(conn, "BEGIN TRANSACTION READ ONLY");
	PGresult *r = PQexec(conn, text);
	const char *s = PQresultErrorField(r, PG_DIAG_SQLSTATE);
	snprintf(state, sizeof(state), "%s", s ? s : "");
	PQclear(r);
	exec_ok(conn, "ROLLBACK");
	return state;
}

static int reads_checked;

/* If the classifier calls text a read, PostgreSQL must run it read-only without 25006. Returns its verdict. */
static bool check_text(PGconn *conn, const char *text, size_t len)
{
	if (!sql_classify_read_only(text, len, function_safe, NULL))
		return false;
	if (memchr(text, '\0', len) && strlen(text) < len)
		return true;	/* PostgreSQL would read it only to the NUL, as the classifier did: nothing new */
	const char *state = sqlstate_read_only(conn, text);
	ck_assert_msg(strcmp(state, "25006") != 0, "a write called a read: %s", text);
	reads_checked++;
	return true;
}

static void setup_schema(PGconn *conn)
{
	exec_ok(conn, "SET client_min_messages = warning");
	exec_ok(conn, "DROP SCHEMA IF EXISTS bal CASCADE");
	exec_ok(conn, "CREATE SCHEMA bal");
	exec_ok(conn, "CREATE TABLE bal.t (a int, b text)");
	exec_ok(conn, "INSERT INTO bal.t VALUES (1, 'x'), (2, 'y')");
	exec_ok(conn, "CREATE SEQUENCE bal.s");
	exec_ok(conn, "CREATE FUNCTION bal.writer() RETURNS int VOLATILE LANGUAGE sql "
		      "AS 'INSERT INTO bal.t VALUES (3) RETURNING a'");
	exec_ok(conn, "CREATE FUNCTION bal.reader() RETURNS bigint STABLE LANGUAGE sql AS 'SELECT count(*) FROM bal.t'");
	exec_ok(conn, "SET statement_timeout = '5s'");
}

/* Reads the classifier must let through, and writes PostgreSQL refuses read-only that it must not. */
static void known_texts(PGconn *conn)
{
	static const char *const reads[] = {
		"SELECT 1",
		"SELECT a, b FROM bal.t WHERE a IN (1, 2) ORDER BY a",
		"WITH x AS (SELECT a FROM bal.t) SELECT count(*) FROM x",
		"VALUES (1), (2)",
		"TABLE bal.t",
		"SHOW search_path",
		"SELECT bal.reader(), now(), lower('X'), coalesce(NULL, 1)",
		"SELECT 'INSERT INTO bal.t VALUES (9)', $$DELETE FROM bal.t$$",
		"SELECT 1; SELECT 2",
		"SELECT * FROM bal.t FOR READ ONLY",
	};
	static const char *const writes[] = {
		"INSERT INTO bal.t VALUES (9)",
		"SELECT nextval('bal.s')",
		"SELECT setval('bal.s', 5)",
		"SELECT bal.writer()",
		"SELECT * FROM bal.t FOR UPDATE",
		"SELECT * FROM bal.t FOR SHARE",
		"SELECT * FROM bal.t FOR NO KEY UPDATE",
		"SELECT * FROM bal.t FOR KEY SHARE",
		"SELECT * INTO bal.copy FROM bal.t",
		"WITH d AS (DELETE FROM bal.t WHERE a = 1 RETURNING *) SELECT * FROM d",
		"WITH u AS (UPDATE bal.t SET a = a RETURNING *) SELECT count(*) FROM u",
		"SELECT 1; DELETE FROM bal.t",
		"SELECT 1 /* ; */ ; INSERT INTO bal.t VALUES (1)",
		"SELECT 1 --\r; INSERT INTO bal.t VALUES (1)",
		"SELECT pg_advisory_xact_lock(1)",	/* PostgreSQL allows it read-only; a standby does not */
	};
	for (size_t i = 0; i < ARRAY_SIZE(reads); i++) {
		ck_assert_msg(check_text(conn, reads[i], strlen(reads[i])), "not called a read: %s", reads[i]);
		ck_assert_str_eq(sqlstate_read_only(conn, reads[i]), "");
	}
	for (size_t i = 0; i < ARRAY_SIZE(writes); i++) {
		ck_assert_msg(!check_text(conn, writes[i], strlen(writes[i])), "a write called a read: %s", writes[i]);
		if (!strstr(writes[i], "advisory"))
			ck_assert_msg(strcmp(sqlstate_read_only(conn, writes[i]), "25006") == 0,
				      "not a write to PostgreSQL: %s", writes[i]);
	}
}

/* Every seed of the two SQL fuzz targets. */
static void corpus_texts(PGconn *conn)
{
	static const char *const targets[] = { "fuzz_sql_lex", "fuzz_sql_classify" };
	for (size_t t = 0; t < ARRAY_SIZE(targets); t++) {
		char dir[700];
		snprintf(dir, sizeof(dir), "%s/test/fuzz/corpus/%s", PGV_TEST_SRCDIR, targets[t]);
		DIR *d = opendir(dir);
		ck_assert_msg(d, "%s", dir);
		struct dirent *e;
		while ((e = readdir(d)) != NULL) {
			if (e->d_name[0] == '.')
				continue;
			char path[1000], buf[4096];
			snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
			FILE *f = fopen(path, "rb");
			ck_assert(f);
			size_t n = fread(buf, 1, sizeof(buf) - 1, f);
			fclose(f);
			buf[n] = '\0';
			check_text(conn, buf, n);
		}
		closedir(d);
	}
}

/* Texts glued from pieces that open and close quotes, comments and statements, and write. */
static void glued_texts(PGconn *conn, int count)
{
	static const char *const pieces[] = {
		"SELECT ", "WITH x AS (SELECT 1) ", "VALUES (1)", "TABLE bal.t", "SHOW all", " FROM bal.t", " a ",
		"'", "''", "E'", "\\", "\\'", "$$", "$q$", "/*", "*/", "--", "\n", "\r", ";", "(", ")", ", ",
		"INSERT INTO bal.t VALUES (1)", "DELETE FROM bal.t", "nextval('bal.s')", "bal.writer()",
		"bal.reader()", "count(*)", " FOR UPDATE", " FOR SHARE", " INTO bal.x", "\"", "U&'", "E'\\'';",
		" UPDATE bal.t SET a = 1", "SELECT 1", "setval('bal.s', 1)", " WHERE a = 1",
	};
	unsigned seed = 49;
	int reads = 0;
	for (int i = 0; i < count; i++) {
		char text[512] = "";
		int n = 2 + (int)(rand_r(&seed) % 8);
		for (int k = 0; k < n; k++)
			strncat(text, pieces[rand_r(&seed) % ARRAY_SIZE(pieces)], sizeof(text) - strlen(text) - 1);
		if (i == count / 2)
			exec_ok(conn, "SET standard_conforming_strings = off");
		reads += check_text(conn, text, strlen(text));
	}
	exec_ok(conn, "SET standard_conforming_strings = on");
	ck_assert_int_gt(reads, count / 50);	/* the pieces do make reads: the oracle was asked */
}

START_TEST(classifier_never_calls_a_write_a_read)
{
	PGconn *conn = pg_direct();
	setup_schema(conn);
	load_safe_functions(conn);
	known_texts(conn);
	corpus_texts(conn);
	exec_ok(conn, "SET escape_string_warning = off");
	glued_texts(conn, 3000);
	fprintf(stderr, "classifier: %d texts called reads, each run read-only by PostgreSQL without 25006\n",
		reads_checked);
	PQfinish(conn);
}
END_TEST

static Suite *balance_suite(void)
{
	Suite *s = suite_create("balance");
	TCase *tc = pgv_tcase_create("classifier", 120);
	tcase_add_test(tc, classifier_never_calls_a_write_a_read);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return pgv_run_suite(balance_suite());
}
