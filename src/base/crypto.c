/*
 * crypto.c - md5 password hashing, random bytes, base64 and the SCRAM-SHA-256
 * primitives, on OpenSSL 3 (EVP digests and PKCS5_PBKDF2_HMAC only; no
 * deprecated low-level digest APIs; HMAC built on the EVP digest).
 *
 * State: the OpenSSL digest objects it fetches once, and a block of
 * kernel randomness (see below). Logs nothing except a fatal line when OpenSSL
 * cannot do what must not fail (digest, HMAC, RNG).
 */
#include "common.h"
#include "log.h"
#include "crypto.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <sys/random.h>

static const char hex_digits[] = "0123456789abcdef";

static void hex_encode(const uint8_t *in, size_t len, char *out)
{
	for (size_t i = 0; i < len; i++) {
		out[2 * i] = hex_digits[in[i] >> 4];
		out[2 * i + 1] = hex_digits[in[i] & 0x0f];
	}
}

/*
 * The MD5 implementation and a context, fetched once: OpenSSL 3 looks up
 * the provider on every implicit fetch, which costs more than the digest
 * itself. Process state of this module; one thread.
 */
static struct {
	EVP_MD *md5;
	EVP_MD_CTX *ctx;
} md5_cache;

/*
 * The SHA-256 implementation and a context, fetched once for the same
 * reason as MD5 above: a SCRAM login runs about five HMACs and a digest.
 * HMAC is built on this context (RFC 2104) rather than on EVP_MAC, whose
 * init looks the digest up by name again on every call and cost a SCRAM
 * login more than its two extra system calls.
 */
static struct {
	EVP_MD *sha256;
	EVP_MD_CTX *md_ctx;
} sha_cache;

static void sha_cache_load(void)
{
	if (sha_cache.md_ctx)
		return;
	sha_cache.sha256 = EVP_MD_fetch(NULL, "SHA256", NULL);
	sha_cache.md_ctx = EVP_MD_CTX_new();
	if (!sha_cache.sha256 || !sha_cache.md_ctx)
		die("OpenSSL has no SHA-256 (is the default provider available?)");
}

/* "md5" + hex(md5(a || b)) into out[36]. */
static void md5_hex_of_two(const void *a, size_t alen, const void *b, size_t blen, char out[36])
{
	uint8_t digest[EVP_MAX_MD_SIZE];
	unsigned int dlen = 0;

	if (!md5_cache.md5) {
		md5_cache.md5 = EVP_MD_fetch(NULL, "MD5", NULL);
		md5_cache.ctx = EVP_MD_CTX_new();
	}
	EVP_MD_CTX *ctx = md5_cache.ctx;
	if (!md5_cache.md5 || !ctx
	    || EVP_DigestInit_ex2(ctx, md5_cache.md5, NULL) != 1
	    || EVP_DigestUpdate(ctx, a, alen) != 1
	    || EVP_DigestUpdate(ctx, b, blen) != 1
	    || EVP_DigestFinal_ex(ctx, digest, &dlen) != 1
	    || dlen != 16)
		die("OpenSSL cannot compute MD5 (is the default provider available?)");
	memcpy(out, "md5", 3);
	hex_encode(digest, 16, out + 3);
	out[MD5_PASSWD_LEN] = '\0';
}

void crypto_md5_password(const char *password, const char *user, char out[36])
{
	md5_hex_of_two(password, strlen(password), user, strlen(user), out);
}

void crypto_md5_response(const char md5_secret[36], const uint8_t salt[4], char out[36])
{
	md5_hex_of_two(md5_secret + 3, MD5_PASSWD_LEN - 3, salt, 4, out);
}

/*
 * Random bytes for salts, nonces and cancel keys, drawn from the kernel in
 * blocks: a login needs about 12 bytes, and one getrandom() per call (what
 * glibc 2.36's arc4random_buf does) showed up in every connection's system
 * calls. Bytes handed out are wiped from the block at once. A forked child
 * (a worker) must never hand out its parent's bytes: the block is dropped
 * in the child.
 */
static struct {
	uint8_t block[512];
	size_t left;		/* unused bytes at the end of block */
	bool atfork_set;
} rnd;

static void random_drop_block(void)
{
	secret_clear(rnd.block, sizeof(rnd.block));
	rnd.left = 0;
}

static void random_fill(void *buf, size_t len)
{
	uint8_t *p = buf;
	while (len > 0) {
		ssize_t n = getrandom(p, len, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			die("getrandom: %s", strerror(errno));
		}
		p += n;
		len -= (size_t)n;
	}
}

void crypto_random(void *buf, size_t len)
{
	if (!rnd.atfork_set) {
		pthread_atfork(NULL, NULL, random_drop_block);
		rnd.atfork_set = true;
	}
	if (len > sizeof(rnd.block) / 4) {
		random_fill(buf, len);
		return;
	}
	if (rnd.left < len) {
		random_fill(rnd.block, sizeof(rnd.block));
		rnd.left = sizeof(rnd.block);
	}
	uint8_t *from = rnd.block + sizeof(rnd.block) - rnd.left;
	memcpy(buf, from, len);
	secret_clear(from, len);
	rnd.left -= len;
}

void crypto_cleanup(void)
{
	random_drop_block();
	EVP_MD_free(md5_cache.md5);
	EVP_MD_CTX_free(md5_cache.ctx);
	md5_cache.md5 = NULL;
	md5_cache.ctx = NULL;
	EVP_MD_CTX_free(sha_cache.md_ctx);
	EVP_MD_free(sha_cache.sha256);
	memset(&sha_cache, 0, sizeof(sha_cache));
}

int crypto_b64_encode(const uint8_t *in, size_t len, char *out, size_t outsize)
{
	if (len > (size_t)INT32_MAX / 2 || CRYPTO_B64_ENC_LEN(len) + 1 > outsize)
		return -1;
	return EVP_EncodeBlock((unsigned char *)out, in, (int)len);
}

/* Value of a base64 alphabet character, or -1. */
static int b64_value(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

/*
 * Own decoder rather than EVP_DecodeBlock: that one skips whitespace and
 * returns padding bytes as output, and we want a strict yes/no, with one
 * accepted spelling per byte string.
 */
int crypto_b64_decode(const char *in, size_t len, uint8_t *out, size_t outsize)
{
	size_t pad = 0, outlen;

	if (len % 4 != 0 || len > (size_t)INT32_MAX)
		return -1;
	if (len > 0 && in[len - 1] == '=')
		pad = (len > 1 && in[len - 2] == '=') ? 2 : 1;
	outlen = len / 4 * 3 - pad;
	if (outlen > outsize)
		return -1;

	size_t o = 0;
	for (size_t i = 0; i < len; i += 4) {
		int v[4];
		bool last = i + 4 == len;
		for (int k = 0; k < 4; k++) {
			unsigned char c = (unsigned char)in[i + k];
			if (c == '=' && last && k >= 4 - (int)pad)
				v[k] = 0;
			else if ((v[k] = b64_value(c)) < 0)
				return -1;
		}
		uint32_t group = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
		/* Canonical form only: the bits padding leaves over must be zero. */
		if (last && (pad == 2 ? group & 0xffff : pad == 1 ? group & 0xff : 0))
			return -1;
		out[o++] = (uint8_t)(group >> 16);
		if (!last || pad < 2)
			out[o++] = (uint8_t)(group >> 8);
		if (!last || pad < 1)
			out[o++] = (uint8_t)group;
	}
	return (int)o;
}

#define SHA256_BLOCK_LEN 64

/* SHA-256(a || b) on the cached context. */
static void sha256_of_two(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen, uint8_t out[32])
{
	unsigned int outlen = 0;

	sha_cache_load();
	if (EVP_DigestInit_ex2(sha_cache.md_ctx, sha_cache.sha256, NULL) != 1
	    || EVP_DigestUpdate(sha_cache.md_ctx, a, alen) != 1
	    || (blen && EVP_DigestUpdate(sha_cache.md_ctx, b, blen) != 1)
	    || EVP_DigestFinal_ex(sha_cache.md_ctx, out, &outlen) != 1
	    || outlen != CRYPTO_SHA256_LEN)
		die("OpenSSL cannot compute SHA-256");
}

/* RFC 2104: H((K ^ opad) || H((K ^ ipad) || msg)), a key longer than a block hashed first. */
void crypto_hmac_sha256(const uint8_t *key, size_t keylen, const uint8_t *msg, size_t msglen, uint8_t out[32])
{
	uint8_t k[SHA256_BLOCK_LEN] = { 0 }, pad[SHA256_BLOCK_LEN], inner[CRYPTO_SHA256_LEN];

	if (keylen > SHA256_BLOCK_LEN)
		sha256_of_two(key, keylen, NULL, 0, k);
	else
		memcpy(k, key, keylen);
	for (int i = 0; i < SHA256_BLOCK_LEN; i++)
		pad[i] = k[i] ^ 0x36;
	sha256_of_two(pad, sizeof(pad), msg, msglen, inner);
	for (int i = 0; i < SHA256_BLOCK_LEN; i++)
		pad[i] = k[i] ^ 0x5c;
	sha256_of_two(pad, sizeof(pad), inner, sizeof(inner), out);
	secret_clear(k, sizeof(k));
	secret_clear(pad, sizeof(pad));
	secret_clear(inner, sizeof(inner));
}

void crypto_sha256(const uint8_t *msg, size_t len, uint8_t out[32])
{
	sha256_of_two(msg, len, NULL, 0, out);
}

void crypto_scram_salted_password(const char *password, const uint8_t *salt, size_t saltlen,
				  int iterations, uint8_t out[32])
{
	size_t plen = strlen(password);
	sha_cache_load();
	if (iterations <= 0 || plen > INT32_MAX || saltlen > INT32_MAX
	    || PKCS5_PBKDF2_HMAC(password, (int)plen, salt, (int)saltlen, iterations,
				 sha_cache.sha256, CRYPTO_SHA256_LEN, out) != 1)
		die("OpenSSL cannot compute PBKDF2-HMAC-SHA-256");
}
