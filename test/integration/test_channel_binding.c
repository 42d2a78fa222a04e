/*
 * test_channel_binding.c - SCRAM-SHA-256-PLUS end to end, with libpq 15:
 * channel_binding=require through pgvalve over TLS; plain SCRAM over TLS
 * still works; a client that sees another certificate than pgvalve's (a
 * TLS-terminating proxy in between, what binding exists to catch) is
 * refused; and, tagged server_tls, pgvalve binding its own logins to
 * PostgreSQL 15's certificate, next to libpq binding directly.
 */
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <openssl/ssl.h>

#define DB "pgvtest"

static int mport;	/* the metrics port of the pgvalve tls_conf made last */

static const char *tls_conf(const char *auth_type, const char *server_sslmode)
{
	static char buf[1536];
	mport = pgv_pick_http_port(0);
	snprintf(buf, sizeof(buf),
		 "auth_type = %s\nverbose = 1\nclient_tls_sslmode = require\nclient_tls_cert_file = %s\n"
		 "client_tls_key_file = %s\nserver_tls_sslmode = %s\nmetrics_port = %d\nmetrics_listen_addr = 127.0.0.1\n",
		 auth_type, pgv_cert("server.crt"), pgv_cert("server.key"), server_sslmode, mport);
	return buf;
}

/* pgvalve_client_authentication_failures_total{method,cause} of the last pgvalve started. */
static double failures(const char *method, const char *cause)
{
	return pgv_auth_failures(mport, method, cause);
}

/* A libpq login to port: NULL when it worked (closed again), else libpq's message (static). */
static const char *login(int port, const char *user, const char *password, const char *sslmode,
			 const char *channel_binding)
{
	char portbuf[16];
	snprintf(portbuf, sizeof(portbuf), "%d", port);
	const char *kw[] = { "host", "port", "dbname", "user", "password", "sslmode", "channel_binding",
			     "gssencmode", "connect_timeout", "sslcert", NULL };
	const char *val[] = { "127.0.0.1", portbuf, DB, user, password, sslmode, channel_binding,
			      "disable", "10", pgv_cert("no-such.crt"), NULL };
	return pgv_login_message(kw, val, user);
}

/* pgvalve over TLS: -PLUS offered and used; plain SCRAM and plain TCP as before. */
START_TEST(plus_to_pgvalve)
{
	static const char *const types[] = { "scram-sha-256", "hba" };
	struct pgv p;
	char extra[2048];
	const char *hba = pgv_write_test_file("cbind", "scram.hba", "host all all 127.0.0.1/32 scram-sha-256\n");

	snprintf(extra, sizeof(extra), "%sauth_hba_file = %s\n", tls_conf(types[_i], "disable"), hba);
	pgv_start(&p, extra, std_databases(), std_userlist());
	const char *err = login(p.port, "scram_user", "scram_pass", "require", "require");
	ck_assert_msg(!err, "channel_binding=require: %s\n%s", err, pgv_log_tail(&p, 1500));
	ck_assert_int_eq(pgv_log_count(&p, "login authenticated: method=scram-sha-256-plus"), 1);
	/* libpq's default (prefer) binds too */
	ck_assert_ptr_null(login(p.port, "scram_user", "scram_pass", "require", "prefer"));
	ck_assert_int_eq(pgv_log_count(&p, "login authenticated: method=scram-sha-256-plus"), 2);
	/* a client that does not bind still gets in over TLS */
	err = login(p.port, "scram_user", "scram_pass", "require", "disable");
	ck_assert_msg(!err, "channel_binding=disable: %s", err);
	ck_assert_int_eq(pgv_log_count(&p, "login authenticated: method=scram-sha-256\n"), 1);
	/* a wrong password is refused with binding as without */
	err = login(p.port, "scram_user", "wrong_pw_5521", "require", "require");
	ck_assert_ptr_nonnull(err);
	ck_assert_msg(strstr(err, "SASL authentication failed"), "%s", err);
	ck_assert_double_eq(failures("scram-sha-256", "bad_password"), 1);
	ck_assert_double_eq(failures("scram-sha-256", "channel_binding_mismatch"), 0);
	/* client_tls_sslmode = require: a client without TLS is refused, and counted as such */
	err = login(p.port, "scram_user", "scram_pass", "disable", "disable");
	ck_assert_msg(err && strstr(err, "SSL required"), "%s", err ? err : "logged in without TLS");
	ck_assert_double_eq(failures(types[_i], "tls_required"), 1);
	pgv_stop(&p);
}
END_TEST

/* verify-full against the test CA: which certificate pgvalve serves (NULL: server.crt, for 127.0.0.1). */
static const char *login_verified(int port)
{
	char portbuf[16];
	snprintf(portbuf, sizeof(portbuf), "%d", port);
	const char *kw[] = { "host", "port", "dbname", "user", "password", "sslmode", "sslrootcert", "gssencmode",
			     "connect_timeout", "sslcert", NULL };
	const char *val[] = { "127.0.0.1", portbuf, DB, "scram_user", "scram_pass", "verify-full", pgv_cert("ca.crt"),
			      "disable", "10", pgv_cert("no-such.crt"), NULL };
	return pgv_login_message(kw, val, "scram_user");
}

/* A reload with another certificate: the binding follows it (its hash is made again with the context). */
START_TEST(plus_after_reload)
{
	struct pgv p;

	pgv_start(&p, tls_conf("scram-sha-256", "disable"), std_databases(), std_userlist());
	ck_assert_ptr_null(login_verified(p.port));
	ck_assert_ptr_null(login(p.port, "scram_user", "scram_pass", "require", "require"));
	pgv_ini_replace(&p, pgv_cert("server.crt"), pgv_cert("scram_user.crt"));
	pgv_ini_replace(&p, pgv_cert("server.key"), pgv_cert("scram_user.key"));
	pgv_reload(&p);
	/* the new certificate is served (it names no 127.0.0.1, so verify-full fails) ... */
	const char *err = login_verified(p.port);
	ck_assert_msg(err && strstr(err, "certificate"), "verify-full after the reload: %s", err ? err : "logged in");
	/* ... and bound to */
	err = login(p.port, "scram_user", "scram_pass", "require", "require");
	ck_assert_msg(!err, "channel_binding=require after the reload: %s\n%s", err, pgv_log_tail(&p, 1500));
	ck_assert_int_eq(pgv_log_count(&p, "method=scram-sha-256-plus"), 3);	/* libpq's default binds too */
	pgv_stop(&p);
}
END_TEST

/* ---------------------------------------------------------------- a TLS-terminating proxy */

/*
 * One connection: answers libpq's SSLRequest and handshakes with its own
 * certificate (not pgvalve's), opens TLS to pgvalve, then relays the
 * decrypted bytes both ways: what an interception proxy does.
 */
struct mitm {
	int listen_fd, port, target_port;
	pthread_t thread;
};

static SSL *mitm_accept(int fd)
{
	unsigned char req[8];
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
	if (!raw_read_exact(fd, req, sizeof(req), now_s() + 10) || write(fd, "S", 1) != 1 ||
	    SSL_CTX_use_certificate_file(ctx, pgv_cert("scram_user.crt"), SSL_FILETYPE_PEM) != 1 ||
	    SSL_CTX_use_PrivateKey_file(ctx, pgv_cert("scram_user.key"), SSL_FILETYPE_PEM) != 1) {
		SSL_CTX_free(ctx);
		return NULL;
	}
	SSL *ssl = SSL_new(ctx);
	SSL_CTX_free(ctx);	/* the SSL holds its own reference */
	SSL_set_fd(ssl, fd);
	if (SSL_accept(ssl) != 1) {
		SSL_free(ssl);
		return NULL;
	}
	return ssl;
}

static SSL *mitm_connect(int port)
{
	unsigned char req[8], answer;
	int fd = raw_connect(port);
	raw_put_u32(req, 8);
	raw_put_u32(req + 4, 80877103);	/* SSLRequest */
	if (!raw_send(fd, req, sizeof(req)) || !raw_read_exact(fd, &answer, 1, now_s() + 10) || answer != 'S') {
		close(fd);
		return NULL;
	}
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	SSL *ssl = SSL_new(ctx);
	SSL_CTX_free(ctx);
	SSL_set_fd(ssl, fd);
	if (SSL_connect(ssl) != 1) {
		SSL_free(ssl);
		close(fd);
		return NULL;
	}
	return ssl;
}

/* Moves what one side has to the other: false when that side is done. */
static bool mitm_pass(SSL *from, SSL *to)
{
	char buf[16384];
	int n = SSL_read(from, buf, sizeof(buf));
	if (n <= 0)
		return SSL_get_error(from, n) == SSL_ERROR_WANT_READ;
	for (int off = 0; off < n;) {
		int w = SSL_write(to, buf + off, n - off);
		if (w <= 0 && SSL_get_error(to, w) != SSL_ERROR_WANT_WRITE)
			return false;
		off += w > 0 ? w : 0;
	}
	return true;
}

static void *mitm_run(void *arg)
{
	struct mitm *m = arg;
	int cfd = accept(m->listen_fd, NULL, NULL);
	SSL *a = cfd >= 0 ? mitm_accept(cfd) : NULL;
	SSL *b = a ? mitm_connect(m->target_port) : NULL;
	if (a && b) {
		fcntl(cfd, F_SETFL, O_NONBLOCK);
		fcntl(SSL_get_fd(b), F_SETFL, O_NONBLOCK);
		for (;;) {
			struct pollfd pf[2] = { { .fd = cfd, .events = POLLIN }, { .fd = SSL_get_fd(b), .events = POLLIN } };
			if (!SSL_pending(a) && !SSL_pending(b) && poll(pf, 2, 15000) <= 0)
				break;
			if ((SSL_pending(a) || pf[0].revents) && !mitm_pass(a, b))
				break;
			if ((SSL_pending(b) || pf[1].revents) && !mitm_pass(b, a))
				break;
		}
	}
	if (b) {
		close(SSL_get_fd(b));
		SSL_free(b);
	}
	if (a)
		SSL_free(a);
	if (cfd >= 0)
		close(cfd);
	return NULL;
}

static void mitm_start(struct mitm *m, int target_port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);
	m->target_port = target_port;
	m->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_eq(bind(m->listen_fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(m->listen_fd, 1), 0);
	ck_assert_int_eq(getsockname(m->listen_fd, (struct sockaddr *)&sa, &len), 0);
	m->port = ntohs(sa.sin_port);
	ck_assert_int_eq(pthread_create(&m->thread, NULL, mitm_run, m), 0);
}

static void mitm_stop(struct mitm *m)
{
	pthread_join(m->thread, NULL);
	close(m->listen_fd);
}

/* The client bound to the proxy's certificate, pgvalve to its own: refused. */
START_TEST(plus_mismatch_refused)
{
	struct pgv p;
	struct mitm m;

	pgv_start(&p, tls_conf("scram-sha-256", "disable"), std_databases(), std_userlist());
	/* the proxy itself relays a login that does not bind */
	mitm_start(&m, p.port);
	const char *err = login(m.port, "scram_user", "scram_pass", "require", "disable");
	mitm_stop(&m);
	ck_assert_msg(!err, "through the proxy without binding: %s\n%s", err, pgv_log_tail(&p, 1500));
	/* with binding, pgvalve sees the proxy's certificate hash and refuses */
	mitm_start(&m, p.port);
	err = login(m.port, "scram_user", "scram_pass", "require", "require");
	mitm_stop(&m);
	ck_assert_ptr_nonnull(err);
	ck_assert_msg(strstr(err, "SCRAM channel binding check failed"), "%s", err);
	pgv_expect_log(&p, "closing because: SCRAM channel binding check failed", 5);
	ck_assert_int_eq(pgv_log_count(&p, "method=scram-sha-256-plus"), 0);
	ck_assert_double_eq(failures("scram-sha-256", "channel_binding_mismatch"), 1);
	ck_assert_double_eq(failures("scram-sha-256", "bad_password"), 0);
	/* and straight to pgvalve the same login binds */
	ck_assert_ptr_null(login(p.port, "scram_user", "scram_pass", "require", "require"));
	pgv_stop(&p);
}
END_TEST

/*
 * Towards PostgreSQL 15 over server TLS: pgvalve takes SCRAM-SHA-256-PLUS
 * (bound to the server's certificate, so PostgreSQL checked the hash), with
 * a password and with pass-through keys; without server TLS plain SCRAM
 * with "n". libpq's own binding to the server still works beside it.
 */
START_TEST(plus_to_server)
{
	struct pgv p;
	char portbuf[16];

	pgv_start(&p, tls_conf("scram-sha-256", "require"), std_databases(), std_userlist());
	ck_assert_ptr_null(login(p.port, "scram_user", "scram_pass", "require", "require"));
	pgv_expect_log(&p, "SASL mechanism SCRAM-SHA-256-PLUS (p=tls-server-end-point,,)", 5);
	pgv_stop(&p);

	pgv_start(&p, tls_conf("scram-sha-256", "disable"), std_databases(), std_userlist());
	ck_assert_ptr_null(login(p.port, "scram_user", "scram_pass", "require", "require"));
	pgv_expect_log(&p, "SASL mechanism SCRAM-SHA-256 (n,,)", 5);
	pgv_stop(&p);

	/* pass-through: PostgreSQL's own SCRAM secret in the userlist, the keys the client proved bound to the server */
	char userlist[600];
	PGconn *pg = pg_direct();
	snprintf(userlist, sizeof(userlist), "\"scram_user\" \"%s\"\n",
		 query_value(pg, "SELECT rolpassword FROM pg_authid WHERE rolname = 'scram_user'"));
	PQfinish(pg);
	pgv_start(&p, tls_conf("scram-sha-256", "require"), std_databases(), userlist);
	ck_assert_ptr_null(login(p.port, "scram_user", "scram_pass", "require", "require"));
	pgv_expect_log(&p, "SASL mechanism SCRAM-SHA-256-PLUS (p=tls-server-end-point,,)", 5);
	pgv_stop(&p);

	snprintf(portbuf, sizeof(portbuf), "%s", getenv("PGV_TEST_PGPORT"));
	const char *err = login(atoi(portbuf), "scram_user", "scram_pass", "require", "require");
	ck_assert_msg(!err, "libpq to PostgreSQL with channel_binding=require: %s", err);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("channel_binding");
	TCase *tc = pgv_tcase_create("client", 40);
	tcase_add_loop_test(tc, plus_to_pgvalve, 0, 2);
	tcase_add_test(tc, plus_mismatch_refused);
	tcase_add_test(tc, plus_after_reload);
	suite_add_tcase(s, tc);
	tc = pgv_tcase_create("server_tls", 40);
	tcase_set_tags(tc, "server_tls");
	tcase_add_test(tc, plus_to_server);
	suite_add_tcase(s, tc);
	return pgv_run_suite(s);
}
