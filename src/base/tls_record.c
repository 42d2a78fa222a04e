/*
 * tls_record.c - TLS 1.3's record layer after the handshake (RFC 8446
 * section 5), for clients: see tls_record.h for why and the contract.
 *
 * A record on the wire: a 5-byte header (type 23, version 0x0303, length),
 * then the AEAD ciphertext of the content, its real type and no padding
 * (we send none; a peer's zeros are stripped), then a 16-byte tag. The
 * nonce is the direction's IV XORed with its sequence number; the header
 * is the additional data. Keys come from the traffic secret by
 * HKDF-Expand-Label (RFC 8446 section 7.1 and 7.3).
 *
 * Memory: records are decrypted and encrypted in one scratch buffer per
 * process; a connection keeps only what a call could not finish (the
 * start of a record not all arrived, plaintext the caller had no room
 * for, ciphertext the socket did not take), each freed once used up.
 */
#include "tls_record.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/socket.h>

#define REC_HEADER 5
#define REC_TAG 16
#define REC_PLAIN_MAX 16384				/* 2^14 */
#define REC_CIPHER_MAX (REC_PLAIN_MAX + 256)		/* what a peer may send (RFC 8446 5.2) */
#define REC_WRITE_RECORDS 4				/* records encrypted per write call */
#define SCRATCH_SIZE (REC_WRITE_RECORDS * (REC_HEADER + REC_PLAIN_MAX + 1 + REC_TAG) + 64 + 2 * (REC_HEADER + REC_CIPHER_MAX))

enum rec_type { REC_ALERT = 21, REC_HANDSHAKE = 22, REC_APPDATA = 23 };

struct rec_dir {
	EVP_CIPHER_CTX *aead;
	uint8_t secret[EVP_MAX_MD_SIZE];
	uint8_t iv[12];
	uint64_t seq;
};

struct rec_buf {
	uint8_t *data;
	uint32_t off, len;	/* unused bytes are data[off, off + len) */
};

struct tls_record {
	struct rec_dir rd, wr;
	const EVP_MD *md;
	const EVP_CIPHER *cipher;
	uint8_t key_len, hash_len;
	bool alpn_postgresql, owe_key_update, closed;
	SSL_CTX *ctx;			/* for the channel binding data (one reference held) */
	char *servername;		/* the client's SNI host name, NULL without one */
	struct rec_buf raw;		/* ciphertext of a record not all arrived */
	struct rec_buf plain;		/* decrypted, not yet taken */
	struct rec_buf out;		/* encrypted, not yet sent */
	uint32_t out_owed;		/* plaintext bytes `out` carries, returned once it is sent */
	char describe[64];
};

/* The suites this module speaks: TLS 1.3's three that every client offers. */
static const struct rec_suite {
	uint32_t id;
	const char *cipher, *md;
	uint8_t key_len;
} suites[] = {
	{ 0x03001301, "AES-128-GCM", "SHA256", 16 },
	{ 0x03001302, "AES-256-GCM", "SHA384", 32 },
	{ 0x03001303, "ChaCha20-Poly1305", "SHA256", 32 },
};

/* Process-wide (documented in the header): fetched algorithms, the key log's index, the scratch buffer. */
static struct {
	EVP_CIPHER *cipher[3];
	EVP_MD *md[3];
	int secrets_index;
	uint8_t *scratch;
} recg = { .secrets_index = -1 };

/* The traffic secrets the key log saw, until the handover. */
struct rec_secrets {
	uint8_t client[EVP_MAX_MD_SIZE], server[EVP_MAX_MD_SIZE];
	uint8_t client_len, server_len;
};

static void secrets_free(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx, long argl, void *argp)
{
	(void)parent;
	(void)ad;
	(void)idx;
	(void)argl;
	(void)argp;
	if (ptr)
		secret_clear(ptr, sizeof(struct rec_secrets));
	free(ptr);
}

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* "LABEL <client random hex> <secret hex>": the two application traffic secrets are kept. */
static void keylog(const SSL *ssl, const char *line)
{
	bool client = strncmp(line, "CLIENT_TRAFFIC_SECRET_0 ", 24) == 0;
	if (!client && strncmp(line, "SERVER_TRAFFIC_SECRET_0 ", 24) != 0)
		return;
	const char *hex = strchr(line + 24, ' ');
	if (!hex)
		return;
	hex++;
	size_t n = strlen(hex) / 2;
	if (n == 0 || n > EVP_MAX_MD_SIZE)
		return;
	struct rec_secrets *s = SSL_get_ex_data(ssl, recg.secrets_index);
	if (!s) {
		s = xcalloc(1, sizeof(*s));
		if (SSL_set_ex_data((SSL *)ssl, recg.secrets_index, s) != 1) {
			free(s);
			return;
		}
	}
	uint8_t *dst = client ? s->client : s->server;
	for (size_t i = 0; i < n; i++) {
		int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return;
		dst[i] = (uint8_t)(hi << 4 | lo);
	}
	if (client)
		s->client_len = (uint8_t)n;
	else
		s->server_len = (uint8_t)n;
}

void tls_record_prepare_ctx(SSL_CTX *ctx)
{
	if (recg.secrets_index < 0)
		recg.secrets_index = SSL_get_ex_new_index(0, NULL, NULL, NULL, secrets_free);
	for (size_t i = 0; i < ARRAY_SIZE(suites); i++) {
		if (!recg.cipher[i])
			recg.cipher[i] = EVP_CIPHER_fetch(NULL, suites[i].cipher, NULL);
		if (!recg.md[i])
			recg.md[i] = EVP_MD_fetch(NULL, suites[i].md, NULL);
	}
	/* A ticket would be written with the application key before the handover: sessions are not resumed anyway */
	SSL_CTX_set_num_tickets(ctx, 0);
	SSL_CTX_set_keylog_callback(ctx, keylog);
}

/* HKDF-Expand-Label(secret, label, "", len) for len at most the hash's size: one HMAC. */
static bool expand_label(const EVP_MD *md, const uint8_t *secret, size_t secret_len, const char *label,
			 uint8_t *out, size_t len)
{
	uint8_t info[2 + 1 + 6 + 32 + 1 + 1], mac[EVP_MAX_MD_SIZE];
	size_t label_len = strlen(label), at = 0;
	unsigned int mac_len = 0;
	info[at++] = (uint8_t)(len >> 8);
	info[at++] = (uint8_t)len;
	info[at++] = (uint8_t)(6 + label_len);
	memcpy(info + at, "tls13 ", 6);
	at += 6;
	memcpy(info + at, label, label_len);
	at += label_len;
	info[at++] = 0;		/* an empty context */
	info[at++] = 1;		/* HKDF-Expand's first block counter */
	if (!HMAC(md, secret, (int)secret_len, info, at, mac, &mac_len) || mac_len < len)
		return false;
	memcpy(out, mac, len);
	secret_clear(mac, sizeof(mac));
	return true;
}

/* The direction's key and IV from its secret; the sequence starts again at 0. */
static bool dir_set_secret(struct tls_record *r, struct rec_dir *d, const uint8_t *secret, bool encrypt)
{
	uint8_t key[32];
	memmove(d->secret, secret, r->hash_len);
	if (!expand_label(r->md, d->secret, r->hash_len, "key", key, r->key_len) ||
	    !expand_label(r->md, d->secret, r->hash_len, "iv", d->iv, sizeof(d->iv)))
		return false;
	if (!d->aead)
		d->aead = EVP_CIPHER_CTX_new();
	bool ok = d->aead && EVP_CipherInit_ex2(d->aead, r->cipher, key, NULL, encrypt ? 1 : 0, NULL) == 1;
	secret_clear(key, sizeof(key));
	d->seq = 0;
	return ok;
}

/* application_traffic_secret_N+1 (RFC 8446 section 7.2). */
static bool dir_update(struct tls_record *r, struct rec_dir *d, bool encrypt)
{
	uint8_t next[EVP_MAX_MD_SIZE];
	bool ok = expand_label(r->md, d->secret, r->hash_len, "traffic upd", next, r->hash_len) &&
		  dir_set_secret(r, d, next, encrypt);
	secret_clear(next, sizeof(next));
	return ok;
}

static void nonce_of(const struct rec_dir *d, uint8_t nonce[12])
{
	memcpy(nonce, d->iv, 12);
	for (int i = 0; i < 8; i++)
		nonce[11 - i] ^= (uint8_t)(d->seq >> (8 * i));
}

struct tls_record *tls_record_adopt(SSL *ssl, const char *describe, bool alpn_postgresql)
{
	struct rec_secrets *s = recg.secrets_index < 0 ? NULL : SSL_get_ex_data(ssl, recg.secrets_index);
	const SSL_CIPHER *c = SSL_get_current_cipher(ssl);
	if (!s || !s->client_len || s->client_len != s->server_len || !c || SSL_version(ssl) != TLS1_3_VERSION ||
	    SSL_has_pending(ssl) || SSL_get0_peer_certificate(ssl) || SSL_get_num_tickets(ssl) != 0)
		return NULL;
	size_t k = 0;
	while (k < ARRAY_SIZE(suites) && suites[k].id != SSL_CIPHER_get_id(c))
		k++;
	if (k == ARRAY_SIZE(suites) || !recg.cipher[k] || !recg.md[k] ||
	    EVP_MD_get_size(recg.md[k]) != s->client_len)
		return NULL;
	if (!recg.scratch)
		recg.scratch = xmalloc(SCRATCH_SIZE);
	struct tls_record *r = xcalloc(1, sizeof(*r));
	r->cipher = recg.cipher[k];
	r->md = recg.md[k];
	r->key_len = suites[k].key_len;
	r->hash_len = s->client_len;
	if (!dir_set_secret(r, &r->rd, s->client, false) || !dir_set_secret(r, &r->wr, s->server, true)) {
		tls_record_free(r);
		return NULL;
	}
	r->alpn_postgresql = alpn_postgresql;
	snprintf(r->describe, sizeof(r->describe), "%s", describe);
	const char *sni = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
	r->servername = sni ? xstrdup(sni) : NULL;
	r->ctx = SSL_get_SSL_CTX(ssl);
	SSL_CTX_up_ref(r->ctx);
	return r;
}

void tls_record_free(struct tls_record *r)
{
	if (!r)
		return;
	EVP_CIPHER_CTX_free(r->rd.aead);
	EVP_CIPHER_CTX_free(r->wr.aead);
	SSL_CTX_free(r->ctx);
	free(r->servername);
	free(r->raw.data);
	free(r->plain.data);
	free(r->out.data);
	secret_clear(r, sizeof(*r));
	free(r);
}

const char *tls_record_describe(const struct tls_record *r)
{
	return r->describe;
}

const char *tls_record_servername(const struct tls_record *r)
{
	return r->servername;
}

bool tls_record_alpn_postgresql(const struct tls_record *r)
{
	return r->alpn_postgresql;
}

SSL_CTX *tls_record_ctx(const struct tls_record *r)
{
	return r->ctx;
}

size_t tls_record_pending(const struct tls_record *r)
{
	return r->plain.len;
}

/* ---------------------------------------------------------------- sealing and opening */

/* Encrypts content + type at out + REC_HEADER (content may already be there); the record's length. */
static size_t seal(struct tls_record *r, uint8_t type, const uint8_t *content, size_t len, uint8_t *out)
{
	uint8_t nonce[12];
	size_t body = len + 1 + REC_TAG;
	int n = 0;
	out[0] = REC_APPDATA;
	out[1] = 3;
	out[2] = 3;
	out[3] = (uint8_t)(body >> 8);
	out[4] = (uint8_t)body;
	uint8_t *p = out + REC_HEADER;
	memmove(p, content, len);
	p[len] = type;
	nonce_of(&r->wr, nonce);
	r->wr.seq++;
	if (EVP_CipherInit_ex2(r->wr.aead, NULL, NULL, nonce, 1, NULL) != 1 ||
	    EVP_CipherUpdate(r->wr.aead, NULL, &n, out, REC_HEADER) != 1 ||
	    EVP_CipherUpdate(r->wr.aead, p, &n, p, (int)len + 1) != 1 ||
	    EVP_CipherFinal_ex(r->wr.aead, p + len + 1, &n) != 1 ||
	    EVP_CIPHER_CTX_ctrl(r->wr.aead, EVP_CTRL_AEAD_GET_TAG, REC_TAG, p + len + 1) != 1)
		return 0;
	return REC_HEADER + body;
}

/*
 * Decrypts the record at rec (header and body, whole) in place; its
 * content's type and length, the content at rec + REC_HEADER. -1 when it
 * does not authenticate or is malformed.
 */
static int open_record(struct tls_record *r, uint8_t *rec, size_t body, size_t *content_len)
{
	uint8_t nonce[12];
	int n = 0;
	if (rec[0] != REC_APPDATA || body < REC_TAG + 1 || body > REC_CIPHER_MAX)
		return -1;
	uint8_t *p = rec + REC_HEADER;
	size_t clen = body - REC_TAG;
	nonce_of(&r->rd, nonce);
	r->rd.seq++;
	if (EVP_CipherInit_ex2(r->rd.aead, NULL, NULL, nonce, 0, NULL) != 1 ||
	    EVP_CIPHER_CTX_ctrl(r->rd.aead, EVP_CTRL_AEAD_SET_TAG, REC_TAG, p + clen) != 1 ||
	    EVP_CipherUpdate(r->rd.aead, NULL, &n, rec, REC_HEADER) != 1 ||
	    EVP_CipherUpdate(r->rd.aead, p, &n, p, (int)clen) != 1 || EVP_CipherFinal_ex(r->rd.aead, p + clen, &n) != 1)
		return -1;
	while (clen > 0 && p[clen - 1] == 0)	/* the peer's padding */
		clen--;
	if (clen == 0 || clen - 1 > REC_PLAIN_MAX)
		return -1;
	*content_len = clen - 1;
	return p[clen - 1];
}

/* A post-handshake message: only KeyUpdate (RFC 8446 4.6.3) is allowed from a client. */
static bool on_handshake(struct tls_record *r, const uint8_t *msg, size_t len)
{
	if (len != 5 || msg[0] != 24 || msg[1] != 0 || msg[2] != 0 || msg[3] != 1 || msg[4] > 1)
		return false;
	if (!dir_update(r, &r->rd, false))
		return false;
	if (msg[4] == 1)
		r->owe_key_update = true;	/* ours goes before our next record */
	return true;
}

/* Appends to a connection's buffer (kept only while it holds something). */
static void buf_append(struct rec_buf *b, const uint8_t *data, size_t len)
{
	if (!len)
		return;
	uint8_t *grown = xmalloc(b->len + len);
	if (b->len)
		memcpy(grown, b->data + b->off, b->len);
	memcpy(grown + b->len, data, len);
	free(b->data);
	b->data = grown;
	b->off = 0;
	b->len += (uint32_t)len;
}

static size_t buf_take(struct rec_buf *b, uint8_t *dst, size_t len)
{
	if (!b->len || !len)
		return 0;
	size_t n = MIN(len, (size_t)b->len);
	memcpy(dst, b->data + b->off, n);
	b->off += (uint32_t)n;
	b->len -= (uint32_t)n;
	if (!b->len) {
		free(b->data);
		*b = (struct rec_buf){ 0 };
	}
	return n;
}

/* ---------------------------------------------------------------- reading */

/*
 * The whole records in scratch[0, have): application data to dst (up to
 * room, the rest kept in r->plain), the incomplete tail kept in r->raw.
 * Bytes given to dst, or -1 (EPROTO) on a bad record or an alert other
 * than close_notify.
 */
static ssize_t open_records(struct tls_record *r, uint8_t *scratch, size_t have, uint8_t *dst, size_t room)
{
	size_t at = 0, given = 0;
	while (have - at >= REC_HEADER && !r->closed) {
		uint8_t *rec = scratch + at;
		size_t body = (size_t)rec[3] << 8 | rec[4];
		if (body > REC_CIPHER_MAX)
			return errno = EPROTO, -1;
		if (have - at < REC_HEADER + body)
			break;
		at += REC_HEADER + body;
		size_t clen;
		int type = open_record(r, rec, body, &clen);
		const uint8_t *content = rec + REC_HEADER;
		if (type == REC_APPDATA) {
			size_t n = MIN(clen, room - given);
			memcpy(dst + given, content, n);
			given += n;
			if (n < clen)
				buf_append(&r->plain, content + n, clen - n);
		} else if (type == REC_ALERT && clen == 2 && content[1] == 0) {
			r->closed = true;	/* close_notify: what follows is ignored */
		} else if (type != REC_HANDSHAKE || !on_handshake(r, content, clen)) {
			return errno = EPROTO, -1;
		}
	}
	if (at < have && !r->closed)
		buf_append(&r->raw, scratch + at, have - at);
	return (ssize_t)given;
}

ssize_t tls_record_read(struct tls_record *r, int fd, void *buf, size_t len)
{
	uint8_t *dst = buf;
	size_t given = buf_take(&r->plain, dst, len);
	if (given == len || r->closed)
		return given || len == 0 ? (ssize_t)given : 0;
	for (;;) {
		/* a partial record first, then what the socket has */
		uint8_t *scratch = recg.scratch;
		size_t have = buf_take(&r->raw, scratch, SIZE_MAX);
		/* at most one record past the caller's room: more would only be copied aside */
		size_t want = MIN(SCRATCH_SIZE - have, len - given + REC_HEADER + REC_CIPHER_MAX);
		ssize_t n = recv(fd, scratch + have, want, 0);
		if (n <= 0) {
			int err = errno;
			if (have)
				buf_append(&r->raw, scratch, have);
			if (given)
				return (ssize_t)given;
			if (n == 0)
				return r->raw.len ? (errno = EPROTO, -1) : 0;	/* EOF inside a record: truncated */
			errno = err;
			return -1;
		}
		ssize_t got = open_records(r, scratch, have + (size_t)n, dst + given, len - given);
		if (got < 0)
			return -1;
		given += (size_t)got;
		if (given || r->closed)
			return (ssize_t)given;
	}
}

/* ---------------------------------------------------------------- writing */

/* Sends r->out; true when all of it is gone. */
static bool flush_out(struct tls_record *r, int fd)
{
	while (r->out.len) {
		ssize_t n = send(fd, r->out.data + r->out.off, r->out.len, MSG_NOSIGNAL);
		if (n <= 0)
			return false;
		r->out.off += (uint32_t)n;
		r->out.len -= (uint32_t)n;
	}
	free(r->out.data);
	r->out = (struct rec_buf){ 0 };
	return true;
}

/* Our KeyUpdate, owed since the peer asked, sealed with the old key into out; its length. */
static size_t seal_key_update(struct tls_record *r, uint8_t *out)
{
	static const uint8_t key_update[5] = { 24, 0, 0, 1, 0 };	/* update_not_requested */
	size_t n = seal(r, REC_HANDSHAKE, key_update, sizeof(key_update), out);
	if (!n || !dir_update(r, &r->wr, true))
		return 0;
	r->owe_key_update = false;
	return n;
}

ssize_t tls_record_write(struct tls_record *r, int fd, const void *buf, size_t len)
{
	if (r->out.len || r->out_owed) {
		if (!flush_out(r, fd))
			return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? (errno = EAGAIN, -1) : -1;
		size_t owed = r->out_owed;
		r->out_owed = 0;
		if (owed > len)
			return errno = EPROTO, -1;	/* the caller did not come back with the same bytes */
		if (owed)
			return (ssize_t)owed;
	}
	uint8_t *scratch = recg.scratch;
	const uint8_t *src = buf;
	size_t at = 0, taken = 0;
	if (r->owe_key_update && !(at = seal_key_update(r, scratch)))
		return errno = EPROTO, -1;
	for (int i = 0; i < REC_WRITE_RECORDS && taken < len; i++) {
		size_t piece = MIN(len - taken, (size_t)REC_PLAIN_MAX);
		size_t n = seal(r, REC_APPDATA, src + taken, piece, scratch + at);
		if (!n)
			return errno = EPROTO, -1;
		at += n;
		taken += piece;
	}
	ssize_t sent = send(fd, scratch, at, MSG_NOSIGNAL);
	if (sent == (ssize_t)at)
		return (ssize_t)taken;
	if (sent < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
		return -1;
	/* sealed and numbered: they go out as they are, and the caller hears of them once they have */
	size_t done = sent > 0 ? (size_t)sent : 0;
	buf_append(&r->out, scratch + done, at - done);
	r->out_owed = (uint32_t)taken;
	errno = EAGAIN;
	return -1;
}

void tls_record_close_notify(struct tls_record *r, int fd)
{
	static const uint8_t close_notify[2] = { 1, 0 };
	uint8_t rec[REC_HEADER + 2 + 1 + REC_TAG];
	if (r->out.len || r->out_owed || r->owe_key_update)
		return;	/* a close_notify must follow what is owed: skipped, the close says enough */
	size_t n = seal(r, REC_ALERT, close_notify, sizeof(close_notify), rec);
	if (n)
		(void)send(fd, rec, n, MSG_NOSIGNAL | MSG_DONTWAIT);
}
