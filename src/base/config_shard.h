/*
 * config_shard.h - a sharded database's two [databases] keys (issue 57):
 *
 *   app = shards=app_s0,app_s1,app_s2,app_s3 sharding_key=users.id,orders.user_id
 *
 * shards= names other [databases] entries, in remainder order: a key
 * whose PARTITION BY HASH remainder for MODULUS <number of shards> is i
 * lives on the i-th (shard_hash.h). sharding_key= lists the key columns,
 * table.column or a bare column (every table with that column);
 * identifiers are unquoted SQL identifiers, folded to lower case as
 * PostgreSQL folds them.
 *
 * What this module owns: reading the two values into a struct
 * shard_config hung on the entry (db_config.sharding; NULL for an
 * ordinary database), copying and freeing it, and the rules that need the
 * whole file (config_shard_check, run by the loader once every line is
 * read): both keys or neither; a sharded entry connects nowhere itself
 * (no host, dbname or user); each shard is another, ordinary entry, named
 * once; the fallback "*" is never sharded; pgvalve was built with
 * libpg_query. The future router reads the result; nothing here routes.
 *
 * Pure data: no I/O, no logging; errors are messages for the loader, which
 * prefixes the entry's file and line.
 */
#ifndef PGVALVE_CONFIG_SHARD_H
#define PGVALVE_CONFIG_SHARD_H

#include "common.h"

/* At most this many shards, and key columns, per sharded database. */
#define SHARD_MAX_SHARDS 1024
#define SHARD_MAX_KEYS 256

struct shard_key_config {
	char *table;		/* "" = every table that has the column */
	char *column;
};

struct shard_config {
	int shard_count;	/* 0 until shards= is read */
	char **shards;		/* [databases] names; shard i holds remainder i */
	int key_count;		/* 0 until sharding_key= is read */
	struct shard_key_config *keys;
};

struct config;

/* shards= and sharding_key= of one entry: *sc is created on first use; a
 * repeated key replaces its earlier value. 0, or -1 with errbuf set. */
int config_shard_parse_shards(struct shard_config **sc, const char *value, char *errbuf, size_t errsize);
int config_shard_parse_keys(struct shard_config **sc, const char *value, char *errbuf, size_t errsize);

struct shard_config *config_shard_clone(const struct shard_config *sc);	/* NULL for NULL */
void config_shard_free(struct shard_config *sc);

/* The whole file's rules for its sharded entries: how many there are, or -1
 * with errbuf set to "file:line: database ...: why" (the first offending
 * entry's line). */
int config_shard_check(const struct config *cfg, char *errbuf, size_t errsize);

/* Whether this build can shard (libpg_query, configure --with-pg-query). */
bool config_shard_supported(void);

#endif
