/*
 * roles.h - role routing: target_session_attrs.
 *
 * Which entry of a database's host list is a primary or a standby, as its
 * servers report it (in_hot_standby and default_transaction_read_only at
 * login, PostgreSQL 14 and later) or, where they do not, as a query at
 * login says (pg_is_in_recovery(), transaction_read_only). From that:
 * which entries a pool's new servers may go to, whether a server that
 * logged in may serve its pool, and which servers must go when a host
 * changes role (a standby promoted). The core asks through server_hooks
 * (server.h) only; roles_register() fills them.
 *
 * What is known of a host is kept per host and port, shared by every
 * database that lists it. A role that does not match, or a standby
 * lagging more than the database's max_replica_lag (bytes of WAL behind
 * the primary of its list) or max_replica_lag_seconds, rules a host out
 * for server_login_retry; a failed connection for 30 s while another
 * entry may serve; then one new connection may try it again. The lag is
 * measured by pgvalve: a query on the standby (at its servers' login and
 * while they are idle) and, as often, on an idle server of the list's
 * primary (of any database); with no recent primary position, the WAL
 * the standby received but has not replayed stands in for it.
 *
 * Owns: the host table. Must not touch a client, nor a server in use
 * (a server whose role changed is only marked close_needed; the pool
 * closes it once it is idle).
 */
#ifndef PGVALVE_ROLES_H
#define PGVALVE_ROLES_H

#include "common.h"
#include "server.h"

struct db;

/* One entry of a database's host list, as SHOW HOSTS shows it. */
struct roles_host_info {
	char host[256];
	int port;
	enum server_role role;
	bool read_only;
	const char *state;	/* "up", "down", "ineligible" (for this database), "unknown" */
	usec_t last_check;	/* its role last learned, 0 never */
	long long lag;		/* a standby's WAL behind the primary (bytes), -1 unknown */
	double lag_seconds;	/* since its last replayed transaction while behind, -1 unknown */
	int servers;		/* this database's server connections to it */
};

/* Fills server_hooks (main.c, at start-up). */
void roles_register(void);
/* server_role_check_period: idle servers of role-routed pools check their role again (janitor). */
void roles_check_idle_servers(usec_t now);
/* The entries of db's host list, up to max into out; returns how many there are. */
size_t roles_db_hosts(const struct db *db, struct roles_host_info *out, size_t max);
/* The read balancer: whether a standby of db's list, known as one, may serve reads now (up, not lagging). */
bool roles_standby_may_serve(const struct db *db);
/*
 * The read balancer's freshness (balance_fresh.h). Positions are WAL bytes
 * (pg_wal_lsn_diff(lsn, '0/0')): a standby's replayed one as last measured
 * (at its servers' login in the balancer's pool, by a lag limit's checks,
 * or by roles_poll_standbys).
 *   roles_server_replayed: the position of server's host, -1 if not a
 *     standby or never measured;
 *   roles_standby_floor: the lowest of db's standbys a read may land on
 *     (every entry not known as a primary, down ones with no server of db
 *     left out), -1 if one of them is not known;
 *   roles_poll_standbys: measures again, on one idle server of db, each
 *     standby of db's list known below need, at most once per period.
 */
long long roles_server_replayed(const struct server *server);
/*
 * Entry idx of db's list, a standby: its position measured by a question
 * sent at or after `since` (an upper bound of what a read there that ended
 * before `since` saw), -1 if none such. roles_host_gone: no read of the
 * balancer can land there any more (not a standby; down, no server left).
 */
long long roles_host_replayed_since(const struct db *db, int idx, usec_t since);
bool roles_host_gone(const struct db *db, int idx);
long long roles_standby_floor(const struct db *db);
void roles_poll_standbys(const struct db *db, long long need, usec_t period);
/* Entry idx of db's list, a standby, measured again on an idle server of db there, at most once per period. */
void roles_poll_spare(const struct db *db, int idx, usec_t period);
/* Whether an entry of db's list has never been seen (its role unknown). */
bool roles_host_unknown(const struct db *db);
/* "primary", "standby" or "unknown". */
const char *roles_role_name(enum server_role role);
/* Frees the host table (exit). */
void roles_free_all(void);

#endif
