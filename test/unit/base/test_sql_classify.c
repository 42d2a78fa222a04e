/*
 * test_sql_classify.c - the read-only classifier of the read balancer:
 * reads it lets through, writes it must never let through (hidden in
 * strings, comments, dollar quotes, CTEs, several statements), texts it
 * cannot finish reading (unterminated, 1 MB), and transaction starts.
 */
#include <check.h>
#include <stdlib.h>

#include "common.h"
#include "sql_classify.h"
#include "../check_main.h"

/* A pg_proc stand-in: these functions are not VOLATILE. */
static bool safe(void *arg, const char *name)
{
	static const char *const ok[] = { "count", "now", "lower", "coalesce_x", "my func", "sum", "txid_current",
					  "pg_current_xact_id", "pg_walfile_name" };
	(void)arg;
	for (size_t i = 0; i < ARRAY_SIZE(ok); i++)
		if (strcmp(name, ok[i]) == 0)
			return true;
	return false;
}

static bool reads(const char *sql)
{
	return sql_classify_read_only(sql, strlen(sql) + 1, safe, NULL);
}

START_TEST(reads_are_reads)
{
	static const char *const yes[] = {
		"SELECT 1",
		"select * from t where a = 'x' order by b limit 10;",
		"  /* c */ SELECT count(*) FROM t -- INSERT\n",
		"SELECT a FROM t WHERE b IN (1, 2) AND EXISTS (SELECT 1 FROM u WHERE u.a = t.a)",
		"WITH x AS (SELECT 1 AS a) SELECT a FROM x",
		"WITH RECURSIVE r AS (SELECT 1 AS n UNION ALL SELECT n + 1 FROM r WHERE n < 10) SELECT sum(n) FROM r",
		"VALUES (1, 'a'), (2, 'b')",
		"TABLE t",
		"SHOW search_path",
		"(SELECT 1) UNION (SELECT 2)",
		"SELECT 'INSERT INTO t VALUES (1)', $$DELETE FROM t$$, \"update\" FROM t",
		"SELECT CAST(a AS numeric(10, 2)), COALESCE(a, 1), substring(b FROM 1 FOR 2) FROM t",
		"SELECT pg_catalog.now(), \"lower\"('X'), $1::int",
		"SELECT 1; SELECT 2;;",
		"SELECT a FROM t FOR READ ONLY",
		"SELECT E'it\\'s' AS x",
		"SELECT E'\\' ; DELETE FROM t; --'",	/* one string, as PostgreSQL reads it */
		"SELECT x.a FROM (SELECT 1) AS x(a)",	/* column names of an alias, not a call */
		"WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT count(*) FROM r",
		"WITH x AS MATERIALIZED (SELECT 1) SELECT * FROM x",
	};
	for (size_t i = 0; i < ARRAY_SIZE(yes); i++)
		ck_assert_msg(reads(yes[i]), "not a read: %s", yes[i]);
}
END_TEST

START_TEST(writes_are_writes)
{
	static const char *const no[] = {
		"INSERT INTO t VALUES (1)",
		"UPDATE t SET a = 1",
		"DELETE FROM t",
		"SELECT 1; INSERT INTO t VALUES (1)",
		"SELECT 1; COMMIT",
		"SELECT * FROM t FOR UPDATE",
		"SELECT * FROM t FOR NO KEY UPDATE",
		"SELECT * FROM t FOR SHARE",
		"SELECT * FROM t FOR KEY SHARE",
		"SELECT * INTO newtable FROM t",
		"WITH d AS (DELETE FROM t RETURNING *) SELECT * FROM d",
		"WITH m AS (MERGE INTO t USING u ON true WHEN MATCHED THEN DELETE) SELECT 1",
		"SELECT nextval('s')",
		"SELECT pg_catalog.setval('s', 1)",
		"SELECT pg_advisory_lock(1)",
		"SELECT pg_try_advisory_xact_lock(1)",
		"SELECT txid_current(), pg_current_xact_id()",	/* not VOLATILE, but a standby refuses them */
		"SELECT pg_walfile_name(pg_current_wal_lsn())",
		"SELECT write_something()",	/* not known to be safe: VOLATILE, or unknown */
		"SELECT \"Count\"(*) FROM t",	/* quoted: a different function */
		"EXPLAIN ANALYZE SELECT 1",
		"CREATE TABLE t (a int)",
		"COPY t FROM STDIN",
		"CALL p()",
		"DO $$BEGIN PERFORM 1; END$$",
		"SET x = 1",
		"BEGIN",
		"",
		";",
		"  -- only a comment",
		"SELECT 1 /* unterminated",
		"SELECT 'unterminated",
		"SELECT \"unterminated",
		"SELECT $q$ unterminated",
		"SELECT 1 /* a /* nested */ ; INSERT INTO t VALUES (1) */ ; INSERT INTO t VALUES (2)",
		/* standard_conforming_strings off: the second statement is real */
		"SELECT 'a\\' , ' ; DELETE FROM t; --'",
		"SELECT B'1''\\''; DELETE FROM t; --'",	/* B'1', then a string that ends before DELETE */
		"SELECT 1 FROM t x(a)",	/* not a call, but not known: the primary */
		"WITH x(a) AS (SELECT 1), y(b) AS (SELECT 2) SELECT * FROM x, y",	/* y( after ',': the same */
		"SELECT * FROM f(1) AS t(a)",	/* f( is a call */
		"WITH x AS (SELECT nextval('s')) SELECT * FROM x",
	};
	for (size_t i = 0; i < ARRAY_SIZE(no); i++)
		ck_assert_msg(!reads(no[i]), "a write called a read: %s", no[i]);
	/* with no function table, every call is a write */
	ck_assert(!sql_classify_read_only("SELECT count(*) FROM t", 22, NULL, NULL));
	ck_assert(sql_classify_read_only("SELECT a IN (1) FROM t", 22, NULL, NULL));
}
END_TEST

START_TEST(hostile_texts)
{
	/* a NUL ends the text: what is after it is not PostgreSQL's either */
	const char nul[] = "SELECT 1\0; DROP TABLE t";
	ck_assert(sql_classify_read_only(nul, sizeof(nul), safe, NULL));
	const char nul_first[] = "\0SELECT 1";
	ck_assert(!sql_classify_read_only(nul_first, sizeof(nul_first), safe, NULL));
	/* the length bounds the text: no NUL needed, nothing read past it */
	ck_assert(sql_classify_read_only("SELECT 1; INSERT", 9, safe, NULL));
	ck_assert(!sql_classify_read_only("SELECT 1; INSERT", 16, safe, NULL));
	static const char *const no[] = {
		"SELECT \xff\xfe; DELETE FROM t",
		"SELECT U&'\\0027'; DELETE FROM t",
		"SELECT $a$ $b$ $a$; DELETE FROM t",
		"SELECT 1 --\n; DELETE FROM t",
		"SELECT 1 --\r; DELETE FROM t",
		"SELECT a$$b FROM t; DELETE FROM t",
		"select\tinto\nx from t",
		"SeLeCt * FrOm t FoR uPdAtE",
		"SELECT 1 FOR/**/SHARE",
		"SELECT  f\n(1)",
	};
	for (size_t i = 0; i < ARRAY_SIZE(no); i++)
		ck_assert_msg(!reads(no[i]), "a write called a read: %s", no[i]);
}
END_TEST

START_TEST(one_megabyte)
{
	size_t n = 1 << 20;
	char *big = malloc(n + 1);
	const char *head = "SELECT '";
	memset(big, 'x', n);
	memcpy(big, head, strlen(head));
	big[n - 1] = '\'';
	big[n] = '\0';
	ck_assert(reads(big));	/* one 1 MB string */
	big[n - 1] = 'x';
	ck_assert(!reads(big));	/* unterminated */
	memcpy(big, "SELECT /*", 9);
	ck_assert(!reads(big));
	/* 1 MB of "SELECT 1;" and a write at the very end */
	for (size_t i = 0; i + 9 <= n; i += 9)
		memcpy(big + i, "SELECT 1;", 9);
	memset(big + n - n % 9, ' ', n % 9);
	ck_assert(reads(big));
	memcpy(big + n - n % 9 - 9, "DELETE  ;", 9);
	ck_assert(!reads(big));
	free(big);
}
END_TEST

static enum sql_begin begin(const char *sql)
{
	return sql_classify_begin(sql, strlen(sql));
}

START_TEST(transaction_starts)
{
	ck_assert_int_eq(begin("BEGIN READ ONLY"), SQL_BEGIN_READ_ONLY);
	ck_assert_int_eq(begin("begin transaction read only;"), SQL_BEGIN_READ_ONLY);
	ck_assert_int_eq(begin("START TRANSACTION READ ONLY"), SQL_BEGIN_READ_ONLY);
	ck_assert_int_eq(begin("BEGIN WORK ISOLATION LEVEL REPEATABLE READ READ ONLY DEFERRABLE"), SQL_BEGIN_READ_ONLY);
	ck_assert_int_eq(begin("BEGIN ISOLATION LEVEL READ COMMITTED, READ ONLY, NOT DEFERRABLE"), SQL_BEGIN_READ_ONLY);
	ck_assert_int_eq(begin("/* x */ BEGIN READ ONLY; SELECT 1; SAVEPOINT a"), SQL_BEGIN_READ_ONLY);
	ck_assert_int_eq(begin("BEGIN"), SQL_BEGIN_READ_WRITE);
	ck_assert_int_eq(begin("BEGIN;"), SQL_BEGIN_READ_WRITE);
	ck_assert_int_eq(begin("BEGIN READ WRITE"), SQL_BEGIN_READ_WRITE);
	ck_assert_int_eq(begin("BEGIN READ ONLY, READ WRITE"), SQL_BEGIN_READ_WRITE);
	ck_assert_int_eq(begin("BEGIN ISOLATION LEVEL SERIALIZABLE READ ONLY"), SQL_BEGIN_READ_WRITE);
	ck_assert_int_eq(begin("BEGIN READ ONLY; COMMIT; INSERT INTO t VALUES (1)"), SQL_BEGIN_READ_WRITE);
	ck_assert_int_eq(begin("BEGIN READ ONLY;; END; INSERT INTO t VALUES (1)"), SQL_BEGIN_READ_WRITE);
	ck_assert_int_eq(begin("BEGIN READ ONLY; SET TRANSACTION READ WRITE"), SQL_BEGIN_READ_WRITE);
	ck_assert_int_eq(begin("BEGIN READ ONLY; SELECT '"), SQL_BEGIN_READ_WRITE);
	ck_assert_int_eq(begin("BEGIN READ ONLY /*"), SQL_BEGIN_READ_WRITE);
	ck_assert_int_eq(begin("BEGIN READ ONLY; SELECT 'a\\'; COMMIT; --'"), SQL_BEGIN_READ_WRITE);
	ck_assert_int_eq(begin("START READ ONLY"), SQL_BEGIN_NONE);
	ck_assert_int_eq(begin("SELECT 1"), SQL_BEGIN_NONE);
	ck_assert_int_eq(begin("COMMIT"), SQL_BEGIN_NONE);
	ck_assert_int_eq(begin(""), SQL_BEGIN_NONE);
}
END_TEST

static bool control(const char *sql)
{
	return sql_classify_control_only(sql, strlen(sql));
}

START_TEST(transaction_control_alone)
{
	ck_assert(control("BEGIN"));
	ck_assert(control("BEGIN; COMMIT"));
	ck_assert(control("begin work;\n end transaction;"));
	ck_assert(control("START TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ WRITE; ROLLBACK AND NO CHAIN;"));
	ck_assert(control("/* x */ COMMIT AND CHAIN"));
	ck_assert(control("ABORT"));
	ck_assert(!control(""));
	ck_assert(!control(";"));
	ck_assert(!control("BEGIN; SELECT 1; COMMIT"));
	ck_assert(!control("COMMIT PREPARED 'x'"));
	ck_assert(!control("ROLLBACK PREPARED 'x'"));
	ck_assert(!control("PREPARE TRANSACTION 'x'"));
	ck_assert(!control("ROLLBACK TO SAVEPOINT a"));
	ck_assert(!control("ROLLBACK TO a"));
	ck_assert(!control("SAVEPOINT a"));
	ck_assert(!control("START"));
	ck_assert(!control("BEGIN; INSERT INTO t VALUES (1)"));
	ck_assert(!control("BEGIN /*"));
	ck_assert(!control("END \"x\""));
	ck_assert(!control("COMMIT; VACUUM"));
}
END_TEST

Suite *unit_suite(void)
{
	Suite *s = suite_create("sql_classify");
	TCase *tc = tcase_create("classify");
	tcase_add_test(tc, reads_are_reads);
	tcase_add_test(tc, writes_are_writes);
	tcase_add_test(tc, hostile_texts);
	tcase_add_test(tc, one_megabyte);
	tcase_add_test(tc, transaction_starts);
	tcase_add_test(tc, transaction_control_alone);
	suite_add_tcase(s, tc);
	return s;
}
