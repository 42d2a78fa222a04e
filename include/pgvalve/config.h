/*
 * config.h - the pgbouncer.ini loader and the parameter table.
 *
 * config_load() reads a file (PgBouncer's format: [databases], [users],
 * [peers], [pgbouncer] or [pgvalve], %include) into a new, self-contained
 * struct config. Nothing is applied: the caller swaps it in (start-up) or
 * compares and applies it (reload), so a broken file never disturbs the
 * running configuration.
 *
 * One table, config_params(), lists every PgBouncer 1.25 parameter with its
 * type, default, whether it may change on reload, and whether pgvalve
 * implements it yet. Parsing, SHOW CONFIG and SET are all driven by it.
 *
 * Field naming: struct config has one field per parameter, named exactly as
 * the parameter. Strings are never NULL ("" when unset). Times are usec_t
 * (config values are seconds, fractions allowed). Booleans are bool.
 */
#ifndef PGVALVE_CONFIG_H
#define PGVALVE_CONFIG_H

#include "pgvalve/common.h"

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
	AUTH_TYPE_PEER,
	AUTH_TYPE_REJECT,	/* only reachable through hba */
};

enum load_balance_hosts {
	LOAD_BALANCE_HOSTS_ROUND_ROBIN = 0,
	LOAD_BALANCE_HOSTS_DISABLE,
};

/* One [databases] entry. Ints are -1 when not given (use the global value). */
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
	int load_balance_hosts;	/* enum load_balance_hosts, or -1 */
	char *connect_query;
	char *client_encoding;
	char *datestyle;
	char *timezone;
	char *application_name;
	char *origin;		/* "file:line" where it was defined, for messages */
};

/* One [users] entry. */
struct user_config {
	struct user_config *next;
	char *name;
	int pool_mode;		/* -1 = not set */
	int pool_size;
	int reserve_pool_size;
	int max_user_connections;
	int max_user_client_connections;
	usec_t query_timeout;	/* -1 = not set */
	usec_t idle_transaction_timeout;
	usec_t client_idle_timeout;
	usec_t transaction_timeout;
	char *origin;
};

/* One [peers] entry. */
struct peer_config {
	struct peer_config *next;
	int peer_id;
	char *host;
	int port;
	int pool_size;
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
};

struct config {
	/* [pgbouncer] / [pgvalve]: one field per parameter (see config.c's table). */
	char *logfile;
	char *pidfile;
	char *listen_addr;
	int listen_port;
	int listen_backlog;
	char *unix_socket_dir;
	int unix_socket_mode;
	char *unix_socket_group;
	char *user;
	int pool_mode;
	int auth_type;
	char *auth_file;
	char *auth_hba_file;
	char *auth_ident_file;
	char *auth_user;
	char *auth_query;
	char *auth_dbname;
	int max_client_conn;
	int default_pool_size;
	int min_pool_size;
	int reserve_pool_size;
	usec_t reserve_pool_timeout;
	int max_db_connections;
	int max_user_connections;
	int max_db_client_connections;
	int max_user_client_connections;
	char *server_reset_query;
	bool server_reset_query_always;
	char *server_check_query;
	usec_t server_check_delay;
	bool server_round_robin;
	usec_t server_lifetime;
	usec_t server_idle_timeout;
	usec_t server_connect_timeout;
	usec_t server_login_retry;
	bool server_fast_close;
	usec_t client_login_timeout;
	usec_t client_idle_timeout;
	usec_t query_timeout;
	usec_t query_wait_timeout;
	usec_t idle_transaction_timeout;
	usec_t transaction_timeout;
	usec_t cancel_wait_timeout;
	usec_t suspend_timeout;
	usec_t autodb_idle_timeout;
	usec_t pool_idle_timeout;	/* hypothetical in 1.25? keep if listed */
	char *ignore_startup_parameters;
	char *track_extra_parameters;
	char *admin_users;
	char *stats_users;
	usec_t stats_period;
	bool log_connections;
	bool log_disconnections;
	bool log_pooler_errors;
	bool log_stats;
	int verbose;
	bool syslog;
	char *syslog_ident;
	char *syslog_facility;
	int pkt_buf;
	int max_packet_size;
	int sbuf_loopcnt;
	bool disable_pqexec;
	char *application_name_add_host;	/* bool in PgBouncer; see table */
	bool so_reuseport;
	int peer_id;
	bool tcp_defer_accept;
	int tcp_socket_buffer;
	bool tcp_keepalive;
	int tcp_keepcnt;
	int tcp_keepidle;
	int tcp_keepintvl;
	usec_t tcp_user_timeout;
	int max_prepared_statements;
	int scram_iterations;
	char *client_tls_sslmode;
	char *server_tls_sslmode;
	/* ... every other PgBouncer 1.25 parameter, see config.c ... */

	/* Sections. */
	struct db_config *databases;	/* in file order */
	struct user_config *users;
	struct peer_config *peers;

	char *path;		/* the main file */
	/* Keys set in the file but not implemented yet: warned once each at load. */
};

/* Error details of config_load(): "file:line: message". */
struct config_error {
	char message[512];
};

/* Loads path into *out (a new config with defaults for everything not set). */
int config_load(const char *path, struct config **out, struct config_error *err);
/* The same from a string; `origin` stands in for the file name in messages. */
int config_load_string(const char *text, const char *origin, struct config **out, struct config_error *err);
/* A config holding only the defaults. */
struct config *config_defaults(void);
void config_free(struct config *cfg);

const struct param_def *config_params(size_t *count);
const struct param_def *config_find_param(const char *name);
/* Formats a parameter's current value the way SHOW CONFIG prints it. */
void config_format_value(const struct config *cfg, const struct param_def *p, char *buf, size_t size);
/* Sets one parameter from text (used by SET and by the loader). */
int config_set_param(struct config *cfg, const struct param_def *p, const char *value,
		     char *errbuf, size_t errsize);

const struct db_config *config_find_db(const struct config *cfg, const char *name);
const struct user_config *config_find_user(const struct config *cfg, const char *name);

/*
 * Parses a libpq-style "key=value key='quoted value'" string into db,
 * filling only the keys given. Returns 0, or -1 with errbuf set.
 */
int config_parse_db_string(const char *str, struct db_config *db, char *errbuf, size_t errsize);

/* Whether a comma/space separated list (admin_users, ignore_startup_parameters...) holds name. */
bool config_list_contains(const char *list, const char *name);

const char *pool_mode_name(int mode);

#endif
