/*
 * janitor.h - periodic maintenance: login and connect timeouts, clients
 * waiting too long, idle and old servers, servers still finishing the
 * answers of a client that left, retrying server logins.
 *
 * Runs once per JANITOR_PERIOD and walks only the short lists where
 * something can expire (logging-in clients, waiting clients, idle and
 * logging-in servers), never every connection.
 */
#ifndef PGVALVE_JANITOR_H
#define PGVALVE_JANITOR_H

#include "common.h"

#define JANITOR_PERIOD_USEC (USEC_PER_SEC / 3)
/* Longest a server finishes the answers its departed client owed (query_timeout if shorter). */
#define FINISH_OWED_MAX_USEC (5 * USEC_PER_SEC)

void janitor_start(void);
void janitor_stop(void);

#endif
