/*
 * pool_check.h - which idle servers are stale: unused for
 * server_check_delay while server_check_query is set.
 *
 * A stale server runs server_check_query before its next client (pool.c
 * never hands it out as it is). PgBouncer's janitor moves such servers to
 * SV_USED, so every view of the pools counts them as sv_used / "used", not
 * sv_idle: SHOW POOLS, SHOW SERVERS, the metrics and SHOW WORKERS alike.
 *
 * Inline, reading only a server's last use, the pool's idle list and the
 * config, so that the base layer's workers.c counts as the core does
 * without calling into it. A header of its own because pool.h cannot
 * include server.h (server.h reaches pool.h through relay.h).
 */
#ifndef PGVALVE_POOL_CHECK_H
#define PGVALVE_POOL_CHECK_H

#include "pool.h"
#include "server.h"

static inline bool pool_server_needs_check(const struct server *server)
{
	const struct config *cfg = pgv.cfg;
	if (!cfg->server_check_query[0])
		return false;
	return cfg->server_check_delay == 0 || now_usec() - server->last_used >= cfg->server_check_delay;
}

/* How many of the pool's idle servers are stale. */
static inline int pool_stale_idle_count(const struct pool *pool)
{
	int n = 0;
	list_for_each(pos, &pool->idle_servers)
		n += pool_server_needs_check(container_of(pos, struct server, node));
	return n;
}

#endif
