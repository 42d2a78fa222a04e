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
#include "pgvalve/auth_file.h"
#include "pgvalve/client.h"
#include "pgvalve/config.h"
#include "pgvalve/listener.h"
#include "pgvalve/log.h"
#include "pgvalve/loop.h"
#include "pgvalve/netbuf.h"
#include "pgvalve/pool.h"
#include "pgvalve/proto.h"
#include "pgvalve/reload.h"
#include "pgvalve/server.h"
#include "pgvalve/stats.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

#define ADMIN_QUERY_MAX (64 * 1024)

/* PostgreSQL type OIDs used in RowDescription. */
#define OID_BOOL 16
#define OID_INT8 20
#define OID_INT4 23
#define OID_TEXT 25
#define OID_NUMERIC 1700
#define OID_TIMESTAMPTZ 1184

static struct {
	struct db *db;
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
	adm.db = pool_create_admin_db("pgbouncer");
}

/* ---------------------------------------------------------------- result writer */

/*
 * A reply being built: RowDescription from a type string ('s' text,
 * 'i' int4, 'q' int8, 'n' numeric, 'T' timestamptz, 'b' bool) and column
 * names, then DataRows of text values.
 */
struct result {
	struct pktbuf b;
	const char *types;
	int ncols;
	int nrows;
};

static void result_begin(struct result *r, const char *types, const char *const *names)
{
	r->types = types;
	r->ncols = (int)strlen(types);
	r->nrows = 0;
	pktbuf_begin(&r->b, 'T');
	pktbuf_put_uint16(&r->b, (uint16_t)r->ncols);
	for (int i = 0; i < r->ncols; i++) {
		uint32_t oid = OID_TEXT;
		int16_t len = -1;
		switch (types[i]) {
		case 'i': oid = OID_INT4; len = 4; break;
		case 'q': oid = OID_INT8; len = 8; break;
		case 'n': oid = OID_NUMERIC; break;
		case 'T': oid = OID_TIMESTAMPTZ; len = 8; break;
		case 'b': oid = OID_BOOL; len = 1; break;
		default: break;
		}
		pktbuf_put_string(&r->b, names[i]);
		pktbuf_put_uint32(&r->b, 0);
		pktbuf_put_uint16(&r->b, 0);
		pktbuf_put_uint32(&r->b, oid);
		pktbuf_put_uint16(&r->b, (uint16_t)len);
		pktbuf_put_uint32(&r->b, 0xFFFFFFFFu);
		pktbuf_put_uint16(&r->b, 0);
	}
	pktbuf_end(&r->b);
}

/* One row: values as text, NULL for SQL NULL. */
static void result_row(struct result *r, const char *const *values)
{
	pktbuf_begin(&r->b, 'D');
	pktbuf_put_uint16(&r->b, (uint16_t)r->ncols);
	for (int i = 0; i < r->ncols; i++) {
		if (!values[i]) {
			pktbuf_put_uint32(&r->b, 0xFFFFFFFFu);
			continue;
		}
		uint32_t len = (uint32_t)strlen(values[i]);
		pktbuf_put_uint32(&r->b, len);
		pktbuf_put_bytes(&r->b, values[i], len);
	}
	pktbuf_end(&r->b);
	r->nrows++;
}

static void put_complete(struct pktbuf *b, const char *tag)
{
	pktbuf_begin(b, 'C');
	pktbuf_put_string(b, tag);
	pktbuf_end(b);
}

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

/* ---------------------------------------------------------------- iteration helpers */

/* Iterate without list_for_each's node variable leaking into the caller's names. */
#define for_each_db(dbvar) \
	for (struct list_node *_dn = pgv.databases.head.next; \
	     _dn != &pgv.databases.head && (((dbvar) = container_of(_dn, struct db, node)) != NULL); \
	     _dn = _dn->next)

#define for_each_pool(dbvar, poolvar) \
	for (struct list_node *_pn = (dbvar)->pools.head.next; \
	     _pn != &(dbvar)->pools.head && (((poolvar) = container_of(_pn, struct pool, node)) != NULL); \
	     _pn = _pn->next)

static int db_client_count(const struct db *db)
{
	int n = 0;
	list_for_each(pos, &db->pools) {
		const struct pool *pool = container_of(pos, struct pool, node);
		n += (int)(pool->active_clients.count + pool->waiting_clients.count + pool->welcome_clients.count);
	}
	return n;
}

/* ---------------------------------------------------------------- SHOW commands */

static void show_pools(struct result *r)
{
	static const char *const names[] = {
		"database", "user", "cl_active", "cl_waiting", "cl_active_cancel_req", "cl_waiting_cancel_req",
		"sv_active", "sv_active_cancel", "sv_being_canceled", "sv_idle", "sv_used", "sv_tested",
		"sv_login", "maxwait", "maxwait_us", "pool_mode", "load_balance_hosts",
	};
	struct db *db;
	struct pool *pool;
	struct cells c;
	usec_t now = now_usec();

	result_begin(r, "ssiiiiiiiiiiiiiss", names);
	for_each_db(db) {
		for_each_pool(db, pool) {
			usec_t maxwait = 0;
			struct list_node *first = list_first(&pool->waiting_clients);
			if (first)
				maxwait = now - container_of(first, struct client, node)->request_time;
			int being_canceled = 0, active_cancel = 0;
			list_for_each(pos, &pool->used_servers)
				if (container_of(pos, struct server, node)->cancels_in_flight)
					being_canceled++;
			list_for_each(pos, &pool->active_servers)
				if (container_of(pos, struct server, node)->cancels_in_flight)
					active_cancel++;
			cells_reset(&c);
			cell_str(&c, db->name);
			cell_str(&c, pool->user);
			cell_int(&c, pool->active_clients.count);
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
			cell_str(&c, db->is_admin || db->cfg->load_balance_hosts == LOAD_BALANCE_HOSTS_DISABLE ? "disable" :
				     strchr(db->cfg->host, ',') ? "round-robin" : "");
			result_row(r, c.v);
		}
	}
}

static const char *const stats_names[] = {
	"database", "total_server_assignment_count", "total_xact_count", "total_query_count",
	"total_received", "total_sent", "total_xact_time", "total_query_time", "total_wait_time",
	"total_client_parse_count", "total_server_parse_count", "total_bind_count",
	"avg_server_assignment_count", "avg_xact_count", "avg_query_count", "avg_recv", "avg_sent",
	"avg_xact_time", "avg_query_time", "avg_wait_time", "avg_client_parse_count",
	"avg_server_parse_count", "avg_bind_count",
};

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

static void show_stats(struct result *r, bool totals, bool averages)
{
	const char *names[ARRAY_SIZE(stats_names)];
	char types[ARRAY_SIZE(stats_names) + 1];
	int n = 0;
	struct db *db;
	struct cells c;

	names[n] = stats_names[0];
	types[n++] = 's';
	for (size_t i = 1; i < ARRAY_SIZE(stats_names); i++) {
		bool is_avg = strncmp(stats_names[i], "avg_", 4) == 0;
		if ((is_avg && averages) || (!is_avg && totals)) {
			names[n] = stats_names[i];
			types[n++] = 'q';
		}
	}
	types[n] = '\0';
	result_begin(r, types, names);
	for_each_db(db) {
		cells_reset(&c);
		cell_str(&c, db->name);
		if (totals)
			cells_totals(&c, &db->stats.total);
		if (averages)
			cells_averages(&c, &db->stats.avg);
		result_row(r, c.v);
	}
}

/* SHOW TOTALS: the sums over every database, one (name, value) row per counter. */
static void show_totals(struct result *r)
{
	static const char *const names[] = { "name", "value" };
	struct stats sum = { 0 };
	struct stats_averages avg = { 0 };
	struct db *db;
	for_each_db(db) {
		stats_add(&sum, &db->stats.total);
		const struct stats_averages *a = &db->stats.avg;
		avg.server_assignment_count += a->server_assignment_count;
		avg.xact_count += a->xact_count;
		avg.query_count += a->query_count;
		avg.bytes_received += a->bytes_received;
		avg.bytes_sent += a->bytes_sent;
		avg.xact_time += a->xact_time;
		avg.query_time += a->query_time;
		avg.wait_time += a->wait_time;
		avg.client_parse_count += a->client_parse_count;
		avg.server_parse_count += a->server_parse_count;
		avg.bind_count += a->bind_count;
	}
	struct cells c;
	cells_reset(&c);
	cells_totals(&c, &sum);
	cells_averages(&c, &avg);
	result_begin(r, "sq", names);
	for (int i = 0; i < c.n; i++) {
		const char *row[2] = { stats_names[i + 1], c.v[i] };
		result_row(r, row);
	}
}

static const char *const conn_names[] = {
	"type", "user", "database", "replication", "state", "addr", "port", "local_addr", "local_port",
	"connect_time", "request_time", "wait", "wait_us", "close_needed", "ptr", "link", "remote_pid",
	"tls", "application_name", "prepared_statements", "id",
};
#define CONN_TYPES "sssssssisTTiiississsq"

static void addr_text(const struct sockaddr *sa, char *host, size_t size, int *port)
{
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
		inet_ntop(AF_INET, &in->sin_addr, host, (socklen_t)size);
		*port = ntohs(in->sin_port);
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
		inet_ntop(AF_INET6, &in6->sin6_addr, host, (socklen_t)size);
		*port = ntohs(in6->sin6_port);
	} else {
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

static const char *client_state_name(const struct client *client)
{
	switch (client->state) {
	case CL_ACTIVE:
		return "active";
	case CL_WAITING:
	case CL_WELCOME:
		return "waiting";
	case CL_LOGIN:
		return "login";
	default:
		return "closed";
	}
}

static void client_row(struct result *r, const struct client *client)
{
	struct cells c;
	char host[INET6_ADDRSTRLEN], lhost[INET6_ADDRSTRLEN];
	int port = 0, lport = 0;
	usec_t now = now_usec();

	addr_text(client->is_unix ? &(struct sockaddr){ .sa_family = AF_UNIX } : &client->addr.sa, host,
		  sizeof(host), &port);
	local_addr_text(client->nb.fd, lhost, sizeof(lhost), &lport);
	usec_t wait = client->state == CL_WAITING ? now - client->request_time : 0;
	int app = varcache_index("application_name");
	const char *appname = varcache_get(client->vars, app);
	cells_reset(&c);
	cell_str(&c, "C");
	cell_str(&c, client_user_name(client));
	cell_str(&c, client_db_name(client));
	cell_str(&c, "none");
	cell_str(&c, client_state_name(client));
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
	cell_str(&c, "");
	cell_str(&c, appname ? appname : "");
	cell_int(&c, 0);
	cell_uint(&c, client->id);
	result_row(r, c.v);
}

static const char *server_state_name(const struct server *server)
{
	switch (server->state) {
	case SV_ACTIVE:
		return server->cancels_in_flight ? "active_cancel" : "active";
	case SV_IDLE:
		return "idle";
	case SV_USED:
		return server->cancels_in_flight ? "being_canceled" : "used";
	case SV_TESTED:
		return "tested";
	case SV_LOGIN:
		return "login";
	default:
		return "closed";
	}
}

static void server_row(struct result *r, const struct server *server)
{
	struct cells c;
	char host[INET6_ADDRSTRLEN], lhost[INET6_ADDRSTRLEN];
	int port = 0, lport = 0;

	if (server->addr.sa.sa_family == AF_UNIX) {
		snprintf(host, sizeof(host), "unix");
		port = server->pool->db->cfg->port;
	} else {
		addr_text(&server->addr.sa, host, sizeof(host), &port);
	}
	local_addr_text(server->nb.fd, lhost, sizeof(lhost), &lport);
	int app = varcache_index("application_name");
	const char *appname = varcache_get(server->vars, app);
	cells_reset(&c);
	cell_str(&c, "S");
	cell_str(&c, server->pool->user);
	cell_str(&c, server->pool->db->name);
	cell_str(&c, "none");
	cell_str(&c, server_state_name(server));
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
	cell_str(&c, "");
	cell_str(&c, appname ? appname : "");
	cell_int(&c, 0);
	cell_uint(&c, server->id);
	result_row(r, c.v);
}

static void show_clients(struct result *r)
{
	struct db *db;
	struct pool *pool;
	result_begin(r, CONN_TYPES, conn_names);
	for_each_db(db) {
		for_each_pool(db, pool) {
			const struct list *lists[] = { &pool->active_clients, &pool->waiting_clients, &pool->welcome_clients };
			for (size_t i = 0; i < ARRAY_SIZE(lists); i++)
				list_for_each(pos, lists[i])
					client_row(r, container_of(pos, struct client, node));
		}
	}
}

static void show_servers(struct result *r)
{
	struct db *db;
	struct pool *pool;
	result_begin(r, CONN_TYPES, conn_names);
	for_each_db(db) {
		for_each_pool(db, pool) {
			const struct list *lists[] = { &pool->active_servers, &pool->idle_servers, &pool->used_servers,
						       &pool->tested_servers, &pool->login_servers };
			for (size_t i = 0; i < ARRAY_SIZE(lists); i++)
				list_for_each(pos, lists[i])
					server_row(r, container_of(pos, struct server, node));
		}
	}
}

static void show_sockets(struct result *r, bool active_only)
{
	static const char *const names[] = {
		"type", "user", "database", "replication", "state", "addr", "port", "local_addr", "local_port",
		"connect_time", "request_time", "wait", "wait_us", "close_needed", "ptr", "link", "remote_pid",
		"tls", "application_name", "prepared_statements", "id", "recv_pos", "pkt_pos", "pkt_remain",
		"send_pos", "send_remain", "pkt_avail", "send_avail",
	};
	/* The socket columns describe buffer positions; pgvalve's buffers are transient, so report queues. */
	struct result tmp;
	(void)tmp;
	char types[sizeof(CONN_TYPES) + 7];
	snprintf(types, sizeof(types), "%siiiiiii", CONN_TYPES);
	result_begin(r, types, names);
	struct db *db;
	struct pool *pool;
	for_each_db(db) {
		for_each_pool(db, pool) {
			const struct list *clists[] = { &pool->active_clients, &pool->waiting_clients, &pool->welcome_clients };
			const struct list *slists[] = { &pool->active_servers, &pool->idle_servers, &pool->used_servers,
							&pool->tested_servers, &pool->login_servers };
			for (size_t i = 0; i < ARRAY_SIZE(clists) + ARRAY_SIZE(slists); i++) {
				const struct list *l = i < ARRAY_SIZE(clists) ? clists[i] : slists[i - ARRAY_SIZE(clists)];
				list_for_each(pos, l) {
					/* Reuse the client/server row, then append the buffer columns. */
					struct result one;
					pktbuf_init(&one.b, 512);
					one.types = CONN_TYPES;
					one.ncols = (int)strlen(CONN_TYPES);
					const struct netbuf *nb;
					if (i < ARRAY_SIZE(clists)) {
						const struct client *cl = container_of(pos, struct client, node);
						nb = &cl->nb;
						client_row(&one, cl);
					} else {
						const struct server *sv = container_of(pos, struct server, node);
						nb = &sv->nb;
						server_row(&one, sv);
					}
					uint32_t buffered = netbuf_buffered(nb), queued = netbuf_queue_len(nb);
					if (active_only && !buffered && !queued && !nb->pkt_remaining) {
						pktbuf_free(&one.b);
						continue;
					}
					/* one.b holds a DataRow with 21 columns: rebuild with 7 more. */
					struct pkt_reader rd;
					pkt_reader_init(&rd, one.b.buf + 7, one.b.len - 7);
					const char *vals[28];
					char extra[7][24], cellbuf[21][256];
					for (int k = 0; k < 21; k++) {
						uint32_t len = pkt_get_uint32(&rd);
						if (len == 0xFFFFFFFFu) {
							vals[k] = NULL;
							continue;
						}
						const uint8_t *p = pkt_get_bytes(&rd, len);
						size_t n = MIN((size_t)len, sizeof(cellbuf[k]) - 1);
						memcpy(cellbuf[k], p ? p : (const uint8_t *)"", p ? n : 0);
						cellbuf[k][p ? n : 0] = '\0';
						vals[k] = cellbuf[k];
					}
					long long ex[7] = { buffered, 0, nb->pkt_remaining, queued, queued, buffered, queued };
					for (int k = 0; k < 7; k++) {
						snprintf(extra[k], sizeof(extra[k]), "%lld", ex[k]);
						vals[21 + k] = extra[k];
					}
					result_row(r, vals);
					pktbuf_free(&one.b);
				}
			}
		}
	}
}

static void show_config(struct result *r)
{
	static const char *const names[] = { "key", "value", "default", "changeable" };
	size_t n;
	const struct param_def *params = config_params(&n);
	char value[1024];
	result_begin(r, "ssss", names);
	for (size_t i = 0; i < n; i++) {
		config_format_value(pgv.cfg, &params[i], value, sizeof(value));
		const char *row[4] = { params[i].name, value, params[i].default_value,
				       params[i].reloadable ? "yes" : "no" };
		result_row(r, row);
	}
}

static void show_databases(struct result *r)
{
	static const char *const names[] = {
		"name", "host", "port", "database", "force_user", "pool_size", "min_pool_size",
		"reserve_pool_size", "server_lifetime", "pool_mode", "load_balance_hosts", "max_connections",
		"current_connections", "max_client_connections", "current_client_connections", "paused", "disabled",
	};
	struct db *db;
	struct cells c;
	result_begin(r, "ssissiiiisssiiiii", names);
	for_each_db(db) {
		const struct db_config *dc = db->cfg;
		cells_reset(&c);
		cell_str(&c, db->name);
		if (db->is_admin) {
			cell_null(&c);
			cell_int(&c, pgv.cfg->listen_port);
			cell_str(&c, "pgbouncer");
			cell_str(&c, "pgbouncer");
			cell_int(&c, 2);
			cell_int(&c, 0);
			cell_int(&c, 0);
			cell_int(&c, 0);
			cell_str(&c, "statement");
			cell_null(&c);
			cell_int(&c, 0);
		} else {
			cell_str(&c, dc->host);
			cell_int(&c, dc->port);
			cell_str(&c, dc->dbname[0] ? dc->dbname : db->name);
			cell_str(&c, dc->user[0] ? dc->user : NULL);
			cell_int(&c, dc->pool_size >= 0 ? dc->pool_size : pgv.cfg->default_pool_size);
			cell_int(&c, dc->min_pool_size >= 0 ? dc->min_pool_size : pgv.cfg->min_pool_size);
			cell_int(&c, dc->reserve_pool_size >= 0 ? dc->reserve_pool_size : pgv.cfg->reserve_pool_size);
			cell_int(&c, (dc->server_lifetime >= 0 ? dc->server_lifetime : pgv.cfg->server_lifetime) / USEC_PER_SEC);
			cell_str(&c, dc->pool_mode >= 0 ? pool_mode_name(dc->pool_mode) : NULL);
			cell_str(&c, strchr(dc->host, ',') ? (dc->load_balance_hosts == LOAD_BALANCE_HOSTS_DISABLE ?
							       "disable" : "round-robin") : NULL);
			cell_int(&c, dc->max_db_connections >= 0 ? dc->max_db_connections : pgv.cfg->max_db_connections);
		}
		cell_int(&c, db->server_count);
		cell_int(&c, db->is_admin ? 0 : (dc->max_db_client_connections >= 0 ? dc->max_db_client_connections :
						     pgv.cfg->max_db_client_connections));
		cell_int(&c, db_client_count(db));
		cell_int(&c, db->paused ? 1 : 0);
		cell_int(&c, db->disabled ? 1 : 0);
		result_row(r, c.v);
	}
}

static void show_users(struct result *r)
{
	static const char *const names[] = {
		"name", "pool_size", "reserve_pool_size", "pool_mode", "max_user_connections",
		"current_connections", "max_user_client_connections", "current_client_connections",
	};
	struct cells c;
	result_begin(r, "siisiiii", names);
	/* Every user with a pool or a [users] entry, once. */
	struct name_count { const char *name; int servers; int clients; } seen[1024];
	int nseen = 0;
	struct db *db;
	struct pool *pool;
	for_each_db(db) {
		for_each_pool(db, pool) {
			int k;
			for (k = 0; k < nseen && strcmp(seen[k].name, pool->user) != 0; k++)
				;
			if (k == nseen) {
				if (nseen == (int)ARRAY_SIZE(seen))
					continue;
				seen[nseen++] = (struct name_count){ pool->user, 0, 0 };
			}
			seen[k].servers += pool_server_count(pool);
			seen[k].clients += (int)(pool->active_clients.count + pool->waiting_clients.count);
		}
	}
	for (const struct user_config *uc = pgv.cfg->users; uc; uc = uc->next) {
		int k;
		for (k = 0; k < nseen && strcmp(seen[k].name, uc->name) != 0; k++)
			;
		if (k == nseen && nseen < (int)ARRAY_SIZE(seen))
			seen[nseen++] = (struct name_count){ uc->name, 0, 0 };
	}
	for (int k = 0; k < nseen; k++) {
		const struct user_config *uc = config_find_user(pgv.cfg, seen[k].name);
		cells_reset(&c);
		cell_str(&c, seen[k].name);
		cell_int(&c, uc && uc->pool_size >= 0 ? uc->pool_size : 0);
		cell_int(&c, uc && uc->reserve_pool_size >= 0 ? uc->reserve_pool_size : 0);
		cell_str(&c, uc && uc->pool_mode >= 0 ? pool_mode_name(uc->pool_mode) : NULL);
		cell_int(&c, uc && uc->max_user_connections >= 0 ? uc->max_user_connections : pgv.cfg->max_user_connections);
		cell_int(&c, seen[k].servers);
		cell_int(&c, uc && uc->max_user_client_connections >= 0 ? uc->max_user_client_connections :
				     pgv.cfg->max_user_client_connections);
		cell_int(&c, seen[k].clients);
		result_row(r, c.v);
	}
}

static void show_lists(struct result *r)
{
	static const char *const names[] = { "list", "items" };
	int dbs = 0, pools = 0, used_clients = 0, used_servers = 0, users = 0;
	struct db *db;
	struct pool *pool;
	for_each_db(db) {
		dbs++;
		for_each_pool(db, pool) {
			pools++;
			used_clients += (int)(pool->active_clients.count + pool->waiting_clients.count +
					      pool->welcome_clients.count);
			used_servers += pool_server_count(pool);
		}
	}
	users = pgv.auth ? (int)auth_store_count(pgv.auth) : 0;
	uint32_t free_bufs, used_bufs, bufsize;
	netbuf_buffer_stats(&free_bufs, &used_bufs, &bufsize);
	struct { const char *name; long long v; } rows[] = {
		{ "databases", dbs }, { "users", users }, { "peers", 0 }, { "pools", pools },
		{ "peer_pools", 0 }, { "free_clients", 0 }, { "used_clients", used_clients },
		{ "login_clients", pgv.login_clients.count }, { "free_servers", 0 },
		{ "used_servers", used_servers }, { "dns_names", 0 }, { "dns_zones", 0 },
		{ "dns_queries", 0 }, { "dns_pending", 0 },
	};
	struct cells c;
	result_begin(r, "si", names);
	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		cells_reset(&c);
		cell_str(&c, rows[i].name);
		cell_int(&c, rows[i].v);
		result_row(r, c.v);
	}
}

static void show_mem(struct result *r)
{
	static const char *const names[] = { "name", "size", "used", "free", "memtotal" };
	uint32_t free_bufs, used_bufs, bufsize;
	netbuf_buffer_stats(&free_bufs, &used_bufs, &bufsize);
	int clients = 0, servers = 0, pools = 0, dbs = 0;
	struct db *db;
	struct pool *pool;
	for_each_db(db) {
		dbs++;
		for_each_pool(db, pool) {
			pools++;
			clients += (int)(pool->active_clients.count + pool->waiting_clients.count + pool->welcome_clients.count);
			servers += pool_server_count(pool);
		}
	}
	clients += (int)pgv.login_clients.count;
	struct { const char *name; long long size, used, free; } rows[] = {
		{ "client_cache", (long long)sizeof(struct client), clients, 0 },
		{ "server_cache", (long long)sizeof(struct server), servers, 0 },
		{ "pool_cache", (long long)sizeof(struct pool), pools, 0 },
		{ "db_cache", (long long)sizeof(struct db), dbs, 0 },
		{ "iobuf_cache", bufsize, used_bufs, free_bufs },
	};
	struct cells c;
	result_begin(r, "siiii", names);
	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		cells_reset(&c);
		cell_str(&c, rows[i].name);
		cell_int(&c, rows[i].size);
		cell_int(&c, rows[i].used);
		cell_int(&c, rows[i].free);
		cell_int(&c, rows[i].size * (rows[i].used + rows[i].free));
		result_row(r, c.v);
	}
}

static void show_version(struct result *r)
{
	static const char *const names[] = { "version" };
	const char *row[1] = { "pgvalve " PACKAGE_VERSION };
	result_begin(r, "s", names);
	result_row(r, row);
}

static void show_state(struct result *r)
{
	static const char *const names[] = { "key", "value" };
	const char *rows[][2] = {
		{ "active", pgv.paused_all || pgv.shutting_down ? "no" : "yes" },
		{ "paused", pgv.paused_all ? "yes" : "no" },
		{ "suspended", "no" },
	};
	result_begin(r, "ss", names);
	for (size_t i = 0; i < ARRAY_SIZE(rows); i++)
		result_row(r, rows[i]);
}

static void show_empty(struct result *r, const char *types, const char *const *names)
{
	result_begin(r, types, names);
}

static void show_peers(struct result *r)
{
	static const char *const names[] = { "peer_id", "host", "port", "pool_size" };
	struct cells c;
	result_begin(r, "isii", names);
	for (const struct peer_config *pc = pgv.cfg->peers; pc; pc = pc->next) {
		cells_reset(&c);
		cell_int(&c, pc->peer_id);
		cell_str(&c, pc->host);
		cell_int(&c, pc->port);
		cell_int(&c, pc->pool_size);
		result_row(r, c.v);
	}
}

static const char help_text[] =
	"Console usage\n"
	"\tSHOW HELP|CONFIG|USERS|DATABASES|POOLS|CLIENTS|SERVERS|PEERS|PEER_POOLS\n"
	"\tSHOW LISTS|STATS|STATS_TOTALS|STATS_AVERAGES|TOTALS|VERSION|STATE\n"
	"\tSHOW MEM|SOCKETS|ACTIVE_SOCKETS|DNS_HOSTS|DNS_ZONES\n"
	"\tSET key = arg\n"
	"\tRELOAD\n"
	"\tPAUSE [<db>]\n"
	"\tRESUME [<db>]\n"
	"\tDISABLE <db>\n"
	"\tENABLE <db>\n"
	"\tRECONNECT [<db>]\n"
	"\tKILL <db>\n"
	"\tKILL_CLIENT <client_id>\n"
	"\tWAIT_CLOSE [<db>]\n"
	"\tSHUTDOWN\n"
	"\tSHUTDOWN WAIT_FOR_SERVERS|WAIT_FOR_CLIENTS";

/* ---------------------------------------------------------------- command parsing */

#define MAX_WORDS 8

struct command {
	char *words[MAX_WORDS];
	int nwords;
	char text[1024];
};

/* Splits on white space, keeping a quoted word whole; strips one trailing ';'. */
static bool parse_command(const char *query, struct command *cmd)
{
	size_t len = strlen(query);
	if (len >= sizeof(cmd->text))
		return false;
	memcpy(cmd->text, query, len + 1);
	while (len > 0 && (isspace((unsigned char)cmd->text[len - 1]) || cmd->text[len - 1] == ';'))
		cmd->text[--len] = '\0';
	cmd->nwords = 0;
	char *p = cmd->text;
	while (*p) {
		while (isspace((unsigned char)*p))
			p++;
		if (!*p)
			break;
		if (cmd->nwords == MAX_WORDS)
			return false;
		if (*p == '"' || *p == '\'') {
			char q = *p++;
			cmd->words[cmd->nwords++] = p;
			while (*p && *p != q)
				p++;
			if (*p != q)
				return false;
			*p++ = '\0';
			continue;
		}
		cmd->words[cmd->nwords++] = p;
		while (*p && !isspace((unsigned char)*p) && *p != '=')
			p++;
		if (*p == '=') {
			/* "key=value": make '=' a word of its own */
			if (p == cmd->words[cmd->nwords - 1]) {
				*p++ = '\0';
				cmd->words[cmd->nwords - 1] = "=";
				continue;
			}
			memmove(p + 1, p, strlen(p) + 1);	/* room for a terminator */
			if (strlen(cmd->text) + 1 >= sizeof(cmd->text))
				return false;
			*p = '\0';
			p++;
			continue;
		}
		if (*p)
			*p++ = '\0';
	}
	return true;
}

static bool word_is(const char *w, const char *kw)
{
	return strcasecmp(w, kw) == 0;
}

/* ---------------------------------------------------------------- control commands */

static bool user_is_admin(const struct client *client)
{
	return client->admin_superuser || config_list_contains(pgv.cfg->admin_users, client_user_name(client));
}

static struct db *find_named_db(const char *name)
{
	struct db *db = pool_find_db(name);
	if (!db && admin_is_admin_dbname(name))
		db = adm.db;
	return db;
}

static void send_error_and_ready(struct client *client, const char *sqlstate, const char *msg)
{
	struct pktbuf b;
	pktbuf_init(&b, 256);
	proto_put_error(&b, "ERROR", sqlstate, msg);
	proto_put_ready(&b, 'I');
	netbuf_send(&client->nb, b.buf, b.len);
	pktbuf_free(&b);
}

static void send_complete_and_ready(struct client *client, const char *tag)
{
	struct pktbuf b;
	pktbuf_init(&b, 64);
	put_complete(&b, tag);
	proto_put_ready(&b, 'I');
	netbuf_send(&client->nb, b.buf, b.len);
	pktbuf_free(&b);
}

/* A console client waits for PAUSE/WAIT_CLOSE to complete. */
static void wait_for(struct client *client, enum admin_wait what, struct db *db)
{
	client->admin_wait = what;
	client->admin_wait_db = db;
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

static bool wait_done(const struct client *client)
{
	struct db *db;
	if (client->admin_wait_db) {
		return client->admin_wait == ADMIN_WAIT_PAUSE ? db_paused_done(client->admin_wait_db) :
			db_close_done(client->admin_wait_db);
	}
	for_each_db(db) {
		if (db->is_admin)
			continue;
		if (client->admin_wait == ADMIN_WAIT_PAUSE ? !db_paused_done(db) : !db_close_done(db))
			return false;
	}
	return true;
}

void admin_check_waits(void)
{
	struct pool *pool;
	if (!adm.db)
		return;
	for_each_pool(adm.db, pool) {
		list_for_each(pos, &pool->active_clients) {
			struct client *client = container_of(pos, struct client, node);
			if (client->admin_wait == ADMIN_WAIT_NONE || !wait_done(client))
				continue;
			const char *tag = client->admin_wait == ADMIN_WAIT_PAUSE ? "PAUSE" : "WAIT_CLOSE";
			client->admin_wait = ADMIN_WAIT_NONE;
			client->admin_wait_db = NULL;
			send_complete_and_ready(client, tag);
			netbuf_resume(&client->nb);
		}
	}
	if (pgv.shutdown_mode == SHUTDOWN_WAIT_FOR_SERVERS && pgv.server_count == 0)
		loop_exit_now();
}

static void pause_db(struct db *db)
{
	if (db->is_admin)
		return;
	db->paused = true;
	pool_db_pause(db);
}

void admin_pause_all(void)
{
	struct db *db;
	pgv.paused_all = true;
	log_info("PAUSE: all databases");
	for_each_db(db)
		pause_db(db);
}

static void resume_db(struct db *db)
{
	db->paused = false;
	pool_db_resume(db);
}

void admin_resume_all(void)
{
	struct db *db;
	pgv.paused_all = false;
	log_info("RESUME: all databases");
	for_each_db(db)
		resume_db(db);
}

void admin_shutdown_wait_for_servers(void)
{
	if (pgv.shutdown_mode != SHUTDOWN_NONE)
		return;
	log_info("shutting down once all servers are released");
	pgv.shutdown_mode = SHUTDOWN_WAIT_FOR_SERVERS;
	pgv.shutting_down = true;
	listener_close();
	admin_pause_all();
	admin_check_waits();
}

void admin_shutdown_wait_for_clients(void)
{
	if (pgv.shutdown_mode != SHUTDOWN_NONE)
		return;
	log_info("shutting down once all clients are gone");
	pgv.shutdown_mode = SHUTDOWN_WAIT_FOR_CLIENTS;
	loop_begin_graceful_shutdown();
}

static void kill_db(struct db *db)
{
	pause_db(db);
	list_for_each(ppos, &db->pools) {
		struct pool *pool = container_of(ppos, struct pool, node);
		struct list *clists[] = { &pool->active_clients, &pool->waiting_clients, &pool->welcome_clients };
		for (size_t i = 0; i < ARRAY_SIZE(clists); i++)
			list_for_each_safe(pos, tmp, clists[i])
				client_close(container_of(pos, struct client, node), "08P01", "database killed by admin command");
		struct list *slists[] = { &pool->active_servers, &pool->idle_servers, &pool->used_servers,
					  &pool->tested_servers, &pool->login_servers };
		for (size_t i = 0; i < ARRAY_SIZE(slists); i++)
			list_for_each_safe(pos, tmp, slists[i])
				server_close(container_of(pos, struct server, node), "database killed by admin command");
	}
}

static struct client *find_client_by_id(uint64_t id)
{
	struct db *db;
	struct pool *pool;
	for_each_db(db) {
		for_each_pool(db, pool) {
			struct list *lists[] = { &pool->active_clients, &pool->waiting_clients, &pool->welcome_clients };
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

/* Runs a control command; returns false if the client was closed or is now waiting. */
static bool run_control(struct client *client, struct command *cmd)
{
	const char *verb = cmd->words[0];
	const char *arg = cmd->nwords > 1 ? cmd->words[1] : NULL;
	char msg[600];
	struct db *db = NULL;

	if (word_is(verb, "RELOAD") && cmd->nwords == 1) {
		if (reload_config(msg, sizeof(msg)) < 0) {
			send_error_and_ready(client, "F0000", msg);
			return true;
		}
		send_complete_and_ready(client, "RELOAD");
		return true;
	}
	if (word_is(verb, "SET")) {
		/* SET key = value (also key TO value) */
		if (cmd->nwords != 4 || (strcmp(cmd->words[2], "=") != 0 && !word_is(cmd->words[2], "TO"))) {
			send_error_and_ready(client, "42601", "syntax error: use SET key = value");
			return true;
		}
		const struct param_def *p = config_find_param(cmd->words[1]);
		if (!p) {
			snprintf(msg, sizeof(msg), "unknown parameter: %s", cmd->words[1]);
			send_error_and_ready(client, "42704", msg);
			return true;
		}
		if (!p->reloadable) {
			snprintf(msg, sizeof(msg), "parameter %s cannot be changed while running", p->name);
			send_error_and_ready(client, "55P02", msg);
			return true;
		}
		char err[300];
		if (config_set_param(pgv.cfg, p, cmd->words[3], err, sizeof(err)) < 0) {
			snprintf(msg, sizeof(msg), "invalid value for %s: %s", p->name, err);
			send_error_and_ready(client, "22023", msg);
			return true;
		}
		pgv.config_generation++;
		log_info("SET %s = %s (admin console)", p->name, cmd->words[3]);
		send_complete_and_ready(client, "SET");
		return true;
	}
	if (arg && !word_is(verb, "KILL_CLIENT") && !word_is(verb, "SHUTDOWN")) {
		db = find_named_db(arg);
		if (!db) {
			snprintf(msg, sizeof(msg), "no such database: %s", arg);
			send_error_and_ready(client, "08P01", msg);
			return true;
		}
	}
	if (word_is(verb, "PAUSE") && cmd->nwords <= 2) {
		if (db)
			pause_db(db);
		else
			admin_pause_all();
		wait_for(client, ADMIN_WAIT_PAUSE, db);
		return false;
	}
	if (word_is(verb, "RESUME") && cmd->nwords <= 2) {
		if (db)
			resume_db(db);
		else
			admin_resume_all();
		send_complete_and_ready(client, "RESUME");
		return true;
	}
	if ((word_is(verb, "DISABLE") || word_is(verb, "ENABLE")) && cmd->nwords == 2) {
		db->disabled = word_is(verb, "DISABLE");
		send_complete_and_ready(client, db->disabled ? "DISABLE" : "ENABLE");
		return true;
	}
	if (word_is(verb, "RECONNECT") && cmd->nwords <= 2) {
		struct db *d;
		for_each_db(d)
			if (!db || d == db)
				pool_db_reconnect(d);
		send_complete_and_ready(client, "RECONNECT");
		return true;
	}
	if (word_is(verb, "KILL") && cmd->nwords == 2) {
		if (db == adm.db) {
			send_error_and_ready(client, "08P01", "cannot kill the admin database");
			return true;
		}
		kill_db(db);
		send_complete_and_ready(client, "KILL");
		return true;
	}
	if (word_is(verb, "KILL_CLIENT") && cmd->nwords == 2) {
		char *end;
		unsigned long long id = strtoull(arg, &end, 10);
		struct client *target = *end ? NULL : find_client_by_id(id);
		if (!target) {
			snprintf(msg, sizeof(msg), "no such client: %s", arg);
			send_error_and_ready(client, "08P01", msg);
			return true;
		}
		if (target == client) {
			send_complete_and_ready(client, "KILL_CLIENT");
			client_close(client, "08P01", "client killed by admin command");
			return false;
		}
		client_close(target, "08P01", "client killed by admin command");
		send_complete_and_ready(client, "KILL_CLIENT");
		return true;
	}
	if (word_is(verb, "WAIT_CLOSE") && cmd->nwords <= 2) {
		wait_for(client, ADMIN_WAIT_CLOSE, db);
		return false;
	}
	if (word_is(verb, "SHUTDOWN")) {
		if (cmd->nwords == 1) {
			send_complete_and_ready(client, "SHUTDOWN");
			log_info("SHUTDOWN from the admin console");
			loop_exit_now();
			return true;
		}
		if (cmd->nwords == 2 && word_is(arg, "WAIT_FOR_SERVERS")) {
			send_complete_and_ready(client, "SHUTDOWN");
			admin_shutdown_wait_for_servers();
			return true;
		}
		if (cmd->nwords == 2 && word_is(arg, "WAIT_FOR_CLIENTS")) {
			send_complete_and_ready(client, "SHUTDOWN");
			admin_shutdown_wait_for_clients();
			return true;
		}
	}
	send_error_and_ready(client, "42601", "invalid command");
	return true;
}

/* ---------------------------------------------------------------- dispatch */

struct show_entry {
	const char *name;
	void (*fn)(struct result *r);
};

static void show_stats_all(struct result *r) { show_stats(r, true, true); }
static void show_stats_totals(struct result *r) { show_stats(r, true, false); }
static void show_stats_averages(struct result *r) { show_stats(r, false, true); }
static void show_sockets_all(struct result *r) { show_sockets(r, false); }
static void show_sockets_active(struct result *r) { show_sockets(r, true); }
static void show_peer_pools(struct result *r)
{
	static const char *const names[] = { "peer_id", "cl_active_cancel_req", "cl_waiting_cancel_req",
					     "sv_active_cancel", "sv_login" };
	show_empty(r, "iiiii", names);
}
static void show_dns_hosts(struct result *r)
{
	static const char *const names[] = { "hostname", "ttl", "addrs" };
	show_empty(r, "sqs", names);
}
static void show_dns_zones(struct result *r)
{
	static const char *const names[] = { "zonename", "serial", "count" };
	show_empty(r, "sqi", names);
}

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
};

static void run_show(struct client *client, struct command *cmd)
{
	if (cmd->nwords != 2) {
		send_error_and_ready(client, "42601", "syntax error: use SHOW <what>");
		return;
	}
	const char *what = cmd->words[1];
	if (word_is(what, "HELP")) {
		struct pktbuf b;
		pktbuf_init(&b, 1024);
		proto_put_notice(&b, "00000", help_text);
		put_complete(&b, "SHOW");
		proto_put_ready(&b, 'I');
		netbuf_send(&client->nb, b.buf, b.len);
		pktbuf_free(&b);
		return;
	}
	for (size_t i = 0; i < ARRAY_SIZE(shows); i++) {
		if (!word_is(what, shows[i].name))
			continue;
		struct result r;
		pktbuf_init(&r.b, 4096);
		shows[i].fn(&r);
		put_complete(&r.b, "SHOW");
		proto_put_ready(&r.b, 'I');
		netbuf_send(&client->nb, r.b.buf, r.b.len);
		pktbuf_free(&r.b);
		return;
	}
	char msg[300];
	snprintf(msg, sizeof(msg), "unknown SHOW item: %s", what);
	send_error_and_ready(client, "42601", msg);
}

static bool run_query(struct client *client, const char *query)
{
	struct command cmd;
	if (!parse_command(query, &cmd)) {
		send_error_and_ready(client, "42601", "syntax error in admin command");
		return true;
	}
	if (cmd.nwords == 0) {
		struct pktbuf b;
		pktbuf_init(&b, 32);
		pktbuf_begin(&b, 'I');	/* EmptyQueryResponse */
		pktbuf_end(&b);
		proto_put_ready(&b, 'I');
		netbuf_send(&client->nb, b.buf, b.len);
		pktbuf_free(&b);
		return true;
	}
	client_log(LOG_LEVEL_DEBUG, client, "admin command: %s", query);
	if (word_is(cmd.words[0], "SHOW")) {
		run_show(client, &cmd);
		return true;
	}
	if (!user_is_admin(client)) {
		send_error_and_ready(client, "42501", "admin access needed");
		return true;
	}
	return run_control(client, &cmd);
}

bool admin_handle_packet(struct client *client, const struct pkt *pkt)
{
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
			client_close(client, "08P01", "invalid query message");
			return false;
		}
		run_query(client, query);
		return client->state != CL_CLOSED;
	}
	case 'X':
		netbuf_skip(&client->nb, pkt->len);
		client_close(client, NULL, "client close request");
		return false;
	case 'P': case 'B': case 'D': case 'E': case 'C': case 'H':
		netbuf_skip(&client->nb, pkt->len);
		if (!client->admin_ext_error) {
			struct pktbuf b;
			pktbuf_init(&b, 128);
			proto_put_error(&b, "ERROR", "08P01", "the admin console supports the simple query protocol only");
			netbuf_send(&client->nb, b.buf, b.len);
			pktbuf_free(&b);
			client->admin_ext_error = true;
		}
		return true;
	case 'S': {
		netbuf_skip(&client->nb, pkt->len);
		client->admin_ext_error = false;
		uint8_t mem[8];
		struct pktbuf b;
		pktbuf_init_fixed(&b, mem, sizeof(mem));
		proto_put_ready(&b, 'I');
		netbuf_send(&client->nb, b.buf, b.len);
		return true;
	}
	default: {
		char msg[64];
		snprintf(msg, sizeof(msg), "unsupported message type: 0x%02x", pkt->type);
		client_close(client, "08P01", msg);
		return false;
	}
	}
}

bool admin_check_access(struct client *client)
{
	const char *user = client_user_name(client);
	if (client->admin_superuser || config_list_contains(pgv.cfg->admin_users, user) ||
	    config_list_contains(pgv.cfg->stats_users, user))
		return true;
	client_close(client, "28000", "not allowed");
	return false;
}
