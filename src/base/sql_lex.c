/*
 * sql_lex.c - PostgreSQL's SQL text cut into tokens (see sql_lex.h for
 * the contract). Follows the rules of PostgreSQL's scan.l where they
 * decide where a token ends; what a token means is the caller's.
 *
 * Owns nothing: reads the caller's text, writes only the caller's lexer
 * and token.
 */
#include "common.h"
#include "sql_lex.h"

#ifdef __SSE2__
#include <emmintrin.h>	/* sql_find_pair, sql_marks */
#endif

/* Character classes, as scan.l names them. */
enum {
	C_SPACE = 1,		/* [ \t\n\r\f\v] */
	C_IDSTART = 2,		/* [A-Za-z_\x80-\xff] */
	C_IDCHAR = 4,		/* C_IDSTART, digits, $ */
	C_DIGIT = 8,
	C_TAGCHAR = 16,		/* a dollar quote's tag: C_IDCHAR but $ */
};

static inline bool is(const char *p, unsigned cls)
{
	unsigned char c = (unsigned char)*p;
	bool alpha = ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') || c == '_' || c >= 0x80;
	bool digit = c >= '0' && c <= '9';
	switch (cls) {
	case C_SPACE:
		return c == ' ' || (c >= '\t' && c <= '\r');	/* \t \n \v \f \r */
	case C_IDSTART:
		return alpha;
	case C_IDCHAR:
		return alpha || digit || c == '$';
	case C_DIGIT:
		return digit;
	default:
		return alpha || digit;
	}
}

void sql_lex_init(struct sql_lexer *lx, const char *text, size_t len, bool standard_strings)
{
	const char *nul = memchr(text, '\0', len);
	lx->p = text;
	lx->end = nul ? nul : text + len;
	lx->standard_strings = standard_strings;
	lx->unterminated = false;
}

/* Past a block comment starting at lx->p ("/ *"); they nest. */
static void skip_block_comment(struct sql_lexer *lx)
{
	int depth = 0;
	const char *p = lx->p;
	while (p < lx->end) {
		if (p + 1 < lx->end && p[0] == '/' && p[1] == '*') {
			depth++;
			p += 2;
		} else if (p + 1 < lx->end && p[0] == '*' && p[1] == '/') {
			p += 2;
			if (--depth == 0) {
				lx->p = p;
				return;
			}
		} else {
			p++;
		}
	}
	lx->p = lx->end;
	lx->unterminated = true;
}

void sql_lex_skip_space(struct sql_lexer *lx)
{
	while (lx->p < lx->end) {
		if (is(lx->p, C_SPACE)) {
			lx->p++;
		} else if (lx->p[0] == '-' && lx->p + 1 < lx->end && lx->p[1] == '-') {
			/* to the end of the line: a \n or a \r (scan.l's non_newline) */
			const char *p = lx->p + 2;
			while (p < lx->end && *p != '\n' && *p != '\r')
				p++;
			lx->p = p;
		} else if (lx->p[0] == '/' && lx->p + 1 < lx->end && lx->p[1] == '*') {
			skip_block_comment(lx);
		} else {
			return;
		}
	}
}

/* How a quoted token ends (scan.l's states). */
enum quoting {
	Q_DOUBLED,		/* '' (or "") stands for one quote: standard strings, identifiers, U&'' */
	Q_BACKSLASH,		/* that, and \ takes the next byte: E'', '' with standard_conforming_strings off */
	Q_FIRST,		/* the first quote ends it: B'' and X'' (a quote right after starts another string) */
};

/* Past a quoted token whose opening quote is at p: after its closing quote, or NULL if the text ends first. */
static const char *skip_quoted(const char *p, const char *end, char quote, enum quoting how)
{
	for (p++; p < end; p++) {
		if (how == Q_BACKSLASH && *p == '\\') {
			if (++p >= end)
				return NULL;
		} else if (*p == quote) {
			if (how != Q_FIRST && p + 1 < end && p[1] == quote)
				p++;
			else
				return p + 1;
		}
	}
	return NULL;
}

/* A dollar quote's opening $tag$ at p: its length, or 0 if p starts none. */
static size_t dollar_tag_len(const char *p, const char *end)
{
	const char *t = p + 1;
	if (t < end && *t != '$') {
		if (!is(t, C_IDSTART))
			return 0;
		while (t < end && is(t, C_TAGCHAR))
			t++;
	}
	return t < end && *t == '$' ? (size_t)(t + 1 - p) : 0;
}

/* A plain (or N'') string's quoting, by standard_conforming_strings. */
static enum quoting string_quoting(const struct sql_lexer *lx)
{
	return lx->standard_strings ? Q_DOUBLED : Q_BACKSLASH;
}

/* Sets tok and moves lx past the quoted token of kind at q (the quote), which the token starts at from. */
static enum sql_token_kind lex_quoted(struct sql_lexer *lx, struct sql_token *tok, enum sql_token_kind kind,
				      const char *from, const char *q, enum quoting how)
{
	const char *after = skip_quoted(q, lx->end, *q, how);
	tok->unterminated = !after;
	lx->unterminated |= !after;
	lx->p = after ? after : lx->end;
	tok->kind = kind;
	tok->start = from;
	tok->len = (size_t)(lx->p - from);
	return kind;
}

static enum sql_token_kind lex_dollar(struct sql_lexer *lx, struct sql_token *tok)
{
	const char *p = lx->p;
	tok->start = p;
	if (p + 1 < lx->end && is(p + 1, C_DIGIT)) {
		for (p++; p < lx->end && is(p, C_DIGIT); p++)
			;
		tok->kind = SQL_TOKEN_PARAM;
	} else {
		size_t tag = dollar_tag_len(p, lx->end);
		if (!tag) {
			p++;
			tok->kind = SQL_TOKEN_OP;
		} else {
			const char *body = p + tag, *close = NULL;
			for (const char *q = body; (q = memchr(q, '$', (size_t)(lx->end - q))) != NULL; q++) {
				if ((size_t)(lx->end - q) >= tag && memcmp(q, p, tag) == 0) {
					close = q;
					break;
				}
			}
			tok->unterminated = !close;
			lx->unterminated |= !close;
			p = close ? close + tag : lx->end;
			tok->kind = SQL_TOKEN_DOLLAR;
		}
	}
	lx->p = p;
	tok->len = (size_t)(p - tok->start);
	return tok->kind;
}

/* A word, or the prefix of a string or identifier (E'', B'', X'', N'', U&'', U&""). */
static enum sql_token_kind lex_word(struct sql_lexer *lx, struct sql_token *tok)
{
	const char *p = lx->p, *end = lx->end;
	char c = (char)(*p | 0x20);
	if (p + 1 < end && p[1] == '\'') {
		if (c == 'e')
			return lex_quoted(lx, tok, SQL_TOKEN_STRING, p, p + 1, Q_BACKSLASH);
		if (c == 'b' || c == 'x')
			return lex_quoted(lx, tok, SQL_TOKEN_STRING, p, p + 1, Q_FIRST);
		if (c == 'n')
			return lex_quoted(lx, tok, SQL_TOKEN_STRING, p, p + 1, string_quoting(lx));
	}
	if (c == 'u' && p + 2 < end && p[1] == '&' && (p[2] == '\'' || p[2] == '"'))
		return lex_quoted(lx, tok, p[2] == '"' ? SQL_TOKEN_IDENT : SQL_TOKEN_STRING, p, p + 2, Q_DOUBLED);
	for (p++; p < end && is(p, C_IDCHAR); p++)
		;
	tok->kind = SQL_TOKEN_WORD;
	tok->start = lx->p;
	tok->len = (size_t)(p - lx->p);
	lx->p = p;
	return SQL_TOKEN_WORD;
}

static enum sql_token_kind lex_number(struct sql_lexer *lx, struct sql_token *tok)
{
	const char *p = lx->p;
	for (p++; p < lx->end && (is(p, C_IDCHAR) || *p == '.'); p++)
		;
	tok->kind = SQL_TOKEN_NUMBER;
	tok->start = lx->p;
	tok->len = (size_t)(p - lx->p);
	lx->p = p;
	return SQL_TOKEN_NUMBER;
}

enum sql_token_kind sql_lex_next(struct sql_lexer *lx, struct sql_token *tok)
{
	sql_lex_skip_space(lx);
	tok->unterminated = false;
	if (lx->p >= lx->end) {
		tok->kind = SQL_TOKEN_END;
		tok->start = lx->end;
		tok->len = 0;
		return SQL_TOKEN_END;
	}
	const char *p = lx->p;
	switch (*p) {
	case '\'':
		return lex_quoted(lx, tok, SQL_TOKEN_STRING, p, p, string_quoting(lx));
	case '"':
		return lex_quoted(lx, tok, SQL_TOKEN_IDENT, p, p, Q_DOUBLED);
	case '$':
		return lex_dollar(lx, tok);
	case ';':
		tok->kind = SQL_TOKEN_SEMICOLON;
		break;
	case '.':
		if (p + 1 < lx->end && is(p + 1, C_DIGIT))
			return lex_number(lx, tok);
		tok->kind = SQL_TOKEN_OP;
		break;
	default:
		if (is(p, C_IDSTART))
			return lex_word(lx, tok);
		if (is(p, C_DIGIT))
			return lex_number(lx, tok);
		tok->kind = SQL_TOKEN_OP;
	}
	tok->start = p;
	tok->len = 1;
	lx->p = p + 1;
	return tok->kind;
}

enum sql_token_kind sql_lex_peek(const struct sql_lexer *lx, struct sql_token *tok)
{
	struct sql_lexer copy = *lx;
	return sql_lex_next(&copy, tok);
}

bool sql_lex_skip_statement(struct sql_lexer *lx)
{
	struct sql_token tok;
	for (;;) {
		switch (sql_lex_next(lx, &tok)) {
		case SQL_TOKEN_END:
			return false;
		case SQL_TOKEN_SEMICOLON:
			return true;
		default:
			break;
		}
	}
}

bool sql_token_is_word(const struct sql_token *tok, const char *kw)
{
	if (tok->kind != SQL_TOKEN_WORD)
		return false;
	size_t i = 0;
	for (; i < tok->len; i++) {
		unsigned char c = (unsigned char)tok->start[i];
		if (c >= 'A' && c <= 'Z')
			c = (unsigned char)(c + 32);
		if (!kw[i] || c != (unsigned char)kw[i])
			return false;
	}
	return kw[i] == '\0';
}

bool sql_token_name(const struct sql_token *tok, char *out, size_t size)
{
	size_t n = 0;
	if (tok->kind == SQL_TOKEN_WORD) {
		if (tok->len + 1 > size)
			return false;
		for (; n < tok->len; n++) {
			char c = tok->start[n];
			out[n] = c >= 'A' && c <= 'Z' ? (char)(c + 32) : c;
		}
	} else if (tok->kind == SQL_TOKEN_IDENT && !tok->unterminated && tok->start[0] == '"') {
		for (size_t i = 1; i + 1 < tok->len; i++) {
			if (tok->start[i] == '"')
				i++;	/* "" inside: one quote (the closing one is at len - 1) */
			if (n + 1 >= size)
				return false;
			out[n++] = tok->start[i];
		}
	} else {
		return false;
	}
	out[n] = '\0';
	return n > 0;
}

const char *sql_find_pair(const char *text, size_t len, char a, char b)
{
	if (len < 2)
		return NULL;
	size_t last = len - 2, i = 0;	/* the last place a pair can start */
#ifdef __SSE2__
	if (last + 1 >= 16) {
		const __m128i case_bit = _mm_set1_epi8(0x20), va = _mm_set1_epi8(a), vb = _mm_set1_epi8(b);
		/* blocks of 16 places (reading text[i .. i + 16]); the last block ends at last, overlapping */
		for (size_t next = 0; next <= last; next += 16) {
			i = MIN(next, last + 1 - 16);
			__m128i x = _mm_or_si128(_mm_loadu_si128((const __m128i *)(const void *)(text + i)), case_bit);
			__m128i y = _mm_or_si128(_mm_loadu_si128((const __m128i *)(const void *)(text + i + 1)), case_bit);
			unsigned m = (unsigned)_mm_movemask_epi8(_mm_and_si128(_mm_cmpeq_epi8(x, va), _mm_cmpeq_epi8(y, vb)));
			if (m)
				return text + i + (size_t)__builtin_ctz(m);
		}
		return NULL;
	}
#endif
	for (; i <= last; i++)
		if ((text[i] | 0x20) == a && (text[i + 1] | 0x20) == b)
			return text + i;
	return NULL;
}

/* The marks of the pair text[i], text[i + 1], each with its 0x20 bit set. */
static inline unsigned pair_marks(unsigned char x, unsigned char y)
{
	return (x == 'l' && y == 'i' ? SQL_MARK_LI : 0) | (x == ('_' | 0x20) && y == 'c' ? SQL_MARK_UNDERSCORE_C : 0) |
	       (x == ';' ? SQL_MARK_SEMI_INSIDE : 0);
}

unsigned sql_marks(const char *text, size_t len)
{
	if (len < 2)
		return 0;
	size_t last = len - 2, i = 0;	/* the last place a pair starts */
	unsigned marks = 0;
#ifdef __SSE2__
	if (last + 1 >= 16) {
		const __m128i case_bit = _mm_set1_epi8(0x20), ell = _mm_set1_epi8('l'), eye = _mm_set1_epi8('i');
		const __m128i under = _mm_set1_epi8('_' | 0x20), cee = _mm_set1_epi8('c'), semi = _mm_set1_epi8(';');
		__m128i li = _mm_setzero_si128(), uc = li, si = li;
		/* blocks of 16 places (reading text[i .. i + 16]); the last block ends at last, overlapping */
		for (size_t next = 0; next <= last; next += 16) {
			i = MIN(next, last + 1 - 16);
			__m128i x = _mm_or_si128(_mm_loadu_si128((const __m128i *)(const void *)(text + i)), case_bit);
			__m128i y = _mm_or_si128(_mm_loadu_si128((const __m128i *)(const void *)(text + i + 1)), case_bit);
			li = _mm_or_si128(li, _mm_and_si128(_mm_cmpeq_epi8(x, ell), _mm_cmpeq_epi8(y, eye)));
			uc = _mm_or_si128(uc, _mm_and_si128(_mm_cmpeq_epi8(x, under), _mm_cmpeq_epi8(y, cee)));
			si = _mm_or_si128(si, _mm_cmpeq_epi8(x, semi));
		}
		return (_mm_movemask_epi8(li) ? SQL_MARK_LI : 0) | (_mm_movemask_epi8(uc) ? SQL_MARK_UNDERSCORE_C : 0) |
		       (_mm_movemask_epi8(si) ? SQL_MARK_SEMI_INSIDE : 0);
	}
#endif
	for (; i <= last; i++)
		marks |= pair_marks((unsigned char)(text[i] | 0x20), (unsigned char)(text[i + 1] | 0x20));
	return marks;
}
