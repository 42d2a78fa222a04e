/*
 * readiness.h - whether this instance should be given new clients: what
 * the HTTP endpoint's /ready says (metrics_http.h), for load balancers and
 * Kubernetes readiness probes.
 *
 * Not ready while
 *   - a drain (drain.h) or any other shutdown is under way;
 *   - paused: PAUSE without a database or SIGUSR1 (with workers = N, the
 *     instance's pause); a PAUSE of one database is not a
 *     pause of the instance;
 *   - no database can be reached: there is at least one database (the
 *     console's aside; an auto-database counts once a login made it), and
 *     for every one of them each of its pools holds no logged-in server
 *     and the pool's last attempt to open one (connect, TLS or login)
 *     failed. A database no client has used yet, or a pool that has not
 *     tried, counts as reachable: pgvalve opens servers when clients need
 *     them (or for min_pool_size), so it knows only what it has tried. A
 *     server that logs in makes its database reachable again at once.
 * With workers = N every worker judges its own pools and publishes the
 * verdict every second (workers.h); the instance reaches no database only
 * when every worker that serves says so.
 */
#ifndef PGVALVE_READINESS_H
#define PGVALVE_READINESS_H

#include "common.h"

/* NULL when ready; else why not, in a word or three ("draining", "paused", ...). */
const char *readiness_not_ready(void);
/* After start-up: with workers = N, publishes this worker's verdict every second. */
void readiness_start(void);
/* Exiting: stops publishing. Idempotent. */
void readiness_stop(void);

#endif
