/*
 * sql_classify.c - whether a statement text can only read, and whether it
 * starts a read-only transaction (see sql_classify.h for the rules). Walks
 * tokens from sql_lex; every doubt answers "write".
 *
 * Owns nothing: reads the caller's text only.
 */
#include "common.h"
#include "sql_classify.h"
#include "sql_lex.h"

#include <stdlib.h>

/*
 * Words the grammar itself puts before a '(' (keywords, type names with
 * modifiers, and the functions the grammar spells itself): not calls of
 * pg_proc functions. Sorted for bsearch.
 */
static const char *const grammar_words[] = {
	"all", "and", "any", "array", "as", "between", "bit", "by", "case", "cast", "char", "character",
	"coalesce", "collation", "cube", "current_time", "current_timestamp", "dec", "decimal", "distinct", "else",
	"except", "exists", "extract", "filter", "float", "from", "greatest", "group", "grouping", "having",
	"ilike", "in", "intersect", "interval", "is", "join", "lateral", "least", "like", "limit", "localtime",
	"localtimestamp", "materialized", "nchar", "normalize", "not", "nullif", "numeric", "offset", "on", "or",
	"over", "overlay", "partition", "position", "rollup", "row", "select", "sets", "similar", "some",
	"substring", "then", "time", "timestamp", "to", "treat", "trim", "union", "using", "values", "varchar",
	"varying", "when", "where", "with", "within", "xmlconcat", "xmlelement", "xmlexists", "xmlforest",
	"xmlparse", "xmlpi", "xmlroot", "xmlserialize",
};

/*
 * Functions that must run on the primary whatever pg_proc says of them:
 * they write (sequences), lock what writers see (advisory locks), or a
 * standby refuses them though they are not VOLATILE (an xid, the WAL
 * position). Sorted for bsearch; pg_advisory_* and pg_try_advisory_* by
 * their prefix.
 */
static const char *const primary_functions[] = {
	"nextval", "pg_create_restore_point", "pg_current_wal_flush_lsn", "pg_current_wal_insert_lsn",
	"pg_current_wal_lsn", "pg_current_xact_id", "pg_switch_wal", "pg_walfile_name", "pg_walfile_name_offset",
	"setval", "txid_current",
};

static int compare_word(const void *key, const void *elem)
{
	return strcmp(key, *(const char *const *)elem);
}

static bool function_writes(const char *name)
{
	return strncmp(name, "pg_advisory_", 12) == 0 || strncmp(name, "pg_try_advisory_", 16) == 0 ||
	       bsearch(name, primary_functions, ARRAY_SIZE(primary_functions), sizeof(primary_functions[0]),
		       compare_word);
}

static bool grammar_word(const char *name)
{
	return bsearch(name, grammar_words, ARRAY_SIZE(grammar_words), sizeof(grammar_words[0]), compare_word);
}

/* Whether tok, a WORD or IDENT followed by '(', calls a function that only reads. */
static bool call_reads(const struct sql_token *tok, sql_function_safe_fn *function_safe, void *arg)
{
	char name[64];	/* NAMEDATALEN: a longer name is no function pgvalve knows */
	if (!sql_token_name(tok, name, sizeof(name)))
		return false;
	if (tok->kind == SQL_TOKEN_WORD && grammar_word(name))
		return true;
	if (function_writes(name))
		return false;
	return function_safe && function_safe(arg, name);
}

/* The words statement_reads looks for, each token's found once. */
enum word {
	WORD_OTHER,
	WORD_WRITES,	/* insert, update, delete, merge, into: never in a statement that only reads */
	WORD_FOR, WORD_SHARE, WORD_NO, WORD_KEY,	/* row locks */
	WORD_AS, WORD_WITH, WORD_RECURSIVE,		/* name( after them is no call */
};

static enum word word_of(const struct sql_token *tok)
{
	static const struct {
		const char *word;
		enum word kind;
	} words[] = {
		{ "insert", WORD_WRITES }, { "update", WORD_WRITES }, { "delete", WORD_WRITES },
		{ "merge", WORD_WRITES }, { "into", WORD_WRITES }, { "for", WORD_FOR }, { "share", WORD_SHARE },
		{ "no", WORD_NO }, { "key", WORD_KEY }, { "as", WORD_AS }, { "with", WORD_WITH },
		{ "recursive", WORD_RECURSIVE },
	};
	if (tok->kind != SQL_TOKEN_WORD || tok->len < 2 || tok->len > 9)
		return WORD_OTHER;
	for (size_t i = 0; i < ARRAY_SIZE(words); i++)
		if (sql_token_is(tok, words[i].word))	/* the first letter inline: mostly one compare each */
			return words[i].kind;
	return WORD_OTHER;
}

/* Whether the statement's first token (after any '(') starts a statement that can only read. */
static bool reading_start(struct sql_lexer *lx, struct sql_token *tok)
{
	while (sql_token_is_char(tok, '('))
		sql_lex_next(lx, tok);
	return sql_token_is(tok, "select") || sql_token_is(tok, "with") || sql_token_is(tok, "values") ||
	       sql_token_is(tok, "table") || sql_token_is(tok, "show");
}

/*
 * The rest of one statement (its first token read, and a read), to its
 * ';' or the end: false at the first sign of a write. *more: a ';' ended it.
 */
static bool statement_reads(struct sql_lexer *lx, struct sql_token *tok, sql_function_safe_fn *function_safe,
			    void *arg, bool *more)
{
	struct sql_token next;
	enum word word = word_of(tok), prev = WORD_OTHER;
	*more = false;
	for (;;) {
		if (word == WORD_WRITES)
			return false;
		enum sql_token_kind nk = sql_lex_next(lx, &next);
		enum word next_word = word_of(&next);
		if (word == WORD_FOR && (next_word == WORD_SHARE || next_word == WORD_NO || next_word == WORD_KEY))
			return false;	/* FOR SHARE, FOR NO KEY UPDATE, FOR KEY SHARE: row locks */
		/* name( after AS, WITH or RECURSIVE: column names of an alias or a WITH query, or a type's modifiers */
		bool named = prev == WORD_AS || prev == WORD_WITH || prev == WORD_RECURSIVE;
		if ((tok->kind == SQL_TOKEN_WORD || tok->kind == SQL_TOKEN_IDENT) && sql_token_is_char(&next, '(') &&
		    !named && !call_reads(tok, function_safe, arg))
			return false;
		if (nk == SQL_TOKEN_SEMICOLON)
			*more = true;
		if (nk == SQL_TOKEN_SEMICOLON || nk == SQL_TOKEN_END)
			return !lx->unterminated;
		prev = word;
		word = next_word;
		*tok = next;
	}
}

static bool read_only_as(const char *text, size_t len, bool standard, sql_function_safe_fn *function_safe, void *arg)
{
	struct sql_lexer lx;
	struct sql_token tok;
	bool more = true, any = false;
	sql_lex_init(&lx, text, len, standard);
	while (more) {
		enum sql_token_kind k = sql_lex_next(&lx, &tok);
		if (k == SQL_TOKEN_SEMICOLON)
			continue;	/* an empty statement */
		if (k == SQL_TOKEN_END)
			break;
		if (!reading_start(&lx, &tok) || !statement_reads(&lx, &tok, function_safe, arg, &more))
			return false;
		any = true;
	}
	return any && !lx.unterminated;
}

/* Whether a backslash in text could be read two ways (standard_conforming_strings). */
static bool backslash_in(const char *text, size_t len)
{
	return memchr(text, '\\', strnlen(text, len)) != NULL;
}

bool sql_classify_read_only(const char *text, size_t len, sql_function_safe_fn *function_safe, void *arg)
{
	if (!read_only_as(text, len, true, function_safe, arg))
		return false;
	return !backslash_in(text, len) || read_only_as(text, len, false, function_safe, arg);
}

/* ---------------------------------------------------------------- transaction starts */

/* The modes of a BEGIN / START TRANSACTION, after its keywords, to its ';': whether READ ONLY and nothing doubtful. */
static bool modes_read_only(struct sql_lexer *lx, bool *more)
{
	struct sql_token tok, prev = { 0 };
	bool read_only = false;
	*more = false;
	for (;;) {
		enum sql_token_kind k = sql_lex_next(lx, &tok);
		if (k == SQL_TOKEN_END || k == SQL_TOKEN_SEMICOLON) {
			*more = k == SQL_TOKEN_SEMICOLON;
			return read_only && !lx->unterminated;
		}
		if (sql_token_is(&tok, "read") && !sql_token_is(&prev, "repeatable")) {
			sql_lex_next(lx, &tok);
			if (sql_token_is(&tok, "only"))
				read_only = true;
			else if (!sql_token_is(&tok, "committed") && !sql_token_is(&tok, "uncommitted"))
				return false;	/* READ WRITE, or not a mode */
		} else if (!sql_token_is(&tok, "isolation") && !sql_token_is(&tok, "level") &&
			   !sql_token_is(&tok, "repeatable") && !sql_token_is(&tok, "read") &&
			   !sql_token_is(&tok, "not") && !sql_token_is(&tok, "deferrable") &&
			   !sql_token_is_char(&tok, ',')) {
			return false;	/* SERIALIZABLE (a standby refuses it) or a word not known here */
		}
		prev = tok;
	}
}

/* Whether no statement after the transaction start ends it or changes its mode. */
static bool rest_keeps_transaction(struct sql_lexer *lx)
{
	static const char *const enders[] = {
		"commit", "end", "rollback", "abort", "prepare", "set", "begin", "start",
	};
	struct sql_token tok;
	for (;;) {
		enum sql_token_kind k = sql_lex_next(lx, &tok);
		if (k == SQL_TOKEN_END)
			return !lx->unterminated;
		if (k == SQL_TOKEN_SEMICOLON)
			continue;	/* an empty statement */
		for (size_t i = 0; i < ARRAY_SIZE(enders); i++)
			if (sql_token_is(&tok, enders[i]))
				return false;
		if (!sql_lex_skip_statement(lx))
			return !lx->unterminated;
	}
}

static enum sql_begin begin_as(const char *text, size_t len, bool standard)
{
	struct sql_lexer lx;
	struct sql_token tok;
	bool more;
	sql_lex_init(&lx, text, len, standard);
	sql_lex_next(&lx, &tok);
	if (sql_token_is(&tok, "begin")) {
		struct sql_lexer at = lx;
		sql_lex_next(&at, &tok);
		if (sql_token_is(&tok, "work") || sql_token_is(&tok, "transaction"))
			lx = at;
	} else if (sql_token_is(&tok, "start")) {
		sql_lex_next(&lx, &tok);
		if (!sql_token_is(&tok, "transaction"))
			return SQL_BEGIN_NONE;
	} else {
		return SQL_BEGIN_NONE;
	}
	if (!modes_read_only(&lx, &more))
		return SQL_BEGIN_READ_WRITE;
	return !more || rest_keeps_transaction(&lx) ? SQL_BEGIN_READ_ONLY : SQL_BEGIN_READ_WRITE;
}

enum sql_begin sql_classify_begin(const char *text, size_t len)
{
	enum sql_begin b = begin_as(text, len, true);
	if (b == SQL_BEGIN_READ_ONLY && backslash_in(text, len) && begin_as(text, len, false) != SQL_BEGIN_READ_ONLY)
		return SQL_BEGIN_READ_WRITE;
	return b;
}

/* ---------------------------------------------------------------- transaction control alone */

/* Whether tok, after a transaction control statement's first word, is one of its keywords or modes. */
static bool control_word(const struct sql_token *tok)
{
	static const char *const words[] = {
		"and", "chain", "committed", "deferrable", "isolation", "level", "no", "not", "only", "read",
		"repeatable", "serializable", "transaction", "uncommitted", "work", "write",
	};
	if (sql_token_is_char(tok, ','))
		return true;
	for (size_t i = 0; i < ARRAY_SIZE(words); i++)
		if (sql_token_is(tok, words[i]))
			return true;
	return false;
}

bool sql_classify_control_only(const char *text, size_t len)
{
	static const char *const starts[] = { "begin", "start", "commit", "end", "rollback", "abort" };
	struct sql_lexer lx;
	struct sql_token tok;
	bool any = false;
	sql_lex_init(&lx, text, len, true);
	for (;;) {
		enum sql_token_kind k = sql_lex_next(&lx, &tok);
		if (k == SQL_TOKEN_END)
			return any && !lx.unterminated;
		if (k == SQL_TOKEN_SEMICOLON)
			continue;	/* an empty statement */
		bool known = false;
		for (size_t i = 0; i < ARRAY_SIZE(starts) && !known; i++)
			known = sql_token_is(&tok, starts[i]);
		if (!known)
			return false;
		bool start = sql_token_is(&tok, "start");
		k = sql_lex_next(&lx, &tok);
		if (start && !sql_token_is(&tok, "transaction"))
			return false;	/* START alone, or START REPLICATION ... */
		for (; k != SQL_TOKEN_END && k != SQL_TOKEN_SEMICOLON; k = sql_lex_next(&lx, &tok))
			if (!control_word(&tok))
				return false;	/* PREPARED 'x', TO SAVEPOINT, a string, anything else */
		any = true;
		if (k == SQL_TOKEN_END)
			return !lx.unterminated;
	}
}
