/*
 * reload.c - online reload of the config file and the auth_file
 * (SIGHUP and the admin console's RELOAD).
 *
 * Loads everything into new objects first; only when all of it parsed
 * does it swap them in and let pool.c bring databases and pools in line.
 * Owns nothing after it returns.
 */
#include "common.h"
#include "reload.h"
#include "auth_file.h"
#include "config.h"
#include "dns.h"
#include "log.h"
#include "metrics_http.h"
#include "listener.h"
#include "pool.h"
#include "scram_cache.h"
#include "tls.h"
#include "netbuf.h"
#include "hba.h"
#include "workers.h"

/* Restart-only parameters keep the value the process started with. */
static void keep_restart_only(const struct config *running, struct config *fresh)
{
	size_t n;
	const struct param_def *params = config_params(&n);
	char was[1024], now[1024], err[256];

	for (size_t i = 0; i < n; i++) {
		const struct param_def *p = &params[i];
		if (p->reloadable)
			continue;
		config_format_value(running, p, was, sizeof(was));
		config_format_value(fresh, p, now, sizeof(now));
		if (strcmp(was, now) == 0)
			continue;
		log_warning("parameter %s changed from \"%s\" to \"%s\": a restart is needed to apply it", p->name, was, now);
		if (config_set_param(fresh, p, was, err, sizeof(err)) < 0)
			log_error("could not keep the running value of %s: %s", p->name, err);
	}
}

int reload_config(char *errbuf, size_t errsize)
{
	struct config_error err;
	struct config *fresh = NULL;

	log_info("reloading configuration from %s", pgv.config_path);
	if (config_load(pgv.config_path, &fresh, &err) < 0) {
		snprintf(errbuf, errsize, "%s", err.message);
		log_error("reload failed, keeping the running configuration: %s", err.message);
		return -1;
	}
	struct auth_store *auth = NULL;
	if (fresh->auth_file[0]) {
		auth = auth_file_load(fresh->auth_file);
		if (!auth) {
			snprintf(errbuf, errsize, "could not read auth_file %s", fresh->auth_file);
			log_error("reload failed, keeping the running configuration: %s", errbuf);
			config_free(fresh);
			return -1;
		}
	}
	/* -w and so_reuseport before comparing with the running values; a worker's peers after. */
	char werr[256];
	workers_force_options(fresh);
	keep_restart_only(pgv.cfg, fresh);
	if (workers_apply_peers(fresh, werr, sizeof(werr)) < 0) {
		snprintf(errbuf, errsize, "%s", werr);
		log_error("reload failed, keeping the running configuration: %s", werr);
		if (auth)
			auth_store_free(auth);
		config_free(fresh);
		return -1;
	}

	/* hba and ident files: a file that cannot be read keeps the previous rules. */
	struct hba *hba = NULL;
	struct ident_map *ident = NULL;
	if (fresh->auth_hba_file[0] && !(hba = hba_load(fresh->auth_hba_file)))
		log_error("reload: keeping the previous auth_hba_file rules");
	if (fresh->auth_ident_file[0] && !(ident = ident_load(fresh->auth_ident_file)))
		log_error("reload: keeping the previous auth_ident_file maps");
	if (hba || !fresh->auth_hba_file[0]) {
		hba_free(pgv.hba);
		pgv.hba = hba;
	}
	if (ident || !fresh->auth_ident_file[0]) {
		ident_free(pgv.ident);
		pgv.ident = ident;
	}

	struct config *old = pgv.cfg;
	struct auth_store *old_auth = pgv.auth;
	pgv.cfg = fresh;
	pgv.auth = auth;
	pgv.config_generation++;

	struct log_settings ls = {
		.logfile = fresh->logfile,
		.to_stderr = pgv.log_to_stderr,
		.use_syslog = fresh->syslog,
		.syslog_ident = fresh->syslog_ident,
		.syslog_facility = fresh->syslog_facility,
		.verbose = MAX(pgv.cli_verbose, fresh->verbose),
	};
	if (log_setup(&ls) < 0)
		log_error("could not open logfile %s: %s", fresh->logfile, strerror(errno));

	/* TLS files are re-read; a broken one keeps the previous contexts (logged). */
	char tls_err[512];
	if (tls_configure(fresh, tls_err, sizeof(tls_err)) == 0 && pool_server_tls_changed(old, fresh)) {
		log_info("server TLS settings changed: server connections will be replaced");
		pool_retire_all_servers("obsolete connection");
	}
	netbuf_set_loopcnt(fresh->sbuf_loopcnt);
	netbuf_set_write_chunk((uint32_t)fresh->tcp_socket_buffer);
	netbuf_set_client_limit((uint32_t)fresh->max_packet_size);
	dns_configure(fresh);
	pool_apply_config();
	listener_apply_tcp_settings();
	metrics_http_apply_config();
	config_free(old);
	if (old_auth)
		auth_store_free(old_auth);
	/* Keys derived from the old secrets or scram_iterations go with them (wiped). */
	scram_cache_clear();
	if (auth)
		log_info("loaded %zu users from auth_file %s", auth_store_count(auth), fresh->auth_file);
	log_info("configuration reloaded");
	return 0;
}
