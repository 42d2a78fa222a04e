/*
 * volatility.h - which functions a database's primary says are not
 * VOLATILE (pg_proc.provolatile), for the read balancer's auto mode
 * (balance.h), and which may change a session setting (their body calls
 * set_config(), runs SET or RESET, or calls a function that does; views
 * that call one; whether a trigger or a column default does), for
 * session SETs (session_set.h): a cache of function names per database.
 *
 * Contract:
 *  - A name is safe when no function of that name, in any schema and
 *    with any arguments, is VOLATILE: the classifier sees names without
 *    their schema (or with one it cannot resolve), so a name VOLATILE
 *    anywhere counts as volatile everywhere. A name pg_proc does not know
 *    is not safe. Besides, for the balancer's own list of PostgreSQL's
 *    functions that are VOLATILE but never write, whether a name's
 *    VOLATILE functions are all in pg_catalog.
 *  - Read from the primary of each database with load_balance_reads =
 *    auto or whose session SETs are followed (track_client_set in
 *    transaction or statement pooling), by one pooler-internal query on an idle server of the
 *    database's own pool (its servers are on the primary), from the
 *    janitor's tick: once the database is used, again after each RELOAD,
 *    every load_balance_functions_refresh (0: only then), and at the
 *    next tick after a client's CREATE or ALTER of a function, procedure,
 *    view, trigger or rule (volatility_stale). While none
 *    is known (or a database was never asked) volatility_known() says so
 *    and the balancer keeps its static list.
 *  - Stale between refreshes: a function made VOLATILE since is still
 *    called safe until the next read; a standby refuses what it writes
 *    (25006), and balance.c runs a simple Query again on the primary.
 *
 * Owns the per-database name tables; touches servers only through
 * server_run_feature_query on an idle one.
 */
#ifndef PGVALVE_VOLATILITY_H
#define PGVALVE_VOLATILITY_H

#include "common.h"

struct db;

/* The names of db's functions are known (read at least once from its primary). */
bool volatility_known(const struct db *db);
/* Whether name (lower case, no schema) is a function of db none of whose kind is VOLATILE. */
bool volatility_safe(const struct db *db, const char *name);
/* Asks the primaries whose tables are due (janitor's tick). */
void volatility_tick(usec_t now);
/*
 * Whether every VOLATILE function called name is PostgreSQL's own (in
 * pg_catalog), or none is: for the balancer's list of PostgreSQL's
 * functions that are VOLATILE yet never write (pg_is_in_recovery, ...),
 * which a user's function of the same name elsewhere must not pass for.
 */
bool volatility_catalog_only(const struct db *db, const char *name);
/*
 * The names (lower case, no schema) of db's functions that may change a
 * session setting; *count of them (0, NULL: none, or none known yet).
 * Valid until the next volatility_tick.
 */
const char *const *volatility_setters(const struct db *db, size_t *count);
/* Whether a trigger or a column default of db calls such a function: any write may change a setting. */
bool volatility_setters_on_writes(const struct db *db);
/* A client created or changed a function, view or trigger of db: its table is read again at the next tick. */
void volatility_stale(const struct db *db);
/* Whether any database has such a function (a cheap first test). */
bool volatility_any_setters(void);
/* How many names db's table holds (0: none known). */
size_t volatility_count(const struct db *db);
/* Frees every table (exit). */
void volatility_cleanup(void);

#endif
