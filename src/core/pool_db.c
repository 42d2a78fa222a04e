/*
 * pool_db.c - the databases: the [databases] section made live (one struct
 * db per entry, auto-databases from the "*" entry), found by name, and a
 * reload's or a DNS change's effect on them: settings taken, servers whose
 * connection settings changed retired once idle.
 *
 * Part of the pool (pool.h is the contract); shares with pool.c only what
 * pool_internal.h declares.
 */
#include "common.h"
#include "pool.h"
#include "pool_internal.h"
#include "auth.h"
#include "auth_file.h"
#include "client.h"
#include "dns.h"
#include "log.h"
#include "server.h"

#include <strings.h>

/* ---------------------------------------------------------------- databases */

/* db takes (a copy of) cfg; what is derived from it is computed here, once per load or reload. */
static void db_set_config(struct db *db, const struct db_config *cfg)
{
	struct db_config *old = db->cfg;
	db->cfg = config_db_clone(cfg, db->name);
	db->host_count = host_list_count(db->cfg->host);
	free(db->host_roles);	/* found again from the new list */
	db->host_roles = NULL;
	config_db_free(old);
}

struct db *db_create(const struct db_config *cfg, const char *name, bool is_autodb)
{
	struct db *db = xcalloc(1, sizeof(*db));
	db->name = xstrdup(name);
	db_set_config(db, cfg);
	db->is_autodb = is_autodb;
	stats_init(&db->stats, now_usec());
	list_init(&db->pools);
	list_append(&pgv.databases, &db->node);
	return db;
}

void pool_setup_databases(void)
{
	for (const struct db_config *dc = pgv.cfg->databases; dc; dc = dc->next) {
		if (strcmp(dc->name, "*") == 0)
			continue;
		if (!pool_find_db(dc->name))
			db_create(dc, dc->name, false);
	}
}

struct db *pool_find_db(const char *name)
{
	list_for_each(pos, &pgv.databases) {
		struct db *db = container_of(pos, struct db, node);
		if (strcmp(db->name, name) == 0)
			return db;
	}
	return NULL;
}

struct db *pool_find_or_autodb(const char *name)
{
	struct db *db = pool_find_db(name);
	if (db)
		return db->removed || db->is_routed ? NULL : db;
	const struct db_config *fallback = config_find_db(pgv.cfg, "*");
	if (!fallback)
		return NULL;
	db = db_create(fallback, name, true);
	log_info("registered new auto-database: db=%s", name);
	return db;
}

struct db *pool_add_routed_db(const struct db_config *cfg, const char *name)
{
	struct db *db = db_create(cfg, name, false);
	db->is_routed = true;
	return db;
}

/* Keys that change how a server connection is made: a change means new servers. */
static bool db_connection_changed(const struct db_config *a, const struct db_config *b)
{
	const char *const sa[] = { a->host, a->dbname, a->user, a->password, a->auth_user, a->connect_query,
				   a->client_encoding, a->datestyle, a->timezone, a->application_name };
	const char *const sb[] = { b->host, b->dbname, b->user, b->password, b->auth_user, b->connect_query,
				   b->client_encoding, b->datestyle, b->timezone, b->application_name };
	for (size_t i = 0; i < ARRAY_SIZE(sa); i++)
		if (strcmp(sa[i], sb[i]) != 0)
			return true;
	return a->port != b->port || a->target_session_attrs != b->target_session_attrs;
}

void pool_close_server_list(struct list *l, const char *reason)
{
	list_for_each_safe(pos, tmp, l) {
		struct server *server = container_of(pos, struct server, node);
		server_close(server, reason);
	}
}

/*
 * Servers of db are replaced: idle ones now, busy ones when released. As
 * in PgBouncer, a login failure cached for server_login_retry is
 * forgotten: the next client waits for a fresh server login (RECONNECT
 * after a password was put right, new server TLS settings).
 */
void db_retire_servers(struct db *db, const char *reason)
{
	list_for_each(ppos, &db->pools) {
		struct pool *pool = container_of(ppos, struct pool, node);
		pool->last_error[0] = '\0';
		pool->last_login_failure = 0;
		struct list *lists[] = { &pool->active_servers, &pool->used_servers, &pool->tested_servers,
					 &pool->login_servers };
		for (size_t i = 0; i < ARRAY_SIZE(lists); i++) {
			list_for_each(pos, lists[i])
				container_of(pos, struct server, node)->close_needed = true;
		}
		pool_close_server_list(&pool->idle_servers, reason);
	}
}

void pool_retire_all_servers(const char *reason)
{
	list_for_each(pos, &pgv.databases) {
		struct db *db = container_of(pos, struct db, node);
		if (!db->is_admin)
			db_retire_servers(db, reason);
	}
}

bool pool_server_tls_changed(const struct config *a, const struct config *b)
{
	const char *const sa[] = { a->server_tls_ca_file, a->server_tls_key_file, a->server_tls_cert_file,
				   a->server_tls_protocols, a->server_tls_ciphers, a->server_tls13_ciphers };
	const char *const sb[] = { b->server_tls_ca_file, b->server_tls_key_file, b->server_tls_cert_file,
				   b->server_tls_protocols, b->server_tls_ciphers, b->server_tls13_ciphers };
	for (size_t i = 0; i < ARRAY_SIZE(sa); i++)
		if (strcmp(sa[i], sb[i]) != 0)
			return true;
	return a->server_tls_sslmode != b->server_tls_sslmode;
}

void pool_dns_changed(const char *name)
{
	int retired = 0;
	list_for_each(dpos, &pgv.databases) {
		struct db *db = container_of(dpos, struct db, node);
		list_for_each(ppos, &db->pools) {
			struct pool *pool = container_of(ppos, struct pool, node);
			struct list *lists[] = { &pool->active_servers, &pool->used_servers, &pool->tested_servers,
						 &pool->login_servers, &pool->idle_servers };
			for (size_t i = 0; i < ARRAY_SIZE(lists); i++) {
				list_for_each_safe(pos, tmp, lists[i]) {
					struct server *server = container_of(pos, struct server, node);
					sa_family_t family = server->addr.sa.sa_family;
					if (!server->host || strcasecmp(server->host, name) != 0 ||
					    (family != AF_INET && family != AF_INET6) ||
					    dns_has_address(name, &server->addr.sa))
						continue;
					retired++;
					if (lists[i] == &pool->idle_servers)
						server_close(server, "DNS address changed");
					else
						server->close_needed = true;
				}
			}
		}
	}
	if (retired)
		log_info("DNS: %d server connection(s) to old addresses of %s are closed when released", retired, name);
}

char *pool_login_password(const struct db *db, const char *user)
{
	if (db->cfg->password[0])
		return xstrdup(db->cfg->password);
	const struct auth_secret *s = pgv.auth ? auth_store_find(pgv.auth, user) : NULL;
	/* A SCRAM secret cannot log in by itself; pass-through arrives with the SCRAM issue. */
	return xstrdup(s && (s->type == SECRET_PLAIN || s->type == SECRET_MD5) ? s->secret : "");
}

static void db_take_config(struct db *db, const struct db_config *dc)
{
	bool changed = db_connection_changed(db->cfg, dc);
	db_set_config(db, dc);
	db->removed = false;
	if (changed) {
		log_info("database %s: connection settings changed, servers will be replaced", db->name);
		db_retire_servers(db, "database configuration changed");
	}
}

void pool_update_routed_db(struct db *db, const struct db_config *cfg)
{
	db_take_config(db, cfg);
	/* Its pools' cached mode (pool_effective_mode) is of the old settings; config_generation starts at 1. */
	list_for_each(pos, &db->pools)
		container_of(pos, struct pool, node)->mode_cached_gen = 0;
}

void pool_apply_config(void)
{
	const struct db_config *fallback = config_find_db(pgv.cfg, "*");

	list_for_each_safe(pos, tmp, &pgv.databases) {
		struct db *db = container_of(pos, struct db, node);
		if (db->is_admin || db->is_routed)	/* a routed one's settings are its route's, not the file's */
			continue;
		const struct db_config *dc = config_find_db(pgv.cfg, db->name);
		if (!dc && db->is_autodb)
			dc = fallback;
		if (dc) {
			db_take_config(db, dc);
		} else if (!db->removed) {
			log_info("database %s was removed from the configuration", db->name);
			db->removed = true;
			/*
			 * As PgBouncer: dropped at once, so the name is free for the
			 * "*" entry. A console waiting on it (WAIT_CLOSE, PAUSE db)
			 * keeps it, closed, until it has its answer.
			 */
			pool_close_db(db, "database removed");
			if (!db->console_waits)
				db_free(db);
		}
	}
	for (const struct db_config *dc = pgv.cfg->databases; dc; dc = dc->next) {
		if (strcmp(dc->name, "*") == 0 || pool_find_db(dc->name))
			continue;
		db_create(dc, dc->name, false);
		log_info("database %s added", dc->name);
	}
	/* New passwords from the config or auth_file serve the next server logins. */
	list_for_each(dpos, &pgv.databases) {
		struct db *db = container_of(dpos, struct db, node);
		list_for_each(ppos, &db->pools) {
			struct pool *pool = container_of(ppos, struct pool, node);
			char *password = pool_login_password(db, pool->user);
			if (strcmp(password, pool->password) != 0)
				pool->last_login_failure = 0;	/* retry at once with the new secret */
			free(pool->password);
			pool->password = password;
			pool_after_change(pool);
		}
	}
}
