/*
 * crypto.h - the password hashing PostgreSQL's protocol needs, on OpenSSL.
 *
 * Helpers: md5 password hashes and challenge responses, random bytes,
 * base64, and the SCRAM-SHA-256 primitives (HMAC, H, Hi). The state is a
 * block of kernel randomness crypto_random() hands out and the OpenSSL
 * digest and MAC objects, fetched once (the HMAC context keeps the state of
 * the last key until the next call or crypto_cleanup()).
 */
#ifndef PGVALVE_CRYPTO_H
#define PGVALVE_CRYPTO_H

#include "common.h"

#define MD5_PASSWD_LEN 35	/* "md5" + 32 hex digits, without NUL */

/* out = "md5" + hex(md5(password || user)); out must hold 36 bytes. */
void crypto_md5_password(const char *password, const char *user, char out[36]);
/*
 * The response to AuthenticationMD5Password: "md5" + hex(md5(hashhex || salt))
 * where hashhex is the 32 hex digits after "md5" in an md5 secret.
 */
void crypto_md5_response(const char md5_secret[36], const uint8_t salt[4], char out[36]);

/* Cryptographically strong random bytes (getrandom, drawn in blocks; dropped in a forked child). */
void crypto_random(void *buf, size_t len);
/* Frees the cached digest objects (at exit). */
void crypto_cleanup(void);

/*
 * Base64 (standard alphabet, with padding). Return the output length, or -1
 * on bad input / no room. The encoder NUL-terminates, so out needs
 * CRYPTO_B64_ENC_LEN(len) + 1 bytes. The decoder accepts only canonical
 * shape: length a multiple of 4, alphabet characters, '=' only as the last
 * one or two characters, unused bits zero; no whitespace. It does not
 * NUL-terminate.
 */
#define CRYPTO_B64_ENC_LEN(n) ((((n) + 2) / 3) * 4)
#define CRYPTO_B64_DEC_MAX(n) (((n) / 4) * 3)
int crypto_b64_encode(const uint8_t *in, size_t len, char *out, size_t outsize);
int crypto_b64_decode(const char *in, size_t len, uint8_t *out, size_t outsize);

/* SCRAM-SHA-256 building blocks (RFC 5802 / 7677). SHA-256 output is 32 bytes. */
#define CRYPTO_SHA256_LEN 32
void crypto_hmac_sha256(const uint8_t *key, size_t keylen, const uint8_t *msg, size_t msglen, uint8_t out[32]);
void crypto_sha256(const uint8_t *msg, size_t len, uint8_t out[32]);
/*
 * SaltedPassword = Hi(password, salt, iterations) (PBKDF2-HMAC-SHA-256, one
 * block); password should be SASLprep'd by the caller. iterations must be > 0.
 */
void crypto_scram_salted_password(const char *password, const uint8_t *salt, size_t saltlen,
				  int iterations, uint8_t out[32]);

#endif
