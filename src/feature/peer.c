/*
 * peer.c - cancel-request peering (see peer.h for the key layout, the
 * request states and the limits).
 *
 * Owns: the peer pools in pgv.peer_pools and the forward requests in
 * them, each with its own connection to the peer. Touches a client only
 * to close the requester it holds once its forward is over.
 */
#include "common.h"
#include "cancel_key.h"
#include "peer.h"
#include "client.h"
#include "config.h"
#include "crypto.h"
#include "dns.h"
#include "log.h"
#include "netbuf.h"
#include "pool.h"
#include "proto.h"

#include <stddef.h>
#include <sys/un.h>

/* ---------------------------------------------------------------- pools */

enum peer_cancel_state {
	PEER_CANCEL_WAITING,		/* queued for a connection slot */
	PEER_CANCEL_LOGIN,		/* connecting to the peer */
	PEER_CANCEL_ACTIVE,		/* sent, waiting for the peer to close */
};

struct peer_pool {
	struct list_node node;		/* pgv.peer_pools */
	int peer_id;
	struct list waiting;
	struct list login;
	struct list active;
};

/*
 * One CancelRequest that came in, and the forwards made for it (one, or
 * one per instance peers_dns names). The requester is held open until the
 * last of them is over.
 */
struct peer_cancel_group {
	struct client *client;		/* the requester, held open; NULL once it left */
	int refs;			/* forwards not finished, and the set-up or lookup under way */
	struct cancel_request cr;	/* as it came in */
	struct sockaddr_storage local;	/* where it came in: peers_dns sends nothing there */
	struct dns_waiter dns;		/* looking up peers_dns */
	struct list_node node;		/* peer_lookups while it does */
};

/* Groups waiting for the peers_dns lookup (shutdown frees them). */
static struct list peer_lookups = { .head = { &peer_lookups.head, &peer_lookups.head } };

struct peer_cancel {
	struct netbuf nb;
	enum peer_cancel_state state;
	struct list_node node;		/* the pool's list of its state */
	struct peer_pool *pool;
	struct peer_cancel_group *group;
	struct cancel_request cr;	/* as forwarded: TTL already lowered */
	struct sockaddr_storage addr;	/* pool by address (peer id 0): the owner the long key names */
	socklen_t addr_len;
	usec_t queued_at;
	usec_t started_at;		/* connect (or the lookup before it) started */
	int port;			/* the peer's, when the connect started */
	struct dns_waiter dns;		/* LOGIN: looking up the peer's host name */
};

static const struct peer_config *peer_find_config(int peer_id)
{
	for (const struct peer_config *pc = pgv.cfg->peers; pc; pc = pc->next)
		if (pc->peer_id == peer_id)
			return pc;
	return NULL;
}

static struct peer_pool *peer_find_pool(int peer_id)
{
	list_for_each(pos, &pgv.peer_pools) {
		struct peer_pool *pool = container_of(pos, struct peer_pool, node);
		if (pool->peer_id == peer_id)
			return pool;
	}
	return NULL;
}

static struct peer_pool *peer_get_pool(int peer_id)
{
	struct peer_pool *pool = peer_find_pool(peer_id);
	if (pool)
		return pool;
	pool = xcalloc(1, sizeof(*pool));
	pool->peer_id = peer_id;
	list_init(&pool->waiting);
	list_init(&pool->login);
	list_init(&pool->active);
	list_append(&pgv.peer_pools, &pool->node);
	return pool;
}

static struct list *peer_state_list(struct peer_pool *pool, enum peer_cancel_state state)
{
	switch (state) {
	case PEER_CANCEL_WAITING:
		return &pool->waiting;
	case PEER_CANCEL_LOGIN:
		return &pool->login;
	case PEER_CANCEL_ACTIVE:
		return &pool->active;
	}
	return NULL;
}

static void peer_cancel_set_state(struct peer_cancel *req, enum peer_cancel_state state)
{
	if (list_node_linked(&req->node))
		list_remove(peer_state_list(req->pool, req->state), &req->node);
	req->state = state;
	list_append(peer_state_list(req->pool, state), &req->node);
}

void peer_get_pool_counts(int peer_id, struct peer_pool_counts *out)
{
	memset(out, 0, sizeof(*out));
	struct peer_pool *pool = peer_find_pool(peer_id);
	if (!pool)
		return;
	out->cl_active_cancel_req = (int)pool->active.count;
	out->cl_waiting_cancel_req = (int)(pool->waiting.count + pool->login.count);
	out->sv_active_cancel = (int)pool->active.count;
	out->sv_login = (int)pool->login.count;
}

/* ---------------------------------------------------------------- requests */

/* Drops one reference to a group: the last one closes the requester it held. */
static void peer_group_release(struct peer_cancel_group *g)
{
	if (--g->refs > 0)
		return;
	struct client *client = g->client;
	dns_cancel(&g->dns);
	if (list_node_linked(&g->node))
		list_remove(&peer_lookups, &g->node);
	free(g);
	if (client) {
		client->login->peer_cancel = NULL;
		client_close(client, NULL, "cancel request forwarded");
	}
}

/*
 * Ends a forward: closes its connection and, with the group's last, the
 * requester it held. Does not start queued ones (callers do, once they are
 * done with their lists).
 */
static void peer_cancel_finish(struct peer_cancel *req)
{
	struct peer_cancel_group *g = req->group;
	dns_cancel(&req->dns);
	netbuf_close(&req->nb);
	list_remove(peer_state_list(req->pool, req->state), &req->node);
	free(req);
	peer_group_release(g);
}

/* "peer 3", or the address a long key names ("10.0.0.5:6432"). */
static const char *peer_cancel_target(const struct peer_cancel *req, char *buf, size_t size)
{
	char host[INET6_ADDRSTRLEN + 2];
	int port = 0;
	if (req->pool->peer_id > 0)
		snprintf(buf, size, "peer %d", req->pool->peer_id);
	else if (sockaddr_host_text((const struct sockaddr *)&req->addr, host, sizeof(host), &port))
		snprintf(buf, size, "instance %s:%d", host, port);
	else
		snprintf(buf, size, "an unknown instance");
	return buf;
}

static void peer_cancel_drop(struct peer_cancel *req, const char *why)
{
	char target[128];
	log_warning("dropping cancel request for %s: %s", peer_cancel_target(req, target, sizeof(target)), why);
	peer_cancel_finish(req);
}

static void peer_pool_launch(struct peer_pool *pool);

/* False when the request was dropped. */
static bool peer_cancel_start_socket(struct peer_cancel *req, const union pgv_sockaddr *addr, socklen_t len)
{
	if (netbuf_connect(&req->nb, &addr->sa, len) < 0) {
		char why[256];
		snprintf(why, sizeof(why), "could not connect: %s", strerror(errno));
		peer_cancel_drop(req, why);
		return false;
	}
	return true;
}

static void peer_cancel_dns_done(struct dns_waiter *w, const struct dns_addr *a, const char *error)
{
	struct peer_cancel *req = container_of(w, struct peer_cancel, dns);
	struct peer_pool *pool = req->pool;
	if (a) {
		union pgv_sockaddr addr;
		socklen_t len;
		dns_answer_address(a, req->port, &addr, &len);
		if (peer_cancel_start_socket(req, &addr, len))
			return;
	} else {
		peer_cancel_drop(req, error);
	}
	peer_pool_launch(pool);	/* a slot came free */
}

/*
 * Connects the request to its peer: '/' a Unix socket dir, '@' an abstract
 * one, an IP literal, or a name looked up first (asynchronously). On
 * failure the request is dropped.
 */
static void peer_cancel_connect(struct peer_cancel *req, const struct peer_config *pc)
{
	union pgv_sockaddr addr;
	socklen_t len = 0;
	char why[512];

	req->started_at = now_usec();
	req->port = pc->port;
	peer_cancel_set_state(req, PEER_CANCEL_LOGIN);	/* holds a slot from here, lookup included */
	int r = dns_literal_address(pc->host, pc->port, &addr, &len, why, sizeof(why));
	if (r == 0) {
		struct dns_addr a;
		switch (dns_lookup(pc->host, &req->dns, peer_cancel_dns_done, &a, why, sizeof(why))) {
		case DNS_PENDING:
			return;
		case DNS_DONE:
			dns_answer_address(&a, pc->port, &addr, &len);
			r = 1;
			break;
		case DNS_FAILED:
			r = -1;
			break;
		}
	}
	if (r < 0) {
		peer_cancel_drop(req, why);
		return;
	}
	peer_cancel_start_socket(req, &addr, len);
}

/* Starts queued requests while the peer's pool_size allows. */
static void peer_pool_launch(struct peer_pool *pool)
{
	struct list_node *n;
	while ((n = list_first(&pool->waiting))) {
		struct peer_cancel *req = container_of(n, struct peer_cancel, node);
		if (pool->peer_id == 0) {	/* by the address in a long key: default_pool_size at once */
			if ((int)(pool->login.count + pool->active.count) >= pgv.cfg->default_pool_size)
				break;
			req->started_at = now_usec();
			peer_cancel_set_state(req, PEER_CANCEL_LOGIN);
			peer_cancel_start_socket(req, (const union pgv_sockaddr *)&req->addr, req->addr_len);
			continue;
		}
		const struct peer_config *pc = peer_find_config(pool->peer_id);
		if (!pc) {
			peer_cancel_drop(req, "the peer is no longer configured");
			continue;
		}
		int limit = pc->pool_size >= 0 ? pc->pool_size : pgv.cfg->default_pool_size;
		if ((int)(pool->login.count + pool->active.count) >= limit)
			break;
		peer_cancel_connect(req, pc);
	}
}

static bool peer_cancel_handler(struct netbuf *nb, enum netbuf_event ev, const struct pkt *pkt)
{
	struct peer_cancel *req = container_of(nb, struct peer_cancel, nb);
	struct peer_pool *pool = req->pool;

	switch (ev) {
	case NETBUF_EV_CONNECT_OK: {
		uint8_t mem[12 + CANCEL_KEY_MAX];
		struct pktbuf b;
		pktbuf_init_fixed(&b, mem, sizeof(mem));
		proto_put_cancel_request_bytes(&b, req->cr.pid, req->cr.key, req->cr.key_len);
		peer_cancel_set_state(req, PEER_CANCEL_ACTIVE);
		if (!netbuf_send(&req->nb, b.buf, b.len)) {
			peer_cancel_drop(req, "send failed");
			peer_pool_launch(pool);
			return false;
		}
		log_debug("sent cancel request to peer %d (0: by key address)", pool->peer_id);
		netbuf_resume(&req->nb);	/* the peer answers by closing */
		return true;
	}
	case NETBUF_EV_PACKET:
		netbuf_skip(nb, pkt->len);	/* a peer has nothing to say; wait for its close */
		return true;
	case NETBUF_EV_RECV_FAILED:
		if (req->state == PEER_CANCEL_ACTIVE) {
			log_debug("peer %d (0: by key address) handled the cancel request", pool->peer_id);
			peer_cancel_finish(req);
		} else {
			peer_cancel_drop(req, "the peer closed the connection");
		}
		break;
	case NETBUF_EV_CONNECT_FAILED: {
		char why[256];
		snprintf(why, sizeof(why), "could not connect: %s", strerror(nb->last_errno));
		peer_cancel_drop(req, why);
		break;
	}
	case NETBUF_EV_SEND_FAILED:
		peer_cancel_drop(req, "send failed");
		break;
	case NETBUF_EV_BAD_PACKET:
		peer_cancel_drop(req, "the peer sent garbage");
		break;
	case NETBUF_EV_DRAINED:
	case NETBUF_EV_TLS_READY:
	case NETBUF_EV_TLS_FAILED:
	case NETBUF_EV_DIRECT_TLS:
		return true;
	}
	peer_pool_launch(pool);
	return false;
}

/* Where requester's request came in (TCP; family 0 over a Unix socket). */
static void peer_local_addr(const struct client *requester, struct sockaddr_storage *out)
{
	socklen_t len = sizeof(*out);
	if (requester->is_unix || getsockname(requester->nb.fd, (struct sockaddr *)out, &len) < 0)
		memset(out, 0, sizeof(*out));
}

/* The same IPv4 or IPv6 address and port. */
static bool peer_same_endpoint(const struct sockaddr *a, const struct sockaddr *b)
{
	if (a->sa_family != b->sa_family)
		return false;
	if (a->sa_family == AF_INET) {
		const struct sockaddr_in *x = (const struct sockaddr_in *)a, *y = (const struct sockaddr_in *)b;
		return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
	}
	if (a->sa_family != AF_INET6)
		return false;
	const struct sockaddr_in6 *x = (const struct sockaddr_in6 *)a, *y = (const struct sockaddr_in6 *)b;
	return x->sin6_port == y->sin6_port && memcmp(&x->sin6_addr, &y->sin6_addr, sizeof(x->sin6_addr)) == 0;
}

/*
 * A group for requester's cr, holding the requester (one reference: the
 * caller's, dropped with peer_group_release once its forwards are queued).
 */
static struct peer_cancel_group *peer_group_new(struct client *requester, const struct cancel_request *cr)
{
	struct peer_cancel_group *g = xcalloc(1, sizeof(*g));
	g->client = requester;
	g->refs = 1;
	g->cr = *cr;
	list_node_init(&g->node);
	peer_local_addr(requester, &g->local);
	requester->login->peer_cancel = g;	/* a cancel request never logs in: login stays */
	return g;
}

/* Queues a forward of cr (its TTL as it is to go out) to pool peer_id (0: to addr). */
static void peer_queue_forward(struct peer_cancel_group *g, const struct cancel_request *cr, int peer_id,
			       const struct sockaddr_storage *addr, socklen_t addr_len)
{
	struct peer_cancel *req = xcalloc(1, sizeof(*req));
	netbuf_init(&req->nb, peer_cancel_handler, NETBUF_LIMIT_PEER);
	list_node_init(&req->node);
	req->pool = peer_get_pool(peer_id);
	req->group = g;
	g->refs++;
	req->cr = *cr;
	if (addr) {
		req->addr = *addr;
		req->addr_len = addr_len;
	}
	req->queued_at = now_usec();
	peer_cancel_set_state(req, PEER_CANCEL_WAITING);
	peer_pool_launch(req->pool);
	/* A failed connect finished the request (the group's reference keeps the requester). */
}

/* One forward for requester's cr, its TTL lowered by one hop. */
static void peer_forward_one(struct client *requester, const struct cancel_request *cr, int peer_id,
			     const struct sockaddr_storage *addr, socklen_t addr_len)
{
	struct peer_cancel_group *g = peer_group_new(requester, cr);
	struct cancel_request out = *cr;
	cancel_request_lower_ttl(&out);
	peer_queue_forward(g, &out, peer_id, addr, addr_len);
	peer_group_release(g);
}

/*
 * [peers] by the peer id in the pid: 1 if forwarded, 0 if dropped, -1 if
 * the key is not one for [peers] (peering off, no peer id, our own id, or
 * a long key whose peer id no [peers] entry has: the random bytes of an
 * instance without peer_id).
 */
static int peer_forward_by_id(struct client *requester, const struct cancel_request *cr)
{
	int peer_id = cancel_key_peer_id(cr->pid);
	int own_id = pgv.cfg->peer_id;

	/* peer_id 0 switches peering off, as in PgBouncer: no forwarding either. */
	if (own_id == 0 || peer_id == 0 || !pgv.cfg->peers || peer_id == own_id)
		return -1;
	if (!peer_find_config(peer_id)) {
		if (cr->key_len == CANCEL_KEY_LONG_LEN)
			return -1;	/* a long key of an instance without peer_id: its address may say more */
		client_log(LOG_LEVEL_WARNING, requester, "cancel request for unknown peer %d, dropped", peer_id);
		return 0;
	}
	if (cancel_request_ttl(cr) == 0) {
		client_log(LOG_LEVEL_WARNING, requester, "cancel request for peer %d: TTL exhausted, dropped", peer_id);
		return 0;
	}
	client_log(LOG_LEVEL_DEBUG, requester, "forwarding cancel request to peer %d", peer_id);
	peer_forward_one(requester, cr, peer_id, NULL, 0);
	return 1;
}

/*
 * A long key (protocol 3.2) no [peers] entry takes: forwarded to the
 * instance it names if it verifies under cancel_key_secret. True if
 * forwarded.
 */
static bool peer_forward_by_address(struct client *requester, const struct cancel_request *cr)
{
	struct sockaddr_storage addr;
	socklen_t len = 0;

	if (!pgv.cfg->cancel_key_secret[0]) {
		client_log(LOG_LEVEL_WARNING, requester, "cancel request with a long key not of this process, "
			   "and no cancel_key_secret to verify it: dropped");
		return false;
	}
	if (!cancel_key_fleet_valid(cr)) {
		client_log(LOG_LEVEL_WARNING, requester, "cancel request with a forged or damaged key "
			   "(it does not verify under cancel_key_secret): dropped");
		return false;
	}
	if (cancel_key_is_own(cr)) {
		client_log(LOG_LEVEL_DEBUG, requester, "cancel request for a client of this instance that is gone, ignored");
		return false;
	}
	if (!cancel_key_owner(cr, &addr, &len)) {
		client_log(LOG_LEVEL_WARNING, requester, "cancel request with a key that names no instance "
			   "(its client came over a Unix socket; set cancel_advertise_addr): dropped");
		return false;
	}
	struct sockaddr_storage local;
	peer_local_addr(requester, &local);
	if (peer_same_endpoint((const struct sockaddr *)&local, (const struct sockaddr *)&addr)) {
		client_log(LOG_LEVEL_WARNING, requester, "cancel request with a key naming this instance's address, "
			   "from a process that is gone (restarted?): dropped");
		return false;
	}
	if (cancel_request_ttl(cr) == 0) {
		client_log(LOG_LEVEL_WARNING, requester, "cancel request by key address: TTL exhausted, dropped");
		return false;
	}
	char host[INET6_ADDRSTRLEN + 2];
	int port = 0;
	sockaddr_host_text((const struct sockaddr *)&addr, host, sizeof(host), &port);
	client_log(LOG_LEVEL_DEBUG, requester, "forwarding cancel request to instance %s:%d", host, port);
	peer_forward_one(requester, cr, 0, &addr, len);
	return true;
}

/* ---------------------------------------------------------------- peers_dns */

static int peer_dns_port(void)
{
	return pgv.cfg->peers_dns_port ? pgv.cfg->peers_dns_port : pgv.cfg->listen_port;
}

/*
 * peers_dns answered (first: one of its addresses, with the count): the
 * request goes to every address but the one it came in on, TTL 0 so that
 * none of them sends it on again. Returns how many forwards were queued.
 */
static int peer_broadcast_to(struct peer_cancel_group *g, const struct dns_addr *first)
{
	struct cancel_request out = g->cr;
	int queued = 0;
	out.key[3] &= (uint8_t)~CANCEL_KEY_TTL_MASK;
	for (int i = 0; i < first->count; i++) {
		struct dns_addr a = *first;
		if (i != first->index) {
			struct dns_waiter w = { .want = i + 1 };
			char err[256];
			if (dns_lookup(pgv.cfg->peers_dns, &w, NULL, &a, err, sizeof(err)) != DNS_DONE) {
				dns_cancel(&w);
				continue;	/* the answer changed under us: the next cancel sees the new one */
			}
		}
		union pgv_sockaddr addr;
		socklen_t len;
		dns_answer_address(&a, peer_dns_port(), &addr, &len);
		if (peer_same_endpoint((const struct sockaddr *)&g->local, &addr.sa))
			continue;
		struct sockaddr_storage ss;
		memset(&ss, 0, sizeof(ss));
		memcpy(&ss, &addr, len);
		peer_queue_forward(g, &out, 0, &ss, len);
		queued++;
	}
	return queued;
}

static void peer_broadcast_answer(struct peer_cancel_group *g, const struct dns_addr *a, const char *error)
{
	if (!a) {
		log_warning("dropping cancel request: peers_dns: %s", error);
	} else if (peer_broadcast_to(g, a) == 0) {
		log_warning("dropping cancel request: peers_dns \"%s\" names no instance but this one",
			    pgv.cfg->peers_dns);
	}
	peer_group_release(g);
}

static void peer_broadcast_dns_done(struct dns_waiter *w, const struct dns_addr *a, const char *error)
{
	struct peer_cancel_group *g = container_of(w, struct peer_cancel_group, dns);
	list_remove(&peer_lookups, &g->node);
	peer_broadcast_answer(g, a, error);
}

/*
 * A 3.0 key no local client has, with peers_dns set: sent to every
 * instance the name resolves to (looked up again once dns_max_ttl has
 * passed). True: the requester is held until the last forward is over.
 */
static bool peer_forward_by_dns(struct client *requester, const struct cancel_request *cr)
{
	if (cancel_request_ttl(cr) == 0) {
		client_log(LOG_LEVEL_DEBUG, requester, "cancel request sent on by another instance, "
			   "for no client here: ignored");
		return false;
	}
	struct peer_cancel_group *g = peer_group_new(requester, cr);
	struct dns_addr a;
	char err[256];
	client_log(LOG_LEVEL_DEBUG, requester, "sending cancel request to the instances of %s", pgv.cfg->peers_dns);
	switch (dns_lookup(pgv.cfg->peers_dns, &g->dns, peer_broadcast_dns_done, &a, err, sizeof(err))) {
	case DNS_PENDING:
		list_append(&peer_lookups, &g->node);
		return true;
	case DNS_DONE:
		peer_broadcast_answer(g, &a, NULL);
		return true;
	case DNS_FAILED:
		peer_broadcast_answer(g, NULL, err);
		return true;
	}
	return true;
}

bool peer_forward_cancel(struct client *requester, const struct cancel_request *cr)
{
	int by_id = peer_forward_by_id(requester, cr);
	if (by_id >= 0)
		return by_id > 0;
	if (cr->key_len == CANCEL_KEY_LONG_LEN)
		return peer_forward_by_address(requester, cr);
	if (cr->key_len != CANCEL_KEY_SHORT_LEN) {
		client_log(LOG_LEVEL_WARNING, requester, "cancel request with a %u-byte key, not one pgvalve hands out: "
			   "dropped", (unsigned)cr->key_len);
		return false;
	}
	if (pgv.cfg->peers_dns[0])
		return peer_forward_by_dns(requester, cr);
	if (pgv.cfg->peer_id != 0 && cancel_key_peer_id(cr->pid) == pgv.cfg->peer_id)
		/* Ours, but the client is gone (or the key never existed): nothing to cancel. */
		client_log(LOG_LEVEL_DEBUG, requester, "cancel request for unknown key of this peer, ignored");
	else
		client_log(LOG_LEVEL_DEBUG, requester, "cancel request for unknown key, ignored");
	return false;
}

static void peer_client_gone_of(struct peer_cancel_group *g)
{
	if (g->client)
		g->client->login->peer_cancel = NULL;
	g->client = NULL;
}

void peer_client_gone(struct client *client)
{
	struct client_login *login = client_login_state(client);
	if (login && login->peer_cancel)
		peer_client_gone_of(login->peer_cancel);
}

/* ---------------------------------------------------------------- janitor */

static void peer_expire_list(struct list *l, usec_t now)
{
	usec_t wait_timeout = pgv.cfg->cancel_wait_timeout;
	usec_t connect_timeout = pgv.cfg->server_connect_timeout;
	list_for_each_safe(pos, tmp, l) {
		struct peer_cancel *req = container_of(pos, struct peer_cancel, node);
		if (wait_timeout > 0 && now - req->queued_at >= wait_timeout)
			peer_cancel_drop(req, "cancel_wait_timeout");
		else if (req->state != PEER_CANCEL_WAITING && connect_timeout > 0 &&
			 now - req->started_at >= connect_timeout)
			peer_cancel_drop(req, "the peer did not finish within server_connect_timeout");
	}
}

void peer_expire_requests(usec_t now)
{
	list_for_each_safe(pos, tmp, &pgv.peer_pools) {
		struct peer_pool *pool = container_of(pos, struct peer_pool, node);
		peer_expire_list(&pool->waiting, now);
		peer_expire_list(&pool->login, now);
		peer_expire_list(&pool->active, now);
		peer_pool_launch(pool);
		if (!pool->waiting.count && !pool->login.count && !pool->active.count &&
		    !peer_find_config(pool->peer_id)) {
			list_remove(&pgv.peer_pools, &pool->node);
			free(pool);
		}
	}
}

void peer_free_all(void)
{
	struct list_node *lookup;
	while ((lookup = list_first(&peer_lookups))) {
		struct peer_cancel_group *g = container_of(lookup, struct peer_cancel_group, node);
		list_remove(&peer_lookups, &g->node);
		peer_client_gone_of(g);
		g->refs = 1;
		peer_group_release(g);
	}

	list_for_each_safe(pos, tmp, &pgv.peer_pools) {
		struct peer_pool *pool = container_of(pos, struct peer_pool, node);
		struct list *lists[] = { &pool->waiting, &pool->login, &pool->active };
		for (size_t i = 0; i < ARRAY_SIZE(lists); i++) {
			struct list_node *n;
			while ((n = list_first(lists[i]))) {
				struct peer_cancel *req = container_of(n, struct peer_cancel, node);
				peer_client_gone_of(req->group);
				peer_cancel_finish(req);
			}
		}
		list_remove(&pgv.peer_pools, &pool->node);
		free(pool);
	}
}

void peer_register(void)
{
	pgv.hooks.forward_cancel = peer_forward_cancel;
	pgv.hooks.client_closing = peer_client_gone;
}
