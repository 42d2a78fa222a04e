/*
 * tenant.c - tenants looked up in a database (see tenant.h for the
 * contract): the login route that reads a tenant id from a login, the
 * cache of tenant rows, the lookups on tenant_source's pool and the
 * databases made from the rows.
 *
 * Owns the tenant table, the lookups and their timers. Reaches the core
 * only through its interfaces: the login route (client.h), a query
 * waiter on a pool and a feature query on its server (pool.h, server.h),
 * routed databases (pool.h). Must not touch a client's or server's
 * socket itself.
 */
#include "common.h"
#include "tenant.h"
#include "client.h"
#include "config.h"
#include "instance.h"
#include "log.h"
#include "netbuf.h"
#include "pool.h"
#include "proto.h"
#include "server.h"

#include <ctype.h>
#include <strings.h>
#include <event2/event.h>
#include <openssl/ssl.h>

/* An absent or invalid row (and a failed lookup) is remembered at most this long. */
#define TENANT_NEGATIVE_TTL (5 * USEC_PER_SEC)
/* A lookup waits this long for its answer when query_wait_timeout is 0 (no limit there). */
#define TENANT_LOOKUP_DEFAULT_WAIT (60 * USEC_PER_SEC)
#define TENANT_BUCKETS 1024
/* How often tenants nothing needs any more are looked for (autodb_idle_timeout and the negative TTL decide which). */
#define TENANT_SWEEP_PERIOD_USEC USEC_PER_SEC
/* The name of the database made from a tenant_source connection string (routed: no login reaches it). */
#define TENANT_SOURCE_DB "pgvalve.tenant_source"

/* The row's columns pgvalve reads, by name, and the [databases] key each one sets (NULL: none, read apart). */
static const struct {
	const char *column;
	const char *key;
	bool required;
} columns[] = {
	{ "host", "host", true },
	{ "port", "port", true },
	{ "dbname", "dbname", true },
	{ "pool_size", "pool_size", false },
	{ "max_db_connections", "max_db_connections", false },
	{ "max_client_conn", "max_db_client_connections", false },
	{ "pool_mode", "pool_mode", false },
	{ "auth_user", "auth_user", false },
	{ "auth_dbname", "auth_dbname", false },
	{ "target_session_attrs", "target_session_attrs", false },
	{ "load_balance_reads", "load_balance_reads", false },
	{ "banned", NULL, false },	/* true: the tenant's clients are closed and its logins refused */
};
#define TENANT_COLUMNS ARRAY_SIZE(columns)

enum tenant_state { TENANT_NEW, TENANT_FOUND, TENANT_UNKNOWN, TENANT_INVALID };

struct tenant_lookup;

struct tenant {
	struct tenant *next;		/* hash chain */
	char *id;
	enum tenant_state state;	/* what the last answer said */
	usec_t answered;		/* when (0: never) */
	usec_t failed;			/* the last lookup that got no answer (0: none since the last answer) */
	struct db *db;			/* made from the first row found; kept while the process runs */
	struct tenant_lookup *lookup;	/* under way, or NULL */
	bool banned;			/* BAN TENANT: logins refused */
	bool row_banned;		/* its row's banned column says so (as long as the row is trusted) */
	bool reconnect;			/* RECONNECT TENANT: servers replaced once the lookup under way ends */
};

/* One lookup of a tenant's row, and the logins waiting for it. */
struct tenant_lookup {
	struct pool_query_waiter waiter;	/* queued on tenant_source's pool until a server runs it */
	struct tenant_lookup *next;		/* lookups under way */
	struct tenant *tenant;
	const struct server *server;		/* running it: compared only, never followed */
	struct event *timer;			/* query_wait_timeout */
	struct client **clients;
	size_t client_count, client_cap;
	int col[TENANT_COLUMNS];		/* each column's index in the answer, -1 if absent */
	bool have_row;
	char *values[TENANT_COLUMNS];		/* the first row's, NULL for SQL NULL */
};

static struct tenant *buckets[TENANT_BUCKETS];
static struct event *sweep_ev;		/* tenant_sweep, from the first tenant on */
static struct tenant_lookup *lookups;
/* tenant_source as last made into a database (a connection string), and that database. */
static char *source_text;
static struct db *source_db;

/* ---------------------------------------------------------------- the table */

static struct tenant **tenant_slot(const char *id)
{
	struct tenant **slot = &buckets[hash_string(id) % TENANT_BUCKETS];
	while (*slot && strcmp((*slot)->id, id) != 0)
		slot = &(*slot)->next;
	return slot;
}

static void tenant_sweep(evutil_socket_t fd, short what, void *arg);

static struct tenant *tenant_get(const char *id)
{
	struct tenant **slot = tenant_slot(id);
	if (!sweep_ev) {
		struct timeval tv = { .tv_sec = TENANT_SWEEP_PERIOD_USEC / USEC_PER_SEC };
		sweep_ev = event_new(pgv.base, -1, EV_PERSIST, tenant_sweep, NULL);
		event_add(sweep_ev, &tv);
	}
	if (!*slot) {
		*slot = xcalloc(1, sizeof(**slot));
		(*slot)->id = xstrdup(id);
	}
	return *slot;
}

/* An id as it may appear in a message: shortened, so a long one cannot flood the log. */
static const char *id_text(const char *id, char *buf, size_t size)
{
	snprintf(buf, size, "%s", id);
	if (strlen(id) >= size && size > 4)
		memcpy(buf + size - 4, "...", 4);
	return buf;
}

static bool tenants_on(void)
{
	return pgv.cfg->tenant_source[0] && pgv.cfg->tenant_from[0];
}

/* ---------------------------------------------------------------- ids from the login */

/* The id a setting word names ("pgvalve.tenant=t42", "reference=t42"), or NULL. */
static const char *setting_id(const char *word, bool after_c)
{
	if (!after_c && strncmp(word, "--", 2) == 0)
		word += 2;	/* --pgvalve.tenant=t42 (a dash would stand for an underscore; none is in the name) */
	if (strncmp(word, "pgvalve.tenant=", 15) == 0)
		return word + 15;
	if (!after_c && strncmp(word, "reference=", 10) == 0)
		return word + 10;
	return NULL;
}

/*
 * options, split into words as PostgreSQL splits them (white space, a
 * backslash taking the next character): the tenant's words are taken
 * out (the id into *id), the rest copied to *rest as written. False if
 * two of them name different tenants.
 */
static bool options_take_tenant(const char *options, char **id, char **rest)
{
	size_t len = strlen(options);
	char *word = xmalloc(len + 1);
	*rest = xcalloc(1, len + 1);
	size_t rest_len = 0;
	const char *p = options, *pending_c = NULL;	/* a "-c" word whose setting comes next */
	bool ok = true;
	while (*p) {
		while (isspace((unsigned char)*p))
			p++;
		if (!*p)
			break;
		const char *start = p;
		size_t n = 0;
		for (; *p && !isspace((unsigned char)*p); p++) {
			if (*p == '\\' && p[1])
				p++;
			word[n++] = *p;
		}
		word[n] = '\0';
		if (strcmp(word, "-c") == 0 && !pending_c) {
			pending_c = start;
			continue;
		}
		const char *found = strncmp(word, "-c", 2) == 0 && !pending_c ? setting_id(word + 2, true) :
				    setting_id(word, pending_c != NULL);
		if (found) {
			ok &= !*id || strcmp(*id, found) == 0;
			if (!*id)
				*id = xstrdup(found);
		} else {
			const char *from = pending_c ? pending_c : start;
			rest_len += (size_t)snprintf(*rest + rest_len, len + 1 - rest_len, "%s%.*s", rest_len ? " " : "",
						     (int)(p - from), from);
		}
		pending_c = NULL;
	}
	if (pending_c)	/* a trailing "-c": left for startup_options to refuse */
		snprintf(*rest + rest_len, len + 1 - rest_len, "%s-c", rest_len ? " " : "");
	free(word);
	return ok;
}

/* The first label of the TLS server name the client asked for, if it has a dot, into buf. */
static const char *sni_id(struct client *client, char *buf, size_t size)
{
	const char *name = netbuf_tls_servername(&client->nb);	/* kept after OpenSSL's part is over (tls_record.h) */
	const char *dot = name ? strchr(name, '.') : NULL;
	if (!dot || dot == name || (size_t)(dot - name) >= size)
		return NULL;
	memcpy(buf, name, (size_t)(dot - name));
	buf[dot - name] = '\0';
	return buf;
}

/* A tenant id pgvalve looks up: not empty, not too long, no control characters. NULL if fine, else why not. */
static const char *id_refused(const char *id)
{
	if (!id[0])
		return "empty tenant id";	/* -c pgvalve.tenant= names none */
	if (strlen(id) > TENANT_ID_MAX)
		return "tenant id too long";
	for (const unsigned char *c = (const unsigned char *)id; *c; c++)
		if (*c < 0x20 || *c == 0x7f)
			return "tenant id with control characters";
	return NULL;
}

/* One more source named id: kept if it is the first, else it must agree. False on a disagreement. */
static bool id_agrees(char **id, const char *found)
{
	if (!found || !found[0])
		return true;
	if (*id)
		return strcmp(*id, found) == 0;
	*id = xstrdup(found);
	return true;
}

/* login_route_ops.route: the tenant id of a login, from the sources tenant_from lists. */
static __attribute__((noinline)) int route_by_tenant(struct client *client, const struct startup_params *sp,
						     char **options)
{
	const char *from = pgv.cfg->tenant_from;
	struct client_login *login = client->login;
	char *id = NULL, sni[256];
	bool ok = true;
	const char *opts = startup_param(sp, "options");
	if (opts && config_list_contains(from, "options"))
		ok = options_take_tenant(opts, &id, options);
	char *dot = config_list_contains(from, "user") ? strrchr(login->user, '.') : NULL;
	if (ok && dot && dot != login->user && dot[1]) {
		ok = id_agrees(&id, dot + 1);
		free(login->startup_user);
		login->startup_user = xstrdup(login->user);	/* md5 is salted with what the client sent */
		*dot = '\0';	/* alice.t42 logs in as alice */
	}
	if (ok && config_list_contains(from, "sni"))
		ok = id_agrees(&id, sni_id(client, sni, sizeof(sni)));
	if (!ok) {
		free(id);
		client_close(client, "28000", "the tenant ids of the user name, options and server name differ");
		return -1;
	}
	if (!id)
		return 0;	/* no tenant named: the login goes by its database name */
	const char *refused = id_refused(id);
	if (refused) {
		free(id);
		client_close(client, "3D000", refused);
		return -1;
	}
	login->route = id;
	return 1;
}

/* Every pooled login asks: without tenants it costs the one test (the cost guard's md5 login). */
static int tenant_route(struct client *client, const struct startup_params *sp, char **options)
{
	return tenants_on() ? route_by_tenant(client, sp, options) : 0;
}

/* ---------------------------------------------------------------- tenant_source */

/* The pool tenant_query runs on, or NULL with why. */
static struct pool *source_pool(char *why, size_t size)
{
	const char *text = pgv.cfg->tenant_source;
	struct db *db;
	if (strchr(text, '=')) {	/* a connection string: a database of its own */
		if (!source_text || strcmp(source_text, text) != 0) {
			struct db_config *dc = config_db_new(TENANT_SOURCE_DB);
			dc->load_balance_hosts = pgv.cfg->load_balance_hosts;
			dc->target_session_attrs = pgv.cfg->target_session_attrs;
			if (config_parse_db_string(text, dc, why, size) < 0) {
				config_db_free(dc);
				return NULL;
			}
			if (source_db)
				pool_update_routed_db(source_db, dc);
			else
				source_db = pool_add_routed_db(dc, TENANT_SOURCE_DB);
			config_db_free(dc);
			free(source_text);
			source_text = xstrdup(text);
		}
		db = source_db;
	} else {
		db = pool_find_or_autodb(text);
		if (!db) {
			snprintf(why, size, "tenant_source names no database: %s", text);
			return NULL;
		}
	}
	const char *user = db->cfg->user[0] ? db->cfg->user : pgv.cfg->auth_user;
	if (!user[0]) {
		snprintf(why, size, "tenant_source has no user= (and auth_user is not set)");
		return NULL;
	}
	return pool_get(db, user);
}

/* ---------------------------------------------------------------- answers */

static void lookup_clear_row(struct tenant_lookup *lk)
{
	for (size_t i = 0; i < TENANT_COLUMNS; i++) {
		free(lk->values[i]);
		lk->values[i] = NULL;
		lk->col[i] = -1;
	}
	lk->have_row = false;
}

static void lookup_free(struct tenant_lookup *lk)
{
	for (struct tenant_lookup **p = &lookups; *p; p = &(*p)->next)
		if (*p == lk) {
			*p = lk->next;
			break;
		}
	pool_cancel_query(&lk->waiter);
	if (lk->timer)
		event_free(lk->timer);
	lookup_clear_row(lk);
	free(lk->clients);
	if (lk->tenant->lookup == lk)
		lk->tenant->lookup = NULL;
	free(lk);
}

static struct tenant_lookup *lookup_of_server(const struct server *server)
{
	for (struct tenant_lookup *lk = lookups; lk; lk = lk->next)
		if (lk->server == server)
			return lk;
	return NULL;
}

/* server_query_ops.columns: where each column pgvalve reads sits in the answer. */
static void lookup_columns(struct server *server, const struct pkt *pkt)
{
	struct tenant_lookup *lk = lookup_of_server(server);
	if (!lk)
		return;
	struct pkt_reader r;
	pkt_reader_init(&r, pkt_body(pkt), pkt_body_len(pkt));
	int n = pkt_get_uint16(&r);
	for (int i = 0; i < n && !r.failed; i++) {
		const char *name = pkt_get_string(&r);
		pkt_get_bytes(&r, 18);	/* table, column, type, size, modifier, format */
		for (size_t c = 0; name && !r.failed && c < TENANT_COLUMNS; c++)
			if (strcmp(name, columns[c].column) == 0 && lk->col[c] < 0)
				lk->col[c] = i;
	}
}

/* server_query_ops.row: the first row's values of the columns pgvalve reads. */
static void lookup_row(struct server *server, const struct pkt *pkt)
{
	struct tenant_lookup *lk = lookup_of_server(server);
	if (!lk || lk->have_row)
		return;
	lk->have_row = true;
	struct pkt_reader r;
	pkt_reader_init(&r, pkt_body(pkt), pkt_body_len(pkt));
	int n = pkt_get_uint16(&r);
	for (int i = 0; i < n && !r.failed; i++) {
		uint32_t len = pkt_get_uint32(&r);
		const uint8_t *v = len == 0xFFFFFFFFu ? NULL : pkt_get_bytes(&r, len);
		for (size_t c = 0; v && c < TENANT_COLUMNS; c++) {
			if (lk->col[c] != i)
				continue;
			lk->values[c] = xmalloc(len + 1);
			memcpy(lk->values[c], v, len);
			lk->values[c][len] = '\0';
		}
	}
}

/*
 * A [databases] entry from the row, each value checked as the file's
 * would be. NULL with why if a value is missing or invalid.
 */
static struct db_config *row_config(const struct tenant_lookup *lk, const char *name, char *why, size_t size)
{
	struct db_config *dc = config_db_new(name);
	dc->load_balance_hosts = pgv.cfg->load_balance_hosts;
	dc->target_session_attrs = pgv.cfg->target_session_attrs;
	dc->load_balance_reads = pgv.cfg->load_balance_reads;
	for (size_t c = 0; c < TENANT_COLUMNS; c++) {
		const char *v = lk->values[c];
		if (!columns[c].key)
			continue;
		if ((!v || !v[0]) && columns[c].required) {
			snprintf(why, size, "column %s is %s", columns[c].column,
				 lk->col[c] < 0 ? "missing from tenant_query's answer" : "empty");
			config_db_free(dc);
			return NULL;
		}
		if (v && config_db_set(dc, columns[c].key, v, why, size) < 0) {
			config_db_free(dc);
			return NULL;
		}
	}
	return dc;
}

/* The row's banned column, as PostgreSQL writes a boolean (t), or its other spellings of true. */
static bool row_says_banned(const struct tenant_lookup *lk)
{
	for (size_t c = 0; c < TENANT_COLUMNS; c++) {
		const char *v = lk->values[c];
		if (strcmp(columns[c].column, "banned") == 0 && v)
			return strcmp(v, "t") == 0 || strcasecmp(v, "true") == 0 || strcmp(v, "1") == 0 ||
			       strcasecmp(v, "on") == 0 || strcasecmp(v, "yes") == 0;
	}
	return false;
}

/* A row was found: the tenant's database made or brought up to date. False with why if the row is invalid. */
static bool tenant_take_row(struct tenant *t, const struct tenant_lookup *lk, char *why, size_t size)
{
	size_t name_len = strlen(t->id) + 8;
	char *name = xmalloc(name_len);
	snprintf(name, name_len, "tenant:%s", t->id);
	struct db_config *dc = row_config(lk, name, why, size);
	struct db *other = dc && !t->db ? pool_find_db(name) : NULL;
	if (other) {
		snprintf(why, size, "a database named \"%s\" exists already", name);
		config_db_free(dc);
		dc = NULL;
	}
	if (dc) {
		if (t->db)
			pool_update_routed_db(t->db, dc);
		else
			t->db = pool_add_routed_db(dc, name);
		config_db_free(dc);
	}
	free(name);
	return dc != NULL;
}

/* The lookup's logins, handed to fn one by one, none of them waiting on it any more. */
static void lookup_release_clients(struct tenant_lookup *lk, struct db *db, const char *sqlstate, const char *msg)
{
	struct client **clients = lk->clients;
	size_t count = lk->client_count;
	lk->clients = NULL;
	lk->client_count = lk->client_cap = 0;
	for (size_t i = 0; i < count; i++) {
		struct client *client = clients[i];
		if (client->state == CL_CLOSED)
			continue;	/* closed by an earlier one's login (it is freed by the reaper, later) */
		free(client->login->route);
		client->login->route = NULL;
		if (db)
			client_route_done(client, db);
		else
			client_close(client, sqlstate, msg);
	}
	free(clients);
}

/* RECONNECT TENANT asked for it: the servers go as they are released, now that the row was read again. */
static void reconnect_if_asked(struct tenant *t)
{
	if (t->reconnect && t->db)
		pool_db_reconnect(t->db);
	t->reconnect = false;
}

/* The lookup got no answer (error, timeout, no server): known tenants keep their row, waiting logins hear why. */
static void lookup_failed(struct tenant_lookup *lk, const char *reason)
{
	struct tenant *t = lk->tenant;
	char idbuf[80], msg[320];
	log_warning("tenant \"%s\": lookup failed: %s", id_text(t->id, idbuf, sizeof(idbuf)), reason);
	t->failed = now_usec();
	snprintf(msg, sizeof(msg), "tenant lookup failed: %s", reason);
	struct db *db = t->state == TENANT_FOUND && !t->row_banned ? t->db : NULL;
	lookup_release_clients(lk, db, "08006", msg);
	reconnect_if_asked(t);
	lookup_free(lk);
}

/* server_query_ops.done: the answer is in. */
static void lookup_done(struct server *server, bool failed)
{
	struct tenant_lookup *lk = lookup_of_server(server);
	if (!lk)
		return;	/* given up on already (query_wait_timeout) */
	if (failed) {
		char reason[300];
		snprintf(reason, sizeof(reason), "tenant_query: %s", server->internal_error);
		lookup_failed(lk, reason);
		return;
	}
	struct tenant *t = lk->tenant;
	char idbuf[80], why[256], msg[320];
	t->answered = now_usec();
	t->failed = 0;
	t->row_banned = false;	/* until a valid row says so */
	id_text(t->id, idbuf, sizeof(idbuf));
	if (!lk->have_row) {
		log_info("tenant \"%s\": no such tenant", idbuf);
		snprintf(msg, sizeof(msg), "tenant \"%s\" does not exist", idbuf);
		if (t->state == TENANT_FOUND && t->db)	/* removed from the table: its clients go too */
			pool_close_db(t->db, msg);
		t->state = TENANT_UNKNOWN;
		lookup_release_clients(lk, NULL, "3D000", msg);
	} else if (!tenant_take_row(t, lk, why, sizeof(why))) {
		t->state = TENANT_INVALID;
		log_warning("tenant \"%s\": its row is refused: %s", idbuf, why);
		snprintf(msg, sizeof(msg), "tenant \"%s\" cannot be served: its row is invalid (see the pooler's log)",
			 idbuf);
		lookup_release_clients(lk, NULL, "08P01", msg);
	} else {
		t->state = TENANT_FOUND;
		t->row_banned = row_says_banned(lk);
		log_debug("tenant \"%s\": database %s on %s:%d%s", idbuf, t->db->cfg->dbname, t->db->cfg->host,
			  t->db->cfg->port, t->row_banned ? ", banned" : "");
		if (t->row_banned) {
			snprintf(msg, sizeof(msg), "tenant \"%s\" is banned", idbuf);
			pool_close_db(t->db, msg);
			lookup_release_clients(lk, NULL, "08P01", msg);
		} else {
			lookup_release_clients(lk, t->db, NULL, NULL);
		}
	}
	reconnect_if_asked(t);
	lookup_free(lk);
}

static const struct server_query_ops lookup_ops = {
	.row = lookup_row,
	.done = lookup_done,
	.columns = lookup_columns,
};

/* ---------------------------------------------------------------- lookups */

/* pool_query_waiter.run: a server of tenant_source is ours for the query. */
static void lookup_run(struct pool_query_waiter *w, struct server *server)
{
	struct tenant_lookup *lk = container_of(w, struct tenant_lookup, waiter);
	const char *id = lk->tenant->id;
	lk->server = server;
	lookup_clear_row(lk);
	server_run_feature_query_params(server, &lookup_ops, pgv.cfg->tenant_query, 1, &id);
}

/* pool_query_waiter.failed: tenant_source's pool gave up (its server login failed, it was removed). */
static void lookup_pool_failed(struct pool_query_waiter *w, const char *sqlstate, const char *message)
{
	(void)sqlstate;
	char reason[300];
	snprintf(reason, sizeof(reason), "tenant_source: %s", message);
	lookup_failed(container_of(w, struct tenant_lookup, waiter), reason);
}

static void lookup_timeout(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	lookup_failed(arg, "no answer from tenant_source within query_wait_timeout");
}

static void lookup_add_client(struct tenant_lookup *lk, struct client *client)
{
	if (lk->client_count == lk->client_cap) {
		lk->client_cap = lk->client_cap ? 2 * lk->client_cap : 4;
		lk->clients = xrealloc(lk->clients, lk->client_cap * sizeof(*lk->clients));
	}
	lk->clients[lk->client_count++] = client;
}

/*
 * Starts the tenant's lookup, client (unless NULL) its first login
 * waiting. False (the tenant marked failed, logged) if it cannot start.
 * tenant_source's pool may fail it at once (its server logins failing):
 * the client is then closed with the reason.
 */
static bool lookup_start(struct tenant *t, struct client *client)
{
	char why[256], idbuf[80];
	struct pool *pool = pgv.cfg->tenant_query[0] ? source_pool(why, sizeof(why)) : NULL;
	if (!pgv.cfg->tenant_query[0])
		snprintf(why, sizeof(why), "tenant_query is not set");
	if (!pool) {
		log_warning("tenant \"%s\": cannot look it up: %s", id_text(t->id, idbuf, sizeof(idbuf)), why);
		t->failed = now_usec();
		return false;
	}
	struct tenant_lookup *lk = xcalloc(1, sizeof(*lk));
	lk->tenant = t;
	lookup_clear_row(lk);
	lk->waiter.run = lookup_run;
	lk->waiter.failed = lookup_pool_failed;
	usec_t wait = pgv.cfg->query_wait_timeout > 0 ? pgv.cfg->query_wait_timeout : TENANT_LOOKUP_DEFAULT_WAIT;
	struct timeval tv = { .tv_sec = (time_t)(wait / USEC_PER_SEC), .tv_usec = (suseconds_t)(wait % USEC_PER_SEC) };
	lk->timer = evtimer_new(pgv.base, lookup_timeout, lk);
	evtimer_add(lk->timer, &tv);
	lk->next = lookups;
	lookups = lk;
	t->lookup = lk;
	if (client)
		lookup_add_client(lk, client);
	pool_queue_query(pool, &lk->waiter);	/* may fail it at once (lookup_pool_failed) */
	return true;
}

/* A login waits for the tenant's lookup (started if need be; it may be closed at once). False if none could start. */
static bool lookup_wait(struct tenant *t, struct client *client)
{
	if (!t->lookup)
		return lookup_start(t, client);
	lookup_add_client(t->lookup, client);
	return true;
}

static usec_t negative_ttl(void)
{
	return MIN(pgv.cfg->tenant_cache_ttl, TENANT_NEGATIVE_TTL);
}

/* login_route_ops.resolve: the tenant's database from the cache, or the login waits for a lookup. */
static struct db *tenant_resolve(struct client *client)
{
	struct tenant *t = tenant_get(client->login->route);
	char idbuf[80], msg[320];
	id_text(t->id, idbuf, sizeof(idbuf));
	if (t->banned) {
		snprintf(msg, sizeof(msg), "tenant \"%s\" is banned", idbuf);
		client_close(client, "08P01", msg);
		return NULL;
	}
	usec_t now = now_usec();
	usec_t age = now - t->answered;
	bool retry_due = !t->failed || now - t->failed >= negative_ttl();
	/* Banned by its row: refused while the row is trusted; past it, the login waits for the row read again. */
	if (t->row_banned && (age < pgv.cfg->tenant_cache_ttl || !retry_due)) {
		snprintf(msg, sizeof(msg), "tenant \"%s\" is banned", idbuf);
		client_close(client, "08P01", msg);
		return NULL;
	}
	if (t->state == TENANT_FOUND) {
		/*
		 * Stale: the login waits for the row read again (a tenant moved
		 * is reached where it is now); a lookup that fails, or failed a
		 * moment ago, leaves it on the last row (the metadata database
		 * may be down). Such a failure may hand the login on at once.
		 */
		if (age >= pgv.cfg->tenant_cache_ttl && (t->lookup || retry_due) && lookup_wait(t, client))
			return NULL;
		free(client->login->route);
		client->login->route = NULL;
		return t->db;
	}
	if (t->state != TENANT_NEW && age < negative_ttl()) {
		if (t->state == TENANT_UNKNOWN) {
			snprintf(msg, sizeof(msg), "tenant \"%s\" does not exist", idbuf);
			client_close(client, "3D000", msg);
		} else {
			snprintf(msg, sizeof(msg), "tenant \"%s\" cannot be served: its row is invalid (see the pooler's log)",
				 idbuf);
			client_close(client, "08P01", msg);
		}
		return NULL;
	}
	if ((t->lookup || retry_due) && lookup_wait(t, client))
		return NULL;
	snprintf(msg, sizeof(msg), "tenant \"%s\" cannot be looked up now (see the pooler's log)", idbuf);
	client_close(client, "08006", msg);
	return NULL;
}

/* login_route_ops.closing: a routed login left; it waits for no lookup any more. */
static void tenant_login_closing(struct client *client)
{
	char *id = client->login->route;
	client->login->route = NULL;
	struct tenant *t = *tenant_slot(id);
	free(id);
	struct tenant_lookup *lk = t ? t->lookup : NULL;
	for (size_t i = 0; lk && i < lk->client_count; i++) {
		if (lk->clients[i] != client)
			continue;
		lk->clients[i] = lk->clients[--lk->client_count];
		break;
	}
}

static const struct login_route_ops tenant_route_ops = {
	.route = tenant_route,
	.resolve = tenant_resolve,
	.closing = tenant_login_closing,
};

void tenant_register(void)
{
	client_register_route(&tenant_route_ops);
}

/* ---------------------------------------------------------------- forgetting */

/*
 * Whether nothing needs the tenant any more: no lookup under way, not
 * banned, and either its database was unused for autodb_idle_timeout
 * (then dropped here, with its pools), or it has none and what its last
 * answer (or failed lookup) said is no longer remembered. Its next login
 * looks it up again.
 */
static bool tenant_forgettable(struct tenant *t, usec_t now)
{
	if (t->lookup || t->banned)
		return false;
	if (t->db) {
		if (!pool_drop_idle_routed_db(t->db, now))
			return false;
		t->db = NULL;
		return true;
	}
	return now - MAX(t->answered, t->failed) >= negative_ttl();
}

/*
 * A tenant with clients whose row is past tenant_cache_ttl is read again
 * without waiting for a login: a row that moved it reaches its clients'
 * next transactions (their servers are replaced as they are released).
 */
static void refresh_if_due(struct tenant *t, usec_t now)
{
	if (t->state != TENANT_FOUND || t->lookup || !t->db || !t->db->client_count ||
	    now - t->answered < pgv.cfg->tenant_cache_ttl || (t->failed && now - t->failed < negative_ttl()))
		return;
	(void)lookup_start(t, NULL);
}

/*
 * Every second: the tenants nothing needs are freed, so that idle ones
 * and a storm of unknown ids cost nothing; the rows of tenants in use are
 * read again once stale.
 */
static void tenant_sweep(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	usec_t now = now_usec();
	for (size_t b = 0; b < TENANT_BUCKETS; b++) {
		struct tenant **slot = &buckets[b];
		while (*slot) {
			struct tenant *t = *slot;
			if (!tenant_forgettable(t, now)) {
				refresh_if_due(t, now);
				slot = &t->next;
				continue;
			}
			*slot = t->next;
			free(t->id);
			free(t);
		}
	}
}

/* ---------------------------------------------------------------- the console's verbs */

void tenant_ban(const char *id, bool banned)
{
	struct tenant *t = tenant_get(id);
	char idbuf[80], msg[320];
	id_text(id, idbuf, sizeof(idbuf));
	log_info("tenant \"%s\": %s", idbuf, banned ? "banned" : "no longer banned");
	t->banned = banned;
	if (!banned)
		return;
	snprintf(msg, sizeof(msg), "tenant \"%s\" is banned", idbuf);
	if (t->lookup)
		lookup_release_clients(t->lookup, NULL, "08P01", msg);
	if (t->db)
		pool_close_db(t->db, msg);
}

bool tenant_reconnect(const char *id)
{
	struct tenant *t = *tenant_slot(id);
	if (!t)
		return false;
	t->reconnect = true;
	t->failed = 0;	/* asked for: the lookup runs now, whatever failed a moment ago */
	if (!t->lookup)
		(void)lookup_start(t, NULL);
	if (!t->lookup)	/* none could start: the servers go now, with the row there is */
		reconnect_if_asked(t);
	return true;
}

/* ---------------------------------------------------------------- SHOW TENANTS */

static const char *state_name(const struct tenant *t)
{
	if (t->banned || (t->row_banned && t->state == TENANT_FOUND))
		return "banned";
	if (t->lookup && t->state == TENANT_NEW)
		return "looking up";
	switch (t->state) {
	case TENANT_FOUND:
		return "ok";
	case TENANT_UNKNOWN:
		return "unknown";
	case TENANT_INVALID:
		return "invalid";
	case TENANT_NEW:
		break;
	}
	return "failed";
}

static void tenant_view_of(const struct tenant *t, usec_t now, struct tenant_view *v)
{
	*v = (struct tenant_view){ .id = t->id, .state = state_name(t), .age = -1 };
	if (t->answered)
		v->age = (long long)((now - t->answered) / USEC_PER_SEC);
	if (t->db) {
		v->database = t->db->cfg->dbname;
		v->host = t->db->cfg->host;
		v->port = t->db->cfg->port;
		v->clients = t->db->client_count;
		v->servers = t->db->server_count;
		list_for_each(pos, &t->db->pools)
			v->waiting += (int)container_of(pos, struct pool, node)->waiting_clients.count;
	}
	if (t->lookup)
		v->waiting += (int)t->lookup->client_count;
}

static int compare_ids(const void *a, const void *b)
{
	return strcmp((*(const struct tenant *const *)a)->id, (*(const struct tenant *const *)b)->id);
}

void tenant_foreach(void (*fn)(void *arg, const struct tenant_view *view), void *arg)
{
	size_t n = 0, cap = 0;
	const struct tenant **all = NULL;
	for (size_t b = 0; b < TENANT_BUCKETS; b++) {
		for (const struct tenant *t = buckets[b]; t; t = t->next) {
			if (n == cap) {
				cap = cap ? 2 * cap : 64;
				all = xrealloc(all, cap * sizeof(*all));
			}
			all[n++] = t;
		}
	}
	if (n)	/* by id, as PgBouncer lists databases by name */
		qsort(all, n, sizeof(*all), compare_ids);
	usec_t now = now_usec();
	for (size_t i = 0; i < n; i++) {
		struct tenant_view v;
		tenant_view_of(all[i], now, &v);
		fn(arg, &v);
	}
	free(all);
}

void tenant_cleanup(void)
{
	if (sweep_ev)
		event_free(sweep_ev);
	sweep_ev = NULL;
	while (lookups)
		lookup_free(lookups);
	for (size_t b = 0; b < TENANT_BUCKETS; b++) {
		while (buckets[b]) {
			struct tenant *t = buckets[b];
			buckets[b] = t->next;
			free(t->id);
			free(t);
		}
	}
	free(source_text);
	source_text = NULL;
	source_db = NULL;
}
