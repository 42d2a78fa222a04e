/*
 * auth_kit.h - what test_auth and test_tls share (auth_kit.c): pgvalve
 * instances remembered for the final log check, secrets (PostgreSQL's own
 * SCRAM secrets, auth_files of each kind), libpq logins with their
 * expected outcome, the client TLS settings, and the check that no secret
 * reached a log.
 */
#ifndef PGVALVE_TEST_AUTH_KIT_H
#define PGVALVE_TEST_AUTH_KIT_H

#include "harness.h"

#include <stdbool.h>

#define DB "pgvtest"
#define WRONG_PW "not_the_pw_9271"
#define LOOKUP_PW "lookup_pass_5512"
#define AQ_PW "aq_pass_7734"
#define QUOTE_PW "quote_pass_3318"
#define INSTANCE_LIST "test_auth.instances"

/* How the auth_file stores scram_user's and md5_user's secrets (userlist_of). */
enum secret_kind { SEC_PLAIN, SEC_MD5, SEC_SCRAM, SEC_COUNT };

/* libpq connection keywords and values (cp_init, cp_set). */
struct cparams {
	const char *kw[24];
	const char *val[24];
	int n;
	char port[16];
};

/* One libpq login's outcome (login_try, login_done). */
struct login {
	PGconn *conn;
	bool ok;
	char sqlstate[6];
	char msg[2048];
};

extern const char *const secret_names[];

void start_dbs(struct pgv *p, const char *extra, const char *databases, const char *userlist);
void start(struct pgv *p, const char *extra, const char *userlist);
PGconn *pg(void);
void pg_exec(const char *sql);
const char *pg_scram_secret(const char *role);
const char *userlist_of(enum secret_kind kind);
void cp_set(struct cparams *cp, const char *k, const char *v);
void cp_init(struct cparams *cp, const struct pgv *p, const char *user, const char *password, const char *sslmode);
void login_try(struct login *l, const struct cparams *cp);
void login_done(struct login *l);
void expect_login(struct pgv *p, const struct cparams *cp, const char *user, const char *what);
void expect_refused(struct pgv *p, const struct cparams *cp, const char *sqlstate, const char *needle,
		    const char *what);
void expect_auth_failed(struct pgv *p, const struct cparams *cp, const char *user, const char *what);
const char *client_tls_conf(const char *sslmode, bool with_ca);
void expect_no_passwords_in_logs(int min_instances);

#endif
