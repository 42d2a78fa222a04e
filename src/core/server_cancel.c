/*
 * server_cancel.c - cancel requests to PostgreSQL: a connection of its
 * own per request carrying the server's backend key, the requester's
 * connection held open until PostgreSQL has it (as PgBouncer), a server
 * released meanwhile held back from reuse until its cancels are done, and
 * requests that take longer than cancel_wait_timeout ended by the janitor.
 *
 * Owns struct cancel_request and pgv.cancel_requests.
 */
#include "common.h"
#include "server.h"
#include "server_internal.h"
#include "client.h"
#include "log.h"
#include "metrics.h"
#include "pool.h"
#include "proto.h"

#include <errno.h>
#include <string.h>

/* ---------------------------------------------------------------- cancel */

struct cancel_request {
	struct netbuf nb;
	struct list_node node;		/* pgv.cancel_requests */
	struct server *server;		/* NULL once that server is gone */
	struct client *requester;	/* the connection that asked, held open until PostgreSQL has the request */
	uint32_t be_pid;
	uint32_t be_key;
	usec_t started;
};

/* Ends a cancel request: its connection, and the requester's (see server_send_cancel). */
static void cancel_request_free(struct cancel_request *req)
{
	struct client *requester = req->requester;
	netbuf_close(&req->nb);
	list_remove(&pgv.cancel_requests, &req->node);
	free(req);
	if (requester)
		client_close(requester, NULL, "cancel request");
}

static void cancel_request_finish(struct cancel_request *req)
{
	struct server *server = req->server;
	cancel_request_free(req);
	if (server) {
		server->cancels_in_flight--;
		/* A server released while its cancel was in flight was held back; now it may be reused. */
		if (server->cancels_in_flight == 0 && server->state == SV_USED && !server->link)
			pool_release_server(server);
	}
}

static bool cancel_handler(struct netbuf *nb, enum netbuf_event ev, const struct pkt *pkt)
{
	struct cancel_request *req = container_of(nb, struct cancel_request, nb);
	(void)pkt;
	if (ev == NETBUF_EV_CONNECT_OK) {
		uint8_t mem[16];
		struct pktbuf b;
		pktbuf_init_fixed(&b, mem, sizeof(mem));
		proto_put_cancel_request(&b, req->be_pid, req->be_key);
		netbuf_send(&req->nb, b.buf, b.len);
		netbuf_resume(&req->nb);	/* the server answers by closing */
		return true;
	}
	if (ev == NETBUF_EV_PACKET) {
		netbuf_skip(nb, pkt->len);
		return true;
	}
	cancel_request_finish(req);
	return false;
}

bool server_send_cancel(struct server *server, struct client *requester)
{
	struct cancel_request *req = xcalloc(1, sizeof(*req));
	netbuf_init(&req->nb, cancel_handler, NETBUF_LIMIT_PEER);
	req->server = server;
	req->requester = requester;
	req->be_pid = server->be_pid;
	req->be_key = server->be_key;
	if (netbuf_connect(&req->nb, &server->addr.sa, server->addrlen) < 0) {
		server_log(LOG_LEVEL_WARNING, server, "could not connect to send a cancel request: %s", strerror(errno));
		free(req);
		return false;
	}
	req->started = now_usec();
	list_append(&pgv.cancel_requests, &req->node);
	metrics_count_cancel_forwarded();
	server->cancels_in_flight++;
	server->cancel_sent_at = req->started;
	server_log(LOG_LEVEL_DEBUG, server, "sending cancel request");
	return true;
}

void server_cancel_requester_gone(struct client *requester)
{
	list_for_each(pos, &pgv.cancel_requests) {
		struct cancel_request *req = container_of(pos, struct cancel_request, node);
		if (req->requester == requester)
			req->requester = NULL;
	}
}

void server_forget_cancels(struct server *server)
{
	if (!server->cancels_in_flight)
		return;
	list_for_each(pos, &pgv.cancel_requests) {
		struct cancel_request *req = container_of(pos, struct cancel_request, node);
		if (req->server == server)
			req->server = NULL;
	}
	server->cancels_in_flight = 0;
}

void server_expire_cancel_requests(usec_t now, usec_t timeout)
{
	list_for_each_safe(pos, tmp, &pgv.cancel_requests) {
		struct cancel_request *req = container_of(pos, struct cancel_request, node);
		if (now - req->started < timeout)
			continue;
		/* Its server, if any, is closed by the janitor: a late cancel could still hit it. */
		struct server *server = req->server;
		req->server = NULL;
		if (server) {
			server->cancels_in_flight--;
			server->cancel_expired = true;
		}
		cancel_request_free(req);
	}
}

void server_cancel_requests_free_all(void)
{
	list_for_each_safe(pos, tmp, &pgv.cancel_requests)
		cancel_request_free(container_of(pos, struct cancel_request, node));
}
