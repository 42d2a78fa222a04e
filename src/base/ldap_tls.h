/*
 * ldap_tls.h - TLS to an LDAP directory without waiting: an OpenSSL client
 * session on a connected non-blocking socket, its handshake driven one
 * step per socket event by the caller, then placed under libldap as the
 * connection's transport (a Sockbuf_IO layer of liblber).
 *
 * Why not libldap's own TLS: in OpenLDAP 2.5 (Debian 12) ldap_install_tls,
 * and the first request of an ldaps:// handle, finish the handshake inside
 * the call, polling the socket for up to LDAP_OPT_NETWORK_TIMEOUT
 * (LDAP_OPT_CONNECT_ASYNC does not change that; without a network timeout
 * a non-blocking socket fails at once with LDAP_TIMEOUT, and a second call
 * answers LDAP_LOCAL_ERROR: the handshake cannot be resumed).
 *
 * Contract:
 *  - The certificate checks are libldap's settings, read once (ldap.conf,
 *    ~/.ldaprc, LDAPTLS_* in the environment): TLS_CACERT and
 *    TLS_CACERTDIR (neither: OpenSSL's default paths), TLS_REQCERT (never
 *    and allow: no check; try, demand (the default) and hard: the chain,
 *    and the host name or address the connection was made to, as libldap
 *    checks them), TLS_CERT and TLS_KEY (a client certificate).
 *  - ldap_tls_new() starts a session for fd; ldap_tls_handshake() goes as
 *    far as the socket allows and says what to wait for. Before
 *    ldap_tls_attach() the caller frees it with ldap_tls_free(); after it,
 *    the LDAP handle owns it (freed by ldap_unbind_ext) and libldap reads
 *    and writes through it.
 *  - Errors name OpenSSL's reason (certificate verify failed, ...), never
 *    anything sent over the session.
 *
 * Owns: the client SSL_CTX for directories and the sessions until attached.
 * Knows nothing of logins.
 */
#ifndef PGVALVE_LDAP_TLS_H
#define PGVALVE_LDAP_TLS_H

#include "common.h"

struct ldap_tls;

enum ldap_tls_status {
	LDAP_TLS_DONE,
	LDAP_TLS_WANT_READ,
	LDAP_TLS_WANT_WRITE,
	LDAP_TLS_FAILED,
};

/* A session on fd, connected to host (a name or an address, for the checks); NULL with why filled. */
struct ldap_tls *ldap_tls_new(int fd, const char *host, char *why, size_t size);
/* One step of the handshake; on LDAP_TLS_FAILED why says why. */
enum ldap_tls_status ldap_tls_handshake(struct ldap_tls *t, char *why, size_t size);
/* After LDAP_TLS_DONE: libldap's handle (void *: an LDAP *) talks through t, and owns it. false if it cannot. */
bool ldap_tls_attach(struct ldap_tls *t, void *ld);
/* Decrypted bytes libldap has not read yet (so a readable socket is not the only sign of an answer). */
bool ldap_tls_pending(const struct ldap_tls *t);
/* A session not attached. */
void ldap_tls_free(struct ldap_tls *t);

#endif
