/*
 * fuzz_sql_lex.c - libFuzzer target: SQL text cut into tokens, both ways
 * standard_conforming_strings can read it. Every token lies inside the
 * text, follows the one before it, is never empty but at the end, and the
 * statement walk ends where the token walk does; names fit their buffer.
 */
#include "fuzz.h"
#include "sql_lex.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_quiet_log();
	return 0;
}

static void walk(const char *text, size_t size, bool standard)
{
	struct sql_lexer lx, stmts;
	struct sql_token tok;
	char name[64];
	const char *prev_end = text;
	sql_lex_init(&lx, text, size, standard);
	stmts = lx;
	FUZZ_CHECK(lx.end <= text + size);
	while (sql_lex_next(&lx, &tok) != SQL_TOKEN_END) {
		FUZZ_CHECK(tok.start >= prev_end && tok.len > 0 && tok.start + tok.len <= lx.end);
		FUZZ_CHECK(lx.p == tok.start + tok.len);
		if (sql_token_name(&tok, name, sizeof(name)))
			FUZZ_CHECK(strlen(name) < sizeof(name) && strlen(name) > 0);
		FUZZ_CHECK(!tok.unterminated || tok.start + tok.len == lx.end);
		prev_end = tok.start + tok.len;
	}
	FUZZ_CHECK(tok.start == lx.end && tok.len == 0);
	while (sql_lex_skip_statement(&stmts))
		FUZZ_CHECK(stmts.p <= stmts.end);
	FUZZ_CHECK(stmts.p == lx.p && stmts.unterminated == lx.unterminated);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* exactly size bytes, no NUL after them: ASan sees a read past the text */
	char *text = malloc(size ? size : 1);
	if (!text)
		abort();
	if (size)
		memcpy(text, data, size);
	walk(text, size, true);
	walk(text, size, false);
	free(text);
	return 0;
}
