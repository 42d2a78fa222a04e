/*
 * readiness.c - whether this instance should be given new clients (see
 * readiness.h for the rules).
 *
 * Owns: the timer that publishes this worker's verdict on its databases
 * (workers = N). Reads the instance's shutdown and pause state and the
 * pools' server lists and last login failure; changes nothing of theirs.
 */
#include "common.h"
#include "readiness.h"
#include "drain.h"
#include "instance.h"
#include "pool.h"
#include "workers.h"

#include <event2/event.h>

#define PUBLISH_INTERVAL_SEC 1

static struct event *publish_ev;

static bool pool_has_logged_in_server(const struct pool *pool)
{
	return pool->active_servers.count + pool->idle_servers.count + pool->used_servers.count +
	       pool->tested_servers.count > 0;
}

/* Every pool of db has no logged-in server and failed its last attempt; a db without pools was never tried. */
static bool db_unreachable(const struct db *db)
{
	if (list_empty(&db->pools))
		return false;
	list_for_each(pos, &db->pools) {
		const struct pool *pool = container_of(pos, struct pool, node);
		if (!pool->last_login_failure || pool_has_logged_in_server(pool))
			return false;
	}
	return true;
}

/* This process: at least one database, none of them reachable. */
static bool local_unreachable(void)
{
	bool any = false;
	list_for_each(pos, &pgv.databases) {
		const struct db *db = container_of(pos, struct db, node);
		if (db->is_admin)
			continue;
		if (!db_unreachable(db))
			return false;
		any = true;
	}
	return any;
}

static bool instance_paused(void)
{
	return pgv.paused_all || (workers_supervised() && workers_want_paused(NULL));
}

const char *readiness_not_ready(void)
{
	if (drain_active())
		return "draining";
	if (pgv.shutting_down || pgv.shutdown_mode != SHUTDOWN_NONE)
		return "shutting down";
	if (instance_paused())
		return "paused";
	if (local_unreachable() && workers_others_unreachable())
		return "no database reachable";
	return NULL;
}

static void publish_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd; (void)what; (void)arg;
	workers_publish_unreachable(local_unreachable());
}

void readiness_start(void)
{
	if (!workers_supervised() || publish_ev)
		return;
	struct timeval every = { PUBLISH_INTERVAL_SEC, 0 };
	publish_ev = event_new(pgv.base, -1, EV_PERSIST, publish_cb, NULL);
	event_add(publish_ev, &every);
}

void readiness_stop(void)
{
	if (publish_ev)
		event_free(publish_ev);
	publish_ev = NULL;
}
