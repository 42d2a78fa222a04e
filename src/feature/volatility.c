/*
 * volatility.c - the per-database table of functions that are not
 * VOLATILE, read from the primary (see volatility.h for the contract).
 */
#include "common.h"
#include "volatility.h"
#include "config.h"
#include "instance.h"
#include "log.h"
#include "pool.h"
#include "proto.h"
#include "server.h"

#include <stdlib.h>

/*
 * Each name none of whose functions (any schema, any arguments) is
 * VOLATILE ('s'), or whose VOLATILE ones are all PostgreSQL's own, in
 * pg_catalog ('c': volatility_catalog_only), or neither ('v'); and whether
 * one of them may change a session setting (t: volatility_setters). A
 * setter is user code (SQL or a procedural language, outside PostgreSQL's
 * schemas) whose body calls set_config() or has a statement, or a dynamic
 * one, starting with SET or RESET, or names another setter; a view that
 * calls one is listed as a setter too ('v', t). Names of these two kinds
 * only are listed with 'v'. Last, a row named "" whose t says whether a
 * trigger or a column default calls a setter: then any write may change
 * a setting (volatility_setters_on_writes).
 */
#define USER_CODE "pronamespace NOT IN ('pg_catalog'::regnamespace, 'information_schema'::regnamespace) " \
	"AND prolang NOT IN (SELECT oid FROM pg_catalog.pg_language WHERE lanname IN ('internal', 'c'))"
#define SETTER_TEST USER_CODE \
	" AND prosrc ~* '(set_config|(^|[;''(]|\\m(begin|then|else|loop|execute))\\s*(set|reset)\\M)'"
#define SETTERS_CTE "WITH RECURSIVE setters(oid, name) AS (" \
	"SELECT oid, lower(proname) FROM pg_catalog.pg_proc WHERE " SETTER_TEST " UNION " \
	"SELECT p.oid, lower(p.proname) FROM (SELECT oid, proname, lower(prosrc) AS src FROM pg_catalog.pg_proc " \
	"WHERE " USER_CODE ") p JOIN setters s ON position(s.name IN p.src) > 0) "
#define IS_SETTER "oid IN (SELECT oid FROM setters)"
#define VOLATILITY_SELECT SETTERS_CTE "SELECT proname, CASE WHEN bool_and(provolatile <> 'v') THEN 's' " \
	"WHEN bool_and(provolatile <> 'v' OR pronamespace = 'pg_catalog'::regnamespace) THEN 'c' ELSE 'v' END, " \
	"bool_or(" IS_SETTER ") FROM pg_catalog.pg_proc GROUP BY proname HAVING "
#define SETTER_ROWS " UNION ALL SELECT c.relname, 'v', true FROM pg_catalog.pg_rewrite r " \
	"JOIN pg_catalog.pg_depend d ON d.classid = 'pg_catalog.pg_rewrite'::regclass AND d.objid = r.oid " \
	"AND d.refclassid = 'pg_catalog.pg_proc'::regclass AND d.refobjid IN (SELECT oid FROM setters) " \
	"JOIN pg_catalog.pg_class c ON c.oid = r.ev_class " \
	"WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_proc f WHERE f.proname = c.relname) GROUP BY c.relname " \
	"UNION ALL SELECT '', 'v', EXISTS (SELECT 1 FROM pg_catalog.pg_proc WHERE " IS_SETTER \
	" AND prorettype = 'pg_catalog.trigger'::regtype) OR EXISTS (SELECT 1 FROM pg_catalog.pg_depend " \
	"WHERE classid = 'pg_catalog.pg_attrdef'::regclass AND refclassid = 'pg_catalog.pg_proc'::regclass " \
	"AND refobjid IN (SELECT oid FROM setters))"
#define VOLATILITY_QUERY VOLATILITY_SELECT \
	"bool_and(provolatile <> 'v' OR pronamespace = 'pg_catalog'::regnamespace) OR bool_or(" IS_SETTER ")" SETTER_ROWS
/* Where only session SETs ask (no read balancing): the few names that may change settings. */
#define SETTERS_QUERY VOLATILITY_SELECT "bool_or(" IS_SETTER ")" SETTER_ROWS
/* An ask whose server vanished is given up after this long. */
#define VOLATILITY_ASK_TIMEOUT (60 * USEC_PER_SEC)
/* Longest function name kept (PostgreSQL's NAMEDATALEN - 1 is 63). */
#define VOLATILITY_NAME_MAX 256

struct vol_table {
	struct vol_table *next;
	char *dbname;
	char **names;		/* sorted, for bsearch; each "name\0ks", k 's', 'c' or 'v', s 't' or 'f' (VOLATILITY_QUERY) */
	size_t count;
	const char **setters;	/* the names whose s is 't', into names */
	size_t setter_count;
	bool setters_on_writes;	/* the "" row's t: a trigger or default calls a setter */
	bool stale;		/* a client created or changed a function, view or trigger: read again */
	bool known;
	usec_t fetched;		/* last answer (or failure) */
	uint64_t generation;	/* the config generation it was read under */
	const struct server *asking;	/* compared only, never followed: the server running the query */
	usec_t asked;
	char **loading;		/* the rows of the answer under way */
	size_t loading_count, loading_cap;
};

static struct vol_table *tables;
/* Setters in all tables: a Query is looked at for their names only where there are some. */
static size_t setters_known;
/* Tables whose setters_on_writes is set: a write is looked at only where there are some. */
static size_t on_writes_known;

static struct vol_table *table_find(const char *dbname)
{
	for (struct vol_table *t = tables; t; t = t->next)
		if (strcmp(t->dbname, dbname) == 0)
			return t;
	return NULL;
}

static struct vol_table *table_get(const char *dbname)
{
	struct vol_table *t = table_find(dbname);
	if (t)
		return t;
	t = xcalloc(1, sizeof(*t));
	t->dbname = xstrdup(dbname);
	t->next = tables;
	tables = t;
	return t;
}

static void names_free(char **names, size_t count)
{
	for (size_t i = 0; i < count; i++)
		free(names[i]);
	free(names);
}

static int compare_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

bool volatility_known(const struct db *db)
{
	const struct vol_table *t = table_find(db->name);
	return t && t->known;
}

/* The kind of name in db's table: 's', 'c', or 0 if it is not there. */
static char name_kind(const struct db *db, const char *name)
{
	const struct vol_table *t = table_find(db->name);
	if (!t || !t->known || !t->count)
		return 0;
	char **found = bsearch(&name, t->names, t->count, sizeof(*t->names), compare_names);
	return found ? (*found)[strlen(*found) + 1] : 0;
}

bool volatility_safe(const struct db *db, const char *name)
{
	return name_kind(db, name) == 's';
}

bool volatility_catalog_only(const struct db *db, const char *name)
{
	char kind = name_kind(db, name);
	return kind == 's' || kind == 'c';
}

size_t volatility_count(const struct db *db)
{
	const struct vol_table *t = table_find(db->name);
	return t && t->known ? t->count : 0;
}

static struct vol_table *table_of_server(const struct server *server)
{
	for (struct vol_table *t = tables; t; t = t->next)
		if (t->asking == server)
			return t;
	return NULL;
}

static void query_row(struct server *server, const struct pkt *pkt)
{
	struct vol_table *t = table_of_server(server);
	struct pkt_reader r;
	pkt_reader_init(&r, pkt_body(pkt), pkt_body_len(pkt));
	uint16_t ncols = pkt_get_uint16(&r);
	uint32_t len = pkt_get_uint32(&r);
	if (!t || r.failed || ncols != 3 || len >= VOLATILITY_NAME_MAX || len + 10 > pkt_body_len(pkt) - r.pos)
		return;
	const uint8_t *at = pkt_body(pkt) + r.pos;
	char kind = proto_read_be32(at + len) == 1 ? (char)at[len + 4] : 0;
	char setter = proto_read_be32(at + len + 5) == 1 ? (char)at[len + 9] : 0;
	if ((kind != 's' && kind != 'c' && kind != 'v') || (setter != 't' && setter != 'f'))
		return;
	if (t->loading_count == t->loading_cap) {
		t->loading_cap = t->loading_cap ? t->loading_cap * 2 : 1024;
		t->loading = xrealloc(t->loading, t->loading_cap * sizeof(*t->loading));
	}
	char *name = xmalloc(len + 3);
	memcpy(name, at, len);
	name[len] = '\0';
	name[len + 1] = kind;
	name[len + 2] = setter;
	t->loading[t->loading_count++] = name;
}

/* The names that may change a session setting, from a table just loaded. */
static void list_setters(struct vol_table *t)
{
	setters_known -= t->setter_count;
	on_writes_known -= t->setters_on_writes;
	free(t->setters);
	t->setters = NULL;
	t->setter_count = 0;
	t->setters_on_writes = false;
	for (size_t i = 0; i < t->count; i++) {
		const char *name = t->names[i];
		if (name[strlen(name) + 2] != 't')
			continue;
		if (!name[0]) {	/* the "" row: triggers or defaults */
			t->setters_on_writes = true;
			continue;
		}
		t->setters = xrealloc(t->setters, (t->setter_count + 1) * sizeof(*t->setters));
		t->setters[t->setter_count++] = name;
	}
	setters_known += t->setter_count;
	on_writes_known += t->setters_on_writes;
}

bool volatility_setters_on_writes(const struct db *db)
{
	if (!on_writes_known)
		return false;
	const struct vol_table *t = table_find(db->name);
	return t && t->known && t->setters_on_writes;
}

void volatility_stale(const struct db *db)
{
	struct vol_table *t = table_find(db->name);
	if (t)
		t->stale = true;
}

bool volatility_any_setters(void)
{
	return setters_known > 0;
}

const char *const *volatility_setters(const struct db *db, size_t *count)
{
	const struct vol_table *t = table_find(db->name);
	*count = t && t->known ? t->setter_count : 0;
	return *count ? t->setters : NULL;
}

static void query_done(struct server *server, bool failed)
{
	struct vol_table *t = table_of_server(server);
	if (!t)
		return;
	t->asking = NULL;
	t->fetched = now_usec();
	if (failed) {
		log_warning("database \"%s\": could not read pg_proc (%s); kept %s", t->dbname,
			    server->internal_error, t->known ? "the last table" : "the built-in list");
		names_free(t->loading, t->loading_count);
	} else {
		names_free(t->names, t->count);
		t->names = t->loading;
		t->count = t->loading_count;
		if (t->count)	/* none: loading is NULL, which qsort may not be given */
			qsort(t->names, t->count, sizeof(*t->names), compare_names);
		list_setters(t);
		t->known = true;
		log_debug("database \"%s\": %zu function names from pg_proc, %zu that may change settings", t->dbname,
			  t->count, t->setter_count);
	}
	t->loading = NULL;
	t->loading_count = t->loading_cap = 0;
}

static const struct server_query_ops volatility_ops = {
	.row = query_row,
	.done = query_done,
};

/* A database whose reads auto balances (balance.c's rule for its mode). */
static bool db_auto(const struct db *db)
{
	int tsa = db->cfg->target_session_attrs;
	return db->cfg->load_balance_reads == LOAD_BALANCE_READS_AUTO && db->host_count >= 2 && !db->is_admin &&
	       (tsa == TSA_READ_WRITE || tsa == TSA_PRIMARY);
}

/* A database whose clients' session SETs are followed (session_set.h): it asks for the functions that change them. */
static bool db_tracks_sets(const struct db *db)
{
	if (!pgv.cfg->track_client_set || db->is_admin)
		return false;
	list_for_each(ppos, &db->pools) {
		struct pool *pool = container_of(ppos, struct pool, node);
		if (pool_effective_mode(pool) != POOL_MODE_SESSION)
			return true;
	}
	return false;
}

/* An idle server of db's own pools (on its primary), or NULL. */
static struct server *primary_idle_server(const struct db *db)
{
	list_for_each(ppos, &db->pools) {
		struct pool *pool = container_of(ppos, struct pool, node);
		if (pool->standby_reads)
			continue;
		struct list_node *n = list_first(&pool->idle_servers);
		if (n)
			return container_of(n, struct server, node);
	}
	return NULL;
}

static bool table_due(const struct vol_table *t, usec_t now)
{
	if (t->asking)
		return now - t->asked >= VOLATILITY_ASK_TIMEOUT;
	usec_t period = pgv.cfg->load_balance_functions_refresh;
	return !t->fetched || t->stale || t->generation != pgv.config_generation ||
	       (period > 0 && now - t->fetched >= period);
}

void volatility_tick(usec_t now)
{
	list_for_each(dpos, &pgv.databases) {
		struct db *db = container_of(dpos, struct db, node);
		if (!(db_auto(db) || db_tracks_sets(db)) || db_paused(db))
			continue;
		struct vol_table *t = table_get(db->name);
		if (!table_due(t, now))
			continue;
		struct server *server = primary_idle_server(db);
		if (!server)
			continue;	/* the database is not used yet: asked once it has a server */
		names_free(t->loading, t->loading_count);
		t->loading = NULL;
		t->loading_count = t->loading_cap = 0;
		t->asking = server;
		t->asked = now;
		t->stale = false;
		t->generation = pgv.config_generation;
		server_run_feature_query(server, &volatility_ops, db_auto(db) ? VOLATILITY_QUERY : SETTERS_QUERY);
	}
}

void volatility_cleanup(void)
{
	while (tables) {
		struct vol_table *t = tables;
		tables = t->next;
		names_free(t->names, t->count);
		names_free(t->loading, t->loading_count);
		free(t->setters);
		setters_known -= t->setter_count;
		on_writes_known -= t->setters_on_writes;
		free(t->dbname);
		free(t);
	}
}
