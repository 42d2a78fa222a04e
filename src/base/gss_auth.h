/*
 * gss_auth.h - Kerberos (GSSAPI) authentication of a client, the acceptor
 * side of PostgreSQL's AuthenticationGSS exchange, no I/O.
 *
 * The caller (auth.c) frames the tokens: AuthenticationGSS, then each
 * GSSResponse body goes to gss_auth_step(), whose output token goes back in
 * an AuthenticationGSSContinue. gss_accept_sec_context does no network I/O
 * (it reads the keytab), so a step runs inline on the event loop.
 *
 * The acceptor credential is the keytab auth_krb_server_keyfile, or
 * KRB5_KTNAME / the Kerberos default keytab when that is empty; it is
 * acquired at the first login and again whenever the setting changes
 * (process state, one per process). A ticket must be for the service
 * krb_srvname ("postgres/<any host>@<realm>" by default). The authenticated principal becomes a system user name by
 * PostgreSQL's rules for an hba "gss" line: include_realm (default 1) keeps
 * "@REALM", krb_realm (if set) must equal the principal's realm; the caller
 * then matches it to the database user (map= through auth_ident_file, or
 * equality).
 *
 * Built without GSSAPI (configure --without-gssapi, or no MIT Kerberos),
 * gss_auth_supported() is false and gss_auth_new() returns NULL; the hba
 * loader then treats "gss" lines as unsupported.
 */
#ifndef PGVALVE_GSS_AUTH_H
#define PGVALVE_GSS_AUTH_H

#include "common.h"

struct gss_auth;

/* Whether this build has GSSAPI. */
bool gss_auth_supported(void);

/*
 * One exchange, with the options of its hba line ("include_realm=0
 * krb_realm=EXAMPLE.COM", as hba_match gives them; NULL for none). NULL
 * without GSSAPI.
 */
struct gss_auth *gss_auth_new(const char *hba_options);
void gss_auth_free(struct gss_auth *g);

enum gss_auth_result {
	GSS_AUTH_FAILED = -1,
	GSS_AUTH_CONTINUE = 0,	/* send the output token, wait for the next */
	GSS_AUTH_DONE = 1,	/* authenticated: send the output token if any, then check the name */
};

/*
 * One token from the client. The output token (valid until the next call
 * or gss_auth_free) is in *out / *out_len (length 0: nothing to send). On
 * failure err says why, with GSSAPI's own words (no secrets in them).
 */
enum gss_auth_result gss_auth_step(struct gss_auth *g, const char *keyfile, const char *srvname,
				   const void *token, size_t len, const void **out, size_t *out_len,
				   char *err, size_t errsize);

/*
 * After GSS_AUTH_DONE: the system user name for the ident map (the
 * principal, its realm cut off unless include_realm). False, with err, when
 * krb_realm is set and the principal's realm is another or none.
 */
bool gss_auth_system_user(const struct gss_auth *g, char *out, size_t size, char *err, size_t errsize);
/* The authenticated principal ("" before DONE), for log lines. */
const char *gss_auth_principal(const struct gss_auth *g);

#endif
