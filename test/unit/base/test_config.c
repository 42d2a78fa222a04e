/*
 * test_config.c - unit tests for src/base/config.c: the pgbouncer.ini reader,
 * the parameter table, SET/SHOW CONFIG value handling and the
 * [databases]/[users]/[peers] connection strings.
 */
#include "common.h"
#include "config.h"
#include "ldap_auth.h"
#include "../check_main.h"

#include <check.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------------ helpers */

static struct config *load_ok(const char *text)
{
	struct config *cfg = NULL;
	struct config_error err = { .message = "" };
	int rc = config_load_string(text, "t.ini", &cfg, &err);
	ck_assert_msg(rc == 0, "load failed: %s", err.message);
	ck_assert_ptr_nonnull(cfg);
	return cfg;
}

/* Loads text that must fail; returns the message (static buffer). */
static const char *load_fail(const char *text)
{
	static struct config_error err;
	struct config *cfg = (struct config *)1;
	memset(&err, 0, sizeof(err));
	int rc = config_load_string(text, "t.ini", &cfg, &err);
	ck_assert_int_eq(rc, -1);
	ck_assert_ptr_null(cfg);
	ck_assert_msg(err.message[0] != '\0', "no error message");
	return err.message;
}

#define assert_contains(hay, needle) \
	ck_assert_msg(strstr((hay), (needle)) != NULL, "\"%s\" does not contain \"%s\"", (hay), (needle))

/* stderr capture, to check what the loader logs */
static int saved_stderr = -1;
static char capture_path[64];

static void capture_start(void)
{
	int fd;
	strcpy(capture_path, "/tmp/test_config_log_XXXXXX");
	fd = mkstemp(capture_path);
	ck_assert_int_ge(fd, 0);
	fflush(stderr);
	saved_stderr = dup(2);
	dup2(fd, 2);
	close(fd);
}

static char *capture_end(void)
{
	FILE *f;
	long len;
	char *buf;

	fflush(stderr);
	dup2(saved_stderr, 2);
	close(saved_stderr);
	f = fopen(capture_path, "r");
	ck_assert_ptr_nonnull(f);
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = xmalloc((size_t)len + 1);
	buf[fread(buf, 1, (size_t)len, f)] = '\0';
	fclose(f);
	unlink(capture_path);
	return buf;
}

static int count_occurrences(const char *hay, const char *needle)
{
	int n = 0;
	for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
		n++;
	return n;
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	ck_assert_msg(f != NULL, "cannot write %s", path);
	fputs(text, f);
	fclose(f);
}

/* A fresh temporary directory; the test process (forked by Check) may chdir into it. */
static char *make_tmpdir(void)
{
	char *dir = xstrdup("/tmp/test_config_XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	return dir;
}

static char *path_in(const char *dir, const char *name)
{
	size_t n = strlen(dir) + strlen(name) + 2;
	char *p = xmalloc(n);
	snprintf(p, n, "%s/%s", dir, name);
	return p;
}

static void fmt(const struct config *cfg, const char *name, char *buf, size_t size)
{
	const struct param_def *p = config_find_param(name);
	ck_assert_msg(p != NULL, "no parameter %s", name);
	config_format_value(cfg, p, buf, size);
}

/* ------------------------------------------------------------------ defaults and table */

START_TEST(test_defaults_match_pgbouncer)
{
	struct config *cfg = config_defaults();

	ck_assert_int_eq(cfg->listen_port, 6432);
	ck_assert_int_eq(cfg->listen_backlog, 4096);	/* deliberately larger: a login storm is not dropped */
	ck_assert_int_eq(cfg->default_pool_size, 20);
	ck_assert_int_eq(cfg->max_client_conn, 100);
	ck_assert_int_eq(cfg->pool_mode, POOL_MODE_SESSION);
	ck_assert_int_eq(cfg->auth_type, AUTH_TYPE_MD5);
	ck_assert_str_eq(cfg->server_reset_query, "DISCARD ALL");
	ck_assert(!cfg->server_reset_query_always);
	ck_assert_int_eq(cfg->pkt_buf, 4096);
	ck_assert_int_eq(cfg->max_packet_size, 2147483647);
	ck_assert_int_eq(cfg->sbuf_loopcnt, 5);
	ck_assert(cfg->server_lifetime == 3600 * USEC_PER_SEC);
	ck_assert(cfg->server_idle_timeout == 600 * USEC_PER_SEC);
	ck_assert(cfg->server_connect_timeout == 15 * USEC_PER_SEC);
	ck_assert(cfg->server_login_retry == 15 * USEC_PER_SEC);
	ck_assert(cfg->client_login_timeout == 60 * USEC_PER_SEC);
	ck_assert(cfg->query_wait_timeout == 120 * USEC_PER_SEC);
	ck_assert(cfg->cancel_wait_timeout == 10 * USEC_PER_SEC);
	ck_assert(cfg->reserve_pool_timeout == 5 * USEC_PER_SEC);
	ck_assert(cfg->autodb_idle_timeout == 3600 * USEC_PER_SEC);
	ck_assert(cfg->server_check_delay == 30 * USEC_PER_SEC);
	ck_assert(cfg->query_timeout == 0);
	ck_assert(cfg->client_idle_timeout == 0);
	ck_assert(cfg->stats_period == 60 * USEC_PER_SEC);
	ck_assert_str_eq(cfg->unix_socket_dir, "/tmp");
	ck_assert_int_eq(cfg->unix_socket_mode, 0777);
	ck_assert_str_eq(cfg->listen_addr, "");
	ck_assert_str_eq(cfg->server_check_query, "<empty>");
	ck_assert_str_eq(cfg->track_extra_parameters, "IntervalStyle");
	ck_assert_str_eq(cfg->syslog_facility, "daemon");
	ck_assert_str_eq(cfg->client_tls_protocols, "secure");
	ck_assert_str_eq(cfg->client_tls_ciphers, "default");
	ck_assert_int_eq(cfg->client_tls_sslmode, TLS_SSLMODE_DISABLE);
	ck_assert_int_eq(cfg->server_tls_sslmode, TLS_SSLMODE_PREFER);
	ck_assert(cfg->log_connections && cfg->log_disconnections && cfg->log_pooler_errors && cfg->log_stats);
	ck_assert(cfg->tcp_keepalive);
	ck_assert(!cfg->syslog);
	ck_assert(!cfg->application_name_add_host);
	ck_assert_int_eq(cfg->max_prepared_statements, 200);
	ck_assert_int_eq(cfg->scram_iterations, 4096);
	ck_assert_int_eq(cfg->verbose, 0);
	ck_assert_int_eq(cfg->peer_id, 0);
	assert_contains(cfg->auth_query, "FROM pg_authid WHERE rolname=$1");
	ck_assert_ptr_null(cfg->databases);
	ck_assert_ptr_null(cfg->users);
	ck_assert_ptr_null(cfg->peers);
	config_free(cfg);
}
END_TEST

START_TEST(test_strings_never_null)
{
	size_t n;
	const struct param_def *ps = config_params(&n);
	struct config *cfg = config_defaults();
	struct config *loaded = load_ok("[pgbouncer]\n");

	for (size_t i = 0; i < n; i++) {
		if (ps[i].type != PARAM_STRING)
			continue;
		ck_assert_msg(*(char **)((char *)cfg + ps[i].offset) != NULL, "%s is NULL", ps[i].name);
		ck_assert_msg(*(char **)((char *)loaded + ps[i].offset) != NULL, "%s is NULL", ps[i].name);
	}
	ck_assert_str_eq(loaded->path, "t.ini");
	config_free(cfg);
	config_free(loaded);
}
END_TEST

/* workers = N | auto: auto is stored as 0 and shown as auto; 0 and words are refused. */
START_TEST(test_workers_param)
{
	struct config *cfg = NULL;
	struct config_error err;
	char buf[64], why[256];
	const struct param_def *p = config_find_param("workers");
	ck_assert_ptr_nonnull(p);
	ck_assert(!p->reloadable);

	ck_assert_int_eq(config_load_string("[pgvalve]\n", "t.ini", &cfg, &err), 0);
	ck_assert_int_eq(cfg->workers, 1);
	config_free(cfg);
	ck_assert_int_eq(config_load_string("[pgvalve]\nworkers = 4\n", "t.ini", &cfg, &err), 0);
	ck_assert_int_eq(cfg->workers, 4);
	config_format_value(cfg, p, buf, sizeof(buf));
	ck_assert_str_eq(buf, "4");
	config_free(cfg);
	ck_assert_int_eq(config_load_string("[pgbouncer]\nworkers = AUTO\n", "t.ini", &cfg, &err), 0);
	ck_assert_int_eq(cfg->workers, 0);
	config_format_value(cfg, p, buf, sizeof(buf));
	ck_assert_str_eq(buf, "auto");
	ck_assert_int_eq(config_set_param(cfg, p, "0", why, sizeof(why)), -1);
	ck_assert_int_eq(config_set_param(cfg, p, "many", why, sizeof(why)), -1);
	ck_assert_int_eq(config_set_param(cfg, p, "129", why, sizeof(why)), -1);
	ck_assert_int_eq(cfg->workers, 0);
	config_free(cfg);
	ck_assert_int_eq(config_load_string("[pgvalve]\nworkers = 0\n", "t.ini", &cfg, &err), -1);
	ck_assert_msg(strstr(err.message, "workers"), "%s", err.message);
	/* auto does not leak into other integers */
	ck_assert_int_eq(config_load_string("[pgvalve]\ndefault_pool_size = auto\n", "t.ini", &cfg, &err), -1);
}
END_TEST

/*
 * drain_timeout (seconds, 0 = no limit, no negative) and shutdown_drain
 * (SIGTERM drains): off by default, so SIGTERM keeps PgBouncer's meaning;
 * both reloadable.
 */
START_TEST(test_drain_params)
{
	struct config *cfg = NULL;
	struct config_error err;
	char why[256];
	const struct param_def *t = config_find_param("drain_timeout");
	const struct param_def *d = config_find_param("shutdown_drain");
	ck_assert(t && d && t->reloadable && d->reloadable);
	ck_assert_int_eq(config_load_string("[pgvalve]\n", "t.ini", &cfg, &err), 0);
	ck_assert_int_eq(cfg->drain_timeout, 0);
	ck_assert(!cfg->shutdown_drain);
	config_free(cfg);
	ck_assert_int_eq(config_load_string("[pgvalve]\ndrain_timeout = 2.5\nshutdown_drain = 1\n", "t.ini", &cfg,
					    &err), 0);
	ck_assert_int_eq(cfg->drain_timeout, 2500000);
	ck_assert(cfg->shutdown_drain);
	ck_assert_int_eq(config_set_param(cfg, t, "-1", why, sizeof(why)), -1);
	ck_assert_int_eq(config_set_param(cfg, t, "soon", why, sizeof(why)), -1);
	ck_assert_int_eq(cfg->drain_timeout, 2500000);
	ck_assert_int_eq(config_set_param(cfg, t, "0", why, sizeof(why)), 0);
	ck_assert_int_eq(cfg->drain_timeout, 0);
	config_free(cfg);
}
END_TEST

/* Every [pgbouncer] parameter of PgBouncer 1.26, then pgvalve's extensions (workers). */
static const char *const pgbouncer_125_params[] = {
	"admin_users", "application_name_add_host", "auth_dbname", "auth_file", "auth_hba_file",
	"auth_ident_file", "auth_ldap_options", "auth_query", "auth_type", "auth_user",
	"autodb_idle_timeout", "cancel_wait_timeout", "client_idle_timeout", "client_login_timeout",
	"client_tls13_ciphers", "client_tls_ca_file", "client_tls_cert_file", "client_tls_ciphers",
	"client_tls_dheparams", "client_tls_ecdhcurve", "client_tls_key_file", "client_tls_protocols",
	"client_tls_sslmode", "conffile", "default_pool_size", "disable_pqexec", "dns_max_ttl",
	"dns_nxdomain_ttl", "dns_zone_check_period", "idle_transaction_timeout",
	"ignore_startup_parameters", "job_name", "listen_addr", "listen_backlog", "listen_port",
	"log_connections", "log_disconnections", "log_pooler_errors", "log_stats", "logfile",
	"login_notify_message", "max_client_conn", "max_db_client_connections", "max_db_connections", "max_packet_size",
	"max_prepared_statements", "max_user_client_connections", "max_user_connections",
	"metrics_auth_token", "metrics_listen_addr", "metrics_port", "metrics_tls",
	"min_pool_size", "peer_id", "pidfile", "pkt_buf", "pool_idle_timeout", "pool_mode", "query_timeout",
	"query_wait_notify", "query_wait_timeout", "reserve_pool_size", "reserve_pool_timeout",
	"resolv_conf", "sbuf_loopcnt", "scram_iterations", "server_check_delay", "server_check_query",
	"server_connect_timeout", "server_fast_close", "server_idle_timeout", "server_lifetime",
	"server_login_retry", "server_reset_query", "server_reset_query_always", "server_round_robin",
	"server_tls13_ciphers", "server_tls_ca_file", "server_tls_cert_file", "server_tls_ciphers",
	"server_tls_key_file", "server_tls_protocols", "server_tls_sslmode", "service_name",
	"so_reuseport", "stats_period", "stats_users", "suspend_timeout", "syslog", "syslog_facility",
	"syslog_ident", "tcp_defer_accept", "tcp_keepalive", "tcp_keepcnt", "tcp_keepidle",
	"tcp_keepintvl", "tcp_socket_buffer", "tcp_user_timeout", "track_extra_parameters",
	"transaction_timeout", "unix_socket_dir", "unix_socket_group", "unix_socket_mode", "user",
	"verbose", "workers",
	"track_client_set",	/* pgvalve: a client's own SETs in transaction mode (session_set.h) */
	"drain_timeout", "shutdown_drain",	/* pgvalve: ending at transaction boundaries (drain.h) */
	"cancel_advertise_addr", "cancel_advertise_port", "cancel_key_secret",	/* pgvalve: long cancel keys */
	"peers_dns", "peers_dns_port",	/* pgvalve: 3.0 cancels to every instance a name resolves to */
	"server_role_check_period",	/* pgvalve: target_session_attrs (roles.h) */
	"target_session_attrs", "load_balance_hosts",	/* pgvalve: [databases] defaults (roles.h) */
	"load_balance_reads",	/* pgvalve: the read balancer's [databases] default */
	"load_balance_functions_refresh",	/* pgvalve: the read balancer's pg_proc cache (volatility.h) */
	"notify_support", "notify_buffer_limit",	/* pgvalve: LISTEN/NOTIFY in transaction mode (notify.h) */
	"auth_krb_server_keyfile", "krb_srvname",	/* pgvalve: hba gss (gss_auth.h) */
	"auth_ldap_timeout", "auth_ldap_max_concurrent",	/* pgvalve: LDAP checks (ldap_auth.h) */
	"tenant_cache_ttl", "tenant_from", "tenant_query", "tenant_source",	/* pgvalve: tenants (tenant.h) */
};

static const char *const implemented_params[] = {
	"logfile", "pidfile", "listen_addr", "listen_port", "listen_backlog", "unix_socket_dir",
	"unix_socket_mode", "user", "pool_mode", "auth_type", "auth_file", "max_client_conn",
	"default_pool_size", "server_reset_query", "server_reset_query_always", "client_login_timeout",
	"ignore_startup_parameters", "log_connections", "log_disconnections", "log_pooler_errors",
	"verbose", "syslog", "syslog_ident", "syslog_facility", "pkt_buf", "max_packet_size",
	"tcp_keepalive", "tcp_keepcnt", "tcp_keepidle", "tcp_keepintvl", "server_connect_timeout",
	"server_login_retry", "admin_users", "stats_users", "track_extra_parameters",
	"application_name_add_host", "query_wait_timeout", "server_check_delay", "server_check_query",
	"server_idle_timeout", "server_lifetime", "server_round_robin", "so_reuseport", "max_db_connections",
	"scram_iterations", "client_tls_sslmode", "client_tls_key_file", "client_tls_cert_file",
	"client_tls_ca_file", "client_tls_protocols", "client_tls_ciphers", "client_tls13_ciphers",
	"client_tls_ecdhcurve", "client_tls_dheparams", "server_tls_sslmode", "server_tls_ca_file",
	"server_tls_key_file", "server_tls_cert_file", "server_tls_protocols", "server_tls_ciphers",
	"server_tls13_ciphers", "auth_user", "auth_query", "auth_dbname", "auth_hba_file", "auth_ident_file",
	"min_pool_size", "reserve_pool_size", "reserve_pool_timeout", "max_user_connections", "max_db_client_connections", "max_user_client_connections", "server_fast_close", "autodb_idle_timeout", "client_idle_timeout", "query_timeout", "query_wait_notify", "idle_transaction_timeout", "transaction_timeout", "cancel_wait_timeout", "sbuf_loopcnt", "tcp_defer_accept", "tcp_socket_buffer", "tcp_user_timeout", "log_stats", "stats_period", "suspend_timeout", "pool_idle_timeout", "peer_id",
	"dns_max_ttl", "dns_nxdomain_ttl", "dns_zone_check_period", "resolv_conf",
	"workers", "track_client_set", "max_prepared_statements",
	"auth_ldap_options", "conffile", "disable_pqexec", "job_name", "service_name", "unix_socket_group",
	"metrics_auth_token", "metrics_listen_addr", "metrics_port", "metrics_tls",
	"login_notify_message",
	"drain_timeout", "shutdown_drain", "server_role_check_period",
	"cancel_advertise_addr", "cancel_advertise_port", "cancel_key_secret",
	"peers_dns", "peers_dns_port",
	"notify_support", "notify_buffer_limit",
	"auth_ldap_timeout", "auth_ldap_max_concurrent",
	"target_session_attrs", "load_balance_hosts", "load_balance_reads", "load_balance_functions_refresh",
	"auth_krb_server_keyfile", "krb_srvname",
	"tenant_cache_ttl", "tenant_from", "tenant_query", "tenant_source",
};

static bool in_list(const char *const *list, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(list[i], name) == 0)
			return true;
	return false;
}

/* target_session_attrs: libpq's six values, any case; least-connections beside it. */
START_TEST(test_target_session_attrs)
{
	static const struct { const char *v; int want; } cases[] = {
		{ "any", TSA_ANY }, { "read-write", TSA_READ_WRITE }, { "read-only", TSA_READ_ONLY },
		{ "primary", TSA_PRIMARY }, { "standby", TSA_STANDBY }, { "Prefer-Standby", TSA_PREFER_STANDBY },
	};
	char err[256];
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct db_config *db = config_db_new("x");
		char str[128];
		snprintf(str, sizeof(str), "host=a,b target_session_attrs=%s load_balance_hosts=least-connections",
			 cases[i].v);
		ck_assert_msg(config_parse_db_string(str, db, err, sizeof(err)) == 0, "%s: %s", cases[i].v, err);
		ck_assert_int_eq(db->target_session_attrs, cases[i].want);
		ck_assert_int_eq(db->load_balance_hosts, LOAD_BALANCE_HOSTS_LEAST_CONNECTIONS);
		ck_assert_int_eq(db->max_replica_lag, 0);
		ck_assert_str_eq(config_target_session_attrs_name(cases[i].want), i == 5 ? "prefer-standby" : cases[i].v);
		config_db_free(db);
	}
	struct db_config *db = config_db_new("x");
	ck_assert_int_eq(config_parse_db_string("target_session_attrs=master", db, err, sizeof(err)), -1);
	ck_assert_msg(strstr(err, "\"master\"") && strstr(err, "target_session_attrs"), "%s", err);
	ck_assert_int_eq(config_parse_db_string("max_replica_lag=16777216", db, err, sizeof(err)), 0);
	ck_assert_int_eq(db->max_replica_lag, 16777216);
	ck_assert_int_eq(config_parse_db_string("max_replica_lag=-1", db, err, sizeof(err)), -1);
	/* PostgreSQL's size units, 1024 apart */
	ck_assert_int_eq(config_parse_db_string("max_replica_lag=16MB", db, err, sizeof(err)), 0);
	ck_assert_int_eq(db->max_replica_lag, 16 << 20);
	ck_assert_int_eq(config_parse_db_string("max_replica_lag='8 kB'", db, err, sizeof(err)), 0);
	ck_assert_int_eq(db->max_replica_lag, 8192);
	ck_assert_int_eq(config_parse_db_string("max_replica_lag=3GB", db, err, sizeof(err)), 0);
	ck_assert(db->max_replica_lag == 3LL << 30);
	ck_assert_int_eq(config_parse_db_string("max_replica_lag=10s", db, err, sizeof(err)), -1);
	ck_assert_msg(strstr(err, "max_replica_lag") && strstr(err, "kB, MB, GB"), "%s", err);
	ck_assert_int_eq(config_parse_db_string("max_replica_lag=99999999999TB", db, err, sizeof(err)), -1);
	ck_assert(db->max_replica_lag_seconds == 0);
	ck_assert_int_eq(config_parse_db_string("max_replica_lag_seconds=2.5", db, err, sizeof(err)), 0);
	ck_assert(db->max_replica_lag_seconds == 2500000);
	ck_assert_int_eq(config_parse_db_string("max_replica_lag_seconds=-1", db, err, sizeof(err)), -1);
	config_db_free(db);
}
END_TEST

/*
 * [pgbouncer]'s target_session_attrs and load_balance_hosts are the
 * default of [databases] lines that do not give them, wherever the
 * section is in the file.
 */
START_TEST(test_role_routing_defaults)
{
	struct config *cfg = load_ok(
		"[databases]\n"
		"plain = host=a,b\n"
		"own = host=a,b target_session_attrs=standby load_balance_hosts=disable\n"
		"[pgbouncer]\n"
		"target_session_attrs = read-write\n"
		"load_balance_hosts = least-connections\n");
	ck_assert_int_eq(cfg->target_session_attrs, TSA_READ_WRITE);
	ck_assert_int_eq(config_find_db(cfg, "plain")->target_session_attrs, TSA_READ_WRITE);
	ck_assert_int_eq(config_find_db(cfg, "plain")->load_balance_hosts, LOAD_BALANCE_HOSTS_LEAST_CONNECTIONS);
	ck_assert_int_eq(config_find_db(cfg, "own")->target_session_attrs, TSA_STANDBY);
	ck_assert_int_eq(config_find_db(cfg, "own")->load_balance_hosts, LOAD_BALANCE_HOSTS_DISABLE);
	ck_assert_str_eq(config_load_balance_hosts_name(LOAD_BALANCE_HOSTS_LEAST_CONNECTIONS), "least-connections");
	ck_assert_str_eq(config_load_balance_hosts_name(-1), "round-robin");
	config_free(cfg);

	/* load_balance_reads: off unless said, per line or from [pgbouncer] */
	cfg = load_ok("[databases]\nplain = host=a,b\n[pgbouncer]\n");
	ck_assert_int_eq(cfg->load_balance_reads, LOAD_BALANCE_READS_OFF);
	ck_assert_int_eq(config_find_db(cfg, "plain")->load_balance_reads, LOAD_BALANCE_READS_OFF);
	config_free(cfg);
	cfg = load_ok("[databases]\n"
		      "plain = host=a,b target_session_attrs=read-write\n"
		      "own = host=a,b target_session_attrs=primary load_balance_reads=Explicit\n"
		      "[pgbouncer]\nload_balance_reads = auto\n");
	ck_assert_int_eq(config_find_db(cfg, "plain")->load_balance_reads, LOAD_BALANCE_READS_AUTO);
	ck_assert_int_eq(config_find_db(cfg, "own")->load_balance_reads, LOAD_BALANCE_READS_EXPLICIT);
	ck_assert_str_eq(config_load_balance_reads_name(LOAD_BALANCE_READS_EXPLICIT), "explicit");
	ck_assert_str_eq(config_load_balance_reads_name(-1), "off");
	config_free(cfg);

	struct config_error err;
	ck_assert_int_eq(config_load_string("[pgbouncer]\ntarget_session_attrs = master\n", "t.ini", &cfg, &err), -1);
	ck_assert_msg(strstr(err.message, "target_session_attrs") && strstr(err.message, "prefer-standby"), "%s",
		      err.message);
}
END_TEST

/* tenant_from: user, sni, options in any subset; any other word refuses the file. */
START_TEST(test_tenant_from)
{
	struct config *cfg = load_ok("[pgbouncer]\ntenant_from = user, sni options\ntenant_cache_ttl = 2.5\n");
	ck_assert_str_eq(cfg->tenant_from, "user, sni options");
	ck_assert_int_eq(cfg->tenant_cache_ttl, 2500 * 1000);
	config_free(cfg);
	struct config_error err;
	ck_assert_int_eq(config_load_string("[pgbouncer]\ntenant_from = user, host\n", "t.ini", &cfg, &err), -1);
	ck_assert_msg(strstr(err.message, "tenant_from") && strstr(err.message, "\"host\""), "%s", err.message);
	/* A [databases] key checked alone, as a tenant's row is. */
	struct db_config *dc = config_db_new("t");
	char why[256];
	ck_assert_int_eq(config_db_set(dc, "pool_size", "7", why, sizeof(why)), 0);
	ck_assert_int_eq(dc->pool_size, 7);
	ck_assert_int_eq(config_db_set(dc, "pool_mode", "bogus", why, sizeof(why)), -1);
	ck_assert_msg(strstr(why, "pool_mode"), "%s", why);
	ck_assert_int_eq(config_db_set(dc, "port", "70000", why, sizeof(why)), -1);
	config_db_free(dc);
}
END_TEST

START_TEST(test_param_table)
{
	size_t n;
	const struct param_def *ps = config_params(&n);
	struct config *cfg = config_defaults();
	char why[256];

	ck_assert_uint_eq(n, ARRAY_SIZE(pgbouncer_125_params));
	for (size_t i = 0; i < ARRAY_SIZE(pgbouncer_125_params); i++)
		ck_assert_msg(config_find_param(pgbouncer_125_params[i]) != NULL, "missing %s",
			      pgbouncer_125_params[i]);
	ck_assert_ptr_null(config_find_param("no_such_thing"));
	ck_assert_ptr_eq(config_find_param("LISTEN_PORT"), config_find_param("listen_port"));

	for (size_t i = 0; i < n; i++) {
		/* implemented flags are exactly the agreed list */
		ck_assert_msg(ps[i].implemented == in_list(implemented_params, ARRAY_SIZE(implemented_params), ps[i].name),
			      "implemented flag of %s", ps[i].name);
		/* alphabetical, as SHOW CONFIG lists them */
		if (i > 0)
			ck_assert_msg(strcmp(ps[i - 1].name, ps[i].name) < 0, "%s out of order", ps[i].name);
		/* each default parses */
		ck_assert_msg(config_set_param(cfg, &ps[i], ps[i].default_value, why, sizeof(why)) == 0,
			      "default of %s: %s", ps[i].name, why);
		/* one field per parameter: offsets distinct except for aliases */
		for (size_t j = 0; j < i; j++)
			if (!ps[i].alias_of && !ps[j].alias_of)
				ck_assert_msg(ps[i].offset != ps[j].offset, "%s and %s share a field",
					      ps[i].name, ps[j].name);
		if (ps[i].alias_of) {
			const struct param_def *target = config_find_param(ps[i].alias_of);
			ck_assert_ptr_nonnull(target);
			ck_assert_uint_eq(target->offset, ps[i].offset);
		}
		if (ps[i].type == PARAM_ENUM)
			ck_assert_ptr_nonnull(ps[i].enum_names);
	}
	ck_assert_uint_eq(ARRAY_SIZE(implemented_params), 129);

	/* restart-only parameters, as PgBouncer marks them */
	static const char *const restart[] = {
		"listen_addr", "listen_port", "listen_backlog", "unix_socket_dir", "unix_socket_mode",
		"unix_socket_group", "user", "pidfile", "so_reuseport", "pkt_buf", "disable_pqexec",
		"resolv_conf", "track_extra_parameters", "job_name", "service_name",
		"workers",	/* pgvalve: the process layout is fixed at start */
		"track_client_set",	/* pgvalve: servers may carry SETs it never saw */
		"notify_support",	/* pgvalve: servers may carry LISTENs it never saw */
	};
	for (size_t i = 0; i < n; i++)
		ck_assert_msg(ps[i].reloadable == !in_list(restart, ARRAY_SIZE(restart), ps[i].name),
			      "reloadable flag of %s", ps[i].name);
	config_free(cfg);
}
END_TEST

/* ------------------------------------------------------------------ file format */

START_TEST(test_main_section_names_equivalent)
{
	static const char *const variants[] = {
		"[pgbouncer]\nlisten_port = 7000\n",
		"[pgvalve]\nlisten_port = 7000\n",
		"[PgBouncer]\nlisten_port = 7000\n",
		"[ PGVALVE ]  ; comment after the header\nlisten_port = 7000\n",
	};
	for (size_t i = 0; i < ARRAY_SIZE(variants); i++) {
		struct config *cfg = load_ok(variants[i]);
		ck_assert_int_eq(cfg->listen_port, 7000);
		config_free(cfg);
	}
}
END_TEST

START_TEST(test_comments_blank_and_indented_lines)
{
	struct config *cfg = load_ok(
		"; a comment\n"
		"# another comment\n"
		"\n"
		"   \t\n"
		"[pgbouncer]\n"
		"    listen_port = 7001\n"
		"\t; indented comment = 5\n"
		"\tdefault_pool_size=33   \r\n"
		"  #max_client_conn = 1\n"
		"server_reset_query =   DEALLOCATE ALL  \n"
		"listen_addr =\n"
		"admin_users = a ; b\n");
	ck_assert_int_eq(cfg->listen_port, 7001);
	ck_assert_int_eq(cfg->default_pool_size, 33);
	ck_assert_int_eq(cfg->max_client_conn, 100);
	ck_assert_str_eq(cfg->server_reset_query, "DEALLOCATE ALL");
	ck_assert_str_eq(cfg->listen_addr, "");
	/* ';' later in a line is not special, as in PgBouncer */
	ck_assert_str_eq(cfg->admin_users, "a ; b");
	config_free(cfg);
}
END_TEST

START_TEST(test_repeated_key_last_wins_and_section_reopened)
{
	struct config *cfg = load_ok(
		"[pgbouncer]\n"
		"listen_port = 7001\n"
		"pool_mode = transaction\n"
		"[databases]\n"
		"a = host=h1\n"
		"[pgbouncer]\n"
		"listen_port = 7002\n"
		"[databases]\n"
		"b = host=h2\n"
		"[pgbouncer]\n"
		"listen_port = 7003\n");
	ck_assert_int_eq(cfg->listen_port, 7003);
	ck_assert_int_eq(cfg->pool_mode, POOL_MODE_TRANSACTION);
	ck_assert_ptr_nonnull(config_find_db(cfg, "a"));
	ck_assert_ptr_nonnull(config_find_db(cfg, "b"));
	ck_assert_str_eq(cfg->databases->name, "a");
	ck_assert_str_eq(cfg->databases->next->name, "b");
	config_free(cfg);
}
END_TEST

START_TEST(test_include_relative_to_cwd)
{
	char *dir = make_tmpdir();
	char *main_path = path_in(dir, "main.ini");
	char *sub = path_in(dir, "sub");
	char *inc1 = path_in(dir, "sub/one.ini");
	char *inc2 = path_in(dir, "two.ini");
	struct config *cfg = NULL;
	struct config_error err;
	char text[512];

	ck_assert_int_eq(mkdir(sub, 0700), 0);
	/* Relative names resolve against the working directory, not the including file's. */
	write_file(inc1, "listen_port = 7100\n%include two.ini\n[databases]\nfromone = host=one\n");
	write_file(inc2, "default_pool_size = 44\n");
	snprintf(text, sizeof(text),
		 "[pgbouncer]\nlisten_port = 7000\n  %%include sub/one.ini\n[pgbouncer]\nmax_client_conn = 5\n");
	write_file(main_path, text);
	ck_assert_int_eq(chdir(dir), 0);

	ck_assert_msg(config_load("main.ini", &cfg, &err) == 0, "%s", err.message);
	ck_assert_int_eq(cfg->listen_port, 7100);
	ck_assert_int_eq(cfg->default_pool_size, 44);
	ck_assert_int_eq(cfg->max_client_conn, 5);
	ck_assert_ptr_nonnull(config_find_db(cfg, "fromone"));
	ck_assert_str_eq(config_find_db(cfg, "fromone")->origin, "sub/one.ini:4");
	ck_assert_str_eq(cfg->path, "main.ini");
	ck_assert_str_eq(cfg->conffile, "main.ini");
	config_free(cfg);

	/* an absolute path works from anywhere, and from config_load_string too */
	snprintf(text, sizeof(text), "[pgbouncer]\n%%include %s\n", inc2);
	cfg = load_ok(text);
	ck_assert_int_eq(cfg->default_pool_size, 44);
	config_free(cfg);

	unlink(inc1);
	unlink(inc2);
	unlink(main_path);
	rmdir(sub);
	rmdir(dir);
	free(dir);
	free(main_path);
	free(sub);
	free(inc1);
	free(inc2);
}
END_TEST

START_TEST(test_include_missing_file)
{
	char *dir = make_tmpdir();
	char *main_path = path_in(dir, "main.ini");
	struct config *cfg = (struct config *)1;
	struct config_error err;

	write_file(main_path, "[pgbouncer]\nlisten_port = 7000\n%include nope.ini\n");
	ck_assert_int_eq(chdir(dir), 0);
	ck_assert_int_eq(config_load("main.ini", &cfg, &err), -1);
	ck_assert_ptr_null(cfg);
	assert_contains(err.message, "main.ini:3:");
	assert_contains(err.message, "cannot open include file \"nope.ini\"");
	assert_contains(err.message, strerror(ENOENT));

	/* an include without a file name is an error too */
	assert_contains(load_fail("[pgbouncer]\n%include   \n"), "t.ini:2:");
	unlink(main_path);
	rmdir(dir);
	free(dir);
	free(main_path);
}
END_TEST

START_TEST(test_include_cycle_stops)
{
	char *dir = make_tmpdir();
	char *self = path_in(dir, "self.ini");
	struct config *cfg = (struct config *)1;
	struct config_error err;

	write_file(self, "[pgbouncer]\n%include self.ini\n");
	ck_assert_int_eq(chdir(dir), 0);
	ck_assert_int_eq(config_load("self.ini", &cfg, &err), -1);
	ck_assert_ptr_null(cfg);
	assert_contains(err.message, "self.ini:2:");
	assert_contains(err.message, "include nesting too deep");
	unlink(self);
	rmdir(dir);
	free(dir);
	free(self);
}
END_TEST

START_TEST(test_missing_main_file)
{
	struct config *cfg = (struct config *)1;
	struct config_error err;
	ck_assert_int_eq(config_load("/nonexistent/dir/pgbouncer.ini", &cfg, &err), -1);
	ck_assert_ptr_null(cfg);
	assert_contains(err.message, "/nonexistent/dir/pgbouncer.ini");
	assert_contains(err.message, strerror(ENOENT));
}
END_TEST

START_TEST(test_main_section_required)
{
	const char *msg = load_fail("[databases]\nfoo = host=x\n");
	assert_contains(msg, "t.ini");
	assert_contains(msg, "[pgbouncer]");
}
END_TEST

START_TEST(test_huge_line)
{
	size_t n = 100 * 1024;
	char *big = xmalloc(n + 256);
	char *text;
	struct config *cfg;

	memset(big, 'x', n);
	big[n] = '\0';
	text = xmalloc(3 * n + 512);
	snprintf(text, 3 * n + 512,
		 "[pgbouncer]\nserver_reset_query = SELECT '%s'\nlisten_port = 7005\n"
		 "[databases]\nbig = host=h connect_query='SELECT ''%s'''\n"
		 "%s = host=k\n",
		 big, big, big);
	cfg = load_ok(text);
	ck_assert_uint_eq(strlen(cfg->server_reset_query), n + 9);
	ck_assert(strncmp(cfg->server_reset_query + 8, big, n) == 0);
	ck_assert_int_eq(cfg->listen_port, 7005);
	ck_assert_uint_eq(strlen(config_find_db(cfg, "big")->connect_query), n + 9);
	ck_assert_ptr_nonnull(config_find_db(cfg, big));
	ck_assert_str_eq(config_find_db(cfg, big)->host, "k");
	config_free(cfg);
	free(big);
	free(text);
}
END_TEST

/* ------------------------------------------------------------------ errors */

struct bad_case {
	const char *text;
	const char *where;	/* "t.ini:N:" */
	const char *what;	/* another substring the message must hold */
};

START_TEST(test_invalid_values)
{
	static const struct bad_case cases[] = {
		{ "[pgbouncer]\nlisten_port = abc\n", "t.ini:2:", "invalid value \"abc\" for parameter listen_port" },
		{ "[pgbouncer]\n\nlisten_port = 70000\n", "t.ini:3:", "listen_port" },
		{ "[pgbouncer]\nlisten_port = 12x\n", "t.ini:2:", "listen_port" },
		{ "[pgbouncer]\nlisten_port = 99999999999999999999\n", "t.ini:2:", "listen_port" },
		{ "[pgbouncer]\nlisten_port =\n", "t.ini:2:", "listen_port" },
		{ "[pgbouncer]\ndefault_pool_size = -1\n", "t.ini:2:", "default_pool_size" },
		{ "[pgbouncer]\nmax_client_conn = 1.5\n", "t.ini:2:", "max_client_conn" },
		{ "[pgbouncer]\npool_mode = bogus\n", "t.ini:2:", "expected one of: session, transaction, statement" },
		{ "[pgbouncer]\nauth_type = peer\n", "t.ini:2:", "auth_type" },
		{ "[pgbouncer]\nauth_type = nonsense\n", "t.ini:2:", "auth_type" },
		{ "[pgbouncer]\nlog_connections = maybe\n", "t.ini:2:", "log_connections" },
		{ "[pgbouncer]\nserver_lifetime = -1\n", "t.ini:2:", "server_lifetime" },
		{ "[pgbouncer]\nserver_lifetime = abc\n", "t.ini:2:", "server_lifetime" },
		{ "[pgbouncer]\nserver_lifetime = 10s\n", "t.ini:2:", "server_lifetime" },
		{ "[pgbouncer]\nserver_lifetime = nan\n", "t.ini:2:", "server_lifetime" },
		{ "[pgbouncer]\nunix_socket_mode = 0999\n", "t.ini:2:", "unix_socket_mode" },
		{ "[pgbouncer]\nunix_socket_mode = 017777\n", "t.ini:2:", "unix_socket_mode" },
		{ "[pgbouncer]\nclient_tls_sslmode = sometimes\n", "t.ini:2:", "client_tls_sslmode" },
		{ "[pgbouncer]\npeer_id = 16384\n", "t.ini:2:", "peer_id" },
		{ "[pgbouncer]\npkt_buf = 0\n", "t.ini:2:", "pkt_buf" },
		{ "[pgbouncer]\nthis is not a setting\n", "t.ini:2:", "syntax error" },
		{ "[pgbouncer]\n= 5\n", "t.ini:2:", "syntax error" },
		{ "[pgbouncer]\n\"unterminated = 5\n", "t.ini:2:", "unterminated" },
		{ "[pgbouncer\nlisten_port = 1\n", "t.ini:1:", "section" },
		{ "[pgbouncer] junk\n", "t.ini:1:", "section" },
		{ "[pgbouncer]\n[nosuchsection]\nx = 1\n", "t.ini:2:", "unknown section \"nosuchsection\"" },
		{ "listen_port = 1\n[pgbouncer]\n", "t.ini:1:", "outside of any section" },
		{ "[pgbouncer]\n[databases]\nfoo = host=x dbname='unterminated\n", "t.ini:3:", "unterminated quoted value for \"dbname\"" },
		{ "[pgbouncer]\n[databases]\nfoo = host=x frobnicate=1\n", "t.ini:3:", "unknown database parameter \"frobnicate\"" },
		{ "[pgbouncer]\n[databases]\nfoo = pool_size=-5\n", "t.ini:3:", "pool_size" },
		{ "[pgbouncer]\n[databases]\nfoo = reserve_pool=-1\n", "t.ini:3:", "reserve_pool" },
		{ "[pgbouncer]\n[databases]\nfoo = port=0\n", "t.ini:3:", "port" },
		{ "[pgbouncer]\n[databases]\nfoo = port=5432x\n", "t.ini:3:", "port" },
		{ "[pgbouncer]\n[databases]\nfoo = pool_mode=sometimes\n", "t.ini:3:", "pool_mode" },
		{ "[pgbouncer]\n[databases]\nfoo = load_balance_hosts=random\n", "t.ini:3:", "load_balance_hosts" },
		{ "[pgbouncer]\n[databases]\nfoo = load_balance_reads=always\n", "t.ini:3:", "load_balance_reads" },
		{ "[pgbouncer]\n[databases]\nfoo = target_session_attrs=read_write\n", "t.ini:3:",
		  "expected one of: any, read-write, read-only, primary, standby, prefer-standby" },
		{ "[pgbouncer]\n[databases]\nfoo = server_lifetime=-3\n", "t.ini:3:", "server_lifetime" },
		{ "[pgbouncer]\n[databases]\nfoo = host=\n", "t.ini:3:", "empty value for \"host\"" },
		{ "[pgbouncer]\n[databases]\nfoo = host=a justaword\n", "t.ini:3:", "item 2" },
		{ "[pgbouncer]\n[databases]\nfoo = host='a'b\n", "t.ini:3:", "host" },
		{ "[pgbouncer]\n[databases]\npgbouncer = host=x\n", "t.ini:3:", "reserved" },
		{ "[pgbouncer]\n[users]\nbob = pool_size=-1\n", "t.ini:3:", "pool_size" },
		{ "[pgbouncer]\n[users]\nbob = host=x\n", "t.ini:3:", "unknown user parameter \"host\"" },
		{ "[pgbouncer]\n[users]\nbob = pool_mode=never\n", "t.ini:3:", "pool_mode" },
		{ "[pgbouncer]\n[users]\nbob = query_timeout=soon\n", "t.ini:3:", "query_timeout" },
		{ "[pgbouncer]\n[peers]\n1 = port=6432\n", "t.ini:3:", "host is required" },
		{ "[pgbouncer]\n[peers]\nabc = host=x\n", "t.ini:3:", "peer id" },
		{ "[pgbouncer]\n[peers]\n0 = host=x\n", "t.ini:3:", "peer id" },
		{ "[pgbouncer]\n[peers]\n1 = host=x dbname=y\n", "t.ini:3:", "unknown peer parameter \"dbname\"" },
		{ "[pgbouncer]\n[peers]\n1 = host=x pool_size=-2\n", "t.ini:3:", "pool_size" },
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		const char *msg = load_fail(cases[i].text);
		ck_assert_msg(strstr(msg, cases[i].where) != NULL, "case %zu: \"%s\" lacks \"%s\"", i, msg, cases[i].where);
		ck_assert_msg(strstr(msg, cases[i].what) != NULL, "case %zu: \"%s\" lacks \"%s\"", i, msg, cases[i].what);
	}
}
END_TEST

START_TEST(test_errors_never_show_passwords)
{
	const char *msg;

	msg = load_fail("[pgbouncer]\n[databases]\nfoo = host=x password=s3cr3t frobnicate=1\n");
	ck_assert_ptr_null(strstr(msg, "s3cr3t"));
	msg = load_fail("[pgbouncer]\n[databases]\nfoo = host=x password='s3cr3t pool_size=1\n");
	assert_contains(msg, "password");
	ck_assert_ptr_null(strstr(msg, "s3cr3t"));
	msg = load_fail("[pgbouncer]\n[databases]\nfoo = user=u password=s3cr3t oops\n");
	ck_assert_ptr_null(strstr(msg, "s3cr3t"));
	ck_assert_ptr_null(strstr(msg, "oops"));
}
END_TEST

/* ------------------------------------------------------------------ warnings */

/*
 * Every setting pgvalve accepts does what PgBouncer's docs say (or, for
 * LDAP, is refused): none is accepted and silently ignored any more, so
 * loading one never warns "not supported yet".
 */
START_TEST(test_no_setting_is_ignored)
{
	size_t n;
	const struct param_def *ps = config_params(&n);
	for (size_t i = 0; i < n; i++)
		ck_assert_msg(ps[i].implemented, "%s is accepted but not implemented", ps[i].name);
	capture_start();
	struct config *cfg = load_ok("[pgbouncer]\nmax_prepared_statements = 10\ndisable_pqexec = 1\n"
				     "unix_socket_group = wheel\njob_name = x\n");
	char *log = capture_end();
	ck_assert_int_eq(count_occurrences(log, "not supported yet"), 0);
	ck_assert_int_eq(cfg->max_prepared_statements, 10);
	config_free(cfg);
	free(log);
}
END_TEST

#ifdef HAVE_LDAP
/* With OpenLDAP: auth_type ldap loads; options PostgreSQL would refuse are refused at load, with its words. */
START_TEST(test_ldap_refused)
{
	struct config *cfg = load_ok("[pgbouncer]\nauth_type = ldap\nauth_ldap_options = ldapserver=127.0.0.1 "
				     "ldapbasedn=\"dc=example, dc=com\" ldapbindpasswd=x\nauth_ldap_timeout = 3\n");
	ck_assert_int_eq(cfg->auth_type, AUTH_TYPE_LDAP);
	ck_assert_int_eq(cfg->auth_ldap_timeout, 3 * USEC_PER_SEC);
	ck_assert_int_eq(cfg->auth_ldap_max_concurrent, 16);
	config_free(cfg);
	assert_contains(load_fail("[pgbouncer]\nauth_ldap_options = host=x\n"),
			"t.ini:2: auth_ldap_options: invalid LDAP option \"host\"");
	assert_contains(load_fail("[pgbouncer]\nauth_ldap_options = ldapserver=x ldapprefix=uid= ldapbasedn=y\n"),
			"t.ini:2: auth_ldap_options: cannot use ldapbasedn, ldapbinddn");
	assert_contains(load_fail("[pgbouncer]\nauth_ldap_options = ldapprefix=uid=\n"),
			"ldapserver is required");
	assert_contains(load_fail("[pgbouncer]\nauth_ldap_options = ldapserver=x ldapport=0 ldapprefix=a\n"),
			"invalid LDAP port number");
	/* SHOW CONFIG's form: the bind secret hidden, quoted or not, the rest as written */
	char out[256];
	ldap_auth_mask_options("ldapserver=a ldapbindpasswd=\"s e,c\" ldapbinddn=\"cn=x, dc=y\",ldapbindpasswd=z", out,
			       sizeof(out));
	ck_assert_str_eq(out, "ldapserver=a ldapbindpasswd=******** ldapbinddn=\"cn=x, dc=y\" ldapbindpasswd=********");
	ldap_auth_mask_options("ldapbindpasswd=\"unterminated", out, sizeof(out));
	ck_assert_str_eq(out, "...");
}
END_TEST
#else
/* A build without OpenLDAP (--without-ldap): refused at load, never silently ignored. */
START_TEST(test_ldap_refused)
{
	assert_contains(load_fail("[pgbouncer]\nauth_type = ldap\n"),
			"t.ini:2: auth_type: LDAP authentication is not supported");
	assert_contains(load_fail("[pgbouncer]\nauth_ldap_options = host=x\n"),
			"t.ini:2: auth_ldap_options: LDAP authentication is not supported");
}
END_TEST
#endif

/* As PgBouncer: an unknown key stops the load (a typo must not leave its setting at the default). */
START_TEST(test_unknown_key_refused)
{
	assert_contains(load_fail("[pgbouncer]\nno_such_param = 1\nlisten_port = 7009\n"),
			"t.ini:2: unknown parameter \"no_such_param\"");
	assert_contains(load_fail("[pgbouncer]\ndefualt_pool_size = 5\n"),
			"t.ini:2: unknown parameter \"defualt_pool_size\" (did you mean default_pool_size?)");
	assert_contains(load_fail("[pgvalve]\nlisten_port = 7009\nLISTEN_PROT = 1\n"),
			"t.ini:3: unknown parameter \"LISTEN_PROT\" (did you mean listen_port?)");
	/* nothing close: no guess */
	const char *msg = load_fail("[pgbouncer]\nfrobnicate_everything = 1\n");
	ck_assert_msg(strstr(msg, "did you mean") == NULL, "%s", msg);
}
END_TEST

/* ------------------------------------------------------------------ sections */

START_TEST(test_databases)
{
	struct config *cfg = load_ok(
		"[pgbouncer]\n"
		"[databases]\n"
		"plain =\n"
		"full = host=db1,db2 port=6543 dbname=real user=u password=p auth_user=au "
		"auth_dbname=adb pool_size=10 min_pool_size=2 reserve_pool=3 pool_mode=transaction "
		"max_db_connections=50 max_db_client_connections=60 server_lifetime=1.5 "
		"load_balance_hosts=disable client_encoding=UTF8 datestyle=ISO timezone=UTC "
		"application_name=app\n"
		"quoted = connect_query='SELECT 1, ''two''' password='it\\'s a \\\\secret' "
		"auth_query='SELECT usename, passwd FROM pg_shadow WHERE usename=$1' host = h\n"
		"\"with space\" = dbname='a b'\n"
		"\"dq\"\"name\" = host=x\n"
		"alias = reserve_pool_size=7 host=/var/run/postgresql\n"
		"* = host=fallback port=5433\n"
		"plain = host=replaced\n");
	const struct db_config *db;

	db = config_find_db(cfg, "plain");
	ck_assert_ptr_nonnull(db);
	ck_assert_str_eq(db->host, "replaced");
	ck_assert_int_eq(db->port, 5432);
	ck_assert_str_eq(db->dbname, "");
	ck_assert_str_eq(db->user, "");
	ck_assert_str_eq(db->password, "");
	ck_assert_int_eq(db->pool_size, -1);
	ck_assert_int_eq(db->min_pool_size, -1);
	ck_assert_int_eq(db->reserve_pool_size, -1);
	ck_assert_int_eq(db->pool_mode, -1);
	ck_assert_int_eq(db->max_db_connections, -1);
	ck_assert_int_eq(db->max_db_client_connections, -1);
	ck_assert(db->server_lifetime == -1);
	ck_assert_int_eq(db->load_balance_hosts, LOAD_BALANCE_HOSTS_ROUND_ROBIN);	/* the [pgbouncer] default */
	ck_assert_int_eq(db->target_session_attrs, TSA_ANY);
	ck_assert_str_eq(db->origin, "t.ini:10");
	/* the replaced entry kept its place (first in file order) */
	ck_assert_str_eq(cfg->databases->name, "plain");

	db = config_find_db(cfg, "full");
	ck_assert_str_eq(db->host, "db1,db2");
	ck_assert_int_eq(db->port, 6543);
	ck_assert_str_eq(db->dbname, "real");
	ck_assert_str_eq(db->user, "u");
	ck_assert_str_eq(db->password, "p");
	ck_assert_str_eq(db->auth_user, "au");
	ck_assert_str_eq(db->auth_dbname, "adb");
	ck_assert_int_eq(db->pool_size, 10);
	ck_assert_int_eq(db->min_pool_size, 2);
	ck_assert_int_eq(db->reserve_pool_size, 3);
	ck_assert_int_eq(db->pool_mode, POOL_MODE_TRANSACTION);
	ck_assert_int_eq(db->max_db_connections, 50);
	ck_assert_int_eq(db->max_db_client_connections, 60);
	ck_assert(db->server_lifetime == 1500000);
	ck_assert_int_eq(db->load_balance_hosts, LOAD_BALANCE_HOSTS_DISABLE);
	ck_assert_str_eq(db->client_encoding, "UTF8");
	ck_assert_str_eq(db->datestyle, "ISO");
	ck_assert_str_eq(db->timezone, "UTC");
	ck_assert_str_eq(db->application_name, "app");
	ck_assert_str_eq(db->origin, "t.ini:4");

	db = config_find_db(cfg, "quoted");
	ck_assert_str_eq(db->connect_query, "SELECT 1, 'two'");
	ck_assert_str_eq(db->password, "it's a \\secret");
	ck_assert_str_eq(db->auth_query, "SELECT usename, passwd FROM pg_shadow WHERE usename=$1");
	ck_assert_str_eq(db->host, "h");

	ck_assert_str_eq(config_find_db(cfg, "with space")->dbname, "a b");
	ck_assert_ptr_nonnull(config_find_db(cfg, "dq\"name"));
	ck_assert_int_eq(config_find_db(cfg, "alias")->reserve_pool_size, 7);
	ck_assert_str_eq(config_find_db(cfg, "alias")->host, "/var/run/postgresql");

	db = config_find_db(cfg, "*");
	ck_assert_ptr_nonnull(db);
	ck_assert_str_eq(db->host, "fallback");
	ck_assert_int_eq(db->port, 5433);

	/* exact match only: no fallback to "*", case-sensitive */
	ck_assert_ptr_null(config_find_db(cfg, "unknown"));
	ck_assert_ptr_null(config_find_db(cfg, "FULL"));
	config_free(cfg);
}
END_TEST

START_TEST(test_parse_db_string_and_clone)
{
	struct db_config *db = config_db_new("x"), *copy;
	char err[256];

	ck_assert_int_eq(config_parse_db_string("host=a port=1 pool_size=4 host=b", db, err, sizeof(err)), 0);
	ck_assert_str_eq(db->host, "b");
	ck_assert_int_eq(db->port, 1);
	ck_assert_int_eq(db->pool_size, 4);
	ck_assert_int_eq(config_parse_db_string("  ", db, err, sizeof(err)), 0);
	ck_assert_int_eq(config_parse_db_string("password='a\\b'", db, err, sizeof(err)), 0);
	ck_assert_str_eq(db->password, "a\\b");	/* a lone backslash stays */
	ck_assert_int_eq(config_parse_db_string("dbname='x y", db, err, sizeof(err)), -1);
	assert_contains(err, "unterminated");

	copy = config_db_clone(db, "autodb");
	ck_assert_str_eq(copy->name, "autodb");
	ck_assert_str_eq(copy->host, "b");
	ck_assert_ptr_ne(copy->host, db->host);
	ck_assert_int_eq(copy->pool_size, 4);
	ck_assert_ptr_null(copy->next);
	config_db_free(copy);
	config_db_free(db);
}
END_TEST

START_TEST(test_users)
{
	struct config *cfg = load_ok(
		"[pgbouncer]\n"
		"[users]\n"
		"alice = pool_mode=statement pool_size=3 reserve_pool_size=1 max_user_connections=9 "
		"max_user_client_connections=20 query_timeout=2.5 idle_transaction_timeout=4 "
		"client_idle_timeout=5 transaction_timeout=6\n"
		"bob =\n"
		"\"carol@example\" = pool_size=2\n");
	const struct user_config *u = config_find_user(cfg, "alice");

	ck_assert_ptr_nonnull(u);
	ck_assert_int_eq(u->pool_mode, POOL_MODE_STATEMENT);
	ck_assert_int_eq(u->pool_size, 3);
	ck_assert_int_eq(u->reserve_pool_size, 1);
	ck_assert_int_eq(u->max_user_connections, 9);
	ck_assert_int_eq(u->max_user_client_connections, 20);
	ck_assert(u->query_timeout == 2500000);
	ck_assert(u->idle_transaction_timeout == 4 * USEC_PER_SEC);
	ck_assert(u->client_idle_timeout == 5 * USEC_PER_SEC);
	ck_assert(u->transaction_timeout == 6 * USEC_PER_SEC);
	ck_assert_str_eq(u->origin, "t.ini:3");

	u = config_find_user(cfg, "bob");
	ck_assert_ptr_nonnull(u);
	ck_assert_int_eq(u->pool_mode, -1);
	ck_assert_int_eq(u->pool_size, -1);
	ck_assert(u->query_timeout == -1);
	ck_assert_int_eq(config_find_user(cfg, "carol@example")->pool_size, 2);
	ck_assert_ptr_null(config_find_user(cfg, "Bob"));
	config_free(cfg);
}
END_TEST

START_TEST(test_peers)
{
	struct config *cfg = load_ok(
		"[pgbouncer]\npeer_id = 1\n"
		"[peers]\n"
		"1 = host=/tmp/pgbouncer1\n"
		"2 = host=10.0.0.2 port=6543 pool_size=4\n"
		"1 = host=/tmp/again\n");
	const struct peer_config *p = cfg->peers;

	ck_assert_int_eq(cfg->peer_id, 1);
	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq(p->peer_id, 1);
	ck_assert_str_eq(p->host, "/tmp/again");
	ck_assert_int_eq(p->port, 6432);
	ck_assert_int_eq(p->pool_size, -1);
	p = p->next;
	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq(p->peer_id, 2);
	ck_assert_str_eq(p->host, "10.0.0.2");
	ck_assert_int_eq(p->port, 6543);
	ck_assert_int_eq(p->pool_size, 4);
	ck_assert_str_eq(p->origin, "t.ini:5");
	ck_assert_ptr_null(p->next);
	config_free(cfg);
}
END_TEST

/* ------------------------------------------------------------------ values */

START_TEST(test_value_syntax)
{
	static const char *const truthy[] = { "1", "true", "TRUE", "yes", "on", "On", "2" };
	static const char *const falsy[] = { "0", "false", "no", "off", "OFF" };
	const struct param_def *p = config_find_param("log_stats");
	const struct param_def *t = config_find_param("server_idle_timeout");
	const struct param_def *i = config_find_param("listen_backlog");
	struct config *cfg = config_defaults();
	char err[256];

	for (size_t k = 0; k < ARRAY_SIZE(truthy); k++) {
		cfg->log_stats = false;
		ck_assert_int_eq(config_set_param(cfg, p, truthy[k], err, sizeof(err)), 0);
		ck_assert_msg(cfg->log_stats, "%s", truthy[k]);
	}
	for (size_t k = 0; k < ARRAY_SIZE(falsy); k++) {
		cfg->log_stats = true;
		ck_assert_int_eq(config_set_param(cfg, p, falsy[k], err, sizeof(err)), 0);
		ck_assert_msg(!cfg->log_stats, "%s", falsy[k]);
	}

	ck_assert_int_eq(config_set_param(cfg, t, "0.5", err, sizeof(err)), 0);
	ck_assert(cfg->server_idle_timeout == 500000);
	ck_assert_int_eq(config_set_param(cfg, t, "+7", err, sizeof(err)), 0);
	ck_assert(cfg->server_idle_timeout == 7 * USEC_PER_SEC);
	ck_assert_int_eq(config_set_param(cfg, t, "0.000001", err, sizeof(err)), 0);
	ck_assert(cfg->server_idle_timeout == 1);

	ck_assert_int_eq(config_set_param(cfg, i, "+64", err, sizeof(err)), 0);
	ck_assert_int_eq(cfg->listen_backlog, 64);
	ck_assert_int_eq(config_set_param(cfg, i, "-1", err, sizeof(err)), -1);
	assert_contains(err, "at least 0");

	ck_assert_int_eq(config_set_param(cfg, config_find_param("unix_socket_mode"), "0700", err, sizeof(err)), 0);
	ck_assert_int_eq(cfg->unix_socket_mode, 0700);
	ck_assert_int_eq(config_set_param(cfg, config_find_param("unix_socket_mode"), "777", err, sizeof(err)), 0);
	ck_assert_int_eq(cfg->unix_socket_mode, 0777);

	ck_assert_int_eq(config_set_param(cfg, config_find_param("auth_type"), "SCRAM-SHA-256", err, sizeof(err)), 0);
	ck_assert_int_eq(cfg->auth_type, AUTH_TYPE_SCRAM_SHA_256);
	ck_assert_int_eq(config_set_param(cfg, config_find_param("auth_type"), "ldap", err, sizeof(err)), 0);
	ck_assert_int_eq(cfg->auth_type, AUTH_TYPE_LDAP);
	ck_assert_int_eq(config_set_param(cfg, config_find_param("server_tls_sslmode"), "verify-full", err, sizeof(err)), 0);
	ck_assert_int_eq(cfg->server_tls_sslmode, TLS_SSLMODE_VERIFY_FULL);

	/* service_name is PgBouncer's alias of job_name */
	ck_assert_int_eq(config_set_param(cfg, config_find_param("service_name"), "svc", err, sizeof(err)), 0);
	ck_assert_str_eq(cfg->job_name, "svc");
	config_free(cfg);
}
END_TEST

/*
 * Every number setting's bounds (issue 48): what PgBouncer 1.26 takes,
 * pgvalve takes. PgBouncer reads an integer with strtol(s, NULL, 0) and
 * no bound at all, so each bound pgvalve keeps is one where PgBouncer's
 * value would have no meaning (a negative size or count, a port outside
 * 1-65535, a peer_id over its documented 16383, 0 scram_iterations, an
 * empty pkt_buf): doc/config.md's "For PgBouncer users" says so. Each bound
 * is tried on both sides, and the values PgBouncer users write are taken.
 */
START_TEST(test_int_bounds)
{
	char err[256];
	size_t n;
	const struct param_def *params = config_params(&n);
	struct config *cfg = config_defaults();
	int checked = 0;
	for (size_t i = 0; i < n; i++) {
		const struct param_def *p = &params[i];
		if (p->type != PARAM_INT || p->alias_of)
			continue;
		char v[32];
		snprintf(v, sizeof(v), "%d", p->min_value);
		ck_assert_msg(config_set_param(cfg, p, v, err, sizeof(err)) == 0, "%s = %s: %s", p->name, v, err);
		snprintf(v, sizeof(v), "%d", p->max_value);
		ck_assert_msg(config_set_param(cfg, p, v, err, sizeof(err)) == 0, "%s = %s: %s", p->name, v, err);
		snprintf(v, sizeof(v), "%ld", (long)p->min_value - 1);
		ck_assert_msg(config_set_param(cfg, p, v, err, sizeof(err)) == -1, "%s = %s taken", p->name, v);
		snprintf(v, sizeof(v), "%ld", (long)p->max_value + 1);
		ck_assert_msg(config_set_param(cfg, p, v, err, sizeof(err)) == -1, "%s = %s taken", p->name, v);
		/* no bound but these, and 0 or 1 at the bottom */
		ck_assert_msg(p->min_value == 0 || p->min_value == 1, "%s: lowest %d", p->name, p->min_value);
		ck_assert_msg(p->max_value == INT_MAX || p->max_value == 65535 || strcmp(p->name, "peer_id") == 0 ||
			      strcmp(p->name, "workers") == 0 || strcmp(p->name, "auth_ldap_max_concurrent") == 0,
			      "%s: highest %d", p->name, p->max_value);
		checked++;
	}
	ck_assert_int_gt(checked, 20);
	config_free(cfg);

	/* PgBouncer's own test configuration and its number syntax */
	struct config *c = load_ok("[pgbouncer]\npkt_buf = 75\ntcp_socket_buffer = 4096\n");
	ck_assert_int_eq(c->pkt_buf, 75);
	ck_assert_int_eq(c->tcp_socket_buffer, 4096);
	config_free(c);
	c = load_ok("[pgbouncer]\npkt_buf = 0x2000\nmax_client_conn = 010\nlog_connections = 0x0\n");
	ck_assert_int_eq(c->pkt_buf, 8192);
	ck_assert_int_eq(c->max_client_conn, 8);
	ck_assert(!c->log_connections);
	config_free(c);
	const struct param_def *peer_id = config_find_param("peer_id");
	ck_assert_int_eq(peer_id->max_value, 16383);	/* PgBouncer's documented highest */
}
END_TEST

START_TEST(test_set_param_rejects_and_keeps_old)
{
	static const struct { const char *name; const char *good; const char *bad; } cases[] = {
		{ "listen_port", "7777", "port" },
		{ "log_connections", "0", "sometimes" },
		{ "query_wait_timeout", "3.25", "-2" },
		{ "pool_mode", "statement", "row" },
		{ "unix_socket_mode", "0750", "8" },
		{ "auth_type", "trust", "reject" },
	};
	struct config *cfg = config_defaults();
	char before[128], after[128], err[256];

	for (size_t k = 0; k < ARRAY_SIZE(cases); k++) {
		const struct param_def *p = config_find_param(cases[k].name);
		ck_assert_int_eq(config_set_param(cfg, p, cases[k].good, err, sizeof(err)), 0);
		config_format_value(cfg, p, before, sizeof(before));
		err[0] = '\0';
		ck_assert_int_eq(config_set_param(cfg, p, cases[k].bad, err, sizeof(err)), -1);
		ck_assert_msg(err[0] != '\0', "%s: no reason given", cases[k].name);
		config_format_value(cfg, p, after, sizeof(after));
		ck_assert_str_eq(before, after);
	}
	ck_assert_int_eq(cfg->listen_port, 7777);
	ck_assert_int_eq(cfg->pool_mode, POOL_MODE_STATEMENT);
	ck_assert(cfg->query_wait_timeout == 3250000);
	config_free(cfg);
}
END_TEST

START_TEST(test_format_value)
{
	struct config *cfg = load_ok(
		"[pgbouncer]\n"
		"server_lifetime = 0.5\n"
		"query_timeout = 1.000001\n"
		"log_connections = yes\n"
		"pool_mode = Transaction\n"
		"unix_socket_mode = 0700\n"
		"listen_addr = 127.0.0.1, ::1\n");
	char buf[256];

	fmt(cfg, "server_lifetime", buf, sizeof(buf));
	ck_assert_str_eq(buf, "0.5");
	fmt(cfg, "query_timeout", buf, sizeof(buf));
	ck_assert_str_eq(buf, "1.000001");
	fmt(cfg, "server_idle_timeout", buf, sizeof(buf));
	ck_assert_str_eq(buf, "600");
	fmt(cfg, "log_connections", buf, sizeof(buf));
	ck_assert_str_eq(buf, "1");
	fmt(cfg, "server_fast_close", buf, sizeof(buf));
	ck_assert_str_eq(buf, "0");
	fmt(cfg, "pool_mode", buf, sizeof(buf));
	ck_assert_str_eq(buf, "transaction");
	fmt(cfg, "auth_type", buf, sizeof(buf));
	ck_assert_str_eq(buf, "md5");
	fmt(cfg, "unix_socket_mode", buf, sizeof(buf));
	ck_assert_str_eq(buf, "0700");
	fmt(cfg, "listen_port", buf, sizeof(buf));
	ck_assert_str_eq(buf, "6432");
	fmt(cfg, "listen_addr", buf, sizeof(buf));
	ck_assert_str_eq(buf, "127.0.0.1, ::1");
	fmt(cfg, "server_reset_query", buf, sizeof(buf));
	ck_assert_str_eq(buf, "DISCARD ALL");
	/* a small buffer truncates safely */
	fmt(cfg, "server_reset_query", buf, 4);
	ck_assert_str_eq(buf, "DIS");
	config_free(cfg);
}
END_TEST

START_TEST(test_format_round_trip_every_param)
{
	size_t n;
	const struct param_def *ps = config_params(&n);
	struct config *a = load_ok(
		"[pgbouncer]\n"
		"server_lifetime = 12.345678\n"
		"pool_mode = statement\n"
		"unix_socket_mode = 0640\n"
		"log_stats = off\n"
		"max_client_conn = 4321\n"
		"admin_users = root, admin\n"
		"auth_type = hba\n"
		"client_tls_sslmode = verify-ca\n");
	struct config *b = config_defaults();
	char v1[512], v2[512], err[256];

	for (size_t i = 0; i < n; i++) {
		config_format_value(a, &ps[i], v1, sizeof(v1));
		ck_assert_msg(config_set_param(b, &ps[i], v1, err, sizeof(err)) == 0, "%s=%s: %s", ps[i].name, v1, err);
		config_format_value(b, &ps[i], v2, sizeof(v2));
		ck_assert_msg(strcmp(v1, v2) == 0, "%s: %s != %s", ps[i].name, v1, v2);
	}
	ck_assert(b->server_lifetime == 12345678);
	ck_assert_int_eq(b->unix_socket_mode, 0640);
	ck_assert_int_eq(b->auth_type, AUTH_TYPE_HBA);
	ck_assert_int_eq(b->max_client_conn, 4321);
	ck_assert(!b->log_stats);
	config_free(a);
	config_free(b);
}
END_TEST

START_TEST(test_list_contains)
{
	ck_assert(config_list_contains("alice,bob", "bob"));
	ck_assert(config_list_contains(" alice , bob ", "alice"));
	ck_assert(config_list_contains("alice bob\tcarol", "carol"));
	ck_assert(config_list_contains("alice,,bob,", "bob"));
	ck_assert(!config_list_contains("alice,bob", "Bob"));
	ck_assert(!config_list_contains("alice,bobby", "bob"));
	ck_assert(!config_list_contains("alice,bob", "bo"));
	ck_assert(!config_list_contains("", "bob"));
	ck_assert(!config_list_contains(NULL, "bob"));
	ck_assert(!config_list_contains("alice", ""));
	ck_assert(config_list_contains("extra_float_digits, options", "options"));
}
END_TEST

START_TEST(test_enum_names)
{
	ck_assert_str_eq(pool_mode_name(POOL_MODE_SESSION), "session");
	ck_assert_str_eq(pool_mode_name(POOL_MODE_TRANSACTION), "transaction");
	ck_assert_str_eq(pool_mode_name(POOL_MODE_STATEMENT), "statement");
	ck_assert_str_eq(pool_mode_name(-1), "unknown");
	ck_assert_str_eq(pool_mode_name(3), "unknown");
	ck_assert_str_eq(auth_type_name(AUTH_TYPE_SCRAM_SHA_256), "scram-sha-256");
	ck_assert_str_eq(auth_type_name(AUTH_TYPE_PEER), "peer");
	ck_assert_str_eq(auth_type_name(AUTH_TYPE_LDAP), "ldap");
	ck_assert_str_eq(auth_type_name(99), "unknown");
}
END_TEST

/* ------------------------------------------------------------------ suite */

Suite *unit_suite(void)
{
	Suite *s = suite_create("config");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_defaults_match_pgbouncer);
	tcase_add_test(tc, test_strings_never_null);
	tcase_add_test(tc, test_param_table);
	tcase_add_test(tc, test_tenant_from);
	tcase_add_test(tc, test_drain_params);
	tcase_add_test(tc, test_main_section_names_equivalent);
	tcase_add_test(tc, test_comments_blank_and_indented_lines);
	tcase_add_test(tc, test_repeated_key_last_wins_and_section_reopened);
	tcase_add_test(tc, test_include_relative_to_cwd);
	tcase_add_test(tc, test_include_missing_file);
	tcase_add_test(tc, test_include_cycle_stops);
	tcase_add_test(tc, test_missing_main_file);
	tcase_add_test(tc, test_main_section_required);
	tcase_add_test(tc, test_huge_line);
	tcase_add_test(tc, test_invalid_values);
	tcase_add_test(tc, test_int_bounds);
	tcase_add_test(tc, test_errors_never_show_passwords);
	tcase_add_test(tc, test_no_setting_is_ignored);
	tcase_add_test(tc, test_ldap_refused);
	tcase_add_test(tc, test_unknown_key_refused);
	tcase_add_test(tc, test_databases);
	tcase_add_test(tc, test_parse_db_string_and_clone);
	tcase_add_test(tc, test_users);
	tcase_add_test(tc, test_peers);
	tcase_add_test(tc, test_value_syntax);
	tcase_add_test(tc, test_set_param_rejects_and_keeps_old);
	tcase_add_test(tc, test_format_value);
	tcase_add_test(tc, test_format_round_trip_every_param);
	tcase_add_test(tc, test_list_contains);
	tcase_add_test(tc, test_enum_names);
	tcase_add_test(tc, test_workers_param);
	tcase_add_test(tc, test_target_session_attrs);
	tcase_add_test(tc, test_role_routing_defaults);
	suite_add_tcase(s, tc);
	return s;
}
