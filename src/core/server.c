/*
 * server.c - server connections: connect, hand over to server_login.c
 * until logged in, then relay a client's replies and keep the bookkeeping
 * that tells the pool when the server may be reused.
 *
 * State diagram: see server.h. server_set_state() is the only place that
 * changes a server's state and list.
 *
 * The hot path (server_active_packet) forwards every reply untouched and
 * reads only ReadyForQuery's status byte and ParameterStatus values.
 * Replies to pgvalve's own queries (parameter SETs, reset and check
 * queries) are consumed here and never reach a client.
 *
 * Owns: struct server. The login is server_login.c's, cancel requests
 * server_cancel.c's (through server_internal.h). Must not touch a
 * client's socket except through netbuf forwarding and client.c.
 */
#include "common.h"
#include "server.h"
#include "server_internal.h"
#include "client.h"
#include "auth.h"
#include "config.h"
#include "crypto.h"
#include "tcp.h"
#include "log.h"
#include "reap.h"
#include "pool.h"
#include "relay.h"
#include "proto.h"
#include "replication.h"
#include "scram.h"
#include "scram_cache.h"
#include "stats.h"
#include "tls.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>

static bool server_handler(struct netbuf *nb, enum netbuf_event ev, const struct pkt *pkt);
static void close_linked_client(struct server *server, const char *reason);

struct server_hooks server_hooks;
bool server_hot_standby_mixed;

/* Whether this logged-in server's in_hot_standby is other than its pool's welcome says. */
void server_note_hot_standby(const struct server *server)
{
	static int idx = -2;
	if (idx == -2)
		idx = varcache_index("in_hot_standby");
	if (varcache_get(server->vars, idx) != varcache_get(server->pool->welcome_vars, idx))
		server_hot_standby_mixed = true;
}

/* ---------------------------------------------------------------- naming */

const char *server_prefix(const struct server *server, char *buf, size_t size)
{
	char host[INET6_ADDRSTRLEN + 8] = "unix";
	int port = server->pool->db->cfg->port;
	sockaddr_host_text(&server->addr.sa, host, sizeof(host), NULL);
	/* not resolved yet: the name it waits for */
	const char *shown = server->addr.sa.sa_family == AF_UNSPEC && server->host ? server->host : host;
	return log_prefix_text(buf, size, 'S', server, server->pool->db->name, server->pool->user, shown, port);
}

/* ---------------------------------------------------------------- state */

static struct list *server_state_list(struct server *server, enum server_state state)
{
	struct pool *pool = server->pool;
	switch (state) {
	case SV_LOOKUP:
	case SV_LOGIN:
		return &pool->login_servers;
	case SV_IDLE:
		return &pool->idle_servers;
	case SV_ACTIVE:
		return &pool->active_servers;
	case SV_USED:
		return &pool->used_servers;
	case SV_TESTED:
		return &pool->tested_servers;
	case SV_CLOSED:
		return &pgv.dead_servers;
	}
	return NULL;
}

void server_set_state(struct server *server, enum server_state state)
{
	if (list_node_linked(&server->node))
		list_remove(server_state_list(server, server->state), &server->node);
	server->state = state;
	struct list *l = server_state_list(server, state);
	/*
	 * Idle servers are taken from the head. LIFO (the default) puts the
	 * most recently used one first, so a few hot connections serve most
	 * traffic; server_round_robin cycles through all of them.
	 */
	if (state == SV_IDLE && !pgv.cfg->server_round_robin)
		list_prepend(l, &server->node);
	else
		list_append(l, &server->node);
	if (state == SV_CLOSED)
		reap_schedule();
}

/* ---------------------------------------------------------------- connect */

/*
 * Host lists (host=a,b,c): each new connection starts at one entry, per
 * load_balance_hosts: round-robin takes the next entry every time,
 * disable keeps the current entry until a connection to it fails. A
 * refused or unreachable connect moves the same connection on at once:
 * first to the name's other addresses, then to the next entries, each
 * tried once. A name that does not resolve ends the attempt, as in
 * PgBouncer 1.26 ("server DNS lookup failed"): the next connection starts
 * at the next entry. When no entry is left, the pool's clients wait for
 * the next try (server_login_retry).
 */

int host_list_count(const char *list)
{
	int n = 1;
	for (const char *p = list; *p; p++)
		if (*p == ',')
			n++;
	return n;
}

char *host_list_entry(const char *list, int idx)
{
	const char *p = list;
	for (int i = 0; i < idx && p; i++) {
		p = strchr(p, ',');
		if (p)
			p++;
	}
	if (!p)
		return xstrdup("");
	while (*p == ' ' || *p == '\t')
		p++;
	size_t n = strcspn(p, ",");
	while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t'))
		n--;
	char *e = xmalloc(n + 1);
	memcpy(e, p, n);
	e[n] = '\0';
	return e;
}

static bool host_eligible(const struct pool *pool, int idx)
{
	return !server_hooks.host_eligible || server_hooks.host_eligible(pool, idx);
}

/* A replication client's own server goes wherever the list says: role routing is for pooled servers. */
static bool server_host_eligible(const struct server *server, int idx)
{
	return server->replication != REPLICATION_NONE || host_eligible(server->pool, idx);
}

/* Servers of pool on entry idx of its host list, logging in or logged in. */
static int pool_host_servers(const struct pool *pool, int idx)
{
	const struct list *lists[] = { &pool->login_servers, &pool->idle_servers, &pool->active_servers,
				       &pool->used_servers, &pool->tested_servers };
	int count = 0;
	for (size_t i = 0; i < ARRAY_SIZE(lists); i++) {
		list_for_each(pos, lists[i]) {
			if (container_of(pos, struct server, node)->host_idx == idx)
				count++;
		}
	}
	return count;
}

/* least-connections: the eligible entry with the fewest servers of the pool, ties taken in turn. */
static int least_connections_host(struct pool *pool, int n, bool any)
{
	unsigned start = pool->db->host_next++;
	int best = -1, best_count = 0;
	for (int i = 0; i < n; i++) {
		int idx = (int)((start + (unsigned)i) % (unsigned)n);
		if (!any && !host_eligible(pool, idx))
			continue;
		int count = pool_host_servers(pool, idx);
		if (best < 0 || count < best_count) {
			best = idx;
			best_count = count;
		}
	}
	return best;
}

/*
 * The entry a new connection starts at, per load_balance_hosts, skipping
 * entries role routing rules out now (server_hooks.host_eligible) unless
 * any; -1 when none is eligible: the pool's clients wait (the janitor
 * asks again).
 */
static int pool_first_host(struct pool *pool, int n, bool any)
{
	struct db *db = pool->db;
	if (n > 1 && db->cfg->load_balance_hosts == LOAD_BALANCE_HOSTS_LEAST_CONNECTIONS)
		return least_connections_host(pool, n, any);
	unsigned start = 0;
	if (n > 1)
		start = db->cfg->load_balance_hosts == LOAD_BALANCE_HOSTS_DISABLE ? db->host_next : db->host_next++;
	for (int i = 0; i < n; i++) {
		int idx = (int)((start + (unsigned)i) % (unsigned)n);
		if (any || host_eligible(pool, idx))
			return idx;
	}
	return -1;
}

/* load_balance_hosts=disable: a failed connection to the current entry makes the next one current. */
void db_host_failed(struct db *db, int idx)
{
	if (server_hooks.host_failed)
		server_hooks.host_failed(db, idx);
	int n = db->host_count;
	if (n > 1 && db->cfg->load_balance_hosts == LOAD_BALANCE_HOSTS_DISABLE &&
	    (int)(db->host_next % (unsigned)n) == idx)
		db->host_next = (unsigned)(idx + 1) % (unsigned)n;
}

static int server_port(const struct server *server)
{
	return server->pool->db->cfg->port > 0 ? server->pool->db->cfg->port : 5432;
}

/* 1: server->addr is set; 0: server->host is a name to look up; -1: unusable. */
static int set_literal_address(struct server *server, char *err, size_t errsize)
{
	return dns_literal_address(server->host, server_port(server), &server->addr, &server->addrlen, err, errsize);
}

static void set_resolved_address(struct server *server, const struct dns_addr *a)
{
	dns_answer_address(a, server_port(server), &server->addr, &server->addrlen);
	/* this answer's other addresses are tried, each once, before the next entry */
	if (server->addrs_left < 0)
		server->addrs_left = a->count - 1;
	server->dns.want = a->index + 2;	/* address index + 1 next */
}

static void server_select_host(struct server *server, int idx)
{
	free(server->host);
	server->host_idx = idx;
	server->host = host_list_entry(server->pool->db->cfg->host, idx);
	server->addrs_left = -1;	/* not resolved yet */
	server->dns.want = 0;		/* the name's next address, round robin */
	memset(&server->addr, 0, sizeof(server->addr));
	server->addrlen = 0;
}

/* "host (address) port N" for log lines; an IPv6 address in brackets, as PgBouncer prints them. */
static const char *addr_describe(const struct server *server, char *buf, size_t size)
{
	char ip[INET6_ADDRSTRLEN] = "", shown[INET6_ADDRSTRLEN + 2] = "";
	sockaddr_ip_text(&server->addr.sa, ip, sizeof(ip), NULL);
	sockaddr_host_text(&server->addr.sa, shown, sizeof(shown), NULL);
	if (server->addr.sa.sa_family == AF_UNIX)
		snprintf(buf, size, "%s", server->addr.un.sun_path);
	else if (ip[0] && strcmp(ip, server->host) != 0)
		snprintf(buf, size, "%s (%s) port %d", server->host, shown, server_port(server));
	else
		snprintf(buf, size, "%s port %d", ip[0] ? shown : server->host, server_port(server));
	return buf;
}

static bool server_try_connect(struct server *server);

/*
 * The current entry (or address) failed at connect level: move on to the
 * next address or entry. False when none is left: the pool's logins were
 * failed and the server is closed.
 */
static bool server_connect_failed(struct server *server, const char *error)
{
	struct pool *pool = server->pool;
	if (server->addrs_left > 0) {
		server->addrs_left--;
		server_log(LOG_LEVEL_WARNING, server, "%s; trying its next address", error);
		return true;
	}
	db_host_failed(pool->db, server->host_idx);	/* the entry as a whole failed */
	int n = pool->db->host_count;
	for (int idx = server->host_idx; --server->hosts_left > 0;) {
		idx = (idx + 1) % n;
		if (!server_host_eligible(server, idx))
			continue;
		server_log(LOG_LEVEL_WARNING, server, "%s; trying the next host", error);
		server_select_host(server, idx);
		return true;
	}
	/* Connect level: only this server goes; its clients stay queued for the next try. */
	bool resolved = server->addr.sa.sa_family != AF_UNSPEC;
	server_log(LOG_LEVEL_WARNING, server, "%s", error);
	pool_server_connect_failed(pool);
	server_close(server, resolved ? "connect failed" : "server DNS lookup failed");
	return false;
}

/* The entry's name did not resolve: this attempt ends (PgBouncer 1.26); its clients wait for the next. */
static void server_dns_failed(struct server *server, const char *error)
{
	server_log(LOG_LEVEL_WARNING, server, "%s", error);
	db_host_failed(server->pool->db, server->host_idx);
	pool_server_connect_failed(server->pool);
	server_close(server, "server DNS lookup failed");
}

/* Starts the socket connect to server->addr; false (err filled) if it failed at once. */
static bool server_start_socket(struct server *server, char *err, size_t errsize)
{
	bool tcp = server->addr.sa.sa_family != AF_UNIX;
	if (netbuf_connect_tuned(&server->nb, &server->addr.sa, server->addrlen, tcp ? tcp_tune_socket : NULL) < 0) {
		char where[400];
		snprintf(err, errsize, "could not connect to server %s: %s",
			 addr_describe(server, where, sizeof(where)), strerror(errno));
		return false;
	}
	server_set_state(server, SV_LOGIN);
	return true;
}

static void server_dns_done(struct dns_waiter *w, const struct dns_addr *addr, const char *error)
{
	struct server *server = container_of(w, struct server, dns);
	char err[512];
	if (!addr) {
		server_dns_failed(server, error);
		return;
	}
	set_resolved_address(server, addr);
	if (server_start_socket(server, err, sizeof(err)))
		return;
	if (server_connect_failed(server, err))
		server_try_connect(server);
}

/*
 * Connects to the current entry, moving on along the list on failures.
 * True when a connect or lookup is under way; false when the server was
 * closed because nothing could be tried.
 */
static bool server_try_connect(struct server *server)
{
	char err[512];
	for (;;) {
		int r = set_literal_address(server, err, sizeof(err));
		if (r == 0) {
			struct dns_addr a;
			enum dns_status st = dns_lookup(server->host, &server->dns, server_dns_done, &a, err, sizeof(err));
			if (st == DNS_PENDING) {
				server_set_state(server, SV_LOOKUP);
				return true;
			}
			if (st == DNS_FAILED) {
				server_dns_failed(server, err);
				return false;
			}
			set_resolved_address(server, &a);
			r = 1;
		}
		if (r == 1 && server_start_socket(server, err, sizeof(err)))
			return true;
		if (!server_connect_failed(server, err))
			return false;
	}
}

static struct server *connect_for(struct pool *pool, struct client *repl_client, uint64_t budget_token)
{
	int n = pool->db->host_count;
	int first = pool_first_host(pool, n, repl_client != NULL);
	if (first < 0) {
		log_debug("%s/%s: no host of the list is eligible now (target_session_attrs)", pool->db->name,
			  pool->user);
		if (budget_token && pgv.budget)
			pgv.budget->server_return(budget_token);	/* taken for a server that never came to be */
		return NULL;
	}
	struct server *server = xcalloc(1, sizeof(*server));
	server->budget_token = budget_token;	/* known before any failure path can run */
	if (repl_client) {	/* known before any failure path can run */
		server->replication = (uint8_t)repl_client->repl->type;
		server->repl_client = repl_client;
		repl_client->repl->server = server;
	}
	struct db *db = pool->db;

	server->pool = pool;
	server->id = ++pgv.next_conn_id;
	server->connect_time = server->last_used = server->arrived = now_usec();
	server->txn_status = 'I';
	list_node_init(&server->node);
	netbuf_init(&server->nb, server_handler, NETBUF_LIMIT_NONE);

	server->hosts_left = n;
	server_select_host(server, first);
	/* Counted from the start: a lookup in flight is a connection on its way (pool sizing). */
	server_set_state(server, SV_LOOKUP);
	pgv.server_count++;
	db->server_count++;
	pool->ucount->servers++;
	server->connecting_sync = true;
	bool started = server_try_connect(server);
	server->connecting_sync = false;
	return started ? server : NULL;
}

struct server *server_connect(struct pool *pool)
{
	return connect_for(pool, NULL, 0);
}

void server_claim(struct server *server, const struct server_owner *owner)
{
	server->claim = owner;
}

void server_unclaim(struct server *server)
{
	server->claim = NULL;
}

void server_adopt(struct server *server)
{
	server->owner = server->claim;
	server->claim = NULL;
	server->release_sql = NULL;	/* what a feature left on it is its owner's business now */
	server_set_state(server, SV_ACTIVE);
	server->owner->ready(server);
}

struct server *server_connect_counted(struct pool *pool, uint64_t budget_token)
{
	return connect_for(pool, NULL, budget_token);
}

struct server *server_connect_replication(struct pool *pool, struct client *client, uint64_t budget_token)
{
	return connect_for(pool, client, budget_token);
}

/* The parameters it tracks, by name: this process may number them otherwise. */
static void take_over_vars(struct server *server, const struct server_transfer *t)
{
	for (int i = 0; i < t->var_count; i++) {
		int idx = varcache_learn(t->var_names[i]);
		if (idx < 0)
			continue;
		varcache_set(&server->vars, idx, t->var_values[i]);
		if (t->var_reported[i])
			server->reported_mask |= UINT64_C(1) << idx;
	}
}

struct server *server_take_over(struct pool *pool, const struct server_transfer *t)
{
	struct server *server = xcalloc(1, sizeof(*server));
	server->pool = pool;
	server->id = ++pgv.next_conn_id;
	server->connect_time = t->connect_time;
	server->last_used = server->arrived = now_usec();
	server->txn_status = 'I';
	server->be_pid = t->be_pid;
	server->be_key = t->be_key;
	server->role = t->role;
	server->read_only = t->read_only;
	server->role_checked = t->role_checked;
	server->host = xstrdup(t->host);
	server->host_idx = t->host_idx;
	if (t->addrlen <= sizeof(server->addr)) {
		memcpy(&server->addr, t->addr, t->addrlen);
		server->addrlen = t->addrlen;
	}
	server->budget_token = t->budget_token;
	server->logged_in = true;
	server->params = xcalloc((size_t)t->param_count + 1, sizeof(*server->params));
	for (int i = 0; i < t->param_count; i++) {
		server->params[i].name = xstrdup(t->params[i].name);
		server->params[i].value = xstrdup(t->params[i].value);
		server->params[i].var_idx = varcache_index(t->params[i].name);
	}
	server->param_count = t->param_count;
	take_over_vars(server, t);
	list_node_init(&server->node);
	netbuf_init(&server->nb, server_handler, NETBUF_LIMIT_NONE);
	server_set_state(server, SV_TESTED);
	pgv.server_count++;
	pool->db->server_count++;
	pool->ucount->servers++;
	netbuf_accept(&server->nb, t->fd);
	pool->last_login_failure = 0;
	if (!pool->welcome_ready)
		pool_learn_welcome(pool, server->params, server->param_count);
	server_note_hot_standby(server);
	pool_server_ready(server);
	return server;
}

void server_connect_timed_out(struct server *server)
{
	char msg[400];
	if (server->state == SV_LOOKUP)
		snprintf(msg, sizeof(msg), "server connect timeout: no DNS answer for host \"%s\"", server->host);
	else
		snprintf(msg, sizeof(msg), "server connect timeout");
	db_host_failed(server->pool->db, server->host_idx);
	server_log(LOG_LEVEL_WARNING, server, "%s", msg);
	pool_server_connect_failed(server->pool);
	server_close(server, "connect timeout");
}

/* The kind of the client this server was opened for (a replication client's own), NULL if pooled. */
const struct client_kind_ops *server_own_kind(const struct server *server)
{
	return server->replication != REPLICATION_NONE ? client_kind_ops(CLIENT_REPLICATION) : NULL;
}

void server_send_startup(struct server *server)
{
	const struct db *db = server->pool->db;
	struct pktbuf b;
	pktbuf_init(&b, 256);
	pktbuf_begin(&b, 0);
	pktbuf_put_uint32(&b, PROTO_VERSION_3);
	pktbuf_put_string(&b, "user");
	pktbuf_put_string(&b, server->pool->user);
	pktbuf_put_string(&b, "database");
	pktbuf_put_string(&b, db->cfg->dbname[0] ? db->cfg->dbname : db->name);
	static const struct { const char *key; size_t off; } extras[] = {
		{ "client_encoding", offsetof(struct db_config, client_encoding) },
		{ "datestyle", offsetof(struct db_config, datestyle) },
		{ "timezone", offsetof(struct db_config, timezone) },
		{ "application_name", offsetof(struct db_config, application_name) },
	};
	const struct client *owner = server->repl_client;
	const struct client_kind_ops *own = owner ? server_own_kind(server) : NULL;
	for (size_t i = 0; i < ARRAY_SIZE(extras); i++) {
		const char *v = *(char *const *)((const char *)db->cfg + extras[i].off);
		if (own && own->gives_startup_param && own->gives_startup_param(owner, extras[i].key))
			continue;	/* the replication client's own value goes instead */
		if (v && v[0]) {
			pktbuf_put_string(&b, extras[i].key);
			pktbuf_put_string(&b, v);
		}
	}
	if (own && own->put_startup)
		own->put_startup(owner, &b);
	pktbuf_put_byte(&b, 0);
	pktbuf_end(&b);
	netbuf_send(&server->nb, b.buf, b.len);
	pktbuf_free(&b);
}

/* ---------------------------------------------------------------- close */

void server_free_login_state(struct server *server)
{
	if (server->scram) {
		secret_clear(server->scram, sizeof(*server->scram));
		free(server->scram);
		server->scram = NULL;
	}
}

void server_close(struct server *server, const char *reason)
{
	if (server->state == SV_CLOSED)
		return;
	struct pool *pool = server->pool;
	usec_t age = (now_usec() - server->connect_time) / USEC_PER_SEC;

	server_log(LOG_LEVEL_INFO, server, "closing because: %s (age=%llds)", reason, (long long)age);
	const struct client_kind_ops *own = server_own_kind(server);
	if (server->repl_client && own && own->own_server_lost)
		own->own_server_lost(server, reason);	/* not reached, timed out, obsolete: its client waits for another */
	const struct server_owner *owner = server->owner ? server->owner : server->claim;
	if (owner && owner->lost)
		owner->lost(server, reason);
	struct client *repl_peer = server->replication ? server->link : NULL;
	/*
	 * A login whose parameters it was taking cannot go on without it, and
	 * nothing would queue it again (the paths that retry elsewhere unlink
	 * it before they close the server).
	 */
	if (server->link && server->link->state == CL_PARAMS_CHECK)
		close_linked_client(server, reason);
	if (server->link)
		server_unlink(server);
	if (server->auth_client) {	/* a lookup in flight: its login cannot go on */
		struct client *waiting = server->auth_client;
		server->auth_client = NULL;
		if (waiting->state != CL_CLOSED)
			auth_query_answer(waiting, NULL, "the server connection was lost");
	}
	if (netbuf_is_open(&server->nb) && server->state != SV_LOGIN && server_is_clean(server) &&
	    !server->handed_over) {
		uint8_t term[5];
		struct pktbuf b;
		pktbuf_init_fixed(&b, term, sizeof(term));
		proto_put_terminate(&b);
		netbuf_send(&server->nb, b.buf, b.len);
	}
	server_forget_cancels(server);
	server_free_login_state(server);
	dns_cancel(&server->dns);
	if (server->budget_token && pgv.budget)
		pgv.budget->server_closing(server);	/* may keep the count until PostgreSQL's end closes */
	netbuf_close(&server->nb);
	server_set_state(server, SV_CLOSED);
	pgv.server_count--;
	pool->db->server_count--;
	pool->ucount->servers--;
	if (server->budget_token && pgv.budget)
		pgv.budget->server_return(server->budget_token);
	server->budget_token = 0;
	if (repl_peer)		/* a replication pair closes together */
		client_close(repl_peer, "08P01", reason);
	if (!server->connecting_sync)
		pool_after_change(pool);
}

void server_free(struct server *server)
{
	free(server->auth_result);
	relay_call_if(prep_server_free, server);
	if (server->position_for)
		relay_call(balance_server_free, server);
	varcache_unref(server->vars);
	relay_call_if(sets_server_free, server);
	for (int i = 0; i < server->param_count; i++) {
		free(server->params[i].name);
		free(server->params[i].value);
	}
	free(server->params);
	server_free_login_state(server);
	dns_cancel(&server->dns);
	free(server->host);
	free(server);
}

/* ---------------------------------------------------------------- link */

void server_link(struct server *server, struct client *client)
{
	server->link = client;
	client->link = server;
	server->last_used = now_usec();
	netbuf_set_dst(&server->nb, &client->nb);
	netbuf_set_dst(&client->nb, &server->nb);
	server_set_state(server, SV_ACTIVE);
}

void server_unlink(struct server *server)
{
	struct client *client = server->link;
	if (!client)
		return;
	netbuf_set_dst(&server->nb, NULL);
	netbuf_set_dst(&client->nb, NULL);
	client->link = NULL;
	server->link = NULL;
	client_unlinked(client);
	if (server->internal == SV_INTERNAL_LEARN && client->state != CL_CLOSED) {
		/* paused while its session was learned (server_learn_session): it goes on without */
		client_ready_seen(client);
		netbuf_resume(&client->nb);
	}
}

/* A server that is going away takes its linked client with it (08P01, reason). */
static void close_linked_client(struct server *server, const char *reason)
{
	struct client *client = server->link;
	if (!client)
		return;
	server_unlink(server);
	client_close(client, "08P01", reason);
}

void server_close_with_client(struct server *server, const char *reason)
{
	close_linked_client(server, reason);
	server_close(server, reason);
}

bool server_is_clean(const struct server *server)
{
	/* A client half-way through a message still owes the server its rest. */
	if (server->link && server->link->nb.pkt_remaining && server->link->nb.pkt_forward)
		return false;
	return server->expect_ready == 0 && !server->unsynced && server->txn_status == 'I' &&
	       !server->copy_in && server->internal == SV_INTERNAL_NONE;
}

bool server_may_drain(const struct server *server)
{
	if (server->link && server->link->nb.pkt_remaining && server->link->nb.pkt_forward)
		return false;	/* half a message sent: the server waits for a rest that never comes */
	return (server->expect_ready > 0 || server->unsynced) && !server->copy_in &&
	       server->internal == SV_INTERNAL_NONE && !server->replication;
}

void server_finish_owed(struct server *server)
{
	if (server->unsynced) {	/* a batch left open: its Sync ends it (and any skipping after an error) */
		static const uint8_t sync[5] = { 'S', 0, 0, 0, 4 };
		netbuf_send(&server->nb, sync, sizeof(sync));
		server->expect_ready++;
		server->unsynced = false;
		server->ignore_till_sync = false;
	}
	server_log(LOG_LEVEL_DEBUG, server, "client left with %d answers owed: finishing them", server->expect_ready);
	server->finishing_owed = true;
	server->owed_since = now_usec();
	server_set_state(server, SV_USED);
}

void server_note_client_message(struct server *server, uint8_t type)
{
	/*
	 * As PgBouncer: a query (and maybe a transaction) is counted when it
	 * starts; a Flush starts none. The late CopyData and CopyDone of a
	 * COPY that failed (its ReadyForQuery came first) start nothing:
	 * PostgreSQL ignores them.
	 */
	bool late_copy = server->copy_in && (type == 'd' || type == 'c' || type == 'f');
	if (!server->query_start && !late_copy && type != 'H') {
		struct stats *st = &server->pool->db->stats.total;
		server->query_start = now_usec();
		st->query_count++;
		if (!server->xact_start) {
			server->xact_start = server->query_start;
			st->xact_count++;
		}
	}
	switch (type) {
	case 'Q':
		server->syncs_after_execute = 0;
		/* fall through */
	case 'F':
		if (!server->ignore_till_sync)	/* else discarded without an answer */
			server->expect_ready++;
		break;
	case 'S':
		if (server->copy_in)
			break;	/* PostgreSQL ignores a Sync in COPY FROM STDIN: no ReadyForQuery for it */
		server->expect_ready++;
		server->unsynced = false;
		server->syncs_after_execute++;
		server->ignore_till_sync = false;
		break;
	case 'E':
		server->syncs_after_execute = 0;
		/* fall through */
	case 'P': case 'B': case 'D': case 'C':
		/* Flush ('H') is not among them: it asks for output and changes no state. */
		server->unsynced = true;
		break;
	case 'c': case 'f':
		server->copy_in = false;
		break;
	default:
		break;
	}
}

/* ---------------------------------------------------------------- parameters */

void server_remember_param(struct server *server, const char *name, const char *value)
{
	int idx = varcache_learn(name);
	if (idx >= 0) {
		varcache_set(&server->vars, idx, value);
		server->reported_mask |= UINT64_C(1) << idx;
	}
	if (server->state != SV_LOGIN) {
		if (server_hooks.param_reported && !server->replication)
			server_hooks.param_reported(server, name, value);
		return;
	}
	for (int i = 0; i < server->param_count; i++) {
		if (strcmp(server->params[i].name, name) == 0) {
			free(server->params[i].value);
			server->params[i].value = xstrdup(value);
			return;
		}
	}
	server->params = xrealloc(server->params, (size_t)(server->param_count + 1) * sizeof(*server->params));
	server->params[server->param_count].name = xstrdup(name);
	server->params[server->param_count].value = xstrdup(value);
	server->params[server->param_count].var_idx = idx;	/* the whole entry is read (replication welcome) */
	server->param_count++;
}

bool server_parse_parameter_status(const struct pkt *pkt, const char **name, const char **value)
{
	struct pkt_reader r;
	pkt_reader_init(&r, pkt_body(pkt), pkt_body_len(pkt));
	*name = pkt_get_string(&r);
	*value = pkt_get_string(&r);
	return *name && *value;
}

/* ---------------------------------------------------------------- serving */

/* A ReadyForQuery went to the client: a query, and maybe a transaction, ended. */
static void count_ready(struct server *server, uint32_t len)
{
	struct stats *st = &server->pool->db->stats.total;
	usec_t now = now_usec();
	st->bytes_sent += len;
	server->last_active = now;	/* idle_transaction_timeout counts from here */
	if (server->expect_ready > 0)
		return;		/* more replies owed: the request is not over */
	if (server->query_start) {
		st->query_time += (uint64_t)MAX(now - server->query_start, 0);
		metrics_histogram_observe(&server->pool->db->query_hist, now - server->query_start);
		server->query_start = 0;
	}
	if (server->txn_status == 'I' && server->xact_start) {
		st->xact_time += (uint64_t)MAX(now - server->xact_start, 0);
		metrics_histogram_observe(&server->pool->db->xact_hist, now - server->xact_start);
		server->xact_start = 0;
	}
}


/*
 * The largest message pgvalve reads whole from a logged-in server
 * (ReadyForQuery, ParameterStatus, an ErrorResponse it must look at);
 * everything else is streamed. A server that sends more is broken.
 */
#define SERVER_WHOLE_MAX (1024 * 1024)

/* A message to read whole: 1 it is here, 0 wait for the rest, -1 too large (the server was closed). */
static int whole_message(struct server *server, const struct pkt *pkt)
{
	if (pkt_complete(pkt))
		return 1;
	if (pkt->len <= SERVER_WHOLE_MAX)
		return 0;
	server_log(LOG_LEVEL_WARNING, server, "message '%c' of %u bytes is too large", pkt->type, pkt->len);
	server_close(server, "oversized message from server");
	return -1;
}

/*
 * What a handler of one message type below tells server_active_packet:
 * SV_RELAY, go on and forward (or skip) the message; else the packet
 * handler's own answer (false: the server was closed).
 */
#define SV_RELAY (-1)

/* ReadyForQuery: a Query/Sync answered; in transaction and statement mode the server may go back. */
/* retry: the answer to a statement a standby refused, swallowed; the client runs it again (relay.h) */
static int active_ready(struct server *server, const struct pkt *pkt, bool internal, bool retry)
{
	int w = whole_message(server, pkt);
	if (w <= 0)
		return w == 0;
	server->txn_status = pkt_body_len(pkt) >= 1 ? (char)pkt_body(pkt)[0] : 'I';
	if (server->expect_ready > 0)
		server->expect_ready--;
	server->copy_in = false;	/* a COPY that failed ends here; CopyData sent after it is dropped */
	if (internal) {
		netbuf_skip(&server->nb, pkt->len);
		if (server->internal == SV_INTERNAL_LEARN) {
			/*
			 * A learn's one ReadyForQuery ends it; its client's next
			 * messages may be queued behind it, and the SETs among them
			 * counted this reply as one owed before theirs.
			 */
			if (server->set_pending_count)
				relay_call(sets_note_ready, server);
			internal_query_done(server);
		} else if (server->expect_ready == 0) {
			internal_query_done(server);
		}
		return server->state != SV_CLOSED;
	}
	if (server->set_pending_count)
		relay_call(sets_note_ready, server);
	int mode = pool_effective_mode(server->pool);
	if (mode == POOL_MODE_STATEMENT && server->txn_status != 'I' && server->link) {
		/* As PgBouncer: the client may not hold a server across statements. */
		static const char msg[] = "transaction blocks not allowed in statement pooling mode";
		netbuf_skip(&server->nb, pkt->len);
		close_linked_client(server, msg);
		server_close(server, msg);
		return false;
	}
	if (retry)
		netbuf_skip(&server->nb, pkt->len);
	else
		netbuf_forward(&server->nb, pkt->len);
	count_ready(server, pkt->len);
	relay_call_if(prep_answer_owed, server);
	struct client *held = server->link && (server->link->held_for_ready || retry) ? server->link : NULL;
	if (server->finishing_owed && server->expect_ready == 0) {
		server->finishing_owed = false;
		pool_release_server(server);	/* as if its client had left now */
		return server->state != SV_CLOSED;
	}
	if (server->link && server_is_clean(server)) {
		if (mode == POOL_MODE_SESSION)
			instance_client_at_boundary();
		else if (server->sets_learn && !retry && relay_sets_enabled(server->pool))
			server_learn_session(server);	/* released once learned */
		else
			pool_release_server(server);	/* the client's boundary: client_unlinked */
	}
	if (held && retry)
		relay_call(balance_retry, held);
	else if (held)
		client_ready_seen(held);
	return true;
}

/*
 * The read balancer's retry watches a lent client's answer (relay.h);
 * SV_RELAY: on as usual. pv: what prepared statements judged of it.
 */
static int active_balance_message(struct server *server, const struct pkt *pkt, enum prepare_verdict pv, bool *retry)
{
	switch (relay_call(balance_server_message, server, pkt, pv == PREPARE_SKIP)) {
	case BALANCE_SKIP:
		netbuf_skip(&server->nb, pkt->len);
		return true;
	case BALANCE_RETRY:
		*retry = true;
		return SV_RELAY;
	case BALANCE_PASS:
		break;
	}
	return SV_RELAY;
}

/* ParameterStatus: remembered; the client's own command changed it, so that is what the client wants now. */
static int active_parameter_status(struct server *server, const struct pkt *pkt, bool internal)
{
	int w = whole_message(server, pkt);
	if (w <= 0)
		return w == 0;
	const char *name, *value;
	if (server_parse_parameter_status(pkt, &name, &value)) {
		server_remember_param(server, name, value);
		if (server->link && !internal && varcache_set_by_name(&server->link->vars, name, value))
			server->link->vars_gen++;
	}
	return SV_RELAY;
}

/* An ErrorResponse to one of pgvalve's own queries: logged, and the first one kept for whoever waits. */
static int active_internal_error(struct server *server, const struct pkt *pkt)
{
	int w = whole_message(server, pkt);
	if (w <= 0)
		return w == 0;
	const char *msg = proto_error_field(pkt_body(pkt), pkt_body_len(pkt), 'M');
	const char *sev = proto_error_field(pkt_body(pkt), pkt_body_len(pkt), 'S');
	const char *code = proto_error_field(pkt_body(pkt), pkt_body_len(pkt), 'C');
	if (server->internal == SV_INTERNAL_AUTH_QUERY)	/* PgBouncer's words */
		server_log(LOG_LEVEL_WARNING, server, "error in auth_query: %s: %s", sev ? sev : "ERROR", msg ? msg : "?");
	else
		server_log(LOG_LEVEL_WARNING, server, "internal query failed: %s", msg ? msg : "?");
	if (!server->internal_failed) {
		strlcpy_s(server->internal_sqlstate, code && strlen(code) == 5 ? code : "XX000",
			  sizeof(server->internal_sqlstate));
		strlcpy_s(server->internal_error, msg ? msg : "internal query failed", sizeof(server->internal_error));
	}
	server->internal_failed = true;
	return SV_RELAY;
}

/* CommandComplete: a client's SET/RESET/DISCARD, DO, CALL or a write may have changed the session (relay.h). */
static int active_command_complete(struct server *server, const struct pkt *pkt, bool internal)
{
	if (internal || !server->link || !relay_sets_enabled(server->pool))
		return SV_RELAY;
	if (!pkt_complete(pkt))
		return true;	/* a few bytes: wait for all of them */
	const char *tag = (const char *)pkt_body(pkt);
	if (memchr(tag, '\0', pkt_body_len(pkt)) && (tag[0] == 'S' || tag[0] == 'R' || tag[0] == 'D' || tag[0] == 'C' ||
						   tag[0] == 'I' || tag[0] == 'U' || tag[0] == 'M' || tag[0] == 'A'))
		relay_call(sets_note_complete, server, tag);
	return SV_RELAY;
}

/* A DataRow: auth_query's and the role check's answers are read here; every other goes on. */
static __attribute__((noinline)) int role_check_row(struct server *server, const struct pkt *pkt)
{
	int w = whole_message(server, pkt);
	if (w <= 0)
		return w == 0;
	if (server_hooks.check_row)
		server_hooks.check_row(server, pkt);
	return SV_RELAY;
}

/* The read balancer's position query's row (relay_hooks.balance_position_row). */
static __attribute__((noinline)) int position_row(struct server *server, const struct pkt *pkt)
{
	int w = whole_message(server, pkt);
	if (w <= 0)
		return w == 0;
	relay_call(balance_position_row, server, pkt);
	return SV_RELAY;
}

/* The RowDescription of a feature's query, for the names of its columns. */
static __attribute__((noinline)) int feature_columns(struct server *server, const struct pkt *pkt)
{
	int w = whole_message(server, pkt);
	if (w <= 0)
		return w == 0;
	server->query_ops->columns(server, pkt);
	return SV_RELAY;
}

static int active_data_row(struct server *server, const struct pkt *pkt)
{
	if (server->internal == SV_INTERNAL_NONE)	/* a client's rows: the common case */
		return SV_RELAY;
	if (server->internal == SV_INTERNAL_ROLE_CHECK)
		return role_check_row(server, pkt);
	if (server->internal == SV_INTERNAL_POSITION)
		return position_row(server, pkt);
	if (server->internal == SV_INTERNAL_LEARN) {
		int w = whole_message(server, pkt);
		if (w <= 0)
			return w == 0;
		relay_call(sets_learn_row, server, pkt);
		return SV_RELAY;
	}
	if (server->internal == SV_INTERNAL_FEATURE) {
		int w = whole_message(server, pkt);
		if (w <= 0)
			return w == 0;
		server->query_ops->row(server, pkt);
		return SV_RELAY;
	}
	if (server->internal != SV_INTERNAL_AUTH_QUERY)
		return SV_RELAY;
	if (!pkt_complete(pkt))
		return pkt->len > AUTH_SECRET_MAX + 4096 ? (server_close(server, "auth_query row too large"), false) : true;
	take_auth_row(server, pkt);
	return SV_RELAY;
}

/* The message goes to the client, is dropped (pgvalve's own, or nobody's), or is replaced by nothing. */
static void relay_to_client(struct server *server, const struct pkt *pkt, bool internal, enum prepare_verdict pv)
{
	if (pv == PREPARE_SKIP && !internal && server->link && pkt_complete(pkt)) {
		/* The answer to pgvalve's own Parse or Close: dropped without breaking the batch. */
		netbuf_replace(&server->nb, pkt->len, pkt->len, NULL, 0);
	} else if (internal || !server->link || pv == PREPARE_SKIP) {
		netbuf_skip(&server->nb, pkt->len);
	} else {
		server->pool->db->stats.total.bytes_sent += pkt->len;
		netbuf_forward(&server->nb, pkt->len);
	}
	if (server->prep && !internal && relay_prep_watches_server(pkt->type))
		relay_call_if(prep_answer_owed, server);
}

/*
 * COPY FROM STDIN began. Started by an Execute, the Syncs the client sent
 * after it reached PostgreSQL in copy mode, which ignores them: no
 * ReadyForQuery comes for them, and the Execute still waits for the Sync
 * the client sends after its CopyDone.
 */
static void server_copy_in_started(struct server *server)
{
	server->copy_in = true;
	if (server->syncs_after_execute > 0) {
		server->expect_ready = MAX(server->expect_ready - server->syncs_after_execute, 0);
		server->syncs_after_execute = 0;
		server->unsynced = true;
	}
}

/*
 * LISTEN/UNLISTEN in transaction and statement mode (relay.h): the
 * outcome of a listening client's statements is shown to notify.c; a
 * NotificationResponse on a pooled server (a LISTEN a client ran there)
 * is dropped, since the pool's listener delivers it.
 */
/* A whole NotificationResponse relayed with `pid` as its sender's PID. */
static void relay_notification_as(struct server *server, const struct pkt *pkt, uint32_t pid)
{
	uint8_t head[9];
	memcpy(head, pkt->data, 5);
	head[5] = (uint8_t)(pid >> 24), head[6] = (uint8_t)(pid >> 16);
	head[7] = (uint8_t)(pid >> 8), head[8] = (uint8_t)pid;
	server->pool->db->stats.total.bytes_sent += pkt->len;
	netbuf_replace(&server->nb, pkt->len, sizeof(head), head, sizeof(head));
}

/*
 * A notification on a server its client holds for itself (session mode,
 * or notify_support off): the client knows its backend by the PID of the
 * BackendKeyData pgvalve gave it, so one its own backend sent carries
 * that PID, as in transaction mode (notify.c). Others pass as they are.
 */
static int session_notification(struct server *server, const struct pkt *pkt)
{
	int w = whole_message(server, pkt);
	if (w <= 0)
		return w == 0;
	const uint8_t *body = pkt_body(pkt);
	if (pkt_body_len(pkt) < 4)
		return SV_RELAY;
	uint32_t sender = proto_read_be32(body);
	if (sender != server->be_pid || server->link->cancel_pid == sender)
		return SV_RELAY;
	relay_notification_as(server, pkt, server->link->cancel_pid);
	return true;
}

static int active_notify_message(struct server *server, const struct pkt *pkt)
{
	bool seen = pkt->type == 'C' || pkt->type == 'E' || pkt->type == 'Z' || pkt->type == 'A';
	if (!seen)
		return SV_RELAY;
	if (pkt->type == 'A' && !relay_notify_enabled(server->pool))
		return session_notification(server, pkt);
	int w = whole_message(server, pkt);
	if (w <= 0)
		return w == 0;
	uint32_t pid = 0;
	enum notify_verdict v = server->link->notify ? relay_call(notify_note_server, server, pkt, &pid) : NOTIFY_DROP;
	switch (v) {
	case NOTIFY_PASS:
		return SV_RELAY;
	case NOTIFY_HOLD:
		netbuf_pause(&server->nb);	/* offered again once the listener caught up */
		return true;
	case NOTIFY_DROP:
		netbuf_replace(&server->nb, pkt->len, pkt->len, NULL, 0);
		return true;
	case NOTIFY_SET_PID:
		relay_notification_as(server, pkt, pid);
		return true;
	}
	return SV_RELAY;
}

/* Messages from a server in use: by a client, or by pgvalve's own queries (internal). */
static bool server_active_packet(struct server *server, const struct pkt *pkt)
{
	bool internal = server->internal != SV_INTERNAL_NONE;
	enum prepare_verdict pv = PREPARE_FORWARD;

	if (server->owner && !internal)
		return server->owner->packet(server, pkt);
	if (server->replication) {	/* relayed untouched: CopyBoth streams included (replication.h) */
		server->pool->db->stats.total.bytes_sent += pkt->len;
		netbuf_forward(&server->nb, pkt->len);
		return true;
	}

	if (!internal && server->link && (server->link->notify || pkt->type == 'A')) {
		int n = active_notify_message(server, pkt);
		if (n != SV_RELAY)
			return n;
	}
	bool balance_watches = !internal && server->link && server->link->balance_retry;
	if (balance_watches && pkt->type && strchr("EZT12tn", pkt->type)) {
		/*
		 * Judged whole by the read balancer (errors, the end, what it may
		 * hold back), and so before prepared statements see it: each
		 * message is matched against their awaited answers once.
		 */
		int w = whole_message(server, pkt);
		if (w <= 0)
			return w == 0;
	}
	bool prep_watches = server->prep && relay_prep_watches_server(pkt->type);
	if (prep_watches && (internal || server->link || server->finishing_owed)) {
		/* Judged once per message: these are the ones decided only when whole. */
		if (!pkt_complete(pkt) && (pkt->type == 'Z' || pkt->type == 'C' || pkt->type == 'E' || pkt->type == 't'))
			return true;
		pv = relay_call(prep_server_message, server, pkt);
		if (internal)
			pv = PREPARE_FORWARD;	/* nothing of the client's is awaited during pgvalve's own queries */
	}

	bool retry = false;
	if (balance_watches) {
		int b = active_balance_message(server, pkt, pv, &retry);
		if (b != SV_RELAY)
			return b;
	}
	int done = SV_RELAY;
	switch (pkt->type) {
	case 'Z':
		return active_ready(server, pkt, internal, retry);
	case 'S':
		done = active_parameter_status(server, pkt, internal);
		break;
	case 'E':
		/*
		 * With every Sync and Query answered, the error is the open
		 * extended batch's: PostgreSQL now discards all messages up to
		 * the next Sync, Queries included, without answering them.
		 */
		if (!internal && server->expect_ready == 0 && server->unsynced)
			server->ignore_till_sync = true;
		if (internal)
			done = active_internal_error(server, pkt);
		break;
	case 'C':
		done = active_command_complete(server, pkt, internal);
		break;
	case 'D':
		done = active_data_row(server, pkt);
		break;
	case 'T':
		if (server->internal == SV_INTERNAL_FEATURE && server->query_ops->columns)
			done = feature_columns(server, pkt);
		break;
	case 'G':	/* CopyInResponse: the client now streams CopyData */
		if (!internal)
			server_copy_in_started(server);
		break;
	default:
		break;
	}
	if (done != SV_RELAY)
		return done;
	relay_to_client(server, pkt, internal, pv);
	return true;
}

/* Messages from a server nobody is using. */
static bool server_idle_packet(struct server *server, const struct pkt *pkt)
{
	switch (pkt->type) {
	case 'S': {
		int w = whole_message(server, pkt);
		if (w <= 0)
			return w == 0;
		const char *name, *value;
		if (server_parse_parameter_status(pkt, &name, &value))
			server_remember_param(server, name, value);
		netbuf_skip(&server->nb, pkt->len);
		if (server->close_needed && server->state == SV_IDLE) {	/* its role changed (server_hooks) */
			server_close(server, "obsolete connection");
			return false;
		}
		return true;
	}
	case 'N':
	case 'A':
		netbuf_skip(&server->nb, pkt->len);
		return true;
	case 'E': {
		int w = whole_message(server, pkt);
		if (w <= 0)
			return w == 0;
		const char *msg = proto_error_field(pkt_body(pkt), pkt_body_len(pkt), 'M');
		char reason[256];
		snprintf(reason, sizeof(reason), "server sent an error while idle: %s", msg ? msg : "?");
		netbuf_skip(&server->nb, pkt->len);
		server->pool->servers_lost = true;	/* terminated, or PostgreSQL going down */
		server_close(server, reason);
		return false;
	}
	default:
		netbuf_skip(&server->nb, pkt->len);
		server_close(server, "idle server got dirty");
		return false;
	}
}

static bool server_handler(struct netbuf *nb, enum netbuf_event ev, const struct pkt *pkt)
{
	struct server *server = container_of(nb, struct server, nb);

	switch (ev) {
	case NETBUF_EV_CONNECT_OK:
		/* TLS is asked for over TCP only, as libpq and PgBouncer do. */
		if (pgv.cfg->server_tls_sslmode != TLS_SSLMODE_DISABLE && server->addr.sa.sa_family != AF_UNIX) {
			uint8_t mem[8];
			struct pktbuf b;
			pktbuf_init_fixed(&b, mem, sizeof(mem));
			pktbuf_begin(&b, 0);
			pktbuf_put_uint32(&b, PROTO_SSL_REQUEST);
			pktbuf_end(&b);
			netbuf_send(&server->nb, b.buf, b.len);
			server->nb.expect_byte = true;
			server->tls_requested = true;
		} else {
			server_send_startup(server);
		}
		netbuf_resume(&server->nb);
		return true;
	case NETBUF_EV_TLS_READY:
		server_send_startup(server);
		return true;
	case NETBUF_EV_TLS_FAILED: {
		char msg[256];
		snprintf(msg, sizeof(msg), "TLS handshake error: %s", netbuf_tls_error());	/* PgBouncer's words */
		/* Connect level, as a refused connect: the clients wait for the next try. */
		server_log(LOG_LEVEL_WARNING, server, "%s", msg);
		db_host_failed(server->pool->db, server->host_idx);
		pool_server_connect_failed(server->pool);
		server_close(server, "connect failed");
		return false;
	}
	case NETBUF_EV_DIRECT_TLS:
		return true;
	case NETBUF_EV_CONNECT_FAILED: {
		char msg[512], where[400];
		snprintf(msg, sizeof(msg), "could not connect to server %s: %s",
			 addr_describe(server, where, sizeof(where)), strerror(server->nb.last_errno));
		/* A fresh socket for the next address or host, if any is left. */
		netbuf_close(&server->nb);
		netbuf_init(&server->nb, server_handler, NETBUF_LIMIT_NONE);
		if (server_connect_failed(server, msg))
			server_try_connect(server);
		return false;
	}
	case NETBUF_EV_PACKET:
		switch (server->state) {
		case SV_LOGIN:
			return server_login_packet(server, pkt);
		case SV_ACTIVE:
		case SV_TESTED:
			return server_active_packet(server, pkt);
		default:
			if (server->finishing_owed)	/* answers its client left without: read as if it were there */
				return server_active_packet(server, pkt);
			return server_idle_packet(server, pkt);
		}
	case NETBUF_EV_BAD_PACKET:
		close_linked_client(server, "server sent a bad packet header");
		server_close(server, "bad packet header from server");
		return false;
	case NETBUF_EV_RECV_FAILED:
	case NETBUF_EV_SEND_FAILED:
		if (server->state == SV_LOGIN) {
			server_login_failed(server, "08006", "server closed the connection during login");
			return false;
		}
		if (server->internal == SV_INTERNAL_SET_PARAMS && server->link) {
			struct client *client = server->link;
			server_unlink(server);
			server_close(server, "server closed the connection while taking a client's parameters");
			retry_on_another_server(client);
			return false;
		}
		if (server->link && server->link->balance_retry && relay_call(balance_server_lost, server->link)) {
			/* a standby's read, nothing of it answered: it runs again elsewhere (balance.h) */
			struct client *client = server->link;
			server_unlink(server);
			server->pool->servers_lost = true;
			server_close(server, ev == NETBUF_EV_RECV_FAILED ? "server closed the connection" :
				     "server send failed");
			relay_call(balance_retry, client);
			return false;
		}
		close_linked_client(server, "server conn crashed?");
		server->pool->servers_lost = true;
		server_close(server, ev == NETBUF_EV_RECV_FAILED ? "server closed the connection" : "server send failed");
		return false;
	case NETBUF_EV_DRAINED:
		break;
	}
	return true;
}
