/*
 * sql_classify.h - whether a statement text can only read, for the read
 * balancer (load_balance_reads): read from its tokens (sql_lex.h), not
 * parsed. Its one promise: a text that could write is never called a
 * read. Anything it cannot classify is a write (goes to the primary).
 *
 * A read (sql_classify_read_only), every statement of the text being:
 *   - a SELECT, WITH, VALUES, TABLE or SHOW (after any opening
 *     parentheses), or empty;
 *   - with no INSERT, UPDATE, DELETE, MERGE, INTO (SELECT ... INTO, a
 *     data-modifying WITH), no FOR SHARE / FOR NO KEY UPDATE / FOR KEY
 *     SHARE (FOR UPDATE is caught by its UPDATE);
 *   - whose function calls (a name followed by '(', schema or not, but
 *     not right after AS, WITH or RECURSIVE: column names of an alias or
 *     a WITH query) are grammar words (IN, EXISTS, CAST, COALESCE, a
 *     type's modifiers, ...)
 *     or names the caller's function_safe() accepts (not VOLATILE in
 *     pg_proc, in the balancer); never nextval, setval, pg_advisory_*,
 *     nor what a standby refuses though it is not VOLATILE (txid_current,
 *     pg_current_xact_id, pg_walfile_name, ...), whatever the caller says;
 *   - with nothing unterminated (string, identifier, dollar quote,
 *     comment).
 * Where a backslash could be read two ways (standard_conforming_strings
 * on or off), the text must be a read both ways. What it does not see
 * (a view or an operator over a VOLATILE function, a domain check) the
 * standby refuses with SQLSTATE 25006; the balancer runs it again on the
 * primary.
 *
 * A transaction start (sql_classify_begin): BEGIN [WORK | TRANSACTION]
 * or START TRANSACTION with its modes; read-only when it says READ ONLY
 * (and never READ WRITE, SERIALIZABLE, which a standby refuses, or a
 * word it does not know), and the statements after it in the same text
 * do not end the transaction nor change its mode (COMMIT, END, ROLLBACK,
 * ABORT, PREPARE, SET).
 *
 * Transaction control alone (sql_classify_control_only): every statement
 * of the text begins or ends a transaction, with no other word than its
 * modes: BEGIN [WORK | TRANSACTION], START TRANSACTION, COMMIT, END,
 * ROLLBACK, ABORT, their modes and AND [NO] CHAIN; not COMMIT PREPARED,
 * ROLLBACK PREPARED (another transaction's end), ROLLBACK TO SAVEPOINT,
 * PREPARE TRANSACTION, nor anything quoted. A transaction made of only
 * those wrote nothing (the read balancer's empty transaction).
 *
 * Pure: no allocation, no state, no logging.
 */
#ifndef PGVALVE_SQL_CLASSIFY_H
#define PGVALVE_SQL_CLASSIFY_H

#include "common.h"

/* Whether the function called name (lower case as PostgreSQL folds it, no schema) only reads; NULL: none does. */
typedef bool sql_function_safe_fn(void *arg, const char *name);

/* Whether every statement of text (len bytes, or up to a NUL) can only read. */
bool sql_classify_read_only(const char *text, size_t len, sql_function_safe_fn *function_safe, void *arg);

enum sql_begin {
	SQL_BEGIN_NONE,		/* the text does not start a transaction block */
	SQL_BEGIN_READ_WRITE,	/* it does, read-write or not clearly read-only */
	SQL_BEGIN_READ_ONLY,	/* it does, READ ONLY, and nothing after it in the text undoes that */
};

/* Whether the first statement of text starts a transaction block, and how. */
enum sql_begin sql_classify_begin(const char *text, size_t len);

/* Whether text has a statement and each of its statements only begins or ends a transaction. */
bool sql_classify_control_only(const char *text, size_t len);

#endif
