/*
 * login_gate.h - the order and the share of the loop that logins get in
 * a storm.
 *
 * In calm times a login's socket events run as they come; netbuf.h's
 * priorities already put established traffic first. A storm is a loop
 * with more events ready than LOGIN_GATE_CALM when a login's event comes.
 * Deferring those events inside libevent does not work: its epoll is
 * level-triggered, so every socket left ready is reported again at every
 * turn of the loop (measured in a 50,000-client TLS storm on 5 workers:
 * 85% of each worker's CPU in epoll_wait polling them again, and not one
 * login finished in 60 s). In a storm the gate instead:
 *  - lets login work run in turns of LOGIN_GATE_TURN_USEC; a turn is a
 *    zero timer at the logins' priority, so it starts at a turn of the
 *    loop in which no established traffic is ready, after the login
 *    events that came with it: established traffic runs between turns;
 *  - parks a login whose event comes outside a turn, or behind others
 *    already parked: its socket's event leaves the loop (epoll stops
 *    reporting it) and the login waits in one of two FIFO queues, logins
 *    under way first, then new TLS logins whose ClientHello (most of a
 *    login's work: the key exchange and the signature) is still unread.
 *    A login once started finishes before another starts, oldest first,
 *    instead of all of them sharing the CPU and finishing late together;
 *  - leaves the storm when a turn finds nothing parked, and logs it
 *    ("login storm over") if LOGIN_GATE_LOGGED login steps or more waited.
 * Only ready work is queued: a client that sends nothing, or half a
 * handshake, holds no place in either queue.
 *
 * Owners are opaque (netbuf.c parks its sockets); the gate calls back
 * run(owner, what) when a parked one's turn comes. One gate per process,
 * on its loop (documented state: login_gate.c).
 */
#ifndef PGVALVE_LOGIN_GATE_H
#define PGVALVE_LOGIN_GATE_H

#include "common.h"

#include <event2/event.h>

#define LOGIN_GATE_TURN_USEC 500	/* login work a turn: about one TLS ClientHello and the cheap steps around it */
#define LOGIN_GATE_LOGGED 100		/* parked steps that make a storm worth a log line */
#define LOGIN_GATE_CALM 8		/* ready events at most, when a login's event comes, for it to run at once */

enum login_gate_queue {
	LOGIN_GATE_STARTED,		/* a login under way: its next step */
	LOGIN_GATE_NEW,			/* a TLS login's first step, its ClientHello */
	LOGIN_GATE_QUEUES
};

struct login_gate_entry;

/* At start-up, on each process's loop: turns run at `priority` (the logins'); run replays a parked event. */
void login_gate_init(struct event_base *base, int priority, void (*run)(void *owner, short what));
/* Frees what is still parked (the owners are being freed too). */
void login_gate_cleanup(void);
/* A login's event came for queue q: true if it runs now, false if it must be parked. */
bool login_gate_admit(enum login_gate_queue q);
/* Parks owner's event `what` at the end of queue q; the entry is the owner's handle to unpark it. */
struct login_gate_entry *login_gate_park(void *owner, short what, enum login_gate_queue q);
/* The owner closes while parked: its entry is dropped (and freed). */
void login_gate_unpark(struct login_gate_entry *e);
/* Logins parked now, in both queues. */
uint32_t login_gate_parked(void);
/* Whether the gate is in a storm (its turns armed). */
bool login_gate_in_storm(void);

#endif
