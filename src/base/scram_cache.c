/*
 * scram_cache.c - the per-instance mock-salt secret and the cache of keys
 * derived from plain-text passwords (see scram_cache.h for the contract).
 *
 * Owns the secret and the entries; touches nothing else. An entry is found
 * by (kind, owner, salt, iterations) through a chained hash table and sits
 * on an LRU list; its password fingerprint decides whether it still fits.
 * The fingerprint is an HMAC keyed by the instance secret, so the cache
 * holds no unsalted hash of a password that could be looked up in a table.
 */
#include "common.h"
#include "auth_file.h"
#include "crypto.h"
#include "list.h"
#include "scram.h"
#include "scram_cache.h"

#include <openssl/crypto.h>

#define INSTANCE_SECRET_LEN 32
#define MOCK_SALT_LABEL "mock salt"
#define FINGERPRINT_LABEL "password"

struct cache_entry {
	struct cache_entry *next;	/* hash chain */
	struct list_node lru;		/* cache.lru: least recently used first */
	uint64_t hash;
	enum scram_cache_kind kind;
	int iterations;
	int salt_len;
	uint8_t salt[64];
	uint8_t fingerprint[CRYPTO_SHA256_LEN];
	struct scram_keys keys;
	char owner[];
};

static struct {
	bool have_secret;
	uint8_t secret[INSTANCE_SECRET_LEN];
	struct cache_entry **buckets;
	size_t nbuckets;	/* power of two, or 0 before the first entry */
	struct list lru;
	bool lru_ready;
	uint64_t derivations;
	uint64_t hits;
} cache;

void scram_cache_init_instance(void)
{
	if (cache.have_secret)
		return;
	crypto_random(cache.secret, sizeof(cache.secret));
	cache.have_secret = true;
}

/* HMAC-SHA-256(instance secret, label || data). */
static void keyed_hash(const char *label, const void *data, size_t len, uint8_t out[CRYPTO_SHA256_LEN])
{
	uint8_t msg[16 + 2048];
	size_t llen = strlen(label) + 1;	/* the NUL separates label and data */

	scram_cache_init_instance();
	if (len > sizeof(msg) - llen) {
		/* longer than any user name and most passwords: hash it first (the stack stays small) */
		uint8_t digest[CRYPTO_SHA256_LEN];
		crypto_sha256(data, len, digest);
		keyed_hash(label, digest, sizeof(digest), out);
		secret_clear(digest, sizeof(digest));
		return;
	}
	memcpy(msg, label, llen);
	memcpy(msg + llen, data, len);
	crypto_hmac_sha256(cache.secret, sizeof(cache.secret), msg, llen + len, out);
	secret_clear(msg, llen + len);
}

void scram_cache_mock_salt(const char *user, uint8_t salt[SCRAM_MOCK_SALT_LEN])
{
	uint8_t digest[CRYPTO_SHA256_LEN];
	keyed_hash(MOCK_SALT_LABEL, user, strlen(user), digest);
	memcpy(salt, digest, SCRAM_MOCK_SALT_LEN);
}

/* FNV-1a over the lookup key; owners are configured names or known users, never arbitrary input. */
static uint64_t entry_hash(enum scram_cache_kind kind, const char *owner, const uint8_t *salt, size_t saltlen,
			   int iterations)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	const uint8_t k = (uint8_t)kind;
#define MIX(p, n) for (size_t i_ = 0; i_ < (n); i_++) { h ^= ((const uint8_t *)(p))[i_]; h *= 0x100000001b3ULL; }
	MIX(&k, 1);
	MIX(owner, strlen(owner) + 1);
	MIX(salt, saltlen);
	MIX(&iterations, sizeof(iterations));
#undef MIX
	return h;
}

static struct cache_entry **bucket_of(uint64_t hash)
{
	return &cache.buckets[hash & (cache.nbuckets - 1)];
}

static void unlink_from_bucket(struct cache_entry *e)
{
	for (struct cache_entry **pp = bucket_of(e->hash); *pp; pp = &(*pp)->next) {
		if (*pp == e) {
			*pp = e->next;
			return;
		}
	}
}

static void entry_free(struct cache_entry *e)
{
	unlink_from_bucket(e);
	list_remove(&cache.lru, &e->lru);
	secret_clear(e, sizeof(*e) + strlen(e->owner));
	free(e);
}

static void grow_buckets(void)
{
	size_t n = cache.nbuckets ? cache.nbuckets * 2 : 64;
	struct cache_entry **b = xcalloc(n, sizeof(*b));
	for (size_t i = 0; i < cache.nbuckets; i++) {
		for (struct cache_entry *e = cache.buckets[i], *next; e; e = next) {
			next = e->next;
			e->next = b[e->hash & (n - 1)];
			b[e->hash & (n - 1)] = e;
		}
	}
	free(cache.buckets);
	cache.buckets = b;
	cache.nbuckets = n;
}

static struct cache_entry *find_entry(uint64_t hash, enum scram_cache_kind kind, const char *owner,
				      const uint8_t *salt, size_t saltlen, int iterations)
{
	if (!cache.nbuckets)
		return NULL;
	for (struct cache_entry *e = *bucket_of(hash); e; e = e->next) {
		if (e->hash == hash && e->kind == kind && e->iterations == iterations &&
		    (size_t)e->salt_len == saltlen && memcmp(e->salt, salt, saltlen) == 0 &&
		    strcmp(e->owner, owner) == 0)
			return e;
	}
	return NULL;
}

void scram_cache_get_keys(enum scram_cache_kind kind, const char *owner, const char *password,
			  const uint8_t *salt, size_t saltlen, int iterations, struct scram_keys *out)
{
	uint8_t fp[CRYPTO_SHA256_LEN];
	struct cache_entry *e;

	if (!cache.lru_ready) {
		list_init(&cache.lru);
		cache.lru_ready = true;
	}
	if (saltlen > sizeof(e->salt)) {	/* not cacheable; servers send 16 bytes */
		cache.derivations++;
		scram_keys_derive(password, salt, saltlen, iterations, out);
		return;
	}
	keyed_hash(FINGERPRINT_LABEL, password, strlen(password), fp);
	uint64_t hash = entry_hash(kind, owner, salt, saltlen, iterations);
	e = find_entry(hash, kind, owner, salt, saltlen, iterations);
	if (e && secure_equal(e->fingerprint, fp, sizeof(fp))) {
		cache.hits++;
		list_remove(&cache.lru, &e->lru);
		list_append(&cache.lru, &e->lru);
		*out = e->keys;
		secret_clear(fp, sizeof(fp));
		return;
	}
	/* A changed password for this owner, salt and count replaces the old keys. */
	if (e)
		entry_free(e);
	cache.derivations++;
	scram_keys_derive(password, salt, saltlen, iterations, out);

	if (cache.lru.count >= SCRAM_CACHE_MAX)
		entry_free(container_of(list_first(&cache.lru), struct cache_entry, lru));
	if (cache.lru.count + 1 > cache.nbuckets)
		grow_buckets();
	size_t olen = strlen(owner);
	e = xcalloc(1, sizeof(*e) + olen + 1);
	e->hash = hash;
	e->kind = kind;
	e->iterations = iterations;
	e->salt_len = (int)saltlen;
	memcpy(e->salt, salt, saltlen);
	memcpy(e->fingerprint, fp, sizeof(fp));
	e->keys = *out;
	memcpy(e->owner, owner, olen + 1);
	e->next = *bucket_of(hash);
	*bucket_of(hash) = e;
	list_append(&cache.lru, &e->lru);
	secret_clear(fp, sizeof(fp));
}

void scram_cache_server_keys(void *arg, const char *password, const uint8_t *salt, size_t saltlen,
			     int iterations, struct scram_keys *out)
{
	scram_cache_get_keys(SCRAM_CACHE_SERVER_LOGIN, arg, password, salt, saltlen, iterations, out);
}

void scram_cache_clear(void)
{
	if (!cache.lru_ready)
		return;
	while (cache.lru.count)
		entry_free(container_of(list_first(&cache.lru), struct cache_entry, lru));
	free(cache.buckets);
	cache.buckets = NULL;
	cache.nbuckets = 0;
}

void scram_cache_get_stats(struct scram_cache_stats *out)
{
	out->entries = cache.lru_ready ? cache.lru.count : 0;
	out->derivations = cache.derivations;
	out->hits = cache.hits;
}
