/*
 * test_session.c - end-to-end tests of session pooling (issue 2) against a
 * real PostgreSQL 15: logins, pooling limits, session reset, errors sent to
 * clients, robustness against garbage and dead servers, pgbench.
 *
 * Every test starts its own pgvalve (harness.c) on the cluster run.sh set
 * up. The server side follows that cluster's pg_hba: SCRAM for scram_user
 * and pgbench_user, md5 for md5_user.
 */
#include "harness.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DB "pgvtest"

static void assert_connected(PGconn *c, struct pgv *p, const char *what)
{
	ck_assert_msg(PQstatus(c) == CONNECTION_OK, "%s: connection failed: %s\n%s",
		      what, PQerrorMessage(c), pgv_log_tail(p, 1500));
}

static void assert_rejected(PGconn *c, struct pgv *p, const char *what, const char *needle)
{
	ck_assert_msg(PQstatus(c) == CONNECTION_BAD, "%s: connection was accepted\n%s",
		      what, pgv_log_tail(p, 1500));
	ck_assert_msg(strstr(PQerrorMessage(c), needle) != NULL,
		      "%s: error \"%s\" does not contain \"%s\"\n%s",
		      what, PQerrorMessage(c), needle, pgv_log_tail(p, 1500));
}

/* ---------------------------------------------------------------- logins */

static const struct login_case {
	const char *auth_type;
	const char *user;
	const char *password;
} login_cases[] = {
	{ "md5", "scram_user", "scram_pass" },		/* plain secret; server wants SCRAM */
	{ "md5", "md5_user", "md5_pass" },		/* md5 secret; server wants md5 */
	{ "plain", "scram_user", "scram_pass" },
	{ "plain", "md5_user", "md5_pass" },
};

START_TEST(login_ok)
{
	const struct login_case *lc = &login_cases[_i];
	struct pgv p;
	char extra[64], what[128];
	PGconn *c;

	snprintf(extra, sizeof(extra), "auth_type = %s\n", lc->auth_type);
	snprintf(what, sizeof(what), "auth_type=%s user=%s", lc->auth_type, lc->user);
	pgv_start(&p, extra, std_databases(), std_userlist());
	c = pgv_connect(&p, DB, lc->user, lc->password);
	assert_connected(c, &p, what);
	ck_assert_str_eq(query_value(c, "SELECT current_user"), lc->user);
	ck_assert_str_eq(query_value(c, "SELECT current_database()"), DB);
	ck_assert_str_eq(query_value(c, "SELECT count(*) FROM pgbench_branches"), "1");
	PQfinish(c);
	pgv_stop(&p);
}
END_TEST

START_TEST(wrong_password)
{
	struct pgv p;
	struct raw_error err;
	PGconn *c;
	int rc;

	pgv_start(&p, "auth_type = md5\n", std_databases(), std_userlist());

	c = pgv_connect(&p, DB, "scram_user", "not_the_password");
	assert_rejected(c, &p, "scram_user, wrong password", "password authentication failed");
	PQfinish(c);
	c = pgv_connect(&p, DB, "md5_user", "not_the_password");
	assert_rejected(c, &p, "md5_user, wrong password", "password authentication failed");
	PQfinish(c);
	c = pgv_connect(&p, DB, "nobody_at_all", "whatever");
	ck_assert_msg(PQstatus(c) == CONNECTION_BAD, "a user missing from auth_file got in");
	PQfinish(c);

	/* The same by hand, to see the SQLSTATE libpq does not show. */
	rc = raw_login(p.port, DB, "md5_user", "not_the_password", &err);
	ck_assert_msg(rc == -1, "raw md5 login with a wrong password: expected an ErrorResponse, got %d\n%s",
		      rc, pgv_log_tail(&p, 1500));
	ck_assert_str_eq(err.sqlstate, "08P01");	/* PgBouncer's */
	ck_assert_str_eq(err.severity, "FATAL");
	ck_assert_msg(strstr(err.message, "password authentication failed") != NULL,
		      "message \"%s\"", err.message);

	/* and the right password still works afterwards */
	rc = raw_login(p.port, DB, "md5_user", "md5_pass", &err);
	ck_assert_msg(rc == 0, "raw md5 login failed (%d): %s %s %s", rc, err.severity, err.sqlstate, err.message);
	pgv_stop(&p);
}
END_TEST

START_TEST(unknown_database)
{
	struct pgv p;
	PGconn *c;

	pgv_start(&p, "auth_type = md5\n", std_databases(), std_userlist());
	c = pgv_connect(&p, "nosuchdb", "scram_user", "scram_pass");
	assert_rejected(c, &p, "unknown database", "no such database: nosuchdb");
	PQfinish(c);
	/* pgvalve itself is fine */
	c = pgv_connect(&p, DB, "scram_user", "scram_pass");
	assert_connected(c, &p, "after the unknown database");
	PQfinish(c);
	pgv_stop(&p);
}
END_TEST

/* ---------------------------------------------------------------- pooling */

START_TEST(sequential_clients_reuse_pool)
{
	struct pgv p;
	char sql[64], want[16];
	int n;

	pgv_start(&p, "auth_type = md5\ndefault_pool_size = 3\n", std_databases(), std_userlist());
	for (int i = 0; i < 200; i++) {
		PGconn *c = pgv_connect(&p, DB, "scram_user", "scram_pass");
		char what[48];

		snprintf(what, sizeof(what), "client %d of 200", i + 1);
		assert_connected(c, &p, what);
		snprintf(sql, sizeof(sql), "SELECT %d + 1", i);
		snprintf(want, sizeof(want), "%d", i + 1);
		ck_assert_str_eq(query_value(c, sql), want);
		PQfinish(c);
	}
	n = pg_count_backends("scram_user");
	ck_assert_msg(n <= 3, "%d server connections for scram_user, default_pool_size = 3", n);
	ck_assert_msg(n >= 1, "no server connection kept in the pool after 200 clients");
	pgv_stop(&p);
}
END_TEST

#define CONCURRENT 100

START_TEST(concurrent_clients_share_pool)
{
	struct pgv p;
	PGconn *conns[CONCURRENT];
	enum { CONNECTING, QUERYING, DONE, FAILED } state[CONCURRENT];
	PostgresPollingStatusType want[CONCURRENT];
	int done = 0, failed = 0, max_backends = 0;
	char first_error[512] = "";
	double deadline, next_sample = 0;

	pgv_start(&p, "auth_type = md5\ndefault_pool_size = 5\nmax_client_conn = 200\n",
		  std_databases(), std_userlist());
	for (int i = 0; i < CONCURRENT; i++) {
		const char *kw[10], *val[10];
		char port[16];

		pgv_conn_params(&p, DB, "scram_user", "scram_pass", kw, val, port);
		conns[i] = PQconnectStartParams(kw, val, 0);
		ck_assert_ptr_nonnull(conns[i]);
		ck_assert_msg(PQstatus(conns[i]) != CONNECTION_BAD, "client %d: %s", i, PQerrorMessage(conns[i]));
		state[i] = CONNECTING;
		want[i] = PGRES_POLLING_WRITING;
	}

	deadline = now_s() + 30;
	while (done + failed < CONCURRENT && now_s() < deadline) {
		struct pollfd fds[CONCURRENT];
		int idx[CONCURRENT], n = 0;

		for (int i = 0; i < CONCURRENT; i++) {
			if (state[i] == DONE || state[i] == FAILED)
				continue;
			if (PQsocket(conns[i]) < 0) {
				state[i] = FAILED;
				failed++;
				if (first_error[0] == '\0')
					snprintf(first_error, sizeof(first_error), "client %d: no socket: %s", i,
						 PQerrorMessage(conns[i]));
				continue;
			}
			fds[n].fd = PQsocket(conns[i]);
			fds[n].events = (state[i] == CONNECTING && want[i] == PGRES_POLLING_WRITING) ? POLLOUT : POLLIN;
			fds[n].revents = 0;
			idx[n++] = i;
		}
		if (poll(fds, (nfds_t)n, 100) < 0)
			continue;
		for (int k = 0; k < n; k++) {
			int i = idx[k];

			if (fds[k].revents == 0)
				continue;
			if (state[i] == CONNECTING) {
				want[i] = PQconnectPoll(conns[i]);
				if (want[i] == PGRES_POLLING_OK) {
					if (!PQsendQuery(conns[i], "SELECT pg_sleep(0.05), 42")) {
						state[i] = FAILED;
					} else {
						state[i] = QUERYING;
					}
				} else if (want[i] == PGRES_POLLING_FAILED) {
					state[i] = FAILED;
				}
			} else if (state[i] == QUERYING) {
				if (!PQconsumeInput(conns[i])) {
					state[i] = FAILED;
				} else {
					while (state[i] == QUERYING && !PQisBusy(conns[i])) {
						PGresult *r = PQgetResult(conns[i]);

						if (r == NULL) {
							state[i] = DONE;
						} else {
							if (PQresultStatus(r) != PGRES_TUPLES_OK ||
							    strcmp(PQgetvalue(r, 0, 1), "42") != 0)
								state[i] = FAILED;
							PQclear(r);
						}
					}
				}
			}
			if (state[i] == FAILED) {
				failed++;
				if (first_error[0] == '\0')
					snprintf(first_error, sizeof(first_error), "client %d: %s", i,
						 PQerrorMessage(conns[i]));
			} else if (state[i] == DONE) {
				/* session pooling: the server is released when the client leaves */
				done++;
				PQfinish(conns[i]);
				conns[i] = NULL;
			}
		}
		if (now_s() >= next_sample) {
			int b = pg_count_backends("scram_user");

			if (b > max_backends)
				max_backends = b;
			next_sample = now_s() + 0.05;
		}
	}
	for (int i = 0; i < CONCURRENT; i++)
		PQfinish(conns[i]);
	ck_assert_msg(failed == 0, "%d of %d clients failed; first: %s\n%s", failed, CONCURRENT,
		      first_error, pgv_log_tail(&p, 1500));
	ck_assert_msg(done == CONCURRENT, "only %d of %d clients finished within 30 s\n%s", done,
		      CONCURRENT, pgv_log_tail(&p, 1500));
	ck_assert_msg(max_backends <= 5, "saw %d server connections, default_pool_size = 5", max_backends);
	ck_assert_msg(max_backends >= 1, "never saw a server connection while 100 clients ran");
	pgv_stop(&p);
}
END_TEST

START_TEST(session_state_does_not_leak)
{
	struct pgv p;
	PGconn *c1, *c2;
	char pid1[32];
	PGresult *r;

	pgv_start(&p, "auth_type = md5\ndefault_pool_size = 1\npool_mode = session\n",
		  std_databases(), std_userlist());
	c1 = pgv_connect(&p, DB, "scram_user", "scram_pass");
	assert_connected(c1, &p, "first client");
	r = PQexec(c1, "SET application_name = 'leaky_app'; SET search_path = leaky_schema; SET myapp.x = '1'");
	ck_assert_msg(PQresultStatus(r) == PGRES_COMMAND_OK, "SETs failed: %s", PQresultErrorMessage(r));
	PQclear(r);
	ck_assert_str_eq(query_value(c1, "SELECT current_setting('myapp.x')"), "1");
	ck_assert_str_eq(query_value(c1, "SHOW application_name"), "leaky_app");
	snprintf(pid1, sizeof(pid1), "%s", query_value(c1, "SELECT pg_backend_pid()"));
	PQfinish(c1);

	c2 = pgv_connect(&p, DB, "scram_user", "scram_pass");
	assert_connected(c2, &p, "second client");
	ck_assert_msg(strcmp(query_value(c2, "SELECT pg_backend_pid()"), pid1) == 0,
		      "second client got another server (pool_size 1): %s, first had %s",
		      query_value(c2, "SELECT pg_backend_pid()"), pid1);
	ck_assert_str_ne(query_value(c2, "SHOW application_name"), "leaky_app");
	ck_assert_str_eq(query_value(c2, "SHOW search_path"), "\"$user\", public");
	ck_assert_str_eq(query_value(c2, "SELECT coalesce(current_setting('myapp.x', true), '')"), "");
	PQfinish(c2);
	pgv_stop(&p);
}
END_TEST

/* ---------------------------------------------------------------- limits */

START_TEST(max_client_conn_enforced)
{
	struct pgv p;
	PGconn *c1, *c2, *c3, *c4 = NULL;
	double deadline;

	pgv_start(&p, "auth_type = md5\nmax_client_conn = 2\n", std_databases(), std_userlist());
	c1 = pgv_connect(&p, DB, "scram_user", "scram_pass");
	assert_connected(c1, &p, "client 1 of max 2");
	c2 = pgv_connect(&p, DB, "md5_user", "md5_pass");
	assert_connected(c2, &p, "client 2 of max 2");
	ck_assert_str_eq(query_value(c1, "SELECT 1"), "1");
	ck_assert_str_eq(query_value(c2, "SELECT 2"), "2");
	c3 = pgv_connect(&p, DB, "scram_user", "scram_pass");
	assert_rejected(c3, &p, "client 3 of max 2", "no more connections allowed (max_client_conn)");
	PQfinish(c3);
	/* the two still work, and a slot frees up when one leaves */
	ck_assert_str_eq(query_value(c2, "SELECT 3"), "3");
	PQfinish(c1);
	/* the close is read at once; 3 s of retries is slack on a loaded machine */
	deadline = now_s() + 3;
	while (now_s() < deadline) {
		c4 = pgv_connect(&p, DB, "scram_user", "scram_pass");
		if (PQstatus(c4) == CONNECTION_OK)
			break;
		PQfinish(c4);
		c4 = NULL;
		usleep(100 * 1000);
	}
	ck_assert_msg(c4 != NULL, "no connection possible after a client left\n%s", pgv_log_tail(&p, 1500));
	ck_assert_str_eq(query_value(c4, "SELECT 4"), "4");
	PQfinish(c4);
	PQfinish(c2);
	pgv_stop(&p);
}
END_TEST

START_TEST(client_login_timeout_closes_silent_client)
{
	struct pgv p;
	PGconn *c;
	double t0, elapsed;
	int fd;
	bool closed;

	/* No TCP_DEFER_ACCEPT: with it the kernel holds a silent client ~1 s before pgvalve sees it. */
	pgv_start(&p, "auth_type = md5\nclient_login_timeout = 1\ntcp_defer_accept = 0\n", std_databases(),
		  std_userlist());
	fd = raw_connect(p.port);
	t0 = now_s();
	/* another client logs in and works meanwhile */
	c = pgv_connect(&p, DB, "scram_user", "scram_pass");
	assert_connected(c, &p, "client beside the silent one");
	ck_assert_str_eq(query_value(c, "SELECT 1"), "1");
	closed = raw_wait_closed(fd, 5000);
	elapsed = now_s() - t0;
	close(fd);
	ck_assert_msg(closed, "a client that sent nothing was still connected after 5 s (client_login_timeout = 1)\n%s",
		      pgv_log_tail(&p, 1500));
	ck_assert_msg(elapsed <= 2.5, "silent client closed only after %.2f s (client_login_timeout = 1)", elapsed);
	ck_assert_msg(elapsed >= 0.8, "silent client closed after %.2f s, before client_login_timeout = 1", elapsed);
	/* the logged-in client was not affected */
	ck_assert_str_eq(query_value(c, "SELECT 2"), "2");
	PQfinish(c);
	pgv_stop(&p);
}
END_TEST

/* ---------------------------------------------------------------- robustness */

START_TEST(garbage_does_not_hurt)
{
	static const char http[] = "GET / HTTP/1.1\r\nHost: localhost\r\nUser-Agent: curl/8.0\r\n\r\n";
	/* length 0x7fffffff, protocol 3.0, then a little of the promised body */
	static const unsigned char huge_startup[] = { 0x7f, 0xff, 0xff, 0xff, 0, 3, 0, 0, 'u', 's', 'e', 'r', 0 };
	/* length 4: shorter than the length word plus the protocol code */
	static const unsigned char tiny_startup[] = { 0, 0, 0, 4, 0, 3, 0, 0 };
	/* protocol 9.9: a version nobody speaks */
	static const unsigned char bad_version[] = { 0, 0, 0, 9, 0, 9, 0, 9, 0 };
	struct {
		const char *name;
		const void *data;
		size_t len;
	} cases[5];
	unsigned char junk[4096];
	unsigned int seed = 12345;
	struct pgv p;
	PGconn *c;

	for (size_t i = 0; i < sizeof(junk); i++) {
		seed = seed * 1103515245u + 12345u;
		junk[i] = (unsigned char)(seed >> 16);
	}
	junk[0] = 0xde;	/* a first length word no startup packet can have */
	cases[0].name = "4 KB of random bytes", cases[0].data = junk, cases[0].len = sizeof(junk);
	cases[1].name = "an HTTP request", cases[1].data = http, cases[1].len = strlen(http);
	cases[2].name = "a startup packet of length 0x7fffffff", cases[2].data = huge_startup,
	cases[2].len = sizeof(huge_startup);
	cases[3].name = "a startup packet of length 4", cases[3].data = tiny_startup,
	cases[3].len = sizeof(tiny_startup);
	cases[4].name = "protocol version 9.9", cases[4].data = bad_version, cases[4].len = sizeof(bad_version);

	pgv_start(&p, "auth_type = md5\n", std_databases(), std_userlist());
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int fd = raw_connect(p.port);

		raw_send(fd, cases[i].data, cases[i].len);
		ck_assert_msg(raw_wait_closed(fd, 5000), "pgvalve kept the connection open 5 s after %s\n%s",
			      cases[i].name, pgv_log_tail(&p, 1500));
		close(fd);
		ck_assert_msg(pgv_running(&p), "pgvalve died after %s\n%s", cases[i].name, pgv_log_tail(&p, 1500));
	}
	/* a peer that vanishes half-way through a startup packet */
	{
		int fd = raw_connect(p.port);

		raw_send(fd, "\0\0\0\x40\0\3\0\0us", 10);
		close(fd);
	}
	c = pgv_connect(&p, DB, "scram_user", "scram_pass");
	assert_connected(c, &p, "normal client after the garbage");
	ck_assert_str_eq(query_value(c, "SELECT 1"), "1");
	PQfinish(c);
	ck_assert_msg(pgv_running(&p), "pgvalve died\n%s", pgv_log_tail(&p, 1500));
	pgv_stop(&p);
}
END_TEST

START_TEST(server_killed_under_client)
{
	struct pgv p;
	PGconn *c, *admin, *c2;
	PGresult *r;
	char pid[32], sql[128];
	double deadline;

	pgv_start(&p, "auth_type = md5\n", std_databases(), std_userlist());
	c = pgv_connect(&p, DB, "scram_user", "scram_pass");
	assert_connected(c, &p, "client");
	snprintf(pid, sizeof(pid), "%s", query_value(c, "SELECT pg_backend_pid()"));

	admin = pg_direct();
	snprintf(sql, sizeof(sql), "SELECT pg_terminate_backend(%s)", pid);
	ck_assert_str_eq(query_value(admin, sql), "t");
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", pid);
	/* the backend exits in milliseconds; 5 s on a loaded machine */
	deadline = now_s() + 5;
	while (strcmp(query_value(admin, sql), "0") != 0 && now_s() < deadline)
		usleep(50 * 1000);
	PQfinish(admin);
	/* margin for pgvalve to read the FATAL; if later, the query goes to the dead server and fails all the same */
	usleep(200 * 1000);

	r = PQexec(c, "SELECT 1");
	ck_assert_msg(r == NULL || PQresultStatus(r) != PGRES_TUPLES_OK,
		      "the query after the server was killed succeeded\n%s", pgv_log_tail(&p, 1500));
	PQclear(r);
	PQfinish(c);

	c2 = pgv_connect(&p, DB, "scram_user", "scram_pass");
	assert_connected(c2, &p, "fresh client after the server was killed");
	ck_assert_str_ne(query_value(c2, "SELECT pg_backend_pid()"), pid);
	ck_assert_str_eq(query_value(c2, "SELECT 1"), "1");
	PQfinish(c2);
	pgv_stop(&p);
}
END_TEST

/* ---------------------------------------------------------------- pgbench */

START_TEST(pgbench_select_only)
{
	struct pgv p;
	char port[16], outfile[700];
	char *env[] = { "PGPASSWORD=bench_pass", "PGSSLMODE=disable", "PGCONNECT_TIMEOUT=10", NULL };
	const char *out, *s;
	long processed = -1, failures = 0;
	int rc, n;

	pgv_start(&p, "auth_type = md5\npool_mode = session\ndefault_pool_size = 20\n",
		  std_databases(), std_userlist());
	snprintf(port, sizeof(port), "%d", p.port);
	snprintf(outfile, sizeof(outfile), "%s/pgbench.out", p.dir);
	{
		char *argv[] = { "pgbench", "-n", "-S", "-c", "20", "-j", "2", "-T", "5",
				 "-h", "127.0.0.1", "-p", port, "-U", "pgbench_user", DB, NULL };

		rc = run_program(argv, env, outfile, 40);
	}
	out = read_file_tail(outfile, 8000);
	ck_assert_msg(rc == 0, "pgbench exited %d:\n%s\n%s", rc, out, pgv_log_tail(&p, 1500));
	s = strstr(out, "number of transactions actually processed: ");
	if (s != NULL)
		processed = strtol(s + strlen("number of transactions actually processed: "), NULL, 10);
	ck_assert_msg(processed > 0, "pgbench processed no transaction:\n%s", out);
	s = strstr(out, "number of failed transactions: ");
	if (s != NULL)
		failures = strtol(s + strlen("number of failed transactions: "), NULL, 10);
	ck_assert_msg(failures == 0, "pgbench reported %ld failed transactions:\n%s", failures, out);
	ck_assert_msg(strstr(out, "error") == NULL && strstr(out, "aborted") == NULL,
		      "pgbench reported errors:\n%s", out);
	n = pg_count_backends("pgbench_user");
	ck_assert_msg(n <= 20, "%d server connections for pgbench_user, default_pool_size = 20", n);
	pgv_stop(&p);
}
END_TEST

static Suite *session_suite(void)
{
	Suite *s = suite_create("session");
	TCase *tc;

	tc = pgv_tcase_create("auth", 20);
	tcase_add_loop_test(tc, login_ok, 0, (int)(sizeof(login_cases) / sizeof(login_cases[0])));
	tcase_add_test(tc, wrong_password);
	tcase_add_test(tc, unknown_database);
	suite_add_tcase(s, tc);

	tc = pgv_tcase_create("pooling", 60);
	tcase_add_test(tc, sequential_clients_reuse_pool);
	tcase_add_test(tc, concurrent_clients_share_pool);
	tcase_add_test(tc, session_state_does_not_leak);
	suite_add_tcase(s, tc);

	tc = pgv_tcase_create("limits", 20);
	tcase_add_test(tc, max_client_conn_enforced);
	tcase_add_test(tc, client_login_timeout_closes_silent_client);
	suite_add_tcase(s, tc);

	tc = pgv_tcase_create("robustness", 30);
	tcase_add_test(tc, garbage_does_not_hurt);
	tcase_add_test(tc, server_killed_under_client);
	suite_add_tcase(s, tc);

	tc = pgv_tcase_create("pgbench", 60);
	tcase_add_test(tc, pgbench_select_only);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return pgv_run_suite(session_suite());
}
