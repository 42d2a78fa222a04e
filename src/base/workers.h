/*
 * workers.h - the worker processes of one pgvalve instance as every
 * process sees them: who this process is in the set (number, peer_id,
 * private Unix socket) and the shared table SHOW WORKERS reads.
 *
 * workers = 1 (the default): the process is worker 1 of 1, the table has
 * one private slot, nothing else changes. workers = N > 1: the supervisor
 * (supervisor.h) creates the table before forking, MAP_SHARED |
 * MAP_ANONYMOUS, so the supervisor and every worker see the same slots;
 * slot k - 1 is worker k's (k = 1..N).
 *
 * Writers, one per field, no locks: the supervisor writes a slot's process
 * fields (pid, state, restarts, started); the worker writes its counters
 * every janitor tick inside the slot's sequence counter (a seqlock), so a
 * reader sees one tick's counters together. A worker killed in the middle
 * of an update leaves the counter odd: readers give up after a few tries
 * and take the counters as they are, and the restarted worker clears them.
 *
 * Peer scheme (a worker's cfg is adjusted by workers_apply_config on every
 * load, start-up and reload alike):
 *   - worker k has peer_id = P + k - 1, where P is the configured peer_id,
 *     or 1 when peer_id is 0 (unset); P + N - 1 must be <= 16383;
 *   - its [peers] are the other N - 1 workers, each at its private socket
 *     (host = the socket's directory, port = listen_port), plus the file's
 *     [peers] whose ids are not taken by a worker;
 *   - worker k's private socket is
 *       <unix_socket_dir, or /tmp when empty>/pgvalve-<port>-<supervisor pid>-w<k>/.s.PGSQL.<port>
 *     (the supervisor's pid keeps an old and a new instance on one port apart);
 *   - worker 1 also owns unix_socket_dir/.s.PGSQL.<port>, the path a
 *     single process would listen on; only one process can own it;
 *   - so_reuseport is forced on, so all workers bind listen_addr:listen_port.
 *
 * Process globals (one of the documented few): this process's place in the
 * set and the table's mapping, set at start-up or right after fork.
 */
#ifndef PGVALVE_WORKERS_H
#define PGVALVE_WORKERS_H

#include "common.h"
#include "config.h"

/* peer_id's upper bound (PgBouncer's): the last worker's id must fit. */
#define WORKERS_PEER_ID_MAX 16383

/* A worker process as the supervisor sees it; one set_state place: supervisor.c. */
enum worker_state {
	WORKER_STATE_STARTING = 0,	/* forked, not listening yet */
	WORKER_STATE_RUNNING,		/* listening (the worker says so) */
	WORKER_STATE_BACKOFF,		/* died, waiting to be restarted */
	WORKER_STATE_STOPPING,		/* told to shut down */
	WORKER_STATE_EXITED,		/* gone, will not be restarted */
};

const char *worker_state_name(enum worker_state state);

/* One worker's counters, as of its last janitor tick. */
struct worker_counters {
	uint64_t cl_active;
	uint64_t cl_waiting;
	uint64_t cl_idle;
	uint64_t cl_login;		/* not yet in a pool */
	uint64_t sv_active;
	uint64_t sv_idle;
	uint64_t sv_used;		/* used + tested */
	uint64_t sv_login;
	uint64_t xact_count;		/* totals since the worker started */
	uint64_t query_count;
	uint64_t bytes_received;
	uint64_t bytes_sent;
};

struct worker_status {
	int worker;			/* 1..N */
	pid_t pid;			/* 0 while not running */
	int peer_id;
	enum worker_state state;
	unsigned restarts;
	usec_t started;			/* wall clock, 0 if never */
	usec_t updated;			/* the worker's last tick */
	struct worker_counters c;
};

/* -w / --workers: overrides the file's workers on every load; 0 = auto, -1 = not given. */
void workers_set_command_line(int workers);
/*
 * A freshly loaded config: applies -w; in a worker of N > 1 also its
 * peer_id, [peers] and so_reuseport (see the scheme above). -1 with errbuf
 * set if the peer ids do not fit.
 */
int workers_apply_config(struct config *cfg, char *errbuf, size_t errsize);
/*
 * Its two halves, for a reload: the forced options before the restart-only
 * values are put back, the peers after (they are built from listen_port
 * and unix_socket_dir, which must be the running ones).
 */
void workers_force_options(struct config *cfg);
int workers_apply_peers(struct config *cfg, char *errbuf, size_t errsize);
/* -1 with errbuf set if count workers' peer ids (see the scheme above) do not fit under cfg's peer_id. */
int workers_check_peer_ids(const struct config *cfg, int count, char *errbuf, size_t errsize);
/* workers resolved: N, or "auto" = online CPUs, at most CONFIG_MAX_WORKERS. */
int workers_resolve(const struct config *cfg);

/* Makes the table of count slots (before any fork); supervisor = pid that names private sockets. */
void workers_table_create(int count, pid_t supervisor);
void workers_table_destroy(void);
/* This process is worker `worker` (1-based) of the set: right after fork, or 1 for a single process. */
void workers_become(int worker);
int workers_self(void);
int workers_count(void);
/* Whether this process owns unix_socket_dir/.s.PGSQL.<port> (worker 1 or a single process). */
bool workers_owns_unix_socket(void);
/* Worker k's private socket directory ("" for a single process). */
void workers_socket_dir(const struct config *cfg, int worker, char *buf, size_t size);
/* peer_id of worker k under cfg's peer_id (see the scheme above). */
int workers_peer_id(const struct config *cfg, int worker);

/*
 * Client and server ids (SHOW CLIENTS' id, KILL_CLIENT) are unique in the
 * instance: with workers = N > 1, worker k counts from k << WORKERS_ID_SHIFT
 * (main.c), so the id names its worker. workers_id_owner: that worker,
 * 0 for a single process or an id no worker hands out.
 */
#define WORKERS_ID_SHIFT 48
int workers_id_owner(uint64_t id);

/* Supervisor side: a worker's process fields. */
void workers_set_process(int worker, pid_t pid, enum worker_state state, unsigned restarts, usec_t started);
void workers_set_state(int worker, enum worker_state state);
/*
 * Supervisor side, only while worker k has no process: forget that it was
 * listening (before starting it again).
 */
void workers_clear_slot(int worker);
/* Whether worker k has said it is listening. */
bool workers_slot_listening(int worker);
/* Worker side: this process is listening (state RUNNING); its counters are cleared. */
void workers_announce_running(void);
/* Worker side, every janitor tick: this process's counters into its slot. */
void workers_publish(void);
/* sum += c, field by field (SHOW WORKERS' total row). */
void workers_add_counters(struct worker_counters *sum, const struct worker_counters *c);
/*
 * Worker side: RELOAD and SHUTDOWN on one worker's console are meant for
 * the whole instance: sends sig (SIGHUP, SIGINT, SIGTERM, SIGQUIT) to the
 * supervisor, which passes it to the other workers. Nothing for a single
 * process.
 */
void workers_tell_supervisor(int sig);
/*
 * The instance's pause state (workers = N > 1). Console PAUSE / RESUME
 * without a database, and SIGUSR1 / SIGUSR2 reaching the supervisor from
 * outside, set the state the whole instance should be in, with a new
 * generation; then the supervisor signals every worker, and each worker
 * follows the state (not the signal, which can be merged or reordered),
 * also on every janitor tick. A worker publishes the generation of the
 * pause it has completed (paused, no server left), 0 when it has none.
 *
 * workers_supervised: this process is a worker of a supervisor.
 * workers_set_paused: new state; returns its generation.
 * workers_want_paused: the state now and its generation (0 at start;
 * gen may be NULL).
 * workers_others_paused: every other worker that serves has completed
 * generation gen or a later pause.
 */
bool workers_supervised(void);
uint32_t workers_set_paused(bool paused);
bool workers_want_paused(uint32_t *gen);
void workers_publish_paused(uint32_t gen_done);
bool workers_others_paused(uint32_t gen);
/*
 * Every other worker has been told to stop (the supervisor marks each
 * STOPPING as it sends the signal) or is gone: a console SHUTDOWN is
 * answered then.
 */
bool workers_others_stopping(void);
/*
 * The instance's drain (drain.h). DRAIN on one worker's console sets it
 * before it sends SIGTERM to the supervisor, which passes the signal to
 * the other workers: a worker that gets SIGTERM while it is set drains,
 * whatever shutdown_drain says. Set in a single process too (its later
 * SIGTERM keeps draining). Never cleared: the instance is ending.
 */
void workers_set_drain(void);
bool workers_want_drain(void);
/*
 * Readiness (readiness.h), workers = N > 1: each worker publishes whether
 * it found no database reachable; workers_others_unreachable is true when
 * every other worker that serves has published so (and for a single process).
 */
void workers_publish_unreachable(bool unreachable);
bool workers_others_unreachable(void);
/* Any process: slot of worker k (1-based). */
void workers_read(int worker, struct worker_status *out);

/*
 * Blobs: with workers = N > 1 every slot also has a byte area the metrics
 * endpoint uses (metrics.h: the worker's samples as of its last publish),
 * written only by the slot's worker under a sequence counter of its own.
 * workers_blob_write: this worker's blob; false (nothing written) if len
 * exceeds WORKERS_BLOB_BYTES or there are no blobs (a single process).
 * workers_blob_read: a copy of worker k's blob, NUL-terminated, to free();
 * NULL if there are none. A predecessor killed mid-write may leave it torn:
 * readers get what is there, line by line.
 */
enum workers_blob { WORKERS_BLOB_METRICS, WORKERS_BLOBS };
#define WORKERS_BLOB_BYTES (1024 * 1024)
bool workers_blob_write(enum workers_blob which, const void *data, size_t len);
char *workers_blob_read(int worker, enum workers_blob which, size_t *len);

#endif
