/*
 * reap.h - deferred freeing of closed connections.
 *
 * A handler deep in a call chain may close any connection, its own or its
 * peer's: the closed object goes to pgv.dead_clients or pgv.dead_servers
 * and stays allocated until the loop is back at its top, where the reaper
 * frees it, so no caller ever touches freed memory.
 *
 * This module owns only the event that runs the reaper. What freeing means
 * is the reaper's business (loop.c registers it), so the core, which
 * schedules a reap on every close, names nothing above itself.
 */
#ifndef PGVALVE_REAP_H
#define PGVALVE_REAP_H

struct event_base;

/* Creates the reap event on base; reaper frees whatever is on the dead lists. */
void reap_init(struct event_base *base, void (*reaper)(void));
/* Runs the reaper once the current event's handlers have returned. */
void reap_schedule(void);
/* Runs the reaper now (shutdown, after every connection was closed). */
void reap_now(void);
void reap_cleanup(void);

#endif
