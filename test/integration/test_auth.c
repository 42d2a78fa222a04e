/*
 * test_auth.c - end-to-end tests of authentication against a real
 * PostgreSQL 15: every client auth_type against every kind of auth_file
 * secret and both kinds of server (one that wants SCRAM, one that wants
 * md5); auth_hba_file rules (reject, hostssl and hostnossl, address masks,
 * cert, peer with an ident map); auth_user + auth_query; SCRAM mock
 * authentication (unknown names get a stable salt and the configured
 * count, also across workers and through auth_query), a server asking for
 * an absurd iteration count, and a password changed by RELOAD; and that no
 * password reaches a log. TLS is test_tls's.
 *
 * Logins go through libpq with verbose errors, so the SQLSTATE of a refusal
 * is checked as well as its message. The helpers are auth_kit.c's.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE	/* memmem */
#endif
#include "auth_kit.h"

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
	 *      secret but no keys because the client proved no password)
	 *   N  28000 the server wants md5 and pgvalve holds only a SCRAM secret
	 *   R  28000 pg_hba.conf rejects connection ...
	 *   C  28000 certificate authentication failed (no TLS, no certificate)
	 */
	const char *outcome[SEC_COUNT];
};

static const struct method methods[] = {
	/* password ignored; the server login needs a secret it can use */
	{ "trust", "trust", NULL, { "OOOO", "WWOO", "WWNN" } },
	/* checked against any secret kind; a cleartext password checked against a SCRAM secret gives its keys */
	{ "plain", "plain", NULL, { "OPOP", "WPOP", "OPNP" } },
	/* a SCRAM secret makes md5 fall back to SCRAM, which gives pass-through keys */
	{ "md5", "md5", NULL, { "OPOP", "WPOP", "OPNP" } },
	/* an md5 secret cannot serve SCRAM: even the right password fails */
	{ "scram-sha-256", "scram-sha-256", NULL, { "OPOP", "PPPP", "OPNP" } },
	{ "any", "any", NULL, { "OOOO", "WWOO", "WWNN" } },
	{ "hba trust", "hba", "trust", { "OOOO", "WWOO", "WWNN" } },
	{ "hba password", "hba", "password", { "OPOP", "WPOP", "OPNP" } },
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
	PQclear(PQexec(c, "DROP ROLE IF EXISTS auth_lookup, aq_user, \"o'brien\", longpass"));
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
	static const char *const types[] = { "scram-sha-256", "md5", "plain" };
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

/*
 * PgBouncer's test_auth_query_login_large_packets: auth_type plain,
 * auth_query, pkt_buf = 75. The longest password PgBouncer takes (65,530
 * bytes, checked against the role's md5 secret in pg_authid) logs in; one byte longer
 * (a PasswordMessage of 65,532 bytes' body, under PostgreSQL's 65,535)
 * is a wrong password, not a bad packet.
 */
START_TEST(auth_query_longest_password_small_pkt_buf)
{
	struct pgv p;
	struct cparams cp;
	char extra[512], databases[512];
	static char pw[65532], sql[65700];
	memset(pw + 1, 'a', 65530);
	pw[0] = 'X';
	pw[65531] = '\0';
	auth_query_roles(true);
	pg_exec("DROP ROLE IF EXISTS longpass");
	pg_exec("SET password_encryption = 'md5'");
	snprintf(sql, sizeof(sql), "CREATE ROLE longpass LOGIN PASSWORD '%s'", pw + 1);
	pg_exec(sql);
	pg_exec("RESET password_encryption");
	/* pgvtest over the Unix socket (local trust): the server login needs no password of pgvalve's */
	snprintf(databases, sizeof(databases), "%sauthdb = host=127.0.0.1 port=%s dbname=postgres\n",
		 std_databases_unix(), getenv("PGV_TEST_PGPORT"));
	snprintf(extra, sizeof(extra), "auth_type = plain\nauth_user = auth_lookup\nauth_dbname = authdb\npkt_buf = 75\n");
	start_dbs(&p, extra, databases, "\"auth_lookup\" \"" LOOKUP_PW "\"\n");
	cp_init(&cp, &p, "longpass", pw + 1, "disable");
	expect_login(&p, &cp, "longpass", "a 65,530-byte password, pkt_buf 75");
	cp_init(&cp, &p, "longpass", pw, "disable");
	expect_auth_failed(&p, &cp, "longpass", "a 65,531-byte wrong password, pkt_buf 75");
	pgv_stop(&p);
	pg_exec("DROP ROLE IF EXISTS longpass");
	auth_query_roles(false);
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
	double deadline = now_s() + 20;	/* pgvalve's server login comes with the client's, in well under a second */
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

/* ---------------------------------------------------------------- logs */

START_TEST(no_passwords_in_logs)
{
	expect_no_passwords_in_logs(N_CELLS);
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
	tcase_add_loop_test(tc, auth_query_users, 0, 3);
	tcase_add_test(tc, auth_query_md5_user);
	tcase_add_test(tc, auth_query_longest_password_small_pkt_buf);
	tcase_add_test(tc, auth_query_server_unreachable);
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
