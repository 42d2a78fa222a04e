/*
 * server_internal.c - the queries pgvalve runs on a server for itself
 * (enum server_internal): bringing its session parameters in line with
 * the client it is lent to, server_reset_query, server_check_query, the
 * database's connect_query and auth_query for a login.
 *
 * Part of the server connection (server.c reads their answers and calls
 * back here when one is done); split off for size. Their replies never
 * reach a client.
 */
#include "common.h"
#include "server.h"
#include "server_internal.h"
#include "client.h"
#include "auth.h"
#include "config.h"
#include "log.h"
#include "pool.h"
#include "relay.h"
#include "proto.h"

/* Sends b (freed), pgvalve's own query `what`, one ReadyForQuery owed: its answer is read as that query's. */
static void send_internal(struct server *server, enum server_internal what, struct pktbuf *b)
{
	server->internal = what;
	server->internal_failed = false;
	server->expect_ready++;
	netbuf_send(&server->nb, b->buf, b->len);
	pktbuf_free(b);
	netbuf_resume(&server->nb);
}

void server_run_internal(struct server *server, enum server_internal what, const char *sql, uint32_t sql_len)
{
	struct pktbuf b;
	pktbuf_init(&b, sql_len + 16);
	pktbuf_begin(&b, 'Q');
	pktbuf_put_bytes(&b, sql, sql_len);
	pktbuf_put_byte(&b, 0);
	pktbuf_end(&b);
	send_internal(server, what, &b);
}

void server_run_feature_query(struct server *server, const struct server_query_ops *ops, const char *sql)
{
	server_set_state(server, SV_TESTED);
	server->query_ops = ops;
	server_run_internal(server, SV_INTERNAL_FEATURE, sql, (uint32_t)strlen(sql));
}

void server_learn_session(struct server *server)
{
	struct pktbuf b;
	pktbuf_init(&b, 1024);
	relay_call(sets_learn_sql, server, &b);
	netbuf_flush_forwarded(&server->nb);	/* the client's ReadyForQuery first */
	/*
	 * Its next transaction waits for the answer (one round trip; by name,
	 * about 0.01 ms of the server's): let through behind the learn, a
	 * client sending transaction after transaction would keep the server
	 * from the pool for good.
	 */
	netbuf_pause(&server->link->nb);
	server_run_internal(server, SV_INTERNAL_LEARN, (const char *)b.buf, b.len);
	pktbuf_free(&b);
}

/*
 * Learned, its client (if still there) goes on; the server goes back to
 * the pool as after any transaction, unless the client already sent more.
 */
static void learn_session_done(struct server *server)
{
	struct client *client = server->link;
	relay_call(sets_learn_done, server, server->internal_failed);
	if (server->txn_status != 'I') {
		if (client)
			server_unlink(server);
		server_close(server, "learning the session left a transaction open");
	} else if (!client || server_is_clean(server)) {
		pool_release_server(server);
	}	/* else its client's next transaction is already on its way here: the server stays with it */
	if (client && client->state != CL_CLOSED) {
		client_ready_seen(client);
		netbuf_resume(&client->nb);
	}
}

/*
 * Parse, Bind with values as $1..$n in text (never spliced into the SQL),
 * [Describe the portal, for its RowDescription,] Execute, Sync.
 */
static void put_bound_query(struct pktbuf *b, const char *sql, int nparams, const char *const *values, bool describe)
{
	pktbuf_begin(b, 'P');
	pktbuf_put_string(b, "");
	pktbuf_put_string(b, sql);
	pktbuf_put_uint16(b, 0);
	pktbuf_end(b);
	pktbuf_begin(b, 'B');
	pktbuf_put_string(b, "");
	pktbuf_put_string(b, "");
	pktbuf_put_uint16(b, 0);
	pktbuf_put_uint16(b, (uint16_t)nparams);
	for (int i = 0; i < nparams; i++) {
		pktbuf_put_uint32(b, (uint32_t)strlen(values[i]));
		pktbuf_put_bytes(b, values[i], (uint32_t)strlen(values[i]));
	}
	pktbuf_put_uint16(b, 0);
	pktbuf_end(b);
	if (describe) {
		pktbuf_begin(b, 'D');
		pktbuf_put_byte(b, 'P');
		pktbuf_put_string(b, "");
		pktbuf_end(b);
	}
	pktbuf_begin(b, 'E');
	pktbuf_put_string(b, "");
	pktbuf_put_uint32(b, 0);
	pktbuf_end(b);
	pktbuf_begin(b, 'S');
	pktbuf_end(b);
}

void server_run_feature_query_params(struct server *server, const struct server_query_ops *ops, const char *sql,
				     int nparams, const char *const *values)
{
	uint32_t size = 256 + (uint32_t)strlen(sql);
	for (int i = 0; i < nparams; i++)
		size += 4 + (uint32_t)strlen(values[i]);
	struct pktbuf b;
	pktbuf_init(&b, size);
	put_bound_query(&b, sql, nparams, values, true);
	server_set_state(server, SV_TESTED);
	server->query_ops = ops;
	send_internal(server, SV_INTERNAL_FEATURE, &b);
}

void server_run_auth_query(struct server *server, struct client *client)
{
	const struct db_config *dc = client->pool->db->cfg;
	const char *query = dc->auth_query[0] ? dc->auth_query : pgv.cfg->auth_query;
	const char *user = client->login->user;
	struct pktbuf b;
	pktbuf_init(&b, 256 + (uint32_t)strlen(query));
	put_bound_query(&b, query, 1, &user, false);
	server_set_state(server, SV_TESTED);
	server->auth_client = client;
	free(server->auth_result);
	server->auth_result = NULL;
	server->auth_null = true;
	send_internal(server, SV_INTERNAL_AUTH_QUERY, &b);
}

/* The first DataRow of auth_query: (name, secret). */
void take_auth_row(struct server *server, const struct pkt *pkt)
{
	struct pkt_reader r;
	pkt_reader_init(&r, pkt_body(pkt), pkt_body_len(pkt));
	uint16_t ncols = pkt_get_uint16(&r);
	if (r.failed || ncols < 2 || server->auth_result)
		return;
	uint32_t len = pkt_get_uint32(&r);
	if (len != 0xFFFFFFFFu)
		pkt_get_bytes(&r, len);
	len = pkt_get_uint32(&r);
	if (r.failed)
		return;
	if (len == 0xFFFFFFFFu) {
		/* NULL secret: the user exists but has no password (trust still lets it in) */
		server->auth_result = xstrdup("");
		server->auth_null = false;
		return;
	}
	const uint8_t *secret = pkt_get_bytes(&r, len);
	if (!secret || len >= AUTH_SECRET_MAX)
		return;
	server->auth_result = xmalloc(len + 1);
	memcpy(server->auth_result, secret, len);
	server->auth_result[len] = '\0';
	server->auth_null = false;
}

/* Appends a simple Query message carrying sql (len bytes, not NUL-terminated) to b. */
static void put_query(struct pktbuf *b, const void *sql, uint32_t len)
{
	pktbuf_begin(b, 'Q');
	pktbuf_put_bytes(b, sql, len);
	pktbuf_put_byte(b, 0);
	pktbuf_end(b);
}

/*
 * Up to two Query messages, sent together: client_encoding alone first,
 * because PostgreSQL converts a whole Query message from the encoding in
 * force when it arrives (a value in the client's encoding would not parse
 * in the previous client's); then everything else in one statement list,
 * one implicit transaction, so it takes effect all or nothing.
 */
/* What RESET ALL leaves: the values of the server's login, no client SETs. */
static void predict_reset_all(struct server *server)
{
	for (int idx = 0; idx < varcache_count(); idx++)
		if (varcache_settable(idx))
			varcache_clear(&server->vars, idx);
	for (int i = 0; i < server->param_count; i++) {
		int idx = varcache_index(server->params[i].name);
		if (varcache_settable(idx))
			varcache_set(&server->vars, idx, server->params[i].value);
	}
	relay_call_if(sets_cleared, server);
}

/*
 * Up to three Query messages, sent together: a reset of the whole session
 * when it carries changes pgvalve could not follow; client_encoding alone,
 * because PostgreSQL converts a whole Query message from the encoding in
 * force when it arrives (a value in the client's encoding would not parse
 * in the previous client's); then everything else in one statement list,
 * one implicit transaction, so it takes effect all or nothing: the
 * previous client's SETs taken back, the tracked parameters, this
 * client's own SETs.
 */
bool server_apply_client_vars(struct server *server, struct client *client)
{
	/* The common case in transaction mode: the same client again, nothing changed since. */
	if (server->synced_client_id == client->id && server->synced_vars_gen == client->vars_gen)
		return false;
	uint8_t mem_enc[256], mem_rest[2048], mem_sreset[512], mem_sreplay[1024];
	struct pktbuf enc, rest, sreset, sreplay;
	pktbuf_init_fixed(&enc, mem_enc, sizeof(mem_enc));
	pktbuf_init_fixed(&rest, mem_rest, sizeof(mem_rest));
	pktbuf_init_fixed(&sreset, mem_sreset, sizeof(mem_sreset));
	pktbuf_init_fixed(&sreplay, mem_sreplay, sizeof(mem_sreplay));
	bool reset_all = false;
	if (relay_sets_enabled(server->pool)) {
		relay_call(sets_diff_sql, client->sets, server->sets, &sreset, &sreplay, &reset_all);
		if (sreset.failed || sreplay.failed) {
			pktbuf_init(&sreset, 8192);
			pktbuf_init(&sreplay, 8192);
			relay_call(sets_diff_sql, client->sets, server->sets, &sreset, &sreplay, &reset_all);
		}
		if (reset_all)	/* before the diff of the tracked parameters, which starts from there */
			predict_reset_all(server);
		else if (!sreset.len && !sreplay.len)
			relay_call(sets_share, client, server);
	}
	/* Usually the last client and this one left every parameter alike: nothing to compare one by one. */
	bool same = varcache_same(client->vars, server->vars);	/* after predict_reset_all, if any */
	int n_enc = same ? 0 : varcache_diff_encoding_sql(client->vars, server->vars, &enc);
	int n_rest = same ? 0 : varcache_diff_sql(client->vars, server->vars, &rest);
	if (rest.failed) {	/* many long values: build it on the heap */
		pktbuf_init(&rest, 8192);
		n_rest = varcache_diff_sql(client->vars, server->vars, &rest);
	}
	bool any_rest = n_rest > 0 || sreset.len > 0 || sreplay.len > 0;
	if (reset_all || n_enc || any_rest) {
		struct pktbuf b, all;
		pktbuf_init(&b, enc.len + rest.len + sreset.len + sreplay.len + 128);
		if (reset_all) {
			/* SESSION AUTHORIZATION first: RESET ALL leaves it (and role) alone. */
			static const char reset_sql[] = "RESET SESSION AUTHORIZATION; RESET ALL";
			put_query(&b, reset_sql, sizeof(reset_sql) - 1);
		}
		if (n_enc)
			put_query(&b, enc.buf, enc.len);
		if (any_rest) {
			pktbuf_init(&all, enc.len + sreset.len + rest.len + sreplay.len + 8);
			/*
			 * A refused client_encoding does not stop the next Query
			 * from running: set it again at the head of the rest, so
			 * that the rest fails (and rolls back) with it. Taken, this
			 * changes nothing; ASCII, it parses in either encoding.
			 */
			if (n_enc) {
				pktbuf_put_bytes(&all, enc.buf, enc.len);
				pktbuf_put_bytes(&all, "; ", 2);
			}
			pktbuf_put_bytes(&all, sreset.buf, sreset.len);
			pktbuf_put_bytes(&all, rest.buf, rest.len);
			if (rest.len)
				pktbuf_put_bytes(&all, "; ", 2);
			pktbuf_put_bytes(&all, sreplay.buf, sreplay.len);
			put_query(&b, all.buf, all.len);
			pktbuf_free(&all);
		}
		if (log_enabled(LOG_LEVEL_DEBUG)) {
			char pfx[256];
			server_log(LOG_LEVEL_DEBUG, server, "bringing session parameters in line with %s",
				   client_prefix(client, pfx, sizeof(pfx)));
			if (n_enc || n_rest) {	/* PgBouncer's line, which its users grep for */
				char applied[1024];
				varcache_diff_describe(client->vars, server->vars, applied, sizeof(applied));
				server_log(LOG_LEVEL_DEBUG, server, "varcache_apply: %s", applied);
			}
		}
		server->internal = SV_INTERNAL_SET_PARAMS;
		server->internal_failed = false;
		server->internal_sqlstate[0] = '\0';
		server->expect_ready += reset_all + (n_enc > 0) + any_rest;
		netbuf_send(&server->nb, b.buf, b.len);
		pktbuf_free(&b);
		netbuf_resume(&server->nb);
	}
	pktbuf_free(&rest);
	pktbuf_free(&sreset);
	pktbuf_free(&sreplay);
	server->synced_client_id = client->id;
	server->synced_vars_gen = client->vars_gen;
	return reset_all || n_enc || any_rest;
}

/*
 * Whether PostgreSQL refused the client's own value (as it would have at
 * the client's login), rather than failing for a reason of the server's:
 * data exceptions (22: invalid value, bad byte sequence in the client's
 * encoding), unknown parameter or missing privilege (42), a parameter
 * that cannot be changed now (55P02).
 */
static bool apply_error_is_clients(const char *sqlstate)
{
	return strncmp(sqlstate, "22", 2) == 0 || strncmp(sqlstate, "42", 2) == 0 ||
	       strcmp(sqlstate, "55P02") == 0;
}

/* A server failed to take a client's parameters: how many others to try before giving up. */
#define VARS_APPLY_MAX_FAILURES 3

/*
 * The client's server failed while taking its parameters (and was closed):
 * nothing of the client's ran there, its message still waits in its
 * buffer. Another server, already in line or brought there, takes it.
 */
void retry_on_another_server(struct client *client)
{
	if (++client->vars_apply_failures >= VARS_APPLY_MAX_FAILURES) {
		client_close(client, "08P01", "could not bring a server's session parameters in line with the client's");
		return;
	}
	if (pool_request_server(client) && client->link && client->link->internal == SV_INTERNAL_NONE)
		netbuf_resume(&client->nb);
}

static void set_params_done(struct server *server)
{
	struct client *client = server->link;
	if (!client)
		return;
	if (!server->internal_failed) {
		/*
		 * A login's values are known good from now on, as the client wrote
		 * them: before the client takes PostgreSQL's spelling of them.
		 */
		if (client->state == CL_PARAMS_CHECK)
			varcache_accept(&server->pool->accepted_vars, client->vars, server->pool->welcome_vars);
		/* parameters the server does not report (search_path on PostgreSQL 15) */
		char pfx[256];
		varcache_sync_applied(&server->vars, &client->vars, server->reported_mask,
				      log_enabled(LOG_LEVEL_DEBUG) ? client_prefix(client, pfx, sizeof(pfx)) : NULL);
		if (relay_sets_enabled(server->pool))
			relay_call(sets_applied, server, client);
		client->vars_apply_failures = 0;
		client_server_in_line(client);
		return;
	}
	/*
	 * Nothing of the failed statement took effect (it rolled back), and
	 * client_encoding, applied apart, is reported: the server's tracked
	 * values are still right. The client's messages never run here.
	 */
	server->synced_client_id = 0;
	if (apply_error_is_clients(server->internal_sqlstate)) {
		client_log(LOG_LEVEL_WARNING, client, "server refused its session parameters: %s",
			   server->internal_error);
		/* What PostgreSQL answers a login with a bad parameter value. */
		client_close(client, server->internal_sqlstate, server->internal_error);
		return;
	}
	char reason[320];
	snprintf(reason, sizeof(reason), "could not apply a client's session parameters: %s", server->internal_error);
	server_unlink(server);
	server_close(server, reason);
	retry_on_another_server(client);
}

/* Its role check was answered, at login or while idle (server_hooks.check_done). */
static void role_check_done(struct server *server)
{
	enum server_verdict v = server_hooks.check_done ? server_hooks.check_done(server, server->internal_failed) :
			        SERVER_ACCEPT;
	if (server->state == SV_CLOSED)
		return;
	if (server->txn_status != 'I') {
		server_close(server, "role check left a transaction open");
		return;
	}
	if (v == SERVER_REJECT) {
		server_role_rejected(server);
		return;
	}
	if (!server->logged_in) {
		server_login_continue(server);
		return;
	}
	server->last_used = now_usec();
	pool_server_ready(server);
}

/* The server answered pgvalve's own query with ReadyForQuery. */
void internal_query_done(struct server *server)
{
	enum server_internal what = server->internal;
	server->internal = SV_INTERNAL_NONE;

	switch (what) {
	case SV_INTERNAL_SET_PARAMS:
		set_params_done(server);
		break;
	case SV_INTERNAL_RESET:
	case SV_INTERNAL_CHECK:
		if (what == SV_INTERNAL_RESET) {	/* reported values came back as ParameterStatus; the rest are unknown */
			varcache_forget_except(&server->vars, server->reported_mask);
			server->synced_client_id = 0;
		}
		if (server->internal_failed || server->txn_status != 'I') {
			server_close(server, what == SV_INTERNAL_RESET ? "reset query failed" : "server check query failed");
			return;
		}
		server->last_used = now_usec();
		pool_server_ready(server);
		break;
	case SV_INTERNAL_UNDO:
		if (server->internal_failed || server->txn_status != 'I') {
			server_close(server, "undoing a client's session state failed");
			return;
		}
		pool_release_server(server);	/* released again, clean: the reset or the pool next */
		break;
	case SV_INTERNAL_POSITION:
		relay_call(balance_position_done, server, server->internal_failed);	/* clears position_for */
		if (server->txn_status != 'I') {
			server_close(server, "the WAL position query left a transaction open");
			return;
		}
		pool_release_server(server);	/* released again: release_sql, the reset or the pool next */
		break;
	case SV_INTERNAL_CONNECT_QUERY:
		/* Its errors are logged (above) and otherwise ignored, as PgBouncer; an open transaction is not. */
		if (server->txn_status != 'I') {
			server_close(server, "connect_query left a transaction open");
			return;
		}
		pool_server_ready(server);
		break;
	case SV_INTERNAL_ROLE_CHECK:
		role_check_done(server);
		break;
	case SV_INTERNAL_LEARN:
		learn_session_done(server);
		break;
	case SV_INTERNAL_FEATURE:
		server->query_ops->done(server, server->internal_failed);
		if (server->state == SV_CLOSED)
			return;
		if (server->txn_status != 'I') {
			server_close(server, "internal query left a transaction open");
			return;
		}
		pool_server_ready(server);
		break;
	case SV_INTERNAL_AUTH_QUERY: {
		struct client *client = server->auth_client;
		server->auth_client = NULL;
		if (client && client->state != CL_CLOSED)
			auth_query_answer(client, server->auth_null ? NULL : server->auth_result,
					  server->internal_failed ? "the query returned an error" : NULL);
		if (server->auth_result) {
			secret_clear(server->auth_result, strlen(server->auth_result));
			free(server->auth_result);
			server->auth_result = NULL;
		}
		if (server->state == SV_CLOSED)
			return;
		if (server->internal_failed || server->txn_status != 'I') {
			server_close(server, "auth_query failed");
			return;
		}
		pool_server_ready(server);
		break;
	}
	case SV_INTERNAL_NONE:
		break;
	}
}
