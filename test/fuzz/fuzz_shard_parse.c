/*
 * fuzz_shard_parse.c - libFuzzer target: PostgreSQL's parser (libpg_query)
 * and src/feature/shard_parse.c on any text a client of a sharded
 * database may send. Nothing may crash, leak or overflow the stack (the
 * depth bound must hold whatever the text), and the result must be
 * consistent: a key only with values, each naming its table and column;
 * rows only for an INSERT; INSERT, UPDATE and DELETE write; no values with
 * ALL, REFUSED or ERROR, which carry a reason; a text the depth bound
 * calls too deep is refused.
 */
#include "fuzz.h"
#include "config_shard.h"
#include "shard_parse.h"

static struct shard_config *keys;

/* The catalog of test_shard_parse: users(id, name, org_id), orders(order_id, user_id, total), items(id, tenant_id). */
static int column_position(void *arg, const char *schema, const char *table, const char *column)
{
	static const char *const tables[][4] = {
		{ "users", "id", "name", "org_id" },
		{ "orders", "order_id", "user_id", "total" },
		{ "items", "id", "tenant_id", NULL },
	};
	(void)arg;
	(void)schema;
	for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]); i++) {
		if (strcmp(tables[i][0], table) != 0)
			continue;
		for (int c = 1; c < 4 && tables[i][c]; c++)
			if (strcmp(tables[i][c], column) == 0)
				return c - 1;
		return -1;
	}
	return (table[0] & 1) ? -1 : -2;	/* other tables: some unknown, some without the column */
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char err[256];
	fuzz_quiet_log();
	if (config_shard_parse_shards(&keys, "s0,s1,s2", err, sizeof(err)) < 0 ||
	    config_shard_parse_keys(&keys, "users.id,orders.user_id,tenant_id", err, sizeof(err)) < 0)
		abort();
	return 0;
}

static void check(const char *text, const struct shard_parse_result *r)
{
	switch (r->verdict) {
	case SHARD_PARSE_KEYED:
		FUZZ_CHECK(r->n_values > 0 && r->values);
		FUZZ_CHECK(r->statement != SHARD_STMT_OTHER);
		FUZZ_CHECK(!r->per_row || r->statement == SHARD_STMT_INSERT);
		FUZZ_CHECK(!r->reference_only);
		for (int i = 0; i < r->n_values; i++) {
			const struct shard_value *v = &r->values[i];
			FUZZ_CHECK(v->table && v->column && v->table[0] && v->column[0]);
			FUZZ_CHECK(v->kind != SHARD_VALUE_CONST || v->text);
			FUZZ_CHECK(v->kind != SHARD_VALUE_PARAM || v->param >= 0);
			FUZZ_CHECK(v->kind == SHARD_VALUE_CONST || !v->text);
		}
		break;
	case SHARD_PARSE_ALL:
		FUZZ_CHECK(r->n_values == 0 && !r->values && !r->per_row);
		break;
	case SHARD_PARSE_REFUSED:
	case SHARD_PARSE_ERROR:
		FUZZ_CHECK(r->n_values == 0 && !r->values && !r->per_row && !r->reference_only);
		FUZZ_CHECK(r->reason[0]);
		break;
	default:
		FUZZ_CHECK(false);
	}
	if (r->verdict != SHARD_PARSE_REFUSED && (r->statement == SHARD_STMT_INSERT ||
						   r->statement == SHARD_STMT_UPDATE || r->statement == SHARD_STMT_DELETE))
		FUZZ_CHECK(r->writes);
	if (shard_parse_too_deep(text, strlen(text)))
		FUZZ_CHECK(r->verdict == SHARD_PARSE_REFUSED);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = fuzz_cstring(data, size);
	struct shard_parse_result r;
	shard_parse(text, keys, column_position, NULL, &r);
	check(text, &r);
	shard_parse_result_free(&r);
	/* without a catalog too: bare key columns make tables unknown, INSERTs need column lists */
	shard_parse(text, keys, NULL, NULL, &r);
	check(text, &r);
	shard_parse_result_free(&r);
	free(text);
	return 0;
}
