/*
 * test_console_instance.c - workers = 4: the console on the shared port is
 * the instance's (admin_fanout.c). Whichever worker a console connection
 * lands on, SHOW POOLS / CLIENTS / SERVERS / DATABASES / USERS / STATS* /
 * LISTS / TOTALS count every worker's clients and servers; KILL_CLIENT
 * reaches a client of another worker; PAUSE db, RESUME db, RECONNECT,
 * KILL, DISABLE / ENABLE and SET act on every worker; a worker killed
 * with SIGKILL is left out with a NOTICE within the fan-out's 2 s bound,
 * and its replacement starts paused, disabled and SET as the console left
 * the instance. SHOW CLIENTS with 5,000 clients is streamed worker by
 * worker and survives a reader that stops past the fan-out's bound.
 * A console on a worker's private socket still sees that worker alone.
 */
#include "admin_console.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WORKERS 4
#define CFG ADMIN_CFG "pool_mode = transaction\nworkers = 4\nmax_client_conn = 500\n"
#define NCLIENTS 24
#define NCONSOLES 6
#define CUSER "scram_user"

/*
 * Until every worker runs (the harness waits for the first listener only); their pids.
 * Forks that listen in milliseconds: 15 s covers a restart too on a loaded 2-core machine.
 */
static void wait_workers(struct pgv *p, int pids[WORKERS])
{
	double deadline = now_s() + 15;
	for (;;) {
		PGconn *a = admin_conn(p);
		PGresult *r = show(a, "SHOW WORKERS");
		int running = 0;
		for (int k = 0; k < WORKERS; k++) {
			pids[k] = atoi(cell(r, k, "pid") ? cell(r, k, "pid") : "0");
			running += strcmp(cell(r, k, "state"), "running") == 0;
		}
		PQclear(r);
		PQfinish(a);
		if (running == WORKERS)
			return;
		ck_assert_msg(now_s() < deadline, "%d of %d workers running\n%s", running, WORKERS, pgv_log_tail(p, 1500));
		sleep_ms(100);
	}
}

/* A console on worker k's private socket: that worker alone. */
static PGconn *worker_console(struct pgv *p, int k)
{
	char dir[700], port[16];
	snprintf(dir, sizeof(dir), "%s/pgvalve-%d-%d-w%d", p->dir, p->port, (int)p->pid, k);
	snprintf(port, sizeof(port), "%d", p->port);
	const char *kw[] = { "host", "port", "dbname", "user", "password", "sslmode", NULL };
	const char *val[] = { dir, port, "pgbouncer", "admin_u", "admin_pass", "disable", NULL };
	PGconn *c = PQconnectdbParams(kw, val, 0);
	ck_assert_msg(PQstatus(c) == CONNECTION_OK, "worker %d console: %s", k, PQerrorMessage(c));
	return c;
}

/* A console on unix_socket_dir/.s.PGSQL.<port>: worker 1's, and the instance's. */
static PGconn *unix_console(struct pgv *p)
{
	char port[16];
	snprintf(port, sizeof(port), "%d", p->port);
	const char *kw[] = { "host", "port", "dbname", "user", "password", "sslmode", NULL };
	const char *val[] = { p->dir, port, "pgbouncer", "admin_u", "admin_pass", "disable", NULL };
	PGconn *c = PQconnectdbParams(kw, val, 0);
	ck_assert_msg(PQstatus(c) == CONNECTION_OK, "console on the shared Unix socket: %s", PQerrorMessage(c));
	return c;
}

/* NCLIENTS clients of DB, each has run a transaction (so every worker that got one holds a server). */
static void open_clients(struct pgv *p, PGconn *c[NCLIENTS])
{
	for (int i = 0; i < NCLIENTS; i++) {
		c[i] = client_conn(p);
		ck_assert_str_eq(query_value(c[i], "SELECT 1"), "1");
	}
}

/* The instance of 4 workers, all running, and NCLIENTS clients of DB over them. */
static void start_instance(struct pgv *p, int pids[WORKERS], PGconn *c[NCLIENTS])
{
	pgv_start(p, CFG, std_databases(), userlist());
	wait_workers(p, pids);
	open_clients(p, c);
}

static void close_clients(PGconn *c[NCLIENTS])
{
	for (int i = 0; i < NCLIENTS; i++)
		PQfinish(c[i]);
}

/* The worker column's value in SHOW CLIENTS for the client whose port is port, 0 if none. */
static int worker_of_port(const PGresult *r, int port)
{
	char want[16];
	snprintf(want, sizeof(want), "%d", port);
	int row = find_row(r, "port", want);
	return row < 0 ? 0 : (int)icell(r, row, "worker");
}

/* Number of different workers among DB's clients in SHOW CLIENTS. */
static int workers_used(const PGresult *r)
{
	bool seen[WORKERS + 1] = { false };
	int n = 0;
	for (int i = 0; i < PQntuples(r); i++) {
		if (strcmp(cell(r, i, "database"), DB) != 0)
			continue;
		int w = (int)icell(r, i, "worker");
		ck_assert_msg(w >= 1 && w <= WORKERS, "worker column %d", w);
		if (!seen[w])
			n++;
		seen[w] = true;
	}
	return n;
}

static long long pools_value(PGconn *a, const char *col)
{
	PGresult *r = show(a, "SHOW POOLS");
	int row = find_row2(r, "database", DB, "user", CUSER);
	ck_assert_int_ge(row, 0);
	long long v = icell(r, row, col);
	PQclear(r);
	return v;
}

/* Every console sees all clients, whichever worker it is on; a worker's own console fewer. */
START_TEST(show_views_are_instance_wide)
{
	struct pgv p;
	int pids[WORKERS];
	PGconn *c[NCLIENTS];
	start_instance(&p, pids, c);

	long long stats_xacts = -1;
	bool console_worker_seen[WORKERS + 1] = { false };
	for (int k = 0; k < NCONSOLES; k++) {
		PGconn *a = admin_conn(&p);
		PGresult *r = show(a, "SHOW CLIENTS");
		/* the last column is the worker's; every client once, with a unique id */
		ck_assert_str_eq(PQfname(r, PQnfields(r) - 1), "worker");
		ck_assert_int_eq(count_rows(r, "database", DB), NCLIENTS);
		for (int i = 0; i < NCLIENTS; i++)
			ck_assert_int_ne(worker_of_port(r, local_port(c[i])), 0);
		for (int i = 0; i < PQntuples(r); i++)
			for (int j = i + 1; j < PQntuples(r); j++)
				ck_assert_str_ne(cell(r, i, "id"), cell(r, j, "id"));
		ck_assert_int_ge(workers_used(r), 2);
		console_worker_seen[worker_of_port(r, local_port(a))] = true;
		PQclear(r);

		ck_assert_int_eq(pools_value(a, "cl_active") + pools_value(a, "cl_waiting"), NCLIENTS);
		if (k == 0) {
			/* the fan-out's own logins (user pgbouncer) are not counted: this console alone */
			r = show(a, "SHOW POOLS");
			int own = find_row2(r, "database", "pgbouncer", "user", "pgbouncer");
			ck_assert_int_ge(own, 0);
			expect_icell(r, own, "cl_active", 1);
			PQclear(r);
			ck_assert_str_eq(show_value(a, "SHOW USERS", "name", "pgbouncer", "current_client_connections"), "0");
			ck_assert_str_eq(show_value(a, "SHOW DATABASES", "name", "pgbouncer", "current_client_connections"),
					 "1");
			ck_assert_int_eq(atoi(show_value(a, "SHOW LISTS", "list", "used_clients", "items")), NCLIENTS + 1);
		}
		ck_assert_str_eq(show_value(a, "SHOW DATABASES", "name", DB, "current_client_connections"), "24");
		ck_assert_str_eq(show_value(a, "SHOW USERS", "name", CUSER, "current_client_connections"), "24");
		ck_assert_int_ge(atoi(show_value(a, "SHOW LISTS", "list", "used_clients", "items")), NCLIENTS);
		/* servers: SHOW SERVERS' rows are SHOW POOLS' sv_ counts and SHOW DATABASES' */
		long long sv = pools_value(a, "sv_active") + pools_value(a, "sv_idle") + pools_value(a, "sv_used");
		r = show(a, "SHOW SERVERS");
		ck_assert_str_eq(PQfname(r, PQnfields(r) - 1), "worker");
		ck_assert_int_eq(count_rows(r, "database", DB), sv);
		PQclear(r);
		ck_assert_int_eq(atoi(show_value(a, "SHOW DATABASES", "name", DB, "current_connections")), sv);
		ck_assert_int_eq(sv, pg_count_backends(CUSER));
		/* one transaction per client so far, whichever worker ran it */
		long long x = atoll(show_value(a, "SHOW STATS_TOTALS", "database", DB, "xact_count"));
		ck_assert_int_eq(x, NCLIENTS);
		ck_assert_int_eq(atoll(show_value(a, "SHOW STATS", "database", DB, "total_xact_count")), NCLIENTS);
		ck_assert_int_ge(atoll(show_value(a, "SHOW TOTALS", "name", "total_xact_count", "value")), NCLIENTS);
		if (stats_xacts >= 0)
			ck_assert_int_eq(x, stats_xacts);
		stats_xacts = x;
		PQfinish(a);
	}
	int consoles_on = 0;
	for (int k = 1; k <= WORKERS; k++)
		consoles_on += console_worker_seen[k];
	ck_assert_msg(consoles_on >= 2, "the %d consoles all landed on one worker", NCONSOLES);

	/* the shared Unix socket (worker 1's) is the instance's too */
	PGconn *u = unix_console(&p);
	ck_assert_int_eq(pools_value(u, "cl_active") + pools_value(u, "cl_waiting"), NCLIENTS);
	PQfinish(u);

	/* a worker's private socket: that worker's clients only, no worker column */
	int sum = 0;
	for (int k = 1; k <= WORKERS; k++) {
		PGconn *a = worker_console(&p, k);
		PGresult *r = show(a, "SHOW CLIENTS");
		ck_assert_int_lt(PQfnumber(r, "worker"), 0);
		int mine = count_rows(r, "database", DB);
		ck_assert_int_lt(mine, NCLIENTS);
		sum += mine;
		PQclear(r);
		PQfinish(a);
	}
	ck_assert_int_eq(sum, NCLIENTS);
	close_clients(c);
	pgv_stop(&p);
}
END_TEST

/*
 * SHOW CLIENTS with thousands of clients is streamed worker by worker
 * (admin_fanout.c): a console that reads the first part, stops for longer
 * than the fan-out's 2 s bound and then reads on gets every row, in
 * worker order, each with its worker, and no worker left out.
 */
START_TEST(large_show_clients_is_streamed)
{
	enum { MANY = 5000 };
	raise_descriptor_limit(MANY + 100);
	struct pgv p;
	int pids[WORKERS];
	pgv_start(&p, ADMIN_CFG "pool_mode = transaction\nworkers = 4\nmax_client_conn = 5500\n"
		  "log_connections = 0\nlog_disconnections = 0\n", std_databases(), userlist());
	wait_workers(&p, pids);
	static int fds[MANY];
	for (int i = 0; i < MANY; i++) {
		struct raw_error err = { 0 };
		ck_assert_msg(raw_login_ex(p.port, DB, "md5_user", "md5_pass", NULL, &err, &fds[i]) == 0,
			      "client %d: %s", i, err.message);
	}
	int con = -1;
	struct raw_error err = { 0 };
	ck_assert_int_eq(raw_login_ex(p.port, "pgbouncer", "admin_u", "admin_pass", NULL, &err, &con), 0);
	ck_assert(raw_send_query(con, "SHOW CLIENTS"));
	/* the first rows, then a pause past FANOUT_TIMEOUT with the rest unread */
	char type;
	static unsigned char body[65536];
	size_t len;
	int rows = 0, last_worker = 0, worker_col = -1, ncols = 0, notices = 0;
	bool paused = false, done = false;
	while (!done) {
		ck_assert_msg(raw_read_message(con, &type, body, sizeof(body), &len, 10000), "SHOW CLIENTS stalled");
		if (type == 'T') {
			ncols = body[0] << 8 | body[1];
			size_t at = 2;
			for (int c = 0; c < ncols; c++) {
				if (strcmp((const char *)body + at, "worker") == 0)
					worker_col = c;
				at += strlen((const char *)body + at) + 1 + 18;
			}
			ck_assert_int_eq(worker_col, ncols - 1);
		} else if (type == 'D') {
			ck_assert_int_eq(body[0] << 8 | body[1], ncols);
			size_t at = 2;
			for (int c = 0; c < worker_col; c++) {
				uint32_t n = raw_get_u32(body + at);
				at += 4 + (n == 0xFFFFFFFFu ? 0 : n);
			}
			uint32_t n = raw_get_u32(body + at);
			char w[16] = "";
			memcpy(w, body + at + 4, n < sizeof(w) ? n : sizeof(w) - 1);
			int worker = atoi(w);
			ck_assert_msg(worker >= last_worker && worker >= 1 && worker <= WORKERS,
				      "row %d from worker %d after worker %d", rows, worker, last_worker);
			last_worker = worker;
			rows++;
			if (rows == 200 && !paused) {
				paused = true;
				sleep_ms(3000);	/* longer than FANOUT_TIMEOUT (2 s), the answer half sent */
			}
		} else if (type == 'N') {
			notices++;	/* a worker left out */
		} else if (type == 'E') {
			ck_abort_msg("SHOW CLIENTS failed: %s", body);
		} else if (type == 'Z') {
			done = true;
		}
	}
	ck_assert_msg(rows == MANY + 1, "%d rows for %d clients and the console", rows, MANY);
	ck_assert_int_eq(notices, 0);
	ck_assert_int_eq(last_worker, WORKERS);	/* rows from the last worker too (so_reuseport spreads 5,000 over all) */
	close(con);
	for (int i = 0; i < MANY; i++)
		close(fds[i]);
	pgv_stop(&p);
}
END_TEST

/* KILL_CLIENT with the id SHOW CLIENTS gives closes a client of another worker. */
START_TEST(kill_client_on_another_worker)
{
	struct pgv p;
	int pids[WORKERS];
	PGconn *c[NCLIENTS];
	start_instance(&p, pids, c);
	PGconn *a = admin_conn(&p);
	PGresult *r = show(a, "SHOW CLIENTS");
	int mine = worker_of_port(r, local_port(a));
	ck_assert_int_ne(mine, 0);
	int victim = -1;
	for (int i = 0; i < NCLIENTS && victim < 0; i++)
		if (worker_of_port(r, local_port(c[i])) != mine)
			victim = i;
	ck_assert_msg(victim >= 0, "every client is on the console's worker %d", mine);
	char port[16], id[32];
	snprintf(port, sizeof(port), "%d", local_port(c[victim]));
	snprintf(id, sizeof(id), "%s", cell(r, find_row(r, "port", port), "id"));
	PQclear(r);

	char cmd[64];
	snprintf(cmd, sizeof(cmd), "KILL_CLIENT %s", id);
	admin_ok(a, cmd, "KILL_CLIENT");
	PGresult *q = PQexec(c[victim], "SELECT 1");
	ck_assert_int_ne(PQresultStatus(q), PGRES_TUPLES_OK);
	PQclear(q);
	/* it is gone from every console's list, the others are still there */
	r = show(a, "SHOW CLIENTS");
	ck_assert_int_eq(count_rows(r, "database", DB), NCLIENTS - 1);
	ck_assert_int_lt(find_row(r, "id", id), 0);
	PQclear(r);
	admin_err(a, cmd, "08P01", "client not found");
	PQfinish(a);
	close_clients(c);
	pgv_stop(&p);
}
END_TEST

/* PAUSE db through one console holds queries on every worker; RESUME db releases them. */
START_TEST(pause_db_holds_every_worker)
{
	struct pgv p;
	int pids[WORKERS];
	PGconn *c[NCLIENTS];
	start_instance(&p, pids, c);
	PGconn *a = admin_conn(&p);
	PGresult *r = show(a, "SHOW CLIENTS");
	ck_assert_int_ge(workers_used(r), 2);
	PQclear(r);

	admin_ok(a, "PAUSE " DB, "PAUSE");
	/* answered once every worker had let go of its servers (PostgreSQL sees them leave a moment later) */
	ck_assert_str_eq(show_value(a, "SHOW DATABASES", "name", DB, "current_connections"), "0");
	wait_backends(CUSER, 0, 2000);
	ck_assert_str_eq(show_value(a, "SHOW DATABASES", "name", DB, "paused"), "1");
	for (int i = 0; i < NCLIENTS; i++)
		send_query(c[i], "SELECT 7");
	for (int i = 0; i < NCLIENTS; i++)
		still_waiting(c[i], i == 0 ? 500 : 10, "a query under PAUSE " DB);
	admin_ok(a, "RESUME " DB, "RESUME");
	for (int i = 0; i < NCLIENTS; i++)
		expect_async_value(c[i], 5000, "a query after RESUME " DB, "7");
	ck_assert_str_eq(show_value(a, "SHOW DATABASES", "name", DB, "paused"), "0");

	/* PAUSE of everything was already the instance's: still so */
	admin_ok(a, "PAUSE", "PAUSE");
	for (int i = 0; i < NCLIENTS; i++)
		send_query(c[i], "SELECT 8");
	for (int i = 0; i < NCLIENTS; i++)
		still_waiting(c[i], i == 0 ? 500 : 10, "a query under PAUSE");
	admin_ok(a, "RESUME", "RESUME");
	for (int i = 0; i < NCLIENTS; i++)
		expect_async_value(c[i], 5000, "a query after RESUME", "8");

	/* ^C on a PAUSE db that waits (a transaction holds a server): every worker resumes */
	exec_ok(c[0], "BEGIN");
	exec_ok(c[0], "SELECT 1");
	send_query(a, "PAUSE " DB);
	still_waiting(a, 500, "PAUSE " DB " while a transaction runs");
	char err[256];
	PGcancel *cancel = PQgetCancel(a);
	ck_assert_int_eq(PQcancel(cancel, err, sizeof(err)), 1);
	PQfreeCancel(cancel);
	PGresult *pr = result_within(a, 3000, "the cancelled PAUSE");
	check_error(pr, "the cancelled PAUSE", "57014", "canceling statement due to user request");
	PQclear(pr);
	while ((pr = PQgetResult(a)))
		PQclear(pr);
	exec_ok(c[0], "COMMIT");
	/* the RESUME runs on every worker after the answer: within a moment */
	for (double end = now_s() + 3; strcmp(show_value(a, "SHOW DATABASES", "name", DB, "paused"), "0") != 0;
	     sleep_ms(50))
		ck_assert_msg(now_s() < end, "still paused 3 s after the cancelled PAUSE");
	for (int i = 0; i < NCLIENTS; i++)
		ck_assert_str_eq(query_value(c[i], "SELECT 9"), "9");
	PQfinish(a);
	close_clients(c);
	pgv_stop(&p);
}
END_TEST

/* The backend pids of CUSER, as a sorted list in buf. */
static int backend_pids(int *pids, int max)
{
	PGconn *d = pg_direct();
	PGresult *r = PQexec(d, "SELECT pid FROM pg_stat_activity WHERE usename = '" CUSER "'"
				" AND backend_type = 'client backend' ORDER BY pid");
	ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
	int n = PQntuples(r) < max ? PQntuples(r) : max;
	for (int i = 0; i < n; i++)
		pids[i] = atoi(PQgetvalue(r, i, 0));
	PQclear(r);
	PQfinish(d);
	return n;
}

/* RECONNECT db replaces every worker's servers; KILL db closes them all; DISABLE refuses on every worker. */
START_TEST(reconnect_kill_disable_reach_every_worker)
{
	struct pgv p;
	int pids[WORKERS], before[64], after[64];
	PGconn *c[NCLIENTS];
	start_instance(&p, pids, c);
	PGconn *a = admin_conn(&p);
	int nb = backend_pids(before, 64);
	ck_assert_int_ge(nb, 2);

	admin_ok(a, "RECONNECT " DB, "RECONNECT");
	admin_ok(a, "WAIT_CLOSE " DB, "WAIT_CLOSE");
	for (int i = 0; i < NCLIENTS; i++)
		ck_assert_str_eq(query_value(c[i], "SELECT 1"), "1");
	int na = backend_pids(after, 64);
	ck_assert_int_ge(na, 1);
	for (int i = 0; i < nb; i++)
		for (int j = 0; j < na; j++)
			ck_assert_msg(before[i] != after[j], "backend %d survived RECONNECT", before[i]);

	admin_ok(a, "KILL " DB, "KILL");
	ck_assert_str_eq(show_value(a, "SHOW DATABASES", "name", DB, "current_connections"), "0");
	wait_backends(CUSER, 0, 3000);
	admin_ok(a, "RESUME " DB, "RESUME");
	close_clients(c);

	admin_ok(a, "DISABLE " DB, "DISABLE");
	for (int i = 0; i < 12; i++) {
		PGconn *x = pgv_connect(&p, DB, CUSER, "scram_pass");
		ck_assert_msg(PQstatus(x) != CONNECTION_OK, "connection %d got in to a disabled database", i);
		PQfinish(x);
	}
	ck_assert_str_eq(show_value(a, "SHOW DATABASES", "name", DB, "disabled"), "1");
	admin_ok(a, "ENABLE " DB, "ENABLE");
	for (int i = 0; i < 12; i++)
		PQfinish(client_conn(&p));

	/* SET: every worker's value */
	admin_ok(a, "SET default_pool_size = 13", "SET default_pool_size=13");
	for (int k = 1; k <= WORKERS; k++) {
		PGconn *w = worker_console(&p, k);
		ck_assert_str_eq(config_value(w, "default_pool_size"), "13");
		PQfinish(w);
	}
	/* RELOAD: answered once every worker has reloaded, each once */
	FILE *f = fopen(p.ini, "a");
	ck_assert_ptr_nonnull(f);
	fputs("default_pool_size = 17\n", f);
	fclose(f);
	admin_ok(a, "RELOAD", "RELOAD");
	for (int k = 1; k <= WORKERS; k++) {
		PGconn *w = worker_console(&p, k);
		ck_assert_str_eq(config_value(w, "default_pool_size"), "17");
		PQfinish(w);
	}
	ck_assert_int_eq(pgv_log_count(&p, "RELOAD command issued"), WORKERS);
	ck_assert(!pgv_log_contains(&p, "got SIGHUP"));
	PQfinish(a);
	pgv_stop(&p);
}
END_TEST

/* A worker killed with SIGKILL: SHOW answers at once from the others, with a NOTICE naming it. */
START_TEST(dead_worker_is_left_out)
{
	struct pgv p;
	int pids[WORKERS];
	PGconn *c[NCLIENTS];
	start_instance(&p, pids, c);
	PGconn *a = admin_conn(&p);
	struct notice_log notices = { 0 };
	PQsetNoticeReceiver(a, capture_notice, &notices);
	PGresult *r = show(a, "SHOW CLIENTS");
	int mine = worker_of_port(r, local_port(a));
	PQclear(r);
	int victim = mine == WORKERS ? 1 : WORKERS;
	ck_assert_int_eq(kill(pids[victim - 1], SIGKILL), 0);
	/* margin for the kernel to close the dead worker's sockets; if later, SHOW waits its 2 s bound, still under 3 s */
	sleep_ms(50);
	double t0 = now_s();
	r = show(a, "SHOW POOLS");
	double took = now_s() - t0;
	ck_assert_msg(took < 3.0, "SHOW POOLS took %.2f s with worker %d dead", took, victim);
	PQclear(r);
	char want[32];
	snprintf(want, sizeof(want), "worker %d", victim);
	ck_assert_msg(notices.n >= 1 && strstr(notices.message, want), "notice: %s", notices.message);
	/* the dead worker's clients are gone from the count; the others are all there */
	r = show(a, "SHOW CLIENTS");
	int left = count_rows(r, "database", DB);
	ck_assert_int_lt(left, NCLIENTS);
	for (int i = 0; i < PQntuples(r); i++)
		ck_assert_int_ne(icell(r, i, "worker"), victim);
	PQclear(r);
	PQfinish(a);
	close_clients(c);
	pgv_stop(&p);
}
END_TEST


/* A worker stopped (SIGSTOP): SHOW answers within the 2 s bound, with a NOTICE; all of it once it goes on. */
START_TEST(stopped_worker_times_out)
{
	struct pgv p;
	int pids[WORKERS];
	pgv_start(&p, CFG, std_databases(), userlist());
	wait_workers(&p, pids);
	PGconn *a = admin_conn(&p);
	struct notice_log notices = { 0 };
	PQsetNoticeReceiver(a, capture_notice, &notices);
	PGresult *r = show(a, "SHOW CLIENTS");
	int mine = worker_of_port(r, local_port(a));
	PQclear(r);
	int victim = mine == 2 ? 3 : 2;	/* not worker 1: it owns the shared Unix socket used below */
	ck_assert_int_eq(kill(pids[victim - 1], SIGSTOP), 0);
	double t0 = now_s();
	r = show(a, "SHOW STATS_TOTALS");
	double took = now_s() - t0;
	PQclear(r);
	/* a console that leaves while its command waits on the stopped worker leaves nothing behind */
	PGconn *b = unix_console(&p);	/* worker 1's, so not the stopped one */
	send_query(b, "SHOW POOLS");
	/* so the command waits on the stopped worker, then its close is seen; later on a loaded machine, a weaker check */
	sleep_ms(200);
	PQfinish(b);
	sleep_ms(100);
	kill(pids[victim - 1], SIGCONT);
	ck_assert_msg(took >= 1.5 && took < 3.5, "SHOW STATS_TOTALS took %.2f s with worker %d stopped", took, victim);
	char want[64];
	snprintf(want, sizeof(want), "worker %d did not answer: no answer within 2000 ms", victim);
	ck_assert_msg(notices.n >= 1 && strstr(notices.message, want), "notice: %s", notices.message);
	/* going on, it answers again (its leg of the last command was closed, not left half-read) */
	notices.n = 0;
	admin_ok(a, "RECONNECT", "RECONNECT");
	ck_assert_int_eq(notices.n, 0);
	/* no worker died on the way */
	r = show(a, "SHOW WORKERS");
	for (int k = 0; k < WORKERS; k++)
		expect_icell(r, k, "restarts", 0);
	PQclear(r);
	PQfinish(a);
	pgv_stop(&p);
}
END_TEST

/* SIGKILL to worker k, then until its replacement runs; its pid. */
static int restart_worker(struct pgv *p, int pids[WORKERS], int k)
{
	int old = pids[k - 1];
	ck_assert_int_eq(kill(old, SIGKILL), 0);
	/* the supervisor restarts it within a second or two; 15 s on a loaded machine */
	double deadline = now_s() + 15;
	do {
		ck_assert_msg(now_s() < deadline, "worker %d not restarted\n%s", k, pgv_log_tail(p, 1500));
		sleep_ms(100);
		wait_workers(p, pids);
	} while (pids[k - 1] == old);
	return pids[k - 1];
}

/* Worker k's own view: DB's paused, pgv2's disabled and paused, default_pool_size. */
static void expect_worker_state(struct pgv *p, int k, const char *db_paused, const char *pgv2_flags,
				const char *pool_size)
{
	PGconn *w = worker_console(p, k);
	ck_assert_str_eq(show_value(w, "SHOW DATABASES", "name", DB, "paused"), db_paused);
	char flags[8];
	snprintf(flags, sizeof(flags), "%s%s", show_value(w, "SHOW DATABASES", "name", "pgv2", "disabled"),
		 show_value(w, "SHOW DATABASES", "name", "pgv2", "paused"));
	ck_assert_msg(strcmp(flags, pgv2_flags) == 0, "worker %d: pgv2 disabled, paused = %s, not %s", k, flags,
		      pgv2_flags);
	ck_assert_str_eq(config_value(w, "default_pool_size"), pool_size);
	PQfinish(w);
}

/*
 * What the console changed for the instance holds in a worker restarted
 * after SIGKILL: PAUSE db, KILL db, DISABLE db and SET through the shared
 * port, and the replacement's own console shows them; after RESUME,
 * ENABLE and a RELOAD, the next replacement starts from the file again.
 */
START_TEST(console_changes_outlive_a_worker_restart)
{
	struct pgv p;
	int pids[WORKERS];
	char dbs[512];
	/* the same database under a second name: "pgvtest = host=... dbname=pgvtest" */
	snprintf(dbs, sizeof(dbs), "%spgv2%s", std_databases(), std_databases() + strlen(DB));
	pgv_start(&p, CFG, dbs, userlist());
	wait_workers(&p, pids);
	PGconn *a = admin_conn(&p);
	/* the worker killed is never the one this console is on, nor the sibling looked at */
	PGresult *r = show(a, "SHOW CLIENTS");
	int mine = worker_of_port(r, local_port(a));
	PQclear(r);
	int victim = mine == WORKERS ? 1 : WORKERS, sibling = victim == 1 ? 2 : victim - 1;
	admin_ok(a, "PAUSE " DB, "PAUSE");
	admin_ok(a, "KILL pgv2", "KILL");
	admin_ok(a, "DISABLE pgv2", "DISABLE");
	admin_ok(a, "SET default_pool_size = 13", "SET default_pool_size=13");
	restart_worker(&p, pids, victim);
	expect_worker_state(&p, victim, "1", "11", "13");
	expect_worker_state(&p, sibling, "1", "11", "13");	/* and as its siblings */
	ck_assert(pgv_log_contains(&p, "database pgv2 stays paused disabled, as the console left the instance"));

	admin_ok(a, "RESUME " DB, "RESUME");
	admin_ok(a, "RESUME pgv2", "RESUME");
	admin_ok(a, "ENABLE pgv2", "ENABLE");
	admin_ok(a, "RELOAD", "RELOAD");	/* the file's pool size again */
	restart_worker(&p, pids, victim);
	expect_worker_state(&p, victim, "0", "00", "20");
	expect_worker_state(&p, sibling, "0", "00", "20");
	PGconn *c = client_conn(&p);
	ck_assert_str_eq(query_value(c, "SELECT 'served'"), "served");
	PQfinish(c);
	PQfinish(a);
	pgv_stop(&p);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("console_instance");
	TCase *tc = pgv_tcase_create("console_instance", 120);
	tcase_add_test(tc, show_views_are_instance_wide);
	tcase_add_test(tc, kill_client_on_another_worker);
	tcase_add_test(tc, pause_db_holds_every_worker);
	tcase_add_test(tc, reconnect_kill_disable_reach_every_worker);
	tcase_add_test(tc, dead_worker_is_left_out);
	tcase_add_test(tc, stopped_worker_times_out);
	tcase_add_test(tc, console_changes_outlive_a_worker_restart);
	tcase_add_test(tc, large_show_clients_is_streamed);
	suite_add_tcase(s, tc);
	return pgv_run_suite(s);
}
