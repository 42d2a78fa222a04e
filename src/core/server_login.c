/*
 * server_login.c - logging in to PostgreSQL: the answer to SSLRequest, the
 * password exchange (cleartext, md5, SCRAM-SHA-256 and -PLUS with channel
 * binding), the login's ParameterStatus and BackendKeyData, and its end:
 * a refusal (cached for the pool, or not when PostgreSQL is only going
 * down or coming up), or the role check, connect_query and the pool.
 *
 * Called by server.c for every message of a server in SV_LOGIN
 * (server_login_packet); reaches the rest of the server connection
 * through server_internal.h.
 */
#include "common.h"
#include "server.h"
#include "server_internal.h"
#include "client.h"
#include "config.h"
#include "crypto.h"
#include "log.h"
#include "pool.h"
#include "proto.h"
#include "scram.h"
#include "scram_cache.h"
#include "tcp.h"
#include "tls.h"
#include "varcache.h"

#include <arpa/inet.h>
#include <sys/socket.h>

#include <openssl/crypto.h>

/* ---------------------------------------------------------------- login */

/*
 * A role-routed database (target_session_attrs) with a host list: a host
 * that refuses logins for its own state (57P: shutting down, starting up,
 * in recovery without hot standby) is a host that is not there; another
 * entry may serve the waiting clients. Other errors (a wrong password)
 * would be the same everywhere: they still go to the clients.
 */
static bool host_is_unavailable(const struct server *server, const char *sqlstate)
{
	const struct db_config *dc = server->pool->db->cfg;
	return dc->target_session_attrs != TSA_ANY && strncmp(sqlstate, "57P", 3) == 0 &&
	       server->pool->db->host_count > 1;
}

/*
 * A refusal that says the server is going down or coming up (57P01-57P03:
 * "the database system is shutting down", "is starting up", "is not yet
 * accepting connections", a login cut by the shutdown), not that this
 * login is wrong. As PgBouncer, it fails no waiting client; unlike a
 * refusal of the login itself it is not cached for new clients either
 * (pool_fast_fail): they wait for the server that logs in once
 * PostgreSQL accepts again, as after a refused connect.
 */
static bool login_refusal_is_transient(const struct server *server, const char *sqlstate)
{
	if (strcmp(sqlstate, "57P01") == 0 || strcmp(sqlstate, "57P02") == 0 || strcmp(sqlstate, "57P03") == 0)
		return true;
	/*
	 * A login cut short without a word (08006) while the pool's own
	 * servers were being cut too: PostgreSQL shutting down. A server that
	 * hangs up on every login with no such history stays a cached failure.
	 */
	return strcmp(sqlstate, "08006") == 0 && server->pool->servers_lost;
}

/*
 * The login itself failed (the server refused it, or pgvalve could not
 * complete it): the pool's waiting clients get the error (pool.c), and the
 * server closes with it as the reason. severity: the server's, for the
 * log line PgBouncer writes ("server login failed: FATAL ...").
 */
static void login_failed_severity(struct server *server, const char *severity, const char *sqlstate,
				  const char *message)
{
	server_log(LOG_LEVEL_WARNING, server, "server login failed: %s %s", severity, message);
	const struct client_kind_ops *own = server_own_kind(server);
	if (own) {
		/*
		 * Its own client alone hears it: the refusal is usually about that
		 * client (its role, its options), so neither the pool's state nor
		 * the database's host list moves.
		 */
		if (own->own_server_failed)
			own->own_server_failed(server, sqlstate, message);
	} else if (host_is_unavailable(server, sqlstate) || login_refusal_is_transient(server, sqlstate)) {
		db_host_failed(server->pool->db, server->host_idx);
		pool_server_connect_failed(server->pool);	/* as a refused connect: the clients wait (for another host) */
	} else {
		db_host_failed(server->pool->db, server->host_idx);
		pool_server_login_failed(server->pool, sqlstate, message);
	}
	server_close(server, message);
}

void server_login_failed(struct server *server, const char *sqlstate, const char *message)
{
	login_failed_severity(server, "ERROR", sqlstate, message);
}

static void send_sasl(struct server *server, const char *mechanism, const char *data, int len)
{
	struct pktbuf b;
	pktbuf_init(&b, 128 + (uint32_t)len);
	pktbuf_begin(&b, 'p');
	if (mechanism) {
		pktbuf_put_string(&b, mechanism);
		pktbuf_put_uint32(&b, (uint32_t)len);
	}
	pktbuf_put_bytes(&b, data, (uint32_t)len);
	pktbuf_end(&b);
	netbuf_send(&server->nb, b.buf, b.len);
	secret_clear(b.buf, b.len);
	pktbuf_free(&b);
}

static bool password_is_md5(const char *password)
{
	return strncmp(password, "md5", 3) == 0 && strlen(password) == MD5_PASSWD_LEN;
}

static void send_cleartext_password(struct server *server, const char *password)
{
	if (!password[0] || password_is_md5(password)) {
		server_login_failed(server, "28000", "server asked for a cleartext password, but no plain password is configured");
		return;
	}
	struct pktbuf b;
	pktbuf_init(&b, 64 + (uint32_t)strlen(password));
	proto_put_password(&b, password);
	netbuf_send(&server->nb, b.buf, b.len);
	secret_clear(b.buf, b.len);
	pktbuf_free(&b);
}

static void send_md5_password(struct server *server, const char *password, struct pkt_reader *r)
{
	const uint8_t *salt = pkt_get_bytes(r, 4);
	if (!salt) {
		server_login_failed(server, "08P01", "bad md5 authentication request from server");
		return;
	}
	if (!password[0]) {
		server_login_failed(server, "28000", "server asked for an md5 password, but none is configured");
		return;
	}
	char secret[36], response[36];
	if (password_is_md5(password))
		memcpy(secret, password, 36);
	else
		crypto_md5_password(password, server->pool->user, secret);
	crypto_md5_response(secret, salt, response);
	struct pktbuf b;
	uint8_t mem[64];
	pktbuf_init_fixed(&b, mem, sizeof(mem));
	proto_put_password(&b, response);
	netbuf_send(&server->nb, b.buf, b.len);
	secret_clear(secret, sizeof(secret));
}

/*
 * Channel binding towards PostgreSQL, as libpq's channel_binding=prefer:
 * over TLS SCRAM-SHA-256-PLUS when offered, bound to the server's
 * certificate; else "y" (could bind, was not offered) over TLS, "n" without.
 */
static const char *scram_bind(struct server *server, bool plus_offered)
{
	SSL *ssl = netbuf_ssl(&server->nb);
	uint8_t end_point[TLS_END_POINT_MAX];
	size_t len = plus_offered ? tls_server_end_point(ssl, end_point) : 0;
	if (len && scram_client_set_channel_binding(server->scram, 'p', end_point, len))
		return "SCRAM-SHA-256-PLUS";
	scram_client_set_channel_binding(server->scram, ssl ? 'y' : 'n', NULL, 0);
	return "SCRAM-SHA-256";
}

/* AuthenticationSASL: SCRAM-SHA-256(-PLUS) with the plain password, or with the keys a client proved it has. */
static void start_scram(struct server *server, const char *password, struct pkt_reader *r)
{
	bool has_scram = false, has_plus = false;
	for (;;) {
		const char *mech = pkt_get_string(r);
		if (!mech || !mech[0])
			break;
		if (strcmp(mech, "SCRAM-SHA-256") == 0)
			has_scram = true;
		if (strcmp(mech, "SCRAM-SHA-256-PLUS") == 0)
			has_plus = true;
	}
	if (!has_scram && !has_plus) {
		server_login_failed(server, "28000", "server offered no supported SASL mechanism");
		return;
	}
	bool plain = password[0] && !password_is_md5(password);
	if (!plain && !server->pool->has_scram_keys) {
		server_login_failed(server, "28000", "cannot do SCRAM authentication: wrong password type");
		return;
	}
	char msg[SCRAM_MSG_MAX];
	server_free_login_state(server);	/* a second AuthenticationSASL starts over */
	server->scram = xcalloc(1, sizeof(*server->scram));
	scram_client_init(server->scram, NULL, NULL);
	if (!plain)	/* pass-through: the keys a client proved it has */
		scram_client_set_keys(server->scram, server->pool->scram_client_key, server->pool->scram_server_key);
	else	/* one PBKDF2 per password and server salt, not per login */
		scram_client_set_key_source(server->scram, scram_cache_server_keys, server->pool->user);
	const char *mechanism = scram_bind(server, has_plus);
	int len = scram_client_first(server->scram, msg, sizeof(msg));
	if (len < 0) {
		server_login_failed(server, "08P01", "SCRAM: could not build the first message");
		return;
	}
	server_log(LOG_LEVEL_DEBUG, server, "SASL mechanism %s (%s)", mechanism, server->scram->gs2_header);
	send_sasl(server, mechanism, msg, len);
}

static void continue_scram(struct server *server, const char *password, const struct pkt *pkt)
{
	char msg[SCRAM_MSG_MAX];
	const char *err = "unexpected SASL message";
	int len = -1;
	if (server->scram)
		len = scram_client_final(server->scram, password, (const char *)pkt_body(pkt) + 4,
					 pkt_body_len(pkt) - 4, msg, sizeof(msg), &err);
	if (len < 0) {
		server_login_failed(server, "08P01", err);
		return;
	}
	send_sasl(server, NULL, msg, len);
	secret_clear(msg, sizeof(msg));
}

static void finish_scram(struct server *server, const struct pkt *pkt)
{
	const char *err = "unexpected SASL final message";
	if (!server->scram ||
	    !scram_client_verify(server->scram, (const char *)pkt_body(pkt) + 4, pkt_body_len(pkt) - 4, &err)) {
		server_login_failed(server, "08P01", err);
		return;
	}
	server_free_login_state(server);
}

static void handle_auth_request(struct server *server, const struct pkt *pkt)
{
	struct pkt_reader r;
	const char *password = server->pool->password;
	pkt_reader_init(&r, pkt_body(pkt), pkt_body_len(pkt));
	uint32_t code = pkt_get_uint32(&r);

	switch (code) {
	case AUTH_REQ_OK:
		return;
	case AUTH_REQ_CLEARTEXT:
		send_cleartext_password(server, password);
		return;
	case AUTH_REQ_MD5:
		send_md5_password(server, password, &r);
		return;
	case AUTH_REQ_SASL:
		start_scram(server, password, &r);
		return;
	case AUTH_REQ_SASL_CONTINUE:
		continue_scram(server, password, pkt);
		return;
	case AUTH_REQ_SASL_FINAL:
		finish_scram(server, pkt);
		return;
	default: {
		char msg[128];
		snprintf(msg, sizeof(msg), "server asked for an unsupported authentication method (%u)", code);
		server_login_failed(server, "28000", msg);
		return;
	}
	}
}

/*
 * The login's own steps after the role check: the pool's welcome from its
 * first server, connect_query, then the server serves.
 */
void server_login_continue(struct server *server)
{
	struct pool *pool = server->pool;
	server->logged_in = true;
	pool->last_login_failure = 0;
	pool->servers_lost = false;
	if (!pool->welcome_ready)
		pool_learn_welcome(pool, server->params, server->param_count);
	server_note_hot_standby(server);
	/* connect_query: before any client may use the server (as PgBouncer). */
	const char *cq = pool->db->cfg->connect_query;
	if (cq[0]) {
		server_set_state(server, SV_TESTED);
		server_run_internal(server, SV_INTERNAL_CONNECT_QUERY, cq, (uint32_t)strlen(cq));
		return;
	}
	pool_server_ready(server);
}

void server_role_rejected(struct server *server)
{
	server_set_state(server, SV_TESTED);	/* logged in: it gets a Terminate */
	server_close(server, "its role does not match target_session_attrs");
}

/*
 * Role routing first (server_hooks.logged_in): a server whose host does
 * not match the database's target_session_attrs never serves, and the
 * pool's welcome comes from one that does.
 */
static void login_check_role(struct server *server)
{
	const char *sql = NULL;
	enum server_verdict v = server_hooks.logged_in ? server_hooks.logged_in(server, &sql) : SERVER_ACCEPT;
	if (v == SERVER_REJECT) {
		server_role_rejected(server);
		return;
	}
	if (v == SERVER_ASK && sql) {
		server_set_state(server, SV_TESTED);
		server_run_internal(server, SV_INTERNAL_ROLE_CHECK, sql, (uint32_t)strlen(sql));
		return;
	}
	server_login_continue(server);
}

static void login_complete(struct server *server)
{
	struct pool *pool = server->pool;
	server_free_login_state(server);
	if (pgv.cfg->log_connections) {
		struct sockaddr_storage local;
		socklen_t len = sizeof(local);
		char host[INET6_ADDRSTRLEN + 2] = "unix";
		int port = 0;
		if (getsockname(server->nb.fd, (struct sockaddr *)&local, &len) == 0)
			sockaddr_host_text((struct sockaddr *)&local, host, sizeof(host), &port);
		server_log(LOG_LEVEL_INFO, server, "new connection to server (from %s:%d)", host, port);
	}
	if (server->replication) {	/* its client's own: never pooled, no connect_query */
		if (server->close_needed || db_paused(pool->db)) {	/* as pool_server_ready: the client waits for another */
			server_close(server, server->close_needed ? "obsolete connection" : pool_pause_reason());
			return;
		}
		const struct client_kind_ops *own = server_own_kind(server);
		if (own && own->own_server_ready)
			own->own_server_ready(server);
		return;
	}
	login_check_role(server);
}

/* The answer to SSLRequest: 'S' starts TLS, 'N' continues in plain text if the mode allows. */
static bool ssl_answer(struct server *server, uint8_t answer)
{
	int mode = pgv.cfg->server_tls_sslmode;
	server->tls_requested = false;
	netbuf_skip(&server->nb, 1);
	if (answer == 'S') {
		if (netbuf_buffered(&server->nb)) {
			server_login_failed(server, "08P01", "server sent data after its SSL answer");
			return false;
		}
		/* verify-full and SNI: the host of the list this connection reached, not the whole list */
		if (netbuf_start_tls(&server->nb, tls_new_server_ssl(server->host), false) < 0) {
			server_login_failed(server, "08006", "could not start TLS with the server");
			return false;
		}
		return server->state != SV_CLOSED;
	}
	if (answer == 'N' && mode < TLS_SSLMODE_REQUIRE) {
		server_send_startup(server);
		return true;
	}
	server_login_failed(server, "08006", answer == 'N' ? "server does not support TLS, but server_tls_sslmode requires it" :
		     "unexpected answer to SSLRequest");
	return false;
}

bool server_login_packet(struct server *server, const struct pkt *pkt)
{
	if (server->tls_requested && pkt->len == 1)
		return ssl_answer(server, pkt->type);
	if (!pkt_complete(pkt)) {
		if (pkt->len > 64 * 1024) {
			server_login_failed(server, "08P01", "oversized message from server during login");
			return false;
		}
		return true;
	}
	netbuf_skip(&server->nb, pkt->len);

	switch (pkt->type) {
	case 'R':
		handle_auth_request(server, pkt);
		break;
	case 'S': {
		const char *name, *value;
		if (server_parse_parameter_status(pkt, &name, &value))
			server_remember_param(server, name, value);
		break;
	}
	case 'K': {
		struct pkt_reader r;
		pkt_reader_init(&r, pkt_body(pkt), pkt_body_len(pkt));
		server->be_pid = pkt_get_uint32(&r);
		server->be_key = pkt_get_uint32(&r);
		break;
	}
	case 'Z':
		server->txn_status = pkt_body_len(pkt) >= 1 ? (char)pkt_body(pkt)[0] : 'I';
		login_complete(server);
		break;
	case 'E': {
		const char *msg = proto_error_field(pkt_body(pkt), pkt_body_len(pkt), 'M');
		const char *code = proto_error_field(pkt_body(pkt), pkt_body_len(pkt), 'C');
		const char *severity = proto_error_field(pkt_body(pkt), pkt_body_len(pkt), 'S');
		login_failed_severity(server, severity ? severity : "FATAL", code && strlen(code) == 5 ? code : "08P01",
				      msg ? msg : "server login failed");
		break;
	}
	case 'N':
		break;
	default:
		server_login_failed(server, "08P01", "unexpected message from server during login");
		break;
	}
	return server->state != SV_CLOSED;
}
