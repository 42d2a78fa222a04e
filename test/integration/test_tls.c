/*
 * test_tls.c - end-to-end tests of TLS against a real PostgreSQL 15 (with
 * ssl=on, see run.sh): towards clients (require, verify-full, client
 * certificates, auth_type cert, certificate files reloaded, PostgreSQL 17
 * direct TLS, stalled handshakes, an SSLRequest with trailing data) and
 * towards the server (verify-full, wrong CA); and that no password reaches
 * a log.
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
	double deadline = now_s() + 5;	/* an answer in milliseconds; 5 s on a loaded machine */
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

START_TEST(no_passwords_in_logs)
{
	expect_no_passwords_in_logs(5);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("tls");
	TCase *tc;

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

	tc = pgv_tcase_create("logs", 60);
	tcase_add_test(tc, no_passwords_in_logs);
	suite_add_tcase(s, tc);

	return pgv_run_suite(s);
}
