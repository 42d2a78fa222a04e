/*
 * test_admin_control.c - end-to-end tests of the admin console's control
 * commands against PgBouncer 1.25's behaviour: PAUSE/RESUME,
 * DISABLE/ENABLE, KILL, RECONNECT, KILL_CLIENT, WAIT_CLOSE, SET, SHUTDOWN,
 * the signals that mirror them, and online reload under load
 * (SIGHUP and RELOAD), including a broken config. The session and the
 * SHOW views are test_admin_show.c's.
 *
 * Tests named spec_* check single points of the PgBouncer 1.25 spec on
 * their own, so one difference does not hide the others.
 */
#include "admin_console.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---------------------------------------------------------------- helpers */

/* A query on a connection the pooler dropped: it fails, and the text names the reason. */
static void expect_dropped(PGconn *c, const char *reason)
{
	PGresult *r = PQexec(c, "SELECT 1");
	ck_assert_msg(PQresultStatus(r) != PGRES_TUPLES_OK, "query on a dropped connection worked");
	ck_assert_msg(strstr(PQerrorMessage(c), reason) != NULL, "expected '%s' in: %s", reason, PQerrorMessage(c));
	PQclear(r);
	ck_assert_int_eq(PQstatus(c), CONNECTION_BAD);
}

/*
 * Whether p exits within seconds. Callers wait for an exit that follows at
 * once from what they did (the last client or server gone, SHUTDOWN): a
 * few milliseconds; 3 to 5 s leave a loaded machine scheduling slack.
 */
static bool wait_exit(struct pgv *p, double seconds)
{
	double t0 = now_s();
	while (pgv_running(p) && now_s() - t0 < seconds)
		usleep(50 * 1000);
	return !pgv_running(p);
}

/*
 * A client in a child process: connects as scram_user and runs sql, exit 0
 * if the first value equals expect (2: no login, 3: wrong answer). For
 * waits that may happen during login as well as in the query.
 */
static pid_t background_query(struct pgv *p, const char *sql, const char *expect)
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		const char *kw[10], *val[10];
		char port[16];
		pgv_conn_params(p, DB, "scram_user", "scram_pass", kw, val, port);
		PGconn *c = PQconnectdbParams(kw, val, 0);
		if (PQstatus(c) != CONNECTION_OK)
			_exit(2);
		PGresult *r = PQexec(c, sql);
		_exit(PQresultStatus(r) == PGRES_TUPLES_OK && strcmp(PQgetvalue(r, 0, 0), expect) == 0 ? 0 : 3);
	}
	return pid;
}

/*
 * The child's exit code, or -1 if it is still running after ms: used both
 * ways, a window in which it must not finish and a bound by which it must.
 */
static int child_done_within(pid_t pid, int ms)
{
	double deadline = now_s() + ms / 1000.0;
	int status;
	for (;;) {
		if (waitpid(pid, &status, WNOHANG) == pid)
			return WIFEXITED(status) ? WEXITSTATUS(status) : 100;
		if (now_s() >= deadline)
			return -1;
		usleep(20 * 1000);
	}
}

/* ================================================================ control */

/*
 * PAUSE: answered only once every server is released and closed; queries
 * arriving meanwhile wait, and RESUME lets them run.
 */
START_TEST(pause_waits_for_servers_resume_releases)
{
	struct pgv p;
	pgv_start(&p, TXN "default_pool_size = 2\n", std_databases(), userlist());
	PGconn *a = admin_conn(&p), *a2 = admin_conn(&p);
	PGconn *h = client_conn(&p), *n = client_conn(&p);
	ck_assert_str_eq(query_value(n, "SELECT 'n0'"), "n0");
	exec_ok(h, "BEGIN");
	ck_assert_str_eq(query_value(h, "SELECT 'h'"), "h");

	send_query(a, "PAUSE");
	still_waiting(a, 600, "PAUSE with a server in a transaction");
	ck_assert_str_eq(state_value(a2, "paused"), "yes");
	ck_assert_str_eq(state_value(a2, "active"), "no");
	ck_assert(pgv_log_contains(&p, "PAUSE command issued"));

	/* a new query waits */
	send_query(n, "SELECT 'n1'");
	still_waiting(n, 500, "query during PAUSE");
	char nport[16];
	snprintf(nport, sizeof(nport), "%d", local_port(n));
	ck_assert_str_eq(show_value(a2, "SHOW CLIENTS", "port", nport, "state"), "waiting");
	ck_assert_str_eq(show_value(a2, "SHOW POOLS", "database", DB, "cl_waiting"), "1");
	/* the open transaction goes on; its end releases the last server */
	ck_assert_str_eq(query_value(h, "SELECT 'still inside'"), "still inside");
	still_waiting(a, 200, "PAUSE before COMMIT");
	exec_ok(h, "COMMIT");
	expect_async_tag(a, 3000, "PAUSE", "PAUSE");
	wait_backends("scram_user", 0, 3000);
	ck_assert_str_eq(show_value(a2, "SHOW POOLS", "database", DB, "sv_idle"), "0");
	still_waiting(n, 300, "query during PAUSE after the servers closed");

	admin_err(a, "PAUSE", "08P01", "already suspended/paused");
	admin_err(a, "KILL pgvtest", "08P01", "already suspended/paused");
	admin_ok(a, "RESUME", "RESUME");
	expect_async_value(n, 3000, "query after RESUME", "n1");
	ck_assert_str_eq(state_value(a2, "active"), "yes");
	ck_assert_str_eq(state_value(a2, "paused"), "no");
	admin_err(a, "RESUME", "08P01", "pooler is not paused/suspended");
	ck_assert_str_eq(query_value(h, "SELECT 'h2'"), "h2");
	PQfinish(h);
	PQfinish(n);
	PQfinish(a2);
	PQfinish(a);
	pgv_stop(&p);
}
END_TEST

/* PAUSE db: one database only; RESUME db; the global state stays "active". */
START_TEST(pause_one_database)
{
	struct pgv p;
	pgv_start(&p, TXN "default_pool_size = 2\n", std_databases(), userlist());
	PGconn *a = admin_conn(&p);
	PGconn *n = client_conn(&p);
	ck_assert_str_eq(query_value(n, "SELECT 1"), "1");	/* an idle server: closed by the PAUSE */

	send_query(a, "PAUSE pgvtest");
	expect_async_tag(a, 3000, "PAUSE pgvtest", "PAUSE");
	wait_backends("scram_user", 0, 3000);
	ck_assert_str_eq(show_value(a, "SHOW DATABASES", "name", DB, "paused"), "1");
	ck_assert_str_eq(state_value(a, "active"), "yes");	/* only the global mode counts */
	ck_assert_str_eq(state_value(a, "paused"), "no");

	send_query(n, "SELECT 'after'");
	still_waiting(n, 600, "query on a paused database");
	admin_ok(a, "RESUME pgvtest", "RESUME");
	expect_async_value(n, 3000, "query after RESUME pgvtest", "after");
	ck_assert_str_eq(show_value(a, "SHOW DATABASES", "name", DB, "paused"), "0");
	admin_err(a, "RESUME pgvtest", "08P01", "database pgvtest is not paused");
	admin_err(a, "RESUME", "08P01", "pooler is not paused/suspended");
	ck_assert(pgv_log_contains(&p, "PAUSE 'pgvtest' command issued"));
	PQfinish(n);
	PQfinish(a);
	pgv_stop(&p);
}
END_TEST

/* DISABLE refuses new logins to the database (existing clients go on); ENABLE allows them again. */
START_TEST(disable_enable)
{
	struct pgv p;
	pgv_start(&p, TXN, std_databases(), userlist());
	PGconn *a = admin_conn(&p);
	PGconn *old = client_conn(&p);
	ck_assert_str_eq(query_value(old, "SELECT 1"), "1");

	admin_ok(a, "DISABLE pgvtest", "DISABLE");
	ck_assert_str_eq(show_value(a, "SHOW DATABASES", "name", DB, "disabled"), "1");
	PGconn *late = pgv_connect(&p, DB, "scram_user", "scram_pass");
	ck_assert_int_eq(PQstatus(late), CONNECTION_BAD);
	ck_assert_msg(strstr(PQerrorMessage(late), "\"pgvtest\""), "%s", PQerrorMessage(late));
	PQfinish(late);
	ck_assert_str_eq(query_value(old, "SELECT 'old client'"), "old client");
	admin_ok(a, "DISABLE pgvtest", "DISABLE");	/* again: no error */

	admin_ok(a, "ENABLE pgvtest", "ENABLE");
	ck_assert_str_eq(show_value(a, "SHOW DATABASES", "name", DB, "disabled"), "0");
	late = client_conn(&p);
	ck_assert_str_eq(query_value(late, "SELECT 'welcome back'"), "welcome back");
	PQfinish(late);
	PQfinish(old);
	PQfinish(a);
	pgv_stop(&p);
}
END_TEST

/* KILL db: its clients and servers are dropped at once; new clients wait until RESUME db. */
START_TEST(kill_database)
{
	struct pgv p;
	pgv_start(&p, TXN "default_pool_size = 2\n", std_databases(), userlist());
	PGconn *a = admin_conn(&p);
	PGconn *idle = client_conn(&p), *busy = client_conn(&p);
	ck_assert_str_eq(query_value(idle, "SELECT 1"), "1");
	exec_ok(busy, "BEGIN");
	ck_assert_str_eq(query_value(busy, "SELECT 1"), "1");
	wait_backends("scram_user", 1, 2000);

	admin_ok(a, "KILL pgvtest", "KILL");
	expect_dropped(idle, "database removed");
	expect_dropped(busy, "database removed");
	wait_backends("scram_user", 0, 3000);
	ck_assert_str_eq(show_value(a, "SHOW DATABASES", "name", DB, "paused"), "1");
	ck_assert(pgv_log_contains(&p, "KILL 'pgvtest' command issued"));

	/* a new client (in a child process: it may wait in login or in its query) */
	pid_t w = background_query(&p, "SELECT 'late'", "late");
	/*
	 * A negative window: the paused database holds the new client for 800 ms
	 * (a wrongly served one would finish in tens). After RESUME the child's
	 * login and query: 5 s leaves a loaded machine plenty.
	 */
	ck_assert_int_eq(child_done_within(w, 800), -1);
	admin_ok(a, "RESUME pgvtest", "RESUME");
	ck_assert_int_eq(child_done_within(w, 5000), 0);

	/* KILL without a database (1.25): every database but the console */
	PGconn *d = client_conn(&p);
	ck_assert_str_eq(query_value(d, "SELECT 1"), "1");
	admin_ok(a, "KILL", "KILL");
	expect_dropped(d, "database removed");
	ck_assert_str_eq(state_value(a, "active"), "yes");	/* the console survived */
	admin_ok(a, "RESUME pgvtest", "RESUME");
	PQfinish(d);
	d = client_conn(&p);
	ck_assert_str_eq(query_value(d, "SELECT 'alive'"), "alive");
	PQfinish(d);
	PQfinish(idle);
	PQfinish(busy);
	PQfinish(a);
	pgv_stop(&p);
}
END_TEST

/*
 * RECONNECT: idle servers are replaced (the next transaction runs on a new
 * backend), a server busy in a transaction is marked close_needed and
 * closed when released; WAIT_CLOSE returns once it is gone.
 */
START_TEST(reconnect_and_wait_close)
{
	struct pgv p;
	pgv_start(&p, TXN "default_pool_size = 2\n", std_databases(), userlist());
	PGconn *a = admin_conn(&p), *a2 = admin_conn(&p);
	PGconn *busy = client_conn(&p), *other = client_conn(&p);
	admin_ok(a, "WAIT_CLOSE", "WAIT_CLOSE");	/* nothing to wait for */
	exec_ok(busy, "BEGIN");
	char pid_busy[32], pid_idle[32];
	snprintf(pid_busy, sizeof(pid_busy), "%s", query_value(busy, "SELECT pg_backend_pid()"));
	snprintf(pid_idle, sizeof(pid_idle), "%s", query_value(other, "SELECT pg_backend_pid()"));
	ck_assert_str_ne(pid_busy, pid_idle);

	admin_ok(a, "RECONNECT", "RECONNECT");
	ck_assert_str_eq(show_value(a, "SHOW SERVERS", "remote_pid", pid_busy, "close_needed"), "1");
	ck_assert_str_eq(show_value(a, "SHOW SERVERS", "remote_pid", pid_busy, "state"), "active");
	/* the idle one is not used again */
	char pid_new[32];
	snprintf(pid_new, sizeof(pid_new), "%s", query_value(other, "SELECT pg_backend_pid()"));
	ck_assert_str_ne(pid_new, pid_idle);
	ck_assert_str_ne(pid_new, pid_busy);
	ck_assert_str_eq(show_value(a, "SHOW SERVERS", "remote_pid", pid_new, "close_needed"), "0");

	/* WAIT_CLOSE waits for the busy one */
	send_query(a2, "WAIT_CLOSE");
	still_waiting(a2, 600, "WAIT_CLOSE with a close_needed server in a transaction");
	ck_assert_str_eq(query_value(busy, "SELECT pg_backend_pid()"), pid_busy);	/* the transaction keeps it */
	exec_ok(busy, "COMMIT");
	expect_async_tag(a2, 3000, "WAIT_CLOSE", "WAIT_CLOSE");
	PGconn *direct = pg_direct();
	char sql[128];
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", pid_busy);
	/* pgvalve closed it at COMMIT; the backend exits in milliseconds, 3 s is slack for a loaded machine */
	double deadline = now_s() + 3;
	while (strcmp(query_value(direct, sql), "0") != 0 && now_s() < deadline)
		usleep(50 * 1000);
	ck_assert_str_eq(query_value(direct, sql), "0");
	PQfinish(direct);
	ck_assert_str_ne(query_value(busy, "SELECT pg_backend_pid()"), pid_busy);

	/* RECONNECT db and WAIT_CLOSE db */
	snprintf(pid_idle, sizeof(pid_idle), "%s", query_value(other, "SELECT pg_backend_pid()"));
	admin_ok(a, "RECONNECT pgvtest", "RECONNECT");
	send_query(a2, "WAIT_CLOSE pgvtest");
	expect_async_tag(a2, 3000, "WAIT_CLOSE pgvtest", "WAIT_CLOSE");
	ck_assert_str_ne(query_value(other, "SELECT pg_backend_pid()"), pid_idle);
	ck_assert(pgv_log_contains(&p, "RECONNECT command issued"));
	PQfinish(busy);
	PQfinish(other);
	PQfinish(a2);
	PQfinish(a);
	pgv_stop(&p);
}
END_TEST

/* KILL_CLIENT <id> drops that client (its transaction's server too), nobody else. */
START_TEST(kill_client_by_id)
{
	struct pgv p;
	pgv_start(&p, TXN "default_pool_size = 2\n", std_databases(), userlist());
	PGconn *a = admin_conn(&p);
	PGconn *victim = client_conn(&p), *bystander = client_conn(&p);
	exec_ok(victim, "BEGIN");
	ck_assert_str_eq(query_value(victim, "SELECT 1"), "1");
	ck_assert_str_eq(query_value(bystander, "SELECT 1"), "1");
	char port[16], id[32], other_id[32];
	snprintf(port, sizeof(port), "%d", local_port(victim));
	snprintf(id, sizeof(id), "%s", show_value(a, "SHOW CLIENTS", "port", port, "id"));
	snprintf(port, sizeof(port), "%d", local_port(bystander));
	snprintf(other_id, sizeof(other_id), "%s", show_value(a, "SHOW CLIENTS", "port", port, "id"));

	/* not for stats users */
	PGconn *s = stats_conn(&p);
	char cmd[64];
	snprintf(cmd, sizeof(cmd), "KILL_CLIENT %s", other_id);
	admin_err(s, cmd, "08P01", "admin access needed");
	PQfinish(s);

	snprintf(cmd, sizeof(cmd), "KILL_CLIENT %s", id);
	admin_ok(a, cmd, "KILL_CLIENT");
	expect_dropped(victim, "admin forced disconnect");
	ck_assert_str_eq(query_value(bystander, "SELECT 'unharmed'"), "unharmed");
	PGresult *r = show(a, "SHOW CLIENTS");
	ck_assert_int_lt(find_row(r, "id", id), 0);
	ck_assert_int_ge(find_row(r, "id", other_id), 0);
	PQclear(r);
	/* its server, mid-transaction, is not left idle in transaction */
	PGconn *direct = pg_direct();
	const char *sql = "SELECT count(*) FROM pg_stat_activity WHERE usename = 'scram_user' "
			  "AND state LIKE 'idle in transaction%'";
	/* closed with the killed client: the backend exits in milliseconds, 3 s is slack for a loaded machine */
	double deadline = now_s() + 3;
	while (strcmp(query_value(direct, sql), "0") != 0 && now_s() < deadline)
		usleep(50 * 1000);
	ck_assert_str_eq(query_value(direct, sql), "0");
	PQfinish(direct);

	admin_err(a, cmd, "08P01", "client not found");	/* already gone */
	admin_err(a, "KILL_CLIENT 99999999", "08P01", "client not found");
	admin_err(a, "KILL_CLIENT abc", "08P01", "invalid client pointer supplied");
	ck_assert(pgv_log_contains(&p, "admin forced disconnect"));
	PQfinish(victim);
	PQfinish(bystander);
	PQfinish(a);
	pgv_stop(&p);
}
END_TEST

/* SET changes the running config and what pools do; bad values change nothing. */
START_TEST(set_changes_config_and_pools)
{
	struct pgv p;
	struct notice_log log;
	memset(&log, 0, sizeof(log));
	pgv_start(&p, TXN "default_pool_size = 2\n", std_databases(), userlist());
	PGconn *a = admin_conn(&p);
	PQsetNoticeReceiver(a, capture_notice, &log);

	admin_ok(a, "SET default_pool_size = 3", "SET default_pool_size=3");
	ck_assert_str_eq(config_value(a, "default_pool_size"), "3");
	ck_assert_str_eq(show_value(a, "SHOW DATABASES", "name", DB, "pool_size"), "3");

	/* three transactions get servers, the fourth waits for one of them */
	PGconn *c[4];
	for (int i = 0; i < 4; i++)
		c[i] = client_conn(&p);
	for (int i = 0; i < 3; i++) {
		exec_ok(c[i], "BEGIN");
		ck_assert_str_eq(query_value(c[i], "SELECT 1"), "1");
	}
	wait_backends("scram_user", 3, 2000);
	send_query(c[3], "SELECT 'fourth'");
	still_waiting(c[3], 600, "a fourth transaction with default_pool_size = 3");
	ck_assert_str_eq(show_value(a, "SHOW POOLS", "database", DB, "cl_waiting"), "1");
	ck_assert_str_eq(show_value(a, "SHOW POOLS", "database", DB, "sv_active"), "3");
	exec_ok(c[0], "COMMIT");
	expect_async_value(c[3], 3000, "fourth transaction", "fourth");
	ck_assert_int_eq(pg_count_backends("scram_user"), 3);
	for (int i = 1; i < 3; i++)
		exec_ok(c[i], "COMMIT");

	/* bad values: SET failed, nothing changes */
	admin_err(a, "SET default_pool_size = abc", "08P01", "SET failed");
	admin_err(a, "SET default_pool_size = '-5'", "08P01", "SET failed");
	admin_err(a, "SET no_such_param = 1", "08P01", "SET failed");
	admin_err(a, "SET pool_mode = sometimes", "08P01", "SET failed");
	ck_assert_str_eq(config_value(a, "default_pool_size"), "3");
	ck_assert_str_eq(config_value(a, "pool_mode"), "transaction");
	ck_assert_str_eq(config_value(a, "server_lifetime"), "3600");

	/* the other spellings */
	admin_ok(a, "set default_pool_size to 5", "SET default_pool_size=5");
	ck_assert_str_eq(config_value(a, "default_pool_size"), "5");
	admin_ok(a, "SET server_lifetime = '1.5'", "SET server_lifetime=1.5");
	ck_assert_str_eq(config_value(a, "server_lifetime"), "1.5");
	admin_ok(a, "SET server_reset_query = 'DISCARD ALL; SELECT 1'", "SET server_reset_query=DISCARD ALL; SELECT 1");
	ck_assert_str_eq(config_value(a, "server_reset_query"), "DISCARD ALL; SELECT 1");

	/* a restart-only key: answered, with a NOTICE (pgvalve), and not applied */
	log.n = 0;
	char port[16];
	snprintf(port, sizeof(port), "%d", p.port);
	admin_ok(a, "SET listen_port = 1", "SET listen_port=1");
	ck_assert_int_eq(log.n, 1);
	ck_assert_str_eq(log.severity, "NOTICE");
	ck_assert_str_eq(config_value(a, "listen_port"), port);

	/* a driver parameter: NOTICE "SET ignored", tag SET */
	log.n = 0;
	admin_ok(a, "SET client_encoding = 'LATIN1'", "SET");
	ck_assert_int_eq(log.n, 1);
	ck_assert_str_eq(log.message, "SET ignored");

	for (int i = 0; i < 4; i++)
		PQfinish(c[i]);
	PQfinish(a);
	pgv_stop(&p);
}
END_TEST

/* SIGUSR1 pauses like PAUSE, SIGUSR2 resumes like RESUME. */
START_TEST(sigusr1_pause_sigusr2_resume)
{
	struct pgv p;
	pgv_start(&p, TXN "default_pool_size = 2\n", std_databases(), userlist());
	PGconn *a = admin_conn(&p);
	PGconn *h = client_conn(&p), *n = client_conn(&p);
	ck_assert_str_eq(query_value(n, "SELECT 1"), "1");
	exec_ok(h, "BEGIN");

	ck_assert_int_eq(kill(p.pid, SIGUSR1), 0);
	/* the signal is handled at the loop's next turn: milliseconds; 2 s is slack even on a loaded machine */
	double deadline = now_s() + 2;
	while (strcmp(state_value(a, "paused"), "yes") != 0 && now_s() < deadline)
		usleep(20 * 1000);
	ck_assert_str_eq(state_value(a, "paused"), "yes");
	send_query(n, "SELECT 'n'");
	still_waiting(n, 500, "query after SIGUSR1");
	ck_assert_str_eq(query_value(h, "SELECT 'in txn'"), "in txn");
	exec_ok(h, "COMMIT");
	wait_backends("scram_user", 0, 3000);
	still_waiting(n, 200, "query after SIGUSR1");

	ck_assert_int_eq(kill(p.pid, SIGUSR2), 0);
	expect_async_value(n, 3000, "query after SIGUSR2", "n");
	ck_assert_str_eq(state_value(a, "active"), "yes");
	PQfinish(h);
	PQfinish(n);
	PQfinish(a);
	pgv_stop(&p);
}
END_TEST

/* ================================================================ shutdown */

/* SHUTDOWN WAIT_FOR_CLIENTS: no new clients, exit once the last one has gone. */
START_TEST(shutdown_wait_for_clients)
{
	struct pgv p;
	pgv_start(&p, TXN, std_databases(), userlist());
	PGconn *a = admin_conn(&p);
	PGconn *c = client_conn(&p);
	ck_assert_str_eq(query_value(c, "SELECT 1"), "1");
	admin_ok(a, "SHUTDOWN WAIT_FOR_CLIENTS", "SHUTDOWN");
	/*
	 * A negative window: a wrong exit would follow the command at once, so
	 * 300 ms catches it. The TCP listeners are already closed: that happens
	 * in the same callback as the reply.
	 */
	usleep(300 * 1000);
	ck_assert_msg(pgv_running(&p), "exited with clients connected");
	PGconn *late = pgv_connect(&p, DB, "scram_user", "scram_pass");
	ck_assert_int_eq(PQstatus(late), CONNECTION_BAD);
	PQfinish(late);
	ck_assert_str_eq(query_value(c, "SELECT 'served'"), "served");
	admin_err(a, "RESUME", "08P01", "pooler is shutting down");
	ck_assert_str_eq(state_value(a, "active"), "yes");
	ck_assert(pgv_log_contains(&p, "SHUTDOWN WAIT_FOR_CLIENTS command issued"));
	PQfinish(c);
	PQfinish(a);
	ck_assert_msg(wait_exit(&p, 5), "still running after the last client left\n%s", pgv_log_tail(&p, 1500));
	pgv_stop(&p);
}
END_TEST

/* SHUTDOWN WAIT_FOR_SERVERS: pause, drop the queue, exit when the last server is released. */
START_TEST(shutdown_wait_for_servers)
{
	struct pgv p;
	pgv_start(&p, TXN "default_pool_size = 1\n", std_databases(), userlist());
	PGconn *a = admin_conn(&p);
	PGconn *h = client_conn(&p), *w = client_conn(&p);
	exec_ok(h, "BEGIN");
	ck_assert_str_eq(query_value(h, "SELECT 1"), "1");
	send_query(w, "SELECT 'queued'");
	still_waiting(w, 300, "queued query");

	admin_ok(a, "SHUTDOWN WAIT_FOR_SERVERS", "SHUTDOWN");
	PGresult *r = result_within(w, 3000, "queued query at SHUTDOWN WAIT_FOR_SERVERS");
	ck_assert_int_eq(PQresultStatus(r), PGRES_FATAL_ERROR);
	PQclear(r);
	ck_assert_msg(strstr(PQerrorMessage(w), "server shutting down"), "%s", PQerrorMessage(w));
	usleep(300 * 1000);	/* a negative window, as in shutdown_wait_for_clients */
	ck_assert_msg(pgv_running(&p), "exited with a server in a transaction");
	ck_assert_str_eq(state_value(a, "paused"), "yes");
	PGconn *late = pgv_connect(&p, DB, "scram_user", "scram_pass");
	ck_assert_int_eq(PQstatus(late), CONNECTION_BAD);
	PQfinish(late);
	ck_assert_str_eq(query_value(h, "SELECT 'inside'"), "inside");
	exec_ok(h, "COMMIT");
	ck_assert_msg(wait_exit(&p, 5), "still running after the last server was released\n%s",
		      pgv_log_tail(&p, 1500));
	PQfinish(h);
	PQfinish(w);
	PQfinish(a);
	pgv_stop(&p);
}
END_TEST

/* SHUTDOWN: no reply, the process exits at once. */
START_TEST(shutdown_immediate)
{
	struct pgv p;
	pgv_start(&p, TXN, std_databases(), userlist());
	PGconn *a = admin_conn(&p);
	PGconn *c = client_conn(&p);
	exec_ok(c, "BEGIN");
	admin_invalid(a, "SHUTDOWN NOW");
	PGresult *r = PQexec(a, "SHUTDOWN");
	ck_assert_int_ne(PQresultStatus(r), PGRES_COMMAND_OK);
	PQclear(r);
	ck_assert_msg(wait_exit(&p, 3), "SHUTDOWN did not end pgvalve");
	ck_assert(pgv_log_contains(&p, "SHUTDOWN command issued"));
	PQfinish(c);
	PQfinish(a);
	pgv_stop(&p);
}
END_TEST

/* SIGUSR2 is ignored while shutting down: SIGINT's pause holds, pgvalve still exits. */
START_TEST(sigint_shutdown_ignores_sigusr2)
{
	struct pgv p;
	pgv_start(&p, TXN "default_pool_size = 1\n", std_databases(), userlist());
	PGconn *h = client_conn(&p);
	exec_ok(h, "BEGIN");
	ck_assert_int_eq(kill(p.pid, SIGINT), 0);
	/* negative windows: a wrong exit would follow each signal within milliseconds; 300 ms catches it */
	usleep(300 * 1000);
	ck_assert(pgv_running(&p));
	ck_assert_int_eq(kill(p.pid, SIGUSR2), 0);
	usleep(300 * 1000);
	ck_assert(pgv_running(&p));
	exec_ok(h, "COMMIT");
	ck_assert_msg(wait_exit(&p, 5), "SIGUSR2 undid SIGINT's shutdown: still running after the last server was "
		      "released\n%s", pgv_log_tail(&p, 1500));
	/* the released server closes for the shutdown, in words that say so (not "pause mode") */
	ck_assert_msg(pgv_log_contains(&p, "closing because: shutting down") && !pgv_log_contains(&p, "pause mode"),
		      "%s", pgv_log_tail(&p, 1500));
	PQfinish(h);
	pgv_stop(&p);
}
END_TEST

/* ================================================================ reload */

static void write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");	/* in place: keeps owner and mode */
	ck_assert_msg(f != NULL, "open %s", path);
	ck_assert_int_eq(fputs(text, f) >= 0, 1);
	ck_assert_int_eq(fclose(f), 0);
}

/* The harness's ini with an extra [databases] line and extra main keys appended. */
static void write_ini(struct pgv *p, const char *orig, const char *db_line, const char *main_keys)
{
	const char *marker = "[databases]\n";
	const char *at = strstr(orig, marker);
	ck_assert_ptr_nonnull(at);
	size_t head = (size_t)(at - orig) + strlen(marker);
	size_t size = strlen(orig) + (db_line ? strlen(db_line) : 0) + (main_keys ? strlen(main_keys) : 0) + 1;
	char *text = malloc(size);
	ck_assert_ptr_nonnull(text);
	snprintf(text, size, "%.*s%s%s%s", (int)head, orig, db_line ? db_line : "", orig + head,
		 main_keys ? main_keys : "");
	write_text(p->ini, text);
	free(text);
}

/*
 * pgbench (50 clients, 20 s) while the config changes under it and SIGHUP
 * arrives 10 times: no failed transaction, and the changes show: the pool
 * grows to the new default_pool_size, a new database serves, a changed
 * auth_file password works and the old one no longer does.
 */
START_TEST(reload_under_pgbench)
{
	struct pgv p;
	char out[700], authfile[700], port[16], newdb[256];
	pgv_start(&p, TXN "default_pool_size = 5\nmax_client_conn = 200\n", std_databases(), userlist());
	snprintf(out, sizeof(out), "%s/pgbench.out", p.dir);
	snprintf(authfile, sizeof(authfile), "%s/userlist.txt", p.dir);
	snprintf(port, sizeof(port), "%d", p.port);
	snprintf(newdb, sizeof(newdb), "newdb = host=127.0.0.1 port=%d dbname=pgvtest\n", pg_port_env());
	char *orig_ini = strdup(read_file_tail(p.ini, 16000));
	ck_assert_ptr_nonnull(orig_ini);
	char users2[1024];
	snprintf(users2, sizeof(users2), "%s\"admin_u\" \"admin_pass\"\n\"stats_u\" \"stats_pass2\"\n"
		 "\"plain_u\" \"plain_pass\"\n", std_userlist());

	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		char *env[] = { "PGPASSWORD=bench_pass", "PGSSLMODE=disable", NULL };
		char *argv[] = { "pgbench", "-n", "-M", "simple", "-c", "50", "-j", "2", "-T", "20", "-h", "127.0.0.1",
				 "-p", port, "-U", "pgbench_user", DB, NULL };
		_exit(run_program(argv, env, out, 90) == 0 ? 0 : 1);
	}
	/*
	 * Pacing: a SIGHUP every 1.5 s over pgbench's 20 s. The pool is sampled
	 * from 1 s after the reload to 8 until pgbench ends: a reload late on a
	 * loaded machine still leaves over ten seconds for the pool to grow.
	 */
	int sent = 0, most_before = 0, most_after = 0, status = 0;
	double next = now_s() + 1.5, grown_from = 0;
	for (;;) {
		if (waitpid(pid, &status, WNOHANG) == pid)
			break;
		if (sent < 10 && now_s() >= next) {
			if (sent == 2)
				write_ini(&p, orig_ini, NULL, "default_pool_size = 8\n");
			else if (sent == 4)
				write_ini(&p, orig_ini, newdb, "default_pool_size = 8\n");
			else if (sent == 6)
				write_text(authfile, users2);
			ck_assert_int_eq(kill(p.pid, SIGHUP), 0);
			sent++;
			next += 1.5;
			if (sent == 3)
				grown_from = now_s() + 1.0;
		}
		int n = pg_count_backends("pgbench_user");
		if (sent < 3 && n > most_before)
			most_before = n;
		if (grown_from && now_s() >= grown_from && n > most_after)
			most_after = n;
		usleep(100 * 1000);
	}
	const char *text = read_file_tail(out, 8000);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "pgbench failed:\n%s\n%s", text,
		      pgv_log_tail(&p, 2000));
	const char *s = strstr(text, "number of failed transactions: ");
	ck_assert_msg(s && strtol(s + strlen("number of failed transactions: "), NULL, 10) == 0,
		      "failed transactions:\n%s", text);
	s = strstr(text, "number of transactions actually processed: ");
	ck_assert_msg(s && strtol(s + strlen("number of transactions actually processed: "), NULL, 10) > 0,
		      "no transactions:\n%s", text);
	ck_assert_int_eq(sent, 10);
	ck_assert_msg(pgv_running(&p), "pgvalve died during the reloads\n%s", pgv_log_tail(&p, 1500));
	ck_assert_int_eq(pgv_log_count(&p, "got SIGHUP"), 10);
	ck_assert_msg(most_before >= 1 && most_before <= 5, "%d servers with default_pool_size = 5", most_before);
	ck_assert_msg(most_after > 5 && most_after <= 8, "%d servers after default_pool_size = 8", most_after);

	/* the changes are visible */
	PGconn *a = admin_conn(&p);
	ck_assert_str_eq(config_value(a, "default_pool_size"), "8");
	ck_assert_str_eq(show_value(a, "SHOW DATABASES", "name", DB, "pool_size"), "8");
	ck_assert_str_eq(show_value(a, "SHOW DATABASES", "name", "newdb", "database"), DB);
	PGconn *c = connect_ok(&p, "newdb", "scram_user", "scram_pass");
	ck_assert_str_eq(query_value(c, "SELECT current_database()"), DB);
	PQfinish(c);
	struct raw_error err;
	ck_assert_int_eq(raw_login(p.port, "pgbouncer", "stats_u", "stats_pass2", &err), 0);
	ck_assert_int_eq(raw_login(p.port, "pgbouncer", "stats_u", "stats_pass", &err), -1);
	ck_assert_msg(strstr(err.message, "password authentication failed"), "%s", err.message);

	/* RELOAD from the console */
	write_ini(&p, orig_ini, newdb, "default_pool_size = 9\n");
	admin_ok(a, "RELOAD", "RELOAD");
	ck_assert_str_eq(config_value(a, "default_pool_size"), "9");
	ck_assert(pgv_log_contains(&p, "RELOAD command issued"));
	PQfinish(a);
	free(orig_ini);
	pgv_stop(&p);
}
END_TEST

/* An unknown key (a typo) on reload: refused like any broken line, the running config kept, the log says why. */
START_TEST(reload_unknown_key_keeps_old)
{
	struct pgv p;
	pgv_start(&p, TXN "default_pool_size = 4\n", std_databases(), userlist());
	PGconn *a = admin_conn(&p);
	char *orig = strdup(read_file_tail(p.ini, 16000));
	ck_assert_ptr_nonnull(orig);
	int lines = 0;
	for (const char *q = orig; *q; q++)
		lines += *q == '\n';
	size_t size = strlen(orig) + 128;
	char *bad = malloc(size);
	ck_assert_ptr_nonnull(bad);
	snprintf(bad, size, "%sdefault_pool_size = 6\nmax_client_con = 50\n", orig);
	write_text(p.ini, bad);
	pgv_reload(&p);
	char why[1000];
	snprintf(why, sizeof(why),
		 "reload failed, keeping the running configuration: %s:%d: unknown parameter \"max_client_con\" "
		 "(did you mean max_client_conn?)", p.ini, lines + 2);
	pgv_expect_log(&p, why, 5);
	ck_assert(pgv_running(&p));
	ck_assert_str_eq(config_value(a, "default_pool_size"), "4");
	free(bad);
	free(orig);
	PQfinish(a);
	pgv_stop(&p);
}
END_TEST

/* A broken config on reload: the old one keeps serving; RELOAD says F0000, the log says file:line. */
START_TEST(reload_broken_config_keeps_old)
{
	struct pgv p;
	pgv_start(&p, TXN "default_pool_size = 4\n", std_databases(), userlist());
	PGconn *a = admin_conn(&p);
	PGconn *c = client_conn(&p);
	ck_assert_str_eq(query_value(c, "SELECT 1"), "1");
	char *orig = strdup(read_file_tail(p.ini, 16000));
	ck_assert_ptr_nonnull(orig);
	int lines = 0;
	for (const char *q = orig; *q; q++)
		lines += *q == '\n';
	ck_assert_msg(orig[strlen(orig) - 1] == '\n', "the ini does not end with a newline");

	size_t size = strlen(orig) + 128;
	char *bad = malloc(size);
	ck_assert_ptr_nonnull(bad);
	snprintf(bad, size, "%sdefault_pool_size = 6\nthis line is garbage\n", orig);
	write_text(p.ini, bad);
	char where[800];
	snprintf(where, sizeof(where), "%s:%d", p.ini, lines + 2);

	admin_err(a, "RELOAD", "F0000", "RELOAD failed, see logs for additional details");
	ck_assert_msg(pgv_log_contains(&p, where), "no '%s' in the log\n%s", where, pgv_log_tail(&p, 1500));
	ck_assert_str_eq(config_value(a, "default_pool_size"), "4");
	ck_assert_str_eq(query_value(c, "SELECT 'old config serves'"), "old config serves");
	PGconn *d = client_conn(&p);
	ck_assert_str_eq(query_value(d, "SELECT 'new login'"), "new login");
	PQfinish(d);

	/* SIGHUP with the same broken file: still running, still the old config */
	int errors = pgv_log_count(&p, where);
	ck_assert_int_eq(kill(p.pid, SIGHUP), 0);
	/* a reload is milliseconds of parsing; 3 s for the error's log line is slack on a loaded machine */
	double deadline = now_s() + 3;
	while (pgv_log_count(&p, where) == errors && now_s() < deadline)
		usleep(50 * 1000);
	ck_assert_msg(pgv_log_count(&p, where) > errors, "SIGHUP did not report '%s'", where);
	ck_assert(pgv_running(&p));
	ck_assert_str_eq(config_value(a, "default_pool_size"), "4");
	ck_assert_str_eq(query_value(c, "SELECT 2"), "2");

	/* fixed: RELOAD applies it */
	snprintf(bad, size, "%sdefault_pool_size = 6\n", orig);
	write_text(p.ini, bad);
	admin_ok(a, "RELOAD", "RELOAD");
	ck_assert_str_eq(config_value(a, "default_pool_size"), "6");
	ck_assert_str_eq(query_value(c, "SELECT 3"), "3");
	free(bad);
	free(orig);
	PQfinish(c);
	PQfinish(a);
	pgv_stop(&p);
}
END_TEST

/* ================================================================ single spec points */

/* DISABLE: login fails after authentication with FATAL 08P01 'database "<db>" is disabled'. */
START_TEST(spec_disabled_database_message)
{
	struct pgv p;
	struct raw_error err;
	pgv_start(&p, TXN, std_databases(), userlist());
	PGconn *a = admin_conn(&p);
	admin_ok(a, "DISABLE pgvtest", "DISABLE");
	/* wrong password: authentication fails first */
	ck_assert_int_eq(raw_login(p.port, DB, "md5_user", "wrong", &err), -1);
	ck_assert_msg(strstr(err.message, "password authentication failed"), "wrong password on a disabled db: %s",
		      err.message);
	ck_assert_int_eq(raw_login(p.port, DB, "md5_user", "md5_pass", &err), -1);
	ck_assert_str_eq(err.severity, "FATAL");
	ck_assert_str_eq(err.sqlstate, "08P01");
	ck_assert_str_eq(err.message, "database \"pgvtest\" is disabled");
	PQfinish(a);
	pgv_stop(&p);
}
END_TEST

/* A global PAUSE is not a per-database pause: SHOW DATABASES paused stays 0, RESUME db says so. */
START_TEST(spec_global_pause_keeps_db_flags)
{
	struct pgv p;
	pgv_start(&p, TXN, std_databases(), userlist());
	PGconn *a = admin_conn(&p);
	admin_ok(a, "PAUSE", "PAUSE");
	ck_assert_str_eq(state_value(a, "paused"), "yes");
	ck_assert_str_eq(show_value(a, "SHOW DATABASES", "name", DB, "paused"), "0");
	admin_err(a, "RESUME pgvtest", "08P01", "database pgvtest is not paused");
	admin_ok(a, "RESUME", "RESUME");
	PQfinish(a);
	pgv_stop(&p);
}
END_TEST

/* KILL frees the database's pools: they leave SHOW POOLS and their counters leave SHOW STATS. */
START_TEST(spec_kill_frees_pool)
{
	struct pgv p;
	pgv_start(&p, TXN, std_databases(), userlist());
	PGconn *a = admin_conn(&p);
	PGconn *c = client_conn(&p);
	ck_assert_str_eq(query_value(c, "SELECT 1"), "1");
	PGresult *r = show(a, "SHOW POOLS");
	ck_assert_int_ge(find_row(r, "database", DB), 0);
	PQclear(r);
	admin_ok(a, "KILL pgvtest", "KILL");
	r = show(a, "SHOW POOLS");
	ck_assert_msg(find_row(r, "database", DB) < 0, "SHOW POOLS still has a pgvtest pool after KILL");
	PQclear(r);
	r = show(a, "SHOW STATS");
	ck_assert_msg(find_row(r, "database", DB) < 0, "SHOW STATS still has a pgvtest row after KILL");
	PQclear(r);
	PQfinish(c);
	PQfinish(a);
	pgv_stop(&p);
}
END_TEST

/* SET looks the key up case-sensitively (Default_Pool_Size is no key) and takes no time units. */
START_TEST(spec_set_key_case_sensitive)
{
	struct pgv p;
	pgv_start(&p, TXN, std_databases(), userlist());
	PGconn *a = admin_conn(&p);
	admin_err(a, "SET server_lifetime = '2min'", "08P01", "SET failed");
	ck_assert_str_eq(config_value(a, "server_lifetime"), "3600");
	admin_err(a, "SET Default_Pool_Size = 5", "08P01", "SET failed");
	ck_assert_str_eq(config_value(a, "default_pool_size"), "20");
	PQfinish(a);
	pgv_stop(&p);
}
END_TEST



/* A CancelRequest from the console waiting for PAUSE does a full RESUME. */
START_TEST(spec_cancel_of_pause_resumes)
{
	struct pgv p;
	pgv_start(&p, TXN "default_pool_size = 2\n", std_databases(), userlist());
	PGconn *a = admin_conn(&p), *a2 = admin_conn(&p);
	PGconn *h = client_conn(&p), *n = client_conn(&p);
	exec_ok(h, "BEGIN");
	send_query(a, "PAUSE");
	still_waiting(a, 300, "PAUSE with a server in a transaction");
	send_query(n, "SELECT 'n'");
	still_waiting(n, 300, "query during PAUSE");
	char errbuf[256];
	PGcancel *cancel = PQgetCancel(a);
	ck_assert_ptr_nonnull(cancel);
	ck_assert_int_eq(PQcancel(cancel, errbuf, sizeof(errbuf)), 1);
	PQfreeCancel(cancel);
	expect_async_value(n, 3000, "query after the console cancelled its PAUSE", "n");
	ck_assert_str_eq(state_value(a2, "active"), "yes");
	exec_ok(h, "COMMIT");
	PQfinish(h);
	PQfinish(n);
	PQfinish(a2);
	PQfinish(a);
	pgv_stop(&p);
}
END_TEST

/* 1.25 (#1305): SHUTDOWN WAIT_FOR_CLIENTS closes the TCP listeners only; admins still get in over the Unix socket. */
START_TEST(spec_shutdown_keeps_unix_socket)
{
	struct pgv p;
	char conninfo[900];
	pgv_start(&p, TXN, std_databases(), userlist());
	PGconn *a = admin_conn(&p);
	PGconn *c = client_conn(&p);
	admin_ok(a, "SHUTDOWN WAIT_FOR_CLIENTS", "SHUTDOWN");
	usleep(200 * 1000);	/* margin only: the listeners close in the same callback as the reply */
	PGconn *late = pgv_connect(&p, DB, "scram_user", "scram_pass");
	ck_assert_int_eq(PQstatus(late), CONNECTION_BAD);	/* TCP is closed */
	PQfinish(late);
	snprintf(conninfo, sizeof(conninfo), "host=%s port=%d dbname=pgbouncer user=admin_u password=admin_pass "
		 "connect_timeout=5", p.dir, p.port);
	PGconn *u = PQconnectdb(conninfo);
	ck_assert_msg(PQstatus(u) == CONNECTION_OK, "admin over the Unix socket during shutdown: %s", PQerrorMessage(u));
	ck_assert_str_eq(state_value(u, "active"), "yes");
	PQfinish(u);
	PQfinish(c);
	PQfinish(a);
	pgv_stop(&p);
}
END_TEST

/* auth_type = any: every name reaches the console, with stats rights unless in admin_users. */
START_TEST(spec_auth_type_any_console)
{
	struct pgv p;
	pgv_start(&p, "auth_type = any\nadmin_users = admin_u\nstats_users = stats_u\n", std_databases(), userlist());
	PGconn *w = pgv_connect(&p, "pgbouncer", "whoever", NULL);
	ck_assert_msg(PQstatus(w) == CONNECTION_OK, "auth_type any, console as 'whoever': %s", PQerrorMessage(w));
	PQsetNoticeReceiver(w, quiet_notice, NULL);
	ck_assert_str_eq(state_value(w, "active"), "yes");
	admin_err(w, "PAUSE", "08P01", "admin access needed");
	PGconn *a = pgv_connect(&p, "pgbouncer", "admin_u", NULL);
	ck_assert_int_eq(PQstatus(a), CONNECTION_OK);
	send_query(a, "PAUSE");
	expect_async_tag(a, 3000, "PAUSE", "PAUSE");
	admin_ok(a, "RESUME", "RESUME");
	/* the login becomes the console's forced user */
	char port[16];
	snprintf(port, sizeof(port), "%d", local_port(w));
	ck_assert_str_eq(show_value(a, "SHOW CLIENTS", "port", port, "user"), "pgbouncer");
	PQfinish(a);
	PQfinish(w);
	pgv_stop(&p);
}
END_TEST

static Suite *admin_control_suite(void)
{
	Suite *s = suite_create("admin_control");
	TCase *tc;

	tc = pgv_tcase_create("control", 30);
	tcase_add_test(tc, pause_waits_for_servers_resume_releases);
	tcase_add_test(tc, pause_one_database);
	tcase_add_test(tc, disable_enable);
	tcase_add_test(tc, kill_database);
	tcase_add_test(tc, reconnect_and_wait_close);
	tcase_add_test(tc, kill_client_by_id);
	tcase_add_test(tc, set_changes_config_and_pools);
	tcase_add_test(tc, sigusr1_pause_sigusr2_resume);
	suite_add_tcase(s, tc);

	tc = pgv_tcase_create("shutdown", 30);
	tcase_add_test(tc, shutdown_wait_for_clients);
	tcase_add_test(tc, shutdown_wait_for_servers);
	tcase_add_test(tc, shutdown_immediate);
	tcase_add_test(tc, sigint_shutdown_ignores_sigusr2);
	suite_add_tcase(s, tc);

	tc = pgv_tcase_create("reload", 30);
	tcase_add_test(tc, reload_broken_config_keeps_old);
	tcase_add_test(tc, reload_unknown_key_keeps_old);
	suite_add_tcase(s, tc);

	tc = pgv_tcase_create("reload_under_load", 75);
	tcase_add_test(tc, reload_under_pgbench);
	suite_add_tcase(s, tc);

	tc = pgv_tcase_create("spec", 30);
	tcase_add_test(tc, spec_disabled_database_message);
	tcase_add_test(tc, spec_global_pause_keeps_db_flags);
	tcase_add_test(tc, spec_kill_frees_pool);
	tcase_add_test(tc, spec_set_key_case_sensitive);
	tcase_add_test(tc, spec_cancel_of_pause_resumes);
	tcase_add_test(tc, spec_auth_type_any_console);
	tcase_add_test(tc, spec_shutdown_keeps_unix_socket);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return pgv_run_suite(admin_control_suite());
}
