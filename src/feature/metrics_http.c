/*
 * metrics_http.c - the Prometheus endpoint on evhttp, with the health and
 * probe paths beside it (see metrics_http.h for what it serves and its
 * bounds).
 *
 * Owns: the evhttp server, its bound socket and the table of its open
 * connections. Reads pgv (config, pause and shutdown state), the samples
 * metrics.c collects and readiness.c's verdict; changes none of them.
 *
 * The connection limit: evhttp (libevent 2.1) has no connection cap and
 * no hook when a connection ends. So every connection's bufferevent is
 * made here (evhttp_set_bevcb) with one extra reference: when evhttp frees
 * it, it clears its callbacks and our reference keeps the (already shut
 * down) socket until a sweep notices and drops it. While the table is
 * full the listener stops accepting; the kernel's backlog holds the rest.
 */
#include "common.h"
#include "metrics_http.h"
#include "config.h"
#include "crypto.h"
#include "log.h"
#include "metrics.h"
#include "pool.h"
#include "readiness.h"
#include "tls.h"
#include "workers.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>
#include <openssl/crypto.h>
#include <strings.h>

#define SWEEP_USEC 50000		/* how soon a closed connection's socket is released */
#define RETRY_BIND_SEC 1

static struct {
	struct evhttp *http;
	struct evhttp_bound_socket *bound;
	char addr[256];			/* what we listen on (or try to) */
	int port;
	bool tls;
	bool started;			/* metrics_http_start() ran: reloads may (re)start it from then on */
	struct bufferevent *conns[METRICS_HTTP_MAX_CONNECTIONS];
	size_t nconns;
	bool accept_paused;
	struct event *sweep_ev;
	struct event *retry_ev;
} mh;

/* ---------------------------------------------------------------- connection table */

static struct evconnlistener *bound_listener(void)
{
	return mh.bound ? evhttp_bound_socket_get_listener(mh.bound) : NULL;
}

/* Drops the connections evhttp has finished with; accepts again when there is room. */
static void sweep(bool all)
{
	size_t w = 0;
	for (size_t i = 0; i < mh.nconns; i++) {
		bufferevent_data_cb rd, wr;
		bufferevent_event_cb ev;
		void *arg;
		bufferevent_getcb(mh.conns[i], &rd, &wr, &ev, &arg);
		if (all || (!rd && !wr && !ev && !arg))
			bufferevent_decref(mh.conns[i]);
		else
			mh.conns[w++] = mh.conns[i];
	}
	mh.nconns = w;
	if (mh.nconns == 0 && mh.sweep_ev)
		event_del(mh.sweep_ev);	/* no wake-ups while no one is connected */
	if (mh.accept_paused && mh.nconns < METRICS_HTTP_MAX_CONNECTIONS && bound_listener()) {
		evconnlistener_enable(bound_listener());
		mh.accept_paused = false;
	}
}

static void sweep_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd; (void)what; (void)arg;
	sweep(false);
}

static struct bufferevent *new_connection_bev(struct event_base *base, void *arg)
{
	(void)arg;
	sweep(false);
	if (mh.nconns >= METRICS_HTTP_MAX_CONNECTIONS)
		return NULL;	/* accepted just before the listener stopped: evhttp's own, uncounted */
	struct bufferevent *bev;
	if (mh.tls) {
		/* The client side's context, as for PostgreSQL clients; NULL if that is gone. */
		SSL *ssl = tls_new_client_ssl();
		if (!ssl) {
			log_error("metrics: no TLS context for an HTTPS connection");
			return NULL;
		}
		bev = bufferevent_openssl_socket_new(base, -1, ssl, BUFFEREVENT_SSL_ACCEPTING,
						     BEV_OPT_CLOSE_ON_FREE);
	} else {
		bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
	}
	if (!bev)
		return NULL;	/* evhttp makes its own; it is then not counted */
	bufferevent_incref(bev);
	mh.conns[mh.nconns++] = bev;
	if (!event_pending(mh.sweep_ev, EV_TIMEOUT, NULL)) {
		struct timeval tv = { 0, SWEEP_USEC };
		event_add(mh.sweep_ev, &tv);
	}
	if (mh.nconns >= METRICS_HTTP_MAX_CONNECTIONS && bound_listener()) {
		evconnlistener_disable(bound_listener());
		mh.accept_paused = true;
		log_warning("metrics: %d HTTP connections open, not accepting more for now",
			    METRICS_HTTP_MAX_CONNECTIONS);
	}
	return bev;
}

/* ---------------------------------------------------------------- requests */

static void reply_text(struct evhttp_request *req, int code, const char *reason, const char *text)
{
	struct evbuffer *body = evbuffer_new();
	evbuffer_add_printf(body, "%s\n", text);
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "text/plain; charset=utf-8");
	evhttp_send_reply(req, code, reason, body);
	evbuffer_free(body);
}

static bool same_secret(const char *given, size_t len, const char *want)
{
	return len == strlen(want) && CRYPTO_memcmp(given, want, len) == 0;
}

/* metrics_auth_token as a bearer token, or as the password of basic auth (any user name). */
static bool authorized(struct evhttp_request *req)
{
	const char *token = pgv.cfg->metrics_auth_token;
	if (!token[0])
		return true;
	const char *h = evhttp_find_header(evhttp_request_get_input_headers(req), "Authorization");
	if (!h)
		return false;
	if (strncasecmp(h, "Bearer ", 7) == 0)
		return same_secret(h + 7, strlen(h + 7), token);
	if (strncasecmp(h, "Basic ", 6) == 0) {
		uint8_t dec[512];
		int n = crypto_b64_decode(h + 6, strlen(h + 6), dec, sizeof(dec));
		const uint8_t *colon = n > 0 ? memchr(dec, ':', (size_t)n) : NULL;
		if (!colon)
			return false;
		return same_secret((const char *)colon + 1, (size_t)(dec + n - colon - 1), token);
	}
	return false;
}

static bool serving(void)
{
	return !pgv.paused_all && !pgv.shutting_down && pgv.shutdown_mode == SHUTDOWN_NONE;
}

static void serve_metrics(struct evhttp_request *req)
{
	const char *accept = evhttp_find_header(evhttp_request_get_input_headers(req), "Accept");
	bool om = accept && strstr(accept, "application/openmetrics-text");
	struct metrics_set set = { 0 };
	metrics_collect_instance(&set);
	struct evbuffer *body = evbuffer_new();
	metrics_render(&set, om, body);
	metrics_set_free(&set);
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
			  om ? "application/openmetrics-text; version=1.0.0; charset=utf-8"
			     : "text/plain; version=0.0.4; charset=utf-8");
	evhttp_send_reply(req, HTTP_OK, "OK", body);
	evbuffer_free(body);
}

static void request_cb(struct evhttp_request *req, void *arg)
{
	(void)arg;
	enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
	const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
	if (!path)
		path = "";
	if (cmd != EVHTTP_REQ_GET && cmd != EVHTTP_REQ_HEAD) {
		evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "GET, HEAD");
		reply_text(req, 405, "Method Not Allowed", "only GET and HEAD");
		return;
	}
	if (strcmp(path, "/health") == 0) {
		if (serving())
			reply_text(req, HTTP_OK, "OK", "OK");
		else
			reply_text(req, 503, "Service Unavailable", pgv.paused_all ? "paused" : "shutting down");
		return;
	}
	if (strcmp(path, "/ready") == 0) {
		const char *why = readiness_not_ready();
		if (why)
			reply_text(req, 503, "Service Unavailable", why);
		else
			reply_text(req, HTTP_OK, "OK", "ready");
		return;
	}
	if (strcmp(path, "/live") == 0) {
		/* Answered by the event loop itself: it runs, the process serves (draining too). */
		reply_text(req, HTTP_OK, "OK", "live");
		return;
	}
	if (strcmp(path, "/metrics") == 0) {
		if (!authorized(req)) {
			evhttp_add_header(evhttp_request_get_output_headers(req), "WWW-Authenticate",
					  "Bearer realm=\"pgvalve\"");
			reply_text(req, 401, "Unauthorized", "unauthorized");
			return;
		}
		serve_metrics(req);
		return;
	}
	reply_text(req, HTTP_NOTFOUND, "Not Found", "not found: try /metrics, /health, /ready or /live");
}

/* ---------------------------------------------------------------- listening */

static void retry_cb(evutil_socket_t fd, short what, void *arg);

static bool try_bind(void)
{
	mh.bound = evhttp_bind_socket_with_handle(mh.http, mh.addr, (ev_uint16_t)mh.port);
	if (!mh.bound)
		return false;
	log_info("metrics: listening on %s://%s:%d/metrics", mh.tls ? "https" : "http", mh.addr, mh.port);
	return true;
}

static void retry_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd; (void)what; (void)arg;
	if (!mh.http || mh.bound)
		return;
	if (!try_bind()) {
		struct timeval tv = { RETRY_BIND_SEC, 0 };
		event_add(mh.retry_ev, &tv);
	}
}

/* Whether this process serves the endpoint: one per instance. */
static bool wanted(void)
{
	return pgv.cfg->metrics_port > 0 && workers_self() == 1;
}

static void start(void)
{
	const struct config *cfg = pgv.cfg;
	mh.http = evhttp_new(pgv.base);
	if (!mh.http) {
		log_error("metrics: could not create the HTTP server");
		return;
	}
	evhttp_set_allowed_methods(mh.http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD | EVHTTP_REQ_POST | EVHTTP_REQ_PUT |
						    EVHTTP_REQ_DELETE | EVHTTP_REQ_OPTIONS | EVHTTP_REQ_PATCH);
	evhttp_set_max_headers_size(mh.http, METRICS_HTTP_MAX_HEADERS);
	evhttp_set_max_body_size(mh.http, METRICS_HTTP_MAX_BODY);
	evhttp_set_timeout(mh.http, METRICS_HTTP_TIMEOUT_SEC);
	evhttp_set_gencb(mh.http, request_cb, NULL);
	evhttp_set_bevcb(mh.http, new_connection_bev, NULL);
	snprintf(mh.addr, sizeof(mh.addr), "%s", cfg->metrics_listen_addr[0] ? cfg->metrics_listen_addr : "127.0.0.1");
	mh.port = cfg->metrics_port;
	mh.tls = cfg->metrics_tls;
	if (mh.tls && !tls_client_side_ready()) {
		log_error("metrics: metrics_tls needs client_tls_cert_file and client_tls_key_file; not listening");
		evhttp_free(mh.http);
		mh.http = NULL;
		return;
	}
	if (!mh.sweep_ev) {
		mh.sweep_ev = event_new(pgv.base, -1, EV_PERSIST, sweep_cb, NULL);
		mh.retry_ev = evtimer_new(pgv.base, retry_cb, NULL);
	}
	if (!try_bind()) {
		log_error("metrics: could not listen on %s:%d: %s; trying again every %d s", mh.addr, mh.port,
			  strerror(errno), RETRY_BIND_SEC);
		struct timeval tv = { RETRY_BIND_SEC, 0 };
		event_add(mh.retry_ev, &tv);
	}
}

static void stop(void)
{
	if (mh.http) {
		evhttp_free(mh.http);	/* closes the listener and frees every connection */
		mh.http = NULL;
		mh.bound = NULL;
	}
	sweep(true);
	mh.accept_paused = false;
}

void metrics_http_start(void)
{
	mh.started = true;
	if (wanted() && !mh.http)
		start();
}

void metrics_http_apply_config(void)
{
	const struct config *cfg = pgv.cfg;
	if (!mh.started)
		return;		/* a restarted worker's catch-up reload, before start-up is done */
	if (!wanted()) {
		if (mh.http)
			log_info("metrics: endpoint off");
		stop();
		return;
	}
	const char *addr = cfg->metrics_listen_addr[0] ? cfg->metrics_listen_addr : "127.0.0.1";
	if (mh.http && strcmp(addr, mh.addr) == 0 && cfg->metrics_port == mh.port && cfg->metrics_tls == mh.tls)
		return;
	stop();
	start();
}

void metrics_http_stop(void)
{
	mh.started = false;
	stop();
	if (mh.sweep_ev)
		event_free(mh.sweep_ev);
	if (mh.retry_ev)
		event_free(mh.retry_ev);
	mh.sweep_ev = mh.retry_ev = NULL;
}
