/*
 * varcache.h - the session parameters pgvalve keeps in step between a
 * client and whichever server it is using.
 *
 * Tracked: client_encoding, DateStyle, TimeZone, IntervalStyle,
 * standard_conforming_strings, application_name, search_path, plus the
 * names in track_extra_parameters. A client's values come from its startup
 * packet, then from the ParameterStatus messages its own commands cause;
 * a server's from the ParameterStatus it sends. When a client gets a server
 * whose values differ, one SET query brings the server in line.
 */
#ifndef PGVALVE_VARCACHE_H
#define PGVALVE_VARCACHE_H

#include "pgvalve/common.h"
#include "pgvalve/proto.h"

#define VARCACHE_MAX 16

/* As many slots as there are tracked names (fixed until restart). */
struct varcache {
	uint32_t count;			/* slots: varcache_count() when made */
	const char *values[];		/* interned; NULL = not known */
};

/* Rebuilds the tracked-name table from track_extra_parameters (comma list). */
void varcache_configure(const char *extra_parameters);
int varcache_count(void);
const char *varcache_name(int idx);
/* Index of a tracked parameter (case-insensitive), or -1. */
int varcache_index(const char *name);

const char *varcache_get(const struct varcache *vc, int idx);
/* Stores value (copied); allocates *vc on first use. */
void varcache_set(struct varcache **vc, int idx, const char *value);
/* Sets name if tracked; returns whether it was. */
bool varcache_set_by_name(struct varcache **vc, const char *name, const char *value);
void varcache_free(struct varcache *vc);
void varcache_copy_missing(struct varcache **dst, const struct varcache *src);
/* Copies every value src has into *dst (after dst was brought in line with src). */
void varcache_copy_set(struct varcache **dst, const struct varcache *src);
/* After the diff SQL ran: the server now has the client's values, and defaults where the client has none. */
void varcache_sync_applied(struct varcache **server, const struct varcache *client);
/* Forgets the values whose bit is not in keep_mask (bit i = index i). */
void varcache_forget_except(struct varcache *vc, uint32_t keep_mask);

/*
 * Appends to sql one "SELECT pg_catalog.set_config(name, value, false), ..."
 * covering each parameter the client has a value for that differs from the
 * server's (no terminating NUL). Returns the number of parameters.
 */
int varcache_diff_sql(const struct varcache *client, const struct varcache *server, struct pktbuf *sql);

#endif
