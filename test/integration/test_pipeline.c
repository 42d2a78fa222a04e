/*
 * test_pipeline.c - a client gives its server back whatever protocol path
 * led to its ReadyForQuery (issue 29 points 1 and 2): simple and extended
 * queries, pipelines with Flush and several Syncs, errors inside them
 * (with the Sync sent late, after the error came back), COPY in and out
 * (failed included), portals suspended by a row limit and closed,
 * Terminate in the middle of a pipeline.
 *
 * Every flow runs on a pool of one server, raw protocol, the exact answers
 * checked. After it a second client must be served at once (transaction
 * and statement mode), and once the first left, by the same server
 * (every mode): a server kept, or closed as "not idle", fails the flow.
 * The matrix: session, transaction and statement mode; prepared statement
 * tracking on and off; tcp_socket_buffer 4096 and the default.
 */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DB "pgvtest"
/* Long enough for a slow (sanitizer) build, short against query_wait_timeout's 120 s. */
#define ANSWER_MS 5000

struct config {
	const char *mode;
	bool tracking;		/* max_prepared_statements > 0 */
	bool small_buffers;	/* tcp_socket_buffer = 4096 */
};

static const struct config configs[] = {
	{ "transaction", true, false }, { "transaction", false, false }, { "transaction", true, true },
	{ "transaction", false, true }, { "statement", true, false }, { "statement", false, false },
	{ "statement", true, true }, { "session", true, false }, { "session", false, true },
};

static void start(struct pgv *p, const struct config *c)
{
	char ini[512];
	snprintf(ini, sizeof(ini),
		 "auth_type = md5\npool_mode = %s\ndefault_pool_size = 1\nmax_prepared_statements = %d\n%s",
		 c->mode, c->tracking ? 100 : 0, c->small_buffers ? "tcp_socket_buffer = 4096\n" : "");
	pgv_start(p, ini, std_databases(), std_userlist());
}

static int client(struct pgv *p)
{
	struct raw_error err;
	int fd = -1;
	int rc = raw_login_ex(p->port, DB, "scram_user", "scram_pass", NULL, &err, &fd);
	ck_assert_msg(rc == 0 && fd >= 0, "login: %s\n%s", err.message, pgv_log_tail(p, 2000));
	return fd;
}

/* The backend the (only) server of the pool runs as, asked through fd. */
static int backend_pid(struct pgv *p, int fd)
{
	char value[32];
	struct raw_error err;
	ck_assert_msg(raw_send_query(fd, "SELECT pg_backend_pid()"), "send failed");
	int rc = raw_read_result(fd, value, sizeof(value), &err, ANSWER_MS);
	ck_assert_msg(rc == 0, "no answer within %d ms (%d: %s)\n%s", ANSWER_MS, rc, err.message,
		      pgv_log_tail(p, 3000));
	return atoi(value);
}

/* Sends what m holds and checks the answers up to the `syncs`-th ReadyForQuery. */
static void expect(struct pgv *p, int fd, struct raw_msgs *m, int syncs, const char *types, const char *sqlstate)
{
	struct raw_answers a;
	if (m->len)
		raw_send_msgs(fd, m);
	bool ok = raw_read_answers(fd, syncs, ANSWER_MS, &a);
	ck_assert_msg(ok, "answers stopped after \"%s\", expected \"%s\"\n%s", a.types, types, pgv_log_tail(p, 3000));
	ck_assert_msg(strcmp(a.types, types) == 0, "answers \"%s\", expected \"%s\" (%s)", a.types, types,
		      a.error.message);
	ck_assert_msg(strcmp(a.error.sqlstate, sqlstate ? sqlstate : "") == 0, "error \"%s\" %s, expected \"%s\"",
		      a.error.sqlstate, a.error.message, sqlstate ? sqlstate : "");
	ck_assert_int_eq(a.status, 'I');
}

/* The same up to the count-th message of a type in stops (answers to a Flush). */
static void expect_until(struct pgv *p, int fd, struct raw_msgs *m, const char *stops, int count, const char *types)
{
	struct raw_answers a;
	if (m->len)
		raw_send_msgs(fd, m);
	bool ok = raw_read_until(fd, stops, count, ANSWER_MS, &a);
	ck_assert_msg(ok, "answers stopped after \"%s\", expected \"%s\"\n%s", a.types, types, pgv_log_tail(p, 3000));
	ck_assert_msg(strcmp(a.types, types) == 0, "answers \"%s\", expected \"%s\" (%s)", a.types, types,
		      a.error.message);
}

/* ---------------------------------------------------------------- flows */

static void flow_simple(struct pgv *p, int fd)
{
	struct raw_msgs m = { .len = 0 };
	raw_put_query(&m, "SELECT 1");
	expect(p, fd, &m, 1, "TDCZ", NULL);
	raw_put_query(&m, "SELECT 1; SELECT aaaa; SELECT 3");
	expect(p, fd, &m, 1, "TDCEZ", "42703");
	raw_put_query(&m, "");
	expect(p, fd, &m, 1, "IZ", NULL);
}

static void flow_extended(struct pgv *p, int fd)
{
	struct raw_msgs m = { .len = 0 };
	raw_put_select(&m, "SELECT 1");
	raw_put_sync(&m);
	expect(p, fd, &m, 1, "12TDCZ", NULL);
}

/* psycopg 3's pipeline(): the batch, a Flush, its results; then Sync and another Flush. */
static void flow_flush_after_sync(struct pgv *p, int fd)
{
	struct raw_msgs m = { .len = 0 };
	raw_put_select(&m, "SELECT 1");
	raw_put_flush(&m);
	expect_until(p, fd, &m, "C", 1, "12TDC");
	raw_put_sync(&m);
	raw_put_flush(&m);
	expect(p, fd, &m, 1, "Z", NULL);
}

/* Several batches and Syncs in one write, a Flush after them; then a Flush with nothing to flush. */
static void flow_several_syncs(struct pgv *p, int fd)
{
	struct raw_msgs m = { .len = 0 };
	for (int i = 0; i < 3; i++) {
		raw_put_select(&m, "SELECT 1");
		raw_put_sync(&m);
	}
	raw_put_flush(&m);
	expect(p, fd, &m, 3, "12TDCZ12TDCZ12TDCZ", NULL);
	raw_put_flush(&m);
	raw_send_msgs(fd, &m);
}

/* An error in the middle of a pipeline: the batch after it runs, after the Sync. */
static void flow_error_in_pipeline(struct pgv *p, int fd)
{
	struct raw_msgs m = { .len = 0 };
	raw_put_select(&m, "SELECT 1");
	raw_put_sync(&m);
	raw_put_select(&m, "SELEC 2");
	raw_put_select(&m, "SELECT 3");
	raw_put_sync(&m);
	raw_put_select(&m, "SELECT 4");
	raw_put_sync(&m);
	expect(p, fd, &m, 3, "12TDCZEZ12TDCZ", "42601");
}

/*
 * The Sync comes late, after the error came back (issue 29 point 2):
 * PostgreSQL discards what was sent meanwhile, a Query included, without
 * answering it; then a named statement must work.
 */
static void flow_error_then_late_sync(struct pgv *p, int fd)
{
	struct raw_msgs m = { .len = 0 };
	raw_put_select(&m, "SELECT aaaa");
	raw_put_flush(&m);
	expect_until(p, fd, &m, "E", 1, "E");
	raw_put_select(&m, "SELECT 123");
	raw_put_parse(&m, "late", "SELECT 'late'");
	raw_put_named(&m, 'C', 'S', "never_made");
	raw_put_flush(&m);
	raw_put_query(&m, "SELECT 5");
	raw_send_msgs(fd, &m);
	sleep_ms(100);	/* the Sync late, in its own packet (if a loaded machine reads both at once, a weaker check) */
	raw_put_sync(&m);
	expect(p, fd, &m, 1, "Z", NULL);
	/* "late" was discarded with the rest: as in PostgreSQL it does not exist. */
	raw_put_bind(&m, "", "late", NULL);
	raw_put_sync(&m);
	expect(p, fd, &m, 1, "EZ", "26000");
	raw_put_parse(&m, "late", "SELECT 'late'");
	raw_put_bind(&m, "", "late", NULL);
	raw_put_named(&m, 'D', 'P', "");
	raw_put_execute(&m, "", 0);
	raw_put_sync(&m);
	expect(p, fd, &m, 1, "12TDCZ", NULL);
	raw_put_named(&m, 'C', 'S', "late");
	raw_put_sync(&m);
	expect(p, fd, &m, 1, "3Z", NULL);
}

static void put_copy_data(struct raw_msgs *m, const char *row)
{
	raw_put(m, 'd', row, strlen(row));
}

static void flow_copy(struct pgv *p, int fd)
{
	struct raw_msgs m = { .len = 0 };
	raw_put_query(&m, "COPY (SELECT 1) TO STDOUT");
	expect(p, fd, &m, 1, "HdcCZ", NULL);
	raw_put_query(&m, "COPY pipeline_copy FROM STDIN");
	expect_until(p, fd, &m, "G", 1, "G");
	put_copy_data(&m, "1\n");
	put_copy_data(&m, "2\n");
	raw_put(&m, 'c', NULL, 0);
	expect(p, fd, &m, 1, "CZ", NULL);
	/* Extended: CopyData between the Execute and the Sync. */
	raw_put_parse(&m, "", "COPY pipeline_copy FROM STDIN");
	raw_put_bind(&m, "", "", NULL);
	raw_put_execute(&m, "", 0);
	raw_put_flush(&m);
	expect_until(p, fd, &m, "G", 1, "12G");
	put_copy_data(&m, "3\n");
	raw_put(&m, 'c', NULL, 0);
	raw_put_sync(&m);
	expect(p, fd, &m, 1, "CZ", NULL);
	/* CopyFail. */
	raw_put_query(&m, "COPY pipeline_copy FROM STDIN");
	expect_until(p, fd, &m, "G", 1, "G");
	raw_put(&m, 'f', "changed my mind", 16);
	expect(p, fd, &m, 1, "EZ", "57014");
}

/* A COPY the server fails: its ReadyForQuery ends it, CopyData sent after it is dropped. */
static void flow_copy_failed(struct pgv *p, int fd)
{
	struct raw_msgs m = { .len = 0 };
	raw_put_query(&m, "COPY pipeline_copy FROM STDIN");
	expect_until(p, fd, &m, "G", 1, "G");
	put_copy_data(&m, "not a number\n");
	expect(p, fd, &m, 1, "EZ", "22P02");
	put_copy_data(&m, "4\n");
	raw_put(&m, 'c', NULL, 0);
	raw_send_msgs(fd, &m);
}

/* A portal run two rows at a time, closed before it ends. */
static void flow_portal_suspended(struct pgv *p, int fd)
{
	struct raw_msgs m = { .len = 0 };
	raw_put_parse(&m, "", "SELECT g FROM generate_series(1, 5) g");
	raw_put_bind(&m, "", "", NULL);
	raw_put_execute(&m, "", 2);
	raw_put_flush(&m);
	expect_until(p, fd, &m, "s", 1, "12DDs");
	raw_put_execute(&m, "", 2);
	raw_put_named(&m, 'C', 'P', "");
	raw_put_sync(&m);
	expect(p, fd, &m, 1, "DDs3Z", NULL);
}

/* A transaction over several extended batches: the server is given back after its COMMIT only. */
static void flow_transaction(struct pgv *p, int fd)
{
	struct raw_msgs m = { .len = 0 };
	raw_put_select(&m, "BEGIN");
	raw_put_sync(&m);
	raw_send_msgs(fd, &m);
	struct raw_answers a;
	ck_assert(raw_read_answers(fd, 1, ANSWER_MS, &a));
	ck_assert_int_eq(a.status, 'T');
	raw_put_select(&m, "SELECT 1");
	raw_put_sync(&m);
	raw_put_select(&m, "COMMIT");
	raw_put_sync(&m);
	expect(p, fd, &m, 2, "12TDCZ12nCZ", NULL);
}

static const struct flow {
	const char *name;
	void (*run)(struct pgv *p, int fd);
	bool no_statement_mode;		/* transaction blocks */
} flows[] = {
	{ "simple", flow_simple, false },
	{ "extended", flow_extended, false },
	{ "flush_after_sync", flow_flush_after_sync, false },
	{ "several_syncs", flow_several_syncs, false },
	{ "error_in_pipeline", flow_error_in_pipeline, false },
	{ "error_then_late_sync", flow_error_then_late_sync, false },
	{ "copy", flow_copy, false },
	{ "copy_failed", flow_copy_failed, false },
	{ "portal_suspended", flow_portal_suspended, false },
	{ "transaction", flow_transaction, true },
};

/* ---------------------------------------------------------------- the checks around a flow */

static void make_copy_table(void)
{
	PGconn *d = pg_direct();
	PGresult *r = PQexec(d, "SET client_min_messages = warning; CREATE TABLE IF NOT EXISTS pipeline_copy (x int); "
			     "GRANT ALL ON pipeline_copy TO scram_user");
	ck_assert_msg(PQresultStatus(r) == PGRES_COMMAND_OK, "%s", PQerrorMessage(d));
	PQclear(r);
	PQfinish(d);
}

/*
 * Runs the flow on a client of its own; the pool's one server must then
 * serve another client (pooled modes), and after the client left, serve
 * it again as the same backend.
 */
static void run_flow(struct pgv *p, const struct config *c, const struct flow *f)
{
	bool pooled = strcmp(c->mode, "session") != 0;
	int fd = client(p);
	int pid = backend_pid(p, fd);
	f->run(p, fd);
	if (pooled) {
		int other = client(p);
		ck_assert_msg(backend_pid(p, other) == pid, "flow %s: another backend served", f->name);
		close(other);
	}
	raw_send(fd, "X\0\0\0\4", 5);
	close(fd);
	int next = client(p);
	ck_assert_msg(backend_pid(p, next) == pid, "flow %s (%s): the server was not reused\n%s", f->name, c->mode,
		      pgv_log_tail(p, 2000));
	close(next);
	ck_assert_msg(!pgv_log_contains(p, "not idle"), "flow %s: %s", f->name, pgv_log_tail(p, 2000));
}

#define N_FLOWS (int)(sizeof(flows) / sizeof(flows[0]))
#define N_CONFIGS (int)(sizeof(configs) / sizeof(configs[0]))

/* Test i: flow i % N_FLOWS in config i / N_FLOWS. */
START_TEST(flow_gives_the_server_back)
{
	const struct config *c = &configs[_i / N_FLOWS];
	const struct flow *f = &flows[_i % N_FLOWS];
	if (f->no_statement_mode && strcmp(c->mode, "statement") == 0)
		return;
	struct pgv p;
	make_copy_table();
	start(&p, c);
	run_flow(&p, c, f);
	pgv_stop(&p);
}
END_TEST

/* Terminate with answers still owed: the next client is served at once, by the same server. */
START_TEST(terminate_mid_pipeline)
{
	const struct config *c = &configs[_i];
	struct pgv p;
	start(&p, c);
	int fd = client(&p);
	int pid = backend_pid(&p, fd);
	struct raw_msgs m = { .len = 0 };
	raw_put_select(&m, "SELECT pg_sleep(0.2)");
	raw_put_sync(&m);
	raw_put_select(&m, "SELECT 2");
	raw_put(&m, 'X', NULL, 0);
	raw_send_msgs(fd, &m);
	close(fd);
	int next = client(&p);
	double t0 = now_s();
	ck_assert_int_eq(backend_pid(&p, next), pid);
	ck_assert_msg(now_s() - t0 < pgv_time_bound(2, 8), "served after %.1f s", now_s() - t0);
	close(next);
	pgv_stop(&p);
}
END_TEST

/*
 * Leave while a long query runs: the server finishing it for no one is
 * closed after FINISH_OWED_MAX_USEC (5 s) rather than when the query ends,
 * and the next client, on a pool of one, is served by a new server.
 */
START_TEST(abandoned_long_query)
{
	struct pgv p;
	start(&p, &configs[0]);
	int fd = client(&p);
	int pid = backend_pid(&p, fd);
	ck_assert_msg(raw_send_query(fd, "SELECT pg_sleep(60)"), "send failed");
	/* a close before the query runs would leave an idle server, which the next client would get */
	pg_wait_running("SELECT pg_sleep(60)", 1);
	close(fd);
	int next = client(&p);
	double t0 = now_s();
	char value[32];
	struct raw_error err;
	ck_assert_msg(raw_send_query(next, "SELECT pg_backend_pid()"), "send failed");
	int rc = raw_read_result(next, value, sizeof(value), &err, 15000);
	double took = now_s() - t0;
	ck_assert_msg(rc == 0, "no answer within 15 s (%d: %s)\n%s", rc, err.message, pgv_log_tail(&p, 3000));
	int pid2 = atoi(value);
	ck_assert_msg(pid2 != pid, "served by the server still running the abandoned query");
	ck_assert_msg(took >= 4 && took < 15, "served after %.1f s, expected the 5 s bound\n%s", took,
		      pgv_log_tail(&p, 2000));
	ck_assert_int_ge(pgv_log_count(&p, "closing because: client disconnect while server was not ready"), 1);
	close(next);
	pgv_stop(&p);
}
END_TEST

static Suite *pipeline_suite(void)
{
	Suite *s = suite_create("pipeline");
	TCase *tc = pgv_tcase_create("flows", 60);
	tcase_add_loop_test(tc, flow_gives_the_server_back, 0, N_CONFIGS * N_FLOWS);
	tcase_add_loop_test(tc, terminate_mid_pipeline, 0, N_CONFIGS);
	tcase_add_test(tc, abandoned_long_query);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return pgv_run_suite(pipeline_suite());
}
