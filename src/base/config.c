/*
 * config.c - the pgbouncer.ini reader and the parameter table.
 *
 * Owns: parsing the file format (sections, %include, key = value), the
 * table of [pgbouncer] parameters (type, default, reloadable, implemented),
 * and the [databases]/[users]/[peers] connection-string parsers. One
 * value's parsing and formatting (SET, SHOW CONFIG) is config_value.c's.
 *
 * Must not touch: anything outside the struct config it builds. No globals,
 * nothing applied; only log_warning() for keys that are ignored. Error
 * messages name keys, never echo a line ([databases] lines hold passwords).
 */
#include "common.h"
#include "config.h"
#include "config_value.h"
#include "config_shard.h"
#include "ldap_auth.h"
#include "log.h"

#include <ctype.h>
#include <limits.h>
#include <stdarg.h>
#include <strings.h>

/* ------------------------------------------------------------------ table */

static const char *const pool_mode_names[] = { "session", "transaction", "statement", NULL };

/* Index = enum auth_type. peer and reject exist only inside an hba file. */
static const char *const auth_type_names[] = {
	"any", "trust", "plain", "md5", "scram-sha-256", "cert", "hba", "pam",
	"peer", "reject", "ldap", "gss", NULL
};
#define AUTH_TYPE_HBA_ONLY ((1u << AUTH_TYPE_PEER) | (1u << AUTH_TYPE_REJECT) | (1u << AUTH_TYPE_GSS))

static const char *const sslmode_names[] = {
	"disable", "allow", "prefer", "require", "verify-ca", "verify-full", NULL
};

static const char *const load_balance_hosts_names[] = { "round-robin", "disable", "least-connections", NULL };

/* Index = enum target_session_attrs. */
static const char *const target_session_attrs_names[] = {
	"any", "read-write", "read-only", "primary", "standby", "prefer-standby", NULL
};

/* Index = enum load_balance_reads. */
static const char *const load_balance_reads_names[] = { "off", "explicit", "auto", NULL };

const char *config_load_balance_reads_name(int value)
{
	return value >= 0 && value < (int)ARRAY_SIZE(load_balance_reads_names) - 1 ?
	       load_balance_reads_names[value] : "off";
}

const char *config_target_session_attrs_name(int value)
{
	return value >= 0 && value < (int)ARRAY_SIZE(target_session_attrs_names) - 1 ?
	       target_session_attrs_names[value] : "any";
}

const char *config_load_balance_hosts_name(int value)
{
	return value >= 0 && value < (int)ARRAY_SIZE(load_balance_hosts_names) - 1 ?
	       load_balance_hosts_names[value] : "round-robin";
}

/* The field named like the parameter, checked to have the C type the parameter type needs. */
#define FIELD(n, ctype) \
	(offsetof(struct config, n) + \
	 0 * sizeof(char[__builtin_types_compatible_p(__typeof__(((struct config *)0)->n), ctype) ? 1 : -1]))

#define RELOAD  true
#define RESTART false
#define IMPL    true
#define TODO    false

#define P_STR(n, def, rel, impl) \
	{ .name = #n, .type = PARAM_STRING, .default_value = def, .offset = FIELD(n, char *), \
	  .reloadable = rel, .implemented = impl }
#define P_INT(n, def, rel, impl, lo, hi) \
	{ .name = #n, .type = PARAM_INT, .default_value = def, .offset = FIELD(n, int), \
	  .reloadable = rel, .implemented = impl, .min_value = lo, .max_value = hi }
#define P_INT_AUTO(n, def, rel, impl, lo, hi) \
	{ .name = #n, .type = PARAM_INT, .default_value = def, .offset = FIELD(n, int), \
	  .reloadable = rel, .implemented = impl, .min_value = lo, .max_value = hi, .auto_is_zero = true }
#define P_BOOL(n, def, rel, impl) \
	{ .name = #n, .type = PARAM_BOOL, .default_value = def, .offset = FIELD(n, bool), \
	  .reloadable = rel, .implemented = impl }
#define P_TIME(n, def, rel, impl) \
	{ .name = #n, .type = PARAM_TIME, .default_value = def, .offset = FIELD(n, usec_t), \
	  .reloadable = rel, .implemented = impl }
#define P_ENUM(n, def, rel, impl, names, unsettable) \
	{ .name = #n, .type = PARAM_ENUM, .default_value = def, .offset = FIELD(n, int), \
	  .reloadable = rel, .implemented = impl, .enum_names = names, .enum_unsettable = unsettable }
#define P_OCTAL(n, def, rel, impl, hi) \
	{ .name = #n, .type = PARAM_OCTAL, .default_value = def, .offset = FIELD(n, int), \
	  .reloadable = rel, .implemented = impl, .max_value = hi }
#define P_STR_ALIAS(n, target, def, rel, impl) \
	{ .name = #n, .type = PARAM_STRING, .default_value = def, .offset = FIELD(target, char *), \
	  .reloadable = rel, .implemented = impl, .alias_of = #target }

/*
 * Every [pgbouncer] parameter of PgBouncer 1.26, alphabetical (the order
 * SHOW CONFIG uses), then pgvalve's own extensions. Defaults and
 * restart-only flags follow PgBouncer.
 */
static const struct param_def params[] = {
	P_STR(admin_users, "", RELOAD, IMPL),
	P_BOOL(application_name_add_host, "0", RELOAD, IMPL),
	P_STR(auth_dbname, "", RELOAD, IMPL),
	P_STR(auth_file, "", RELOAD, IMPL),
	P_STR(auth_hba_file, "", RELOAD, IMPL),
	P_STR(auth_ident_file, "", RELOAD, IMPL),
	/* pgvalve extension (gss, gss_auth.h): PostgreSQL's krb_server_keyfile, in alphabetical place */
	P_STR(auth_krb_server_keyfile, "", RELOAD, IMPL),
	P_INT(auth_ldap_max_concurrent, "16", RELOAD, IMPL, 1, 10000),	/* pgvalve */
	P_STR(auth_ldap_options, "", RELOAD, IMPL),	/* refused at load in a build without LDAP */
	P_TIME(auth_ldap_timeout, "10", RELOAD, IMPL),	/* pgvalve */
	P_STR(auth_query, "SELECT rolname, CASE WHEN rolvaliduntil < now() THEN NULL ELSE rolpassword END "
	      "FROM pg_authid WHERE rolname=$1 AND rolcanlogin", RELOAD, IMPL),
	P_ENUM(auth_type, "md5", RELOAD, IMPL, auth_type_names, AUTH_TYPE_HBA_ONLY),
	P_STR(auth_user, "", RELOAD, IMPL),
	P_TIME(autodb_idle_timeout, "3600", RELOAD, IMPL),
	/* pgvalve extensions: what long cancel keys (protocol 3.2) say and how they are signed (cancel_key.h). */
	P_STR(cancel_advertise_addr, "", RELOAD, IMPL),
	P_INT(cancel_advertise_port, "0", RELOAD, IMPL, 0, 65535),
	P_STR(cancel_key_secret, "", RELOAD, IMPL),
	P_TIME(cancel_wait_timeout, "10", RELOAD, IMPL),
	P_TIME(client_idle_timeout, "0", RELOAD, IMPL),
	P_TIME(client_login_timeout, "60", RELOAD, IMPL),
	P_STR(client_tls13_ciphers, "", RELOAD, IMPL),
	P_STR(client_tls_ca_file, "", RELOAD, IMPL),
	P_STR(client_tls_cert_file, "", RELOAD, IMPL),
	P_STR(client_tls_ciphers, "default", RELOAD, IMPL),
	P_STR(client_tls_dheparams, "auto", RELOAD, IMPL),
	P_STR(client_tls_ecdhcurve, "auto", RELOAD, IMPL),
	P_STR(client_tls_key_file, "", RELOAD, IMPL),
	P_STR(client_tls_protocols, "secure", RELOAD, IMPL),
	P_ENUM(client_tls_sslmode, "disable", RELOAD, IMPL, sslmode_names, 0),
	P_STR(conffile, "", RELOAD, IMPL),
	P_INT(default_pool_size, "20", RELOAD, IMPL, 0, INT_MAX),
	P_BOOL(disable_pqexec, "0", RESTART, IMPL),
	P_TIME(dns_max_ttl, "15", RELOAD, IMPL),
	P_TIME(dns_nxdomain_ttl, "15", RELOAD, IMPL),
	P_TIME(dns_zone_check_period, "0", RELOAD, IMPL),
	/* pgvalve extension: how long a drain (drain.h) waits for its last client; 0 = no limit. */
	P_TIME(drain_timeout, "0", RELOAD, IMPL),
	P_TIME(idle_transaction_timeout, "0", RELOAD, IMPL),
	P_STR(ignore_startup_parameters, "", RELOAD, IMPL),
	P_STR(job_name, "pgbouncer", RESTART, IMPL),	/* Windows service name in PgBouncer: no effect here either */
	P_STR(krb_srvname, "postgres", RELOAD, IMPL),	/* pgvalve extension (gss), PostgreSQL's name */
	P_STR(listen_addr, "", RESTART, IMPL),
	P_INT(listen_backlog, "4096", RESTART, IMPL, 0, INT_MAX),
	P_INT(listen_port, "6432", RESTART, IMPL, 1, 65535),
	/* pgvalve extension: how often auto reloads which functions are not VOLATILE (volatility.h) */
	P_TIME(load_balance_functions_refresh, "300", RELOAD, IMPL),
	/* pgvalve extension: the default of [databases] lines that do not say (role routing, roles.h) */
	P_ENUM(load_balance_hosts, "round-robin", RELOAD, IMPL, load_balance_hosts_names, 0),
	/* pgvalve extension: the default of [databases] lines that do not say (the read balancer, balance.h) */
	P_ENUM(load_balance_reads, "off", RELOAD, IMPL, load_balance_reads_names, 0),
	P_BOOL(log_connections, "1", RELOAD, IMPL),
	P_BOOL(log_disconnections, "1", RELOAD, IMPL),
	P_BOOL(log_pooler_errors, "1", RELOAD, IMPL),
	P_BOOL(log_stats, "1", RELOAD, IMPL),
	P_STR(logfile, "", RELOAD, IMPL),
	P_STR(login_notify_message, "", RELOAD, IMPL),	/* PgBouncer 1.26 */
	P_INT(max_client_conn, "100", RELOAD, IMPL, 0, INT_MAX),
	P_INT(max_db_client_connections, "0", RELOAD, IMPL, 0, INT_MAX),
	P_INT(max_db_connections, "0", RELOAD, IMPL, 0, INT_MAX),
	P_INT(max_packet_size, "2147483647", RELOAD, IMPL, 0, INT_MAX),
	P_INT(max_prepared_statements, "200", RELOAD, IMPL, 0, INT_MAX),
	P_INT(max_user_client_connections, "0", RELOAD, IMPL, 0, INT_MAX),
	P_INT(max_user_connections, "0", RELOAD, IMPL, 0, INT_MAX),
	/* pgvalve extension: the Prometheus endpoint (see metrics_http.h); off while metrics_port is 0. */
	P_STR(metrics_auth_token, "", RELOAD, IMPL),
	P_STR(metrics_listen_addr, "127.0.0.1", RELOAD, IMPL),
	P_INT(metrics_port, "0", RELOAD, IMPL, 0, 65535),
	P_BOOL(metrics_tls, "0", RELOAD, IMPL),
	P_INT(min_pool_size, "0", RELOAD, IMPL, 0, INT_MAX),
	/* pgvalve extension (notify.h): the bytes of notifications a client may leave unread; 0 = no limit */
	P_INT(notify_buffer_limit, "1048576", RELOAD, IMPL, 0, INT_MAX),
	/*
	 * pgvalve extension: LISTEN/NOTIFY in transaction/statement mode through a
	 * listener per pool (notify.h). Restart only: servers would carry LISTENs it never saw.
	 */
	P_BOOL(notify_support, "1", RESTART, IMPL),
	P_INT(peer_id, "0", RELOAD, IMPL, 0, 16383),
	/* pgvalve extension: protocol 3.0 cancels go to every instance this name resolves to (peer.h). */
	P_STR(peers_dns, "", RELOAD, IMPL),
	P_INT(peers_dns_port, "0", RELOAD, IMPL, 0, 65535),
	P_STR(pidfile, "", RESTART, IMPL),
	/* PgBouncer takes any size; below 1024 the buffers are 1024 bytes (netbuf.c) */
	P_INT(pkt_buf, "4096", RESTART, IMPL, 1, INT_MAX),
	/* Not in PgBouncer 1.25's table but in its current documentation: unused pools are freed. */
	P_TIME(pool_idle_timeout, "0", RELOAD, IMPL),
	P_ENUM(pool_mode, "session", RELOAD, IMPL, pool_mode_names, 0),
	P_TIME(query_timeout, "0", RELOAD, IMPL),
	P_TIME(query_wait_notify, "5", RELOAD, IMPL),
	P_TIME(query_wait_timeout, "120", RELOAD, IMPL),
	P_INT(reserve_pool_size, "0", RELOAD, IMPL, 0, INT_MAX),
	P_TIME(reserve_pool_timeout, "5", RELOAD, IMPL),
	P_STR(resolv_conf, "", RESTART, IMPL),
	P_INT(sbuf_loopcnt, "5", RELOAD, IMPL, 0, INT_MAX),
	P_INT(scram_iterations, "4096", RELOAD, IMPL, 1, INT_MAX),
	P_TIME(server_check_delay, "30", RELOAD, IMPL),
	P_STR(server_check_query, "<empty>", RELOAD, IMPL),
	P_TIME(server_connect_timeout, "15", RELOAD, IMPL),
	P_BOOL(server_fast_close, "0", RELOAD, IMPL),
	P_TIME(server_idle_timeout, "600", RELOAD, IMPL),
	P_TIME(server_lifetime, "3600", RELOAD, IMPL),
	P_TIME(server_login_retry, "15", RELOAD, IMPL),
	P_STR(server_reset_query, "DISCARD ALL", RELOAD, IMPL),
	P_BOOL(server_reset_query_always, "0", RELOAD, IMPL),
	P_TIME(server_role_check_period, "0", RELOAD, IMPL),
	P_BOOL(server_round_robin, "0", RELOAD, IMPL),
	P_STR(server_tls13_ciphers, "", RELOAD, IMPL),
	P_STR(server_tls_ca_file, "", RELOAD, IMPL),
	P_STR(server_tls_cert_file, "", RELOAD, IMPL),
	P_STR(server_tls_ciphers, "default", RELOAD, IMPL),
	P_STR(server_tls_key_file, "", RELOAD, IMPL),
	P_STR(server_tls_protocols, "secure", RELOAD, IMPL),
	P_ENUM(server_tls_sslmode, "prefer", RELOAD, IMPL, sslmode_names, 0),
	P_STR_ALIAS(service_name, job_name, "pgbouncer", RESTART, IMPL),
	/* pgvalve extension: SIGTERM drains (drain.h) instead of SHUTDOWN WAIT_FOR_CLIENTS. */
	P_BOOL(shutdown_drain, "0", RELOAD, IMPL),
	P_BOOL(so_reuseport, "0", RESTART, IMPL),
	P_TIME(stats_period, "60", RELOAD, IMPL),
	P_STR(stats_users, "", RELOAD, IMPL),
	P_TIME(suspend_timeout, "10", RELOAD, IMPL),	/* no effect: SUSPEND is gone (PgBouncer 1.26); kept so configs load */
	P_BOOL(syslog, "0", RELOAD, IMPL),
	P_STR(syslog_facility, "daemon", RELOAD, IMPL),
	P_STR(syslog_ident, "pgbouncer", RELOAD, IMPL),
	/* pgvalve extension: the default of [databases] lines that do not say (role routing, roles.h) */
	P_ENUM(target_session_attrs, "any", RELOAD, IMPL, target_session_attrs_names, 0),
#ifdef __linux__
	P_BOOL(tcp_defer_accept, "1", RELOAD, IMPL),
#else
	P_BOOL(tcp_defer_accept, "0", RELOAD, IMPL),
#endif
	P_BOOL(tcp_keepalive, "1", RELOAD, IMPL),
	P_INT(tcp_keepcnt, "0", RELOAD, IMPL, 0, INT_MAX),
	P_INT(tcp_keepidle, "0", RELOAD, IMPL, 0, INT_MAX),
	P_INT(tcp_keepintvl, "0", RELOAD, IMPL, 0, INT_MAX),
	P_INT(tcp_socket_buffer, "0", RELOAD, IMPL, 0, INT_MAX),
	P_INT(tcp_user_timeout, "0", RELOAD, IMPL, 0, INT_MAX),
	/* pgvalve extension: tenants looked up in a database (tenant.h) */
	P_TIME(tenant_cache_ttl, "60", RELOAD, IMPL),
	P_STR(tenant_from, "", RELOAD, IMPL),
	P_STR(tenant_query, "", RELOAD, IMPL),
	P_STR(tenant_source, "", RELOAD, IMPL),
	/*
	 * pgvalve extension: a client's own SETs follow it in transaction/statement
	 * mode (session_set.h). Restart only: turned on by a reload, servers
	 * would already carry SETs it never saw.
	 */
	P_BOOL(track_client_set, "1", RESTART, IMPL),
	P_STR(track_extra_parameters, "IntervalStyle", RESTART, IMPL),
	P_TIME(transaction_timeout, "0", RELOAD, IMPL),
	P_STR(unix_socket_dir, "/tmp", RESTART, IMPL),
	P_STR(unix_socket_group, "", RESTART, IMPL),
	P_OCTAL(unix_socket_mode, "0777", RESTART, IMPL, 07777),
	P_STR(user, "", RESTART, IMPL),
	P_INT(verbose, "0", RELOAD, IMPL, 0, INT_MAX),
	/* pgvalve extension: processes sharing the port (see supervisor.h); "auto" = online CPUs. */
	P_INT_AUTO(workers, "1", RESTART, IMPL, 1, CONFIG_MAX_WORKERS),
};

const struct param_def *config_params(size_t *count)
{
	if (count)
		*count = ARRAY_SIZE(params);
	return params;
}

const struct param_def *config_find_param(const char *name)
{
	for (size_t i = 0; name && i < ARRAY_SIZE(params); i++)
		if (strcasecmp(params[i].name, name) == 0)
			return &params[i];
	return NULL;
}

/* ------------------------------------------------------------------ small helpers */

static bool is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v';
}

static char *xstrndup(const char *s, size_t n)
{
	char *p = xmalloc(n + 1);
	memcpy(p, s, n);
	p[n] = '\0';
	return p;
}

static void replace_str(char **dst, const char *value)
{
	char *copy = xstrdup(value);
	free(*dst);
	*dst = copy;
}

/* A value shown in a message: shortened so one bad line cannot flood the log. */
static const char *shorten(const char *value, char *buf, size_t size)
{
	size_t len = strlen(value);
	if (len < size)
		return value;
	snprintf(buf, size, "%.*s...", (int)(size - 4), value);
	return buf;
}

/* ------------------------------------------------------------------ section entries */

/* The string keys of a [databases] entry; also drives new/clone/free. */
static const struct { const char *key; size_t offset; } db_strings[] = {
	{ "host", offsetof(struct db_config, host) },
	{ "dbname", offsetof(struct db_config, dbname) },
	{ "user", offsetof(struct db_config, user) },
	{ "password", offsetof(struct db_config, password) },
	{ "auth_user", offsetof(struct db_config, auth_user) },
	{ "auth_query", offsetof(struct db_config, auth_query) },
	{ "auth_dbname", offsetof(struct db_config, auth_dbname) },
	{ "connect_query", offsetof(struct db_config, connect_query) },
	{ "client_encoding", offsetof(struct db_config, client_encoding) },
	{ "datestyle", offsetof(struct db_config, datestyle) },
	{ "timezone", offsetof(struct db_config, timezone) },
	{ "application_name", offsetof(struct db_config, application_name) },
};

#define DB_STRING(db, i) ((char **)((char *)(db) + db_strings[i].offset))

struct db_config *config_db_new(const char *name)
{
	struct db_config *db = xcalloc(1, sizeof(*db));
	db->name = xstrdup(name);
	for (size_t i = 0; i < ARRAY_SIZE(db_strings); i++)
		*DB_STRING(db, i) = xstrdup("");
	db->port = 5432;
	db->pool_size = -1;
	db->min_pool_size = -1;
	db->reserve_pool_size = -1;
	db->pool_mode = -1;
	db->max_db_connections = -1;
	db->max_db_client_connections = -1;
	db->server_lifetime = -1;
	db->query_wait_timeout = -1;
	db->load_balance_hosts = -1;
	db->load_balance_reads = -1;
	db->origin = xstrdup("");
	return db;
}

struct db_config *config_db_clone(const struct db_config *src, const char *name)
{
	struct db_config *db = xmalloc(sizeof(*db));
	*db = *src;
	db->next = NULL;
	db->name = xstrdup(name);
	for (size_t i = 0; i < ARRAY_SIZE(db_strings); i++)
		*DB_STRING(db, i) = xstrdup(*DB_STRING(src, i));
	db->origin = xstrdup(src->origin);
	db->sharding = config_shard_clone(src->sharding);
	return db;
}

void config_db_free(struct db_config *db)
{
	if (!db)
		return;
	free(db->name);
	for (size_t i = 0; i < ARRAY_SIZE(db_strings); i++)
		free(*DB_STRING(db, i));
	config_shard_free(db->sharding);
	free(db->origin);
	free(db);
}

static struct user_config *user_new(const char *name)
{
	struct user_config *u = xcalloc(1, sizeof(*u));
	u->name = xstrdup(name);
	u->pool_mode = -1;
	u->pool_size = -1;
	u->reserve_pool_size = -1;
	u->max_user_connections = -1;
	u->max_user_client_connections = -1;
	u->query_timeout = -1;
	u->query_wait_timeout = -1;
	u->idle_transaction_timeout = -1;
	u->client_idle_timeout = -1;
	u->transaction_timeout = -1;
	u->origin = xstrdup("");
	return u;
}

static void user_free(struct user_config *u)
{
	if (!u)
		return;
	free(u->name);
	free(u->origin);
	free(u);
}

static struct peer_config *peer_new(int peer_id)
{
	struct peer_config *peer = xcalloc(1, sizeof(*peer));
	peer->peer_id = peer_id;
	peer->host = xstrdup("");
	peer->port = 6432;
	peer->pool_size = -1;
	peer->origin = xstrdup("");
	return peer;
}

static void peer_free(struct peer_config *peer)
{
	if (!peer)
		return;
	free(peer->host);
	free(peer->origin);
	free(peer);
}

void config_put_peer(struct config *cfg, int peer_id, const char *host, int port, const char *origin)
{
	struct peer_config **link = &cfg->peers;
	while (*link && (*link)->peer_id != peer_id)
		link = &(*link)->next;
	struct peer_config *peer = peer_new(peer_id);
	replace_str(&peer->host, host);
	replace_str(&peer->origin, origin);
	peer->port = port;
	if (*link) {
		peer->next = (*link)->next;
		peer_free(*link);
	}
	*link = peer;
}

void config_drop_peer(struct config *cfg, int peer_id)
{
	for (struct peer_config **link = &cfg->peers; *link; link = &(*link)->next) {
		if ((*link)->peer_id == peer_id) {
			struct peer_config *gone = *link;
			*link = gone->next;
			peer_free(gone);
			return;
		}
	}
}

const struct db_config *config_find_db(const struct config *cfg, const char *name)
{
	for (const struct db_config *db = cfg ? cfg->databases : NULL; db && name; db = db->next)
		if (strcmp(db->name, name) == 0)
			return db;
	return NULL;
}

const struct user_config *config_find_user(const struct config *cfg, const char *name)
{
	for (const struct user_config *u = cfg ? cfg->users : NULL; u && name; u = u->next)
		if (strcmp(u->name, name) == 0)
			return u;
	return NULL;
}

/* ------------------------------------------------------------------ connection strings */

/*
 * Next "key=value" of a connection string: 1 with *key and *val allocated, 0 at
 * the end, -1 on a syntax error (errbuf names the key, never the value).
 */
static int cstr_next(const char **pp, int item, char **key, char **val, char *errbuf, size_t errsize)
{
	const char *p = *pp;
	const char *k;
	size_t klen;
	char *out;

	while (is_blank(*p))
		p++;
	if (!*p)
		return 0;

	k = p;
	while (*p && !is_blank(*p) && *p != '=')
		p++;
	klen = (size_t)(p - k);
	while (is_blank(*p))
		p++;
	if (klen == 0 || *p != '=') {
		config_errfmt(errbuf, errsize, "syntax error in connection string: item %d is not key=value", item);
		return -1;
	}
	p++;
	while (is_blank(*p))
		p++;

	*key = xstrndup(k, klen);
	if (*p == '\'') {
		size_t n = 0;
		const char *q = ++p;

		/* First pass finds the closing quote and the length, second pass copies. */
		for (;;) {
			if (!*q) {
				config_errfmt(errbuf, errsize, "unterminated quoted value for \"%s\"", *key);
				goto fail;
			}
			if ((q[0] == '\\' && (q[1] == '\'' || q[1] == '\\')) || (q[0] == '\'' && q[1] == '\''))
				q += 2;
			else if (q[0] == '\'')
				break;
			else
				q++;
			n++;
		}
		if (q[1] && !is_blank(q[1])) {
			config_errfmt(errbuf, errsize, "unexpected text after the quoted value of \"%s\"", *key);
			goto fail;
		}
		out = xmalloc(n + 1);
		for (n = 0; p < q; n++) {
			if ((p[0] == '\\' && (p[1] == '\'' || p[1] == '\\')) || p[0] == '\'')
				p++;	/* two-char escape: keep the second */
			out[n] = *p++;
		}
		out[n] = '\0';
		p = q + 1;
	} else {
		const char *v = p;
		while (*p && !is_blank(*p))
			p++;
		out = xstrndup(v, (size_t)(p - v));
	}
	if (!out[0]) {
		config_errfmt(errbuf, errsize, "empty value for \"%s\"", *key);
		free(out);
		goto fail;
	}
	*val = out;
	*pp = p;
	return 1;
fail:
	free(*key);
	*key = NULL;
	return -1;
}

/* Ints in connection strings: non-negative (pool sizes, limits). */
static int cstr_int(const char *key, const char *val, long lo, long hi, int *out, char *errbuf, size_t errsize)
{
	char why[128], vbuf[64];
	if (config_parse_int(val, lo, hi, out, why, sizeof(why)) < 0) {
		config_errfmt(errbuf, errsize, "invalid value \"%s\" for \"%s\": %s",
		       shorten(val, vbuf, sizeof(vbuf)), key, why);
		return -1;
	}
	return 0;
}

static int cstr_time(const char *key, const char *val, usec_t *out, char *errbuf, size_t errsize)
{
	char why[128], vbuf[64];
	if (config_parse_time(val, 0, out, why, sizeof(why)) < 0) {
		config_errfmt(errbuf, errsize, "invalid value \"%s\" for \"%s\": %s",
		       shorten(val, vbuf, sizeof(vbuf)), key, why);
		return -1;
	}
	return 0;
}

/* A per-database or per-user override: a time, or -1 for "not set" (PgBouncer 1.26's query_wait_timeout). */
static int cstr_time_or_unset(const char *key, const char *val, usec_t *out, char *errbuf, size_t errsize)
{
	if (strcmp(val, "-1") == 0) {
		*out = -1;
		return 0;
	}
	return cstr_time(key, val, out, errbuf, errsize);
}

static int cstr_enum(const char *key, const char *val, const char *const *names, int *out,
		     char *errbuf, size_t errsize)
{
	char why[160], vbuf[64];
	if (config_parse_enum(val, names, 0, out, why, sizeof(why)) < 0) {
		config_errfmt(errbuf, errsize, "invalid value \"%s\" for \"%s\": %s",
		       shorten(val, vbuf, sizeof(vbuf)), key, why);
		return -1;
	}
	return 0;
}

static void unknown_key(const char *what, const char *key, char *errbuf, size_t errsize)
{
	char kbuf[64];
	config_errfmt(errbuf, errsize, "unknown %s parameter \"%s\"", what, shorten(key, kbuf, sizeof(kbuf)));
}

static int db_set_key(struct db_config *db, const char *key, const char *val, char *errbuf, size_t errsize)
{
	static const struct { const char *key; size_t offset; } counts[] = {
		{ "pool_size", offsetof(struct db_config, pool_size) },
		{ "min_pool_size", offsetof(struct db_config, min_pool_size) },
		{ "reserve_pool", offsetof(struct db_config, reserve_pool_size) },
		{ "reserve_pool_size", offsetof(struct db_config, reserve_pool_size) },
		{ "max_db_connections", offsetof(struct db_config, max_db_connections) },
		{ "max_db_client_connections", offsetof(struct db_config, max_db_client_connections) },
	};

	for (size_t i = 0; i < ARRAY_SIZE(db_strings); i++) {
		if (strcmp(key, db_strings[i].key) == 0) {
			replace_str(DB_STRING(db, i), val);
			return 0;
		}
	}
	for (size_t i = 0; i < ARRAY_SIZE(counts); i++)
		if (strcmp(key, counts[i].key) == 0)
			return cstr_int(key, val, 0, INT_MAX, (int *)((char *)db + counts[i].offset), errbuf, errsize);
	if (strcmp(key, "port") == 0)
		return cstr_int(key, val, 1, 65535, &db->port, errbuf, errsize);
	if (strcmp(key, "max_replica_lag") == 0) {
		char why[128], vbuf[64];
		if (config_parse_size(val, &db->max_replica_lag, why, sizeof(why)) == 0)
			return 0;
		config_errfmt(errbuf, errsize, "invalid value \"%s\" for \"%s\": %s", shorten(val, vbuf, sizeof(vbuf)), key, why);
		return -1;
	}
	if (strcmp(key, "max_replica_lag_seconds") == 0)
		return cstr_time(key, val, &db->max_replica_lag_seconds, errbuf, errsize);
	if (strcmp(key, "server_lifetime") == 0)
		return cstr_time(key, val, &db->server_lifetime, errbuf, errsize);
	if (strcmp(key, "query_wait_timeout") == 0)
		return cstr_time_or_unset(key, val, &db->query_wait_timeout, errbuf, errsize);
	if (strcmp(key, "pool_mode") == 0)
		return cstr_enum(key, val, pool_mode_names, &db->pool_mode, errbuf, errsize);
	if (strcmp(key, "load_balance_hosts") == 0)
		return cstr_enum(key, val, load_balance_hosts_names, &db->load_balance_hosts, errbuf, errsize);
	if (strcmp(key, "target_session_attrs") == 0)
		return cstr_enum(key, val, target_session_attrs_names, &db->target_session_attrs, errbuf, errsize);
	if (strcmp(key, "load_balance_reads") == 0)
		return cstr_enum(key, val, load_balance_reads_names, &db->load_balance_reads, errbuf, errsize);
	if (strcmp(key, "shards") == 0)
		return config_shard_parse_shards(&db->sharding, val, errbuf, errsize);
	if (strcmp(key, "sharding_key") == 0)
		return config_shard_parse_keys(&db->sharding, val, errbuf, errsize);
	unknown_key("database", key, errbuf, errsize);
	return -1;
}

static int user_set_key(struct user_config *u, const char *key, const char *val, char *errbuf, size_t errsize)
{
	if (strcmp(key, "pool_mode") == 0)
		return cstr_enum(key, val, pool_mode_names, &u->pool_mode, errbuf, errsize);
	if (strcmp(key, "pool_size") == 0)
		return cstr_int(key, val, 0, INT_MAX, &u->pool_size, errbuf, errsize);
	if (strcmp(key, "reserve_pool_size") == 0)
		return cstr_int(key, val, 0, INT_MAX, &u->reserve_pool_size, errbuf, errsize);
	if (strcmp(key, "max_user_connections") == 0)
		return cstr_int(key, val, 0, INT_MAX, &u->max_user_connections, errbuf, errsize);
	if (strcmp(key, "max_user_client_connections") == 0)
		return cstr_int(key, val, 0, INT_MAX, &u->max_user_client_connections, errbuf, errsize);
	if (strcmp(key, "query_timeout") == 0)
		return cstr_time(key, val, &u->query_timeout, errbuf, errsize);
	if (strcmp(key, "query_wait_timeout") == 0)
		return cstr_time_or_unset(key, val, &u->query_wait_timeout, errbuf, errsize);
	if (strcmp(key, "idle_transaction_timeout") == 0)
		return cstr_time(key, val, &u->idle_transaction_timeout, errbuf, errsize);
	if (strcmp(key, "client_idle_timeout") == 0)
		return cstr_time(key, val, &u->client_idle_timeout, errbuf, errsize);
	if (strcmp(key, "transaction_timeout") == 0)
		return cstr_time(key, val, &u->transaction_timeout, errbuf, errsize);
	unknown_key("user", key, errbuf, errsize);
	return -1;
}

static int peer_set_key(struct peer_config *peer, const char *key, const char *val, char *errbuf, size_t errsize)
{
	if (strcmp(key, "host") == 0) {
		replace_str(&peer->host, val);
		return 0;
	}
	if (strcmp(key, "port") == 0)
		return cstr_int(key, val, 1, 65535, &peer->port, errbuf, errsize);
	if (strcmp(key, "pool_size") == 0)
		return cstr_int(key, val, 0, INT_MAX, &peer->pool_size, errbuf, errsize);
	unknown_key("peer", key, errbuf, errsize);
	return -1;
}

typedef int (*cstr_setter)(void *target, const char *key, const char *val, char *errbuf, size_t errsize);

static int parse_cstr(const char *str, void *target, cstr_setter set, char *errbuf, size_t errsize)
{
	const char *p = str ? str : "";
	char *key, *val;
	int item = 1;
	int rc;

	while ((rc = cstr_next(&p, item, &key, &val, errbuf, errsize)) > 0) {
		rc = set(target, key, val, errbuf, errsize);
		free(key);
		free(val);
		if (rc < 0)
			return -1;
		item++;
	}
	return rc;
}

static int db_setter(void *t, const char *k, const char *v, char *e, size_t n) { return db_set_key(t, k, v, e, n); }
static int user_setter(void *t, const char *k, const char *v, char *e, size_t n) { return user_set_key(t, k, v, e, n); }
static int peer_setter(void *t, const char *k, const char *v, char *e, size_t n) { return peer_set_key(t, k, v, e, n); }

int config_db_set(struct db_config *db, const char *key, const char *value, char *errbuf, size_t errsize)
{
	return db_set_key(db, key, value, errbuf, errsize);
}

int config_parse_db_string(const char *str, struct db_config *db, char *errbuf, size_t errsize)
{
	return parse_cstr(str, db, db_setter, errbuf, errsize);
}

bool config_list_contains(const char *list, const char *name)
{
	size_t nlen;
	const char *p = list;

	if (!list || !name || !*name)
		return false;
	nlen = strlen(name);
	while (*p) {
		const char *start;
		while (*p == ',' || isspace((unsigned char)*p))
			p++;
		start = p;
		while (*p && *p != ',' && !isspace((unsigned char)*p))
			p++;
		if ((size_t)(p - start) == nlen && memcmp(start, name, nlen) == 0)
			return true;
	}
	return false;
}

bool config_is_admin_dbname(const char *name)
{
	return strcmp(name, "pgbouncer") == 0 || strcmp(name, "pgvalve") == 0;
}

const char *pool_mode_name(int mode)
{
	if (mode >= 0 && mode < (int)ARRAY_SIZE(pool_mode_names) - 1)
		return pool_mode_names[mode];
	return "unknown";
}

const char *auth_type_name(int type)
{
	if (type >= 0 && type < (int)ARRAY_SIZE(auth_type_names) - 1)
		return auth_type_names[type];
	return "unknown";
}

/* ------------------------------------------------------------------ defaults / free */

struct config *config_defaults(void)
{
	struct config *cfg = xcalloc(1, sizeof(*cfg));
	char why[256];

	for (size_t i = 0; i < ARRAY_SIZE(params); i++) {
		if (params[i].alias_of)
			continue;
		if (config_set_param(cfg, &params[i], params[i].default_value, why, sizeof(why)) < 0)
			die("bad built-in default for %s: %s", params[i].name, why);
	}
	cfg->path = xstrdup("");
	return cfg;
}

void config_free(struct config *cfg)
{
	if (!cfg)
		return;
	for (size_t i = 0; i < ARRAY_SIZE(params); i++)
		if (params[i].type == PARAM_STRING && !params[i].alias_of)
			free(*(char **)((char *)cfg + params[i].offset));
	while (cfg->databases) {
		struct db_config *next = cfg->databases->next;
		config_db_free(cfg->databases);
		cfg->databases = next;
	}
	while (cfg->users) {
		struct user_config *next = cfg->users->next;
		user_free(cfg->users);
		cfg->users = next;
	}
	while (cfg->peers) {
		struct peer_config *next = cfg->peers->next;
		peer_free(cfg->peers);
		cfg->peers = next;
	}
	free(cfg->path);
	free(cfg);
}

/* ------------------------------------------------------------------ the loader */

enum section {
	SECTION_NONE,
	SECTION_MAIN,
	SECTION_DATABASES,
	SECTION_USERS,
	SECTION_PEERS,
};

struct loader {
	struct config *cfg;
	struct config_error *err;
	enum section section;
	bool saw_main;
	bool warned[ARRAY_SIZE(params)];	/* "not supported yet" already logged this load */
};

/* Where a line is, for messages: "file:line". */
struct position {
	const char *file;
	int line;
};

static int load_error(struct loader *ld, const struct position *pos, const char *fmt, ...) PRINTF_LIKE(3, 4);
static int load_error(struct loader *ld, const struct position *pos, const char *fmt, ...)
{
	char *msg;
	size_t size, used;
	va_list ap;

	if (!ld->err)
		return -1;
	msg = ld->err->message;
	size = sizeof(ld->err->message);
	used = (size_t)snprintf(msg, size, "%s:%d: ", pos->file, pos->line);
	if (used >= size)
		return -1;
	va_start(ap, fmt);
	vsnprintf(msg + used, size - used, fmt, ap);
	va_end(ap);
	return -1;
}

static char *origin_of(const struct position *pos)
{
	size_t size = strlen(pos->file) + 16;
	char *s = xmalloc(size);
	snprintf(s, size, "%s:%d", pos->file, pos->line);
	return s;
}

/* Reads a whole file; NULL with errno set on failure. */
static char *read_file(const char *path, size_t *len_out)
{
	FILE *f = fopen(path, "r");
	size_t cap = 8192, len = 0, n;
	char *buf;
	int saved;

	if (!f)
		return NULL;
	buf = xmalloc(cap);
	for (;;) {
		if (cap - len < 4096) {
			cap *= 2;
			buf = xrealloc(buf, cap);
		}
		n = fread(buf + len, 1, cap - len - 1, f);
		len += n;
		if (n == 0)
			break;
	}
	if (ferror(f)) {
		saved = errno ? errno : EIO;
		fclose(f);
		free(buf);
		errno = saved;
		return NULL;
	}
	fclose(f);
	buf[len] = '\0';
	*len_out = len;
	return buf;
}

static int set_section(struct loader *ld, const struct position *pos, const char *name)
{
	static const struct { const char *name; enum section section; } sections[] = {
		{ "pgbouncer", SECTION_MAIN }, { "pgvalve", SECTION_MAIN },
		{ "databases", SECTION_DATABASES }, { "users", SECTION_USERS }, { "peers", SECTION_PEERS },
	};
	char nbuf[64];

	for (size_t i = 0; i < ARRAY_SIZE(sections); i++) {
		if (strcasecmp(name, sections[i].name) == 0) {
			ld->section = sections[i].section;
			if (ld->section == SECTION_MAIN)
				ld->saw_main = true;
			return 0;
		}
	}
	return load_error(ld, pos, "unknown section \"%s\"", shorten(name, nbuf, sizeof(nbuf)));
}

/* Edit distance of a and b, case-insensitive, capped at 3 (more means "not a typo"). */
static int typo_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	int row[64];

	if (la >= ARRAY_SIZE(row) || lb >= ARRAY_SIZE(row) || (la > lb ? la - lb : lb - la) > 3)
		return 3;
	for (size_t j = 0; j <= lb; j++)
		row[j] = (int)j;
	for (size_t i = 1; i <= la; i++) {
		int diag = row[0];
		row[0] = (int)i;
		for (size_t j = 1; j <= lb; j++) {
			int up = row[j];
			int cost = tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]);
			row[j] = MIN(MIN(row[j] + 1, row[j - 1] + 1), diag + cost);
			diag = up;
		}
	}
	return MIN(row[lb], 3);
}

/* The known parameter a misspelt key most likely meant (two edits at most), or NULL. */
static const char *closest_param(const char *key)
{
	const char *best = NULL;
	int best_d = 3;

	for (size_t i = 0; i < ARRAY_SIZE(params); i++) {
		int d = typo_distance(key, params[i].name);
		if (d < best_d) {
			best_d = d;
			best = params[i].name;
		}
	}
	return best;
}

/* tenant_from: a list of user, sni and options (tenant.h), each at most once. */
static bool tenant_from_valid(const char *value, char *why, size_t size)
{
	static const char *const words[] = { "user", "sni", "options" };
	const char *p = value;
	while (*p) {
		while (*p == ',' || isspace((unsigned char)*p))
			p++;
		size_t len = strcspn(p, ", \t\r\n");
		if (!len)
			break;
		bool known = false;
		for (size_t i = 0; i < ARRAY_SIZE(words); i++)
			known |= strlen(words[i]) == len && memcmp(words[i], p, len) == 0;
		if (!known) {
			snprintf(why, size, "unknown source \"%.*s\" (user, sni or options)", (int)MIN(len, 32), p);
			return false;
		}
		p += len;
	}
	return true;
}

static int set_main_key(struct loader *ld, const struct position *pos, const char *key, const char *value)
{
	const struct param_def *p = config_find_param(key);
	char why[256], vbuf[96], kbuf[64];

	/* As PgBouncer: a typo must not leave a setting silently at its default. */
	if (!p) {
		const char *hint = closest_param(key);
		return load_error(ld, pos, "unknown parameter \"%s\"%s%s%s", shorten(key, kbuf, sizeof(kbuf)),
				  hint ? " (did you mean " : "", hint ? hint : "", hint ? "?)" : "");
	}
	if (config_set_param(ld->cfg, p, value, why, sizeof(why)) < 0)
		return load_error(ld, pos, "invalid value \"%s\" for parameter %s: %s",
				  shorten(value, vbuf, sizeof(vbuf)), p->name, why);
	/* As PgBouncer: the admin console cannot answer auth_query. */
	if (strcmp(p->name, "auth_dbname") == 0 && (strcmp(value, "pgbouncer") == 0 || strcmp(value, "pgvalve") == 0))
		return load_error(ld, pos, "cannot use the reserved \"%s\" database as an auth_dbname", value);
	/* Refused rather than ignored: a login method that cannot work must not look configured. */
	if (((strcmp(p->name, "auth_type") == 0 && ld->cfg->auth_type == AUTH_TYPE_LDAP) ||
	     (strcmp(p->name, "auth_ldap_options") == 0 && value[0])) && !ldap_auth_built())
		return load_error(ld, pos, "%s: LDAP authentication is not supported (pgvalve has no LDAP client)",
				  p->name);
	if (strcmp(p->name, "auth_ldap_options") == 0 && value[0] && !ldap_auth_check_options(value, why, sizeof(why)))
		return load_error(ld, pos, "auth_ldap_options: %s", why);
	/* A source of tenant ids pgvalve does not know would silently route nobody. */
	if (strcmp(p->name, "tenant_from") == 0 && !tenant_from_valid(value, why, sizeof(why)))
		return load_error(ld, pos, "tenant_from: %s", why);
	if (!p->implemented && !ld->warned[p - params]) {
		ld->warned[p - params] = true;
		log_warning("%s:%d: parameter \"%s\" is not supported yet, ignored", pos->file, pos->line, p->name);
	}
	return 0;
}

/*
 * Puts item into the list at *head: in place of the entry `cur` for which
 * `same` holds (that one is freed with free_fn), or at the end.
 */
#define LIST_PUT(head, item, cur, same, free_fn) do {				\
		__typeof__(item) *link_ = (head);				\
		for (; *link_; link_ = &(*link_)->next) {			\
			__typeof__(item) cur = *link_;				\
			if (same) {						\
				(item)->next = cur->next;			\
				free_fn(cur);					\
				break;						\
			}							\
		}								\
		*link_ = (item);						\
	} while (0)

static int add_database(struct loader *ld, const struct position *pos, const char *name, const char *value)
{
	struct db_config *db;
	char why[256], nbuf[96];

	if (strcmp(name, "pgbouncer") == 0)
		return load_error(ld, pos, "database name \"pgbouncer\" is reserved for the admin console");
	db = config_db_new(name);
	db->target_session_attrs = -1;	/* not given: the [pgbouncer] section's, once it is read (db_defaults) */
	if (config_parse_db_string(value, db, why, sizeof(why)) < 0) {
		config_db_free(db);
		return load_error(ld, pos, "database \"%s\": %s", shorten(name, nbuf, sizeof(nbuf)), why);
	}
	free(db->origin);
	db->origin = origin_of(pos);
	LIST_PUT(&ld->cfg->databases, db, cur, strcmp(cur->name, name) == 0, config_db_free);
	return 0;
}

static int add_user(struct loader *ld, const struct position *pos, const char *name, const char *value)
{
	struct user_config *u = user_new(name);
	char why[256], nbuf[96];

	if (parse_cstr(value, u, user_setter, why, sizeof(why)) < 0) {
		user_free(u);
		return load_error(ld, pos, "user \"%s\": %s", shorten(name, nbuf, sizeof(nbuf)), why);
	}
	free(u->origin);
	u->origin = origin_of(pos);
	LIST_PUT(&ld->cfg->users, u, cur, strcmp(cur->name, name) == 0, user_free);
	return 0;
}

static int add_peer(struct loader *ld, const struct position *pos, const char *name, const char *value)
{
	struct peer_config *peer;
	char why[256], nbuf[64];
	int id;

	if (config_parse_int(name, 1, 65535, &id, NULL, 0) < 0)
		return load_error(ld, pos, "peer id \"%s\" must be a number between 1 and 65535",
				  shorten(name, nbuf, sizeof(nbuf)));
	peer = peer_new(id);
	if (parse_cstr(value, peer, peer_setter, why, sizeof(why)) < 0) {
		peer_free(peer);
		return load_error(ld, pos, "peer %d: %s", id, why);
	}
	if (!peer->host[0]) {
		peer_free(peer);
		return load_error(ld, pos, "peer %d: host is required", id);
	}
	free(peer->origin);
	peer->origin = origin_of(pos);
	LIST_PUT(&ld->cfg->peers, peer, cur, cur->peer_id == id, peer_free);
	return 0;
}

/*
 * Splits "key = value". The key may be quoted with double quotes ("" for a
 * quote, SQL identifier style) or single quotes; a bare key runs up to
 * whitespace or '='. On success *key is allocated and *value points into line.
 */
static int split_key_value(struct loader *ld, const struct position *pos, const char *line,
			   char **key, const char **value)
{
	const char *p = line;
	char *k;
	size_t n = 0;

	if (*p == '"' || *p == '\'') {
		char q = *p++;
		k = xmalloc(strlen(p) + 1);
		for (;;) {
			if (!*p) {
				free(k);
				return load_error(ld, pos, "unterminated quoted name");
			}
			if (p[0] == q && p[1] == q) {
				k[n++] = q;
				p += 2;
			} else if (p[0] == q) {
				p++;
				break;
			} else {
				k[n++] = *p++;
			}
		}
		k[n] = '\0';
		if (n == 0) {
			free(k);
			return load_error(ld, pos, "empty quoted name");
		}
	} else {
		const char *start = p;
		while (*p && !is_blank(*p) && *p != '=')
			p++;
		if (p == start)
			return load_error(ld, pos, "syntax error: expected \"key = value\", a [section] or a comment");
		k = xstrndup(start, (size_t)(p - start));
	}
	while (is_blank(*p))
		p++;
	if (*p != '=') {
		free(k);
		return load_error(ld, pos, "syntax error: expected \"key = value\", a [section] or a comment");
	}
	p++;
	while (is_blank(*p))
		p++;
	*key = k;
	*value = p;
	return 0;
}

static int parse_text(struct loader *ld, const char *text, size_t len, const char *file, int depth);

static int include_file(struct loader *ld, const struct position *pos, const char *path, int depth)
{
	char *text;
	size_t len = 0;
	char pbuf[256];
	int rc;

	if (!*path)
		return load_error(ld, pos, "%%include needs a file name");
	if (depth >= CONFIG_MAX_INCLUDE_DEPTH)
		return load_error(ld, pos, "include nesting too deep (at most %d levels)", CONFIG_MAX_INCLUDE_DEPTH);
	text = read_file(path, &len);
	if (!text)
		return load_error(ld, pos, "cannot open include file \"%s\": %s",
				  shorten(path, pbuf, sizeof(pbuf)), strerror(errno));
	rc = parse_text(ld, text, len, path, depth + 1);
	free(text);
	return rc;
}

static int parse_line(struct loader *ld, const struct position *pos, char *line, int depth)
{
	char *end = line + strlen(line);
	char *key = NULL;
	const char *value = NULL;
	int rc;

	while (is_blank(*line))
		line++;
	while (end > line && is_blank(end[-1]))
		*--end = '\0';
	if (!*line || *line == ';' || *line == '#')
		return 0;

	if (strncmp(line, "%include", 8) == 0 && (line[8] == '\0' || is_blank(line[8]))) {
		line += 8;
		while (is_blank(*line))
			line++;
		return include_file(ld, pos, line, depth);
	}

	if (*line == '[') {
		char *close = strchr(line, ']');
		char *rest;
		if (!close)
			return load_error(ld, pos, "syntax error: section name without ']'");
		rest = close + 1;
		while (is_blank(*rest))
			rest++;
		if (*rest && *rest != ';' && *rest != '#')
			return load_error(ld, pos, "syntax error: unexpected text after section name");
		*close = '\0';
		line++;
		while (is_blank(*line))
			line++;
		while (close > line && is_blank(close[-1]))
			*--close = '\0';
		return set_section(ld, pos, line);
	}

	if (split_key_value(ld, pos, line, &key, &value) < 0)
		return -1;
	switch (ld->section) {
	case SECTION_MAIN:
		rc = set_main_key(ld, pos, key, value);
		break;
	case SECTION_DATABASES:
		rc = add_database(ld, pos, key, value);
		break;
	case SECTION_USERS:
		rc = add_user(ld, pos, key, value);
		break;
	case SECTION_PEERS:
		rc = add_peer(ld, pos, key, value);
		break;
	default:
		rc = load_error(ld, pos, "parameter outside of any section");
		break;
	}
	free(key);
	return rc;
}

static int parse_text(struct loader *ld, const char *text, size_t len, const char *file, int depth)
{
	struct position pos = { .file = file, .line = 0 };
	const char *p = text, *end = text + len;

	if (memchr(text, '\0', len)) {
		pos.line = 1;
		return load_error(ld, &pos, "file contains a NUL byte");
	}
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
		char *line = xstrndup(p, n);
		int rc;

		pos.line++;
		rc = parse_line(ld, &pos, line, depth);
		free(line);
		if (rc < 0)
			return -1;
		p += n + (nl ? 1 : 0);
	}
	return 0;
}

/* [databases] lines that did not give them take the [pgbouncer] section's, wherever in the file it was. */
static void db_defaults(struct config *cfg)
{
	for (struct db_config *db = cfg->databases; db; db = db->next) {
		if (db->target_session_attrs < 0)
			db->target_session_attrs = cfg->target_session_attrs;
		if (db->load_balance_hosts < 0)
			db->load_balance_hosts = cfg->load_balance_hosts;
		if (db->load_balance_reads < 0)
			db->load_balance_reads = cfg->load_balance_reads;
	}
}

/*
 * load_balance_reads applies to a database whose servers must be on the
 * primary (read-write, primary) and whose host list has more than one
 * entry (balance.h); elsewhere it has no effect, and the operator is told so.
 */
static void warn_load_balance_reads(const struct config *cfg)
{
	for (const struct db_config *db = cfg->databases; db; db = db->next) {
		if (db->load_balance_reads <= LOAD_BALANCE_READS_OFF)
			continue;
		bool primary = db->target_session_attrs == TSA_READ_WRITE || db->target_session_attrs == TSA_PRIMARY;
		if (!primary || !strchr(db->host ? db->host : "", ','))
			log_warning("database \"%s\": load_balance_reads=%s has no effect without "
				    "target_session_attrs=read-write or primary and a host list", db->name,
				    config_load_balance_reads_name(db->load_balance_reads));
	}
}

static int load_text(const char *text, size_t len, const char *origin, struct config **out,
		     struct config_error *err)
{
	struct loader ld = { .err = err };

	ld.cfg = config_defaults();
	replace_str(&ld.cfg->path, origin);
	replace_str(&ld.cfg->conffile, origin);
	if (parse_text(&ld, text, len, origin, 0) < 0) {
		/* where start-up errors go too, if the file got that far */
		if (err)
			snprintf(err->logfile, sizeof(err->logfile), "%s", ld.cfg->logfile ? ld.cfg->logfile : "");
		goto fail;
	}
	db_defaults(ld.cfg);
	char why[sizeof(err->message)];
	if ((ld.cfg->sharded_databases = config_shard_check(ld.cfg, why, sizeof(why))) < 0) {
		if (err)
			snprintf(err->message, sizeof(err->message), "%s", why);
		goto fail;
	}
	if (!ld.saw_main) {
		if (err)
			snprintf(err->message, sizeof(err->message),
				 "%s: the [pgbouncer] (or [pgvalve]) section is missing", origin);
		goto fail;
	}
	warn_load_balance_reads(ld.cfg);
	*out = ld.cfg;
	return 0;
fail:
	config_free(ld.cfg);
	return -1;
}

int config_load_string(const char *text, const char *origin, struct config **out, struct config_error *err)
{
	*out = NULL;
	if (err)
		err->message[0] = err->logfile[0] = '\0';
	if (!origin)
		origin = "(string)";
	if (!text)
		text = "";
	return load_text(text, strlen(text), origin, out, err);
}

int config_load(const char *path, struct config **out, struct config_error *err)
{
	char *text;
	size_t len = 0;
	int rc;

	*out = NULL;
	if (err)
		err->message[0] = err->logfile[0] = '\0';
	text = read_file(path, &len);
	if (!text) {
		if (err)
			snprintf(err->message, sizeof(err->message), "cannot open config file \"%s\": %s",
				 path, strerror(errno));
		return -1;
	}
	rc = load_text(text, len, path, out, err);
	free(text);
	return rc;
}
