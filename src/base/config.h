/*
 * config.h - the pgbouncer.ini loader and the parameter table.
 *
 * config_load() reads a file (PgBouncer's format: [databases], [users],
 * [peers], [pgbouncer] or [pgvalve], %include) into a new, self-contained
 * struct config. Nothing is applied: the caller swaps it in (start-up) or
 * compares and applies it (reload), so a broken file never disturbs the
 * running configuration.
 *
 * One table, config_params(), lists every PgBouncer 1.26 parameter with its
 * type, default, whether it may change on reload, and whether pgvalve
 * implements it yet. Parsing, SHOW CONFIG and SET are all driven by it.
 *
 * Field naming: struct config has one field per parameter, named exactly as
 * the parameter. Strings are never NULL ("" when unset). Times are usec_t
 * (config values are seconds, fractions allowed). Booleans are bool.
 *
 * File format, as PgBouncer reads it:
 *   - section names are case-insensitive; [pgbouncer] and [pgvalve] are the
 *     same section; an unknown section is an error; the main section must
 *     be present; a section may be opened again later;
 *   - "key = value" lines, leading whitespace allowed, value trimmed; no
 *     inline comments (";" and "#" only start comment lines);
 *   - "%include path" (relative paths resolve against the working directory,
 *     like PgBouncer), nested up to CONFIG_MAX_INCLUDE_DEPTH;
 *   - a repeated key: the last one wins;
 *   - an unknown [pgbouncer] key warns, a not-yet-implemented one warns once
 *     per load ("... is not supported yet, ignored"), an invalid value fails
 *     the whole load.
 * Error messages never contain a line of the file ([databases] lines carry
 * passwords): they name the key.
 */
#ifndef PGVALVE_CONFIG_H
#define PGVALVE_CONFIG_H

#include "common.h"

#define CONFIG_MAX_INCLUDE_DEPTH 10
/* workers = N: at most this many processes (auto is capped to it too). */
#define CONFIG_MAX_WORKERS 128

enum pool_mode {
	POOL_MODE_SESSION = 0,
	POOL_MODE_TRANSACTION,
	POOL_MODE_STATEMENT,
};

enum auth_type {
	AUTH_TYPE_ANY = 0,
	AUTH_TYPE_TRUST,
	AUTH_TYPE_PLAIN,
	AUTH_TYPE_MD5,
	AUTH_TYPE_SCRAM_SHA_256,
	AUTH_TYPE_CERT,
	AUTH_TYPE_HBA,
	AUTH_TYPE_PAM,
	AUTH_TYPE_PEER,		/* only reachable through hba */
	AUTH_TYPE_REJECT,	/* only reachable through hba */
	AUTH_TYPE_LDAP,
	AUTH_TYPE_GSS,		/* only reachable through hba (PgBouncer has no global form) */
};

enum load_balance_hosts {
	LOAD_BALANCE_HOSTS_ROUND_ROBIN = 0,
	LOAD_BALANCE_HOSTS_DISABLE,
	LOAD_BALANCE_HOSTS_LEAST_CONNECTIONS,	/* the eligible entry with the fewest servers of the pool */
};

/* target_session_attrs, libpq's values and order; ANY (the default) checks nothing. */
enum target_session_attrs {
	TSA_ANY = 0,
	TSA_READ_WRITE,
	TSA_READ_ONLY,
	TSA_PRIMARY,
	TSA_STANDBY,
	TSA_PREFER_STANDBY,
};
/*
 * load_balance_reads (the read balancer, balance.h): whether a read-write
 * or primary database with a host list runs its clients' read-only
 * transactions on its standbys. OFF, the default, changes nothing.
 */
enum load_balance_reads {
	LOAD_BALANCE_READS_OFF = 0,
	LOAD_BALANCE_READS_EXPLICIT,	/* transactions the client marks read-only */
	LOAD_BALANCE_READS_AUTO,	/* and single statements outside a transaction that can only read */
};
/* Its name as written in the config ("read-write", ...). */
const char *config_target_session_attrs_name(int value);
/* The same for load_balance_reads (-1, not given: "off"). */
const char *config_load_balance_reads_name(int value);
/* The same for load_balance_hosts (-1, not given: "round-robin"). */
const char *config_load_balance_hosts_name(int value);

/* client_tls_sslmode / server_tls_sslmode, in PgBouncer's (and libpq's) order. */
enum tls_sslmode {
	TLS_SSLMODE_DISABLE = 0,
	TLS_SSLMODE_ALLOW,
	TLS_SSLMODE_PREFER,
	TLS_SSLMODE_REQUIRE,
	TLS_SSLMODE_VERIFY_CA,
	TLS_SSLMODE_VERIFY_FULL,
};

struct shard_config;

/*
 * One [databases] entry. Ints are -1 when not given (use the global value),
 * strings "" when not given. Create with config_db_new().
 */
struct db_config {
	struct db_config *next;
	char *name;		/* the key; "*" is the fallback database */
	char *host;		/* "" = Unix socket in the default directory; may be a comma list */
	int port;		/* default 5432 */
	char *dbname;		/* "" = same as name */
	char *user;		/* "" = the client's user name */
	char *password;
	char *auth_user;
	char *auth_query;
	char *auth_dbname;
	int pool_size;
	int min_pool_size;
	int reserve_pool_size;	/* keys reserve_pool and reserve_pool_size */
	int pool_mode;		/* enum pool_mode, or -1 */
	int max_db_connections;
	int max_db_client_connections;
	usec_t server_lifetime;	/* -1 = global */
	usec_t query_wait_timeout;	/* -1 = the global one ([users] comes first) */
	/*
	 * enum load_balance_hosts / target_session_attrs. In a file, a line
	 * without them takes the [pgbouncer] section's (filled in once the
	 * whole file is read); built otherwise: -1 (round-robin) and TSA_ANY.
	 */
	int load_balance_hosts;
	int target_session_attrs;
	int load_balance_reads;	/* enum load_balance_reads; the same rule (built otherwise: -1, off) */
	/* A standby behind its list's primary by more is not used (roles.h); 0: no limit. */
	long long max_replica_lag;	/* bytes of WAL */
	usec_t max_replica_lag_seconds;	/* time since the last transaction it replayed, while behind */
	char *connect_query;
	char *client_encoding;
	char *datestyle;
	char *timezone;
	char *application_name;
	struct shard_config *sharding;	/* shards= and sharding_key= (config_shard.h); NULL: not sharded */
	char *origin;		/* "file:line" where it was defined, for messages */
};

/* One [users] entry. Ints and times are -1 when not given. */
struct user_config {
	struct user_config *next;
	char *name;
	int pool_mode;		/* -1 = not set */
	int pool_size;
	int reserve_pool_size;
	int max_user_connections;
	int max_user_client_connections;
	usec_t query_timeout;	/* -1 = not set */
	usec_t query_wait_timeout;	/* -1 = not set: the database's, else the global one */
	usec_t idle_transaction_timeout;
	usec_t client_idle_timeout;
	usec_t transaction_timeout;
	char *origin;
};

/* One [peers] entry. */
struct peer_config {
	struct peer_config *next;
	int peer_id;		/* the key: 1..65535 */
	char *host;		/* required */
	int port;		/* default 6432 */
	int pool_size;		/* -1 = default_pool_size */
	char *origin;
};

enum param_type {
	PARAM_STRING,
	PARAM_INT,
	PARAM_BOOL,
	PARAM_TIME,		/* seconds in the file, usec_t in struct config */
	PARAM_ENUM,		/* stored as int; names in param_def.enum_names */
	PARAM_OCTAL,		/* unix_socket_mode */
};

struct param_def {
	const char *name;
	enum param_type type;
	const char *default_value;	/* as it would be written in the file */
	size_t offset;			/* into struct config */
	bool reloadable;		/* may change without a restart */
	bool implemented;		/* false: warn "not supported yet" when set */
	const char *const *enum_names;	/* PARAM_ENUM: NULL-terminated, index = stored value */
	int min_value;			/* PARAM_INT / PARAM_TIME(seconds): lowest accepted */
	int max_value;			/* PARAM_INT / PARAM_OCTAL: highest accepted */
	unsigned enum_unsettable;	/* PARAM_ENUM: bit i set = enum_names[i] is shown but cannot be set */
	const char *alias_of;		/* non-NULL: another name for that parameter (same field) */
	bool auto_is_zero;		/* PARAM_INT: "auto" is accepted and stored (and shown) as 0 */
};

struct config {
	/* [pgbouncer] / [pgvalve]: one field per parameter (see config.c's table). */

	/* generic */
	char *logfile;
	char *pidfile;
	char *listen_addr;
	int listen_port;
	int listen_backlog;
	char *unix_socket_dir;
	int unix_socket_mode;
	char *unix_socket_group;
	char *user;
	int pool_mode;			/* enum pool_mode */
	int load_balance_hosts;		/* pgvalve: the default of [databases] lines (enum load_balance_hosts) */
	int target_session_attrs;	/* pgvalve: the default of [databases] lines (enum target_session_attrs) */
	int load_balance_reads;		/* pgvalve: the default of [databases] lines (enum load_balance_reads) */
	usec_t load_balance_functions_refresh;	/* pgvalve: pg_proc re-read period for auto (0: start, RELOAD) */
	int max_client_conn;
	int default_pool_size;
	int min_pool_size;
	int reserve_pool_size;
	usec_t reserve_pool_timeout;
	int max_db_connections;
	int max_user_connections;
	int max_db_client_connections;
	int max_user_client_connections;
	bool server_round_robin;
	char *track_extra_parameters;
	bool track_client_set;		/* pgvalve extension, see session_set.h */
	char *ignore_startup_parameters;
	int peer_id;
	/* pgvalve extension: long cancel keys of protocol 3.2 clients (cancel_key.h) */
	char *cancel_key_secret;	/* "" = a random secret per process, keys name no address */
	char *cancel_advertise_addr;	/* "" = the local address of each client's connection */
	int cancel_advertise_port;	/* 0 = the port the client came in on (listen_port with an address) */
	char *peers_dns;		/* pgvalve extension: a name resolving to every instance ("" = none) */
	int peers_dns_port;		/* their port (0 = listen_port) */
	bool disable_pqexec;
	bool application_name_add_host;
	char *conffile;			/* the main file unless the file sets it */
	char *job_name;			/* service_name is an alias */
	usec_t stats_period;
	int max_prepared_statements;
	bool notify_support;		/* pgvalve extension, see notify.h */
	int notify_buffer_limit;	/* bytes; 0: no limit */
	int scram_iterations;

	/* authentication */
	int auth_type;			/* enum auth_type */
	char *auth_hba_file;
	char *auth_ident_file;
	char *auth_file;
	char *auth_user;
	char *auth_query;
	char *auth_dbname;
	char *auth_ldap_options;
	char *auth_krb_server_keyfile;	/* gss: the keytab; "" is KRB5_KTNAME or Kerberos' default */
	char *krb_srvname;		/* gss: the service name clients ask tickets for */
	usec_t auth_ldap_timeout;	/* pgvalve: one LDAP check, from its start (ldap_auth.h) */
	int auth_ldap_max_concurrent;	/* pgvalve: LDAP checks talking to directories at once */

	/* log */
	bool syslog;
	char *syslog_ident;
	char *syslog_facility;
	bool log_connections;
	bool log_disconnections;
	bool log_pooler_errors;
	bool log_stats;
	int verbose;
	char *login_notify_message;	/* "" = none; else a NOTICE in every login's welcome */

	/* console access */
	char *admin_users;
	char *stats_users;

	/* connection sanity checks, timeouts */
	char *server_reset_query;
	bool server_reset_query_always;
	usec_t server_check_delay;
	usec_t server_role_check_period;	/* 0: idle servers' roles are not checked (roles.c) */
	char *server_check_query;	/* "" = no check; "<empty>" (default) = send an empty query */
	bool server_fast_close;
	usec_t server_lifetime;
	usec_t server_idle_timeout;
	usec_t server_connect_timeout;
	usec_t server_login_retry;
	usec_t client_login_timeout;
	usec_t autodb_idle_timeout;
	usec_t pool_idle_timeout;
	usec_t dns_max_ttl;
	usec_t dns_nxdomain_ttl;
	usec_t dns_zone_check_period;
	char *resolv_conf;
	usec_t query_wait_notify;

	/* TLS */
	int client_tls_sslmode;		/* enum tls_sslmode */
	char *client_tls_key_file;
	char *client_tls_cert_file;
	char *client_tls_ca_file;
	char *client_tls_protocols;
	char *client_tls_ciphers;
	char *client_tls13_ciphers;
	char *client_tls_ecdhcurve;
	char *client_tls_dheparams;
	int server_tls_sslmode;		/* enum tls_sslmode */
	char *server_tls_ca_file;
	char *server_tls_key_file;
	char *server_tls_cert_file;
	char *server_tls_protocols;
	char *server_tls_ciphers;
	char *server_tls13_ciphers;

	/* dangerous timeouts */
	usec_t query_timeout;
	usec_t query_wait_timeout;
	usec_t cancel_wait_timeout;
	usec_t client_idle_timeout;
	usec_t idle_transaction_timeout;
	usec_t transaction_timeout;
	usec_t suspend_timeout;

	/* low-level network */
	int pkt_buf;
	int max_packet_size;
	int sbuf_loopcnt;
	bool so_reuseport;
	bool tcp_defer_accept;
	int tcp_socket_buffer;
	bool tcp_keepalive;
	int tcp_keepcnt;
	int tcp_keepidle;
	int tcp_keepintvl;
	int tcp_user_timeout;		/* milliseconds, as in PgBouncer */

	/* pgvalve extensions */
	int workers;			/* processes serving the port; 0 = auto (online CPUs) */
	/* metrics endpoint (metrics_http.h): off while metrics_port is 0 */
	char *metrics_listen_addr;
	int metrics_port;
	char *metrics_auth_token;	/* "" = no Authorization needed */
	bool metrics_tls;		/* HTTPS with the client_tls_* certificate */
	/* tenants (tenant.h): routing is on when tenant_source and tenant_from are both set */
	char *tenant_source;		/* a connection string, or the name of a [databases] entry */
	char *tenant_query;		/* the tenant id as $1 (a bound parameter), one row */
	usec_t tenant_cache_ttl;	/* how long a row (or its absence, at most 5 s) is trusted */
	char *tenant_from;		/* user, sni, options: where a login's tenant id may come from */
	/* drain (drain.h) */
	bool shutdown_drain;		/* SIGTERM drains instead of SHUTDOWN WAIT_FOR_CLIENTS */
	usec_t drain_timeout;		/* 0 = no limit */

	/* Sections. */
	struct db_config *databases;	/* in file order; a repeated name replaces the entry in place */
	int sharded_databases;		/* how many of them have shards= (config_shard.h): 0 spares logins the lookup */
	struct user_config *users;
	struct peer_config *peers;

	char *path;		/* the main file (or the origin given to config_load_string) */
};

/* Error details of config_load(): "file:line: message". */
struct config_error {
	char message[512];
	char logfile[1024];	/* the logfile set before the error, if any: start-up errors go there too */
};

/* Loads path into *out (a new config with defaults for everything not set). */
int config_load(const char *path, struct config **out, struct config_error *err);
/* The same from a string; `origin` stands in for the file name in messages. */
int config_load_string(const char *text, const char *origin, struct config **out, struct config_error *err);
/* A config holding only the defaults. */
struct config *config_defaults(void);
void config_free(struct config *cfg);

const struct param_def *config_params(size_t *count);
/* Case-insensitive lookup; NULL if unknown. */
const struct param_def *config_find_param(const char *name);
/* Formats a parameter's current value the way SHOW CONFIG prints it. */
void config_format_value(const struct config *cfg, const struct param_def *p, char *buf, size_t size);
/* Sets one parameter from text (used by SET and by the loader). On error returns -1,
 * writes the reason to errbuf and leaves the old value untouched. */
int config_set_param(struct config *cfg, const struct param_def *p, const char *value,
		     char *errbuf, size_t errsize);

/* Exact, case-sensitive name match. config_find_db does not fall back to "*". */
const struct db_config *config_find_db(const struct config *cfg, const char *name);
const struct user_config *config_find_user(const struct config *cfg, const char *name);

/* Adds a [peers] entry, or replaces the one with that id (pool_size: the default). */
void config_put_peer(struct config *cfg, int peer_id, const char *host, int port, const char *origin);
/* Removes the [peers] entry with that id, if any. */
void config_drop_peer(struct config *cfg, int peer_id);

/* A [databases] entry with nothing given (ints -1, strings "", port 5432). */
struct db_config *config_db_new(const char *name);
/* A deep copy under another name (e.g. an autodb made from "*"); next is NULL. */
struct db_config *config_db_clone(const struct db_config *src, const char *name);
void config_db_free(struct db_config *db);

/*
 * Parses a libpq-style "key=value key='quoted value'" string into db,
 * filling only the keys given. Inside single quotes, '' and \' stand for a
 * quote and \\ for a backslash. Returns 0, or -1 with errbuf set (the
 * message names the key, never a password value); db may then be partly
 * filled. db must come from config_db_new().
 */
int config_parse_db_string(const char *str, struct db_config *db, char *errbuf, size_t errsize);

/*
 * Sets one key of a [databases] entry from text, checked as in the file
 * (a tenant's row, tenant.c). Returns 0, or -1 with errbuf set.
 */
int config_db_set(struct db_config *db, const char *key, const char *value, char *errbuf, size_t errsize);

/* Whether a comma/space separated list (admin_users, ignore_startup_parameters...) holds name.
 * Exact, case-sensitive comparison. */
bool config_list_contains(const char *list, const char *name);
/* The admin console's reserved database names, "pgbouncer" and "pgvalve": no [databases] entry may serve them. */
bool config_is_admin_dbname(const char *name);

const char *pool_mode_name(int mode);
/* "md5", "scram-sha-256", ...; "unknown" for anything else. */
const char *auth_type_name(int type);

#endif
