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
 *  - Nothing waits, and no thread runs: ldapserver's host names are looked
 *    up with pgvalve's own resolver (dns.h, c-ares), each address in turn
 *    is connected to without blocking from the loop, and the connected
 *    socket is handed to libldap (ldap_init_fd). TLS (ldaps, or StartTLS
 *    sent as an asynchronous extended operation) is shaken hands on the
 *    loop by ldap_tls.h and then placed under libldap, because libldap's
 *    own handshake waits inside its call. Requests are OpenLDAP's
 *    asynchronous calls (ldap_sasl_bind, ldap_search_ext with message
 *    ids), their answers read with ldap_result and a zero timeout when
 *    libevent says the socket is readable.
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

/* How a check ended, so the caller can count failures by what an operator would fix. */
enum ldap_outcome {
	LDAP_OUTCOME_OK,		/* the password is right */
	LDAP_OUTCOME_BAD_PASSWORD,	/* the directory refused the user's bind (invalid credentials) */
	LDAP_OUTCOME_UNKNOWN_USER,	/* search+bind: the search found no entry for the user */
	LDAP_OUTCOME_UNAVAILABLE,	/* no connection, the connection lost, or no answer within auth_ldap_timeout */
	LDAP_OUTCOME_ERROR,		/* anything else: the search account refused, TLS, a search error, several entries */
};
/* text: the DN bound as when LDAP_OUTCOME_OK, else why it failed. */
typedef void (*ldap_auth_done_fn)(void *arg, enum ldap_outcome outcome, const char *text);

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
