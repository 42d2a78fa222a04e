/*
 * metrics_http.h - the HTTP endpoint for Prometheus, in the pooler's own
 * event loop (libevent's evhttp).
 *
 * Off while metrics_port is 0. Otherwise listens on
 * metrics_listen_addr:metrics_port and serves
 *   GET /metrics  the whole instance (metrics.h), Prometheus text format
 *                 0.0.4, or OpenMetrics 1.0 when Accept asks for
 *                 application/openmetrics-text; with metrics_auth_token
 *                 set, only to "Authorization: Bearer <token>" (or basic
 *                 auth with the token as password); else 401;
 *   GET /health   200 while serving, 503 while paused or
 *                 shutting down (no auth: for load balancers);
 *   GET /ready    200 "ready", or 503 with why not (readiness.h: draining,
 *                 shutting down, paused, no database reachable); no auth:
 *                 for readiness probes;
 *   GET /live     200 "live" while the event loop runs, draining included
 *                 (no auth: for liveness probes);
 * anything else 404 (405 for a method other than GET and HEAD). With
 * metrics_tls, HTTPS only, with the client side's TLS context (tls.h).
 *
 * With workers = N only worker 1 listens (one port per instance); it reads
 * the other workers' samples from the shared table (metrics.h).
 *
 * Bounds, so that a slow or hostile HTTP client costs the pooler nothing
 * but a socket: METRICS_HTTP_MAX_CONNECTIONS at once (more wait in the
 * kernel's backlog), request headers of METRICS_HTTP_MAX_HEADERS bytes
 * (431/400 beyond), no request body beyond METRICS_HTTP_MAX_BODY (413),
 * and METRICS_HTTP_TIMEOUT_SEC to send a request (then closed).
 *
 * A port that cannot be bound (another instance still holds it during a
 * restart) is logged and tried again every second; the pooler serves on.
 */
#ifndef PGVALVE_METRICS_HTTP_H
#define PGVALVE_METRICS_HTTP_H

#include "common.h"

#define METRICS_HTTP_MAX_CONNECTIONS 16
#define METRICS_HTTP_MAX_HEADERS 8192
#define METRICS_HTTP_MAX_BODY 1024
#define METRICS_HTTP_TIMEOUT_SEC 5

/* Start-up, after the pooler's listeners: listens if pgv.cfg asks for it. */
void metrics_http_start(void);
/* After a reload: listens on the new address / port, or stops. */
void metrics_http_apply_config(void);
/* Closes the listener and every HTTP connection. Idempotent. */
void metrics_http_stop(void);

#endif
