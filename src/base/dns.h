/*
 * dns.h - asynchronous host name lookups (c-ares on the libevent loop)
 * with a cache, as PgBouncer's dns_* settings describe.
 *
 * Contract:
 *  - dns_init() once the loop exists, dns_shutdown() before the loop is
 *    freed (it destroys the c-ares channel and the cache).
 *  - dns_lookup() answers at once from the cache (DNS_DONE or
 *    DNS_FAILED, the waiter's callback is not called), or queues the
 *    waiter and returns DNS_PENDING: the callback then runs exactly once
 *    from the loop, unless dns_cancel() comes first. A callback may look up
 *    again and cancel other waiters.
 *  - An answer is cached dns_max_ttl (the record's own TTL is ignored, as
 *    in PgBouncer), a failure (NXDOMAIN, timeout, no server) dns_nxdomain_ttl.
 *    A name with several addresses hands them out round robin.
 *  - dns_zone_check_period: the SOA serial of each zone (the part of a name
 *    after its first dot) is polled; when it changes, the zone's names are
 *    looked up again at once.
 *  - When a new answer for a name differs from the previous one, the
 *    change hook given to dns_init() runs with that name from the loop
 *    (never inside dns_lookup), after the cache holds the new addresses
 *    (dns_has_address() tells who is stale).
 *  - resolv_conf replaces /etc/resolv.conf. Its nameserver lines may carry
 *    a port ("nameserver 127.0.0.1:5353", "nameserver [::1]:5353"), which
 *    pgvalve applies itself because c-ares 1.18 ignores such lines.
 *
 * Owns: the c-ares channel, its socket events and timer, the host and
 * zone caches. Knows nothing of servers or pools.
 */
#ifndef PGVALVE_DNS_H
#define PGVALVE_DNS_H

#include "common.h"
#include "list.h"

#include <event2/event.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>

struct dns_host;

/* Any address pgvalve connects to: a lookup's answer or a literal entry. */
union pgv_sockaddr {
	struct sockaddr sa;
	struct sockaddr_in in;
	struct sockaddr_in6 in6;
	struct sockaddr_un un;
};

/* One address of an answer; the port is left 0 for the caller to set. */
struct dns_addr {
	union {
		struct sockaddr sa;
		struct sockaddr_in in;
		struct sockaddr_in6 in6;
	} u;
	socklen_t len;
	int count;		/* how many addresses the name has (failover tries each once) */
	int index;		/* its place among them */
};

struct dns_waiter;
/* addr is NULL on failure, then error says why (host name included). */
typedef void (*dns_done_fn)(struct dns_waiter *w, const struct dns_addr *addr, const char *error);

/* Embedded in whoever waits (a server); zeroed memory is a valid idle waiter. */
struct dns_waiter {
	struct list_node node;		/* its host's waiters */
	struct dns_host *host;		/* NULL when not waiting */
	dns_done_fn done;
	int want;			/* 0: the name's next address round robin; i + 1: address i (mod count) */
};

enum dns_status {
	DNS_DONE,	/* *addr filled from the cache */
	DNS_FAILED,	/* a cached failure; errbuf says why */
	DNS_PENDING,	/* w->done will be called */
};

/* Counters for SHOW LISTS. */
struct dns_stats {
	int names;	/* cached host names */
	int zones;	/* zones known */
	int queries;	/* lookups in flight */
	int pending;	/* waiters queued on those lookups */
};

typedef void (*dns_change_fn)(const char *name);

struct config;

/* -1 with errbuf filled if the resolver cannot be set up (bad resolv_conf). */
int dns_init(struct event_base *base, const struct config *cfg, dns_change_fn on_change,
	     char *errbuf, size_t errsize);
/* Takes the dns_* TTLs and period of a reloaded config (resolv_conf needs a restart). */
void dns_configure(const struct config *cfg);
void dns_shutdown(void);

enum dns_status dns_lookup(const char *name, struct dns_waiter *w, dns_done_fn done, struct dns_addr *addr,
			   char *errbuf, size_t errsize);
/* Stops waiting; safe on a waiter that is not waiting. */
void dns_cancel(struct dns_waiter *w);
/* Whether name's cached answer still lists sa's address (port ignored). */
bool dns_has_address(const char *name, const struct sockaddr *sa);

/*
 * A host entry that needs no lookup, completed with port: "" (the default
 * socket dir: /var/run/postgresql, else /tmp), "/dir" or "@name"
 * (.s.PGSQL.<port> in the file system or the abstract namespace), or an
 * IP literal. 1 with *out and *len filled; 0 when host is a name (look it
 * up); -1 when it cannot be used (err says why).
 */
int dns_literal_address(const char *host, int port, union pgv_sockaddr *out, socklen_t *len,
			char *err, size_t errsize);
/* A lookup's answer with port set. */
void dns_answer_address(const struct dns_addr *a, int port, union pgv_sockaddr *out, socklen_t *len);

/* Periodic work (janitor): zone serial checks, forgetting long-unused names. */
void dns_housekeeping(usec_t now);

void dns_get_stats(struct dns_stats *st);
/* SHOW DNS_HOSTS / DNS_ZONES: one call per entry; ttl/serial as the docs describe. */
void dns_walk_hosts(void (*fn)(void *arg, const char *name, long long ttl, const char *addrs), void *arg);
void dns_walk_zones(void (*fn)(void *arg, const char *zone, long long serial, int count), void *arg);

#endif
