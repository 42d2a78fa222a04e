/*
 * drain.c - ending the process at transaction boundaries (see drain.h for
 * what a drain does and promises).
 *
 * Owns: the drain's two timers (the sweep, also run on demand, and the
 * drain_timeout deadline) and, from the drain's start, the instance's
 * client_at_boundary hook. Sets the instance's shutdown mode to
 * SHUTDOWN_DRAIN, closes clients through client.c and listeners through
 * listener.c; never touches a server: a closing client gives its server
 * back to the pool as any leaving client does.
 *
 * Why sweeps rather than closing in the hook: the core reports a boundary
 * from inside a server release (client_unlinked, active_ready), where
 * closing the client would re-enter the release. A sweep runs on its own
 * loop turn and looks at each candidate again, so a client that has sent
 * its next request in the meantime is left to finish it.
 */
#include "common.h"
#include "drain.h"
#include "client.h"
#include "config.h"
#include "instance.h"
#include "listener.h"
#include "log.h"
#include "pool.h"
#include "sdnotify.h"
#include "server.h"

#include <event2/event.h>

/* PostgreSQL's words for 57P01 (admin_shutdown), and why. */
#define DRAIN_MESSAGE "terminating connection due to administrator command: the pooler is shutting down"
#define DRAIN_TIMEOUT_MESSAGE DRAIN_MESSAGE " (drain_timeout)"

/* The backstop sweep: the hooks make it run at once, this catches anything they could not. */
#define SWEEP_INTERVAL_SEC 5

/*
 * How long after its connect a client not yet served may take to send its
 * first request during a drain (drain.h). Two seconds: a login and a first
 * query take milliseconds; a load balancer's health check (a few hundred
 * ms) has stopped sending new connections by then.
 */
#define FIRST_REQUEST_GRACE_USEC (2 * USEC_PER_SEC)

static struct {
	struct event *sweep_ev;		/* persistent 5 s timer, also made active by the hooks */
	struct event *grace_ev;		/* one sweep when the first-request grace has passed */
	struct event *deadline_ev;	/* drain_timeout; NULL when there is no limit */
	usec_t started;
	bool exiting;			/* the loop is told to exit: said once */
} dr;

/* Clients chosen by one sweep: closed only after the lists have been walked. */
struct victims {
	struct client **v;
	size_t n, cap;
};

bool drain_active(void)
{
	return pgv.shutdown_mode == SHUTDOWN_DRAIN;
}

/* ---------------------------------------------------------------- boundaries */

/*
 * A client that connected just before the drain and has not been served
 * yet (its login under way, or its first request still to come): its
 * application opened the connection to run something, so it gets to.
 */
static bool awaiting_first_request(const struct client *c, usec_t now)
{
	return !c->served && now - c->connect_time < FIRST_REQUEST_GRACE_USEC;
}

/*
 * A client whose startup packet has not come yet (an SSLRequest may come
 * first, and a client behind a load balancer sends nothing until it is
 * connected): a pooled client to be, unless it came through the Unix
 * socket during the shutdown (the console's, or refused on its startup
 * packet). It holds the exit like a pooled client: exiting would reset a
 * connection that was never told anything.
 */
static bool before_startup(const struct client *c)
{
	return !c->pool && c->state == CL_LOGIN && !c->accepted_in_shutdown;
}

/*
 * Whether closing c now cuts nothing: no transaction of its own is open
 * and no request of it has been read, and it is not a new client about
 * to send its first. Console clients are never chosen.
 */
static bool at_boundary(const struct client *c, usec_t now)
{
	if (before_startup(c))
		return !awaiting_first_request(c, now);
	if (client_is_console(c) || !c->pool)
		return false;	/* the console stays; no pool: not admitted, refused on its startup packet */
	if (c->kind == CLIENT_REPLICATION)
		return true;	/* a stream, no pooled transaction to wait for */
	switch (c->state) {
	case CL_LOGIN:
	case CL_WELCOME:
	case CL_PARAMS_WAITING:
	case CL_PARAMS_CHECK:
		return !awaiting_first_request(c, now);	/* a login: nothing of it runs yet */
	case CL_IDLE:
		return !netbuf_buffered(&c->nb) && !awaiting_first_request(c, now);
	case CL_ACTIVE:
		/* Session mode keeps the server between transactions: idle when it owes nothing. */
		return c->link && pool_effective_mode(c->pool) == POOL_MODE_SESSION && server_is_clean(c->link) &&
		       !netbuf_buffered(&c->nb);
	case CL_WAITING:	/* its request is read: it is served first */
	case CL_CLOSED:
		return false;
	}
	return false;
}

static void victims_add(struct victims *vs, struct client *c)
{
	if (vs->n == vs->cap) {
		vs->cap = vs->cap ? vs->cap * 2 : 64;
		vs->v = xrealloc(vs->v, vs->cap * sizeof(*vs->v));
	}
	vs->v[vs->n++] = c;
}

/* force: every pooled client, at a boundary or not (drain_timeout). */
static void collect(struct victims *vs, const struct list *l, bool force, usec_t now)
{
	list_for_each(pos, l) {
		struct client *c = container_of(pos, struct client, node);
		if ((before_startup(c) || (c->pool && !client_is_console(c))) && (force || at_boundary(c, now)))
			victims_add(vs, c);
	}
}

/*
 * Closes the chosen clients. Collected first, closed after: a closing
 * login may free its provisional pool and database under the walk, while
 * a closed client itself stays allocated until the reaper's turn.
 */
static void sweep(bool force)
{
	struct victims vs = { 0 };
	usec_t now = now_usec();
	collect(&vs, &pgv.login_clients, force, now);
	list_for_each(dpos, &pgv.databases) {
		struct db *db = container_of(dpos, struct db, node);
		if (db->is_admin)
			continue;
		list_for_each(ppos, &db->pools) {
			struct pool *pool = container_of(ppos, struct pool, node);
			collect(&vs, &pool->idle_clients, force, now);
			collect(&vs, &pool->active_clients, force, now);
			collect(&vs, &pool->welcome_clients, force, now);
			collect(&vs, &pool->waiting_clients, force, now);
		}
	}
	for (size_t i = 0; i < vs.n; i++)
		client_close(vs.v[i], "57P01", force ? DRAIN_TIMEOUT_MESSAGE : DRAIN_MESSAGE);
	free(vs.v);
}

/* ---------------------------------------------------------------- the end */

/* Pooled and replication clients still here, and those before their startup packet; the console's do not count. */
static int clients_left(void)
{
	int n = 0;
	list_for_each(pos, &pgv.login_clients) {
		if (before_startup(container_of(pos, struct client, node)))
			n++;
	}
	list_for_each(dpos, &pgv.databases) {
		const struct db *db = container_of(dpos, struct db, node);
		if (!db->is_admin)
			n += db->client_count;
	}
	return n;
}

static void check_done(void)
{
	/* Not while handing the port off: exiting would reset what the kernel queued for us. */
	if (!drain_active() || dr.exiting || clients_left() > 0 || listener_handing_off())
		return;
	dr.exiting = true;	/* a sweep and a leaving client in the same loop turn both get here */
	log_info("drain: the last client has left after %.1f s, exiting",
		 (double)(now_usec() - dr.started) / USEC_PER_SEC);
	event_base_loopexit(pgv.base, NULL);
}

void drain_client_gone(void)
{
	check_done();
}

static void sweep_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd; (void)what; (void)arg;
	sweep(false);
	check_done();
}

static void deadline_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd; (void)what; (void)arg;
	int left = clients_left();
	if (left > 0)
		log_warning("drain: drain_timeout (%g s) passed with %d clients left, closing them",
			    (double)pgv.cfg->drain_timeout / USEC_PER_SEC, left);
	sweep(true);
	log_info("drain: drain_timeout passed, exiting");
	event_base_loopexit(pgv.base, NULL);
}

/* The hook: a client may be at a boundary; a sweep runs once the core's call chain is over. */
static void note_boundary(void)
{
	event_active(dr.sweep_ev, EV_TIMEOUT, 0);
}

static void start_watching(void)
{
	/*
	 * Filled only now: until a drain, the core's boundary call (one per
	 * transaction) finds the slot empty and costs a test of a pointer.
	 */
	pgv.hooks.client_at_boundary = note_boundary;
	struct timeval every = { SWEEP_INTERVAL_SEC, 0 };
	dr.sweep_ev = event_new(pgv.base, -1, EV_PERSIST, sweep_cb, NULL);
	event_add(dr.sweep_ev, &every);
	/* Clients accepted before the TCP listeners closed all reach the end of their grace by then. */
	usec_t last_grace = FIRST_REQUEST_GRACE_USEC + LISTENER_CLOSE_LINGER_USEC + 50 * 1000;
	struct timeval grace = { (time_t)(last_grace / USEC_PER_SEC), (suseconds_t)(last_grace % USEC_PER_SEC) };
	dr.grace_ev = evtimer_new(pgv.base, sweep_cb, NULL);
	event_add(dr.grace_ev, &grace);
	usec_t limit = pgv.cfg->drain_timeout;
	if (limit > 0) {
		struct timeval tv = { (time_t)(limit / USEC_PER_SEC), (suseconds_t)(limit % USEC_PER_SEC) };
		dr.deadline_ev = evtimer_new(pgv.base, deadline_cb, NULL);
		event_add(dr.deadline_ev, &tv);
	}
	/* The first sweep once the caller (a console command, a signal) has returned. */
	event_active(dr.sweep_ev, EV_TIMEOUT, 0);
}

bool drain_begin(const char *why)
{
	if (drain_active())
		return true;
	if (pgv.shutdown_mode == SHUTDOWN_WAIT_FOR_SERVERS)
		return false;
	bool listening = pgv.shutdown_mode == SHUTDOWN_NONE;
	pgv.shutdown_mode = SHUTDOWN_DRAIN;
	pgv.shutting_down = true;
	dr.started = now_usec();
	dr.exiting = false;
	/*
	 * The Unix socket stays: the console must stay reachable. The TCP
	 * listeners close after a moment, so that connections the kernel
	 * holds back until their first bytes (TCP_DEFER_ACCEPT) are taken in
	 * rather than reset; check_done waits for it.
	 */
	if (listening && !listener_close_tcp_soon(check_done))
		listener_close_tcp();
	if (pgv.cfg->drain_timeout > 0)
		log_info("%s: draining, each client is closed at its next transaction boundary; "
			 "drain_timeout %g s", why, (double)pgv.cfg->drain_timeout / USEC_PER_SEC);
	else
		log_info("%s: draining, each client is closed at its next transaction boundary; "
			 "drain_timeout = 0: no time limit, waiting for the last client", why);
	sdnotify_send_stopping("draining: closing clients at their transaction boundaries");
	start_watching();
	return true;
}

void drain_stop(void)
{
	pgv.hooks.client_at_boundary = NULL;
	if (dr.sweep_ev)
		event_free(dr.sweep_ev);
	if (dr.grace_ev)
		event_free(dr.grace_ev);
	if (dr.deadline_ev)
		event_free(dr.deadline_ev);
	dr.sweep_ev = dr.grace_ev = dr.deadline_ev = NULL;
}
