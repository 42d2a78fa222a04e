/*
 * test_admin_show.c - end-to-end tests of the admin console's session and
 * SHOW views ("pgbouncer" and "pgvalve" databases) against PgBouncer
 * 1.25's behaviour: the columns, types and values of every SHOW, the
 * statistics counters after a known workload, who may log in and do what,
 * the parser's errors, the extended protocol refused, the console's
 * welcome. The control commands are test_admin_control.c's.
 *
 * Tests named spec_* check single points of the PgBouncer 1.25 spec on
 * their own, so one difference does not hide the others.
 */
#include "admin_console.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---------------------------------------------------------------- column checks */

struct colspec {
	const char *name;
	Oid oid;
};

static void expect_columns(const PGresult *r, const char *what, const struct colspec *cols, size_t n)
{
	ck_assert_msg(PQnfields(r) == (int)n, "%s: %d columns, expected %zu", what, PQnfields(r), n);
	for (size_t i = 0; i < n; i++) {
		ck_assert_msg(strcmp(PQfname(r, (int)i), cols[i].name) == 0, "%s column %zu is '%s', expected '%s'",
			      what, i, PQfname(r, (int)i), cols[i].name);
		ck_assert_msg(PQftype(r, (int)i) == cols[i].oid, "%s column %s has type %u, expected %u", what,
			      cols[i].name, PQftype(r, (int)i), cols[i].oid);
	}
}

/* ---------------------------------------------------------------- raw protocol */

/* The next backend message (raw_read_message): its length, or -1 at EOF/timeout. */
static int raw_next(int fd, char *type, unsigned char *body, size_t size, int timeout_ms)
{
	size_t len;
	return raw_read_message(fd, type, body, size, &len, timeout_ms) ? (int)len : -1;
}

static const char *error_field(const unsigned char *body, int len, char code)
{
	int i = 0;
	while (i < len && body[i]) {
		char f = (char)body[i++];
		const char *v = (const char *)body + i;
		if (f == code)
			return v;
		i += (int)strlen(v) + 1;
	}
	return "";
}

/* ================================================================ SHOW */

static const struct colspec pools_cols[] = {
	{ "database", OID_TEXT }, { "user", OID_TEXT }, { "cl_active", OID_INT4 }, { "cl_waiting", OID_INT4 },
	{ "cl_active_cancel_req", OID_INT4 }, { "cl_waiting_cancel_req", OID_INT4 }, { "sv_active", OID_INT4 },
	{ "sv_active_cancel", OID_INT4 }, { "sv_being_canceled", OID_INT4 }, { "sv_idle", OID_INT4 },
	{ "sv_used", OID_INT4 }, { "sv_tested", OID_INT4 }, { "sv_login", OID_INT4 }, { "maxwait", OID_INT4 },
	{ "maxwait_us", OID_INT4 }, { "pool_mode", OID_TEXT }, { "load_balance_hosts", OID_TEXT },
};

static const struct colspec conn_cols[] = {
	{ "type", OID_TEXT }, { "user", OID_TEXT }, { "database", OID_TEXT }, { "replication", OID_TEXT },
	{ "state", OID_TEXT }, { "addr", OID_TEXT }, { "port", OID_INT4 }, { "local_addr", OID_TEXT },
	{ "local_port", OID_INT4 }, { "connect_time", OID_TEXT }, { "request_time", OID_TEXT },
	{ "wait", OID_INT4 }, { "wait_us", OID_INT4 }, { "close_needed", OID_INT4 }, { "ptr", OID_TEXT },
	{ "link", OID_TEXT }, { "remote_pid", OID_INT4 }, { "tls", OID_TEXT }, { "application_name", OID_TEXT },
	{ "prepared_statements", OID_INT4 }, { "id", OID_INT4 },
	/* SHOW SOCKETS / ACTIVE_SOCKETS only */
	{ "recv_pos", OID_INT4 }, { "pkt_pos", OID_INT4 }, { "pkt_remain", OID_INT4 }, { "send_pos", OID_INT4 },
	{ "send_remain", OID_INT4 }, { "pkt_avail", OID_INT4 }, { "send_avail", OID_INT4 },
};

/* SHOW SERVERS: PgBouncer 1.26's 21 columns of SHOW CLIENTS, then pgvalve's own. */
static const struct colspec servers_cols[] = {
	{ "type", OID_TEXT }, { "user", OID_TEXT }, { "database", OID_TEXT }, { "replication", OID_TEXT },
	{ "state", OID_TEXT }, { "addr", OID_TEXT }, { "port", OID_INT4 }, { "local_addr", OID_TEXT },
	{ "local_port", OID_INT4 }, { "connect_time", OID_TEXT }, { "request_time", OID_TEXT },
	{ "wait", OID_INT4 }, { "wait_us", OID_INT4 }, { "close_needed", OID_INT4 }, { "ptr", OID_TEXT },
	{ "link", OID_TEXT }, { "remote_pid", OID_INT4 }, { "tls", OID_TEXT }, { "application_name", OID_TEXT },
	{ "prepared_statements", OID_INT4 }, { "id", OID_INT4 },
	{ "role", OID_TEXT },	/* pgvalve: primary, standby, "" unknown (target_session_attrs) */
};

static const struct colspec databases_cols[] = {
	{ "name", OID_TEXT }, { "host", OID_TEXT }, { "port", OID_INT4 }, { "database", OID_TEXT },
	{ "force_user", OID_TEXT }, { "pool_size", OID_INT4 }, { "min_pool_size", OID_INT4 },
	{ "reserve_pool_size", OID_INT4 }, { "server_lifetime", OID_INT4 }, { "pool_mode", OID_TEXT },
	{ "load_balance_hosts", OID_TEXT }, { "max_connections", OID_INT4 }, { "current_connections", OID_INT4 },
	{ "max_client_connections", OID_INT4 }, { "current_client_connections", OID_INT4 },
	{ "paused", OID_INT4 }, { "disabled", OID_INT4 },
};

static const struct colspec users_cols[] = {
	{ "name", OID_TEXT }, { "pool_size", OID_TEXT }, { "reserve_pool_size", OID_TEXT },
	{ "pool_mode", OID_TEXT }, { "max_user_connections", OID_INT4 }, { "current_connections", OID_INT4 },
	{ "max_user_client_connections", OID_INT4 }, { "current_client_connections", OID_INT4 },
};

static const struct colspec config_cols[] = {
	{ "key", OID_TEXT }, { "value", OID_TEXT }, { "default", OID_TEXT }, { "changeable", OID_TEXT },
};
static const struct colspec lists_cols[] = { { "list", OID_TEXT }, { "items", OID_INT4 } };
static const struct colspec mem_cols[] = {
	{ "name", OID_TEXT }, { "size", OID_INT4 }, { "used", OID_INT4 }, { "free", OID_INT4 },
	{ "memtotal", OID_INT4 },
};
static const struct colspec state_cols[] = { { "key", OID_TEXT }, { "value", OID_TEXT } };
static const struct colspec version_cols[] = { { "version", OID_TEXT } };
static const struct colspec peers_cols[] = {
	{ "peer_id", OID_INT4 }, { "host", OID_TEXT }, { "port", OID_INT4 }, { "pool_size", OID_INT4 },
};
static const struct colspec peer_pools_cols[] = {
	{ "peer_id", OID_INT4 }, { "cl_active_cancel_req", OID_INT4 }, { "cl_waiting_cancel_req", OID_INT4 },
	{ "sv_active_cancel", OID_INT4 }, { "sv_login", OID_INT4 },
};
static const struct colspec dns_hosts_cols[] = {
	{ "hostname", OID_TEXT }, { "ttl", OID_INT8 }, { "addrs", OID_TEXT },
};
static const struct colspec dns_zones_cols[] = {
	{ "zonename", OID_TEXT }, { "serial", OID_INT8 }, { "count", OID_INT4 },
};
static const struct colspec stats_cols[] = {
	{ "database", OID_TEXT },
	{ "total_server_assignment_count", OID_NUMERIC }, { "total_xact_count", OID_NUMERIC },
	{ "total_query_count", OID_NUMERIC }, { "total_received", OID_NUMERIC }, { "total_sent", OID_NUMERIC },
	{ "total_xact_time", OID_NUMERIC }, { "total_query_time", OID_NUMERIC }, { "total_wait_time", OID_NUMERIC },
	{ "total_client_parse_count", OID_NUMERIC }, { "total_server_parse_count", OID_NUMERIC },
	{ "total_bind_count", OID_NUMERIC }, { "total_client_login_count", OID_NUMERIC },
	{ "avg_server_assignment_count", OID_NUMERIC }, { "avg_xact_count", OID_NUMERIC },
	{ "avg_query_count", OID_NUMERIC }, { "avg_recv", OID_NUMERIC }, { "avg_sent", OID_NUMERIC },
	{ "avg_xact_time", OID_NUMERIC }, { "avg_query_time", OID_NUMERIC }, { "avg_wait_time", OID_NUMERIC },
	{ "avg_client_parse_count", OID_NUMERIC }, { "avg_server_parse_count", OID_NUMERIC },
	{ "avg_bind_count", OID_NUMERIC }, { "avg_client_login_count", OID_NUMERIC },
};
static const struct colspec stats_totals_cols[] = {
	{ "database", OID_TEXT }, { "server_assignment_count", OID_NUMERIC }, { "xact_count", OID_NUMERIC },
	{ "query_count", OID_NUMERIC }, { "bytes_received", OID_NUMERIC }, { "bytes_sent", OID_NUMERIC },
	{ "xact_time", OID_NUMERIC }, { "query_time", OID_NUMERIC }, { "wait_time", OID_NUMERIC },
	{ "client_parse_count", OID_NUMERIC }, { "server_parse_count", OID_NUMERIC }, { "bind_count", OID_NUMERIC },
	{ "client_login_count", OID_NUMERIC },
};
static const struct colspec stats_averages_cols[] = {
	{ "database", OID_TEXT }, { "server_assignment_count", OID_NUMERIC }, { "xact_count", OID_NUMERIC },
	{ "query_count", OID_NUMERIC }, { "bytes_received", OID_NUMERIC }, { "bytes_sent", OID_NUMERIC },
	{ "xact_time", OID_NUMERIC }, { "query_time", OID_NUMERIC }, { "wait_time", OID_NUMERIC },
	{ "avg_client_parse_count", OID_NUMERIC }, { "avg_server_parse_count", OID_NUMERIC },
	{ "avg_bind_count", OID_NUMERIC }, { "avg_client_login_count", OID_NUMERIC },
};
static const struct colspec totals_cols[] = { { "name", OID_TEXT }, { "value", OID_NUMERIC } };

static const char *const totals_rows[] = {
	"total_server_assignment_count", "total_xact_count", "total_query_count", "total_client_bytes",
	"total_server_bytes", "total_xact_time", "total_query_time", "total_wait_time",
	"total_ps_client_parse_count", "total_ps_server_parse_count", "total_ps_bind_count",
	"total_client_login_count", "avg_server_assignment_count", "avg_xact_count", "avg_query_count", "avg_client_bytes",
	"avg_server_bytes", "avg_xact_time", "avg_query_time", "avg_wait_time",
	"avg_ps_client_parse_count", "avg_ps_server_parse_count", "avg_ps_bind_count", "avg_client_login_count",
};

static const char *const lists_rows[] = {
	"databases", "users", "peers", "pools", "peer_pools", "free_clients", "used_clients", "login_clients",
	"free_servers", "used_servers", "dns_names", "dns_zones", "dns_queries", "dns_pending",
};

static void expect_show_columns(PGconn *a, const char *cmd, const struct colspec *cols, size_t n)
{
	PGresult *r = show(a, cmd);
	expect_columns(r, cmd, cols, n);
	PQclear(r);
}

/* Every SHOW answers with PgBouncer's column names and types, in order; case does not matter. */
START_TEST(show_columns_and_types)
{
	struct pgv p;
	pgv_start(&p, TXN, std_databases(), userlist());
	PGconn *c = client_conn(&p);
	exec_ok(c, "SELECT 1");
	PGconn *a = admin_conn(&p);

	expect_show_columns(a, "SHOW POOLS", pools_cols, ARRAY_LEN(pools_cols));
	expect_show_columns(a, "SHOW CLIENTS", conn_cols, 21);
	expect_show_columns(a, "SHOW SERVERS", servers_cols, ARRAY_LEN(servers_cols));
	expect_show_columns(a, "SHOW SOCKETS", conn_cols, ARRAY_LEN(conn_cols));
	expect_show_columns(a, "SHOW ACTIVE_SOCKETS", conn_cols, ARRAY_LEN(conn_cols));
	expect_show_columns(a, "SHOW DATABASES", databases_cols, ARRAY_LEN(databases_cols));
	expect_show_columns(a, "SHOW USERS", users_cols, ARRAY_LEN(users_cols));
	expect_show_columns(a, "SHOW CONFIG", config_cols, ARRAY_LEN(config_cols));
	expect_show_columns(a, "SHOW LISTS", lists_cols, ARRAY_LEN(lists_cols));
	expect_show_columns(a, "SHOW MEM", mem_cols, ARRAY_LEN(mem_cols));
	expect_show_columns(a, "SHOW STATE", state_cols, ARRAY_LEN(state_cols));
	expect_show_columns(a, "SHOW VERSION", version_cols, ARRAY_LEN(version_cols));
	expect_show_columns(a, "SHOW PEERS", peers_cols, ARRAY_LEN(peers_cols));
	expect_show_columns(a, "SHOW PEER_POOLS", peer_pools_cols, ARRAY_LEN(peer_pools_cols));
	expect_show_columns(a, "SHOW DNS_HOSTS", dns_hosts_cols, ARRAY_LEN(dns_hosts_cols));
	expect_show_columns(a, "SHOW DNS_ZONES", dns_zones_cols, ARRAY_LEN(dns_zones_cols));
	expect_show_columns(a, "SHOW STATS", stats_cols, ARRAY_LEN(stats_cols));
	expect_show_columns(a, "SHOW STATS_TOTALS", stats_totals_cols, ARRAY_LEN(stats_totals_cols));
	expect_show_columns(a, "SHOW STATS_AVERAGES", stats_averages_cols, ARRAY_LEN(stats_averages_cols));
	expect_show_columns(a, "SHOW TOTALS", totals_cols, ARRAY_LEN(totals_cols));
	/* case-insensitive, optional semicolon, quoted words, SELECT as SHOW */
	expect_show_columns(a, "show pools;", pools_cols, ARRAY_LEN(pools_cols));
	expect_show_columns(a, "  Show\tStats_Totals  ;  ", stats_totals_cols, ARRAY_LEN(stats_totals_cols));
	expect_show_columns(a, "\"show\" \"version\"", version_cols, ARRAY_LEN(version_cols));
	expect_show_columns(a, "SELECT version", version_cols, ARRAY_LEN(version_cols));

	/* SHOW TOTALS: 22 rows with the C struct names */
	PGresult *r = show(a, "SHOW TOTALS");
	ck_assert_int_eq(PQntuples(r), (int)ARRAY_LEN(totals_rows));
	for (int i = 0; i < PQntuples(r); i++)
		ck_assert_str_eq(PQgetvalue(r, i, 0), totals_rows[i]);
	PQclear(r);

	/* SHOW LISTS: 14 rows in order */
	r = show(a, "SHOW LISTS");
	ck_assert_int_eq(PQntuples(r), (int)ARRAY_LEN(lists_rows));
	for (int i = 0; i < PQntuples(r); i++)
		ck_assert_str_eq(PQgetvalue(r, i, 0), lists_rows[i]);
	PQclear(r);

	/* SHOW STATE: exactly active, paused, suspended */
	r = show(a, "SHOW STATE");
	ck_assert_int_eq(PQntuples(r), 3);
	ck_assert_str_eq(PQgetvalue(r, 0, 0), "active");
	ck_assert_str_eq(PQgetvalue(r, 0, 1), "yes");
	ck_assert_str_eq(PQgetvalue(r, 1, 0), "paused");
	ck_assert_str_eq(PQgetvalue(r, 1, 1), "no");
	ck_assert_str_eq(PQgetvalue(r, 2, 0), "suspended");
	ck_assert_str_eq(PQgetvalue(r, 2, 1), "no");
	PQclear(r);

	/* Fake parameters for drivers: one text column named as PgBouncer does. */
	r = show(a, "SHOW TimeZone");
	ck_assert_int_eq(PQnfields(r), 1);
	ck_assert_str_eq(PQfname(r, 0), "timezone");
	ck_assert_str_eq(PQgetvalue(r, 0, 0), "GMT");
	PQclear(r);
	r = show(a, "show client_encoding");
	ck_assert_str_eq(PQfname(r, 0), "client_encoding");
	ck_assert_str_eq(PQgetvalue(r, 0, 0), "UTF-8");
	PQclear(r);

	/* "pgvalve" is the console too */
	PGconn *a2 = connect_ok(&p, "pgvalve", "admin_u", "admin_pass");
	expect_show_columns(a2, "SHOW VERSION", version_cols, ARRAY_LEN(version_cols));
	PQfinish(a2);
	PQfinish(a);
	PQfinish(c);
	pgv_stop(&p);
}
END_TEST

/* SHOW VERSION is the first line of `pgvalve --version`, which names PgBouncer 1.26.0, as the start-up log does. */
START_TEST(show_version_matches_binary)
{
	struct pgv p;
	char out[700];
	pgv_start(&p, ADMIN_CFG, std_databases(), userlist());
	snprintf(out, sizeof(out), "%s/version.out", p.dir);
	char *argv[] = { getenv("PGV_BINARY"), "--version", NULL };
	ck_assert_ptr_nonnull(argv[0]);
	ck_assert_int_eq(run_program(argv, NULL, out, 10), 0);
	char first[256];
	snprintf(first, sizeof(first), "%s", read_file_tail(out, 4000));
	first[strcspn(first, "\n")] = '\0';
	ck_assert_str_eq(first, "pgvalve 0.1.0 (PgBouncer 1.26.0 compatible)");

	PGconn *a = admin_conn(&p);
	PGresult *r = show(a, "SHOW VERSION");
	ck_assert_int_eq(PQntuples(r), 1);
	ck_assert_str_eq(PQgetvalue(r, 0, 0), first);
	PQclear(r);
	PQfinish(a);
	pgv_expect_log(&p, "process up: pgvalve 0.1.0 (PgBouncer 1.26.0 compatible)", 5);
	pgv_stop(&p);
}
END_TEST

/*
 * A known state: 3 clients of pgvtest/scram_user in transaction mode, A
 * inside a transaction (one active server), B and C idle (one idle
 * server, used by both in turn). POOLS, CLIENTS, SERVERS, DATABASES,
 * USERS, LISTS and STATE must all show exactly that.
 */
START_TEST(show_reflects_known_state)
{
	struct pgv p;
	char dbs[512];
	int pgport = pg_port_env();
	snprintf(dbs, sizeof(dbs), "%sother = host=127.0.0.1 port=%d dbname=pgvtest user=md5_user pool_size=7 "
		 "pool_mode=session\n", std_databases(), pgport);
	pgv_start(&p, TXN "default_pool_size = 4\n[users]\nmd5_user = pool_size=5 max_user_connections=7\n", dbs,
		  userlist());

	PGconn *a = admin_conn(&p);
	PGconn *ca = client_conn(&p), *cb = client_conn(&p), *cc = client_conn(&p);
	exec_ok(ca, "BEGIN");
	char pid_a[32], pid_b[32];
	snprintf(pid_a, sizeof(pid_a), "%s", query_value(ca, "SELECT pg_backend_pid()"));
	exec_ok(cb, "SET application_name = 'client_b'");
	snprintf(pid_b, sizeof(pid_b), "%s", query_value(cb, "SELECT pg_backend_pid()"));
	ck_assert_str_ne(pid_a, pid_b);
	ck_assert_str_eq(query_value(cc, "SELECT pg_backend_pid()"), pid_b);	/* the one idle server */
	wait_backends("scram_user", 2, 2000);

	/* ---- SHOW POOLS */
	PGresult *r = show(a, "SHOW POOLS");
	int row = find_row2(r, "database", DB, "user", "scram_user");
	ck_assert_int_ge(row, 0);
	expect_icell(r, row, "cl_active", 3);
	expect_icell(r, row, "cl_waiting", 0);
	expect_icell(r, row, "cl_active_cancel_req", 0);
	expect_icell(r, row, "cl_waiting_cancel_req", 0);
	expect_icell(r, row, "sv_active", 1);
	expect_icell(r, row, "sv_active_cancel", 0);
	expect_icell(r, row, "sv_being_canceled", 0);
	expect_icell(r, row, "sv_idle", 1);
	expect_icell(r, row, "sv_used", 0);
	expect_icell(r, row, "sv_tested", 0);
	expect_icell(r, row, "sv_login", 0);
	expect_icell(r, row, "maxwait", 0);
	expect_icell(r, row, "maxwait_us", 0);
	expect_cell(r, row, "pool_mode", "transaction");
	expect_cell(r, row, "load_balance_hosts", NULL);
	/* the admin pool: pgbouncer/pgbouncer, statement mode, our console in cl_active */
	int arow = find_row2(r, "database", "pgbouncer", "user", "pgbouncer");
	ck_assert_int_ge(arow, 0);
	ck_assert_int_lt(arow, row);	/* sorted by database name */
	expect_icell(r, arow, "cl_active", 1);
	expect_icell(r, arow, "sv_active", 0);
	expect_icell(r, arow, "sv_idle", 0);
	expect_cell(r, arow, "pool_mode", "statement");
	ck_assert_int_eq(PQntuples(r), 2);
	PQclear(r);

	/* ---- SHOW CLIENTS */
	r = show(a, "SHOW CLIENTS");
	ck_assert_int_eq(count_rows(r, "database", DB), 3);
	PGconn *conns[3] = { ca, cb, cc };
	const char *states[3] = { "active", "idle", "idle" };
	char ptr_a[64] = "", link_a[64] = "";
	long long ids[3];
	for (int i = 0; i < 3; i++) {
		char port[16];
		snprintf(port, sizeof(port), "%d", local_port(conns[i]));
		int k = find_row2(r, "port", port, "database", DB);
		ck_assert_msg(k >= 0, "client %d (port %s) not in SHOW CLIENTS", i, port);
		expect_cell(r, k, "type", "C");
		expect_cell(r, k, "user", "scram_user");
		expect_cell(r, k, "replication", "none");
		expect_cell(r, k, "state", states[i]);
		expect_cell(r, k, "addr", "127.0.0.1");
		expect_cell(r, k, "local_addr", "127.0.0.1");
		expect_icell(r, k, "local_port", p.port);
		expect_icell(r, k, "close_needed", 0);
		expect_cell(r, k, "tls", "");
		expect_cell(r, k, "application_name", i == 1 ? "client_b" : "");
		ck_assert_msg(strncmp(cell(r, k, "ptr"), "0x", 2) == 0, "ptr %s", cell(r, k, "ptr"));
		if (i == 0) {
			ck_assert_str_ne(cell(r, k, "link"), "");
			snprintf(ptr_a, sizeof(ptr_a), "%s", cell(r, k, "ptr"));
			snprintf(link_a, sizeof(link_a), "%s", cell(r, k, "link"));
		} else {
			expect_cell(r, k, "link", "");
		}
		ids[i] = icell(r, k, "id");
		ck_assert_int_gt(ids[i], 0);
	}
	ck_assert(ids[0] != ids[1] && ids[1] != ids[2] && ids[0] != ids[2]);
	/* the console itself: in the admin pool, idle (1.25), under its login name */
	char myport[16];
	snprintf(myport, sizeof(myport), "%d", local_port(a));
	int k = find_row(r, "port", myport);
	ck_assert_int_ge(k, 0);
	expect_cell(r, k, "database", "pgbouncer");
	expect_cell(r, k, "user", "admin_u");
	expect_cell(r, k, "state", "idle");
	ck_assert_int_eq(PQntuples(r), 4);
	PQclear(r);

	/* ---- SHOW SERVERS */
	r = show(a, "SHOW SERVERS");
	ck_assert_int_eq(PQntuples(r), 2);
	int sa = find_row(r, "remote_pid", pid_a), sb = find_row(r, "remote_pid", pid_b);
	ck_assert_msg(sa >= 0 && sb >= 0, "servers with remote_pid %s and %s not shown", pid_a, pid_b);
	for (int i = 0; i < 2; i++) {
		int s = i ? sb : sa;
		expect_cell(r, s, "type", "S");
		expect_cell(r, s, "user", "scram_user");
		expect_cell(r, s, "database", DB);
		expect_cell(r, s, "addr", "127.0.0.1");
		expect_icell(r, s, "port", pgport);
		expect_icell(r, s, "close_needed", 0);
		expect_cell(r, s, "role", "primary");	/* in_hot_standby off, reported at login */
	}
	expect_cell(r, sa, "state", "active");
	expect_cell(r, sa, "ptr", link_a);	/* linked to each other */
	expect_cell(r, sa, "link", ptr_a);
	expect_cell(r, sb, "state", "idle");
	expect_cell(r, sb, "link", "");
	PQclear(r);

	/* ---- SHOW DATABASES: sorted by name */
	r = show(a, "SHOW DATABASES");
	ck_assert_int_eq(PQntuples(r), 3);
	ck_assert_str_eq(PQgetvalue(r, 0, 0), "other");
	ck_assert_str_eq(PQgetvalue(r, 1, 0), "pgbouncer");
	ck_assert_str_eq(PQgetvalue(r, 2, 0), DB);
	row = 2;
	expect_cell(r, row, "host", "127.0.0.1");
	expect_icell(r, row, "port", pgport);
	expect_cell(r, row, "database", DB);
	expect_cell(r, row, "force_user", NULL);
	expect_icell(r, row, "pool_size", 4);
	expect_icell(r, row, "min_pool_size", 0);
	expect_icell(r, row, "reserve_pool_size", 0);
	expect_icell(r, row, "server_lifetime", 3600);
	expect_cell(r, row, "pool_mode", NULL);
	expect_cell(r, row, "load_balance_hosts", NULL);
	expect_icell(r, row, "max_connections", 0);
	expect_icell(r, row, "current_connections", 2);
	expect_icell(r, row, "max_client_connections", 0);
	expect_icell(r, row, "current_client_connections", 3);
	expect_icell(r, row, "paused", 0);
	expect_icell(r, row, "disabled", 0);
	row = 0;
	expect_cell(r, row, "force_user", "md5_user");
	expect_icell(r, row, "pool_size", 7);
	expect_cell(r, row, "pool_mode", "session");
	expect_icell(r, row, "current_connections", 0);
	expect_icell(r, row, "current_client_connections", 0);
	row = 1;	/* the admin db, as PgBouncer describes it */
	expect_cell(r, row, "host", NULL);
	expect_icell(r, row, "port", p.port);
	expect_cell(r, row, "database", "pgbouncer");
	expect_cell(r, row, "force_user", "pgbouncer");
	expect_icell(r, row, "pool_size", 2);
	expect_icell(r, row, "server_lifetime", 3600);
	expect_cell(r, row, "pool_mode", "statement");
	expect_icell(r, row, "current_connections", 0);
	expect_icell(r, row, "current_client_connections", 1);
	expect_icell(r, row, "paused", 0);
	expect_icell(r, row, "disabled", 0);
	PQclear(r);

	/* ---- SHOW USERS: auth_file, [users] and the built-in pgbouncer, sorted */
	r = show(a, "SHOW USERS");
	static const char *const users[] = { "admin_u", "md5_user", "pgbench_user", "pgbouncer", "plain_u",
					     "scram_user", "stats_u" };
	ck_assert_int_eq(PQntuples(r), (int)ARRAY_LEN(users));
	for (int i = 0; i < PQntuples(r); i++)
		ck_assert_str_eq(PQgetvalue(r, i, 0), users[i]);
	row = find_row(r, "name", "md5_user");
	expect_cell(r, row, "pool_size", "        5");	/* %9d, as PgBouncer */
	expect_cell(r, row, "reserve_pool_size", "");
	expect_cell(r, row, "pool_mode", NULL);
	expect_icell(r, row, "max_user_connections", 7);
	expect_icell(r, row, "current_connections", 0);
	expect_icell(r, row, "current_client_connections", 0);
	row = find_row(r, "name", "scram_user");
	expect_cell(r, row, "pool_size", "");
	expect_cell(r, row, "pool_mode", NULL);
	expect_icell(r, row, "max_user_connections", 0);
	expect_icell(r, row, "current_connections", 2);
	expect_icell(r, row, "current_client_connections", 3);
	PQclear(r);

	/* ---- SHOW LISTS */
	r = show(a, "SHOW LISTS");
	ck_assert_int_eq(PQntuples(r), 14);
	expect_icell(r, find_row(r, "list", "databases"), "items", 3);
	expect_icell(r, find_row(r, "list", "users"), "items", (long long)ARRAY_LEN(users));
	expect_icell(r, find_row(r, "list", "peers"), "items", 0);
	expect_icell(r, find_row(r, "list", "pools"), "items", 2);
	expect_icell(r, find_row(r, "list", "peer_pools"), "items", 0);
	expect_icell(r, find_row(r, "list", "used_clients"), "items", 4);
	expect_icell(r, find_row(r, "list", "login_clients"), "items", 0);
	expect_icell(r, find_row(r, "list", "used_servers"), "items", 2);
	expect_icell(r, find_row(r, "list", "dns_pending"), "items", 0);
	PQclear(r);

	ck_assert_str_eq(state_value(a, "active"), "yes");

	/* ---- SHOW STATS: one row per database that has a pool ("other" has none) */
	r = show(a, "SHOW STATS");
	ck_assert_int_eq(PQntuples(r), 2);
	ck_assert_str_eq(PQgetvalue(r, 0, 0), "pgbouncer");
	ck_assert_str_eq(PQgetvalue(r, 1, 0), DB);
	PQclear(r);

	/* After A commits: no active server, two idle, all three clients idle. */
	exec_ok(ca, "COMMIT");
	r = show(a, "SHOW POOLS");
	row = find_row2(r, "database", DB, "user", "scram_user");
	expect_icell(r, row, "cl_active", 3);
	expect_icell(r, row, "sv_active", 0);
	expect_icell(r, row, "sv_idle", 2);
	PQclear(r);
	r = show(a, "SHOW CLIENTS");
	ck_assert_int_eq(count_rows(r, "state", "idle"), 4);
	PQclear(r);

	PQfinish(ca);
	PQfinish(cb);
	PQfinish(cc);
	/* clients gone: the pool shows none (their closes are read at once; 2 s is slack even on a loaded machine) */
	double deadline = now_s() + 2;
	long long left = -1;
	while (now_s() < deadline) {
		r = show(a, "SHOW POOLS");
		left = icell(r, find_row2(r, "database", DB, "user", "scram_user"), "cl_active");
		PQclear(r);
		if (left == 0)
			break;
		usleep(50 * 1000);
	}
	ck_assert_int_eq(left, 0);
	PQfinish(a);
	pgv_stop(&p);
}
END_TEST

/* Several hosts: SHOW DATABASES and SHOW POOLS name the load balancing. */
START_TEST(show_multi_host_database)
{
	struct pgv p;
	char dbs[1024];
	int pgport = pg_port_env();
	snprintf(dbs, sizeof(dbs), "%slb = host=127.0.0.1,localhost port=%d dbname=pgvtest\n"
		 "lbd = host=127.0.0.1,localhost port=%d dbname=pgvtest load_balance_hosts=disable\n"
		 "lbc = host=127.0.0.1,localhost port=%d dbname=pgvtest load_balance_hosts=least-connections\n",
		 std_databases(), pgport, pgport, pgport);
	pgv_start(&p, TXN, dbs, userlist());
	PGconn *c = connect_ok(&p, "lb", "scram_user", "scram_pass");
	ck_assert_str_eq(query_value(c, "SELECT current_database()"), DB);
	PGconn *a = admin_conn(&p);
	PGresult *r = show(a, "SHOW DATABASES");
	int row = find_row(r, "name", "lb");
	ck_assert_int_ge(row, 0);
	expect_cell(r, row, "host", "127.0.0.1,localhost");
	expect_cell(r, row, "load_balance_hosts", "round-robin");
	expect_cell(r, find_row(r, "name", "lbd"), "load_balance_hosts", "disable");
	expect_cell(r, find_row(r, "name", "lbc"), "load_balance_hosts", "least-connections");
	expect_cell(r, find_row(r, "name", DB), "load_balance_hosts", NULL);
	PQclear(r);
	ck_assert_str_eq(show_value(a, "SHOW POOLS", "database", "lb", "load_balance_hosts"), "round-robin");
	PQfinish(a);
	PQfinish(c);
	pgv_stop(&p);
}
END_TEST

/* The console is exempt from max_client_conn. */
START_TEST(max_client_conn_spares_console)
{
	struct pgv p;
	pgv_start(&p, TXN "max_client_conn = 2\n", std_databases(), userlist());
	PGconn *c1 = client_conn(&p), *c2 = client_conn(&p);
	PGconn *c3 = pgv_connect(&p, DB, "scram_user", "scram_pass");
	ck_assert_int_eq(PQstatus(c3), CONNECTION_BAD);
	ck_assert_msg(strstr(PQerrorMessage(c3), "max_client_conn"), "%s", PQerrorMessage(c3));
	PQfinish(c3);
	PGconn *a = admin_conn(&p);
	ck_assert_str_eq(show_value(a, "SHOW POOLS", "database", DB, "cl_active"), "2");
	PQfinish(a);
	PQfinish(c1);
	PQfinish(c2);
	pgv_stop(&p);
}
END_TEST

/* ---------------------------------------------------------------- SHOW HELP */

static const char spec_help[] =
	"\n\tSHOW HELP|CONFIG|DATABASES|POOLS|CLIENTS|SERVERS|USERS|VERSION"
	"\n\tSHOW PEERS|PEER_POOLS"
	"\n\tSHOW SOCKETS|ACTIVE_SOCKETS|LISTS|MEM|STATE"
	"\n\tSHOW DNS_HOSTS|DNS_ZONES"
	"\n\tSHOW STATS|STATS_TOTALS|STATS_AVERAGES|TOTALS"
	"\n\tSHOW WORKERS|LISTENERS|TENANTS"
	"\n\tSET key = arg"
	"\n\tRELOAD"
	"\n\tPAUSE [<db>]"
	"\n\tRESUME [<db>]"
	"\n\tDISABLE <db>"
	"\n\tENABLE <db>"
	"\n\tRECONNECT [<db>]"
	"\n\tRECONNECT|BAN|UNBAN TENANT <id>"
	"\n\tKILL [<db>]"
	"\n\tKILL_CLIENT <client_id>"
	"\n\tSHUTDOWN"
	"\n\tSHUTDOWN WAIT_FOR_SERVERS|WAIT_FOR_CLIENTS"
	"\n\tWAIT_CLOSE [<db>]"
	"\n\tDRAIN";

/* SHOW HELP: a NOTICE "Console usage" with the command list as detail, tag SHOW, no rows. */
START_TEST(show_help_notice)
{
	struct pgv p;
	struct notice_log log;
	memset(&log, 0, sizeof(log));
	pgv_start(&p, ADMIN_CFG, std_databases(), userlist());
	PGconn *a = admin_conn(&p);
	PQsetNoticeReceiver(a, capture_notice, &log);
	PGresult *r = PQexec(a, "SHOW HELP");
	ck_assert_msg(PQresultStatus(r) == PGRES_COMMAND_OK, "SHOW HELP: %s", PQresStatus(PQresultStatus(r)));
	ck_assert_str_eq(PQcmdStatus(r), "SHOW");
	ck_assert_int_eq(PQnfields(r), 0);
	PQclear(r);
	ck_assert_int_eq(log.n, 1);
	ck_assert_str_eq(log.severity, "NOTICE");
	ck_assert_str_eq(log.sqlstate, "00000");
	ck_assert_str_eq(log.message, "Console usage");
	static const char *const lines[] = {
		"\n\tSHOW STATS|STATS_TOTALS|STATS_AVERAGES|TOTALS", "\n\tPAUSE [<db>]", "\n\tKILL [<db>]",
		"\n\tKILL_CLIENT <client_id>", "\n\tSHUTDOWN WAIT_FOR_SERVERS|WAIT_FOR_CLIENTS", "\n\tWAIT_CLOSE [<db>]",
		"\n\tSHOW WORKERS|LISTENERS|TENANTS", "\n\tDRAIN",
	};
	for (size_t i = 0; i < ARRAY_LEN(lines); i++)
		ck_assert_msg(strstr(log.detail, lines[i]), "help lacks '%s':%s", lines[i] + 2, log.detail);
	/* the console stays usable */
	ck_assert_str_eq(state_value(a, "active"), "yes");
	/* and the whole text is PgBouncer 1.26's, plus pgvalve's SHOW WORKERS, LISTENERS, TENANTS, DRAIN and TENANT verbs */
	ck_assert_msg(strcmp(log.detail, spec_help) == 0, "help text differs from PgBouncer 1.26's + pgvalve's:\n%s",
		      log.detail);
	PQfinish(a);
	pgv_stop(&p);
}
END_TEST

/* ---------------------------------------------------------------- SHOW CONFIG */

struct config_key {
	const char *key;
	const char *def;	/* NULL: SQL NULL */
	bool changeable;
};

/* PgBouncer 1.25's [pgbouncer] keys in SHOW CONFIG order, with their defaults. */
static const struct config_key spec_config[] = {
	{ "admin_users", "", true },
	{ "application_name_add_host", "0", true },
	{ "auth_dbname", NULL, true },
	{ "auth_file", NULL, true },
	{ "auth_hba_file", "", true },
	{ "auth_ident_file", NULL, true },
	{ "auth_krb_server_keyfile", "", true },	/* pgvalve extension (gss), in alphabetical place */
	{ "auth_ldap_max_concurrent", "16", true },	/* pgvalve extensions (LDAP checks) */
	{ "auth_ldap_options", NULL, true },
	{ "auth_ldap_timeout", "10", true },
	{ "auth_query", "SELECT rolname, CASE WHEN rolvaliduntil < now() THEN NULL ELSE rolpassword END FROM "
			"pg_authid WHERE rolname=$1 AND rolcanlogin", true },
	{ "auth_type", "md5", true },
	{ "auth_user", NULL, true },
	{ "autodb_idle_timeout", "3600", true },
	{ "cancel_advertise_addr", "", true },	/* pgvalve extensions (long cancel keys), in alphabetical place */
	{ "cancel_advertise_port", "0", true },
	{ "cancel_key_secret", "", true },
	{ "cancel_wait_timeout", "10", true },
	{ "client_idle_timeout", "0", true },
	{ "client_login_timeout", "60", true },
	{ "client_tls13_ciphers", NULL, true },
	{ "client_tls_ca_file", "", true },
	{ "client_tls_cert_file", "", true },
	{ "client_tls_ciphers", "default", true },
	{ "client_tls_dheparams", "auto", true },
	{ "client_tls_ecdhcurve", "auto", true },
	{ "client_tls_key_file", "", true },
	{ "client_tls_protocols", "secure", true },
	{ "client_tls_sslmode", "disable", true },
	{ "conffile", NULL, true },
	{ "default_pool_size", "20", true },
	{ "disable_pqexec", "0", false },
	{ "dns_max_ttl", "15", true },
	{ "dns_nxdomain_ttl", "15", true },
	{ "dns_zone_check_period", "0", true },
	{ "drain_timeout", "0", true },	/* pgvalve extension (drain), in alphabetical place */
	{ "idle_transaction_timeout", "0", true },
	{ "ignore_startup_parameters", "", true },
	{ "job_name", "pgbouncer", false },
	{ "krb_srvname", "postgres", true },	/* pgvalve extension (gss), in alphabetical place */
	{ "listen_addr", "", false },
	{ "listen_backlog", "4096", false },	/* deliberately larger than PgBouncer's 128 */
	{ "listen_port", "6432", false },
	{ "load_balance_functions_refresh", "300", true },	/* pgvalve extension (the read balancer's pg_proc cache) */
	{ "load_balance_hosts", "round-robin", true },	/* pgvalve extension (roles): [databases] default */
	{ "load_balance_reads", "off", true },	/* pgvalve extension (the read balancer): [databases] default */
	{ "log_connections", "1", true },
	{ "log_disconnections", "1", true },
	{ "log_pooler_errors", "1", true },
	{ "log_stats", "1", true },
	{ "logfile", "", true },
	{ "login_notify_message", "", true },	/* PgBouncer 1.26 */
	{ "max_client_conn", "100", true },
	{ "max_db_client_connections", "0", true },
	{ "max_db_connections", "0", true },
	{ "max_packet_size", "2147483647", true },
	{ "max_prepared_statements", "200", true },
	{ "max_user_client_connections", "0", true },
	{ "max_user_connections", "0", true },
	/* pgvalve extension (metrics endpoint), in alphabetical place */
	{ "metrics_auth_token", "", true },
	{ "metrics_listen_addr", "127.0.0.1", true },
	{ "metrics_port", "0", true },
	{ "metrics_tls", "0", true },
	{ "min_pool_size", "0", true },
	{ "notify_buffer_limit", "1048576", true },	/* pgvalve extension (notify), in alphabetical place */
	{ "notify_support", "1", false },	/* pgvalve extension (notify), in alphabetical place */
	{ "peer_id", "0", true },
	{ "peers_dns", "", true },	/* pgvalve extension (3.0 cancels to a DNS name's instances) */
	{ "peers_dns_port", "0", true },
	{ "pidfile", "", false },
	{ "pkt_buf", "4096", false },
	{ "pool_idle_timeout", "0", true },	/* PgBouncer 1.26 */
	{ "pool_mode", "session", true },
	{ "query_timeout", "0", true },
	{ "query_wait_notify", "5", true },
	{ "query_wait_timeout", "120", true },
	{ "reserve_pool_size", "0", true },
	{ "reserve_pool_timeout", "5", true },
	{ "resolv_conf", "", false },
	{ "sbuf_loopcnt", "5", true },
	{ "scram_iterations", "4096", true },
	{ "server_check_delay", "30", true },
	{ "server_check_query", "<empty>", true },
	{ "server_connect_timeout", "15", true },
	{ "server_fast_close", "0", true },
	{ "server_idle_timeout", "600", true },
	{ "server_lifetime", "3600", true },
	{ "server_login_retry", "15", true },
	{ "server_reset_query", "DISCARD ALL", true },
	{ "server_reset_query_always", "0", true },
	{ "server_role_check_period", "0", true },	/* pgvalve extension (roles), in alphabetical place */
	{ "server_round_robin", "0", true },
	{ "server_tls13_ciphers", NULL, true },
	{ "server_tls_ca_file", "", true },
	{ "server_tls_cert_file", "", true },
	{ "server_tls_ciphers", "default", true },
	{ "server_tls_key_file", "", true },
	{ "server_tls_protocols", "secure", true },
	{ "server_tls_sslmode", "prefer", true },
	{ "shutdown_drain", "0", true },	/* pgvalve extension (drain), in alphabetical place */
	{ "so_reuseport", "0", false },
	{ "stats_period", "60", true },
	{ "stats_users", "", true },
	{ "suspend_timeout", "10", true },
	{ "syslog", "0", true },
	{ "syslog_facility", "daemon", true },
	{ "syslog_ident", "pgbouncer", true },
	{ "target_session_attrs", "any", true },	/* pgvalve extension (roles): [databases] default */
	{ "tcp_defer_accept", "1", true },
	{ "tcp_keepalive", "1", true },
	{ "tcp_keepcnt", "0", true },
	{ "tcp_keepidle", "0", true },
	{ "tcp_keepintvl", "0", true },
	{ "tcp_socket_buffer", "0", true },
	{ "tcp_user_timeout", "0", true },
	{ "tenant_cache_ttl", "60", true },	/* pgvalve extension (tenant.h), in alphabetical place */
	{ "tenant_from", "", true },
	{ "tenant_query", "", true },
	{ "tenant_source", "", true },
	{ "track_client_set", "1", false },	/* pgvalve extension, in alphabetical place */
	{ "track_extra_parameters", "IntervalStyle", false },
	{ "transaction_timeout", "0", true },
	{ "unix_socket_dir", "/tmp", false },
	{ "unix_socket_group", "", false },
	{ "unix_socket_mode", "0777", false },
	{ "user", NULL, false },
	{ "verbose", NULL, true },
	/* pgvalve's own extensions, after PgBouncer's keys */
	{ "workers", "1", false },
};

/* SHOW CONFIG: every 1.25 key in order, changeable as PgBouncer, values reflecting the config. */
START_TEST(show_config_keys_and_values)
{
	struct pgv p;
	char authfile[700];
	pgv_start(&p, TXN "default_pool_size = 4\nserver_lifetime = 90\n", std_databases(), userlist());
	snprintf(authfile, sizeof(authfile), "%s/userlist.txt", p.dir);
	PGconn *a = admin_conn(&p);
	PGresult *r = show(a, "SHOW CONFIG");

	char diff[4096] = "";
	size_t used = 0;
	int n = PQntuples(r);
	for (int i = 0; i < n || i < (int)ARRAY_LEN(spec_config); i++) {
		const char *got = i < n ? PQgetvalue(r, i, 0) : "(missing)";
		const char *want = i < (int)ARRAY_LEN(spec_config) ? spec_config[i].key : "(none)";
		if (strcmp(got, want) != 0) {
			if (used < sizeof(diff) - 100)
				used += (size_t)snprintf(diff + used, sizeof(diff) - used, " row %d: %s, expected %s;",
							 i, got, want);
			continue;
		}
		const char *ch = PQgetvalue(r, i, 3);
		if (strcmp(ch, spec_config[i].changeable ? "yes" : "no") != 0 && used < sizeof(diff) - 100)
			used += (size_t)snprintf(diff + used, sizeof(diff) - used, " %s changeable=%s;", got, ch);
	}
	ck_assert_msg(diff[0] == '\0', "SHOW CONFIG keys differ from PgBouncer 1.25:%s", diff);

	/* values: what the config said, in PgBouncer's formats */
	int row = find_row(r, "key", "default_pool_size");
	expect_cell(r, row, "value", "4");
	expect_cell(r, row, "default", "20");
	expect_cell(r, row, "changeable", "yes");
	row = find_row(r, "key", "server_lifetime");
	expect_cell(r, row, "value", "90");
	expect_cell(r, row, "default", "3600");
	row = find_row(r, "key", "listen_port");
	expect_icell(r, row, "value", p.port);
	expect_cell(r, row, "default", "6432");
	expect_cell(r, row, "changeable", "no");
	row = find_row(r, "key", "pool_mode");
	expect_cell(r, row, "value", "transaction");
	expect_cell(r, row, "default", "session");
	expect_cell(r, find_row(r, "key", "admin_users"), "value", "admin_u");
	expect_cell(r, find_row(r, "key", "stats_users"), "value", "stats_u");
	expect_cell(r, find_row(r, "key", "auth_type"), "value", "md5");
	expect_cell(r, find_row(r, "key", "auth_file"), "value", authfile);
	expect_cell(r, find_row(r, "key", "conffile"), "value", p.ini);
	expect_cell(r, find_row(r, "key", "logfile"), "value", p.log);
	expect_cell(r, find_row(r, "key", "listen_addr"), "value", "127.0.0.1");
	expect_cell(r, find_row(r, "key", "log_connections"), "value", "1");
	expect_cell(r, find_row(r, "key", "max_packet_size"), "value", "2147483647");
	expect_cell(r, find_row(r, "key", "server_check_query"), "value", "<empty>");
	row = find_row(r, "key", "unix_socket_mode");
	expect_cell(r, row, "value", "511");	/* %d of 0777 */
	expect_cell(r, row, "default", "0777");
	PQclear(r);
	PQfinish(a);
	pgv_stop(&p);
}
END_TEST

/* SHOW CONFIG's default column is PgBouncer's table, NULLs included; unset NULL strings show NULL. */
START_TEST(spec_show_config_defaults)
{
	struct pgv p;
	pgv_start(&p, ADMIN_CFG, std_databases(), userlist());
	PGconn *a = admin_conn(&p);
	PGresult *r = show(a, "SHOW CONFIG");
	char diff[4096] = "";
	size_t used = 0;
	for (size_t i = 0; i < ARRAY_LEN(spec_config); i++) {
		int row = find_row(r, "key", spec_config[i].key);
		if (row < 0)
			continue;	/* reported by show_config_keys_and_values */
		const char *d = cell(r, row, "default"), *want = spec_config[i].def;
		bool same = want ? d && strcmp(d, want) == 0 : d == NULL;
		if (!same && used < sizeof(diff) - 200)
			used += (size_t)snprintf(diff + used, sizeof(diff) - used, " %s default '%s' (expected %s%s%s);",
						 spec_config[i].key, d ? d : "NULL", want ? "'" : "",
						 want ? want : "NULL", want ? "'" : "");
	}
	static const char *const null_values[] = { "auth_dbname", "auth_ident_file", "auth_ldap_options", "auth_user",
						   "client_tls13_ciphers", "server_tls13_ciphers" };
	for (size_t i = 0; i < ARRAY_LEN(null_values); i++) {
		int row = find_row(r, "key", null_values[i]);
		if (row >= 0 && cell(r, row, "value") != NULL && used < sizeof(diff) - 200)
			used += (size_t)snprintf(diff + used, sizeof(diff) - used, " %s value '%s' (expected NULL);",
						 null_values[i], cell(r, row, "value"));
	}
	PQclear(r);
	ck_assert_msg(diff[0] == '\0', "SHOW CONFIG differs from PgBouncer 1.25:%s", diff);
	PQfinish(a);
	pgv_stop(&p);
}
END_TEST

/* ================================================================ statistics */

enum { C_ASSIGN, C_XACT, C_QUERY, C_RECV, C_SENT, C_XACT_TIME, C_QUERY_TIME, C_WAIT_TIME, C_COUNT };

struct counters {
	unsigned long long v[C_COUNT];
};

static void totals_of(PGconn *a, const char *db, struct counters *out)
{
	static const char *const cols[] = { "server_assignment_count", "xact_count", "query_count",
					    "bytes_received", "bytes_sent", "xact_time", "query_time", "wait_time" };
	PGresult *r = show(a, "SHOW STATS_TOTALS");
	int row = find_row(r, "database", db);
	ck_assert_msg(row >= 0, "SHOW STATS_TOTALS has no row for %s", db);
	for (int i = 0; i < C_COUNT; i++)
		out->v[i] = strtoull(cell(r, row, cols[i]), NULL, 10);
	PQclear(r);
}

#define DELTA(b, a, i) ((long long)((a).v[i] - (b).v[i]))

static void expect_delta(const struct counters *before, const struct counters *after, int i, long long want,
			 const char *what)
{
	long long got = (long long)(after->v[i] - before->v[i]);
	ck_assert_msg(got == want, "%s grew by %lld, expected %lld", what, got, want);
}

/*
 * Counters move by what PgBouncer counts: one query per request cycle
 * (up to a ReadyForQuery with nothing outstanding), one transaction per
 * cycle run that ends idle, one assignment per server link, message bytes
 * each way; times in microseconds.
 */
START_TEST(stats_count_known_work)
{
	struct pgv p;
	pgv_start(&p, TXN "default_pool_size = 1\n", std_databases(), userlist());
	PGconn *a = admin_conn(&p);
	PGconn *c = client_conn(&p);
	exec_ok(c, "SELECT 1");	/* warm up: server login and parameter sync are not measured */
	struct counters s0, s1, s2, s3, s4;
	totals_of(a, DB, &s0);

	/* 10 autocommit SELECT 1: Query 'Q'+len+"SELECT 1\0" = 14 bytes in; T 34 + D 12 + C 14 + Z 6 = 66 out */
	for (int i = 0; i < 10; i++)
		ck_assert_str_eq(query_value(c, "SELECT 1"), "1");
	totals_of(a, DB, &s1);
	expect_delta(&s0, &s1, C_XACT, 10, "xact_count");
	expect_delta(&s0, &s1, C_QUERY, 10, "query_count");
	expect_delta(&s0, &s1, C_ASSIGN, 10, "server_assignment_count");
	expect_delta(&s0, &s1, C_RECV, 10 * 14, "bytes_received");
	expect_delta(&s0, &s1, C_SENT, 10 * 66, "bytes_sent");

	/*
	 * 2 explicit transactions of 3 statements, each statement its own round
	 * trip: BEGIN, 3 x SELECT 1, COMMIT = 5 queries, 1 transaction, 1 assignment.
	 * In: BEGIN 11 + 3 x 14 + COMMIT 12 = 65; out: BEGIN 11+6 + 3 x 66 + COMMIT 12+6 = 233.
	 */
	for (int t = 0; t < 2; t++) {
		exec_ok(c, "BEGIN");
		for (int i = 0; i < 3; i++)
			ck_assert_str_eq(query_value(c, "SELECT 1"), "1");
		exec_ok(c, "COMMIT");
	}
	totals_of(a, DB, &s2);
	expect_delta(&s1, &s2, C_XACT, 2, "xact_count");
	expect_delta(&s1, &s2, C_QUERY, 10, "query_count");
	expect_delta(&s1, &s2, C_ASSIGN, 2, "server_assignment_count");
	expect_delta(&s1, &s2, C_RECV, 2 * 65, "bytes_received");
	expect_delta(&s1, &s2, C_SENT, 2 * 233, "bytes_sent");

	/* one multi-statement Query is one request cycle: 1 query, 1 transaction */
	exec_ok(c, "SELECT 1; SELECT 2; SELECT 3");
	/* a 0.3 s query: query and xact time grow by about that (stats_times_are_microseconds is exact) */
	ck_assert_str_eq(query_value(c, "SELECT 'slept' FROM pg_sleep(0.3)"), "slept");
	totals_of(a, DB, &s3);
	expect_delta(&s2, &s3, C_XACT, 2, "xact_count");
	expect_delta(&s2, &s3, C_QUERY, 2, "query_count");
	ck_assert_msg(DELTA(s2, s3, C_QUERY_TIME) >= 290000 && DELTA(s2, s3, C_QUERY_TIME) < 2000000,
		      "query_time grew by %lld us", DELTA(s2, s3, C_QUERY_TIME));
	ck_assert_msg(DELTA(s2, s3, C_XACT_TIME) >= 290000 && DELTA(s2, s3, C_XACT_TIME) < 2000000,
		      "xact_time grew by %lld us", DELTA(s2, s3, C_XACT_TIME));
	ck_assert_int_eq(DELTA(s2, s3, C_WAIT_TIME), 0);

	/*
	 * wait_time: c queues 0.8 s behind a transaction holding the only
	 * server (the bounds below leave pgvalve 0.45 s to read the query).
	 */
	PGconn *h = client_conn(&p);
	exec_ok(h, "BEGIN");
	send_query(c, "SELECT 'queued'");
	usleep(800 * 1000);
	PGresult *r = show(a, "SHOW POOLS");
	int row = find_row2(r, "database", DB, "user", "scram_user");
	expect_icell(r, row, "cl_waiting", 1);
	long long maxwait = icell(r, row, "maxwait") * 1000000 + icell(r, row, "maxwait_us");
	ck_assert_msg(maxwait >= 300000 && maxwait < 5000000, "maxwait %lld us", maxwait);
	PQclear(r);
	exec_ok(h, "COMMIT");
	expect_async_value(c, 3000, "queued query", "queued");
	totals_of(a, DB, &s4);
	ck_assert_msg(DELTA(s3, s4, C_WAIT_TIME) >= 350000, "wait_time grew by %lld us", DELTA(s3, s4, C_WAIT_TIME));
	expect_delta(&s3, &s4, C_ASSIGN, 2, "server_assignment_count");

	/* SHOW STATS carries the same totals under total_* names */
	r = show(a, "SHOW STATS");
	row = find_row(r, "database", DB);
	ck_assert_int_ge(row, 0);
	ck_assert_uint_eq(strtoull(cell(r, row, "total_xact_count"), NULL, 10), s4.v[C_XACT]);
	ck_assert_uint_eq(strtoull(cell(r, row, "total_query_count"), NULL, 10), s4.v[C_QUERY]);
	ck_assert_uint_eq(strtoull(cell(r, row, "total_received"), NULL, 10), s4.v[C_RECV]);
	ck_assert_uint_eq(strtoull(cell(r, row, "total_sent"), NULL, 10), s4.v[C_SENT]);
	/* averages over a window of 1..2 periods since start: some transactions per second, real times */
	ck_assert_int_gt(icell(r, row, "avg_xact_count"), 0);
	ck_assert_int_gt(icell(r, row, "avg_query_time"), 0);
	ck_assert_int_gt(icell(r, row, "avg_wait_time"), 0);
	PQclear(r);
	r = show(a, "SHOW STATS_AVERAGES");
	row = find_row(r, "database", DB);
	ck_assert_int_gt(icell(r, row, "xact_count"), 0);
	ck_assert_int_gt(icell(r, row, "bytes_received"), 0);
	PQclear(r);

	/* Each console connection counts one query and one transaction, on its first command. */
	struct counters adm;
	totals_of(a, "pgbouncer", &adm);
	ck_assert_uint_eq(adm.v[C_XACT], 1);
	ck_assert_uint_eq(adm.v[C_QUERY], 1);
	ck_assert_uint_eq(adm.v[C_RECV], 0);
	PGconn *st = stats_conn(&p);
	ck_assert_str_eq(state_value(st, "active"), "yes");
	ck_assert_str_eq(state_value(st, "paused"), "no");
	PQfinish(st);
	totals_of(a, "pgbouncer", &adm);
	ck_assert_uint_eq(adm.v[C_XACT], 2);
	ck_assert_uint_eq(adm.v[C_QUERY], 2);

	/* SHOW TOTALS sums every database's totals */
	r = show(a, "SHOW TOTALS");
	unsigned long long tx = strtoull(cell(r, find_row(r, "name", "total_xact_count"), "value"), NULL, 10);
	unsigned long long tb = strtoull(cell(r, find_row(r, "name", "total_client_bytes"), "value"), NULL, 10);
	PQclear(r);
	ck_assert_uint_eq(tx, s4.v[C_XACT] + adm.v[C_XACT]);
	ck_assert_uint_eq(tb, s4.v[C_RECV]);

	PQfinish(h);
	PQfinish(c);
	PQfinish(a);
	pgv_stop(&p);
}
END_TEST

/*
 * Times are microseconds of the actual duration: a sub-millisecond query
 * adds more than 0 and no more than the client's own round trip; a 0.3 s
 * query adds at least 0.3 s.
 */
START_TEST(stats_times_are_microseconds)
{
	struct pgv p;
	pgv_start(&p, TXN "default_pool_size = 1\n", std_databases(), userlist());
	PGconn *a = admin_conn(&p);
	PGconn *c = client_conn(&p);
	exec_ok(c, "SELECT 1");
	struct counters s0, s1, s2;
	double t0;
	long long elapsed_us;
	/* one query at a time, each measured against its own round trip */
	for (int i = 0; i < 10; i++) {
		totals_of(a, DB, &s0);
		t0 = now_s();
		ck_assert_str_eq(query_value(c, "SELECT 1"), "1");
		elapsed_us = (long long)((now_s() - t0) * 1e6);
		totals_of(a, DB, &s1);
		ck_assert_msg(DELTA(s0, s1, C_QUERY_TIME) > 0 && DELTA(s0, s1, C_QUERY_TIME) <= elapsed_us,
			      "query %d: query_time grew by %lld us for a query the client saw take %lld us", i,
			      DELTA(s0, s1, C_QUERY_TIME), elapsed_us);
		ck_assert_msg(DELTA(s0, s1, C_XACT_TIME) > 0 && DELTA(s0, s1, C_XACT_TIME) <= elapsed_us,
			      "query %d: xact_time grew by %lld us for a transaction the client saw take %lld us", i,
			      DELTA(s0, s1, C_XACT_TIME), elapsed_us);
	}
	t0 = now_s();
	ck_assert_str_eq(query_value(c, "SELECT 'slept' FROM pg_sleep(0.3)"), "slept");
	elapsed_us = (long long)((now_s() - t0) * 1e6);
	totals_of(a, DB, &s2);
	ck_assert_msg(DELTA(s1, s2, C_QUERY_TIME) >= 300000 && DELTA(s1, s2, C_QUERY_TIME) <= elapsed_us,
		      "query_time grew by %lld us for a query of 0.3 s the client saw take %lld us",
		      DELTA(s1, s2, C_QUERY_TIME), elapsed_us);
	PQfinish(c);
	PQfinish(a);
	pgv_stop(&p);
}
END_TEST

/* log_stats (pgvalve): one line per database and stats_period, with that period's rates. */
START_TEST(log_stats_per_database)
{
	struct pgv p;
	pgv_start(&p, TXN "stats_period = 1\n", std_databases(), userlist());
	PGconn *c = client_conn(&p);
	/* the first line comes at the end of the first 1 s period; 3.5 s leaves a loaded machine 2.5 s of slack */
	double deadline = now_s() + 3.5;
	bool seen = false;
	while (!seen && now_s() < deadline) {
		ck_assert_str_eq(query_value(c, "SELECT 1"), "1");
		usleep(20 * 1000);
		seen = pgv_log_contains(&p, "[pgvtest] stats: ");
	}
	ck_assert_msg(seen, "no [pgvtest] stats line\n%s", pgv_log_tail(&p, 1500));
	/* a period with traffic: some transactions per second, not zero */
	const char *log = read_file_tail(p.log, 8000);
	const char *line = strstr(log, "[pgvtest] stats: ");
	ck_assert_ptr_nonnull(line);
	ck_assert_msg(strstr(line, " xacts/s, ") && strstr(line, " queries/s, ") && strstr(line, " B/s, out ") &&
		      strstr(line, " us, wait "), "%s", line);
	ck_assert_msg(strtoll(line + strlen("[pgvtest] stats: "), NULL, 10) > 0, "no traffic in: %.200s", line);
	ck_assert_msg(!pgv_log_contains(&p, "[pgbouncer] stats: "), "the console got a stats line");
	PQfinish(c);
	pgv_stop(&p);
}
END_TEST

/* ================================================================ access */

/* stats_users may look but not touch; the fake SET is theirs too. */
START_TEST(stats_user_can_show_not_control)
{
	struct pgv p;
	pgv_start(&p, TXN, std_databases(), userlist());
	PGconn *c = client_conn(&p);
	exec_ok(c, "SELECT 1");
	PGconn *s = stats_conn(&p);
	static const char *const shows[] = { "SHOW POOLS", "SHOW STATS", "SHOW CLIENTS", "SHOW SERVERS",
					     "SHOW CONFIG", "SHOW DATABASES", "SHOW USERS", "SHOW LISTS",
					     "SHOW TOTALS", "SHOW VERSION", "SHOW STATE" };
	for (size_t i = 0; i < ARRAY_LEN(shows); i++)
		PQclear(show(s, shows[i]));
	static const char *const controls[] = { "PAUSE", "PAUSE pgvtest", "RESUME", "DISABLE pgvtest",
						"ENABLE pgvtest", "RECONNECT", "KILL pgvtest", "KILL", "WAIT_CLOSE",
						"KILL_CLIENT 1", "RELOAD", "SET default_pool_size = 5", "SHUTDOWN",
						"SHUTDOWN WAIT_FOR_CLIENTS" };
	for (size_t i = 0; i < ARRAY_LEN(controls); i++)
		admin_err(s, controls[i], "08P01", "admin access needed");
	/* argument syntax is checked before rights */
	admin_invalid(s, "RELOAD now");
	admin_invalid(s, "SHUTDOWN NOW");
	/* the fake SET of a driver parameter is allowed */
	admin_ok(s, "SET client_encoding = 'UTF8'", "SET");
	/* nothing happened */
	ck_assert(pgv_running(&p));
	ck_assert_str_eq(state_value(s, "active"), "yes");
	ck_assert_str_eq(config_value(s, "default_pool_size"), "20");
	ck_assert_str_eq(query_value(c, "SELECT 'still served'"), "still served");
	ck_assert_str_eq(show_value(s, "SHOW DATABASES", "name", DB, "disabled"), "0");
	PQfinish(s);
	PQfinish(c);
	pgv_stop(&p);
}
END_TEST

/* Who reaches the console: admin and stats users; a known plain user is refused before any password. */
START_TEST(console_login_rules)
{
	struct pgv p;
	struct raw_error err;
	pgv_start(&p, ADMIN_CFG, std_databases(), userlist());

	/* plain_u is in auth_file but in neither list: FATAL "not allowed" (pgvalve: SQLSTATE 28000) */
	ck_assert_int_eq(raw_login(p.port, "pgbouncer", "plain_u", "plain_pass", &err), -1);
	ck_assert_str_eq(err.severity, "FATAL");
	ck_assert_str_eq(err.sqlstate, "28000");
	ck_assert_str_eq(err.message, "not allowed");
	PGconn *c = pgv_connect(&p, "pgvalve", "plain_u", "plain_pass");
	ck_assert_int_eq(PQstatus(c), CONNECTION_BAD);
	ck_assert_msg(strstr(PQerrorMessage(c), "not allowed"), "%s", PQerrorMessage(c));
	PQfinish(c);
	/* ...even with a wrong password: refused before authentication */
	ck_assert_int_eq(raw_login(p.port, "pgbouncer", "plain_u", "wrong", &err), -1);
	ck_assert_str_eq(err.message, "not allowed");
	/* scram_user can use the pooler but not the console */
	ck_assert_int_eq(raw_login(p.port, "pgbouncer", "scram_user", "scram_pass", &err), -1);
	ck_assert_str_eq(err.message, "not allowed");
	ck_assert_int_eq(raw_login(p.port, DB, "scram_user", "scram_pass", &err), 0);

	/* an unknown user fails authentication; a wrong admin password too */
	ck_assert_int_eq(raw_login(p.port, "pgbouncer", "nobody_u", "x", &err), -1);
	ck_assert_msg(strstr(err.message, "password authentication failed"), "%s", err.message);
	ck_assert_int_eq(raw_login(p.port, "pgbouncer", "admin_u", "wrong", &err), -1);
	ck_assert_msg(strstr(err.message, "password authentication failed"), "%s", err.message);

	/* the right ones get in, by either name of the console */
	ck_assert_int_eq(raw_login(p.port, "pgbouncer", "admin_u", "admin_pass", &err), 0);
	ck_assert_int_eq(raw_login(p.port, "pgvalve", "admin_u", "admin_pass", &err), 0);
	ck_assert_int_eq(raw_login(p.port, "pgbouncer", "stats_u", "stats_pass", &err), 0);
	ck_assert(pgv_log_contains(&p, "not allowed"));
	pgv_stop(&p);
}
END_TEST

/* Unknown commands and syntax errors: ErrorResponse 08P01 with PgBouncer's text; the console lives on. */
START_TEST(invalid_commands_keep_console)
{
	struct pgv p;
	pgv_start(&p, ADMIN_CFG, std_databases(), userlist());
	PGconn *a = admin_conn(&p);
	static const char *const bad[] = {
		"SHOW FOO", "show foo", "bogus", "FROBNICATE pgvtest", "SHOW", "SHOW POOLS; SHOW STATS", "select 1",
		"SHOW prepared_statements", "PAUSE a b", "RELOAD x", "SUSPEND_ALL", "SHOW POOLS extra",
		"RESUME ti-ny", "SET server_lifetime = 1.5", "SET default_pool_size", "SHOW 'pools'", "",
		"SHUTDOWN NOW",
	};
	for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
		admin_invalid(a, bad[i]);
		ck_assert_str_eq(show_value(a, "SHOW STATE", "key", "active", "value"), "yes");
	}
	/* too long: command below 16 bytes, argument below 64 */
	admin_err(a, "verylongcommandname", "08P01", "bad arguments");
	admin_err(a, "PAUSE aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "08P01",
		  "bad arguments");
	/* unknown names in control commands */
	admin_err(a, "PAUSE nosuchdb", "08P01", "no such database: nosuchdb");
	admin_err(a, "RESUME nosuchdb", "08P01", "no such database: nosuchdb");
	admin_err(a, "RECONNECT nosuchdb", "08P01", "no such database: nosuchdb");
	admin_err(a, "DISABLE", "08P01", "a database is required");
	admin_err(a, "ENABLE", "08P01", "a database is required");
	admin_err(a, "DISABLE nosuchdb", "08P01", "no such database: nosuchdb");
	admin_err(a, "KILL nosuchdb", "08P01", "no such database: nosuchdb");
	admin_err(a, "WAIT_CLOSE nosuchdb", "08P01", "no such database: nosuchdb");
	admin_err(a, "PAUSE pgbouncer", "08P01", "cannot pause admin db: pgbouncer");
	admin_err(a, "DISABLE pgbouncer", "08P01", "cannot disable admin db: pgbouncer");
	admin_err(a, "ENABLE pgbouncer", "08P01", "cannot enable admin db: pgbouncer");
	admin_err(a, "KILL pgbouncer", "08P01", "cannot kill admin db: pgbouncer");
	admin_err(a, "RECONNECT pgbouncer", "08P01", "cannot reconnect admin db: pgbouncer");
	admin_err(a, "WAIT_CLOSE pgbouncer", "08P01", "cannot wait in admin db: pgbouncer");
	admin_err(a, "RESUME", "08P01", "pooler is not paused/suspended");
	admin_err(a, "RESUME pgvtest", "08P01", "database pgvtest is not paused");
	/* quoted names are unquoted */
	admin_err(a, "PAUSE \"no\"\"such\"", "08P01", "no such database: no\"such");
	ck_assert_str_eq(query_value(a, "SHOW VERSION"), "pgvalve 0.1.0 (PgBouncer 1.26.0 compatible)");
	ck_assert(pgv_log_contains(&p, "invalid command 'bogus', use SHOW HELP;"));
	PQfinish(a);
	pgv_stop(&p);
}
END_TEST

/* The extended protocol on the console: a clear error at once, then the connection is closed. */
START_TEST(extended_protocol_rejected)
{
	struct pgv p;
	pgv_start(&p, ADMIN_CFG, std_databases(), userlist());
	PGconn *a = admin_conn(&p);
	ck_assert_int_eq(PQsendQueryParams(a, "SHOW VERSION", 0, NULL, NULL, NULL, NULL, 0), 1);
	PGresult *r = result_within(a, 5000, "PQsendQueryParams on the console");
	check_error(r, "extended query", "08P01", "extended query protocol not supported by admin console");
	PQclear(r);
	r = PQexec(a, "SHOW VERSION");
	ck_assert_int_ne(PQresultStatus(r), PGRES_TUPLES_OK);
	PQclear(r);
	ck_assert_int_eq(PQstatus(a), CONNECTION_BAD);
	PQfinish(a);

	/* PQprepare alone: the same */
	a = admin_conn(&p);
	ck_assert_int_eq(PQsendPrepare(a, "s1", "SHOW POOLS", 0, NULL), 1);
	r = result_within(a, 5000, "PQsendPrepare on the console");
	check_error(r, "prepare", "08P01", "extended query protocol not supported by admin console");
	PQclear(r);
	PQfinish(a);

	/* Any other message type: its decimal byte value, then FATAL "bad packet" and EOF. */
	struct raw_error err;
	int fd = -1;
	ck_assert_int_eq(raw_login_ex(p.port, "pgbouncer", "admin_u", "admin_pass", NULL, &err, &fd), 0);
	ck_assert(raw_send(fd, "S\0\0\0\4", 5));
	unsigned char body[4096];
	char type = 0;
	int len = raw_next(fd, &type, body, sizeof(body), 3000);
	ck_assert_msg(len > 0 && type == 'E', "expected an ErrorResponse, got '%c' (%d)", type, len);
	ck_assert_str_eq(error_field(body, len, 'S'), "ERROR");
	ck_assert_str_eq(error_field(body, len, 'C'), "08P01");
	ck_assert_str_eq(error_field(body, len, 'M'), "unsupported packet type for admin console: 83");
	len = raw_next(fd, &type, body, sizeof(body), 3000);
	ck_assert_msg(len == 1 && type == 'Z', "expected ReadyForQuery, got '%c'", type);
	len = raw_next(fd, &type, body, sizeof(body), 3000);
	ck_assert_msg(len > 0 && type == 'E', "expected the FATAL, got '%c' (%d)", type, len);
	ck_assert_str_eq(error_field(body, len, 'S'), "FATAL");
	ck_assert_str_eq(error_field(body, len, 'M'), "bad packet");
	ck_assert(raw_wait_closed(fd, 3000));
	close(fd);

	/* still serving consoles */
	a = admin_conn(&p);
	ck_assert_str_eq(state_value(a, "active"), "yes");
	PQfinish(a);
	pgv_stop(&p);
}
END_TEST

/* ================================================================ single spec points */

/* The console's welcome: PgBouncer's fixed ParameterStatus values. */
START_TEST(spec_console_welcome)
{
	struct pgv p;
	pgv_start(&p, ADMIN_CFG, std_databases(), userlist());
	PGconn *a = admin_conn(&p);
	const char *v = PQparameterStatus(a, "server_version");
	ck_assert_msg(v && strncmp(v, "1.26.0/", 7) == 0, "server_version %s", v ? v : "(none)");
	static const char *const want[][2] = {
		{ "client_encoding", "UTF8" }, { "server_encoding", "UTF8" }, { "standard_conforming_strings", "on" },
		{ "DateStyle", "ISO" }, { "TimeZone", "GMT" }, { "is_superuser", "on" },
	};
	char diff[1024] = "";
	size_t used = 0;
	for (size_t i = 0; i < ARRAY_LEN(want); i++) {
		v = PQparameterStatus(a, want[i][0]);
		if ((!v || strcmp(v, want[i][1]) != 0) && used < sizeof(diff) - 100)
			used += (size_t)snprintf(diff + used, sizeof(diff) - used, " %s=%s (expected %s);", want[i][0],
						 v ? v : "(none)", want[i][1]);
	}
	ck_assert_msg(diff[0] == '\0', "console welcome differs from PgBouncer 1.25:%s", diff);
	PQfinish(a);
	pgv_stop(&p);
}
END_TEST

static Suite *admin_show_suite(void)
{
	Suite *s = suite_create("admin_show");
	TCase *tc;

	tc = pgv_tcase_create("show", 30);
	tcase_add_test(tc, show_columns_and_types);
	tcase_add_test(tc, show_version_matches_binary);
	tcase_add_test(tc, show_reflects_known_state);
	tcase_add_test(tc, show_help_notice);
	tcase_add_test(tc, show_multi_host_database);
	tcase_add_test(tc, show_config_keys_and_values);
	tcase_add_test(tc, stats_count_known_work);
	tcase_add_test(tc, log_stats_per_database);
	tcase_add_test(tc, stats_times_are_microseconds);
	suite_add_tcase(s, tc);

	tc = pgv_tcase_create("access", 30);
	tcase_add_test(tc, stats_user_can_show_not_control);
	tcase_add_test(tc, console_login_rules);
	tcase_add_test(tc, invalid_commands_keep_console);
	tcase_add_test(tc, extended_protocol_rejected);
	tcase_add_test(tc, max_client_conn_spares_console);
	suite_add_tcase(s, tc);

	tc = pgv_tcase_create("spec", 30);
	tcase_add_test(tc, spec_show_config_defaults);
	tcase_add_test(tc, spec_console_welcome);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return pgv_run_suite(admin_show_suite());
}
