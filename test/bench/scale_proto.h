/*
 * scale_proto.h - what the scale load generator (test/bench/scale_gen.c)
 * says and reads on the wire, with no I/O: the client's messages built
 * into a caller's buffer, the server's messages cut out of a byte stream,
 * an ErrorResponse's SQLSTATE, and the authentication exchange (md5 and
 * SCRAM-SHA-256 on pgvalve's own client side, scram_client_* and
 * crypto_md5_*), one server message in, at most one answer out.
 *
 * SCRAM keys come from a cache (struct sp_keycache, one per process): the
 * salted password is derived once per salt and iteration count, so a
 * million logins against a pooler that keeps a user's salt cost one
 * PBKDF2; every login still computes its proof and checks the server's
 * signature.
 */
#ifndef PGVALVE_SCALE_PROTO_H
#define PGVALVE_SCALE_PROTO_H

#include "common.h"
#include "scram.h"

#define SP_PROTOCOL_3_0 196608
#define SP_SSL_REQUEST_CODE 80877103
#define SP_MSG_MAX (1u << 20)	/* a server message longer than this is a protocol error here */

/* The startup packet (protocol 3.0, user, database, application_name if not NULL); its length or 0 if it does not fit. */
size_t sp_build_startup(uint8_t *buf, size_t cap, const char *user, const char *dbname, const char *appname);
/* SSLRequest: always 8 bytes. */
size_t sp_build_ssl_request(uint8_t buf[8]);
/* A simple-protocol Query; its length or 0. */
size_t sp_build_query(uint8_t *buf, size_t cap, const char *sql);
/* Terminate: always 5 bytes. */
size_t sp_build_terminate(uint8_t buf[5]);
/* A typed message with a body; its length or 0. */
size_t sp_build_msg(uint8_t *buf, size_t cap, char type, const void *body, size_t len);

/*
 * The first whole server message in buf[0..len): its type, body and body
 * length. Returns the bytes it takes (header included), 0 when it is not
 * all there yet, -1 for a length below 4 or above SP_MSG_MAX.
 */
long sp_next_message(const uint8_t *buf, size_t len, char *type, const uint8_t **body, size_t *bodylen);

/* An ErrorResponse's field (e.g. 'C' the SQLSTATE, 'M' the message) into out, NUL-terminated; false if absent. */
bool sp_error_field(const uint8_t *body, size_t len, char field, char *out, size_t outsize);

/* SCRAM keys derived so far, for one password, salt and iteration count; derivations counts the PBKDF2 runs. */
struct sp_keycache {
	char password[128];
	uint8_t salt[64];
	size_t saltlen;
	int iterations;
	bool valid;
	struct scram_keys keys;
	unsigned long derivations;
};

/* One login's authentication state; scram is used only when the server asks for SASL. */
struct sp_auth {
	const char *user, *password;
	struct sp_keycache *cache;
	struct scram_client scram;
	bool sasl_done;		/* the server's signature was checked */
};

enum sp_auth_result {
	SP_AUTH_SEND,		/* out holds a message to send */
	SP_AUTH_WAIT,		/* nothing to send; the next message will tell */
	SP_AUTH_OK,		/* AuthenticationOk */
	SP_AUTH_FAIL,		/* *err says why */
};

void sp_auth_init(struct sp_auth *a, const char *user, const char *password, struct sp_keycache *cache);
/*
 * One Authentication ('R') message's body: the answer, framed, into out
 * (*outlen), or OK, WAIT, or FAIL with *err a static string.
 * Understood: Ok, CleartextPassword, MD5Password, SASL (SCRAM-SHA-256),
 * SASLContinue, SASLFinal.
 */
enum sp_auth_result sp_auth_step(struct sp_auth *a, const uint8_t *body, size_t len,
				 uint8_t *out, size_t cap, size_t *outlen, const char **err);

#endif
