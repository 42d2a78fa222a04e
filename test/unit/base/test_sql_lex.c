/*
 * test_sql_lex.c - SQL text cut into tokens as PostgreSQL's lexer cuts it:
 * strings of every kind, quoted identifiers, dollar quotes, nested and
 * line comments, statement separators, and text that ends inside any of
 * them.
 */
#include <check.h>
#include <stdlib.h>

#include "common.h"
#include "sql_lex.h"
#include "../check_main.h"

/* The tokens of sql as "K:text" joined by spaces (K: w i s d p n ; o), "!" after an unterminated one. */
static const char *tokens(const char *sql, bool standard)
{
	static char out[4096];
	struct sql_lexer lx;
	struct sql_token tok;
	size_t n = 0;
	sql_lex_init(&lx, sql, strlen(sql), standard);
	out[0] = '\0';
	while (sql_lex_next(&lx, &tok) != SQL_TOKEN_END) {
		static const char kinds[] = "-wisdpn;o";
		n += (size_t)snprintf(out + n, sizeof(out) - n, "%s%c:%.*s%s", n ? " " : "", kinds[tok.kind],
				      (int)tok.len, tok.start, tok.unterminated ? "!" : "");
		ck_assert_uint_lt(n, sizeof(out));
	}
	ck_assert_ptr_eq(tok.start, lx.end);
	return out;
}

START_TEST(words_numbers_operators)
{
	ck_assert_str_eq(tokens("SELECT a1$b, _x FROM t;", true), "w:SELECT w:a1$b o:, w:_x w:FROM w:t ;:;");
	ck_assert_str_eq(tokens("select 1.5e3+.5, $1::int", true), "w:select n:1.5e3 o:+ n:.5 o:, p:$1 o:: o:: w:int");
	ck_assert_str_eq(tokens("  \t\n\r\f\v ", true), "");
	ck_assert_str_eq(tokens("", true), "");
	ck_assert_str_eq(tokens("x\xc3\xa9y", true), "w:x\xc3\xa9y");
	/* a comment ends an operator: 2*3 here, as PostgreSQL reads it */
	ck_assert_str_eq(tokens("2*/*c*/3", true), "n:2 o:* n:3");
}
END_TEST

START_TEST(comments)
{
	ck_assert_str_eq(tokens("a -- b ; c\nd", true), "w:a w:d");
	ck_assert_str_eq(tokens("a /* b /* nested ; */ still */ c", true), "w:a w:c");
	ck_assert_str_eq(tokens("a /* b */ */ c", true), "w:a o:* o:/ w:c");
	ck_assert_str_eq(tokens("a -- no newline", true), "w:a");
	ck_assert_str_eq(tokens("a -- b\r; c", true), "w:a ;:; w:c");
	ck_assert_str_eq(tokens("a - - b / * c", true), "w:a o:- o:- w:b o:/ o:* w:c");
	struct sql_lexer lx;
	struct sql_token tok;
	const char *unterminated = "SELECT 1 /* a /* b */ ; DROP TABLE t";
	sql_lex_init(&lx, unterminated, strlen(unterminated), true);
	sql_lex_next(&lx, &tok);
	sql_lex_next(&lx, &tok);
	ck_assert(!lx.unterminated);
	ck_assert_int_eq(sql_lex_next(&lx, &tok), SQL_TOKEN_END);
	ck_assert(lx.unterminated);
}
END_TEST

START_TEST(strings)
{
	ck_assert_str_eq(tokens("'a''b;' x", true), "s:'a''b;' w:x");
	/* a backslash: literal in a standard string, an escape in E'' and with standard_conforming_strings off */
	ck_assert_str_eq(tokens("'a\\' ; 'b'", true), "s:'a\\' ;:; s:'b'");
	ck_assert_str_eq(tokens("'a\\' ; 'q'", false), "s:'a\\' ; ' w:q s:'!");
	ck_assert_str_eq(tokens("E'a\\' ; ' x", true), "s:E'a\\' ; ' w:x");
	ck_assert_str_eq(tokens("e'\\\\' ; x", true), "s:e'\\\\' ;:; w:x");
	ck_assert_str_eq(tokens("N'\\' ; x", true), "s:N'\\' ;:; w:x");
	ck_assert_str_eq(tokens("N'\\' ; x'", false), "s:N'\\' ; x'");
	ck_assert_str_eq(tokens("B'101' X'1F' U&'d\\0061t' u&\"x\"", false),
			 "s:B'101' s:X'1F' s:U&'d\\0061t' i:u&\"x\"");
	/* B'' and X'' end at their first quote, as in scan.l: a quote right after starts another string */
	ck_assert_str_eq(tokens("B'1''0' X'f''; x'", true), "s:B'1' s:'0' s:X'f' s:'; x'");
	/* a word ending in e, b, x, n or u is a word: the string after it is a standard one */
	ck_assert_str_eq(tokens("somee'\\' ; x", true), "w:somee s:'\\' ;:; w:x");
	ck_assert_str_eq(tokens("'abc", true), "s:'abc!");
	ck_assert_str_eq(tokens("E'abc\\", true), "s:E'abc\\!");
	ck_assert_str_eq(tokens("E'abc\\'", true), "s:E'abc\\'!");
}
END_TEST

START_TEST(identifiers)
{
	ck_assert_str_eq(tokens("\"a\"\"b;\" . \"c", true), "i:\"a\"\"b;\" o:. i:\"c!");
	char name[16];
	struct sql_lexer lx;
	struct sql_token tok;
	const char *sql = "\"Ab\"\"c\" MixedCase \"\" \"ok";
	sql_lex_init(&lx, sql, strlen(sql), true);
	sql_lex_next(&lx, &tok);
	ck_assert(sql_token_name(&tok, name, sizeof(name)));
	ck_assert_str_eq(name, "Ab\"c");
	sql_lex_next(&lx, &tok);
	ck_assert(sql_token_name(&tok, name, sizeof(name)));
	ck_assert_str_eq(name, "mixedcase");
	ck_assert(sql_token_is(&tok, "mixedcase"));
	ck_assert(!sql_token_is(&tok, "mixed"));
	ck_assert(!sql_token_is(&tok, "mixedcases"));
	ck_assert(!sql_token_name(&tok, name, 9));	/* no room: false, never truncated */
	sql_lex_next(&lx, &tok);
	ck_assert(!sql_token_name(&tok, name, sizeof(name)));	/* "" */
	sql_lex_next(&lx, &tok);
	ck_assert(!sql_token_name(&tok, name, sizeof(name)));	/* unterminated */
}
END_TEST

START_TEST(dollar_quotes)
{
	ck_assert_str_eq(tokens("$$a;'b$$ x", true), "d:$$a;'b$$ w:x");
	ck_assert_str_eq(tokens("$fn$ $$ ; $fn$;", true), "d:$fn$ $$ ; $fn$ ;:;");
	ck_assert_str_eq(tokens("$a$ $b$ $a", true), "d:$a$ $b$ $a!");
	ck_assert_str_eq(tokens("$1 $12a $", true), "p:$1 p:$12 w:a o:$");
	ck_assert_str_eq(tokens("$x", true), "o:$ w:x");
	ck_assert_str_eq(tokens("$1x$ y", true), "p:$1 w:x$ w:y");
	/* a $ inside a word is part of it: no dollar quote starts there */
	ck_assert_str_eq(tokens("a$b$ ; c", true), "w:a$b$ ;:; w:c");
}
END_TEST

START_TEST(statements_and_nul)
{
	struct sql_lexer lx;
	const char sql[] = "SELECT ';' ; SELECT $$;$$; /* ; */ SELECT 3\0; DROP TABLE t";
	sql_lex_init(&lx, sql, sizeof(sql), true);
	ck_assert(sql_lex_skip_statement(&lx));
	ck_assert(sql_lex_skip_statement(&lx));
	ck_assert(!sql_lex_skip_statement(&lx));	/* the text ends at its NUL */
	ck_assert_ptr_eq(lx.p, sql + strlen(sql));
}
END_TEST

START_TEST(one_megabyte)
{
	size_t n = 1 << 20;
	char *big = malloc(n + 1);
	memset(big, 'x', n);
	big[n] = '\0';
	struct sql_lexer lx;
	struct sql_token tok;
	sql_lex_init(&lx, big, n, true);
	ck_assert_int_eq(sql_lex_next(&lx, &tok), SQL_TOKEN_WORD);
	ck_assert_uint_eq(tok.len, n);
	/* an unterminated quote, comment and dollar quote of 1 MB each */
	for (const char *open = "'\"/$"; *open; open++) {
		memset(big, 'y', n);
		big[0] = *open;
		if (*open == '/')
			big[1] = '*';
		if (*open == '$')
			big[1] = '$';
		sql_lex_init(&lx, big, n, false);
		while (sql_lex_next(&lx, &tok) != SQL_TOKEN_END)
			;
		ck_assert(lx.unterminated);
	}
	free(big);
}
END_TEST

/* sql_marks and sql_find_pair at every length and offset: the SSE2 blocks (with their overlapping last one) and the byte loop agree. */
START_TEST(marks_and_pairs)
{
	ck_assert_uint_eq(sql_marks("SELECT 4711::int AS aid, 0 AS abalance;", 39), 0);
	ck_assert_uint_eq(sql_marks("SELECT 1;", 9), 0);
	ck_assert_uint_eq(sql_marks("SELECT 1; ", 10), SQL_MARK_SEMI_INSIDE);	/* a false alarm, looked at closer */
	ck_assert_uint_eq(sql_marks("BEGIN; SET a.b = 1", 18), SQL_MARK_SEMI_INSIDE);
	ck_assert_uint_eq(sql_marks("SELECT 1;SELECT 2", 17), SQL_MARK_SEMI_INSIDE);
	ck_assert_uint_eq(sql_marks("select SET_CONFIG('a', 'b', false)", 34), SQL_MARK_UNDERSCORE_C);
	ck_assert_uint_eq(sql_marks("UNLISTEN *", 10), SQL_MARK_LI);
	ck_assert_uint_eq(sql_marks("x", 1), 0);
	ck_assert_ptr_null(sql_find_pair("abc", 3, 'c', 'd'));
	char buf[80];
	for (size_t len = 2; len < sizeof(buf); len++) {
		for (size_t at = 0; at + 1 < len; at++) {
			memset(buf, 'x', len);
			buf[at] = 'L', buf[at + 1] = 'I';
			ck_assert_msg(sql_marks(buf, len) == SQL_MARK_LI, "li at %zu of %zu", at, len);
			ck_assert_ptr_eq(sql_find_pair(buf, len, 'l', 'i'), buf + at);
			buf[at] = '_', buf[at + 1] = 'c';
			ck_assert_msg(sql_marks(buf, len) == SQL_MARK_UNDERSCORE_C, "_c at %zu of %zu", at, len);
			ck_assert_ptr_eq(sql_find_pair(buf, len, '_' | 0x20, 'c'), buf + at);
			buf[at] = ';';
			ck_assert_msg(sql_marks(buf, len) == SQL_MARK_SEMI_INSIDE, "; at %zu of %zu", at, len);
			buf[at + 1] = ' ';
			ck_assert_msg(sql_marks(buf, len) == SQL_MARK_SEMI_INSIDE, "'; ' at %zu of %zu", at, len);
			ck_assert_ptr_null(sql_find_pair(buf, len, 'l', 'i'));
			buf[at] = 'x';
			ck_assert_msg(sql_marks(buf, len) == 0, "nothing at %zu of %zu", at, len);
		}
		/* a pair that would straddle the end is not read, nor a ';' last */
		memset(buf, 'x', sizeof(buf));
		buf[len - 1] = 'l', buf[len] = 'i';
		ck_assert_uint_eq(sql_marks(buf, len), 0);
		buf[len - 1] = ';';
		ck_assert_uint_eq(sql_marks(buf, len), 0);
		ck_assert_ptr_null(sql_find_pair(buf, len, 'l', 'i'));
	}
}
END_TEST

Suite *unit_suite(void)
{
	Suite *s = suite_create("sql_lex");
	TCase *tc = tcase_create("lex");
	tcase_add_test(tc, words_numbers_operators);
	tcase_add_test(tc, comments);
	tcase_add_test(tc, strings);
	tcase_add_test(tc, identifiers);
	tcase_add_test(tc, dollar_quotes);
	tcase_add_test(tc, statements_and_nul);
	tcase_add_test(tc, one_megabyte);
	tcase_add_test(tc, marks_and_pairs);
	suite_add_tcase(s, tc);
	return s;
}
