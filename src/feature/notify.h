/*
 * notify.h - LISTEN/UNLISTEN/NOTIFY for clients in transaction and
 * statement pooling (notify_support, a pgvalve extension).
 *
 * Contract:
 *  - A client's LISTEN and UNLISTEN run on whichever server it has, as any
 *    statement: PostgreSQL answers them (errors included). notify.c reads
 *    them from the client's Query and Parse messages (multi-statement
 *    queries included; quoted names kept, unquoted ones lower-cased, both
 *    cut to 63 bytes as PostgreSQL does) and applies them to the client's
 *    channel set only when the server reports ReadyForQuery 'I' after a
 *    transaction that saw no error and no ROLLBACK: as PostgreSQL, they take
 *    effect at COMMIT and not at all on ROLLBACK or error: a transaction
 *    block counts as committed when its last COMMIT/ROLLBACK command tag
 *    was COMMIT (a failed block's COMMIT answers ROLLBACK), a statement
 *    outside a block when no error came. A block that committed after a
 *    ROLLBACK TO SAVEPOINT (or an error it recovered from that way) keeps
 *    all its LISTEN/UNLISTEN, those after the savepoint too (a documented
 *    approximation: PostgreSQL keeps only those before; the LISTENs before
 *    it, the usual case, are exact). A Parse of LISTEN counts when its
 *    batch's Sync ends without error, whether or not it is executed.
 *  - Each pool (database + user) with listening clients has one listener:
 *    one of the pool's own servers, so it counts where any does (pool_size,
 *    max_db_connections, max_user_connections, the instance's shared budget
 *    with workers = N: one listener per worker) and shows in SHOW SERVERS
 *    and SHOW POOLS as active. It is the server the pool's first LISTEN
 *    committed on, claimed (server_claim) and taken from the pool when that
 *    client lets it go: it has listened on the client's channels since the
 *    commit (no window for the first client), and it never waits for room,
 *    so a full pool, or several clients LISTENing at once, cannot make it
 *    hang. A pool whose limits leave no server for queries next to the
 *    listeners (fewer than workers + 1) refuses LISTEN: the client is
 *    closed with 0A000 saying so. The listener LISTENs the union of its
 *    clients' channels, reference-counted: LISTEN when the first client
 *    needs a channel, UNLISTEN when the last one leaves. It closes (its
 *    server leaves the pool) when no client listens.
 *    A later client's statement that LISTENs a channel the listener lacks
 *    waits (the client paused before it goes to its server) until the
 *    listener has LISTENed it: the listener hears the channel before the
 *    client's LISTEN commits, so nothing committed after that commit is
 *    missed (one committed just before it may reach the client). Until the
 *    commit the channel has no client; it is UNLISTENed if none comes.
 *    As a fallback (the channel dropped meanwhile), a ReadyForQuery that
 *    ends a transaction which added a channel is held until the listener
 *    has it.
 *  - Servers the client's LISTEN ran on get "UNLISTEN *" (release_sql)
 *    before any other client uses them, and a NotificationResponse arriving
 *    on a pooled server is dropped: only the listener delivers, except one
 *    on the client's own server for a channel it is not yet listening on
 *    through the listener (a LISTEN and a NOTIFY in one transaction): that
 *    one is passed on, as PostgreSQL sends it before the ReadyForQuery.
 *  - The listener goes, its clients told as below, when the pool's
 *    servers must (RECONNECT, PAUSE, SHUTDOWN WAIT_FOR_SERVERS: janitor.c).
 *  - NOTIFY and pg_notify() run on the client's server: PostgreSQL sends
 *    them at commit, atomic with the data, once.
 *  - Delivery: to an idle client at once; to a client with a server (in a
 *    transaction, or waiting for one) just before the ReadyForQuery that
 *    ends its transaction, as PostgreSQL sends what came during one.
 *  - A client's own notifications come before the ReadyForQuery of the
 *    transaction that sent them, as on a direct connection: when a
 *    listening client's transaction committed a statement that may have
 *    notified (any command tag but LISTEN, UNLISTEN, BEGIN, SAVEPOINT,
 *    RELEASE, SHOW, SET, RESET, DEALLOCATE: a NOTIFY, a SELECT calling
 *    pg_notify(), a write whose trigger notifies, a CALL, a DO), its
 *    ReadyForQuery waits for a Sync round trip on the listener, which
 *    PostgreSQL answers only after the notifications it was signalled for
 *    (the listener lost: its clients are closed, which ends the wait).
 *    Only listening clients pay that round trip.
 *    The PID in a notification is the sending backend's, except that a
 *    client gets its own login PID (BackendKeyData) for notifications sent
 *    by a backend whose last Query or Parse (of any client of the pool) was
 *    its own (self-notification). If that backend served another client's
 *    statement between the commit and the moment the listener's copy is
 *    read, the notification is attributed to that client (a narrow race).
 *  - A client whose unsent notifications (its socket's queue plus those held
 *    for its transaction) exceed notify_buffer_limit bytes is closed (53400,
 *    log line); the listener and other clients never wait for it.
 *  - The listener lost (server restart, pg_terminate_backend, failover):
 *    every client listening through it is closed with 08006 and a message
 *    saying notifications may have been lost, as a lost session would be.
 *  - Session pooling: untouched, a client's server is its own.
 *
 * Must not touch sockets except the client's (netbuf_send) and the
 * listener's; never closes a client from inside a core callback (closes
 * are deferred to the event loop).
 */
#ifndef PGVALVE_NOTIFY_H
#define PGVALVE_NOTIFY_H

#include "common.h"

struct pool;

/* Start-up: fills relay_hooks' notify slots. */
void notify_register(void);

/* One pool's channels for SHOW LISTENERS: calls fn for each. */
typedef void (*notify_channel_fn)(void *arg, const struct pool *pool, const char *channel, int clients);
void notify_each_channel(const struct pool *pool, notify_channel_fn fn, void *arg);

/* /metrics counts notifications delivered and clients closed for not reading (metrics_record.c). */

#endif
