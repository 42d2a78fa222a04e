/*
 * test_shared_pool.c - workers = N as one pooler: pool_size,
 * min_pool_size and max_client_conn hold for the instance, PostgreSQL
 * sees at most pool_size connections of a pool however the clients spread
 * over the workers, a client waiting in one worker is served while
 * another holds the idle servers (of its pool, or of its database or user
 * at max_db_connections / max_user_connections), and a worker killed with
 * SIGKILL gives its budget back.
 */
#include "harness.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define DB "pgvtest"
#define USER "pgbench_user"
#define PASS "bench_pass"
#define BASE "auth_type = md5\npool_mode = transaction\nadmin_users = " USER "\n"
#define MAX_W 8

/* Worker k's private socket directory (workers.h). */
static void worker_dir(const struct pgv *p, int k, char *buf, size_t size)
{
	snprintf(buf, size, "%s/pgvalve-%d-%d-w%d", p->dir, p->port, (int)p->pid, k);
}

static PGconn *login_as(const char *host, int port, const char *dbname, const char *user, const char *password)
{
	char portbuf[16];
	snprintf(portbuf, sizeof(portbuf), "%d", port);
	const char *kw[] = { "host", "port", "dbname", "user", "password", "sslmode", "connect_timeout", NULL };
	const char *val[] = { host, portbuf, dbname, user, password, "disable", "10", NULL };
	PGconn *c = PQconnectdbParams(kw, val, 0);
	ck_assert_msg(c && PQstatus(c) == CONNECTION_OK, "%s at %s:%d: %s", dbname, host, port,
		      c ? PQerrorMessage(c) : "out of memory");
	return c;
}

static PGconn *login_at(const char *host, int port, const char *dbname)
{
	return login_as(host, port, dbname, USER, PASS);
}

static PGconn *worker_login_as(struct pgv *p, int k, const char *dbname, const char *user, const char *password)
{
	char dir[700];
	worker_dir(p, k, dir, sizeof(dir));
	return login_as(dir, p->port, dbname, user, password);
}

static PGconn *worker_login(struct pgv *p, int k, const char *dbname)
{
	return worker_login_as(p, k, dbname, USER, PASS);
}

/* Worker k's pid from SHOW WORKERS once all n run (0 while not yet). */
static void wait_running(struct pgv *p, int n, int *pids)
{
	/* a worker is a fork that listens in milliseconds; 10 s covers a restart too on a loaded 2-core machine */
	double deadline = now_s() + 10;
	for (;;) {
		PGconn *c = login_at("127.0.0.1", p->port, "pgbouncer");
		PGresult *r = PQexec(c, "SHOW WORKERS");
		ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
		int running = 0;
		for (int i = 0; i < n && i < PQntuples(r) - 1; i++) {
			pids[i] = atoi(PQgetvalue(r, i, PQfnumber(r, "pid")));
			running += strcmp(PQgetvalue(r, i, PQfnumber(r, "state")), "running") == 0 && pids[i] > 0;
		}
		PQclear(r);
		PQfinish(c);
		if (running == n)
			return;
		ck_assert_msg(now_s() < deadline, "only %d of %d workers running\n%s", running, n, pgv_log_tail(p, 1500));
		sleep_ms(100);
	}
}

/* Whether c's pending query ends within timeout_s; its results are discarded, the last status kept. */
static bool finished_within(PGconn *c, double timeout_s, ExecStatusType *status)
{
	double deadline = now_s() + timeout_s;
	while (now_s() < deadline) {
		ck_assert_int_eq(PQconsumeInput(c), 1);
		if (!PQisBusy(c)) {
			PGresult *r;
			*status = PGRES_FATAL_ERROR;
			while ((r = PQgetResult(c)) != NULL) {
				*status = PQresultStatus(r);
				PQclear(r);
			}
			return true;
		}
		sleep_ms(10);
	}
	return false;
}

static long pgbench_number(const char *text, const char *label)
{
	const char *s = strstr(text, label);
	return s ? strtol(s + strlen(label), NULL, 10) : -1;
}

/* pgbench -S with `clients` clients for `secs` seconds through host (an address, or a worker's socket directory). */
static pid_t pgbench_start(struct pgv *p, const char *host, const char *clients, const char *secs)
{
	char out[700], port[16];
	snprintf(out, sizeof(out), "%s/pgbench.out", p->dir);
	snprintf(port, sizeof(port), "%d", p->port);
	char *env[] = { "PGPASSWORD=" PASS, "PGSSLMODE=disable", NULL };
	char *argv[] = { "pgbench", "-n", "-S", "-c", (char *)clients, "-j", "2", "-T", (char *)secs, "-h", (char *)host,
			 "-p", port, "-U", USER, DB, NULL };
	pid_t bench = fork();
	ck_assert_int_ge(bench, 0);
	if (bench == 0)
		_exit(run_program(argv, env, out, 60));
	return bench;
}

/*
 * Until pgbench_start's pgbench ends, sampling pg_stat_activity every
 * 20 ms: fails the test unless pgbench ran transactions, none failed, and
 * enough samples were taken; the most connections PostgreSQL showed at
 * once go to *most.
 */
static void pgbench_finish(struct pgv *p, pid_t bench, int *most)
{
	char out[700];
	snprintf(out, sizeof(out), "%s/pgbench.out", p->dir);
	int samples = 0, status;
	*most = 0;
	while (waitpid(bench, &status, WNOHANG) == 0) {
		int n = pg_count_backends(USER);
		*most = n > *most ? n : *most;
		samples++;
		sleep_ms(20);
	}
	const char *text = read_file_tail(out, 8000);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "pgbench exit status %d:\n%s\n%s",
		      WIFEXITED(status) ? WEXITSTATUS(status) : -1, text, pgv_log_tail(p, 2000));
	ck_assert_msg(pgbench_number(text, "number of failed transactions: ") == 0, "failed transactions:\n%s", text);
	ck_assert_msg(pgbench_number(text, "number of transactions actually processed: ") > 0, "none:\n%s", text);
	ck_assert_msg(samples > 25, "only %d samples", samples);	/* 46 seen at load 10 */
}

static void pgbench_sampled(struct pgv *p, const char *clients, const char *secs, int *most)
{
	pgbench_finish(p, pgbench_start(p, "127.0.0.1", clients, secs), most);
}

/* Every one of n workers served transactions (SHOW WORKERS through the shared port). */
static void assert_every_worker_served(struct pgv *p, int n)
{
	PGconn *c = login_at("127.0.0.1", p->port, "pgbouncer");
	PGresult *r = PQexec(c, "SHOW WORKERS");
	ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
	for (int i = 0; i < n; i++)
		ck_assert_msg(atol(PQgetvalue(r, i, PQfnumber(r, "total_xact_count"))) > 0, "worker %d served nothing",
			      i + 1);
	PQclear(r);
	PQfinish(c);
}

/* ---------------------------------------------------------------- tests */

/*
 * workers = 4, default_pool_size = 3: 40 pgbench clients spread over the
 * workers never make PostgreSQL see more than 3 connections, and none fails.
 */
START_TEST(pool_size_holds_for_the_instance)
{
	struct pgv p = { 0 };
	int pids[MAX_W], most;
	pgv_start(&p, BASE "workers = 4\ndefault_pool_size = 3\nmax_client_conn = 200\n", std_databases(),
		  std_userlist());
	wait_running(&p, 4, pids);
	pgbench_sampled(&p, "40", "8", &most);
	ck_assert_msg(most <= 3, "PostgreSQL saw %d connections of a pool of 3\n%s", most, pgv_log_tail(&p, 2000));
	ck_assert_msg(most >= 1, "no server connection seen");
	/* Every worker took clients, so the budget did go round. */
	assert_every_worker_served(&p, 4);
	pgv_stop(&p);
}
END_TEST

/*
 * workers = 2, default_pool_size = 6, 24 clients keeping both workers
 * busy: once the budget has split between them, it stays put. It used to
 * change hands 10 to 30 times a second, a server logout and login each
 * time (a worker whose queue was empty for a moment gave one away and
 * asked for one back; one holding one more than the other gave, and the
 * difference swung back).
 */
START_TEST(saturated_pool_does_not_churn)
{
	struct pgv p = { 0 };
	int pids[MAX_W], most;
	pgv_start(&p, BASE "workers = 2\ndefault_pool_size = 6\nmax_client_conn = 200\n", std_databases(),
		  std_userlist());
	wait_running(&p, 2, pids);
	pgbench_sampled(&p, "24", "6", &most);
	ck_assert_msg(most <= 6, "PostgreSQL saw %d connections of a pool of 6\n%s", most, pgv_log_tail(&p, 2000));
	int given = pgv_log_count(&p, "given back for another worker's waiting clients") +
		    pgv_log_count(&p, "handed over to worker");
	/* The first split may move a few servers (one worker may have logged in all six first). */
	ck_assert_msg(given <= 6, "%d servers changed workers in 6 s of saturation\n%s", given, pgv_log_tail(&p, 3000));
	assert_every_worker_served(&p, 2);
	pgv_stop(&p);
}
END_TEST

/* c's query (SELECT of its text) is answered within 1 s, worker k's client waiting for a server another holds. */
static void served_at_once(struct pgv *p, PGconn *c, int k, const char *text)
{
	char sql[128];
	ExecStatusType st;
	snprintf(sql, sizeof(sql), "SELECT '%s'", text);
	double t0 = now_s();
	ck_assert_int_eq(PQsendQuery(c, sql), 1);
	ck_assert_msg(finished_within(c, 3.0, &st), "worker %d's client still waits\n%s", k, pgv_log_tail(p, 2000));
	ck_assert_int_eq(st, PGRES_TUPLES_OK);
	double waited = now_s() - t0;
	ck_assert_msg(waited < pgv_time_bound(1.0, 2.9), "worker %d's client waited %.3f s", k, waited);
}

/*
 * pool_size = 1, workers = 2: worker 1 holds the one server, idle; a
 * client of worker 2 is served at once, by the budget worker 1 gives back.
 */
START_TEST(waiting_client_gets_an_idle_server_of_another_worker)
{
	struct pgv p = { 0 };
	int pids[MAX_W];
	pgv_start(&p, BASE "workers = 2\ndefault_pool_size = 1\n", std_databases(), std_userlist());
	wait_running(&p, 2, pids);
	PGconn *a = worker_login(&p, 1, DB);
	ck_assert_str_eq(query_value(a, "SELECT 'from worker 1'"), "from worker 1");
	ck_assert_int_eq(pg_wait_backends(USER, 1, 5), 1);
	PGconn *b = worker_login(&p, 2, DB);
	for (int round = 0; round < 3; round++) {
		served_at_once(&p, b, 2, "from worker 2");
		ck_assert_int_le(pg_count_backends(USER), 1);
		/* and back: worker 1's client is served by the server worker 2 now holds idle */
		served_at_once(&p, a, 1, "from worker 1");
		ck_assert_int_le(pg_count_backends(USER), 1);
	}
	/* closed and logged in anew (a TLS server), or handed over (a plain one) */
	ck_assert(pgv_log_contains(&p, "given back for another worker's waiting clients") ||
		  pgv_log_contains(&p, "handed over to worker 2"));
	PQfinish(a);
	PQfinish(b);
	pgv_stop(&p);
}
END_TEST

/* The backend pid c's next query runs on, answered within 1 s (worker k's client). */
static int backend_pid_at_once(struct pgv *p, PGconn *c, int k)
{
	double t0 = now_s();
	int pid = atoi(query_value(c, "SELECT pg_backend_pid()"));
	double waited = now_s() - t0;
	ck_assert_msg(waited < 1.0, "worker %d's client waited %.3f s\n%s", k, waited, pgv_log_tail(p, 2000));
	ck_assert_int_gt(pid, 0);
	return pid;
}

#define PLAIN "server_tls_sslmode = disable\n"

/*
 * pool_size = 1, workers = 2, a plain server: the one backend serves the
 * clients of both workers, back and forth, handed over by socket: the
 * same backend pid answers each, PostgreSQL never sees a second
 * connection, and pgvalve logged in to it once.
 */
START_TEST(idle_server_handed_over_by_socket)
{
	struct pgv p = { 0 };
	int pids[MAX_W];
	pgv_start(&p, BASE PLAIN "workers = 2\ndefault_pool_size = 1\n", std_databases(), std_userlist());
	wait_running(&p, 2, pids);
	PGconn *a = worker_login(&p, 1, DB);
	int backend = backend_pid_at_once(&p, a, 1);
	PGconn *b = worker_login(&p, 2, DB);
	for (int round = 0; round < 3; round++) {
		ck_assert_int_eq(backend_pid_at_once(&p, b, 2), backend);
		ck_assert_int_le(pg_count_backends(USER), 1);
		ck_assert_int_eq(backend_pid_at_once(&p, a, 1), backend);
		ck_assert_int_le(pg_count_backends(USER), 1);
	}
	ck_assert_int_eq(pg_count_backends(USER), 1);
	ck_assert(pgv_log_contains(&p, "handed over to worker 2"));
	ck_assert(pgv_log_contains(&p, "handed over to worker 1"));
	ck_assert(pgv_log_contains(&p, "taken over from worker 1, no new login"));
	ck_assert_msg(pgv_log_count(&p, "new connection to server") == 1, "%d server logins\n%s",
		      pgv_log_count(&p, "new connection to server"), pgv_log_tail(&p, 3000));
	ck_assert(!pgv_log_contains(&p, "given back for another worker's waiting clients"));
	PQfinish(a);
	PQfinish(b);
	pgv_stop(&p);
}
END_TEST

/*
 * A server with TLS cannot leave its process: with server_tls_sslmode =
 * require, worker 2's client is served by a new login (another backend
 * pid), the old one closed first, as before hand-overs.
 */
START_TEST(tls_server_falls_back_to_a_new_login)
{
	if (!pgv_pg_serves_tls()) {
		fprintf(stderr, "tls_server_falls_back_to_a_new_login: PostgreSQL has no TLS here, skipped\n");
		return;
	}
	struct pgv p = { 0 };
	int pids[MAX_W];
	pgv_start(&p, BASE "server_tls_sslmode = require\nworkers = 2\ndefault_pool_size = 1\n", std_databases(),
		  std_userlist());
	wait_running(&p, 2, pids);
	PGconn *a = worker_login(&p, 1, DB);
	int first = backend_pid_at_once(&p, a, 1);
	ck_assert_str_eq(query_value(a, "SELECT ssl::text FROM pg_stat_ssl WHERE pid = pg_backend_pid()"), "true");
	PGconn *b = worker_login(&p, 2, DB);
	int second = backend_pid_at_once(&p, b, 2);
	ck_assert_int_ne(second, first);
	ck_assert_int_le(pg_count_backends(USER), 1);
	ck_assert(pgv_log_contains(&p, "given back for another worker's waiting clients"));
	ck_assert(!pgv_log_contains(&p, "handed over to worker"));
	PQfinish(a);
	PQfinish(b);
	pgv_stop(&p);
}
END_TEST

/*
 * A server handed over to a worker that dies before it reads it: the
 * supervisor closes the socket still in the dead worker's inbox, so
 * PostgreSQL loses that backend, the instance's count of it goes with
 * the worker's column, and the pool of 1 serves again in both workers.
 * Worker 1 is stopped while worker 2's client asks, worker 2 is stopped
 * before worker 1 resumes and hands the server over, then killed.
 */
START_TEST(handed_over_to_a_dying_worker)
{
	struct pgv p = { 0 };
	int pids[MAX_W];
	pgv_start(&p, BASE PLAIN "workers = 2\ndefault_pool_size = 1\nquery_wait_timeout = 30\n", std_databases(),
		  std_userlist());
	wait_running(&p, 2, pids);
	PGconn *a = worker_login(&p, 1, DB);
	PGconn *b = worker_login(&p, 2, DB);
	int backend = backend_pid_at_once(&p, a, 1);	/* the server is worker 1's, idle */
	int handed = pgv_log_count(&p, "handed over to worker 2");
	ck_assert_int_eq(kill(pids[0], SIGSTOP), 0);
	ck_assert_int_eq(PQsendQuery(b, "SELECT 'b'"), 1);
	/*
	 * worker 2 asks, and keeps asking every tick. A fixed wait the verdict
	 * rests on: if a loaded machine keeps worker 2 from asking within 150 ms,
	 * it is stopped with nothing asked and worker 1 hands nothing over. No
	 * log line or console row shows the ask; 150 ms is many times the
	 * milliseconds it takes.
	 */
	sleep_ms(150);
	ck_assert_int_eq(kill(pids[1], SIGSTOP), 0);
	ck_assert_int_eq(kill(pids[0], SIGCONT), 0);
	/* worker 1 sees the ask at its next tick (a third of a second); 5 s leaves a loaded machine plenty */
	double deadline = now_s() + 5;
	while (pgv_log_count(&p, "handed over to worker 2") == handed && now_s() < deadline)
		sleep_ms(10);
	ck_assert_msg(pgv_log_count(&p, "handed over to worker 2") > handed, "worker 1 handed nothing over\n%s",
		      pgv_log_tail(&p, 2000));
	ck_assert_int_eq(kill(pids[1], SIGKILL), 0);
	pgv_expect_log(&p, "server connections handed over to worker 2 as it died", 5);
	/* The backend that was in flight leaves PostgreSQL: closed, not kept open by anyone. */
	ck_assert_msg(pg_wait_backends(USER, 0, 5) == 0, "backend %d still there\n%s", backend, pgv_log_tail(&p, 2000));
	PQfinish(b);	/* its worker died with it */
	/* Worker 1's client is served within the pool of 1 again (its budget was not lost), and so is the new worker 2. */
	int again = atoi(query_value(a, "SELECT pg_backend_pid()"));
	ck_assert_int_ne(again, backend);
	int now[MAX_W];
	wait_running(&p, 2, now);
	PGconn *b2 = worker_login(&p, 2, DB);
	ck_assert_int_eq(backend_pid_at_once(&p, b2, 2), again);
	ck_assert_int_le(pg_count_backends(USER), 1);
	PQfinish(a);
	PQfinish(b2);
	pgv_stop(&p);
}
END_TEST

/*
 * Eight workers on a pool of 3 with max_db_connections = 3 and
 * server_lifetime = 1: pgbench's 40 clients spread over them while
 * servers open, close (lifetime) and move between workers all the time;
 * PostgreSQL, sampled every 20 ms, never shows more than 3, and servers
 * were handed over.
 */
START_TEST(eight_workers_open_close_and_hand_over_within_limits)
{
	struct pgv p = { 0 };
	int pids[MAX_W], most;
	pgv_start(&p, BASE PLAIN "workers = 8\ndefault_pool_size = 3\nmax_db_connections = 3\nserver_lifetime = 1\n"
		  "max_client_conn = 200\nquery_wait_timeout = 30\n", std_databases(), std_userlist());
	wait_running(&p, 8, pids);
	pgbench_sampled(&p, "40", "8", &most);
	ck_assert_msg(most <= 3, "PostgreSQL saw %d connections of a pool of 3\n%s", most, pgv_log_tail(&p, 2000));
	ck_assert_msg(most >= 1, "no server connection seen");
	int handed = pgv_log_count(&p, "handed over to worker");
	int logins = pgv_log_count(&p, "new connection to server");
	ck_assert_msg(handed > 0, "no hand-over in 8 s\n%s", pgv_log_tail(&p, 2000));
	ck_assert_msg(logins > 3, "only %d logins: server_lifetime closed nothing", logins);
	/* so_reuseport's hash may leave a worker without clients: most of them served */
	PGconn *c = login_at("127.0.0.1", p.port, "pgbouncer");
	PGresult *r = PQexec(c, "SHOW WORKERS");
	ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
	int served = 0;
	for (int i = 0; i < 8; i++)
		served += atol(PQgetvalue(r, i, PQfnumber(r, "total_xact_count"))) > 0;
	/* The workers' lockings of the shared table: servers opened, closed and handed over took some. */
	long long lockings = atoll(PQgetvalue(r, 8, PQfnumber(r, "table_lockings")));
	long long waits = atoll(PQgetvalue(r, 8, PQfnumber(r, "table_lock_waits")));
	ck_assert_str_eq(PQgetvalue(r, 8, PQfnumber(r, "worker")), "total");
	ck_assert_msg(lockings >= logins, "%lld lockings for %d logins", lockings, logins);
	ck_assert_msg(waits <= lockings, "%lld lock waits of %lld lockings", waits, lockings);
	PQclear(r);
	PQfinish(c);
	fprintf(stderr, "8 workers: %d hand-overs, %d logins, at most %d connections, %d workers served\n", handed,
		logins, most, served);
	ck_assert_msg(served >= 4, "only %d of 8 workers served", served);
	pgv_stop(&p);
}
END_TEST

/*
 * The one server max_db_connections (or max_user_connections) allows
 * sits idle in worker 1, in another pool of the database (of the user):
 * worker 2's client is served at once by the server worker 1 gives back,
 * and back again; PostgreSQL never sees two. a_db / a_user: worker 1's
 * pool; worker 2's is b_db and USER.
 */
static void limit_handed_across_workers(const char *extra, const char *databases, const char *a_db,
					const char *a_user, const char *a_pass, const char *b_db)
{
	struct pgv p = { 0 };
	int pids[MAX_W];
	char ini[512];
	snprintf(ini, sizeof(ini), BASE "workers = 2\ndefault_pool_size = 2\nquery_wait_timeout = 20\n%s", extra);
	pgv_start(&p, ini, databases, std_userlist());
	wait_running(&p, 2, pids);
	bool two_users = strcmp(a_user, USER) != 0;
	PGconn *a = worker_login_as(&p, 1, a_db, a_user, a_pass);
	PGconn *b = worker_login_as(&p, 2, b_db, USER, PASS);
	for (int round = 0; round < 3; round++) {
		served_at_once(&p, a, 1, "from worker 1");
		served_at_once(&p, b, 2, "from worker 2");
		int backends = pg_count_backends(USER) + (two_users ? pg_count_backends(a_user) : 0);
		ck_assert_msg(backends <= 1, "round %d: %d backends over a limit of 1", round, backends);
	}
	ck_assert(pgv_log_contains(&p, "given back for another worker's waiting clients"));
	PQfinish(a);
	PQfinish(b);
	pgv_stop(&p);
}

START_TEST(max_db_connections_handed_across_workers)
{
	limit_handed_across_workers("max_db_connections = 1\n", std_databases(), DB, "md5_user", "md5_pass", DB);
}
END_TEST

/*
 * default_pool_size = 10 but max_db_connections = 2, workers = 2: pgbench
 * keeps both servers busy through worker 1's socket; a client of worker 2
 * is still served within a second (a server is given back as it is
 * released, as for pool_size), and PostgreSQL never sees more than 2.
 */
START_TEST(busy_database_limit_is_shared)
{
	struct pgv p = { 0 };
	int pids[MAX_W], most;
	char dir[700];
	pgv_start(&p, BASE "workers = 2\ndefault_pool_size = 10\nmax_db_connections = 2\nquery_wait_timeout = 20\n",
		  std_databases(), std_userlist());
	wait_running(&p, 2, pids);
	worker_dir(&p, 1, dir, sizeof(dir));
	pid_t bench = pgbench_start(&p, dir, "8", "5");
	/* pacing: pgbench (5 s) holds both servers by then; on a loaded machine later, which the bound below allows */
	sleep_ms(1500);
	double t0 = now_s();
	PGconn *b = worker_login(&p, 2, DB);
	/* its login needs a server too (the pool's first learns the server's parameters) */
	/* starved, it would wait for query_wait_timeout (20 s) */
	ck_assert_msg(now_s() - t0 < pgv_time_bound(1.0, 10), "worker 2's client took %.3f s to log in", now_s() - t0);
	for (int round = 0; round < 3; round++) {
		served_at_once(&p, b, 2, "from worker 2");
		ck_assert_int_le(pg_count_backends(USER), 2);
		sleep_ms(300);	/* pacing: three rounds spread over pgbench's run */
	}
	pgbench_finish(&p, bench, &most);
	ck_assert_msg(most <= 2, "PostgreSQL saw %d connections at max_db_connections = 2", most);
	PQfinish(b);
	pgv_stop(&p);
}
END_TEST

START_TEST(max_user_connections_handed_across_workers)
{
	char dbs[512];
	/* the same database under a second name: "pgvtest = host=... dbname=pgvtest" */
	snprintf(dbs, sizeof(dbs), "%spgv2%s", std_databases(), std_databases() + strlen(DB));
	limit_handed_across_workers("[users]\n" USER " = max_user_connections=1\n", dbs, DB, USER, PASS, "pgv2");
}
END_TEST

/* max_client_conn = 10 with 4 workers: the 11th client is refused, the console still answers. */
START_TEST(max_client_conn_holds_for_the_instance)
{
	struct pgv p = { 0 };
	int pids[MAX_W];
	PGconn *c[12];
	pgv_start(&p, BASE "workers = 4\nmax_client_conn = 10\n", std_databases(), std_userlist());
	wait_running(&p, 4, pids);
	/* Two on each worker's own socket, two more over TCP: every worker has clients. */
	int n = 0;
	for (int k = 1; k <= 4; k++) {
		c[n++] = worker_login(&p, k, DB);
		c[n++] = worker_login(&p, k, DB);
	}
	while (n < 10) {
		c[n] = pgv_connect(&p, DB, USER, PASS);
		ck_assert_msg(PQstatus(c[n]) == CONNECTION_OK, "client %d: %s", n + 1, PQerrorMessage(c[n]));
		n++;
	}
	for (int k = 1; k <= 4; k++) {
		char dir[700], portbuf[16];
		worker_dir(&p, k, dir, sizeof(dir));
		snprintf(portbuf, sizeof(portbuf), "%d", p.port);
		const char *kw[] = { "host", "port", "dbname", "user", "password", "sslmode", NULL };
		const char *val[] = { dir, portbuf, DB, USER, PASS, "disable", NULL };
		PGconn *extra = PQconnectdbParams(kw, val, 0);
		ck_assert_msg(PQstatus(extra) != CONNECTION_OK, "an 11th client got in through worker %d", k);
		ck_assert_msg(strstr(PQerrorMessage(extra), "max_client_conn"), "worker %d: %s", k, PQerrorMessage(extra));
		PQfinish(extra);
	}
	PGconn *admin = worker_login(&p, 3, "pgbouncer");
	PQfinish(admin);
	/* One leaves: one more may come, through any worker. */
	PQfinish(c[0]);
	/* the count is shared at the worker's next tick (a third of a second); 5 s leaves a loaded machine plenty */
	double deadline = now_s() + 5;
	PGconn *again;
	for (;;) {
		again = pgv_connect(&p, DB, USER, PASS);
		if (PQstatus(again) == CONNECTION_OK || now_s() > deadline)
			break;
		PQfinish(again);
		sleep_ms(50);
	}
	ck_assert_msg(PQstatus(again) == CONNECTION_OK, "no room after a client left: %s", PQerrorMessage(again));
	PQfinish(again);
	for (int i = 1; i < n; i++)
		PQfinish(c[i]);
	pgv_stop(&p);
}
END_TEST

/* min_pool_size = 2 with 4 workers: 2 server connections for the instance, not 8. */
START_TEST(min_pool_size_once_for_the_instance)
{
	struct pgv p = { 0 };
	int pids[MAX_W];
	char dbs[512];
	/* A forced user: its pool exists in every worker from the start, so each keeps min_pool_size. */
	snprintf(dbs, sizeof(dbs), "%spgvmin = host=127.0.0.1 port=%d dbname=pgvtest user=" USER "\n", std_databases(),
		 atoi(getenv("PGV_TEST_PGPORT")));
	pgv_start(&p, BASE "workers = 4\nmin_pool_size = 2\ndefault_pool_size = 5\n", dbs, std_userlist());
	wait_running(&p, 4, pids);
	ck_assert_int_eq(pg_wait_backends(USER, 2, 10), 2);
	/* a negative window: 1.5 s is four janitor ticks of every worker, any of which would open a surplus server */
	sleep_ms(1500);
	ck_assert_msg(pg_count_backends(USER) == 2, "%d server connections\n%s", pg_count_backends(USER),
		      pgv_log_tail(&p, 2000));
	pgv_stop(&p);
}
END_TEST

/*
 * pool_size = 2, workers = 2, each worker holds one server in a
 * transaction. SIGKILL of worker 2: worker 1's client goes on, and the
 * restarted worker 2 gets a server again (the dead one's budget was
 * reclaimed) while worker 1 still holds its own.
 */
START_TEST(killed_worker_gives_its_budget_back)
{
	struct pgv p = { 0 };
	int pids[MAX_W];
	ExecStatusType st;
	pgv_start(&p, BASE "workers = 2\ndefault_pool_size = 2\n", std_databases(), std_userlist());
	wait_running(&p, 2, pids);
	PGconn *a = worker_login(&p, 1, DB);
	PGconn *b = worker_login(&p, 2, DB);
	PQclear(PQexec(a, "BEGIN"));
	ck_assert_str_eq(query_value(a, "SELECT 'a in tx'"), "a in tx");
	PQclear(PQexec(b, "BEGIN"));
	ck_assert_str_eq(query_value(b, "SELECT 'b in tx'"), "b in tx");
	ck_assert_int_eq(pg_count_backends(USER), 2);
	/* The budget is used up: a third client waits. */
	PGconn *c = worker_login(&p, 1, DB);
	ck_assert_int_eq(PQsendQuery(c, "SELECT 'c'"), 1);
	ck_assert_msg(!finished_within(c, 0.5, &st), "a third server was opened for a pool of 2");

	ck_assert_int_eq(kill(pids[1], SIGKILL), 0);
	PQfinish(b);
	/* The dead worker's server goes and its budget is free: the waiting client of worker 1 gets it. */
	ck_assert_msg(finished_within(c, 5.0, &st), "worker 1's client still waits after worker 2 died\n%s",
		      pgv_log_tail(&p, 2000));
	ck_assert_int_eq(st, PGRES_TUPLES_OK);
	ck_assert_str_eq(query_value(a, "SELECT 'a still in tx'"), "a still in tx");
	int now[MAX_W];
	wait_running(&p, 2, now);
	ck_assert_int_ne(now[1], pids[1]);
	/* The restarted worker serves within the budget: worker 1 gives it the idle server. */
	PGconn *b2 = worker_login(&p, 2, DB);
	ck_assert_int_eq(PQsendQuery(b2, "SELECT 'b again'"), 1);
	ck_assert_msg(finished_within(b2, 5.0, &st), "the restarted worker 2 gets no server\n%s",
		      pgv_log_tail(&p, 2000));
	ck_assert_int_eq(st, PGRES_TUPLES_OK);
	ck_assert_int_le(pg_count_backends(USER), 2);
	PQclear(PQexec(a, "COMMIT"));
	PQfinish(a);
	PQfinish(b2);
	PQfinish(c);
	pgv_stop(&p);
}
END_TEST

/*
 * Under load: pgbench on worker 1's socket while worker 2 holds a server
 * in a transaction, pool_size = 3. SIGKILL of worker 2: its client
 * fails, pgbench does not, PostgreSQL never sees more than 3 connections,
 * and pgbench's worker gets the dead worker's share within seconds.
 */
START_TEST(killed_worker_under_load)
{
	struct pgv p = { 0 };
	int pids[MAX_W];
	char out[700], port[16], dir[700];
	pgv_start(&p, BASE "workers = 2\ndefault_pool_size = 3\n", std_databases(), std_userlist());
	wait_running(&p, 2, pids);
	PGconn *b = worker_login(&p, 2, DB);
	PQclear(PQexec(b, "BEGIN"));
	ck_assert_str_eq(query_value(b, "SELECT 'b in tx'"), "b in tx");
	snprintf(out, sizeof(out), "%s/pgbench.out", p.dir);
	snprintf(port, sizeof(port), "%d", p.port);
	worker_dir(&p, 1, dir, sizeof(dir));
	char *env[] = { "PGPASSWORD=" PASS, "PGSSLMODE=disable", NULL };
	char *argv[] = { "pgbench", "-n", "-S", "-c", "8", "-j", "2", "-T", "8", "-h", dir, "-p", port, "-U", USER,
			 DB, NULL };
	pid_t bench = fork();
	ck_assert_int_ge(bench, 0);
	if (bench == 0)
		_exit(run_program(argv, env, out, 60));
	double t0 = now_s();
	bool killed = false;
	int most = 0, most_after = 0, status;
	while (waitpid(bench, &status, WNOHANG) == 0) {
		int n = pg_count_backends(USER);
		most = n > most ? n : most;
		if (killed && now_s() - t0 > 5.5)
			most_after = n > most_after ? n : most_after;
		/* pacing over pgbench's 8 s: the kill at 2.5 s, the count after 5.5 s once the restarted worker has settled */
		if (!killed && now_s() - t0 > 2.5) {
			ck_assert_int_eq(kill(pids[1], SIGKILL), 0);
			killed = true;
		}
		sleep_ms(20);
	}
	const char *text = read_file_tail(out, 8000);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "pgbench exit status %d:\n%s\n%s",
		      WIFEXITED(status) ? WEXITSTATUS(status) : -1, text, pgv_log_tail(&p, 2000));
	ck_assert_msg(pgbench_number(text, "number of failed transactions: ") == 0, "failed transactions:\n%s", text);
	ck_assert_msg(most <= 3, "PostgreSQL saw %d connections of a pool of 3\n%s", most, pgv_log_tail(&p, 2000));
	/* After the kill, worker 1 uses the whole pool: 3 servers for its 8 clients. */
	ck_assert_msg(most_after == 3, "worker 1 had %d servers after worker 2 died\n%s", most_after,
		      pgv_log_tail(&p, 2000));
	PGresult *r = PQexec(b, "SELECT 'b after the kill'");
	ck_assert_msg(PQresultStatus(r) != PGRES_TUPLES_OK, "worker 2's client outlived its worker");
	PQclear(r);
	PQfinish(b);
	pgv_stop(&p);
}
END_TEST

/* workers = 1: nothing shared, the limits as in one process (and no budget log lines). */
/*
 * A reload lowers default_pool_size from 4 to 1 while two workers hold
 * two idle servers each: the excess closes across the workers ("too many
 * servers in the pool", as PgBouncer's janitor), PostgreSQL is left with
 * one, and every client goes on.
 */
START_TEST(reload_lowering_pool_size_closes_the_excess)
{
	struct pgv p = { 0 };
	int pids[MAX_W];
	PGconn *c[4];
	pgv_start(&p, BASE "workers = 2\ndefault_pool_size = 4\n", std_databases(), std_userlist());
	wait_running(&p, 2, pids);
	for (int i = 0; i < 4; i++) {
		c[i] = worker_login(&p, 1 + i % 2, DB);
		PQclear(PQexec(c[i], "BEGIN"));
		ck_assert_str_eq(query_value(c[i], "SELECT 'held'"), "held");
	}
	ck_assert_int_eq(pg_wait_backends(USER, 4, 5), 4);
	for (int i = 0; i < 4; i++)
		PQclear(PQexec(c[i], "COMMIT"));
	pgv_ini_replace(&p, "default_pool_size = 4", "default_pool_size = 1");
	pgv_reload(&p);
	ck_assert_msg(pg_wait_backends(USER, 1, 5) == 1, "%d server connections 5 s after the reload\n%s",
		      pg_count_backends(USER), pgv_log_tail(&p, 2000));
	ck_assert(pgv_log_contains(&p, "too many servers in the pool"));
	for (int round = 0; round < 2; round++)
		for (int i = 0; i < 4; i++) {
			ck_assert_str_eq(query_value(c[i], "SELECT 'after'"), "after");
			ck_assert_int_le(pg_count_backends(USER), 1);
		}
	for (int i = 0; i < 4; i++)
		PQfinish(c[i]);
	pgv_stop(&p);
}
END_TEST

/* The same in one process: PgBouncer's janitor closes servers over pool_size + reserve_pool_size. */
START_TEST(reload_lowering_pool_size_single_process)
{
	struct pgv p = { 0 };
	PGconn *c[3];
	pgv_start(&p, BASE "default_pool_size = 3\nreserve_pool_size = 1\n", std_databases(), std_userlist());
	for (int i = 0; i < 3; i++) {
		c[i] = pgv_connect(&p, DB, USER, PASS);
		PQclear(PQexec(c[i], "BEGIN"));
		ck_assert_str_eq(query_value(c[i], "SELECT 'held'"), "held");
	}
	ck_assert_int_eq(pg_wait_backends(USER, 3, 5), 3);
	for (int i = 0; i < 3; i++)
		PQclear(PQexec(c[i], "COMMIT"));
	pgv_ini_replace(&p, "default_pool_size = 3", "default_pool_size = 1");
	pgv_reload(&p);
	/* pool_size 1 + reserve_pool_size 1 */
	/* surplus servers close at the janitor's next tick (a third of a second): 5 s on a loaded machine */
	ck_assert_msg(pg_wait_backends(USER, 2, 5) == 2, "%d server connections 5 s after the reload\n%s",
		      pg_count_backends(USER), pgv_log_tail(&p, 2000));
	sleep_ms(1500);	/* a negative window: four janitor ticks in which no server may be reopened or closed */
	ck_assert_int_eq(pg_count_backends(USER), 2);
	for (int i = 0; i < 3; i++)
		ck_assert_str_eq(query_value(c[i], "SELECT 'after'"), "after");
	for (int i = 0; i < 3; i++)
		PQfinish(c[i]);
	pgv_stop(&p);
}
END_TEST

START_TEST(single_process_unchanged)
{
	struct pgv p = { 0 };
	pgv_start(&p, BASE "default_pool_size = 1\n", std_databases(), std_userlist());
	PGconn *a = pgv_connect(&p, DB, USER, PASS);
	PGconn *b = pgv_connect(&p, DB, USER, PASS);
	ck_assert_str_eq(query_value(a, "SELECT 'a'"), "a");
	ck_assert_str_eq(query_value(b, "SELECT 'b'"), "b");
	ck_assert_int_eq(pg_count_backends(USER), 1);
	ck_assert(!pgv_log_contains(&p, "given back"));
	PQfinish(a);
	PQfinish(b);
	pgv_stop(&p);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("shared_pool");
	TCase *tc = pgv_tcase_create("shared_pool", 90);
	tcase_add_test(tc, pool_size_holds_for_the_instance);
	tcase_add_test(tc, saturated_pool_does_not_churn);
	tcase_add_test(tc, waiting_client_gets_an_idle_server_of_another_worker);
	tcase_add_test(tc, idle_server_handed_over_by_socket);
	tcase_add_test(tc, tls_server_falls_back_to_a_new_login);
	tcase_add_test(tc, handed_over_to_a_dying_worker);
	tcase_add_test(tc, eight_workers_open_close_and_hand_over_within_limits);
	tcase_add_test(tc, max_db_connections_handed_across_workers);
	tcase_add_test(tc, max_user_connections_handed_across_workers);
	tcase_add_test(tc, busy_database_limit_is_shared);
	tcase_add_test(tc, max_client_conn_holds_for_the_instance);
	tcase_add_test(tc, min_pool_size_once_for_the_instance);
	tcase_add_test(tc, killed_worker_gives_its_budget_back);
	tcase_add_test(tc, killed_worker_under_load);
	tcase_add_test(tc, reload_lowering_pool_size_closes_the_excess);
	tcase_add_test(tc, reload_lowering_pool_size_single_process);
	tcase_add_test(tc, single_process_unchanged);
	suite_add_tcase(s, tc);
	return pgv_run_suite(s);
}
