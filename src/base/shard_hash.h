/*
 * shard_hash.h - the shard of a sharding key, computed as PostgreSQL's hash
 * partitioning computes a partition: for a table declared
 * PARTITION BY HASH (key) with partitions MODULUS n, REMAINDER r, a row
 * whose key hashes to remainder r lives in the partition of remainder r,
 * and a sharded database puts it on its shard number r (shards= lists
 * them in order). An operator can so split and check data with
 * PostgreSQL itself (satisfies_hash_partition).
 *
 * What PostgreSQL does, and so what this module does: each key column is
 * hashed by its type's extended hash function (the hash opclass's
 * support function 2) with the seed HASH_PARTITION_SEED; the columns'
 * 64-bit hashes are folded into one, starting from 0, with hash_combine64;
 * the remainder is that row hash modulo the modulus (unsigned 64-bit).
 * The types:
 *   bigint   hashint8extended: the high half folded into the low half, so
 *            that a value that fits in 32 bits hashes as the integer would
 *   integer, smallint   hashint4extended / hashint2extended: the value,
 *            sign-extended to 32 bits, hashed as one 32-bit word
 *   text, varchar   hashtextextended under a deterministic collation (C,
 *            POSIX, or any libc/ICU collation marked deterministic, the
 *            default): the string's bytes, in the server's encoding
 *   uuid     uuid_hash_extended: its 16 bytes
 * The byte hash is Bob Jenkins' lookup3 (hash_bytes_extended) as
 * PostgreSQL computes it on a little-endian machine (x86-64, ARM64); a
 * big-endian server would put rows in other partitions, and a
 * nondeterministic collation hashes a sort key instead: neither is
 * supported.
 *
 * The text form of a key (a constant of the statement, a parameter sent
 * as text) is read the way PostgreSQL's input functions read it
 * (shard_hash_parse): a text this module is not sure PostgreSQL would read
 * as the same value is refused (-1), never guessed.
 *
 * Pure: no allocation, no state, no logging.
 */
#ifndef PGVALVE_SHARD_HASH_H
#define PGVALVE_SHARD_HASH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* PostgreSQL's HASH_PARTITION_SEED (src/include/catalog/partition.h). */
#define SHARD_HASH_SEED UINT64_C(0x7A5B22367996DCFD)

/* The key types a sharding key may have. */
enum shard_key_type {
	SHARD_KEY_INT8,		/* bigint */
	SHARD_KEY_INT4,		/* integer */
	SHARD_KEY_INT2,		/* smallint */
	SHARD_KEY_TEXT,		/* text, varchar (deterministic collation) */
	SHARD_KEY_UUID,		/* uuid */
};

/* Each type's extended hash with HASH_PARTITION_SEED: one column's hash. */
uint64_t shard_hash_int8(int64_t value);
uint64_t shard_hash_int4(int32_t value);
uint64_t shard_hash_int2(int16_t value);
uint64_t shard_hash_text(const void *bytes, size_t len);
uint64_t shard_hash_uuid(const uint8_t uuid[16]);

/* PostgreSQL's hash_bytes_extended(k, len, seed) (little-endian). */
uint64_t shard_hash_bytes(const void *k, size_t len, uint64_t seed);

/* A row's hash with one more (non-NULL) key column: start from 0, add each
 * column in the key's order. A NULL column is skipped, as PostgreSQL skips
 * it: a row whose key is NULL hashes to 0, remainder 0. */
uint64_t shard_hash_combine(uint64_t row_hash, uint64_t column_hash);

/* The remainder (the shard number) of a row hash for modulus (> 0). */
unsigned shard_hash_remainder(uint64_t row_hash, unsigned modulus);

/* The shard of a one-column key, from its column hash: the common case. */
unsigned shard_hash_shard(uint64_t column_hash, unsigned modulus);

/*
 * One column's hash from the key's text form (len bytes, need not be
 * NUL-terminated) as PostgreSQL's input function for type reads it:
 * integers in decimal with an optional sign and surrounding blanks, in
 * range for the type; uuids as 32 hex digits, optionally in braces, with
 * a hyphen allowed after any group of four digits; text as it is.
 * Returns 0 and sets *hash, or -1 if the text is not a value of the type.
 */
int shard_hash_parse(enum shard_key_type type, const char *text, size_t len, uint64_t *hash);

/* The type's name as in SQL ("bigint", ...), for messages. */
const char *shard_key_type_name(enum shard_key_type type);

#endif
