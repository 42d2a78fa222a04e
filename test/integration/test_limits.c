/*
 * test_limits.c - end-to-end tests of pgvalve's pool sizing, connection
 * limits, packet sizes and network knobs against a real PostgreSQL 15.
 *
 * Limits: the N+1st client or server is refused or queued as documented
 * (pool sizes, min and reserve pools, max_db/user_connections and their
 * client counterparts, max_client_conn, max_packet_size, pkt_buf); the tcp_*
 * settings are read back from the kernel. The cost test opens 2,000 idle
 * clients and reads pgvalve's CPU time from /proc. The helpers are
 * limits_kit.c's; the timeouts are test_timeouts', a server's life
 * test_server_lifecycle's.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE	/* accept4, pipe2 */
#endif
#include "limits_kit.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>

/* ================================================================ pool sizing */

START_TEST(pool_sizes_default_db_user)
{
	clean_users();
	struct pgv p;
	char dbs[512] = "";
	add_db(dbs, sizeof(dbs), DB, pg_port(), "pool_size=2");
	add_db(dbs, sizeof(dbs), "pgv2", pg_port(), NULL);
	pgv_start(&p, TXN "default_pool_size = 3\n\n[users]\nmd5_user = pool_size=1\n", dbs, std_userlist());
	struct outcome o[11];
	PGconn *c[11];
	for (int i = 0; i < 11; i++)
		c[i] = i < 4 ? scram(&p, DB) : i < 7 ? connect_ok(&p, DB, "md5_user", "md5_pass") :
			connect_ok(&p, "pgv2", "pgbench_user", "bench_pass");
	struct watch w;
	watch_init(&w, "scram_user", "md5_user", "pgbench_user");
	for (int i = 0; i < 11; i++)
		send_query(&o[i], c[i], i >= 4 && i < 7 ? "SELECT pg_sleep(0.6), 'ok'" : "SELECT pg_sleep(1), 'ok'");
	collect(o, 11, 10, &w);
	for (int i = 0; i < 11; i++)
		assert_ok(&o[i], "queued client", "ok");
	ck_assert_msg(w.peak[0] == 2, "scram_user on %s (pool_size=2): %d servers", DB, w.peak[0]);
	ck_assert_msg(w.peak[1] == 1, "md5_user ([users] pool_size=1): %d servers", w.peak[1]);
	ck_assert_msg(w.peak[2] == 3, "pgbench_user on pgv2 (default_pool_size 3): %d servers", w.peak[2]);
	for (int i = 0; i < 11; i++)
		PQfinish(c[i]);
	pgv_stop(&p);
}
END_TEST

START_TEST(min_pool_size_kept_and_refilled)
{
	clean_users();
	struct pgv p;
	char dbs[512] = "";
	add_db(dbs, sizeof(dbs), DB, pg_port(), "min_pool_size=2");
	add_db(dbs, sizeof(dbs), "pgv2", pg_port(), NULL);
	pgv_start(&p, TXN "min_pool_size = 1\nserver_idle_timeout = 1\ndefault_pool_size = 5\n", dbs, std_userlist());
	PGconn *s = scram(&p, DB);
	PGconn *b = connect_ok(&p, "pgv2", "pgbench_user", "bench_pass");
	ck_assert_msg(wait_backends("scram_user", 2, 3) >= 0, "min_pool_size=2: %d servers",
		      pg_count_backends("scram_user"));
	ck_assert_msg(wait_backends("pgbench_user", 1, 3) >= 0, "global min_pool_size 1: %d servers",
		      pg_count_backends("pgbench_user"));
	/* server_idle_timeout does not go below the minimum, and nothing more is opened */
	for (int i = 0; i < 10; i++) {
		sleep_s(0.2);
		ck_assert_int_eq(pg_count_backends("scram_user"), 2);
		ck_assert_int_eq(pg_count_backends("pgbench_user"), 1);
	}

	/* a burst opens more; server_idle_timeout takes them back to the minimum */
	PGconn *c[4];
	struct outcome o[4];
	for (int i = 0; i < 4; i++)
		c[i] = scram(&p, DB);
	struct watch w;
	watch_init(&w, "scram_user", NULL, NULL);
	for (int i = 0; i < 4; i++)
		send_query(&o[i], c[i], "SELECT pg_sleep(0.5), 'ok'");
	collect(o, 4, 5, &w);
	for (int i = 0; i < 4; i++)
		assert_ok(&o[i], "burst", "ok");
	ck_assert_int_eq(w.peak[0], 4);
	double t0 = now_s();
	sleep_s(0.2);
	int extra = pg_count_backends("scram_user");
	/* Asserted only if the test itself was not held up long enough for the timeout to be due. */
	ck_assert_msg(extra > 2 || now_s() - t0 >= 0.8, "extra servers closed %.2f s after use (idle timeout 1 s)",
		      now_s() - t0);
	double back = wait_backends("scram_user", 2, 1 + TICK_S + SLACK_S + 1);
	ck_assert_msg(back >= 0, "still %d servers after server_idle_timeout", pg_count_backends("scram_user"));
	assert_fired("server_idle_timeout down to min_pool_size", back + 0.5, 1);

	/* killed servers are replaced */
	char before[256];
	snprintf(before, sizeof(before), "%s",
		 query_value(direct(), "SELECT string_agg(pid::text, ',') FROM pg_stat_activity WHERE usename = 'scram_user'"));
	ck_assert_int_eq(terminate_backends("scram_user", true), 2);
	ck_assert_int_eq(terminate_backends("pgbench_user", true), 1);
	/* Gone first (pg_stat_activity lists a backend until it has exited), then replaced. */
	char still_listed[512];
	snprintf(still_listed, sizeof(still_listed),
		 "SELECT count(*) FROM pg_stat_activity WHERE usename = 'scram_user' AND pid = ANY('{%s}'::int[])", before);
	for (int i = 0; i < 100 && direct_int(still_listed) > 0; i++)
		sleep_s(0.05);
	ck_assert_msg(wait_backends("scram_user", 2, 3) >= 0, "after pg_terminate_backend: %d servers, expected 2 again",
		      pg_count_backends("scram_user"));
	ck_assert_msg(wait_backends("pgbench_user", 1, 3) >= 0,
		      "after pg_terminate_backend: %d pgbench_user servers, expected 1 again",
		      pg_count_backends("pgbench_user"));
	ck_assert_msg(direct_int(still_listed) == 0, "the killed servers (%s) still show", before);
	sleep_s(0.5);
	ck_assert_int_eq(pg_count_backends("scram_user"), 2);
	ck_assert_str_eq(query_value(s, "SELECT 'served'"), "served");
	ck_assert_str_eq(query_value(b, "SELECT 'served'"), "served");
	for (int i = 0; i < 4; i++)
		PQfinish(c[i]);
	PQfinish(s);
	PQfinish(b);
	pgv_stop(&p);
}
END_TEST

START_TEST(reserve_pool_after_timeout)
{
	clean_users();
	struct pgv p;
	pgv_start(&p, TXN "default_pool_size = 2\nreserve_pool_size = 1\nreserve_pool_timeout = 1.5\n",
		  std_databases(), std_userlist());
	PGconn *c[4];
	struct outcome o[4];
	for (int i = 0; i < 4; i++)
		c[i] = scram(&p, DB);
	struct watch w;
	watch_init(&w, "scram_user", NULL, NULL);
	for (int i = 0; i < 4; i++)
		send_query(&o[i], c[i], "SELECT pg_sleep(2.5), 'ok'");
	collect(o, 4, 10, &w);
	for (int i = 0; i < 4; i++)
		assert_ok(&o[i], "client of a pool with a reserve", "ok");
	ck_assert_msg(w.first[0][2] >= 0 && w.first[0][2] < 1.0, "the pool of 2 was full only after %.2f s",
		      w.first[0][2]);
	assert_fired("reserve pool (third server)", w.first[0][3], 1.5);
	ck_assert_msg(w.peak[0] == 3, "%d servers with pool 2 + reserve 1", w.peak[0]);
	pgv_expect_log(&p, "taking connection from reserve_pool", 2);
	for (int i = 0; i < 4; i++)
		PQfinish(c[i]);
	pgv_stop(&p);
}
END_TEST

/* max_db_connections / max_user_connections queue clients; they never exceed the limit. */
START_TEST(max_db_and_user_connections_queue)
{
	clean_users();
	struct pgv p;
	char dbs[512] = "";
	add_db(dbs, sizeof(dbs), DB, pg_port(), "max_db_connections=2");
	add_db(dbs, sizeof(dbs), "pgv2", pg_port(), NULL);
	pgv_start(&p, TXN "default_pool_size = 5\n\n[users]\npgbench_user = max_user_connections=3\n", dbs,
		  std_userlist());
	PGconn *c[9];
	struct outcome o[9];
	for (int i = 0; i < 9; i++)
		c[i] = i < 4 ? scram(&p, DB) : connect_ok(&p, "pgv2", "pgbench_user", "bench_pass");
	struct watch w;
	watch_init(&w, "scram_user", "pgbench_user", NULL);
	for (int i = 0; i < 9; i++)
		send_query(&o[i], c[i], "SELECT pg_sleep(0.8), 'ok'");
	collect(o, 9, 10, &w);
	for (int i = 0; i < 9; i++)
		assert_ok(&o[i], "client over max_db/max_user_connections (queued, not refused)", "ok");
	ck_assert_msg(w.peak[0] == 2, "max_db_connections=2: %d servers", w.peak[0]);
	ck_assert_msg(w.peak[1] == 3, "max_user_connections=3: %d servers", w.peak[1]);
	for (int i = 0; i < 9; i++)
		PQfinish(c[i]);
	pgv_stop(&p);
}
END_TEST

/*
 * A database at max_db_connections whose servers all sit idle in another
 * user's pool: PgBouncer closes one of them ("evicted") for the waiting
 * client instead of leaving it queued until query_wait_timeout.
 */
START_TEST(full_database_evicts_idle_server)
{
	clean_users();
	struct pgv p;
	pgv_start(&p, TXN "default_pool_size = 2\nmax_db_connections = 2\nquery_wait_timeout = 5\n",
		  std_databases(), std_userlist());
	PGconn *m = connect_ok(&p, DB, "md5_user", "md5_pass");
	ck_assert_int_eq(terminate_backends("md5_user", true), 1);	/* md5_user's pool: no server */
	ck_assert(wait_backends("md5_user", 0, 3) >= 0);
	PGconn *s[2] = { scram(&p, DB), scram(&p, DB) };
	struct outcome o[2];
	send_query(&o[0], s[0], "SELECT pg_sleep(0.3), 'ok'");
	send_query(&o[1], s[1], "SELECT pg_sleep(0.3), 'ok'");
	collect(o, 2, 5, NULL);
	assert_ok(&o[0], "scram_user", "ok");
	assert_ok(&o[1], "scram_user", "ok");
	ck_assert_int_eq(pg_count_backends("scram_user"), 2);	/* now idle, the database is full */
	sleep_s(0.4);	/* md5_user's pool has noticed its dead server */
	struct outcome om;
	PQsetNoticeReceiver(m, quiet_notice, NULL);
	send_query(&om, m, "SELECT 'got one'");
	collect(&om, 1, 7, NULL);
	ck_assert_msg(om.ok && om.at <= 2.0,
		      "md5_user waited %.2f s (%s%s) while scram_user's 2 servers sat idle in a full database "
		      "(max_db_connections=2)", om.at, om.value, om.msg);
	ck_assert_str_eq(om.value, "got one");
	PQfinish(m);
	PQfinish(s[0]);
	PQfinish(s[1]);
	pgv_stop(&p);
}
END_TEST

/* The same for a user at max_user_connections with idle servers on another database. */
START_TEST(full_user_evicts_idle_server)
{
	clean_users();
	struct pgv p;
	char dbs[512] = "";
	add_db(dbs, sizeof(dbs), DB, pg_port(), NULL);
	add_db(dbs, sizeof(dbs), "pgv2", pg_port(), NULL);
	pgv_start(&p, TXN "default_pool_size = 2\nmax_user_connections = 2\nquery_wait_timeout = 5\n", dbs,
		  std_userlist());
	PGconn *other = scram(&p, "pgv2");
	ck_assert_int_eq(terminate_backends("scram_user", true), 1);	/* pgv2's pool: no server */
	ck_assert(wait_backends("scram_user", 0, 3) >= 0);
	PGconn *s[2] = { scram(&p, DB), scram(&p, DB) };
	struct outcome o[2];
	send_query(&o[0], s[0], "SELECT pg_sleep(0.3), 'ok'");
	send_query(&o[1], s[1], "SELECT pg_sleep(0.3), 'ok'");
	collect(o, 2, 5, NULL);
	assert_ok(&o[0], "scram_user on pgvtest", "ok");
	assert_ok(&o[1], "scram_user on pgvtest", "ok");
	ck_assert_int_eq(pg_count_backends("scram_user"), 2);
	sleep_s(0.4);
	struct outcome om;
	PQsetNoticeReceiver(other, quiet_notice, NULL);
	send_query(&om, other, "SELECT 'got one'");
	collect(&om, 1, 7, NULL);
	ck_assert_msg(om.ok && om.at <= 2.0,
		      "scram_user on pgv2 waited %.2f s (%s%s) while its 2 servers on pgvtest sat idle "
		      "(max_user_connections=2)", om.at, om.value, om.msg);
	PQfinish(other);
	PQfinish(s[0]);
	PQfinish(s[1]);
	pgv_stop(&p);
}
END_TEST

/* ================================================================ client limits */

static void expect_refused(struct pgv *p, const char *dbname, const char *user, const char *password,
			   const char *reason)
{
	struct raw_error err;
	int rc = raw_login(p->port, dbname, user, password, &err);
	ck_assert_msg(rc == -1, "%s@%s: expected \"%s\", login rc %d", user, dbname, reason, rc);
	assert_raw_fatal(&err, "refused login", reason);
}

START_TEST(client_connection_limits)
{
	struct pgv p;
	char dbs[512] = "";
	add_db(dbs, sizeof(dbs), DB, pg_port(), "max_db_client_connections=3");
	add_db(dbs, sizeof(dbs), "pgv2", pg_port(), NULL);
	pgv_start(&p, TXN "max_user_client_connections = 2\n", dbs, std_userlist());
	int s1 = raw_client(&p, DB, "scram_user", "scram_pass");
	int s2 = raw_client(&p, DB, "scram_user", "scram_pass");
	expect_refused(&p, DB, "scram_user", "scram_pass",
		       "client connections exceeded (max_user_client_connections)");
	expect_refused(&p, "pgv2", "scram_user", "scram_pass",
		       "client connections exceeded (max_user_client_connections)");
	int m1 = raw_client(&p, DB, "md5_user", "md5_pass");	/* the database's third */
	expect_refused(&p, DB, "md5_user", "md5_pass", "client connections exceeded (max_db_client_connections)");
	expect_refused(&p, DB, "pgbench_user", "bench_pass",
		       "client connections exceeded (max_db_client_connections)");
	int m2 = raw_client(&p, "pgv2", "md5_user", "md5_pass");	/* another database has room */
	/* everyone in still works; a place that frees up is taken again */
	raw_query_ok(s1, "SELECT 1", "1");
	raw_query_ok(m1, "SELECT 1", "1");
	raw_query_ok(m2, "SELECT 1", "1");
	raw_send(s2, "X\0\0\0\4", 5);
	close(s2);
	sleep_s(0.3);
	int s3 = raw_client(&p, DB, "scram_user", "scram_pass");
	raw_query_ok(s3, "SELECT 'back in'", "back in");
	close(s1);
	close(s3);
	close(m1);
	close(m2);
	pgv_stop(&p);
}
END_TEST

/* Clients logging in at the same moment count against max_db_client_connections from their startup. */
START_TEST(max_db_client_connections_concurrent_logins)
{
	struct pgv p;
	char dbs[512] = "";
	add_db(dbs, sizeof(dbs), DB, pg_port(), "max_db_client_connections=3");
	pgv_start(&p, TXN, dbs, std_userlist());
	PGconn *warm = scram(&p, DB);	/* the pool knows its server parameters */
	PQfinish(warm);
	sleep_s(0.2);
	enum { N = 8 };
	struct aconn a[N];
	for (int i = 0; i < N; i++)
		aconn_start(&a[i], &p, DB, i % 2 ? "md5_user" : "scram_user", i % 2 ? "md5_pass" : "scram_pass");
	double t0 = now_s();
	while (aconn_step(a, N, 50) > 0)
		ck_assert_msg(now_s() - t0 < 15, "logins still going after 15 s");
	int ok = 0;
	for (int i = 0; i < N; i++) {
		if (a[i].ok)
			ok++;
		else
			ck_assert_msg(strstr(a[i].err, "client connections exceeded (max_db_client_connections)"),
				      "login %d: %s", i, a[i].err);
	}
	ck_assert_msg(ok == 3, "%d of %d simultaneous logins got in with max_db_client_connections=3", ok, N);
	for (int i = 0; i < N; i++)
		PQfinish(a[i].c);
	pgv_stop(&p);
}
END_TEST

START_TEST(max_client_conn_refuses)
{
	struct pgv p;
	pgv_start(&p, TXN "max_client_conn = 4\nadmin_users = admin_u\n", std_databases(), userlist());
	int fd[4];
	for (int i = 0; i < 4; i++)
		fd[i] = raw_client(&p, DB, "scram_user", "scram_pass");
	expect_refused(&p, DB, "md5_user", "md5_pass", "no more connections allowed (max_client_conn)");
	/* the admin console stays reachable, as in PgBouncer */
	PGconn *admin = connect_ok(&p, "pgbouncer", "admin_u", "admin_pass");
	PQfinish(admin);
	for (int i = 0; i < 4; i++)
		raw_query_ok(fd[i], "SELECT 1", "1");
	raw_send(fd[0], "X\0\0\0\4", 5);
	close(fd[0]);
	sleep_s(0.3);
	fd[0] = raw_client(&p, DB, "md5_user", "md5_pass");
	raw_query_ok(fd[0], "SELECT 'in'", "in");
	for (int i = 0; i < 4; i++)
		close(fd[i]);
	pgv_stop(&p);
}
END_TEST

/* ================================================================ network */

START_TEST(max_packet_size_refuses_large_message)
{
	struct pgv p;
	pgv_start(&p, TXN "max_packet_size = 2048\n", std_databases(), std_userlist());
	int big = raw_client(&p, DB, "scram_user", "scram_pass");
	int other = raw_client(&p, DB, "scram_user", "scram_pass");
	char sql[8192];
	snprintf(sql, sizeof(sql), "SELECT length('%0*d')", 1500, 0);
	raw_query_ok(big, sql, "1500");
	snprintf(sql, sizeof(sql), "SELECT length('%0*d')", 6000, 0);
	char value[64];
	struct raw_error err;
	ck_assert_int_eq(raw_query(big, sql, value, sizeof(value), &err), -1);
	ck_assert_msg(strcmp(err.severity, "FATAL") == 0 && strcmp(err.sqlstate, "08P01") == 0,
		      "oversized message: %s %s %s", err.severity, err.sqlstate, err.message);
	ck_assert_msg(raw_wait_closed(big, 3000), "connection kept after an oversized message");
	close(big);
	raw_query_ok(other, "SELECT 'unaffected'", "unaffected");
	int again = raw_client(&p, DB, "scram_user", "scram_pass");
	raw_query_ok(again, "SELECT 2", "2");
	close(other);
	close(again);
	pgv_stop(&p);
}
END_TEST

START_TEST(small_pkt_buf_large_messages)
{
	struct pgv p;
	pgv_start(&p, TXN "pkt_buf = 256\n", std_databases(), std_userlist());
	PGconn *c = scram(&p, DB);
	PGresult *r = PQexec(c, "SELECT repeat('x', 1000000) || 'end'");
	ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "%s", PQerrorMessage(c));
	ck_assert_int_eq(PQgetlength(r, 0, 0), 1000003);
	ck_assert_int_eq(strcmp(PQgetvalue(r, 0, 0) + 1000000, "end"), 0);
	PQclear(r);
	size_t n = 200000;
	int off;
	char *q = malloc(n + 128);
	ck_assert_ptr_nonnull(q);
	off = snprintf(q, 128, "SELECT md5('");
	for (size_t i = 0; i < n; i++)
		q[off + (int)i] = (char)('a' + i % 26);
	snprintf(q + off + n, 128,
		 "') = (SELECT md5(string_agg(chr(97 + (g %% 26)), '' ORDER BY g)) FROM generate_series(0, %zu) g)", n - 1);
	ck_assert_str_eq(query_value(c, q), "t");
	free(q);
	PQfinish(c);
	pgv_stop(&p);
}
END_TEST

/* The kernel's view of a socket: timer kind and when, from /proc/net/tcp ("tr:tm->when"). */
static bool tcp_timer(int local_port, int remote_port, int *tr, long *when)
{
	FILE *f = fopen("/proc/net/tcp", "re");
	char line[512];
	bool found = false;
	ck_assert_ptr_nonnull(f);
	while (!found && fgets(line, sizeof(line), f)) {
		unsigned int la, lp, ra, rp, st, t;
		unsigned long w;
		if (sscanf(line, " %*u: %8X:%4X %8X:%4X %2X %*8X:%*8X %2X:%8lX", &la, &lp, &ra, &rp, &st, &t, &w) == 7 &&
		    (int)lp == local_port && (int)rp == remote_port && st == 1) {
			*tr = (int)t;
			*when = (long)w;
			found = true;
		}
	}
	fclose(f);
	return found;
}

static int local_port_of(int fd)
{
	struct sockaddr_in sa;
	socklen_t len = sizeof(sa);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	return ntohs(sa.sin_port);
}

START_TEST(tcp_keepalive_and_listen_backlog)
{
	struct pgv p, off;
	pgv_start(&p, TXN "tcp_keepalive = 1\ntcp_keepidle = 7\nlisten_backlog = 37\n", std_databases(),
		  std_userlist());
	pgv_start(&off, TXN "tcp_keepalive = 0\n", std_databases(), std_userlist());
	PGconn *c = scram(&p, DB), *d = scram(&off, DB);
	ck_assert_str_eq(query_value(c, "SELECT 1"), "1");
	ck_assert_str_eq(query_value(d, "SELECT 1"), "1");
	sleep_s(0.2);
	int tr = -1;
	long when = -1;
	/* pgvalve's end of our connection: local = its port, remote = ours */
	ck_assert(tcp_timer(p.port, local_port_of(PQsocket(c)), &tr, &when));
	ck_assert_msg(tr == 2 && when > 0 && when <= 700,
		      "tcp_keepalive=1 tcp_keepidle=7: client socket timer %d, %ld ticks (expected keepalive, <= 7 s)",
		      tr, when);
	ck_assert(tcp_timer(off.port, local_port_of(PQsocket(d)), &tr, &when));
	ck_assert_msg(tr == 0, "tcp_keepalive=0: client socket has timer %d", tr);

	/* listen_backlog: the listening socket's accept queue limit (ss shows it as Send-Q) */
	char out[700], filter[64], text[4096];
	snprintf(out, sizeof(out), "%s/ss.out", p.dir);
	snprintf(filter, sizeof(filter), "sport = :%d", p.port);
	char *argv[] = { "ss", "-ltnH", filter, NULL };
	ck_assert_int_eq(run_program(argv, NULL, out, 10), 0);
	snprintf(text, sizeof(text), "%s", read_file_tail(out, 4000));
	unsigned long recvq = 0, sendq = 0;
	ck_assert_msg(sscanf(text, "LISTEN %lu %lu", &recvq, &sendq) == 2, "ss: %s", text);
	ck_assert_msg(sendq == 37, "listen_backlog=37: backlog %lu", sendq);

	/* Clients inherit the listener's settings; after a reload that changes them they get the new ones. */
	FILE *ini = fopen(p.ini, "a");
	ck_assert_ptr_nonnull(ini);
	fputs("tcp_keepalive = 0\n", ini);
	fclose(ini);
	ck_assert_int_eq(kill(p.pid, SIGHUP), 0);
	for (int i = 0; i < 100 && !pgv_log_contains(&p, "configuration reloaded"); i++)
		sleep_s(0.05);
	ck_assert_msg(pgv_log_contains(&p, "configuration reloaded"), "%s", pgv_log_tail(&p, 1500));
	PGconn *e = scram(&p, DB);
	ck_assert_str_eq(query_value(e, "SELECT 1"), "1");
	sleep_s(0.2);
	ck_assert(tcp_timer(p.port, local_port_of(PQsocket(e)), &tr, &when));
	ck_assert_msg(tr == 0, "tcp_keepalive=0 after a reload: client socket has timer %d", tr);
	PQfinish(e);
	PQfinish(c);
	PQfinish(d);
	pgv_stop(&p);
	pgv_stop(&off);
}
END_TEST

/* tcp_keepalive applies to server connections too (PgBouncer tunes every socket it opens). */
START_TEST(tcp_keepalive_on_server_connections)
{
	clean_users();
	struct pgv p;
	pgv_start(&p, TXN "tcp_keepalive = 1\ntcp_keepidle = 7\n", std_databases(), std_userlist());
	PGconn *c = scram(&p, DB);
	ck_assert_str_eq(query_value(c, "SELECT 1"), "1");
	int port = direct_int("SELECT client_port FROM pg_stat_activity WHERE usename = 'scram_user'"
			      " AND backend_type = 'client backend' LIMIT 1");
	ck_assert_int_gt(port, 0);
	sleep_s(0.2);
	int tr = -1;
	long when = -1;
	ck_assert_msg(tcp_timer(port, pg_port(), &tr, &when), "pgvalve's socket 127.0.0.1:%d not found", port);
	ck_assert_msg(tr == 2 && when > 0 && when <= 700,
		      "tcp_keepalive=1 tcp_keepidle=7: pgvalve's server socket has timer %d, %ld ticks "
		      "(expected keepalive)", tr, when);
	PQfinish(c);
	pgv_stop(&p);
}
END_TEST

/* ================================================================ cost of idle clients */

static double process_cpu_s(pid_t pid)
{
	char path[64], buf[2048];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "re");
	ck_assert_msg(f != NULL, "open %s", path);
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	const char *s = strrchr(buf, ')');
	ck_assert_ptr_nonnull(s);
	unsigned long utime = 0, stime = 0;
	/* after "pid (comm)": state is field 3, utime 14, stime 15 */
	ck_assert(sscanf(s + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &utime, &stime) == 2);
	return (double)(utime + stime) / (double)sysconf(_SC_CLK_TCK);
}

START_TEST(idle_clients_cost_little)
{
	enum { N = 2000 };
	struct rlimit rl;
	ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
	if (rl.rlim_cur < 2 * N + 200) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
		getrlimit(RLIMIT_NOFILE, &rl);
	}
	ck_assert_msg(rl.rlim_cur >= N + 200, "RLIMIT_NOFILE %lu is too low for %d clients",
		      (unsigned long)rl.rlim_cur, N);
	struct pgv p;
	pgv_start(&p, TXN "max_client_conn = 2100\ndefault_pool_size = 2\nlog_connections = 0\nlog_disconnections = 0\n",
		  std_databases(), std_userlist());
	static int fd[N];
	double t0 = now_s();
	for (int i = 0; i < N; i++)
		fd[i] = raw_client(&p, DB, "scram_user", "scram_pass");
	double login_s = now_s() - t0;
	sleep_s(1);
	double cpu0 = process_cpu_s(p.pid), w0 = now_s();
	sleep_s(5);
	double cpu = process_cpu_s(p.pid) - cpu0, wall = now_s() - w0;
	double share = cpu / wall;
	ck_assert_msg(share < 0.05, "pgvalve used %.1f%% of a core with %d idle clients (%.2f s CPU in %.1f s)",
		      share * 100, N, cpu, wall);
	/* nobody was dropped or sent anything */
	static struct pollfd pfd[N];
	for (int i = 0; i < N; i++)
		pfd[i] = (struct pollfd){ .fd = fd[i], .events = POLLIN };
	int ready = poll(pfd, N, 0);
	ck_assert_msg(ready == 0, "%d of %d idle clients were closed or sent something", ready, N);
	/* and they are still served */
	char sql[64], want[16];
	for (int i = 0; i < N; i += N / 20) {
		snprintf(sql, sizeof(sql), "SELECT %d", i);
		snprintf(want, sizeof(want), "%d", i);
		raw_query_ok(fd[i], sql, want);
	}
	raw_query_ok(fd[N - 1], "SELECT 'last'", "last");
	fprintf(stderr, "idle_clients_cost_little: %d logins in %.1f s; %.2f%% of a core while idle\n", N, login_s,
		share * 100);
	for (int i = 0; i < N; i++)
		close(fd[i]);
	pgv_stop(&p);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("limits");
	struct {
		const char *name;
		const TTest *test;
		double timeout;
	} tests[] = {
		{ "pool_sizes", pool_sizes_default_db_user, 30 },
		{ "min_pool_size", min_pool_size_kept_and_refilled, 40 },
		{ "reserve_pool", reserve_pool_after_timeout, 30 },
		{ "max_db_user_connections", max_db_and_user_connections_queue, 30 },
		{ "full_database_evicts", full_database_evicts_idle_server, 30 },
		{ "full_user_evicts", full_user_evicts_idle_server, 30 },
		{ "client_connection_limits", client_connection_limits, 20 },
		{ "max_db_client_concurrent", max_db_client_connections_concurrent_logins, 25 },
		{ "max_client_conn", max_client_conn_refuses, 20 },
		{ "max_packet_size", max_packet_size_refuses_large_message, 20 },
		{ "pkt_buf", small_pkt_buf_large_messages, 20 },
		{ "tcp_keepalive_listen_backlog", tcp_keepalive_and_listen_backlog, 20 },
		{ "tcp_keepalive_servers", tcp_keepalive_on_server_connections, 20 },
		{ "idle_clients_cost", idle_clients_cost_little, 90 },
	};
	for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
		TCase *tc = pgv_tcase_create(tests[i].name, tests[i].timeout);
		tcase_add_test(tc, tests[i].test);
		suite_add_tcase(s, tc);
	}
	return pgv_run_suite(s);
}
