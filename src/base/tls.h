/*
 * tls.h - OpenSSL contexts for both sides of the pooler.
 *
 * client side: pgvalve is the TLS server for its clients (client_tls_*);
 * server side: pgvalve is the TLS client of PostgreSQL (server_tls_*).
 * Contexts are built from the running config at start-up and on reload;
 * a reload whose files or settings do not work keeps the old contexts and
 * says why. Sockets hold their own SSL object, so replacing a context never
 * disturbs a connection in progress.
 */
#ifndef PGVALVE_TLS_H
#define PGVALVE_TLS_H

#include "common.h"

#include <openssl/ssl.h>

struct config;

/* Builds both contexts from cfg; -1 (logged, errbuf filled) keeps the previous ones. */
int tls_configure(const struct config *cfg, char *errbuf, size_t errsize);
void tls_cleanup(void);

/* Whether clients may use TLS (a certificate and key are configured and loaded). */
bool tls_client_side_ready(void);
/* A new SSL object for an accepted client, or NULL. */
SSL *tls_new_client_ssl(void);
/* A new SSL object for a connection to a server; host for SNI / verify-full (may be NULL). */
SSL *tls_new_server_ssl(const char *host);

/* "TLSv1.3/TLS_AES_256_GCM_SHA384/ECDH=X25519" as SHOW CLIENTS prints it; "" without TLS. */
void tls_describe(SSL *ssl, char *buf, size_t size);
/* Whether the handshake selected ALPN "postgresql" (PostgreSQL 17's direct TLS asks for it). */
bool tls_alpn_postgresql(const SSL *ssl);
/* The common name of the peer's verified certificate, or NULL. */
bool tls_peer_common_name(SSL *ssl, char *buf, size_t size);

#define TLS_END_POINT_MAX EVP_MAX_MD_SIZE
/*
 * The tls-server-end-point channel binding data (RFC 5929) of a connection:
 * the hash of pgvalve's own certificate when it is the TLS server (made once
 * per certificate, when the context was built), of PostgreSQL's when it is
 * the client. Its length; 0 when there is none (no TLS; a signature with no
 * hash of its own, as Ed25519).
 */
size_t tls_server_end_point(SSL *ssl, uint8_t out[TLS_END_POINT_MAX]);
/* The same for a connection accepted through ctx (the client side's context). */
size_t tls_ctx_server_end_point(SSL_CTX *ctx, uint8_t out[TLS_END_POINT_MAX]);

#endif
