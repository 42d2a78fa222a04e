/*
 * test_roles.c - target_session_attrs end to end: a PostgreSQL 15 primary
 * and two streaming replicas (roles_cluster.sh: node1 127.0.0.2, node2
 * 127.0.0.3, node3 127.0.0.4, one port) behind databases that want a
 * read-write, read-only or prefer-standby server; a failover under a
 * writing load; and bad input (a typo, a name that does not resolve, a
 * host that accepts TCP but never answers).
 */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>

#define HOSTS "host=127.0.0.2,127.0.0.3,127.0.0.4"
#define BASE "auth_type = trust\nadmin_users = pgvadmin\npool_mode = transaction\nserver_login_retry = 1\n" \
	     "query_wait_timeout = 30\n"
#define USERS "\"pgvadmin\" \"\"\n"

/* ---------------------------------------------------------------- the cluster (harness.h: roles_cluster_*) */

/* [databases] lines for the cluster: name = HOSTS ... target_session_attrs=tsa (none if NULL) extra. */
static const char *db_lines(const char *const *names, const char *const *tsas, const char *const *extras, int n)
{
	static char buf[4096];
	size_t used = 0;
	for (int i = 0; i < n; i++)
		used += (size_t)snprintf(buf + used, sizeof(buf) - used,
					 "%s = " HOSTS " port=%d dbname=postgres user=pgvadmin %s%s %s\n",
					 names[i], roles_cluster_port, tsas[i] ? "target_session_attrs=" : "", tsas[i] ? tsas[i] : "",
					 extras && extras[i] ? extras[i] : "");
	return buf;
}

static PGconn *connect_ok(struct pgv *p, const char *db)
{
	PGconn *c = pgv_connect(p, db, "pgvadmin", NULL);
	ck_assert_msg(PQstatus(c) == CONNECTION_OK, "%s: %s\n%s", db, PQerrorMessage(c), pgv_log_tail(p, 3000));
	return c;
}

/* A statement that returns no rows (ALTER SYSTEM), asserted to succeed. */
static void command_ok(PGconn *c, const char *sql)
{
	PGresult *r = PQexec(c, sql);
	ck_assert_msg(PQresultStatus(r) == PGRES_COMMAND_OK, "%s: %s", sql, PQerrorMessage(c));
	PQclear(r);
}

/* Whether the file at path has a line containing needle. */
static bool file_contains(const char *path, const char *needle)
{
	FILE *f = fopen(path, "r");
	char line[4096];
	bool found = false;
	while (f && !found && fgets(line, sizeof(line), f))
		found = strstr(line, needle) != NULL;
	if (f)
		fclose(f);
	return found;
}

/* SHOW HOSTS' value of column col for database db, host host (static buffer; "(absent)" if no such row). */
static const char *host_value(struct pgv *p, const char *db, const char *host, const char *col)
{
	static char out[64];
	PGconn *adm = connect_ok(p, "pgbouncer");
	PGresult *r = PQexec(adm, "SHOW HOSTS");
	ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "SHOW HOSTS: %s", PQerrorMessage(adm));
	snprintf(out, sizeof(out), "(absent)");
	for (int i = 0; i < PQntuples(r); i++)
		if (strcmp(PQgetvalue(r, i, PQfnumber(r, "database")), db) == 0 &&
		    strcmp(PQgetvalue(r, i, PQfnumber(r, "host")), host) == 0)
			snprintf(out, sizeof(out), "%s", PQgetisnull(r, i, PQfnumber(r, col)) ? "(null)" :
				 PQgetvalue(r, i, PQfnumber(r, col)));
	PQclear(r);
	PQfinish(adm);
	return out;
}

/* "address|in recovery" of the server the next transaction of c gets. */
static const char *where(PGconn *c)
{
	return query_value(c, "SELECT host(inet_server_addr()) || '|' || pg_is_in_recovery()");
}

/* SHOW SERVERS' role of the first server of database ro (static buffer; "(none)" without one). */
static const char *show_standby_role(PGconn *adm)
{
	static char out[32];
	PGresult *r = PQexec(adm, "SHOW SERVERS");
	ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
	snprintf(out, sizeof(out), "(none)");
	for (int i = 0; i < PQntuples(r); i++)
		if (strcmp(PQgetvalue(r, i, PQfnumber(r, "database")), "ro") == 0) {
			snprintf(out, sizeof(out), "%s", PQgetvalue(r, i, PQfnumber(r, "role")));
			break;
		}
	PQclear(r);
	return out;
}

/* ---------------------------------------------------------------- routing */

/*
 * read-write goes to the primary, read-only spreads over both replicas
 * (least-connections: evenly), prefer-standby uses a replica, then falls
 * back on the primary when no replica is up.
 */
START_TEST(routes_by_role)
{
	struct pgv p;
	roles_cluster_start();
	const char *names[] = { "rw", "ro", "lc", "ps" };
	const char *tsas[] = { "read-write", "read-only", "standby", "prefer-standby" };
	const char *extras[] = { NULL, NULL, "load_balance_hosts=least-connections", NULL };
	char ini[512];
	int mport = pgv_pick_http_port(0);
	snprintf(ini, sizeof(ini), BASE "metrics_port = %d\nmetrics_listen_addr = 127.0.0.1\n", mport);
	pgv_start(&p, ini, db_lines(names, tsas, extras, 4), USERS);

	PGconn *rw = connect_ok(&p, "rw");
	ck_assert_str_eq(where(rw), "127.0.0.2|false");
	ck_assert_str_eq(query_value(rw, "INSERT INTO t VALUES (1) RETURNING id"), "1");

	/* four transactions at once need four servers: all on replicas, both used */
	const char *dbs[] = { "ro", "lc" };
	for (int d = 0; d < 2; d++) {
		PGconn *c[4];
		int on3 = 0, on4 = 0;
		for (int i = 0; i < 4; i++) {
			c[i] = connect_ok(&p, dbs[d]);
			const char *w = query_value(c[i], "BEGIN; SELECT host(inet_server_addr()) || '|' || pg_is_in_recovery()");
			if (strcmp(w, "127.0.0.3|true") == 0)
				on3++;
			else if (strcmp(w, "127.0.0.4|true") == 0)
				on4++;
			else
				ck_abort_msg("%s: a transaction went to %s\n%s", dbs[d], w, pgv_log_tail(&p, 3000));
		}
		ck_assert_msg(on3 > 0 && on4 > 0, "%s: %d on node2, %d on node3", dbs[d], on3, on4);
		if (d == 1)
			ck_assert_msg(on3 == 2 && on4 == 2, "least-connections: %d on node2, %d on node3", on3, on4);
		for (int i = 0; i < 4; i++)
			PQfinish(c[i]);
	}

	PGconn *ps = connect_ok(&p, "ps");
	ck_assert_str_eq(query_value(ps, "SELECT pg_is_in_recovery()::text"), "true");
	ck_assert_str_eq(PQparameterStatus(ps, "in_hot_standby"), "on");
	roles_cluster("stop", 2);
	roles_cluster("stop", 3);
	/*
	 * the replicas' idle servers see their FATAL and close: pg_ctl stop has
	 * waited for the exit, so the FATALs are already in the sockets and
	 * pgvalve reads them in milliseconds; the fallback's own bound is below.
	 */
	sleep_ms(300);
	double t0 = now_s();
	ck_assert_str_eq(where(ps), "127.0.0.2|false");
	ck_assert_msg(now_s() - t0 < 10, "the fallback took %.1f s", now_s() - t0);
	/* what the client was told follows its server */
	ck_assert_str_eq(PQparameterStatus(ps, "in_hot_standby"), "off");
	/* and read-write never noticed */
	ck_assert_str_eq(where(rw), "127.0.0.2|false");

	PGconn *adm = connect_ok(&p, "pgbouncer");
	PGresult *r = PQexec(adm, "SHOW HOSTS");
	ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "SHOW HOSTS: %s", PQerrorMessage(adm));
	int rows = PQntuples(r), primaries = 0, down = 0;
	for (int i = 0; i < rows; i++) {
		if (strcmp(PQgetvalue(r, i, PQfnumber(r, "role")), "primary") == 0)
			primaries++;
		if (strcmp(PQgetvalue(r, i, PQfnumber(r, "state")), "down") == 0)
			down++;
	}
	ck_assert_int_eq(rows, 12);	/* 4 databases, 3 hosts each */
	ck_assert_int_eq(primaries, 4);
	ck_assert_msg(down >= 2, "%d hosts down", down);
	PQclear(r);
	PQfinish(adm);
	char line[64];
	snprintf(line, sizeof(line), "host 127.0.0.2:%d is now primary", roles_cluster_port);
	ck_assert(pgv_log_contains(&p, line));
	snprintf(line, sizeof(line), "host 127.0.0.4:%d is now standby", roles_cluster_port);
	ck_assert(pgv_log_contains(&p, line));

	/* the same in /metrics: per database and host, up and primary */
	const char *m = pgv_scrape_metrics(mport);
	char series[256];
	snprintf(series, sizeof(series), "pgvalve_host_primary{database=\"rw\",host=\"127.0.0.2\",port=\"%d\"} 1", roles_cluster_port);
	ck_assert_msg(strstr(m, series), "no %s in\n%.4000s", series, m);
	snprintf(series, sizeof(series), "pgvalve_host_primary{database=\"ro\",host=\"127.0.0.3\",port=\"%d\"} 0", roles_cluster_port);
	ck_assert_msg(strstr(m, series), "no %s in\n%.4000s", series, m);
	snprintf(series, sizeof(series), "pgvalve_host_up{database=\"ps\",host=\"127.0.0.3\",port=\"%d\"} 0", roles_cluster_port);
	ck_assert_msg(strstr(m, series), "no %s in\n%.4000s", series, m);
	snprintf(series, sizeof(series), "pgvalve_host_up{database=\"ps\",host=\"127.0.0.2\",port=\"%d\"} 1", roles_cluster_port);
	ck_assert_msg(strstr(m, series), "no %s in\n%.4000s", series, m);
	PQfinish(ps);
	PQfinish(rw);
	pgv_stop(&p);
	roles_cluster_stop();
}
END_TEST

/* ---------------------------------------------------------------- failover */

#define WRITERS 4

/*
 * One writer process: WRITERS connections to rw, one INSERT at a time on
 * each in turn, for `seconds`; each line of out says what came back:
 * "ok ID T" (committed), "err SQLSTATE T message", T on now_s()'s clock.
 * Broken connections are opened again.
 */
static void writer(struct pgv *p, const char *out, double seconds)
{
	FILE *f = fopen(out, "w");
	if (!f)
		_exit(2);
	PGconn *c[WRITERS];
	for (int i = 0; i < WRITERS; i++)
		c[i] = pgv_connect(p, "rw", "pgvadmin", NULL);
	double t0 = now_s();
	int id = 1000;
	while (now_s() - t0 < seconds) {
		for (int i = 0; i < WRITERS; i++) {
			char sql[128];
			if (PQstatus(c[i]) != CONNECTION_OK)
				PQreset(c[i]);
			id++;
			snprintf(sql, sizeof(sql), "INSERT INTO t VALUES (%d) RETURNING pg_is_in_recovery()", id);
			PGresult *r = PQexec(c[i], sql);
			if (PQresultStatus(r) == PGRES_TUPLES_OK) {
				fprintf(f, "ok %d %.3f\n", id, now_s());
			} else {
				const char *st = PQresultErrorField(r, PG_DIAG_SQLSTATE);
				char msg[200];
				snprintf(msg, sizeof(msg), "%s", PQerrorMessage(c[i]));
				msg[strcspn(msg, "\n")] = '\0';
				fprintf(f, "err %s %.3f %s\n", st ? st : "-----", now_s(), msg);
			}
			PQclear(r);
			fflush(f);
		}
		sleep_ms(5);	/* pacing the writes */
	}
	fclose(f);
	_exit(0);
}

/*
 * Under a writing load through a read-write database, the primary is
 * stopped and a replica promoted (in that order: the old primary's fast
 * shutdown sends its last WAL to the replicas, so that nothing committed
 * is lost by PostgreSQL itself). Writes fail only inside the failover
 * window, none is refused as read-only (none reached a standby), every
 * committed row is on the new primary, and a client idle throughout goes
 * on there without reconnecting.
 */
START_TEST(failover_under_load)
{
	struct pgv p;
	char out[700];
	roles_cluster_start();
	const char *names[] = { "rw" };
	const char *tsas[] = { "read-write" };
	pgv_start(&p, BASE "default_pool_size = 8\n", db_lines(names, tsas, NULL, 1), USERS);
	PGconn *idle = connect_ok(&p, "rw");
	ck_assert_str_eq(where(idle), "127.0.0.2|false");

	snprintf(out, sizeof(out), "%s.writes", roles_cluster_dir);
	pid_t child = fork();
	ck_assert_int_ge(child, 0);
	if (child == 0)
		writer(&p, out, 9);
	sleep_s(2);
	double t_stop = now_s();
	roles_cluster("stop", 1);
	roles_cluster("promote", 2);
	double t_promoted = now_s();
	int status = 0;
	ck_assert_int_eq(waitpid(child, &status, 0), child);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "writer: status %d", status);

	/* what the writers were told */
	FILE *f = fopen(out, "r");
	ck_assert_ptr_nonnull(f);
	static bool committed[100000];
	int oks = 0, errs = 0, read_only = 0, oks_after = 0, max_id = 0;
	double first_err = -1, last_err = -1, last_ok = 0, prev_ok = 0, max_gap = 0;
	char line[512];
	while (fgets(line, sizeof(line), f)) {
		int id;
		double t;
		char st[16];
		if (sscanf(line, "ok %d %lf", &id, &t) == 2) {
			ck_assert(id > 0 && id < 100000);
			committed[id] = true;
			oks++;
			if (id > max_id)
				max_id = id;
			if (t > t_promoted)
				oks_after++;
			if (prev_ok > 0 && t - prev_ok > max_gap)
				max_gap = t - prev_ok;	/* the writers' stall: the failover window they saw */
			prev_ok = t;
			last_ok = t - t_stop;
		} else if (sscanf(line, "err %15s %lf", st, &t) == 2) {
			errs++;
			if (strcmp(st, "25006") == 0)
				read_only++;
			if (first_err < 0)
				first_err = t - t_stop;
			last_err = t - t_stop;
		}
	}
	fclose(f);
	fprintf(stderr, "failover_under_load: %d committed, %d failed between %.2f s and %.2f s after the stop began "
		"(window %.2f s), promotion done at %.2f s, %d committed after it, last at %.2f s, "
		"longest time without a commit %.2f s\n",
		oks, errs, first_err, last_err, errs ? last_err - first_err : 0.0, t_promoted - t_stop, oks_after, last_ok, max_gap);
	ck_assert_msg(read_only == 0, "%d writes were refused as read-only: a standby was used", read_only);
	ck_assert_msg(oks_after > 20, "only %d writes committed after the failover\n%s", oks_after,
		      pgv_log_tail(&p, 4000));
	ck_assert_msg(errs == 0 || last_err - first_err < 6, "failures over %.2f s", last_err - first_err);

	/* every committed row is on the new primary */
	PGconn *n2 = roles_cluster_connect(2);
	ck_assert_str_eq(query_value(n2, "SELECT pg_is_in_recovery()::text"), "false");
	PGresult *r = PQexec(n2, "SELECT id FROM t");
	ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
	static bool present[100000];
	for (int i = 0; i < PQntuples(r); i++) {
		int id = atoi(PQgetvalue(r, i, 0));
		if (id > 0 && id < 100000)
			present[id] = true;
	}
	PQclear(r);
	int missing = 0;
	for (int id = 0; id <= max_id; id++)
		if (committed[id] && !present[id])
			missing++;
	ck_assert_msg(missing == 0, "%d committed rows are not on the new primary", missing);
	/* node3 still a standby: nothing was written there either */
	PGconn *n3 = roles_cluster_connect(3);
	ck_assert_str_eq(query_value(n3, "SELECT pg_is_in_recovery()::text"), "true");
	PQfinish(n3);
	PQfinish(n2);

	/* the idle client goes on, on the new primary */
	ck_assert_str_eq(where(idle), "127.0.0.3|false");
	char promoted[64];
	snprintf(promoted, sizeof(promoted), "host 127.0.0.3:%d is now primary", roles_cluster_port);
	ck_assert(pgv_log_contains(&p, promoted));
	PQfinish(idle);
	pgv_stop(&p);
	roles_cluster_stop();
}
END_TEST

/*
 * A standby database's server on a replica that is promoted. Without
 * server_role_check_period the promotion is noticed when PostgreSQL
 * reports in_hot_standby off, with the next ReadyForQuery: that one
 * transaction still runs there, then the server is closed and the next
 * runs on the other replica. With server_role_check_period = 1 (a second
 * pgvalve) the idle server is checked and replaced before the client's
 * next transaction.
 */
START_TEST(promoted_replica_is_left)
{
	struct pgv p, q;
	roles_cluster_start();
	const char *names[] = { "ro" };
	const char *tsas[] = { "standby" };
	const char *extras[] = { "load_balance_hosts=disable" };
	pgv_start(&p, BASE, db_lines(names, tsas, extras, 1), USERS);
	memset(&q, 0, sizeof(q));
	pgv_start(&q, BASE "server_role_check_period = 1\n", db_lines(names, tsas, extras, 1), USERS);
	PGconn *c = connect_ok(&p, "ro");
	PGconn *checked = connect_ok(&q, "ro");
	ck_assert_str_eq(where(c), "127.0.0.3|true");
	ck_assert_str_eq(where(checked), "127.0.0.3|true");
	roles_cluster("promote", 2);

	char promoted[64];
	snprintf(promoted, sizeof(promoted), "host 127.0.0.3:%d is now primary", roles_cluster_port);
	/* PostgreSQL reports the change with the next ReadyForQuery: that transaction is the last there */
	query_value(c, "SELECT 1");
	pgv_expect_log(&p, promoted, 5);
	ck_assert_str_eq(where(c), "127.0.0.4|true");
	ck_assert_str_eq(where(c), "127.0.0.4|true");

	/* the periodic check finds it while the client is idle */
	pgv_expect_log(&q, promoted, 5);
	ck_assert_str_eq(where(checked), "127.0.0.4|true");
	PQfinish(checked);
	PQfinish(c);
	pgv_stop(&q);
	pgv_stop(&p);
	roles_cluster_stop();
}
END_TEST

/* The database's transactions at once: how many ran on node2 and node3 (a failure otherwise). */
static void spread(struct pgv *p, const char *db, int n, int *on3, int *on4)
{
	PGconn *c[8];
	*on3 = *on4 = 0;
	for (int i = 0; i < n; i++) {
		c[i] = connect_ok(p, db);
		const char *w = query_value(c[i], "BEGIN; SELECT host(inet_server_addr()) || '|' || pg_is_in_recovery()");
		if (strcmp(w, "127.0.0.3|true") == 0)
			(*on3)++;
		else if (strcmp(w, "127.0.0.4|true") == 0)
			(*on4)++;
		else
			ck_abort_msg("%s: a transaction went to %s", db, w);
	}
	for (int i = 0; i < n; i++)
		PQfinish(c[i]);
}

/*
 * max_replica_lag: node3 applies WAL an hour late (recovery_min_apply_delay),
 * so what it receives piles up unreplayed; a standby database with
 * max_replica_lag = 8192 uses node2 only, and so does one with
 * max_replica_lag_seconds = 1 (node3's last replayed commit is older);
 * SHOW HOSTS and /metrics show node3's lag in bytes and seconds, and
 * "ineligible"; once node3 catches up it is used again.
 */
START_TEST(lagging_replica_is_skipped)
{
	struct pgv p;
	roles_cluster_start();
	PGconn *n1 = roles_cluster_connect(1);
	PGconn *n3 = roles_cluster_connect(3);
	/* a commit node3 replays at once: the last before the delay, what the seconds count from */
	query_value(n1, "INSERT INTO t VALUES (199999) RETURNING id");
	double t0 = now_s();
	/* until node3 has replayed it (milliseconds; 10 s on a loaded machine, the checks below then fail visibly) */
	while (strcmp(query_value(n3, "SELECT count(*) FROM t WHERE id = 199999"), "1") != 0 && now_s() - t0 < 10)
		sleep_ms(100);
	roles_cluster("delay", 3);
	query_value(n1, "INSERT INTO t VALUES (200000) RETURNING id");	/* its commit holds node3's replay */
	query_value(n1, "INSERT INTO t SELECT g FROM generate_series(200001, 210000) g RETURNING id");
	/* until node3 has received what it holds back (streaming: milliseconds; 10 s on a loaded machine) */
	t0 = now_s();
	while (atoll(query_value(n3, "SELECT pg_wal_lsn_diff(pg_last_wal_receive_lsn(), pg_last_wal_replay_lsn())"))
	       < 100000 && now_s() - t0 < 10)
		sleep_ms(100);
	/* over a second since that last replayed commit: a lower bound, which a loaded machine only lengthens */
	sleep_ms(1200);

	const char *names[] = { "ro", "ros" };
	const char *tsas[] = { "standby", "standby" };
	const char *extras[] = { "max_replica_lag=8kB", "max_replica_lag_seconds=1" };
	char ini[512];
	int mport = pgv_pick_http_port(0);
	snprintf(ini, sizeof(ini), BASE "metrics_port = %d\nmetrics_listen_addr = 127.0.0.1\n", mport);
	pgv_start(&p, ini, db_lines(names, tsas, extras, 2), USERS);
	int on3, on4;
	for (int round = 0; round < 3; round++) {
		for (int d = 0; d < 2; d++) {
			spread(&p, names[d], 4, &on3, &on4);
			ck_assert_msg(on3 == 4 && on4 == 0, "%s, round %d: %d on node2, %d on the lagging node3\n%s",
				      names[d], round, on3, on4, pgv_log_tail(&p, 3000));
		}
		sleep_ms(700);	/* pacing: the rounds span two seconds of lag checks, each must leave node3 out */
	}
	ck_assert_msg(atof(host_value(&p, "ros", "127.0.0.4", "lag_seconds")) > 1, "ros: node3 lags %s s",
		      host_value(&p, "ros", "127.0.0.4", "lag_seconds"));
	ck_assert_str_eq(host_value(&p, "ros", "127.0.0.4", "state"), "ineligible");
	ck_assert_str_eq(host_value(&p, "ros", "127.0.0.3", "lag_seconds"), "0.000");
	char series[256];
	const char *m = pgv_scrape_metrics(mport);
	snprintf(series, sizeof(series), "pgvalve_host_lag_seconds{database=\"ros\",host=\"127.0.0.4\",port=\"%d\"} ", roles_cluster_port);
	ck_assert_msg(strstr(m, series) && atof(strstr(m, series) + strlen(series)) > 1, "no %s > 1 in\n%.4000s", series, m);
	snprintf(series, sizeof(series), "pgvalve_host_lag_bytes{database=\"ro\",host=\"127.0.0.4\",port=\"%d\"} ", roles_cluster_port);
	ck_assert_msg(strstr(m, series) && atof(strstr(m, series) + strlen(series)) > 8192, "no %s > 8192 in\n%.4000s",
		      series, m);
	char line[80];
	snprintf(line, sizeof(line), "host 127.0.0.4:%d lags", roles_cluster_port);
	ck_assert_msg(pgv_log_contains(&p, line), "%s", pgv_log_tail(&p, 3000));
	ck_assert_msg(pgv_log_contains(&p, " s, not used (max_replica_lag)"), "%s", pgv_log_tail(&p, 3000));

	ck_assert_str_eq(host_value(&p, "ro", "127.0.0.4", "state"), "ineligible");
	ck_assert_msg(atoll(host_value(&p, "ro", "127.0.0.4", "lag")) > 8192, "lag %s",
		      host_value(&p, "ro", "127.0.0.4", "lag"));
	ck_assert_str_eq(host_value(&p, "ro", "127.0.0.2", "lag"), "(null)");	/* a primary's lag is NULL */

	/* caught up: used again */
	roles_cluster("undelay", 3);
	/* until node3 has replayed what it held (a restart of its replay: seconds; 10 s on a loaded machine) */
	t0 = now_s();
	while (atoll(query_value(n3, "SELECT pg_wal_lsn_diff(pg_last_wal_receive_lsn(), pg_last_wal_replay_lsn())"))
	       > 0 && now_s() - t0 < 10)
		sleep_ms(100);
	/* until the next lag check sees node3 caught up (about a second); 15 s leaves a loaded machine plenty */
	on4 = 0;
	t0 = now_s();
	while (on4 == 0 && now_s() - t0 < 15) {
		sleep_ms(500);
		spread(&p, "ro", 4, &on3, &on4);
	}
	ck_assert_msg(on4 > 0, "node3 not used again %.1f s after it caught up\n%s", now_s() - t0, pgv_log_tail(&p, 3000));
	PQfinish(n3);
	PQfinish(n1);
	pgv_stop(&p);
	roles_cluster_stop();
}
END_TEST

/*
 * The lag is measured against the primary: node3 stops receiving WAL
 * (primary_conninfo emptied), so by its own account it has replayed all
 * it received, while the primary, written to through a read-write
 * database of the same host list, moves on. A standby database with
 * max_replica_lag = 8kB leaves node3 out; SHOW HOSTS shows the lag.
 */
START_TEST(lag_is_measured_against_the_primary)
{
	struct pgv p;
	roles_cluster_start();
	PGconn *n3 = roles_cluster_connect(3);
	command_ok(n3, "ALTER SYSTEM SET primary_conninfo = ''");
	query_value(n3, "SELECT pg_reload_conf()");
	/* until node3's WAL receiver has stopped (at the reload: milliseconds; 10 s on a loaded machine) */
	double t0 = now_s();
	while (strcmp(query_value(n3, "SELECT count(*) FROM pg_stat_wal_receiver"), "0") != 0 && now_s() - t0 < 10)
		sleep_ms(100);

	const char *names[] = { "rw", "ro" };
	const char *tsas[] = { "read-write", "standby" };
	const char *extras[] = { NULL, "max_replica_lag=8kB" };
	pgv_start(&p, BASE, db_lines(names, tsas, extras, 2), USERS);
	PGconn *rw = connect_ok(&p, "rw");
	query_value(rw, "INSERT INTO t SELECT g FROM generate_series(300000, 310000) g RETURNING id");
	/* node3 by itself: nothing received is left to replay */
	ck_assert_str_eq(query_value(n3, "SELECT pg_wal_lsn_diff(pg_last_wal_receive_lsn(), pg_last_wal_replay_lsn())"),
			 "0");
	/*
	 * the janitor asks the primary's idle server for its position. A fixed
	 * wait the verdict rests on (the lag must be known before the reads);
	 * waiting for SHOW HOSTS' lag instead would need node3's servers, which
	 * only the reads open. A second is three janitor ticks.
	 */
	sleep_ms(1000);
	int on3, on4;
	for (int round = 0; round < 2; round++) {
		spread(&p, "ro", 4, &on3, &on4);
		ck_assert_msg(on3 == 4 && on4 == 0, "round %d: %d on node2, %d on node3, which lags the primary\n%s",
			      round, on3, on4, pgv_log_tail(&p, 3000));
		sleep_ms(500);	/* pacing: the second round after the next lag check */
	}
	ck_assert_msg(atoll(host_value(&p, "ro", "127.0.0.4", "lag")) > 8192, "node3's lag: %s",
		      host_value(&p, "ro", "127.0.0.4", "lag"));
	ck_assert_str_eq(host_value(&p, "ro", "127.0.0.4", "state"), "ineligible");
	ck_assert_str_eq(host_value(&p, "ro", "127.0.0.4", "lag_seconds"), "0.000");	/* by the seconds it is not behind */
	ck_assert_str_eq(host_value(&p, "ro", "127.0.0.3", "state"), "up");
	PQfinish(rw);
	PQfinish(n3);
	pgv_stop(&p);
	roles_cluster_stop();
}
END_TEST

/*
 * Servers that do not report in_hot_standby (PostgreSQL 13 and older) get
 * their role from a query at login. PostgreSQL 15 always reports it, so
 * pgvalve is told to ignore the reports (a test-only environment variable,
 * roles.c): writes through a read-write database still go to the primary
 * only, reads through a read-only one to the replicas, and the primary's
 * log shows the role query pgvalve ran. The read-write database's line
 * does not say target_session_attrs: [pgvalve]'s applies.
 */
START_TEST(role_query_without_reports)
{
	struct pgv p;
	char log[700];
	roles_cluster_start();
	PGconn *n1 = roles_cluster_connect(1);
	command_ok(n1, "ALTER SYSTEM SET log_statement = 'all'");
	query_value(n1, "SELECT pg_reload_conf()");
	const char *names[] = { "rw", "ro" };
	const char *tsas[] = { NULL, "read-only" };
	setenv("PGVALVE_TEST_IGNORE_ROLE_REPORTS", "1", 1);
	pgv_start(&p, BASE "target_session_attrs = read-write\n", db_lines(names, tsas, NULL, 2), USERS);
	unsetenv("PGVALVE_TEST_IGNORE_ROLE_REPORTS");
	ck_assert(pgv_log_contains(&p, "PGVALVE_TEST_IGNORE_ROLE_REPORTS is set"));

	/* four transactions at once: four servers, all on the primary */
	PGconn *c[4];
	for (int i = 0; i < 4; i++) {
		c[i] = connect_ok(&p, "rw");
		ck_assert_str_eq(query_value(c[i], "BEGIN; SELECT host(inet_server_addr()) || '|' || pg_is_in_recovery()"),
				 "127.0.0.2|false");
	}
	PGconn *adm = connect_ok(&p, "pgbouncer");
	PGresult *r = PQexec(adm, "SHOW SERVERS");
	ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
	ck_assert_int_eq(PQntuples(r), 4);
	for (int i = 0; i < 4; i++)
		ck_assert_str_eq(PQgetvalue(r, i, PQfnumber(r, "role")), "primary");
	PQclear(r);
	for (int i = 0; i < 4; i++)
		PQfinish(c[i]);
	int on3, on4;
	spread(&p, "ro", 4, &on3, &on4);
	ck_assert_msg(on3 > 0 && on4 > 0, "read-only: %d on node2, %d on node3", on3, on4);
	PGconn *ro = connect_ok(&p, "ro");
	ck_assert_str_eq(query_value(ro, "SELECT pg_is_in_recovery()::text"), "true");
	ck_assert_str_eq(show_standby_role(adm), "standby");	/* its server, idle again */
	PQfinish(ro);
	PQfinish(adm);

	snprintf(log, sizeof(log), "%s/node1.log", roles_cluster_dir);
	ck_assert_msg(file_contains(log, "pg_catalog.pg_is_in_recovery(), pg_catalog.current_setting("),
		      "no role query in node1's log:\n%s", read_file_tail(log, 3000));
	PQfinish(n1);
	pgv_stop(&p);
	roles_cluster_stop();
}
END_TEST

/* ---------------------------------------------------------------- bad input */

START_TEST(typo_is_a_load_error)
{
	char ini[700], out[700], text[512];
	const char *dir = getenv("PGV_TEST_DIR");
	const char *runas = getenv("PGV_TEST_RUNAS");
	snprintf(ini, sizeof(ini), "%s/tsa.%d.ini", dir, (int)getpid());
	snprintf(out, sizeof(out), "%s/tsa.%d.out", dir, (int)getpid());
	snprintf(text, sizeof(text),
		 "[databases]\nx = host=127.0.0.1 target_session_attrs=read_write\n"
		 "[pgvalve]\nlisten_addr = 127.0.0.1\nlisten_port = 1\n");
	FILE *f = fopen(ini, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
	char *args[] = { getenv("PGV_BINARY"), "-u", runas && *runas ? (char *)runas : "nobody", ini, NULL };
	char *noroot[] = { getenv("PGV_BINARY"), ini, NULL };
	int rc = run_program(geteuid() == 0 ? args : noroot, NULL, out, 20);
	const char *text_out = read_file_tail(out, 4000);
	ck_assert_msg(rc == 1, "exit %d:\n%s", rc, text_out);
	ck_assert_msg(strstr(text_out, "\"read_write\"") && strstr(text_out, "target_session_attrs") &&
		      strstr(text_out, "any, read-write, read-only, primary, standby, prefer-standby"), "%s", text_out);
}
END_TEST

/*
 * A host list with a name that does not resolve and a host that accepts
 * TCP but never answers, before PostgreSQL (the fixture's, on 127.0.0.1):
 * the first client waits while they fail (server_connect_timeout), then
 * gets in; both are then skipped, so the next server comes at once.
 */
START_TEST(bad_hosts_are_skipped)
{
	struct pgv_dns d;
	struct pgv p;
	char dbs[512], extra[1024];
	int port = atoi(getenv("PGV_TEST_PGPORT"));

	int silent = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	inet_pton(AF_INET, "127.0.0.5", &sa.sin_addr);
	ck_assert_int_eq(bind(silent, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(silent, 16), 0);	/* the kernel completes handshakes; nobody reads */

	pgv_dns_start(&d, "127.0.0.1 db1.pgv.test\n");
	snprintf(dbs, sizeof(dbs), "rw = host=nope.pgv.test,127.0.0.5,127.0.0.1 port=%d dbname=pgvtest "
		 "target_session_attrs=read-write\n", port);
	snprintf(extra, sizeof(extra), "auth_type = md5\nresolv_conf = %s\nserver_login_retry = 1\n"
		 "server_connect_timeout = 2\nquery_wait_timeout = 30\npool_mode = transaction\n", d.resolv);
	pgv_start(&p, extra, dbs, std_userlist());

	double t0 = now_s();
	PGconn *c = pgv_connect(&p, "rw", "md5_user", "md5_pass");
	ck_assert_msg(PQstatus(c) == CONNECTION_OK, "%s\n%s", PQerrorMessage(c), pgv_log_tail(&p, 3000));
	ck_assert_str_eq(query_value(c, "BEGIN; SELECT host(inet_server_addr())"), "127.0.0.1");
	double first = now_s() - t0;
	ck_assert_msg(first < 20, "the first server took %.1f s", first);

	t0 = now_s();
	PGconn *c2 = pgv_connect(&p, "rw", "md5_user", "md5_pass");
	ck_assert_msg(PQstatus(c2) == CONNECTION_OK, "%s", PQerrorMessage(c2));
	ck_assert_str_eq(query_value(c2, "SELECT host(inet_server_addr())"), "127.0.0.1");
	double second = now_s() - t0;
	ck_assert_msg(second < 1.5, "the second server took %.1f s (the bad hosts were tried again)", second);
	ck_assert(pgv_log_contains(&p, "nope.pgv.test"));
	ck_assert(pgv_log_contains(&p, "server connect timeout"));
	PQfinish(c2);
	PQfinish(c);
	pgv_stop(&p);
	pgv_dns_stop(&d);
	close(silent);
}
END_TEST

/*
 * server_login_retry = 0 on a role-routed host list: a login that failed
 * (here: no such database) holds the pool back not at all, so the next
 * client's login tries the server again and gets its error, not the
 * cached one ("server login has been failing"). The hold for role-routed
 * lists is never longer than server_login_retry itself.
 */
START_TEST(login_retry_zero_is_no_hold)
{
	struct pgv p;
	char dbs[512];
	int port = atoi(getenv("PGV_TEST_PGPORT"));
	snprintf(dbs, sizeof(dbs), "rw = host=127.0.0.1,localhost port=%d dbname=nosuchdb target_session_attrs=read-write\n",
		 port);
	pgv_start(&p, "auth_type = md5\nserver_login_retry = 0\npool_mode = transaction\n", dbs, std_userlist());
	for (int i = 0; i < 3; i++) {
		PGconn *c = pgv_connect(&p, "rw", "md5_user", "md5_pass");
		const char *err = PQerrorMessage(c);
		ck_assert_msg(PQstatus(c) != CONNECTION_OK, "login %d succeeded", i);
		ck_assert_msg(strstr(err, "nosuchdb") && !strstr(err, "cached error"), "login %d: %s", i, err);
		PQfinish(c);
	}
	pgv_stop(&p);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("roles");
	TCase *tc = pgv_tcase_create("roles", 120);
	tcase_add_test(tc, typo_is_a_load_error);
	tcase_add_test(tc, bad_hosts_are_skipped);
	tcase_add_test(tc, login_retry_zero_is_no_hold);
	tcase_add_test(tc, routes_by_role);
	tcase_add_test(tc, promoted_replica_is_left);
	tcase_add_test(tc, failover_under_load);
	tcase_add_test(tc, lagging_replica_is_skipped);
	tcase_add_test(tc, lag_is_measured_against_the_primary);
	tcase_add_test(tc, role_query_without_reports);
	suite_add_tcase(s, tc);
	return pgv_run_suite(s);
}
