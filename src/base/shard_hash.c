/*
 * shard_hash.c - a sharding key's shard, as PostgreSQL's hash partitioning
 * computes a partition (see shard_hash.h for the contract).
 *
 * Owns nothing: reads the caller's bytes, returns numbers.
 */
#include "common.h"
#include "shard_hash.h"

#include <ctype.h>

static inline uint32_t rotl32(uint32_t x, unsigned k)
{
	return (x << k) | (x >> (32 - k));
}

/* lookup3's reversible mix of three words. */
static void jenkins_mix(uint32_t *a, uint32_t *b, uint32_t *c)
{
	*a -= *c, *a ^= rotl32(*c, 4), *c += *b;
	*b -= *a, *b ^= rotl32(*a, 6), *a += *c;
	*c -= *b, *c ^= rotl32(*b, 8), *b += *a;
	*a -= *c, *a ^= rotl32(*c, 16), *c += *b;
	*b -= *a, *b ^= rotl32(*a, 19), *a += *c;
	*c -= *b, *c ^= rotl32(*b, 4), *b += *a;
}

/* lookup3's final mixing into c (and b). */
static void jenkins_final(uint32_t *a, uint32_t *b, uint32_t *c)
{
	*c ^= *b, *c -= rotl32(*b, 14);
	*a ^= *c, *a -= rotl32(*c, 11);
	*b ^= *a, *b -= rotl32(*a, 25);
	*c ^= *b, *c -= rotl32(*b, 16);
	*a ^= *c, *a -= rotl32(*c, 4);
	*b ^= *a, *b -= rotl32(*a, 14);
	*c ^= *b, *c -= rotl32(*b, 24);
}

/* The initial state for a key of len bytes, perturbed by a non-zero seed. */
static void jenkins_start(uint32_t *a, uint32_t *b, uint32_t *c, uint32_t len, uint64_t seed)
{
	*a = *b = *c = 0x9e3779b9u + len + 3923095u;
	if (seed != 0) {
		*a += (uint32_t)(seed >> 32);
		*b += (uint32_t)seed;
		jenkins_mix(a, b, c);
	}
}

/* Up to four bytes as a little-endian word (missing bytes are zero). */
static uint32_t le_word(const unsigned char *p, size_t n)
{
	uint32_t w = 0;
	for (size_t i = 0; i < n && i < 4; i++)
		w |= (uint32_t)p[i] << (8 * i);
	return w;
}

uint64_t shard_hash_bytes(const void *key, size_t keylen, uint64_t seed)
{
	const unsigned char *k = key;
	uint32_t len = (uint32_t)keylen;	/* PostgreSQL takes an int: texts are < 1 GB */
	uint32_t a, b, c;
	jenkins_start(&a, &b, &c, len, seed);
	while (len >= 12) {
		a += le_word(k, 4);
		b += le_word(k + 4, 4);
		c += le_word(k + 8, 4);
		jenkins_mix(&a, &b, &c);
		k += 12;
		len -= 12;
	}
	/* The last 0..11 bytes: a takes bytes 0-3, b 4-7, and c 8-10 one byte up,
	 * its lowest byte being kept for the length. */
	if (len > 8)
		c += le_word(k + 8, len - 8) << 8;
	if (len > 4)
		b += le_word(k + 4, len - 4);
	a += le_word(k, len);
	jenkins_final(&a, &b, &c);
	return ((uint64_t)b << 32) | c;
}

/* PostgreSQL's hash_bytes_uint32_extended: one 32-bit word. */
static uint64_t hash_word(uint32_t k, uint64_t seed)
{
	uint32_t a, b, c;
	jenkins_start(&a, &b, &c, 4, seed);
	a += k;
	jenkins_final(&a, &b, &c);
	return ((uint64_t)b << 32) | c;
}

uint64_t shard_hash_int8(int64_t value)
{
	uint32_t lo = (uint32_t)(uint64_t)value;
	uint32_t hi = (uint32_t)((uint64_t)value >> 32);
	/* int8, int4 and int2 of equal value hash alike (cross-type hash joins) */
	lo ^= value >= 0 ? hi : ~hi;
	return hash_word(lo, SHARD_HASH_SEED);
}

uint64_t shard_hash_int4(int32_t value)
{
	return hash_word((uint32_t)value, SHARD_HASH_SEED);
}

uint64_t shard_hash_int2(int16_t value)
{
	return hash_word((uint32_t)(int32_t)value, SHARD_HASH_SEED);
}

uint64_t shard_hash_text(const void *bytes, size_t len)
{
	return shard_hash_bytes(bytes, len, SHARD_HASH_SEED);
}

uint64_t shard_hash_uuid(const uint8_t uuid[16])
{
	return shard_hash_bytes(uuid, 16, SHARD_HASH_SEED);
}

uint64_t shard_hash_combine(uint64_t row_hash, uint64_t column_hash)
{
	row_hash ^= column_hash + UINT64_C(0x49a0f4dd15e5a8e3) + (row_hash << 54) + (row_hash >> 7);
	return row_hash;
}

unsigned shard_hash_remainder(uint64_t row_hash, unsigned modulus)
{
	return modulus ? (unsigned)(row_hash % modulus) : 0;
}

unsigned shard_hash_shard(uint64_t column_hash, unsigned modulus)
{
	return shard_hash_remainder(shard_hash_combine(0, column_hash), modulus);
}

/* C-locale isspace, as PostgreSQL's integer input skips blanks. */
static bool is_blank(char ch)
{
	return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\f' || ch == '\v';
}

/*
 * A decimal integer within [min, max]: blanks, an optional sign, digits,
 * blanks. Other notations later PostgreSQL releases accept (0x..., 1_000)
 * are refused rather than read one way here and another there.
 */
static int parse_integer(const char *p, size_t len, int64_t min, int64_t max, int64_t *out)
{
	const char *end = p + len;
	while (p < end && is_blank(*p))
		p++;
	bool negative = false;
	if (p < end && (*p == '-' || *p == '+'))
		negative = *p++ == '-';
	const char *digits = p;
	uint64_t limit = negative ? (uint64_t)0 - (uint64_t)min : (uint64_t)max;
	uint64_t v = 0;
	for (; p < end && *p >= '0' && *p <= '9'; p++) {
		unsigned d = (unsigned)(*p - '0');
		if (v > (limit - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	if (p == digits)
		return -1;
	while (p < end && is_blank(*p))
		p++;
	if (p != end)
		return -1;
	*out = negative ? (int64_t)(0 - v) : (int64_t)v;
	return 0;
}

static int hex_digit(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if ((ch | 0x20) >= 'a' && (ch | 0x20) <= 'f')
		return (ch | 0x20) - 'a' + 10;
	return -1;
}

/* uuid_in's syntax: optional braces, 32 hex digits, a '-' allowed after
 * each group of four digits but the last; nothing else, not even blanks. */
static int parse_uuid(const char *p, size_t len, uint8_t out[16])
{
	const char *end = p + len;
	bool braces = p < end && *p == '{';
	if (braces)
		p++;
	for (int i = 0; i < 16; i++) {
		if (end - p < 2)
			return -1;
		int hi = hex_digit(p[0]), lo = hex_digit(p[1]);
		if (hi < 0 || lo < 0)
			return -1;
		out[i] = (uint8_t)(hi << 4 | lo);
		p += 2;
		if (p < end && *p == '-' && i % 2 == 1 && i < 15)
			p++;
	}
	if (braces) {
		if (p == end || *p != '}')
			return -1;
		p++;
	}
	return p == end ? 0 : -1;
}

int shard_hash_parse(enum shard_key_type type, const char *text, size_t len, uint64_t *hash)
{
	int64_t v;
	uint8_t uuid[16];
	switch (type) {
	case SHARD_KEY_INT8:
		if (parse_integer(text, len, INT64_MIN, INT64_MAX, &v) < 0)
			return -1;
		*hash = shard_hash_int8(v);
		return 0;
	case SHARD_KEY_INT4:
		if (parse_integer(text, len, INT32_MIN, INT32_MAX, &v) < 0)
			return -1;
		*hash = shard_hash_int4((int32_t)v);
		return 0;
	case SHARD_KEY_INT2:
		if (parse_integer(text, len, INT16_MIN, INT16_MAX, &v) < 0)
			return -1;
		*hash = shard_hash_int2((int16_t)v);
		return 0;
	case SHARD_KEY_TEXT:
		if (memchr(text, '\0', len))
			return -1;	/* PostgreSQL's text holds no NUL */
		*hash = shard_hash_text(text, len);
		return 0;
	case SHARD_KEY_UUID:
		if (parse_uuid(text, len, uuid) < 0)
			return -1;
		*hash = shard_hash_uuid(uuid);
		return 0;
	}
	return -1;
}

const char *shard_key_type_name(enum shard_key_type type)
{
	switch (type) {
	case SHARD_KEY_INT8:
		return "bigint";
	case SHARD_KEY_INT4:
		return "integer";
	case SHARD_KEY_INT2:
		return "smallint";
	case SHARD_KEY_TEXT:
		return "text";
	case SHARD_KEY_UUID:
		return "uuid";
	}
	return "?";
}
