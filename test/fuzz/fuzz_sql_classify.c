/*
 * fuzz_sql_classify.c - libFuzzer target: the read balancer's classifier
 * must never call a write a read. Whatever it calls a read is walked again
 * token by token, both ways standard_conforming_strings reads it, and must
 * hold only statements starting with SELECT, WITH, VALUES, TABLE or SHOW,
 * no INSERT/UPDATE/DELETE/MERGE/INTO word, no call of nextval, setval or
 * a VOLATILE function or pg_advisory_*, nothing unterminated. A read must stay a read with
 * blanks and comments around it, and a READ ONLY transaction start must
 * not hold COMMIT and friends after it. (test_balance puts the texts the
 * classifier lets through to PostgreSQL itself, in a read-only
 * transaction.)
 */
#include "fuzz.h"
#include "sql_classify.h"
#include "sql_lex.h"

#include <strings.h>

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_quiet_log();
	return 0;
}

/* pg_proc stand-in: everything not obviously writing is "safe", so the classifier's own rules are what is tested. */
static bool safe(void *arg, const char *name)
{
	(void)arg;
	return strcmp(name, "volatile_fn") != 0;
}

static bool is_any(const struct sql_token *t, const char *const *words)
{
	for (; *words; words++)
		if (sql_token_is(t, *words))
			return true;
	return false;
}

static void check_read(const char *text, size_t size, bool standard)
{
	static const char *const starts[] = { "select", "with", "values", "table", "show", NULL };
	static const char *const writes[] = { "insert", "update", "delete", "merge", "into", NULL };
	static const char *const writers[] = { "nextval", "setval", "volatile_fn", NULL };	/* when called */
	struct sql_lexer lx;
	static const char *const namers[] = { "as", "with", "recursive", NULL };	/* name( after them: no call */
	struct sql_token t, next, prev = { 0 };
	bool at_start = true;
	sql_lex_init(&lx, text, size, standard);
	for (; sql_lex_next(&lx, &t) != SQL_TOKEN_END; prev = t) {
		sql_lex_peek(&lx, &next);
		bool advisory = t.kind == SQL_TOKEN_WORD && t.len >= 12 && strncasecmp(t.start, "pg_advisory_", 12) == 0;
		FUZZ_CHECK(!((is_any(&t, writers) || advisory) && sql_token_is_char(&next, '(') && !is_any(&prev, namers)));
		FUZZ_CHECK(!t.unterminated);
		if (t.kind == SQL_TOKEN_SEMICOLON) {
			at_start = true;
			continue;
		}
		if (at_start && !sql_token_is_char(&t, '(')) {
			FUZZ_CHECK(is_any(&t, starts));
			at_start = false;
		}
		FUZZ_CHECK(!is_any(&t, writes));
	}
	FUZZ_CHECK(!lx.unterminated);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size ? size : 1);	/* exactly size bytes: ASan sees a read past them */
	if (!text)
		abort();
	if (size)
		memcpy(text, data, size);
	size_t len = strnlen(text, size);
	if (sql_classify_read_only(text, size, safe, NULL)) {
		check_read(text, size, true);
		check_read(text, size, false);
		/* the same statements between blanks and comments: still a read */
		char *wrapped = malloc(len + 32);
		if (!wrapped)
			abort();
		memcpy(wrapped, " /* a */\n", 9);
		memcpy(wrapped + 9, text, len);
		memcpy(wrapped + 9 + len, "\n", 1);
		FUZZ_CHECK(sql_classify_read_only(wrapped, len + 10, safe, NULL));
		free(wrapped);
	}
	if (sql_classify_begin(text, size) == SQL_BEGIN_READ_ONLY) {
		static const char *const enders[] = { "commit", "end", "rollback", "abort", "prepare", "set", NULL };
		struct sql_lexer lx;
		struct sql_token t;
		sql_lex_init(&lx, text, size, true);
		sql_lex_next(&lx, &t);
		FUZZ_CHECK(sql_token_is(&t, "begin") || sql_token_is(&t, "start"));
		while (sql_lex_skip_statement(&lx))
			if (sql_lex_next(&lx, &t) != SQL_TOKEN_SEMICOLON)
				FUZZ_CHECK(!is_any(&t, enders));
		FUZZ_CHECK(!lx.unterminated);
	}
	free(text);
	return 0;
}
