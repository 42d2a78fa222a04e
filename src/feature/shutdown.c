/*
 * shutdown.c - ending the process: the graceful way (stop accepting, exit
 * once the last client has left) and at once.
 *
 * Started by the console's SHUTDOWN (admin.c) and by signals (loop.c);
 * the core tells it of every client that leaves through the instance's
 * client_gone hook (loop.c fills it in), never by name.
 */
#include "common.h"
#include "shutdown.h"
#include "instance.h"
#include "listener.h"
#include "log.h"

#include <event2/event.h>

void shutdown_client_gone(void)
{
	/* Not while handing the port off: exiting would reset what the kernel queued for us. */
	if (pgv.shutdown_mode == SHUTDOWN_WAIT_FOR_CLIENTS && pgv.client_count == 0 && !listener_handing_off()) {
		log_info("client connections dropped, exiting");
		event_base_loopexit(pgv.base, NULL);
	}
}

void shutdown_begin_graceful(void)
{
	/*
	 * Closed, not just ignored: the kernel must stop queueing TCP
	 * connections for us. With so_reuseport, after a short hand-off (a
	 * new process on the port takes over without a reset connection).
	 */
	if (!listener_hand_off_tcp(shutdown_client_gone))
		listener_close_tcp();
	pgv.shutting_down = true;
	shutdown_client_gone();
}

void shutdown_exit_now(void)
{
	event_base_loopbreak(pgv.base);
}
