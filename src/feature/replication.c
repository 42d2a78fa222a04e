/*
 * replication.c - replication connections: one dedicated server per
 * client, opened with the client's own startup parameters, relayed
 * untouched, closed together (see replication.h).
 *
 * Why not pooled: a walsender's session cannot be handed to anyone else
 * (slots, CopyBoth streams, a physical walsender runs no SQL to be reset),
 * and replication connections live for hours, so reuse would gain nothing.
 */
#include "common.h"
#include "replication.h"
#include "client.h"
#include "config.h"
#include "log.h"
#include "pool.h"
#include "server.h"

#include <strings.h>

/* ---------------------------------------------------------------- parameters */

/* PostgreSQL's boolean words: whole or a unique prefix, any case. */
static bool parse_bool_word(const char *v, bool *out)
{
	size_t n = strlen(v);
	if (n == 0)
		return false;
	static const struct { const char *word; size_t min; bool value; } words[] = {
		{ "true", 1, true }, { "false", 1, false }, { "yes", 1, true }, { "no", 1, false },
		{ "on", 2, true }, { "off", 2, false }, { "1", 1, true }, { "0", 1, false },
	};
	for (size_t i = 0; i < ARRAY_SIZE(words); i++) {
		if (n >= words[i].min && n <= strlen(words[i].word) && strncasecmp(v, words[i].word, n) == 0) {
			*out = words[i].value;
			return true;
		}
	}
	return false;
}

bool replication_parse(const char *value, enum replication_type *type)
{
	bool on;
	if (strcmp(value, "database") == 0) {	/* case-sensitive, as PostgreSQL */
		*type = REPLICATION_LOGICAL;
		return true;
	}
	if (!parse_bool_word(value, &on))
		return false;
	*type = on ? REPLICATION_PHYSICAL : REPLICATION_NONE;
	return true;
}

const char *replication_type_name(enum replication_type type)
{
	switch (type) {
	case REPLICATION_LOGICAL:
		return "logical";
	case REPLICATION_PHYSICAL:
		return "physical";
	case REPLICATION_NONE:
		break;
	}
	return "none";
}

static bool param_is_pgvalves(const char *name)
{
	return strcmp(name, "user") == 0 || strcmp(name, "database") == 0 || strcmp(name, "replication") == 0 ||
	       strncmp(name, "_pq_.", 5) == 0;
}

struct replication *replication_new(enum replication_type type, const struct startup_params *sp)
{
	size_t len = 0;
	for (int i = 0; i < sp->count; i++)
		if (!param_is_pgvalves(sp->names[i]))
			len += strlen(sp->names[i]) + strlen(sp->values[i]) + 2;
	struct replication *repl = xcalloc(1, sizeof(*repl) + len);
	repl->type = type;
	char *p = repl->params;
	for (int i = 0; i < sp->count; i++) {
		if (param_is_pgvalves(sp->names[i]))
			continue;
		size_t n = strlen(sp->names[i]) + 1, v = strlen(sp->values[i]) + 1;
		memcpy(p, sp->names[i], n);
		memcpy(p + n, sp->values[i], v);
		p += n + v;
	}
	repl->params_len = (uint32_t)len;	/* bounded by the startup packet's 10,000 bytes */
	return repl;
}

bool replication_has_param(const struct replication *repl, const char *name)
{
	const char *p = repl->params, *end = repl->params + repl->params_len;
	while (p < end) {
		size_t n = strlen(p) + 1;
		if (strcasecmp(p, name) == 0)
			return true;
		p += n;
		p += strlen(p) + 1;
	}
	return false;
}

void replication_put_startup(const struct replication *repl, struct pktbuf *b)
{
	pktbuf_put_string(b, "replication");
	pktbuf_put_string(b, repl->type == REPLICATION_LOGICAL ? "database" : "true");
	pktbuf_put_bytes(b, repl->params, repl->params_len);
}

/* ---------------------------------------------------------------- waiting for a server */

void replication_client_logged_in(struct client *client)
{
	netbuf_pause(&client->nb);
	client->request_time = now_usec();
	client_set_state(client, CL_WELCOME);
	replication_launch_servers(client->pool);
}

/* The first replication client of pool that has no server on its way, or NULL. */
static struct client *next_without_server(const struct pool *pool)
{
	list_for_each(pos, &pool->welcome_clients) {
		struct client *client = container_of(pos, struct client, node);
		if (client_repl(client) && !client->repl->server)
			return client;
	}
	return NULL;
}

/*
 * Closes pool's idle server that has waited longest for a client (the tail:
 * servers idle in LIFO order; under server_round_robin, the next in turn).
 * No launch runs from inside that close: the caller is launching, and a
 * nested launch could close servers a caller's loop still holds.
 */
static bool evict_own_idle(struct pool *pool)
{
	struct list_node *tail = list_last(&pool->idle_servers);
	if (!tail)
		return false;
	struct server *victim = container_of(tail, struct server, node);
	victim->connecting_sync = true;
	server_close(victim, "evicted for pool_size");
	return true;
}

/* Room for one more server of pool: under its size and the database/user limits, its idle servers closed if need be. */
static bool make_room(struct pool *pool)
{
	while (pool_server_count(pool) >= pool_effective_size(pool))
		if (!evict_own_idle(pool))
			return false;
	while (!pool_may_open_server(pool))	/* max_db/user_connections: other pools' idle servers first */
		if (!evict_own_idle(pool))
			return false;
	return true;
}

void replication_launch_servers(struct pool *pool)
{
	struct client *client;
	if (db_paused(pool->db) || pool->db->removed)
		return;
	if (pool_login_retry_pending(pool, now_usec()))
		return;		/* the server could not be reached lately: the janitor tries again after server_login_retry */
	while ((client = next_without_server(pool))) {
		if (!make_room(pool))
			return;		/* a server leaving the pool calls again (pool_after_change) */
		int opened = pool_open_replication_server(pool, client);
		if (opened < 0)
			return;		/* the instance's budget is used up: tried again when it frees */
		if (opened == 0)
			continue;	/* it could not even start: the client went on waiting or was closed */
	}
}

bool replication_claims_server(const struct pool *pool)
{
	const struct client *repl = next_without_server(pool);
	if (!repl || pool_login_retry_pending(pool, now_usec()))
		return false;	/* (while launches wait for server_login_retry, the server would go for nothing) */
	struct list_node *n = list_first(&pool->waiting_clients);
	return !n || container_of(n, struct client, node)->request_time >= repl->request_time;
}

/* ---------------------------------------------------------------- linked */

void replication_server_ready(struct server *server)
{
	struct client *client = server->repl_client;
	if (!client) {		/* cannot happen: a leaving client closes its server (replication_client_closing) */
		server_close(server, "replication client disconnected");
		return;
	}
	server->repl_client = NULL;
	client->repl->server = NULL;
	server_link(server, client);
	client_finish_replication_login(client, server->params, server->param_count, server->txn_status);
}

void replication_server_failed(struct server *server, const char *sqlstate, const char *message)
{
	struct client *client = server->repl_client;
	if (!client)
		return;
	server->repl_client = NULL;
	client->repl->server = NULL;
	client_close(client, sqlstate, message);
}

void replication_server_lost(struct server *server, const char *reason)
{
	struct client *client = server->repl_client;
	if (!client)
		return;
	server->repl_client = NULL;
	client->repl->server = NULL;
	client_log(LOG_LEVEL_INFO, client, "its replication server went away before login (%s), waiting for another",
		   reason);
}

void replication_client_closing(struct client *client)
{
	struct server *server = client_repl(client) ? client->repl->server : NULL;
	if (server) {
		/* Still logging in: nobody else may have it. */
		server->repl_client = NULL;
		client->repl->server = NULL;
		server->connecting_sync = true;	/* no launches from inside a client's close (client.c) */
		server_close(server, "replication client disconnected");
		server->connecting_sync = false;
	}
}

/* ---------------------------------------------------------------- the client kind */

/*
 * A login with replication=...: its value parsed as PostgreSQL does, its
 * other startup parameters (less those the operator has pgvalve ignore)
 * kept for its own server.
 */
static int replication_claim(struct client *client, const struct startup_params *sp, const char *dbname)
{
	const char *value = startup_param(sp, "replication");
	enum replication_type type = REPLICATION_NONE;
	char msg[256];
	if (!value)
		return 0;
	if (!replication_parse(value, &type)) {
		snprintf(msg, sizeof(msg), "invalid value for parameter \"replication\": \"%s\"", value);
		client_close(client, "22023", msg);
		return -1;
	}
	if (type == REPLICATION_NONE)
		return 0;
	if (config_is_admin_dbname(dbname)) {
		client_close(client, "08P01", "replication connections to the admin console are not supported");
		return -1;
	}
	struct startup_params fwd = { .version = sp->version };
	for (int i = 0; i < sp->count; i++) {
		if (config_list_contains(pgv.cfg->ignore_startup_parameters, sp->names[i]))
			continue;
		fwd.names[fwd.count] = sp->names[i];
		fwd.values[fwd.count++] = sp->values[i];
	}
	client->repl = replication_new(type, &fwd);
	return 1;
}

/* Its own server: every message relayed untouched. */
static bool replication_client_packet(struct client *client, const struct pkt *pkt)
{
	client->pool->db->stats.total.bytes_received += pkt->len;
	netbuf_forward(&client->nb, pkt->len);
	return true;
}

static bool replication_gives_param(const struct client *client, const char *name)
{
	return replication_has_param(client->repl, name);
}

static void replication_put_client_startup(const struct client *client, struct pktbuf *b)
{
	replication_put_startup(client->repl, b);
}

static const struct client_kind_ops replication_kind = {
	.claim = replication_claim,
	.logged_in = replication_client_logged_in,
	.data_packet = replication_client_packet,
	.closing = replication_client_closing,
	.gives_startup_param = replication_gives_param,
	.put_startup = replication_put_client_startup,
	.own_server_ready = replication_server_ready,
	.own_server_failed = replication_server_failed,
	.own_server_lost = replication_server_lost,
	.launch_servers = replication_launch_servers,
	.claims_server = replication_claims_server,
};

void replication_register(void)
{
	client_register_kind(CLIENT_REPLICATION, &replication_kind);
}
