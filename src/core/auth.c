/*
 * auth.c - client-side authentication (trust, any, plain, md5,
 * scram-sha-256, ldap, and through hba cert, peer, gss).
 *
 * Decides the method for a login from auth_type, sends the matching
 * Authentication request, and checks the PasswordMessage against the
 * auth_file secret. An unknown user is asked for a password all the same
 * and then refused exactly like a wrong password, so the answer reveals
 * nothing about which names exist.
 *
 * SCRAM: over TLS SCRAM-SHA-256-PLUS is offered first, bound to the hash
 * of pgvalve's certificate (tls.h). A plain secret is turned into a SCRAM secret for the exchange
 * (scram_iterations, the user's mock salt; derived once, scram_cache.h);
 * unknown users and md5 secrets get the same salt and count (mock
 * authentication, as PostgreSQL); a SCRAM secret is used as is, and the ClientKey
 * recovered from the client's proof is kept on the pool so pgvalve can
 * log in to a server that wants SCRAM without knowing the password
 * (pass-through, as PgBouncer). md5 with a SCRAM secret falls back to
 * SCRAM, as PostgreSQL does.
 *
 * gss (Kerberos): AuthenticationGSS, each GSSResponse token handed to
 * gss_auth.h inline, its answer sent as AuthenticationGSSContinue; the
 * principal, cut by the line's include_realm/krb_realm, must be the user
 * or map to it (auth_ident_file), as in PostgreSQL.
 *
 * Touches only the client it is given; success is handed to pool.c.
 */
#include "common.h"
#include "auth.h"
#include "auth_file.h"
#include "client.h"
#include "config.h"
#include "crypto.h"
#include "gss_auth.h"
#include "log.h"
#include "metrics.h"
#include "pool.h"
#include "replication.h"
#include "proto.h"
#include "scram.h"
#include "scram_cache.h"
#include "tls.h"
#include "hba.h"
#include "ldap_auth.h"

#include <arpa/inet.h>
#include <pwd.h>

#include <openssl/crypto.h>
#include <sys/socket.h>
#include <unistd.h>

static void send_auth_request(struct client *client, uint32_t code, const void *extra, uint32_t extra_len)
{
	uint8_t mem[SCRAM_MSG_MAX + 16];	/* room for the largest SASL message */
	struct pktbuf b;
	pktbuf_init_fixed(&b, mem, sizeof(mem));
	proto_put_auth_request(&b, code, extra, extra_len);
	netbuf_send(&client->nb, b.buf, b.len);
}

/* Counted for pgvalve_client_authentication_failures_total under the login's method. */
static void count_failure(const struct client *client, enum metrics_auth_failure cause)
{
	metrics_count_authentication_failure(client->login->auth_method, cause);
}

/* A client refused: counted by cause, then closed with what the client is told. */
static void refuse(struct client *client, enum metrics_auth_failure cause, const char *sqlstate, const char *msg)
{
	count_failure(client, cause);
	client_close(client, sqlstate, msg);
}

/*
 * A wrong password, or a user nobody knows: PgBouncer's words, which name
 * no user and so tell a prober nothing, and its SQLSTATE. Only the
 * metrics tell the two apart.
 */
static void auth_fail(struct client *client)
{
	bool sasl = client->login->auth_method == AUTH_TYPE_SCRAM_SHA_256;
	refuse(client, client->login->user_known ? METRICS_AUTH_BAD_PASSWORD : METRICS_AUTH_UNKNOWN_USER, "08P01",
	       sasl ? "SASL authentication failed" : "password authentication failed");
}

/* The method's name for the log: auth_type's, or the SCRAM variant that bound the channel. */
static const char *auth_method_name(const struct client_login *login)
{
	if (login->auth_method == AUTH_TYPE_SCRAM_SHA_256 && login->scram && login->scram->plus_selected)
		return "scram-sha-256-plus";
	return auth_type_name(login->auth_method);
}

static void auth_succeed(struct client *client)
{
	metrics_count_authentication(client->login->auth_method);
	/* an LDAP login's line, with the DN the directory took, comes from ldap_answer */
	if (pgv.cfg->log_connections && client->login->auth_method != AUTH_TYPE_LDAP)
		client_log(LOG_LEVEL_INFO, client, "login authenticated: method=%s", auth_method_name(client->login));
	client->login->phase = LOGIN_DONE;
	pool_client_logged_in(client);
}

/*
 * AuthenticationSASL. The secret for the exchange: the stored SCRAM secret,
 * or keys derived (once, scram_cache) from a plain password with the
 * user's mock salt and scram_iterations. Unknown users and md5 secrets get
 * the very same salt and count with keys nobody can prove, as PostgreSQL's
 * mock authentication: the server-first-message does not tell a name that
 * exists from one that does not, and the exchange fails like a wrong
 * password.
 */
static void start_scram(struct client *client)
{
	struct client_login *login = client->login;
	struct scram_secret secret;
	const struct auth_secret *s = login->fake_auth || login->stored.type == SECRET_NONE ? NULL : &login->stored;

	if (s && s->type == SECRET_SCRAM) {
		secret = s->scram;
	} else {
		memset(&secret, 0, sizeof(secret));
		secret.iterations = pgv.cfg->scram_iterations;
		secret.salt_len = SCRAM_MOCK_SALT_LEN;
		scram_cache_mock_salt(login->user, secret.salt);
		if (s && s->type == SECRET_PLAIN) {
			struct scram_keys keys;
			scram_cache_get_keys(SCRAM_CACHE_CLIENT_LOGIN, login->user, s->secret, secret.salt,
					     SCRAM_MOCK_SALT_LEN, secret.iterations, &keys);
			memcpy(secret.stored_key, keys.stored_key, sizeof(secret.stored_key));
			memcpy(secret.server_key, keys.server_key, sizeof(secret.server_key));
			secret_clear(&keys, sizeof(keys));
		} else {
			/* no usable secret: random keys, so no proof can match */
			crypto_random(secret.stored_key, sizeof(secret.stored_key));
			crypto_random(secret.server_key, sizeof(secret.server_key));
			login->fake_auth = true;
		}
	}
	login->scram = xcalloc(1, sizeof(*login->scram));
	scram_server_init(login->scram, &secret, NULL);
	secret_clear(&secret, sizeof(secret));
	uint8_t end_point[TLS_END_POINT_MAX];
	scram_server_set_channel_binding(login->scram, end_point, netbuf_tls_server_end_point(&client->nb, end_point));
	login->secret_from_scram = s && s->type == SECRET_SCRAM;
	login->phase = LOGIN_SASL_INITIAL;
	char mechanisms[64];
	size_t mlen = scram_server_mechanisms(login->scram, mechanisms);
	send_auth_request(client, AUTH_REQ_SASL, mechanisms, (uint32_t)mlen);
}

/* SASLInitialResponse and SASLResponse. */
static void scram_step(struct client *client, const uint8_t *body, uint32_t len)
{
	struct client_login *login = client->login;
	struct pkt_reader r;
	const char *err = "malformed SASL message";
	char out[SCRAM_MSG_MAX];
	int n;

	pkt_reader_init(&r, body, len);
	if (login->phase == LOGIN_SASL_INITIAL) {
		const char *mech = pkt_get_string(&r);
		uint32_t dlen = pkt_get_uint32(&r);
		const uint8_t *data = r.failed || dlen == 0xFFFFFFFFu ? NULL : pkt_get_bytes(&r, dlen);
		if (!mech || !data || pkt_remaining(&r) != 0) {
			refuse(client, METRICS_AUTH_PROTOCOL_ERROR, "08P01", "malformed SASL initial response");
			return;
		}
		if (!scram_server_choose_mechanism(login->scram, mech)) {
			refuse(client, METRICS_AUTH_PROTOCOL_ERROR, "28000",
			       "client selected an invalid SASL authentication mechanism");
			return;
		}
		n = scram_server_first(login->scram, (const char *)data, dlen, out, sizeof(out), &err);
		if (n < 0) {
			refuse(client, login->scram->binding_failed ? METRICS_AUTH_CHANNEL_BINDING_MISMATCH :
			       METRICS_AUTH_PROTOCOL_ERROR, "08P01", err);
			return;
		}
		login->phase = LOGIN_SASL_RESPONSE;
		send_auth_request(client, AUTH_REQ_SASL_CONTINUE, out, (uint32_t)n);
		return;
	}
	n = scram_server_final(login->scram, (const char *)body, len, out, sizeof(out), &err);
	if (n == -1) {
		refuse(client, login->scram->binding_failed ? METRICS_AUTH_CHANNEL_BINDING_MISMATCH :
		       METRICS_AUTH_PROTOCOL_ERROR, "08P01", err);
		return;
	}
	if (n < 0 || login->fake_auth) {
		auth_fail(client);
		return;
	}
	/* Keep the ClientKey for server logins with this (SCRAM) secret: pass-through. */
	if (login->secret_from_scram && login->scram->has_client_key && client->pool)
		pool_remember_scram_keys(client->pool, login->scram->client_key, login->stored.scram.server_key);
	/* Held for client_finish_login: one write instead of two per login. */
	struct pktbuf b;
	pktbuf_init_fixed(&b, login->sasl_final, sizeof(login->sasl_final));
	proto_put_auth_request(&b, AUTH_REQ_SASL_FINAL, out, (uint32_t)n);
	login->sasl_final_len = b.len;
	auth_succeed(client);
}

void auth_login_free(struct client_login *login)
{
	if (!login)
		return;
	if (login->scram) {
		secret_clear(login->scram, sizeof(*login->scram));
		free(login->scram);
	}
	gss_auth_free(login->gss);
	auth_secret_clear(&login->stored);
	ldap_auth_cancel(login->ldap);
	free(login->ldap_options);
	free(login->startup_user);
	if (login->ldap_password) {
		secret_clear(login->ldap_password, strlen(login->ldap_password));
		free(login->ldap_password);
	}
	secret_clear(login, sizeof(*login));
	free(login);
}

static void auth_proceed(struct client *client);

/*
 * Where auth_query runs for this login: auth_user and auth_dbname of the
 * database, else the globals, else the database itself. The admin console
 * uses them like any database (as PgBouncer), with the globals.
 */
static bool auth_query_target(const struct client *client, const char **user, const char **dbname)
{
	const struct db_config *dc = client->pool->db->cfg;
	bool own = !client_is_console(client);
	*user = own && dc->auth_user[0] ? dc->auth_user : pgv.cfg->auth_user;
	*dbname = own && dc->auth_dbname[0] ? dc->auth_dbname : pgv.cfg->auth_dbname[0] ? pgv.cfg->auth_dbname :
		client->pool->db->name;
	return (*user)[0] != '\0';
}

/*
 * The database auth_query runs in, or NULL with the client closed as
 * PgBouncer does: the admin console's own name, an unknown name (no "*"
 * either) and a disabled database cannot serve.
 */
static struct db *auth_query_db(struct client *client, const char *auth_dbname)
{
	char msg[300];
	/* A routed database (a tenant's) answers for its own logins, though no name reaches it. */
	if (client->pool->db->is_routed && strcmp(auth_dbname, client->pool->db->name) == 0)
		return client->pool->db;
	if (config_is_admin_dbname(auth_dbname)) {
		client_log(LOG_LEVEL_WARNING, client, "cannot use the reserved \"%s\" database as an auth_dbname",
			   auth_dbname);
		client_close(client, "08P01", "bouncer config error");
		return NULL;
	}
	struct db *adb = pool_find_or_autodb(auth_dbname);
	if (!adb) {
		client_log(LOG_LEVEL_WARNING, client, "authentication database \"%s\" is not configured.", auth_dbname);
		client_close(client, "08P01", "bouncer config error");
		return NULL;
	}
	if (adb->disabled) {
		snprintf(msg, sizeof(msg), "authentication database \"%s\" is disabled", auth_dbname);
		client_close(client, "08P01", msg);
		return NULL;
	}
	return adb;
}

/* The OS user at the other end of a Unix socket. */
static bool peer_user_name(const struct client *client, char *buf, size_t size)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	if (getsockopt(client->nb.fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
		return false;
	struct passwd pw, *res = NULL;
	char tmp[1024];
	if (getpwuid_r(cred.uid, &pw, tmp, sizeof(tmp), &res) != 0 || !res)
		return false;
	strlcpy_s(buf, pw.pw_name, size);
	return true;
}

/* A system identity (peer's OS user, certificate CN) may log in as the database user. */
static bool identity_allowed(const char *map, const char *system_user, const char *db_user)
{
	if (map && map[0])
		return ident_check(pgv.ident, map, system_user, db_user);
	return strcmp(system_user, db_user) == 0;
}

/* auth_type hba: the first auth_hba_file line that fits decides the method. */
static int hba_method(struct client *client)
{
	struct client_login *login = client->login;
	struct sockaddr_storage ss;
	bool tcp = client_sockaddr(client, &ss);
	struct hba_request req = {
		.is_unix = client->is_unix,
		.is_tls = netbuf_is_tls(&client->nb),
		.addr = tcp ? (const struct sockaddr *)&ss : NULL,
		.dbname = login->dbname,
		.user = login->user,
		.physical_replication = client_repl(client) && client_repl(client)->type == REPLICATION_PHYSICAL,
	};
	struct hba_match m;
	hba_match(pgv.hba, &req, &m);
	if (m.map)
		strlcpy_s(login->hba_map, m.map, sizeof(login->hba_map));
	if (m.method == AUTH_TYPE_GSS)	/* the line's options copied: a reload may free the hba */
		login->gss = gss_auth_new(m.options);
	if (m.method == AUTH_TYPE_LDAP)
		login->ldap_options = xstrdup(m.options ? m.options : "");
	if (m.method == AUTH_TYPE_REJECT) {
		char host[INET6_ADDRSTRLEN] = "local";
		if (tcp)
			sockaddr_ip_text((const struct sockaddr *)&ss, host, sizeof(host), NULL);
		char msg[400];
		const char *tls = netbuf_is_tls(&client->nb) ? "SSL encryption" : "no encryption";
		/* PostgreSQL's wording, so operators recognise it (a physical replication connection names no database) */
		if (req.physical_replication)
			snprintf(msg, sizeof(msg), m.line ? "pg_hba.conf rejects replication connection for host \"%s\", user \"%s\", %s" :
				 "no pg_hba.conf entry for replication connection from host \"%s\", user \"%s\", %s",
				 host, login->user, tls);
		else
			snprintf(msg, sizeof(msg), m.line ? "pg_hba.conf rejects connection for host \"%s\", user \"%s\", database \"%s\", %s" :
				 "no pg_hba.conf entry for host \"%s\", user \"%s\", database \"%s\", %s",
				 host, login->user, login->dbname, tls);
		login->auth_method = AUTH_TYPE_HBA;	/* no method was chosen: counted under auth_type's */
		refuse(client, METRICS_AUTH_HBA_REJECT, "28000", msg);
		return -1;
	}
	return m.method;
}

void auth_begin(struct client *client)
{
	struct client_login *login = client->login;
	int method = pgv.cfg->auth_type;

	if (method == AUTH_TYPE_HBA) {
		method = hba_method(client);
		if (method < 0)
			return;
	}
	login->auth_method = method;
	/*
	 * As PgBouncer: user "pgbouncer" on the Unix socket from the OS user
	 * pgvalve runs as may use the admin console whatever auth_type says.
	 */
	if (client_is_console(client) && client->is_unix && strcmp(login->user, "pgbouncer") == 0) {
		struct ucred cred;
		socklen_t len = sizeof(cred);
		if (getsockopt(client->nb.fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && cred.uid == geteuid()) {
			client->admin_superuser = true;
			auth_succeed(client);
			return;
		}
	}
	if (method == AUTH_TYPE_ANY || method == AUTH_TYPE_CERT || method == AUTH_TYPE_PEER || method == AUTH_TYPE_GSS) {
		auth_proceed(client);
		return;
	}
	const struct auth_secret *secret = pgv.auth ? auth_store_find(pgv.auth, login->user) : NULL;
	if (secret) {
		auth_secret_copy(&login->stored, secret);
		login->user_known = true;	/* an empty password is a real user too */
		auth_proceed(client);
		return;
	}
	const char *auth_user, *auth_dbname;
	/*
	 * A database nothing matches: auth_query is never run for it (as
	 * PgBouncer 1.26): the login fails as a wrong password, and only an
	 * auth_file password gets as far as "no such database".
	 */
	if (client->pool && client->pool->db->is_fake) {
		login->fake_auth = true;
		auth_proceed(client);
		return;
	}
	if (auth_query_target(client, &auth_user, &auth_dbname)) {
		/* Not in auth_file: ask the database, without blocking the loop. */
		struct db *adb = auth_query_db(client, auth_dbname);
		if (!adb)
			return;
		login->phase = LOGIN_AUTH_QUERY;
		netbuf_pause(&client->nb);
		pool_queue_auth_query(pool_get(adb, auth_user), client);
		return;
	}
	login->fake_auth = true;
	auth_proceed(client);
}

void auth_query_answer(struct client *client, const char *secret, const char *error)
{
	struct client_login *login = client->login;
	login->auth_server = NULL;
	login->auth_pool = NULL;
	if (error) {
		client_log(LOG_LEVEL_WARNING, client, "auth_query failed: %s", error);
		client_close(client, "08P01", "bouncer config error");	/* as PgBouncer */
		return;
	}
	auth_secret_clear(&login->stored);
	if (!secret || !auth_secret_parse(login->user, secret, &login->stored)) {
		/* Refused like a wrong password: the client learns nothing about which users exist. */
		client_log(LOG_LEVEL_INFO, client, "auth_query: no such user: %s", login->user);
		login->fake_auth = true;
	} else {
		login->user_known = true;	/* a row, perhaps with a NULL password */
		pool_use_looked_up_secret(client->pool, login->user, &login->stored);
	}
	netbuf_resume(&client->nb);
	auth_proceed(client);
}

/* With the secret known (or known to be missing), run the method. */
static void auth_proceed(struct client *client)
{
	struct client_login *login = client->login;
	int method = login->auth_method;

	if (method != AUTH_TYPE_ANY && method != AUTH_TYPE_CERT && method != AUTH_TYPE_PEER &&
	    method != AUTH_TYPE_GSS && method != AUTH_TYPE_LDAP && login->stored.type == SECRET_NONE)
		login->fake_auth = true;

	switch (method) {
	case AUTH_TYPE_ANY:
		auth_succeed(client);
		return;
	case AUTH_TYPE_TRUST:
		/* As PgBouncer: any user it knows, with or without a password; the text names no user. */
		if (!login->user_known) {
			refuse(client, METRICS_AUTH_UNKNOWN_USER, "08P01", "\"trust\" authentication failed");
			return;
		}
		auth_succeed(client);
		return;
	case AUTH_TYPE_PLAIN:
		login->phase = LOGIN_PASSWORD;
		send_auth_request(client, AUTH_REQ_CLEARTEXT, NULL, 0);
		return;
	case AUTH_TYPE_SCRAM_SHA_256:
		start_scram(client);
		return;
	case AUTH_TYPE_LDAP:
		if (!ldap_auth_built())
			break;
		login->phase = LOGIN_PASSWORD;	/* the directory decides, whatever auth_file holds */
		send_auth_request(client, AUTH_REQ_CLEARTEXT, NULL, 0);
		return;
	case AUTH_TYPE_PEER: {
		/* The OS user on the other end of the Unix socket, mapped by map= if given. */
		char sysuser[256];
		if (!client->is_unix || !peer_user_name(client, sysuser, sizeof(sysuser)) ||
		    !identity_allowed(login->hba_map, sysuser, login->user)) {
			char msg[200];
			snprintf(msg, sizeof(msg), "peer authentication failed for user \"%s\"", login->user);
			refuse(client, METRICS_AUTH_IDENTITY_MISMATCH, "28000", msg);
			return;
		}
		auth_succeed(client);
		return;
	}
	case AUTH_TYPE_CERT: {
		/* The verified client certificate's common name must be the user name (or mapped to it); a client
		 * with a certificate stays with OpenSSL (tls_record.h), so netbuf_ssl() has it */
		char cn[256];
		if (!netbuf_ssl(&client->nb) || !tls_peer_common_name(netbuf_ssl(&client->nb), cn, sizeof(cn)) ||
		    !identity_allowed(login->hba_map, cn, login->user)) {
			char msg[200];
			snprintf(msg, sizeof(msg), "certificate authentication failed for user \"%s\"", login->user);
			refuse(client, METRICS_AUTH_IDENTITY_MISMATCH, "28000", msg);
			return;
		}
		auth_succeed(client);
		return;
	}
	case AUTH_TYPE_GSS:
		if (!login->gss) {
			refuse(client, METRICS_AUTH_NOT_SUPPORTED, "28000", "GSSAPI is not supported by this pgvalve");
			return;
		}
		login->phase = LOGIN_GSS;
		send_auth_request(client, AUTH_REQ_GSS, NULL, 0);
		return;
	case AUTH_TYPE_MD5:
		if (!login->fake_auth && login->stored.type == SECRET_SCRAM) {
			/* As PostgreSQL: an md5 request cannot be met with a SCRAM secret, so ask for SCRAM. */
			login->auth_method = AUTH_TYPE_SCRAM_SHA_256;
			start_scram(client);
			return;
		}
		crypto_random(login->md5_salt, sizeof(login->md5_salt));
		login->phase = LOGIN_PASSWORD;
		send_auth_request(client, AUTH_REQ_MD5, login->md5_salt, sizeof(login->md5_salt));
		return;
	default:
		break;
	}
	char msg[160];
	snprintf(msg, sizeof(msg), "auth_type \"%s\" is not supported", auth_type_name(method));
	log_warning("%s", msg);
	refuse(client, METRICS_AUTH_NOT_SUPPORTED, "28000", msg);
}

/* The md5 form of the stored secret ("md5" + 32 hex), from a plain or md5 secret. */
static bool stored_md5(const struct client_login *login, char out[36])
{
	if (login->stored.type == SECRET_MD5) {
		memcpy(out, login->stored.secret, MD5_PASSWD_LEN);
		out[MD5_PASSWD_LEN] = '\0';
		return true;
	}
	if (login->stored.type == SECRET_PLAIN) {
		/* The client salted with the name it sent (alice.t42), not the one a login route made of it. */
		crypto_md5_password(login->stored.secret, login->startup_user ? login->startup_user : login->user, out);
		return true;
	}
	return false;
}

/*
 * A cleartext password against the stored secret. Checked against a SCRAM
 * secret, it yields the ClientKey (client_key, else left alone), which
 * logs in to a server that wants SCRAM as a SCRAM client's proof does.
 */
static bool check_plain(const struct client_login *login, const char *given, uint8_t client_key_out[32])
{
	size_t glen = strlen(given);
	if (login->stored.type == SECRET_PLAIN) {
		size_t slen = strlen(login->stored.secret);
		/* Compare full length in constant time; the length check alone leaks only the length. */
		return glen == slen && secure_equal(given, login->stored.secret, slen);
	}
	if (login->stored.type == SECRET_MD5) {
		char computed[36];
		crypto_md5_password(given, login->user, computed);
		return secure_equal(computed, login->stored.secret, MD5_PASSWD_LEN);
	}
	if (login->stored.type == SECRET_SCRAM) {
		const struct auth_secret *s = &login->stored;
		uint8_t salted[32], client_key[32], stored[32];
		crypto_scram_salted_password(given, s->scram.salt, (size_t)s->scram.salt_len,
					     s->scram.iterations, salted);
		crypto_hmac_sha256(salted, sizeof(salted), (const uint8_t *)"Client Key", 10, client_key);
		crypto_sha256(client_key, sizeof(client_key), stored);
		bool ok = secure_equal(stored, s->scram.stored_key, sizeof(stored));
		if (ok)
			memcpy(client_key_out, client_key, sizeof(client_key));
		secret_clear(salted, sizeof(salted));
		secret_clear(client_key, sizeof(client_key));
		return ok;
	}
	return false;
}

/* PostgreSQL's words to the client; why (GSSAPI's own, or the name check) goes to the log. */
static void gss_fail(struct client *client, enum metrics_auth_failure cause, const char *why)
{
	char msg[200];
	client_log(LOG_LEVEL_WARNING, client, "GSSAPI authentication failed: %s", why);
	snprintf(msg, sizeof(msg), "GSSAPI authentication failed for user \"%s\"", client->login->user);
	refuse(client, cause, "28000", msg);
}

/* A GSSResponse: one token into the acceptor; its answer out; once done, the name check. */
static void gss_step(struct client *client, const uint8_t *body, uint32_t len)
{
	struct client_login *login = client->login;
	char err[1024], sysuser[512];
	const void *out;
	size_t out_len;
	enum gss_auth_result r = gss_auth_step(login->gss, pgv.cfg->auth_krb_server_keyfile, pgv.cfg->krb_srvname,
					       body, len, &out, &out_len, err, sizeof(err));
	if (r == GSS_AUTH_FAILED || r == GSS_AUTH_NO_KEYTAB) {
		gss_fail(client, r == GSS_AUTH_NO_KEYTAB ? METRICS_AUTH_KEYTAB_UNUSABLE : METRICS_AUTH_TICKET_INVALID, err);
		return;
	}
	if (out_len) {	/* AuthenticationGSSContinue; a Kerberos AP-REP is small, a token may not be */
		struct pktbuf b;
		pktbuf_init(&b, (uint32_t)out_len + 16);
		proto_put_auth_request(&b, AUTH_REQ_GSS_CONTINUE, out, (uint32_t)out_len);
		netbuf_send(&client->nb, b.buf, b.len);
		pktbuf_free(&b);
	}
	if (r == GSS_AUTH_CONTINUE)
		return;
	if (!gss_auth_system_user(login->gss, sysuser, sizeof(sysuser), err, sizeof(err))) {
		gss_fail(client, METRICS_AUTH_IDENTITY_MISMATCH, err);	/* a realm other than krb_realm */
		return;
	}
	if (!identity_allowed(login->hba_map, sysuser, login->user)) {
		snprintf(err, sizeof(err), "principal \"%.200s\" (as \"%.200s\") may not log in as user \"%s\"%s%s",
			 gss_auth_principal(login->gss), sysuser, login->user, login->hba_map[0] ? " by map " : "",
			 login->hba_map);
		gss_fail(client, METRICS_AUTH_IDENTITY_MISMATCH, err);
		return;
	}
	auth_succeed(client);
}

/*
 * The directory's answer. The server side then logs in as for any user:
 * a forced user, the auth_file or auth_query secret, else (as PgBouncer)
 * the password the directory just accepted.
 */
static void ldap_answer(void *arg, enum ldap_outcome outcome, const char *text)
{
	static const enum metrics_auth_failure causes[] = {
		[LDAP_OUTCOME_BAD_PASSWORD] = METRICS_AUTH_BAD_PASSWORD,
		[LDAP_OUTCOME_UNKNOWN_USER] = METRICS_AUTH_UNKNOWN_USER,
		[LDAP_OUTCOME_UNAVAILABLE] = METRICS_AUTH_DIRECTORY_UNAVAILABLE,
		[LDAP_OUTCOME_ERROR] = METRICS_AUTH_DIRECTORY_ERROR,
	};
	struct client *client = arg;
	struct client_login *login = client->login;

	login->ldap = NULL;
	if (client->state == CL_CLOSED)
		return;
	if (outcome != LDAP_OUTCOME_OK) {
		client_log(LOG_LEVEL_WARNING, client, "LDAP authentication failed: %s", text);
		refuse(client, causes[outcome], "08P01", "LDAP authentication failed");	/* PgBouncer's words */
		return;
	}
	if (pgv.cfg->log_connections)
		client_log(LOG_LEVEL_INFO, client, "login authenticated: method=ldap dn=\"%s\"", text);
	if (login->stored.type == SECRET_NONE && client->pool && !client_is_console(client)) {
		struct auth_secret given = { .type = SECRET_PLAIN, .secret = login->ldap_password };
		strlcpy_s(given.user, login->user, sizeof(given.user));
		pool_use_looked_up_secret(client->pool, login->user, &given);
	}
	netbuf_resume(&client->nb);
	auth_succeed(client);
}

/* auth_type ldap: the clear-text password goes to the directory, without blocking the loop. */
static void ldap_check(struct client *client, const char *given)
{
	struct client_login *login = client->login;
	const char *options = login->ldap_options ? login->ldap_options : pgv.cfg->auth_ldap_options;
	char why[300];

	login->ldap_password = xstrdup(given);
	login->ldap = ldap_auth_start(options, login->user, given, ldap_answer, client, why, sizeof(why));
	if (!login->ldap) {
		/* it could not start: an empty password, or a user name the directory cannot be asked about */
		client_log(LOG_LEVEL_WARNING, client, "LDAP authentication failed: %s", why);
		refuse(client, given[0] ? METRICS_AUTH_UNKNOWN_USER : METRICS_AUTH_BAD_PASSWORD, "08P01",
		       "LDAP authentication failed");
		return;
	}
	login->phase = LOGIN_LDAP;
	netbuf_pause(&client->nb);
}

void auth_handle_password(struct client *client, const uint8_t *body, uint32_t len)
{
	struct client_login *login = client->login;
	struct pkt_reader r;
	pkt_reader_init(&r, body, len);
	const char *given = login->phase == LOGIN_PASSWORD ? pkt_get_string(&r) : NULL;

	if (login->phase == LOGIN_SASL_INITIAL || login->phase == LOGIN_SASL_RESPONSE) {
		scram_step(client, body, len);
		return;
	}
	if (login->phase == LOGIN_GSS) {
		gss_step(client, body, len);
		return;
	}
	if (!given || pkt_remaining(&r) != 0) {
		refuse(client, METRICS_AUTH_PROTOCOL_ERROR, "08P01", "invalid password packet");
		return;
	}
	if (login->auth_method == AUTH_TYPE_LDAP) {
		ldap_check(client, given);
		return;
	}
	if (login->fake_auth) {
		auth_fail(client);
		return;
	}

	bool ok = false;
	if (login->auth_method == AUTH_TYPE_PLAIN) {
		uint8_t client_key[32];
		ok = check_plain(login, given, client_key);
		/* a SCRAM secret (auth_query's, most often): its keys log in to the server, as pass-through */
		if (ok && login->stored.type == SECRET_SCRAM) {
			if (client->pool)
				pool_remember_scram_keys(client->pool, client_key, login->stored.scram.server_key);
			secret_clear(client_key, sizeof(client_key));
		}
	} else if (login->auth_method == AUTH_TYPE_MD5) {
		char secret_md5[36], expected[36];
		if (stored_md5(login, secret_md5) && strlen(given) == MD5_PASSWD_LEN) {
			crypto_md5_response(secret_md5, login->md5_salt, expected);
			ok = secure_equal(expected, given, MD5_PASSWD_LEN);
		}
	}
	if (!ok) {
		auth_fail(client);
		return;
	}
	auth_succeed(client);
}
