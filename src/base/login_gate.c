/*
 * login_gate.c - turns of login work in a storm (see login_gate.h).
 *
 * Documented state: the one gate of this process (its queues, the turn's
 * start, whether a turn is due), reached only through this file.
 */
#include "common.h"
#include "login_gate.h"
#include "list.h"
#include "log.h"

struct login_gate_entry {
	struct list_node node;
	void *owner;
	short what;
	uint8_t queue;
};

static struct {
	struct event_base *base;
	struct event *turn_ev;		/* a zero timeout at the last priority: the next turn */
	void (*run)(void *owner, short what);
	struct list queue[LOGIN_GATE_QUEUES];
	usec_t turn_start;		/* monotonic_usec() of this turn's start */
	usec_t storm_start;
	uint64_t storm_parked;		/* logins parked in this storm, for its log line */
	bool storm;
	bool turn_due;			/* turn_ev is armed */
} gate;

static void turn_cb(evutil_socket_t fd, short what, void *arg);

void login_gate_init(struct event_base *base, int priority, void (*run)(void *owner, short what))
{
	gate.base = base;
	gate.run = run;
	for (int q = 0; q < LOGIN_GATE_QUEUES; q++)
		list_init(&gate.queue[q]);
	gate.turn_ev = evtimer_new(base, turn_cb, NULL);
	if (!gate.turn_ev)
		die("could not create the login gate's event");
	event_priority_set(gate.turn_ev, priority);
}

void login_gate_cleanup(void)
{
	for (int q = 0; q < LOGIN_GATE_QUEUES; q++) {
		struct list_node *n;
		while ((n = list_first(&gate.queue[q]))) {
			list_remove(&gate.queue[q], n);
			free(container_of(n, struct login_gate_entry, node));
		}
	}
	if (gate.turn_ev)
		event_free(gate.turn_ev);
	gate.turn_ev = NULL;
	gate.storm = gate.turn_due = false;
}

uint32_t login_gate_parked(void)
{
	return (uint32_t)(gate.queue[LOGIN_GATE_STARTED].count + gate.queue[LOGIN_GATE_NEW].count);
}

bool login_gate_in_storm(void)
{
	return gate.storm;
}

/* The next turn, once the loop has nothing of higher priority ready. */
static void turn_arm(void)
{
	static const struct timeval now = { 0, 0 };
	if (gate.turn_due)
		return;
	gate.turn_due = true;
	evtimer_add(gate.turn_ev, &now);
}

static bool turn_left(void)
{
	return monotonic_usec() - gate.turn_start < LOGIN_GATE_TURN_USEC;
}

bool login_gate_admit(enum login_gate_queue q)
{
	if (!gate.storm) {
		if (event_base_get_num_events(gate.base, EVENT_BASE_COUNT_ACTIVE) <= LOGIN_GATE_CALM)
			return true;	/* the common case: one count read a login event */
		gate.storm = true;
		gate.storm_start = monotonic_usec();
		gate.storm_parked = 0;
		gate.turn_start = gate.storm_start;	/* the first turn is this one */
		turn_arm();
	}
	/* Behind whoever waits before it: logins under way before new ones, each queue in order. */
	if (!list_empty(&gate.queue[LOGIN_GATE_STARTED]) ||
	    (q == LOGIN_GATE_NEW && !list_empty(&gate.queue[LOGIN_GATE_NEW])))
		return false;
	return turn_left();
}

struct login_gate_entry *login_gate_park(void *owner, short what, enum login_gate_queue q)
{
	struct login_gate_entry *e = xmalloc(sizeof(*e));
	e->owner = owner;
	e->what = what;
	e->queue = (uint8_t)q;
	list_append(&gate.queue[q], &e->node);
	gate.storm_parked++;
	turn_arm();
	return e;
}

void login_gate_unpark(struct login_gate_entry *e)
{
	list_remove(&gate.queue[e->queue], &e->node);
	free(e);
}

/* The first parked login, by queue order; NULL if none. */
static struct login_gate_entry *first_parked(void)
{
	for (int q = 0; q < LOGIN_GATE_QUEUES; q++) {
		struct list_node *n = list_first(&gate.queue[q]);
		if (n)
			return container_of(n, struct login_gate_entry, node);
	}
	return NULL;
}

/*
 * A turn: parked logins in order while the turn lasts (at least one, so
 * that every turn moves the queue), then the next turn, or with nothing
 * parked the storm's end: the next login event judges the loop afresh.
 * Nothing else keeps a storm on, so that a gate with nothing to do never
 * arms its zero timer again (which would keep the loop from sleeping).
 */
static void turn_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd; (void)what; (void)arg;
	gate.turn_due = false;
	gate.turn_start = monotonic_usec();
	struct login_gate_entry *e;
	bool first = true;
	while ((e = first_parked()) && (first || turn_left())) {
		first = false;
		void *owner = e->owner;
		short ev = e->what;
		login_gate_unpark(e);
		clock_cache_begin();	/* as for any socket callback (common.h) */
		gate.run(owner, ev);
		clock_cache_end();
	}
	if (login_gate_parked()) {
		turn_arm();
		return;
	}
	gate.storm = false;
	if (gate.storm_parked >= LOGIN_GATE_LOGGED)	/* a storm, not a busy moment */
		log_info("login storm over after %.1f s: %llu login steps waited for their turn",
			 (double)(monotonic_usec() - gate.storm_start) / USEC_PER_SEC,
			 (unsigned long long)gate.storm_parked);
}
