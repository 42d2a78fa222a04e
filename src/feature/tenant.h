/*
 * tenant.h - tenants looked up in a database (issue 58): a login names
 * its tenant, pgvalve reads the tenant's row with tenant_query from
 * tenant_source, and the login goes to a database made from that row.
 *
 * Contract:
 *  - On only while tenant_source and tenant_from are both set. A pooled
 *    login's tenant id comes from the sources tenant_from lists: "user"
 *    (the user name's part after its last dot: alice.t42 logs in as alice
 *    to tenant t42), "options" (-c pgvalve.tenant=t42, or Supavisor's bare
 *    reference=t42; the words are taken out of options) and "sni" (the
 *    first label of the TLS server name, if it has a dot). Sources that
 *    disagree refuse the login; a login naming no tenant goes by its
 *    database name as without tenants. The admin console and replication
 *    logins are never routed.
 *  - The row: tenant_query with the id as $1, a bound parameter of the
 *    extended protocol (never spliced into SQL), on a server of
 *    tenant_source's pool, on the loop (the loop never waits for it).
 *    Columns by name: host, port, dbname required; pool_size,
 *    max_db_connections, max_client_conn, pool_mode, auth_user,
 *    auth_dbname, target_session_attrs, load_balance_reads optional,
 *    and banned (true: clients closed, logins refused, while the row is
 *    trusted),
 *    each checked as a [databases] key; other columns are ignored; the
 *    first row counts.
 *  - The tenant's database (pool.h's routed database, named "tenant:<id>")
 *    is reached only through its tenant, never by name. Its servers log in
 *    as the client's user; logins authenticate as for a configured
 *    database (auth_file, or auth_query on the tenant's own database with
 *    its auth_user or the global one).
 *  - Cache: a row is trusted for tenant_cache_ttl; after that the next
 *    logins wait for one lookup that reads it again, and a tenant with
 *    clients has it read again by the sweep (a changed row replaces
 *    servers as a reload would; a row gone closes the tenant's clients).
 *    A lookup that fails (or failed within the negative TTL) leaves the
 *    tenant on its last row. An absent or invalid row is remembered for
 *    min(tenant_cache_ttl, 5 s): such logins are refused,
 *    an unknown tenant with SQLSTATE 3D000, an invalid row with the reason
 *    logged. Logins of a tenant not known yet wait for one lookup, not
 *    one each; a lookup not answered within query_wait_timeout (or that
 *    fails) refuses them with the reason, and a known tenant keeps its
 *    last row.
 *  - Forgetting: a tenant whose database had no client and no server for
 *    autodb_idle_timeout is freed with its database (a sweep every
 *    second), and so is an unknown or invalid one once it is no longer
 *    remembered; banned tenants are kept.
 */
#ifndef PGVALVE_TENANT_H
#define PGVALVE_TENANT_H

#include "common.h"

/* Longest tenant id taken (longer ones are refused before any lookup). */
#define TENANT_ID_MAX 255

/* Start-up: the login route (client.h) is registered. */
void tenant_register(void);
/* Shutdown: every tenant, lookup and timer is freed (the databases go with the pool's). */
void tenant_cleanup(void);

/*
 * BAN TENANT id (banned) / UNBAN TENANT id: a banned tenant's clients and
 * logins are closed and new logins refused ("tenant ... is banned"),
 * until UNBAN; this process only, and a tenant not seen yet may be banned.
 */
void tenant_ban(const char *id, bool banned);
/*
 * RECONNECT TENANT id: the tenant's row is read again now and, once it is
 * answered (or the lookup failed), its servers are replaced as they are
 * released. False if no tenant of that id is known.
 */
bool tenant_reconnect(const char *id);

/* One tenant as SHOW TENANTS lists it. */
struct tenant_view {
	const char *id;
	const char *state;		/* "ok", "unknown", "invalid", "looking up", "failed", "banned" */
	const char *database;		/* the row's dbname, NULL before any row */
	const char *host;
	int port;
	int clients;
	int servers;
	int waiting;			/* clients queued for a server, and logins waiting for the lookup */
	long long age;			/* seconds since the last answer, -1 if none yet */
};

/* Calls fn for every tenant known, in the byte order of their ids. */
void tenant_foreach(void (*fn)(void *arg, const struct tenant_view *view), void *arg);

#endif
