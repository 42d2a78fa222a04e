/*
 * admin_show.c - the admin console's SHOW views (POOLS, STATS, CLIENTS,
 * SERVERS, DATABASES, ...), one handler each in the shows[] table, with
 * PgBouncer's column names, types and row order; and the parameters
 * PgBouncer fakes for drivers that ask on connect (SHOW client_encoding).
 *
 * Reads databases, pools, clients, servers, config, stats, the DNS cache
 * and the worker table; changes nothing (SHOW WORKERS publishes this
 * worker's own counters first). Writes through admin_reply.c.
 */
#include "common.h"
#include "admin_internal.h"
#include "roles.h"
#include "balance_fresh.h"
#include "users.h"
#include "auth_file.h"
#include "client.h"
#include "config.h"
#include "dns.h"
#include "ldap_auth.h"
#include "netbuf.h"
#include "notify.h"
#include "peer.h"
#include "pool.h"
#include "pool_check.h"
#include "prepare.h"
#include "replication.h"
#include "server.h"
#include "stats.h"
#include "tenant.h"
#include "tls.h"
#include "varcache.h"
#include "workers.h"

#include <arpa/inet.h>
#include <sys/socket.h>
#include <time.h>

/* ---------------------------------------------------------------- cells */

/* Text cells for one row; each cell has room for a number or a short string. */
struct cells {
	char buf[40][64];
	const char *v[40];
	int n;
};

static void cells_reset(struct cells *c)
{
	c->n = 0;
}

static void cell_str(struct cells *c, const char *s)
{
	c->v[c->n++] = s;
}

static void cell_int(struct cells *c, long long x)
{
	snprintf(c->buf[c->n], sizeof(c->buf[0]), "%lld", x);
	c->v[c->n] = c->buf[c->n];
	c->n++;
}

static void cell_uint(struct cells *c, unsigned long long x)
{
	snprintf(c->buf[c->n], sizeof(c->buf[0]), "%llu", x);
	c->v[c->n] = c->buf[c->n];
	c->n++;
}

/* Seconds, to the millisecond (a numeric column). */
static void cell_seconds(struct cells *c, double x)
{
	snprintf(c->buf[c->n], sizeof(c->buf[0]), "%.3f", x);
	c->v[c->n] = c->buf[c->n];
	c->n++;
}

static void cell_null(struct cells *c)
{
	c->v[c->n++] = NULL;
}

static void cell_time(struct cells *c, usec_t t)
{
	time_t secs = (time_t)(t / USEC_PER_SEC);
	struct tm tm;
	gmtime_r(&secs, &tm);
	strftime(c->buf[c->n], sizeof(c->buf[0]), "%Y-%m-%d %H:%M:%S UTC", &tm);
	c->v[c->n] = c->buf[c->n];
	c->n++;
}

static void cell_ptr(struct cells *c, const void *p)
{
	if (p)
		snprintf(c->buf[c->n], sizeof(c->buf[0]), "%p", p);
	else
		c->buf[c->n][0] = '\0';
	c->v[c->n] = c->buf[c->n];
	c->n++;
}

/* ---------------------------------------------------------------- ordered views */

/*
 * PgBouncer lists databases by name and pools by (database, user), byte
 * order; pgvalve keeps insertion order internally and sorts for display.
 */
struct dbs_view {
	struct db **v;
	size_t n;
};

static int cmp_db(const void *a, const void *b)
{
	return strcmp((*(struct db *const *)a)->name, (*(struct db *const *)b)->name);
}

static void dbs_sorted(struct dbs_view *out)
{
	out->n = pgv.databases.count;
	out->v = xcalloc(out->n ? out->n : 1, sizeof(*out->v));
	size_t i = 0;
	list_for_each(pos, &pgv.databases)
		out->v[i++] = container_of(pos, struct db, node);
	qsort(out->v, out->n, sizeof(*out->v), cmp_db);
}

struct pools_view {
	struct pool **v;
	size_t n;
};

static int cmp_pool(const void *a, const void *b)
{
	const struct pool *x = *(struct pool *const *)a, *y = *(struct pool *const *)b;
	int c = strcmp(x->db->name, y->db->name);
	return c ? c : strcmp(x->user, y->user);
}

static void pools_sorted(struct pools_view *out)
{
	size_t n = 0;
	list_for_each(dpos, &pgv.databases)
		n += container_of(dpos, struct db, node)->pools.count;
	out->v = xcalloc(n ? n : 1, sizeof(*out->v));
	out->n = 0;
	list_for_each(dpos, &pgv.databases) {
		struct db *db = container_of(dpos, struct db, node);
		list_for_each(ppos, &db->pools)
			out->v[out->n++] = container_of(ppos, struct pool, node);
	}
	qsort(out->v, out->n, sizeof(*out->v), cmp_pool);
}

static int db_client_count(const struct db *db)
{
	int n = 0;
	list_for_each(pos, &db->pools) {
		const struct pool *pool = container_of(pos, struct pool, node);
		n += (int)(pool->active_clients.count + pool->idle_clients.count + pool->waiting_clients.count +
			   pool->welcome_clients.count);
	}
	return n;
}

/* ---------------------------------------------------------------- SHOW commands */

static const char *load_balance_text(const struct db *db)
{
	if (db->is_admin || !strchr(db->cfg->host, ','))
		return NULL;
	return config_load_balance_hosts_name(db->cfg->load_balance_hosts);
}

static void show_pools(struct admin_result *r)
{
	static const char *const names[] = {
		"database", "user", "cl_active", "cl_waiting", "cl_active_cancel_req", "cl_waiting_cancel_req",
		"sv_active", "sv_active_cancel", "sv_being_canceled", "sv_idle", "sv_used", "sv_tested",
		"sv_login", "maxwait", "maxwait_us", "pool_mode", "load_balance_hosts",
	};
	struct pools_view pv;
	struct cells c;
	usec_t now = now_usec();

	admin_result_begin(r, "ssiiiiiiiiiiiiiss", names);
	pools_sorted(&pv);
	for (size_t k = 0; k < pv.n; k++) {
		struct pool *pool = pv.v[k];
		struct db *db = pool->db;
		usec_t maxwait = pool_max_wait(pool, now);
		int being_canceled, active_cancel;
		pool_count_cancels(pool, &active_cancel, &being_canceled);
		cells_reset(&c);
		cell_str(&c, db->name);
		cell_str(&c, pool->user);
		cell_int(&c, pool->active_clients.count + pool->idle_clients.count);
		cell_int(&c, pool->waiting_clients.count + pool->welcome_clients.count);
		cell_int(&c, 0);
		cell_int(&c, 0);
		cell_int(&c, (long long)pool->active_servers.count - active_cancel);
		cell_int(&c, active_cancel);
		cell_int(&c, being_canceled);
		int stale = pool_stale_idle_count(pool);	/* PgBouncer shows them as sv_used */
		cell_int(&c, (long long)pool->idle_servers.count - stale);
		cell_int(&c, (long long)pool->used_servers.count - being_canceled + stale);
		cell_int(&c, pool->tested_servers.count);
		cell_int(&c, pool->login_servers.count);
		cell_int(&c, maxwait / USEC_PER_SEC);
		cell_int(&c, maxwait % USEC_PER_SEC);
		cell_str(&c, db->is_admin ? "statement" : pool_mode_name(pool_effective_mode(pool)));
		cell_str(&c, load_balance_text(db));
		admin_result_row(r, c.v);
	}
	free(pv.v);
}

/* Counters in SHOW order (PgBouncer 1.26's): the 12 of every stats view. */
static void cells_totals(struct cells *c, const struct stats *t)
{
	cell_uint(c, t->server_assignment_count);
	cell_uint(c, t->xact_count);
	cell_uint(c, t->query_count);
	cell_uint(c, t->bytes_received);
	cell_uint(c, t->bytes_sent);
	cell_uint(c, t->xact_time);
	cell_uint(c, t->query_time);
	cell_uint(c, t->wait_time);
	cell_uint(c, t->client_parse_count);
	cell_uint(c, t->server_parse_count);
	cell_uint(c, t->bind_count);
	cell_uint(c, t->client_login_count);
}

static void cells_averages(struct cells *c, const struct stats_averages *a)
{
	cell_uint(c, a->server_assignment_count);
	cell_uint(c, a->xact_count);
	cell_uint(c, a->query_count);
	cell_uint(c, a->bytes_received);
	cell_uint(c, a->bytes_sent);
	cell_uint(c, a->xact_time);
	cell_uint(c, a->query_time);
	cell_uint(c, a->wait_time);
	cell_uint(c, a->client_parse_count);
	cell_uint(c, a->server_parse_count);
	cell_uint(c, a->bind_count);
	cell_uint(c, a->client_login_count);
}

enum stats_view { STATS_ALL, STATS_TOTALS_ONLY, STATS_AVERAGES_ONLY };

static void show_stats(struct admin_result *r, enum stats_view view)
{
	/* PgBouncer's names differ between the three views; kept exactly. */
	static const char *const all[] = {
		"database", "total_server_assignment_count", "total_xact_count", "total_query_count",
		"total_received", "total_sent", "total_xact_time", "total_query_time", "total_wait_time",
		"total_client_parse_count", "total_server_parse_count", "total_bind_count", "total_client_login_count",
		"avg_server_assignment_count", "avg_xact_count", "avg_query_count", "avg_recv", "avg_sent",
		"avg_xact_time", "avg_query_time", "avg_wait_time", "avg_client_parse_count",
		"avg_server_parse_count", "avg_bind_count", "avg_client_login_count",
	};
	static const char *const totals[] = {
		"database", "server_assignment_count", "xact_count", "query_count", "bytes_received",
		"bytes_sent", "xact_time", "query_time", "wait_time", "client_parse_count",
		"server_parse_count", "bind_count", "client_login_count",
	};
	static const char *const avgs[] = {
		"database", "server_assignment_count", "xact_count", "query_count", "bytes_received",
		"bytes_sent", "xact_time", "query_time", "wait_time", "avg_client_parse_count",
		"avg_server_parse_count", "avg_bind_count", "avg_client_login_count",
	};
	struct dbs_view dv;
	struct cells c;
	usec_t now = now_usec();

	if (view == STATS_ALL)
		admin_result_begin(r, "sNNNNNNNNNNNNNNNNNNNNNNNN", all);
	else
		admin_result_begin(r, "sNNNNNNNNNNNN", view == STATS_TOTALS_ONLY ? totals : avgs);
	dbs_sorted(&dv);
	for (size_t k = 0; k < dv.n; k++) {
		struct db *db = dv.v[k];
		if (list_empty(&db->pools))
			continue;	/* as PgBouncer: databases that have a pool */
		struct stats_averages a;
		stats_live_averages(&db->stats, now, &a);
		cells_reset(&c);
		cell_str(&c, db->name);
		if (view != STATS_AVERAGES_ONLY)
			cells_totals(&c, &db->stats.total);
		if (view != STATS_TOTALS_ONLY)
			cells_averages(&c, &a);
		admin_result_row(r, c.v);
	}
	free(dv.v);
}

/* SHOW TOTALS: sums over every database, one (name, value) row per counter. */
static void show_totals(struct admin_result *r)
{
	static const char *const names[] = { "name", "value" };
	static const char *const rows[] = {
		"total_server_assignment_count", "total_xact_count", "total_query_count", "total_client_bytes",
		"total_server_bytes", "total_xact_time", "total_query_time", "total_wait_time",
		"total_ps_client_parse_count", "total_ps_server_parse_count", "total_ps_bind_count",
		"total_client_login_count", "avg_server_assignment_count", "avg_xact_count", "avg_query_count", "avg_client_bytes",
		"avg_server_bytes", "avg_xact_time", "avg_query_time", "avg_wait_time",
		"avg_ps_client_parse_count", "avg_ps_server_parse_count", "avg_ps_bind_count",
		"avg_client_login_count",
	};
	struct stats_period sum;
	usec_t now = now_usec();
	memset(&sum, 0, sizeof(sum));
	sum.older_stamp = now;
	list_for_each(dpos, &pgv.databases) {
		struct db *db = container_of(dpos, struct db, node);
		stats_add(&sum.total, &db->stats.total);
		stats_add(&sum.older, &db->stats.older);
		sum.older_stamp = MIN(sum.older_stamp, db->stats.older_stamp);
	}
	struct stats_averages a;
	stats_live_averages(&sum, now, &a);
	struct cells c;
	cells_reset(&c);
	cells_totals(&c, &sum.total);
	cells_averages(&c, &a);
	admin_result_begin(r, "sN", names);
	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		const char *row[2] = { rows[i], c.v[i] };
		admin_result_row(r, row);
	}
}

static const char *const conn_names[] = {
	"type", "user", "database", "replication", "state", "addr", "port", "local_addr", "local_port",
	"connect_time", "request_time", "wait", "wait_us", "close_needed", "ptr", "link", "remote_pid",
	"tls", "application_name", "prepared_statements", "id", "recv_pos", "pkt_pos", "pkt_remain",
	"send_pos", "send_remain", "pkt_avail", "send_avail",
};
#define CONN_TYPES "ssssssisiTTiiississii"
#define CONN_COLUMNS 21		/* SHOW CLIENTS; then SHOW SERVERS' own, SHOW SOCKETS' own */
#define SOCKET_TYPES CONN_TYPES "iiiiiii"

static void addr_text(const struct sockaddr *sa, char *host, size_t size, int *port)
{
	if (!sockaddr_ip_text(sa, host, size, port)) {
		snprintf(host, size, "unix");
		*port = pgv.cfg->listen_port;
	}
}

static void local_addr_text(int fd, char *host, size_t size, int *port)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	if (fd < 0 || getsockname(fd, (struct sockaddr *)&ss, &len) < 0) {
		snprintf(host, size, "unix");
		*port = pgv.cfg->listen_port;
		return;
	}
	addr_text((struct sockaddr *)&ss, host, size, port);
}

/* The debug columns of SHOW SOCKETS, from what netbuf can tell. */
static void socket_cells(struct cells *c, const struct netbuf *nb)
{
	uint32_t buffered = netbuf_buffered(nb), queued = netbuf_queue_len(nb);
	cell_int(c, buffered);
	cell_int(c, 0);
	cell_int(c, nb->pkt_remaining);
	cell_int(c, 0);
	cell_int(c, 0);
	cell_int(c, buffered);
	cell_int(c, queued);
}

static void client_row(struct admin_result *r, const struct client *client, const char *state, bool debug)
{
	struct cells c;
	char host[INET6_ADDRSTRLEN], lhost[INET6_ADDRSTRLEN];
	int port = 0, lport = 0;
	usec_t now = now_usec();
	struct sockaddr_storage ss;

	client_sockaddr(client, &ss);	/* a Unix socket's reads as AF_UNSPEC: "unix" */
	addr_text((struct sockaddr *)&ss, host, sizeof(host), &port);
	local_addr_text(client->nb.fd, lhost, sizeof(lhost), &lport);
	/* wait: how long its current request has taken, queued or running */
	usec_t since = client->state == CL_WAITING || client->state == CL_WELCOME ||
		client->state == CL_PARAMS_WAITING ? client->request_time :
		client->link && client->link->query_start ? client->link->query_start : 0;
	usec_t wait = since ? MAX(now - since, 0) : 0;
	const char *appname = varcache_get(client->vars, varcache_index("application_name"));
	cells_reset(&c);
	cell_str(&c, "C");
	cell_str(&c, client_user_name(client));
	cell_str(&c, client_db_name(client));
	cell_str(&c, replication_type_name(client_repl(client) ? client_repl(client)->type : REPLICATION_NONE));
	cell_str(&c, state);
	cell_str(&c, host);
	cell_int(&c, port);
	cell_str(&c, lhost);
	cell_int(&c, lport);
	cell_time(&c, client->connect_time);
	cell_time(&c, client->request_time);
	cell_int(&c, wait / USEC_PER_SEC);
	cell_int(&c, wait % USEC_PER_SEC);
	cell_int(&c, 0);
	cell_ptr(&c, client);
	cell_ptr(&c, client->link);
	cell_int(&c, 0);
	netbuf_tls_describe(&client->nb, c.buf[c.n], sizeof(c.buf[0]));
	c.v[c.n] = c.buf[c.n];
	c.n++;
	cell_str(&c, appname ? appname : "");
	cell_int(&c, prepare_client_count(client));
	cell_uint(&c, client->id);
	if (debug)
		socket_cells(&c, &client->nb);
	admin_result_row(r, c.v);
}

/* After PgBouncer's columns: SHOW SOCKETS' buffer columns (debug), or SHOW SERVERS' role. */
static void server_row(struct admin_result *r, const struct server *server, const char *state, bool debug)
{
	struct cells c;
	char host[256], lhost[INET6_ADDRSTRLEN];
	int port = 0, lport = 0;

	if (server->addr.sa.sa_family == AF_UNIX) {
		snprintf(host, sizeof(host), "unix");
		port = server->pool->db->cfg->port;
	} else if (server->addr.sa.sa_family == AF_UNSPEC) {
		/* still looking its host name up: no address yet */
		snprintf(host, sizeof(host), "%s", server->host ? server->host : "");
		port = server->pool->db->cfg->port;
	} else {
		addr_text(&server->addr.sa, host, sizeof(host), &port);
	}
	local_addr_text(server->nb.fd, lhost, sizeof(lhost), &lport);
	const char *appname = varcache_get(server->vars, varcache_index("application_name"));
	cells_reset(&c);
	cell_str(&c, "S");
	cell_str(&c, server->pool->user);
	cell_str(&c, server->pool->db->name);
	cell_str(&c, replication_type_name((enum replication_type)server->replication));
	cell_str(&c, state);
	cell_str(&c, host);
	cell_int(&c, port);
	cell_str(&c, lhost);
	cell_int(&c, lport);
	cell_time(&c, server->connect_time);
	cell_time(&c, server->last_used);
	cell_int(&c, 0);
	cell_int(&c, 0);
	cell_int(&c, server->close_needed ? 1 : 0);
	cell_ptr(&c, server);
	cell_ptr(&c, server->link);
	cell_int(&c, (long long)server->be_pid);
	netbuf_tls_describe(&server->nb, c.buf[c.n], sizeof(c.buf[0]));
	c.v[c.n] = c.buf[c.n];
	c.n++;
	cell_str(&c, appname ? appname : "");
	cell_int(&c, prepare_server_count(server));
	cell_uint(&c, server->id);
	if (debug)
		socket_cells(&c, &server->nb);
	else
		cell_str(&c, server->role == SERVER_ROLE_UNKNOWN ? "" : roles_role_name((enum server_role)server->role));
	admin_result_row(r, c.v);
}

static void show_clients(struct admin_result *r)
{
	struct pools_view pv;
	admin_result_begin(r, CONN_TYPES, conn_names);
	pools_sorted(&pv);
	for (size_t k = 0; k < pv.n; k++) {
		struct pool *pool = pv.v[k];
		list_for_each(pos, &pool->active_clients)
			client_row(r, container_of(pos, struct client, node), "active", false);
		list_for_each(pos, &pool->idle_clients)	/* 1.25 shows "idle" for clients without a server */
			client_row(r, container_of(pos, struct client, node), "idle", false);
		list_for_each(pos, &pool->waiting_clients)
			client_row(r, container_of(pos, struct client, node), "waiting", false);
		list_for_each(pos, &pool->welcome_clients)
			client_row(r, container_of(pos, struct client, node), "waiting", false);
	}
	free(pv.v);
}

/* PgBouncer's columns, then pgvalve's: role (target_session_attrs, roles.h; "" while unknown). */
static void show_servers(struct admin_result *r)
{
	struct pools_view pv;
	const char *names[CONN_COLUMNS + 1];
	memcpy(names, conn_names, sizeof(names[0]) * CONN_COLUMNS);
	names[CONN_COLUMNS] = "role";
	admin_result_begin(r, CONN_TYPES "s", names);
	pools_sorted(&pv);
	for (size_t k = 0; k < pv.n; k++) {
		struct pool *pool = pv.v[k];
		list_for_each(pos, &pool->active_servers) {
			const struct server *sv = container_of(pos, struct server, node);
			server_row(r, sv, sv->cancels_in_flight ? "active_cancel" : "active", false);
		}
		list_for_each(pos, &pool->idle_servers) {
			const struct server *sv = container_of(pos, struct server, node);
			if (!pool_server_needs_check(sv))
				server_row(r, sv, "idle", false);
		}
		list_for_each(pos, &pool->idle_servers) {	/* past server_check_delay: "used", as PgBouncer */
			const struct server *sv = container_of(pos, struct server, node);
			if (pool_server_needs_check(sv))
				server_row(r, sv, "used", false);
		}
		list_for_each(pos, &pool->used_servers) {
			const struct server *sv = container_of(pos, struct server, node);
			server_row(r, sv, sv->cancels_in_flight ? "being_canceled" : "used", false);
		}
		list_for_each(pos, &pool->tested_servers)
			server_row(r, container_of(pos, struct server, node), "tested", false);
		list_for_each(pos, &pool->login_servers)
			server_row(r, container_of(pos, struct server, node), "new", false);
	}
	free(pv.v);
}

static void show_sockets(struct admin_result *r, bool active_only)
{
	struct pools_view pv;
	admin_result_begin(r, SOCKET_TYPES, conn_names);
	pools_sorted(&pv);
#define BUSY(nb) (!active_only || netbuf_buffered(nb) || netbuf_queue_len(nb) || (nb)->pkt_remaining)
	for (size_t k = 0; k < pv.n; k++) {
		struct pool *pool = pv.v[k];
		const struct { struct list *l; const char *state; bool client; } lists[] = {
			{ &pool->active_clients, "cl_active", true }, { &pool->idle_clients, "cl_active", true },
			{ &pool->waiting_clients, "cl_waiting", true },
			{ &pool->welcome_clients, "cl_waiting", true }, { &pool->active_servers, "sv_active", false },
			{ &pool->idle_servers, "sv_idle", false }, { &pool->used_servers, "sv_used", false },
			{ &pool->tested_servers, "sv_tested", false }, { &pool->login_servers, "sv_login", false },
		};
		for (size_t i = 0; i < ARRAY_SIZE(lists); i++) {
			list_for_each(pos, lists[i].l) {
				if (lists[i].client) {
					const struct client *cl = container_of(pos, struct client, node);
					if (BUSY(&cl->nb))
						client_row(r, cl, lists[i].state, true);
				} else {
					const struct server *sv = container_of(pos, struct server, node);
					bool stale = lists[i].l == &pool->idle_servers && pool_server_needs_check(sv);
					if (BUSY(&sv->nb))
						server_row(r, sv, stale ? "sv_used" : lists[i].state, true);
				}
			}
		}
	}
	list_for_each(pos, &pgv.login_clients) {
		const struct client *cl = container_of(pos, struct client, node);
		if (BUSY(&cl->nb))
			client_row(r, cl, "cl_login", true);
	}
#undef BUSY
	free(pv.v);
}

static void show_config(struct admin_result *r)
{
	static const char *const names[] = { "key", "value", "default", "changeable" };
	size_t n;
	const struct param_def *params = config_params(&n);
	char value[1024];
	admin_result_begin(r, "ssss", names);
	for (size_t i = 0; i < n; i++) {
		const struct param_def *p = &params[i];
		if (p->alias_of)
			continue;	/* service_name: the same setting as job_name */
		if (p->type == PARAM_OCTAL)	/* PgBouncer prints the number, e.g. 511 for 0777 */
			snprintf(value, sizeof(value), "%d", *(const int *)((const char *)pgv.cfg + p->offset));
		else
			config_format_value(pgv.cfg, p, value, sizeof(value));
		/* PgBouncer shows NULL for these unset settings and defaults. */
		static const char *const null_default[] = { "auth_dbname", "auth_file", "auth_ident_file",
			"auth_ldap_options", "auth_user", "client_tls13_ciphers", "conffile", "server_tls13_ciphers",
			"user", "verbose" };
		static const char *const null_when_empty[] = { "auth_dbname", "auth_user", "auth_ident_file",
			"auth_ldap_options", "client_tls13_ciphers", "server_tls13_ciphers", "user" };
		const char *def = p->default_value, *val = value;
		for (size_t k = 0; k < ARRAY_SIZE(null_default); k++)
			if (strcmp(p->name, null_default[k]) == 0)
				def = NULL;
		for (size_t k = 0; k < ARRAY_SIZE(null_when_empty); k++)
			if (strcmp(p->name, null_when_empty[k]) == 0 && !value[0])
				val = NULL;
		/* stats_users read this too: a forged long cancel key must not be one SHOW away */
		if (strcmp(p->name, "cancel_key_secret") == 0 && value[0])
			val = "(set, not shown)";
		char masked[sizeof(value)];
		if (strcmp(p->name, "auth_ldap_options") == 0 && value[0]) {
			ldap_auth_mask_options(value, masked, sizeof(masked));	/* ldapbindpasswd */
			val = masked;
		}
		const char *row[4] = { p->name, val, def, p->reloadable ? "yes" : "no" };
		admin_result_row(r, row);
	}
}

static void show_databases(struct admin_result *r)
{
	static const char *const names[] = {
		"name", "host", "port", "database", "force_user", "pool_size", "min_pool_size",
		"reserve_pool_size", "server_lifetime", "pool_mode", "load_balance_hosts", "max_connections",
		"current_connections", "max_client_connections", "current_client_connections", "paused", "disabled",
	};
	const struct config *cfg = pgv.cfg;
	struct dbs_view dv;
	struct cells c;
	admin_result_begin(r, "ssissiiiissiiiiii", names);
	dbs_sorted(&dv);
	for (size_t k = 0; k < dv.n; k++) {
		const struct db *db = dv.v[k];
		const struct db_config *dc = db->cfg;
		cells_reset(&c);
		cell_str(&c, db->name);
		if (db->is_admin) {
			cell_null(&c);
			cell_int(&c, cfg->listen_port);
			cell_str(&c, "pgbouncer");
			cell_str(&c, "pgbouncer");
			cell_int(&c, 2);
		} else {
			cell_str(&c, dc->host[0] ? dc->host : NULL);
			cell_int(&c, dc->port);
			cell_str(&c, dc->dbname[0] ? dc->dbname : db->name);
			cell_str(&c, dc->user[0] ? dc->user : NULL);
			cell_int(&c, dc->pool_size >= 0 ? dc->pool_size : cfg->default_pool_size);
		}
		cell_int(&c, dc->min_pool_size >= 0 ? dc->min_pool_size : cfg->min_pool_size);
		cell_int(&c, dc->reserve_pool_size >= 0 ? dc->reserve_pool_size : cfg->reserve_pool_size);
		cell_int(&c, (dc->server_lifetime > 0 ? dc->server_lifetime : cfg->server_lifetime) / USEC_PER_SEC);
		cell_str(&c, db->is_admin ? "statement" : dc->pool_mode >= 0 ? pool_mode_name(dc->pool_mode) : NULL);
		cell_str(&c, load_balance_text(db));
		cell_int(&c, dc->max_db_connections > 0 ? dc->max_db_connections : cfg->max_db_connections);
		cell_int(&c, db->server_count);
		cell_int(&c, dc->max_db_client_connections > 0 ? dc->max_db_client_connections :
							       cfg->max_db_client_connections);
		cell_int(&c, db_client_count(db));
		cell_int(&c, db->paused ? 1 : 0);
		cell_int(&c, db->disabled ? 1 : 0);
		admin_result_row(r, c.v);
	}
	free(dv.v);
}

static void show_users(struct admin_result *r)
{
	static const char *const names[] = {
		"name", "pool_size", "reserve_pool_size", "pool_mode", "max_user_connections",
		"current_connections", "max_user_client_connections", "current_client_connections",
	};
	struct user_row *rows;
	size_t n = users_collect(&rows);
	struct cells c;
	admin_result_begin(r, "ssssiiii", names);
	for (size_t k = 0; k < n; k++) {
		const struct user_config *uc = config_find_user(pgv.cfg, rows[k].name);
		cells_reset(&c);
		cell_str(&c, rows[k].name);
		/* As PgBouncer: a right-aligned number, or "" when the user sets none. */
		if (uc && uc->pool_size >= 0)
			snprintf(c.buf[c.n], sizeof(c.buf[0]), "%9d", uc->pool_size);
		else
			c.buf[c.n][0] = '\0';
		c.v[c.n] = c.buf[c.n];
		c.n++;
		if (uc && uc->reserve_pool_size >= 0)
			snprintf(c.buf[c.n], sizeof(c.buf[0]), "%9d", uc->reserve_pool_size);
		else
			c.buf[c.n][0] = '\0';
		c.v[c.n] = c.buf[c.n];
		c.n++;
		cell_str(&c, uc && uc->pool_mode >= 0 ? pool_mode_name(uc->pool_mode) : NULL);
		cell_int(&c, uc && uc->max_user_connections > 0 ? uc->max_user_connections : pgv.cfg->max_user_connections);
		cell_int(&c, rows[k].servers);
		cell_int(&c, uc && uc->max_user_client_connections > 0 ? uc->max_user_client_connections :
									 pgv.cfg->max_user_client_connections);
		cell_int(&c, rows[k].clients);
		admin_result_row(r, c.v);
	}
	free(rows);
}

static void show_lists(struct admin_result *r)
{
	static const char *const names[] = { "list", "items" };
	int pools = 0, used_clients = (int)pgv.client_count, used_servers = (int)pgv.server_count;
	list_for_each(dpos, &pgv.databases)
		pools += (int)container_of(dpos, struct db, node)->pools.count;
	size_t users = users_count();
	/* SHOW PEER_POOLS has a row for every configured peer, as in PgBouncer. */
	int peers = 0;
	for (const struct peer_config *pc = pgv.cfg->peers; pc; pc = pc->next)
		peers++;
	/* dns_queries: lookups in flight; dns_pending: connections waiting on them */
	struct dns_stats ds;
	dns_get_stats(&ds);
	struct { const char *name; long long v; } rows[] = {
		{ "databases", pgv.databases.count }, { "users", (long long)users }, { "peers", peers },
		{ "pools", pools }, { "peer_pools", peers }, { "free_clients", 0 }, { "used_clients", used_clients },
		{ "login_clients", pgv.login_clients.count }, { "free_servers", 0 },
		{ "used_servers", used_servers }, { "dns_names", ds.names }, { "dns_zones", ds.zones },
		{ "dns_queries", ds.queries }, { "dns_pending", ds.pending },
	};
	struct cells c;
	admin_result_begin(r, "si", names);
	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		cells_reset(&c);
		cell_str(&c, rows[i].name);
		cell_int(&c, rows[i].v);
		admin_result_row(r, c.v);
	}
}

static void show_mem(struct admin_result *r)
{
	static const char *const names[] = { "name", "size", "used", "free", "memtotal" };
	uint32_t free_bufs, used_bufs, bufsize, shared_count;
	uint64_t shared_bytes;
	netbuf_buffer_stats(&free_bufs, &used_bufs, &bufsize);
	prepare_shared_stats(&shared_count, &shared_bytes);
	int pools = 0;
	list_for_each(dpos, &pgv.databases)
		pools += (int)container_of(dpos, struct db, node)->pools.count;
	struct { const char *name; long long size, used, free; } rows[] = {
		{ "db_cache", (long long)sizeof(struct db), pgv.databases.count, 0 },
		{ "pool_cache", (long long)sizeof(struct pool), pools, 0 },
		{ "server_cache", (long long)sizeof(struct server), pgv.server_count, 0 },
		{ "client_cache", (long long)sizeof(struct client), pgv.client_count, 0 },
		{ "iobuf_cache", bufsize, used_bufs, free_bufs },
		/* pgvalve's: one copy of each distinct prepared statement, size its average with the text */
		{ "prepared_statement_cache", shared_count ? (long long)(shared_bytes / shared_count) : 0,
		  shared_count, 0 },
	};
	struct cells c;
	admin_result_begin(r, "siiii", names);
	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		cells_reset(&c);
		cell_str(&c, rows[i].name);
		cell_int(&c, rows[i].size);
		cell_int(&c, rows[i].used);
		cell_int(&c, rows[i].free);
		cell_int(&c, rows[i].size * (rows[i].used + rows[i].free));
		admin_result_row(r, c.v);
	}
}

static void show_version(struct admin_result *r)
{
	static const char *const names[] = { "version" };
	const char *row[1] = { PGVALVE_VERSION_STRING };
	admin_result_begin(r, "s", names);
	admin_result_row(r, row);
}

static void show_state(struct admin_result *r)
{
	static const char *const names[] = { "key", "value" };
	const char *rows[][2] = {
		{ "active", pgv.paused_all ? "no" : "yes" },
		{ "paused", pgv.paused_all ? "yes" : "no" },
		{ "suspended", "no" },	/* SUSPEND is gone (PgBouncer 1.26); the row stays for what reads it */
	};
	admin_result_begin(r, "ss", names);
	for (size_t i = 0; i < ARRAY_SIZE(rows); i++)
		admin_result_row(r, rows[i]);
}

static void show_peers(struct admin_result *r)
{
	static const char *const names[] = { "peer_id", "host", "port", "pool_size" };
	struct cells c;
	admin_result_begin(r, "isii", names);
	for (const struct peer_config *pc = pgv.cfg->peers; pc; pc = pc->next) {
		cells_reset(&c);
		cell_int(&c, pc->peer_id);
		cell_str(&c, pc->host);
		cell_int(&c, pc->port);
		cell_int(&c, pc->pool_size >= 0 ? pc->pool_size : pgv.cfg->default_pool_size);
		admin_result_row(r, c.v);
	}
}

static void show_peer_pools(struct admin_result *r)
{
	static const char *const names[] = { "peer_id", "cl_active_cancel_req", "cl_waiting_cancel_req",
					     "sv_active_cancel", "sv_login" };
	struct cells c;
	admin_result_begin(r, "iiiii", names);
	for (const struct peer_config *pc = pgv.cfg->peers; pc; pc = pc->next) {
		struct peer_pool_counts n;
		peer_get_pool_counts(pc->peer_id, &n);
		cells_reset(&c);
		cell_int(&c, pc->peer_id);
		cell_int(&c, n.cl_active_cancel_req);
		cell_int(&c, n.cl_waiting_cancel_req);
		cell_int(&c, n.sv_active_cancel);
		cell_int(&c, n.sv_login);
		admin_result_row(r, c.v);
	}
}

static void dns_host_row(void *arg, const char *name, long long ttl, const char *addrs)
{
	struct cells c;
	cells_reset(&c);
	cell_str(&c, name);
	cell_int(&c, ttl);
	cell_str(&c, addrs);
	admin_result_row(arg, c.v);
}

static void cells_worker_counters(struct cells *c, const struct worker_counters *w)
{
	const uint64_t v[] = { w->cl_active, w->cl_waiting, w->cl_idle, w->cl_login, w->sv_active, w->sv_idle,
			       w->sv_used, w->sv_login, w->xact_count, w->query_count, w->bytes_received,
			       w->bytes_sent, w->table_lockings, w->table_lock_waits, w->table_lock_wait_us };
	for (size_t i = 0; i < ARRAY_SIZE(v); i++)
		cell_uint(c, v[i]);
}

/*
 * SHOW WORKERS (pgvalve extension): one row per worker process from the
 * shared worker table, then a "total" row; any worker's console shows
 * them all; SHOW HELP lists it on a line of its own among PgBouncer's.
 * Counters are as of each worker's last janitor tick; the asking worker's
 * own row is brought up to date first.
 */
static void show_workers(struct admin_result *r)
{
	static const char *const names[] = {
		"worker", "pid", "peer_id", "state", "restarts", "started", "cl_active", "cl_waiting", "cl_idle",
		"cl_login", "sv_active", "sv_idle", "sv_used", "sv_login", "total_xact_count", "total_query_count",
		"total_received", "total_sent", "table_lockings", "table_lock_waits", "table_lock_wait_us",
	};
	struct cells c;
	struct worker_status sum = { 0 };
	admin_result_begin(r, "siisiTiiiiiiiiqqqqqqq", names);
	workers_publish();
	for (int k = 1; k <= workers_count(); k++) {
		struct worker_status w;
		workers_read(k, &w);
		cells_reset(&c);
		cell_int(&c, k);
		if (w.pid > 0)
			cell_int(&c, w.pid);
		else
			cell_null(&c);
		cell_int(&c, w.peer_id);
		cell_str(&c, worker_state_name(w.state));
		cell_uint(&c, w.restarts);
		if (w.started > 0)
			cell_time(&c, w.started);
		else
			cell_null(&c);
		cells_worker_counters(&c, &w.c);
		workers_add_counters(&sum.c, &w.c);
		sum.restarts += w.restarts;
		admin_result_row(r, c.v);
	}
	cells_reset(&c);
	cell_str(&c, "total");
	cell_null(&c);
	cell_null(&c);
	cell_null(&c);
	cell_uint(&c, sum.restarts);
	cell_null(&c);
	cells_worker_counters(&c, &sum.c);
	admin_result_row(r, c.v);
}

static void show_dns_hosts(struct admin_result *r)
{
	static const char *const names[] = { "hostname", "ttl", "addrs" };
	admin_result_begin(r, "sqs", names);
	dns_walk_hosts(dns_host_row, r);
}

static void dns_zone_row(void *arg, const char *zone, long long serial, int count)
{
	struct cells c;
	cells_reset(&c);
	cell_str(&c, zone);
	cell_int(&c, serial);
	cell_int(&c, count);
	admin_result_row(arg, c.v);
}

static void show_dns_zones(struct admin_result *r)
{
	static const char *const names[] = { "zonename", "serial", "count" };
	admin_result_begin(r, "sqi", names);
	dns_walk_zones(dns_zone_row, r);
}

/* The read balancer's counts for entry idx of db's list (balance_fresh.h). */
static void host_balance_cells(struct cells *c, const struct db *db, int idx)
{
	struct balance_counts bc;
	balance_host_counts(db, idx, &bc);
	cell_uint(c, bc.xacts);
	cell_uint(c, bc.reads_balanced);
	cell_uint(c, bc.reads_fresh);
	cell_uint(c, bc.reads_retried);
}

/* pgvalve's own: one row per database and entry of its host list (role routing, roles.h). */
static void show_hosts(struct admin_result *r)
{
	static const char *const names[] = { "database", "host", "port", "role", "state", "lag", "lag_seconds",
					     "last_check", "sv_count", "xact_count", "reads_balanced", "reads_kept_fresh",
					     "reads_retried" };
	admin_result_begin(r, "ssissqNTiqqqq", names);
	list_for_each(pos, &pgv.databases) {
		const struct db *db = container_of(pos, struct db, node);
		struct roles_host_info hosts[32];
		if (db->is_admin)
			continue;
		size_t n = MIN(roles_db_hosts(db, hosts, ARRAY_SIZE(hosts)), ARRAY_SIZE(hosts));
		for (size_t i = 0; i < n; i++) {
			struct cells c;
			cells_reset(&c);
			cell_str(&c, db->name);
			cell_str(&c, hosts[i].host);
			cell_int(&c, hosts[i].port);
			cell_str(&c, roles_role_name(hosts[i].role));
			cell_str(&c, hosts[i].state);
			if (hosts[i].lag >= 0)
				cell_int(&c, hosts[i].lag);
			else
				cell_null(&c);
			if (hosts[i].lag_seconds >= 0)
				cell_seconds(&c, hosts[i].lag_seconds);
			else
				cell_null(&c);
			if (hosts[i].last_check)
				cell_time(&c, hosts[i].last_check);
			else
				cell_null(&c);
			cell_int(&c, hosts[i].servers);
			host_balance_cells(&c, db, (int)i);
			admin_result_row(r, c.v);
		}
	}
}

/* SHOW LISTENERS (pgvalve): per pool, each channel its listener LISTENs and how many clients listen on it. */
static void listener_row(void *arg, const struct pool *pool, const char *channel, int clients)
{
	struct cells c;
	cells_reset(&c);
	cell_str(&c, pool->db->name);
	cell_str(&c, pool->user);
	cell_str(&c, channel);
	cell_int(&c, clients);
	admin_result_row(arg, c.v);
}

static void show_listeners(struct admin_result *r)
{
	static const char *const names[] = { "database", "user", "channel", "listeners" };
	struct pools_view pv;
	admin_result_begin(r, "sssi", names);
	pools_sorted(&pv);
	for (size_t i = 0; i < pv.n; i++)
		notify_each_channel(pv.v[i], listener_row, r);
	free(pv.v);
}

static void tenant_row(void *arg, const struct tenant_view *v)
{
	struct cells c;
	cells_reset(&c);
	cell_str(&c, v->id);
	cell_str(&c, v->state);
	if (v->database) {
		cell_str(&c, v->database);
		cell_str(&c, v->host);
		cell_int(&c, v->port);
	} else {
		cell_null(&c);
		cell_null(&c);
		cell_null(&c);
	}
	cell_int(&c, v->clients);
	cell_int(&c, v->servers);
	cell_int(&c, v->waiting);
	if (v->age >= 0)
		cell_int(&c, v->age);
	else
		cell_null(&c);
	admin_result_row(arg, c.v);
}

/* The tenants looked up so far (tenant.h), one row each. */
static void show_tenants(struct admin_result *r)
{
	static const char *const names[] = { "tenant", "state", "database", "host", "port", "clients",
					     "servers", "waiting", "age" };
	admin_result_begin(r, "ssssiiiii", names);
	tenant_foreach(tenant_row, r);
}

static const char help_text[] =
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

/* SHOW <parameter> as PgBouncer fakes it, for drivers that ask on connect; SET of one is ignored. */
static const char *const fake_params[][2] = {
	{ "client_encoding", "UTF-8" },
	{ "default_transaction_isolation", "read committed" },
	{ "standard_conforming_strings", "on" },
	{ "datestyle", "ISO" },
	{ "timezone", "GMT" },
	{ "extra_float_digits", "2" },
};

bool admin_show_is_fake_param(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(fake_params); i++)
		if (admin_word_is(name, fake_params[i][0]))
			return true;
	return false;
}

/* ---------------------------------------------------------------- the SHOW table */

struct show_entry {
	const char *name;
	void (*fn)(struct admin_result *r);
};

static void show_stats_all(struct admin_result *r) { show_stats(r, STATS_ALL); }
static void show_stats_totals(struct admin_result *r) { show_stats(r, STATS_TOTALS_ONLY); }
static void show_stats_averages(struct admin_result *r) { show_stats(r, STATS_AVERAGES_ONLY); }
static void show_sockets_all(struct admin_result *r) { show_sockets(r, false); }
static void show_sockets_active(struct admin_result *r) { show_sockets(r, true); }

static const struct show_entry shows[] = {
	{ "POOLS", show_pools },
	{ "STATS", show_stats_all },
	{ "STATS_TOTALS", show_stats_totals },
	{ "STATS_AVERAGES", show_stats_averages },
	{ "TOTALS", show_totals },
	{ "CLIENTS", show_clients },
	{ "SERVERS", show_servers },
	{ "SOCKETS", show_sockets_all },
	{ "ACTIVE_SOCKETS", show_sockets_active },
	{ "CONFIG", show_config },
	{ "DATABASES", show_databases },
	{ "USERS", show_users },
	{ "PEERS", show_peers },
	{ "PEER_POOLS", show_peer_pools },
	{ "LISTS", show_lists },
	{ "MEM", show_mem },
	{ "DNS_HOSTS", show_dns_hosts },
	{ "HOSTS", show_hosts },
	{ "DNS_ZONES", show_dns_zones },
	{ "VERSION", show_version },
	{ "STATE", show_state },
	{ "WORKERS", show_workers },
	{ "LISTENERS", show_listeners },
	{ "TENANTS", show_tenants },
};

bool admin_show_run(struct client *client, const char *what)
{
	struct admin_result r;
	if (admin_word_is(what, "HELP")) {
		admin_reply_notice(client, "Console usage", help_text, "SHOW");
		return true;
	}
	for (size_t i = 0; i < ARRAY_SIZE(shows); i++) {
		if (!admin_word_is(what, shows[i].name))
			continue;
		admin_result_init(&r, 4096);
		shows[i].fn(&r);
		admin_result_send(client, &r);
		return true;
	}
	for (size_t i = 0; i < ARRAY_SIZE(fake_params); i++) {
		if (!admin_word_is(what, fake_params[i][0]))
			continue;
		const char *names[1] = { fake_params[i][0] };
		const char *row[1] = { fake_params[i][1] };
		admin_result_init(&r, 256);
		admin_result_begin(&r, "s", names);
		admin_result_row(&r, row);
		admin_result_send(client, &r);
		return true;
	}
	return false;
}
