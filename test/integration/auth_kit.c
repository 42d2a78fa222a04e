/*
 * auth_kit.c - the helpers test_auth and test_tls share (auth_kit.h).
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

/* ---------------------------------------------------------------- files and instances */

/* pgv_start, remembering the instance for the final log check. */
void start_dbs(struct pgv *p, const char *extra, const char *databases, const char *userlist)
{
	char list[600];
	pgv_start(p, extra, databases, userlist);
	snprintf(list, sizeof(list), "%s/%s", getenv("PGV_TEST_DIR"), INSTANCE_LIST);
	FILE *f = fopen(list, "a");
	ck_assert_msg(f != NULL, "open %s: %s", list, strerror(errno));
	fprintf(f, "%s\n", p->dir);
	fclose(f);
}

void start(struct pgv *p, const char *extra, const char *userlist)
{
	start_dbs(p, extra, std_databases(), userlist);
}

/* ---------------------------------------------------------------- secrets */

static PGconn *direct;

PGconn *pg(void)
{
	if (direct == NULL || PQstatus(direct) != CONNECTION_OK) {
		PQfinish(direct);
		direct = pg_direct();
	}
	return direct;
}

void pg_exec(const char *sql)
{
	PGresult *r = PQexec(pg(), sql);
	ck_assert_msg(PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK,
		      "%s: %s", sql, PQerrorMessage(pg()));
	PQclear(r);
}

/* The SCRAM secret PostgreSQL stores for a role (pass-through needs exactly this one). */
const char *pg_scram_secret(const char *role)
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

const char *const secret_names[] = { "plain", "md5", "SCRAM" };

/*
 * auth_file with scram_user and md5_user both stored as `kind`. scram_user's
 * SCRAM secret is PostgreSQL's own (pass-through works with it); md5_user's
 * is made here (its server wants md5, so the salt does not matter).
 */
const char *userlist_of(enum secret_kind kind)
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

void cp_set(struct cparams *cp, const char *k, const char *v)
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
void cp_init(struct cparams *cp, const struct pgv *p, const char *user, const char *password, const char *sslmode)
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

/* Connects with PQERRORS_VERBOSE, so a refusal's message carries its SQLSTATE. */
void login_try(struct login *l, const struct cparams *cp)
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

void login_done(struct login *l)
{
	PQfinish(l->conn);
	l->conn = NULL;
}

/* Logged in, and the session really is `user` on the server. */
void expect_login(struct pgv *p, const struct cparams *cp, const char *user, const char *what)
{
	struct login l;
	login_try(&l, cp);
	ck_assert_msg(l.ok, "%s: login of %s failed: %s\n%s", what, user, l.msg, pgv_log_tail(p, 1500));
	const char *got = query_value(l.conn, "SELECT current_user");
	ck_assert_msg(strcmp(got, user) == 0, "%s: current_user is %s, not %s", what, got, user);
	login_done(&l);
}

/* Refused with this SQLSTATE and a message containing `needle`. */
void expect_refused(struct pgv *p, const struct cparams *cp, const char *sqlstate, const char *needle,
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
void expect_auth_failed(struct pgv *p, const struct cparams *cp, const char *user, const char *what)
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

const char *client_tls_conf(const char *sslmode, bool with_ca)
{
	static char buf[1024];
	snprintf(buf, sizeof(buf),
		 "client_tls_sslmode = %s\nclient_tls_cert_file = %s\nclient_tls_key_file = %s\n%s%s%s",
		 sslmode, pgv_cert("server.crt"), pgv_cert("server.key"), with_ca ? "client_tls_ca_file = " : "",
		 with_ca ? pgv_cert("ca.crt") : "", with_ca ? "\n" : "");
	return buf;
}

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

/*
 * No secret of the auth tests in the logs of any pgvalve instance this
 * binary started (start_dbs), of which at least min_instances logged a login.
 */
void expect_no_passwords_in_logs(int min_instances)
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
	ck_assert_int_ge(instances, min_instances);
	ck_assert_int_ge(with_logins, min_instances);
}
