/*
 * test_shard_parse.c - what src/feature/shard_parse.c reads from
 * statements to a sharded database with keys users.id, orders.user_id and
 * the bare column tenant_id, against a small catalog: keys found in WHERE
 * (=, IN, casts, parameters, joins on the key), INSERT rows with and
 * without a column list, what runs on every shard, what is refused and
 * why, parse errors, and hostile texts (trees too deep for libpg_query,
 * a 1 MB INSERT, a statement over the size limit).
 */
#include <check.h>
#include <stdarg.h>

#include "common.h"
#include "config_shard.h"
#include "shard_parse.h"
#include "../check_main.h"

static struct shard_config *keys;	/* users.id, orders.user_id, tenant_id */
static struct shard_config *plain_keys;	/* users.id, orders.user_id: no bare column */

static const struct { const char *table; const char *columns[5]; } catalog[] = {
	{ "users", { "id", "name", "org_id" } },
	{ "orders", { "order_id", "user_id", "total", "note" } },
	{ "items", { "id", "tenant_id", "label" } },
	{ "refs", { "code", "label" } },
};

static int column_position(void *arg, const char *schema, const char *table, const char *column)
{
	(void)arg;
	if (schema && strcmp(schema, "public") != 0)
		return -2;
	for (size_t i = 0; i < sizeof(catalog) / sizeof(catalog[0]); i++) {
		if (strcmp(catalog[i].table, table) != 0)
			continue;
		for (int c = 0; c < 5 && catalog[i].columns[c]; c++)
			if (strcmp(catalog[i].columns[c], column) == 0)
				return c;
		return -1;
	}
	return -2;
}

static void setup(void)
{
	char err[256];
	ck_assert_int_eq(config_shard_parse_shards(&keys, "s0,s1,s2,s3", err, sizeof(err)), 0);
	ck_assert_int_eq(config_shard_parse_keys(&keys, "users.id,orders.user_id,tenant_id", err, sizeof(err)), 0);
	ck_assert_int_eq(config_shard_parse_shards(&plain_keys, "s0,s1", err, sizeof(err)), 0);
	ck_assert_int_eq(config_shard_parse_keys(&plain_keys, "users.id,orders.user_id", err, sizeof(err)), 0);
}

static void teardown(void)
{
	config_shard_free(keys);
	config_shard_free(plain_keys);
	keys = plain_keys = NULL;
}

static void put(char *out, size_t size, size_t *n, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void put(char *out, size_t size, size_t *n, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int w = vsnprintf(out + *n, size - *n, fmt, ap);
	va_end(ap);
	ck_assert(w >= 0 && (size_t)w < size - *n);
	*n += (size_t)w;
}

/* The result as one line: "keyed [rows ]v@table.column ...", "all [ref]", "refused: ...", "error: ...". */
static const char *summary(const struct shard_parse_result *r)
{
	static char out[2048];
	static const char *const statements[] = { "select", "insert", "update", "delete", "other" };
	size_t n = 0;
	out[0] = '\0';
	switch (r->verdict) {
	case SHARD_PARSE_KEYED:
		put(out, sizeof(out), &n, "keyed %s%s:", statements[r->statement], r->per_row ? " rows" : "");
		for (int i = 0; i < r->n_values && i < 8; i++) {
			const struct shard_value *v = &r->values[i];
			if (v->kind == SHARD_VALUE_CONST)
				put(out, sizeof(out), &n, " %s", v->text);
			else if (v->kind == SHARD_VALUE_PARAM)
				put(out, sizeof(out), &n, " $%d", v->param);
			else
				put(out, sizeof(out), &n, " NULL");
			put(out, sizeof(out), &n, "@%s.%s", v->table, v->column);
		}
		if (r->cross_shard[0])
			put(out, sizeof(out), &n, " [one shard only: %s]", r->cross_shard);
		break;
	case SHARD_PARSE_ALL:
		put(out, sizeof(out), &n, "all %s%s%s", statements[r->statement], r->reference_only ? " ref" : "",
		    r->writes && r->statement != SHARD_STMT_INSERT && r->statement != SHARD_STMT_UPDATE &&
		    r->statement != SHARD_STMT_DELETE ? " writes" : "");
		break;
	case SHARD_PARSE_REFUSED:
		put(out, sizeof(out), &n, "refused: %s", r->reason);
		break;
	case SHARD_PARSE_ERROR:
		put(out, sizeof(out), &n, "error: %s", r->reason);
		break;
	}
	return out;
}

static const char *parse_with(const struct shard_config *k, shard_column_position_fn pos, const char *sql)
{
	struct shard_parse_result r;
	shard_parse(sql, k, pos, NULL, &r);
	const char *s = summary(&r);
	shard_parse_result_free(&r);
	return s;
}

static const char *parse(const char *sql)
{
	return parse_with(keys, column_position, sql);
}

#define EXPECT(sql, want) ck_assert_str_eq(parse(sql), want)

START_TEST(select_keys)
{
	EXPECT("SELECT * FROM users WHERE id = 42", "keyed select: 42@users.id");
	EXPECT("SELECT * FROM users WHERE id = $1", "keyed select: $1@users.id");
	EXPECT("select name from USERS where 42 = ID and name = 'x'", "keyed select: 42@users.id");
	EXPECT("SELECT * FROM users u WHERE u.id IN (1, 2, $3)", "keyed select: 1@users.id 2@users.id $3@users.id");
	EXPECT("SELECT * FROM public.users WHERE public.users.id = '7'::bigint", "keyed select: 7@users.id");
	EXPECT("SELECT * FROM users WHERE users.id = $2::int8 FOR UPDATE", "keyed select: $2@users.id");
	EXPECT("SELECT * FROM users WHERE id = -9223372036854775808", "keyed select: -9223372036854775808@users.id");
	EXPECT("SELECT * FROM users WHERE id = 9223372036854775807 LIMIT 1", "keyed select: 9223372036854775807@users.id");
	EXPECT("SELECT * FROM users WHERE id = 1.5", "keyed select: 1.5@users.id");
	EXPECT("SELECT * FROM users WHERE id = NULL", "keyed select: NULL@users.id");
	EXPECT("SELECT * FROM items WHERE tenant_id = 'it''s'", "keyed select: it's@items.tenant_id");
	EXPECT("SELECT * FROM items WHERE tenant_id = E'a\\tb'", "keyed select: a\tb@items.tenant_id");
	EXPECT("SELECT * FROM items i WHERE i.tenant_id = $$x$$ AND i.id > 3", "keyed select: x@items.tenant_id");
	/* no key: every shard */
	EXPECT("SELECT * FROM users", "all select");
	EXPECT("SELECT * FROM users WHERE id = 1 OR id = 2", "all select");
	EXPECT("SELECT * FROM users WHERE id = ANY($1)", "all select");
	EXPECT("SELECT * FROM users WHERE id NOT IN (1, 2)", "all select");
	EXPECT("SELECT * FROM users WHERE id IN (1, org_id)", "all select");
	EXPECT("SELECT * FROM users WHERE id + 0 = 1", "all select");
	EXPECT("SELECT count(*), sum(org_id), min(id), avg(id) FROM users GROUP BY name ORDER BY 1 LIMIT 5",
	       "all select");
	/* reference tables only, or none */
	EXPECT("SELECT * FROM refs", "all select ref");
	EXPECT("SELECT 1", "all select ref");
	EXPECT("SELECT count(DISTINCT label), row_number() OVER () FROM refs", "all select ref");
	/* reads that write or lock: on reference tables, every copy */
	EXPECT("WITH d AS (DELETE FROM refs WHERE code = 'a' RETURNING *) SELECT * FROM d", "all select ref writes");
	EXPECT("WITH n AS (INSERT INTO refs VALUES ('a', 'b') RETURNING *) SELECT 1", "all select ref writes");
	EXPECT("SELECT * FROM refs FOR UPDATE", "all select ref writes");
	EXPECT("SELECT * INTO refs_copy FROM refs", "all select ref writes");
	EXPECT("SELECT * FROM refs WHERE code IN (SELECT code FROM refs FOR SHARE)", "all select ref writes");
}
END_TEST

START_TEST(select_joins)
{
	EXPECT("SELECT * FROM users u JOIN orders o ON o.user_id = u.id WHERE u.id = 5", "keyed select: 5@users.id");
	EXPECT("SELECT * FROM users u JOIN orders o ON o.user_id = u.id AND o.user_id = $1",
	       "keyed select: $1@orders.user_id");
	EXPECT("SELECT * FROM users u, orders o WHERE u.id = o.user_id AND o.user_id = 3", "keyed select: 3@orders.user_id");
	EXPECT("SELECT * FROM users u JOIN orders o ON o.user_id = u.id", "all select");
	EXPECT("SELECT * FROM users u JOIN refs r ON r.code = u.name WHERE u.id = 3", "keyed select: 3@users.id");
	/* an outer join's ON does not restrict its preserved side */
	EXPECT("SELECT * FROM users u LEFT JOIN orders o ON o.user_id = u.id AND o.user_id = 9", "all select");
	EXPECT("SELECT * FROM users u LEFT JOIN orders o ON o.user_id = u.id WHERE u.id = 9", "keyed select: 9@users.id");
	/* not on the key */
	EXPECT("SELECT * FROM users u JOIN orders o ON o.total = u.id",
	       "refused: a join of sharded tables \"users\" and \"orders\" not on their sharding keys is not supported");
	EXPECT("SELECT * FROM users u, orders o WHERE u.id = 1 AND o.user_id = 2",
	       "keyed select: 1@users.id 2@orders.user_id [one shard only: a join of sharded tables \"users\" and "
	       "\"orders\" not on their sharding keys]");
	/* a self-join on the key */
	EXPECT("SELECT * FROM users a JOIN users b ON a.id = b.id WHERE b.id = 4", "keyed select: 4@users.id");
	/* an unqualified key column two tables have: PostgreSQL refuses it as ambiguous; no key here */
	EXPECT("SELECT * FROM users a JOIN users b ON a.id = b.id WHERE id = 4", "all select");
}
END_TEST

START_TEST(select_refused)
{
	EXPECT("SELECT count(DISTINCT name) FROM users",
	       "refused: count(DISTINCT ...) across shards is not supported");
	EXPECT("SELECT count(DISTINCT name) FROM users WHERE id = 1",
	       "keyed select: 1@users.id [one shard only: count(DISTINCT ...)]");
	EXPECT("SELECT id, row_number() OVER (ORDER BY id) FROM users",
	       "refused: a window function across shards is not supported");
	EXPECT("SELECT * FROM users WHERE id IN (SELECT user_id FROM orders)",
	       "refused: a subquery on sharded table \"orders\" is not supported");
	EXPECT("SELECT * FROM users WHERE id = 1 AND EXISTS (SELECT 1 FROM refs)", "keyed select: 1@users.id");
	EXPECT("SELECT * FROM (SELECT * FROM users) s", "refused: a subquery on sharded table \"users\" is not supported");
	EXPECT("WITH x AS (SELECT * FROM users) SELECT * FROM x",
	       "refused: a subquery on sharded table \"users\" is not supported");
	EXPECT("WITH x AS (SELECT * FROM refs) SELECT * FROM x JOIN users u ON u.id = 4", "keyed select: 4@users.id");
	EXPECT("SELECT id FROM users UNION SELECT user_id FROM orders",
	       "refused: UNION, INTERSECT or EXCEPT on sharded table \"users\" is not supported");
	EXPECT("SELECT code FROM refs UNION ALL SELECT label FROM refs", "all select ref");
	/* a bare key column: the catalog says which tables have it */
	EXPECT("SELECT * FROM items WHERE label = 'x'", "all select");
	EXPECT("SELECT * FROM nowhere",
	       "refused: table \"nowhere\" is not known, so whether it has the sharding key column \"tenant_id\" is not");
	EXPECT("SELECT * FROM \"Users\" WHERE id = 1",
	       "refused: table \"Users\" is not known, so whether it has the sharding key column \"tenant_id\" is not");
}
END_TEST

START_TEST(update_delete)
{
	EXPECT("UPDATE users SET name = 'x' WHERE id = 3", "keyed update: 3@users.id");
	EXPECT("UPDATE users SET name = $1 WHERE id = $2 RETURNING *", "keyed update: $2@users.id");
	EXPECT("UPDATE orders SET total = 0", "all update");
	EXPECT("UPDATE refs SET label = 'x'", "all update ref");
	EXPECT("UPDATE users SET id = 4 WHERE id = 3",
	       "refused: an UPDATE of the sharding key \"id\" of table \"users\" is not supported (it would move the row "
	       "to another shard)");
	EXPECT("UPDATE users SET (name, id) = ('a', 2) WHERE id = 3",
	       "refused: an UPDATE of the sharding key \"id\" of table \"users\" is not supported (it would move the row "
	       "to another shard)");
	EXPECT("UPDATE users SET name = o.note FROM orders o WHERE o.user_id = 5",
	       "refused: a join of sharded tables \"users\" and \"orders\" not on their sharding keys is not supported");
	EXPECT("UPDATE users SET name = o.note FROM orders o WHERE o.user_id = users.id AND users.id = 5",
	       "keyed update: 5@users.id");
	EXPECT("DELETE FROM orders WHERE user_id IN ($1, $2)", "keyed delete: $1@orders.user_id $2@orders.user_id");
	EXPECT("DELETE FROM users USING orders o WHERE o.user_id = users.id AND users.id = 8", "keyed delete: 8@users.id");
	EXPECT("DELETE FROM users", "all delete");
	EXPECT("DELETE FROM refs WHERE code = 'a'", "all delete ref");
	EXPECT("DELETE FROM users WHERE id IN (SELECT user_id FROM orders WHERE total > 3)",
	       "refused: a subquery on sharded table \"orders\" is not supported");
}
END_TEST

START_TEST(inserts)
{
	EXPECT("INSERT INTO users (id, name) VALUES (1, 'a'), (2, 'b'), ($1, $2)",
	       "keyed insert rows: 1@users.id 2@users.id $1@users.id");
	EXPECT("INSERT INTO users (name, id) VALUES ('a', -1) RETURNING id", "keyed insert rows: -1@users.id");
	EXPECT("INSERT INTO users VALUES (5, 'e')", "keyed insert rows: 5@users.id");
	EXPECT("INSERT INTO orders VALUES (100, 7, 9.5), (101, $1::bigint, 1)",
	       "keyed insert rows: 7@orders.user_id $1@orders.user_id");
	EXPECT("INSERT INTO items VALUES (1, 'acme', 'x')", "keyed insert rows: acme@items.tenant_id");
	EXPECT("INSERT INTO users (id) VALUES (NULL)", "keyed insert rows: NULL@users.id");
	EXPECT("INSERT INTO users (id, name) VALUES ('-3'::int8, 'x')", "keyed insert rows: -3@users.id");
	EXPECT("INSERT INTO users (id, name) VALUES (1, 'a') ON CONFLICT (id) DO UPDATE SET name = excluded.name",
	       "keyed insert rows: 1@users.id");
	EXPECT("INSERT INTO refs VALUES ('a', 'b')", "all insert ref");
	EXPECT("INSERT INTO refs SELECT code, label FROM refs", "all insert ref");
	EXPECT("INSERT INTO users (name) VALUES ('x')",
	       "refused: an INSERT into sharded table \"users\" must give its sharding key \"id\"");
	EXPECT("INSERT INTO users (id, name) VALUES (1, 'a'), (DEFAULT, 'x')",
	       "refused: row 2 of an INSERT into sharded table \"users\" takes its sharding key \"id\" from a default: "
	       "give it");
	EXPECT("INSERT INTO users (id) VALUES (nextval('s'))",
	       "refused: row 1 of an INSERT into sharded table \"users\" has a sharding key \"id\" that is not a "
	       "constant or a parameter");
	EXPECT("INSERT INTO orders VALUES (1)",
	       "refused: row 1 of an INSERT into sharded table \"orders\" has no sharding key \"user_id\"");
	EXPECT("INSERT INTO users (id) SELECT 1", "refused: INSERT ... SELECT into sharded table \"users\" is not supported");
	EXPECT("INSERT INTO users DEFAULT VALUES",
	       "refused: INSERT ... DEFAULT VALUES into sharded table \"users\" is not supported");
	EXPECT("INSERT INTO users (id, name) VALUES (1, (SELECT max(note) FROM orders))",
	       "refused: a subquery on sharded table \"orders\" is not supported");
	EXPECT("INSERT INTO users (id, name) VALUES (1, 'a') ON CONFLICT (id) DO UPDATE SET id = 2",
	       "refused: ON CONFLICT DO UPDATE of the sharding key \"id\" of table \"users\" is not supported");
	/* without a catalog, the key's place must come from a column list */
	ck_assert_str_eq(parse_with(plain_keys, NULL, "INSERT INTO users VALUES (5)"),
			 "refused: the place of sharding key \"id\" in table \"users\" is not known: name the INSERT's columns");
	ck_assert_str_eq(parse_with(plain_keys, NULL, "INSERT INTO users (id) VALUES (5)"), "keyed insert rows: 5@users.id");
	ck_assert_str_eq(parse_with(plain_keys, NULL, "SELECT * FROM anything WHERE id = 1"), "all select ref");
}
END_TEST

START_TEST(other_statements)
{
	EXPECT("BEGIN", "all other");
	EXPECT("SET search_path = app", "all other");
	EXPECT("CREATE TABLE t (id bigint)", "all other");
	EXPECT("", "all other");
	EXPECT("-- only a comment", "all other");
	EXPECT("SELECT 1; SELECT 2",
	       "refused: several statements in one query are not supported on a sharded database: send them one at a "
	       "time");
	EXPECT("SELEC 1", "error: syntax error at or near \"SELEC\"");
	EXPECT("SELECT * FROM users WHERE id = 'unterminated", "error: unterminated quoted string at or near \"'unterminated\"");
}
END_TEST

static char *repeat(const char *head, const char *unit, size_t n, const char *tail)
{
	size_t len = strlen(head) + strlen(unit) * n + strlen(tail) + 1;
	char *s = malloc(len), *p = s;
	ck_assert_ptr_nonnull(s);
	p += sprintf(p, "%s", head);
	for (size_t i = 0; i < n; i++)
		p += sprintf(p, "%s", unit);
	sprintf(p, "%s", tail);
	return s;
}

/* head, n times open, inner, n times close. */
static char *nested(const char *head, const char *open, size_t n, const char *inner, const char *close)
{
	char *opened = repeat(head, open, n, inner);
	char *all = repeat(opened, close, n, "");
	free(opened);
	return all;
}

/*
 * Trees too deep for libpg_query's serialiser and protobuf-c's unpack are
 * refused before parsing; as deep as the bound lets through parses whole
 * (with a 2 MB stack too: `ulimit -s 2048; CK_FORK=no test_shard_parse`
 * passes, a quarter of the usual 8 MB).
 */
START_TEST(hostile_depth)
{
	static const struct { const char *head, *open, *inner, *close; size_t deep, fine; } shapes[] = {
		{ "SELECT * FROM users WHERE id = 1 AND org_id = ", "1+", "1", "", 5000, 490 },
		{ "SELECT ", "- ", "1", "", 5000, 990 },
		{ "SELECT * FROM refs WHERE ", "NOT ", "true", "", 5000, 990 },
		{ "SELECT 1", "::int", "", "", 5000, 330 },
		{ "SELECT ", "abs(", "1", ")", 3000, 110 },
		{ "SELECT ", "(SELECT ", "1", ")", 3000, 110 },
		{ "SELECT ", "CASE WHEN true THEN ", "1", " END", 3000, 120 },
		{ "SELECT ", "ARRAY[", "1", "]", 3000, 110 },
		{ "SELECT ", "'a' || ", "'b'", "", 5000, 330 },
		{ "SELECT * FROM refs r0", " JOIN refs r ON true", "", "", 5000, 190 },
		{ "SELECT 1", " UNION SELECT 1", "", "", 5000, 330 },
	};
	for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
		char *deep = nested(shapes[i].head, shapes[i].open, shapes[i].deep, shapes[i].inner, shapes[i].close);
		ck_assert_msg(shard_parse_too_deep(deep, strlen(deep)), "shape %zu: not too deep", i);
		ck_assert_str_eq(parse(deep), "refused: the statement is nested too deeply for a sharded database");
		free(deep);
		char *ok = nested(shapes[i].head, shapes[i].open, shapes[i].fine, shapes[i].inner, shapes[i].close);
		const char *got = parse(ok);
		ck_assert_msg(strncmp(got, "keyed", 5) == 0 || strncmp(got, "all", 3) == 0, "shape %zu, %zu levels: %s", i,
			      shapes[i].fine, got);
		free(ok);
	}
	/* long flat lists are not deep */
	char *in = repeat("SELECT * FROM users WHERE id IN (0", ", 1", 100000, ")");
	ck_assert(!shard_parse_too_deep(in, strlen(in)));
	struct shard_parse_result r;
	shard_parse(in, keys, column_position, NULL, &r);
	ck_assert_int_eq(r.verdict, SHARD_PARSE_KEYED);
	ck_assert_int_eq(r.n_values, 100001);
	shard_parse_result_free(&r);
	free(in);
	char *ands = repeat("SELECT * FROM users WHERE id = 7", " AND name <> 'x'", 20000, "");
	ck_assert_str_eq(parse(ands), "keyed select: 7@users.id");
	free(ands);
}
END_TEST

/* A 1 MB INSERT of 40,000 rows, and a statement over the 4 MB limit. */
START_TEST(hostile_size)
{
	char *insert = repeat("INSERT INTO users (id, name) VALUES (0, 'x')", ", (123456, 'abcdefghijklmnop')", 40000, "");
	ck_assert_uint_gt(strlen(insert), 1000000);
	struct shard_parse_result r;
	shard_parse(insert, keys, column_position, NULL, &r);
	ck_assert_int_eq(r.verdict, SHARD_PARSE_KEYED);
	ck_assert(r.per_row);
	ck_assert_int_eq(r.n_values, 40001);
	ck_assert_str_eq(r.values[40000].text, "123456");
	shard_parse_result_free(&r);
	free(insert);
	char *huge = repeat("SELECT '", "x", (size_t)SHARD_PARSE_MAX_LEN, "'");
	ck_assert_str_eq(parse(huge), "refused: a statement over 4 MB is not supported on a sharded database");
	free(huge);
	char *string = repeat("SELECT * FROM items WHERE tenant_id = '", "\xe2\x9c\x93", 300000, "'");
	shard_parse(string, keys, column_position, NULL, &r);
	ck_assert_int_eq(r.verdict, SHARD_PARSE_KEYED);
	ck_assert_uint_eq(strlen(r.values[0].text), 900000);
	shard_parse_result_free(&r);
	free(string);
}
END_TEST

Suite *unit_suite(void)
{
	Suite *s = suite_create("shard_parse");
	TCase *tc = tcase_create("shard_parse");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, select_keys);
	tcase_add_test(tc, select_joins);
	tcase_add_test(tc, select_refused);
	tcase_add_test(tc, update_delete);
	tcase_add_test(tc, inserts);
	tcase_add_test(tc, other_statements);
	tcase_add_test(tc, hostile_depth);
	tcase_add_test(tc, hostile_size);
	suite_add_tcase(s, tc);
	return s;
}
