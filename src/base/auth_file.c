/*
 * auth_file.c - loads PgBouncer's userlist.txt format into an immutable store.
 *
 * Owns struct auth_store: an array of secrets plus an open-addressing hash
 * index over user names. It parses and classifies secrets (including
 * decoding SCRAM secrets) but does no authentication itself and keeps no
 * global state. Warnings name the origin and line number and never quote a
 * field, so no secret text can reach the log.
 */
#include "common.h"
#include "log.h"
#include "crypto.h"
#include "auth_file.h"

#include <ctype.h>
#include <fcntl.h>
#include <limits.h>
#include <unistd.h>
#include <sys/stat.h>

#include <openssl/crypto.h>

#define SCRAM_PREFIX "SCRAM-SHA-256$"

struct auth_store {
	struct auth_secret *entries;
	size_t count;
	size_t cap;
	uint32_t *slots;	/* entry index + 1; 0 = empty */
	size_t nslots;		/* power of two, kept at least twice count */
};

/* ------------------------------------------------------------ secrets */

static bool is_md5_secret(const char *s)
{
	if (strncmp(s, "md5", 3) != 0 || strlen(s) != MD5_PASSWD_LEN)
		return false;
	/* PostgreSQL accepts only the lowercase digits it generates. */
	return strspn(s + 3, "0123456789abcdef") == MD5_PASSWD_LEN - 3;
}

/* Decodes base64 text [p, end) into out; true if it is exactly want bytes (or 1..max when want == 0). */
static bool decode_field(const char *p, const char *end, uint8_t *out, size_t max, size_t want, int *got)
{
	int n = crypto_b64_decode(p, (size_t)(end - p), out, max);
	if (n <= 0 || (want && (size_t)n != want))
		return false;
	if (got)
		*got = n;
	return true;
}

/* "SCRAM-SHA-256$<iter>:<salt>$<StoredKey>:<ServerKey>", as PostgreSQL stores it. */
static bool parse_scram_secret(const char *s, struct scram_secret *out)
{
	const char *p = s + strlen(SCRAM_PREFIX);
	const char *colon1 = strchr(p, ':');
	const char *dollar = colon1 ? strchr(colon1 + 1, '$') : NULL;
	const char *colon2 = dollar ? strchr(dollar + 1, ':') : NULL;
	const char *end = s + strlen(s);
	long iter = 0;

	if (!colon2 || colon1 == p || strchr(colon2 + 1, ':') || strchr(colon2 + 1, '$'))
		return false;
	for (const char *q = p; q < colon1; q++) {
		if (!isdigit((unsigned char)*q))
			return false;
		iter = iter * 10 + (*q - '0');
		if (iter > INT_MAX)
			return false;
	}
	if (iter <= 0)
		return false;
	out->iterations = (int)iter;
	return decode_field(colon1 + 1, dollar, out->salt, sizeof(out->salt), 0, &out->salt_len)
		&& decode_field(dollar + 1, colon2, out->stored_key, sizeof(out->stored_key), 32, NULL)
		&& decode_field(colon2 + 1, end, out->server_key, sizeof(out->server_key), 32, NULL);
}

bool auth_secret_parse(const char *user, const char *secret, struct auth_secret *out)
{
	memset(out, 0, sizeof(*out));
	if (strlen(user) >= sizeof(out->user) || strlen(secret) >= AUTH_SECRET_MAX)
		return false;
	if (secret[0] == '\0') {
		out->type = SECRET_NONE;
	} else if (strncmp(secret, SCRAM_PREFIX, strlen(SCRAM_PREFIX)) == 0) {
		if (!parse_scram_secret(secret, &out->scram)) {
			secret_clear(out, sizeof(*out));
			return false;
		}
		out->type = SECRET_SCRAM;
	} else if (is_md5_secret(secret)) {
		out->type = SECRET_MD5;
	} else {
		out->type = SECRET_PLAIN;
	}
	strlcpy_s(out->user, user, sizeof(out->user));
	out->secret = xstrdup(secret);
	return true;
}

void auth_secret_copy(struct auth_secret *dst, const struct auth_secret *src)
{
	*dst = *src;
	dst->secret = src->secret ? xstrdup(src->secret) : NULL;
}

void auth_secret_clear(struct auth_secret *s)
{
	if (s->secret) {
		secret_clear(s->secret, strlen(s->secret));
		free(s->secret);
	}
	secret_clear(s, sizeof(*s));
}

/* ------------------------------------------------------------ hash index */

/* FNV-1a: user names come from the operator's file, not from the network. */
static uint64_t hash_name(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 0x100000001b3ULL;
	}
	return h;
}

/* Slot holding user, or the empty slot where it would go. */
static uint32_t *store_slot(const struct auth_store *store, const char *user)
{
	size_t mask = store->nslots - 1;
	for (size_t i = hash_name(user) & mask;; i = (i + 1) & mask) {
		uint32_t *slot = &store->slots[i];
		if (*slot == 0 || strcmp(store->entries[*slot - 1].user, user) == 0)
			return slot;
	}
}

static void store_rehash(struct auth_store *store, size_t nslots)
{
	free(store->slots);
	store->slots = xcalloc(nslots, sizeof(*store->slots));
	store->nslots = nslots;
	for (size_t i = 0; i < store->count; i++)
		*store_slot(store, store->entries[i].user) = (uint32_t)(i + 1);
}

/* Adds or replaces (later lines win) the secret for its user; the store takes its text (*secret is zeroed). */
static void store_put(struct auth_store *store, struct auth_secret *secret)
{
	uint32_t *slot = store_slot(store, secret->user);
	if (*slot) {
		auth_secret_clear(&store->entries[*slot - 1]);
		store->entries[*slot - 1] = *secret;
		memset(secret, 0, sizeof(*secret));
		return;
	}
	if (store->count == store->cap) {
		store->cap = store->cap ? store->cap * 2 : 64;
		store->entries = xrealloc(store->entries, store->cap * sizeof(*store->entries));
	}
	store->entries[store->count++] = *secret;
	memset(secret, 0, sizeof(*secret));
	*slot = (uint32_t)store->count;
	if (store->count * 2 > store->nslots)
		store_rehash(store, store->nslots * 2);
}

const struct auth_secret *auth_store_find(const struct auth_store *store, const char *user)
{
	if (!store || !user)
		return NULL;
	uint32_t slot = *store_slot(store, user);
	return slot ? &store->entries[slot - 1] : NULL;
}

size_t auth_store_count(const struct auth_store *store)
{
	return store ? store->count : 0;
}

const struct auth_secret *auth_store_entry(const struct auth_store *store, size_t i)
{
	return store && i < store->count ? &store->entries[i] : NULL;
}

void auth_store_free(struct auth_store *store)
{
	if (!store)
		return;
	for (size_t i = 0; i < store->count; i++)
		auth_secret_clear(&store->entries[i]);
	free(store->entries);
	free(store->slots);
	free(store);
}

/* ------------------------------------------------------------ parser */

static bool is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v';
}

/*
 * Reads a quoted field starting at *pp (which must point at '"') within
 * [*pp, end) into out (size outsize), un-doubling "" into ".
 * Returns NULL on success, else the reason; *pp moves past the closing quote.
 * out is NUL-terminated either way: the caller wipes what it holds.
 */
static const char *read_quoted(const char **pp, const char *end, char *out, size_t outsize, const char *what_long)
{
	const char *p = *pp + 1;
	size_t n = 0;
	bool too_long = false;
	const char *bad = NULL;

	for (;;) {
		if (p >= end) {
			bad = "unterminated quoted field";
			break;
		}
		if (*p == '"') {
			if (p + 1 < end && p[1] == '"') {
				p++;
			} else {
				p++;
				break;
			}
		} else if (*p == '\0') {
			bad = "NUL byte in quoted field";
			break;
		}
		if (n + 1 < outsize)
			out[n++] = *p;
		else
			too_long = true;
		p++;
	}
	out[n] = '\0';
	if (bad)
		return bad;
	*pp = p;
	return too_long ? what_long : NULL;
}

/*
 * Parses one line [p, end) (no newline). Returns true with *out filled, or
 * false with *why set (NULL when the line is blank or a comment). secret:
 * the caller's AUTH_SECRET_MAX bytes of scratch space (wiped here).
 */
static bool parse_line(const char *p, const char *end, struct auth_secret *out, char *secret, const char **why)
{
	char user[AUTH_NAME_MAX];

	*why = NULL;
	while (p < end && is_blank(*p))
		p++;
	if (p == end || *p == ';' || *p == '#')
		return false;
	if (*p != '"') {
		*why = "expected a quoted user name";
		return false;
	}
	if ((*why = read_quoted(&p, end, user, sizeof(user), "user name longer than 127 bytes")))
		return false;
	if (user[0] == '\0') {
		*why = "empty user name";
		return false;
	}
	while (p < end && is_blank(*p))
		p++;
	if (p == end || *p != '"') {
		*why = "expected a quoted secret after the user name";
		return false;
	}
	*why = read_quoted(&p, end, secret, AUTH_SECRET_MAX, "secret too long");
	if (!*why && !auth_secret_parse(user, secret, out))
		*why = "invalid SCRAM secret";
	secret_clear(secret, strnlen(secret, AUTH_SECRET_MAX));
	return *why == NULL;
}

struct auth_store *auth_file_parse(const char *text, size_t len, const char *origin)
{
	struct auth_store *store = xcalloc(1, sizeof(*store));
	const char *p = text, *end = text + len;
	struct auth_secret entry;
	char *secret = xmalloc(AUTH_SECRET_MAX);
	int lineno = 0;

	store->nslots = 128;
	store->slots = xcalloc(store->nslots, sizeof(*store->slots));
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *eol = nl ? nl : end;
		const char *why;

		lineno++;
		secret[0] = '\0';
		if (parse_line(p, eol, &entry, secret, &why))
			store_put(store, &entry);
		else if (why)
			log_warning("%s:%d: %s, line skipped", origin, lineno, why);
		p = nl ? nl + 1 : end;
	}
	free(secret);
	if (store->count && store->count < store->cap) {
		store->entries = xrealloc(store->entries, store->count * sizeof(*store->entries));
		store->cap = store->count;
	}
	return store;
}

/* Reads the whole file into a new NUL-terminated buffer; NULL with errno set on failure. */
static char *read_file(const char *path, size_t *lenp)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	size_t cap, len = 0;
	char *buf;

	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) < 0) {
		int e = errno;
		close(fd);
		errno = e;
		return NULL;
	}
	if (S_ISDIR(st.st_mode)) {
		close(fd);
		errno = EISDIR;
		return NULL;
	}
	cap = st.st_size > 0 ? (size_t)st.st_size + 2 : 4096;	/* +2: room to see EOF without growing */
	buf = xmalloc(cap);
	for (;;) {
		if (len + 1 >= cap) {
			cap *= 2;
			buf = xrealloc(buf, cap);
		}
		ssize_t n = read(fd, buf + len, cap - len - 1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			int e = errno;
			secret_clear(buf, len);
			free(buf);
			close(fd);
			errno = e;
			return NULL;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	buf[len] = '\0';
	*lenp = len;
	return buf;
}

struct auth_store *auth_file_load(const char *path)
{
	size_t len = 0;
	char *text = read_file(path, &len);
	if (!text) {
		log_error("could not read auth_file \"%s\": %s", path, strerror(errno));
		return NULL;
	}
	struct auth_store *store = auth_file_parse(text, len, path);
	secret_clear(text, len);
	free(text);
	return store;
}
