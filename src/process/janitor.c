/*
 * janitor.c - periodic maintenance of pools and connections.
 *
 * Each tick walks only lists where something can expire, and stops early
 * where a list is ordered by age:
 *   - clients logging in (pgv.login_clients, oldest first),
 *   - idle clients (pool->idle_clients, in the order they went idle),
 *   - waiting clients (FIFO, oldest first),
 *   - servers: linked ones (at most pool_size per pool), idle, logging in,
 *     and held for a cancel.
 * Idle clients never cost more than looking at the head of their list, so
 * tens of thousands of idle clients cost nothing per tick.
 *
 * Each tick also publishes this process's counters to the worker table
 * (SHOW WORKERS).
 *
 * Every close names PgBouncer's reason, logged as "closing because: ...".
 */
#include "common.h"
#include "janitor.h"
#include "admin.h"
#include "client.h"
#include "dns.h"
#include "log.h"
#include "metrics.h"
#include "loop.h"
#include "peer.h"
#include "roles.h"
#include "volatility.h"
#include "pool.h"
#include "proto.h"
#include "server.h"
#include "stats.h"
#include "workers.h"

#include <event2/event.h>

static struct event *janitor_ev;

/* A [users] override of a global timeout, for the user a client logged in as. */
static usec_t user_timeout(const struct client *client, usec_t global, size_t user_offset)
{
	const struct user_config *uc = config_find_user(pgv.cfg, client_user_name(client));
	if (uc) {
		usec_t v = *(const usec_t *)((const char *)uc + user_offset);
		if (v >= 0)
			return v;
	}
	return global;
}

#define USER_TIMEOUT(client, field) user_timeout((client), pgv.cfg->field, offsetof(struct user_config, field))

/* query_wait_timeout as PgBouncer 1.26: the login user's, else the database's, else the global one. */
static usec_t query_wait_timeout(const struct client *client)
{
	const struct user_config *uc = config_find_user(pgv.cfg, client_user_name(client));
	if (uc && uc->query_wait_timeout >= 0)
		return uc->query_wait_timeout;
	if (client->pool->db->cfg->query_wait_timeout >= 0)
		return client->pool->db->cfg->query_wait_timeout;
	return pgv.cfg->query_wait_timeout;
}

static void check_login_clients(usec_t now)
{
	usec_t timeout = pgv.cfg->client_login_timeout;
	if (timeout <= 0)
		return;
	struct list_node *n;
	while ((n = list_first(&pgv.login_clients))) {
		struct client *client = container_of(n, struct client, node);
		if (now - client->connect_time < timeout)
			break;	/* appended at accept: the rest are younger */
		/* a held cancel request (server.c) is no failed login: no error, no login-error count */
		client_close(client, client->quiet ? NULL : "08P01", "client_login_timeout");
	}
}

static void notify_queued(struct client *client)
{
	struct pktbuf b;
	uint8_t mem[160];
	pktbuf_init_fixed(&b, mem, sizeof(mem));
	proto_put_notice(&b, "00000", "No server connection available in postgres backend, client being queued");
	netbuf_send(&client->nb, b.buf, b.len);
}

/*
 * As PgBouncer: a client waiting for a server (one still connecting, or
 * one to be freed) is cut by query_timeout, then by query_wait_timeout.
 * The reason it was closed with, or NULL.
 */
static const char *wait_expired(const struct client *client, usec_t now)
{
	usec_t waited = now - client->request_time;
	usec_t wait_timeout = query_wait_timeout(client);
	if (pgv.cfg->query_timeout > 0 && waited >= pgv.cfg->query_timeout)
		return "query_timeout";
	if (wait_timeout > 0 && waited >= wait_timeout)
		return "query_wait_timeout";
	return NULL;
}

/*
 * Queued clients: a per-user or per-database query_wait_timeout makes the
 * queue's order differ from its deadlines' order, so the whole queue is
 * looked at then; otherwise the scan stops at the first client younger
 * than every limit.
 */
static void check_waiting(struct pool *pool, usec_t now, bool overrides)
{
	const struct config *cfg = pgv.cfg;
	struct list_node *n, *next;
	const char *why;

	/* Logins waiting for their first server: client_login_timeout, and the waits' limits as PgBouncer. */
	for (n = list_first(&pool->welcome_clients); n && n != &pool->welcome_clients.head; n = next) {
		next = n->next;
		struct client *client = container_of(n, struct client, node);
		if (cfg->client_login_timeout > 0 && now - client->connect_time >= cfg->client_login_timeout)
			client_close(client, "08P01", "client_login_timeout (server down)");
		else if ((why = wait_expired(client, now)))
			client_close(client, "08P01", why);
		else if (!overrides)
			break;
	}
	/* SHUTDOWN WAIT_FOR_SERVERS: queued clients will not get a server any more (as PgBouncer, here). */
	if (pgv.shutdown_mode == SHUTDOWN_WAIT_FOR_SERVERS) {
		while ((n = list_first(&pool->waiting_clients)))
			client_close(container_of(n, struct client, node), "08P01", "server shutting down");
	}
	/* FIFO: the oldest waiters come first. */
	for (n = list_first(&pool->waiting_clients); n && n != &pool->waiting_clients.head; n = next) {
		next = n->next;
		struct client *client = container_of(n, struct client, node);
		usec_t waited = now - client->request_time;
		if ((why = wait_expired(client, now))) {
			client_close(client, "08P01", why);
			continue;
		}
		if (cfg->query_wait_notify > 0 && waited >= cfg->query_wait_notify) {
			if (!client->wait_notified) {
				client->wait_notified = true;
				notify_queued(client);
			}
			continue;
		}
		if (!overrides)
			break;	/* younger than both limits: so are the rest */
	}
}

/* Whether some [users] or [databases] entry sets its own query_wait_timeout. */
static bool wait_timeout_overridden(void)
{
	for (const struct user_config *uc = pgv.cfg->users; uc; uc = uc->next)
		if (uc->query_wait_timeout >= 0)
			return true;
	for (const struct db_config *dc = pgv.cfg->databases; dc; dc = dc->next)
		if (dc->query_wait_timeout >= 0)
			return true;
	return false;
}

/* Whether a [users] entry sets its own client_idle_timeout (then idle order is not timeout order). */
static bool users_override_idle_timeout(void)
{
	for (const struct user_config *uc = pgv.cfg->users; uc; uc = uc->next)
		if (uc->client_idle_timeout >= 0)
			return true;
	return false;
}

static void check_idle_clients(struct pool *pool, usec_t now, bool users_override_idle)
{
	if (pool->db->is_admin)
		return;
	struct list_node *n, *next;
	for (n = list_first(&pool->idle_clients); n && n != &pool->idle_clients.head; n = next) {
		next = n->next;
		struct client *client = container_of(n, struct client, node);
		usec_t timeout = USER_TIMEOUT(client, client_idle_timeout);
		if (timeout > 0 && now - client->request_time >= timeout) {
			client_close(client, "08P01", "client_idle_timeout");
			continue;
		}
		/* Without per-user client_idle_timeout the list is in idle order: the rest are younger. */
		if (!users_override_idle)
			break;
	}
}

/* Linked servers: bounded by the pool size, so a full scan is cheap. */
static void check_active_servers(struct pool *pool, usec_t now)
{
	struct list_node *n, *next;
	for (n = list_first(&pool->active_servers); n && n != &pool->active_servers.head; n = next) {
		next = n->next;
		struct server *server = container_of(n, struct server, node);
		struct client *client = server->link;
		/*
		 * A feature's own server (the notification listener) is never
		 * released: it goes when the pool's servers must (RECONNECT, new
		 * settings, PAUSE, SHUTDOWN WAIT_FOR_SERVERS), its owner told.
		 */
		if (server->owner && (server->close_needed || db_paused(pool->db) ||
				      pgv.shutdown_mode == SHUTDOWN_WAIT_FOR_SERVERS)) {
			server_close(server, server->close_needed ? "obsolete connection" : pool_pause_reason());
			continue;
		}
		if (!client || server->internal != SV_INTERNAL_NONE)
			continue;
		const char *reason = NULL;
		usec_t query_timeout = USER_TIMEOUT(client, query_timeout);
		usec_t idle_tx = USER_TIMEOUT(client, idle_transaction_timeout);
		usec_t tx_timeout = USER_TIMEOUT(client, transaction_timeout);
		if (query_timeout > 0 && server->query_start && now - server->query_start >= query_timeout)
			reason = "query timeout";
		else if (idle_tx > 0 && !server->query_start && server->txn_status != 'I' &&
			 now - server->last_active >= idle_tx)
			reason = "idle transaction timeout";
		else if (tx_timeout > 0 && server->xact_start && now - server->xact_start >= tx_timeout)
			reason = "transaction timeout";
		if (!reason)
			continue;
		/* The server is in an unknown state: both go, as in PgBouncer. */
		server_unlink(server);
		client_close(client, "08P01", reason);
		server_close(server, reason);
	}
}

static void check_servers(struct pool *pool, usec_t now)
{
	const struct config *cfg = pgv.cfg;
	struct list_node *n, *next;

	if (cfg->server_connect_timeout > 0) {
		for (n = list_first(&pool->login_servers); n && n != &pool->login_servers.head; n = next) {
			next = n->next;
			struct server *server = container_of(n, struct server, node);
			if (now - server->connect_time >= cfg->server_connect_timeout)
				server_connect_timed_out(server);
		}
	}
	/*
	 * A cancel that does not complete must not hold its server forever;
	 * nor must the answers of a client that left (pool.c finishes them to
	 * keep the server): a long query, or a large result nobody reads,
	 * would hold a pool slot and pull its rows through for as long as it
	 * runs. That is bounded by query_timeout, and by FINISH_OWED_MAX_USEC
	 * when query_timeout is longer or off; then the server is closed, as
	 * PgBouncer closes it at once.
	 */
	usec_t owed_max = FINISH_OWED_MAX_USEC;
	if (cfg->query_timeout > 0 && cfg->query_timeout < owed_max)
		owed_max = cfg->query_timeout;
	for (n = list_first(&pool->used_servers); n && n != &pool->used_servers.head; n = next) {
		next = n->next;
		struct server *server = container_of(n, struct server, node);
		if (cfg->cancel_wait_timeout > 0 && server->cancel_sent_at &&
		    now - server->cancel_sent_at >= cfg->cancel_wait_timeout &&
		    (server->cancels_in_flight || server->cancel_expired))
			server_close(server, "cancel_wait_timeout");
		else if (server->finishing_owed && now - server->owed_since >= owed_max)
			server_close(server, "client disconnect while server was not ready");
	}
	/*
	 * server_fast_close: a session's server that must go (RECONNECT, new
	 * connection settings, DNS) is closed with its client at the next pass
	 * where it is between transactions, as PgBouncer does.
	 */
	if (cfg->server_fast_close && pool_effective_mode(pool) == POOL_MODE_SESSION) {
		for (n = list_first(&pool->active_servers); n && n != &pool->active_servers.head; n = next) {
			next = n->next;
			struct server *server = container_of(n, struct server, node);
			/* a replication stream has no "between transactions": it runs until its client ends it */
			if (server->close_needed && !server->replication && server_is_clean(server))
				server_close_with_client(server, "database configuration changed");
		}
	}
	/* Idle servers never used do not count for server_lifetime = 0 ("use once"). */
	usec_t lifetime = pool_server_lifetime(pool);
	int keep = pool_min_size(pool);
	for (n = list_first(&pool->idle_servers); n && n != &pool->idle_servers.head; n = next) {
		next = n->next;
		struct server *server = container_of(n, struct server, node);
		if (lifetime > 0 && now - server->connect_time >= lifetime)
			server_close(server, "server lifetime over");
		else if (cfg->server_idle_timeout > 0 && now - server->last_used >= cfg->server_idle_timeout &&
			 pool_instance_server_count(pool) > keep)
			server_close(server, "server idle timeout");
	}
}

/* Every stats_period: a snapshot for the averages, and (log_stats) one line per database. */
static void roll_stats(usec_t now)
{
	static usec_t last_roll;
	usec_t period = pgv.cfg->stats_period > 0 ? pgv.cfg->stats_period : 60 * USEC_PER_SEC;
	if (!last_roll)
		last_roll = now;
	if (now - last_roll < period)
		return;
	last_roll = now;
	list_for_each(dpos, &pgv.databases) {
		struct db *db = container_of(dpos, struct db, node);
		stats_roll(&db->stats, now);
		if (!pgv.cfg->log_stats || db->is_admin || list_empty(&db->pools))
			continue;
		struct stats_averages a;
		stats_period_averages(&db->stats, &a);
		log_info("[%s] stats: %llu xacts/s, %llu queries/s, %llu client parses/s, %llu server parses/s, "
			 "%llu binds/s, %llu client logins/s, in %llu B/s, out %llu B/s, xact %llu us, query %llu us, "
			 "wait %llu us",
			 db->name, (unsigned long long)a.xact_count, (unsigned long long)a.query_count,
			 (unsigned long long)a.client_parse_count, (unsigned long long)a.server_parse_count,
			 (unsigned long long)a.bind_count, (unsigned long long)a.client_login_count,
			 (unsigned long long)a.bytes_received,
			 (unsigned long long)a.bytes_sent, (unsigned long long)a.xact_time,
			 (unsigned long long)a.query_time, (unsigned long long)a.wait_time);
	}
}

static void janitor_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd; (void)what; (void)arg;
	usec_t now = now_usec();
	roll_stats(now);
	dns_housekeeping(now);
	admin_check_waits();
	check_login_clients(now);
	if (pgv.cfg->cancel_wait_timeout > 0)
		server_expire_cancel_requests(now, pgv.cfg->cancel_wait_timeout);
	peer_expire_requests(now);
	roles_check_idle_servers(now);
	volatility_tick(now);
	bool users_override_idle = users_override_idle_timeout();
	bool wait_overridden = wait_timeout_overridden();
	list_for_each_safe(dpos, dtmp, &pgv.databases) {
		struct db *db = container_of(dpos, struct db, node);
		pool_keep_forced_user_pool(db);
		list_for_each(ppos, &db->pools) {
			struct pool *pool = container_of(ppos, struct pool, node);
			check_waiting(pool, now, wait_overridden);
			check_idle_clients(pool, now, users_override_idle);
			check_active_servers(pool, now);
			check_servers(pool, now);
			pool_trim_excess(pool);
			pool_after_change(pool);
			pool_keep_min_size(pool);
		}
		pool_drop_idle_pools(db, now);
		pool_drop_idle_autodb(db, now);
	}
	workers_publish();
	metrics_publish();
}

void janitor_start(void)
{
	struct timeval tv = { 0, JANITOR_PERIOD_USEC };
	janitor_ev = event_new(pgv.base, -1, EV_PERSIST, janitor_cb, NULL);
	event_add(janitor_ev, &tv);
}

void janitor_stop(void)
{
	if (janitor_ev)
		event_free(janitor_ev);
	janitor_ev = NULL;
}
