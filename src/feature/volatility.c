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
 * pg_catalog ('c': volatility_catalog_only).
 */
#define VOLATILITY_QUERY "SELECT proname, CASE WHEN bool_and(provolatile <> 'v') THEN 's' ELSE 'c' END " \
	"FROM pg_catalog.pg_proc GROUP BY proname " \
	"HAVING bool_and(provolatile <> 'v' OR pronamespace = 'pg_catalog'::regnamespace)"
/* An ask whose server vanished is given up after this long. */
#define VOLATILITY_ASK_TIMEOUT (60 * USEC_PER_SEC)
/* Longest function name kept (PostgreSQL's NAMEDATALEN - 1 is 63). */
#define VOLATILITY_NAME_MAX 256

struct vol_table {
	struct vol_table *next;
	char *dbname;
	char **names;		/* sorted, for bsearch; each "name\0k", k 's' or 'c' (VOLATILITY_QUERY) */
	size_t count;
	bool known;
	usec_t fetched;		/* last answer (or failure) */
	uint64_t generation;	/* the config generation it was read under */
	const struct server *asking;	/* compared only, never followed: the server running the query */
	usec_t asked;
	char **loading;		/* the rows of the answer under way */
	size_t loading_count, loading_cap;
};

static struct vol_table *tables;

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
	if (!t || !t->known)
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
	if (!t || r.failed || ncols != 2 || len >= VOLATILITY_NAME_MAX || len + 5 > pkt_body_len(pkt) - r.pos)
		return;
	const uint8_t *at = pkt_body(pkt) + r.pos;
	char kind = proto_read_be32(at + len) == 1 ? (char)at[len + 4] : 0;
	if (kind != 's' && kind != 'c')
		return;
	if (t->loading_count == t->loading_cap) {
		t->loading_cap = t->loading_cap ? t->loading_cap * 2 : 1024;
		t->loading = xrealloc(t->loading, t->loading_cap * sizeof(*t->loading));
	}
	char *name = xmalloc(len + 2);
	memcpy(name, at, len);
	name[len] = '\0';
	name[len + 1] = kind;
	t->loading[t->loading_count++] = name;
}

static void query_done(struct server *server, bool failed)
{
	struct vol_table *t = table_of_server(server);
	if (!t)
		return;
	t->asking = NULL;
	t->fetched = now_usec();
	if (failed) {
		log_warning("database \"%s\": could not read pg_proc for load_balance_reads (%s); kept %s", t->dbname,
			    server->internal_error, t->known ? "the last table" : "the built-in list");
		names_free(t->loading, t->loading_count);
	} else {
		names_free(t->names, t->count);
		t->names = t->loading;
		t->count = t->loading_count;
		qsort(t->names, t->count, sizeof(*t->names), compare_names);
		t->known = true;
		log_debug("database \"%s\": %zu function names not VOLATILE (pg_proc)", t->dbname, t->count);
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
	return !t->fetched || t->generation != pgv.config_generation || (period > 0 && now - t->fetched >= period);
}

void volatility_tick(usec_t now)
{
	list_for_each(dpos, &pgv.databases) {
		struct db *db = container_of(dpos, struct db, node);
		if (!db_auto(db) || db_paused(db))
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
		t->generation = pgv.config_generation;
		server_run_feature_query(server, &volatility_ops, VOLATILITY_QUERY);
	}
}

void volatility_cleanup(void)
{
	while (tables) {
		struct vol_table *t = tables;
		tables = t->next;
		names_free(t->names, t->count);
		names_free(t->loading, t->loading_count);
		free(t->dbname);
		free(t);
	}
}
