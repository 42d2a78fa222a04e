/*
 * roles.c - role routing (target_session_attrs): what each host of a
 * database's list is, where a pool's new servers may go, and which
 * servers go when a host changes role. See roles.h for the contract.
 *
 * When what is checked:
 *   - choosing a host for a new server: hosts that failed or whose role
 *     did not match within server_login_retry are skipped;
 *   - at login, before the server serves anyone: in_hot_standby and
 *     default_transaction_read_only as reported (PostgreSQL 14+), else
 *     ROLE_QUERY; a server that does not match is closed;
 *   - whenever a server reports in_hot_standby changed (a promotion):
 *     every server on that host whose pool it no longer matches is closed
 *     when idle (close_needed), never in the middle of a transaction;
 *   - with server_role_check_period, idle servers run ROLE_QUERY again;
 *   - with a replica lag limit, idle servers of that database run it every
 *     LAG_CHECK_PERIOD (or server_role_check_period), and so does one idle
 *     server on each primary of its list, whatever its database: the
 *     primary's position the standbys' lag is measured against;
 *   - for the read balancer (balance_fresh.h): at the login of each server
 *     of its standby pool, and on demand on an idle standby server
 *     (roles_poll_standbys), what the standby has replayed.
 *
 * Owns: the host table. Touches servers only through close_needed, the
 * core's internal query and server_close() of idle ones.
 */
#include "common.h"
#include "roles.h"
#include "server.h"
#include "pool.h"
#include "config.h"
#include "log.h"
#include "proto.h"
#include "varcache.h"

#include <limits.h>

/*
 * For servers that do not report their role, standbys of databases with
 * a replica lag limit, and (while idle) primaries of their host lists:
 * one round trip, at login or while idle, never on a client's behalf.
 * Columns: in recovery; transaction_read_only; the WAL position, in bytes
 * (a standby's replayed, a primary's current); a standby's WAL received
 * but not replayed, in bytes; while a standby has not replayed all it
 * received, the seconds since the last transaction it replayed committed,
 * else 0 (an idle primary does not make its standbys look behind).
 */
#define ROLE_QUERY "SELECT pg_catalog.pg_is_in_recovery(), pg_catalog.current_setting('transaction_read_only'), " \
	"pg_catalog.pg_wal_lsn_diff(CASE WHEN pg_catalog.pg_is_in_recovery() THEN pg_catalog.pg_last_wal_replay_lsn() " \
	"ELSE pg_catalog.pg_current_wal_lsn() END, '0/0'), " \
	"pg_catalog.pg_wal_lsn_diff(pg_catalog.pg_last_wal_receive_lsn(), pg_catalog.pg_last_wal_replay_lsn()), " \
	"CASE WHEN pg_catalog.pg_last_wal_receive_lsn() > pg_catalog.pg_last_wal_replay_lsn() " \
	"THEN pg_catalog.date_part('epoch', pg_catalog.now() - pg_catalog.pg_last_xact_replay_timestamp()) ELSE 0 END"
#define ROLE_QUERY_COLUMNS 5

/* A replica lag limit without server_role_check_period: how often idle servers measure the lag. */
#define LAG_CHECK_PERIOD (5 * USEC_PER_SEC)

/*
 * Test only (test_roles): set in the environment, servers' in_hot_standby
 * and default_transaction_read_only reports are ignored, as if they were
 * PostgreSQL 13 or older, so that the role query at login is exercised
 * against PostgreSQL 15. Not documented for operators; read once at start.
 */
#define TEST_IGNORE_REPORTS_ENV "PGVALVE_TEST_IGNORE_ROLE_REPORTS"
static bool ignore_role_reports;

/* What is known of one host (a host list entry and the database's port), for every database. */
struct host_role {
	struct host_role *next;
	char *name;
	int port;
	enum server_role role;
	bool read_only;		/* default_transaction_read_only */
	usec_t role_seen;	/* role last learned; 0 never */
	usec_t failed_at;	/* last connect or login failure; 0 since a good login */
	long long lsn;		/* WAL position in bytes: a primary's current one (lsn_seen), a standby's replayed */
	usec_t lsn_seen;
	usec_t lsn_asked;	/* a primary's position last asked of an idle server (roles_check_idle_servers) */
	bool lag_wanted;	/* listed by a database with a replica lag limit: its position is needed */
	long long lag;		/* a standby's WAL behind the primary (or received, not replayed), bytes; -1 unknown */
	usec_t lag_time;	/* ... and time since its last replayed transaction while behind; -1 unknown */
	usec_t lag_seen;
	usec_t replay_seen;	/* a standby's replayed position (lsn) last measured; 0 never */
	usec_t replay_asked;	/* ... by a question sent at or after this */
};

static struct host_role *host_table;

const char *roles_role_name(enum server_role role)
{
	switch (role) {
	case SERVER_ROLE_PRIMARY:
		return "primary";
	case SERVER_ROLE_STANDBY:
		return "standby";
	case SERVER_ROLE_UNKNOWN:
		break;
	}
	return "unknown";
}

static int db_port(const struct db *db)
{
	return db->cfg->port > 0 ? db->cfg->port : 5432;
}

static struct host_role *host_find(const char *name, int port)
{
	for (struct host_role *h = host_table; h; h = h->next)
		if (h->port == port && strcmp(h->name, name) == 0)
			return h;
	struct host_role *h = xcalloc(1, sizeof(*h));
	h->name = xstrdup(name);
	h->port = port;
	h->lag = -1;
	h->lag_time = -1;
	h->next = host_table;
	host_table = h;
	return h;
}

/*
 * Which host_role entry idx of db's list is, remembered in the database
 * (db->host_roles, dropped when its config is set again): the read
 * balancer asks it several times per transaction, and finding it means
 * cutting the entry out of the list and comparing names. host_role
 * entries live until roles_free_all.
 */
static struct host_role *db_host(const struct db *db, int idx)
{
	struct db *d = (struct db *)db;	/* the cache only */
	if (!d->host_roles)
		d->host_roles = xcalloc((size_t)MAX(db->host_count, 1), sizeof(*d->host_roles));
	if (idx >= 0 && idx < db->host_count && d->host_roles[idx])
		return d->host_roles[idx];
	char *name = host_list_entry(db->cfg->host, idx);
	struct host_role *h = host_find(name, db_port(db));
	free(name);
	if (idx >= 0 && idx < db->host_count)
		d->host_roles[idx] = h;
	return h;
}

static struct host_role *server_host(const struct server *server)
{
	return host_find(server->host ? server->host : "", db_port(server->pool->db));
}

/* How long a role that did not match rules a host out: server_login_retry (1 s at least). */
static usec_t hold_time(void)
{
	return MAX(pgv.cfg->server_login_retry, USEC_PER_SEC);
}

/*
 * How long a host that failed (connect, timeout, refused login) is passed
 * over while another entry may serve: 30 s, or server_login_retry if
 * longer. When no other entry may, it is tried again at once (paced by
 * server_login_retry), so a list whose hosts all failed recovers as soon
 * as one is back.
 */
#define DOWN_HOLD_MIN (30 * USEC_PER_SEC)

static usec_t down_hold_time(void)
{
	return MAX(pgv.cfg->server_login_retry, DOWN_HOLD_MIN);
}

static bool host_down(const struct host_role *h, usec_t now)
{
	return h->failed_at && now - h->failed_at < down_hold_time();
}

static bool role_matches(int tsa, enum server_role role, bool read_only)
{
	switch (tsa) {
	case TSA_READ_WRITE:
		return role != SERVER_ROLE_STANDBY && !read_only;
	case TSA_READ_ONLY:
		return role == SERVER_ROLE_STANDBY || read_only;
	case TSA_PRIMARY:
		return role == SERVER_ROLE_PRIMARY;
	case TSA_STANDBY:
	case TSA_PREFER_STANDBY:
		return role == SERVER_ROLE_STANDBY;
	default:
		return true;
	}
}

/*
 * While no entry of a list fits (a failover under way: the primary gone,
 * its successor not seen as one yet), a role that did not match rules its
 * host out for this long only, so that the promoted host is found about a
 * second after its promotion rather than server_login_retry later.
 */
#define FAILOVER_HOLD USEC_PER_SEC

/*
 * Whether h may be tried for tsa now: its role matching, unknown or older
 * than hold, and (if !down_ok) not down.
 */
static bool host_may_match(const struct host_role *h, int tsa, usec_t now, bool down_ok, usec_t hold)
{
	if (!down_ok && host_down(h, now))
		return false;
	if (!h->role_seen || now - h->role_seen >= hold)
		return true;
	return role_matches(tsa, h->role, h->read_only);
}

/* Whether db has a replica lag limit (max_replica_lag, max_replica_lag_seconds). */
static bool db_lag_limited(const struct db *db)
{
	return db->cfg->max_replica_lag > 0 || db->cfg->max_replica_lag_seconds > 0;
}

/* How often idle servers measure the lag (and primaries their position). */
static usec_t lag_period(void)
{
	return pgv.cfg->server_role_check_period > 0 ? pgv.cfg->server_role_check_period : LAG_CHECK_PERIOD;
}

/* A standby of db's list that lagged more than its limits when last measured. */
static bool host_lagged(const struct db *db, const struct host_role *h)
{
	const struct db_config *dc = db->cfg;
	if (h->role != SERVER_ROLE_STANDBY)
		return false;
	return (dc->max_replica_lag > 0 && h->lag > dc->max_replica_lag) ||
	       (dc->max_replica_lag_seconds > 0 && h->lag_time > dc->max_replica_lag_seconds);
}

/* The same, measured within server_login_retry: after that one new server may measure again. */
static bool host_lags(const struct db *db, const struct host_role *h, usec_t now)
{
	return host_lagged(db, h) && now - h->lag_seen < hold_time();
}

/* prefer-standby: whether an entry of db's list other than skip may be a standby now. */
static bool db_standby_possible(const struct db *db, const struct host_role *skip, usec_t now)
{
	int n = db->host_count;
	for (int i = 0; i < n; i++) {
		const struct host_role *h = db_host(db, i);
		if (h != skip && host_may_match(h, TSA_STANDBY, now, false, hold_time()) && !host_lags(db, h, now))
			return true;
	}
	return false;
}

/* A pool's target_session_attrs: its database's, standby for the read balancer's standby pool. */
static int pool_tsa(const struct pool *pool)
{
	return pool->standby_reads ? TSA_STANDBY : pool->db->cfg->target_session_attrs;
}

/*
 * Entry idx may serve tsa (db's or its standby pool's) now; down_ok: even
 * if it failed lately; hold: how long a role that did not match rules it out.
 */
static bool db_host_fits(const struct db *db, int tsa, int idx, usec_t now, bool down_ok, usec_t hold)
{
	const struct host_role *h = db_host(db, idx);
	if (host_lags(db, h, now))
		return false;
	if (host_may_match(h, tsa, now, down_ok, hold))
		return true;
	/* prefer-standby falls back on any host when no standby may be */
	return tsa == TSA_PREFER_STANDBY && host_may_match(h, TSA_ANY, now, down_ok, hold) &&
	       !db_standby_possible(db, NULL, now);
}

/* Whether some entry of db's list fits tsa now, as db_host_fits judges with the usual holds. */
static bool db_any_fits(const struct db *db, int tsa, usec_t now)
{
	int n = db->host_count;
	for (int i = 0; i < n; i++)
		if (db_host_fits(db, tsa, i, now, false, hold_time()))
			return true;
	return false;
}

/* Whether role routing applies to db: target_session_attrs, or a replica lag limit. */
static bool db_routed(const struct db *db)
{
	return db->cfg->target_session_attrs != TSA_ANY || db_lag_limited(db);
}

static bool db_host_eligible(const struct db *db, int tsa, int idx, usec_t now)
{
	if (!db_routed(db))
		return true;
	if (db_host_fits(db, tsa, idx, now, false, hold_time()))
		return true;
	if (db_any_fits(db, tsa, now))
		return false;
	/* nothing fits: a failover may be under way; roles learned over FAILOVER_HOLD ago are asked again */
	if (db_host_fits(db, tsa, idx, now, false, FAILOVER_HOLD))
		return true;
	/* down, but the only kind of host left: tried again rather than nothing */
	return host_down(db_host(db, idx), now) && db_host_fits(db, tsa, idx, now, true, hold_time());
}

static bool hook_host_eligible(const struct pool *pool, int idx)
{
	return db_host_eligible(pool->db, pool_tsa(pool), idx, now_usec());
}

bool roles_standby_may_serve(const struct db *db)
{
	usec_t now = now_usec();
	for (int i = 0; i < db->host_count; i++) {
		const struct host_role *h = db_host(db, i);
		if (h->role == SERVER_ROLE_STANDBY && db_host_fits(db, TSA_STANDBY, i, now, false, hold_time()))
			return true;
	}
	return false;
}

bool roles_host_unknown(const struct db *db)
{
	for (int i = 0; i < db->host_count; i++)
		if (!db_host(db, i)->role_seen)
			return true;
	return false;
}

static void hook_host_failed(const struct db *db, int idx)
{
	db_host(db, idx)->failed_at = now_usec();
}

/* What a server said of its host: remembered, and a change of role logged. True if it changed. */
static bool host_learn(struct host_role *h, enum server_role role, bool read_only, usec_t now)
{
	bool changed = role != SERVER_ROLE_UNKNOWN && role != h->role;
	if (changed)
		log_info("host %s:%d is now %s", h->name[0] ? h->name : "unix", h->port, roles_role_name(role));
	h->role = role;
	h->read_only = read_only;
	h->role_seen = now;
	h->failed_at = 0;
	return changed;
}

static void host_retire_mismatched(const struct host_role *h, enum server_role role, const struct server *from);

/* Whether a server of pool with this role may serve it (prefer-standby: a primary only when no standby may be). */
static bool server_fits(const struct server *server, const struct host_role *h, usec_t now)
{
	const struct db *db = server->pool->db;
	int tsa = pool_tsa(server->pool);
	if (role_matches(tsa, (enum server_role)server->role, server->read_only))
		return true;
	return tsa == TSA_PREFER_STANDBY && !db_standby_possible(db, h, now);
}

/* "24 MB" or "24 MB, 3.2 s": how far h was behind when last measured, for the log. */
static const char *lag_text(const struct host_role *h, char *buf, size_t size)
{
	static const char *const units[] = { "bytes", "kB", "MB", "GB", "TB" };
	long long v = h->lag > 0 ? h->lag : 0;
	size_t u = 0;
	while (v >= 10 * 1024 && u + 1 < ARRAY_SIZE(units)) {
		v /= 1024;
		u++;
	}
	if (h->lag_time >= 0)
		snprintf(buf, size, "%lld %s, %.1f s", v, units[u], (double)h->lag_time / USEC_PER_SEC);
	else
		snprintf(buf, size, "%lld %s", v, units[u]);
	return buf;
}

/* The server's role is known (server->role, server->read_only): may it serve its pool? */
static enum server_verdict judge(struct server *server)
{
	usec_t now = now_usec();
	struct host_role *h = server_host(server);
	enum server_role was = h->role;
	if (host_learn(h, (enum server_role)server->role, server->read_only, now) && was != SERVER_ROLE_UNKNOWN)
		host_retire_mismatched(h, (enum server_role)server->role, server);	/* a failover seen at a login */
	server->role_checked = now;
	if (host_lags(server->pool->db, h, now)) {
		char lag[64];
		server_log(LOG_LEVEL_INFO, server, "host %s:%d lags %s, not used (max_replica_lag)", h->name, h->port,
			   lag_text(h, lag, sizeof(lag)));
		return SERVER_REJECT;
	}
	if (server_fits(server, h, now))
		return SERVER_ACCEPT;
	server_log(LOG_LEVEL_INFO, server, "server is %s%s, database wants target_session_attrs=%s",
		   roles_role_name((enum server_role)server->role), server->read_only ? " (read-only)" : "",
		   config_target_session_attrs_name(pool_tsa(server->pool)));
	return SERVER_REJECT;
}

static bool value_on(const char *v)
{
	return v && (strcmp(v, "on") == 0 || strcmp(v, "t") == 0 || strcmp(v, "true") == 0);
}

static bool reported(const struct server *server, int idx)
{
	return idx >= 0 && idx < 64 && (server->reported_mask & (UINT64_C(1) << idx));
}

static enum server_verdict hook_logged_in(struct server *server, const char **sql)
{
	int hot = varcache_index("in_hot_standby");
	if (reported(server, hot) && !ignore_role_reports) {
		int ro = varcache_index("default_transaction_read_only");
		server->role = value_on(varcache_get(server->vars, hot)) ? SERVER_ROLE_STANDBY : SERVER_ROLE_PRIMARY;
		server->read_only = reported(server, ro) && value_on(varcache_get(server->vars, ro));
		/* a standby's position is measured at login for a lag limit, and for the read balancer's pool */
		if (server->role != SERVER_ROLE_STANDBY || (!db_lag_limited(server->pool->db) && !server->pool->standby_reads))
			return judge(server);
	} else if (!db_routed(server->pool->db)) {
		server_host(server)->failed_at = 0;
		return SERVER_ACCEPT;	/* nothing to check: no round trip */
	}
	*sql = ROLE_QUERY;
	return SERVER_ASK;
}

/*
 * The primary of db's list whose position is known and recent (two lag
 * periods): the one a standby's lag is measured against. NULL if none.
 */
static const struct host_role *db_primary(const struct db *db, usec_t now)
{
	const struct host_role *best = NULL;
	for (int i = 0; i < db->host_count; i++) {
		const struct host_role *h = db_host(db, i);
		if (h->role == SERVER_ROLE_PRIMARY && h->lsn_seen && now - h->lsn_seen <= 2 * lag_period() &&
		    (!best || h->lsn_seen > best->lsn_seen))
			best = h;
	}
	return best;
}

/*
 * What ROLE_QUERY said of h's position and lag (text values, "" for NULL).
 * A standby's lag in bytes is the primary's position minus its replayed
 * one; with no primary position known, what it received but has not
 * replayed (which misses WAL it never received).
 */
static void host_learn_lag(struct host_role *h, const struct db *db, enum server_role role,
			   const char *pos, const char *unreplayed, const char *seconds)
{
	usec_t now = now_usec();
	h->lag_seen = now;
	if (role == SERVER_ROLE_PRIMARY) {
		h->lsn = atoll(pos);
		h->lsn_seen = pos[0] ? now : 0;
		h->lag = 0;
		h->lag_time = 0;
		return;
	}
	const struct host_role *primary = db_primary(db, now);
	h->lsn = atoll(pos);
	h->replay_seen = pos[0] ? now : 0;
	if (primary && pos[0])
		h->lag = MAX(primary->lsn - h->lsn, 0);
	else
		h->lag = unreplayed[0] ? atoll(unreplayed) : -1;
	h->lag_time = seconds[0] ? (usec_t)(atof(seconds) * USEC_PER_SEC) : -1;
}

/* ROLE_QUERY's row: pg_is_in_recovery() ('t'/'f'), transaction_read_only ('on'/'off'), positions and lag. */
static void hook_check_row(struct server *server, const struct pkt *pkt)
{
	struct pkt_reader r;
	char vals[ROLE_QUERY_COLUMNS][32] = { "", "", "", "", "" };
	pkt_reader_init(&r, pkt_body(pkt), pkt_body_len(pkt));
	uint16_t ncols = pkt_get_uint16(&r);
	for (int i = 0; i < ROLE_QUERY_COLUMNS && i < ncols && !r.failed; i++) {
		uint32_t len = pkt_get_uint32(&r);
		if (len == 0xFFFFFFFFu)
			continue;
		const uint8_t *v = pkt_get_bytes(&r, len);
		if (v && len < sizeof(vals[i])) {
			memcpy(vals[i], v, len);
			vals[i][len] = '\0';
		}
	}
	server->role = value_on(vals[0]) ? SERVER_ROLE_STANDBY : vals[0][0] ? SERVER_ROLE_PRIMARY : SERVER_ROLE_UNKNOWN;
	/* in recovery every transaction is read-only: that alone says nothing of default_transaction_read_only */
	server->read_only = server->role == SERVER_ROLE_PRIMARY && value_on(vals[1]);
	if (server->role == SERVER_ROLE_UNKNOWN)
		return;
	struct host_role *h = server_host(server);
	host_learn_lag(h, server->pool->db, (enum server_role)server->role, vals[2], vals[3], vals[4]);
	/* sent no earlier than this: a poll's when role_checked was set, a login's after its connect began */
	h->replay_asked = MAX(server->connect_time, server->role_checked);
}

static enum server_verdict hook_check_done(struct server *server, bool failed)
{
	if (failed || server->role == SERVER_ROLE_UNKNOWN) {
		server_log(LOG_LEVEL_WARNING, server, "could not learn the server's role");
		server_host(server)->failed_at = now_usec();
		return SERVER_REJECT;
	}
	return judge(server);
}

/* Every server on host h learns its new role; those whose pool it no longer fits go (idle ones now). */
static void host_retire_mismatched(const struct host_role *h, enum server_role role, const struct server *from)
{
	usec_t now = now_usec();
	list_for_each(dpos, &pgv.databases) {
		struct db *db = container_of(dpos, struct db, node);
		if (db_port(db) != h->port)
			continue;
		list_for_each(ppos, &db->pools) {
			struct pool *pool = container_of(ppos, struct pool, node);
			struct list *lists[] = { &pool->idle_servers, &pool->active_servers, &pool->used_servers,
						 &pool->tested_servers };
			for (size_t i = 0; i < ARRAY_SIZE(lists); i++) {
				list_for_each_safe(pos, tmp, lists[i]) {
					struct server *s = container_of(pos, struct server, node);
					if (s->replication || !s->host || strcmp(s->host, h->name) != 0)
						continue;
					s->role = (uint8_t)role;
					if (server_fits(s, h, now))
						continue;
					s->close_needed = true;
					if (s->state == SV_IDLE && s != from)
						server_close(s, "its host changed role");
				}
			}
		}
	}
}

/* in_hot_standby changed on a live server: its host was promoted (or demoted). */
static void hook_param_reported(struct server *server, const char *name, const char *value)
{
	if (ignore_role_reports || strcmp(name, "in_hot_standby") != 0)
		return;
	enum server_role role = value_on(value) ? SERVER_ROLE_STANDBY : SERVER_ROLE_PRIMARY;
	if (role == server->role)
		return;
	server_hot_standby_mixed = true;	/* clients of this host hear it from their next server */
	server->role_checked = now_usec();
	struct host_role *h = server_host(server);
	host_learn(h, role, h->read_only, server->role_checked);
	host_retire_mismatched(h, role, server);	/* this one included (closed when idle) */
}

static void server_check_role(struct server *s, usec_t now)
{
	s->role_checked = now;
	server_set_state(s, SV_TESTED);
	server_run_internal(s, SV_INTERNAL_ROLE_CHECK, ROLE_QUERY, (uint32_t)strlen(ROLE_QUERY));
}

/* Marks the hosts whose position a replica lag limit needs: every entry of a limited database's list. */
static bool hosts_mark_lag_wanted(void)
{
	bool any = false;
	for (struct host_role *h = host_table; h; h = h->next)
		h->lag_wanted = false;
	list_for_each(dpos, &pgv.databases) {
		const struct db *db = container_of(dpos, struct db, node);
		if (!db_lag_limited(db))
			continue;
		any = true;
		for (int i = 0; i < db->host_count; i++)
			db_host(db, i)->lag_wanted = true;
	}
	return any;
}

/* A primary whose position a lag limit needs, not learned nor asked for within period. */
static bool primary_position_due(const struct host_role *h, usec_t now, usec_t period)
{
	return h->lag_wanted && h->role == SERVER_ROLE_PRIMARY && now - MAX(h->lsn_seen, h->lsn_asked) >= period;
}

/*
 * The position of each primary a lag limit measures against, once per lag
 * period: asked of one idle server on it, of whichever database (a
 * read-write database's, typically; a standby database has none there).
 */
static void check_primary_positions(usec_t now)
{
	usec_t period = lag_period();
	bool due = false;
	if (!hosts_mark_lag_wanted())
		return;
	for (const struct host_role *h = host_table; h && !due; h = h->next)
		due = primary_position_due(h, now, period);
	if (!due)
		return;		/* most ticks: no walk over the idle servers */
	list_for_each(dpos, &pgv.databases) {
		struct db *db = container_of(dpos, struct db, node);
		if (db_paused(db))
			continue;
		list_for_each(ppos, &db->pools) {
			struct pool *pool = container_of(ppos, struct pool, node);
			list_for_each_safe(pos, tmp, &pool->idle_servers) {
				struct server *s = container_of(pos, struct server, node);
				struct host_role *h = server_host(s);
				if (!primary_position_due(h, now, period))
					continue;
				h->lsn_asked = now;
				server_check_role(s, now);
			}
		}
	}
}

void roles_check_idle_servers(usec_t now)
{
	list_for_each(dpos, &pgv.databases) {
		struct db *db = container_of(dpos, struct db, node);
		usec_t period = pgv.cfg->server_role_check_period;
		if (period <= 0 && db_lag_limited(db))
			period = LAG_CHECK_PERIOD;
		if (period <= 0 || !db_routed(db) || db_paused(db))
			continue;
		list_for_each(ppos, &db->pools) {
			struct pool *pool = container_of(ppos, struct pool, node);
			list_for_each_safe(pos, tmp, &pool->idle_servers) {
				struct server *s = container_of(pos, struct server, node);
				if (now - s->role_checked >= period)
					server_check_role(s, now);
			}
		}
	}
	check_primary_positions(now);
}

/* This database's servers (all pools) on entry idx. */
static int db_host_servers(const struct db *db, int idx)
{
	int count = 0;
	list_for_each(ppos, &db->pools) {
		const struct pool *pool = container_of(ppos, struct pool, node);
		const struct list *lists[] = { &pool->login_servers, &pool->idle_servers, &pool->active_servers,
					       &pool->used_servers, &pool->tested_servers };
		for (size_t i = 0; i < ARRAY_SIZE(lists); i++) {
			list_for_each(pos, lists[i]) {
				const struct server *s = container_of(pos, struct server, node);
				if (s->host_idx == idx && !s->replication)
					count++;
			}
		}
	}
	return count;
}

/* SHOW HOSTS' state: what was last learned, however old (a new server may check it again). */
static const char *host_state(const struct db *db, const struct host_role *h, usec_t now)
{
	if (host_down(h, now))
		return "down";
	if (!h->role_seen)
		return "unknown";
	if (host_lagged(db, h))
		return "ineligible";
	int tsa = db->cfg->target_session_attrs;
	if (role_matches(tsa, h->role, h->read_only))
		return "up";
	return tsa == TSA_PREFER_STANDBY && !db_standby_possible(db, h, now) ? "up" : "ineligible";
}

size_t roles_db_hosts(const struct db *db, struct roles_host_info *out, size_t max)
{
	int n = db->host_count;
	usec_t now = now_usec();
	for (int i = 0; i < n && (size_t)i < max; i++) {
		const struct host_role *h = db_host(db, i);
		struct roles_host_info *o = &out[i];
		strlcpy_s(o->host, h->name[0] ? h->name : "unix", sizeof(o->host));
		o->port = h->port;
		o->role = h->role;
		o->read_only = h->read_only;
		o->last_check = h->role_seen;
		o->lag = h->role == SERVER_ROLE_STANDBY && h->lag_seen ? h->lag : -1;
		o->lag_seconds = o->lag >= 0 && h->lag_time >= 0 ? (double)h->lag_time / USEC_PER_SEC : -1;
		o->servers = db_host_servers(db, i);
		o->state = host_state(db, h, now);
	}
	return (size_t)n;
}

long long roles_server_replayed(const struct server *server)
{
	const struct host_role *h = server_host(server);
	return h->role == SERVER_ROLE_STANDBY && h->replay_seen ? h->lsn : -1;
}

/* Entry idx (h) of db is down, and db has no server left there: no read of the balancer can land there. */
static bool host_left(const struct db *db, int idx, const struct host_role *h, usec_t now)
{
	return host_down(h, now) && db_host_servers(db, idx) == 0;
}

long long roles_standby_floor(const struct db *db)
{
	usec_t now = now_usec();
	long long lowest = LLONG_MAX;
	for (int i = 0; i < db->host_count; i++) {
		const struct host_role *h = db_host(db, i);
		if (h->role == SERVER_ROLE_PRIMARY || host_left(db, i, h, now))
			continue;	/* no read of the balancer can land there */
		if (h->role != SERVER_ROLE_STANDBY || !h->replay_seen)
			return -1;
		lowest = MIN(lowest, h->lsn);
	}
	return lowest == LLONG_MAX ? -1 : lowest;
}

long long roles_host_replayed_since(const struct db *db, int idx, usec_t since)
{
	if (idx < 0 || idx >= db->host_count)
		return -1;
	const struct host_role *h = db_host(db, idx);
	return h->role == SERVER_ROLE_STANDBY && h->replay_seen && h->replay_asked >= since ? h->lsn : -1;
}

bool roles_host_gone(const struct db *db, int idx)
{
	if (idx < 0 || idx >= db->host_count)
		return true;
	const struct host_role *h = db_host(db, idx);
	return h->role != SERVER_ROLE_STANDBY || host_left(db, idx, h, now_usec());
}

/* An idle server of db (any pool) on entry idx, or NULL. */
static struct server *db_idle_server_on(const struct db *db, int idx)
{
	list_for_each(ppos, &db->pools) {
		const struct pool *pool = container_of(ppos, struct pool, node);
		list_for_each(pos, &pool->idle_servers) {
			struct server *s = container_of(pos, struct server, node);
			if (s->host_idx == idx && !s->close_needed)
				return s;
		}
	}
	return NULL;
}

/* Entry idx (h) of db measured again, on an idle server of db there, if it has one. */
static void poll_on_idle(const struct db *db, int idx, struct host_role *h, usec_t now)
{
	struct server *s = db_idle_server_on(db, idx);
	if (!s)
		return;
	h->lsn_asked = now;
	server_check_role(s, now);
}

void roles_poll_standbys(const struct db *db, long long need, usec_t period)
{
	usec_t now = now_usec();
	if (db_paused(db))
		return;
	for (int i = 0; i < db->host_count; i++) {
		struct host_role *h = db_host(db, i);
		if (h->role != SERVER_ROLE_STANDBY || (h->replay_seen && h->lsn >= need) ||
		    now - MAX(h->replay_seen, h->lsn_asked) < period)
			continue;
		poll_on_idle(db, i, h, now);
	}
}

void roles_poll_spare(const struct db *db, int idx, usec_t period)
{
	usec_t now = now_usec();
	if (db_paused(db) || idx < 0 || idx >= db->host_count)
		return;
	struct host_role *h = db_host(db, idx);
	if (h->role == SERVER_ROLE_STANDBY && now - MAX(h->replay_asked, h->lsn_asked) >= period)
		poll_on_idle(db, idx, h, now);
}

void roles_free_all(void)
{
	while (host_table) {
		struct host_role *h = host_table;
		host_table = h->next;
		free(h->name);
		free(h);
	}
}

/*
 * A routed list of several hosts paces each host itself (the holds above),
 * so a failed login on one host must not keep the pool from the others
 * for server_login_retry: during a failover that was the whole outage.
 */
static usec_t hook_login_retry(const struct pool *pool)
{
	const struct db *db = pool->db;
	/* 0: server_login_retry itself, when it is no longer than that (0 included: no wait at all) */
	if (!db_routed(db) || db->host_count < 2 || pgv.cfg->server_login_retry <= FAILOVER_HOLD)
		return 0;
	return FAILOVER_HOLD;
}

void roles_register(void)
{
	ignore_role_reports = getenv(TEST_IGNORE_REPORTS_ENV) != NULL;
	if (ignore_role_reports)
		log_warning("%s is set: servers' in_hot_standby reports are ignored (for tests only)",
			    TEST_IGNORE_REPORTS_ENV);
	server_hooks.login_retry = hook_login_retry;
	server_hooks.host_eligible = hook_host_eligible;
	server_hooks.host_failed = hook_host_failed;
	server_hooks.logged_in = hook_logged_in;
	server_hooks.check_row = hook_check_row;
	server_hooks.check_done = hook_check_done;
	server_hooks.param_reported = hook_param_reported;
}
