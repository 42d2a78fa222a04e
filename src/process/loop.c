/*
 * loop.c - the libevent loop's own duties: signal handling (what a signal
 * starts is admin.c's, shutdown.c's, drain.c's and reload.c's), and the
 * reaper that frees closed clients and servers.
 *
 * Freeing is deferred to the reaper so a handler deep in a call chain can
 * close any connection (its own or its peer's) without the caller ever
 * touching freed memory.
 */
#include "common.h"
#include "loop.h"
#include "admin.h"
#include "admin_state.h"
#include "client.h"
#include "config.h"
#include "drain.h"
#include "log.h"
#include "netbuf.h"
#include "peer.h"
#include "pool.h"
#include "reap.h"
#include "reload.h"
#include "sdnotify.h"
#include "shutdown.h"
#include "server.h"
#include "workers.h"

#include <signal.h>
#include <event2/event.h>

static struct {
	struct event *sig_int;
	struct event *sig_term;
	struct event *sig_hup;
	struct event *sig_quit;
	struct event *sig_usr1;
	struct event *sig_usr2;
	int exit_code;
} loop_state;

/* The instance's client_gone hook: whichever ending is under way may be over. */
static void client_gone(void)
{
	shutdown_client_gone();
	drain_client_gone();
}

/* The reaper (reap.h): frees what the core closed, once its handlers have returned. */
static void free_dead_connections(void)
{
	while (!list_empty(&pgv.dead_clients)) {
		struct list_node *n = list_first(&pgv.dead_clients);
		list_remove(&pgv.dead_clients, n);
		client_free(container_of(n, struct client, node));
	}
	while (!list_empty(&pgv.dead_servers)) {
		struct list_node *n = list_first(&pgv.dead_servers);
		list_remove(&pgv.dead_servers, n);
		server_free(container_of(n, struct server, node));
	}
}

/*
 * As PgBouncer: SIGINT or SIGTERM while a shutdown is under way exits at
 * once. A worker's SHUTDOWN command also reaches the asking worker as the
 * supervisor's relayed signal: that first signal after the command only
 * confirms the shutdown it began.
 */
static bool shutdown_signal_exits_now(void)
{
	if (pgv.shutdown_mode == SHUTDOWN_NONE)
		return false;
	/* A drain's own signal never comes back relayed: SIGINT cuts it short in every worker. */
	return pgv.shutdown_signalled || !workers_supervised() || pgv.shutdown_mode == SHUTDOWN_DRAIN;
}

/*
 * SIGTERM drains (drain.h) with shutdown_drain = 1, or once a DRAIN asked
 * the instance to (a worker's DRAIN reaches the others as SIGTERM). A
 * drain under way is never cut short by it. False if the signal is to be
 * taken as PgBouncer's: a SHUTDOWN WAIT_FOR_SERVERS is under way.
 */
static bool sigterm_drains(void)
{
	if (!pgv.cfg->shutdown_drain && !workers_want_drain())
		return false;
	if (drain_active()) {
		log_info("got SIGTERM while draining, still draining");
		return true;
	}
	if (pgv.shutdown_mode == SHUTDOWN_WAIT_FOR_SERVERS)
		return false;
	pgv.shutdown_signalled = true;
	log_info("got SIGTERM");
	drain_begin("SIGTERM");
	return true;
}

static void signal_cb(evutil_socket_t sig, short what, void *arg)
{
	(void)what; (void)arg;
	switch (sig) {
	case SIGINT:	/* PgBouncer 1.25: SHUTDOWN WAIT_FOR_SERVERS */
	case SIGTERM:	/* SHUTDOWN WAIT_FOR_CLIENTS, or a drain (shutdown_drain) */
		if (sig == SIGTERM && sigterm_drains())
			break;
		if (shutdown_signal_exits_now()) {
			log_info("got %s while shutting down, fast exit", sig == SIGINT ? "SIGINT" : "SIGTERM");
			shutdown_exit_now();
			break;
		}
		pgv.shutdown_signalled = true;
		log_info("got %s", sig == SIGINT ? "SIGINT" : "SIGTERM");
		if (sig == SIGINT) {
			sdnotify_send_stopping("SIGINT: waiting for server connections to be released");
			admin_shutdown_wait_for_servers();
		} else {
			sdnotify_send_stopping("SIGTERM: waiting for clients to leave");
			admin_shutdown_wait_for_clients();
		}
		break;
	case SIGQUIT:
		log_info("got SIGQUIT, exiting now");
		shutdown_exit_now();
		break;
	case SIGUSR1:
	case SIGUSR2:
		if (workers_supervised()) {
			/* Passed on by the supervisor: the instance's state says pause or resume, not the signal. */
			log_info("got %s, following the instance's pause state", sig == SIGUSR1 ? "SIGUSR1" : "SIGUSR2");
			admin_sync_instance_pause();
			break;
		}
		if (sig == SIGUSR1) {
			log_info("got SIGUSR1, pausing all activity");
			admin_pause_all();
			break;
		}
		if (pgv.shutting_down) {
			log_info("got SIGUSR2 while shutting down, ignoring");
			break;
		}
		log_info("got SIGUSR2, continuing from PAUSE");
		admin_resume_all();
		break;
	case SIGHUP: {
		char err[512];
		log_info("got SIGHUP, re-reading config");
		sdnotify_send_reloading();
		if (reload_config(err, sizeof(err)) == 0)
			admin_state_forget_params();	/* the file's values again, SETs gone (admin_state.h) */
		/* Ready again either way: a config that does not load leaves the old one serving. */
		sdnotify_send_ready();
		break;
	}
	default:
		break;
	}
}

void loop_init(void)
{
	/*
	 * No EVENT_BASE_FLAG_PRECISE_TIMER: with epoll it arms a timerfd on
	 * every loop iteration, one syscall per wake-up. Timeouts need only
	 * millisecond precision; statistics read the clock themselves
	 * (now_usec(), a vDSO call).
	 */
	struct event_config *ecfg = event_config_new();
	if (!ecfg)
		die("could not create the event loop");
	/*
	 * No cap on the callbacks of a turn: a login event held back in
	 * libevent stays ready in epoll and is reported again at every turn;
	 * the login gate parks the ones it holds back instead (login_gate.h).
	 */
	pgv.base = event_base_new_with_config(ecfg);
	event_config_free(ecfg);
	if (!pgv.base || event_base_priority_init(pgv.base, NETBUF_PRIORITIES) < 0)
		die("could not create the event loop");
	signal(SIGPIPE, SIG_IGN);
	reap_init(pgv.base, free_dead_connections);
	pgv.hooks.client_gone = client_gone;
	loop_state.sig_int = evsignal_new(pgv.base, SIGINT, signal_cb, NULL);
	loop_state.sig_term = evsignal_new(pgv.base, SIGTERM, signal_cb, NULL);
	loop_state.sig_hup = evsignal_new(pgv.base, SIGHUP, signal_cb, NULL);
	loop_state.sig_quit = evsignal_new(pgv.base, SIGQUIT, signal_cb, NULL);
	event_add(loop_state.sig_int, NULL);
	event_add(loop_state.sig_term, NULL);
	event_add(loop_state.sig_hup, NULL);
	event_add(loop_state.sig_quit, NULL);
	loop_state.sig_usr1 = evsignal_new(pgv.base, SIGUSR1, signal_cb, NULL);
	loop_state.sig_usr2 = evsignal_new(pgv.base, SIGUSR2, signal_cb, NULL);
	event_add(loop_state.sig_usr1, NULL);
	event_add(loop_state.sig_usr2, NULL);
}

int loop_run(void)
{
	event_base_dispatch(pgv.base);
	return loop_state.exit_code;
}

void loop_cleanup(void)
{
	/*
	 * Exiting already: a late shutdown signal must not kill us half-way
	 * through cleanup. Blocked, not ignored: freeing libevent's signal
	 * events below restores the default action.
	 */
	static const int sigs[] = { SIGINT, SIGTERM, SIGQUIT, SIGHUP, SIGUSR1, SIGUSR2 };
	sigset_t set;
	sigemptyset(&set);
	for (size_t i = 0; i < ARRAY_SIZE(sigs); i++)
		sigaddset(&set, sigs[i]);
	sigprocmask(SIG_BLOCK, &set, NULL);
	pool_close_all_connections("pooler is shutting down");
	server_cancel_requests_free_all();
	peer_free_all();
	reap_now();
	reap_cleanup();
	struct event **evs[] = { &loop_state.sig_int, &loop_state.sig_term,
				 &loop_state.sig_hup, &loop_state.sig_quit, &loop_state.sig_usr1,
				 &loop_state.sig_usr2 };
	for (size_t i = 0; i < ARRAY_SIZE(evs); i++) {
		if (*evs[i])
			event_free(*evs[i]);
		*evs[i] = NULL;
	}
}
