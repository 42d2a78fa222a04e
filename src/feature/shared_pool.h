/*
 * shared_pool.h - one instance's connection limits across worker
 * processes (workers = N > 1): server connections per pool, database and
 * user, clients per instance, database and user, counted in a shared
 * memory table the supervisor maps before it forks, so that
 * default_pool_size, reserve_pool_size, min_pool_size,
 * max_db_connections, max_user_connections, max_client_conn,
 * max_db_client_connections and max_user_client_connections mean what they
 * mean with one process.
 *
 * The table: one slot per key (the instance, a database, a user, a pool =
 * database + user), found by hashing its name; in each slot one column of
 * server and one of client counts per worker, written only by that worker
 * (and zeroed by the supervisor when it reaps the worker). A count is the
 * sum of the columns. Each slot has its own process-shared robust mutex: a
 * check of the sums and the increment of one's own columns happen under
 * the locks of the slots concerned (a server's pool, database and user,
 * taken in index order; a client's instance, database and user), so no
 * limit is ever exceeded, not even by one, and workers opening or closing
 * servers of different pools never wait for each other. No lock spans
 * the table: a key's slot is found without one (and its key checked
 * again under the slot's lock), and one more lock, the directory's, is
 * taken only to claim a slot for a key seen for the first time. A worker
 * that dies holding a lock leaves it to the next locker (EOWNERDEAD), and its
 * columns are zeroed half a second after the supervisor reaps it (its
 * connections' backends have left PostgreSQL by then) and again before
 * it starts anew, so a restarted worker starts from zero and nothing is
 * counted twice. Server and client connections
 * are opened and closed rarely next to transactions: the hot path never
 * touches the table.
 *
 * Capacity elsewhere: a worker whose clients wait while the pool's budget
 * is used up marks the pool's slot "wanted" by it (a time stamp, per
 * worker). Every SHARED_POOL_TICK_USEC each worker closes one idle server
 * of a pool another worker freshly wants, and retries its own waiting
 * pools; a worker whose own clients wait too (or waited within the last
 * 200 ms) closes a server as it is released only if it holds at least two
 * more of the pool than the asking worker, or the asker holds none, and
 * the server has served SHARED_POOL_HOLD_USEC: a saturated pool splits
 * evenly across workers and stays put (a pool smaller than the worker
 * count takes turns), instead of logging in and out. The closed
 * server's budget is held for the asking worker (its "reserved" column)
 * while it keeps asking. A new ask wakes the workers holding servers of
 * the pool at once (SIGURG), and the worker a server was given back for is
 * woken as soon as PostgreSQL has closed it, so a waiting client gets a
 * server another worker held idle within a server logout and login (the
 * ticks remain the fallback: two ticks plus the login); one held busy,
 * within SHARED_POOL_HOLD_USEC more.
 *
 * A login waits for its pool's welcome (the parameters the pool's first
 * server reports) only while no worker knows it: a worker whose pool has
 * none yet and cannot open a server (the budget is held elsewhere) marks
 * the pool's slot (welcome_wanted, one bit per worker) and wakes the
 * holders; a worker that knows the pool's welcome sends it over the
 * asker's inbox (handover_send_welcome) at its next tick. The logins go
 * on and their clients wait for a server as any logged-in client does,
 * asking for one as above. Without it a worker started (or restarted)
 * while the others held the whole budget busy kept its logins waiting
 * for a server, and a client program that connects synchronously in a
 * thread with open transactions (pgbench -C) held those transactions,
 * and the servers, until client_login_timeout.
 *
 * max_db_connections and max_user_connections are handed on the same way,
 * as PgBouncer evicts within one process: a worker refused at one of them
 * first closes its own longest-idle server of another pool of the
 * database (or user) and takes its place; if it has none, it marks the
 * database's (or user's) slot wanted, and a worker holding an idle server
 * of any pool of it gives that one back, its budget reserved in that
 * slot; a busy one is given as it is released, by the rule above (so a
 * pool larger than max_db_connections splits across its workers too).
 *
 * Lowered limits: when a reload leaves the instance with more servers of a
 * pool than pool_size + reserve_pool_size, each janitor pass of a worker
 * claims the excess under the slot's lock (trim_at / trim_by) and
 * closes up to that many of its own used and idle servers; the others
 * wait out the claim (TRIM_CLAIM_USEC), then see the lower count and close
 * the rest, so together they never close more than the excess.
 *
 * Keys come from the configuration and from authenticated logins; client
 * counts of a database or user are kept only where that limit is set (a
 * login's names are not trusted before authentication). A slot whose
 * counts are all zero is reused for another key; a full table leaves a
 * new key uncounted (logged once).
 *
 * With workers = 1 nothing here runs: the pools' own counts decide, as
 * before (pgv.budget is NULL).
 */
#ifndef PGVALVE_SHARED_POOL_H
#define PGVALVE_SHARED_POOL_H

#include "common.h"

/* How often a worker looks for wanted budget and retries its waiting pools. */
#define SHARED_POOL_TICK_USEC (50 * 1000)
/* A server whose own worker's clients wait for it too serves them this long before it is given back. */
#define SHARED_POOL_HOLD_USEC (200 * 1000)

/* Supervisor, before any fork: the table for count workers. */
void shared_pool_create(int count);
void shared_pool_destroy(void);
/* Supervisor: worker k (1-based) has no process; what it held is free again. */
void shared_pool_reclaim(int worker);
/* Worker of a supervisor: fills pgv.budget and starts the tick (after the loop exists). */
void shared_pool_register(void);
void shared_pool_stop(void);

#endif
