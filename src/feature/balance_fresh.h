/*
 * balance_fresh.h - the read balancer's freshness (issue 49): a client
 * reads its own writes, its reads never go back in time from one standby
 * to another, and what the balancer did is counted per host.
 *
 * Read your writes. When a transaction of a client of a balancing pool
 * ends on the primary (anything not started as a read, explicit or
 * auto, unless it ran only BEGIN and COMMIT: balance.h), its server, released clean, is asked the primary's WAL insert
 * position (POSITION_SQL, SV_INTERNAL_POSITION) before it goes back to the
 * pool: the client has its ReadyForQuery already and goes on. Until the
 * answer is in, and after a question that failed (its server closed)
 * until a later one is answered, the client's reads run on the primary.
 * Then its reads go to a standby only if that standby has replayed the
 * position (roles.h: as last measured, at its servers' login and by polls
 * asked for here), else to the primary ("kept for freshness").
 *
 * Monotonic reads: after a read on a standby, the client keeps to that
 * standby until it is measured by a question sent after the read ended
 * (roles_host_replayed_since: a poll at the end of a read on another idle
 * server there, roles_poll_spare, or a login); another standby may then
 * serve it if known at that position. A standby's replay only goes
 * forward. If that standby can serve no more (stopped, promoted), its
 * position as measured last stands in.
 *
 * pgvalve.min_lsn: `SET pgvalve.min_lsn = 'X/Y'` as a Query of its own,
 * outside a transaction block, raises the client's floor to X/Y (it still
 * runs on the server, as a placeholder setting PostgreSQL accepts).
 *
 * Which standby: an idle server of the standby companion that fits the
 * client (its writes replayed there, and no going back) goes first
 * (pool_offer_idle_server); without one, a read goes to the companion if
 * every standby it may land on fits (roles_standby_floor), or if a server
 * there that fits is busy and about to be free (being measured or reset;
 * or a client's, when every server there is busy): it waits for one, and
 * is handed no server that does not fit (relay_hooks.balance_takes: one
 * ready for it sends it home unless another that fits is about to be
 * free); else to the primary, and the standbys known below the floor are
 * measured again (at most every POLL_PERIOD, on an idle server of
 * theirs).
 *
 * Guarantee: per client connection; not across connections unless the
 * application passes a position (pgvalve.min_lsn). A read on the primary
 * sets no floor.
 *
 * Owns: the per-client positions (a table keyed by the client, the
 * client marked balance_state) and each database's counters
 * (db->balance_counts, freed with the database). Touches a server only
 * through position_for, set while its client releases it.
 */
#ifndef PGVALVE_BALANCE_FRESH_H
#define PGVALVE_BALANCE_FRESH_H

#include "common.h"

struct client;
struct pool;
struct db;

/* What the read balancer did on one entry of a database's host list (SHOW HOSTS, /metrics). */
struct balance_counts {
	uint64_t xacts;			/* transactions of balancing pools that ran there */
	uint64_t reads_balanced;	/* of them, reads sent there, a standby, by the balancer */
	uint64_t reads_fresh;		/* of them, reads kept there, the primary, for a client's freshness */
	uint64_t reads_retried;		/* reads the host, a standby, refused as writes (25006), run again on the primary */
};

/* Fills relay_hooks' freshness slots (balance_register). */
void balance_fresh_register(void);
/* A client with balance_state set is freed (balance.c's relay_hooks.balance_client_free). */
void balance_fresh_client_free(struct client *client);
/* A read that entry idx of db's list, a standby, refused as a write (25006): counted there. */
void balance_count_retry(struct db *db, int idx);
/*
 * A client of a balancing pool starts a transaction with the Query or
 * Parse text (len bytes), a read (read) or not: noted for its end; a
 * SET pgvalve.min_lsn raises its floor.
 */
void balance_fresh_start(struct client *client, const char *text, size_t len, bool type_query, bool read);
/* A read: companion if this client's floor allows a standby now, else NULL (the primary). */
struct pool *balance_fresh_route(struct client *client, struct pool *companion);
/*
 * Pure (test_balance_fresh): the position, in WAL bytes, a Query
 * `SET [SESSION] pgvalve.min_lsn {=|TO} 'X/Y' [;]` gives, -1 if text is not
 * that alone; and the first position a standby reports once it replayed
 * everything before a primary's insert position pos (its page's start when
 * pos is within the page's header; page: wal_block_size), else pos.
 */
long long balance_fresh_min_lsn_set(const char *text, size_t len);
long long balance_fresh_position_floor(long long pos, long long page);
/* db's counters for entry idx of its host list (zeros if none yet). */
void balance_host_counts(const struct db *db, int idx, struct balance_counts *out);

#endif
