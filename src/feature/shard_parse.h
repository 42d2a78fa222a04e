/*
 * shard_parse.h - what a statement to a sharded database says about its
 * sharding key, read with PostgreSQL's own parser (libpg_query), never a
 * grammar of ours. Built only with libpg_query (HAVE_PG_QUERY); the
 * router (issue 57) is its caller, and only for sharded databases, so an
 * ordinary database never pays for a parse.
 *
 * Given one statement and the database's sharding keys (config_shard.h),
 * shard_parse() answers:
 *   SHARD_PARSE_KEYED   the statement's rows are those of the key values
 *                       in values[]: for SELECT, UPDATE and DELETE, a
 *                       key = const|$n or key IN (consts|params) in the
 *                       WHERE clause's top-level AND (or an inner join's
 *                       ON), any of the values (per_row false); for
 *                       INSERT ... VALUES, row i's key is values[i]
 *                       (per_row true), the key's place in a row without a
 *                       column list asked of the catalog (column_position);
 *   SHARD_PARSE_ALL     no key restricts it: every shard (reference_only:
 *                       only tables without a key, so a read may go to any
 *                       one shard and what writes (writes: also a SELECT
 *                       with a data-modifying WITH, SELECT INTO, FOR
 *                       UPDATE) must go to all); also every statement that
 *                       is not SELECT/INSERT/UPDATE/DELETE;
 *   SHARD_PARSE_REFUSED what the router cannot answer exactly, with the
 *                       reason for the client: a join of sharded tables not
 *                       on their keys, a subquery, CTE or set operation on
 *                       a sharded table, a change of a row's key, an INSERT
 *                       row whose key is not a constant or parameter,
 *                       several statements in one text, a statement nested
 *                       too deeply to parse safely;
 *   SHARD_PARSE_ERROR   PostgreSQL's parser refused the text (message).
 * A KEYED statement may still be exact only on one shard (window
 * functions, count(DISTINCT ...), two sharded tables each restricted by
 * its own key but not joined on it): cross_shard names why; the router
 * refuses it if its values fall on more than one shard.
 *
 * Values are as written: a constant's text (an integer's digits, a
 * string's contents unescaped, a number too big for int4 as its digits),
 * a parameter's number, or NULL (a NULL key is on shard 0, as a
 * PostgreSQL hash partition with remainder 0 holds NULL keys). Casts
 * around a constant or parameter are looked through. The caller hashes
 * them by the key column's type (shard_hash_parse); a value that does not
 * read as that type means "no key" for a SELECT, UPDATE or DELETE and a
 * refusal for an INSERT.
 *
 * Why libpg_query's protobuf output and not its JSON: the tree comes as
 * typed C structs (pg_query.pb-c.h), so a renamed field in a later
 * libpg_query breaks the build instead of silently reading no key, and a
 * binary tree costs less to make and read than JSON text we would have to
 * parse ourselves. Its price: protobuf-c's unpack, like libpg_query's
 * serialiser, recurses once per level of the tree with no limit (a
 * 10 kB "SELECT 1+1+...+1" overflows an 8 MB stack there), so before
 * the parser runs, a bound of the tree's depth read from the tokens
 * (sql_lex.h) refuses what could be too deep (the deepest trees it lets
 * through parse and unpack within a 2 MB stack, a quarter of the usual
 * 8 MB: test_shard_parse), and the walk here stops at a fixed depth too.
 *
 * Owns the result's allocations (shard_parse_result_free). Pure apart from
 * libpg_query's allocations: no I/O, no logging, no global state.
 */
#ifndef PGVALVE_SHARD_PARSE_H
#define PGVALVE_SHARD_PARSE_H

#include "common.h"

struct shard_config;

/* A statement longer than this is refused without parsing. */
#define SHARD_PARSE_MAX_LEN (4 * 1024 * 1024)

enum shard_parse_verdict {
	SHARD_PARSE_KEYED,
	SHARD_PARSE_ALL,
	SHARD_PARSE_REFUSED,
	SHARD_PARSE_ERROR,
};

enum shard_statement {
	SHARD_STMT_SELECT,
	SHARD_STMT_INSERT,
	SHARD_STMT_UPDATE,
	SHARD_STMT_DELETE,
	SHARD_STMT_OTHER,	/* anything else: SET, BEGIN, DDL, COPY, ... (the router's rules) */
};

enum shard_value_kind {
	SHARD_VALUE_CONST,	/* text */
	SHARD_VALUE_PARAM,	/* param */
	SHARD_VALUE_NULL,
};

struct shard_value {
	enum shard_value_kind kind;
	char *text;		/* SHARD_VALUE_CONST: the constant as written (string contents unescaped) */
	int param;		/* SHARD_VALUE_PARAM: $n's n (1-based) */
	char *table;		/* the table whose key it is (its name as the statement gives it) */
	char *column;		/* that table's key column */
};

struct shard_parse_result {
	enum shard_parse_verdict verdict;
	enum shard_statement statement;
	bool per_row;		/* INSERT ... VALUES: values[i] is row i's key */
	bool reference_only;	/* ALL: only tables without a sharding key (or none) */
	bool writes;		/* changes or locks rows (INSERT, UPDATE, DELETE, also in a WITH; SELECT INTO, FOR UPDATE):
				 * on reference tables, every shard's copy, never just one */
	int n_values;
	struct shard_value *values;
	char cross_shard[160];	/* "": exact on any number of shards; else why only on one */
	char reason[256];	/* REFUSED, ERROR: for the client */
};

/*
 * The catalog, asked for a table (schema NULL if the statement does not
 * name one) and a column: the column's 0-based position among the table's
 * columns as INSERT without a column list fills them (attnum order,
 * dropped columns skipped), -1 if the table has no such column, -2 if the
 * table is not known. NULL: nothing is known (a bare sharding_key column
 * then makes every table unknown, and an INSERT without a column list
 * into a sharded table is refused).
 */
typedef int (*shard_column_position_fn)(void *arg, const char *schema, const char *table, const char *column);

/* Reads sql (NUL-terminated) against keys; *out is filled (free it with shard_parse_result_free). */
void shard_parse(const char *sql, const struct shard_config *keys, shard_column_position_fn column_position,
		 void *arg, struct shard_parse_result *out);
void shard_parse_result_free(struct shard_parse_result *r);

/* Whether sql's tree could be deeper than libpg_query and protobuf-c survive (read from its tokens). */
bool shard_parse_too_deep(const char *sql, size_t len);

#endif
