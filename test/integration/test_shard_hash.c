/*
 * test_shard_hash.c - src/base/shard_hash.c against PostgreSQL 15 itself:
 * for many keys of each sharding key type (bigint, integer, smallint,
 * text, varchar, text under an ICU collation, uuid: zero, negatives, the types' bounds, the 32-bit bounds where
 * bigint's hash folds, empty and non-ASCII text, text of every length up
 * to 40 bytes, random values) and every modulus from 1 to 8, the
 * remainder shard_hash computes is the one remainder for which
 * PostgreSQL's satisfies_hash_partition() is true; and rows inserted into
 * a real PARTITION BY HASH table with MODULUS 4 land, by tableoid, in the
 * partition whose remainder shard_hash names, as an operator splitting
 * data with PostgreSQL would see it.
 *
 * Straight to the cluster run.sh starts (pg_direct): no pgvalve here.
 */
#include "harness.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shard_hash.h"

#define NKEYS 600
#define MAX_MODULUS 8
#define KEY_MAX 128	/* bytes of one key's text, NUL included */

struct keyset {
	enum shard_key_type type;
	const char *sql_type;	/* of the values */
	const char *column_type;	/* of the partition key: sql_type, with a collation maybe */
	char keys[NKEYS][KEY_MAX];
	int n;
};

/* xorshift64*: the same keys on every run, so a failure can be replayed. */
static uint64_t rng_state = UINT64_C(0x9e3779b97f4a7c15);
static uint64_t rng(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * UINT64_C(2685821657736338717);
}

static void add_key(struct keyset *ks, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void add_key(struct keyset *ks, const char *fmt, ...)
{
	va_list ap;
	ck_assert_int_lt(ks->n, NKEYS);
	va_start(ap, fmt);
	int len = vsnprintf(ks->keys[ks->n], KEY_MAX, fmt, ap);
	va_end(ap);
	ck_assert(len >= 0 && len < KEY_MAX);
	ks->n++;
}

/* A random integer of a random magnitude (so small values come up too), in [min, max]. */
static int64_t random_integer(int64_t min, int64_t max)
{
	int64_t v = (int64_t)(rng() >> (rng() % 64));
	if (rng() & 1)
		v = -v - 1;
	return v < min ? min : v > max ? max : v;
}

static void integer_keys(struct keyset *ks, int64_t min, int64_t max)
{
	static const int64_t edges[] = { 0, 1, -1, 2, -2, 42, -42, 255, 256, 32767, -32768, 32768, -32769,
					 INT32_MAX, INT32_MIN, (int64_t)INT32_MAX + 1, (int64_t)INT32_MIN - 1,
					 INT64_C(4294967295), INT64_C(4294967296), -INT64_C(4294967296),
					 INT64_MAX, INT64_MIN, INT64_MAX - 1, INT64_MIN + 1 };
	for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]); i++)
		if (edges[i] >= min && edges[i] <= max)
			add_key(ks, "%lld", (long long)edges[i]);
	while (ks->n < NKEYS)
		add_key(ks, "%lld", (long long)random_integer(min, max));
}

/* Texts of every length 0..40 bytes from ASCII (quotes and backslashes among
 * them) and two- to four-byte UTF-8 characters. */
static void text_keys(struct keyset *ks)
{
	static const char *const pieces[] = { "a", "Z", "0", " ", "'", "\"", "\\", ",", "{", "}",
					      "\xc3\xa9", "\xc3\xb6", "\xce\xbb", "\xe2\x9c\x93", "\xe6\x97\xa5",
					      "\xf0\x9f\x98\x80" };
	add_key(ks, "%s", "");
	add_key(ks, "%s", "user@example.com");
	add_key(ks, "%s", "h\xc3\xa9llo w\xc3\xb6rld");
	while (ks->n < NKEYS) {
		size_t want = (size_t)(rng() % 41), len = 0;
		char *k = ks->keys[ks->n];
		while (len < want) {
			const char *p = pieces[rng() % (sizeof(pieces) / sizeof(pieces[0]))];
			if (len + strlen(p) > want)
				p = "x";
			memcpy(k + len, p, strlen(p));
			len += strlen(p);
		}
		k[len] = '\0';
		ks->n++;
	}
}

static void uuid_keys(struct keyset *ks)
{
	add_key(ks, "%s", "00000000-0000-0000-0000-000000000000");
	add_key(ks, "%s", "ffffffff-ffff-ffff-ffff-ffffffffffff");
	add_key(ks, "%s", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11");
	while (ks->n < NKEYS) {
		uint64_t hi = rng(), lo = rng();
		add_key(ks, "%08x-%04x-%04x-%04x-%012llx", (unsigned)(hi >> 32), (unsigned)(hi >> 16) & 0xffff,
			(unsigned)hi & 0xffff, (unsigned)(lo >> 48), (unsigned long long)(lo & UINT64_C(0xffffffffffff)));
	}
}

/* The keys as one array literal: every element double-quoted, " and \ escaped. */
static char *array_literal(const struct keyset *ks)
{
	size_t size = (size_t)ks->n * (2 * KEY_MAX + 3) + 3, len = 0;
	char *out = malloc(size);
	ck_assert_ptr_nonnull(out);
	out[len++] = '{';
	for (int i = 0; i < ks->n; i++) {
		if (i)
			out[len++] = ',';
		out[len++] = '"';
		for (const char *p = ks->keys[i]; *p; p++) {
			if (*p == '"' || *p == '\\')
				out[len++] = '\\';
			out[len++] = *p;
		}
		out[len++] = '"';
	}
	out[len++] = '}';
	out[len] = '\0';
	return out;
}

static uint64_t key_hash(const struct keyset *ks, int i)
{
	uint64_t h = 0;
	const char *k = ks->keys[i];
	ck_assert_msg(shard_hash_parse(ks->type, k, strlen(k), &h) == 0, "shard_hash refused %s key \"%s\"",
		      ks->sql_type, k);
	return h;
}

static PGresult *exec_ok(PGconn *pg, const char *sql, int nparams, const char *const *params, ExecStatusType want)
{
	PGresult *r = PQexecParams(pg, sql, nparams, NULL, params, NULL, NULL, 0);
	ck_assert_msg(PQresultStatus(r) == want, "%s: %s", sql, PQerrorMessage(pg));
	return r;
}

/* Every key and modulus 1..8: the remainder satisfies_hash_partition() accepts is ours. */
static void check_moduli(PGconn *pg, const struct keyset *ks, const char *table)
{
	char sql[512];
	char *array = array_literal(ks);
	const char *params[1] = { array };
	snprintf(sql, sizeof(sql),
		 "SELECT i, m, r FROM unnest($1::%s[]) WITH ORDINALITY AS u(k, i), generate_series(1, %d) m, "
		 "generate_series(0, %d) r WHERE r < m AND satisfies_hash_partition('%s'::regclass, m, r, k) "
		 "ORDER BY i, m", ks->sql_type, MAX_MODULUS, MAX_MODULUS - 1, table);
	PGresult *res = exec_ok(pg, sql, 1, params, PGRES_TUPLES_OK);
	ck_assert_int_eq(PQntuples(res), ks->n * MAX_MODULUS);
	for (int row = 0; row < PQntuples(res); row++) {
		int i = atoi(PQgetvalue(res, row, 0)) - 1;
		unsigned m = (unsigned)atoi(PQgetvalue(res, row, 1)), r = (unsigned)atoi(PQgetvalue(res, row, 2));
		ck_assert_int_eq(i, row / MAX_MODULUS);
		unsigned ours = shard_hash_shard(key_hash(ks, i), m);
		ck_assert_msg(ours == r, "%s key \"%s\", modulus %u: PostgreSQL says remainder %u, shard_hash %u",
			      ks->sql_type, ks->keys[i], m, r, ours);
	}
	PQclear(res);
	free(array);
}

/* The keys inserted into a real table of four hash partitions land where shard_hash says. */
static void check_table(PGconn *pg, const struct keyset *ks, const char *table)
{
	char sql[512];
	char *array = array_literal(ks);
	const char *params[1] = { array };
	snprintf(sql, sizeof(sql), "INSERT INTO %s_rows SELECT k, i FROM unnest($1::%s[]) WITH ORDINALITY AS u(k, i)",
		 table, ks->sql_type);
	PQclear(exec_ok(pg, sql, 1, params, PGRES_COMMAND_OK));
	snprintf(sql, sizeof(sql), "SELECT i, right(tableoid::regclass::text, 1) FROM %s_rows ORDER BY i", table);
	PGresult *res = exec_ok(pg, sql, 0, NULL, PGRES_TUPLES_OK);
	ck_assert_int_eq(PQntuples(res), ks->n);
	for (int row = 0; row < ks->n; row++) {
		int i = atoi(PQgetvalue(res, row, 0)) - 1;
		unsigned part = (unsigned)atoi(PQgetvalue(res, row, 1));
		ck_assert_msg(shard_hash_shard(key_hash(ks, i), 4) == part, "%s key \"%s\" is in partition %u",
			      ks->sql_type, ks->keys[i], part);
	}
	PQclear(res);
	free(array);
}

/* A parent partitioned by hash on the type (for satisfies_hash_partition), and a table of 4 partitions. */
static void create_tables(PGconn *pg, const struct keyset *ks, const char *table)
{
	char sql[1024];
	snprintf(sql, sizeof(sql),
		 "DROP TABLE IF EXISTS %1$s, %1$s_rows;"
		 "CREATE TABLE %1$s (k %2$s) PARTITION BY HASH (k);"
		 "CREATE TABLE %1$s_rows (k %2$s, i bigint) PARTITION BY HASH (k);"
		 "CREATE TABLE %1$s_rows_0 PARTITION OF %1$s_rows FOR VALUES WITH (MODULUS 4, REMAINDER 0);"
		 "CREATE TABLE %1$s_rows_1 PARTITION OF %1$s_rows FOR VALUES WITH (MODULUS 4, REMAINDER 1);"
		 "CREATE TABLE %1$s_rows_2 PARTITION OF %1$s_rows FOR VALUES WITH (MODULUS 4, REMAINDER 2);"
		 "CREATE TABLE %1$s_rows_3 PARTITION OF %1$s_rows FOR VALUES WITH (MODULUS 4, REMAINDER 3);",
		 table, ks->column_type);
	PGresult *r = PQexec(pg, sql);
	ck_assert_msg(PQresultStatus(r) == PGRES_COMMAND_OK, "%s", PQerrorMessage(pg));
	PQclear(r);
}

static void check_column(enum shard_key_type type, const char *sql_type, const char *column_type, const char *table)
{
	static struct keyset ks;
	memset(&ks, 0, sizeof(ks));
	ks.type = type;
	ks.sql_type = sql_type;
	ks.column_type = column_type;
	switch (type) {
	case SHARD_KEY_INT8:
		integer_keys(&ks, INT64_MIN, INT64_MAX);
		break;
	case SHARD_KEY_INT4:
		integer_keys(&ks, INT32_MIN, INT32_MAX);
		break;
	case SHARD_KEY_INT2:
		integer_keys(&ks, INT16_MIN, INT16_MAX);
		break;
	case SHARD_KEY_TEXT:
		text_keys(&ks);
		break;
	case SHARD_KEY_UUID:
		uuid_keys(&ks);
		break;
	}
	PGconn *pg = pg_direct();
	create_tables(pg, &ks, table);
	check_moduli(pg, &ks, table);
	check_table(pg, &ks, table);
	PQfinish(pg);
}

static void check_type(enum shard_key_type type, const char *sql_type, const char *table)
{
	check_column(type, sql_type, sql_type, table);
}

START_TEST(bigint_keys)
{
	check_type(SHARD_KEY_INT8, "bigint", "shard_hash_int8");
}
END_TEST

START_TEST(integer_keys_)
{
	check_type(SHARD_KEY_INT4, "integer", "shard_hash_int4");
}
END_TEST

START_TEST(smallint_keys)
{
	check_type(SHARD_KEY_INT2, "smallint", "shard_hash_int2");
}
END_TEST

START_TEST(text_keys_)
{
	check_type(SHARD_KEY_TEXT, "text", "shard_hash_text");
}
END_TEST

START_TEST(varchar_keys)
{
	check_type(SHARD_KEY_TEXT, "varchar", "shard_hash_varchar");
}
END_TEST

/* Any deterministic collation hashes the bytes: an ICU one as C does. */
START_TEST(text_icu_keys)
{
	check_column(SHARD_KEY_TEXT, "text", "text COLLATE \"und-x-icu\"", "shard_hash_text_icu");
}
END_TEST

START_TEST(uuid_keys_)
{
	check_type(SHARD_KEY_UUID, "uuid", "shard_hash_uuid");
}
END_TEST

static Suite *shard_hash_suite(void)
{
	Suite *s = suite_create("shard_hash");
	TCase *tc = pgv_tcase_create("against PostgreSQL", 120);
	tcase_add_test(tc, bigint_keys);
	tcase_add_test(tc, integer_keys_);
	tcase_add_test(tc, smallint_keys);
	tcase_add_test(tc, text_keys_);
	tcase_add_test(tc, varchar_keys);
	tcase_add_test(tc, text_icu_keys);
	tcase_add_test(tc, uuid_keys_);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return pgv_run_suite(shard_hash_suite());
}
