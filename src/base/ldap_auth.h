/*
 * ldap_auth.h - checks a user name and clear-text password against an
 * LDAP directory, as PostgreSQL's "ldap" method does (simple bind, or
 * search+bind), without stopping the event loop.
 *
 * Contract:
 *  - Options are PostgreSQL's pg_hba LDAP options in PgBouncer's
 *    auth_ldap_options form: name=value pairs separated by blanks or
 *    commas, a value in double quotes when it holds either ("" for a
 *    quote). ldapserver, ldapport, ldapscheme (ldap, ldaps), ldaptls (1:
 *    StartTLS), ldapprefix/ldapsuffix (simple bind); ldapbasedn,
 *    ldapbinddn, ldapbindpasswd, ldapsearchattribute, ldapsearchfilter
 *    ($username), ldapurl (search+bind). ldapserver is required (no DNS
 *    SRV discovery).
 *  - ldap_auth_start() copies what it needs and queues the check; the
 *    callback then runs exactly once from the loop (never inside
 *    ldap_auth_start), unless ldap_auth_cancel() comes first. At most
 *    auth_ldap_max_concurrent checks talk to directories at once, the
 *    others wait their turn; each fails auth_ldap_timeout after its start
 *    whatever the directory does.
 *  - The exchange uses OpenLDAP's asynchronous calls (connect included:
 *    LDAP_OPT_CONNECT_ASYNC), its socket watched by libevent and results
 *    read with a zero timeout. libldap waits inside two calls: the first
 *    request when ldapserver names a host (the system resolver) or the
 *    scheme is ldaps (the TLS handshake), and ldap_install_tls after
 *    StartTLS. Those run in a short-lived thread of their own, which alone
 *    touches the handle meanwhile (within auth_ldap_timeout, libldap's
 *    network timeout); a check that ends first is freed when the thread
 *    is done.
 *  - The reason given to the callback on failure is for the log: it names
 *    the directory, the DN and libldap's error, never a password or the
 *    ldapbindpasswd.
 *
 * Owns: its LDAP handles, their events and timers, the queue. Knows
 * nothing of clients or pools. Without OpenLDAP at build time (configure
 * --without-ldap), ldap_auth_built() is false and the rest fails at once.
 */
#ifndef PGVALVE_LDAP_AUTH_H
#define PGVALVE_LDAP_AUTH_H

#include "common.h"

struct ldap_auth_req;

/* ok: the password is right; text: the DN bound as when ok, else why it failed. */
typedef void (*ldap_auth_done_fn)(void *arg, bool ok, const char *text);

/* Whether this build has an LDAP client. */
bool ldap_auth_built(void);
/* Checks an option string; false with why filled when it cannot work. */
bool ldap_auth_check_options(const char *options, char *why, size_t size);
/*
 * Starts a check. NULL with why filled when it cannot even start (bad
 * options, an empty password, a user name a search filter cannot hold).
 */
struct ldap_auth_req *ldap_auth_start(const char *options, const char *user, const char *password,
				      ldap_auth_done_fn done, void *arg, char *why, size_t size);
/* Drops a check whose callback has not run: its callback never runs. */
void ldap_auth_cancel(struct ldap_auth_req *req);
/* The option string with ldapbindpasswd's value hidden, for SHOW CONFIG. */
void ldap_auth_mask_options(const char *options, char *out, size_t size);

#endif
