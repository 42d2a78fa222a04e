/*
 * scram_cache.h - the SCRAM state a pgvalve process shares between logins:
 * the per-instance secret mock salts are made from, and the keys derived
 * from plain-text passwords.
 *
 * Mock salts. A name with no SCRAM secret to offer (unknown user, md5
 * secret, auth_query with no row) is answered with the configured
 * scram_iterations and a salt that is stable for that name and unguessable
 * without the instance secret, as PostgreSQL's scram_mock_salt does with its
 * cluster nonce. A plain-text user's exchange uses the same salt, so the
 * server-first-message looks the same whether the name exists or not.
 *
 * The instance secret is drawn once, in the first process, before workers
 * are forked: every worker (and a worker restarted after a crash, forked
 * from the same supervisor) inherits it and gives the same salt for a
 * name. It lives in memory only, so a restart of pgvalve picks a new one.
 *
 * Derived keys. PBKDF2 with 4096 iterations costs about 1.4 ms, 25 times a
 * whole md5 login; the keys it gives depend only on (password, salt,
 * iterations). They are kept here per owner (a user name, for client or for
 * server logins) and that salt and count, with a fingerprint of the
 * password, and derived again when any of them changes. Entries are wiped
 * (secret_clear) when replaced, evicted (least recently used, above
 * SCRAM_CACHE_MAX) or cleared (reload), and never logged.
 *
 * Process state; one thread. Nothing here verifies a proof: callers still
 * run the full SCRAM check against the keys.
 */
#ifndef PGVALVE_SCRAM_CACHE_H
#define PGVALVE_SCRAM_CACHE_H

#include "common.h"
#include "scram.h"

#define SCRAM_CACHE_MAX 10000		/* entries per process, about 3 MB at most */
#define SCRAM_MOCK_SALT_LEN SCRAM_SALT_LEN	/* 16, as PostgreSQL's salts */

enum scram_cache_kind {
	SCRAM_CACHE_CLIENT_LOGIN = 'c',	/* keys for clients logging in as owner */
	SCRAM_CACHE_SERVER_LOGIN = 's',	/* keys for pgvalve logging in to servers as owner */
};

/* Draws the instance secret; call once, before forking workers. Later calls keep it. */
void scram_cache_init_instance(void);
/* The 16-byte mock salt for a name: HMAC-SHA-256(instance secret, "mock salt" || user), truncated. */
void scram_cache_mock_salt(const char *user, uint8_t salt[SCRAM_MOCK_SALT_LEN]);

/* The keys for (password, salt, iterations) of this owner: from the cache, or derived once and kept. */
void scram_cache_get_keys(enum scram_cache_kind kind, const char *owner, const char *password,
			  const uint8_t *salt, size_t saltlen, int iterations, struct scram_keys *out);
/* A scram_keys_fn for server logins: arg is the user name pgvalve logs in as. */
void scram_cache_server_keys(void *arg, const char *password, const uint8_t *salt, size_t saltlen,
			     int iterations, struct scram_keys *out);

/* Wipes and drops every entry (reload: secrets or scram_iterations may have changed). */
void scram_cache_clear(void);

/* For tests and SHOW-like reporting: entries held, and PBKDF2 runs / hits since start. */
struct scram_cache_stats {
	size_t entries;
	uint64_t derivations;
	uint64_t hits;
};
void scram_cache_get_stats(struct scram_cache_stats *out);

#endif
