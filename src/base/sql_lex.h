/*
 * sql_lex.h - PostgreSQL's SQL text cut into tokens, as its lexer cuts it:
 * a lexer, not a parser. The one place pgvalve reads statements (the SET,
 * LISTEN and PREPARE recognisers, the read-only classifier), so that a
 * quote, a comment or a dollar quote means the same to all of them.
 *
 * Knows: blanks and comments (`--` to the end of the line, `/ * ... * /`
 * nested), string constants ('...', E'...' with backslash escapes, N'',
 * U&'', and B'' and X'' ending at their first quote; a plain or N'' one
 * takes backslash escapes too when standard_conforming_strings is off),
 * quoted identifiers ("..." and
 * U&"...", "" for a quote), dollar quotes ($$...$$, $tag$...$tag$),
 * positional parameters ($1), numbers, words (keywords and unquoted
 * identifiers), ';' and single characters of operators and punctuation.
 * The text ends at its length or its first NUL, whichever comes first.
 * Anything the text ends inside (a comment, a string, an identifier, a
 * dollar quote) runs to the end and is marked unterminated.
 *
 * Pure: no allocation, no state beyond the caller's struct sql_lexer, no
 * logging; every read stays inside [text, text + len).
 */
#ifndef PGVALVE_SQL_LEX_H
#define PGVALVE_SQL_LEX_H

#include "common.h"

enum sql_token_kind {
	SQL_TOKEN_END = 0,	/* the end of the text */
	SQL_TOKEN_WORD,		/* a keyword or unquoted identifier: [A-Za-z_\x80-\xff][A-Za-z0-9_$\x80-\xff]* */
	SQL_TOKEN_IDENT,	/* a quoted identifier: "..." or U&"..." */
	SQL_TOKEN_STRING,	/* a string constant: '...', E'...', B'...', X'...', N'...', U&'...' */
	SQL_TOKEN_DOLLAR,	/* a dollar-quoted string */
	SQL_TOKEN_PARAM,	/* $1 */
	SQL_TOKEN_NUMBER,
	SQL_TOKEN_SEMICOLON,
	SQL_TOKEN_OP,		/* one character of an operator or punctuation: ( ) , . * = ... */
};

struct sql_token {
	enum sql_token_kind kind;
	const char *start;	/* into the text; len bytes, quotes and prefixes included */
	size_t len;
	bool unterminated;	/* a string, identifier or dollar quote the text ended inside */
};

struct sql_lexer {
	const char *p, *end;
	bool standard_strings;	/* standard_conforming_strings: a plain '' string takes \ as it is */
	bool unterminated;	/* a comment, string, identifier or dollar quote ran to the end */
};

/* Starts lx at text (len bytes, or up to its first NUL). */
void sql_lex_init(struct sql_lexer *lx, const char *text, size_t len, bool standard_strings);
/* Past blanks and comments. */
void sql_lex_skip_space(struct sql_lexer *lx);
/* The next token into tok (blanks and comments skipped first); returns its kind. */
enum sql_token_kind sql_lex_next(struct sql_lexer *lx, struct sql_token *tok);
/* The next token's kind, lx unmoved. */
enum sql_token_kind sql_lex_peek(const struct sql_lexer *lx, struct sql_token *tok);
/* To just after the next ';' outside quotes and comments, or the end; true if there was one. */
bool sql_lex_skip_statement(struct sql_lexer *lx);
/* Whether tok is the word kw (lower case), in any case. */
bool sql_token_is_word(const struct sql_token *tok, const char *kw);
/* The same, the first letter compared inline: the classifiers ask it of every token, most often "no". */
static inline bool sql_token_is(const struct sql_token *tok, const char *kw)
{
	if (tok->kind != SQL_TOKEN_WORD || !tok->len)
		return false;
	unsigned char c = (unsigned char)tok->start[0];
	if (c >= 'A' && c <= 'Z')
		c = (unsigned char)(c + 32);
	return c == (unsigned char)kw[0] && sql_token_is_word(tok, kw);
}
/* Whether tok is the one character c (';' or an operator's). */
static inline bool sql_token_is_char(const struct sql_token *tok, char c)
{
	return (tok->kind == SQL_TOKEN_OP || tok->kind == SQL_TOKEN_SEMICOLON) && tok->start[0] == c;
}
/*
 * The name a WORD or IDENT token stands for, as PostgreSQL reads it: a
 * word folded to lower case (ASCII), a quoted identifier without its
 * quotes ("" as one). Into out (NUL-terminated, not truncated); false if
 * tok is neither, empty, unterminated, a U&"" one, or too long for size.
 */
bool sql_token_name(const struct sql_token *tok, char *out, size_t size);

/*
 * The first place in text[0, len) where two bytes a, b follow each other,
 * each compared with its 0x20 bit set (a letter in either case: pass it in
 * lower case; '_' is 0x7f), or NULL. A raw byte search, quotes and
 * comments not skipped: the recognisers' cheap first test, which every
 * Query and Parse of a pool goes through (SSE2: sixteen places at once).
 */
const char *sql_find_pair(const char *text, size_t len, char a, char b);

/*
 * What one pass over a statement text shows the recognisers, before any
 * of them lexes it (raw bytes: quotes and comments not skipped, so a mark
 * may be a false alarm, never a miss):
 */
enum sql_mark {
	SQL_MARK_LI = 1 << 0,		/* "li" in any case: maybe LISTEN, UNLISTEN (notify.c) */
	SQL_MARK_UNDERSCORE_C = 1 << 1,	/* "_c" in any case: maybe set_config (session_set.c) */
	SQL_MARK_SEMI_INSIDE = 1 << 2,	/* a ';' before the last byte: maybe more statements */
};
/* The marks of text[0, len) (enum sql_mark bits): every Query and Parse of a pooled client passes here. */
unsigned sql_marks(const char *text, size_t len);

#endif
