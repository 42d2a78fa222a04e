/*
 * balance.h - the read balancer (load_balance_reads): a client's
 * read-only transactions on its database's standbys.
 *
 * For a database with load_balance_reads = explicit or auto,
 * target_session_attrs = read-write or primary and a host list: when a
 * client with no server starts a transaction (transaction pooling), a
 * statement (statement pooling) or its session (session pooling: its
 * first request, after which it keeps its server), this decides where it
 * runs. A read runs in the pool's standby companion
 * (pool_standby_companion: its servers are on the list's standbys, as
 * role routing places them), the client lent to it for that transaction
 * only (pool_lend_client; the core takes it back when its server is
 * released); anything else stays in its own pool, on the primary.
 *
 * A read is, in a whole Query or Parse:
 *   - explicit: a transaction the client opens READ ONLY
 *     (sql_classify_begin), or any transaction of a client whose session
 *     is read-only (default_transaction_read_only on in its startup
 *     packet or options, or by its own SET, as the server reports it), unless the text mentions WRITE or read_only
 *     (BEGIN READ WRITE, a SET of it: those stay on the primary);
 *   - auto, also: a simple Query every statement of which only reads
 *     (sql_classify_read_only), calling no function that may write
 *     (below); and an extended batch (from
 *     a Parse or Bind to its Sync, all of it buffered already) whose
 *     Parse texts all read and whose Binds use those or prepared names
 *     whose texts read (prepare_client_statement_text);
 *   - session pooling: a login asking for a read-only session
 *     (default_transaction_read_only on, or options' target_session_attrs
 *     read-only, standby or prefer-standby: client->asks_standby).
 * It goes to a standby only while role routing knows one that may serve
 * (up, not lagging over max_replica_lag: roles_standby_may_serve), else
 * to the primary; while an entry's role is still unknown, one server of
 * the companion is opened to learn it. A lent client waiting for a
 * standby server that cannot be had (a connect or login failed, no
 * standby left) is sent back to its own pool by the core (pool.c) and
 * runs on the primary. A lent client that pipelines past its Sync or
 * Query is held (client->held_for_ready) until that answer came, so that
 * its next transaction is placed on its own.
 *
 * The 25006 retry: a simple Query, or an extended batch, sent to a
 * standby on auto's word is kept (client->balance_retry) until something
 * of its answer goes out (what comes before any row is held back until
 * then: holds_back); an ErrorResponse 25006 first is dropped with its
 * ReadyForQuery, the server released, and the messages put back before
 * the client's input (netbuf_unread) for the primary; db->balance_retries
 * counts them (balance_retried). The same for a standby server lost first
 * (a FATAL, the connection closed): server.c unlinks the client instead
 * of closing it (balance_server_lost), and it runs on the primary (not
 * counted as a 25006).
 *
 * Named statements and portals, with max_prepared_statements on or 0: a
 * batch may bind statements prepared before, parse new names with their
 * Bind and Execute, and bind and execute its own named portals. The
 * messages prepared statements swallow (prepare.c's own ParseComplete,
 * Describe answers, CloseComplete: the core says so) are neither held nor
 * taken for the client's answer. Before the batch runs again, the names
 * its Parses made for the client on the first pass are forgotten
 * (prepare_client_forget_statement), so that they are made anew on the
 * primary; the standby keeps what it parsed (PostgreSQL does, though the
 * batch failed after it), and prepare.c's record of it stays as it is.
 * Not kept (the client gets PostgreSQL's error): a batch that parses a
 * name the client has (42P05 there anyway), closes a named statement
 * (prepare.c answers that itself at once), or executes, describes or
 * closes a named portal it did not bind (one bound in an earlier batch
 * lives only in that transaction, on its server).
 *
 * Functions (auto): the names the database's primary says are not
 * VOLATILE (volatility.h, pg_proc), and a short static list of
 * PostgreSQL's own that never write (while no user's VOLATILE function
 * has the name; alone until the primary has answered).
 *
 * An empty transaction (BEGIN then COMMIT or ROLLBACK, in one Query or
 * several, or through the extended protocol: what a driver sends for a
 * transaction block with nothing in it) runs on the primary, as its BEGIN
 * cannot tell, and counts as a read there: it wrote nothing, so the
 * client's next reads need no newer standby (client->balance_control_only,
 * watched through relay_hooks.balance_statement until anything else runs;
 * sql_classify_control_only).
 *
 * A read goes to the companion only as far as the client's freshness
 * allows (balance_fresh.h: read your writes, monotonic reads,
 * pgvalve.min_lsn; the counters SHOW HOSTS and /metrics show).
 *
 * Owns the retry copies (client->balance_retry) only: the companion pools
 * are the core's; reached only through relay_hooks (balance_register).
 */
#ifndef PGVALVE_BALANCE_H
#define PGVALVE_BALANCE_H

#include "common.h"

struct db;

/* Fills relay_hooks' balance slots (main.c, at start-up). */
void balance_register(void);
/* Frees what the balancer keeps for reuse (main.c, at exit). */
void balance_cleanup(void);

/* Statements of db a standby refused as writes (25006) and that ran again on the primary (SHOW HOSTS, metrics). */
uint64_t balance_retried(const struct db *db);

#endif
