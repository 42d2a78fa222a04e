/*
 * admin.c - the admin console ("pgbouncer" / "pgvalve" database).
 *
 * Parses one simple-protocol query at a time, runs it against the live
 * objects (databases, pools, clients, servers, config, stats) and writes
 * the reply with PgBouncer's column names and types. Control commands
 * (PAUSE, RESUME, RECONNECT, KILL, SHUTDOWN, RELOAD, SET ...) change pool
 * and process state through pool.c, reload.c and loop.c.
 *
 * Owns: the admin db object and the list of console clients waiting for a
 * PAUSE/WAIT_CLOSE/SHUTDOWN to complete.
 */
#include "pgvalve/common.h"
#include "pgvalve/admin.h"
#include "pgvalve/admin_internal.h"
#include "pgvalve/auth_file.h"
#include "pgvalve/client.h"
#include "pgvalve/config.h"
#include "pgvalve/dns.h"
#include "pgvalve/listener.h"
#include "pgvalve/log.h"
#include "pgvalve/loop.h"
#include "pgvalve/netbuf.h"
#include "pgvalve/peer.h"
#include "pgvalve/pool.h"
#include "pgvalve/prepare.h"
#include "pgvalve/proto.h"
#include "pgvalve/replication.h"
#include "pgvalve/reload.h"
#include "pgvalve/server.h"
#include "pgvalve/stats.h"
#include "pgvalve/tls.h"
#include "pgvalve/workers.h"

#include <arpa/inet.h>
#include <signal.h>
#include <ctype.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

#define ADMIN_QUERY_MAX (64 * 1024)

/*
 * A console client waiting for its PAUSE, WAIT_CLOSE or SUSPEND to
 * complete. Kept here rather than on every client: consoles are few.
 */
enum admin_wait_kind { ADMIN_WAIT_PAUSE, ADMIN_WAIT_CLOSE, ADMIN_WAIT_SUSPEND };
struct admin_wait {
	struct list_node node;		/* adm.waits */
	struct client *client;
	enum admin_wait_kind what;
	struct db *db;			/* NULL: all databases */
};

static struct {
	struct db *db;
	struct list waits;		/* struct admin_wait, in the order they began */
	/* The instance pause a console PAUSE here waits for on the other workers (0: none). */
	uint32_t pause_gen;
	/* The generation of the instance pause state this worker follows (see workers.h). */
	uint32_t applied_gen;
} adm;

/* ---------------------------------------------------------------- setup */

bool admin_is_admin_dbname(const char *name)
{
	return strcmp(name, "pgbouncer") == 0 || strcmp(name, "pgvalve") == 0;
}

struct db *admin_db(void)
{
	return adm.db;
}

void admin_setup(void)
{
	list_init(&adm.waits);
	adm.db = pool_create_admin_db("pgbouncer");
}

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
	return db->cfg->load_balance_hosts == LOAD_BALANCE_HOSTS_DISABLE ? "disable" : "round-robin";
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
		cell_int(&c, pool->idle_servers.count);
		cell_int(&c, (long long)pool->used_servers.count - being_canceled);
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

/* Counters in SHOW order: the first 11 of every stats view. */
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
}

enum stats_view { STATS_ALL, STATS_TOTALS_ONLY, STATS_AVERAGES_ONLY };

static void show_stats(struct admin_result *r, enum stats_view view)
{
	/* PgBouncer's names differ between the three views; kept exactly. */
	static const char *const all[] = {
		"database", "total_server_assignment_count", "total_xact_count", "total_query_count",
		"total_received", "total_sent", "total_xact_time", "total_query_time", "total_wait_time",
		"total_client_parse_count", "total_server_parse_count", "total_bind_count",
		"avg_server_assignment_count", "avg_xact_count", "avg_query_count", "avg_recv", "avg_sent",
		"avg_xact_time", "avg_query_time", "avg_wait_time", "avg_client_parse_count",
		"avg_server_parse_count", "avg_bind_count",
	};
	static const char *const totals[] = {
		"database", "server_assignment_count", "xact_count", "query_count", "bytes_received",
		"bytes_sent", "xact_time", "query_time", "wait_time", "client_parse_count",
		"server_parse_count", "bind_count",
	};
	static const char *const avgs[] = {
		"database", "server_assignment_count", "xact_count", "query_count", "bytes_received",
		"bytes_sent", "xact_time", "query_time", "wait_time", "avg_client_parse_count",
		"avg_server_parse_count", "avg_bind_count",
	};
	struct dbs_view dv;
	struct cells c;
	usec_t now = now_usec();

	if (view == STATS_ALL)
		admin_result_begin(r, "sNNNNNNNNNNNNNNNNNNNNNN", all);
	else
		admin_result_begin(r, "sNNNNNNNNNNN", view == STATS_TOTALS_ONLY ? totals : avgs);
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
		"avg_server_assignment_count", "avg_xact_count", "avg_query_count", "avg_client_bytes",
		"avg_server_bytes", "avg_xact_time", "avg_query_time", "avg_wait_time",
		"avg_ps_client_parse_count", "avg_ps_server_parse_count", "avg_ps_bind_count",
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
	cell_str(&c, replication_type_name(client->repl ? client->repl->type : REPLICATION_NONE));
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
	tls_describe(netbuf_ssl(&client->nb), c.buf[c.n], sizeof(c.buf[0]));
	c.v[c.n] = c.buf[c.n];
	c.n++;
	cell_str(&c, appname ? appname : "");
	cell_int(&c, prepare_client_count(client));
	cell_uint(&c, client->id);
	if (debug)
		socket_cells(&c, &client->nb);
	admin_result_row(r, c.v);
}

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
	tls_describe(netbuf_ssl(&server->nb), c.buf[c.n], sizeof(c.buf[0]));
	c.v[c.n] = c.buf[c.n];
	c.n++;
	cell_str(&c, appname ? appname : "");
	cell_int(&c, prepare_server_count(server));
	cell_uint(&c, server->id);
	if (debug)
		socket_cells(&c, &server->nb);
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

static void show_servers(struct admin_result *r)
{
	struct pools_view pv;
	admin_result_begin(r, CONN_TYPES, conn_names);
	pools_sorted(&pv);
	for (size_t k = 0; k < pv.n; k++) {
		struct pool *pool = pv.v[k];
		list_for_each(pos, &pool->active_servers) {
			const struct server *sv = container_of(pos, struct server, node);
			server_row(r, sv, sv->cancels_in_flight ? "active_cancel" : "active", false);
		}
		list_for_each(pos, &pool->idle_servers)
			server_row(r, container_of(pos, struct server, node), "idle", false);
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
					if (BUSY(&sv->nb))
						server_row(r, sv, lists[i].state, true);
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

struct user_row {
	const char *name;
	int servers;
	int clients;
};

static int cmp_user_row(const void *a, const void *b)
{
	return strcmp(((const struct user_row *)a)->name, ((const struct user_row *)b)->name);
}

/* Users PgBouncer knows: auth_file, [users], pool users, and the built-in pgbouncer. */
static size_t collect_users(struct user_row **out)
{
	size_t cap = 16 + auth_store_count(pgv.auth), n = 0;
	for (const struct user_config *uc = pgv.cfg->users; uc; uc = uc->next)
		cap++;
	list_for_each(dpos, &pgv.databases)
		cap += container_of(dpos, struct db, node)->pools.count;
	cap += pool_user_count_list(NULL, 0);
	struct user_row *rows = xcalloc(cap, sizeof(*rows));
	rows[n++] = (struct user_row){ "pgbouncer", 0, 0 };
	for (size_t i = 0; i < auth_store_count(pgv.auth); i++)
		rows[n++] = (struct user_row){ auth_store_entry(pgv.auth, i)->user, 0, 0 };
	for (const struct user_config *uc = pgv.cfg->users; uc; uc = uc->next)
		rows[n++] = (struct user_row){ uc->name, 0, 0 };
	list_for_each(dpos, &pgv.databases) {
		struct db *db = container_of(dpos, struct db, node);
		list_for_each(ppos, &db->pools)
			rows[n++] = (struct user_row){ container_of(ppos, struct pool, node)->user, 0, 0 };
	}
	/* Everyone logged in or logging in, by the name they gave (forced-user databases and the console too). */
	size_t counted = pool_user_count_list(NULL, 0);
	const struct user_count **uc = xcalloc(counted + 1, sizeof(*uc));
	counted = pool_user_count_list(uc, counted);
	for (size_t i = 0; i < counted; i++)
		if (uc[i]->clients > 0)
			rows[n++] = (struct user_row){ uc[i]->name, 0, 0 };
	qsort(rows, n, sizeof(*rows), cmp_user_row);
	size_t w = 0;
	for (size_t i = 0; i < n; i++)
		if (w == 0 || strcmp(rows[w - 1].name, rows[i].name) != 0)
			rows[w++] = rows[i];
	/* Servers by the user they log in as, clients by the user they logged in as. */
	for (size_t i = 0; i < counted; i++) {
		struct user_row key = { uc[i]->name, 0, 0 };
		struct user_row *row = bsearch(&key, rows, w, sizeof(*rows), cmp_user_row);
		if (row) {
			row->servers = uc[i]->servers;
			row->clients = uc[i]->clients;
		}
	}
	free(uc);
	*out = rows;
	return w;
}

size_t admin_user_count(void)
{
	struct user_row *rows;
	size_t n = collect_users(&rows);
	free(rows);
	return n;
}

static void show_users(struct admin_result *r)
{
	static const char *const names[] = {
		"name", "pool_size", "reserve_pool_size", "pool_mode", "max_user_connections",
		"current_connections", "max_user_client_connections", "current_client_connections",
	};
	struct user_row *rows;
	size_t n = collect_users(&rows);
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
	size_t users = admin_user_count();
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
		{ "active", pgv.paused_all || pgv.suspended ? "no" : "yes" },
		{ "paused", pgv.paused_all ? "yes" : "no" },
		{ "suspended", pgv.suspended ? "yes" : "no" },
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
			       w->bytes_sent };
	for (size_t i = 0; i < ARRAY_SIZE(v); i++)
		cell_uint(c, v[i]);
}

/*
 * SHOW WORKERS (pgvalve extension): one row per worker process from the
 * shared worker table, then a "total" row; any worker's console shows
 * them all. Not in SHOW HELP, whose text stays PgBouncer's. Counters are as of each worker's last janitor tick; the
 * asking worker's own row is brought up to date first.
 */
static void show_workers(struct admin_result *r)
{
	static const char *const names[] = {
		"worker", "pid", "peer_id", "state", "restarts", "started", "cl_active", "cl_waiting", "cl_idle",
		"cl_login", "sv_active", "sv_idle", "sv_used", "sv_login", "total_xact_count", "total_query_count",
		"total_received", "total_sent",
	};
	struct cells c;
	struct worker_status sum = { 0 };
	admin_result_begin(r, "siisiTiiiiiiiiqqqq", names);
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

static const char help_text[] =
	"\n\tSHOW HELP|CONFIG|DATABASES|POOLS|CLIENTS|SERVERS|USERS|VERSION"
	"\n\tSHOW PEERS|PEER_POOLS"
	"\n\tSHOW SOCKETS|ACTIVE_SOCKETS|LISTS|MEM|STATE"
	"\n\tSHOW DNS_HOSTS|DNS_ZONES"
	"\n\tSHOW STATS|STATS_TOTALS|STATS_AVERAGES|TOTALS"
	"\n\tSET key = arg"
	"\n\tRELOAD"
	"\n\tPAUSE [<db>]"
	"\n\tRESUME [<db>]"
	"\n\tDISABLE <db>"
	"\n\tENABLE <db>"
	"\n\tRECONNECT [<db>]"
	"\n\tKILL [<db>]"
	"\n\tKILL_CLIENT <client_id>"
	"\n\tSUSPEND"
	"\n\tSHUTDOWN"
	"\n\tSHUTDOWN WAIT_FOR_SERVERS|WAIT_FOR_CLIENTS"
	"\n\tWAIT_CLOSE [<db>]";

/* SHOW <parameter> as PgBouncer fakes it, for drivers that ask on connect. */
static const char *const fake_params[][2] = {
	{ "client_encoding", "UTF-8" },
	{ "default_transaction_isolation", "read committed" },
	{ "standard_conforming_strings", "on" },
	{ "datestyle", "ISO" },
	{ "timezone", "GMT" },
	{ "extra_float_digits", "2" },
};

/* ---------------------------------------------------------------- command parsing */

static const char *skip_ws(const char *p)
{
	while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
		p++;
	return p;
}

/* Reads a word or quoted token into out; false on bad syntax, *too_long when it does not fit. */
static bool read_token(const char **pp, char quote_ok, char *out, size_t size, bool *too_long)
{
	const char *p = *pp;
	size_t n = 0, raw = 0;
	if (*p == '"' || (quote_ok && *p == '\'')) {
		char q = *p++;
		raw++;
		for (;;) {
			if (!*p)
				return false;
			if (*p == q) {
				if (p[1] != q)
					break;
				p++;
				raw++;
			}
			if (n + 1 < size)
				out[n++] = *p;
			p++;
			raw++;
		}
		p++;
		raw++;
		if (n == 0 && q == '"')
			return false;
	} else {
		while (isalnum((unsigned char)*p) || *p == '_') {
			if (n + 1 < size)
				out[n++] = *p;
			p++;
			raw++;
		}
		if (raw == 0)
			return false;
	}
	out[n] = '\0';
	if (raw >= size)
		*too_long = true;
	*pp = p;
	return true;
}

enum admin_parse_result admin_parse_command(const char *q, struct admin_command *cmd)
{
	bool too_long = false;
	memset(cmd, 0, sizeof(*cmd));
	const char *p = skip_ws(q);
	if (!read_token(&p, 0, cmd->verb, sizeof(cmd->verb), &too_long))
		return ADMIN_PARSE_INVALID;
	if (strcasecmp(cmd->verb, "set") == 0 && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) {
		const char *s = skip_ws(p);
		if (read_token(&s, 0, cmd->key, sizeof(cmd->key), &too_long)) {
			s = skip_ws(s);
			bool eq = false;
			if (*s == '=') {
				s++;
				eq = true;
			} else if (strncasecmp(s, "to", 2) == 0 && (s[2] == ' ' || s[2] == '\t' || s[2] == '\'' ||
								    s[2] == '"')) {
				s += 2;
				eq = true;
			}
			if (eq) {
				s = skip_ws(s);
				if (read_token(&s, '\'', cmd->value, sizeof(cmd->value), &too_long)) {
					s = skip_ws(s);
					if (*s == ';')
						s = skip_ws(s + 1);
					if (!*s) {
						cmd->is_set = true;
						return too_long ? ADMIN_PARSE_TOO_LONG : ADMIN_PARSE_OK;
					}
				}
			}
		}
		too_long = false;
	}
	const char *after_verb = p;
	p = skip_ws(p);
	if (*p && *p != ';') {
		if (p == after_verb)
			return ADMIN_PARSE_INVALID;	/* no white space between the words */
		if (!read_token(&p, 0, cmd->arg, sizeof(cmd->arg), &too_long))
			return ADMIN_PARSE_INVALID;
		cmd->has_arg = true;
		p = skip_ws(p);
	}
	if (*p == ';')
		p = skip_ws(p + 1);
	if (*p)
		return ADMIN_PARSE_INVALID;
	return too_long ? ADMIN_PARSE_TOO_LONG : ADMIN_PARSE_OK;
}

static bool word_is(const char *w, const char *kw)
{
	return strcasecmp(w, kw) == 0;
}

static bool user_is_admin(const struct client *client)
{
	return client->admin_superuser || config_list_contains(pgv.cfg->admin_users, client_user_name(client));
}

/* ---------------------------------------------------------------- suspend */

/* The client owning nb, or NULL if nb belongs to a server (handlers tell them apart). */
static struct client *admin_client_of(struct netbuf *nb)
{
	return client_owns_netbuf(nb) ? container_of(nb, struct client, nb) : NULL;
}

/* Every client and server socket, for SUSPEND's flush check and RESUME. */
static void for_each_socket(void (*fn)(struct netbuf *nb, void *arg), void *arg)
{
	list_for_each(dpos, &pgv.databases) {
		struct db *db = container_of(dpos, struct db, node);
		list_for_each(ppos, &db->pools) {
			struct pool *pool = container_of(ppos, struct pool, node);
			struct list *cl[] = { &pool->active_clients, &pool->idle_clients, &pool->waiting_clients,
					      &pool->welcome_clients };
			struct list *sl[] = { &pool->active_servers, &pool->idle_servers, &pool->used_servers,
					      &pool->tested_servers, &pool->login_servers };
			for (size_t i = 0; i < ARRAY_SIZE(cl); i++)
				list_for_each_safe(pos, tmp, cl[i])
					fn(&container_of(pos, struct client, node)->nb, arg);
			for (size_t i = 0; i < ARRAY_SIZE(sl); i++)
				list_for_each_safe(pos, tmp, sl[i])
					fn(&container_of(pos, struct server, node)->nb, arg);
		}
	}
	list_for_each_safe(pos, tmp, &pgv.login_clients)
		fn(&container_of(pos, struct client, node)->nb, arg);
}

static void count_unflushed(struct netbuf *nb, void *arg)
{
	if (!nb->never_suspend && netbuf_queue_len(nb))
		(*(int *)arg)++;
}

static void refresh_socket(struct netbuf *nb, void *arg)
{
	(void)arg;
	netbuf_refresh(nb);
}

/* After suspend_timeout: whatever could not flush is dropped. */
static void drop_unflushed(struct netbuf *nb, void *arg)
{
	(void)arg;
	if (nb->never_suspend || !netbuf_queue_len(nb))
		return;
	/* nb is the first member of both client and server: tell them apart by the handler's owner lists */
	struct client *c = admin_client_of(nb);
	if (c)
		client_close(c, NULL, "suspend_timeout");
	else
		server_close(container_of(nb, struct server, nb), "suspend_timeout");
}

static void start_suspend(void)
{
	pgv.suspended = true;
	pgv.suspend_start = now_usec();
	netbuf_set_suspended(true);
	listener_pause();
}

static void end_suspend(void)
{
	pgv.suspended = false;
	netbuf_set_suspended(false);
	for_each_socket(refresh_socket, NULL);
	if (!pgv.shutting_down)
		listener_resume();
}

/* ---------------------------------------------------------------- waits */

/* The wait of a console client, NULL if it waits for nothing. */
static struct admin_wait *wait_of(const struct client *client)
{
	list_for_each(pos, &adm.waits) {
		struct admin_wait *w = container_of(pos, struct admin_wait, node);
		if (w->client == client)
			return w;
	}
	return NULL;
}

static void wait_end(struct admin_wait *w)
{
	list_remove(&adm.waits, &w->node);
	free(w);
}

/* A console client waits for PAUSE/WAIT_CLOSE/SUSPEND to complete. */
static void wait_for(struct client *client, enum admin_wait_kind what, struct db *db)
{
	struct admin_wait *w = wait_of(client);
	if (!w) {
		w = xcalloc(1, sizeof(*w));
		w->client = client;
		list_node_init(&w->node);
		list_append(&adm.waits, &w->node);
	}
	w->what = what;
	w->db = db;
	netbuf_pause(&client->nb);
	admin_check_waits();
}

static bool db_paused_done(const struct db *db)
{
	list_for_each(pos, &db->pools) {
		const struct pool *pool = container_of(pos, struct pool, node);
		if (pool_server_count(pool) > 0)
			return false;
	}
	return true;
}

static bool db_close_done(const struct db *db)
{
	list_for_each(pos, &db->pools) {
		const struct pool *pool = container_of(pos, struct pool, node);
		const struct list *lists[] = { &pool->active_servers, &pool->idle_servers, &pool->used_servers,
					       &pool->tested_servers, &pool->login_servers };
		for (size_t i = 0; i < ARRAY_SIZE(lists); i++)
			list_for_each(spos, lists[i])
				if (container_of(spos, struct server, node)->close_needed)
					return false;
	}
	return true;
}

/* done(db) for every database but the console's. */
static bool every_db(bool (*done)(const struct db *))
{
	list_for_each(pos, &pgv.databases) {
		const struct db *db = container_of(pos, struct db, node);
		if (!db->is_admin && !done(db))
			return false;
	}
	return true;
}

static bool wait_done(const struct admin_wait *w)
{
	if (w->what == ADMIN_WAIT_SUSPEND) {
		int unflushed = 0;
		for_each_socket(count_unflushed, &unflushed);
		if (unflushed && pgv.cfg->suspend_timeout > 0 &&
		    now_usec() - pgv.suspend_start >= pgv.cfg->suspend_timeout) {
			for_each_socket(drop_unflushed, NULL);
			return true;
		}
		return unflushed == 0;
	}
	bool (*done)(const struct db *) = w->what == ADMIN_WAIT_PAUSE ? db_paused_done : db_close_done;
	if (w->db)
		return done(w->db);
	if (!every_db(done))
		return false;
	if (w->what == ADMIN_WAIT_PAUSE && adm.pause_gen)
		return workers_others_paused(adm.pause_gen);
	return true;
}

/* This process is paused (PAUSE, SIGUSR1) and holds no server any more. */
static bool paused_done(void)
{
	return pgv.paused_all && every_db(db_paused_done);
}

/* The wait here for a PAUSE of the whole instance, if any. */
static struct admin_wait *instance_pause_wait(void)
{
	list_for_each(pos, &adm.waits) {
		struct admin_wait *w = container_of(pos, struct admin_wait, node);
		if (w->what == ADMIN_WAIT_PAUSE && !w->db)
			return w;
	}
	return NULL;
}

/* The instance was resumed under a waiting PAUSE: it ends with an error rather than wait for ever. */
static void end_instance_pause_wait(void)
{
	struct admin_wait *w = adm.pause_gen ? instance_pause_wait() : NULL;
	adm.pause_gen = 0;
	if (!w)
		return;
	struct client *client = w->client;
	wait_end(w);
	admin_reply_error(client, "57014", "PAUSE canceled: the instance was resumed");
	netbuf_resume(&client->nb);
}

/* Console RESUME or ^C on a PAUSE: every worker resumes; a PAUSE still waiting here ends. */
static void resume_instance(void)
{
	adm.applied_gen = workers_set_paused(false);
	end_instance_pause_wait();
	workers_tell_supervisor(SIGUSR2);
}

void admin_sync_instance_pause(void)
{
	uint32_t gen;
	if (!workers_supervised())
		return;
	bool want = workers_want_paused(&gen);
	if (gen == adm.applied_gen)
		return;
	adm.applied_gen = gen;
	if (want) {
		if (!pgv.paused_all) {
			log_info("instance paused, pausing all activity");
			admin_pause_all();
		}
		return;
	}
	end_instance_pause_wait();
	if (pgv.paused_all && !pgv.shutting_down) {
		log_info("instance resumed, continuing from PAUSE");
		admin_resume_all();
	}
}

void admin_client_closing(struct client *client)
{
	struct admin_wait *w = wait_of(client);
	if (w && w->what == ADMIN_WAIT_PAUSE && !w->db)
		adm.pause_gen = 0;	/* the instance stays paused, as PgBouncer leaves it */
	if (w)
		wait_end(w);
	if (client->did_suspend && pgv.suspended) {
		log_info("admin disappeared when suspended, doing RESUME");
		end_suspend();
	}
}

void admin_cancel_request(struct client *client)
{
	struct admin_wait *w = wait_of(client);
	if (!w || w->what != ADMIN_WAIT_PAUSE)
		return;
	/* ^C on a waiting PAUSE: everything resumes, as in PgBouncer. */
	wait_end(w);
	if (!pgv.shutting_down) {
		log_info("PAUSE canceled, resuming");
		/* Everything resumes: the whole instance, whoever paused it. */
		if (workers_supervised() && workers_want_paused(NULL))
			resume_instance();
		adm.pause_gen = 0;
		admin_resume_all();
		list_for_each(pos, &pgv.databases)
			container_of(pos, struct db, node)->paused = false;
		list_for_each(pos, &pgv.databases)
			pool_db_resume(container_of(pos, struct db, node));
	}
	struct pktbuf b;
	pktbuf_init(&b, 128);
	proto_put_error(&b, "ERROR", "57014", "canceling statement due to user request");
	proto_put_ready(&b, 'I');
	netbuf_send(&client->nb, b.buf, b.len);
	pktbuf_free(&b);
	netbuf_resume(&client->nb);
}

bool admin_waits_on(const struct db *db)
{
	list_for_each(pos, &adm.waits)
		if (container_of(pos, struct admin_wait, node)->db == db)
			return true;
	return false;
}

void admin_check_waits(void)
{
	/* Follow the instance's pause state, then say what the other workers' PAUSE waits see. */
	admin_sync_instance_pause();
	uint32_t gen;
	bool want = workers_want_paused(&gen);
	workers_publish_paused(want && gen == adm.applied_gen && paused_done() ? gen : 0);
	list_for_each_safe(pos, tmp, &adm.waits) {
		struct admin_wait *w = container_of(pos, struct admin_wait, node);
		if (!wait_done(w))
			continue;
		const char *tag = w->what == ADMIN_WAIT_PAUSE ? "PAUSE" :
			w->what == ADMIN_WAIT_SUSPEND ? "SUSPEND" : "WAIT_CLOSE";
		if (w->what == ADMIN_WAIT_PAUSE && !w->db)
			adm.pause_gen = 0;
		struct client *client = w->client;
		wait_end(w);
		admin_reply_complete(client, tag);
		netbuf_resume(&client->nb);
	}
	if (pgv.shutdown_mode == SHUTDOWN_WAIT_FOR_SERVERS && pgv.server_count == 0) {
		log_info("server connections dropped, exiting");
		loop_exit_now();
	}
}

/* ---------------------------------------------------------------- control commands */

static void pause_db(struct db *db)
{
	if (db->is_admin)
		return;
	db->paused = true;
	pool_db_pause(db);
}

void admin_pause_all(void)
{
	pgv.paused_all = true;
	list_for_each(pos, &pgv.databases) {
		struct db *db = container_of(pos, struct db, node);
		if (!db->is_admin)
			pool_db_pause(db);
	}
}

void admin_resume_all(void)
{
	/* Only the global pause: databases paused by name (or KILL) stay paused. */
	pgv.paused_all = false;
	workers_publish_paused(0);
	list_for_each(pos, &pgv.databases)
		pool_db_resume(container_of(pos, struct db, node));
}

void admin_shutdown_wait_for_servers(void)
{
	if (pgv.shutdown_mode != SHUTDOWN_NONE)
		return;
	pgv.shutdown_mode = SHUTDOWN_WAIT_FOR_SERVERS;
	pgv.shutting_down = true;
	listener_close_tcp();	/* 1.25: the Unix socket stays, so admins can still connect */
	admin_pause_all();
	/* Clients already queued are closed by the janitor's next pass, after this command has answered. */
	admin_check_waits();
}

void admin_shutdown_wait_for_clients(void)
{
	if (pgv.shutdown_mode != SHUTDOWN_NONE)
		return;
	pgv.shutdown_mode = SHUTDOWN_WAIT_FOR_CLIENTS;
	loop_begin_graceful_shutdown();
}

static void kill_db(struct db *db)
{
	pause_db(db);
	pool_close_db(db, "database removed");
	stats_init(&db->stats, now_usec());
}

static struct client *find_client_by_id(uint64_t id)
{
	list_for_each(dpos, &pgv.databases) {
		struct db *db = container_of(dpos, struct db, node);
		list_for_each(ppos, &db->pools) {
			struct pool *pool = container_of(ppos, struct pool, node);
			struct list *lists[] = { &pool->active_clients, &pool->idle_clients, &pool->waiting_clients,
						 &pool->welcome_clients };
			for (size_t i = 0; i < ARRAY_SIZE(lists); i++)
				list_for_each(pos, lists[i]) {
					struct client *c = container_of(pos, struct client, node);
					if (c->id == id)
						return c;
				}
		}
	}
	return NULL;
}

/* Looks up the command's database: unknown names and the admin db get PgBouncer's errors. */
static struct db *command_db(struct client *client, const struct admin_command *cmd, const char *what)
{
	struct db *db = pool_find_db(cmd->arg);
	if (!db && admin_is_admin_dbname(cmd->arg))
		db = adm.db;
	if (!db) {
		admin_reply_errorf(client, "no such database: %s", cmd->arg);
		return NULL;
	}
	if (db->is_admin) {
		admin_reply_errorf(client, "cannot %s admin db: %s", what, cmd->arg);
		return NULL;
	}
	return db;
}

static void log_issued(const struct admin_command *cmd)
{
	if (cmd->has_arg)
		log_info("%s '%s' command issued", cmd->verb, cmd->arg);
	else
		log_info("%s command issued", cmd->verb);
}

static void run_set(struct client *client, const struct admin_command *cmd)
{
	char tag[400], err[300];
	for (size_t i = 0; i < ARRAY_SIZE(fake_params); i++) {
		if (word_is(cmd->key, fake_params[i][0])) {
			admin_reply_notice(client, "SET ignored", NULL, "SET");
			return;
		}
	}
	if (!user_is_admin(client)) {
		admin_reply_errorf(client, "admin access needed");
		return;
	}
	const struct param_def *p = config_find_param(cmd->key);
	if (!p || strcmp(p->name, cmd->key) != 0) {	/* as PgBouncer: keys are case-sensitive here */
		log_error("unknown parameter: pgbouncer/%s", cmd->key);
		admin_reply_errorf(client, "SET failed");
		return;
	}
	snprintf(tag, sizeof(tag), "SET %s=%s", cmd->key, cmd->value);
	if (!p->reloadable) {
		/* As PgBouncer: answered, not applied. The notice says why. */
		char msg[200];
		snprintf(msg, sizeof(msg), "parameter %s cannot be changed while running; restart to apply it", p->name);
		admin_reply_notice(client, msg, NULL, tag);
		return;
	}
	if (config_set_param(pgv.cfg, p, cmd->value, err, sizeof(err)) < 0) {
		log_error("SET %s: %s", p->name, err);
		admin_reply_errorf(client, "SET failed");
		return;
	}
	pgv.config_generation++;
	log_info("SET %s = %s", p->name, cmd->value);
	/* TLS settings take effect at once; a broken set keeps the running contexts, as PgBouncer. */
	if (strstr(p->name, "_tls_") || strstr(p->name, "_tls13_")) {
		if (tls_configure(pgv.cfg, err, sizeof(err)) < 0) {
			admin_reply_notice(client, "TLS settings could not be applied, still using old configuration",
					   NULL, tag);
			return;
		}
		if (strncmp(p->name, "server_tls", 10) == 0)
			pool_retire_all_servers("obsolete connection");
	}
	admin_reply_complete(client, tag);
}

/* Runs a control command (admin rights already checked). */
static void run_control(struct client *client, const struct admin_command *cmd)
{
	const char *verb = cmd->verb;
	struct db *db = NULL;
	char msg[600];

	if (word_is(verb, "RELOAD")) {
		log_issued(cmd);
		if (reload_config(msg, sizeof(msg)) < 0) {
			log_error("RELOAD Failed, see logs for more details");
			admin_reply_error(client, "F0000", "RELOAD failed, see logs for additional details");
			return;
		}
		/* The whole instance reloads, as SIGHUP would: the supervisor tells the other workers. */
		workers_tell_supervisor(SIGHUP);
		admin_reply_complete(client, "RELOAD");
		return;
	}
	if (word_is(verb, "PAUSE")) {
		log_issued(cmd);
		if (pgv.paused_all) {
			admin_reply_errorf(client, "already suspended/paused");
			return;
		}
		if (cmd->has_arg) {
			if (!(db = command_db(client, cmd, "pause")))
				return;
			pause_db(db);
		} else {
			/* With workers the whole instance pauses, as with SIGUSR1; PAUSE returns when all have. */
			admin_pause_all();
			if (workers_supervised()) {
				adm.pause_gen = adm.applied_gen = workers_set_paused(true);
				workers_tell_supervisor(SIGUSR1);
			}
		}
		wait_for(client, ADMIN_WAIT_PAUSE, db);
		return;
	}
	if (word_is(verb, "RESUME")) {
		log_issued(cmd);
		if (cmd->has_arg) {
			if (admin_is_admin_dbname(cmd->arg)) {
				admin_reply_errorf(client, "database %s is not paused", cmd->arg);
				return;
			}
			if (!(db = command_db(client, cmd, "resume")))
				return;
			if (!db->paused) {
				admin_reply_errorf(client, "database %s is not paused", db->name);
				return;
			}
			db->paused = false;
			pool_db_resume(db);
		} else {
			if (pgv.shutting_down) {
				admin_reply_errorf(client, "pooler is shutting down");
				return;
			}
			bool instance_paused = workers_supervised() && workers_want_paused(NULL);
			if (!pgv.paused_all && !pgv.suspended && !instance_paused) {
				admin_reply_errorf(client, "pooler is not paused/suspended");
				return;
			}
			if (pgv.suspended)
				end_suspend();
			if (instance_paused)
				resume_instance();	/* every worker, as PAUSE did */
			if (pgv.paused_all)
				admin_resume_all();
		}
		admin_reply_complete(client, "RESUME");
		return;
	}
	if (word_is(verb, "DISABLE") || word_is(verb, "ENABLE")) {
		bool disable = word_is(verb, "DISABLE");
		log_issued(cmd);
		if (!cmd->has_arg) {
			admin_reply_errorf(client, "a database is required");
			return;
		}
		if (!(db = command_db(client, cmd, disable ? "disable" : "enable")))
			return;
		db->disabled = disable;
		admin_reply_complete(client, disable ? "DISABLE" : "ENABLE");
		return;
	}
	if (word_is(verb, "RECONNECT")) {
		log_issued(cmd);
		if (cmd->has_arg) {
			if (!(db = command_db(client, cmd, "reconnect")))
				return;
			pool_db_reconnect(db);
		} else {
			list_for_each(pos, &pgv.databases)
				pool_db_reconnect(container_of(pos, struct db, node));
		}
		admin_reply_complete(client, "RECONNECT");
		return;
	}
	if (word_is(verb, "KILL")) {
		log_issued(cmd);
		if (pgv.paused_all) {
			admin_reply_errorf(client, "already suspended/paused");
			return;
		}
		if (cmd->has_arg) {
			if (!(db = command_db(client, cmd, "kill")))
				return;
			kill_db(db);
		} else {
			list_for_each(pos, &pgv.databases) {
				struct db *d = container_of(pos, struct db, node);
				if (!d->is_admin)
					kill_db(d);
			}
		}
		admin_reply_complete(client, "KILL");
		return;
	}
	if (word_is(verb, "KILL_CLIENT")) {
		char *end;
		unsigned long long id = cmd->has_arg ? strtoull(cmd->arg, &end, 10) : 0;
		if (!cmd->has_arg || end == cmd->arg) {
			admin_reply_errorf(client, "invalid client pointer supplied");
			return;
		}
		struct client *target = find_client_by_id(id);
		if (!target) {
			admin_reply_errorf(client, "client not found");
			return;
		}
		if (target == client) {
			client_close(client, "08P01", "admin forced disconnect");
			return;
		}
		client_close(target, "08P01", "admin forced disconnect");
		admin_reply_complete(client, "KILL_CLIENT");
		return;
	}
	if (word_is(verb, "SUSPEND")) {
		log_issued(cmd);
		if (pgv.paused_all || pgv.suspended) {
			admin_reply_errorf(client, "already suspended/paused");
			return;
		}
		list_for_each(pos, &pgv.databases) {
			if (container_of(pos, struct db, node)->paused) {
				admin_reply_errorf(client, "cannot suspend with paused databases");
				return;
			}
		}
		start_suspend();
		client->did_suspend = true;
		wait_for(client, ADMIN_WAIT_SUSPEND, NULL);
		return;
	}
	if (word_is(verb, "WAIT_CLOSE")) {
		log_issued(cmd);
		if (cmd->has_arg && !(db = command_db(client, cmd, "wait in")))
			return;
		wait_for(client, ADMIN_WAIT_CLOSE, db);
		return;
	}
	if (word_is(verb, "SHUTDOWN")) {
		if (!cmd->has_arg) {
			log_info("SHUTDOWN command issued");
			workers_tell_supervisor(SIGQUIT);
			loop_exit_now();	/* no reply: the connection just closes */
			return;
		}
		if (word_is(cmd->arg, "WAIT_FOR_SERVERS")) {
			log_info("SHUTDOWN WAIT_FOR_SERVERS command issued");
			workers_tell_supervisor(SIGINT);
			admin_reply_complete(client, "SHUTDOWN");
			admin_shutdown_wait_for_servers();
			return;
		}
		log_info("SHUTDOWN WAIT_FOR_CLIENTS command issued");
		workers_tell_supervisor(SIGTERM);
		admin_reply_complete(client, "SHUTDOWN");
		admin_shutdown_wait_for_clients();
		return;
	}
}

/* ---------------------------------------------------------------- dispatch */

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
	{ "DNS_ZONES", show_dns_zones },
	{ "VERSION", show_version },
	{ "STATE", show_state },
	{ "WORKERS", show_workers },
};

static bool run_show(struct client *client, const char *what)
{
	struct admin_result r;
	if (word_is(what, "HELP")) {
		admin_reply_notice(client, "Console usage", help_text, "SHOW");
		return true;
	}
	for (size_t i = 0; i < ARRAY_SIZE(shows); i++) {
		if (!word_is(what, shows[i].name))
			continue;
		admin_result_init(&r, 4096);
		shows[i].fn(&r);
		admin_result_send(client, &r);
		return true;
	}
	for (size_t i = 0; i < ARRAY_SIZE(fake_params); i++) {
		if (!word_is(what, fake_params[i][0]))
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

static void run_query(struct client *client, const char *query)
{
	struct admin_command cmd;
	enum admin_parse_result pr = admin_parse_command(query, &cmd);

	/* As PgBouncer: an admin connection counts one query and one transaction. */
	if (!client->admin_counted) {
		client->admin_counted = true;
		adm.db->stats.total.query_count++;
		adm.db->stats.total.xact_count++;
	}
	if (pr == ADMIN_PARSE_TOO_LONG) {
		admin_reply_errorf(client, "bad arguments");
		return;
	}
	if (pr == ADMIN_PARSE_INVALID)
		goto invalid;
	client_log(LOG_LEVEL_DEBUG, client, "admin command: %s", query);
	if (cmd.is_set) {
		run_set(client, &cmd);
		return;
	}
	if (word_is(cmd.verb, "SHOW") || word_is(cmd.verb, "SELECT")) {
		if (cmd.has_arg && run_show(client, cmd.arg))
			return;
		goto invalid;
	}
	static const char *const known[] = { "RELOAD", "PAUSE", "RESUME", "DISABLE", "ENABLE", "RECONNECT",
					      "KILL", "KILL_CLIENT", "WAIT_CLOSE", "SHUTDOWN", "SUSPEND" };
	bool found = false;
	for (size_t i = 0; i < ARRAY_SIZE(known); i++)
		found |= word_is(cmd.verb, known[i]);
	if (!found)
		goto invalid;
	/* Argument syntax first for the commands that take none, as PgBouncer. */
	if ((word_is(cmd.verb, "RELOAD") || word_is(cmd.verb, "SUSPEND")) && cmd.has_arg)
		goto invalid;
	if (word_is(cmd.verb, "SHUTDOWN") && cmd.has_arg && !word_is(cmd.arg, "WAIT_FOR_SERVERS") &&
	    !word_is(cmd.arg, "WAIT_FOR_CLIENTS"))
		goto invalid;
	if (!user_is_admin(client)) {
		admin_reply_errorf(client, "admin access needed");
		return;
	}
	run_control(client, &cmd);
	return;
invalid:
	admin_reply_errorf(client, "invalid command '%s', use SHOW HELP;", query);
}

bool admin_handle_packet(struct client *client, const struct pkt *pkt)
{
	char msg[96];

	switch (pkt->type) {
	case 'Q': {
		if (pkt->len > ADMIN_QUERY_MAX) {
			client_close(client, "08P01", "admin command too long");
			return false;
		}
		if (!pkt_complete(pkt))
			return true;
		netbuf_skip(&client->nb, pkt->len);
		struct pkt_reader r;
		pkt_reader_init(&r, pkt_body(pkt), pkt_body_len(pkt));
		const char *query = pkt_get_string(&r);
		if (!query) {
			client_close(client, "08P01", "bad packet");
			return false;
		}
		run_query(client, query);
		return client->state != CL_CLOSED;
	}
	case 'X':
		netbuf_skip(&client->nb, pkt->len);
		client_close(client, NULL, "client close request");
		return false;
	case 'P': case 'B': case 'E':
		snprintf(msg, sizeof(msg), "extended query protocol not supported by admin console");
		break;
	default:
		snprintf(msg, sizeof(msg), "unsupported packet type for admin console: %d", pkt->type);
		break;
	}
	/* As PgBouncer: an error the client can read, then the connection is closed. */
	netbuf_skip(&client->nb, pkt->len);
	admin_reply_errorf(client, "%s", msg);
	client_close(client, "08P01", "bad packet");
	return false;
}

/*
 * Before any password is asked: admin_users and stats_users may go on;
 * auth_type any lets anyone in with stats rights; a known user in neither
 * list is refused at once. Unknown users go on to fail authentication.
 */
bool admin_check_login(struct client *client, const char *user)
{
	if (config_list_contains(pgv.cfg->admin_users, user) || config_list_contains(pgv.cfg->stats_users, user))
		return true;
	if (pgv.cfg->auth_type == AUTH_TYPE_ANY)
		return true;
	if (client->is_unix && strcmp(user, "pgbouncer") == 0)
		return true;	/* auth.c lets in the same OS user, refuses anyone else */
	if (pgv.auth && auth_store_find(pgv.auth, user)) {
		client_close(client, "28000", "not allowed");
		return false;
	}
	return true;
}

bool admin_check_access(struct client *client)
{
	const char *user = client_user_name(client);
	if (client->admin_superuser || config_list_contains(pgv.cfg->admin_users, user) ||
	    config_list_contains(pgv.cfg->stats_users, user))
		return true;
	if (pgv.cfg->auth_type == AUTH_TYPE_ANY) {
		/* anyone, with stats rights, shown as the admin db's user */
		client->shown_as_admin_user = true;
		return true;
	}
	client_close(client, "28000", "not allowed");
	return false;
}
