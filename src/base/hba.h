/*
 * hba.h - auth_hba_file (pg_hba.conf syntax) and auth_ident_file (pg_ident.conf
 * syntax): parsing into immutable rule sets, and the lookups auth.c needs.
 *
 * HBA file, as PgBouncer reads it:
 *   - Records: local, host, hostssl, hostnossl. hostgssenc/hostnogssenc are
 *     parsed but never match (pgvalve has no GSSAPI encryption).
 *   - Fields are separated by whitespace; '#' starts a comment; a line ending
 *     in a backslash continues on the next line; double quotes make a field
 *     (or part of it) literal, so "all" is a database named all.
 *   - Database and user fields are comma-separated lists. Database keywords:
 *     all, sameuser, replication (never matches a normal connection),
 *     samerole/samegroup (no roles here: warned, never match). User keywords:
 *     all; +group is warned and never matches. @file reads a list of names
 *     (whitespace/comma separated, '#' comments, nested @file allowed) from a
 *     file relative to the hba file's directory.
 *   - Address (host* only): a.b.c.d/nn, x::y/nn, an address followed by a
 *     netmask field, all, samehost, samenet (against the interfaces seen when
 *     the file was parsed). Host names are warned and never match (no DNS).
 *     An IPv4 rule also matches an IPv4-mapped IPv6 client (::ffff:a.b.c.d).
 *   - Methods: trust, reject, md5, scram-sha-256, password (AUTH_TYPE_PLAIN),
 *     cert, peer, pam, ldap, gss (a build with GSSAPI, gss_auth.h). ident,
 *     sspi, radius, bsd, oauth (and gss in a build without GSSAPI) are
 *     unsupported: warned once at load and the line acts as reject, as does
 *     peer on a non-local line, gss on a local line and cert on a local or
 *     hostnossl line.
 *   - Options after the method are name=value. map= is kept; on ldap lines
 *     the others are kept as the LDAP options, on gss lines include_realm
 *     and krb_realm; elsewhere they are warned and ignored.
 *   - A malformed line is logged ("file:line: why", never the line itself)
 *     and skipped, as PgBouncer does; the other lines still apply.
 *
 * Ident file: "mapname system_user db_user" per line, same lexical rules. A
 * system_user starting with '/' is a POSIX extended regular expression (quoted
 * or not, as PostgreSQL); "\1" in db_user is replaced by its first capture.
 * db_user "all" (unquoted) matches any user. A regex longer than 1024 bytes,
 * with more than 64 repetition operators, with stacked ones ("a*+"), or whose
 * repetitions regcomp would expand beyond 256 atoms (nested {m,n} or "(x+)+")
 * is refused at load: logged and the line skipped, rather than regcomp
 * taking gigabytes or minutes.
 *
 * Both objects are immutable once built: reload parses a new one and swaps.
 * No global state; safe to read from any thread.
 */
#ifndef PGVALVE_HBA_H
#define PGVALVE_HBA_H

#include "common.h"

#include <sys/socket.h>

struct hba;		/* a parsed auth_hba_file; immutable */
struct ident_map;	/* a parsed auth_ident_file; immutable */

/* Loads path; NULL (logged) only if the file cannot be read. */
struct hba *hba_load(const char *path);
/* Parses text; origin names it in warnings and anchors relative @file paths. */
struct hba *hba_parse(const char *text, size_t len, const char *origin);
void hba_free(struct hba *hba);
/* Rules kept (malformed lines excluded); for logs and tests. */
size_t hba_rule_count(const struct hba *hba);

struct hba_request {
	bool is_unix;			/* connection over the Unix socket ("local" lines) */
	bool is_tls;			/* hostssl vs hostnossl */
	const struct sockaddr *addr;	/* client address for host* lines (AF_INET/AF_INET6), NULL for unix */
	const char *dbname;
	const char *user;
	bool physical_replication;	/* replication=true: only "replication" lines match */
};

struct hba_match {
	int method;			/* enum auth_type */
	const char *map;		/* map= option value or NULL (points into the hba object) */
	int line;			/* line number of the matching rule, 0 if none matched */
	const char *options;		/* ldap and gss lines: the other name=value options, space separated,
					 * values with blanks re-quoted; else NULL (points into hba) */
};

/* First matching line wins; no match (or hba NULL) -> AUTH_TYPE_REJECT, line 0. */
void hba_match(const struct hba *hba, const struct hba_request *req, struct hba_match *out);

struct ident_map *ident_load(const char *path);
struct ident_map *ident_parse(const char *text, size_t len, const char *origin);
void ident_free(struct ident_map *m);

/*
 * Whether system_user may log in as db_user under map name `map`. False when
 * m or map is NULL or no line of that map matches.
 */
bool ident_check(const struct ident_map *m, const char *map, const char *system_user, const char *db_user);

#endif
