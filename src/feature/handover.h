/*
 * handover.h - a logged-in server moves from one worker to another
 * (workers = N > 1) without a new login: its socket goes over the
 * receiving worker's inbox (SCM_RIGHTS) with the state that goes with it,
 * and the receiving worker lends it at once (server_take_over).
 *
 * Inboxes: one datagram socket pair per worker, made by the supervisor
 * before it forks, so every worker (a restarted one too) has every inbox;
 * worker k reads its own. A message: the pool (database and user names),
 * the backend's pid and cancel key, its host list entry and address, its
 * age, its role, its budget token (the shared table's slots are the same
 * in every worker), the parameters it reported at login and the tracked
 * parameters it has now.
 *
 * What moves: a plain (no TLS: OpenSSL's session state cannot leave the
 * process) logged-in server, clean between transactions, with no
 * prepared statement, session SET or pending internal query on it, not
 * a replication or a feature's own server (handover_eligible). Anything
 * else is given back the old way (closed, its budget handed on, a new
 * login in the asking worker).
 *
 * Exact counts: the sender moves the server's count from its own column
 * of the shared table to the receiver's before it sends, inside the
 * receiver's inbox lock (a robust process-shared mutex per inbox) and only
 * while the receiver runs; the supervisor, once it has reaped a worker
 * (its pid cleared), takes the same lock and closes every socket still
 * queued in the dead worker's inbox, before its column is zeroed
 * (shared_pool_reclaim): a server handed to a worker that dies is closed,
 * never lost nor counted twice. A receiver that cannot use a server (its
 * pool is gone) closes it, and its count with it. A sender that dies
 * between moving the count and sending leaves one server counted in the
 * receiver's column that does not exist (never one too few).
 *
 * With workers = 1 nothing here runs.
 */
#ifndef PGVALVE_HANDOVER_H
#define PGVALVE_HANDOVER_H

#include "common.h"

struct server;

/* Supervisor, before any fork: the inboxes of count workers. */
void handover_create(int count);
void handover_destroy(void);
/* Supervisor, once worker k (1-based) is reaped and its pid cleared: closes what its inbox still holds. */
void handover_worker_gone(int worker);
/* Worker of a supervisor: reads its inbox (after the loop exists). */
void handover_register(void);
void handover_stop(void);

/* Whether server may move to another worker (see above). */
bool handover_eligible(const struct server *server);
/*
 * Locks worker k's inbox if k runs (true); sends to it are then exact
 * against its death (handover_worker_gone). handover_end unlocks it.
 */
bool handover_begin(int worker);
void handover_end(int worker);
/*
 * Between begin and end: sends server's socket and state to worker k,
 * the server's count already moved to k's column. False if it could not
 * (the server is untouched: the caller moves the count back).
 */
bool handover_send(const struct server *server, int worker);

#endif
