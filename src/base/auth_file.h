/*
 * auth_file.h - the userlist loader (PgBouncer's auth_file format).
 *
 * Each line: "user" "secret" [anything ignored]; inside quotes "" is a
 * literal quote. Secrets are plain text, "md5" + 32 hex digits, or
 * "SCRAM-SHA-256$<iter>:<base64 salt>$<base64 StoredKey>:<base64 ServerKey>".
 * Blank lines and lines starting with ';' or '#' are skipped. A malformed
 * line (unterminated quote, missing secret, user name longer than 127 bytes,
 * secret longer than AUTH_SECRET_MAX - 1, unparsable SCRAM secret) logs a
 * warning with its line number - never its contents - and is skipped. When a
 * user appears twice, the later line wins.
 *
 * The store is immutable once loaded; reload builds a new one and swaps it.
 */
#ifndef PGVALVE_AUTH_FILE_H
#define PGVALVE_AUTH_FILE_H

#include "common.h"

#define AUTH_NAME_MAX 128		/* PgBouncer's MAX_USERNAME (PostgreSQL's own names stop at 63) */
/*
 * PgBouncer 1.26's MAX_PASSWORD: the longest password (with its NUL) a
 * PasswordMessage can still carry to PostgreSQL, which refuses an
 * authentication message longer than 65535 bytes (cloud IAM tokens).
 */
#define AUTH_SECRET_MAX 65531

enum secret_type {
	SECRET_NONE = 0,	/* user listed with an empty secret */
	SECRET_PLAIN,
	SECRET_MD5,		/* "md5" + hex(md5(password || user)) */
	SECRET_SCRAM,
};

struct scram_secret {
	int iterations;
	uint8_t salt[64];
	int salt_len;
	uint8_t stored_key[32];
	uint8_t server_key[32];
};

struct auth_secret {
	char user[AUTH_NAME_MAX];
	enum secret_type type;
	char *secret;			/* the text as written (heap; NULL only in a zeroed struct) */
	struct scram_secret scram;	/* decoded, when type == SECRET_SCRAM */
};

struct auth_store;

/*
 * Loads path into a new store. Returns NULL (and logs why) only when the
 * file cannot be read at all; malformed lines are skipped with a warning.
 */
struct auth_store *auth_file_load(const char *path);
/* Parses text already in memory; `origin` names it in warnings. Never NULL. */
struct auth_store *auth_file_parse(const char *text, size_t len, const char *origin);
void auth_store_free(struct auth_store *store);
const struct auth_secret *auth_store_find(const struct auth_store *store, const char *user);
size_t auth_store_count(const struct auth_store *store);
/* The i-th user (0 <= i < count), for listing; NULL past the end. */
const struct auth_secret *auth_store_entry(const struct auth_store *store, size_t i);

/*
 * Classifies and decodes a secret string into out (user and secret copied).
 * As PostgreSQL decides: "" is SECRET_NONE; "md5" + exactly 32 lowercase hex
 * digits is SECRET_MD5; anything else not starting with "SCRAM-SHA-256$" is
 * SECRET_PLAIN. Returns false if it claims to be SCRAM but is malformed, or if
 * user/secret do not fit (>= AUTH_NAME_MAX / AUTH_SECRET_MAX bytes); out is
 * zeroed then. A parsed secret owns a copy of the text: auth_secret_clear().
 */
bool auth_secret_parse(const char *user, const char *secret, struct auth_secret *out);
/* A deep copy of src into dst (dst's own text is not freed: clear it first). */
void auth_secret_copy(struct auth_secret *dst, const struct auth_secret *src);
/* Wipes and frees the text, and zeroes the struct. */
void auth_secret_clear(struct auth_secret *s);

#endif
