/*
 * test_replication.c - replication connections through pgvalve (issue 15
 * point 8), as PgBouncer 1.23+ carries them: each replication client gets
 * a server of its own, counted against pool_size, opened with the
 * client's startup parameters (`options` verbatim) and closed with it; a
 * failed replication login fails that client alone. Real tools: libpq in
 * replication mode, pg_basebackup, pg_receivewal and a logical
 * subscription of the same cluster.
 *
 * The cluster (run.sh) has wal_level = logical and a role repl_user with
 * REPLICATION; pg_hba lets only repl_user open physical replication
 * connections over TCP.
 */
#include "harness.h"

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#define DB "pgvtest"

/* pgvtest; "replication" for PostgreSQL 15's pg_basebackup and pg_receivewal, which send that name; small: pool_size 1. */
static const char *databases(void)
{
	static char buf[512];
	const char *port = getenv("PGV_TEST_PGPORT");
	ck_assert_ptr_nonnull(port);
	snprintf(buf, sizeof(buf),
		 "pgvtest = host=127.0.0.1 port=%s dbname=pgvtest\n"
		 "replication = host=127.0.0.1 port=%s dbname=pgvtest\n"
		 "small = host=127.0.0.1 port=%s dbname=pgvtest pool_size=1\n"
		 "fresh = host=127.0.0.1 port=%s dbname=pgvtest\n",
		 port, port, port, port);
	return buf;
}

static const char *userlist(void)
{
	static char buf[1024];
	snprintf(buf, sizeof(buf), "%s\"repl_user\" \"repl_pass\"\n\"admin_u\" \"admin_pass\"\n", std_userlist());
	return buf;
}

#define SETTINGS "pool_mode = transaction\nadmin_users = admin_u\nauth_type = scram-sha-256\n"

static void start(struct pgv *p)
{
	pgv_start(p, SETTINGS, databases(), userlist());
}

/* A connection to pgvalve from a conninfo fragment (host, port and password added). */
static PGconn *connect_with(struct pgv *p, const char *conninfo)
{
	char buf[1024];
	snprintf(buf, sizeof(buf), "host=127.0.0.1 port=%d sslmode=disable connect_timeout=10 %s", p->port, conninfo);
	PGconn *c = PQconnectdb(buf);
	ck_assert_ptr_nonnull(c);
	return c;
}

static PGconn *logical(struct pgv *p, const char *extra)
{
	char buf[512];
	snprintf(buf, sizeof(buf), "dbname=" DB " user=repl_user password=repl_pass replication=database %s", extra);
	return connect_with(p, buf);
}

static void direct_exec(const char *sql)
{
	PGconn *d = pg_direct();
	PGresult *r = PQexec(d, sql);
	ck_assert_msg(PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK, "%s: %s", sql,
		      PQerrorMessage(d));
	PQclear(r);
	PQfinish(d);
}

/* Walsenders of repl_user on the server (what pgvalve opened for replication clients). */
static int walsenders(void)
{
	PGconn *d = pg_direct();
	int n = atoi(query_value(d, "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'walsender'"
				    " AND usename = 'repl_user'"));
	PQfinish(d);
	return n;
}

/* Until PostgreSQL runs expected walsenders of repl_user: a login and a start each, 10 s on a loaded machine. */
static void wait_walsenders(int expected)
{
	double deadline = now_s() + 10;
	int n;
	while ((n = walsenders()) != expected && now_s() < deadline)
		sleep_ms(50);
	ck_assert_msg(n == expected, "%d walsenders of repl_user, expected %d", n, expected);
}

/* The value of column `col` in the SHOW CLIENTS/SERVERS row whose `match_col` is `match`, or NULL. */
static const char *show_value(PGconn *admin, const char *cmd, const char *match_col, const char *match, const char *col)
{
	static char buf[256];
	PGresult *r = PQexec(admin, cmd);
	ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
	int mc = PQfnumber(r, match_col), vc = PQfnumber(r, col);
	ck_assert_int_ge(mc, 0);
	ck_assert_int_ge(vc, 0);
	const char *found = NULL;
	for (int i = 0; i < PQntuples(r); i++) {
		if (strcmp(PQgetvalue(r, i, mc), match) == 0) {
			snprintf(buf, sizeof(buf), "%s", PQgetvalue(r, i, vc));
			found = buf;
			break;
		}
	}
	PQclear(r);
	return found;
}

/* Rows of a SHOW command whose column col is value. */
static int count_rows(PGconn *admin, const char *cmd, const char *col, const char *value)
{
	PGresult *r = PQexec(admin, cmd);
	ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
	int c = PQfnumber(r, col), n = 0;
	ck_assert_int_ge(c, 0);
	for (int i = 0; i < PQntuples(r); i++)
		n += strcmp(PQgetvalue(r, i, c), value) == 0;
	PQclear(r);
	return n;
}

/* IDENTIFY_SYSTEM on c: one row of four columns; returns its dbname column ("null" if NULL). */
static const char *identify_system(PGconn *c)
{
	static char dbname[128];
	PGresult *r = PQexec(c, "IDENTIFY_SYSTEM");
	ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "%s", PQerrorMessage(c));
	ck_assert_int_eq(PQntuples(r), 1);
	ck_assert_int_eq(PQnfields(r), 4);
	ck_assert_str_eq(PQfname(r, 0), "systemid");
	snprintf(dbname, sizeof(dbname), "%s", PQgetisnull(r, 0, 3) ? "null" : PQgetvalue(r, 0, 3));
	PQclear(r);
	return dbname;
}

static char *pgbin_path(const char *prog)
{
	static char buf[4][512];
	static int k;
	k = (k + 1) % 4;
	snprintf(buf[k], sizeof(buf[k]), "%s/%s", getenv("PGV_TEST_PGBIN"), prog);
	return buf[k];
}

/* ================================================================ logical */

/*
 * replication=database: replication commands and SQL work, the client's
 * application_name and options reach its server (a walsender can run SET
 * only in logical mode, so they go in its startup packet), SHOW CLIENTS and
 * SHOW SERVERS say "logical", and the server goes with the client.
 */
START_TEST(logical_connection)
{
	struct pgv p;
	start(&p);
	PGconn *c = logical(&p, "application_name=abc options='-c enable_seqscan=off'");
	ck_assert_msg(PQstatus(c) == CONNECTION_OK, "%s", PQerrorMessage(c));
	ck_assert_str_eq(identify_system(c), DB);
	ck_assert_str_eq(query_value(c, "SHOW application_name"), "abc");
	ck_assert_str_eq(query_value(c, "SHOW enable_seqscan"), "off");
	ck_assert_str_eq(query_value(c, "SELECT backend_type FROM pg_stat_activity WHERE pid = pg_backend_pid()"),
			 "walsender");
	ck_assert_int_eq(walsenders(), 1);

	PGconn *admin = pgv_connect(&p, "pgbouncer", "admin_u", "admin_pass");
	ck_assert_str_eq(show_value(admin, "SHOW CLIENTS", "user", "repl_user", "replication"), "logical");
	ck_assert_str_eq(show_value(admin, "SHOW SERVERS", "user", "repl_user", "replication"), "logical");
	ck_assert_str_eq(show_value(admin, "SHOW CLIENTS", "user", "repl_user", "state"), "active");

	/* an ordinary client of the same pool is not disturbed, and never gets the walsender */
	PGconn *n = pgv_connect(&p, DB, "repl_user", "repl_pass");
	ck_assert_str_eq(query_value(n, "SELECT backend_type FROM pg_stat_activity WHERE pid = pg_backend_pid()"),
			 "client backend");
	ck_assert_str_eq(query_value(n, "SHOW application_name"), "");
	ck_assert_str_eq(query_value(c, "SHOW application_name"), "abc");

	PQfinish(c);
	wait_walsenders(0);
	pgv_expect_log(&p, "closing because: replication client disconnected", 5);
	ck_assert_int_eq(count_rows(admin, "SHOW SERVERS", "replication", "logical"), 0);
	ck_assert_str_eq(query_value(n, "SELECT 7"), "7");
	PQfinish(n);
	PQfinish(admin);
	pgv_stop(&p);
}
END_TEST

/* ================================================================ physical */

/* replication=true: IDENTIFY_SYSTEM works, SQL gets the walsender's own refusal. */
START_TEST(physical_connection)
{
	struct pgv p;
	start(&p);
	PGconn *c = connect_with(&p, "dbname=replication user=repl_user password=repl_pass replication=true");
	ck_assert_msg(PQstatus(c) == CONNECTION_OK, "%s", PQerrorMessage(c));
	ck_assert_str_eq(identify_system(c), "null");	/* a physical walsender has no database */
	PGresult *r = PQexec(c, "SELECT 1");
	ck_assert_int_eq(PQresultStatus(r), PGRES_FATAL_ERROR);
	ck_assert_msg(strstr(PQerrorMessage(c), "cannot execute SQL commands in WAL sender for physical replication"),
		      "%s", PQerrorMessage(c));
	ck_assert_str_eq(PQresultErrorField(r, PG_DIAG_SQLSTATE), "0A000");
	PQclear(r);
	PGconn *admin = pgv_connect(&p, "pgbouncer", "admin_u", "admin_pass");
	ck_assert_str_eq(show_value(admin, "SHOW CLIENTS", "user", "repl_user", "replication"), "physical");
	PQfinish(admin);
	/* the session goes on after the error, as on a direct connection */
	r = PQexec(c, "TIMELINE_HISTORY 1");
	ck_assert_int_eq(PQresultStatus(r), PGRES_FATAL_ERROR);	/* timeline 1 has no history file */
	PQclear(r);
	ck_assert_str_eq(identify_system(c), "null");
	PQfinish(c);
	wait_walsenders(0);
	pgv_stop(&p);
}
END_TEST

/* PostgreSQL's refusal of a walsender to a role without REPLICATION (reworded in 16). */
static const char *walsender_refused(void)
{
	return pgv_pg_major() >= 16 ? "permission denied to start WAL sender" :
				      "must be superuser or replication role to start walsender";
}

/*
 * A replication login PostgreSQL refuses fails that client alone, with
 * PostgreSQL's error: not the pool's other clients, and no "server login
 * has been failing" for the next ordinary login.
 */
START_TEST(failed_replication_login_alone)
{
	struct pgv p;
	start(&p);
	/*
	 * A pool with no server yet: had the failure counted as the pool's,
	 * the next ordinary login would be failed at once with the cached
	 * error, or held for server_login_retry (15 s, past its connect_timeout).
	 */
	PGconn *c0 = connect_with(&p, "dbname=fresh user=scram_user password=scram_pass replication=database");
	ck_assert_int_eq(PQstatus(c0), CONNECTION_BAD);
	ck_assert_msg(strstr(PQerrorMessage(c0), walsender_refused()), "%s", PQerrorMessage(c0));
	PQfinish(c0);
	double t0 = now_s();
	PGconn *fresh = pgv_connect(&p, "fresh", "scram_user", "scram_pass");
	ck_assert_msg(PQstatus(fresh) == CONNECTION_OK, "%s", PQerrorMessage(fresh));
	ck_assert_str_eq(query_value(fresh, "SELECT 1"), "1");
	ck_assert_msg(now_s() - t0 < 5, "the ordinary login waited %.1f s after a replication login failed", now_s() - t0);
	PQfinish(fresh);

	PGconn *ordinary = pgv_connect(&p, DB, "scram_user", "scram_pass");
	ck_assert_str_eq(query_value(ordinary, "SELECT 1"), "1");

	/* logical: scram_user lacks REPLICATION */
	PGconn *c = connect_with(&p, "dbname=" DB " user=scram_user password=scram_pass replication=database");
	ck_assert_int_eq(PQstatus(c), CONNECTION_BAD);
	ck_assert_msg(strstr(PQerrorMessage(c), walsender_refused()), "%s", PQerrorMessage(c));
	PQfinish(c);
	/* physical: pg_hba has no replication line for scram_user */
	c = connect_with(&p, "dbname=replication user=scram_user password=scram_pass replication=true");
	ck_assert_int_eq(PQstatus(c), CONNECTION_BAD);
	ck_assert_msg(strstr(PQerrorMessage(c), "no pg_hba.conf entry for replication connection"), "%s",
		      PQerrorMessage(c));
	PQfinish(c);
	char line[160];
	snprintf(line, sizeof(line), "server login failed: FATAL %s", walsender_refused());
	pgv_expect_log(&p, line, 5);

	/* the pool is fine: its client goes on, a new ordinary login works at once */
	ck_assert_str_eq(query_value(ordinary, "SELECT 2"), "2");
	PGconn *again = pgv_connect(&p, DB, "scram_user", "scram_pass");
	ck_assert_msg(PQstatus(again) == CONNECTION_OK, "%s", PQerrorMessage(again));
	ck_assert_str_eq(query_value(again, "SELECT 3"), "3");
	ck_assert(!pgv_log_contains(&p, "server login has been failing"));
	PQfinish(again);
	PQfinish(ordinary);

	/* a value PostgreSQL would not take: its error, before any server is asked */
	c = connect_with(&p, "dbname=" DB " user=repl_user password=repl_pass replication=maybe");
	ck_assert_int_eq(PQstatus(c), CONNECTION_BAD);
	ck_assert_msg(strstr(PQerrorMessage(c), "invalid value for parameter \"replication\": \"maybe\""), "%s",
		      PQerrorMessage(c));
	PQfinish(c);
	pgv_stop(&p);
}
END_TEST

/* Drives c's PQconnectStart for up to seconds, or until it is in or failed; its last state. */
static PostgresPollingStatusType poll_connect(PGconn *c, double seconds, PostgresPollingStatusType st)
{
	for (double until = now_s() + seconds; now_s() < until && st != PGRES_POLLING_OK && st != PGRES_POLLING_FAILED;
	     sleep_ms(20))
		st = PQconnectPoll(c);
	return st;
}

/*
 * Replication servers count against pool_size: one evicts the pool's idle
 * server ("evicted for pool_size"), a second waits until the first client
 * leaves, and no replication server outlives its client.
 */
START_TEST(pool_size_counts)
{
	struct pgv p;
	start(&p);
	PGconn *n = pgv_connect(&p, "small", "repl_user", "repl_pass");
	ck_assert_str_eq(query_value(n, "SELECT 1"), "1");	/* its server is idle in the pool now */
	PQfinish(n);

	char conninfo[512];
	snprintf(conninfo, sizeof(conninfo), "host=127.0.0.1 port=%d dbname=small user=repl_user password=repl_pass"
		 " replication=database sslmode=disable", p.port);
	PGconn *first = PQconnectdb(conninfo);
	ck_assert_msg(PQstatus(first) == CONNECTION_OK, "%s", PQerrorMessage(first));
	pgv_expect_log(&p, "closing because: evicted for pool_size", 5);
	ck_assert_int_eq(walsenders(), 1);

	PGconn *second = PQconnectStart(conninfo);
	ck_assert_ptr_nonnull(second);
	PostgresPollingStatusType st = poll_connect(second, 1.0, PGRES_POLLING_WRITING);
	ck_assert_msg(st != PGRES_POLLING_OK && st != PGRES_POLLING_FAILED,
		      "the second replication client got in past pool_size 1 (%s)", PQerrorMessage(second));
	ck_assert_int_eq(walsenders(), 1);

	PQfinish(first);
	st = poll_connect(second, 10, st);
	ck_assert_msg(st == PGRES_POLLING_OK, "%s", PQerrorMessage(second));
	ck_assert_str_eq(query_value(second, "SELECT 5"), "5");
	wait_walsenders(1);
	PQfinish(second);
	wait_walsenders(0);
	pgv_stop(&p);
}
END_TEST

/*
 * workers = 2: a replication client's own server counts in the instance's
 * pool_size like any other. With pool_size 1 held by a replication client
 * of worker 1, one of worker 2 waits (PostgreSQL never sees two) and gets
 * in once the first leaves.
 */
START_TEST(pool_size_counts_across_workers)
{
	struct pgv p;
	pgv_start(&p, SETTINGS "workers = 2\n", databases(), userlist());
	char conninfo[2][900];
	for (int k = 0; k < 2; k++)
		snprintf(conninfo[k], sizeof(conninfo[k]),
			 "host=%s/pgvalve-%d-%d-w%d port=%d dbname=small user=repl_user password=repl_pass"
			 " replication=database connect_timeout=10", p.dir, p.port, (int)p.pid, k + 1, p.port);
	PGconn *first = NULL;
	/* until worker 1 listens and logs the client in: a fork and a login, 10 s on a loaded machine */
	for (double until = now_s() + 10; !first || PQstatus(first) != CONNECTION_OK; sleep_ms(100)) {
		ck_assert_msg(now_s() < until, "worker 1 never took a replication client: %s\n%s",
			      first ? PQerrorMessage(first) : "", pgv_log_tail(&p, 1500));
		if (first)
			PQfinish(first);
		first = PQconnectdb(conninfo[0]);	/* its private socket appears once it runs */
	}
	ck_assert_int_eq(walsenders(), 1);

	PGconn *second = PQconnectStart(conninfo[1]);
	ck_assert_ptr_nonnull(second);
	PostgresPollingStatusType st = poll_connect(second, 1.5, PGRES_POLLING_WRITING);
	ck_assert_msg(st != PGRES_POLLING_OK && st != PGRES_POLLING_FAILED,
		      "worker 2's replication client got in past the instance's pool_size 1 (%s)",
		      PQerrorMessage(second));
	ck_assert_int_eq(walsenders(), 1);

	PQfinish(first);
	st = poll_connect(second, 10, st);
	ck_assert_msg(st == PGRES_POLLING_OK, "%s\n%s", PQerrorMessage(second), pgv_log_tail(&p, 1500));
	ck_assert_str_eq(query_value(second, "SELECT 6"), "6");
	ck_assert_int_eq(walsenders(), 1);
	PQfinish(second);
	wait_walsenders(0);
	pgv_stop(&p);
}
END_TEST

/*
 * Ordinary clients keeping the one server of a pool busy do not starve a
 * replication client: it is served in arrival order, the free server
 * closed to make its room.
 */
START_TEST(served_in_turn_with_a_busy_pool)
{
	struct pgv p;
	start(&p);
	char port[16], out[700], script[700];
	snprintf(port, sizeof(port), "%d", p.port);
	snprintf(out, sizeof(out), "%s/pgbench.out", p.dir);
	snprintf(script, sizeof(script), "%s/short.sql", p.dir);
	FILE *f = fopen(script, "we");
	ck_assert_ptr_nonnull(f);
	fputs("SELECT pg_sleep(0.005);\n", f);
	fclose(f);
	char *argv[] = { pgbin_path("pgbench"), "-n", "-f", script, "-c", "16", "-T", "8",
			 "-h", "127.0.0.1", "-p", port, "-U", "repl_user", "small", NULL };
	setenv("PGPASSWORD", "repl_pass", 1);
	pid_t load = run_program_background(argv, out);
	sleep_ms(1000);		/* pacing: pgbench's 16 clients are in, the queue is never empty from here on */
	double t0 = now_s();
	PGconn *c = logical(&p, "");
	ck_assert_msg(PQstatus(c) == CONNECTION_OK, "%s", PQerrorMessage(c));
	ck_assert_msg(now_s() - t0 < 4, "the replication client waited %.1f s", now_s() - t0);
	ck_assert_int_eq(walsenders(), 1);
	PQfinish(c);
	int status = -1;
	ck_assert_int_eq(waitpid(load, &status, 0), load);
	unsetenv("PGPASSWORD");
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "pgbench status %d: %s\n%s", status,
		      read_file_tail(out, 1500), pgv_log_tail(&p, 1500));
	wait_walsenders(0);
	pgv_stop(&p);
}
END_TEST

/*
 * A server that cannot be reached fails no replication client at once: it
 * waits for the next try, as ordinary clients do, until query_wait_timeout.
 */
START_TEST(unreachable_server_keeps_waiting)
{
	int hold;
	int down = pgv_refusing_port(&hold);
	char dbs[1024];
	snprintf(dbs, sizeof(dbs), "%sdown = host=127.0.0.1 port=%d dbname=pgvtest\n", databases(), down);
	struct pgv p;
	pgv_start(&p, SETTINGS "query_wait_timeout = 3\nserver_login_retry = 1\n", dbs, userlist());
	double t0 = now_s();
	PGconn *c = connect_with(&p, "dbname=down user=repl_user password=repl_pass replication=database");
	double waited = now_s() - t0;
	ck_assert_int_eq(PQstatus(c), CONNECTION_BAD);
	ck_assert_msg(strstr(PQerrorMessage(c), "query_wait_timeout"), "%s", PQerrorMessage(c));
	ck_assert_msg(waited >= 2.5, "failed after %.1f s: %s", waited, PQerrorMessage(c));
	PQfinish(c);
	pgv_expect_log(&p, "went away before login", 2);
	ck_assert_int_ge(pgv_log_count(&p, "closing because: connect failed"), 2);	/* tried again */
	pgv_stop(&p);
	close(hold);
}
END_TEST

/* ================================================================ real tools */


/*
 * pg_basebackup (with its second, WAL-streaming connection) copies the
 * cluster through pgvalve; loop 1 with tcp_socket_buffer = 4096, where the
 * base backup's CopyOut keeps both sockets full (issue 29 point 4).
 */
START_TEST(pg_basebackup_through_pgvalve)
{
	struct pgv p;
	pgv_start(&p, _i ? SETTINGS "tcp_socket_buffer = 4096\n" : SETTINGS, databases(), userlist());
	char target[700], dsn[256], out[700];
	snprintf(target, sizeof(target), "%s/basebackup", p.dir);
	snprintf(out, sizeof(out), "%s/basebackup.out", p.dir);
	snprintf(dsn, sizeof(dsn), "host=127.0.0.1 port=%d user=repl_user password=repl_pass sslmode=disable", p.port);
	char *argv[] = { pgbin_path("pg_basebackup"), "-d", dsn, "-D", target, "--checkpoint=fast", "-X", "stream",
			 "--no-sync", NULL };
	int rc = run_program(argv, NULL, out, 120);
	ck_assert_msg(rc == 0, "pg_basebackup exited %d: %s\n%s", rc, read_file_tail(out, 2000), pgv_log_tail(&p, 2000));
	char f[800];
	struct stat sb;
	snprintf(f, sizeof(f), "%s/PG_VERSION", target);
	ck_assert_msg(stat(f, &sb) == 0, "no PG_VERSION in the backup");
	snprintf(f, sizeof(f), "%s/backup_label", target);
	ck_assert_msg(stat(f, &sb) == 0, "no backup_label in the backup");
	snprintf(f, sizeof(f), "%s/pg_wal", target);
	ck_assert_int_gt(dir_entry_count(f), 1);	/* the WAL it streamed alongside */
	wait_walsenders(0);
	pgv_stop(&p);
}
END_TEST

/* pg_receivewal streams WAL from a slot through pgvalve; SIGINT stops it cleanly. */
START_TEST(pg_receivewal_through_pgvalve)
{
	direct_exec("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = 'pgv_rw'");
	direct_exec("SELECT pg_create_physical_replication_slot('pgv_rw', true)");
	struct pgv p;
	start(&p);
	char dir[700], dsn[256], out[700];
	snprintf(dir, sizeof(dir), "%s/walarchive", p.dir);
	snprintf(out, sizeof(out), "%s/receivewal.out", p.dir);
	ck_assert_int_eq(mkdir(dir, 0777), 0);
	ck_assert_int_eq(chmod(dir, 0777), 0);
	snprintf(dsn, sizeof(dsn), "host=127.0.0.1 port=%d user=repl_user password=repl_pass sslmode=disable", p.port);
	char *argv[] = { pgbin_path("pg_receivewal"), "-d", dsn, "--slot=pgv_rw", "-D", dir, "--no-sync",
			 "--no-loop", NULL };
	pid_t pid = run_program_background(argv, out);
	/* its first segment file: a login, a slot and a start; 15 s on a loaded machine */
	double until = now_s() + 15;
	while (now_s() < until && dir_entry_count(dir) == 0)
		sleep_ms(100);
	ck_assert_msg(dir_entry_count(dir) > 0, "pg_receivewal wrote nothing: %s\n%s", read_file_tail(out, 2000),
		      pgv_log_tail(&p, 2000));
	ck_assert_int_eq(walsenders(), 1);
	PGconn *d = pg_direct();
	ck_assert_str_eq(query_value(d, "SELECT active FROM pg_replication_slots WHERE slot_name = 'pgv_rw'"), "t");
	PQfinish(d);
	kill(pid, SIGINT);
	int status = -1;
	pid_t done = 0;
	until = now_s() + 10;	/* pg_receivewal exits at SIGINT in milliseconds; 10 s, then it is stopped */
	while (now_s() < until && (done = waitpid(pid, &status, WNOHANG)) == 0)
		sleep_ms(50);
	if (done != pid)
		stop_program(pid);
	ck_assert_msg(done == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0, "pg_receivewal status %d: %s",
		      status, read_file_tail(out, 2000));
	wait_walsenders(0);
	direct_exec("SELECT pg_drop_replication_slot('pgv_rw')");
	pgv_stop(&p);
}
END_TEST

/* The subscriber's database, straight to PostgreSQL as the superuser. */
static PGconn *subscriber(void)
{
	const char *kw[] = { "host", "port", "dbname", "user", NULL };
	const char *val[] = { getenv("PGV_TEST_PGSOCKDIR"), getenv("PGV_TEST_PGPORT"), "pgv_sub", "pgvadmin", NULL };
	PGconn *c = PQconnectdbParams(kw, val, 0);
	ck_assert_msg(PQstatus(c) == CONNECTION_OK, "%s", PQerrorMessage(c));
	return c;
}

static int sub_count(void)
{
	PGconn *c = subscriber();
	int n = atoi(query_value(c, "SELECT count(*) FROM pgv_rep"));
	PQfinish(c);
	return n;
}

static void sub_exec(const char *sql)
{
	PGconn *c = subscriber();
	PGresult *r = PQexec(c, sql);
	ck_assert_msg(PQresultStatus(r) == PGRES_COMMAND_OK, "%s: %s", sql, PQerrorMessage(c));
	PQclear(r);
	PQfinish(c);
}

/*
 * Until the subscriber has expected rows: a logical apply worker starts
 * (its table sync first), seconds; 20 s on a loaded machine.
 */
static void wait_sub_count(int expected)
{
	double until = now_s() + 20;
	int n;
	while ((n = sub_count()) != expected && now_s() < until)
		sleep_ms(100);
	ck_assert_msg(n == expected, "the subscriber has %d rows, expected %d", n, expected);
}

/*
 * A logical subscription whose CONNECTION points at pgvalve (transaction
 * pooling): the initial copy and then streamed changes arrive.
 */
START_TEST(logical_subscription_through_pgvalve)
{
	direct_exec("DROP TABLE IF EXISTS pgv_rep");
	direct_exec("CREATE TABLE pgv_rep (a int PRIMARY KEY)");
	direct_exec("GRANT SELECT ON pgv_rep TO repl_user");
	direct_exec("INSERT INTO pgv_rep VALUES (1)");
	direct_exec("DROP PUBLICATION IF EXISTS pgv_pub");
	direct_exec("CREATE PUBLICATION pgv_pub FOR TABLE pgv_rep");
	direct_exec("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = 'pgv_sub_slot'");
	/* made here: CREATE SUBSCRIPTION cannot create a slot on its own cluster (it would wait on itself) */
	direct_exec("SELECT pg_create_logical_replication_slot('pgv_sub_slot', 'pgoutput')");
	direct_exec("DROP DATABASE IF EXISTS pgv_sub WITH (FORCE)");
	direct_exec("CREATE DATABASE pgv_sub");
	sub_exec("CREATE TABLE pgv_rep (a int PRIMARY KEY)");

	struct pgv p;
	start(&p);
	char sql[1024];
	snprintf(sql, sizeof(sql),
		 "CREATE SUBSCRIPTION pgv_sub CONNECTION 'host=127.0.0.1 port=%d dbname=" DB
		 " user=repl_user password=repl_pass sslmode=disable' PUBLICATION pgv_pub"
		 " WITH (slot_name = pgv_sub_slot, create_slot = false)", p.port);
	sub_exec(sql);
	wait_sub_count(1);		/* the initial copy */
	direct_exec("INSERT INTO pgv_rep VALUES (2), (3)");
	wait_sub_count(3);		/* streamed */
	PGconn *admin = pgv_connect(&p, "pgbouncer", "admin_u", "admin_pass");
	ck_assert_str_eq(show_value(admin, "SHOW CLIENTS", "user", "repl_user", "replication"), "logical");
	PQfinish(admin);

	sub_exec("ALTER SUBSCRIPTION pgv_sub DISABLE");
	sub_exec("ALTER SUBSCRIPTION pgv_sub SET (slot_name = NONE)");
	sub_exec("DROP SUBSCRIPTION pgv_sub");
	wait_walsenders(0);
	direct_exec("SELECT pg_drop_replication_slot('pgv_sub_slot')");
	direct_exec("DROP DATABASE pgv_sub WITH (FORCE)");
	direct_exec("DROP PUBLICATION pgv_pub");
	direct_exec("DROP TABLE pgv_rep");
	pgv_stop(&p);
}
END_TEST

/*
 * log_connections: the "login attempt" line is PgBouncer 1.26's, with
 * replication=no, database (logical) or yes (physical).
 */
START_TEST(login_attempt_line)
{
	struct pgv p;
	pgv_start(&p, SETTINGS "log_connections = 1\n", databases(), userlist());
	PGconn *c = pgv_connect(&p, DB, "scram_user", "scram_pass");
	PQfinish(c);
	pgv_expect_log(&p, "login attempt: db=" DB " user=scram_user tls=no replication=no", 5);
	c = logical(&p, "");
	ck_assert_msg(PQstatus(c) == CONNECTION_OK, "%s", PQerrorMessage(c));
	PQfinish(c);
	pgv_expect_log(&p, "login attempt: db=" DB " user=repl_user tls=no replication=database", 5);
	c = connect_with(&p, "dbname=replication user=repl_user password=repl_pass replication=on");
	ck_assert_msg(PQstatus(c) == CONNECTION_OK, "%s", PQerrorMessage(c));
	PQfinish(c);
	pgv_expect_log(&p, "login attempt: db=replication user=repl_user tls=no replication=yes", 5);
	wait_walsenders(0);
	pgv_stop(&p);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("replication");
	struct {
		const char *name;
		const TTest *test;
		double timeout;
		int loops;	/* 0: a plain test */
	} tests[] = {
		{ "logical_connection", logical_connection, 30, 0 },
		{ "physical_connection", physical_connection, 30, 0 },
		{ "failed_replication_login_alone", failed_replication_login_alone, 30, 0 },
		{ "pool_size_counts", pool_size_counts, 30, 0 },
		{ "pool_size_counts_across_workers", pool_size_counts_across_workers, 30, 0 },
		{ "served_in_turn", served_in_turn_with_a_busy_pool, 30, 0 },
		{ "unreachable_server", unreachable_server_keeps_waiting, 30, 0 },
		{ "pg_basebackup", pg_basebackup_through_pgvalve, 150, 2 },
		{ "pg_receivewal", pg_receivewal_through_pgvalve, 60, 0 },
		{ "logical_subscription", logical_subscription_through_pgvalve, 60, 0 },
		{ "login_attempt_line", login_attempt_line, 30, 0 },
	};
	for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
		TCase *tc = pgv_tcase_create(tests[i].name, tests[i].timeout);
		if (tests[i].loops)
			tcase_add_loop_test(tc, tests[i].test, 0, tests[i].loops);
		else
			tcase_add_test(tc, tests[i].test);
		suite_add_tcase(s, tc);
	}
	return pgv_run_suite(s);
}
