/*
 * config_shard.c - shards= and sharding_key= of a [databases] entry, and
 * the whole file's rules for sharded entries (see config_shard.h).
 *
 * Owns the struct shard_config it creates; reads the loader's config.
 */
#include "common.h"
#include "config_shard.h"
#include "config.h"
#include "config_value.h"

/* PostgreSQL's NAMEDATALEN - 1: a longer identifier would be truncated there. */
#define IDENT_MAX 63

bool config_shard_supported(void)
{
#ifdef HAVE_PG_QUERY
	return true;
#else
	return false;
#endif
}

static struct shard_config *get(struct shard_config **sc)
{
	if (!*sc)
		*sc = xcalloc(1, sizeof(**sc));
	return *sc;
}

static void free_shards(struct shard_config *sc)
{
	for (int i = 0; i < sc->shard_count; i++)
		free(sc->shards[i]);
	free(sc->shards);
	sc->shards = NULL;
	sc->shard_count = 0;
}

static void free_keys(struct shard_config *sc)
{
	for (int i = 0; i < sc->key_count; i++) {
		free(sc->keys[i].table);
		free(sc->keys[i].column);
	}
	free(sc->keys);
	sc->keys = NULL;
	sc->key_count = 0;
}

void config_shard_free(struct shard_config *sc)
{
	if (!sc)
		return;
	free_shards(sc);
	free_keys(sc);
	free(sc);
}

struct shard_config *config_shard_clone(const struct shard_config *src)
{
	if (!src)
		return NULL;
	struct shard_config *sc = xcalloc(1, sizeof(*sc));
	sc->shard_count = src->shard_count;
	sc->shards = xcalloc((size_t)src->shard_count + 1, sizeof(char *));
	for (int i = 0; i < src->shard_count; i++)
		sc->shards[i] = xstrdup(src->shards[i]);
	sc->key_count = src->key_count;
	sc->keys = xcalloc((size_t)src->key_count + 1, sizeof(*sc->keys));
	for (int i = 0; i < src->key_count; i++) {
		sc->keys[i].table = xstrdup(src->keys[i].table);
		sc->keys[i].column = xstrdup(src->keys[i].column);
	}
	return sc;
}

static char *dup_range(const char *s, size_t len)
{
	char *out = xmalloc(len + 1);
	memcpy(out, s, len);
	out[len] = '\0';
	return out;
}

static bool is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

static bool all_blank(const char *s)
{
	while (is_blank(*s))
		s++;
	return *s == '\0';
}

/*
 * The next item of a comma list into [*start, *end), blanks around it
 * trimmed; *p moves past its comma. False at the end of the list.
 */
static bool next_item(const char **p, const char **start, const char **end)
{
	const char *s = *p;
	if (!*s)
		return false;
	const char *comma = strchr(s, ',');
	const char *e = comma ? comma : s + strlen(s);
	*p = comma ? comma + 1 : e;
	while (s < e && is_blank(*s))
		s++;
	while (e > s && is_blank(e[-1]))
		e--;
	*start = s;
	*end = e;
	return true;
}

int config_shard_parse_shards(struct shard_config **scp, const char *value, char *errbuf, size_t errsize)
{
	struct shard_config *sc = get(scp);
	const char *p = all_blank(value) ? "" : value, *s, *e;
	free_shards(sc);
	sc->shards = xcalloc(1, sizeof(char *));
	while (next_item(&p, &s, &e)) {
		if (s == e) {
			config_errfmt(errbuf, errsize, "\"shards\": an empty database name in \"%.100s\"", value);
			return -1;
		}
		if (sc->shard_count == SHARD_MAX_SHARDS) {
			config_errfmt(errbuf, errsize, "\"shards\": more than %d shards", SHARD_MAX_SHARDS);
			return -1;
		}
		sc->shards = xrealloc(sc->shards, ((size_t)sc->shard_count + 2) * sizeof(char *));
		sc->shards[sc->shard_count++] = dup_range(s, (size_t)(e - s));
		sc->shards[sc->shard_count] = NULL;
	}
	if (sc->shard_count == 0) {
		config_errfmt(errbuf, errsize, "\"shards\" needs at least one database name");
		return -1;
	}
	return 0;
}

/* An unquoted SQL identifier in [s, e), folded to lower case as PostgreSQL folds it; NULL if not one. */
static char *identifier(const char *s, const char *e)
{
	size_t len = (size_t)(e - s);
	if (len == 0 || len > IDENT_MAX)
		return NULL;
	char *out = dup_range(s, len);
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)out[i];
		bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c >= 0x80;
		bool more = c == '$' || (c >= '0' && c <= '9');
		if (!alpha && !(i > 0 && more)) {
			free(out);
			return NULL;
		}
		if (c >= 'A' && c <= 'Z')
			out[i] = (char)(c + ('a' - 'A'));
	}
	return out;
}

/* "table.column" or "column" in [s, e) into key; -1 with errbuf set if neither. */
static int parse_key(const char *s, const char *e, struct shard_key_config *key, char *errbuf, size_t errsize)
{
	const char *dot = memchr(s, '.', (size_t)(e - s));
	key->table = dot ? identifier(s, dot) : xstrdup("");
	key->column = identifier(dot ? dot + 1 : s, e);
	if (key->table && key->column)
		return 0;
	free(key->table);
	free(key->column);
	config_errfmt(errbuf, errsize, "\"sharding_key\": \"%.*s\" is not table.column or column "
		      "(unquoted identifiers of at most %d bytes)", (int)MIN(e - s, 100), s, IDENT_MAX);
	return -1;
}

/* A key another one already names: the same column, or a second column for the same table. */
static const char *duplicate_key(const struct shard_config *sc, const struct shard_key_config *key)
{
	for (int i = 0; i < sc->key_count; i++) {
		const struct shard_key_config *k = &sc->keys[i];
		if (strcmp(k->table, key->table) != 0)
			continue;
		if (strcmp(k->column, key->column) == 0)
			return "is listed twice";
		if (key->table[0])
			return "gives its table a second key column";
	}
	return NULL;
}

int config_shard_parse_keys(struct shard_config **scp, const char *value, char *errbuf, size_t errsize)
{
	struct shard_config *sc = get(scp);
	const char *p = all_blank(value) ? "" : value, *s, *e;
	free_keys(sc);
	sc->keys = xcalloc(1, sizeof(*sc->keys));
	while (next_item(&p, &s, &e)) {
		struct shard_key_config key;
		if (sc->key_count == SHARD_MAX_KEYS) {
			config_errfmt(errbuf, errsize, "\"sharding_key\": more than %d columns", SHARD_MAX_KEYS);
			return -1;
		}
		if (parse_key(s, e, &key, errbuf, errsize) < 0)
			return -1;
		const char *why = duplicate_key(sc, &key);
		if (why) {
			config_errfmt(errbuf, errsize, "\"sharding_key\": %s%s%s %s", key.table, key.table[0] ? "." : "",
				      key.column, why);
			free(key.table);
			free(key.column);
			return -1;
		}
		sc->keys = xrealloc(sc->keys, ((size_t)sc->key_count + 2) * sizeof(*sc->keys));
		sc->keys[sc->key_count++] = key;
	}
	if (sc->key_count == 0) {
		config_errfmt(errbuf, errsize, "\"sharding_key\" needs at least one column");
		return -1;
	}
	return 0;
}

/* The entry of that name (config.c calls this module, so its lookup is not called back). */
static const struct db_config *find_entry(const struct config *cfg, const char *name)
{
	for (const struct db_config *db = cfg->databases; db; db = db->next)
		if (strcmp(db->name, name) == 0)
			return db;
	return NULL;
}

/* One sharded entry's shards: each another, ordinary entry, named once. NULL if fine, else why. */
static const char *check_shards(const struct config *cfg, const struct db_config *db, const char **bad)
{
	const struct shard_config *sc = db->sharding;
	for (int i = 0; i < sc->shard_count; i++) {
		const char *name = sc->shards[i];
		const struct db_config *shard = find_entry(cfg, name);
		*bad = name;
		if (strcmp(name, db->name) == 0)
			return "is the sharded database itself";
		if (!shard)
			return "is not a [databases] entry";
		if (shard->sharding)
			return "is itself sharded";
		if (strcmp(name, "*") == 0)
			return "is the fallback entry";
		for (int j = 0; j < i; j++)
			if (strcmp(sc->shards[j], name) == 0)
				return "is listed twice";
	}
	return NULL;
}

/* One sharded entry's rules; NULL if it keeps them, else the message after its name. */
static const char *check_entry(const struct config *cfg, const struct db_config *db, char *buf, size_t size)
{
	const struct shard_config *sc = db->sharding;
	const char *bad = NULL, *why;
	if (!config_shard_supported())
		return "sharded databases (shards=) need pgvalve built with libpg_query "
		       "(configure --with-pg-query; Debian: libpg-query-dev)";
	if (strcmp(db->name, "*") == 0)
		return "the fallback entry \"*\" cannot be sharded";
	if (sc->shard_count == 0)
		return "sharding_key= needs shards= (the databases that hold the shards)";
	if (sc->key_count == 0)
		return "shards= needs sharding_key= (the columns that pick a row's shard)";
	if (db->host[0])
		return "a sharded database has no host of its own: host= belongs on its shards' entries";
	if (db->dbname[0])
		return "a sharded database has no dbname of its own: dbname= belongs on its shards' entries";
	if (db->user[0])
		return "a sharded database has no user of its own: user= belongs on its shards' entries";
	why = check_shards(cfg, db, &bad);
	if (!why)
		return NULL;
	snprintf(buf, size, "shard \"%.100s\" %s", bad, why);
	return buf;
}

int config_shard_check(const struct config *cfg, char *errbuf, size_t errsize)
{
	char why[256];
	int sharded = 0;
	for (const struct db_config *db = cfg->databases; db; db = db->next) {
		if (!db->sharding)
			continue;
		const char *msg = check_entry(cfg, db, why, sizeof(why));
		if (msg) {
			snprintf(errbuf, errsize, "%s: database \"%.100s\": %s", db->origin, db->name, msg);
			return -1;
		}
		sharded++;
	}
	return sharded;
}
