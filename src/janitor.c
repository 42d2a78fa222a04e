/*
 * janitor.c - periodic maintenance of pools and connections.
 *
 * Each tick walks only the lists where something can expire: clients
 * still logging in, clients waiting for a server, servers logging in, and
 * idle servers (few by construction: at most pool_size per pool). Active
 * clients and servers are never scanned.
 */
#include "pgvalve/common.h"
#include "pgvalve/janitor.h"
#include "pgvalve/admin.h"
#include "pgvalve/stats.h"
#include "pgvalve/client.h"
#include "pgvalve/log.h"
#include "pgvalve/pool.h"
#include "pgvalve/server.h"

#include <event2/event.h>

static struct event *janitor_ev;

static void check_login_clients(usec_t now)
{
	usec_t timeout = pgv.cfg->client_login_timeout;
	if (timeout <= 0)
		return;
	list_for_each_safe(pos, tmp, &pgv.login_clients) {
		struct client *client = container_of(pos, struct client, node);
		if (now - client->connect_time >= timeout)
			client_close(client, "08P01", "client_login_timeout");
	}
}

static void check_pool(struct pool *pool, usec_t now)
{
	const struct config *cfg = pgv.cfg;

	if (cfg->client_login_timeout > 0) {
		list_for_each_safe(pos, tmp, &pool->welcome_clients) {
			struct client *client = container_of(pos, struct client, node);
			if (now - client->connect_time >= cfg->client_login_timeout)
				client_close(client, "08P01", "client_login_timeout (server down)");
		}
	}
	if (cfg->query_wait_timeout > 0) {
		/* FIFO: the oldest waiters are first, so stop at the first one still in time. */
		list_for_each_safe(pos, tmp, &pool->waiting_clients) {
			struct client *client = container_of(pos, struct client, node);
			if (now - client->request_time < cfg->query_wait_timeout)
				break;
			client_close(client, "08P01", "query_wait_timeout");
		}
	}
	if (cfg->server_connect_timeout > 0) {
		list_for_each_safe(pos, tmp, &pool->login_servers) {
			struct server *server = container_of(pos, struct server, node);
			if (now - server->connect_time >= cfg->server_connect_timeout) {
				pool_server_login_failed(pool, "08006", "server connect timeout");
				server_close(server, "connect timeout");
			}
		}
	}
	usec_t lifetime = pool->db->cfg->server_lifetime >= 0 ? pool->db->cfg->server_lifetime : cfg->server_lifetime;
	list_for_each_safe(pos, tmp, &pool->idle_servers) {
		struct server *server = container_of(pos, struct server, node);
		if (lifetime > 0 && now - server->connect_time >= lifetime)
			server_close(server, "server lifetime over");
		else if (cfg->server_idle_timeout > 0 && now - server->last_used >= cfg->server_idle_timeout)
			server_close(server, "server idle timeout");
	}
	pool_after_change(pool);
}

/*
 * Every stats_period: a snapshot for the averages, and (log_stats) one
 * line per database for the period just ended.
 */
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
			 "%llu binds/s, in %llu B/s, out %llu B/s, xact %llu us, query %llu us, wait %llu us",
			 db->name, (unsigned long long)a.xact_count, (unsigned long long)a.query_count,
			 (unsigned long long)a.client_parse_count, (unsigned long long)a.server_parse_count,
			 (unsigned long long)a.bind_count, (unsigned long long)a.bytes_received,
			 (unsigned long long)a.bytes_sent, (unsigned long long)a.xact_time,
			 (unsigned long long)a.query_time, (unsigned long long)a.wait_time);
	}
}

static void janitor_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd; (void)what; (void)arg;
	usec_t now = now_usec();
	roll_stats(now);
	admin_check_waits();
	check_login_clients(now);
	list_for_each(dpos, &pgv.databases) {
		struct db *db = container_of(dpos, struct db, node);
		list_for_each(ppos, &db->pools)
			check_pool(container_of(ppos, struct pool, node), now);
	}
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
