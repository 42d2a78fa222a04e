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
 * Exact counts: inside the receiver's inbox lock (a robust process-shared
 * mutex per inbox) and only while the receiver runs, the sender sends,
 * then moves the server's count from its own column of the shared table
 * to the receiver's, slot by slot, recording each in the message's
 * "flight" beside the lock. The receiver takes the same lock before it
 * counts a server in: a flight not marked moved means its sender died
 * between the send and the end of the move (a robust lock: nobody else
 * could be inside), and the receiver moves the slots not moved itself
 * (from the dead sender's column, unless the supervisor has zeroed it
 * already), so the count follows the socket at once. A sender that dies
 * before its send takes the socket with it, its count in its own column.
 * The supervisor, once it has reaped a worker (its pid cleared), takes
 * the dead worker's inbox lock and closes every socket still queued
 * there, before its column is zeroed (shared_pool_reclaim): a server
 * handed to a worker that dies is closed, never lost nor counted twice. A
 * receiver that cannot use a server (its pool is gone) closes it, and its
 * count with it.
 *
 * A pool's welcome (its first server's parameters) travels the same way,
 * a message with no socket, for a worker whose logins wait for it
 * (handover_send_welcome, shared_pool.h).
 *
 * With workers = 1 nothing here runs.
 */
#ifndef PGVALVE_HANDOVER_H
#define PGVALVE_HANDOVER_H

#include "common.h"

struct server;
struct pool;

/* Supervisor, before any fork: the inboxes of count workers. */
void handover_create(int count);
void handover_destroy(void);
/* Supervisor, once worker k (1-based) is reaped and its pid cleared: closes what its inbox still holds. */
void handover_worker_gone(int worker);
/* Worker of a supervisor: reads its inbox (after the loop exists). */
void handover_register(void);
void handover_stop(void);

/*
 * Wake-ups: worker k's loop is woken through its inbox (a message with no
 * server) and calls the function set with handover_on_wake; false if it
 * could not be sent (k is this worker, or its inbox is full).
 */
bool handover_wake(int worker);
void handover_on_wake(void (*fn)(void));

/*
 * A pool's welcome (the ParameterStatus pairs its first server reported)
 * for worker k, whose logins of that pool wait for them while this worker
 * holds the pool's servers (shared_pool.h): a message with no server, on
 * which k learns them (pool_learn_welcome) unless it has them. False if
 * k does not run or its inbox is full.
 */
bool handover_send_welcome(int worker, const struct pool *pool);

/* Whether server may move to another worker (see above). */
bool handover_eligible(const struct server *server);
/*
 * Locks worker k's inbox if k runs (true); sends to it are then exact
 * against its death (handover_worker_gone). handover_end unlocks it.
 */
bool handover_begin(int worker);
void handover_end(int worker);
/*
 * Between begin and end: sends server's socket and state to worker k;
 * asked: when k asked (monotonic_usec, 0 if unknown), logged by k with
 * the time it took. False if it could not (nothing changed). Sent, the
 * caller moves the server's count to k's column, setting bit i of
 * **moved as it has moved slot i of the server's token, then calls
 * handover_moved (see above).
 */
bool handover_send(const struct server *server, int worker, int64_t asked, uint32_t **moved);
void handover_moved(int worker);
/* After handover_end (no write while the receiver may wait for the lock): the log line of a server sent. */
void handover_log_sent(const struct server *server, int worker);
/*
 * Receiving: moves to this worker's column the count of the slots of
 * token (bit i of moved: slot i) that its sender, worker from (pid
 * from_pid), died before it moved.
 */
void handover_on_adopt(void (*fn)(uint64_t token, uint32_t moved, int from, pid_t from_pid));

#endif
