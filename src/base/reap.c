/*
 * reap.c - deferred freeing of closed connections (reap.h).
 *
 * Owns the reap event and nothing else; must not call into the core.
 */
#include "common.h"
#include "reap.h"

#include <event2/event.h>

static struct {
	struct event *ev;
	void (*reaper)(void);
} reap;

static void reap_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd; (void)what; (void)arg;
	reap.reaper();
}

void reap_init(struct event_base *base, void (*reaper)(void))
{
	reap.reaper = reaper;
	reap.ev = event_new(base, -1, 0, reap_cb, NULL);
}

void reap_schedule(void)
{
	if (reap.ev)
		event_active(reap.ev, 0, 0);
}

void reap_now(void)
{
	if (reap.reaper)
		reap.reaper();
}

void reap_cleanup(void)
{
	if (reap.ev)
		event_free(reap.ev);
	reap.ev = NULL;
}
