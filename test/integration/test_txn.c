/*
 * test_txn.c - end-to-end tests of transaction and statement pooling
 * (issue 3) against a real PostgreSQL 15: pgbench in both protocols,
 * libpq pipeline mode, COPY both ways, session state kept per client,
 * cancel, statement mode's refusal of transaction blocks, and clients
 * that vanish mid-transaction.
 */
#include "harness.h"

#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define DB "pgvtest"
#define TXN "auth_type = md5\npool_mode = transaction\n"

static PGconn *connect_ok(struct pgv *p, const char *user, const char *password)
{
	PGconn *c = pgv_connect(p, DB, user, password);
	ck_assert_msg(PQstatus(c) == CONNECTION_OK, "connect %s: %s\n%s", user, PQerrorMessage(c),
		      pgv_log_tail(p, 1500));
	return c;
}

static void exec_ok(PGconn *c, const char *sql)
{
	PGresult *r = PQexec(c, sql);
	ExecStatusType st = PQresultStatus(r);
	ck_assert_msg(st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK, "%s: %s", sql, PQerrorMessage(c));
	PQclear(r);
}

/* ---------------------------------------------------------------- pgbench */

/*
 * Runs pgbench through pgvalve while sampling pg_stat_activity; returns the
 * largest number of server connections seen for pgbench_user.
 */
static int pgbench_under_watch(struct pgv *p, const char *protocol, const char *clients, const char *out)
{
	char port[16];
	snprintf(port, sizeof(port), "%d", p->port);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		char *env[] = { "PGPASSWORD=bench_pass", "PGSSLMODE=disable", NULL };
		char *argv[] = { "pgbench", "-n", "-M", (char *)protocol, "-c", (char *)clients, "-j", "2",
				 "-T", "5", "-h", "127.0.0.1", "-p", port, "-U", "pgbench_user", DB, NULL };
		_exit(run_program(argv, env, out, 90) == 0 ? 0 : 1);
	}
	int most = 0, status = 0;
	for (;;) {
		pid_t done = waitpid(pid, &status, WNOHANG);
		if (done == pid)
			break;
		int n = pg_count_backends("pgbench_user");
		if (n > most)
			most = n;
		usleep(100 * 1000);	/* sampling pace over pgbench's 5 s; a missed sample can only lower most */
	}
	const char *text = read_file_tail(out, 8000);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "pgbench failed:\n%s\n%s", text,
		      pgv_log_tail(p, 2000));
	const char *s = strstr(text, "number of failed transactions: ");
	ck_assert_msg(s && strtol(s + strlen("number of failed transactions: "), NULL, 10) == 0,
		      "failed transactions:\n%s", text);
	s = strstr(text, "number of transactions actually processed: ");
	ck_assert_msg(s && strtol(s + strlen("number of transactions actually processed: "), NULL, 10) > 0,
		      "no transactions:\n%s", text);
	return most;
}

START_TEST(pgbench_transaction_mode)
{
	static const char *const protocols[] = { "simple", "extended" };
	struct pgv p;
	char out[700];
	pgv_start(&p, TXN "default_pool_size = 5\nmax_client_conn = 200\n", std_databases(), std_userlist());
	snprintf(out, sizeof(out), "%s/pgbench-%s.out", p.dir, protocols[_i]);
	int most = pgbench_under_watch(&p, protocols[_i], "100", out);
	ck_assert_msg(most >= 1 && most <= 5, "pg_stat_activity showed %d server connections (pool of 5)", most);
	pgv_stop(&p);
}
END_TEST

/* ---------------------------------------------------------------- pipeline */

START_TEST(pipeline_in_order)
{
	struct pgv p;
	pgv_start(&p, TXN "default_pool_size = 2\n", std_databases(), std_userlist());
	PGconn *c = connect_ok(&p, "scram_user", "scram_pass");

	ck_assert_int_eq(PQenterPipelineMode(c), 1);
	char sql[64];
	for (int i = 0; i < 100; i++) {
		snprintf(sql, sizeof(sql), "SELECT %d", i);
		ck_assert_int_eq(PQsendQueryParams(c, sql, 0, NULL, NULL, NULL, NULL, 0), 1);
	}
	ck_assert_int_eq(PQpipelineSync(c), 1);
	for (int i = 0; i < 100; i++) {
		PGresult *r = PQgetResult(c);
		ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "query %d: %s", i, PQerrorMessage(c));
		ck_assert_int_eq(atoi(PQgetvalue(r, 0, 0)), i);
		PQclear(r);
		ck_assert_ptr_null(PQgetResult(c));	/* end of this query's results */
	}
	PGresult *r = PQgetResult(c);
	ck_assert_int_eq(PQresultStatus(r), PGRES_PIPELINE_SYNC);
	PQclear(r);

	/* An error in the middle: what follows up to the Sync is skipped, as PostgreSQL does. */
	ck_assert_int_eq(PQsendQueryParams(c, "SELECT 1", 0, NULL, NULL, NULL, NULL, 0), 1);
	ck_assert_int_eq(PQsendQueryParams(c, "SELECT 1/0", 0, NULL, NULL, NULL, NULL, 0), 1);
	ck_assert_int_eq(PQsendQueryParams(c, "SELECT 3", 0, NULL, NULL, NULL, NULL, 0), 1);
	ck_assert_int_eq(PQpipelineSync(c), 1);
	ck_assert_int_eq(PQsendQueryParams(c, "SELECT 4", 0, NULL, NULL, NULL, NULL, 0), 1);
	ck_assert_int_eq(PQpipelineSync(c), 1);

	ExecStatusType expect[] = { PGRES_TUPLES_OK, PGRES_FATAL_ERROR, PGRES_PIPELINE_ABORTED };
	for (size_t i = 0; i < 3; i++) {
		r = PQgetResult(c);
		ck_assert_msg(PQresultStatus(r) == expect[i], "result %zu: %s", i, PQresStatus(PQresultStatus(r)));
		if (i == 1)
			ck_assert_str_eq(PQresultErrorField(r, PG_DIAG_SQLSTATE), "22012");
		PQclear(r);
		ck_assert_ptr_null(PQgetResult(c));
	}
	r = PQgetResult(c);
	ck_assert_int_eq(PQresultStatus(r), PGRES_PIPELINE_SYNC);
	PQclear(r);
	r = PQgetResult(c);
	ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
	ck_assert_str_eq(PQgetvalue(r, 0, 0), "4");
	PQclear(r);
	ck_assert_ptr_null(PQgetResult(c));
	r = PQgetResult(c);
	ck_assert_int_eq(PQresultStatus(r), PGRES_PIPELINE_SYNC);
	PQclear(r);
	ck_assert_int_eq(PQexitPipelineMode(c), 1);
	ck_assert_str_eq(query_value(c, "SELECT 'still fine'"), "still fine");
	PQfinish(c);
	pgv_stop(&p);
}
END_TEST

/* ---------------------------------------------------------------- copy */

/* Runs a COPY ... TO STDOUT to its end; returns the bytes received, rows in *rows. */
static long copy_out(PGconn *c, const char *sql, long *rows)
{
	PGresult *r = PQexec(c, sql);
	ck_assert_msg(PQresultStatus(r) == PGRES_COPY_OUT, "%s: %s", sql, PQerrorMessage(c));
	PQclear(r);
	long bytes = 0;
	char *buf;
	int n;
	*rows = 0;
	while ((n = PQgetCopyData(c, &buf, 0)) > 0) {
		(*rows)++;
		bytes += n;
		PQfreemem(buf);
	}
	ck_assert_int_eq(n, -1);
	r = PQgetResult(c);
	ck_assert_int_eq(PQresultStatus(r), PGRES_COMMAND_OK);
	PQclear(r);
	return bytes;
}

START_TEST(copy_in_and_out)
{
	struct pgv p;
	pgv_start(&p, TXN "default_pool_size = 2\n", std_databases(), std_userlist());
	PGconn *c = connect_ok(&p, "scram_user", "scram_pass");
	exec_ok(c, "DROP TABLE IF EXISTS copy_t");
	exec_ok(c, "CREATE TABLE copy_t (id int, txt text)");

	PGresult *r = PQexec(c, "COPY copy_t FROM STDIN");
	ck_assert_int_eq(PQresultStatus(r), PGRES_COPY_IN);
	PQclear(r);
	char line[128];
	for (int i = 0; i < 100000; i++) {
		int n = snprintf(line, sizeof(line), "%d\trow number %d\n", i, i);
		ck_assert_int_eq(PQputCopyData(c, line, n), 1);
	}
	ck_assert_int_eq(PQputCopyEnd(c, NULL), 1);
	r = PQgetResult(c);
	ck_assert_msg(PQresultStatus(r) == PGRES_COMMAND_OK, "COPY IN: %s", PQerrorMessage(c));
	ck_assert_str_eq(PQcmdTuples(r), "100000");
	PQclear(r);
	ck_assert_ptr_null(PQgetResult(c));
	ck_assert_str_eq(query_value(c, "SELECT count(*) FROM copy_t"), "100000");

	long rows = 0, bytes = copy_out(c, "COPY copy_t TO STDOUT", &rows);
	ck_assert_int_eq(rows, 100000);
	ck_assert_int_gt(bytes, 1500000);

	/* CopyFail: the server aborts the COPY and the connection keeps working. */
	r = PQexec(c, "COPY copy_t FROM STDIN");
	ck_assert_int_eq(PQresultStatus(r), PGRES_COPY_IN);
	PQclear(r);
	ck_assert_int_eq(PQputCopyData(c, "1\tx\n", 4), 1);
	ck_assert_int_eq(PQputCopyEnd(c, "client gave up"), 1);
	r = PQgetResult(c);
	ck_assert_int_eq(PQresultStatus(r), PGRES_FATAL_ERROR);
	ck_assert_msg(strstr(PQresultErrorMessage(r), "client gave up") != NULL, "%s", PQresultErrorMessage(r));
	PQclear(r);
	ck_assert_ptr_null(PQgetResult(c));
	ck_assert_str_eq(query_value(c, "SELECT count(*) FROM copy_t"), "100000");
	exec_ok(c, "DROP TABLE copy_t");
	PQfinish(c);
	pgv_stop(&p);
}
END_TEST

/*
 * A 4 MB COPY TO STDOUT with tcp_socket_buffer = 4096, from a server over
 * TLS (loop 0) and plain TCP (loop 1): both sockets stay full the whole
 * time, and the relay must keep up (issue 29 point 4: the buffers were
 * set on server sockets after the TCP handshake, and every 8 KB waited
 * for a 200 ms window probe).
 */
START_TEST(copy_out_with_small_socket_buffers)
{
	struct pgv p;
	pgv_start(&p, _i ? TXN "tcp_socket_buffer = 4096\nserver_tls_sslmode = disable\n" :
		  TXN "tcp_socket_buffer = 4096\nserver_tls_sslmode = require\n", std_databases(), std_userlist());
	PGconn *c = connect_ok(&p, "scram_user", "scram_pass");
	for (int round = 0; round < 2; round++) {
		double t0 = now_s();
		long rows;
		long bytes = copy_out(c, "COPY (SELECT repeat('x', 1000) FROM generate_series(1, 4000)) TO STDOUT", &rows);
		ck_assert_int_eq(bytes, 4000L * 1001);
		ck_assert_msg(now_s() - t0 < 15, "4 MB took %.1f s", now_s() - t0);
	}
	PQfinish(c);
	pgv_stop(&p);
}
END_TEST

/* ---------------------------------------------------------------- other flows */

static int notices_seen;
static void count_notice(void *arg, const PGresult *res)
{
	(void)arg;
	if (strstr(PQresultErrorMessage(res), "hello from plpgsql"))
		notices_seen++;
}

START_TEST(notice_notify_empty_function_call)
{
	struct pgv p;
	/* two servers: LISTEN's notification listener takes one of the pool's (notify.h) */
	pgv_start(&p, TXN "default_pool_size = 2\n", std_databases(), std_userlist());
	PGconn *c = connect_ok(&p, "scram_user", "scram_pass");

	PQsetNoticeReceiver(c, count_notice, NULL);
	exec_ok(c, "DO $$ BEGIN RAISE NOTICE 'hello from plpgsql'; END $$");
	ck_assert_int_eq(notices_seen, 1);

	exec_ok(c, "BEGIN; LISTEN pgv_chan; NOTIFY pgv_chan, 'payload-1'; COMMIT;");
	PQconsumeInput(c);
	PGnotify *n = PQnotifies(c);
	ck_assert_ptr_nonnull(n);
	ck_assert_str_eq(n->relname, "pgv_chan");
	ck_assert_str_eq(n->extra, "payload-1");
	PQfreemem(n);
	exec_ok(c, "UNLISTEN *");

	PGresult *r = PQexec(c, "");
	ck_assert_int_eq(PQresultStatus(r), PGRES_EMPTY_QUERY);
	PQclear(r);

	/* FunctionCall of pg_backend_pid() by OID: the fast-path protocol. */
	const char *oid = query_value(c, "SELECT 'pg_backend_pid'::regproc::oid");
	int result = 0, len = 0;
	r = PQfn(c, atoi(oid), &result, &len, 1, NULL, 0);
	ck_assert_msg(PQresultStatus(r) == PGRES_COMMAND_OK, "PQfn: %s", PQerrorMessage(c));
	ck_assert_int_eq(len, 4);
	ck_assert_int_gt(result, 0);
	PQclear(r);

	/* An error inside a transaction, then ROLLBACK, then a normal query. */
	exec_ok(c, "BEGIN");
	r = PQexec(c, "SELECT 1/0");
	ck_assert_int_eq(PQresultStatus(r), PGRES_FATAL_ERROR);
	PQclear(r);
	ck_assert_int_eq(PQtransactionStatus(c), PQTRANS_INERROR);
	exec_ok(c, "ROLLBACK");
	ck_assert_str_eq(query_value(c, "SELECT 42"), "42");
	PQfinish(c);
	pgv_stop(&p);
}
END_TEST

/* ---------------------------------------------------------------- session state */

START_TEST(clients_keep_their_own_settings)
{
	struct pgv p;
	pgv_start(&p, TXN "default_pool_size = 1\n", std_databases(), std_userlist());
	PGconn *a = connect_ok(&p, "scram_user", "scram_pass");
	PGconn *b = connect_ok(&p, "scram_user", "scram_pass");

	exec_ok(a, "SET application_name = 'client_a'");
	exec_ok(a, "SET TimeZone = 'Asia/Tokyo'");
	char pid_a[32];
	snprintf(pid_a, sizeof(pid_a), "%s", query_value(a, "SELECT pg_backend_pid()"));
	exec_ok(b, "SET application_name = 'client_b'");
	exec_ok(b, "SET TimeZone = 'America/New_York'");
	/* pool of one: both ran on the same server connection */
	ck_assert_str_eq(query_value(b, "SELECT pg_backend_pid()"), pid_a);
	for (int round = 0; round < 3; round++) {
		ck_assert_str_eq(query_value(a, "SHOW application_name"), "client_a");
		ck_assert_str_eq(query_value(b, "SHOW application_name"), "client_b");
		ck_assert_str_eq(query_value(a, "SHOW TimeZone"), "Asia/Tokyo");
		ck_assert_str_eq(query_value(b, "SHOW TimeZone"), "America/New_York");
	}
	/* A client that never set anything gets the server defaults back. */
	PGconn *c = connect_ok(&p, "scram_user", "scram_pass");
	ck_assert_str_eq(query_value(c, "SHOW application_name"), "");
	ck_assert_str_ne(query_value(c, "SHOW TimeZone"), "America/New_York");
	PQfinish(a);
	PQfinish(b);
	PQfinish(c);
	pgv_stop(&p);
}
END_TEST

START_TEST(uncommitted_rows_stay_private)
{
	struct pgv p;
	pgv_start(&p, TXN "default_pool_size = 2\n", std_databases(), std_userlist());
	PGconn *a = connect_ok(&p, "scram_user", "scram_pass");
	PGconn *b = connect_ok(&p, "scram_user", "scram_pass");
	exec_ok(a, "DROP TABLE IF EXISTS priv_t");
	exec_ok(a, "CREATE TABLE priv_t (v int)");
	exec_ok(a, "BEGIN");
	exec_ok(a, "INSERT INTO priv_t VALUES (1)");
	exec_ok(a, "SET LOCAL application_name = 'inside_a'");
	/* a holds its server for the whole transaction; b runs on the other one */
	ck_assert_str_eq(query_value(b, "SELECT count(*) FROM priv_t"), "0");
	ck_assert_str_ne(query_value(b, "SHOW application_name"), "inside_a");
	char pid_a[32];
	snprintf(pid_a, sizeof(pid_a), "%s", query_value(a, "SELECT pg_backend_pid()"));
	ck_assert_str_ne(query_value(b, "SELECT pg_backend_pid()"), pid_a);
	exec_ok(a, "COMMIT");
	ck_assert_str_eq(query_value(b, "SELECT count(*) FROM priv_t"), "1");
	exec_ok(b, "DROP TABLE priv_t");
	PQfinish(a);
	PQfinish(b);
	pgv_stop(&p);
}
END_TEST

/* ---------------------------------------------------------------- cancel */

START_TEST(cancel_running_query)
{
	struct pgv p;
	pgv_start(&p, TXN "default_pool_size = 2\n", std_databases(), std_userlist());
	PGconn *c = connect_ok(&p, "scram_user", "scram_pass");
	ck_assert_int_eq(PQsendQuery(c, "SELECT pg_sleep(30)"), 1);
	/* a cancel sent before the query runs would be lost and the query would run its 30 s */
	pg_wait_running("SELECT pg_sleep(30)", 1);
	PGcancel *cancel = PQgetCancel(c);
	char errbuf[256];
	double t0 = now_s();
	ck_assert_int_eq(PQcancel(cancel, errbuf, sizeof(errbuf)), 1);
	PQfreeCancel(cancel);
	PGresult *r = PQgetResult(c);
	double took = now_s() - t0;
	ck_assert_int_eq(PQresultStatus(r), PGRES_FATAL_ERROR);
	ck_assert_str_eq(PQresultErrorField(r, PG_DIAG_SQLSTATE), "57014");
	PQclear(r);
	while ((r = PQgetResult(c)))
		PQclear(r);
	ck_assert_msg(took < 2.0, "cancel took %.2f s", took);
	ck_assert_str_eq(query_value(c, "SELECT 'alive'"), "alive");
	PQfinish(c);
	pgv_stop(&p);
}
END_TEST

START_TEST(late_cancel_hits_nobody_else)
{
	struct pgv p;
	pgv_start(&p, TXN "default_pool_size = 1\n", std_databases(), std_userlist());
	PGconn *a = connect_ok(&p, "scram_user", "scram_pass");
	PGconn *b = connect_ok(&p, "scram_user", "scram_pass");
	ck_assert_str_eq(query_value(a, "SELECT 1"), "1");	/* a's query is over, server released */
	PGcancel *cancel_a = PQgetCancel(a);

	ck_assert_int_eq(PQsendQuery(b, "SELECT pg_sleep(1.5), 'b done'"), 1);
	/*
	 * b now runs on the one server a used before. A fixed wait: polling for
	 * it could miss a 1.5 s query on a loaded machine, and a cancel that comes
	 * before b's query runs finds nothing to hit, so the test only gets weaker.
	 */
	usleep(300 * 1000);
	char errbuf[256];
	ck_assert_int_eq(PQcancel(cancel_a, errbuf, sizeof(errbuf)), 1);
	PQfreeCancel(cancel_a);
	PGresult *r = PQgetResult(b);
	ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "b's query was hit: %s", PQresultErrorMessage(r));
	ck_assert_str_eq(PQgetvalue(r, 0, 1), "b done");
	PQclear(r);
	while ((r = PQgetResult(b)))
		PQclear(r);
	PQfinish(a);
	PQfinish(b);
	pgv_stop(&p);
}
END_TEST

/* ---------------------------------------------------------------- statement mode */

START_TEST(statement_mode_rejects_transactions)
{
	struct pgv p;
	pgv_start(&p, "auth_type = md5\npool_mode = statement\ndefault_pool_size = 1\n", std_databases(),
		  std_userlist());
	PGconn *c = connect_ok(&p, "scram_user", "scram_pass");
	ck_assert_str_eq(query_value(c, "SELECT 1"), "1");
	/* Verbose errors carry the SQLSTATE in the text; libpq adds its own result for the close after the FATAL. */
	PQsetErrorVerbosity(c, PQERRORS_VERBOSE);
	PGresult *r = PQexec(c, "BEGIN");
	ck_assert_int_eq(PQresultStatus(r), PGRES_FATAL_ERROR);
	ck_assert_msg(strstr(PQerrorMessage(c), "FATAL:  08P01: transaction blocks not allowed in statement pooling mode"),
		      "%s", PQerrorMessage(c));
	PQclear(r);
	PQfinish(c);

	/* The pooler keeps serving, on a clean server. */
	PGconn *d = connect_ok(&p, "scram_user", "scram_pass");
	ck_assert_str_eq(query_value(d, "SELECT 2"), "2");
	ck_assert_str_eq(query_value(d, "SELECT now() = statement_timestamp()"), "t");	/* not inside a transaction */
	PQfinish(d);
	ck_assert(pgv_log_contains(&p, "transaction blocks not allowed in statement pooling mode"));
	pgv_stop(&p);
}
END_TEST

/* ---------------------------------------------------------------- vanished client */

START_TEST(client_killed_mid_transaction)
{
	struct pgv p;
	pgv_start(&p, TXN "default_pool_size = 2\n", std_databases(), std_userlist());
	PGconn *c = connect_ok(&p, "md5_user", "md5_pass");
	exec_ok(c, "BEGIN");
	exec_ok(c, "SELECT count(*) FROM pgbench_branches");
	/* Close the socket under libpq: no Terminate, like a crashed client. */
	shutdown(PQsocket(c), SHUT_RDWR);
	PQfinish(c);

	PGconn *admin = pg_direct();
	const char *left = "1";
	/* until the server is closed (pgvalve sees the EOF at once): 50 x 100 ms, 5 s on a loaded machine */
	for (int i = 0; i < 50; i++) {
		left = query_value(admin, "SELECT count(*) FROM pg_stat_activity WHERE usename = 'md5_user' "
					  "AND state LIKE 'idle in transaction%'");
		if (strcmp(left, "0") == 0)
			break;
		usleep(100 * 1000);
	}
	ck_assert_msg(strcmp(left, "0") == 0, "a server was left idle in transaction\n%s", pgv_log_tail(&p, 1500));
	PQfinish(admin);

	/* The next client gets a working, clean connection. */
	PGconn *d = connect_ok(&p, "md5_user", "md5_pass");
	ck_assert_int_eq(PQtransactionStatus(d), PQTRANS_IDLE);
	ck_assert_str_eq(query_value(d, "SELECT now() = statement_timestamp()"), "t");
	PQfinish(d);
	pgv_stop(&p);
}
END_TEST

/* ---------------------------------------------------------------- queueing */

START_TEST(waiting_clients_are_served_in_order)
{
	struct pgv p;
	pgv_start(&p, TXN "default_pool_size = 1\n", std_databases(), std_userlist());
	enum { N = 20 };
	PGconn *c[N];
	for (int i = 0; i < N; i++)
		c[i] = connect_ok(&p, "scram_user", "scram_pass");
	/* Each holds the one server for 50 ms; all must finish, none starves. */
	for (int i = 0; i < N; i++) {
		char sql[96];
		snprintf(sql, sizeof(sql), "SELECT %d, clock_timestamp() FROM pg_sleep(0.05)", i);
		ck_assert_int_eq(PQsendQuery(c[i], sql), 1);
		/*
		 * a defined arrival order. Pacing: if pgvalve is descheduled longer,
		 * several sockets turn readable at once and epoll reports them in the
		 * order they did, so the order holds on a loaded machine too.
		 */
		usleep(2000);
	}
	char prev[64] = "";
	for (int i = 0; i < N; i++) {
		PGresult *r = PQgetResult(c[i]);
		ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "client %d: %s", i, PQerrorMessage(c[i]));
		ck_assert_int_eq(atoi(PQgetvalue(r, 0, 0)), i);
		/* FIFO: each ran after the one that arrived before it */
		ck_assert_msg(strcmp(prev, PQgetvalue(r, 0, 1)) < 0, "client %d ran before client %d", i, i - 1);
		snprintf(prev, sizeof(prev), "%s", PQgetvalue(r, 0, 1));
		PQclear(r);
		while ((r = PQgetResult(c[i])))
			PQclear(r);
		PQfinish(c[i]);
	}
	pgv_stop(&p);
}
END_TEST

/* ---------------------------------------------------------------- review regressions */

/* A startup-packet search_path (PostgreSQL 15 does not report it) must not follow the server. */
START_TEST(startup_search_path_stays_with_its_client)
{
	struct pgv p;
	struct raw_error err;
	char value[256];
	int fd = -1;
	pgv_start(&p, TXN "default_pool_size = 1\n", std_databases(), std_userlist());
	PGconn *setup = connect_ok(&p, "scram_user", "scram_pass");
	PQclear(PQexec(setup, "DROP SCHEMA IF EXISTS tenant_a CASCADE"));
	exec_ok(setup, "CREATE SCHEMA tenant_a");
	exec_ok(setup, "CREATE TABLE tenant_a.secret_t (x text)");
	exec_ok(setup, "INSERT INTO tenant_a.secret_t VALUES ('tenant A secret')");
	PQfinish(setup);

	const char *extra[] = { "search_path", "tenant_a", NULL };
	ck_assert_int_eq(raw_login_ex(p.port, DB, "scram_user", "scram_pass", extra, &err, &fd), 0);
	ck_assert_int_eq(raw_query(fd, "SELECT x FROM secret_t", value, sizeof(value), &err), 0);
	ck_assert_str_eq(value, "tenant A secret");

	/* Another client, no search_path: same server, but the default search_path. */
	PGconn *b = connect_ok(&p, "scram_user", "scram_pass");
	ck_assert_str_ne(query_value(b, "SHOW search_path"), "tenant_a");
	PGresult *r = PQexec(b, "SELECT x FROM secret_t");
	ck_assert_int_eq(PQresultStatus(r), PGRES_FATAL_ERROR);
	PQclear(r);
	/* and the first client still has its own */
	ck_assert_int_eq(raw_query(fd, "SHOW search_path", value, sizeof(value), &err), 0);
	ck_assert_str_eq(value, "tenant_a");
	raw_send(fd, "X\0\0\0\4", 5);
	close(fd);
	exec_ok(b, "DROP SCHEMA tenant_a CASCADE");
	PQfinish(b);
	pgv_stop(&p);
}
END_TEST

/* A client that stops in the middle of a message never gets its server handed to someone else. */
START_TEST(half_sent_message_keeps_server)
{
	struct pgv p;
	struct raw_error err;
	char value[64];
	int fd = -1;
	pgv_start(&p, TXN "default_pool_size = 1\n", std_databases(), std_userlist());
	ck_assert_int_eq(raw_login_ex(p.port, DB, "md5_user", "md5_pass", NULL, &err, &fd), 0);
	ck_assert_int_eq(raw_query(fd, "SELECT 1", value, sizeof(value), &err), 0);
	/* Query + the header of a 64-byte CopyData with only 20 bytes of it */
	unsigned char junk[5 + 20] = { 'd', 0, 0, 0, 68 };
	memset(junk + 5, 'x', 20);
	ck_assert(raw_send(fd, junk, sizeof(junk)));
	/* so pgvalve has the half message first; if a loaded machine delays it, b's check below is weaker, not wrong */
	usleep(200 * 1000);

	/* Another client must either wait or get a fresh server, never the half-fed one. */
	PGconn *b = pgv_connect(&p, DB, "md5_user", "md5_pass");
	ck_assert_int_eq(PQstatus(b), CONNECTION_OK);
	ck_assert_int_eq(PQsendQuery(b, "SELECT 'b ok'"), 1);
	usleep(300 * 1000);	/* b queued before the close (same: a late b is a weaker check, not a failure) */
	close(fd);	/* the half-fed server is closed, not reused */
	PGresult *r = PQgetResult(b);
	ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "b: %s\n%s", PQerrorMessage(b), pgv_log_tail(&p, 1500));
	ck_assert_str_eq(PQgetvalue(r, 0, 0), "b ok");
	PQclear(r);
	while ((r = PQgetResult(b)))
		PQclear(r);
	PQfinish(b);
	pgv_stop(&p);
}
END_TEST

/* A client that gives up while queued leaves the queue; its query never runs. */
START_TEST(vanished_waiter_query_not_run)
{
	struct pgv p;
	pgv_start(&p, TXN "default_pool_size = 1\n", std_databases(), std_userlist());
	PGconn *holder = connect_ok(&p, "scram_user", "scram_pass");
	PQclear(PQexec(holder, "DROP TABLE IF EXISTS ghost_t"));
	exec_ok(holder, "CREATE TABLE ghost_t (v int)");
	exec_ok(holder, "BEGIN");	/* holds the only server */

	PGconn *ghost = connect_ok(&p, "scram_user", "scram_pass");
	ck_assert_int_eq(PQsendQuery(ghost, "INSERT INTO ghost_t VALUES (1)"), 1);
	/* queued at pgvalve first; if a loaded machine delays it, the check below is weaker, not wrong */
	usleep(200 * 1000);
	/* Gone while waiting, like a crashed client: no Terminate. (After a Terminate the
	 * query would run, as PostgreSQL itself runs a complete query that precedes one.) */
	int eofs = pgv_log_count(&p, "client unexpected eof");
	shutdown(PQsocket(ghost), SHUT_RDWR);
	PQfinish(ghost);
	/* until pgvalve has seen the hang-up: milliseconds; 5 s leaves a loaded machine plenty */
	for (double until = now_s() + 5; pgv_log_count(&p, "client unexpected eof") == eofs; sleep_ms(20))
		ck_assert_msg(now_s() < until, "the waiting client's hang-up was not seen\n%s", pgv_log_tail(&p, 1500));
	exec_ok(holder, "COMMIT");
	/* a negative window: a wrongly kept waiter's INSERT would run within milliseconds of the COMMIT */
	usleep(300 * 1000);
	ck_assert_str_eq(query_value(holder, "SELECT count(*) FROM ghost_t"), "0");
	exec_ok(holder, "DROP TABLE ghost_t");
	PQfinish(holder);
	pgv_stop(&p);
}
END_TEST

/* max_packet_size = 0 (nonsense, but accepted) must not let a header hang the process. */
START_TEST(huge_length_with_tiny_max_packet)
{
	struct pgv p;
	struct raw_error err;
	int fd = -1;
	pgv_start(&p, TXN "max_packet_size = 0\n", std_databases(), std_userlist());
	ck_assert_int_eq(raw_login_ex(p.port, DB, "md5_user", "md5_pass", NULL, &err, &fd), 0);
	unsigned char bad[5] = { 'Q', 0xff, 0xff, 0xff, 0xff };
	raw_send(fd, bad, sizeof(bad));
	ck_assert(raw_wait_closed(fd, 3000));
	close(fd);
	/* still serving */
	PGconn *c = pgv_connect(&p, DB, "md5_user", "md5_pass");
	ck_assert_int_eq(PQstatus(c), CONNECTION_OK);
	PQfinish(c);
	pgv_stop(&p);
}
END_TEST

/* ---------------------------------------------------------------- server choice and reset */

/* Backend pids of n transactions in a row, each on whichever server the pool hands out. */
static void pids_in_a_row(PGconn *c, int n, char pids[][16])
{
	for (int i = 0; i < n; i++)
		snprintf(pids[i], 16, "%s", query_value(c, "SELECT pg_backend_pid()"));
}

START_TEST(lifo_and_round_robin)
{
	for (int rr = 0; rr <= 1; rr++) {
		struct pgv p;
		char extra[128], pids[6][16];
		snprintf(extra, sizeof(extra), TXN "default_pool_size = 2\nserver_round_robin = %d\n", rr);
		pgv_start(&p, extra, std_databases(), std_userlist());
		PGconn *a = connect_ok(&p, "scram_user", "scram_pass");
		PGconn *b = connect_ok(&p, "scram_user", "scram_pass");
		/* two servers: b holds one while a gets the other */
		exec_ok(b, "BEGIN");
		ck_assert_str_eq(query_value(a, "SELECT 1"), "1");
		exec_ok(b, "COMMIT");
		pids_in_a_row(a, 6, pids);
		int changes = 0;
		for (int i = 1; i < 6; i++)
			changes += strcmp(pids[i], pids[i - 1]) != 0;
		if (rr)
			ck_assert_msg(changes == 5, "server_round_robin = 1 reused a server %d times in a row", 5 - changes);
		else
			ck_assert_msg(changes == 0, "LIFO switched servers %d times", changes);
		PQfinish(a);
		PQfinish(b);
		pgv_stop(&p);
	}
}
END_TEST

/*
 * server_reset_query runs in transaction mode only with
 * server_reset_query_always. track_client_set = off, as PgBouncer: the
 * client's set_config() stays on the server, where the reset query is the
 * only thing that takes it away.
 */
START_TEST(reset_query_always)
{
	for (int always = 0; always <= 1; always++) {
		struct pgv p;
		char extra[200];
		snprintf(extra, sizeof(extra), TXN "default_pool_size = 1\nserver_reset_query = SELECT set_config('pgv.mark', '', false)\n"
			 "server_reset_query_always = %d\ntrack_client_set = off\n", always);
		pgv_start(&p, extra, std_databases(), std_userlist());
		PGconn *a = connect_ok(&p, "scram_user", "scram_pass");
		exec_ok(a, "SELECT set_config('pgv.mark', 'left over', false)");
		PQfinish(a);	/* the reset query (if any) runs when the client leaves */
		/* margin only: with one server, b's query waits for the reset anyway */
		usleep(300 * 1000);
		PGconn *b = connect_ok(&p, "scram_user", "scram_pass");
		const char *mark = query_value(b, "SELECT coalesce(current_setting('pgv.mark', true), '')");
		if (always)
			ck_assert_msg(strcmp(mark, "") == 0, "reset query did not run: '%s'", mark);
		else
			ck_assert_msg(strcmp(mark, "left over") == 0, "reset query ran in transaction mode: '%s'", mark);
		PQfinish(b);
		pgv_stop(&p);
	}
}
END_TEST

static Suite *txn_suite(void)
{
	Suite *s = suite_create("transaction");
	TCase *tc;

	tc = pgv_tcase_create("pgbench", 120);
	tcase_add_loop_test(tc, pgbench_transaction_mode, 0, 2);
	suite_add_tcase(s, tc);

	tc = pgv_tcase_create("protocol", 60);
	tcase_add_test(tc, pipeline_in_order);
	tcase_add_test(tc, copy_in_and_out);
	tcase_add_test(tc, notice_notify_empty_function_call);
	tcase_add_loop_test(tc, copy_out_with_small_socket_buffers, 1, 2);	/* plain TCP to the server */
	suite_add_tcase(s, tc);

	/* The same over TLS to the server: left out against a PostgreSQL built without OpenSSL (run.sh). */
	tc = pgv_tcase_create("server_tls", 60);
	tcase_set_tags(tc, "server_tls");
	tcase_add_loop_test(tc, copy_out_with_small_socket_buffers, 0, 1);
	suite_add_tcase(s, tc);

	tc = pgv_tcase_create("state", 30);
	tcase_add_test(tc, clients_keep_their_own_settings);
	tcase_add_test(tc, uncommitted_rows_stay_private);
	tcase_add_test(tc, client_killed_mid_transaction);
	tcase_add_test(tc, waiting_clients_are_served_in_order);
	tcase_add_test(tc, startup_search_path_stays_with_its_client);
	tcase_add_test(tc, half_sent_message_keeps_server);
	tcase_add_test(tc, vanished_waiter_query_not_run);
	tcase_add_test(tc, huge_length_with_tiny_max_packet);
	tcase_add_test(tc, lifo_and_round_robin);
	tcase_add_test(tc, reset_query_always);
	suite_add_tcase(s, tc);

	tc = pgv_tcase_create("cancel", 30);
	tcase_add_test(tc, cancel_running_query);
	tcase_add_test(tc, late_cancel_hits_nobody_else);
	tcase_add_test(tc, statement_mode_rejects_transactions);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return pgv_run_suite(txn_suite());
}
