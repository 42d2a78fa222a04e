/*
 * scram.h - SCRAM-SHA-256 exchanges, no I/O.
 *
 * The client side is what pgvalve speaks to a PostgreSQL server that asks
 * for SASL; the server side is what it speaks to its own clients (used by
 * auth_type scram-sha-256, a later issue). Each call consumes one SASL
 * message body and produces the next one; the caller frames it.
 *
 * Both mechanisms PostgreSQL speaks: "SCRAM-SHA-256" (gs2 header "n,," or
 * "y,,") and "SCRAM-SHA-256-PLUS" with channel binding type
 * tls-server-end-point (RFC 5929), whose data (a hash of the TLS server's
 * certificate, tls.h) the caller hands in: the gs2 flag rules are
 * PostgreSQL's (a "y" where -PLUS was offered is a downgrade and refused).
 *
 * Password normalisation: PostgreSQL runs SASLprep (RFC 4013) on passwords.
 * pgvalve uses ASCII passwords as-is (SASLprep leaves them unchanged) and,
 * for non-ASCII ones, the raw bytes: this matches PostgreSQL whenever
 * SASLprep would not change the string (e.g. already-NFKC UTF-8, or invalid
 * UTF-8, which PostgreSQL also uses raw), and fails to authenticate for
 * passwords containing characters SASLprep maps or normalises.
 */
#ifndef PGVALVE_SCRAM_H
#define PGVALVE_SCRAM_H

#include "common.h"
#include "auth_file.h"

#define SCRAM_NONCE_LEN 18	/* raw bytes before base64 */
#define SCRAM_MSG_MAX 512
#define SCRAM_KEY_LEN 32
#define SCRAM_SALT_LEN 16	/* what scram_build_secret generates, as PostgreSQL */
#define SCRAM_DEFAULT_ITERATIONS 4096
/*
 * Upper bound on the iteration count accepted from a server. Hi() runs on
 * the event loop, so an absurd count (a broken or hostile server asking for
 * 10^9) would freeze every connection of the process for minutes. One
 * million is 244 times PostgreSQL's default of 4096 and above the 600,000
 * OWASP suggests for PBKDF2-HMAC-SHA-256, so any deliberate hardening of
 * scram_iterations still works; it costs about 0.35 s of one core, once per
 * server secret (the keys are cached, see scram_cache.h).
 */
#define SCRAM_ITERATIONS_MAX 1000000
#define SCRAM_CBIND_MAX 64	/* tls-server-end-point data: a hash of at most SHA-512's size */
#define SCRAM_GS2_MAX 32	/* "p=tls-server-end-point,," and its NUL */

/* What a password gives for one salt and iteration count (RFC 5802). */
struct scram_keys {
	uint8_t client_key[SCRAM_KEY_LEN];
	uint8_t stored_key[SCRAM_KEY_LEN];	/* H(ClientKey) */
	uint8_t server_key[SCRAM_KEY_LEN];
};

/* SaltedPassword = Hi(password, salt, i), then ClientKey, StoredKey, ServerKey: one PBKDF2. */
void scram_keys_derive(const char *password, const uint8_t *salt, size_t saltlen, int iterations,
		       struct scram_keys *out);

/*
 * Where a client exchange gets its keys when it logs in with a password:
 * pgvalve passes its cache (scram_cache_server_keys); NULL means
 * scram_keys_derive() every time. arg is passed through.
 */
typedef void (*scram_keys_fn)(void *arg, const char *password, const uint8_t *salt, size_t saltlen,
			      int iterations, struct scram_keys *out);

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
	uint8_t server_key[32];
	char server_signature_b64[64];
	/*
	 * Either a plain password, or keys recovered from a client's proof
	 * (SCRAM pass-through): then has_keys is set and client_key/server_key
	 * are used instead of deriving them from a password. Set them with
	 * scram_client_set_keys() after scram_client_init(), which clears them.
	 */
	bool has_keys;
	uint8_t client_key[32];
	uint8_t server_signature[32];	/* expected in server-final */
	char server_error[128];		/* text of an "e=" server-final, sanitised; or the iteration error */
	scram_keys_fn key_source;	/* NULL: derive (scram_client_set_key_source) */
	void *key_source_arg;
	char gs2_header[SCRAM_GS2_MAX];	/* "n,,", "y,," or "p=tls-server-end-point,," */
	uint8_t cbind_data[SCRAM_CBIND_MAX];
	size_t cbind_len;
};

/*
 * Starts the exchange, clearing the whole struct. user goes into the
 * client-first-message (escaped per RFC 5802); NULL or "" gives "n=," as
 * libpq sends (PostgreSQL takes the user from the startup packet). If nonce
 * is NULL a random one is made (tests pass a fixed one; it must be printable
 * ASCII without ',' and shorter than 64 bytes, else a random one is used).
 */
void scram_client_init(struct scram_client *sc, const char *user, const char *nonce);
/* Uses these keys instead of a password (SCRAM pass-through). */
void scram_client_set_keys(struct scram_client *sc, const uint8_t client_key[32], const uint8_t server_key[32]);
/* client-first-message ("n,,n=,r=<nonce>") into out (NUL-terminated); returns its length or -1. */
/* Takes password-derived keys from fn (a cache) instead of deriving them; after scram_client_init(). */
void scram_client_set_key_source(struct scram_client *sc, scram_keys_fn fn, void *arg);
/*
 * Channel binding, after scram_client_init() (which leaves "n,,"): flag 'p'
 * binds to data (the server certificate's tls-server-end-point hash; the
 * mechanism is then SCRAM-SHA-256-PLUS), 'y' says "I could bind but you
 * offered no -PLUS" (over TLS, as libpq), 'n' none. False for 'p' without
 * data or with more than SCRAM_CBIND_MAX bytes.
 */
bool scram_client_set_channel_binding(struct scram_client *sc, char flag, const uint8_t *data, size_t len);
int scram_client_first(struct scram_client *sc, char *out, size_t outsize);
/*
 * Consumes server-first-message, writes client-final-message. `password` is
 * used unless sc->has_keys. Returns its length, or -1 with *err set to a
 * message fit for a log line (never containing secrets). An iteration
 * count above SCRAM_ITERATIONS_MAX is refused before any hashing (*err then
 * points at sc->server_error and names the count and the limit).
 */
int scram_client_final(struct scram_client *sc, const char *password,
		       const char *server_first, size_t server_first_len,
		       char *out, size_t outsize, const char **err);
/*
 * Checks server-final-message ("v=<signature>") in constant time. An
 * "e=<error>" message is a failure; then *err points at sc->server_error
 * (valid while sc lives). Other *err values are static strings.
 */
bool scram_client_verify(struct scram_client *sc, const char *server_final, size_t len, const char **err);

/* ---------------------------------------------------------------- secrets */

/* Derives a SCRAM secret (StoredKey, ServerKey) from a plain password and the given salt. */
void scram_secret_from_password(const char *password, int iterations,
				const uint8_t *salt, size_t saltlen, struct scram_secret *out);
/* Formats "SCRAM-SHA-256$iter:salt$stored:server"; returns its length or -1 if it does not fit. */
int scram_secret_format(const struct scram_secret *secret, char *out, size_t outsize);
/*
 * Builds a "SCRAM-SHA-256$iter:salt$stored:server" secret from a plain
 * password with a random 16-byte salt. Returns its length, or -1 if
 * iterations <= 0 or out is too small.
 */
int scram_build_secret(const char *password, int iterations, char *out, size_t outsize);

/* ---------------------------------------------------------------- server */

/*
 * Verifies a ClientProof against a stored secret for the given AuthMessage:
 * ClientKey = proof XOR HMAC(StoredKey, AuthMessage), accepted when
 * H(ClientKey) == StoredKey (constant time). On success client_key (if not
 * NULL) receives the recovered ClientKey, usable with scram_client_set_keys.
 */
bool scram_verify_proof(const struct scram_secret *secret, const char *auth_message, size_t len,
			const uint8_t proof[32], uint8_t client_key[32]);

enum scram_server_state {
	SCRAM_SERVER_INIT,
	SCRAM_SERVER_SENT_FIRST,
	SCRAM_SERVER_DONE,
};

struct scram_server {
	enum scram_server_state state;
	struct scram_secret secret;
	char gs2_header[SCRAM_GS2_MAX];	/* "n,,", "y,," or "p=tls-server-end-point,,", as the client sent it */
	/* tls-server-end-point data of the connection: -PLUS is offered when cbind_len > 0 */
	uint8_t cbind_data[SCRAM_CBIND_MAX];
	size_t cbind_len;
	bool plus_selected;		/* the client chose SCRAM-SHA-256-PLUS */
	char nonce[SCRAM_MSG_MAX];	/* client nonce + server nonce */
	char client_first_bare[SCRAM_MSG_MAX];
	char server_first[SCRAM_MSG_MAX];
	/* Set by a successful scram_server_final(): the client's ClientKey. */
	bool has_client_key;
	uint8_t client_key[32];
};

/*
 * Starts an exchange against a stored secret (for a plain-text userlist
 * entry, derive one first with scram_secret_from_password and a random
 * salt). server_nonce NULL makes a random one; tests pass a fixed one.
 */
void scram_server_init(struct scram_server *ss, const struct scram_secret *secret, const char *server_nonce);
/*
 * After init, over TLS: the connection's tls-server-end-point data, so
 * SCRAM-SHA-256-PLUS is offered (len 0 or above SCRAM_CBIND_MAX: not).
 */
void scram_server_set_channel_binding(struct scram_server *ss, const uint8_t *data, size_t len);
/*
 * The AuthenticationSASL list: "SCRAM-SHA-256-PLUS" first when binding is
 * possible, then "SCRAM-SHA-256", each NUL-terminated, then an empty name.
 * Returns its length (with every NUL).
 */
size_t scram_server_mechanisms(const struct scram_server *ss, char out[64]);
/* The client's choice from that list; false for a name not offered. */
bool scram_server_choose_mechanism(struct scram_server *ss, const char *mechanism);
/*
 * Consumes client-first-message (the SASLInitialResponse data), writes
 * server-first-message. Returns its length, or -1 with *err set (malformed
 * message, a gs2 flag that does not fit the mechanism chosen or a "y" where
 * -PLUS was offered, an unknown binding type, authzid given).
 */
int scram_server_first(struct scram_server *ss, const char *client_first, size_t len,
		       char *out, size_t outsize, const char **err);
/*
 * Consumes client-final-message, writes server-final-message ("v=..").
 * Returns its length; -1 with *err when the message is malformed; -2 with
 * *err when the proof is wrong (password authentication failed).
 */
int scram_server_final(struct scram_server *ss, const char *client_final, size_t len,
		       char *out, size_t outsize, const char **err);

#endif
