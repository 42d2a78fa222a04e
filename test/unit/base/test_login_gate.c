/*
 * test_login_gate.c - login_gate.c on a real libevent loop: calm logins
 * run at once; in a storm, parked logins run in turns, those under way
 * before new ones and each queue in order; a turn ends after
 * LOGIN_GATE_TURN_USEC of work; a login closed while parked is dropped;
 * the storm ends once nothing is parked, even on a busy loop.
 */
#include <check.h>
#include <time.h>

#include "common.h"
#include "login_gate.h"
#include "../check_main.h"

#define PRIORITIES 5
#define DUMMIES (LOGIN_GATE_CALM + 16)

static struct event_base *base;
static struct event *dummy[DUMMIES];
static int ran[32], nran;
static usec_t work_usec;	/* each run's busy time */

static void run_cb(void *owner, short what)
{
	(void)what;
	ran[nran++] = (int)(intptr_t)owner;
	usec_t until = monotonic_usec() + work_usec;
	while (monotonic_usec() < until)
		;	/* a login step's CPU time, on the clock the gate reads */
}

static void nothing_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd; (void)what; (void)arg;
}

static void setup(void)
{
	base = event_base_new();
	ck_assert_ptr_nonnull(base);
	ck_assert_int_eq(event_base_priority_init(base, PRIORITIES), 0);
	login_gate_init(base, PRIORITIES - 1, run_cb);
	for (int i = 0; i < DUMMIES; i++)
		dummy[i] = event_new(base, -1, 0, nothing_cb, NULL);
	nran = 0;
	work_usec = 0;
}

static void teardown(void)
{
	login_gate_cleanup();
	for (int i = 0; i < DUMMIES; i++)
		event_free(dummy[i]);
	event_base_free(base);
}

/* More events ready than LOGIN_GATE_CALM: the next login event finds a storm. */
static void make_ready_crowd(void)
{
	for (int i = 0; i < DUMMIES; i++)
		event_active(dummy[i], EV_READ, 0);
}

/* One turn of the loop at a time until nothing is parked (or a bound that only a bug reaches). */
static void loop_until_drained(void)
{
	for (int i = 0; i < 1000 && login_gate_parked(); i++)
		event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
	ck_assert_uint_eq(login_gate_parked(), 0);
}

static void park(int id, enum login_gate_queue q)
{
	login_gate_park((void *)(intptr_t)id, EV_READ, q);
}

START_TEST(calm_logins_run_at_once)
{
	ck_assert(login_gate_admit(LOGIN_GATE_NEW));
	ck_assert(login_gate_admit(LOGIN_GATE_STARTED));
	ck_assert_uint_eq(login_gate_parked(), 0);
}
END_TEST

START_TEST(storm_serves_started_logins_first_each_in_order)
{
	make_ready_crowd();
	/* a storm (whether this one may still run depends on the clock: under valgrind it may not) */
	(void)login_gate_admit(LOGIN_GATE_NEW);
	ck_assert(login_gate_in_storm());
	park(1, LOGIN_GATE_NEW);
	park(2, LOGIN_GATE_STARTED);
	park(3, LOGIN_GATE_NEW);
	park(4, LOGIN_GATE_STARTED);
	/* behind whoever waits: none runs past the queues */
	ck_assert(!login_gate_admit(LOGIN_GATE_NEW));
	ck_assert(!login_gate_admit(LOGIN_GATE_STARTED));
	loop_until_drained();
	ck_assert_int_eq(nran, 4);
	ck_assert_int_eq(ran[0], 2);
	ck_assert_int_eq(ran[1], 4);
	ck_assert_int_eq(ran[2], 1);
	ck_assert_int_eq(ran[3], 3);
}
END_TEST

START_TEST(a_turn_ends_after_its_time)
{
	make_ready_crowd();
	(void)login_gate_admit(LOGIN_GATE_STARTED);	/* enters the storm */
	ck_assert(login_gate_in_storm());
	for (int i = 1; i <= 6; i++)
		park(i, LOGIN_GATE_STARTED);
	/*
	 * Each step busy for 40% of a turn: a turn runs 3 at most, whatever
	 * the machine's load (a slower machine only makes each step longer
	 * on the clock the gate reads), and at least 1.
	 */
	work_usec = LOGIN_GATE_TURN_USEC * 2 / 5;
	for (int i = 0; i < 20 && nran == 0; i++)
		event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
	ck_assert_int_ge(nran, 1);
	ck_assert_int_le(nran, 3);
	ck_assert_uint_eq(login_gate_parked(), (unsigned)(6 - nran));
	loop_until_drained();
	ck_assert_int_eq(nran, 6);
	for (int i = 0; i < 6; i++)
		ck_assert_int_eq(ran[i], i + 1);
}
END_TEST

START_TEST(a_login_closed_while_parked_never_runs)
{
	make_ready_crowd();
	(void)login_gate_admit(LOGIN_GATE_STARTED);	/* enters the storm */
	ck_assert(login_gate_in_storm());
	park(1, LOGIN_GATE_STARTED);
	struct login_gate_entry *gone = login_gate_park((void *)(intptr_t)2, EV_READ, LOGIN_GATE_NEW);
	park(3, LOGIN_GATE_NEW);
	login_gate_unpark(gone);
	ck_assert_uint_eq(login_gate_parked(), 2);
	loop_until_drained();
	ck_assert_int_eq(nran, 2);
	ck_assert_int_eq(ran[0], 1);
	ck_assert_int_eq(ran[1], 3);
}
END_TEST

START_TEST(the_storm_ends_when_nothing_is_parked)
{
	make_ready_crowd();
	(void)login_gate_admit(LOGIN_GATE_STARTED);	/* enters the storm */
	ck_assert(login_gate_in_storm());
	park(1, LOGIN_GATE_STARTED);
	loop_until_drained();
	/* the crowd is gone and a turn found nothing parked: calm, so a new login runs even past a turn's time */
	for (int i = 0; i < 20; i++)
		event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
	struct timespec pause = { 0, LOGIN_GATE_TURN_USEC * 2 * 1000 };
	nanosleep(&pause, NULL);	/* past any turn's end: only a calm gate admits now */
	ck_assert(login_gate_admit(LOGIN_GATE_NEW));
}
END_TEST

/* A loop kept busy (the crowd ready again at every turn) still leaves the storm once nothing waits. */
START_TEST(a_busy_loop_leaves_the_storm_when_nothing_waits)
{
	make_ready_crowd();
	(void)login_gate_admit(LOGIN_GATE_STARTED);	/* enters the storm */
	ck_assert(login_gate_in_storm());
	ck_assert(login_gate_in_storm());
	for (int i = 0; i < 20 && login_gate_in_storm(); i++) {
		make_ready_crowd();	/* still busy at every turn */
		event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
	}
	ck_assert_msg(!login_gate_in_storm(), "the gate kept its turns armed on a busy loop with nothing parked");
}
END_TEST

Suite *unit_suite(void)
{
	Suite *s = suite_create("login_gate");
	TCase *tc = tcase_create("turns");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, calm_logins_run_at_once);
	tcase_add_test(tc, storm_serves_started_logins_first_each_in_order);
	tcase_add_test(tc, a_turn_ends_after_its_time);
	tcase_add_test(tc, a_login_closed_while_parked_never_runs);
	tcase_add_test(tc, the_storm_ends_when_nothing_is_parked);
	tcase_add_test(tc, a_busy_loop_leaves_the_storm_when_nothing_waits);
	suite_add_tcase(s, tc);
	return s;
}
