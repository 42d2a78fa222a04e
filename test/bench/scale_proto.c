/*
 * scale_proto.c - the scale load generator's wire protocol: client
 * messages built, server messages framed, ErrorResponse fields, and the
 * md5 / SCRAM-SHA-256 answers with a per-process key cache (see
 * scale_proto.h). No sockets, no clock: the caller does the I/O.
 */
#include "scale_proto.h"
#include "crypto.h"

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

size_t sp_build_msg(uint8_t *buf, size_t cap, char type, const void *body, size_t len)
{
	if (len > SP_MSG_MAX || cap < len + 5)
		return 0;
	buf[0] = (uint8_t)type;
	put32(buf + 1, (uint32_t)(len + 4));
	if (len)
		memcpy(buf + 5, body, len);
	return len + 5;
}

/* Appends a NUL-terminated string at *n; false when it does not fit. */
static bool put_str(uint8_t *buf, size_t cap, size_t *n, const char *s)
{
	size_t l = strlen(s) + 1;
	if (*n + l > cap)
		return false;
	memcpy(buf + *n, s, l);
	*n += l;
	return true;
}

size_t sp_build_startup(uint8_t *buf, size_t cap, const char *user, const char *dbname, const char *appname)
{
	size_t n = 8;
	if (cap < n + 1)
		return 0;
	put32(buf + 4, SP_PROTOCOL_3_0);
	if (!put_str(buf, cap, &n, "user") || !put_str(buf, cap, &n, user)
	    || !put_str(buf, cap, &n, "database") || !put_str(buf, cap, &n, dbname))
		return 0;
	if (appname && (!put_str(buf, cap, &n, "application_name") || !put_str(buf, cap, &n, appname)))
		return 0;
	if (n + 1 > cap)
		return 0;
	buf[n++] = 0;
	put32(buf, (uint32_t)n);
	return n;
}

size_t sp_build_ssl_request(uint8_t buf[8])
{
	put32(buf, 8);
	put32(buf + 4, SP_SSL_REQUEST_CODE);
	return 8;
}

size_t sp_build_query(uint8_t *buf, size_t cap, const char *sql)
{
	return sp_build_msg(buf, cap, 'Q', sql, strlen(sql) + 1);
}

size_t sp_build_terminate(uint8_t buf[5])
{
	return sp_build_msg(buf, 5, 'X', NULL, 0);
}

long sp_next_message(const uint8_t *buf, size_t len, char *type, const uint8_t **body, size_t *bodylen)
{
	if (len < 5)
		return 0;
	uint32_t mlen = get32(buf + 1);
	if (mlen < 4 || mlen > SP_MSG_MAX)
		return -1;
	if (len < 1 + (size_t)mlen)
		return 0;
	*type = (char)buf[0];
	*body = buf + 5;
	*bodylen = mlen - 4;
	return 1 + (long)mlen;
}

bool sp_error_field(const uint8_t *body, size_t len, char field, char *out, size_t outsize)
{
	size_t i = 0;
	while (i < len && body[i]) {
		char f = (char)body[i++];
		size_t l = strnlen((const char *)body + i, len - i);
		if (i + l >= len)
			return false;	/* a field without its NUL */
		if (f == field) {
			size_t c = l < outsize - 1 ? l : outsize - 1;
			memcpy(out, body + i, c);
			out[c] = 0;
			return true;
		}
		i += l + 1;
	}
	return false;
}

/* scram_keys_fn: one PBKDF2 per salt and iteration count, not per login. */
static void cached_keys(void *arg, const char *password, const uint8_t *salt, size_t saltlen,
			int iterations, struct scram_keys *out)
{
	struct sp_keycache *c = arg;
	bool cacheable = saltlen <= sizeof(c->salt) && strlen(password) < sizeof(c->password);
	if (cacheable && c->valid && saltlen == c->saltlen && iterations == c->iterations
	    && memcmp(salt, c->salt, saltlen) == 0 && strcmp(password, c->password) == 0) {
		*out = c->keys;
		return;
	}
	scram_keys_derive(password, salt, saltlen, iterations, out);
	c->derivations++;
	if (cacheable) {
		memcpy(c->salt, salt, saltlen);
		c->saltlen = saltlen;
		snprintf(c->password, sizeof(c->password), "%s", password);
		c->iterations = iterations;
		c->keys = *out;
		c->valid = true;
	}
}

void sp_auth_init(struct sp_auth *a, const char *user, const char *password, struct sp_keycache *cache)
{
	a->user = user;
	a->password = password;
	a->cache = cache;
	a->sasl_done = false;
	a->scram.state = SCRAM_CLIENT_INIT;
}

/* Does the NUL-separated mechanism list of AuthenticationSASL offer name? */
static bool offers(const uint8_t *list, size_t len, const char *name)
{
	for (size_t i = 0; i < len && list[i];) {
		size_t l = strnlen((const char *)list + i, len - i);
		if (l == strlen(name) && memcmp(list + i, name, l) == 0)
			return true;
		i += l + 1;
	}
	return false;
}

static enum sp_auth_result sasl_first(struct sp_auth *a, const uint8_t *mechs, size_t mlen,
				      uint8_t *out, size_t cap, size_t *outlen, const char **err)
{
	static const char mech[] = "SCRAM-SHA-256";
	uint8_t body[sizeof(mech) + 4 + SCRAM_MSG_MAX];
	if (!offers(mechs, mlen, mech)) {
		*err = "server offers no SCRAM-SHA-256";
		return SP_AUTH_FAIL;
	}
	scram_client_init(&a->scram, NULL, NULL);
	if (a->cache)
		scram_client_set_key_source(&a->scram, cached_keys, a->cache);
	memcpy(body, mech, sizeof(mech));
	int n = scram_client_first(&a->scram, (char *)body + sizeof(mech) + 4, SCRAM_MSG_MAX);
	if (n < 0) {
		*err = "SCRAM client-first does not fit";
		return SP_AUTH_FAIL;
	}
	put32(body + sizeof(mech), (uint32_t)n);
	*outlen = sp_build_msg(out, cap, 'p', body, sizeof(mech) + 4 + (size_t)n);
	return *outlen ? SP_AUTH_SEND : SP_AUTH_FAIL;
}

enum sp_auth_result sp_auth_step(struct sp_auth *a, const uint8_t *body, size_t len,
				 uint8_t *out, size_t cap, size_t *outlen, const char **err)
{
	char msg[SCRAM_MSG_MAX];
	*err = "authentication message too short";
	if (len < 4)
		return SP_AUTH_FAIL;
	uint32_t code = get32(body);
	const uint8_t *data = body + 4;
	size_t dlen = len - 4;
	*outlen = 0;
	switch (code) {
	case 0:
		if (a->scram.state != SCRAM_CLIENT_INIT && !a->sasl_done) {
			*err = "AuthenticationOk before the server's SCRAM signature";
			return SP_AUTH_FAIL;
		}
		return SP_AUTH_OK;
	case 3:		/* cleartext */
		*outlen = sp_build_msg(out, cap, 'p', a->password, strlen(a->password) + 1);
		break;
	case 5: {	/* md5 */
		char secret[36], response[36];
		if (dlen != 4) {
			*err = "bad AuthenticationMD5Password";
			return SP_AUTH_FAIL;
		}
		crypto_md5_password(a->password, a->user, secret);
		crypto_md5_response(secret, data, response);
		*outlen = sp_build_msg(out, cap, 'p', response, sizeof(response));
		break;
	}
	case 10:
		return sasl_first(a, data, dlen, out, cap, outlen, err);
	case 11: {
		if (a->scram.state != SCRAM_CLIENT_SENT_FIRST) {
			*err = "SASLContinue out of order";
			return SP_AUTH_FAIL;
		}
		int n = scram_client_final(&a->scram, a->password, (const char *)data, dlen, msg, sizeof(msg), err);
		if (n < 0)
			return SP_AUTH_FAIL;
		*outlen = sp_build_msg(out, cap, 'p', msg, (size_t)n);
		break;
	}
	case 12:
		if (a->scram.state != SCRAM_CLIENT_SENT_FINAL
		    || !scram_client_verify(&a->scram, (const char *)data, dlen, err)) {
			if (a->scram.state != SCRAM_CLIENT_SENT_FINAL)
				*err = "SASLFinal out of order";
			return SP_AUTH_FAIL;
		}
		a->sasl_done = true;
		return SP_AUTH_WAIT;
	default:
		*err = "authentication method not supported";
		return SP_AUTH_FAIL;
	}
	if (*outlen == 0) {
		*err = "answer does not fit";
		return SP_AUTH_FAIL;
	}
	return SP_AUTH_SEND;
}
