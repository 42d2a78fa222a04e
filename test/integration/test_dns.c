/*
 * test_dns.c - host names and host lists end to end: pgvalve resolves
 * [databases] host names through a dnsmasq this test starts (via
 * resolv_conf with "nameserver 127.0.0.1:PORT"), caches answers for
 * dns_max_ttl, notices zone serial changes (dns_zone_check_period), fails
 * only the clients of a database whose name does not resolve, and spreads
 * or fails over connections over host=a,b lists per load_balance_hosts.
 *
 * Addresses: PostgreSQL listens on 127.0.0.1 only, so 127.0.0.2 at its
 * port refuses connections (a "dead host"); its unix socket dir is a
 * second live "host" that SHOW SERVERS tells apart ("unix").
 */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#define DB "pgvtest"
#define BASE "auth_type = md5\nadmin_users = admin_u\n"

/* ---------------------------------------------------------------- fixtures */

static const char *userlist(void)
{
	static char buf[1024];
	snprintf(buf, sizeof(buf), "%s\"admin_u\" \"admin_pass\"\n", std_userlist());
	return buf;
}

static int pg_port_env(void)
{
	const char *v = getenv("PGV_TEST_PGPORT");
	ck_assert_ptr_nonnull(v);
	return atoi(v);
}

static const char *pg_sockdir(void)
{
	const char *v = getenv("PGV_TEST_PGSOCKDIR");
	ck_assert_ptr_nonnull(v);
	return v;
}

/* pgvalve's ini extras: BASE, resolv_conf pointing at d, then extra. */
static const char *cfg(const struct pgv_dns *d, const char *extra)
{
	static char buf[2048];
	snprintf(buf, sizeof(buf), BASE "resolv_conf = %s\n%s", d->resolv, extra ? extra : "");
	return buf;
}

static PGconn *connect_ok(struct pgv *p, const char *dbname)
{
	PGconn *c = pgv_connect(p, dbname, "scram_user", "scram_pass");
	ck_assert_msg(PQstatus(c) == CONNECTION_OK, "connect to %s: %s\n%s", dbname, PQerrorMessage(c),
		      pgv_log_tail(p, 2500));
	return c;
}

static PGconn *admin_conn(struct pgv *p)
{
	PGconn *a = pgv_connect(p, "pgbouncer", "admin_u", "admin_pass");
	ck_assert_msg(PQstatus(a) == CONNECTION_OK, "admin console: %s", PQerrorMessage(a));
	return a;
}

static PGresult *admin_show(PGconn *a, const char *sql)
{
	PGresult *r = PQexec(a, sql);
	ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK || PQresultStatus(r) == PGRES_COMMAND_OK, "%s: %s", sql,
		      PQerrorMessage(a));
	return r;
}

static void admin_ok(PGconn *a, const char *sql)
{
	PQclear(admin_show(a, sql));
}

/* Column `col` of the first row whose `keycol` equals key, copied to out ("" and false if none). */
static bool show_lookup(PGconn *a, const char *sql, const char *keycol, const char *key, const char *col, char *out,
			size_t size)
{
	PGresult *r = admin_show(a, sql);
	int kc = PQfnumber(r, keycol), vc = PQfnumber(r, col);
	ck_assert_msg(kc >= 0 && vc >= 0, "%s has no column %s or %s", sql, keycol, col);
	out[0] = '\0';
	bool found = false;
	for (int i = 0; i < PQntuples(r) && !found; i++) {
		if (strcmp(PQgetvalue(r, i, kc), key) == 0) {
			snprintf(out, size, "%s", PQgetvalue(r, i, vc));
			found = true;
		}
	}
	PQclear(r);
	return found;
}

/* SHOW SERVERS rows of database db whose addr is addr. */
static int servers_at(PGconn *a, const char *db, const char *addr)
{
	PGresult *r = admin_show(a, "SHOW SERVERS");
	int dc = PQfnumber(r, "database"), ac = PQfnumber(r, "addr"), n = 0;
	for (int i = 0; i < PQntuples(r); i++)
		if (strcmp(PQgetvalue(r, i, dc), db) == 0 && strcmp(PQgetvalue(r, i, ac), addr) == 0)
			n++;
	PQclear(r);
	return n;
}

/* Where the client's server connection ends on PostgreSQL's side: an address or "unix". */
static const char *server_addr_seen(PGconn *c)
{
	return query_value(c, "SELECT coalesce(host(inet_server_addr()), 'unix')");
}

/* ---------------------------------------------------------------- tests */

/* (a) + (e): a host name works, goes through our DNS server, and the console shows the cache. */
START_TEST(host_name_resolves)
{
	struct pgv_dns d;
	struct pgv p;
	char dbs[512], v[256];

	pgv_dns_start(&d, "127.0.0.1 db1.pgv.test\n");
	snprintf(dbs, sizeof(dbs), "named = host=db1.pgv.test port=%d dbname=" DB "\n", pg_port_env());
	pgv_start(&p, cfg(&d, NULL), dbs, userlist());

	PGconn *c = connect_ok(&p, "named");
	ck_assert_str_eq(query_value(c, "SELECT 40 + 2"), "42");
	ck_assert_str_eq(server_addr_seen(c), "127.0.0.1");
	ck_assert_msg(pgv_log_contains(&p, "nameservers from"), "resolv_conf's port not applied:\n%s",
		      pgv_log_tail(&p, 2000));
	ck_assert_msg(strstr(read_file_tail(d.log, 8000), "db1.pgv.test") != NULL,
		      "dnsmasq was not asked:\n%s", read_file_tail(d.log, 2000));

	PGconn *a = admin_conn(&p);
	PGresult *r = admin_show(a, "SHOW DNS_HOSTS");
	ck_assert_str_eq(PQfname(r, 0), "hostname");
	ck_assert_str_eq(PQfname(r, 1), "ttl");
	ck_assert_str_eq(PQfname(r, 2), "addrs");
	ck_assert_int_eq(PQftype(r, 1), 20);	/* int8 */
	PQclear(r);
	ck_assert_msg(show_lookup(a, "SHOW DNS_HOSTS", "hostname", "db1.pgv.test", "addrs", v, sizeof(v)),
		      "db1.pgv.test not in SHOW DNS_HOSTS");
	ck_assert_str_eq(v, "127.0.0.1");
	show_lookup(a, "SHOW DNS_HOSTS", "hostname", "db1.pgv.test", "ttl", v, sizeof(v));
	ck_assert_msg(atoi(v) >= 1 && atoi(v) <= 15, "ttl %s not within dns_max_ttl (15)", v);
	ck_assert_msg(show_lookup(a, "SHOW DNS_ZONES", "zonename", "pgv.test", "count", v, sizeof(v)),
		      "zone pgv.test not in SHOW DNS_ZONES");
	ck_assert_str_eq(v, "1");
	ck_assert(show_lookup(a, "SHOW LISTS", "list", "dns_names", "items", v, sizeof(v)));
	ck_assert_str_eq(v, "1");
	ck_assert_int_eq(servers_at(a, "named", "127.0.0.1"), 1);
	PQfinish(a);
	PQfinish(c);
	pgv_stop(&p);
	pgv_dns_stop(&d);
}
END_TEST

/* (b) dns_max_ttl: a changed record is not used before the cached answer expires, and is after. */
START_TEST(ttl_is_honoured)
{
	const double ttl = 4.0;
	struct pgv_dns d;
	struct pgv p;
	char dbs[512], v[256], extra[256];

	pgv_dns_start(&d, "127.0.0.1 db1.pgv.test\n");
	snprintf(dbs, sizeof(dbs), "named = host=db1.pgv.test port=%d dbname=" DB "\n", pg_port_env());
	snprintf(extra, sizeof(extra), "dns_max_ttl = %.0f\nserver_login_retry = 0.2\nquery_wait_timeout = 2\n", ttl);
	pgv_start(&p, cfg(&d, extra), dbs, userlist());
	PGconn *a = admin_conn(&p);

	double before = now_s();
	PGconn *c = connect_ok(&p, "named");
	ck_assert_str_eq(server_addr_seen(c), "127.0.0.1");
	double answered = now_s();	/* the answer came between before and now */
	PQfinish(c);

	/* 127.0.0.2: nothing listens there on PostgreSQL's port */
	pgv_dns_set_hosts(&d, "127.0.0.2 db1.pgv.test\n");
	admin_ok(a, "RECONNECT named");
	c = connect_ok(&p, "named");
	ck_assert_str_eq(server_addr_seen(c), "127.0.0.1");
	double used_at = now_s();
	ck_assert_msg(used_at - before < ttl, "too slow to tell: %.1f s passed, dns_max_ttl is %.0f s",
		      used_at - before, ttl);
	ck_assert(show_lookup(a, "SHOW DNS_HOSTS", "hostname", "db1.pgv.test", "addrs", v, sizeof(v)));
	ck_assert_str_eq(v, "127.0.0.1");
	PQfinish(c);
	admin_ok(a, "RECONNECT named");

	/*
	 * Expired: the next connection looks the name up again and goes to
	 * the new address, where it is refused. A login of another user (a
	 * pool without server parameters yet) needs that connection: as in
	 * PgBouncer it stays queued (a connect failure is not a login error)
	 * until query_wait_timeout; the log names the new address.
	 */
	sleep_s(answered + ttl + 0.5 - now_s());
	struct raw_error err;
	memset(&err, 0, sizeof(err));
	ck_assert_int_eq(raw_login(p.port, "named", "md5_user", "md5_pass", &err), -1);
	ck_assert_str_eq(err.message, "query_wait_timeout");
	ck_assert_msg(pgv_log_contains(&p, "db1.pgv.test (127.0.0.2)"), "the log does not name the new address:\n%s",
		      pgv_log_tail(&p, 2000));
	ck_assert(show_lookup(a, "SHOW DNS_HOSTS", "hostname", "db1.pgv.test", "addrs", v, sizeof(v)));
	ck_assert_str_eq(v, "127.0.0.2");

	/* and back: after another dns_max_ttl it works again */
	pgv_dns_set_hosts(&d, "127.0.0.1 db1.pgv.test\n");
	sleep_s(ttl + 0.5);
	c = pgv_connect(&p, "named", "md5_user", "md5_pass");
	ck_assert_msg(PQstatus(c) == CONNECTION_OK, "%s\n%s", PQerrorMessage(c), pgv_log_tail(&p, 2000));
	ck_assert_str_eq(server_addr_seen(c), "127.0.0.1");
	PQfinish(c);
	PQfinish(a);
	pgv_stop(&p);
	pgv_dns_stop(&d);
}
END_TEST

/* dns_zone_check_period: a new zone serial re-resolves its names at once, and stale servers close. */
START_TEST(zone_serial_change_reresolves)
{
	struct pgv_dns d;
	struct pgv p;
	char dbs[512], v[256];

	pgv_dns_start(&d, "127.0.0.1 db1.pgv.test\n");
	double dns_started = now_s();
	snprintf(dbs, sizeof(dbs), "named = host=db1.pgv.test port=%d dbname=" DB "\n", pg_port_env());
	pgv_start(&p, cfg(&d, "dns_max_ttl = 120\ndns_zone_check_period = 1\n"), dbs, userlist());
	PGconn *a = admin_conn(&p);
	PGconn *c = connect_ok(&p, "named");
	ck_assert_str_eq(server_addr_seen(c), "127.0.0.1");
	PQfinish(c);	/* its server stays, idle */
	ck_assert_int_eq(servers_at(a, "named", "127.0.0.1"), 1);

	/* the first check learns the serial (dns_zone_check_period 1 s; 10 s on a loaded machine) */
	double deadline = now_s() + 10;
	while (!(show_lookup(a, "SHOW DNS_ZONES", "zonename", "pgv.test", "serial", v, sizeof(v)) &&
		 strtoll(v, NULL, 10) > 0)) {
		ck_assert_msg(now_s() < deadline, "zone serial never learned:\n%s", pgv_log_tail(&p, 2000));
		sleep_s(0.2);
	}
	long long serial = strtoll(v, NULL, 10);

	/* dnsmasq's serial is the time of its last reload, in seconds: a lower bound, which a loaded machine only lengthens */
	sleep_s(dns_started + 1.2 - now_s());
	pgv_dns_set_hosts(&d, "127.0.0.2 db1.pgv.test\n");
	/* the next zone check (a second) sees the new serial and looks the host up again; 10 s on a loaded machine */
	deadline = now_s() + 10;
	while (!(show_lookup(a, "SHOW DNS_HOSTS", "hostname", "db1.pgv.test", "addrs", v, sizeof(v)) &&
		 strcmp(v, "127.0.0.2") == 0)) {
		ck_assert_msg(now_s() < deadline, "new address not picked up before dns_max_ttl (addrs %s):\n%s", v,
			      pgv_log_tail(&p, 2000));
		sleep_s(0.2);
	}
	ck_assert(show_lookup(a, "SHOW DNS_ZONES", "zonename", "pgv.test", "serial", v, sizeof(v)));
	ck_assert_msg(strtoll(v, NULL, 10) != serial, "serial still %s", v);
	ck_assert_msg(pgv_log_contains(&p, "zone pgv.test has a new serial"), "%s", pgv_log_tail(&p, 2000));
	/* the idle server to the old address is gone (closed with the new address; 5 s on a loaded machine) */
	deadline = now_s() + 5;
	while (servers_at(a, "named", "127.0.0.1") != 0) {
		ck_assert_msg(now_s() < deadline, "server to the old address still there");
		sleep_s(0.1);
	}
	PQfinish(a);
	pgv_stop(&p);
	pgv_dns_stop(&d);
}
END_TEST

/* (c) a name that does not resolve fails its own clients, clearly, and nobody else. */
START_TEST(unresolvable_fails_only_its_clients)
{
	struct pgv_dns d;
	struct pgv p;
	char dbs[1024];
	struct raw_error err;

	pgv_dns_start(&d, "127.0.0.1 db1.pgv.test\n");
	snprintf(dbs, sizeof(dbs),
		 "good = host=db1.pgv.test port=%d dbname=" DB "\n"
		 "bad = host=nope.pgv.test port=%d dbname=" DB "\n"
		 "later = host=db2.pgv.test port=%d dbname=" DB "\n",
		 pg_port_env(), pg_port_env(), pg_port_env());
	pgv_start(&p, cfg(&d, "query_wait_timeout = 2\n"), dbs, userlist());

	PGconn *c = connect_ok(&p, "good");
	ck_assert_str_eq(query_value(c, "BEGIN; SELECT 'in a transaction'"), "in a transaction");

	memset(&err, 0, sizeof(err));
	ck_assert_int_eq(raw_login(p.port, "bad", "md5_user", "md5_pass", &err), -1);
	ck_assert_str_eq(err.message, "query_wait_timeout");	/* queued, as PgBouncer, then given up */
	ck_assert_msg(pgv_log_contains(&p, "nope.pgv.test"), "not logged:\n%s", pgv_log_tail(&p, 2000));
	ck_assert_msg(pgv_log_contains(&p, "closing because: server DNS lookup failed"), "%s", pgv_log_tail(&p, 2000));

	/* the client of the other database never noticed; new ones still get in */
	ck_assert_str_eq(query_value(c, "SELECT 'still here'"), "still here");
	PGconn *c2 = connect_ok(&p, "good");
	ck_assert_str_eq(query_value(c2, "SELECT 1"), "1");
	PQfinish(c2);

	/* a dead DNS server: a name not cached yet fails with a clear error, again only there */
	pgv_dns_stop(&d);
	memset(&err, 0, sizeof(err));
	double t0 = now_s();
	ck_assert_int_eq(raw_login(p.port, "later", "md5_user", "md5_pass", &err), -1);
	ck_assert_msg(now_s() - t0 < 30, "the failure took %.0f s", now_s() - t0);
	ck_assert_str_eq(err.message, "query_wait_timeout");
	ck_assert_msg(pgv_log_contains(&p, "db2.pgv.test"), "the log does not name the host:\n%s", pgv_log_tail(&p, 2000));
	ck_assert_str_eq(query_value(c, "SELECT 'still here'"), "still here");
	PQfinish(c);
	pgv_stop(&p);
}
END_TEST

/* Queries dnsmasq logged for name (A and AAAA each count). */
static int dns_queries_for(const struct pgv_dns *d, const char *name)
{
	const char *log = read_file_tail(d->log, 16000);
	char needle[300];
	int n = 0;
	snprintf(needle, sizeof(needle), "] %s from", name);
	for (const char *s = log; (s = strstr(s, needle)) != NULL; s++)
		n++;
	return n;
}

/* dns_nxdomain_ttl: a failed lookup is remembered that long, then the name is asked for again. */
START_TEST(nxdomain_ttl_is_honoured)
{
	const double ttl = 8.0;	/* two logins of query_wait_timeout (2 s) each fit well inside */
	struct pgv_dns d;
	struct pgv p;
	char dbs[512], extra[256];
	struct raw_error err;

	pgv_dns_start(&d, "127.0.0.1 db1.pgv.test\n");
	snprintf(dbs, sizeof(dbs), "later = host=new.pgv.test port=%d dbname=" DB "\n", pg_port_env());
	snprintf(extra, sizeof(extra), "dns_nxdomain_ttl = %.0f\nserver_login_retry = 0.2\nquery_wait_timeout = 2\n",
		 ttl);
	pgv_start(&p, cfg(&d, extra), dbs, userlist());

	double before = now_s();
	memset(&err, 0, sizeof(err));
	ck_assert_int_eq(raw_login(p.port, "later", "md5_user", "md5_pass", &err), -1);
	double cached_by = now_s();	/* the failure was cached during that login */
	/* queued while its servers fail (as PgBouncer), the host named in the log */
	ck_assert_str_eq(err.message, "query_wait_timeout");
	ck_assert_msg(pgv_log_contains(&p, "new.pgv.test"), "%s", pgv_log_tail(&p, 2000));
	int asked = dns_queries_for(&d, "new.pgv.test");
	ck_assert_int_gt(asked, 0);

	/* the name exists now, but the failure is still cached: no new query, same error */
	pgv_dns_set_hosts(&d, "127.0.0.1 db1.pgv.test\n127.0.0.1 new.pgv.test\n");
	memset(&err, 0, sizeof(err));
	ck_assert_int_eq(raw_login(p.port, "later", "md5_user", "md5_pass", &err), -1);
	ck_assert_msg(now_s() - before < ttl, "too slow to tell: %.1f s passed, dns_nxdomain_ttl is %.0f s",
		      now_s() - before, ttl);
	ck_assert_str_eq(err.message, "query_wait_timeout");
	ck_assert_int_eq(dns_queries_for(&d, "new.pgv.test"), asked);

	/* after dns_nxdomain_ttl it is looked up again and works */
	sleep_s(cached_by + ttl + 0.5 - now_s());
	PGconn *c = pgv_connect(&p, "later", "md5_user", "md5_pass");
	ck_assert_msg(PQstatus(c) == CONNECTION_OK, "%s\n%s", PQerrorMessage(c), pgv_log_tail(&p, 2000));
	ck_assert_str_eq(server_addr_seen(c), "127.0.0.1");
	ck_assert_int_gt(dns_queries_for(&d, "new.pgv.test"), asked);
	PQfinish(c);
	pgv_stop(&p);
	pgv_dns_stop(&d);
}
END_TEST

/* A DNS server that never answers: server_connect_timeout ends the wait, with the host named. */
START_TEST(silent_dns_server_times_out)
{
	struct pgv p;
	char resolv[700], dbs[1024], extra[900];
	struct raw_error err;

	/* a UDP socket nobody reads: queries to it vanish without an ICMP error */
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	socklen_t len = sizeof(sa);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	snprintf(resolv, sizeof(resolv), "%s/silent-resolv.%d.conf", getenv("PGV_TEST_DIR"), (int)getpid());
	FILE *f = fopen(resolv, "w");
	ck_assert_ptr_nonnull(f);
	fprintf(f, "nameserver 127.0.0.1:%d\n", ntohs(sa.sin_port));
	fclose(f);
	chmod(resolv, 0644);

	snprintf(dbs, sizeof(dbs), "slow = host=slow.pgv.test port=%d dbname=" DB "\n%s", pg_port_env(),
		 std_databases());
	snprintf(extra, sizeof(extra), BASE "resolv_conf = %s\nserver_connect_timeout = 2\nquery_wait_timeout = 4\n",
		 resolv);
	pgv_start(&p, extra, dbs, userlist());
	PGconn *c = connect_ok(&p, DB);	/* an address: no lookup, not held up */

	double t0 = now_s();
	memset(&err, 0, sizeof(err));
	ck_assert_int_eq(raw_login(p.port, "slow", "md5_user", "md5_pass", &err), -1);
	double took = now_s() - t0;
	ck_assert_msg(took >= 3 && took < 12, "gave up after %.1f s (query_wait_timeout = 4)", took);
	ck_assert_str_eq(err.message, "query_wait_timeout");
	/* server_connect_timeout (2 s) ended each lookup, with the host named */
	ck_assert_msg(pgv_log_contains(&p, "server connect timeout: no DNS answer for host \"slow.pgv.test\""), "%s",
		      pgv_log_tail(&p, 2000));
	ck_assert_str_eq(query_value(c, "SELECT 'unaffected'"), "unaffected");
	PQfinish(c);
	pgv_stop(&p);	/* with the lookup still pending in c-ares: a clean exit, no leak report */
	close(fd);
}
END_TEST

/* Opens n clients to db, each holding its own server (session pooling); returns where each one landed. */
static void open_clients(struct pgv *p, const char *db, PGconn **conns, int n, char seen[][64])
{
	for (int i = 0; i < n; i++) {
		conns[i] = connect_ok(p, db);
		snprintf(seen[i], 64, "%s", server_addr_seen(conns[i]));
	}
}

static void close_clients(PGconn **conns, int n)
{
	for (int i = 0; i < n; i++)
		PQfinish(conns[i]);
}

/* (d) round-robin: new connections alternate between entries; a dead entry is skipped. */
START_TEST(host_list_round_robin)
{
	struct pgv_dns d;
	struct pgv p;
	char dbs[2048], seen[4][64];
	PGconn *conns[4];
	int port = pg_port_env();

	pgv_dns_start(&d, "127.0.0.1 db1.pgv.test\n");
	snprintf(dbs, sizeof(dbs),
		 "rr = host=127.0.0.1,%s port=%d dbname=" DB "\n"
		 "rrdead = host=127.0.0.2,db1.pgv.test port=%d dbname=" DB " load_balance_hosts=round-robin\n",
		 pg_sockdir(), port, port);
	pgv_start(&p, cfg(&d, NULL), dbs, userlist());
	PGconn *a = admin_conn(&p);

	open_clients(&p, "rr", conns, 4, seen);
	ck_assert_int_eq(servers_at(a, "rr", "127.0.0.1"), 2);
	ck_assert_int_eq(servers_at(a, "rr", "unix"), 2);
	int tcp = 0;
	for (int i = 0; i < 4; i++)
		tcp += strcmp(seen[i], "127.0.0.1") == 0;
	ck_assert_int_eq(tcp, 2);
	close_clients(conns, 4);

	/* every other attempt starts at the dead entry: it is skipped, no client notices */
	open_clients(&p, "rrdead", conns, 4, seen);
	for (int i = 0; i < 4; i++)
		ck_assert_str_eq(seen[i], "127.0.0.1");
	ck_assert_int_eq(servers_at(a, "rrdead", "127.0.0.1"), 4);
	ck_assert_msg(pgv_log_contains(&p, "127.0.0.2 port") && pgv_log_contains(&p, "trying the next host"),
		      "%s", pgv_log_tail(&p, 2000));
	close_clients(conns, 4);
	PQfinish(a);
	pgv_stop(&p);
	pgv_dns_stop(&d);
}
END_TEST

/* (d) disable: all connections go to the first entry while it works; a dead first entry is left for the next. */
START_TEST(host_list_disable)
{
	struct pgv_dns d;
	struct pgv p;
	char dbs[2048], seen[3][64];
	PGconn *conns[3];
	int port = pg_port_env();

	pgv_dns_start(&d, "127.0.0.1 db1.pgv.test\n");
	snprintf(dbs, sizeof(dbs),
		 "pin = host=127.0.0.1,%s port=%d dbname=" DB " load_balance_hosts=disable\n"
		 "failover = host=127.0.0.2,%s port=%d dbname=" DB " load_balance_hosts=disable\n",
		 pg_sockdir(), port, pg_sockdir(), port);
	pgv_start(&p, cfg(&d, NULL), dbs, userlist());
	PGconn *a = admin_conn(&p);

	open_clients(&p, "pin", conns, 3, seen);
	for (int i = 0; i < 3; i++)
		ck_assert_str_eq(seen[i], "127.0.0.1");
	ck_assert_int_eq(servers_at(a, "pin", "127.0.0.1"), 3);
	close_clients(conns, 3);

	open_clients(&p, "failover", conns, 3, seen);
	for (int i = 0; i < 3; i++)
		ck_assert_str_eq(seen[i], "unix");
	ck_assert_int_eq(servers_at(a, "failover", "unix"), 3);
	close_clients(conns, 3);
	/* the dead entry was tried once; later connections went straight to the live one */
	const char *log = read_file_tail(p.log, 16000);
	int refusals = 0;
	for (const char *s = log; (s = strstr(s, "127.0.0.2 port")) != NULL; s++)
		refusals++;
	ck_assert_msg(refusals == 1, "127.0.0.2 tried %d times:\n%s", refusals, pgv_log_tail(&p, 3000));
	PQfinish(a);
	pgv_stop(&p);
	pgv_dns_stop(&d);
}
END_TEST

/* resolv_conf naming a file that is not there stops start-up with a message, not a silent default. */
START_TEST(missing_resolv_conf_refuses_to_start)
{
	char ini[700], out[700], text[512];
	const char *dir = getenv("PGV_TEST_DIR");
	const char *runas = getenv("PGV_TEST_RUNAS");
	ck_assert_ptr_nonnull(dir);
	snprintf(ini, sizeof(ini), "%s/badresolv.%d.ini", dir, (int)getpid());
	snprintf(out, sizeof(out), "%s/badresolv.%d.out", dir, (int)getpid());
	snprintf(text, sizeof(text),
		 "[pgvalve]\nlisten_addr = 127.0.0.1\nlisten_port = 1\nresolv_conf = /nonexistent/resolv.conf\n");
	FILE *f = fopen(ini, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
	char *args[] = { getenv("PGV_BINARY"), "-u", runas && *runas ? (char *)runas : "nobody", ini, NULL };
	char *noroot[] = { getenv("PGV_BINARY"), ini, NULL };
	int rc = run_program(geteuid() == 0 ? args : noroot, NULL, out, 20);
	ck_assert_msg(rc == 1, "exit %d:\n%s", rc, read_file_tail(out, 2000));
	ck_assert_msg(strstr(read_file_tail(out, 4000), "/nonexistent/resolv.conf"), "%s", read_file_tail(out, 2000));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("dns");
	TCase *tc = pgv_tcase_create("names", 60);
	tcase_add_test(tc, host_name_resolves);
	tcase_add_test(tc, ttl_is_honoured);
	tcase_add_test(tc, zone_serial_change_reresolves);
	tcase_add_test(tc, unresolvable_fails_only_its_clients);
	tcase_add_test(tc, silent_dns_server_times_out);
	tcase_add_test(tc, nxdomain_ttl_is_honoured);
	tcase_add_test(tc, missing_resolv_conf_refuses_to_start);
	suite_add_tcase(s, tc);
	TCase *hl = pgv_tcase_create("host_lists", 60);
	tcase_add_test(hl, host_list_round_robin);
	tcase_add_test(hl, host_list_disable);
	suite_add_tcase(s, hl);
	return pgv_run_suite(s);
}
