/*
 * scram.h - SCRAM-SHA-256 exchanges, no I/O.
 *
 * The client side is what pgvalve speaks to a PostgreSQL server that asks
 * for SASL; the server side is what it speaks to its own clients (used by
 * auth_type scram-sha-256, a later issue). Each call consumes one SASL
 * message body and produces the next one; the caller frames it.
 */
#ifndef PGVALVE_SCRAM_H
#define PGVALVE_SCRAM_H

#include "pgvalve/common.h"
#include "pgvalve/auth_file.h"

#define SCRAM_NONCE_LEN 18	/* raw bytes before base64 */
#define SCRAM_MSG_MAX 512

enum scram_client_state {
	SCRAM_CLIENT_INIT,
	SCRAM_CLIENT_SENT_FIRST,
	SCRAM_CLIENT_SENT_FINAL,
	SCRAM_CLIENT_DONE,
};

struct scram_client {
	enum scram_client_state state;
	char client_nonce[64];		/* base64 text */
	char client_first_bare[SCRAM_MSG_MAX];
	uint8_t salted_password[32];
	uint8_t server_key[32];
	char server_signature_b64[64];
	/*
	 * Either a plain password, or keys recovered from a client's proof
	 * (SCRAM pass-through): then has_keys is set and client_key/server_key
	 * are used instead of deriving them from a password.
	 */
	bool has_keys;
	uint8_t client_key[32];
};

/* Starts the exchange. If nonce is NULL a random one is made (tests pass a fixed one). */
void scram_client_init(struct scram_client *sc, const char *nonce);
/* client-first-message ("n,,n=,r=<nonce>") into out; returns its length or -1. */
int scram_client_first(struct scram_client *sc, char *out, size_t outsize);
/*
 * Consumes server-first-message, writes client-final-message. `password` is
 * used unless sc->has_keys. Returns its length, or -1 with *err set to a
 * message fit for a log line (never containing secrets).
 */
int scram_client_final(struct scram_client *sc, const char *password,
		       const char *server_first, size_t server_first_len,
		       char *out, size_t outsize, const char **err);
/* Checks server-final-message ("v=<signature>"). */
bool scram_client_verify(struct scram_client *sc, const char *server_final, size_t len, const char **err);

/* Builds a "SCRAM-SHA-256$iter:salt$stored:server" secret from a plain password. */
int scram_build_secret(const char *password, int iterations, char *out, size_t outsize);

#endif
