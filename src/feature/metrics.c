/*
 * metrics.c - Prometheus samples: the family table (names, types, help
 * texts, merge rules), collecting this process's samples from the live
 * objects, merging several workers' sets, and the exposition text.
 *
 * Owns: the family table. Reads the event counters that metrics_record.c
 * keeps (login failures, server connect failures, cancels forwarded),
 * databases, pools, config and the DNS cache; changes nothing. No I/O: the HTTP side
 * is metrics_http.c, the shared table workers.c.
 */
#include "common.h"
#include "metrics.h"
#include "log.h"
#include "config.h"
#include "dns.h"
#include "pool.h"
#include "pool_check.h"
#include "roles.h"
#include "balance_fresh.h"
#include "stats.h"
#include "users.h"
#include "workers.h"

#include <math.h>

struct family {
	const char *name;
	enum metrics_type type;
	enum metrics_merge merge;
	const char *help;
};

#define G(n, m, h) { n, METRICS_GAUGE, METRICS_MERGE_##m, h }
#define C(n, h) { n, METRICS_COUNTER, METRICS_MERGE_SUM, h }
#define H(n, h) { n, METRICS_HISTOGRAM, METRICS_MERGE_SUM, h }

/*
 * Every family, in the order a scrape shows them. The pgbouncer_* names
 * and help texts are pgbouncer_exporter's; gauges that every worker
 * reports alike (configuration, database settings) merge by maximum.
 */
static const struct family families[] = {
	{ "pgbouncer_version_info", METRICS_INFO, METRICS_MERGE_MAX, "The pgbouncer version info" },
	G("pgbouncer_up", MAX, "The pgbouncer scrape succeeded"),
	/* SHOW LISTS */
	G("pgbouncer_databases", MAX, "Count of databases"),
	G("pgbouncer_users", MAX, "Count of users"),
	G("pgbouncer_pools", MAX, "Count of pools"),
	G("pgbouncer_free_clients", SUM, "Count of free clients"),
	G("pgbouncer_used_clients", SUM, "Count of used clients"),
	G("pgbouncer_login_clients", SUM, "Count of clients in login state"),
	G("pgbouncer_free_servers", SUM, "Count of free servers"),
	G("pgbouncer_used_servers", SUM, "Count of used servers"),
	G("pgbouncer_cached_dns_names", MAX, "Count of DNS names in the cache"),
	G("pgbouncer_cached_dns_zones", MAX, "Count of DNS zones in the cache"),
	G("pgbouncer_in_flight_dns_queries", SUM, "Count of in-flight DNS queries"),
	/* SHOW CONFIG */
	G("pgbouncer_config_max_client_connections", MAX, "Config maximum number of client connections"),
	G("pgbouncer_config_max_user_connections", MAX, "Config maximum number of server connections per user"),
	/* SHOW DATABASES */
	G("pgbouncer_databases_pool_size", MAX, "Maximum number of server connections"),
	G("pgbouncer_databases_reserve_pool", MAX, "Maximum number of additional connections for this database"),
	G("pgbouncer_databases_max_connections", MAX, "Maximum number of allowed connections for this database"),
	G("pgbouncer_databases_current_connections", SUM, "Current number of connections for this database"),
	G("pgbouncer_databases_paused", MAX, "1 if this database is currently paused, else 0"),
	G("pgbouncer_databases_disabled", MAX, "1 if this database is currently disabled, else 0"),
	/* SHOW POOLS */
	G("pgbouncer_pools_client_active_connections", SUM,
	  "Client connections linked to server connection and able to process queries, shown as connection"),
	G("pgbouncer_pools_client_active_cancel_connections", SUM,
	  "Client connections that have forwarded query cancellations to the server and are waiting for the server response"),
	G("pgbouncer_pools_client_waiting_connections", SUM,
	  "Client connections waiting on a server connection, shown as connection"),
	G("pgbouncer_pools_client_waiting_cancel_connections", SUM,
	  "Client connections that have not forwarded query cancellations to the server yet"),
	G("pgbouncer_pools_server_active_connections", SUM,
	  "Server connections linked to a client connection, shown as connection"),
	G("pgbouncer_pools_server_active_cancel_connections", SUM,
	  "Server connections that are currently forwarding a cancel request."),
	G("pgbouncer_pools_server_being_canceled_connections", SUM,
	  "Servers that normally could become idle but are waiting to do so until all in-flight cancel requests have completed that were sent to cancel a query on this server."),
	G("pgbouncer_pools_server_idle_connections", SUM,
	  "Server connections idle and ready for a client query, shown as connection"),
	G("pgbouncer_pools_server_used_connections", SUM,
	  "Server connections idle more than server_check_delay, needing server_check_query, shown as connection"),
	G("pgbouncer_pools_server_testing_connections", SUM,
	  "Server connections currently running either server_reset_query or server_check_query, shown as connection"),
	G("pgbouncer_pools_server_login_connections", SUM,
	  "Server connections currently in the process of logging in, shown as connection"),
	G("pgbouncer_pools_client_maxwait_seconds", MAX, "Age of oldest unserved client connection, shown as second"),
	/* SHOW STATS */
	C("pgbouncer_stats_server_assignments_total", "Total number of times a server was assigned to a client"),
	C("pgbouncer_stats_sql_transactions_pooled_total", "Total number of SQL transactions pooled"),
	C("pgbouncer_stats_queries_pooled_total", "Total number of SQL queries pooled"),
	C("pgbouncer_stats_received_bytes_total",
	  "Total volume in bytes of network traffic received by pgbouncer, shown as bytes"),
	C("pgbouncer_stats_sent_bytes_total", "Total volume in bytes of network traffic sent by pgbouncer, shown as bytes"),
	C("pgbouncer_stats_server_in_transaction_seconds_total",
	  "Total number of seconds spent by pgbouncer when connected to PostgreSQL in a transaction, either idle in transaction or executing queries"),
	C("pgbouncer_stats_queries_duration_seconds_total",
	  "Total number of seconds spent by pgbouncer when actively connected to PostgreSQL, executing queries"),
	C("pgbouncer_stats_client_wait_seconds_total", "Time spent by clients waiting for a server in seconds"),
	C("pgbouncer_stats_client_parses_total", "Total number of prepared statement Parse messages received from clients"),
	C("pgbouncer_stats_server_parses_total",
	  "Total number of prepared statement Parse messages sent by pgbouncer to PostgreSQL"),
	C("pgbouncer_stats_binds_total", "Total number of prepared statements readied for execution with a Bind message"),
	C("pgbouncer_stats_client_logins_total", "Total number of successful client logins"),
	/* pgvalve's own */
	H("pgvalve_query_duration_seconds", "Query time on a server per database (first message to ReadyForQuery)"),
	H("pgvalve_transaction_duration_seconds", "Transaction time on a server per database"),
	H("pgvalve_client_wait_seconds", "Time a client waited for a server per database, per assignment that waited"),
	C("pgvalve_login_failures_total", "Client logins that failed, by reason"),
	C("pgvalve_client_authentications_total", "Clients that proved who they are, by authentication method"),
	C("pgvalve_client_authentication_failures_total", "Client authentications that failed, by method and cause"),
	C("pgvalve_server_connect_failures_total", "Server connections that could not be opened or logged in"),
	C("pgvalve_cancel_requests_forwarded_total", "Cancel requests sent on to a PostgreSQL server"),
	C("pgvalve_notifications_delivered_total", "Notifications (LISTEN/NOTIFY) given to clients in transaction and statement pooling"),
	C("pgvalve_notify_clients_dropped_total", "Clients closed for leaving more than notify_buffer_limit of notifications unread"),
	G("pgvalve_clients_waiting", SUM, "Clients waiting for a server, all pools (pool saturation)"),
	G("pgvalve_host_up", MAX, "1 if the host of the database's list logged in at the last try, 0 if it failed"),
	G("pgvalve_host_primary", MAX, "1 if the host was last seen as a primary, 0 as a standby"),
	G("pgvalve_host_lag_bytes", MAX, "WAL a standby is behind its list's primary, at its last check (max_replica_lag)"),
	G("pgvalve_host_lag_seconds", MAX, "Time since a standby's last replayed transaction while it is behind, at its last check"),
	C("pgvalve_host_transactions_total", "Transactions of load_balance_reads pools run on the host"),
	C("pgvalve_host_reads_balanced_total", "Read transactions the read balancer sent to the host, a standby"),
	C("pgvalve_host_reads_kept_fresh_total", "Reads kept on the host, the primary, for a client's own writes (read your writes)"),
	C("pgvalve_host_reads_retried_total", "Reads the host, a standby, refused as writes (25006) and that ran again on the primary"),
	G("pgvalve_worker_up", MAX, "1 if the worker process is running and listening, else 0"),
	C("pgvalve_worker_restarts_total", "Times the supervisor restarted the worker"),
	G("pgvalve_worker_client_active_connections", MAX, "Active clients of the worker"),
	G("pgvalve_worker_client_waiting_connections", MAX, "Waiting clients of the worker"),
	G("pgvalve_worker_server_active_connections", MAX, "Active servers of the worker"),
	G("pgvalve_worker_server_idle_connections", MAX, "Idle servers of the worker"),
	C("pgvalve_worker_transactions_total", "Transactions pooled by the worker since it started"),
	C("pgvalve_worker_queries_total", "Queries pooled by the worker since it started"),
};

#undef G
#undef C
#undef H

const double metrics_latency_bounds[METRICS_LATENCY_BUCKETS] = {
	0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5,
};
static const char *const login_failure_names[METRICS_LOGIN_FAILURE_KINDS] = {
	"bad_password", "no_database", "too_many_connections", "timeout", "rejected",
};
static const char *const auth_failure_names[METRICS_AUTH_FAILURE_CAUSES] = {
	"bad_password", "unknown_user", "identity_mismatch", "directory_unavailable", "directory_error",
	"ticket_invalid", "keytab_unusable", "channel_binding_mismatch", "hba_reject", "tls_required", "protocol_error", "not_supported",
};

/* ---------------------------------------------------------------- sets */

static int cmp_family_by_name(const void *a, const void *b)
{
	return strcmp(families[*(const uint16_t *)a].name, families[*(const uint16_t *)b].name);
}

/* Table index of a family name, -1 if unknown: a binary search, since a scrape looks up every sample. */
static int family_index(const char *name)
{
	static uint16_t by_name[ARRAY_SIZE(families)];
	static bool sorted;
	if (!sorted) {
		for (size_t i = 0; i < ARRAY_SIZE(families); i++)
			by_name[i] = (uint16_t)i;
		qsort(by_name, ARRAY_SIZE(families), sizeof(by_name[0]), cmp_family_by_name);
		sorted = true;
	}
	size_t lo = 0, hi = ARRAY_SIZE(families);
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = strcmp(families[by_name[mid]].name, name);
		if (c == 0)
			return by_name[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

static void set_push(struct metrics_set *set, int fam, enum metrics_part part, const char *labels, double value,
		     uint64_t order)
{
	if (set->n == set->cap) {
		set->cap = set->cap ? set->cap * 2 : 256;
		set->v = xrealloc(set->v, set->cap * sizeof(*set->v));
	}
	set->v[set->n++] = (struct metrics_sample){
		.family = (uint16_t)fam, .part = (uint8_t)part, .labels = xstrdup(labels ? labels : ""),
		.value = value, .order = order,
	};
}

void metrics_add(struct metrics_set *set, const char *family, enum metrics_part part, const char *labels,
		 double value)
{
	int fam = family_index(family);
	if (fam < 0) {
		log_error("metrics: unknown family %s", family);
		return;
	}
	set_push(set, fam, part, labels, value, set->n);
}

void metrics_set_free(struct metrics_set *set)
{
	for (size_t i = 0; i < set->n; i++)
		free(set->v[i].labels);
	free(set->v);
	memset(set, 0, sizeof(*set));
}

void metrics_append(struct metrics_set *dst, const struct metrics_set *src)
{
	uint64_t base = 0;
	for (size_t i = 0; i < dst->n; i++)
		base = MAX(base, dst->v[i].order + 1);
	for (size_t i = 0; i < src->n; i++) {
		const struct metrics_sample *s = &src->v[i];
		set_push(dst, s->family, s->part, s->labels, s->value, base + s->order);
	}
}

void metrics_label(char *buf, size_t size, const char *name, const char *value)
{
	char esc[1024];
	size_t n = 0;
	for (const char *p = value ? value : ""; *p && n + 2 < sizeof(esc); p++) {
		if (*p == '\\' || *p == '"') {
			esc[n++] = '\\';
			esc[n++] = *p;
		} else if (*p == '\n') {
			esc[n++] = '\\';
			esc[n++] = 'n';
		} else {
			esc[n++] = *p;
		}
	}
	esc[n] = '\0';
	size_t used = strlen(buf);
	/* A pair that does not fit whole is left out rather than cut in an escape. */
	int w = snprintf(buf + used, size - used, "%s%s=\"%s\"", used ? "," : "", name, esc);
	if (w < 0 || (size_t)w >= size - used)
		buf[used] = '\0';
}

/* ---------------------------------------------------------------- collecting */

static void add_histogram(struct metrics_set *set, const char *family, const char *labels,
			  const struct metrics_histogram *h)
{
	char lb[1200];
	uint64_t cumulative = 0;
	for (size_t i = 0; i <= METRICS_LATENCY_BUCKETS; i++) {
		char le[32];
		cumulative += h->bucket[i];
		if (i < METRICS_LATENCY_BUCKETS)
			snprintf(le, sizeof(le), "%g", metrics_latency_bounds[i]);
		else
			snprintf(le, sizeof(le), "+Inf");
		snprintf(lb, sizeof(lb), "%s", labels);
		metrics_label(lb, sizeof(lb), "le", le);
		metrics_add(set, family, METRICS_PART_BUCKET, lb, (double)cumulative);
	}
	metrics_add(set, family, METRICS_PART_SUM, labels, (double)h->sum_usec / USEC_PER_SEC);
	metrics_add(set, family, METRICS_PART_COUNT, labels, (double)cumulative);
}

static void collect_lists(struct metrics_set *set)
{
	int pools = 0;
	list_for_each(dpos, &pgv.databases)
		pools += (int)container_of(dpos, struct db, node)->pools.count;
	struct dns_stats ds;
	dns_get_stats(&ds);
	metrics_add(set, "pgbouncer_databases", METRICS_PART_VALUE, NULL, pgv.databases.count);
	metrics_add(set, "pgbouncer_users", METRICS_PART_VALUE, NULL, (double)users_count());
	metrics_add(set, "pgbouncer_pools", METRICS_PART_VALUE, NULL, pools);
	metrics_add(set, "pgbouncer_free_clients", METRICS_PART_VALUE, NULL, 0);
	metrics_add(set, "pgbouncer_used_clients", METRICS_PART_VALUE, NULL, pgv.client_count);
	metrics_add(set, "pgbouncer_login_clients", METRICS_PART_VALUE, NULL, pgv.login_clients.count);
	metrics_add(set, "pgbouncer_free_servers", METRICS_PART_VALUE, NULL, 0);
	metrics_add(set, "pgbouncer_used_servers", METRICS_PART_VALUE, NULL, pgv.server_count);
	metrics_add(set, "pgbouncer_cached_dns_names", METRICS_PART_VALUE, NULL, ds.names);
	metrics_add(set, "pgbouncer_cached_dns_zones", METRICS_PART_VALUE, NULL, ds.zones);
	metrics_add(set, "pgbouncer_in_flight_dns_queries", METRICS_PART_VALUE, NULL, ds.queries);
}

/* SHOW DATABASES' columns the exporter turns into labels and gauges. */
static void collect_database(struct metrics_set *set, const struct db *db)
{
	const struct config *cfg = pgv.cfg;
	const struct db_config *dc = db->cfg;
	char lb[1200] = "", port[16];
	const char *pool_mode;
	int pool_size;
	metrics_label(lb, sizeof(lb), "name", db->name);
	if (db->is_admin) {
		snprintf(port, sizeof(port), "%d", cfg->listen_port);
		metrics_label(lb, sizeof(lb), "host", "");
		metrics_label(lb, sizeof(lb), "port", port);
		metrics_label(lb, sizeof(lb), "database", "pgbouncer");
		metrics_label(lb, sizeof(lb), "force_user", "pgbouncer");
		pool_mode = "statement";
		pool_size = 2;
	} else {
		snprintf(port, sizeof(port), "%d", dc->port);
		metrics_label(lb, sizeof(lb), "host", dc->host);
		metrics_label(lb, sizeof(lb), "port", port);
		metrics_label(lb, sizeof(lb), "database", dc->dbname[0] ? dc->dbname : db->name);
		metrics_label(lb, sizeof(lb), "force_user", dc->user);
		pool_mode = dc->pool_mode >= 0 ? pool_mode_name(dc->pool_mode) : "";
		pool_size = dc->pool_size >= 0 ? dc->pool_size : cfg->default_pool_size;
	}
	metrics_label(lb, sizeof(lb), "pool_mode", pool_mode);
	metrics_add(set, "pgbouncer_databases_pool_size", METRICS_PART_VALUE, lb, pool_size);
	metrics_add(set, "pgbouncer_databases_reserve_pool", METRICS_PART_VALUE, lb,
		    dc->reserve_pool_size >= 0 ? dc->reserve_pool_size : cfg->reserve_pool_size);
	metrics_add(set, "pgbouncer_databases_max_connections", METRICS_PART_VALUE, lb,
		    dc->max_db_connections > 0 ? dc->max_db_connections : cfg->max_db_connections);
	metrics_add(set, "pgbouncer_databases_current_connections", METRICS_PART_VALUE, lb, db->server_count);
	metrics_add(set, "pgbouncer_databases_paused", METRICS_PART_VALUE, lb, db->paused ? 1 : 0);
	metrics_add(set, "pgbouncer_databases_disabled", METRICS_PART_VALUE, lb, db->disabled ? 1 : 0);
}

/* SHOW POOLS, as admin.c counts it. */
static void collect_pool(struct metrics_set *set, const struct pool *pool, usec_t now)
{
	char lb[600] = "";
	metrics_label(lb, sizeof(lb), "database", pool->db->name);
	metrics_label(lb, sizeof(lb), "user", pool->user);
	usec_t maxwait = pool_max_wait(pool, now);
	int being_canceled, active_cancel;
	pool_count_cancels(pool, &active_cancel, &being_canceled);
	int stale = pool_stale_idle_count(pool);	/* sv_used, as SHOW POOLS (pool.h) */
	const struct { const char *name; double v; } g[] = {
		{ "pgbouncer_pools_client_active_connections", pool->active_clients.count + pool->idle_clients.count },
		{ "pgbouncer_pools_client_active_cancel_connections", 0 },
		{ "pgbouncer_pools_client_waiting_connections",
		  pool->waiting_clients.count + pool->welcome_clients.count },
		{ "pgbouncer_pools_client_waiting_cancel_connections", 0 },
		{ "pgbouncer_pools_server_active_connections", (double)pool->active_servers.count - active_cancel },
		{ "pgbouncer_pools_server_active_cancel_connections", active_cancel },
		{ "pgbouncer_pools_server_being_canceled_connections", being_canceled },
		{ "pgbouncer_pools_server_idle_connections", (double)pool->idle_servers.count - stale },
		{ "pgbouncer_pools_server_used_connections", (double)pool->used_servers.count - being_canceled + stale },
		{ "pgbouncer_pools_server_testing_connections", pool->tested_servers.count },
		{ "pgbouncer_pools_server_login_connections", pool->login_servers.count },
		{ "pgbouncer_pools_client_maxwait_seconds", (double)maxwait / USEC_PER_SEC },
	};
	for (size_t i = 0; i < ARRAY_SIZE(g); i++)
		metrics_add(set, g[i].name, METRICS_PART_VALUE, lb, g[i].v);
}

static void collect_stats(struct metrics_set *set, const struct db *db)
{
	char lb[300] = "";
	const struct stats *t = &db->stats.total;
	metrics_label(lb, sizeof(lb), "database", db->name);
	const struct { const char *name; double v; } c[] = {
		{ "pgbouncer_stats_server_assignments_total", (double)t->server_assignment_count },
		{ "pgbouncer_stats_sql_transactions_pooled_total", (double)t->xact_count },
		{ "pgbouncer_stats_queries_pooled_total", (double)t->query_count },
		{ "pgbouncer_stats_received_bytes_total", (double)t->bytes_received },
		{ "pgbouncer_stats_sent_bytes_total", (double)t->bytes_sent },
		{ "pgbouncer_stats_server_in_transaction_seconds_total", (double)t->xact_time / USEC_PER_SEC },
		{ "pgbouncer_stats_queries_duration_seconds_total", (double)t->query_time / USEC_PER_SEC },
		{ "pgbouncer_stats_client_wait_seconds_total", (double)t->wait_time / USEC_PER_SEC },
		{ "pgbouncer_stats_client_parses_total", (double)t->client_parse_count },
		{ "pgbouncer_stats_server_parses_total", (double)t->server_parse_count },
		{ "pgbouncer_stats_binds_total", (double)t->bind_count },
		{ "pgbouncer_stats_client_logins_total", (double)t->client_login_count },
	};
	for (size_t i = 0; i < ARRAY_SIZE(c); i++)
		metrics_add(set, c[i].name, METRICS_PART_VALUE, lb, c[i].v);
}

/* The read balancer's counts on entry idx of db's list (balance_fresh.h), once it counted any. */
static void collect_host_balance(struct metrics_set *set, const struct db *db, int idx, const char *lb)
{
	struct balance_counts bc;
	balance_host_counts(db, idx, &bc);
	if (!bc.xacts)
		return;
	metrics_add(set, "pgvalve_host_transactions_total", METRICS_PART_VALUE, lb, (double)bc.xacts);
	metrics_add(set, "pgvalve_host_reads_balanced_total", METRICS_PART_VALUE, lb, (double)bc.reads_balanced);
	metrics_add(set, "pgvalve_host_reads_kept_fresh_total", METRICS_PART_VALUE, lb, (double)bc.reads_fresh);
	metrics_add(set, "pgvalve_host_reads_retried_total", METRICS_PART_VALUE, lb, (double)bc.reads_retried);
}

/* Role routing (roles.h): each host of the database's list whose state is known. */
static void collect_hosts(struct metrics_set *set, const struct db *db)
{
	struct roles_host_info hosts[32];
	size_t n = MIN(roles_db_hosts(db, hosts, ARRAY_SIZE(hosts)), ARRAY_SIZE(hosts));
	for (size_t i = 0; i < n; i++) {
		bool down = strcmp(hosts[i].state, "down") == 0;
		if (!down && !hosts[i].last_check)
			continue;	/* never reached: nothing known */
		char lb[600] = "", port[16];
		snprintf(port, sizeof(port), "%d", hosts[i].port);
		metrics_label(lb, sizeof(lb), "database", db->name);
		metrics_label(lb, sizeof(lb), "host", hosts[i].host);
		metrics_label(lb, sizeof(lb), "port", port);
		metrics_add(set, "pgvalve_host_up", METRICS_PART_VALUE, lb, down ? 0 : 1);
		if (hosts[i].role != SERVER_ROLE_UNKNOWN)
			metrics_add(set, "pgvalve_host_primary", METRICS_PART_VALUE, lb,
				    hosts[i].role == SERVER_ROLE_PRIMARY ? 1 : 0);
		if (hosts[i].lag >= 0)
			metrics_add(set, "pgvalve_host_lag_bytes", METRICS_PART_VALUE, lb, (double)hosts[i].lag);
		if (hosts[i].lag_seconds >= 0)
			metrics_add(set, "pgvalve_host_lag_seconds", METRICS_PART_VALUE, lb, hosts[i].lag_seconds);
		collect_host_balance(set, db, (int)i, lb);
	}
}

static int cmp_db_name(const void *a, const void *b)
{
	return strcmp((*(struct db *const *)a)->name, (*(struct db *const *)b)->name);
}

static int cmp_pool_key(const void *a, const void *b)
{
	const struct pool *x = *(struct pool *const *)a, *y = *(struct pool *const *)b;
	int c = strcmp(x->db->name, y->db->name);
	return c ? c : strcmp(x->user, y->user);
}

/* Only the (method, cause) pairs that happened: a series per pair that ever did. */
static void collect_auth_failures(struct metrics_set *set)
{
	char lb[128];
	for (int m = 0; m < METRICS_AUTH_METHODS; m++) {
		for (int c = 0; c < METRICS_AUTH_FAILURE_CAUSES; c++) {
			if (!metrics_events.authentication_failures[m][c])
				continue;
			lb[0] = '\0';
			metrics_label(lb, sizeof(lb), "method", auth_type_name(m));
			metrics_label(lb, sizeof(lb), "cause", auth_failure_names[c]);
			metrics_add(set, "pgvalve_client_authentication_failures_total", METRICS_PART_VALUE, lb,
				    (double)metrics_events.authentication_failures[m][c]);
		}
	}
}

void metrics_collect_local(struct metrics_set *set)
{
	usec_t now = now_usec();
	char lb[300] = "";
	metrics_label(lb, sizeof(lb), "version", PGVALVE_VERSION_STRING);
	metrics_add(set, "pgbouncer_version_info", METRICS_PART_VALUE, lb, 1);
	metrics_add(set, "pgbouncer_up", METRICS_PART_VALUE, NULL, 1);
	collect_lists(set);
	metrics_add(set, "pgbouncer_config_max_client_connections", METRICS_PART_VALUE, NULL,
		    pgv.cfg->max_client_conn);
	metrics_add(set, "pgbouncer_config_max_user_connections", METRICS_PART_VALUE, NULL,
		    pgv.cfg->max_user_connections);

	/* Sorted as SHOW sorts, so that a scrape reads like the console. */
	size_t ndb = pgv.databases.count, npool = 0, i = 0, k = 0;
	struct db **dbs = xcalloc(ndb ? ndb : 1, sizeof(*dbs));
	list_for_each(dpos, &pgv.databases) {
		dbs[i] = container_of(dpos, struct db, node);
		npool += dbs[i++]->pools.count;
	}
	qsort(dbs, ndb, sizeof(*dbs), cmp_db_name);
	struct pool **pools = xcalloc(npool ? npool : 1, sizeof(*pools));
	for (i = 0; i < ndb; i++)
		list_for_each(ppos, &dbs[i]->pools)
			pools[k++] = container_of(ppos, struct pool, node);
	qsort(pools, npool, sizeof(*pools), cmp_pool_key);

	uint64_t waiting = 0;
	for (i = 0; i < ndb; i++)
		collect_database(set, dbs[i]);
	for (i = 0; i < npool; i++) {
		collect_pool(set, pools[i], now);
		waiting += pools[i]->waiting_clients.count;
	}
	for (i = 0; i < ndb; i++)
		if (!list_empty(&dbs[i]->pools))	/* as SHOW STATS: databases that have a pool */
			collect_stats(set, dbs[i]);
	for (i = 0; i < ndb; i++) {
		if (dbs[i]->is_admin || list_empty(&dbs[i]->pools))
			continue;
		lb[0] = '\0';
		metrics_label(lb, sizeof(lb), "database", dbs[i]->name);
		add_histogram(set, "pgvalve_query_duration_seconds", lb, &dbs[i]->query_hist);
		add_histogram(set, "pgvalve_transaction_duration_seconds", lb, &dbs[i]->xact_hist);
		add_histogram(set, "pgvalve_client_wait_seconds", lb, &dbs[i]->wait_hist);
	}
	for (i = 0; i < ndb; i++)
		if (!dbs[i]->is_admin)
			collect_hosts(set, dbs[i]);
	for (size_t r = 0; r < METRICS_LOGIN_FAILURE_KINDS; r++) {
		lb[0] = '\0';
		metrics_label(lb, sizeof(lb), "reason", login_failure_names[r]);
		metrics_add(set, "pgvalve_login_failures_total", METRICS_PART_VALUE, lb,
			    (double)metrics_events.login_failures[r]);
	}
	for (int m = 0; m < METRICS_AUTH_METHODS; m++) {
		if (!metrics_events.authentications[m])
			continue;	/* only the methods in use: a series per method that ever worked */
		lb[0] = '\0';
		metrics_label(lb, sizeof(lb), "method", auth_type_name(m));
		metrics_add(set, "pgvalve_client_authentications_total", METRICS_PART_VALUE, lb,
			    (double)metrics_events.authentications[m]);
	}
	collect_auth_failures(set);
	metrics_add(set, "pgvalve_server_connect_failures_total", METRICS_PART_VALUE, NULL,
		    (double)metrics_events.server_connect_failures);
	metrics_add(set, "pgvalve_cancel_requests_forwarded_total", METRICS_PART_VALUE, NULL,
		    (double)metrics_events.cancels_forwarded);
	metrics_add(set, "pgvalve_notifications_delivered_total", METRICS_PART_VALUE, NULL,
		    (double)metrics_events.notifications_delivered);
	metrics_add(set, "pgvalve_notify_clients_dropped_total", METRICS_PART_VALUE, NULL,
		    (double)metrics_events.notify_clients_dropped);
	metrics_add(set, "pgvalve_clients_waiting", METRICS_PART_VALUE, NULL, (double)waiting);
	free(pools);
	free(dbs);
}

/*
 * Counters this worker's dead predecessors had published (workers = N):
 * added to what this process counts, in every publish and scrape.
 */
static struct metrics_set carried;

/* Parses worker k's published samples into set (appended after what is there). */
static void append_published(struct metrics_set *set, int worker, bool counters_only)
{
	size_t len;
	char *text = workers_blob_read(worker, WORKERS_BLOB_METRICS, &len);
	if (!text)
		return;
	struct metrics_set part = { 0 };
	metrics_parse(text, len, counters_only, &part);
	metrics_append(set, &part);
	metrics_set_free(&part);
	free(text);
}

static void publish_set(const struct metrics_set *set)
{
	struct evbuffer *b = evbuffer_new();
	metrics_serialize(set, false, b);
	size_t len = evbuffer_get_length(b);
	if (!workers_blob_write(WORKERS_BLOB_METRICS, evbuffer_pullup(b, -1), len)) {
		static bool warned;
		if (!warned)
			log_warning("metrics: %zu bytes of samples do not fit the shared area (%d); other workers' "
				    "scrapes miss this one's", len, WORKERS_BLOB_BYTES);
		warned = true;
	}
	evbuffer_free(b);
}

/* This process's samples with the carried-over counters, merged. */
static void collect_own(struct metrics_set *set)
{
	metrics_collect_local(set);
	metrics_append(set, &carried);
	metrics_merge(set);
}

void metrics_publish(void)
{
	static usec_t last;
	usec_t now = now_usec();
	if (workers_count() <= 1 || pgv.cfg->metrics_port == 0 || now - last < METRICS_PUBLISH_USEC)
		return;
	last = now;
	struct metrics_set set = { 0 };
	collect_own(&set);
	publish_set(&set);
	metrics_set_free(&set);
}

void metrics_carry_over(void)
{
	if (workers_count() <= 1)
		return;
	/*
	 * The predecessor's last publish already holds what it had carried.
	 * Republished at once, counters only, in one write: a scrape sees
	 * either the dead worker's samples or these, never both or neither.
	 */
	metrics_set_free(&carried);
	append_published(&carried, workers_self(), true);
	metrics_merge(&carried);
	publish_set(&carried);
}

/* pgvalve_worker_*{worker="k"} from the shared table (SHOW WORKERS' numbers). */
static void collect_worker_series(struct metrics_set *set)
{
	for (int k = 1; k <= workers_count(); k++) {
		struct worker_status w;
		char lb[32] = "", num[16];
		workers_read(k, &w);
		snprintf(num, sizeof(num), "%d", k);
		metrics_label(lb, sizeof(lb), "worker", num);
		metrics_add(set, "pgvalve_worker_up", METRICS_PART_VALUE, lb, w.state == WORKER_STATE_RUNNING);
		metrics_add(set, "pgvalve_worker_restarts_total", METRICS_PART_VALUE, lb, w.restarts);
		metrics_add(set, "pgvalve_worker_client_active_connections", METRICS_PART_VALUE, lb, (double)w.c.cl_active);
		metrics_add(set, "pgvalve_worker_client_waiting_connections", METRICS_PART_VALUE, lb, (double)w.c.cl_waiting);
		metrics_add(set, "pgvalve_worker_server_active_connections", METRICS_PART_VALUE, lb, (double)w.c.sv_active);
		metrics_add(set, "pgvalve_worker_server_idle_connections", METRICS_PART_VALUE, lb, (double)w.c.sv_idle);
		metrics_add(set, "pgvalve_worker_transactions_total", METRICS_PART_VALUE, lb, (double)w.c.xact_count);
		metrics_add(set, "pgvalve_worker_queries_total", METRICS_PART_VALUE, lb, (double)w.c.query_count);
	}
}

void metrics_collect_instance(struct metrics_set *set)
{
	if (workers_count() <= 1) {
		metrics_collect_local(set);
		metrics_merge(set);
		return;
	}
	collect_own(set);
	/*
	 * What this scrape shows of this worker is published at once: a
	 * successor carries over at least what was shown, so the totals never
	 * go back when this worker dies.
	 */
	publish_set(set);
	workers_publish();
	for (int k = 1; k <= workers_count(); k++) {
		if (k == workers_self())
			continue;
		struct worker_status w;
		workers_read(k, &w);
		/* A dead worker's gauges are gone; its counters count until its successor carries them. */
		append_published(set, k, w.state != WORKER_STATE_RUNNING);
	}
	collect_worker_series(set);
	metrics_merge(set);
}

/* ---------------------------------------------------------------- shared-table form */

static bool keep_kind(const struct metrics_sample *s, bool counters_only)
{
	enum metrics_type t = families[s->family].type;
	return !counters_only || t == METRICS_COUNTER || t == METRICS_HISTOGRAM;
}

void metrics_serialize(const struct metrics_set *set, bool counters_only, struct evbuffer *out)
{
	for (size_t i = 0; i < set->n; i++) {
		const struct metrics_sample *s = &set->v[i];
		if (keep_kind(s, counters_only))
			evbuffer_add_printf(out, "%s\t%u\t%.17g\t%s\n", families[s->family].name, s->part, s->value,
					    s->labels);
	}
}

void metrics_parse(const char *text, size_t len, bool counters_only, struct metrics_set *set)
{
	const char *p = text, *end = text + len;
	uint64_t order = 0;
	char name[128], labels[1200];
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		if (!nl)
			break;
		const char *t1 = memchr(p, '\t', (size_t)(nl - p));
		const char *t2 = t1 ? memchr(t1 + 1, '\t', (size_t)(nl - t1 - 1)) : NULL;
		const char *t3 = t2 ? memchr(t2 + 1, '\t', (size_t)(nl - t2 - 1)) : NULL;
		if (t3 && (size_t)(t1 - p) < sizeof(name) && (size_t)(nl - t3 - 1) < sizeof(labels)) {
			memcpy(name, p, (size_t)(t1 - p));
			name[t1 - p] = '\0';
			memcpy(labels, t3 + 1, (size_t)(nl - t3 - 1));
			labels[nl - t3 - 1] = '\0';
			int fam = family_index(name);
			unsigned part = (unsigned)strtoul(t1 + 1, NULL, 10);
			double value = strtod(t2 + 1, NULL);
			if (fam >= 0 && part <= METRICS_PART_COUNT) {
				struct metrics_sample probe = { .family = (uint16_t)fam };
				if (keep_kind(&probe, counters_only))
					set_push(set, fam, part, labels, value, order++);
			}
		}
		p = nl + 1;
	}
}

/* ---------------------------------------------------------------- merging */

static int cmp_series(const void *a, const void *b)
{
	const struct metrics_sample *x = a, *y = b;
	if (x->family != y->family)
		return x->family < y->family ? -1 : 1;
	if (x->part != y->part)
		return x->part < y->part ? -1 : 1;
	int c = strcmp(x->labels, y->labels);
	if (c)
		return c;
	return x->order < y->order ? -1 : x->order > y->order;
}

static int cmp_emission(const void *a, const void *b)
{
	const struct metrics_sample *x = a, *y = b;
	if (x->family != y->family)
		return x->family < y->family ? -1 : 1;
	return x->order < y->order ? -1 : x->order > y->order;
}

void metrics_merge(struct metrics_set *set)
{
	if (set->n == 0)
		return;
	qsort(set->v, set->n, sizeof(*set->v), cmp_series);
	size_t w = 0;
	for (size_t i = 1; i < set->n; i++) {
		struct metrics_sample *keep = &set->v[w], *s = &set->v[i];
		if (keep->family == s->family && keep->part == s->part && strcmp(keep->labels, s->labels) == 0) {
			if (families[s->family].merge == METRICS_MERGE_SUM)
				keep->value += s->value;
			else
				keep->value = MAX(keep->value, s->value);
			free(s->labels);
		} else {
			set->v[++w] = *s;
		}
	}
	set->n = w + 1;
	qsort(set->v, set->n, sizeof(*set->v), cmp_emission);
}

/* ---------------------------------------------------------------- exposition text */

static const char *const part_suffix[] = { "", "_bucket", "_sum", "_count" };

static void put_value(struct evbuffer *out, double v)
{
	if (isnan(v))
		evbuffer_add_printf(out, "NaN\n");
	else if (v > -9007199254740992.0 && v < 9007199254740992.0 && v == (double)(int64_t)v)
		evbuffer_add_printf(out, "%lld\n", (long long)v);
	else
		evbuffer_add_printf(out, "%.15g\n", v);
}

void metrics_render(struct metrics_set *set, bool openmetrics, struct evbuffer *out)
{
	static const char *const type_names[] = { "gauge", "counter", "histogram", "info" };
	qsort(set->v, set->n, sizeof(*set->v), cmp_emission);
	int current = -1;
	for (size_t i = 0; i < set->n; i++) {
		const struct metrics_sample *s = &set->v[i];
		const struct family *f = &families[s->family];
		if (s->family != current) {
			current = s->family;
			/*
			 * OpenMetrics names a counter family without its _total
			 * and an info family without its _info; the 0.0.4 text
			 * format has neither notion (info is a gauge there).
			 */
			char fname[128];
			snprintf(fname, sizeof(fname), "%s", f->name);
			const char *type = type_names[f->type];
			size_t len = strlen(fname);
			if (openmetrics && f->type == METRICS_COUNTER && len > 6 && strcmp(fname + len - 6, "_total") == 0)
				fname[len - 6] = '\0';
			if (f->type == METRICS_INFO) {
				if (openmetrics && len > 5 && strcmp(fname + len - 5, "_info") == 0)
					fname[len - 5] = '\0';
				else
					type = "gauge";
			}
			evbuffer_add_printf(out, "# HELP %s %s\n# TYPE %s %s\n", fname, f->help, fname, type);
		}
		evbuffer_add_printf(out, "%s%s", f->name, part_suffix[s->part]);
		if (s->labels[0])
			evbuffer_add_printf(out, "{%s}", s->labels);
		evbuffer_add(out, " ", 1);
		put_value(out, s->value);
	}
	if (openmetrics)
		evbuffer_add_printf(out, "# EOF\n");
}
