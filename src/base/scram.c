/*
 * scram.c - SCRAM-SHA-256 (RFC 5802 / RFC 7677) message parsing and building,
 * client and server side, as PostgreSQL speaks it: SCRAM-SHA-256 and
 * SCRAM-SHA-256-PLUS (tls-server-end-point binding, the data given by the
 * caller), no authzid, the user name taken from the startup packet.
 *
 * Pure functions over the caller's struct scram_client / scram_server: no
 * I/O, no logging, no global state. Error strings are static and never
 * contain secrets or message contents (except the sanitised text of a
 * server's "e=" error, kept in struct scram_client).
 */
#include "common.h"
#include "crypto.h"
#include "scram.h"

#include <limits.h>

#include <openssl/crypto.h>

#define SCRAM_PREFIX "SCRAM-SHA-256$"
#define GS2_HEADER "n,,"
#define GS2_HEADER_Y "y,,"
#define GS2_HEADER_P "p=tls-server-end-point,,"
#define MECH_PLAIN "SCRAM-SHA-256"
#define MECH_PLUS "SCRAM-SHA-256-PLUS"

/* ------------------------------------------------------------ helpers */

/*
 * SASLprep stand-in: see the comment at the top of scram.h. ASCII passwords
 * are what SASLprep would return anyway; non-ASCII ones are used raw.
 */
static const char *scram_prep_password(const char *password)
{
	return password;
}

/* nonce = 1*printable, printable = %x21-2B / %x2D-7E (RFC 5802). */
static bool nonce_valid(const char *s, size_t len)
{
	if (len == 0)
		return false;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c < 0x21 || c > 0x7e || c == ',')
			return false;
	}
	return true;
}

static void random_nonce(char *out, size_t outsize)
{
	uint8_t raw[SCRAM_NONCE_LEN];
	crypto_random(raw, sizeof(raw));
	if (crypto_b64_encode(raw, sizeof(raw), out, outsize) < 0)
		abort();	/* compile-time sizes: cannot happen */
}

/* Copies a message into a NUL-terminated private buffer; false if too long or has a NUL byte. */
static bool copy_msg(char dst[SCRAM_MSG_MAX], const char *src, size_t len)
{
	if (!src || len >= SCRAM_MSG_MAX || memchr(src, '\0', len))
		return false;
	memcpy(dst, src, len);
	dst[len] = '\0';
	return true;
}

/*
 * Takes the attribute "<name>=<value>" at *p (a private copy), NUL-
 * terminating the value in place. A non-last attribute must be followed by
 * ',' (*p moves past it); the last one runs to the end of the message.
 */
static char *take_attr(char **p, char name, bool last)
{
	char *s = *p;
	if (s[0] != name || s[1] != '=')
		return NULL;
	char *value = s + 2;
	char *comma = strchr(value, ',');
	if (last) {
		if (comma)
			return NULL;
		*p = value + strlen(value);
	} else {
		if (!comma)
			return NULL;
		*comma = '\0';
		*p = comma + 1;
	}
	return value;
}

/*
 * Decimal, digits only: the count, 0 for malformed or zero, or -1 when it
 * is above SCRAM_ITERATIONS_MAX (*shown gets its first digits for the log).
 */
static long parse_iterations(const char *s, char *shown, size_t shown_size)
{
	long v = 0;
	bool too_big = false;

	if (!*s || strspn(s, "0123456789") != strlen(s))
		return 0;
	snprintf(shown, shown_size, "%.*s", (int)MIN(strlen(s), (size_t)20), s);
	for (; *s; s++) {
		v = v * 10 + (*s - '0');
		if (v > SCRAM_ITERATIONS_MAX) {
			too_big = true;
			v = SCRAM_ITERATIONS_MAX + 1L;	/* no overflow on long inputs */
		}
	}
	return too_big ? -1 : v;
}

static void xor32(uint8_t out[32], const uint8_t a[32], const uint8_t b[32])
{
	for (int i = 0; i < SCRAM_KEY_LEN; i++)
		out[i] = a[i] ^ b[i];
}

static void hmac_str(const uint8_t key[32], const char *msg, uint8_t out[32])
{
	crypto_hmac_sha256(key, SCRAM_KEY_LEN, (const uint8_t *)msg, strlen(msg), out);
}

/* ClientKey and ServerKey from SaltedPassword. */
static void keys_from_salted(const uint8_t salted[32], uint8_t client_key[32], uint8_t server_key[32])
{
	hmac_str(salted, "Client Key", client_key);
	hmac_str(salted, "Server Key", server_key);
}

/* AuthMessage = client-first-bare "," server-first "," client-final-without-proof; -1 if too long. */
static int build_auth_message(char *out, size_t outsize, const char *client_first_bare,
			      const char *server_first, const char *client_final_wo_proof)
{
	int n = snprintf(out, outsize, "%s,%s,%s", client_first_bare, server_first, client_final_wo_proof);
	return n < 0 || (size_t)n >= outsize ? -1 : n;
}

#define AUTH_MESSAGE_MAX (3 * SCRAM_MSG_MAX + 16)
#define CBIND_INPUT_MAX (SCRAM_GS2_MAX + SCRAM_CBIND_MAX)

/* cbind-input (RFC 5802): the gs2 header, then with flag "p" the binding data. Returns its length. */
static size_t cbind_input(const char *gs2_header, const uint8_t *data, size_t len, uint8_t out[CBIND_INPUT_MAX])
{
	size_t h = strlen(gs2_header);
	memcpy(out, gs2_header, h);
	if (gs2_header[0] != 'p')
		return h;
	memcpy(out + h, data, len);
	return h + len;
}

/* ------------------------------------------------------------ client */

void scram_client_init(struct scram_client *sc, const char *user, const char *nonce)
{
	char *p;
	size_t room;

	memset(sc, 0, sizeof(*sc));
	sc->state = SCRAM_CLIENT_INIT;
	strlcpy_s(sc->gs2_header, GS2_HEADER, sizeof(sc->gs2_header));
	if (nonce && strlen(nonce) < sizeof(sc->client_nonce) && nonce_valid(nonce, strlen(nonce)))
		strlcpy_s(sc->client_nonce, nonce, sizeof(sc->client_nonce));
	else
		random_nonce(sc->client_nonce, sizeof(sc->client_nonce));

	/* saslname: ',' and '=' escaped as =2C and =3D. */
	p = sc->client_first_bare;
	room = sizeof(sc->client_first_bare) - sizeof(sc->client_nonce) - 8;
	memcpy(p, "n=", 2);
	p += 2;
	for (const char *u = user ? user : ""; *u && room > 3; u++, room--) {
		if (*u == ',' || *u == '=') {
			memcpy(p, *u == ',' ? "=2C" : "=3D", 3);
			p += 3;
			room -= 2;
		} else {
			*p++ = *u;
		}
	}
	snprintf(p, sizeof(sc->client_first_bare) - (size_t)(p - sc->client_first_bare),
		 ",r=%s", sc->client_nonce);
}

void scram_client_set_keys(struct scram_client *sc, const uint8_t client_key[32], const uint8_t server_key[32])
{
	memcpy(sc->client_key, client_key, SCRAM_KEY_LEN);
	memcpy(sc->server_key, server_key, SCRAM_KEY_LEN);
	sc->has_keys = true;
}

void scram_client_set_key_source(struct scram_client *sc, scram_keys_fn fn, void *arg)
{
	sc->key_source = fn;
	sc->key_source_arg = arg;
}

bool scram_client_set_channel_binding(struct scram_client *sc, char flag, const uint8_t *data, size_t len)
{
	if (flag == 'p' && (!data || len == 0 || len > sizeof(sc->cbind_data)))
		return false;
	strlcpy_s(sc->gs2_header, flag == 'p' ? GS2_HEADER_P : flag == 'y' ? GS2_HEADER_Y : GS2_HEADER,
		  sizeof(sc->gs2_header));
	sc->cbind_len = flag == 'p' ? len : 0;
	if (sc->cbind_len)
		memcpy(sc->cbind_data, data, len);
	return true;
}

int scram_client_first(struct scram_client *sc, char *out, size_t outsize)
{
	if (sc->state != SCRAM_CLIENT_INIT)
		return -1;
	int n = snprintf(out, outsize, "%s%s", sc->gs2_header, sc->client_first_bare);
	if (n < 0 || (size_t)n >= outsize)
		return -1;
	sc->state = SCRAM_CLIENT_SENT_FIRST;
	return n;
}

int scram_client_final(struct scram_client *sc, const char *password,
		       const char *server_first, size_t server_first_len,
		       char *out, size_t outsize, const char **err)
{
	char msg[SCRAM_MSG_MAX], work[SCRAM_MSG_MAX];
	char auth_message[AUTH_MESSAGE_MAX];
	char final_wo_proof[SCRAM_MSG_MAX + 16];
	char proof_b64[CRYPTO_B64_ENC_LEN(SCRAM_KEY_LEN) + 1];
	uint8_t cbind[CBIND_INPUT_MAX];
	char cbind_b64[CRYPTO_B64_ENC_LEN(CBIND_INPUT_MAX) + 1];
	uint8_t salt[CRYPTO_B64_DEC_MAX(SCRAM_MSG_MAX)];
	uint8_t client_key[32], stored_key[32], client_sig[32], proof[32];
	char *p = work, *nonce, *salt_b64, *iter_s;
	char iter_shown[24];
	int salt_len, amlen, n;
	long iterations;

	*err = NULL;
	if (sc->state != SCRAM_CLIENT_SENT_FIRST) {
		*err = "SCRAM exchange out of order";
		return -1;
	}
	sc->state = SCRAM_CLIENT_DONE;	/* any failure ends the exchange */
	if (!copy_msg(msg, server_first, server_first_len)) {
		*err = "malformed SCRAM server-first-message (too long or contains NUL)";
		return -1;
	}
	memcpy(work, msg, server_first_len + 1);	/* parsing cuts work; AuthMessage needs msg */
	if (!(nonce = take_attr(&p, 'r', false))
	    || !(salt_b64 = take_attr(&p, 's', false))
	    || !(iter_s = take_attr(&p, 'i', true))) {
		*err = "malformed SCRAM server-first-message";
		return -1;
	}
	size_t cnlen = strlen(sc->client_nonce);
	if (!nonce_valid(nonce, strlen(nonce)) || strlen(nonce) <= cnlen
	    || memcmp(nonce, sc->client_nonce, cnlen) != 0) {
		*err = "SCRAM server nonce does not extend the client nonce";
		return -1;
	}
	salt_len = crypto_b64_decode(salt_b64, strlen(salt_b64), salt, sizeof(salt));
	if (salt_len <= 0) {
		*err = "invalid salt in SCRAM server-first-message";
		return -1;
	}
	iterations = parse_iterations(iter_s, iter_shown, sizeof(iter_shown));
	if (iterations == 0) {
		*err = "invalid iteration count in SCRAM server-first-message";
		return -1;
	}
	if (iterations < 0) {
		snprintf(sc->server_error, sizeof(sc->server_error),
			 "server asked for %s%s SCRAM iterations, more than the limit of %d",
			 iter_shown, strlen(iter_s) > strlen(iter_shown) ? "..." : "", SCRAM_ITERATIONS_MAX);
		*err = sc->server_error;
		return -1;
	}
	if (!sc->has_keys && !password) {
		*err = "no password available for SCRAM authentication";
		return -1;
	}

	crypto_b64_encode(cbind, cbind_input(sc->gs2_header, sc->cbind_data, sc->cbind_len, cbind), cbind_b64,
			  sizeof(cbind_b64));
	n = snprintf(final_wo_proof, sizeof(final_wo_proof), "c=%s,r=%s", cbind_b64, nonce);
	amlen = build_auth_message(auth_message, sizeof(auth_message), sc->client_first_bare, msg, final_wo_proof);
	if (n < 0 || (size_t)n >= sizeof(final_wo_proof) || amlen < 0) {
		*err = "SCRAM message too long";
		return -1;
	}

	if (sc->has_keys) {
		memcpy(client_key, sc->client_key, SCRAM_KEY_LEN);
		crypto_sha256(client_key, SCRAM_KEY_LEN, stored_key);
	} else {
		struct scram_keys keys;
		if (sc->key_source)
			sc->key_source(sc->key_source_arg, password, salt, (size_t)salt_len, (int)iterations, &keys);
		else
			scram_keys_derive(password, salt, (size_t)salt_len, (int)iterations, &keys);
		memcpy(client_key, keys.client_key, SCRAM_KEY_LEN);
		memcpy(stored_key, keys.stored_key, SCRAM_KEY_LEN);
		memcpy(sc->server_key, keys.server_key, SCRAM_KEY_LEN);
		secret_clear(&keys, sizeof(keys));
	}
	crypto_hmac_sha256(stored_key, SCRAM_KEY_LEN, (const uint8_t *)auth_message, (size_t)amlen, client_sig);
	xor32(proof, client_key, client_sig);
	crypto_hmac_sha256(sc->server_key, SCRAM_KEY_LEN, (const uint8_t *)auth_message, (size_t)amlen,
			   sc->server_signature);
	crypto_b64_encode(sc->server_signature, SCRAM_KEY_LEN, sc->server_signature_b64,
			  sizeof(sc->server_signature_b64));
	crypto_b64_encode(proof, SCRAM_KEY_LEN, proof_b64, sizeof(proof_b64));
	secret_clear(client_key, sizeof(client_key));
	secret_clear(stored_key, sizeof(stored_key));
	secret_clear(proof, sizeof(proof));

	n = snprintf(out, outsize, "%s,p=%s", final_wo_proof, proof_b64);
	if (n < 0 || (size_t)n >= outsize) {
		*err = "SCRAM client-final-message does not fit";
		return -1;
	}
	sc->state = SCRAM_CLIENT_SENT_FINAL;
	return n;
}

bool scram_client_verify(struct scram_client *sc, const char *server_final, size_t len, const char **err)
{
	char msg[SCRAM_MSG_MAX];
	uint8_t sig[SCRAM_KEY_LEN];
	char *p = msg, *v;

	*err = NULL;
	if (sc->state != SCRAM_CLIENT_SENT_FINAL) {
		*err = "SCRAM exchange out of order";
		return false;
	}
	sc->state = SCRAM_CLIENT_DONE;
	if (!copy_msg(msg, server_final, len)) {
		*err = "malformed SCRAM server-final-message (too long or contains NUL)";
		return false;
	}
	if (msg[0] == 'e' && msg[1] == '=') {
		size_t o = 0;
		for (const char *e = msg + 2; *e && *e != ',' && o + 1 < sizeof(sc->server_error); e++)
			sc->server_error[o++] = (*e >= 0x20 && *e < 0x7f) ? *e : '?';
		sc->server_error[o] = '\0';
		*err = sc->server_error;
		return false;
	}
	if (!(v = take_attr(&p, 'v', true))
	    || crypto_b64_decode(v, strlen(v), sig, sizeof(sig)) != SCRAM_KEY_LEN) {
		*err = "malformed SCRAM server-final-message";
		return false;
	}
	if (!secure_equal(sig, sc->server_signature, SCRAM_KEY_LEN)) {
		*err = "incorrect server signature in SCRAM server-final-message";
		return false;
	}
	return true;
}

/* ------------------------------------------------------------ secrets */

void scram_keys_derive(const char *password, const uint8_t *salt, size_t saltlen, int iterations,
		       struct scram_keys *out)
{
	uint8_t salted[32];

	crypto_scram_salted_password(scram_prep_password(password), salt, saltlen, iterations, salted);
	keys_from_salted(salted, out->client_key, out->server_key);
	crypto_sha256(out->client_key, SCRAM_KEY_LEN, out->stored_key);
	secret_clear(salted, sizeof(salted));
}

void scram_secret_from_password(const char *password, int iterations,
				const uint8_t *salt, size_t saltlen, struct scram_secret *out)
{
	struct scram_keys keys;

	if (saltlen > sizeof(out->salt))
		saltlen = sizeof(out->salt);
	memset(out, 0, sizeof(*out));
	out->iterations = iterations;
	memcpy(out->salt, salt, saltlen);
	out->salt_len = (int)saltlen;
	scram_keys_derive(password, salt, saltlen, iterations, &keys);
	memcpy(out->stored_key, keys.stored_key, SCRAM_KEY_LEN);
	memcpy(out->server_key, keys.server_key, SCRAM_KEY_LEN);
	secret_clear(&keys, sizeof(keys));
}

int scram_secret_format(const struct scram_secret *secret, char *out, size_t outsize)
{
	char salt[CRYPTO_B64_ENC_LEN(sizeof(secret->salt)) + 1];
	char stored[CRYPTO_B64_ENC_LEN(SCRAM_KEY_LEN) + 1];
	char server[CRYPTO_B64_ENC_LEN(SCRAM_KEY_LEN) + 1];

	if (secret->iterations <= 0 || secret->salt_len <= 0 || (size_t)secret->salt_len > sizeof(secret->salt))
		return -1;
	crypto_b64_encode(secret->salt, (size_t)secret->salt_len, salt, sizeof(salt));
	crypto_b64_encode(secret->stored_key, SCRAM_KEY_LEN, stored, sizeof(stored));
	crypto_b64_encode(secret->server_key, SCRAM_KEY_LEN, server, sizeof(server));
	int n = snprintf(out, outsize, SCRAM_PREFIX "%d:%s$%s:%s", secret->iterations, salt, stored, server);
	return n < 0 || (size_t)n >= outsize ? -1 : n;
}

int scram_build_secret(const char *password, int iterations, char *out, size_t outsize)
{
	uint8_t salt[SCRAM_SALT_LEN];
	struct scram_secret secret;

	if (iterations <= 0)
		return -1;
	crypto_random(salt, sizeof(salt));
	scram_secret_from_password(password, iterations, salt, sizeof(salt), &secret);
	int n = scram_secret_format(&secret, out, outsize);
	secret_clear(&secret, sizeof(secret));
	return n;
}

/* ------------------------------------------------------------ server */

bool scram_verify_proof(const struct scram_secret *secret, const char *auth_message, size_t len,
			const uint8_t proof[32], uint8_t client_key[32])
{
	uint8_t client_sig[32], key[32], stored[32];

	crypto_hmac_sha256(secret->stored_key, SCRAM_KEY_LEN, (const uint8_t *)auth_message, len, client_sig);
	xor32(key, proof, client_sig);
	crypto_sha256(key, SCRAM_KEY_LEN, stored);
	bool ok = secure_equal(stored, secret->stored_key, SCRAM_KEY_LEN);
	if (ok && client_key)
		memcpy(client_key, key, SCRAM_KEY_LEN);
	secret_clear(key, sizeof(key));
	return ok;
}

void scram_server_init(struct scram_server *ss, const struct scram_secret *secret, const char *server_nonce)
{
	memset(ss, 0, sizeof(*ss));
	ss->state = SCRAM_SERVER_INIT;
	ss->secret = *secret;
	/* The server nonce is kept in ss->nonce until the client's is known. */
	if (server_nonce && strlen(server_nonce) < 64 && nonce_valid(server_nonce, strlen(server_nonce)))
		strlcpy_s(ss->nonce, server_nonce, sizeof(ss->nonce));
	else
		random_nonce(ss->nonce, sizeof(ss->nonce));
}

void scram_server_set_channel_binding(struct scram_server *ss, const uint8_t *data, size_t len)
{
	ss->cbind_len = data && len <= sizeof(ss->cbind_data) ? len : 0;
	if (ss->cbind_len)
		memcpy(ss->cbind_data, data, len);
}

size_t scram_server_mechanisms(const struct scram_server *ss, char out[64])
{
	static const char plus[] = MECH_PLUS "\0" MECH_PLAIN "\0";	/* the list ends with an empty name */
	static const char plain[] = MECH_PLAIN "\0";
	const char *list = ss->cbind_len ? plus : plain;
	size_t len = ss->cbind_len ? sizeof(plus) : sizeof(plain);
	memcpy(out, list, len);
	return len;
}

bool scram_server_choose_mechanism(struct scram_server *ss, const char *mechanism)
{
	ss->plus_selected = ss->cbind_len && strcmp(mechanism, MECH_PLUS) == 0;
	return ss->plus_selected || strcmp(mechanism, MECH_PLAIN) == 0;
}

/*
 * The gs2 header at the start of msg, checked against the mechanism as
 * PostgreSQL checks it; its length, or -1 with *err.
 */
static int server_gs2_header(struct scram_server *ss, const char *msg, const char **err)
{
	const char *flag_end = strchr(msg, ',');
	size_t flag_len = flag_end ? (size_t)(flag_end - msg) : 0;

	*err = "malformed SCRAM client-first-message";
	if (!flag_end || flag_len == 0)
		return -1;
	if (msg[0] == 'p') {
		if (!ss->plus_selected) {
			*err = "SCRAM channel binding data sent without SCRAM-SHA-256-PLUS";
			return -1;
		}
		if (flag_len != strlen(GS2_HEADER_P) - 2 || strncmp(msg, GS2_HEADER_P, flag_len) != 0) {
			*err = "unsupported SCRAM channel-binding type";
			return -1;
		}
	} else if ((msg[0] != 'n' && msg[0] != 'y') || flag_len != 1) {
		return -1;
	} else if (ss->plus_selected) {
		*err = "SCRAM-SHA-256-PLUS chosen, but the SCRAM message has no channel binding data";
		return -1;
	} else if (msg[0] == 'y' && ss->cbind_len) {
		/* the client could bind and thinks this server cannot: a downgrade on the way */
		*err = "SCRAM channel binding negotiation error";
		ss->binding_failed = true;
		return -1;
	}
	const char *authz = flag_end + 1;
	if (authz[0] == 'a' && authz[1] == '=') {
		*err = "SCRAM authorization identity is not supported";
		return -1;
	}
	if (authz[0] != ',')
		return -1;
	*err = NULL;
	return (int)(authz + 1 - msg);
}

int scram_server_first(struct scram_server *ss, const char *client_first, size_t len,
		       char *out, size_t outsize, const char **err)
{
	char msg[SCRAM_MSG_MAX];
	char server_nonce[64];
	char salt_b64[CRYPTO_B64_ENC_LEN(sizeof(ss->secret.salt)) + 1];
	char *p, *bare, *cnonce;
	int n;

	*err = NULL;
	if (ss->state != SCRAM_SERVER_INIT) {
		*err = "SCRAM exchange out of order";
		return -1;
	}
	ss->state = SCRAM_SERVER_DONE;
	if (!copy_msg(msg, client_first, len)) {
		*err = "malformed SCRAM client-first-message (too long or contains NUL)";
		return -1;
	}
	/* gs2-header: gs2-cbind-flag "," [authzid] "," */
	int hlen = server_gs2_header(ss, msg, err);
	if (hlen < 0)
		return -1;
	memcpy(ss->gs2_header, msg, (size_t)hlen);
	ss->gs2_header[hlen] = '\0';
	bare = msg + hlen;
	strlcpy_s(ss->client_first_bare, bare, sizeof(ss->client_first_bare));

	/* client-first-bare: [reserved-mext ","] username "," nonce ["," extensions] */
	if (bare[0] == 'm' && bare[1] == '=') {
		*err = "SCRAM mandatory extensions are not supported";
		return -1;
	}
	p = bare;
	if (!take_attr(&p, 'n', false)) {	/* PostgreSQL uses the startup packet's user */
		*err = "malformed SCRAM client-first-message";
		return -1;
	}
	char *comma = strchr(p, ',');
	if (comma)
		*comma = '\0';	/* extensions after the nonce are ignored */
	if (!(cnonce = take_attr(&p, 'r', true)) || !nonce_valid(cnonce, strlen(cnonce))) {
		*err = "malformed SCRAM client-first-message";
		return -1;
	}

	strlcpy_s(server_nonce, ss->nonce, sizeof(server_nonce));
	n = snprintf(ss->nonce, sizeof(ss->nonce), "%s%s", cnonce, server_nonce);
	if (n < 0 || (size_t)n >= sizeof(ss->nonce)) {
		*err = "SCRAM client nonce too long";
		return -1;
	}
	crypto_b64_encode(ss->secret.salt, (size_t)ss->secret.salt_len, salt_b64, sizeof(salt_b64));
	n = snprintf(ss->server_first, sizeof(ss->server_first), "r=%s,s=%s,i=%d",
		     ss->nonce, salt_b64, ss->secret.iterations);
	if (n < 0 || (size_t)n >= sizeof(ss->server_first) || (size_t)n >= outsize) {
		*err = "SCRAM server-first-message does not fit";
		return -1;
	}
	memcpy(out, ss->server_first, (size_t)n + 1);
	ss->state = SCRAM_SERVER_SENT_FIRST;
	return n;
}

int scram_server_final(struct scram_server *ss, const char *client_final, size_t len,
		       char *out, size_t outsize, const char **err)
{
	char msg[SCRAM_MSG_MAX];
	char auth_message[AUTH_MESSAGE_MAX];
	char sig_b64[CRYPTO_B64_ENC_LEN(SCRAM_KEY_LEN) + 1];
	uint8_t cbind[CBIND_INPUT_MAX], expected[CBIND_INPUT_MAX], proof[SCRAM_KEY_LEN], sig[SCRAM_KEY_LEN];
	char *p = msg, *c, *r, *proof_attr = NULL, *pv;
	int amlen, n;

	*err = NULL;
	if (ss->state != SCRAM_SERVER_SENT_FIRST) {
		*err = "SCRAM exchange out of order";
		return -1;
	}
	ss->state = SCRAM_SERVER_DONE;
	if (!copy_msg(msg, client_final, len)) {
		*err = "malformed SCRAM client-final-message (too long or contains NUL)";
		return -1;
	}
	/* client-final-message-without-proof "," proof; proof is the last attribute. */
	for (char *q = msg; (q = strstr(q, ",p=")); q++)
		proof_attr = q;
	if (!proof_attr) {
		*err = "malformed SCRAM client-final-message (no proof)";
		return -1;
	}
	*proof_attr = '\0';
	amlen = build_auth_message(auth_message, sizeof(auth_message), ss->client_first_bare,
				   ss->server_first, msg);
	pv = proof_attr + 1;
	if (amlen < 0 || !(pv = take_attr(&pv, 'p', true))
	    || crypto_b64_decode(pv, strlen(pv), proof, sizeof(proof)) != SCRAM_KEY_LEN) {
		*err = "malformed SCRAM client-final-message (invalid proof)";
		return -1;
	}
	/* The part before the proof: c=..., r=...[, extensions ignored] */
	if ((c = take_attr(&p, 'c', false))) {
		char *ext = strchr(p, ',');
		if (ext)
			*ext = '\0';
	}
	if (!c || !(r = take_attr(&p, 'r', true))) {
		*err = "malformed SCRAM client-final-message";
		return -1;
	}
	n = crypto_b64_decode(c, strlen(c), cbind, sizeof(cbind));
	size_t elen = cbind_input(ss->gs2_header, ss->cbind_data, ss->cbind_len, expected);
	if (n != (int)elen || memcmp(cbind, expected, elen) != 0) {
		*err = "SCRAM channel binding check failed";
		ss->binding_failed = true;
		return -1;
	}
	if (strcmp(r, ss->nonce) != 0) {
		*err = "SCRAM nonce mismatch in client-final-message";
		return -1;
	}
	if (!scram_verify_proof(&ss->secret, auth_message, (size_t)amlen, proof, ss->client_key)) {
		*err = "SCRAM proof is wrong (password authentication failed)";
		return -2;
	}
	ss->has_client_key = true;
	crypto_hmac_sha256(ss->secret.server_key, SCRAM_KEY_LEN, (const uint8_t *)auth_message, (size_t)amlen, sig);
	crypto_b64_encode(sig, SCRAM_KEY_LEN, sig_b64, sizeof(sig_b64));
	n = snprintf(out, outsize, "v=%s", sig_b64);
	if (n < 0 || (size_t)n >= outsize) {
		*err = "SCRAM server-final-message does not fit";
		return -1;
	}
	return n;
}
