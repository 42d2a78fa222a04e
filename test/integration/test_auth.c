/*
 * test_auth.c - end-to-end tests of authentication and TLS against a real
 * PostgreSQL 15 (with ssl=on, see run.sh): every client auth_type against
 * every kind of auth_file secret and both kinds of server (one that wants
 * SCRAM, one that wants md5); auth_hba_file rules (reject, hostssl and
 * hostnossl, address masks, cert, peer with an ident map); auth_user +
 * auth_query; TLS towards clients (require, verify-full, client
 * certificates, PostgreSQL 17 direct TLS, stalled handshakes) and towards
 * the server (verify-full, wrong CA); SCRAM mock authentication (unknown
 * names get a stable salt and the configured count, also across workers and
 * through auth_query) and a password changed by RELOAD; and that no password
 * reaches a log.
 *
 * Logins go through libpq with verbose errors, so the SQLSTATE of a refusal
 * is checked as well as its message.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE	/* memmem */
#endif
#include "harness.h"

#include <errno.h>
#include <poll.h>
#include <pwd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>

#define DB "pgvtest"
#define WRONG_PW "not_the_pw_9271"
#define LOOKUP_PW "lookup_pass_5512"
#define AQ_PW "aq_pass_7734"
#define QUOTE_PW "quote_pass_3318"
#define INSTANCE_LIST "test_auth.instances"

/* ---------------------------------------------------------------- files and instances */

/* pgv_start, remembering the instance for the final log check. */
static void start_dbs(struct pgv *p, const char *extra, const char *databases, const char *userlist)
{
	char list[600];
	pgv_start(p, extra, databases, userlist);
	snprintf(list, sizeof(list), "%s/%s", getenv("PGV_TEST_DIR"), INSTANCE_LIST);
	FILE *f = fopen(list, "a");
	ck_assert_msg(f != NULL, "open %s: %s", list, strerror(errno));
	fprintf(f, "%s\n", p->dir);
	fclose(f);
}

static void start(struct pgv *p, const char *extra, const char *userlist)
{
	start_dbs(p, extra, std_databases(), userlist);
}

/* ---------------------------------------------------------------- secrets */

static PGconn *direct;

static PGconn *pg(void)
{
	if (direct == NULL || PQstatus(direct) != CONNECTION_OK) {
		PQfinish(direct);
		direct = pg_direct();
	}
	return direct;
}

static void pg_exec(const char *sql)
{
	PGresult *r = PQexec(pg(), sql);
	ck_assert_msg(PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK,
		      "%s: %s", sql, PQerrorMessage(pg()));
	PQclear(r);
}

/* The SCRAM secret PostgreSQL stores for a role (pass-through needs exactly this one). */
static const char *pg_scram_secret(const char *role)
{
	static char buf[512];
	char sql[200];
	snprintf(sql, sizeof(sql), "SELECT rolpassword FROM pg_authid WHERE rolname = '%s'", role);
	snprintf(buf, sizeof(buf), "%s", query_value(pg(), sql));
	ck_assert_msg(strncmp(buf, "SCRAM-SHA-256$", 14) == 0, "%s has no SCRAM secret: %s", role, buf);
	return buf;
}

/* A fresh SCRAM-SHA-256 secret for a password, in pg_authid's format. */
static void make_scram_secret(const char *password, char *out, size_t size)
{
	unsigned char salt[16], salted[32], client_key[32], stored[32], server_key[32];
	unsigned int len = 0;
	char b_salt[64], b_stored[64], b_server[64];

	ck_assert_int_eq(RAND_bytes(salt, sizeof(salt)), 1);
	ck_assert_int_eq(PKCS5_PBKDF2_HMAC(password, (int)strlen(password), salt, sizeof(salt), 4096,
					   EVP_sha256(), sizeof(salted), salted), 1);
	ck_assert_ptr_nonnull(HMAC(EVP_sha256(), salted, sizeof(salted), (const unsigned char *)"Client Key", 10,
				   client_key, &len));
	ck_assert_int_eq(EVP_Digest(client_key, sizeof(client_key), stored, &len, EVP_sha256(), NULL), 1);
	ck_assert_ptr_nonnull(HMAC(EVP_sha256(), salted, sizeof(salted), (const unsigned char *)"Server Key", 10,
				   server_key, &len));
	EVP_EncodeBlock((unsigned char *)b_salt, salt, sizeof(salt));
	EVP_EncodeBlock((unsigned char *)b_stored, stored, sizeof(stored));
	EVP_EncodeBlock((unsigned char *)b_server, server_key, sizeof(server_key));
	snprintf(out, size, "SCRAM-SHA-256$4096:%s$%s:%s", b_salt, b_stored, b_server);
}

enum secret_kind { SEC_PLAIN, SEC_MD5, SEC_SCRAM, SEC_COUNT };
static const char *const secret_names[] = { "plain", "md5", "SCRAM" };

/*
 * auth_file with scram_user and md5_user both stored as `kind`. scram_user's
 * SCRAM secret is PostgreSQL's own (pass-through works with it); md5_user's
 * is made here (its server wants md5, so the salt does not matter).
 */
static const char *userlist_of(enum secret_kind kind)
{
	static char buf[2048];
	char s1[512], s2[512];

	switch (kind) {
	case SEC_PLAIN:
		snprintf(s1, sizeof(s1), "scram_pass");
		snprintf(s2, sizeof(s2), "md5_pass");
		break;
	case SEC_MD5:
		md5_secret("scram_user", "scram_pass", s1);
		md5_secret("md5_user", "md5_pass", s2);
		break;
	default:
		snprintf(s1, sizeof(s1), "%s", pg_scram_secret("scram_user"));
		make_scram_secret("md5_pass", s2, sizeof(s2));
		break;
	}
	snprintf(buf, sizeof(buf), "\"scram_user\" \"%s\"\n\"md5_user\" \"%s\"\n", s1, s2);
	return buf;
}

/* ---------------------------------------------------------------- libpq logins */

struct cparams {
	const char *kw[24];
	const char *val[24];
	int n;
	char port[16];
};

static void cp_set(struct cparams *cp, const char *k, const char *v)
{
	for (int i = 0; i < cp->n; i++)
		if (strcmp(cp->kw[i], k) == 0) {
			cp->val[i] = v;
			return;
		}
	ck_assert_int_lt(cp->n, 23);
	cp->kw[cp->n] = k;
	cp->val[cp->n++] = v;
	cp->kw[cp->n] = NULL;
	cp->val[cp->n] = NULL;
}

/* TCP to 127.0.0.1, database pgvtest; password and sslmode may be NULL (none, disable). */
static void cp_init(struct cparams *cp, const struct pgv *p, const char *user, const char *password, const char *sslmode)
{
	memset(cp, 0, sizeof(*cp));
	snprintf(cp->port, sizeof(cp->port), "%d", p->port);
	cp_set(cp, "host", "127.0.0.1");
	cp_set(cp, "port", cp->port);
	cp_set(cp, "dbname", DB);
	cp_set(cp, "user", user);
	cp_set(cp, "sslmode", sslmode ? sslmode : "disable");
	cp_set(cp, "gssencmode", "disable");
	cp_set(cp, "connect_timeout", "10");
	/* never a stray ~/.postgresql/postgresql.crt */
	cp_set(cp, "sslcert", pgv_cert("no-such.crt"));
	cp_set(cp, "sslkey", pgv_cert("no-such.key"));
	if (password)
		cp_set(cp, "password", password);
}

struct login {
	PGconn *conn;
	bool ok;
	char sqlstate[6];
	char msg[2048];
};

/* Connects with PQERRORS_VERBOSE, so a refusal's message carries its SQLSTATE. */
static void login_try(struct login *l, const struct cparams *cp)
{
	memset(l, 0, sizeof(*l));
	l->conn = PQconnectStartParams(cp->kw, cp->val, 0);
	ck_assert_ptr_nonnull(l->conn);
	PQsetErrorVerbosity(l->conn, PQERRORS_VERBOSE);
	PostgresPollingStatusType st = PQstatus(l->conn) == CONNECTION_BAD ? PGRES_POLLING_FAILED : PGRES_POLLING_WRITING;
	double deadline = now_s() + 20;
	while (st != PGRES_POLLING_OK && st != PGRES_POLLING_FAILED) {
		struct pollfd pfd = { .fd = PQsocket(l->conn), .events = st == PGRES_POLLING_READING ? POLLIN : POLLOUT };
		int left = (int)((deadline - now_s()) * 1000);
		ck_assert_msg(left > 0, "login did not finish within 20 s");
		if (poll(&pfd, 1, left) < 0 && errno != EINTR)
			ck_abort_msg("poll: %s", strerror(errno));
		st = PQconnectPoll(l->conn);
	}
	l->ok = st == PGRES_POLLING_OK && PQstatus(l->conn) == CONNECTION_OK;
	snprintf(l->msg, sizeof(l->msg), "%s", PQerrorMessage(l->conn));
	/* "FATAL:  28P01: password authentication failed ..." */
	for (const char *s = strstr(l->msg, ":  "); s; s = strstr(s + 1, ":  ")) {
		const char *c = s + 3;
		if (strlen(c) >= 6 && c[5] == ':' && strspn(c, "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ") >= 5) {
			memcpy(l->sqlstate, c, 5);
			break;
		}
	}
}

static void login_done(struct login *l)
{
	PQfinish(l->conn);
	l->conn = NULL;
}

/* Logged in, and the session really is `user` on the server. */
static void expect_login(struct pgv *p, const struct cparams *cp, const char *user, const char *what)
{
	struct login l;
	login_try(&l, cp);
	ck_assert_msg(l.ok, "%s: login of %s failed: %s\n%s", what, user, l.msg, pgv_log_tail(p, 1500));
	const char *got = query_value(l.conn, "SELECT current_user");
	ck_assert_msg(strcmp(got, user) == 0, "%s: current_user is %s, not %s", what, got, user);
	login_done(&l);
}

/* Refused with this SQLSTATE and a message containing `needle`. */
static void expect_refused(struct pgv *p, const struct cparams *cp, const char *sqlstate, const char *needle,
			   const char *what)
{
	struct login l;
	login_try(&l, cp);
	ck_assert_msg(!l.ok, "%s: login succeeded, expected %s \"%s\"", what, sqlstate ? sqlstate : "an error",
		      needle);
	if (sqlstate)
		ck_assert_msg(strcmp(l.sqlstate, sqlstate) == 0, "%s: SQLSTATE %s, expected %s; message: %s\n%s", what,
			      l.sqlstate[0] ? l.sqlstate : "(none)", sqlstate, l.msg, pgv_log_tail(p, 1500));
	ck_assert_msg(strstr(l.msg, needle) != NULL, "%s: message lacks \"%s\": %s\n%s", what, needle, l.msg,
		      pgv_log_tail(p, 1500));
	login_done(&l);
}

/*
 * A wrong password or an unknown name, in PgBouncer's words: 08P01,
 * "password authentication failed" or "SASL authentication failed" (as
 * the method was), never the user's name.
 */
static void expect_auth_failed(struct pgv *p, const struct cparams *cp, const char *user, const char *what)
{
	struct login l;
	login_try(&l, cp);
	ck_assert_msg(!l.ok, "%s: login succeeded, expected an authentication failure", what);
	ck_assert_msg(strcmp(l.sqlstate, "08P01") == 0, "%s: SQLSTATE %s, expected 08P01; message: %s\n%s", what,
		      l.sqlstate[0] ? l.sqlstate : "(none)", l.msg, pgv_log_tail(p, 1500));
	ck_assert_msg(strstr(l.msg, "password authentication failed") || strstr(l.msg, "SASL authentication failed"),
		      "%s: message: %s", what, l.msg);
	char quoted[200];
	snprintf(quoted, sizeof(quoted), "\"%s\"", user);
	ck_assert_msg(!strstr(l.msg, quoted), "%s: the user was named: %s", what, l.msg);
	login_done(&l);
}

/* ---------------------------------------------------------------- the matrix */

struct method {
	const char *name;
	const char *auth_type;
	const char *hba_method;		/* for auth_type hba: the method of its one host line */
	/*
	 * Per secret kind (plain, md5, SCRAM): the outcome for scram_user with
	 * the right and the wrong password, then md5_user right and wrong.
	 *   O  logged in
	 *   P  08P01 password (or SASL) authentication failed, as PgBouncer says it
	 *   W  28000 cannot do SCRAM authentication: wrong password type (the
	 *      server wants SCRAM; pgvalve has an md5 secret, or a SCRAM
	 *      secret but no keys because the client did not do SCRAM)
	 *   N  28000 the server wants md5 and pgvalve holds only a SCRAM secret
	 *   R  28000 pg_hba.conf rejects connection ...
	 *   C  28000 certificate authentication failed (no TLS, no certificate)
	 */
	const char *outcome[SEC_COUNT];
};

static const struct method methods[] = {
	/* password ignored; the server login needs a secret it can use */
	{ "trust", "trust", NULL, { "OOOO", "WWOO", "WWNN" } },
	/* checked against any secret kind; a cleartext check leaves no SCRAM keys */
	{ "plain", "plain", NULL, { "OPOP", "WPOP", "WPNP" } },
	/* a SCRAM secret makes md5 fall back to SCRAM, which gives pass-through keys */
	{ "md5", "md5", NULL, { "OPOP", "WPOP", "OPNP" } },
	/* an md5 secret cannot serve SCRAM: even the right password fails */
	{ "scram-sha-256", "scram-sha-256", NULL, { "OPOP", "PPPP", "OPNP" } },
	{ "any", "any", NULL, { "OOOO", "WWOO", "WWNN" } },
	{ "hba trust", "hba", "trust", { "OOOO", "WWOO", "WWNN" } },
	{ "hba password", "hba", "password", { "OPOP", "WPOP", "WPNP" } },
	{ "hba md5", "hba", "md5", { "OPOP", "WPOP", "OPNP" } },
	{ "hba scram-sha-256", "hba", "scram-sha-256", { "OPOP", "PPPP", "OPNP" } },
	{ "hba reject", "hba", "reject", { "RRRR", "RRRR", "RRRR" } },
	{ "hba cert", "hba", "cert", { "CCCC", "CCCC", "CCCC" } },
	/* peer on a host line acts as reject, as in PostgreSQL */
	{ "hba peer on a host line", "hba", "peer", { "RRRR", "RRRR", "RRRR" } },
};
#define N_METHODS (sizeof(methods) / sizeof(methods[0]))
#define N_CELLS ((int)N_METHODS * SEC_COUNT * 4)

START_TEST(auth_matrix)
{
	const struct method *m = &methods[_i / (SEC_COUNT * 4)];
	enum secret_kind kind = (enum secret_kind)(_i / 4 % SEC_COUNT);
	int col = _i % 4;
	const char *user = col < 2 ? "scram_user" : "md5_user";
	const char *right = col < 2 ? "scram_pass" : "md5_pass";
	bool wrong = col % 2 == 1;
	char outcome = m->outcome[kind][col];
	char extra[1024], what[256], needle[256];
	struct pgv p;
	struct cparams cp;

	snprintf(what, sizeof(what), "auth_type %s, %s secret in auth_file, %s with the %s password (server wants %s)",
		 m->name, secret_names[kind], user, wrong ? "wrong" : "right", col < 2 ? "SCRAM" : "md5");
	if (m->hba_method) {
		char hba[256];
		snprintf(hba, sizeof(hba), "# %s\nhost all all 127.0.0.1/32 %s\n", m->name, m->hba_method);
		snprintf(extra, sizeof(extra), "auth_type = hba\nauth_hba_file = %s\nverbose = 2\n",
			 pgv_write_test_file("auth", "matrix.hba", hba));
	} else {
		snprintf(extra, sizeof(extra), "auth_type = %s\nverbose = 2\n", m->auth_type);
	}
	start(&p, extra, userlist_of(kind));
	cp_init(&cp, &p, user, wrong ? WRONG_PW : right, "disable");

	switch (outcome) {
	case 'O':
		expect_login(&p, &cp, user, what);
		break;
	case 'P':
		expect_auth_failed(&p, &cp, user, what);
		break;
	case 'W':
		expect_refused(&p, &cp, "28000", "cannot do SCRAM authentication: wrong password type", what);
		break;
	case 'N':
		expect_refused(&p, &cp, "28000", "server asked for an md5 password, but none is configured", what);
		break;
	case 'R':
		snprintf(needle, sizeof(needle),
			 "pg_hba.conf rejects connection for host \"127.0.0.1\", user \"%s\", database \"%s\", no encryption",
			 user, DB);
		expect_refused(&p, &cp, "28000", needle, what);
		break;
	case 'C':
		snprintf(needle, sizeof(needle), "certificate authentication failed for user \"%s\"", user);
		expect_refused(&p, &cp, "28000", needle, what);
		break;
	default:
		ck_abort_msg("bad outcome code %c", outcome);
	}
	ck_assert_msg(pgv_running(&p), "%s: pgvalve died\n%s", what, pgv_log_tail(&p, 1500));
	pgv_stop(&p);
}
END_TEST

/* Names nobody configured fail like a wrong password (and trust says so plainly). */
START_TEST(unknown_user)
{
	static const char *const types[] = { "plain", "md5", "scram-sha-256", "trust" };
	struct pgv p;
	struct cparams cp;
	char extra[128];

	snprintf(extra, sizeof(extra), "auth_type = %s\n", types[_i]);
	start(&p, extra, userlist_of(SEC_PLAIN));
	cp_init(&cp, &p, "ghost_user", "scram_pass", "disable");
	if (strcmp(types[_i], "trust") == 0)
		expect_refused(&p, &cp, "08P01", "\"trust\" authentication failed", types[_i]);	/* PgBouncer's words, no name */
	else
		expect_auth_failed(&p, &cp, "ghost_user", types[_i]);
	/* a known user still gets in */
	cp_init(&cp, &p, "scram_user", "scram_pass", "disable");
	expect_login(&p, &cp, "scram_user", types[_i]);
	pgv_stop(&p);
}
END_TEST

/* ---------------------------------------------------------------- hba */

static const char *client_tls_conf(const char *sslmode, bool with_ca)
{
	static char buf[1024];
	snprintf(buf, sizeof(buf),
		 "client_tls_sslmode = %s\nclient_tls_cert_file = %s\nclient_tls_key_file = %s\n%s%s%s",
		 sslmode, pgv_cert("server.crt"), pgv_cert("server.key"), with_ca ? "client_tls_ca_file = " : "",
		 with_ca ? pgv_cert("ca.crt") : "", with_ca ? "\n" : "");
	return buf;
}

START_TEST(hba_hostssl_hostnossl)
{
	struct pgv p;
	struct cparams cp;
	char extra[2048];
	const char *hba = pgv_write_test_file("auth", "ssl.hba",
		"hostssl   pgvtest scram_user 127.0.0.1/32 trust\n"
		"hostnossl pgvtest scram_user 127.0.0.1/32 reject\n"
		"hostnossl pgvtest md5_user   127.0.0.1/32 md5\n");

	snprintf(extra, sizeof(extra), "auth_type = hba\nauth_hba_file = %s\n%s", hba, client_tls_conf("prefer", false));
	start(&p, extra, userlist_of(SEC_PLAIN));

	/* TLS: the hostssl trust line, no password needed */
	cp_init(&cp, &p, "scram_user", NULL, "require");
	struct login l;
	login_try(&l, &cp);
	ck_assert_msg(l.ok, "scram_user over TLS: %s\n%s", l.msg, pgv_log_tail(&p, 1500));
	ck_assert_int_eq(PQsslInUse(l.conn), 1);
	ck_assert_str_eq(query_value(l.conn, "SELECT current_user"), "scram_user");
	login_done(&l);
	/* the same user in plain text: the hostnossl reject line */
	cp_init(&cp, &p, "scram_user", "scram_pass", "disable");
	expect_refused(&p, &cp, "28000",
		       "pg_hba.conf rejects connection for host \"127.0.0.1\", user \"scram_user\", database \"pgvtest\", no encryption",
		       "scram_user without TLS");
	/* md5_user: only a hostnossl line */
	cp_init(&cp, &p, "md5_user", "md5_pass", "disable");
	expect_login(&p, &cp, "md5_user", "md5_user without TLS");
	cp_init(&cp, &p, "md5_user", "md5_pass", "require");
	expect_refused(&p, &cp, "28000",
		       "no pg_hba.conf entry for host \"127.0.0.1\", user \"md5_user\", database \"pgvtest\", SSL encryption",
		       "md5_user over TLS");
	pgv_stop(&p);
}
END_TEST

START_TEST(hba_address_masks)
{
	struct pgv p;
	struct cparams cp;
	char extra[1024];
	const char *hba = pgv_write_test_file("auth", "masks.hba",
		"host all all        10.0.0.0/8      trust\n"
		"host all all        127.0.0.2/32    trust\n"
		"host all all        127.0.0.0/32    trust\n"
		"host all md5_user   127.0.0.0/8     trust\n"
		"host all scram_user 127.0.0.0 255.0.0.0 md5\n");

	snprintf(extra, sizeof(extra), "auth_type = hba\nauth_hba_file = %s\n", hba);
	start(&p, extra, userlist_of(SEC_PLAIN));
	/* 127.0.0.0/8 matches 127.0.0.1: trust, no password */
	cp_init(&cp, &p, "md5_user", NULL, "disable");
	expect_login(&p, &cp, "md5_user", "127.0.0.0/8 trust");
	/* none of the trust lines above match scram_user from 127.0.0.1: the md5 line does */
	cp_init(&cp, &p, "scram_user", WRONG_PW, "disable");
	expect_auth_failed(&p, &cp, "scram_user", "10.0.0.0/8, 127.0.0.2/32 and 127.0.0.0/32 must not match 127.0.0.1");
	cp_init(&cp, &p, "scram_user", "scram_pass", "disable");
	expect_login(&p, &cp, "scram_user", "127.0.0.0 255.0.0.0 md5");
	pgv_stop(&p);

	hba = pgv_write_test_file("auth", "masks2.hba",
		"host all all 10.0.0.0/8   trust\n"
		"host all all 127.0.0.2/32 trust\n"
		"host all all 128.0.0.1 255.255.255.255 trust\n");
	snprintf(extra, sizeof(extra), "auth_type = hba\nauth_hba_file = %s\n", hba);
	start(&p, extra, userlist_of(SEC_PLAIN));
	cp_init(&cp, &p, "scram_user", "scram_pass", "disable");
	expect_refused(&p, &cp, "28000",
		       "no pg_hba.conf entry for host \"127.0.0.1\", user \"scram_user\", database \"pgvtest\", no encryption",
		       "no line matches 127.0.0.1");
	pgv_stop(&p);
}
END_TEST

START_TEST(hba_cert)
{
	struct pgv p;
	struct cparams cp;
	char extra[2048];
	const char *hba = pgv_write_test_file("auth", "cert.hba",
		"hostssl   pgvtest scram_user 127.0.0.1/32 cert\n"
		"hostssl   pgvtest md5_user   127.0.0.1/32 cert map=cm\n"
		"hostnossl all     all        127.0.0.1/32 reject\n");
	/* the certificate of scram_user may log in as md5_user, nothing else is mapped */
	const char *ident = pgv_write_test_file("auth", "cert.ident", "cm scram_user md5_user\n");

	snprintf(extra, sizeof(extra), "auth_type = hba\nauth_hba_file = %s\nauth_ident_file = %s\n%s", hba, ident,
		 client_tls_conf("prefer", true));
	start(&p, extra, userlist_of(SEC_PLAIN));

	/* no password anywhere: the certificate is the proof */
	cp_init(&cp, &p, "scram_user", NULL, "require");
	cp_set(&cp, "sslcert", pgv_cert("scram_user.crt"));
	cp_set(&cp, "sslkey", pgv_cert("scram_user.key"));
	expect_login(&p, &cp, "scram_user", "scram_user with its own certificate");

	/* a good certificate with another name */
	cp_set(&cp, "sslcert", pgv_cert("md5_user.crt"));
	cp_set(&cp, "sslkey", pgv_cert("md5_user.key"));
	expect_refused(&p, &cp, "28000", "certificate authentication failed for user \"scram_user\"",
		       "scram_user with md5_user's certificate");

	/* TLS but no certificate at all */
	cp_init(&cp, &p, "scram_user", "scram_pass", "require");
	expect_refused(&p, &cp, "28000", "certificate authentication failed for user \"scram_user\"",
		       "scram_user without a certificate");

	/* the right name, signed by a CA pgvalve does not trust: the handshake fails */
	cp_init(&cp, &p, "scram_user", NULL, "require");
	cp_set(&cp, "sslcert", pgv_cert("wrong_scram_user.crt"));
	cp_set(&cp, "sslkey", pgv_cert("wrong_scram_user.key"));
	struct login l;
	login_try(&l, &cp);
	ck_assert_msg(!l.ok, "a certificate from an unknown CA was accepted");
	ck_assert_msg(strstr(l.msg, "SSL") || strstr(l.msg, "certificate"), "unexpected error: %s", l.msg);
	login_done(&l);
	pgv_expect_log(&p, "TLS handshake error: ", 5);	/* PgBouncer's words */

	/* ident map: scram_user's certificate logs in as md5_user; md5_user's own does not */
	cp_init(&cp, &p, "md5_user", NULL, "require");
	cp_set(&cp, "sslcert", pgv_cert("scram_user.crt"));
	cp_set(&cp, "sslkey", pgv_cert("scram_user.key"));
	expect_login(&p, &cp, "md5_user", "md5_user with scram_user's certificate through map cm");
	cp_set(&cp, "sslcert", pgv_cert("md5_user.crt"));
	cp_set(&cp, "sslkey", pgv_cert("md5_user.key"));
	expect_refused(&p, &cp, "28000", "certificate authentication failed for user \"md5_user\"",
		       "md5_user with its own certificate, which map cm does not list");

	/* without TLS: the reject line */
	cp_init(&cp, &p, "scram_user", "scram_pass", "disable");
	expect_refused(&p, &cp, "28000", "pg_hba.conf rejects connection", "scram_user without TLS");
	ck_assert(pgv_running(&p));
	pgv_stop(&p);
}
END_TEST

START_TEST(hba_peer_ident_map)
{
	struct pgv p;
	struct cparams cp;
	char extra[1024], ident[256];
	struct passwd *me = getpwuid(geteuid());

	ck_assert_ptr_nonnull(me);
	/* pgvalve may run as another user (-u); what counts is the client's OS user */
	snprintf(ident, sizeof(ident), "m %s scram_user\n", me->pw_name);
	const char *hba = pgv_write_test_file("auth", "peer.hba",
		"local pgvtest scram_user peer map=m\n"
		"local pgvtest md5_user   peer\n"
		"host  all     all        127.0.0.1/32 reject\n");
	snprintf(extra, sizeof(extra), "auth_type = hba\nauth_hba_file = %s\nauth_ident_file = %s\n", hba,
		 pgv_write_test_file("auth", "peer.ident", ident));
	start(&p, extra, userlist_of(SEC_PLAIN));

	cp_init(&cp, &p, "scram_user", NULL, "disable");
	cp_set(&cp, "host", p.dir);	/* the Unix socket */
	expect_login(&p, &cp, "scram_user", "peer over the Unix socket, mapped by m");
	if (strcmp(me->pw_name, "md5_user") != 0) {
		cp_set(&cp, "user", "md5_user");
		cp_set(&cp, "password", "md5_pass");
		expect_refused(&p, &cp, "28000", "peer authentication failed for user \"md5_user\"",
			       "peer without a map for another OS user");
	}
	/* the same user over TCP: the reject line */
	cp_init(&cp, &p, "scram_user", "scram_pass", "disable");
	expect_refused(&p, &cp, "28000", "pg_hba.conf rejects connection", "scram_user over TCP");
	pgv_stop(&p);
}
END_TEST

/* ---------------------------------------------------------------- auth_query */

static void auth_query_roles(bool create)
{
	pg_exec("DROP ROLE IF EXISTS auth_lookup");
	pg_exec("DROP ROLE IF EXISTS aq_user");
	pg_exec("DROP ROLE IF EXISTS \"o'brien\"");
	if (!create)
		return;
	pg_exec("SET password_encryption = 'scram-sha-256'");
	pg_exec("CREATE ROLE auth_lookup LOGIN SUPERUSER PASSWORD '" LOOKUP_PW "'");
	pg_exec("CREATE ROLE aq_user LOGIN PASSWORD '" AQ_PW "'");
	pg_exec("CREATE ROLE \"o'brien\" LOGIN PASSWORD '" QUOTE_PW "'");
}

/* Unchecked teardown of the auth_query cases (runs even when a test failed half-way). */
static void drop_auth_query_roles(void)
{
	PGconn *c = pg_direct();
	PQclear(PQexec(c, "DROP ROLE IF EXISTS auth_lookup, aq_user, \"o'brien\""));
	PQfinish(c);
}

static void start_auth_query(struct pgv *p, const char *auth_type)
{
	char extra[512], databases[512];
	/* the lookup runs in another database alias, pointing at database postgres */
	snprintf(databases, sizeof(databases), "%sauthdb = host=127.0.0.1 port=%s dbname=postgres\n", std_databases(),
		 getenv("PGV_TEST_PGPORT"));
	snprintf(extra, sizeof(extra), "auth_type = %s\nauth_user = auth_lookup\nauth_dbname = authdb\nverbose = 2\n",
		 auth_type);
	start_dbs(p, extra, databases, "\"auth_lookup\" \"" LOOKUP_PW "\"\n");
}

START_TEST(auth_query_users)
{
	static const char *const types[] = { "scram-sha-256", "md5" };
	struct pgv p;
	struct cparams cp;
	char what[128];

	auth_query_roles(true);
	start_auth_query(&p, types[_i]);
	snprintf(what, sizeof(what), "auth_type %s, auth_query", types[_i]);

	/* only in pg_authid, with a SCRAM secret: SCRAM with the client, pass-through to the server */
	cp_init(&cp, &p, "aq_user", AQ_PW, "disable");
	expect_login(&p, &cp, "aq_user", what);
	cp_init(&cp, &p, "aq_user", WRONG_PW, "disable");
	expect_auth_failed(&p, &cp, "aq_user", what);
	/* nobody of that name: like a wrong password */
	cp_init(&cp, &p, "nobody_at_all", AQ_PW, "disable");
	expect_auth_failed(&p, &cp, "nobody_at_all", what);
	/* a quote in the name: bound as a parameter, never spliced into the SQL */
	cp_init(&cp, &p, "o'brien", QUOTE_PW, "disable");
	expect_login(&p, &cp, "o'brien", what);
	/*
	 * Spliced into the query, this name would select aq_user's row, whose
	 * password would then pass the SCRAM exchange.
	 */
	cp_init(&cp, &p, "x' OR rolname = 'aq_user", AQ_PW, "disable");
	expect_auth_failed(&p, &cp, "x' OR rolname = 'aq_user", what);

	/* the lookups ran as auth_user in auth_dbname's database */
	const char *n = query_value(pg(), "SELECT count(*) FROM pg_stat_activity WHERE usename = 'auth_lookup'"
				    " AND datname = 'postgres'");
	ck_assert_msg(atoi(n) >= 1, "no auth_lookup connection to database postgres (auth_dbname)");
	pgv_stop(&p);
	auth_query_roles(false);
}
END_TEST

/*
 * auth_dbname's server cannot be reached (a socket dir that does not
 * exist: connect() fails at once) and server_login_retry = 0: the login
 * waiting for the lookup fails by client_login_timeout, pgvalve keeps
 * serving others. (Each failed connect once launched the next from inside
 * itself, until the stack ran out.)
 */
START_TEST(auth_query_server_unreachable)
{
	struct pgv p;
	struct cparams cp;
	char extra[512], databases[1024];

	snprintf(databases, sizeof(databases), "%sauthdb = host=%s/no-such-dir dbname=postgres\n", std_databases(),
		 getenv("PGV_TEST_DIR"));
	snprintf(extra, sizeof(extra), "auth_type = scram-sha-256\nauth_user = auth_lookup\nauth_dbname = authdb\n"
		 "server_login_retry = 0\nclient_login_timeout = 2\n");
	start_dbs(&p, extra, databases, "\"auth_lookup\" \"" LOOKUP_PW "\"\n\"scram_user\" \"scram_pass\"\n");
	double t0 = now_s();
	cp_init(&cp, &p, "aq_user", AQ_PW, "disable");
	expect_refused(&p, &cp, NULL, "", "auth_query with its server unreachable");
	double took = now_s() - t0;
	ck_assert_msg(took < 10, "the login took %.1f s to fail", took);
	ck_assert_msg(pgv_running(&p), "pgvalve died:\n%s", pgv_log_tail(&p, 1500));
	cp_init(&cp, &p, "scram_user", "scram_pass", "disable");
	expect_login(&p, &cp, "scram_user", "a user from auth_file meanwhile");
	pgv_stop(&p);
}
END_TEST

/*
 * A user whose pg_authid secret is md5: the client proves the password
 * with md5 against the looked-up secret, and the same secret logs in to
 * the server (which wants md5 from md5_user), as PgBouncer does.
 */
START_TEST(auth_query_md5_user)
{
	struct pgv p;
	struct cparams cp;

	auth_query_roles(true);
	start_auth_query(&p, "md5");
	cp_init(&cp, &p, "md5_user", WRONG_PW, "disable");
	expect_auth_failed(&p, &cp, "md5_user", "md5_user, wrong");
	cp_init(&cp, &p, "md5_user", "md5_pass", "disable");
	expect_login(&p, &cp, "md5_user", "md5_user known only through auth_query (md5 secret)");
	pgv_stop(&p);
	auth_query_roles(false);
}
END_TEST

/* ---------------------------------------------------------------- client TLS */

/* The value of column `col` in the first row whose columns `k1`/`k2` equal v1/v2 ("" if none). */
static const char *row_value(PGresult *r, const char *k1, const char *v1, const char *k2, const char *v2,
			     const char *col)
{
	int a = PQfnumber(r, k1), b = PQfnumber(r, k2), c = PQfnumber(r, col);
	ck_assert_msg(a >= 0 && b >= 0 && c >= 0, "columns %s/%s/%s missing", k1, k2, col);
	for (int i = 0; i < PQntuples(r); i++)
		if (strcmp(PQgetvalue(r, i, a), v1) == 0 && strcmp(PQgetvalue(r, i, b), v2) == 0)
			return PQgetvalue(r, i, c);
	return "";
}

START_TEST(client_tls_require)
{
	struct pgv p;
	struct cparams cp;
	struct login l, admin;
	struct raw_error err;
	char extra[2048];

	snprintf(extra, sizeof(extra), "auth_type = md5\nadmin_users = md5_user\n%s", client_tls_conf("require", false));
	start(&p, extra, userlist_of(SEC_PLAIN));

	/* sslmode=require */
	cp_init(&cp, &p, "scram_user", "scram_pass", "require");
	login_try(&l, &cp);
	ck_assert_msg(l.ok, "sslmode=require: %s\n%s", l.msg, pgv_log_tail(&p, 1500));
	ck_assert_int_eq(PQsslInUse(l.conn), 1);
	ck_assert_str_eq(query_value(l.conn, "SELECT count(*) FROM pgbench_branches"), "1");

	/* sslmode=verify-full against the harness CA, by the name in the certificate */
	cp_init(&cp, &p, "md5_user", "md5_pass", "verify-full");
	cp_set(&cp, "host", "localhost");
	cp_set(&cp, "hostaddr", "127.0.0.1");
	cp_set(&cp, "sslrootcert", pgv_cert("ca.crt"));
	expect_login(&p, &cp, "md5_user", "sslmode=verify-full");
	/* ... and against another CA: libpq refuses pgvalve's certificate */
	cp_set(&cp, "sslrootcert", pgv_cert("wrong_ca.crt"));
	expect_refused(&p, &cp, NULL, "certificate verify failed", "verify-full with the wrong CA");

	/* plain TCP is refused, before any password */
	cp_init(&cp, &p, "scram_user", "scram_pass", "disable");
	expect_refused(&p, &cp, "28000", "SSL required", "sslmode=disable");
	ck_assert_int_eq(raw_login(p.port, DB, "scram_user", "scram_pass", &err), -1);
	ck_assert_str_eq(err.sqlstate, "28000");
	ck_assert_str_eq(err.severity, "FATAL");
	ck_assert_str_eq(err.message, "SSL required");

	/* the admin console shows the TLS of the client and of its server connection */
	cp_init(&cp, &p, "md5_user", "md5_pass", "require");
	cp_set(&cp, "dbname", "pgbouncer");
	login_try(&admin, &cp);
	ck_assert_msg(admin.ok, "admin console: %s", admin.msg);
	PGresult *r = PQexec(admin.conn, "SHOW CLIENTS");
	ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "SHOW CLIENTS: %s", PQerrorMessage(admin.conn));
	const char *tls = row_value(r, "user", "scram_user", "database", DB, "tls");
	ck_assert_msg(strncmp(tls, "TLSv1.", 6) == 0 && strchr(tls, '/') != NULL,
		      "SHOW CLIENTS tls of scram_user is \"%s\"", tls);
	PQclear(r);
	r = PQexec(admin.conn, "SHOW SERVERS");
	ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "SHOW SERVERS: %s", PQerrorMessage(admin.conn));
	tls = row_value(r, "user", "scram_user", "database", DB, "tls");
	/* server_tls_sslmode prefer: TLS where PostgreSQL offers it (not the wheel's 18, built without) */
	if (pgv_pg_serves_tls())
		ck_assert_msg(strncmp(tls, "TLSv1.", 6) == 0, "SHOW SERVERS tls of scram_user's server is \"%s\"", tls);
	else
		ck_assert_msg(*tls == '\0', "SHOW SERVERS tls of scram_user's server is \"%s\" without TLS", tls);
	PQclear(r);
	login_done(&admin);
	login_done(&l);
	pgv_stop(&p);
}
END_TEST

/* Copies a harness certificate file to a path of the test's (so it can be swapped later). */
static void copy_file(const char *from, const char *to)
{
	FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
	ck_assert_msg(in && out, "copy %s -> %s: %s", from, to, strerror(errno));
	char buf[8192];
	size_t n;
	while ((n = fread(buf, 1, sizeof(buf), in)) > 0)
		ck_assert_uint_eq(fwrite(buf, 1, n, out), n);
	fclose(in);
	fclose(out);
	chmod(to, 0644);
}

/*
 * TLS files are re-read on SIGHUP: a new certificate serves the next
 * clients; a broken file keeps the previous context and the log says why.
 */
START_TEST(tls_files_reloaded)
{
	struct pgv p;
	struct cparams cp;
	char extra[2048], crt[600], key[600];
	snprintf(crt, sizeof(crt), "%s/reload-%ld.crt", getenv("PGV_TEST_DIR"), (long)getpid());
	snprintf(key, sizeof(key), "%s/reload-%ld.key", getenv("PGV_TEST_DIR"), (long)getpid());
	copy_file(pgv_cert("server.crt"), crt);
	copy_file(pgv_cert("server.key"), key);
	snprintf(extra, sizeof(extra), "auth_type = md5\nclient_tls_sslmode = require\nclient_tls_cert_file = %s\n"
		 "client_tls_key_file = %s\n", crt, key);
	start(&p, extra, userlist_of(SEC_PLAIN));

	cp_init(&cp, &p, "md5_user", "md5_pass", "verify-ca");
	cp_set(&cp, "sslrootcert", pgv_cert("ca.crt"));
	expect_login(&p, &cp, "md5_user", "verify-ca with the first certificate");

	/* a server certificate from the other CA: after SIGHUP, the harness CA no longer verifies pgvalve */
	char csr[600], ext[600], out[600];
	snprintf(csr, sizeof(csr), "%s/reload-%ld.csr", getenv("PGV_TEST_DIR"), (long)getpid());
	snprintf(ext, sizeof(ext), "%s/reload-%ld.ext", getenv("PGV_TEST_DIR"), (long)getpid());
	snprintf(out, sizeof(out), "%s/reload-%ld.openssl.out", getenv("PGV_TEST_DIR"), (long)getpid());
	FILE *e = fopen(ext, "w");
	ck_assert_ptr_nonnull(e);
	fputs("subjectAltName=DNS:localhost,IP:127.0.0.1\n", e);
	fclose(e);
	{
		char *req[] = { "openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
				"-keyout", key, "-out", csr, "-subj", "/CN=localhost", NULL };
		ck_assert_int_eq(run_program(req, NULL, out, 30), 0);
		char *sign[] = { "openssl", "x509", "-req", "-in", csr, "-CA", (char *)pgv_cert("wrong_ca.crt"), "-CAkey",
				 (char *)pgv_cert("wrong_ca.key"), "-CAcreateserial", "-days", "2", "-extfile", ext, "-out", crt, NULL };
		ck_assert_msg(run_program(sign, NULL, out, 30) == 0, "openssl x509: %s", read_file_tail(out, 2000));
		chmod(key, 0644);
		chmod(crt, 0644);
	}
	pgv_reload(&p);
	expect_refused(&p, &cp, NULL, "certificate verify failed", "the harness CA after the swap");
	cp_set(&cp, "sslrootcert", pgv_cert("wrong_ca.crt"));
	expect_login(&p, &cp, "md5_user", "verify-ca with the new certificate's CA");

	/* a broken key: the previous context stays and the log says why */
	FILE *f = fopen(key, "w");
	ck_assert_ptr_nonnull(f);
	fputs("-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n", f);
	fclose(f);
	pgv_reload(&p);
	ck_assert_msg(pgv_log_contains(&p, "keeping the previous TLS configuration"), "%s", pgv_log_tail(&p, 1500));
	expect_login(&p, &cp, "md5_user", "verify-ca after a broken reload: the previous certificate");
	pgv_stop(&p);
}
END_TEST

/* client_tls_sslmode verify-ca and verify-full: a client certificate from client_tls_ca_file is required. */
START_TEST(client_tls_verify_client_cert)
{
	static const char *const modes[] = { "verify-ca", "verify-full" };
	struct pgv p;
	struct cparams cp;
	struct login l;
	char extra[2048], what[128];

	snprintf(what, sizeof(what), "client_tls_sslmode %s", modes[_i]);
	snprintf(extra, sizeof(extra), "auth_type = md5\n%s", client_tls_conf(modes[_i], true));
	start(&p, extra, userlist_of(SEC_PLAIN));
	/* a certificate from the CA, plus the password md5 asks for */
	cp_init(&cp, &p, "scram_user", "scram_pass", "require");
	cp_set(&cp, "sslcert", pgv_cert("scram_user.crt"));
	cp_set(&cp, "sslkey", pgv_cert("scram_user.key"));
	expect_login(&p, &cp, "scram_user", what);
	/* no certificate */
	cp_init(&cp, &p, "scram_user", "scram_pass", "require");
	login_try(&l, &cp);
	ck_assert_msg(!l.ok, "%s: a client without a certificate logged in", what);
	login_done(&l);
	/* a certificate from another CA */
	cp_set(&cp, "sslcert", pgv_cert("wrong_scram_user.crt"));
	cp_set(&cp, "sslkey", pgv_cert("wrong_scram_user.key"));
	login_try(&l, &cp);
	ck_assert_msg(!l.ok, "%s: a client with a certificate from an unknown CA logged in", what);
	login_done(&l);
	/* plain TCP */
	cp_init(&cp, &p, "scram_user", "scram_pass", "disable");
	expect_refused(&p, &cp, "28000", "SSL required", what);
	pgv_stop(&p);
}
END_TEST

/*
 * verify-ca/verify-full with no client_tls_ca_file has nothing to verify a
 * client certificate against. Either pgvalve refuses the configuration (as
 * it does for server_tls_sslmode verify-* without server_tls_ca_file) or it
 * refuses every client; it must not fail open and accept clients without a
 * certificate.
 */
START_TEST(client_tls_verify_without_ca)
{
	static const char *const modes[] = { "verify-ca", "verify-full" };
	char extra[2048], ini[700], out[700], what[128], text[4096];
	const char *section = getenv("PGV_TEST_INI_SECTION") ? getenv("PGV_TEST_INI_SECTION") : "pgvalve";
	const char *runas = getenv("PGV_TEST_RUNAS");
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t salen = sizeof(sa);
	struct pgv p;
	struct cparams cp;
	struct login l;

	snprintf(what, sizeof(what), "client_tls_sslmode %s without client_tls_ca_file", modes[_i]);
	snprintf(extra, sizeof(extra), "auth_type = md5\n%s", client_tls_conf(modes[_i], false));

	/* First by hand: does pgvalve start at all with this configuration? */
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &salen), 0);
	close(fd);
	snprintf(text, sizeof(text), "[databases]\n%s\n[%s]\nlisten_addr = 127.0.0.1\nlisten_port = %d\n"
		 "unix_socket_dir = %s\nauth_file = %s\n%s", std_databases(), section, ntohs(sa.sin_port),
		 getenv("PGV_TEST_DIR"), pgv_write_test_file("auth", "noca.users", userlist_of(SEC_PLAIN)), extra);
	snprintf(ini, sizeof(ini), "%s", pgv_write_test_file("auth", "noca.ini", text));
	snprintf(out, sizeof(out), "%s/auth-%ld-noca.out", getenv("PGV_TEST_DIR"), (long)getpid());
	char *argv[] = { getenv("PGV_BINARY"), "-u", (char *)runas, ini, NULL };
	if (runas == NULL || *runas == '\0' || geteuid() != 0) {
		argv[1] = ini;
		argv[2] = NULL;
	}
	int rc = run_program(argv, NULL, out, 2);
	if (rc != -1) {
		/* refused at start-up: fine, if it says why */
		const char *log = read_file_tail(out, 4000);
		ck_assert_msg(rc != 0 && strstr(log, "client_tls_ca_file") != NULL,
			      "%s: pgvalve exited with %d without naming client_tls_ca_file:\n%s", what, rc, log);
		return;
	}
	/* It runs: then no client may get in without a verified certificate. */
	start(&p, extra, userlist_of(SEC_PLAIN));
	cp_init(&cp, &p, "scram_user", "scram_pass", "require");
	login_try(&l, &cp);
	ck_assert_msg(!l.ok, "%s: pgvalve started and let a client without a certificate log in", what);
	login_done(&l);
	pgv_stop(&p);
}
END_TEST

/* auth_type cert (without hba): the verified certificate's CN must be the user name. */
START_TEST(auth_type_cert)
{
	struct pgv p;
	struct cparams cp;
	char extra[2048];

	snprintf(extra, sizeof(extra), "auth_type = cert\n%s", client_tls_conf("require", true));
	start(&p, extra, userlist_of(SEC_PLAIN));
	cp_init(&cp, &p, "md5_user", NULL, "require");
	cp_set(&cp, "sslcert", pgv_cert("md5_user.crt"));
	cp_set(&cp, "sslkey", pgv_cert("md5_user.key"));
	expect_login(&p, &cp, "md5_user", "auth_type cert, own certificate");
	cp_init(&cp, &p, "scram_user", "scram_pass", "require");
	cp_set(&cp, "sslcert", pgv_cert("md5_user.crt"));
	cp_set(&cp, "sslkey", pgv_cert("md5_user.key"));
	expect_refused(&p, &cp, "28000", "certificate authentication failed for user \"scram_user\"",
		       "auth_type cert, another user's certificate");
	cp_init(&cp, &p, "scram_user", "scram_pass", "require");
	expect_refused(&p, &cp, "28000", "certificate authentication failed for user \"scram_user\"",
		       "auth_type cert, no certificate");
	pgv_stop(&p);
}
END_TEST

/*
 * The tls column of SHOW CLIENTS names the key exchange group that was
 * negotiated ("TLSv1.3/TLS_AES_256_GCM_SHA384/ECDH=X25519" in PgBouncer's
 * format); with client_tls_ecdhcurve = secp384r1 that is secp384r1.
 */
START_TEST(tls_column_names_the_curve)
{
	static const char *const curves[] = { "X25519", "secp384r1" };
	struct pgv p;
	struct cparams cp;
	struct login l, admin;
	char extra[2048], want[64];

	snprintf(extra, sizeof(extra), "auth_type = md5\nadmin_users = md5_user\nclient_tls_ecdhcurve = %s\n%s",
		 curves[_i], client_tls_conf("require", false));
	start(&p, extra, userlist_of(SEC_PLAIN));
	cp_init(&cp, &p, "scram_user", "scram_pass", "require");
	login_try(&l, &cp);
	ck_assert_msg(l.ok, "login: %s\n%s", l.msg, pgv_log_tail(&p, 1500));
	cp_init(&cp, &p, "md5_user", "md5_pass", "require");
	cp_set(&cp, "dbname", "pgbouncer");
	login_try(&admin, &cp);
	ck_assert_msg(admin.ok, "admin console: %s", admin.msg);
	PGresult *r = PQexec(admin.conn, "SHOW CLIENTS");
	ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
	const char *tls = row_value(r, "user", "scram_user", "database", DB, "tls");
	snprintf(want, sizeof(want), "/ECDH=%s", curves[_i]);
	ck_assert_msg(strstr(tls, want) != NULL, "SHOW CLIENTS tls is \"%s\", expected it to end in %s", tls, want);
	PQclear(r);
	login_done(&admin);
	login_done(&l);
	pgv_stop(&p);
}
END_TEST

/*
 * Bytes sent right behind an SSLRequest, before the 'S' could be read,
 * would be taken as if they had come through TLS (CVE-2021-23214): refused.
 */
START_TEST(ssl_request_with_trailing_data)
{
	struct pgv p;
	char extra[2048];
	unsigned char pkt[256], reply[1024];
	size_t off = 8, got = 0;

	snprintf(extra, sizeof(extra), "auth_type = trust\n%s", client_tls_conf("prefer", false));
	start(&p, extra, userlist_of(SEC_PLAIN));
	static const unsigned char req[8] = { 0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f };
	memcpy(pkt, req, 8);
	size_t start_at = off;
	off += 8;
	off += (size_t)snprintf((char *)pkt + off, sizeof(pkt) - off, "user%cscram_user%cdatabase%c%s%c", 0, 0, 0, DB, 0);
	pkt[off++] = 0;
	raw_put_u32(pkt + start_at, (uint32_t)(off - start_at));
	raw_put_u32(pkt + start_at + 4, 196608);
	int fd = raw_connect(p.port);
	ck_assert(raw_send(fd, pkt, off));
	double deadline = now_s() + 5;
	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int left = (int)((deadline - now_s()) * 1000);
		ck_assert_msg(left > 0, "pgvalve neither answered nor closed");
		if (poll(&pfd, 1, left) <= 0)
			continue;
		ssize_t n = recv(fd, reply + got, sizeof(reply) - got - 1, 0);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	reply[got] = 0;
	ck_assert_msg(got > 0 && reply[0] == 'E', "expected a plain ErrorResponse, got %zu bytes starting with 0x%02x",
		      got, got ? reply[0] : 0);
	ck_assert_msg(memmem(reply, got, "C08P01", 7) != NULL, "not 08P01");
	ck_assert(pgv_running(&p));
	pgv_stop(&p);
}
END_TEST

/* ---------------------------------------------------------------- server TLS */

static const struct server_tls_case {
	const char *sslmode;
	const char *ca;		/* NULL: none */
	bool ok;
	const char *ssl;	/* pg_stat_ssl.ssl of the server connection */
} server_tls_cases[] = {
	{ "verify-full", "ca.crt", true, "t" },
	{ "verify-ca", "ca.crt", true, "t" },
	{ "require", NULL, true, "t" },
	{ "prefer", NULL, true, "t" },
	{ "disable", NULL, true, "f" },
	{ "verify-full", "wrong_ca.crt", false, NULL },
	{ "verify-ca", "wrong_ca.crt", false, NULL },
};

START_TEST(server_tls)
{
	const struct server_tls_case *tc = &server_tls_cases[_i];
	struct pgv p;
	struct cparams cp;
	char extra[1024], what[128];

	snprintf(what, sizeof(what), "server_tls_sslmode %s, CA %s", tc->sslmode, tc->ca ? tc->ca : "none");
	/* A failed handshake is a connect-level failure: as PgBouncer, the login waits for query_wait_timeout. */
	snprintf(extra, sizeof(extra), "auth_type = md5\nquery_wait_timeout = 2\nserver_tls_sslmode = %s\n%s%s%s",
		 tc->sslmode, tc->ca ? "server_tls_ca_file = " : "", tc->ca ? pgv_cert(tc->ca) : "", tc->ca ? "\n" : "");
	start(&p, extra, userlist_of(SEC_PLAIN));
	cp_init(&cp, &p, "scram_user", "scram_pass", "disable");
	if (!tc->ok) {
		expect_refused(&p, &cp, "08P01", "query_wait_timeout", what);
		ck_assert(pgv_log_contains(&p, "certificate verify failed"));
		ck_assert(pgv_log_contains(&p, "TLS handshake error: "));	/* PgBouncer's words */
		pgv_stop(&p);
		return;
	}
	struct login l;
	login_try(&l, &cp);
	ck_assert_msg(l.ok, "%s: %s\n%s", what, l.msg, pgv_log_tail(&p, 1500));
	char sql[200];
	snprintf(sql, sizeof(sql),
		 "SELECT ssl FROM pg_stat_ssl JOIN pg_stat_activity USING (pid) WHERE usename = 'scram_user' AND pid = %s",
		 query_value(l.conn, "SELECT pg_backend_pid()"));
	const char *ssl = query_value(pg(), sql);
	ck_assert_msg(strcmp(ssl, tc->ssl) == 0, "%s: pg_stat_ssl.ssl is %s, expected %s", what, ssl, tc->ssl);
	login_done(&l);
	pgv_stop(&p);
}
END_TEST

/* ---------------------------------------------------------------- TLS handshakes by hand */

/* The first flight of a TLS client: a ClientHello record. */
static size_t client_hello(unsigned char *buf, size_t size)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	SSL *ssl = SSL_new(ctx);
	BIO *rb = BIO_new(BIO_s_mem()), *wb = BIO_new(BIO_s_mem());
	SSL_set_bio(ssl, rb, wb);
	SSL_set_connect_state(ssl);
	SSL_set_alpn_protos(ssl, (const unsigned char *)"\x0apostgresql", 11);
	ck_assert_int_le(SSL_do_handshake(ssl), 0);	/* waits for the ServerHello */
	int n = BIO_read(wb, buf, (int)size);
	SSL_free(ssl);
	SSL_CTX_free(ctx);
	ck_assert_int_gt(n, 100);
	ck_assert_int_eq(buf[0], 0x16);
	return (size_t)n;
}

static void ssl_request(int fd)
{
	static const unsigned char req[8] = { 0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f };
	char answer = 0;
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	ck_assert(raw_send(fd, req, sizeof(req)));
	ck_assert_int_eq(poll(&pfd, 1, 5000), 1);
	ck_assert_int_eq(recv(fd, &answer, 1, 0), 1);
	ck_assert_int_eq(answer, 'S');
}

START_TEST(stalled_tls_handshake)
{
	struct pgv p;
	struct cparams cp;
	char extra[2048];
	unsigned char hello[4096];
	size_t n = client_hello(hello, sizeof(hello));

	snprintf(extra, sizeof(extra), "auth_type = md5\nclient_login_timeout = 2\n%s", client_tls_conf("require", false));
	start(&p, extra, userlist_of(SEC_PLAIN));

	double t0 = now_s();
	int half = raw_connect(p.port);		/* SSLRequest, then half a ClientHello */
	ssl_request(half);
	ck_assert(raw_send(half, hello, n / 2));
	int mute = raw_connect(p.port);		/* SSLRequest, then nothing */
	ssl_request(mute);
	int direct = raw_connect(p.port);	/* direct TLS, half a ClientHello */
	ck_assert(raw_send(direct, hello, n / 2));

	/* meanwhile another client logs in over TLS and queries */
	double t1 = now_s();
	cp_init(&cp, &p, "scram_user", "scram_pass", "require");
	struct login l;
	login_try(&l, &cp);
	ck_assert_msg(l.ok, "login beside stalled handshakes: %s\n%s", l.msg, pgv_log_tail(&p, 1500));
	ck_assert_str_eq(query_value(l.conn, "SELECT count(*) FROM pgbench_branches"), "1");
	double took = now_s() - t1;
	/* not held up by them: done while all three are still waiting for client_login_timeout */
	int fds[3] = { half, mute, direct };
	for (int i = 0; i < 3; i++) {
		struct pollfd pfd = { .fd = fds[i], .events = POLLIN };
		ck_assert_msg(poll(&pfd, 1, 0) == 0, "stalled handshake %d was closed before the login beside it "
			      "ended (%.2f s)", i, took);
	}

	/* the stalled ones are closed by client_login_timeout (2 s), not before */
	for (int i = 0; i < 3; i++) {
		ck_assert_msg(raw_wait_closed(fds[i], 8000), "stalled handshake %d still open after %.1f s", i,
			      now_s() - t0);
		close(fds[i]);
	}
	double closed = now_s() - t0;
	ck_assert_msg(closed >= 1.8, "stalled handshakes closed after %.2f s, before client_login_timeout", closed);
	ck_assert_msg(closed < 6.0, "stalled handshakes closed only after %.2f s", closed);
	/* and the logged-in client is unharmed */
	ck_assert_str_eq(query_value(l.conn, "SELECT 'still here'"), "still here");
	login_done(&l);
	ck_assert(pgv_log_contains(&p, "client_login_timeout"));
	pgv_stop(&p);
}
END_TEST

/* PostgreSQL 17's direct TLS: a ClientHello first, no SSLRequest. */

static bool tls_read_exact(SSL *ssl, void *buf, size_t len)
{
	unsigned char *b = buf;
	while (len > 0) {
		int n = SSL_read(ssl, b, (int)len);
		if (n <= 0)
			return false;
		b += n;
		len -= (size_t)n;
	}
	return true;
}

static bool tls_write(SSL *ssl, const void *buf, size_t len)
{
	return SSL_write(ssl, buf, (int)len) == (int)len;
}

static bool tls_password(SSL *ssl, const char *text)
{
	unsigned char hdr[5] = { 'p' };
	raw_put_u32(hdr + 1, (uint32_t)strlen(text) + 5);
	return tls_write(ssl, hdr, 5) && tls_write(ssl, text, strlen(text) + 1);
}

static void md5_hex(const void *data, size_t len, char out[33])
{
	unsigned char d[EVP_MAX_MD_SIZE];
	unsigned int dl = 0;
	ck_assert_int_eq(EVP_Digest(data, len, d, &dl, EVP_md5(), NULL), 1);
	for (int i = 0; i < 16; i++)
		snprintf(out + 2 * i, 3, "%02x", d[i]);
}

/*
 * Logs in over direct TLS (alpn: wire format, or NULL for none) with a
 * cleartext or md5 password and runs SELECT current_user into value.
 * 0 logged in, -1 ErrorResponse (err), -2 handshake failed, -3 closed or
 * something unexpected.
 */
static int direct_tls_login(int port, const char *alpn, const char *user, const char *password,
			    struct raw_error *err, char *value, size_t vsize)
{
	int fd = raw_connect(port), rc = -3;
	struct timeval tv = { 10, 0 };
	unsigned char msg[1024], hdr[5], body[8192];
	size_t off = 8;

	memset(err, 0, sizeof(*err));
	value[0] = '\0';
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	ck_assert_int_eq(SSL_CTX_load_verify_locations(ctx, pgv_cert("ca.crt"), NULL), 1);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	SSL *ssl = SSL_new(ctx);
	SSL_set_fd(ssl, fd);
	SSL_set_tlsext_host_name(ssl, "localhost");
	SSL_set1_host(ssl, "localhost");
	if (alpn)
		ck_assert_int_eq(SSL_set_alpn_protos(ssl, (const unsigned char *)alpn, (unsigned)strlen(alpn)), 0);
	if (SSL_connect(ssl) != 1) {
		rc = -2;
		goto out;
	}
	off += (size_t)snprintf((char *)msg + off, sizeof(msg) - off, "user%c%s%cdatabase%c%s%c", 0, user, 0, 0, DB, 0);
	msg[off++] = 0;
	raw_put_u32(msg, (uint32_t)off);
	raw_put_u32(msg + 4, 196608);
	if (!tls_write(ssl, msg, off))
		goto out;
	bool queried = false;
	for (;;) {
		if (!tls_read_exact(ssl, hdr, 5))
			goto out;
		uint32_t len = raw_get_u32(hdr + 1);
		if (len < 4 || len - 4 >= sizeof(body) || !tls_read_exact(ssl, body, len - 4))
			goto out;
		body[len - 4] = 0;
		switch (hdr[0]) {
		case 'R': {
			uint32_t code = raw_get_u32(body);
			if (code == 3) {
				if (!tls_password(ssl, password))
					goto out;
			} else if (code == 5) {
				char secret[36], salted[36], reply[36];
				md5_secret(user, password, secret);
				memcpy(salted, secret + 3, 32);
				memcpy(salted + 32, body + 4, 4);
				memcpy(reply, "md5", 3);
				md5_hex(salted, 36, reply + 3);
				if (!tls_password(ssl, reply))
					goto out;
			} else if (code != 0) {
				goto out;
			}
			break;
		}
		case 'E':
			for (size_t i = 0; i < len - 4 && body[i];) {
				char f = (char)body[i++];
				const char *v = (const char *)body + i;
				if (f == 'C')
					snprintf(err->sqlstate, sizeof(err->sqlstate), "%s", v);
				else if (f == 'M')
					snprintf(err->message, sizeof(err->message), "%s", v);
				else if (f == 'S')
					snprintf(err->severity, sizeof(err->severity), "%s", v);
				i += strlen(v) + 1;
			}
			rc = -1;
			goto out;
		case 'D':
			if (len - 4 >= 6 && raw_get_u32(body + 2) < vsize) {
				memcpy(value, body + 6, raw_get_u32(body + 2));
				value[raw_get_u32(body + 2)] = '\0';
			}
			break;
		case 'Z':
			if (queried) {
				tls_write(ssl, "X\0\0\0\4", 5);
				rc = 0;
				goto out;
			} else {
				static const char q[] = "SELECT current_user";
				unsigned char qh[5] = { 'Q' };
				raw_put_u32(qh + 1, (uint32_t)sizeof(q) + 4);
				if (!tls_write(ssl, qh, 5) || !tls_write(ssl, q, sizeof(q)))
					goto out;
				queried = true;
			}
			break;
		default:
			break;
		}
	}
out:
	SSL_free(ssl);
	SSL_CTX_free(ctx);
	close(fd);
	return rc;
}

START_TEST(direct_tls)
{
	struct pgv p;
	struct raw_error err;
	char extra[2048], value[128];

	snprintf(extra, sizeof(extra), "auth_type = plain\n%s", client_tls_conf("require", false));
	start(&p, extra, userlist_of(SEC_PLAIN));

	int rc = direct_tls_login(p.port, "\x0apostgresql", "scram_user", "scram_pass", &err, value, sizeof(value));
	ck_assert_msg(rc == 0, "direct TLS with ALPN postgresql: rc %d, %s %s\n%s", rc, err.sqlstate, err.message,
		      pgv_log_tail(&p, 1500));
	ck_assert_str_eq(value, "scram_user");
	/* md5 over direct TLS too, for md5_user */
	pgv_stop(&p);
	snprintf(extra, sizeof(extra), "auth_type = md5\n%s", client_tls_conf("require", false));
	start(&p, extra, userlist_of(SEC_PLAIN));
	rc = direct_tls_login(p.port, "\x0apostgresql", "md5_user", "md5_pass", &err, value, sizeof(value));
	ck_assert_msg(rc == 0, "direct TLS, md5: rc %d, %s %s\n%s", rc, err.sqlstate, err.message, pgv_log_tail(&p, 1500));
	ck_assert_str_eq(value, "md5_user");
	rc = direct_tls_login(p.port, "\x0apostgresql", "md5_user", WRONG_PW, &err, value, sizeof(value));
	ck_assert_int_eq(rc, -1);
	ck_assert_str_eq(err.sqlstate, "08P01");

	/* no ALPN: refused (an error after the handshake, or none at all), never a login */
	rc = direct_tls_login(p.port, NULL, "md5_user", "md5_pass", &err, value, sizeof(value));
	ck_assert_msg(rc != 0 && (rc != -1 || strcmp(err.sqlstate, "08P01") == 0),
		      "direct TLS without ALPN: rc %d, %s %s", rc, err.sqlstate, err.message);
	/* another protocol in ALPN: the handshake fails */
	rc = direct_tls_login(p.port, "\x08http/1.1", "md5_user", "md5_pass", &err, value, sizeof(value));
	ck_assert_msg(rc == -2, "direct TLS with ALPN http/1.1: rc %d, %s %s", rc, err.sqlstate, err.message);

	/* pgvalve is still fine */
	rc = direct_tls_login(p.port, "\x0apostgresql", "md5_user", "md5_pass", &err, value, sizeof(value));
	ck_assert_int_eq(rc, 0);
	pgv_stop(&p);
}
END_TEST

/* ---------------------------------------------------------------- logs */

static bool file_contains(const char *path, const char *needle)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return false;
	size_t cap = 1 << 16, len = 0;
	char *text = malloc(cap + 1);
	size_t n;
	ck_assert_ptr_nonnull(text);
	while ((n = fread(text + len, 1, cap - len, f)) > 0) {
		len += n;
		if (len == cap) {
			cap *= 2;
			text = realloc(text, cap + 1);
			ck_assert_ptr_nonnull(text);
		}
	}
	fclose(f);
	text[len] = '\0';
	bool found = strstr(text, needle) != NULL;
	free(text);
	return found;
}

START_TEST(no_passwords_in_logs)
{
	char list[600], dir[600], md5a[36], md5b[36];
	const char *passwords[] = { "scram_pass", "md5_pass", "bench_pass", WRONG_PW, LOOKUP_PW, AQ_PW, QUOTE_PW,
				    md5a, md5b };
	int instances = 0, with_logins = 0;

	md5_secret("scram_user", "scram_pass", md5a);
	md5_secret("md5_user", "md5_pass", md5b);
	snprintf(list, sizeof(list), "%s/%s", getenv("PGV_TEST_DIR"), INSTANCE_LIST);
	FILE *f = fopen(list, "re");
	ck_assert_msg(f != NULL, "no list of this binary's pgvalve instances (%s)", list);
	while (fgets(dir, sizeof(dir), f)) {
		dir[strcspn(dir, "\n")] = '\0';
		char files[2][700];
		snprintf(files[0], sizeof(files[0]), "%s/pgvalve.log", dir);
		snprintf(files[1], sizeof(files[1]), "%s/stderr.log", dir);
		instances++;
		if (file_contains(files[0], "login attempt"))
			with_logins++;
		for (int i = 0; i < 2; i++)
			for (size_t k = 0; k < sizeof(passwords) / sizeof(passwords[0]); k++)
				ck_assert_msg(!file_contains(files[i], passwords[k]), "%s contains the secret \"%s\"",
					      files[i], passwords[k]);
	}
	fclose(f);
	/* the check looked at real logs of real logins */
	ck_assert_int_ge(instances, N_CELLS);
	ck_assert_int_ge(with_logins, N_CELLS);
}
END_TEST

/* ---------------------------------------------------------------- suite */

/* ---------------------------------------------------------------- SCRAM: no user enumeration */

/* What a client sees of a SCRAM exchange before it proves anything. */
struct scram_probe {
	char salt[128];		/* base64, as sent */
	int salt_bytes;		/* decoded length */
	int iterations;
	struct raw_error err;	/* the refusal of a proof of 32 zero bytes */
};

/*
 * Speaks SCRAM by hand: startup as user, SASLInitialResponse, reads the
 * server-first-message's salt and iteration count, then sends a made-up
 * proof and reads the ErrorResponse it earns.
 */
static void scram_probe(struct pgv *p, const char *user, struct scram_probe *out)
{
	unsigned char pkt[512], body[2048];
	size_t off = 8, len = 0;
	char type = 0;
	const char *cnonce = "pgvtestnonce0123456789";

	memset(out, 0, sizeof(*out));
	off += (size_t)snprintf((char *)pkt + off, sizeof(pkt) - off, "user%c%s%cdatabase%c%s%c", 0, user, 0, 0, DB, 0);
	pkt[off++] = 0;
	raw_put_u32(pkt, (uint32_t)off);
	raw_put_u32(pkt + 4, 196608);
	int fd = raw_connect(p->port);
	ck_assert(raw_send(fd, pkt, off));

	ck_assert_msg(raw_read_message(fd, &type, body, sizeof(body), &len, 10000) && type == 'R' && len >= 4,
		      "%s: no authentication request\n%s", user, pgv_log_tail(p, 1000));
	ck_assert_msg(raw_get_u32(body) == 10 && memmem(body + 4, len - 4, "SCRAM-SHA-256", 13),
		      "%s: asked for auth method %u, not SCRAM", user, raw_get_u32(body));

	char first[128];
	int flen = snprintf(first, sizeof(first), "n,,n=,r=%s", cnonce);
	off = (size_t)snprintf((char *)pkt, sizeof(pkt), "SCRAM-SHA-256") + 1;
	raw_put_u32(pkt + off, (uint32_t)flen);
	memcpy(pkt + off + 4, first, (size_t)flen);
	raw_send_password_message(fd, pkt, off + 4 + (size_t)flen);

	ck_assert_msg(raw_read_message(fd, &type, body, sizeof(body), &len, 10000) && type == 'R' && len > 4 && raw_get_u32(body) == 11,
		      "%s: no SASLContinue\n%s", user, pgv_log_tail(p, 1000));
	/* r=<nonce>,s=<salt>,i=<count> */
	char *msg = (char *)body + 4, *r = strstr(msg, "r="), *sp = strstr(msg, ",s="), *ip = strstr(msg, ",i=");
	ck_assert_msg(r == msg && sp && ip && ip > sp, "%s: odd server-first-message %s", user, msg);
	ck_assert_msg(strncmp(msg + 2, cnonce, strlen(cnonce)) == 0, "%s: nonce not extended: %s", user, msg);
	snprintf(out->salt, sizeof(out->salt), "%.*s", (int)(ip - sp - 3), sp + 3);
	out->iterations = atoi(ip + 3);
	unsigned char raw[128];
	out->salt_bytes = EVP_DecodeBlock(raw, (const unsigned char *)out->salt, (int)strlen(out->salt));
	if (out->salt_bytes > 0 && out->salt[strlen(out->salt) - 1] == '=')
		out->salt_bytes -= out->salt[strlen(out->salt) - 2] == '=' ? 2 : 1;

	char final[256];
	int n = snprintf(final, sizeof(final), "c=biws,r=%.*s,p=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
			 (int)(sp - msg - 2), msg + 2);
	raw_send_password_message(fd, final, (size_t)n);
	ck_assert_msg(raw_read_message(fd, &type, body, sizeof(body), &len, 10000) && type == 'E',
		      "%s: a made-up proof was not refused (message %c)", user, type);
	raw_parse_error(body, len, &out->err);
	close(fd);
}

/* Refused like a wrong password: PgBouncer's 08P01 "SASL authentication failed", for every name alike. */
static void expect_wrong_password(const struct scram_probe *pr, const char *user)
{
	ck_assert_msg(strcmp(pr->err.sqlstate, "08P01") == 0 && strcmp(pr->err.message, "SASL authentication failed") == 0,
		      "%s: refused with %s \"%s\"", user, pr->err.sqlstate, pr->err.message);
}

/*
 * Unknown names, md5 secrets and plain-text passwords all get the
 * configured count and a salt that is stable per name (PostgreSQL's mock
 * authentication); a made-up proof fails the same way for all of them and
 * for a real SCRAM secret.
 */
START_TEST(scram_no_user_enumeration)
{
	struct pgv p;
	struct scram_probe a, b, c;
	char userlist[2048], md5[36];

	md5_secret("md5_user", "md5_pass", md5);
	snprintf(userlist, sizeof(userlist), "\"scram_user\" \"scram_pass\"\n\"md5_user\" \"%s\"\n\"scram_secret_user\" \"%s\"\n",
		 md5, pg_scram_secret("scram_user"));
	start(&p, "auth_type = scram-sha-256\nscram_iterations = 4321\n", userlist);

	/* unknown: the same salt twice, 16 bytes like PostgreSQL's, the configured count */
	scram_probe(&p, "ghost_user", &a);
	scram_probe(&p, "ghost_user", &b);
	ck_assert_str_eq(a.salt, b.salt);
	ck_assert_int_eq(a.salt_bytes, 16);
	ck_assert_int_eq(a.iterations, 4321);
	ck_assert_int_eq(b.iterations, 4321);
	expect_wrong_password(&a, "ghost_user");
	scram_probe(&p, "ghost_user2", &c);
	ck_assert_str_ne(a.salt, c.salt);
	ck_assert_int_eq(c.iterations, 4321);

	/* an md5 secret asked for SCRAM, and a plain-text password: the same form, stable too */
	static const char *const users[] = { "md5_user", "scram_user" };
	for (int i = 0; i < 2; i++) {
		scram_probe(&p, users[i], &a);
		scram_probe(&p, users[i], &b);
		ck_assert_msg(strcmp(a.salt, b.salt) == 0, "%s: salt changed between tries", users[i]);
		ck_assert_int_eq(a.salt_bytes, 16);
		ck_assert_int_eq(a.iterations, 4321);
		expect_wrong_password(&a, users[i]);
	}

	/* a real SCRAM secret: its own salt and count (PostgreSQL's 16 bytes, 4096), the same refusal */
	scram_probe(&p, "scram_secret_user", &a);
	ck_assert_int_eq(a.salt_bytes, 16);
	ck_assert_int_eq(a.iterations, 4096);
	ck_assert_msg(strstr(pg_scram_secret("scram_user"), a.salt) != NULL, "salt %s is not the secret's", a.salt);
	expect_wrong_password(&a, "scram_secret_user");

	/* and the real password still works for the plain-text user, twice (the second from cached keys) */
	struct cparams cp;
	cp_init(&cp, &p, "scram_user", "scram_pass", "disable");
	expect_login(&p, &cp, "scram_user", "plain-text password over SCRAM");
	expect_login(&p, &cp, "scram_user", "plain-text password over SCRAM, again");
	cp_init(&cp, &p, "scram_user", WRONG_PW, "disable");
	expect_auth_failed(&p, &cp, "scram_user", "wrong password");
	ck_assert(pgv_running(&p));
	pgv_stop(&p);
}
END_TEST

/* Every worker answers a name with the same mock salt (the secret is drawn before the fork). */
START_TEST(scram_mock_salt_workers)
{
	struct pgv p = { 0 };
	struct scram_probe first, pr;
	const char *const args[] = { "-w", "2", NULL };

	pgv_start_ex(&p, "auth_type = scram-sha-256\nlog_connections = 1\n", std_databases(), std_userlist(), args, 0);
	/*
	 * pgv_start_ex returns once the port answers, when either worker may
	 * still be on its way (on a loaded machine worker 2 came up first, and
	 * all 31 tries went to it): both must listen before the tries.
	 */
	pgv_expect_log(&p, "LOG [w1] process up", 20);
	pgv_expect_log(&p, "LOG [w2] process up", 20);
	scram_probe(&p, "ghost_user", &first);
	ck_assert_int_eq(first.iterations, 4096);
	for (int i = 0; i < 30; i++) {
		scram_probe(&p, "ghost_user", &pr);
		ck_assert_msg(strcmp(pr.salt, first.salt) == 0, "try %d: salt %s, first %s", i, pr.salt, first.salt);
		expect_wrong_password(&pr, "ghost_user");
	}
	/* the kernel spread the 31 tries over both workers, or this proved nothing */
	static const char *const tags[] = { "[w1] ", "[w2] " };
	for (int w = 0; w < 2; w++) {
		int refusals = 0;
		FILE *f = fopen(p.log, "r");
		char line[1024];
		ck_assert_msg(f != NULL, "%s: %s", p.log, strerror(errno));
		while (fgets(line, sizeof(line), f))
			refusals += strstr(line, tags[w]) && strstr(line, "/ghost_user@") &&
				    strstr(line, "pooler error: SASL authentication failed");
		fclose(f);
		ck_assert_msg(refusals > 0, "no refusal by worker %d\n%s", w + 1, pgv_log_tail(&p, 2000));
	}
	pgv_stop(&p);
}
END_TEST

/* auth_query with no row, or an md5 row, looks like any other name. */
START_TEST(scram_mock_salt_auth_query)
{
	struct pgv p;
	struct scram_probe a, b;

	auth_query_roles(true);
	start_auth_query(&p, "scram-sha-256");
	scram_probe(&p, "ghost_user", &a);
	scram_probe(&p, "ghost_user", &b);
	ck_assert_str_eq(a.salt, b.salt);
	ck_assert_int_eq(a.salt_bytes, 16);
	ck_assert_int_eq(a.iterations, 4096);
	expect_wrong_password(&a, "ghost_user");
	scram_probe(&p, "md5_user", &a);
	scram_probe(&p, "md5_user", &b);
	ck_assert_str_eq(a.salt, b.salt);
	ck_assert_int_eq(a.iterations, 4096);
	expect_wrong_password(&a, "md5_user");
	/* a user auth_query finds with a SCRAM secret still logs in */
	struct cparams cp;
	cp_init(&cp, &p, "aq_user", AQ_PW, "disable");
	expect_login(&p, &cp, "aq_user", "auth_query SCRAM user");
	pgv_stop(&p);
	auth_query_roles(false);
}
END_TEST

/* A plain-text password changed in the auth_file: after RELOAD the old one fails and the new one works. */
START_TEST(scram_password_change_reload)
{
	struct pgv p;
	struct cparams cp;
	char databases[512], path[700];

	/* clients log in as "rotator"; servers as scram_user with the password in the database line */
	snprintf(databases, sizeof(databases), "%s = host=127.0.0.1 port=%s dbname=%s user=scram_user password=scram_pass\n",
		 DB, getenv("PGV_TEST_PGPORT"), DB);
	start_dbs(&p, "auth_type = scram-sha-256\n", databases, "\"rotator\" \"old_pw_1111\"\n");
	cp_init(&cp, &p, "rotator", "old_pw_1111", "disable");
	expect_login(&p, &cp, "scram_user", "old password");
	expect_login(&p, &cp, "scram_user", "old password, cached keys");

	snprintf(path, sizeof(path), "%s/userlist.txt", p.dir);
	FILE *f = fopen(path, "w");
	ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
	fputs("\"rotator\" \"new_pw_2222\"\n", f);
	fclose(f);
	pgv_reload(&p);

	expect_auth_failed(&p, &cp, "rotator", "old password after reload");
	cp_init(&cp, &p, "rotator", "new_pw_2222", "disable");
	expect_login(&p, &cp, "scram_user", "new password after reload");
	expect_login(&p, &cp, "scram_user", "new password after reload, cached keys");
	pgv_stop(&p);
}
END_TEST

/*
 * A fake PostgreSQL on listen_fd that answers one login with SASL and a
 * server-first-message asking for that many iterations, then
 * waits for pgvalve to hang up. Runs in a forked child; exits 0 if pgvalve
 * got as far as the SASLInitialResponse.
 */
static void fake_server_absurd_iterations(int listen_fd, const char *iterations)
{
	unsigned char buf[2048], pkt[512];
	int fd = accept(listen_fd, NULL, NULL);
	if (fd < 0)
		_exit(2);
	double deadline = now_s() + 20;
	for (;;) {	/* an SSLRequest first (server_tls_sslmode prefer) gets 'N' */
		if (!raw_read_exact(fd, buf, 4, deadline) || raw_get_u32(buf) < 8 || raw_get_u32(buf) > sizeof(buf) ||
		    !raw_read_exact(fd, buf + 4, raw_get_u32(buf) - 4, deadline))
			_exit(3);
		if (raw_get_u32(buf) != 8 || raw_get_u32(buf + 4) != 80877103)
			break;
		if (!raw_send(fd, "N", 1))
			_exit(3);
	}
	static const char sasl[] = "SCRAM-SHA-256\0";
	pkt[0] = 'R';
	raw_put_u32(pkt + 1, 4 + 4 + sizeof(sasl));
	raw_put_u32(pkt + 5, 10);
	memcpy(pkt + 9, sasl, sizeof(sasl));
	if (!raw_send(fd, pkt, 9 + sizeof(sasl)))
		_exit(4);
	char type;
	size_t len;
	if (!raw_read_message(fd, &type, buf, sizeof(buf), &len, 10000) || type != 'p')
		_exit(5);
	/* "SCRAM-SHA-256\0" int32 "n,,n=,r=<nonce>" */
	const char *first = (const char *)buf + 14 + 4, *r = strstr(first, "r=");
	if (!r)
		_exit(6);
	char msg[300];
	int n = snprintf(msg, sizeof(msg), "r=%sFAKESERVERNONCE,s=QUJDREVGR0hJSktMTU5PUA==,i=%s", r + 2, iterations);
	pkt[0] = 'R';
	raw_put_u32(pkt + 1, (uint32_t)(4 + 4 + n));
	raw_put_u32(pkt + 5, 11);
	memcpy(pkt + 9, msg, (size_t)n);
	if (!raw_send(fd, pkt, 9 + (size_t)n))
		_exit(7);
	raw_wait_closed(fd, 20000);
	_exit(0);
}

/*
 * A server asking for an absurd SCRAM iteration count (10^9: minutes of
 * PBKDF2; 5 * 10^6: seconds, and below the former limit) fails that login
 * at once, with the count and the limit in the log, instead of freezing the
 * event loop; other databases are served meanwhile.
 */
START_TEST(server_scram_absurd_iterations)
{
	static const char *const counts[] = { "1000000000", "5000000" };
	char want[200];
	struct pgv p;
	struct cparams cp;
	char databases[1024];
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t salen = sizeof(sa);

	int lfd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(lfd, 0);
	ck_assert_int_eq(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(lfd, 4), 0);
	ck_assert_int_eq(getsockname(lfd, (struct sockaddr *)&sa, &salen), 0);
	pid_t child = fork();
	ck_assert_int_ge(child, 0);
	if (child == 0)
		fake_server_absurd_iterations(lfd, counts[_i]);
	close(lfd);

	snprintf(databases, sizeof(databases), "%sfake = host=127.0.0.1 port=%d dbname=fake user=scram_user password=scram_pass\n",
		 std_databases(), ntohs(sa.sin_port));
	start_dbs(&p, "auth_type = md5\n", databases, std_userlist());
	cp_init(&cp, &p, "scram_user", "scram_pass", "disable");
	cp_set(&cp, "dbname", "fake");
	double t0 = now_s();
	snprintf(want, sizeof(want), "server asked for %s SCRAM iterations, more than the limit of 1000000", counts[_i]);
	expect_refused(&p, &cp, NULL, want, "fake server");
	ck_assert_msg(now_s() - t0 < 5, "refusal took %.1f s", now_s() - t0);
	pgv_expect_log(&p, want, 5);
	int status = 0;
	ck_assert_int_eq(waitpid(child, &status, 0), child);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "fake server: status %d", status);
	/* the loop is free: a real database still works */
	cp_init(&cp, &p, "scram_user", "scram_pass", "disable");
	expect_login(&p, &cp, "scram_user", "real database after the fake one");
	pgv_stop(&p);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("auth");
	TCase *tc;

	tc = pgv_tcase_create("matrix", 30);
	tcase_add_loop_test(tc, auth_matrix, 0, N_CELLS);
	tcase_add_loop_test(tc, unknown_user, 0, 4);
	suite_add_tcase(s, tc);

	tc = pgv_tcase_create("hba", 40);
	tcase_add_test(tc, hba_hostssl_hostnossl);
	tcase_add_test(tc, hba_address_masks);
	tcase_add_test(tc, hba_cert);
	tcase_add_test(tc, hba_peer_ident_map);
	suite_add_tcase(s, tc);

	tc = pgv_tcase_create("auth_query", 40);
	tcase_add_unchecked_fixture(tc, NULL, drop_auth_query_roles);
	tcase_add_loop_test(tc, auth_query_users, 0, 2);
	tcase_add_test(tc, auth_query_md5_user);
	tcase_add_test(tc, auth_query_server_unreachable);
	suite_add_tcase(s, tc);

	tc = pgv_tcase_create("tls", 40);
	tcase_add_test(tc, client_tls_require);
	tcase_add_test(tc, tls_files_reloaded);
	tcase_add_loop_test(tc, client_tls_verify_client_cert, 0, 2);
	tcase_add_loop_test(tc, client_tls_verify_without_ca, 0, 2);
	tcase_add_test(tc, auth_type_cert);
	tcase_add_loop_test(tc, tls_column_names_the_curve, 0, 2);
	tcase_add_test(tc, stalled_tls_handshake);
	tcase_add_test(tc, direct_tls);
	tcase_add_test(tc, ssl_request_with_trailing_data);
	suite_add_tcase(s, tc);

	/* needs a PostgreSQL that serves TLS: run.sh leaves it out otherwise */
	tc = pgv_tcase_create("server_tls", 40);
	tcase_set_tags(tc, "server_tls");
	tcase_add_loop_test(tc, server_tls, 0, (int)(sizeof(server_tls_cases) / sizeof(server_tls_cases[0])));
	suite_add_tcase(s, tc);

	tc = pgv_tcase_create("scram_mock", 60);
	tcase_add_unchecked_fixture(tc, NULL, drop_auth_query_roles);
	tcase_add_test(tc, scram_no_user_enumeration);
	tcase_add_test(tc, scram_mock_salt_workers);
	tcase_add_test(tc, scram_mock_salt_auth_query);
	tcase_add_test(tc, scram_password_change_reload);
	tcase_add_loop_test(tc, server_scram_absurd_iterations, 0, 2);
	suite_add_tcase(s, tc);

	tc = pgv_tcase_create("logs", 60);
	tcase_add_test(tc, no_passwords_in_logs);
	suite_add_tcase(s, tc);

	return pgv_run_suite(s);
}
