/*
 * peer.h - peering for cancel requests: forwarding CancelRequests that
 * belong to another process (the peer id inside BackendKeyData is
 * cancel_key.h's).
 *
 * Several pgvalve (or PgBouncer) processes behind one port (so_reuseport,
 * or a TCP load balancer) see a client's CancelRequest arrive on a fresh
 * connection, often at a process other than the one running its query.
 * So every process puts its peer_id into the keys it hands out, and a
 * process that does not know a key sends the request on to the peer the
 * key names ([peers]).
 *
 * The key layout is cancel_key.h's.
 *
 * Which way a request goes: first by the peer id in its pid, to [peers]
 * (3.0 and 3.2 keys alike); else a protocol 3.2 long key that verifies
 * under cancel_key_secret goes to the instance address inside it, over
 * TCP, in the "pool" of peer id 0 (default_pool_size at once); else, with
 * peers_dns set, a 4-byte (3.0) key goes to every address that name
 * resolves to but the one the request came in on, with TTL 0 (a request
 * that arrives with TTL 0 is never sent on), in the same pool; the
 * requester is held until the last of them is over. A long key
 * that does not verify, names no address or this very process, and any
 * key whose TTL is spent, are dropped with a log line: a forged key never
 * makes pgvalve connect anywhere.
 *
 * Forwarding: one connection per request to the peer (host starting with
 * '/' = Unix socket dir, '@' = abstract Unix socket, else TCP), sends the
 * CancelRequest (16 bytes, or 12 + the long key) with its TTL lowered by
 * one and waits for the peer to close, as a server would. At most the
 * peer's pool_size of them are open at once; the rest queue in FIFO order. The requesting client connection is held open until
 * then, so PQcancel() returns only once the peer has handled it.
 * Limits: cancel_wait_timeout from arrival (queued or not), and
 * server_connect_timeout from the start of the connection to the peer.
 * A peer that cannot be reached, or is too slow, costs a log line and the
 * cancel; nothing else.
 *
 * Request states (peer_cancel_set_state is the only place that changes
 * them, and moves the request between its pool's lists):
 *
 *   WAITING --slot free, connect started--> LOGIN --connected, request sent--> ACTIVE
 *   any --peer closed (done), error, timeout, shutdown--> freed
 *
 * Owns: the peer pools (one per peer id with traffic, 0 for forwards by
 * key address) and their requests.
 * Reads pgv.cfg->peer_id and pgv.cfg->peers at each use, so a reload or a
 * supervisor filling them in after fork takes effect for the next request.
 * Must not touch another client's state beyond closing the requester.
 */
#ifndef PGVALVE_PEER_H
#define PGVALVE_PEER_H

#include "common.h"

struct client;
struct cancel_request;

/*
 * A CancelRequest whose key no local client has. Forwards it to the peer
 * or instance the key names and returns true: the requester is then held
 * (paused) and closed by peer.c when the forward ends. Returns false when
 * the request is dropped (peer_id 0, own id, unknown peer, TTL exhausted,
 * a long key that does not verify or names no one; logged); the caller
 * closes the requester.
 */
bool peer_forward_cancel(struct client *requester, const struct cancel_request *cr);
/* The requester of a forward closed first (client_close): the forward goes on without it. */
void peer_client_gone(struct client *client);
/* Fills the instance's forward_cancel and client_closing hooks with the two above (start-up). */
void peer_register(void);

/* Janitor: drops requests past cancel_wait_timeout / server_connect_timeout, frees unused pools. */
void peer_expire_requests(usec_t now);
/* Shutdown: closes every forward. */
void peer_free_all(void);

/* Live counts of one peer's pool (all 0 if it has none), for SHOW PEER_POOLS. */
struct peer_pool_counts {
	int cl_active_cancel_req;	/* sent, waiting for the peer to close */
	int cl_waiting_cancel_req;	/* queued or still connecting */
	int sv_active_cancel;		/* connections that sent the request */
	int sv_login;			/* connections being opened */
};
void peer_get_pool_counts(int peer_id, struct peer_pool_counts *out);

#endif
