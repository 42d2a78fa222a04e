/*
 * test_prepared.c - named prepared statements in transaction and statement
 * pooling (max_prepared_statements, issue 16) against a real PostgreSQL
 * 15: libpq's PQprepare/PQexecPrepared from many clients whose statement
 * names clash, pipelines, statements that must be prepared again on
 * another server, Close, LRU eviction, failing Parses, DEALLOCATE ALL,
 * statement mode, and max_prepared_statements = 0 as pass-through.
 * Raw protocol where the exact sequence of answers matters.
 */
#include "harness.h"

#include <arpa/inet.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DB "pgvtest"
#define TXN "auth_type = md5\npool_mode = transaction\nstats_users = scram_user\n"
#ifndef MIN
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#endif

static PGconn *connect_ok(struct pgv *p)
{
	PGconn *c = pgv_connect(p, DB, "scram_user", "scram_pass");
	ck_assert_msg(PQstatus(c) == CONNECTION_OK, "connect: %s\n%s", PQerrorMessage(c), pgv_log_tail(p, 1500));
	return c;
}

static PGconn *admin_connect(struct pgv *p)
{
	PGconn *c = pgv_connect(p, "pgbouncer", "scram_user", "scram_pass");
	ck_assert_msg(PQstatus(c) == CONNECTION_OK, "admin: %s", PQerrorMessage(c));
	return c;
}

static void exec_ok(PGconn *c, const char *sql)
{
	PGresult *r = PQexec(c, sql);
	ExecStatusType st = PQresultStatus(r);
	ck_assert_msg(st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK, "%s: %s", sql, PQerrorMessage(c));
	PQclear(r);
}

static void prepare_ok(PGconn *c, const char *name, const char *sql, int nparams)
{
	PGresult *r = PQprepare(c, name, sql, nparams, NULL);
	ck_assert_msg(PQresultStatus(r) == PGRES_COMMAND_OK, "prepare %s: %s", name, PQerrorMessage(c));
	PQclear(r);
}

/* Runs the statement with one integer parameter; returns the integer it yields. */
static long exec_int(PGconn *c, const char *name, long arg)
{
	char buf[32];
	snprintf(buf, sizeof(buf), "%ld", arg);
	const char *vals[1] = { buf };
	PGresult *r = PQexecPrepared(c, name, 1, vals, NULL, NULL, 0);
	ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "exec %s: %s", name, PQerrorMessage(c));
	long v = strtol(PQgetvalue(r, 0, 0), NULL, 10);
	PQclear(r);
	return v;
}

/* The SQLSTATE of a failing PQexecPrepared. */
static const char *exec_fails(PGconn *c, const char *name, const char *arg)
{
	static char state[6];
	const char *vals[1] = { arg };
	PGresult *r = PQexecPrepared(c, name, arg ? 1 : 0, arg ? vals : NULL, NULL, NULL, 0);
	ck_assert_msg(PQresultStatus(r) == PGRES_FATAL_ERROR, "exec %s should fail", name);
	const char *s = PQresultErrorField(r, PG_DIAG_SQLSTATE);
	snprintf(state, sizeof(state), "%s", s ? s : "");
	PQclear(r);
	return state;
}

static int backend_pid(PGconn *c)
{
	return atoi(query_value(c, "SELECT pg_backend_pid()"));
}

/* The column `col` of SHOW <what>, summed over rows whose `filter_col` is `filter` (NULL: all rows). */
static long admin_sum(PGconn *admin, const char *what, const char *col, const char *filter_col, const char *filter)
{
	char sql[64];
	snprintf(sql, sizeof(sql), "SHOW %s", what);
	PGresult *r = PQexec(admin, sql);
	ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "%s: %s", sql, PQerrorMessage(admin));
	int ci = PQfnumber(r, col);
	ck_assert_msg(ci >= 0, "no column %s in %s", col, sql);
	int fi = filter_col ? PQfnumber(r, filter_col) : -1;
	long sum = 0;
	for (int i = 0; i < PQntuples(r); i++)
		if (fi < 0 || strcmp(PQgetvalue(r, i, fi), filter) == 0)
			sum += strtol(PQgetvalue(r, i, ci), NULL, 10);
	PQclear(r);
	return sum;
}

/*
 * Makes `holder` sit in a transaction on the server whose backend pid is
 * `pid` (in transaction mode with LIFO reuse that is the last one
 * released); fails the test if it cannot get there.
 */
static void hold_server(PGconn *holder, int pid)
{
	for (int tries = 0; tries < 20; tries++) {
		exec_ok(holder, "BEGIN");
		if (backend_pid(holder) == pid)
			return;
		exec_ok(holder, "COMMIT");
	}
	ck_abort_msg("could not land on backend %d", pid);
}

/* ---------------------------------------------------------------- raw protocol */

static int raw_client(struct pgv *p)
{
	struct raw_error err;
	int fd = -1;
	int rc = raw_login_ex(p->port, DB, "scram_user", "scram_pass", NULL, &err, &fd);
	ck_assert_msg(rc == 0 && fd >= 0, "raw login: %s", err.message);
	return fd;
}

/* Sends m and reads the answers up to the `syncs`-th ReadyForQuery (a static result). */
static const struct raw_answers *answers(int fd, struct raw_msgs *m, int syncs)
{
	static struct raw_answers a;
	raw_send_msgs(fd, m);
	ck_assert_msg(raw_read_answers(fd, syncs, 10000, &a), "answers stopped after \"%s\"", a.types);
	return &a;
}

/* Bind of the unnamed portal to a statement without parameters, and its Execute. */
static void put_bind_execute(struct raw_msgs *m, const char *stmt)
{
	raw_put_bind(m, "", stmt, NULL);
	raw_put_execute(m, "", 0);
}

/* ---------------------------------------------------------------- tests */

/* 50 clients on 5 servers; every client names its statements s1 and s2, with different texts. */
START_TEST(many_clients_clashing_names)
{
	enum { N = 50 };
	struct pgv p;
	pgv_start(&p, TXN "default_pool_size = 5\nmax_client_conn = 100\n", std_databases(), std_userlist());
	PGconn *c[N];
	for (int i = 0; i < N; i++) {
		char sql[64];
		c[i] = connect_ok(&p);
		snprintf(sql, sizeof(sql), "SELECT $1::int + %d", i % 7);
		prepare_ok(c[i], "s1", sql, 1);
		snprintf(sql, sizeof(sql), "SELECT $1::int * %d", i % 3 + 2);
		prepare_ok(c[i], "s2", sql, 1);
	}
	/* One at a time: each execution may land on any of the 5 servers. */
	for (int round = 0; round < 4; round++)
		for (int i = 0; i < N; i++) {
			ck_assert_int_eq(exec_int(c[i], "s1", round * 100 + i), round * 100 + i + i % 7);
			ck_assert_int_eq(exec_int(c[i], "s2", i), (long)i * (i % 3 + 2));
		}
	/* All at once: 50 clients queue for 5 servers. */
	for (int round = 0; round < 3; round++) {
		char args[N][16];
		for (int i = 0; i < N; i++) {
			snprintf(args[i], sizeof(args[i]), "%d", i + round);
			const char *vals[1] = { args[i] };
			ck_assert_int_eq(PQsendQueryPrepared(c[i], round % 2 ? "s1" : "s2", 1, vals, NULL, NULL, 0), 1);
		}
		for (int i = 0; i < N; i++) {
			PGresult *r = PQgetResult(c[i]);
			ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "client %d: %s", i, PQerrorMessage(c[i]));
			long want = round % 2 ? i + round + i % 7 : (long)(i + round) * (i % 3 + 2);
			ck_assert_int_eq(strtol(PQgetvalue(r, 0, 0), NULL, 10), want);
			PQclear(r);
			ck_assert_ptr_null(PQgetResult(c[i]));
		}
	}
	PGconn *admin = admin_connect(&p);
	ck_assert_int_eq(admin_sum(admin, "CLIENTS", "prepared_statements", "database", DB), 2 * N);
	long on_servers = admin_sum(admin, "SERVERS", "prepared_statements", NULL, NULL);
	/* 7 + 3 distinct statements, shared: at most 10 on each of the 5 servers. */
	ck_assert_msg(on_servers >= 1 && on_servers <= 50, "servers hold %ld statements", on_servers);
	ck_assert_int_eq(admin_sum(admin, "STATS", "total_client_parse_count", "database", DB), 2 * N);
	long server_parses = admin_sum(admin, "STATS", "total_server_parse_count", "database", DB);
	ck_assert_msg(server_parses >= 10 && server_parses <= 50, "servers got %ld Parses", server_parses);
	/* One copy of each distinct statement for the whole process: 10, not 100. */
	ck_assert_int_eq(admin_sum(admin, "MEM", "used", "name", "prepared_statement_cache"), 10);
	PQfinish(admin);
	for (int i = 0; i < N; i++)
		PQfinish(c[i]);
	pgv_stop(&p);
}
END_TEST

/* Prepare and execute inside libpq pipelines, from several clients on 2 servers. */
/*
 * Rewritten Binds join the bytes around them in one write: loop 0 to
 * servers over TLS (one record), loop 1 over plain TCP (one sendmsg).
 */
START_TEST(pipelined_batches)
{
	enum { N = 6, Q = 20 };
	struct pgv p;
	pgv_start(&p, _i ? TXN "default_pool_size = 2\nserver_tls_sslmode = disable\n" :
		  TXN "default_pool_size = 2\nserver_tls_sslmode = require\n", std_databases(), std_userlist());
	PGconn *c[N];
	for (int i = 0; i < N; i++) {
		c[i] = connect_ok(&p);
		ck_assert_int_eq(PQenterPipelineMode(c[i]), 1);
	}
	for (int batch = 0; batch < 3; batch++) {
		for (int i = 0; i < N; i++) {
			char sql[64], name[16];
			if (batch == 0) {	/* prepare and use in one batch */
				for (int k = 0; k < 3; k++) {
					snprintf(name, sizeof(name), "q%d", k);
					snprintf(sql, sizeof(sql), "SELECT $1::int + %d", k * 1000 + i);
					ck_assert_int_eq(PQsendPrepare(c[i], name, sql, 1, NULL), 1);
				}
			}
			for (int q = 0; q < Q; q++) {
				char arg[16];
				snprintf(name, sizeof(name), "q%d", q % 3);
				snprintf(arg, sizeof(arg), "%d", q);
				const char *vals[1] = { arg };
				ck_assert_int_eq(PQsendQueryPrepared(c[i], name, 1, vals, NULL, NULL, 0), 1);
			}
			ck_assert_int_eq(PQpipelineSync(c[i]), 1);
		}
		for (int i = 0; i < N; i++) {
			if (batch == 0)
				for (int k = 0; k < 3; k++) {
					PGresult *r = PQgetResult(c[i]);
					ck_assert_msg(PQresultStatus(r) == PGRES_COMMAND_OK, "prepare: %s", PQerrorMessage(c[i]));
					PQclear(r);
					ck_assert_ptr_null(PQgetResult(c[i]));
				}
			for (int q = 0; q < Q; q++) {
				PGresult *r = PQgetResult(c[i]);
				ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "client %d query %d: %s", i, q,
					      PQerrorMessage(c[i]));
				ck_assert_int_eq(strtol(PQgetvalue(r, 0, 0), NULL, 10), q + (q % 3) * 1000 + i);
				PQclear(r);
				ck_assert_ptr_null(PQgetResult(c[i]));
			}
			PGresult *r = PQgetResult(c[i]);
			ck_assert_int_eq(PQresultStatus(r), PGRES_PIPELINE_SYNC);
			PQclear(r);
		}
	}
	PGconn *direct = pg_direct();
	ck_assert_str_eq(query_value(direct, "SELECT count(*) > 0 AND bool_and(ssl) FROM pg_stat_ssl "
				 "JOIN pg_stat_activity USING (pid) WHERE usename = 'scram_user'"), _i ? "f" : "t");
	PQfinish(direct);
	for (int i = 0; i < N; i++)
		PQfinish(c[i]);
	pgv_stop(&p);
}
END_TEST

/* Describe, then execute, a statement on a server that never saw it. */
START_TEST(describe_after_server_change)
{
	struct pgv p;
	pgv_start(&p, TXN "default_pool_size = 2\n", std_databases(), std_userlist());
	PGconn *a = connect_ok(&p), *b = connect_ok(&p);
	exec_ok(a, "BEGIN");
	int first = backend_pid(a);
	prepare_ok(a, "d1", "SELECT $1::int AS x, 'two'::text AS y", 1);
	exec_ok(a, "COMMIT");
	hold_server(b, first);
	PGresult *r = PQdescribePrepared(a, "d1");
	ck_assert_msg(PQresultStatus(r) == PGRES_COMMAND_OK, "describe: %s", PQerrorMessage(a));
	ck_assert_int_eq(PQnparams(r), 1);
	ck_assert_int_eq(PQparamtype(r, 0), 23);	/* int4 */
	ck_assert_int_eq(PQnfields(r), 2);
	ck_assert_str_eq(PQfname(r, 1), "y");
	PQclear(r);
	exec_ok(a, "BEGIN");
	ck_assert_int_ne(backend_pid(a), first);	/* it did run elsewhere */
	ck_assert_int_eq(exec_int(a, "d1", 42), 42);
	exec_ok(a, "COMMIT");
	exec_ok(b, "COMMIT");
	PQfinish(a);
	PQfinish(b);
	pgv_stop(&p);
}
END_TEST

/* Close answers the client at once and in order; the name can then be reused for another query. */
START_TEST(close_and_reparse)
{
	struct pgv p;
	pgv_start(&p, TXN "default_pool_size = 1\n", std_databases(), std_userlist());
	int fd = raw_client(&p), other = raw_client(&p);
	struct raw_msgs m = { .len = 0 };
	const struct raw_answers *a;

	/* The other client prepares the same text under the same name first. */
	raw_put_parse(&m, "c1", "SELECT 'one'");
	raw_put_sync(&m);
	ck_assert_str_eq(answers(other, &m, 1)->types, "1Z");

	raw_put_parse(&m, "c1", "SELECT 'one'");	/* the server has it: only checked there */
	put_bind_execute(&m, "c1");
	raw_put_named(&m, 'C', 'S', "c1");
	raw_put_parse(&m, "c1", "SELECT 'two'");
	put_bind_execute(&m, "c1");
	raw_put_sync(&m);
	a = answers(fd, &m, 1);
	ck_assert_str_eq(a->types, "12DC312DCZ");
	ck_assert_str_eq(a->value, "one");

	put_bind_execute(&m, "c1");
	raw_put_sync(&m);
	a = answers(fd, &m, 1);
	ck_assert_str_eq(a->types, "2DCZ");
	ck_assert_str_eq(a->value, "two");

	/* The other client's c1 was never closed. */
	put_bind_execute(&m, "c1");
	raw_put_sync(&m);
	a = answers(other, &m, 1);
	ck_assert_str_eq(a->types, "2DCZ");
	ck_assert_str_eq(a->value, "one");

	/* A closed name is gone for its client, as in PostgreSQL; Close of an unknown name is fine. */
	raw_put_named(&m, 'C', 'S', "c1");
	raw_put_named(&m, 'C', 'S', "never");
	put_bind_execute(&m, "c1");
	raw_put_sync(&m);
	a = answers(fd, &m, 1);
	ck_assert_str_eq(a->types, "33EZ");
	ck_assert_str_eq(a->error.sqlstate, "26000");
	close(fd);
	close(other);
	pgv_stop(&p);
}
END_TEST

/* The pooled modes point 3 of issue 29 is checked in: loop 0 transaction, loop 1 statement. */
static void start_pooled(struct pgv *p, int loop, const char *extra)
{
	char ini[512];
	snprintf(ini, sizeof(ini), "auth_type = md5\npool_mode = %s\nstats_users = scram_user\ndefault_pool_size = 1\n%s",
		 loop ? "statement" : "transaction", extra ? extra : "");
	pgv_start(p, ini, std_databases(), std_userlist());
}

/* One extended batch and its Sync: the answers' types, and the first error's SQLSTATE and message. */
static void expect_batch(int fd, struct raw_msgs *m, const char *types, const char *sqlstate, const char *message)
{
	raw_put_sync(m);
	const struct raw_answers *a = answers(fd, m, 1);
	ck_assert_msg(strcmp(a->types, types) == 0, "answers \"%s\", expected \"%s\" (%s)", a->types, types,
		      a->error.message);
	ck_assert_str_eq(a->error.sqlstate, sqlstate ? sqlstate : "");
	if (message)
		ck_assert_str_eq(a->error.message, message);
}

/*
 * A client's own names answer as PostgreSQL's (issue 29 point 3): Parse of
 * a name it has fails with 42P05 once the new text is checked; Bind and
 * Describe of a name it does not have fail with 26000, naming its name;
 * what follows in the batch is skipped up to the Sync.
 */
START_TEST(own_names_as_in_postgresql)
{
	struct pgv p;
	start_pooled(&p, _i, NULL);
	int fd = raw_client(&p);
	struct raw_msgs m = { .len = 0 };
	raw_put_parse(&m, "x", "SELECT 1");
	expect_batch(fd, &m, "1Z", NULL, NULL);
	raw_put_parse(&m, "x", "SELECT 2");
	expect_batch(fd, &m, "EZ", "42P05", "prepared statement \"x\" already exists");
	/* the log says it in PgBouncer's words, which operators alert on */
	pgv_expect_log(&p, "prepared statement 'x' was already prepared", 10);
	raw_put_parse(&m, "x", "SELEC 2");
	expect_batch(fd, &m, "EZ", "42601", NULL);
	put_bind_execute(&m, "x");	/* the first x still stands */
	raw_put_sync(&m);
	ck_assert_str_eq(answers(fd, &m, 1)->value, "1");
	/* y is made before the error; z, after it, is skipped with the rest. */
	raw_put_parse(&m, "y", "SELECT 'y'");
	raw_put_parse(&m, "x", "SELECT 3");
	raw_put_parse(&m, "z", "SELECT 'z'");
	put_bind_execute(&m, "y");
	expect_batch(fd, &m, "1EZ", "42P05", "prepared statement \"x\" already exists");
	put_bind_execute(&m, "y");
	expect_batch(fd, &m, "2DCZ", NULL, NULL);
	put_bind_execute(&m, "z");
	expect_batch(fd, &m, "EZ", "26000", "prepared statement \"z\" does not exist");
	raw_put_named(&m, 'D', 'S', "nope");
	raw_put_parse(&m, "z", "SELECT 'z'");
	expect_batch(fd, &m, "EZ", "26000", "prepared statement \"nope\" does not exist");
	raw_put_named(&m, 'C', 'S', "nope");
	raw_put_named(&m, 'C', 'S', "y");
	expect_batch(fd, &m, "33Z", NULL, NULL);
	put_bind_execute(&m, "y");
	expect_batch(fd, &m, "EZ", "26000", "prepared statement \"y\" does not exist");
	close(fd);
	pgv_stop(&p);
}
END_TEST

/* No client reaches another's statement by its server-side name, by protocol or SQL. */
START_TEST(server_names_are_out_of_reach)
{
	struct pgv p;
	start_pooled(&p, _i, NULL);
	int owner = raw_client(&p), thief = raw_client(&p);
	struct raw_msgs m = { .len = 0 };
	raw_put_parse(&m, "secret", "SELECT 'secret'");
	expect_batch(owner, &m, "1Z", NULL, NULL);
	raw_put_query(&m, "PREPARE sqlsecret AS SELECT 'sql secret'");
	ck_assert_str_eq(answers(owner, &m, 1)->types, "CZ");
	for (int id = 0; id <= 8; id++) {
		char name[32], msg[96], sql[64];
		snprintf(name, sizeof(name), "PGV_%x", id);
		snprintf(msg, sizeof(msg), "prepared statement \"%s\" does not exist", name);
		put_bind_execute(&m, name);
		expect_batch(thief, &m, "EZ", "26000", msg);
		raw_put_named(&m, 'D', 'S', name);
		expect_batch(thief, &m, "EZ", "26000", msg);
		snprintf(sql, sizeof(sql), "EXECUTE \"%s\"", name);
		raw_put_query(&m, sql);
		const struct raw_answers *a = answers(thief, &m, 1);
		ck_assert_str_eq(a->types, "EZ");
		ck_assert_str_eq(a->error.message, msg);
		snprintf(sql, sizeof(sql), "DEALLOCATE \"%s\"", name);
		raw_put_query(&m, sql);
		a = answers(thief, &m, 1);
		ck_assert_str_eq(a->types, "EZ");
		ck_assert_str_eq(a->error.message, msg);
	}
	put_bind_execute(&m, "secret");	/* nothing of the owner's was touched */
	raw_put_sync(&m);
	ck_assert_str_eq(answers(owner, &m, 1)->value, "secret");
	raw_put_query(&m, "EXECUTE sqlsecret");
	ck_assert_str_eq(answers(owner, &m, 1)->value, "sql secret");
	close(owner);
	close(thief);
	pgv_stop(&p);
}
END_TEST

/* SQL PREPARE / EXECUTE / DEALLOCATE of a client's own names, and both levels on one name. */
START_TEST(sql_names_as_in_postgresql)
{
	struct pgv p;
	start_pooled(&p, _i, NULL);
	int fd = raw_client(&p);
	struct raw_msgs m = { .len = 0 };
	const struct raw_answers *a;
	static const struct {
		const char *sql, *types, *value, *sqlstate, *message;
	} steps[] = {
		{ "PREPARE q AS SELECT 'q'", "CZ", "", "", "" },
		{ "PREPARE q AS SELECT 'again'", "EZ", "", "42P05", "prepared statement \"q\" already exists" },
		{ "PREPARE q AS SELEC 1", "EZ", "", "42601", NULL },
		{ "EXECUTE q", "TDCZ", "q", "", "" },
		{ "EXECUTE nope", "EZ", "", "26000", "prepared statement \"nope\" does not exist" },
		{ "DEALLOCATE nope", "EZ", "", "26000", "prepared statement \"nope\" does not exist" },
		{ "DEALLOCATE PREPARE q", "CZ", "", "", "" },
		{ "EXECUTE q", "EZ", "", "26000", "prepared statement \"q\" does not exist" },
		{ "PREPARE q AS SELECT 'q2'", "CZ", "", "", "" },
		/* protocol-level p1, below, runs from SQL; SQL-level q from the protocol */
		{ "EXECUTE p1", "TDCZ", "p1", "", "" },
		{ "PREPARE p1 AS SELECT 'dup'", "EZ", "", "42P05", "prepared statement \"p1\" already exists" },
	};
	raw_put_parse(&m, "p1", "SELECT 'p1'");
	expect_batch(fd, &m, "1Z", NULL, NULL);
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		raw_put_query(&m, steps[i].sql);
		a = answers(fd, &m, 1);
		ck_assert_msg(strcmp(a->types, steps[i].types) == 0, "%s: \"%s\" (%s)", steps[i].sql, a->types,
			      a->error.message);
		ck_assert_str_eq(a->value, steps[i].value);
		ck_assert_str_eq(a->error.sqlstate, steps[i].sqlstate);
		if (steps[i].message)
			ck_assert_str_eq(a->error.message, steps[i].message);
	}
	put_bind_execute(&m, "q");
	raw_put_sync(&m);
	a = answers(fd, &m, 1);
	ck_assert_str_eq(a->types, "2DCZ");
	ck_assert_str_eq(a->value, "q2");
	raw_put_parse(&m, "q", "SELECT 1");
	expect_batch(fd, &m, "EZ", "42P05", "prepared statement \"q\" already exists");
	close(fd);
	pgv_stop(&p);
}
END_TEST

/*
 * In a failed transaction PostgreSQL refuses a Parse, PREPARE and
 * DEALLOCATE (25P02), even of a statement the server already holds for
 * another client, and the names stay as they were.
 */
START_TEST(failed_transaction_refuses_names)
{
	struct pgv p;
	start_pooled(&p, 0, NULL);
	int fd = raw_client(&p), other = raw_client(&p);
	struct raw_msgs m = { .len = 0 };
	raw_put_parse(&m, "held", "SELECT 'held'");
	expect_batch(other, &m, "1Z", NULL, NULL);
	raw_put_query(&m, "PREPARE sq AS SELECT 'sq'");
	ck_assert_str_eq(answers(fd, &m, 1)->types, "CZ");
	raw_put_query(&m, "BEGIN");
	ck_assert_str_eq(answers(fd, &m, 1)->types, "CZ");
	raw_put_query(&m, "SELECT 1/0");
	ck_assert_str_eq(answers(fd, &m, 1)->error.sqlstate, "22012");
	raw_put_parse(&m, "held", "SELECT 'held'");
	expect_batch(fd, &m, "EZ", "25P02", NULL);
	static const char *const refused[] = { "PREPARE sq2 AS SELECT 'held'", "PREPARE sq3 AS SELECT 'sq'",
					       "DEALLOCATE sq" };
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		raw_put_query(&m, refused[i]);
		const struct raw_answers *a = answers(fd, &m, 1);
		ck_assert_msg(strcmp(a->types, "EZ") == 0 && strcmp(a->error.sqlstate, "25P02") == 0, "%s: %s %s",
			      refused[i], a->types, a->error.message);
		ck_assert_int_eq(a->status, 'E');
	}
	raw_put_query(&m, "ROLLBACK");
	ck_assert_str_eq(answers(fd, &m, 1)->types, "CZ");
	put_bind_execute(&m, "held");
	expect_batch(fd, &m, "EZ", "26000", "prepared statement \"held\" does not exist");
	raw_put_query(&m, "EXECUTE sq");
	ck_assert_str_eq(answers(fd, &m, 1)->value, "sq");
	close(fd);
	close(other);
	pgv_stop(&p);
}
END_TEST

/*
 * SHOW STATS counts the Parses and Binds of named statements pgvalve
 * manages, as PgBouncer: unnamed ones not, and none at all without
 * tracking (loop 1).
 */
START_TEST(parse_and_bind_counters)
{
	struct pgv p;
	pgv_start(&p, _i ? TXN "max_prepared_statements = 0\n" : TXN, std_databases(), std_userlist());
	int fd = raw_client(&p);
	struct raw_msgs m = { .len = 0 };
	raw_put_parse(&m, "a", "SELECT 'a'");
	raw_put_parse(&m, "b", "SELECT 'b'");
	raw_put_parse(&m, "", "SELECT 'unnamed'");
	raw_put_bind(&m, "", "", NULL);
	raw_put_execute(&m, "", 0);
	for (int i = 0; i < 3; i++)
		put_bind_execute(&m, i % 2 ? "a" : "b");
	raw_put_sync(&m);
	ck_assert_str_eq(answers(fd, &m, 1)->types, "1112DC2DC2DC2DCZ");
	close(fd);
	PGconn *admin = admin_connect(&p);
	/* STATS totals are taken at the stats_period: the per-database totals come from the live counters. */
	long cp = admin_sum(admin, "STATS", "total_client_parse_count", "database", DB);
	long sp = admin_sum(admin, "STATS", "total_server_parse_count", "database", DB);
	long bc = admin_sum(admin, "STATS", "total_bind_count", "database", DB);
	ck_assert_msg(cp == (_i ? 0 : 2) && sp == (_i ? 0 : 2) && bc == (_i ? 0 : 3),
		      "client parses %ld, server parses %ld, binds %ld", cp, sp, bc);
	PQfinish(admin);
	pgv_stop(&p);
}
END_TEST

/* max_prepared_statements = 2: a third statement evicts the least recently used, which comes back. */
START_TEST(lru_eviction)
{
	struct pgv p;
	pgv_start(&p, TXN "default_pool_size = 1\nmax_prepared_statements = 2\n", std_databases(), std_userlist());
	PGconn *c = connect_ok(&p);
	prepare_ok(c, "e1", "SELECT $1::int + 1", 1);
	prepare_ok(c, "e2", "SELECT $1::int + 2", 1);
	prepare_ok(c, "e3", "SELECT $1::int + 3", 1);
	for (int round = 0; round < 5; round++)
		for (int k = 1; k <= 3; k++) {
			char name[8];
			snprintf(name, sizeof(name), "e%d", k);
			ck_assert_int_eq(exec_int(c, name, round), round + k);
		}
	ck_assert_int_eq(atoi(query_value(c, "SELECT count(*) FROM pg_prepared_statements")), 2);
	PGconn *admin = admin_connect(&p);
	ck_assert_int_eq(admin_sum(admin, "SERVERS", "prepared_statements", NULL, NULL), 2);
	ck_assert_int_eq(admin_sum(admin, "CLIENTS", "prepared_statements", "database", DB), 3);
	PQfinish(admin);
	PQfinish(c);
	pgv_stop(&p);
}
END_TEST

/* A failing Parse fails its client only; the name stays free; a failed re-prepare hits only its owner. */
START_TEST(failing_parse)
{
	struct pgv p;
	pgv_start(&p, TXN "default_pool_size = 2\n", std_databases(), std_userlist());
	PGconn *a = connect_ok(&p), *b = connect_ok(&p);
	PGresult *r = PQprepare(a, "bad", "SELEC 1", 0, NULL);
	ck_assert_int_eq(PQresultStatus(r), PGRES_FATAL_ERROR);
	ck_assert_str_eq(PQresultErrorField(r, PG_DIAG_SQLSTATE), "42601");
	PQclear(r);
	ck_assert_str_eq(exec_fails(a, "bad", NULL), "26000");
	prepare_ok(a, "bad", "SELECT $1::int", 1);	/* the name is free */
	ck_assert_int_eq(exec_int(a, "bad", 7), 7);

	/* A statement on a table only one server's session sees: its re-prepare elsewhere fails for a alone. */
	exec_ok(a, "BEGIN");
	int first = backend_pid(a);
	exec_ok(a, "CREATE TEMP TABLE only_here (x int)");
	exec_ok(a, "INSERT INTO only_here VALUES (5)");
	prepare_ok(a, "t1", "SELECT x + $1::int FROM only_here", 1);
	exec_ok(a, "COMMIT");
	prepare_ok(b, "t1", "SELECT $1::int * 10", 1);
	hold_server(b, first);
	ck_assert_str_eq(exec_fails(a, "t1", "1"), "42P01");
	ck_assert_int_eq(exec_int(a, "bad", 8), 8);	/* its other statements still work */
	ck_assert_int_eq(exec_int(b, "t1", 3), 30);	/* b's own t1 on the held server */
	exec_ok(b, "COMMIT");
	PQfinish(a);
	PQfinish(b);
	pgv_stop(&p);
}
END_TEST

/* DEALLOCATE ALL and DISCARD ALL clear the client's statements (and nobody else's). */
START_TEST(deallocate_all)
{
	static const char *const cmds[] = { "DEALLOCATE ALL", "DISCARD ALL" };
	struct pgv p;
	pgv_start(&p, TXN "default_pool_size = 1\n", std_databases(), std_userlist());
	PGconn *a = connect_ok(&p), *b = connect_ok(&p);
	prepare_ok(a, "x", "SELECT $1::int + 1", 1);
	prepare_ok(b, "x", "SELECT $1::int + 1", 1);
	ck_assert_int_eq(exec_int(a, "x", 1), 2);
	exec_ok(a, cmds[_i]);
	ck_assert_str_eq(exec_fails(a, "x", "1"), "26000");
	ck_assert_int_eq(exec_int(b, "x", 2), 3);	/* prepared again on the (only) server */
	prepare_ok(a, "x", "SELECT $1::int + 100", 1);
	ck_assert_int_eq(exec_int(a, "x", 1), 101);
	PQfinish(a);
	PQfinish(b);
	pgv_stop(&p);
}
END_TEST

START_TEST(statement_mode)
{
	enum { N = 8 };
	struct pgv p;
	pgv_start(&p, "auth_type = md5\npool_mode = statement\ndefault_pool_size = 2\n", std_databases(),
		  std_userlist());
	PGconn *c[N];
	for (int i = 0; i < N; i++) {
		char sql[64];
		c[i] = connect_ok(&p);
		snprintf(sql, sizeof(sql), "SELECT $1::int - %d", i);
		prepare_ok(c[i], "st", sql, 1);
	}
	for (int round = 0; round < 5; round++)
		for (int i = 0; i < N; i++)
			ck_assert_int_eq(exec_int(c[i], "st", 100 + round), 100 + round - i);
	for (int i = 0; i < N; i++)
		PQfinish(c[i]);
	pgv_stop(&p);
}
END_TEST

/* max_prepared_statements = 0: names go to servers unchanged, as before (and as PgBouncer). */
START_TEST(disabled_is_pass_through)
{
	struct pgv p;
	pgv_start(&p, TXN "default_pool_size = 2\nmax_prepared_statements = 0\n", std_databases(), std_userlist());
	PGconn *a = connect_ok(&p), *b = connect_ok(&p);
	exec_ok(a, "BEGIN");
	int first = backend_pid(a);
	prepare_ok(a, "plain_name", "SELECT $1::int", 1);
	ck_assert_str_eq(query_value(a, "SELECT name FROM pg_prepared_statements"), "plain_name");
	exec_ok(a, "COMMIT");
	hold_server(b, first);
	ck_assert_str_eq(exec_fails(a, "plain_name", "1"), "26000");
	exec_ok(b, "COMMIT");
	PGconn *admin = admin_connect(&p);
	ck_assert_int_eq(admin_sum(admin, "CLIENTS", "prepared_statements", "database", DB), 0);
	PQfinish(admin);
	PQfinish(a);
	PQfinish(b);
	pgv_stop(&p);
}
END_TEST

/* A Bind far larger than pkt_buf is read whole, rewritten and passed on; twice, on any server. */
START_TEST(large_bind)
{
	struct pgv p;
	pgv_start(&p, TXN "default_pool_size = 2\n", std_databases(), std_userlist());
	PGconn *c = connect_ok(&p);
	prepare_ok(c, "big", "SELECT length($1::text)", 1);
	size_t n = 3 * 1024 * 1024;
	char *arg = malloc(n + 1);
	ck_assert_ptr_nonnull(arg);
	memset(arg, 'x', n);
	arg[n] = '\0';
	for (int i = 0; i < 2; i++) {
		const char *vals[1] = { arg };
		PGresult *r = PQexecPrepared(c, "big", 1, vals, NULL, NULL, 0);
		ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "exec: %s", PQerrorMessage(c));
		ck_assert_int_eq(strtol(PQgetvalue(r, 0, 0), NULL, 10), (long)n);
		PQclear(r);
	}
	free(arg);
	ck_assert_int_eq(exec_int(c, "big", 12345), 5);
	PQfinish(c);
	pgv_stop(&p);
}
END_TEST

static const char *exec_sqlstate(PGconn *c, const char *sql)
{
	static char state[6];
	PGresult *r = PQexec(c, sql);
	ck_assert_msg(PQresultStatus(r) == PGRES_FATAL_ERROR, "%s should fail", sql);
	snprintf(state, sizeof(state), "%s", PQresultErrorField(r, PG_DIAG_SQLSTATE));
	PQclear(r);
	return state;
}

/* SQL PREPARE once, EXECUTE on either server; names clash across clients; DEALLOCATE. */
START_TEST(sql_prepare_execute)
{
	struct pgv p;
	pgv_start(&p, TXN "default_pool_size = 2\n", std_databases(), std_userlist());
	PGconn *a = connect_ok(&p), *b = connect_ok(&p), *c = connect_ok(&p);
	exec_ok(a, "PREPARE q (int) AS SELECT $1 + 1");
	exec_ok(c, "prepare Q(int) as select $1 * 100;");	/* the same name, folded, another text */
	exec_ok(a, "BEGIN");
	int first = backend_pid(a);
	exec_ok(a, "COMMIT");
	hold_server(b, first);
	exec_ok(a, "BEGIN");
	ck_assert_int_ne(backend_pid(a), first);
	ck_assert_str_eq(query_value(a, "EXECUTE q(41)"), "42");
	exec_ok(a, "COMMIT");
	exec_ok(b, "COMMIT");
	exec_ok(a, "BEGIN");
	ck_assert_int_eq(backend_pid(a), first);	/* the last one released */
	ck_assert_str_eq(query_value(a, "execute Q (1)"), "2");
	exec_ok(a, "COMMIT");
	ck_assert_str_eq(query_value(c, "EXECUTE q(3)"), "300");
	/* The servers hold the statements under pgvalve's names, never the client's. */
	ck_assert_str_eq(query_value(a, "SELECT count(*) FROM pg_prepared_statements WHERE name = 'q'"), "0");
	PGresult *r = PQexec(a, "DEALLOCATE q");
	ck_assert_msg(PQresultStatus(r) == PGRES_COMMAND_OK, "DEALLOCATE: %s", PQerrorMessage(a));
	ck_assert_str_eq(PQcmdStatus(r), "DEALLOCATE");
	PQclear(r);
	ck_assert_str_eq(exec_sqlstate(a, "EXECUTE q(1)"), "26000");
	ck_assert_str_eq(query_value(c, "EXECUTE q(4)"), "400");	/* c's q is untouched */
	exec_ok(a, "PREPARE q AS SELECT 'again'");
	ck_assert_str_eq(query_value(a, "EXECUTE q"), "again");
	/* A failing PREPARE leaves no statement behind. */
	ck_assert_str_eq(exec_sqlstate(a, "PREPARE broken AS SELECT * FROM no_such_table"), "42P01");
	ck_assert_str_eq(exec_sqlstate(a, "EXECUTE broken"), "26000");
	PQfinish(a);
	PQfinish(b);
	PQfinish(c);
	pgv_stop(&p);
}
END_TEST

/* pgbench -M prepared (named statements P0_1 ... in every client) with 50 clients on 5 servers, both modes. */
START_TEST(pgbench_prepared)
{
	static const char *const modes[] = { "transaction", "statement" };
	struct pgv p;
	char ini[256], out[700], port[16];
	snprintf(ini, sizeof(ini), "auth_type = md5\npool_mode = %s\ndefault_pool_size = 5\nmax_client_conn = 100\n",
		 modes[_i]);
	pgv_start(&p, ini, std_databases(), std_userlist());
	snprintf(out, sizeof(out), "%s/pgbench.out", p.dir);
	snprintf(port, sizeof(port), "%d", p.port);
	char *env[] = { "PGPASSWORD=bench_pass", "PGSSLMODE=disable", NULL };
	char *argv[] = { "pgbench", "-n", "-S", "-M", "prepared", "-c", "50", "-j", "2", "-T", "4",
			 "-h", "127.0.0.1", "-p", port, "-U", "pgbench_user", DB, NULL };
	int rc = run_program(argv, env, out, 90);
	const char *text = read_file_tail(out, 8000);
	ck_assert_msg(rc == 0, "pgbench failed:\n%s\n%s", text, pgv_log_tail(&p, 2000));
	const char *s = strstr(text, "number of failed transactions: ");
	ck_assert_msg(s && strtol(s + strlen("number of failed transactions: "), NULL, 10) == 0, "%s", text);
	s = strstr(text, "number of transactions actually processed: ");
	ck_assert_msg(s && strtol(s + strlen("number of transactions actually processed: "), NULL, 10) > 100, "%s",
		      text);
	pgv_stop(&p);
}
END_TEST

static Suite *prepared_suite(void)
{
	Suite *s = suite_create("prepared");
	TCase *tc = pgv_tcase_create("protocol", 60);
	tcase_add_test(tc, many_clients_clashing_names);
	tcase_add_loop_test(tc, pipelined_batches, 1, 2);
	tcase_add_test(tc, describe_after_server_change);
	tcase_add_test(tc, close_and_reparse);
	tcase_add_test(tc, lru_eviction);
	tcase_add_test(tc, failing_parse);
	tcase_add_loop_test(tc, deallocate_all, 0, 2);
	tcase_add_test(tc, statement_mode);
	tcase_add_test(tc, disabled_is_pass_through);
	tcase_add_test(tc, sql_prepare_execute);
	tcase_add_test(tc, large_bind);
	tcase_add_loop_test(tc, own_names_as_in_postgresql, 0, 2);
	tcase_add_loop_test(tc, server_names_are_out_of_reach, 0, 2);
	tcase_add_loop_test(tc, sql_names_as_in_postgresql, 0, 2);
	tcase_add_test(tc, failed_transaction_refuses_names);
	tcase_add_loop_test(tc, parse_and_bind_counters, 0, 2);
	suite_add_tcase(s, tc);
	tc = pgv_tcase_create("pgbench", 120);
	tcase_add_loop_test(tc, pgbench_prepared, 0, 2);
	suite_add_tcase(s, tc);
	/* loop 0 goes to servers over TLS: run.sh leaves it out for a PostgreSQL without */
	tc = pgv_tcase_create("server_tls", 60);
	tcase_set_tags(tc, "server_tls");
	tcase_add_loop_test(tc, pipelined_batches, 0, 1);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return pgv_run_suite(prepared_suite());
}
