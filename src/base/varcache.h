/*
 * varcache.h - the session parameters pgvalve keeps in step between a
 * client and whichever server it is using.
 *
 * Tracked: every parameter PostgreSQL reports in ParameterStatus (its
 * GUC_REPORT set, and any name a newer server reports: learned on the
 * fly), search_path, plus the names in track_extra_parameters. Settable
 * ones are carried per client: a client's values come from its startup
 * packet, then from the ParameterStatus messages its own commands cause;
 * a server's from the ParameterStatus it sends. When a client gets a
 * server whose values differ, the server is brought in line before the
 * client's messages run (server.c: client_encoding alone and first, then
 * the rest in one statement, which PostgreSQL applies all or nothing).
 * Read-only ones (server_version, is_superuser, ...) are only passed on.
 */
#ifndef PGVALVE_VARCACHE_H
#define PGVALVE_VARCACHE_H

#include "common.h"
#include "proto.h"

#define VARCACHE_MAX 64
/* client_encoding is always index 0. */
#define VARCACHE_CLIENT_ENCODING 0

/*
 * As many slots as there are tracked names when made. Shared copy-on-write:
 * clients of a pool that logged in with the same values hold one copy
 * (varcache_share_login), and whatever changes a shared one (varcache_set,
 * _clear, ...) first gets its own.
 */
struct varcache {
	uint32_t refs;			/* holders; only one may change it in place */
	uint32_t count;			/* slots: varcache_count() when made */
	const char *values[];		/* interned; NULL = not known */
};

/* Rebuilds the tracked-name table from track_extra_parameters (comma list). */
void varcache_configure(const char *extra_parameters);
int varcache_count(void);
const char *varcache_name(int idx);
/* Index of a tracked parameter (case-insensitive), or -1. */
int varcache_index(const char *name);
/* Index of a parameter a server reported, added to the table if new (-1 if the table is full). */
int varcache_learn(const char *name);
/* Whether pgvalve applies a client's value of it (false: read-only, only passed on). */
bool varcache_settable(int idx);

const char *varcache_get(const struct varcache *vc, int idx);
/* Stores value (copied); allocates *vc on first use. */
void varcache_set(struct varcache **vc, int idx, const char *value);
/* Sets name if tracked; returns whether it was. */
bool varcache_set_by_name(struct varcache **vc, const char *name, const char *value);
/* Drops one holder's reference (NULL is fine); the last one frees it. */
void varcache_unref(struct varcache *vc);
/*
 * A client's values at login: its own, the pool's welcome values for the
 * rest. If that makes the values *last holds (the pool's previous login),
 * *vc is dropped and shares *last; otherwise *last becomes a reference to
 * *vc. Logins of one application carry the same values, so thousands of
 * clients hold one copy.
 */
void varcache_share_login(struct varcache **vc, const struct varcache *welcome, struct varcache **last);
void varcache_copy_missing(struct varcache **dst, const struct varcache *src);
/* Copies every value src has into *dst (after dst was brought in line with src). */
void varcache_copy_set(struct varcache **dst, const struct varcache *src);
/*
 * After the diff SQL ran: the server now has the client's values, and
 * defaults where the client has none. For a parameter the server reports
 * (bit i of reported_mask), the server's value is already right (it sent
 * ParameterStatus if the value changed, nothing if not) and is PostgreSQL's
 * own spelling of the client's ("ISO" is "ISO, MDY", "utf8" is "UTF8"):
 * the client takes that spelling, so it equals every server set the same
 * way and is not applied again at each server switch. log_who (a client's
 * log prefix, or NULL for no log) names the client in the debug line that
 * says so, worded as PgBouncer's varcache_set_canonical.
 */
void varcache_sync_applied(struct varcache **server, struct varcache **client, uint64_t reported_mask,
			   const char *log_who);
/*
 * What varcache_diff_sql would apply, spelled as PgBouncer's verbose log
 * does ("SET DateStyle='ISO';"), for a debug line.
 */
void varcache_diff_describe(const struct varcache *client, const struct varcache *server, char *dst, size_t size);
/* Forgets the values whose bit is not in keep_mask (bit i = index i). */
void varcache_forget_except(struct varcache **vc, uint64_t keep_mask);
/* Forgets one value (the server's default, not known). */
void varcache_clear(struct varcache **vc, int idx);
/*
 * The value is the one a client's own SET statement gave it (session_set.c
 * replays those): on a server it differs from any other client's value; on
 * a client it is never applied by varcache_diff_sql.
 */
void varcache_mark_unknown(struct varcache **vc, int idx);

/*
 * Values a pool's servers are known to accept, so that a login asking for
 * them needs no server to try them first (client.c): every value of the
 * pool's welcome (what its first server reported), plus a small bounded
 * set of (parameter, value) pairs a server took from a login. Full, the
 * oldest pair makes room: a value pushed out costs its next login one
 * round trip, never a wrong answer. Values are interned, so a lookup is a
 * pointer compare over VARCACHE_ACCEPTED_MAX slots.
 */
#define VARCACHE_ACCEPTED_MAX 32

struct varcache_accepted {
	const char *values[VARCACHE_ACCEPTED_MAX];	/* interned, a reference held; NULL = free slot */
	uint8_t idx[VARCACHE_ACCEPTED_MAX];
	uint32_t next;					/* the slot the next pair takes */
};

/*
 * Whether every settable value client holds is known good: the welcome's
 * own value, in acc, or of a parameter PostgreSQL takes any value of
 * (application_name).
 */
bool varcache_all_accepted(const struct varcache *client, const struct varcache *welcome,
			   const struct varcache_accepted *acc);
/* A server took client's values: remembers those varcache_all_accepted would not know. */
void varcache_accept(struct varcache_accepted *acc, const struct varcache *client, const struct varcache *welcome);
/* Drops the references acc holds. */
void varcache_accepted_free(struct varcache_accepted *acc);

/*
 * Appends "SELECT pg_catalog.set_config('client_encoding', ...)" if the
 * client's differs from the server's: ASCII only, so it parses in any
 * encoding the server is in; run it before the rest, as a query of its
 * own, since PostgreSQL converts a whole Query message at once. Returns 1
 * if it added it, else 0.
 */
int varcache_diff_encoding_sql(const struct varcache *client, const struct varcache *server, struct pktbuf *sql);
/*
 * Appends to sql one "SELECT pg_catalog.set_config(name, value, false), ..."
 * covering each other settable parameter the client has a value for that
 * differs from the server's, then "; RESET name" for those the client has
 * none for and the server has (no terminating NUL). A value that may name
 * part of its setting only (DateStyle) is preceded by "RESET name; ", so
 * that it completes the server's login value as it would have at the
 * client's login. Returns the number of statements and parameters.
 */
int varcache_diff_sql(const struct varcache *client, const struct varcache *server, struct pktbuf *sql);
/*
 * Whether a and b hold the same value (or none) for every parameter but
 * the read-only ones: then neither diff above adds anything. One compare
 * of the value pointers (interned), for the common case of a server
 * passing between clients that set nothing; a walk that skips the
 * read-only ones if that finds a difference.
 */
bool varcache_same(const struct varcache *a, const struct varcache *b);

#endif
