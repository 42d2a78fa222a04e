/*
 * test_balance.c - the read balancer (load_balance_reads, issue 49) against
 * a PostgreSQL 15 primary and two streaming replicas (harness.h's
 * roles_cluster). So far: its classifier (sql_classify.c) checked by
 * PostgreSQL itself. Every text it calls a read, from a list of reads and
 * writes, the fuzz seed corpora and a few thousand texts glued from
 * hostile pieces, must run on a standby with the SQLSTATE it gets in a
 * READ ONLY transaction on the primary, never 25006 (a write refused),
 * with standard_conforming_strings on and off; and the known writes of
 * the list (and what a standby refuses besides) must be refused by
 * PostgreSQL there and called writes. The function table is PostgreSQL's
 * own: the names no VOLATILE function has.
 */
#include "harness.h"

#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "sql_classify.h"

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

static PGconn *primary, *standby;
static int reads_checked;

/* text's SQLSTATE on a standby ("" if it ran). */
static const char *sqlstate_standby(const char *text)
{
	static char state[8];
	PGresult *r = PQexec(standby, text);
	const char *s = PQresultErrorField(r, PG_DIAG_SQLSTATE);
	snprintf(state, sizeof(state), "%s", s ? s : "");
	PQclear(r);
	if (PQtransactionStatus(standby) != PQTRANS_IDLE)
		exec_ok(standby, "ROLLBACK");
	return state;
}

/*
 * If the classifier calls text a read, a standby must run it as the
 * primary does read-only, and never refuse it as a write. Returns its verdict.
 */
static bool check_text(const char *text, size_t len)
{
	if (!sql_classify_read_only(text, len, function_safe, NULL))
		return false;
	if (memchr(text, '\0', len) && strlen(text) < len)
		return true;	/* PostgreSQL would read it only to the NUL, as the classifier did: nothing new */
	char ro[8];
	snprintf(ro, sizeof(ro), "%s", sqlstate_read_only(primary, text));
	const char *sb = sqlstate_standby(text);
	ck_assert_msg(strcmp(ro, "25006") != 0 && strcmp(sb, "25006") != 0, "a write called a read: %s", text);
	ck_assert_msg(strcmp(ro, sb) == 0, "a read the standby answers otherwise (%s, primary read-only %s): %s", sb,
		      ro, text);
	reads_checked++;
	return true;
}

/* Both connections with this standard_conforming_strings. */
static void both_set(const char *sql)
{
	exec_ok(primary, sql);
	exec_ok(standby, sql);
}

/*
 * Until the standby has replayed everything the primary wrote so far (inserted: commits may not flush).
 * Local replay takes milliseconds; 30 s is wide on a loaded machine running three clusters.
 */
static void wait_replayed(void)
{
	char lsn[64], sql[160];
	snprintf(lsn, sizeof(lsn), "%s", query_value(primary, "SELECT pg_catalog.pg_current_wal_insert_lsn()"));
	snprintf(sql, sizeof(sql), "SELECT pg_catalog.pg_last_wal_replay_lsn() >= '%s'", lsn);
	for (double until = now_s() + 30; strcmp(query_value(standby, sql), "t") != 0; sleep_ms(50))
		ck_assert_msg(now_s() < until, "the standby did not replay up to %s in 30 s", lsn);
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
	/* a read as far as any classifier can see, but a standby refuses it as a write (25006) */
	exec_ok(conn, "CREATE VIEW bal.hidden_write AS SELECT nextval('bal.s') AS n");
	/* a slow read (pg_sleep is VOLATILE: called through a view, the classifier does not see it) */
	exec_ok(conn, "CREATE VIEW bal.slow AS SELECT pg_sleep(2)::text AS s");
	exec_ok(conn, "SET statement_timeout = '5s'");
}

/* Reads the classifier must let through, and writes PostgreSQL refuses read-only that it must not. */
static void known_texts(void)
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
		"SELECT x.a FROM (SELECT 1) AS x(a)",
		"WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT count(*) FROM r",
		"SELECT * FROM generate_series(1, 3) AS g(i)",
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
		/* not writes, but a standby refuses them */
		"SELECT txid_current()",
		"SELECT pg_current_xact_id()",
		"SELECT pg_current_wal_lsn()",
		"SELECT pg_walfile_name('0/1000000')",
		"SELECT pg_switch_wal()",
	};
	/* a standby would run them, but what they lock must be the primary's */
	static const char *const primary_only[] = {
		"SELECT pg_advisory_xact_lock(1)",
		"SELECT pg_try_advisory_lock_shared(1)",
	};
	for (size_t i = 0; i < ARRAY_SIZE(primary_only); i++)
		ck_assert_msg(!check_text(primary_only[i], strlen(primary_only[i])), "called a read: %s", primary_only[i]);
	for (size_t i = 0; i < ARRAY_SIZE(reads); i++) {
		ck_assert_msg(check_text(reads[i], strlen(reads[i])), "not called a read: %s", reads[i]);
		ck_assert_str_eq(sqlstate_read_only(primary, reads[i]), "");
	}
	for (size_t i = 0; i < ARRAY_SIZE(writes); i++) {
		ck_assert_msg(!check_text(writes[i], strlen(writes[i])), "a write called a read: %s", writes[i]);
		ck_assert_msg(strcmp(sqlstate_standby(writes[i]), "") != 0, "the standby ran it: %s", writes[i]);
	}
}

/* Every seed of the two SQL fuzz targets. */
static void corpus_texts(void)
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
			check_text(buf, n);
		}
		closedir(d);
	}
}

/* Texts glued from pieces that open and close quotes, comments and statements, and write. */
static void glued_texts(int count)
{
	static const char *const pieces[] = {
		"SELECT ", "WITH x AS (SELECT 1) ", "VALUES (1)", "TABLE bal.t", "SHOW all", " FROM bal.t", " a ",
		"'", "''", "E'", "\\", "\\'", "$$", "$q$", "/*", "*/", "--", "\n", "\r", ";", "(", ")", ", ",
		"INSERT INTO bal.t VALUES (1)", "DELETE FROM bal.t", "nextval('bal.s')", "bal.writer()",
		"bal.reader()", "count(*)", " FOR UPDATE", " FOR SHARE", " INTO bal.x", "\"", "U&'", "E'\\'';",
		" UPDATE bal.t SET a = 1", "SELECT 1", "setval('bal.s', 1)", " WHERE a = 1", "txid_current()", " AS x(a)",
	};
	unsigned seed = 49;
	int reads = 0;
	for (int i = 0; i < count; i++) {
		char text[512] = "";
		int n = 2 + (int)(rand_r(&seed) % 8);
		for (int k = 0; k < n; k++)
			strncat(text, pieces[rand_r(&seed) % ARRAY_SIZE(pieces)], sizeof(text) - strlen(text) - 1);
		if (i == count / 2)
			both_set("SET standard_conforming_strings = off");
		reads += check_text(text, strlen(text));
	}
	both_set("SET standard_conforming_strings = on");
	ck_assert_int_gt(reads, count / 50);	/* the pieces do make reads: the oracle was asked */
}

START_TEST(classifier_never_calls_a_write_a_read)
{
	roles_cluster_start();
	primary = roles_cluster_connect(1);
	standby = roles_cluster_connect(2);
	setup_schema(primary);
	wait_replayed();
	load_safe_functions(primary);
	exec_ok(standby, "SET statement_timeout = '5s'");
	known_texts();
	corpus_texts();
	both_set("SET escape_string_warning = off");
	glued_texts(10000);
	fprintf(stderr, "classifier: %d texts called reads, each run on a standby as on the primary read-only\n",
		reads_checked);
	PQfinish(standby);
	PQfinish(primary);
	roles_cluster_stop();
}
END_TEST

/* ---------------------------------------------------------------- routing */

#define HOSTS "host=127.0.0.2,127.0.0.3,127.0.0.4"
#define BASE "auth_type = trust\nadmin_users = pgvadmin\npool_mode = transaction\nserver_login_retry = 1\n" \
	     "query_wait_timeout = 30\n"
#define USERS "\"pgvadmin\" \"\"\n"

static PGconn *balance_connect(struct pgv *p, const char *db, const char *options)
{
	const char *kw[11], *val[11];
	char port[16];
	pgv_conn_params(p, db, "pgvadmin", NULL, kw, val, port);
	int n = 0;
	while (kw[n])
		n++;
	kw[n] = options ? "options" : NULL;
	val[n] = options;
	kw[n + 1] = NULL;
	val[n + 1] = NULL;
	PGconn *c = PQconnectdbParams(kw, val, 0);
	ck_assert_msg(PQstatus(c) == CONNECTION_OK, "%s: %s\n%s", db, PQerrorMessage(c), pgv_log_tail(p, 3000));
	return c;
}

/* Where a transaction of c ran: "127.0.0.N|true" (in recovery) or "...|false", begun with begin, committed. */
static const char *ran_on(PGconn *c, const char *begin)
{
	static char where[64];
	if (begin)
		exec_ok(c, begin);
	snprintf(where, sizeof(where), "%s",
		 query_value(c, "SELECT host(inet_server_addr()) || '|' || pg_is_in_recovery()"));
	if (begin)
		exec_ok(c, "COMMIT");
	return where;
}

/*
 * Until c's transactions begun with begin run on a replica (the balancer learns the hosts' roles first,
 * from its first servers' logins and a replay check: a second or two; 30 s covers a loaded machine).
 */
static void wait_on_replica(struct pgv *p, PGconn *c, const char *begin)
{
	for (double until = now_s() + 30; !strstr(ran_on(c, begin), "|true"); sleep_ms(100))
		ck_assert_msg(now_s() < until, "reads stay on %s\n%s", ran_on(c, begin), pgv_log_tail(p, 3000));
}

static bool on_replica(const char *where)
{
	return strcmp(where, "127.0.0.3|true") == 0 || strcmp(where, "127.0.0.4|true") == 0;
}

/*
 * A read transaction begun and left open on each of n clients, so that
 * they need n servers: each must run on a replica; on[0], on[1] (if on):
 * how many on node2, node3.
 */
static void reads_held_at_once(PGconn **c, int n, int on[2])
{
	int counts[2] = { 0, 0 };
	for (int i = 0; i < n; i++) {
		exec_ok(c[i], "BEGIN READ ONLY");
		const char *w = ran_on(c[i], NULL);
		counts[0] += strcmp(w, "127.0.0.3|true") == 0;
		counts[1] += strcmp(w, "127.0.0.4|true") == 0;
		ck_assert_msg(on_replica(w), "a read transaction ran on %s", w);
	}
	if (on)
		memcpy(on, counts, sizeof(counts));
}

/*
 * load_balance_reads = explicit: BEGIN READ ONLY runs on a replica, a
 * write transaction on the primary (and succeeds); reads of several
 * clients at once use both replicas; a client whose session is read-only
 * (options -c default_transaction_read_only=on) reads on a replica; auto
 * also sends a lone SELECT there and keeps nextval() on the primary; off
 * changes nothing.
 */
START_TEST(routes_reads_to_replicas)
{
	struct pgv p;
	char dbs[1024];
	roles_cluster_start();
	primary = roles_cluster_connect(1);
	standby = roles_cluster_connect(2);
	setup_schema(primary);
	wait_replayed();
#define LINE(name, extra) name " = " HOSTS " port=%d dbname=postgres user=pgvadmin target_session_attrs=read-write " \
	extra "\n"
	snprintf(dbs, sizeof(dbs), LINE("ex", "load_balance_reads=explicit") LINE("au", "load_balance_reads=auto")
		 LINE("nb", "") LINE("st", "load_balance_reads=auto pool_mode=statement"), roles_cluster_port,
		 roles_cluster_port, roles_cluster_port, roles_cluster_port);
#undef LINE
	pgv_start(&p, BASE, dbs, USERS);

	PGconn *ex = balance_connect(&p, "ex", NULL);
	wait_on_replica(&p, ex, "BEGIN READ ONLY");
	for (int i = 0; i < 5; i++) {
		/* after a write, reads wait for a replica that replayed it (read your writes, test "fresh") */
		wait_on_replica(&p, ex, "START TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY");
		ck_assert_str_eq(ran_on(ex, "BEGIN"), "127.0.0.2|false");
		ck_assert_str_eq(ran_on(ex, NULL), "127.0.0.2|false");
	}
	/* the extended protocol: a Parse of BEGIN READ ONLY decides as a Query does */
	wait_on_replica(&p, ex, "BEGIN READ ONLY");
	PGresult *r = PQexecParams(ex, "BEGIN READ ONLY", 0, NULL, NULL, NULL, NULL, 0);
	ck_assert_msg(PQresultStatus(r) == PGRES_COMMAND_OK, "%s", PQerrorMessage(ex));
	PQclear(r);
	r = PQexecParams(ex, "SELECT host(inet_server_addr()) || '|' || pg_is_in_recovery()", 0, NULL, NULL, NULL,
			 NULL, 0);
	ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "%s", PQerrorMessage(ex));
	ck_assert_msg(on_replica(PQgetvalue(r, 0, 0)), "extended BEGIN READ ONLY ran on %s", PQgetvalue(r, 0, 0));
	PQclear(r);
	exec_ok(ex, "COMMIT");
	exec_ok(ex, "BEGIN");
	ck_assert_str_eq(query_value(ex, "SELECT nextval('bal.s')::text"), "1");
	exec_ok(ex, "INSERT INTO bal.t VALUES (3, 'z')");
	exec_ok(ex, "COMMIT");
	ck_assert_str_eq(query_value(ex, "SELECT count(*)::text FROM bal.t WHERE a = 3"), "1");

	/* four read transactions at once need four servers: both replicas get some */
	PGconn *c[4];
	for (int i = 0; i < 4; i++)
		c[i] = balance_connect(&p, "ex", NULL);
	int on[2];
	reads_held_at_once(c, 4, on);
	ck_assert_msg(on[0] > 0 && on[1] > 0, "%d on node2, %d on node3", on[0], on[1]);
	for (int i = 0; i < 4; i++)
		PQfinish(c[i]);

	/* a read-only session: every transaction on a replica, unless it says READ WRITE */
	PGconn *ro = balance_connect(&p, "ex", "-c default_transaction_read_only=on");
	wait_on_replica(&p, ro, NULL);
	ck_assert(on_replica(ran_on(ro, "BEGIN")));
	ck_assert_str_eq(ran_on(ro, "BEGIN READ WRITE"), "127.0.0.2|false");
	PQfinish(ro);
	/* ... or made so by its own SET (PostgreSQL reports default_transaction_read_only) */
	ro = balance_connect(&p, "ex", NULL);
	ck_assert_str_eq(ran_on(ro, NULL), "127.0.0.2|false");
	exec_ok(ro, "SET default_transaction_read_only = on");
	wait_on_replica(&p, ro, NULL);
	exec_ok(ro, "SET default_transaction_read_only = off");
	ck_assert_str_eq(ran_on(ro, NULL), "127.0.0.2|false");
	exec_ok(ro, "BEGIN");
	exec_ok(ro, "INSERT INTO bal.t VALUES (4, 'w')");
	exec_ok(ro, "COMMIT");
	PQfinish(ro);

	/* auto: a lone read on a replica, nextval() and a transaction on the primary */
	PGconn *au = balance_connect(&p, "au", NULL);
	wait_on_replica(&p, au, NULL);
	ck_assert_str_eq(query_value(au, "SELECT nextval('bal.s')::text"), "2");
	ck_assert_str_eq(ran_on(au, "BEGIN"), "127.0.0.2|false");
	wait_on_replica(&p, au, "BEGIN READ ONLY");
	PQfinish(au);

	/* statement pooling, auto: each lone read on a replica, nextval() on the primary */
	PGconn *st = balance_connect(&p, "st", NULL);
	wait_on_replica(&p, st, NULL);
	for (int i = 0; i < 5; i++) {
		wait_on_replica(&p, st, NULL);
		ck_assert_str_eq(query_value(st, "SELECT (nextval('bal.s') > 2)::text"), "true");
	}
	PQfinish(st);

	/* off: nothing moves */
	PGconn *nb = balance_connect(&p, "nb", NULL);
	for (int i = 0; i < 5; i++) {
		ck_assert_str_eq(ran_on(nb, "BEGIN READ ONLY"), "127.0.0.2|false");
		ck_assert_str_eq(ran_on(nb, NULL), "127.0.0.2|false");
	}
	PQfinish(nb);

	/* both replicas gone: read transactions run on the primary, none fails */
	PQfinish(standby);
	standby = NULL;
	roles_cluster("stop", 2);
	roles_cluster("stop", 3);
	for (int i = 0; i < 20; i++) {
		exec_ok(ex, "BEGIN READ ONLY");
		PGresult *q = PQexec(ex, "SELECT host(inet_server_addr()) || '|' || pg_is_in_recovery()");
		if (PQresultStatus(q) != PGRES_TUPLES_OK) {
			/* an idle server of a replica that went down may still be handed out once: as on any pool */
			ck_assert_msg(i < 3, "read %d failed: %s\n%s", i, PQerrorMessage(ex), pgv_log_tail(&p, 3000));
			PQclear(q);
			PQfinish(ex);
			ex = balance_connect(&p, "ex", NULL);
			continue;
		}
		ck_assert_msg(strcmp(PQgetvalue(q, 0, 0), "127.0.0.2|false") == 0, "ran on %s", PQgetvalue(q, 0, 0));
		PQclear(q);
		exec_ok(ex, "COMMIT");
	}
	PQfinish(ex);
	pgv_stop(&p);
	PQfinish(primary);
	roles_cluster_stop();
}
END_TEST

/* ---------------------------------------------------------------- read your writes */

/* "count|host|in recovery": whether c's next read sees row a, and where it ran; begun with begin if given. */
static const char *seen(PGconn *c, int a, const char *begin)
{
	static char out[64];
	char sql[200];
	if (begin)
		exec_ok(c, begin);
	snprintf(sql, sizeof(sql), "SELECT count(*) || '|' || host(inet_server_addr()) || '|' || pg_is_in_recovery() "
		 "FROM bal.t WHERE a = %d", a);
	snprintf(out, sizeof(out), "%s", query_value(c, sql));
	if (begin)
		exec_ok(c, "COMMIT");
	return out;
}

/* Replay paused (or resumed) on both replicas, and so reported. */
static void replay_pause(PGconn *const replicas[2], bool pause)
{
	for (int i = 0; i < 2; i++) {
		exec_ok(replicas[i], pause ? "SELECT pg_wal_replay_pause()" : "SELECT pg_wal_replay_resume()");
		/* the startup process acts on the request at its next record or wake-up: milliseconds; 30 s is slack */
		for (double until = now_s() + 30;
		     strcmp(query_value(replicas[i], "SELECT pg_get_wal_replay_pause_state()"), pause ? "paused" : "not paused");
		     sleep_ms(20))
			ck_assert_msg(now_s() < until, "replay of replica %d not %s", i + 1, pause ? "paused" : "resumed");
	}
}

/* Whether replica r has replayed the primary's insert position of now. */
static bool replayed_now(PGconn *r)
{
	char sql[160];
	snprintf(sql, sizeof(sql), "SELECT pg_last_wal_replay_lsn() >= '%s'",
		 query_value(primary, "SELECT pg_current_wal_insert_lsn()"));
	return strcmp(query_value(r, sql), "t") == 0;
}

/* SHOW HOSTS' column col for db and host, as a number. */
static long long host_count(struct pgv *p, const char *db, const char *host, const char *col)
{
	PGconn *adm = balance_connect(p, "pgbouncer", NULL);
	PGresult *r = PQexec(adm, "SHOW HOSTS");
	ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "SHOW HOSTS: %s", PQerrorMessage(adm));
	long long v = -1;
	for (int i = 0; i < PQntuples(r); i++)
		if (strcmp(PQgetvalue(r, i, PQfnumber(r, "database")), db) == 0 &&
		    strcmp(PQgetvalue(r, i, PQfnumber(r, "host")), host) == 0)
			v = atoll(PQgetvalue(r, i, PQfnumber(r, col)));
	PQclear(r);
	PQfinish(adm);
	ck_assert_msg(v >= 0, "no SHOW HOSTS %s for %s on %s", col, db, host);
	return v;
}

/* A writer's 1,000 reads of its own row (begun with begin): every one sees it. */
static void reads_see_write(struct pgv *p, PGconn *w, int a, const char *begin)
{
	char sql[80];
	snprintf(sql, sizeof(sql), "INSERT INTO bal.t VALUES (%d, 'w')", a);
	exec_ok(w, "BEGIN");
	exec_ok(w, sql);
	exec_ok(w, "COMMIT");
	for (int i = 0; i < 1000; i++) {
		const char *s = seen(w, a, begin);
		ck_assert_msg(s[0] == '1', "read %d of the writer's own row %d: %s\n%s", i, a, s, pgv_log_tail(p, 2000));
	}
}

/* c's text through the extended protocol (Parse, Bind, Describe, Execute, Sync), which must succeed. */
static void exec_params_ok(PGconn *c, const char *sql)
{
	PGresult *r = PQexecParams(c, sql, 0, NULL, NULL, NULL, NULL, 0);
	ck_assert_msg(PQresultStatus(r) == PGRES_COMMAND_OK, "%s: %s", sql, PQerrorMessage(c));
	PQclear(r);
}

/*
 * An empty transaction is a read (a driver's empty `with
 * conn.transaction()`): BEGIN and COMMIT as two Queries, as one, through
 * the extended protocol, and a ROLLBACK, each on a client of its own
 * that never wrote, with replay paused and the primary ahead of the
 * replicas: that client's next reads still go to the replicas.
 */
static void empty_transactions_read(struct pgv *p)
{
	for (int k = 0; k < 4; k++) {
		PGconn *e = balance_connect(p, "au", NULL);
		if (k == 0) {
			exec_ok(e, "BEGIN");
			exec_ok(e, "COMMIT");
		} else if (k == 1) {
			exec_ok(e, "BEGIN; COMMIT");
		} else if (k == 2) {
			exec_params_ok(e, "BEGIN");
			exec_params_ok(e, "COMMIT");
		} else {
			exec_ok(e, "START TRANSACTION ISOLATION LEVEL REPEATABLE READ");
			exec_ok(e, "ROLLBACK");
		}
		for (int i = 0; i < 20; i++) {
			const char *s = seen(e, 100, NULL);
			ck_assert_msg(strcmp(s, "0|127.0.0.3|true") == 0 || strcmp(s, "0|127.0.0.4|true") == 0,
				      "empty transaction %d: read %d ran on %s\n%s", k, i, s, pgv_log_tail(p, 2000));
		}
		PQfinish(e);
	}
}

/*
 * With replay paused on both replicas, a client that wrote reads its row
 * back 1,000 times (auto, and explicit with BEGIN READ ONLY), while a
 * client that never wrote keeps reading on the replicas (without it),
 * and so does one whose transactions were empty (BEGIN; COMMIT);
 * SET pgvalve.min_lsn makes a reader wait for a position it was given;
 * once one replica replays again the writer reads there, and a reader
 * that read there never goes back to the other, still paused; after both
 * resume, the writer's reads are on the replicas again; SHOW HOSTS and
 * /metrics count.
 */
START_TEST(reads_your_writes)
{
	struct pgv p;
	char dbs[1024];
	roles_cluster_start();
	primary = roles_cluster_connect(1);
	standby = roles_cluster_connect(2);
	PGconn *replicas[2] = { standby, roles_cluster_connect(3) };
	setup_schema(primary);
	/* Local replay takes milliseconds; 30 s is wide on a loaded machine running three clusters. */
	for (double until = now_s() + 30; !replayed_now(replicas[0]) || !replayed_now(replicas[1]); sleep_ms(50))
		ck_assert_msg(now_s() < until, "the replicas did not replay the schema");
#define LINE(name, extra) name " = " HOSTS " port=%d dbname=postgres user=pgvadmin target_session_attrs=read-write " \
	extra "\n"
	snprintf(dbs, sizeof(dbs), LINE("au", "load_balance_reads=auto") LINE("ex", "load_balance_reads=explicit"),
		 roles_cluster_port, roles_cluster_port);
#undef LINE
	char ini[512];
	int mport = pgv_pick_http_port(0);
	snprintf(ini, sizeof(ini), BASE "server_round_robin = 1\nmetrics_port = %d\nmetrics_listen_addr = 127.0.0.1\n", mport);
	pgv_start(&p, ini, dbs, USERS);

	/* servers on both replicas: four reads at once */
	PGconn *c[4];
	for (int i = 0; i < 4; i++) {
		c[i] = balance_connect(&p, "au", NULL);
		wait_on_replica(&p, c[i], "BEGIN READ ONLY");
		exec_ok(c[i], "BEGIN READ ONLY");
		ck_assert(on_replica(ran_on(c[i], NULL)));
	}
	for (int i = 0; i < 4; i++) {
		exec_ok(c[i], "COMMIT");
		PQfinish(c[i]);
	}
	PGconn *w = balance_connect(&p, "au", NULL), *r = balance_connect(&p, "au", NULL);
	PGconn *we = balance_connect(&p, "ex", NULL), *m = balance_connect(&p, "au", NULL);
	wait_on_replica(&p, we, "BEGIN READ ONLY");
	replay_pause(replicas, true);

	reads_see_write(&p, w, 100, NULL);
	reads_see_write(&p, we, 101, "BEGIN READ ONLY");
	for (int i = 0; i < 50; i++) {
		const char *s = seen(r, 100, NULL);
		ck_assert_msg(strcmp(s, "0|127.0.0.3|true") == 0 || strcmp(s, "0|127.0.0.4|true") == 0,
			      "a client that never wrote read on %s", s);
	}
	empty_transactions_read(&p);
	long long kept = host_count(&p, "au", "127.0.0.2", "reads_kept_fresh");
	ck_assert_msg(kept >= 1000, "au: %lld reads kept on the primary", kept);
	ck_assert_int_ge(host_count(&p, "ex", "127.0.0.2", "reads_kept_fresh"), 1000);
	ck_assert_int_ge(host_count(&p, "au", "127.0.0.3", "reads_balanced") +
			 host_count(&p, "au", "127.0.0.4", "reads_balanced"), 50);
	ck_assert_int_ge(host_count(&p, "au", "127.0.0.2", "xact_count"), kept + 1);
	char series[200];
	snprintf(series, sizeof(series), "pgvalve_host_reads_kept_fresh_total{database=\"au\",host=\"127.0.0.2\",port=\"%d\"} ",
		 roles_cluster_port);
	const char *metrics = pgv_scrape_metrics(mport), *at = strstr(metrics, series);
	ck_assert_msg(at && atoll(at + strlen(series)) >= kept, "no %s >= %lld in\n%.3000s", series, kept, metrics);

	/* pgvalve.min_lsn: a reader given the writer's position reads where that is */
	char set[120];
	ck_assert_msg(seen(m, 100, NULL)[0] == '0', "m sees row 100 before its SET");
	snprintf(set, sizeof(set), "SET pgvalve.min_lsn = '%s'", query_value(primary, "SELECT pg_current_wal_insert_lsn()"));
	exec_ok(m, set);
	for (int i = 0; i < 20; i++)
		ck_assert_str_eq(seen(m, 100, NULL), "1|127.0.0.2|false");

	/* one replica replays again: the writer reads there, and so does a reader that once did */
	exec_ok(replicas[0], "SELECT pg_wal_replay_resume()");
	/* until the replica has caught up and pgvalve has seen it (its replay check): seconds; 30 s on a loaded machine */
	double until = now_s() + 30;
	while (strcmp(seen(w, 100, NULL), "1|127.0.0.3|true") != 0) {
		ck_assert_msg(now_s() < until, "the writer's reads stay on %s\n%s", seen(w, 100, NULL), pgv_log_tail(&p, 3000));
		sleep_ms(20);
	}
	while (strcmp(seen(r, 100, NULL), "1|127.0.0.3|true") != 0)
		ck_assert_msg(now_s() < until, "the reader never reads on the replica that replayed");
	for (int i = 0; i < 200; i++) {
		const char *s = seen(r, 100, NULL);
		ck_assert_msg(s[0] == '1', "read %d went back in time: %s", i, s);
	}
	while (strcmp(seen(we, 101, "BEGIN READ ONLY"), "1|127.0.0.3|true") != 0) {
		ck_assert_msg(seen(we, 101, "BEGIN READ ONLY")[0] == '1', "explicit: the writer's row not seen");
		ck_assert_msg(now_s() < until, "explicit: the writer's reads stay on the primary");
	}

	/* both replay again: the writer's reads go back to both replicas */
	exec_ok(replicas[1], "SELECT pg_wal_replay_resume()");
	until = now_s() + 30;	/* the same wait as above, for the second replica */
	bool on4 = false;
	while (!on4) {
		const char *s = seen(w, 100, NULL);
		ck_assert_msg(strcmp(s, "1|127.0.0.3|true") == 0 || strcmp(s, "1|127.0.0.4|true") == 0 ||
			      strcmp(s, "1|127.0.0.2|false") == 0, "after resume: %s", s);
		on4 = strcmp(s, "1|127.0.0.4|true") == 0;
		ck_assert_msg(on4 || now_s() < until, "the writer never reads on the second replica\n%s", pgv_log_tail(&p, 3000));
	}
	PQfinish(w);
	PQfinish(r);
	PQfinish(we);
	PQfinish(m);
	pgv_stop(&p);
	PQfinish(replicas[1]);
	PQfinish(standby);
	PQfinish(primary);
	roles_cluster_stop();
}

#define WHERE_SQL "SELECT host(inet_server_addr()) || '|' || pg_is_in_recovery()"

/* The one value of a tuples result r (cleared), which must have succeeded. */
static const char *result_value(PGconn *c, PGresult *r, const char *what)
{
	static char value[64];
	ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "%s: %s", what, PQresultErrorMessage(r));
	snprintf(value, sizeof(value), "%s", PQgetvalue(r, 0, 0));
	PQclear(r);
	(void)c;
	return value;
}

static void prepare_ok(PGconn *c, const char *name, const char *sql)
{
	PGresult *r = PQprepare(c, name, sql, 0, NULL);
	ck_assert_msg(PQresultStatus(r) == PGRES_COMMAND_OK, "prepare %s: %s", name, PQerrorMessage(c));
	PQclear(r);
}

/* The next result of a pipeline, then its end (NULL), then the Sync's. */
static const char *pipeline_value(PGconn *c, const char *what)
{
	static char value[64];
	snprintf(value, sizeof(value), "%s", result_value(c, PQgetResult(c), what));
	ck_assert_ptr_null(PQgetResult(c));
	PGresult *r = PQgetResult(c);
	ck_assert_int_eq(PQresultStatus(r), PGRES_PIPELINE_SYNC);
	PQclear(r);
	return value;
}

/* Until c (a standby) has replayed everything the primary wrote so far. */
static void wait_replayed_on(PGconn *c)
{
	char lsn[64], sql[160];
	snprintf(lsn, sizeof(lsn), "%s", query_value(primary, "SELECT pg_catalog.pg_current_wal_insert_lsn()"));
	snprintf(sql, sizeof(sql), "SELECT pg_catalog.pg_last_wal_replay_lsn() >= '%s'", lsn);
	/* Local replay takes milliseconds; 30 s is wide on a loaded machine running three clusters. */
	for (double until = now_s() + 30; strcmp(query_value(c, sql), "t") != 0; sleep_ms(50))
		ck_assert_msg(now_s() < until, "a standby did not replay up to %s in 30 s", lsn);
}

static PGconn *standby2;

/*
 * The cluster with the schema (replayed on both standbys: primary,
 * standby, standby2 connected), and pgvalve with database `name` on its
 * hosts, read-write, with db_options, and pgbouncer_extra.
 */
static void start_balancing(struct pgv *p, const char *name, const char *db_options, const char *pgbouncer_extra)
{
	char dbs[512], base[512];
	roles_cluster_start();
	primary = roles_cluster_connect(1);
	standby = roles_cluster_connect(2);
	standby2 = roles_cluster_connect(3);
	setup_schema(primary);
	wait_replayed_on(standby);
	wait_replayed_on(standby2);
	snprintf(dbs, sizeof(dbs), "%s = " HOSTS " port=%d dbname=postgres user=pgvadmin target_session_attrs=read-write "
		 "%s\n", name, roles_cluster_port, db_options);
	snprintf(base, sizeof(base), "%s%s", BASE, pgbouncer_extra);
	pgv_start(p, base, dbs, USERS);
}

/* Ends what start_balancing started (connections to standbys already closed are NULL). */
static void stop_balancing(struct pgv *p)
{
	pgv_stop(p);
	PQfinish(standby2);
	PQfinish(standby);
	PQfinish(primary);
	standby2 = standby = primary = NULL;
	roles_cluster_stop();
}

/*
 * Monotonic reads between standbys. A row is replayed on node2 and not on
 * node3 (replay paused there), though pgvalve measured both at the same
 * position. A client that read the row on node2 does not read on node3,
 * not even while node2's one server is busy and node3's is idle: 150
 * reads all see the row, on node2 or the primary, and on node2 again once
 * its server is free. Those are named statements, each transaction begun
 * by a Bind, and node2 is paused too before them with the primary ahead:
 * reads run on the primary do not count as writes (no floor at the
 * primary's position, which would keep the client there).
 */
START_TEST(reads_never_go_back_in_time)
{
	struct pgv p;
	start_balancing(&p, "au", "load_balance_reads=auto pool_size=2", "");
	PGconn *c[2] = { balance_connect(&p, "au", NULL), balance_connect(&p, "au", NULL) };
	wait_on_replica(&p, c[0], NULL);
	for (int i = 0; i < 2; i++)	/* two servers, one on each replica, measured at their login */
		exec_ok(c[i], "BEGIN READ ONLY");
	char w0[64];
	snprintf(w0, sizeof(w0), "%s", ran_on(c[0], NULL));
	ck_assert_msg(on_replica(w0) && on_replica(ran_on(c[1], NULL)) && strcmp(w0, ran_on(c[1], NULL)) != 0,
		      "two read transactions at once on %s and %s", w0, ran_on(c[1], NULL));
	PGconn *on2 = strcmp(w0, "127.0.0.3|true") == 0 ? c[0] : c[1], *on3 = on2 == c[0] ? c[1] : c[0];
	exec_ok(on2, "COMMIT");
	PGconn *const replicas[2] = { standby, standby2 };
	exec_ok(standby2, "SELECT pg_wal_replay_pause()");
	exec_ok(primary, "INSERT INTO bal.t VALUES (500, 'only on node2')");	/* not through pgvalve */
	wait_replayed_on(standby);
	PGconn *r = balance_connect(&p, "au", NULL);	/* node3's server is busy: r reads on node2 */
	ck_assert_str_eq(seen(r, 500, NULL), "1|127.0.0.3|true");
	exec_ok(on3, "COMMIT");

	prepare_ok(r, "seen500", "SELECT count(*) || '|' || host(inet_server_addr()) || '|' || pg_is_in_recovery() "
		   "FROM bal.t WHERE a = 500");
	/* node2 paused too, the primary past both: a read on the primary must not raise r's floor there */
	exec_ok(standby, "SELECT pg_wal_replay_pause()");
	exec_ok(primary, "INSERT INTO bal.t VALUES (501, 'on neither')");
	exec_ok(on2, "BEGIN READ ONLY");	/* it keeps to node2: node2's server busy, node3's idle */
	ck_assert_str_eq(ran_on(on2, NULL), "127.0.0.3|true");
	for (int i = 0; i < 50; i++) {	/* each a transaction begun by a Bind (named statement), a read */
		const char *s = result_value(r, PQexecPrepared(r, "seen500", 0, NULL, NULL, NULL, 0), "seen500");
		ck_assert_msg(strcmp(s, "1|127.0.0.2|false") == 0, "read %d while node2 was busy: %s", i, s);
	}
	exec_ok(on2, "COMMIT");
	int back = 0;
	for (int i = 0; i < 100; i++) {
		const char *s = result_value(r, PQexecPrepared(r, "seen500", 0, NULL, NULL, NULL, 0), "seen500");
		ck_assert_msg(s[0] == '1', "read %d went back in time: %s", i, s);
		back += strcmp(s, "1|127.0.0.3|true") == 0;
	}
	ck_assert_int_gt(back, 50);	/* on the replica again, mostly */
	PQfinish(r);
	PQfinish(on2);
	PQfinish(on3);
	replay_pause(replicas, false);
	stop_balancing(&p);
}
END_TEST

/*
 * A read waits for the one standby it may read on when that one's server
 * is about to be free (here, running server_reset_query) rather than go
 * to the primary or to the other standby's idle server: a client that
 * read on one replica reads there again, each read straight after the
 * last, 5 times. If that server dies while the read waits, the read is
 * not left waiting: it runs at once, on the primary or a new server there.
 */
START_TEST(reads_wait_for_their_standby)
{
	struct pgv p;
	start_balancing(&p, "au", "load_balance_reads=auto pool_size=2",
			"server_reset_query = SELECT pg_sleep(1)\nserver_reset_query_always = 1\n");
	PGconn *c[2] = { balance_connect(&p, "au", NULL), balance_connect(&p, "au", NULL) };
	wait_on_replica(&p, c[0], NULL);
	/*
	 * its reset (pg_sleep(1)) done. A fixed wait: if a loaded machine lets the
	 * reset run past it, the reads below wait for it, slower but not wrong.
	 */
	sleep_ms(1200);
	reads_held_at_once(c, 2, NULL);	/* two servers, one on each replica */
	for (int i = 0; i < 2; i++) {
		exec_ok(c[i], "COMMIT");
		PQfinish(c[i]);
	}
	sleep_ms(1200);		/* both resets (pg_sleep(1)) done, as above */
	PGconn *r = balance_connect(&p, "au", NULL);
	char first[64];
	snprintf(first, sizeof(first), "%s", ran_on(r, NULL));
	ck_assert_msg(on_replica(first), "first read on %s", first);
	for (int i = 0; i < 5; i++) {
		const char *s = ran_on(r, NULL);
		ck_assert_msg(strcmp(s, first) == 0, "read %d on %s, not on %s, whose server was being reset\n%s", i, s, first,
			      pgv_log_tail(&p, 3000));
	}
	/* its server killed during the reset, while the next read waits for it */
	PGconn *there = strcmp(first, "127.0.0.3|true") == 0 ? standby : standby2;
	ck_assert_int_eq(PQsendQuery(r, "SELECT host(inet_server_addr()) || '|' || pg_is_in_recovery()"), 1);
	/*
	 * So the read reaches pgvalve and waits before the kill. The kill must find
	 * the 1 s reset still running: 200 ms leaves 800 ms for the round trips, on
	 * a loaded machine the tightest margin in this file (see the count below).
	 */
	sleep_ms(200);
	ck_assert_str_eq(query_value(there, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
				   "WHERE query = 'SELECT pg_sleep(1)' AND pid <> pg_backend_pid()"), "1");
	double asked = now_s();
	PGresult *res = PQgetResult(r);
	ck_assert_msg(PQresultStatus(res) == PGRES_TUPLES_OK, "the waiting read: %s", PQerrorMessage(r));
	ck_assert_msg(now_s() - asked < 0.9, "the waiting read took %.1f s", now_s() - asked);
	PQclear(res);
	ck_assert_ptr_null(PQgetResult(r));
	PQfinish(r);
	stop_balancing(&p);
}
END_TEST

/*
 * auto, the extended protocol: an unnamed Parse/Bind/Execute/Sync that
 * reads runs on a replica, one that calls nextval() on the primary; named
 * statements (PQprepare) are judged by their text at each PQexecPrepared,
 * reads prepared on whichever replica they land on, writes run on the
 * primary, alternating; in a libpq pipeline of read, write, read, the
 * write after the read is placed on its own (held until the replica
 * answered, then on the primary: it never reaches a replica, so it never
 * fails).
 */
START_TEST(extended_protocol_auto)
{
	struct pgv p;
	start_balancing(&p, "au", "load_balance_reads=auto", "");
	PGconn *c = balance_connect(&p, "au", NULL);
	wait_on_replica(&p, c, NULL);

	for (int i = 0; i < 5; i++) {
		const char *w = result_value(c, PQexecParams(c, WHERE_SQL, 0, NULL, NULL, NULL, NULL, 0), "unnamed read");
		ck_assert_msg(on_replica(w), "unnamed read %d ran on %s", i, w);
		w = result_value(c, PQexecParams(c, "SELECT nextval('bal.s')::text || '|' || pg_is_in_recovery()", 0, NULL,
						 NULL, NULL, NULL, 0), "unnamed nextval");
		ck_assert_msg(strstr(w, "|false"), "nextval ran on %s", w);
		wait_on_replica(&p, c, NULL);	/* read your writes: reads on the primary until a replica has it */
	}
	prepare_ok(c, "where_am_i", WHERE_SQL);
	prepare_ok(c, "ins", "INSERT INTO bal.t VALUES ($1::int, 'p') RETURNING host(inet_server_addr()) || '|' || "
		   "pg_is_in_recovery()");
	wait_on_replica(&p, c, NULL);	/* preparing the INSERT ran on the primary: it counts as a write */
	int on3 = 0, on4 = 0;
	for (int i = 0; i < 20; i++) {
		const char *w = result_value(c, PQexecPrepared(c, "where_am_i", 0, NULL, NULL, NULL, 0), "named read");
		ck_assert_msg(on_replica(w), "a prepared read ran on %s\n%s", w, pgv_log_tail(&p, 2000));
		on3 += strcmp(w, "127.0.0.3|true") == 0;
		on4 += strcmp(w, "127.0.0.4|true") == 0;
		const char *v = "10";
		w = result_value(c, PQexecPrepared(c, "ins", 1, &v, NULL, NULL, 0), "named write");
		ck_assert_str_eq(w, "127.0.0.2|false");
		wait_on_replica(&p, c, NULL);
	}
	fprintf(stderr, "prepared reads: %d on node2, %d on node3\n", on3, on4);

	/* a pipeline: read, write, read, each with its Sync, sent at once */
	ck_assert(PQenterPipelineMode(c));
	const char *v = "11";
	ck_assert(PQsendQueryPrepared(c, "where_am_i", 0, NULL, NULL, NULL, 0));
	ck_assert(PQpipelineSync(c));
	ck_assert(PQsendQueryPrepared(c, "ins", 1, &v, NULL, NULL, 0));
	ck_assert(PQpipelineSync(c));
	ck_assert(PQsendQueryParams(c, WHERE_SQL, 0, NULL, NULL, NULL, NULL, 0));
	ck_assert(PQpipelineSync(c));
	const char *w = pipeline_value(c, "pipelined read");
	ck_assert_msg(on_replica(w), "a pipelined read ran on %s", w);
	ck_assert_str_eq(pipeline_value(c, "pipelined write"), "127.0.0.2|false");
	pipeline_value(c, "pipelined read after a write");	/* pipelined on after a write: stays on the primary */
	ck_assert(PQexitPipelineMode(c));
	ck_assert_str_eq(query_value(primary, "SELECT count(*)::text FROM bal.t WHERE a IN (10, 11)"), "21");
	wait_on_replica(&p, c, NULL);	/* after the pipeline's write */

	/*
	 * The 25006 retry: a Query the classifier calls a read that the
	 * standby refuses before answering anything runs on the primary, with
	 * no error; once a first result went out, the client gets the error.
	 */
	for (int i = 0; i < 10; i++) {
		ck_assert_str_eq(query_value(c, "SELECT host(inet_server_addr()) || '|' || pg_is_in_recovery() "
						"FROM bal.hidden_write"), "127.0.0.2|false");
		wait_on_replica(&p, c, NULL);	/* it wrote on the primary: read your writes holds for it too */
	}
	/* the same through the extended protocol, unnamed (its ParseComplete and BindComplete held back) */
	for (int i = 0; i < 10; i++) {
		const char *got = result_value(c, PQexecParams(c, "SELECT host(inet_server_addr()) || '|' || "
							     "pg_is_in_recovery() FROM bal.hidden_write WHERE $1::int > 0",
							     1, NULL, (const char *const[]){ "1" }, NULL, NULL, 0),
					     "extended hidden write");
		ck_assert_str_eq(got, "127.0.0.2|false");
	}
	/*
	 * Counted on the standby that refused it (SHOW HOSTS reads_retried):
	 * the 10 simple ones, each after a read on a replica, and at least
	 * the first extended one (it wrote: the next may stay on the primary).
	 */
	ck_assert_int_ge(host_count(&p, "au", "127.0.0.3", "reads_retried") + host_count(&p, "au", "127.0.0.4", "reads_retried"),
			 11);
	/* a named statement too (more in named_statements_retried) */
	prepare_ok(c, "hidden", "SELECT n FROM bal.hidden_write");
	PGresult *r = PQexecPrepared(c, "hidden", 0, NULL, NULL, NULL, 0);
	ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "named hidden write: %s", PQresultErrorMessage(r));
	PQclear(r);
	wait_on_replica(&p, c, NULL);
	/* once a first result went out, the client gets PostgreSQL's error */
	r = PQexec(c, "SELECT 1; SELECT n FROM bal.hidden_write");
	ck_assert_msg(PQresultStatus(r) == PGRES_FATAL_ERROR, "%s", PQresStatus(PQresultStatus(r)));
	ck_assert_str_eq(PQresultErrorField(r, PG_DIAG_SQLSTATE), "25006");
	PQclear(r);
	ck_assert(on_replica(ran_on(c, NULL)));

	/* 1 MB statements, simple and extended: answered, at once (longer than the balancer reads: the primary) */
	enum { BIG = 1024 * 1024 };
	char *big = malloc(BIG + 200);
	ck_assert_ptr_nonnull(big);
	int n = snprintf(big, 200, "SELECT length('");
	memset(big + n, 'x', BIG);
	snprintf(big + n + BIG, 200, "') || '|' || pg_is_in_recovery()");
	double started = now_s();
	for (int i = 0; i < 10; i++) {
		ck_assert_str_eq(query_value(c, big), "1048576|false");
		ck_assert_str_eq(result_value(c, PQexecParams(c, big, 0, NULL, NULL, NULL, NULL, 0), "1 MB Parse"),
				 "1048576|false");
	}
	double took = now_s() - started;
	fprintf(stderr, "20 statements of 1 MB: %.2f s\n", took);
	ck_assert_msg(took < pgv_time_bound(10, 60), "20 statements of 1 MB took %.1f s", took);
	free(big);

	PQfinish(c);
	stop_balancing(&p);
}
END_TEST

/* ---------------------------------------------------------------- the 25006 retry of named statements and portals */

/* A read to the classifier (a view hides its nextval()) that a standby refuses as a write (25006). */
#define HIDDEN_SQL "SELECT host(inet_server_addr()) || '|' || pg_is_in_recovery() || '|' || n FROM bal.hidden_write"

/* SHOW HOSTS reads_retried of db, both standbys together. */
static long long reads_retried(struct pgv *p, const char *db)
{
	return host_count(p, db, "127.0.0.3", "reads_retried") + host_count(p, db, "127.0.0.4", "reads_retried");
}

/* Both standbys have replayed everything, and c's reads run on a replica again (read your writes). */
static void reads_on_replica(struct pgv *p, PGconn *c)
{
	wait_replayed_on(standby);
	wait_replayed_on(standby2);
	wait_on_replica(p, c, NULL);
}

/* The same for a raw connection fd. */
static void raw_reads_on_replica(struct pgv *p, int fd)
{
	wait_replayed_on(standby);
	wait_replayed_on(standby2);
	char where[64] = "";
	struct raw_error err = { 0 };
	/* until the balancer places the raw reads on a replica again: 30 s, as in wait_on_replica */
	for (double until = now_s() + 30;; sleep_ms(100)) {
		ck_assert_msg(raw_query(fd, WHERE_SQL, where, sizeof(where), &err) == 0, "raw read: %s", err.message);
		if (on_replica(where))
			return;
		ck_assert_msg(now_s() < until, "raw reads stay on %s\n%s", where, pgv_log_tail(p, 3000));
	}
}

/* A hidden write's answer: it ran on the primary ("127.0.0.2|false|n"), where bal.s is at n now (its effect). */
static void hidden_ran_on_primary(const char *got, const char *what)
{
	char want[64];
	snprintf(want, sizeof(want), "127.0.0.2|false|%s", query_value(primary, "SELECT last_value::text FROM bal.s"));
	ck_assert_msg(strcmp(got, want) == 0, "%s answered %s, not %s", what, got, want);
}

/* A pipeline of one batch: Parse of name (sql), Bind, Describe and Execute of it, Sync; the row's value. */
static const char *parse_and_run(PGconn *c, const char *name, const char *sql)
{
	static char value[64];
	ck_assert(PQenterPipelineMode(c));
	ck_assert(PQsendPrepare(c, name, sql, 0, NULL));
	ck_assert(PQsendQueryPrepared(c, name, 0, NULL, NULL, NULL, 0));
	ck_assert(PQpipelineSync(c));
	PGresult *r = PQgetResult(c);
	ck_assert_msg(PQresultStatus(r) == PGRES_COMMAND_OK, "Parse %s: %s", name, PQresultErrorMessage(r));
	PQclear(r);
	ck_assert_ptr_null(PQgetResult(c));
	snprintf(value, sizeof(value), "%s", pipeline_value(c, name));
	ck_assert(PQexitPipelineMode(c));
	return value;
}

/* A raw batch (sent, then read to its ReadyForQuery) that must succeed with a row: its value. */
static const char *raw_batch_ok(int fd, struct raw_msgs *m, const char *types, const char *what)
{
	static struct raw_answers a;
	raw_send_msgs(fd, m);
	ck_assert_msg(raw_read_answers(fd, 1, 20000, &a), "%s: no ReadyForQuery (%s)", what, a.types);
	ck_assert_msg(!a.error.sqlstate[0], "%s: %s %s", what, a.error.sqlstate, a.error.message);
	ck_assert_msg(strcmp(a.types, types) == 0, "%s: answered %s, not %s", what, a.types, types);
	return a.value;
}

/*
 * Named portals (libpq makes none): a batch that binds and executes its
 * own runs again on the primary, twice (the second time with statement
 * stmt prepared in the first batch, or, untracked, with a Parse of stmt2
 * of its own: an untracked name bound in an earlier batch is not judged
 * and stays on the primary); one bound in an earlier batch of a
 * transaction on a standby (BEGIN READ ONLY: the only way a portal
 * outlives its batch) gets PostgreSQL's 25006, not run again, and the
 * connection goes on. Returns the statements run again (2).
 */
static int raw_portals(struct pgv *p, const char *db, const char *stmt, const char *stmt2)
{
	struct raw_error err = { 0 };
	int fd = -1;
	ck_assert_msg(raw_login_ex(p->port, db, "pgvadmin", "", NULL, &err, &fd) == 0, "raw login: %s", err.message);
	struct raw_msgs *m = calloc(1, sizeof(*m));
	ck_assert_ptr_nonnull(m);
	raw_reads_on_replica(p, fd);
	raw_put_parse(m, stmt, HIDDEN_SQL);
	raw_put_bind(m, "portal1", stmt, NULL);
	raw_put_named(m, 'D', 'P', "portal1");
	raw_put_flush(m);	/* what came so far is held back all the same */
	raw_put_execute(m, "portal1", 0);
	raw_put_sync(m);
	hidden_ran_on_primary(raw_batch_ok(fd, m, "12TDCZ", "a named portal"), "a named portal");
	raw_reads_on_replica(p, fd);
	if (stmt2)
		raw_put_parse(m, stmt2, HIDDEN_SQL);
	raw_put_bind(m, "portal2", stmt2 ? stmt2 : stmt, NULL);
	raw_put_execute(m, "portal2", 0);
	raw_put_sync(m);
	hidden_ran_on_primary(raw_batch_ok(fd, m, stmt2 ? "12DCZ" : "2DCZ", "a named portal again"),
			      "a named portal again");

	long long before = reads_retried(p, db);
	raw_reads_on_replica(p, fd);
	char where[64];
	ck_assert_int_eq(raw_query(fd, "BEGIN READ ONLY", where, sizeof(where), &err), 0);
	ck_assert_int_eq(raw_query(fd, WHERE_SQL, where, sizeof(where), &err), 0);
	ck_assert_msg(on_replica(where), "BEGIN READ ONLY on %s", where);
	raw_put_parse(m, "", "SELECT x, CASE WHEN x = 2 THEN bal.writer() END FROM generate_series(1, 2) x");
	raw_put_bind(m, "cur", "", NULL);
	raw_put_execute(m, "cur", 1);
	raw_put_sync(m);
	struct raw_answers a;
	raw_send_msgs(fd, m);
	ck_assert(raw_read_answers(fd, 1, 20000, &a));
	ck_assert_msg(strcmp(a.types, "12DsZ") == 0 && a.status == 'T', "first batch: %s %c", a.types, a.status);
	raw_put_execute(m, "cur", 0);
	raw_put_sync(m);
	raw_send_msgs(fd, m);
	ck_assert(raw_read_answers(fd, 1, 20000, &a));
	ck_assert_msg(strcmp(a.error.sqlstate, "25006") == 0, "a portal of an earlier batch: %s %s (%s)",
		      a.error.sqlstate, a.error.message, a.types);
	ck_assert_int_eq(a.status, 'E');
	ck_assert_int_eq(raw_query(fd, "ROLLBACK", where, sizeof(where), &err), 0);
	ck_assert_int_eq(reads_retried(p, db), before);	/* PostgreSQL's error, not run again */
	ck_assert_int_eq(raw_query(fd, "SELECT 'usable'", where, sizeof(where), &err), 0);
	ck_assert_str_eq(where, "usable");
	free(m);
	close(fd);
	return 2;
}

/*
 * max_prepared_statements > 0: a statement prepared in an earlier batch
 * (PQprepare, PQexecPrepared), and one whose Parse comes with its Bind
 * and Execute in one batch (a pipeline), that a standby refuses as a
 * write run again on the primary, with no error and their effect there,
 * three times each (prepare.c's names stay right on the client and on
 * both servers); a read-only named statement still runs on a replica.
 * Returns the statements run again.
 */
static int named_tracked(struct pgv *p, PGconn *c)
{
	prepare_ok(c, "hw", HIDDEN_SQL);
	double took = 0;
	for (int i = 0; i < 3; i++) {
		reads_on_replica(p, c);
		double started = now_s();
		PGresult *r = PQexecPrepared(c, "hw", 0, NULL, NULL, NULL, 0);
		took += now_s() - started;
		hidden_ran_on_primary(result_value(c, r, "hw"), "hw");
	}
	reads_on_replica(p, c);
	hidden_ran_on_primary(parse_and_run(c, "hp", HIDDEN_SQL), "Parse hp with its Execute");
	for (int i = 0; i < 2; i++) {
		reads_on_replica(p, c);
		hidden_ran_on_primary(result_value(c, PQexecPrepared(c, "hp", 0, NULL, NULL, NULL, 0), "hp"), "hp");
	}
	reads_on_replica(p, c);
	prepare_ok(c, "ro", WHERE_SQL);
	double read_took = 0;
	for (int i = 0; i < 3; i++) {
		double started = now_s();
		PGresult *r = PQexecPrepared(c, "ro", 0, NULL, NULL, NULL, 0);
		read_took += now_s() - started;
		const char *w = result_value(c, r, "ro");
		ck_assert_msg(on_replica(w), "a named read ran on %s", w);
	}
	fprintf(stderr, "named: a write run again on the primary %.2f ms, a read on a replica %.2f ms (mean of 3)\n",
		took / 3 * 1000, read_took / 3 * 1000);
	const char *w = parse_and_run(c, "ro2", WHERE_SQL);
	ck_assert_msg(on_replica(w), "a named read parsed with its Execute ran on %s", w);
	ck_assert_msg(on_replica(result_value(c, PQexecPrepared(c, "ro2", 0, NULL, NULL, NULL, 0), "ro2")),
		      "ro2 again off the replicas");
	return 6;
}

/*
 * The same with max_prepared_statements = 0 (names go to servers as they
 * are; in transaction pooling only a batch that parses what it runs is
 * sure to find it): a Parse with its Execute in one batch is run again.
 */
static int named_untracked(struct pgv *p, PGconn *c)
{
	reads_on_replica(p, c);
	hidden_ran_on_primary(parse_and_run(c, "z0", HIDDEN_SQL), "Parse z0 with its Execute, untracked");
	reads_on_replica(p, c);
	hidden_ran_on_primary(parse_and_run(c, "z1", HIDDEN_SQL), "Parse z1 with its Execute, untracked");
	reads_on_replica(p, c);
	const char *w = parse_and_run(c, "zro", WHERE_SQL);
	ck_assert_msg(on_replica(w), "a named read parsed with its Execute ran on %s", w);
	return 2;
}

/*
 * PostgreSQL keeps a named statement whose Parse passed though the batch
 * failed after it (25006 on a standby): prepare.c's record of the standby
 * stays true after the retry.
 */
static void standby_keeps_parsed(void)
{
	ck_assert(PQenterPipelineMode(standby));
	ck_assert(PQsendPrepare(standby, "kept", "SELECT n FROM bal.hidden_write", 0, NULL));
	ck_assert(PQsendQueryPrepared(standby, "kept", 0, NULL, NULL, NULL, 0));
	ck_assert(PQpipelineSync(standby));
	PGresult *r = PQgetResult(standby);
	ck_assert_int_eq(PQresultStatus(r), PGRES_COMMAND_OK);
	PQclear(r);
	ck_assert_ptr_null(PQgetResult(standby));
	r = PQgetResult(standby);
	ck_assert_str_eq(PQresultErrorField(r, PG_DIAG_SQLSTATE), "25006");
	PQclear(r);
	ck_assert_ptr_null(PQgetResult(standby));
	r = PQgetResult(standby);
	ck_assert_int_eq(PQresultStatus(r), PGRES_PIPELINE_SYNC);
	PQclear(r);
	ck_assert(PQexitPipelineMode(standby));
	r = PQdescribePrepared(standby, "kept");
	ck_assert_msg(PQresultStatus(r) == PGRES_COMMAND_OK, "kept: %s", PQresultErrorMessage(r));
	PQclear(r);
	exec_ok(standby, "DEALLOCATE kept");
}

START_TEST(named_statements_retried)
{
	struct pgv p;
	start_balancing(&p, "au", "load_balance_reads=auto", "");
	standby_keeps_parsed();
	PGconn *c = balance_connect(&p, "au", NULL);
	wait_on_replica(&p, c, NULL);
	long long before = reads_retried(&p, "au");
	int retried = named_tracked(&p, c);
	retried += raw_portals(&p, "au", "rp", NULL);
	ck_assert_int_eq(reads_retried(&p, "au") - before, retried);
	ck_assert(on_replica(ran_on(c, NULL)));
	PQfinish(c);

	pgv_stop(&p);
	char dbs[512];
	snprintf(dbs, sizeof(dbs), "au = " HOSTS " port=%d dbname=postgres user=pgvadmin target_session_attrs=read-write "
		 "load_balance_reads=auto\n", roles_cluster_port);
	pgv_start(&p, BASE "max_prepared_statements = 0\n", dbs, USERS);
	c = balance_connect(&p, "au", NULL);
	wait_on_replica(&p, c, NULL);
	before = reads_retried(&p, "au");
	retried = named_untracked(&p, c);
	retried += raw_portals(&p, "au", "zr", "zr2");
	ck_assert_int_eq(reads_retried(&p, "au") - before, retried);
	PQfinish(c);
	stop_balancing(&p);
}
END_TEST

/* Where c's auto read calling fn ran ("127.0.0.N|true/false"), which must succeed. */
static const char *call_ran_on(PGconn *c, const char *fn)
{
	char sql[256];
	snprintf(sql, sizeof(sql), "SELECT host(inet_server_addr()) || '|' || pg_is_in_recovery() FROM (SELECT %s) x", fn);
	return query_value(c, sql);
}

/*
 * Until c's auto reads calling fn run on a replica (true) or on the primary (false):
 * the functions' table is read again every load_balance_functions_refresh second (1 here)
 * or at a RELOAD, then replayed; 30 s leaves a loaded machine many rounds.
 */
static void wait_call_on(struct pgv *p, PGconn *c, const char *fn, bool replica)
{
	for (double until = now_s() + 30; on_replica(call_ran_on(c, fn)) != replica; sleep_ms(100))
		ck_assert_msg(now_s() < until, "%s stays on %s\n%s", fn, call_ran_on(c, fn), pgv_log_tail(p, 3000));
}

/*
 * auto, pg_proc: once pgvalve has read from the primary which functions
 * are not VOLATILE, a user's STABLE function is balanced, and a VOLATILE
 * one (it inserts) stays on the primary with no error. The table is read
 * again on RELOAD (a function made since is balanced after it, not
 * before) and every load_balance_functions_refresh; a name VOLATILE in
 * any schema is volatile everywhere.
 */
START_TEST(functions_from_pg_proc)
{
	struct pgv p;
	start_balancing(&p, "au", "load_balance_reads=auto", "load_balance_functions_refresh = 0\n");
	PGconn *c = balance_connect(&p, "au", NULL);
	exec_ok(c, "INSERT INTO bal.t VALUES (6, 'f')");	/* a server on the primary, to ask */
	wait_on_replica(&p, c, NULL);
	wait_call_on(&p, c, "bal.reader()", true);
	for (int i = 0; i < 5; i++) {
		ck_assert_msg(on_replica(call_ran_on(c, "bal.reader()")), "bal.reader() on the primary");
		ck_assert_str_eq(call_ran_on(c, "bal.writer()"), "127.0.0.2|false");
		wait_on_replica(&p, c, NULL);	/* read your writes: the next read waits for a replica that has it */
	}

	/* made after the table was read: on the primary until a RELOAD reads it again */
	exec_ok(primary, "CREATE FUNCTION bal.later() RETURNS int STABLE LANGUAGE sql AS 'SELECT 1'");
	wait_replayed_on(standby);
	wait_replayed_on(standby2);
	/* A negative window: with no refresh, 5 calls over 1.5 s stay on the primary (a refresh would move them). */
	for (int i = 0; i < 5; i++, sleep_ms(300))
		ck_assert_str_eq(call_ran_on(c, "bal.later()"), "127.0.0.2|false");
	pgv_ini_replace(&p, "load_balance_functions_refresh = 0", "load_balance_functions_refresh = 1");
	pgv_reload(&p);
	wait_call_on(&p, c, "bal.later()", true);

	/* read again every second: the same name VOLATILE in another schema makes it volatile */
	exec_ok(primary, "CREATE FUNCTION public.later(int) RETURNS int VOLATILE LANGUAGE sql AS 'SELECT $1'");
	wait_call_on(&p, c, "bal.later()", false);
	exec_ok(primary, "DROP FUNCTION public.later(int)");
	wait_call_on(&p, c, "bal.later()", true);

	PQfinish(c);
	stop_balancing(&p);
}
END_TEST

/* roles_cluster.sh verb on node, in the background: its pid. */
static pid_t roles_cluster_background(const char *verb, int node)
{
	char script[700], nodebuf[16], out[700];
	snprintf(script, sizeof(script), "%s/test/integration/roles_cluster.sh", PGV_TEST_SRCDIR);
	snprintf(nodebuf, sizeof(nodebuf), "%d", node);
	snprintf(out, sizeof(out), "%s.%s%d.bg.out", roles_cluster_dir, verb, node);
	char *argv[] = { script, (char *)verb, roles_cluster_dir, nodebuf, NULL };
	pid_t pid = run_program_background(argv, out);
	ck_assert_int_gt(pid, 0);
	return pid;
}

/* Whether the background program pid has exited (it is reaped by stop_program then). */
static bool program_done(pid_t pid)
{
	siginfo_t info = { 0 };
	return waitid(P_PID, (id_t)pid, &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid;
}

/*
 * Reads of n clients at once (each its own auto Query), rounds of them,
 * until pid has exited (pid 0: `rounds` rounds); every read must succeed.
 * Counts where they ran in where[] (index: 127.0.0.N's N, +3 if not in
 * recovery). Returns the reads done.
 */
static int reads_while(struct pgv *p, PGconn **c, int n, pid_t pid, int rounds, int where[8])
{
	int reads = 0;
	for (int round = 0; pid ? !program_done(pid) : round < rounds; round++) {
		for (int i = 0; i < n; i++)
			ck_assert(PQsendQuery(c[i], WHERE_SQL));
		for (int i = 0; i < n; i++) {
			PGresult *r = PQgetResult(c[i]);
			ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "read %d failed: %s\n%s", reads,
				      PQresultErrorMessage(r), pgv_log_tail(p, 3000));
			const char *w = PQgetvalue(r, 0, 0);
			int node = w[8] - '0';
			if (node >= 2 && node <= 4)
				where[node - 2 + (strstr(w, "|true") ? 0 : 3)]++;
			PQclear(r);
			ck_assert_ptr_null(PQgetResult(c[i]));
			reads++;
		}
	}
	return reads;
}

/*
 * A read whose standby backend is terminated before it answered runs
 * again on the primary; auto reads of four clients at once keep running
 * while a standby is stopped, then while the other is promoted: none
 * fails, and afterwards none runs on the stopped standby, nor on the
 * promoted one as a standby.
 */
START_TEST(standby_stopped_or_promoted_mid_run)
{
	struct pgv p;
	start_balancing(&p, "au", "load_balance_reads=auto", "");
	PGconn *sb[2] = { standby, standby2 };
	PGconn *c[4];
	for (int i = 0; i < 4; i++)
		c[i] = balance_connect(&p, "au", NULL);
	wait_on_replica(&p, c[0], NULL);
	/*
	 * Four read transactions at once, on four servers: a client keeps to
	 * the standby it first read on (monotonic reads) until that one is
	 * measured past its last read, so they start on both.
	 */
	reads_held_at_once(c, 4, NULL);
	for (int i = 0; i < 4; i++)
		exec_ok(c[i], "COMMIT");
	int where[8] = { 0 };
	reads_while(&p, c, 4, 0, 50, where);
	ck_assert_msg(where[1] > 0 && where[2] > 0, "before: %d on node2, %d on node3", where[1], where[2]);

	/* a read whose standby backend is terminated before it answered runs again on the primary */
	for (int k = 0; k < 3; k++) {
		ck_assert(PQsendQuery(c[0], "SELECT host(inet_server_addr()) || '|' || pg_is_in_recovery() FROM bal.slow"));
		int killed = 0;
		/* until the read runs on a standby (bal.slow keeps it there long enough): 10 s on a loaded machine */
		for (double until = now_s() + 10; !killed; sleep_ms(20)) {
			ck_assert_msg(now_s() < until, "the slow read never showed up on a standby");
			for (int i = 0; i < 2 && !killed; i++)
				killed = atoi(query_value(sb[i], "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
							  "WHERE query LIKE '%bal.slow%' AND pid <> pg_backend_pid()"));
		}
		PGresult *r = PQgetResult(c[0]);
		ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "a read whose standby went away failed: %s\n%s",
			      PQresultErrorMessage(r), pgv_log_tail(&p, 3000));
		ck_assert_str_eq(PQgetvalue(r, 0, 0), "127.0.0.2|false");
		PQclear(r);
		ck_assert_ptr_null(PQgetResult(c[0]));
	}
	PQfinish(standby);
	PQfinish(standby2);
	standby = standby2 = NULL;	/* their servers stop or change below */

	pid_t stop = roles_cluster_background("stop", 3);
	int during = reads_while(&p, c, 4, stop, 0, where);
	stop_program(stop);
	memset(where, 0, sizeof(where));
	reads_while(&p, c, 4, 0, 50, where);
	ck_assert_msg(where[2] == 0 && where[5] == 0, "%d reads on the stopped standby", where[2] + where[5]);
	ck_assert_int_gt(where[1], 0);

	pid_t promote = roles_cluster_background("promote", 2);
	during += reads_while(&p, c, 4, promote, 0, where);
	stop_program(promote);
	/*
	 * node2's servers learn it is a primary (in_hot_standby): from then on no read there as a standby.
	 * The ParameterStatus comes with the promotion; 30 s covers the promotion's checkpoint on a loaded machine.
	 */
	for (double until = now_s() + 30;; sleep_ms(100)) {
		memset(where, 0, sizeof(where));
		reads_while(&p, c, 4, 0, 10, where);
		if (where[1] == 0)
			break;
		ck_assert_msg(now_s() < until, "reads still on node2 as a standby");
	}
	fprintf(stderr, "standby stopped and promoted: %d reads meanwhile, none failed\n", during);
	for (int i = 0; i < 4; i++)
		PQfinish(c[i]);
	stop_balancing(&p);
}
END_TEST

/*
 * Session pooling: a client is placed once, at its login, on a replica
 * when it asks for a read-only session (default_transaction_read_only=on
 * as a startup parameter or in options, target_session_attrs=read-only or
 * standby in options) and keeps that server; any other client is on the
 * primary and writes there.
 */
START_TEST(session_pooling_placed_at_login)
{
	struct pgv p;
	start_balancing(&p, "se", "load_balance_reads=explicit pool_mode=session", "");

	/*
	 * until the roles are known, a read-only session may land on the primary: a new one each time
	 * (30 s, as in wait_on_replica)
	 */
	for (double until = now_s() + 30;; sleep_ms(100)) {
		PGconn *c = balance_connect(&p, "se", "-c default_transaction_read_only=on");
		bool replica = on_replica(ran_on(c, NULL));
		PQfinish(c);
		if (replica)
			break;
		ck_assert_msg(now_s() < until, "read-only sessions stay on the primary\n%s", pgv_log_tail(&p, 3000));
	}
	static const char *const read_only[] = {
		"-c default_transaction_read_only=on", "-c target_session_attrs=read-only",
		"-c target_session_attrs=standby", "--default-transaction-read-only=on",
	};
	for (size_t i = 0; i < ARRAY_SIZE(read_only); i++) {
		PGconn *c = balance_connect(&p, "se", read_only[i]);
		char first[64];
		snprintf(first, sizeof(first), "%s", ran_on(c, NULL));
		ck_assert_msg(on_replica(first), "%s: on %s", read_only[i], first);
		for (int k = 0; k < 3; k++)
			ck_assert_str_eq(ran_on(c, k ? "BEGIN" : NULL), first);	/* its one server, to the end */
		PQfinish(c);
	}
	/* the others: on the primary, writing */
	PGconn *c = balance_connect(&p, "se", "-c target_session_attrs=read-write");
	for (int k = 0; k < 3; k++) {
		ck_assert_str_eq(ran_on(c, "BEGIN READ ONLY"), "127.0.0.2|false");
		exec_ok(c, "INSERT INTO bal.t VALUES (5, 's')");
	}
	PQfinish(c);
	c = balance_connect(&p, "se", NULL);
	ck_assert_str_eq(ran_on(c, NULL), "127.0.0.2|false");
	ck_assert_str_eq(query_value(c, "SELECT count(*)::text FROM bal.t WHERE a = 5"), "3");
	PQfinish(c);
	stop_balancing(&p);
}
END_TEST

static Suite *balance_suite(void)
{
	Suite *s = suite_create("balance");
	TCase *tc = pgv_tcase_create("classifier", 120);
	tcase_add_test(tc, classifier_never_calls_a_write_a_read);
	suite_add_tcase(s, tc);
	tc = pgv_tcase_create("routing", 180);
	tcase_add_test(tc, routes_reads_to_replicas);
	suite_add_tcase(s, tc);
	tc = pgv_tcase_create("fresh", 240);
	tcase_add_test(tc, reads_your_writes);
	suite_add_tcase(s, tc);
	tc = pgv_tcase_create("extended", 180);
	tcase_add_test(tc, extended_protocol_auto);
	suite_add_tcase(s, tc);
	tc = pgv_tcase_create("named", 240);
	tcase_add_test(tc, named_statements_retried);
	suite_add_tcase(s, tc);
	tc = pgv_tcase_create("functions", 180);
	tcase_add_test(tc, functions_from_pg_proc);
	suite_add_tcase(s, tc);
	tc = pgv_tcase_create("monotonic", 180);
	tcase_add_test(tc, reads_never_go_back_in_time);
	tcase_add_test(tc, reads_wait_for_their_standby);
	suite_add_tcase(s, tc);
	tc = pgv_tcase_create("failover", 180);
	tcase_add_test(tc, standby_stopped_or_promoted_mid_run);
	suite_add_tcase(s, tc);
	tc = pgv_tcase_create("session", 180);
	tcase_add_test(tc, session_pooling_placed_at_login);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return pgv_run_suite(balance_suite());
}
