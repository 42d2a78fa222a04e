/*
 * admin_internal.h - the contract between the admin console's own files.
 * Nothing outside src/admin*.c includes it: the rest of pgvalve speaks to
 * the console through admin.h.
 *
 *   admin.c          the session: login and access checks, reading one
 *                    query, parsing it, dispatch to SHOW or a control verb
 *   admin_control.c  the control verbs (RELOAD, PAUSE, ..., SET) in one
 *                    table, the waits PAUSE / WAIT_CLOSE begin,
 *                    and the console's database object
 *   admin_fanout.c   workers = N > 1: a command run on every worker
 *                    through its private socket, the replies merged
 *                    into one answer for the whole instance
 *   admin_merge.c    the rules that merge the workers' SHOW answers
 *   admin_show.c     the SHOW views in one table, and the parameters
 *                    PgBouncer fakes for drivers (SHOW/SET client_encoding)
 *   admin_reply.c    what the console writes back: result sets, command
 *                    tags, notices and errors, each ending a reply with
 *                    ReadyForQuery
 *
 * Calls go down that list and never back up (admin_control.c asks
 * admin_show.c about the faked parameters and hands instance-wide verbs
 * to admin_fanout.c; all write through admin_reply.c), so the console's
 * files form no circle of their own.
 */
#ifndef PGVALVE_ADMIN_INTERNAL_H
#define PGVALVE_ADMIN_INTERNAL_H

#include "common.h"
#include "admin.h"
#include "proto.h"

#include <strings.h>

struct client;
struct admin_result;

/* Console words (verbs, SHOW names, SET keys PgBouncer fakes) match without regard to case. */
static inline bool admin_word_is(const char *w, const char *kw)
{
	return strcasecmp(w, kw) == 0;
}

/* ---------------------------------------------------------------- admin_control.c */

/*
 * Runs a parsed command that is not SHOW: checks its argument syntax, then
 * the user's rights, then runs it; every outcome is answered. False when
 * the verb is unknown or its arguments are malformed: the caller answers
 * "invalid command", as PgBouncer does before looking at rights.
 */
bool admin_control_run(struct client *client, const struct admin_command *cmd, const char *query);

/* ---------------------------------------------------------------- admin_fanout.c */

/*
 * Whether this console client speaks for the whole instance: workers =
 * N > 1 and it did not log in on this worker's private socket (a console
 * there sees and acts on its worker only; the fan-out's own connections
 * come in that way, so they never fan out again).
 */
bool admin_fanout_wanted(const struct client *client);
/*
 * Whether the client is one of those connections (the console superuser
 * on this worker's private socket, application_name pgvalve-fanout): a
 * RELOAD from it reloads this worker only, the fan-out reloads the others.
 */
bool admin_fanout_is_leg(const struct client *client);
/*
 * SHOW what on every worker, merged: true when the view is one the
 * fan-out merges (the client then waits for the answer), false when it is
 * answered by this worker alone (CONFIG, VERSION, WORKERS, ...).
 */
bool admin_fanout_show(struct client *client, const char *what, const char *query);
/*
 * A control command on every worker (or, worker > 0, on that one only);
 * waits: the command may wait there (PAUSE db, WAIT_CLOSE), so no answer
 * deadline once logged in; undo (or NULL): the command that undoes it on
 * every worker if the client cancels the wait. Always answers the client.
 */
void admin_fanout_control(struct client *client, const char *query, int worker, bool waits, const char *undo);
/* The console client leaves: true if a fan-out of its was under way (closed, its legs too). */
bool admin_fanout_abort(struct client *client);
/*
 * The console client sent a CancelRequest: true if a fan-out of its is
 * under way. One that waits (PAUSE db, WAIT_CLOSE) ends at once with
 * 57014, its connections closed (which ends each worker's wait), and its
 * undo command is run on every worker with nobody waiting (PAUSE db:
 * RESUME db, as ^C on a PAUSE resumes in one process); one that does not
 * wait answers as usual within its time bound.
 */
bool admin_fanout_cancel(struct client *client);

/* ---------------------------------------------------------------- admin_merge.c */

/* The application_name of the fan-out's own connections to the workers. */
#define ADMIN_FANOUT_APPNAME "pgvalve-fanout"

/* What one worker answered a console command: a result set or an error, and its first notice. */
struct admin_answer {
	int worker;
	int ncols;
	char **names;
	uint32_t *oids;			/* each column's type */
	char ***rows;			/* rows[i][c]: text, NULL for SQL NULL */
	int nrows, cap;
	char tag[128];
	bool has_error, has_notice;
	char sqlstate[6];
	char message[400];
	char notice[400];
	char notice_detail[1024];
};

void admin_answer_free(struct admin_answer *a);

/* How a SHOW view is merged (admin_merge.c's views[]); NULL: the view is answered by one worker. */
struct admin_view;
const struct admin_view *admin_merge_find(const char *what);
/* Every worker's rows with a worker column (CLIENTS, SERVERS, ...): streamed worker by worker, not merged. */
bool admin_merge_per_worker(const struct admin_view *view);
/* RowDescription letters (admin_result) for ref's column types, and an int4 "worker" last if asked: types has ncols + 2 bytes. */
void admin_merge_result_types(const struct admin_answer *ref, char *types, bool worker_col);
/*
 * answers[0..n), each from a different worker in worker order, merged
 * into r (begun here): per-worker views get a last column "worker"; the
 * others one row per key. Answers whose columns differ from the first's
 * are left out. own_legs: how many of the fan-out's own connections the
 * answers count (taken out of the rows that count them).
 */
void admin_merge(const struct admin_view *view, struct admin_answer *const *answers, int n, int own_legs,
		 struct admin_result *r);

/* ---------------------------------------------------------------- admin_show.c */

/* SHOW <what>: answered and true, or false when there is no such view (nothing sent). */
bool admin_show_run(struct client *client, const char *what);
/* A parameter PgBouncer answers SHOW for with a fixed value and ignores SET of. */
bool admin_show_is_fake_param(const char *name);

/* ---------------------------------------------------------------- admin_reply.c */

/*
 * A result set being built: RowDescription from a type string in
 * PgBouncer's letters ('s' text, 'i' int4, 'q' int8, 'N' numeric, 'T' a
 * time sent as text) and column names, then DataRows of text values.
 */
struct admin_result {
	struct pktbuf b;
	const char *types;
	int ncols;
	int nrows;
};

void admin_result_init(struct admin_result *r, uint32_t initial);
void admin_result_begin(struct admin_result *r, const char *types, const char *const *names);
/* One row: values as text, NULL for SQL NULL. */
void admin_result_row(struct admin_result *r, const char *const *values);
/* CommandComplete "SHOW" and ReadyForQuery after the rows, all in one write; frees the buffer. */
void admin_result_send(struct client *client, struct admin_result *r);

/* An ErrorResponse and ReadyForQuery; logged, and as a pooler error when log_pooler_errors is on. */
void admin_reply_error(struct client *client, const char *sqlstate, const char *msg);
/* admin_reply_error with SQLSTATE 08P01, as PgBouncer answers every console mistake. */
void admin_reply_errorf(struct client *client, const char *fmt, ...) PRINTF_LIKE(2, 3);
/* CommandComplete with tag, then ReadyForQuery. */
void admin_reply_complete(struct client *client, const char *tag);
/* A NOTICE alone (detail may be NULL): more of the reply follows. */
void admin_send_notice(struct client *client, const char *msg, const char *detail);
/* A NOTICE (detail may be NULL), then the command tag and ReadyForQuery, in one write. */
void admin_reply_notice(struct client *client, const char *msg, const char *detail, const char *tag);

#endif
