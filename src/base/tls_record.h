/*
 * tls_record.h - TLS 1.3's record layer for an accepted client, after
 * OpenSSL has done the handshake.
 *
 * Why: an idle client's OpenSSL session costs about 14 kB (its SSL object
 * alone is 7.6 kB; `make bench-tls-idle`), which a million clients cannot
 * afford. Once the handshake is over, TLS 1.3 needs only the two traffic
 * secrets, their keys and IVs, and a sequence number each way (RFC 8446
 * section 5): this module takes those over and the SSL object is freed,
 * leaving about 2.6 kB (two AEAD contexts and this state).
 *
 * Contract:
 *   - tls_record_prepare_ctx() on the context that accepts clients, once,
 *     before its first handshake: it keeps the traffic secrets OpenSSL
 *     derives (its key log callback) and turns session tickets off, so
 *     nothing is written with the application keys before the handover.
 *   - tls_record_adopt(ssl, ...) right after the server side's handshake
 *     returned 1 and before anything else is read or written: a state, or
 *     NULL when the connection must stay with OpenSSL (TLS 1.2, a cipher
 *     other than AES-GCM or ChaCha20-Poly1305, a client certificate,
 *     bytes OpenSSL already read past the handshake). The caller frees
 *     the SSL object after a successful adopt.
 *   - tls_record_read() has recv()'s contract (0 at close_notify or EOF,
 *     -1 and errno: EAGAIN, EPROTO for a bad record or alert), and
 *     tls_record_pending() says how many decrypted bytes it holds that no
 *     socket event will announce.
 *   - tls_record_write() has SSL_write()'s contract with partial writes:
 *     the bytes it returns were sent; after -1/EAGAIN it has encrypted
 *     and kept some, and the next call must start with the same bytes
 *     (their contents are not read again).
 *   - A peer's KeyUpdate is followed (and answered before the next record
 *     when it asks); anything else after the handshake closes with EPROTO.
 * No global state besides the key log's ex_data index and a scratch
 * buffer per process, both set up on first use.
 */
#ifndef PGVALVE_TLS_RECORD_H
#define PGVALVE_TLS_RECORD_H

#include "common.h"

#include <openssl/ssl.h>

struct tls_record;

void tls_record_prepare_ctx(SSL_CTX *ctx);
/*
 * describe and alpn_postgresql: tls_describe()'s text and tls_alpn_postgresql()'s
 * answer for the connection, kept for SHOW CLIENTS, the log and the login
 * (this module calls nothing of tls.c: tls.c calls it).
 */
struct tls_record *tls_record_adopt(SSL *ssl, const char *describe, bool alpn_postgresql);
void tls_record_free(struct tls_record *r);

ssize_t tls_record_read(struct tls_record *r, int fd, void *buf, size_t len);
size_t tls_record_pending(const struct tls_record *r);
ssize_t tls_record_write(struct tls_record *r, int fd, const void *buf, size_t len);
/* A close_notify alert, best effort (only when nothing is waiting to be sent). */
void tls_record_close_notify(struct tls_record *r, int fd);

/* What the handshake settled, kept for SHOW CLIENTS, the log and the login. */
const char *tls_record_describe(const struct tls_record *r);
bool tls_record_alpn_postgresql(const struct tls_record *r);
/* The SNI host name the client sent, NULL without one. */
const char *tls_record_servername(const struct tls_record *r);
/* The context the connection was accepted through (its channel binding data: tls_ctx_server_end_point()). */
SSL_CTX *tls_record_ctx(const struct tls_record *r);

#endif
