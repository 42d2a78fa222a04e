/*
 * supervisor.c - forks and watches the worker processes (see
 * supervisor.h for the contract).
 *
 * Owns: the worker processes (pids, restart schedule) and their private
 * socket directories. Writes only the process fields of the shared worker
 * table. Must not touch pools, clients or servers: it never has any.
 *
 * Why sigtimedwait and no event loop: the supervisor waits for signals and
 * restart deadlines, nothing else, and a child forked from a libevent
 * process would inherit the parent's epoll and signal plumbing.
 */
#include "common.h"
#include "supervisor.h"
#include "admin_state.h"
#include "handover.h"
#include "shared_pool.h"
#include "log.h"
#include "workers.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BACKOFF_FIRST_USEC USEC_PER_SEC
#define BACKOFF_MAX_USEC (30 * USEC_PER_SEC)
/* A worker that ran this long before dying starts over from BACKOFF_FIRST_USEC. */
#define BACKOFF_RESET_USEC (30 * USEC_PER_SEC)
/* Longest sleep with nothing scheduled; any signal ends it earlier. */
#define IDLE_WAIT_USEC (60 * USEC_PER_SEC)
/*
 * A dead worker's server connections end when the kernel closes its
 * sockets, their backends a moment later: its budget (shared_pool.h) is
 * freed after this, so that PostgreSQL never sees both them and the
 * connections others open with it.
 */
#define RECLAIM_DELAY_USEC (USEC_PER_SEC / 2)

struct child {
	pid_t pid;			/* 0 while not running */
	enum worker_state state;
	unsigned restarts;
	usec_t started;			/* monotonic */
	usec_t restart_at;		/* monotonic, in WORKER_STATE_BACKOFF */
	usec_t backoff;			/* the next delay */
	usec_t reclaim_at;		/* monotonic: its shared budget is freed then (0 = nothing to free) */
};

static struct {
	struct child w[CONFIG_MAX_WORKERS];
	int count;
	pid_t self;
	bool stopping;
	int exit_code;
	sigset_t sigs;			/* blocked here, taken by sigtimedwait, unblocked in workers */
	const struct config *cfg;
	int (*worker_main)(int worker, unsigned restarts);
} sup;

static const int forwarded[] = { SIGHUP, SIGINT, SIGTERM, SIGQUIT, SIGUSR1, SIGUSR2 };

static void child_set_state(int k, enum worker_state state)
{
	sup.w[k - 1].state = state;
	workers_set_state(k, state);
}

static void describe_exit(int status, char *buf, size_t size)
{
	if (WIFSIGNALED(status))
		snprintf(buf, size, "exited with signal %d", WTERMSIG(status));
	else if (WIFEXITED(status))
		snprintf(buf, size, "exited with status %d", WEXITSTATUS(status));
	else
		snprintf(buf, size, "ended (wait status 0x%x)", (unsigned)status);
}

/* In the forked worker: undo what only the supervisor wants, then be a pooler. */
static void __attribute__((noreturn)) become_worker(int k)
{
	/* No worker outlives the supervisor; if it is already gone, do not start at all. */
	prctl(PR_SET_PDEATHSIG, SIGQUIT);
	if (getppid() != sup.self)
		_exit(1);
	/* The signals stay blocked until the worker's loop has its handlers (run_pooler). */
	exit(sup.worker_main(k, sup.w[k - 1].restarts));
}

/*
 * Worker k's private socket dir, made before each start (a tmp cleaner may
 * have removed it). One found in place must be a real directory of ours
 * that nobody else can write: the sockets in it carry cancel keys between
 * workers, and its name (under /tmp by default) can be guessed.
 */
static bool socket_dir_make(int k)
{
	char dir[256];
	struct stat st;
	workers_socket_dir(sup.cfg, k, dir, sizeof(dir));
	if (mkdir(dir, 0755) == 0)
		return true;
	if (errno != EEXIST) {
		log_error("could not create the worker socket directory %s: %s", dir, strerror(errno));
		return false;
	}
	if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 0022)) {
		log_error("worker socket directory %s is not a directory of this user that only it can write", dir);
		return false;
	}
	return true;
}

static void start_worker(int k)
{
	struct child *c = &sup.w[k - 1];
	workers_clear_slot(k);
	shared_pool_reclaim(k);	/* a restarted worker counts from zero */
	c->reclaim_at = 0;
	bool dir_ok = socket_dir_make(k);
	pid_t pid = dir_ok ? fork() : -1;
	if (pid < 0) {
		log_error("could not start worker %d: %s; trying again in %lld s", k,
			  dir_ok ? strerror(errno) : "no private socket directory", (long long)(c->backoff / USEC_PER_SEC));
		c->restart_at = monotonic_usec() + c->backoff;
		c->backoff = MIN(c->backoff * 2, BACKOFF_MAX_USEC);
		child_set_state(k, WORKER_STATE_BACKOFF);
		return;
	}
	if (pid == 0)
		become_worker(k);
	c->pid = pid;
	c->started = monotonic_usec();
	/*
	 * Pending (blocked) in the child until its loop handles signals: it
	 * then follows the instance's pause state and comes up paused like the rest.
	 */
	if (workers_want_paused(NULL))
		kill(pid, SIGUSR1);
	workers_set_process(k, pid, WORKER_STATE_STARTING, c->restarts, now_usec());
	c->state = WORKER_STATE_STARTING;
	log_info("worker %d started (pid %d)", k, (int)pid);
}

static int live_workers(void)
{
	int n = 0;
	for (int k = 1; k <= sup.count; k++)
		n += sup.w[k - 1].pid > 0;
	return n;
}

/* Whether pid is one of our workers (a console command of its own) rather than someone outside. */
static bool is_worker(pid_t pid)
{
	for (int k = 1; k <= sup.count; k++)
		if (pid > 0 && sup.w[k - 1].pid == pid)
			return true;
	return false;
}

/* To every worker but the one that sent it (RELOAD or SHUTDOWN on its console: it acted already). */
static void forward(int sig, pid_t sender)
{
	for (int k = 1; k <= sup.count; k++)
		if (sup.w[k - 1].pid > 0 && sup.w[k - 1].pid != sender)
			kill(sup.w[k - 1].pid, sig);
}

/* SIGINT, SIGTERM, SIGQUIT (or a failed start): no more restarts; workers finish as the signal says. */
static void begin_stop(int sig, pid_t sender)
{
	sup.stopping = true;
	for (int k = 1; k <= sup.count; k++) {
		struct child *c = &sup.w[k - 1];
		child_set_state(k, c->pid > 0 ? WORKER_STATE_STOPPING : WORKER_STATE_EXITED);
	}
	forward(sig, sender);
}

static void worker_exited(int k, int status)
{
	struct child *c = &sup.w[k - 1];
	char how[64];
	pid_t pid = c->pid;
	bool listened = workers_slot_listening(k);

	describe_exit(status, how, sizeof(how));
	c->pid = 0;
	c->reclaim_at = monotonic_usec() + RECLAIM_DELAY_USEC;
	if (sup.stopping) {
		child_set_state(k, WORKER_STATE_EXITED);
		log_info("worker %d (pid %d) %s", k, (int)pid, how);
		return;
	}
	if (c->restarts == 0 && !listened) {
		/* Nothing is served yet: a worker that cannot start means the instance cannot. */
		child_set_state(k, WORKER_STATE_EXITED);
		log_error("worker %d (pid %d) %s during start-up; stopping", k, (int)pid, how);
		sup.exit_code = 1;
		begin_stop(SIGQUIT, 0);
		return;
	}
	usec_t now = monotonic_usec();
	if (now - c->started >= BACKOFF_RESET_USEC)
		c->backoff = BACKOFF_FIRST_USEC;
	usec_t delay = c->backoff;
	c->backoff = MIN(c->backoff * 2, BACKOFF_MAX_USEC);
	c->restart_at = now + delay;
	c->restarts++;
	child_set_state(k, WORKER_STATE_BACKOFF);
	workers_set_process(k, 0, WORKER_STATE_BACKOFF, c->restarts, 0);
	log_warning("worker %d (pid %d) %s, restarting in %lld s", k, (int)pid, how,
		    (long long)(delay / USEC_PER_SEC));
}

static void reap(void)
{
	int status;
	pid_t pid;
	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		for (int k = 1; k <= sup.count; k++) {
			if (sup.w[k - 1].pid == pid) {
				worker_exited(k, status);
				handover_worker_gone(k);	/* no longer running: nothing more is sent to it */
				break;
			}
		}
	}
}

/* Frees dead workers' budgets and restarts whatever is due; returns the time until the next (or IDLE_WAIT_USEC). */
static usec_t restart_due(void)
{
	usec_t now = monotonic_usec(), wait = IDLE_WAIT_USEC;
	for (int k = 1; k <= sup.count; k++) {
		struct child *c = &sup.w[k - 1];
		if (!c->reclaim_at)
			continue;
		if (c->reclaim_at <= now) {
			shared_pool_reclaim(k);
			c->reclaim_at = 0;
		} else {
			wait = MIN(wait, c->reclaim_at - now);
		}
	}
	for (int k = 1; k <= sup.count && !sup.stopping; k++) {
		struct child *c = &sup.w[k - 1];
		if (c->state != WORKER_STATE_BACKOFF)
			continue;
		if (c->restart_at <= now)
			start_worker(k);
		if (c->state == WORKER_STATE_BACKOFF)
			wait = MIN(wait, MAX(0, c->restart_at - now));
	}
	return wait;
}

static void handle_signal(int sig, pid_t sender)
{
	switch (sig) {
	case SIGCHLD:
		break;		/* reaped below, every turn */
	case SIGHUP:
		log_info("got SIGHUP, reloading all workers");
		log_reopen();
		forward(sig, sender);
		break;
	case SIGUSR1:
	case SIGUSR2:
		log_info("got %s, passing it to all workers", sig == SIGUSR1 ? "SIGUSR1" : "SIGUSR2");
		/* A worker's console PAUSE/RESUME has set the state already; from outside, the signal says it. */
		if (!is_worker(sender))
			workers_set_paused(sig == SIGUSR1);
		forward(sig, sender);
		break;
	case SIGINT:
	case SIGTERM:
	case SIGQUIT:
		log_info("got %s, passing it to all workers; exiting when they have",
			 sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "SIGQUIT");
		begin_stop(sig, sender);
		break;
	default:
		break;
	}
}

static void socket_dirs_remove(void)
{
	char dir[256], sock[300];
	for (int k = 1; k <= sup.count; k++) {
		workers_socket_dir(sup.cfg, k, dir, sizeof(dir));
		/* A worker killed outright leaves its socket file behind. */
		snprintf(sock, sizeof(sock), "%s/.s.PGSQL.%d", dir, sup.cfg->listen_port);
		unlink(sock);
		rmdir(dir);
	}
}

int supervisor_run(const struct config *cfg, int count, int (*worker_main)(int worker, unsigned restarts))
{
	sup.cfg = cfg;
	sup.count = MIN(count, CONFIG_MAX_WORKERS);
	sup.self = getpid();
	sup.worker_main = worker_main;
	sigemptyset(&sup.sigs);
	sigaddset(&sup.sigs, SIGCHLD);
	for (size_t i = 0; i < ARRAY_SIZE(forwarded); i++)
		sigaddset(&sup.sigs, forwarded[i]);
	sigprocmask(SIG_BLOCK, &sup.sigs, NULL);
	signal(SIGPIPE, SIG_IGN);

	workers_table_create(sup.count, sup.self);
	shared_pool_create(sup.count);
	handover_create(sup.count);
	admin_state_create();
	log_info("supervisor up: %s, %d workers", PGVALVE_VERSION_STRING, sup.count);
	for (int k = 1; k <= sup.count; k++) {
		sup.w[k - 1].backoff = BACKOFF_FIRST_USEC;
		start_worker(k);
	}

	while (!sup.stopping || live_workers() > 0) {
		usec_t wait = restart_due();
		if (sup.stopping && live_workers() == 0)
			break;
		struct timespec ts = { (time_t)(wait / USEC_PER_SEC), (long)(wait % USEC_PER_SEC) * 1000 };
		siginfo_t si;
		int sig = sigtimedwait(&sup.sigs, &si, &ts);
		if (sig > 0)
			handle_signal(sig, si.si_code == SI_USER ? si.si_pid : 0);
		reap();
	}

	socket_dirs_remove();
	admin_state_destroy();
	handover_destroy();
	shared_pool_destroy();
	workers_table_destroy();
	log_info("all workers have exited, supervisor exiting");
	return sup.exit_code;
}
