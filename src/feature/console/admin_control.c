/*
 * admin_control.c - the admin console's control commands (RELOAD, PAUSE,
 * RESUME, DISABLE, ENABLE, RECONNECT, KILL, KILL_CLIENT, WAIT_CLOSE,
 * SHUTDOWN, SET, DRAIN), one handler each in the verbs[] table, and what they
 * leave behind: the console clients waiting for a PAUSE or WAIT_CLOSE to
 * complete, the instance-wide pause of a
 * supervisor's workers, the global PAUSE/RESUME and SHUTDOWN modes the
 * signals share.
 *
 * Owns: the admin db object and the list of console clients waiting.
 * Changes pool and process state through pool.c, reload.c, listener.c,
 * workers.c, shutdown.c and drain.c; answers through admin_reply.c. With
 * workers = N, a verb typed on the port is handed to admin_fanout.c to
 * run on every worker (verbs[]' scope), after its rights are checked here.
 */
#include "common.h"
#include "admin_internal.h"
#include "admin_state.h"
#include "client.h"
#include "config.h"
#include "drain.h"
#include "listener.h"
#include "log.h"
#include "shutdown.h"
#include "netbuf.h"
#include "pool.h"
#include "proto.h"
#include "reload.h"
#include "server.h"
#include "stats.h"
#include "tenant.h"
#include "tls.h"
#include "workers.h"

#include <signal.h>

/*
 * A console client waiting for its PAUSE or WAIT_CLOSE to complete. Kept
 * here rather than on every client: consoles are few. (SUSPEND went with
 * PgBouncer 1.26's online restart.)
 */
enum admin_wait_kind { ADMIN_WAIT_PAUSE, ADMIN_WAIT_CLOSE, ADMIN_WAIT_SHUTDOWN };
struct admin_wait {
	struct list_node node;		/* adm.waits */
	struct client *client;
	enum admin_wait_kind what;
	struct db *db;			/* NULL: all databases */
	usec_t since;			/* when it began */
};

/* A SHUTDOWN answers once every worker has been told, or after this if the supervisor does not say so. */
#define SHUTDOWN_TOLD_TIMEOUT (2 * USEC_PER_SEC)

static struct {
	struct db *db;
	struct list waits;		/* struct admin_wait, in the order they began */
	/* The instance pause a console PAUSE here waits for on the other workers (0: none). */
	uint32_t pause_gen;
	/* The generation of the instance pause state this worker follows (see workers.h). */
	uint32_t applied_gen;
} adm;

/* ---------------------------------------------------------------- setup */

struct db *admin_db(void)
{
	return adm.db;
}

void admin_setup(void)
{
	list_init(&adm.waits);
	adm.db = pool_create_admin_db("pgbouncer");
}

/*
 * Control commands need admin_users (or user pgbouncer from the same OS user
 * over the Unix socket); stats_users may only SHOW.
 */
static bool user_is_admin(const struct client *client)
{
	return client->admin_superuser || config_list_contains(pgv.cfg->admin_users, client_user_name(client));
}

/* ---------------------------------------------------------------- waits */

/* The wait of a console client, NULL if it waits for nothing. */
static struct admin_wait *wait_of(const struct client *client)
{
	list_for_each(pos, &adm.waits) {
		struct admin_wait *w = container_of(pos, struct admin_wait, node);
		if (w->client == client)
			return w;
	}
	return NULL;
}

static void wait_end(struct admin_wait *w)
{
	if (w->db)
		w->db->console_waits--;
	list_remove(&adm.waits, &w->node);
	free(w);
}

/* A console client waits for PAUSE/WAIT_CLOSE to complete. */
static void wait_for(struct client *client, enum admin_wait_kind what, struct db *db)
{
	struct admin_wait *w = wait_of(client);
	if (!w) {
		w = xcalloc(1, sizeof(*w));
		w->client = client;
		list_node_init(&w->node);
		list_append(&adm.waits, &w->node);
	}
	w->what = what;
	w->since = now_usec();
	if (w->db)
		w->db->console_waits--;
	w->db = db;
	if (db)
		db->console_waits++;	/* the pool keeps a database a console waits on (pool.h) */
	netbuf_pause(&client->nb);
	admin_check_waits();
}

static bool db_paused_done(const struct db *db)
{
	list_for_each(pos, &db->pools) {
		const struct pool *pool = container_of(pos, struct pool, node);
		if (pool_server_count(pool) > 0)
			return false;
	}
	return true;
}

static bool db_close_done(const struct db *db)
{
	list_for_each(pos, &db->pools) {
		const struct pool *pool = container_of(pos, struct pool, node);
		const struct list *lists[] = { &pool->active_servers, &pool->idle_servers, &pool->used_servers,
					       &pool->tested_servers, &pool->login_servers };
		for (size_t i = 0; i < ARRAY_SIZE(lists); i++)
			list_for_each(spos, lists[i])
				if (container_of(spos, struct server, node)->close_needed)
					return false;
	}
	return true;
}

/* done(db) for every database but the console's. */
static bool every_db(bool (*done)(const struct db *))
{
	list_for_each(pos, &pgv.databases) {
		const struct db *db = container_of(pos, struct db, node);
		if (!db->is_admin && !done(db))
			return false;
	}
	return true;
}

static bool wait_done(const struct admin_wait *w)
{
	if (w->what == ADMIN_WAIT_SHUTDOWN)
		return workers_others_stopping() || now_usec() - w->since >= SHUTDOWN_TOLD_TIMEOUT;
	bool (*done)(const struct db *) = w->what == ADMIN_WAIT_PAUSE ? db_paused_done : db_close_done;
	if (w->db)
		return done(w->db);
	if (!every_db(done))
		return false;
	if (w->what == ADMIN_WAIT_PAUSE && adm.pause_gen)
		return workers_others_paused(adm.pause_gen);
	return true;
}

/* This process is paused (PAUSE, SIGUSR1) and holds no server any more. */
static bool paused_done(void)
{
	return pgv.paused_all && every_db(db_paused_done);
}

/* The wait here for a PAUSE of the whole instance, if any. */
static struct admin_wait *instance_pause_wait(void)
{
	list_for_each(pos, &adm.waits) {
		struct admin_wait *w = container_of(pos, struct admin_wait, node);
		if (w->what == ADMIN_WAIT_PAUSE && !w->db)
			return w;
	}
	return NULL;
}

/* The instance was resumed under a waiting PAUSE: it ends with an error rather than wait for ever. */
static void end_instance_pause_wait(void)
{
	struct admin_wait *w = adm.pause_gen ? instance_pause_wait() : NULL;
	adm.pause_gen = 0;
	if (!w)
		return;
	struct client *client = w->client;
	wait_end(w);
	admin_reply_error(client, "57014", "PAUSE canceled: the instance was resumed");
	netbuf_resume(&client->nb);
}

/* Console RESUME or ^C on a PAUSE: every worker resumes; a PAUSE still waiting here ends. */
static void resume_instance(void)
{
	adm.applied_gen = workers_set_paused(false);
	end_instance_pause_wait();
	workers_tell_supervisor(SIGUSR2);
}

void admin_sync_instance_pause(void)
{
	uint32_t gen;
	if (!workers_supervised())
		return;
	bool want = workers_want_paused(&gen);
	if (gen == adm.applied_gen)
		return;
	adm.applied_gen = gen;
	if (want) {
		if (!pgv.paused_all) {
			log_info("instance paused, pausing all activity");
			admin_pause_all();
		}
		return;
	}
	end_instance_pause_wait();
	if (pgv.paused_all && !pgv.shutting_down) {
		log_info("instance resumed, continuing from PAUSE");
		admin_resume_all();
	}
}

void admin_client_closing(struct client *client)
{
	struct admin_wait *w = wait_of(client);
	if (w && w->what == ADMIN_WAIT_PAUSE && !w->db)
		adm.pause_gen = 0;	/* the instance stays paused, as PgBouncer leaves it */
	if (w)
		wait_end(w);
}

void admin_cancel_request(struct client *client)
{
	struct admin_wait *w = wait_of(client);
	if (!w || w->what != ADMIN_WAIT_PAUSE)
		return;
	/* ^C on a waiting PAUSE: everything resumes, as in PgBouncer. */
	wait_end(w);
	if (!pgv.shutting_down) {
		log_info("PAUSE canceled, resuming");
		/* Everything resumes: the whole instance, whoever paused it. */
		if (workers_supervised() && workers_want_paused(NULL))
			resume_instance();
		adm.pause_gen = 0;
		admin_resume_all();
		list_for_each(pos, &pgv.databases)
			container_of(pos, struct db, node)->paused = false;
		list_for_each(pos, &pgv.databases)
			pool_db_resume(container_of(pos, struct db, node));
		if (admin_fanout_is_leg(client))
			admin_state_db_flag(NULL, ADMIN_DB_PAUSED, false);
	}
	struct pktbuf b;
	pktbuf_init(&b, 128);
	proto_put_error(&b, "ERROR", "57014", "canceling statement due to user request");
	proto_put_ready(&b, 'I');
	netbuf_send(&client->nb, b.buf, b.len);
	pktbuf_free(&b);
	netbuf_resume(&client->nb);
}

static bool shutdown_unanswered(void)
{
	list_for_each(pos, &adm.waits)
		if (container_of(pos, struct admin_wait, node)->what == ADMIN_WAIT_SHUTDOWN)
			return true;
	return false;
}

void admin_check_waits(void)
{
	/* Follow the instance's pause state, then say what the other workers' PAUSE waits see. */
	admin_sync_instance_pause();
	uint32_t gen;
	bool want = workers_want_paused(&gen);
	workers_publish_paused(want && gen == adm.applied_gen && paused_done() ? gen : 0);
	list_for_each_safe(pos, tmp, &adm.waits) {
		struct admin_wait *w = container_of(pos, struct admin_wait, node);
		if (!wait_done(w))
			continue;
		static const char *const tags[] = { "PAUSE", "WAIT_CLOSE", "SHUTDOWN" };
		const char *tag = tags[w->what];
		if (w->what == ADMIN_WAIT_PAUSE && !w->db)
			adm.pause_gen = 0;
		struct client *client = w->client;
		wait_end(w);
		admin_reply_complete(client, tag);
		netbuf_resume(&client->nb);
	}
	/* Not before a SHUTDOWN waiting here has answered. */
	if (pgv.shutdown_mode == SHUTDOWN_WAIT_FOR_SERVERS && pgv.server_count == 0 && !shutdown_unanswered()) {
		log_info("server connections dropped, exiting");
		shutdown_exit_now();
	}
}

/* ---------------------------------------------------------------- pause, resume, shutdown, kill */

static void pause_db(struct db *db)
{
	if (db->is_admin)
		return;
	db->paused = true;
	pool_db_pause(db);
}

void admin_pause_all(void)
{
	pgv.paused_all = true;
	list_for_each(pos, &pgv.databases) {
		struct db *db = container_of(pos, struct db, node);
		if (!db->is_admin)
			pool_db_pause(db);
	}
}

void admin_resume_all(void)
{
	/* Only the global pause: databases paused by name (or KILL) stay paused. */
	pgv.paused_all = false;
	workers_publish_paused(0);
	list_for_each(pos, &pgv.databases)
		pool_db_resume(container_of(pos, struct db, node));
}

void admin_shutdown_wait_for_servers(void)
{
	if (pgv.shutdown_mode != SHUTDOWN_NONE)
		return;
	pgv.shutdown_mode = SHUTDOWN_WAIT_FOR_SERVERS;
	pgv.shutting_down = true;
	listener_close_tcp();	/* 1.25: the Unix socket stays, so admins can still connect */
	admin_pause_all();
	/* Clients already queued are closed by the janitor's next pass, after this command has answered. */
	admin_check_waits();
}

void admin_shutdown_wait_for_clients(void)
{
	if (pgv.shutdown_mode != SHUTDOWN_NONE)
		return;
	pgv.shutdown_mode = SHUTDOWN_WAIT_FOR_CLIENTS;
	shutdown_begin_graceful();
}

/* A database's flag changed by an instance-wide command (a fan-out leg): a restarted worker sets it too. */
static void record_db_flag(const struct client *client, const struct db *db, enum admin_db_flag flag, bool on)
{
	if (admin_fanout_is_leg(client))
		admin_state_db_flag(db->name, flag, on);
}

static void kill_db(struct db *db)
{
	pause_db(db);
	pool_close_db(db, "database removed");
	stats_init(&db->stats, now_usec());
}

static struct client *find_client_by_id(uint64_t id)
{
	list_for_each(dpos, &pgv.databases) {
		struct db *db = container_of(dpos, struct db, node);
		list_for_each(ppos, &db->pools) {
			struct pool *pool = container_of(ppos, struct pool, node);
			struct list *lists[] = { &pool->active_clients, &pool->idle_clients, &pool->waiting_clients,
						 &pool->welcome_clients };
			for (size_t i = 0; i < ARRAY_SIZE(lists); i++)
				list_for_each(pos, lists[i]) {
					struct client *c = container_of(pos, struct client, node);
					if (c->id == id)
						return c;
				}
		}
	}
	return NULL;
}

/* Looks up the command's database: unknown names and the admin db get PgBouncer's errors. */
static struct db *command_db(struct client *client, const struct admin_command *cmd, const char *what)
{
	struct db *db = pool_find_db(cmd->arg);
	if (!db && config_is_admin_dbname(cmd->arg))
		db = adm.db;
	if (!db) {
		admin_reply_errorf(client, "no such database: %s", cmd->arg);
		return NULL;
	}
	if (db->is_admin) {
		admin_reply_errorf(client, "cannot %s admin db: %s", what, cmd->arg);
		return NULL;
	}
	return db;
}

static void log_issued(const struct admin_command *cmd)
{
	if (cmd->has_arg)
		log_info("%s '%s' command issued", cmd->verb, cmd->arg);
	else
		log_info("%s command issued", cmd->verb);
}

/* ---------------------------------------------------------------- the verbs */

enum set_outcome { SET_APPLIED, SET_FAILED, SET_TLS_KEPT };

/* SET_TLS_KEPT's words, to the console and in a restarted worker's log (PgBouncer's). */
static const char tls_kept[] = "TLS settings could not be applied, still using old configuration";

/*
 * Sets a reloadable setting in the running configuration, as a RELOAD
 * would change it. SET_TLS_KEPT: set, but the TLS contexts could not be
 * made from it and the running ones are kept, as PgBouncer does.
 */
static enum set_outcome set_param(const struct param_def *p, const char *value)
{
	char err[300];
	if (config_set_param(pgv.cfg, p, value, err, sizeof(err)) < 0) {
		log_error("SET %s: %s", p->name, err);
		return SET_FAILED;
	}
	pgv.config_generation++;
	log_info("SET %s = %s", p->name, value);
	/* TLS settings take effect at once. */
	if (strstr(p->name, "_tls_") || strstr(p->name, "_tls13_")) {
		if (tls_configure(pgv.cfg, err, sizeof(err)) < 0)
			return SET_TLS_KEPT;
		if (strncmp(p->name, "server_tls", 10) == 0)
			pool_retire_all_servers("obsolete connection");
	}
	return SET_APPLIED;
}

/* SET key = value: a reloadable setting changes at once. */
static void control_set(struct client *client, const struct admin_command *cmd)
{
	char tag[400];
	if (admin_show_is_fake_param(cmd->key)) {
		admin_reply_notice(client, "SET ignored", NULL, "SET");
		return;
	}
	if (!user_is_admin(client)) {
		admin_reply_errorf(client, "admin access needed");
		return;
	}
	const struct param_def *p = config_find_param(cmd->key);
	if (!p || strcmp(p->name, cmd->key) != 0) {	/* as PgBouncer: keys are case-sensitive here */
		log_error("unknown parameter: pgbouncer/%s", cmd->key);
		admin_reply_errorf(client, "SET failed");
		return;
	}
	snprintf(tag, sizeof(tag), "SET %s=%s", cmd->key, cmd->value);
	if (!p->reloadable) {
		/* As PgBouncer: answered, not applied. The notice says why. */
		char msg[200];
		snprintf(msg, sizeof(msg), "parameter %s cannot be changed while running; restart to apply it", p->name);
		admin_reply_notice(client, msg, NULL, tag);
		return;
	}
	enum set_outcome outcome = set_param(p, cmd->value);
	if (outcome == SET_FAILED) {
		admin_reply_errorf(client, "SET failed");
		return;
	}
	if (admin_fanout_is_leg(client))
		admin_state_param(p->name, cmd->value);	/* the instance's: a restarted worker sets it too */
	if (outcome == SET_TLS_KEPT)
		admin_reply_notice(client, tls_kept, NULL, tag);
	else
		admin_reply_complete(client, tag);
}

static void control_reload(struct client *client, const struct admin_command *cmd)
{
	char msg[600];
	log_issued(cmd);
	if (reload_config(msg, sizeof(msg)) < 0) {
		log_error("RELOAD Failed, see logs for more details");
		admin_reply_error(client, "F0000", "RELOAD failed, see logs for additional details");
		return;
	}
	admin_state_forget_params();	/* the file's values again, SETs gone */
	/*
	 * The whole instance reloads, as SIGHUP would: the supervisor tells the
	 * other workers. Not when the console's fan-out asked: it asks every
	 * worker itself and answers once all have reloaded.
	 */
	if (!admin_fanout_is_leg(client))
		workers_tell_supervisor(SIGHUP);
	admin_reply_complete(client, "RELOAD");
}

/* PAUSE [db]: answered once no server of it (of any database) is left. */
static void control_pause(struct client *client, const struct admin_command *cmd)
{
	struct db *db = NULL;
	log_issued(cmd);
	if (pgv.paused_all) {
		admin_reply_errorf(client, "already suspended/paused");
		return;
	}
	if (cmd->has_arg) {
		if (!(db = command_db(client, cmd, "pause")))
			return;
		pause_db(db);
		record_db_flag(client, db, ADMIN_DB_PAUSED, true);
	} else {
		/* With workers the whole instance pauses, as with SIGUSR1; PAUSE returns when all have. */
		admin_pause_all();
		if (workers_supervised()) {
			adm.pause_gen = adm.applied_gen = workers_set_paused(true);
			workers_tell_supervisor(SIGUSR1);
		}
	}
	wait_for(client, ADMIN_WAIT_PAUSE, db);
}

static void resume_one_db(struct client *client, const struct admin_command *cmd)
{
	if (config_is_admin_dbname(cmd->arg)) {
		admin_reply_errorf(client, "database %s is not paused", cmd->arg);
		return;
	}
	struct db *db = command_db(client, cmd, "resume");
	if (!db)
		return;
	if (!db->paused) {
		admin_reply_errorf(client, "database %s is not paused", db->name);
		return;
	}
	db->paused = false;
	pool_db_resume(db);
	record_db_flag(client, db, ADMIN_DB_PAUSED, false);
	admin_reply_complete(client, "RESUME");
}

/* RESUME [db]: ends a PAUSE (of the whole instance under a supervisor). */
static void control_resume(struct client *client, const struct admin_command *cmd)
{
	log_issued(cmd);
	if (cmd->has_arg) {
		resume_one_db(client, cmd);
		return;
	}
	if (pgv.shutting_down) {
		admin_reply_errorf(client, "pooler is shutting down");
		return;
	}
	bool instance_paused = workers_supervised() && workers_want_paused(NULL);
	if (!pgv.paused_all && !instance_paused) {
		admin_reply_errorf(client, "pooler is not paused/suspended");	/* PgBouncer's words */
		return;
	}
	if (instance_paused)
		resume_instance();	/* every worker, as PAUSE did */
	if (pgv.paused_all)
		admin_resume_all();
	admin_reply_complete(client, "RESUME");
}

/* DISABLE db / ENABLE db: new clients of a disabled database are refused. */
static void set_db_disabled(struct client *client, const struct admin_command *cmd, bool disable)
{
	log_issued(cmd);
	if (!cmd->has_arg) {
		admin_reply_errorf(client, "a database is required");
		return;
	}
	struct db *db = command_db(client, cmd, disable ? "disable" : "enable");
	if (!db)
		return;
	db->disabled = disable;
	record_db_flag(client, db, ADMIN_DB_DISABLED, disable);
	admin_reply_complete(client, disable ? "DISABLE" : "ENABLE");
}

static void control_disable(struct client *client, const struct admin_command *cmd)
{
	set_db_disabled(client, cmd, true);
}

static void control_enable(struct client *client, const struct admin_command *cmd)
{
	set_db_disabled(client, cmd, false);
}

static void control_reconnect(struct client *client, const struct admin_command *cmd)
{
	log_issued(cmd);
	if (cmd->has_tenant) {	/* RECONNECT TENANT id: its row read again, its servers replaced */
		if (!tenant_reconnect(cmd->tenant)) {
			admin_reply_errorf(client, "no such tenant: %s", cmd->tenant);
			return;
		}
	} else if (cmd->has_arg) {
		struct db *db = command_db(client, cmd, "reconnect");
		if (!db)
			return;
		pool_db_reconnect(db);
	} else {
		list_for_each(pos, &pgv.databases)
			pool_db_reconnect(container_of(pos, struct db, node));
	}
	admin_reply_complete(client, "RECONNECT");
}

static void control_kill(struct client *client, const struct admin_command *cmd)
{
	log_issued(cmd);
	if (pgv.paused_all) {
		admin_reply_errorf(client, "already suspended/paused");
		return;
	}
	if (cmd->has_arg) {
		struct db *db = command_db(client, cmd, "kill");
		if (!db)
			return;
		kill_db(db);
		record_db_flag(client, db, ADMIN_DB_PAUSED, true);
	} else {
		list_for_each(pos, &pgv.databases) {
			struct db *d = container_of(pos, struct db, node);
			if (!d->is_admin) {
				kill_db(d);
				record_db_flag(client, d, ADMIN_DB_PAUSED, true);
			}
		}
	}
	admin_reply_complete(client, "KILL");
}

/* KILL_CLIENT id: the id SHOW CLIENTS lists; killing oneself gets no reply, the connection just closes. */
static void control_kill_client(struct client *client, const struct admin_command *cmd)
{
	char *end;
	unsigned long long id = cmd->has_arg ? strtoull(cmd->arg, &end, 10) : 0;
	if (!cmd->has_arg || end == cmd->arg) {
		admin_reply_errorf(client, "invalid client pointer supplied");
		return;
	}
	struct client *target = find_client_by_id(id);
	if (!target) {
		admin_reply_errorf(client, "client not found");
		return;
	}
	if (target == client) {
		client_close(client, "08P01", "admin forced disconnect");
		return;
	}
	client_close(target, "08P01", "admin forced disconnect");
	admin_reply_complete(client, "KILL_CLIENT");
}

/* WAIT_CLOSE [db]: answered once every server RECONNECT or RELOAD marked is closed. */
static void control_wait_close(struct client *client, const struct admin_command *cmd)
{
	struct db *db = NULL;
	log_issued(cmd);
	if (cmd->has_arg && !(db = command_db(client, cmd, "wait in")))
		return;
	wait_for(client, ADMIN_WAIT_CLOSE, db);
}

/* SHUTDOWN [WAIT_FOR_SERVERS | WAIT_FOR_CLIENTS]: every worker of the instance, as the signals do. */
static void control_shutdown(struct client *client, const struct admin_command *cmd)
{
	if (!cmd->has_arg) {
		log_info("SHUTDOWN command issued");
		workers_tell_supervisor(SIGQUIT);
		shutdown_exit_now();	/* no reply: the connection just closes */
		return;
	}
	bool servers = admin_word_is(cmd->arg, "WAIT_FOR_SERVERS");
	log_info("SHUTDOWN %s command issued", servers ? "WAIT_FOR_SERVERS" : "WAIT_FOR_CLIENTS");
	workers_tell_supervisor(servers ? SIGINT : SIGTERM);
	/* With workers: answered once the supervisor has told every worker (admin_check_waits). */
	if (workers_supervised())
		wait_for(client, ADMIN_WAIT_SHUTDOWN, NULL);
	else
		admin_reply_complete(client, "SHUTDOWN");
	if (servers)
		admin_shutdown_wait_for_servers();
	else
		admin_shutdown_wait_for_clients();
}

/*
 * DRAIN: every client closed at its next transaction boundary, then exit
 * (drain.h); every worker of the instance. Answered at once: the console
 * stays open until the process exits.
 */
static void control_drain(struct client *client, const struct admin_command *cmd)
{
	log_issued(cmd);
	if (drain_active()) {
		admin_reply_notice(client, "already draining", NULL, "DRAIN");
		return;
	}
	if (pgv.shutdown_mode == SHUTDOWN_WAIT_FOR_SERVERS) {
		admin_reply_errorf(client, "pooler is shutting down");
		return;
	}
	/* The flag first: the other workers look at it when the supervisor's SIGTERM reaches them. */
	workers_set_drain();
	workers_tell_supervisor(SIGTERM);
	admin_reply_complete(client, "DRAIN");
	drain_begin("DRAIN command");
}

/* BAN TENANT id / UNBAN TENANT id (pgvalve): a tenant's clients closed and its logins refused, or allowed again. */
static void control_ban(struct client *client, const struct admin_command *cmd)
{
	bool ban = admin_word_is(cmd->verb, "BAN");
	log_info("%s TENANT '%s' command issued", ban ? "BAN" : "UNBAN", cmd->tenant);
	tenant_ban(cmd->tenant, ban);
	admin_reply_complete(client, ban ? "BAN" : "UNBAN");
}

/* ---------------------------------------------------------------- the verb table */

static bool args_set(const struct admin_command *cmd)
{
	return cmd->is_set;	/* SET key = value; "SET" alone or "SET x" is not a command */
}

static bool args_none(const struct admin_command *cmd)
{
	return !cmd->has_arg;
}

static bool args_tenant(const struct admin_command *cmd)
{
	return cmd->has_tenant;
}

static bool args_shutdown(const struct admin_command *cmd)
{
	return !cmd->has_arg || admin_word_is(cmd->arg, "WAIT_FOR_SERVERS") ||
	       admin_word_is(cmd->arg, "WAIT_FOR_CLIENTS");
}

/*
 * Where a verb runs when the console speaks for an instance of several
 * workers (admin_fanout.h): here only (the instance-wide state and the
 * supervisor's signals already reach every worker: PAUSE / RESUME of
 * everything, SHUTDOWN, DRAIN), on every worker, or on the worker
 * that owns the client (KILL_CLIENT: the id's high bits, workers.h).
 */
enum verb_scope {
	SCOPE_HERE,
	SCOPE_ALL,		/* answered once every worker has */
	SCOPE_ALL_WAITS,	/* the same, and it may wait there (no answer deadline) */
	SCOPE_ALL_WITH_DB,	/* with a database argument; without one, here (instance state) */
	SCOPE_ALL_WAITS_WITH_DB,
	SCOPE_OWNER,
};

/*
 * One control verb. PgBouncer checks a command's argument syntax before
 * the user's rights, so a malformed command is "invalid" to anyone.
 */
struct control_verb {
	const char *name;
	bool (*args_ok)(const struct admin_command *cmd);	/* NULL: any argument, or none */
	bool checks_rights;	/* the handler checks admin rights itself (SET: faked parameters are for anyone) */
	void (*run)(struct client *client, const struct admin_command *cmd);
	enum verb_scope scope;
	bool takes_tenant;	/* VERB TENANT id is one of its forms (tenant.h) */
};

static const struct control_verb verbs[] = {
	{ "SET", args_set, true, control_set, SCOPE_ALL, false },
	{ "RELOAD", args_none, false, control_reload, SCOPE_ALL, false },
	{ "PAUSE", NULL, false, control_pause, SCOPE_ALL_WAITS_WITH_DB, false },
	{ "RESUME", NULL, false, control_resume, SCOPE_ALL_WITH_DB, false },
	{ "DISABLE", NULL, false, control_disable, SCOPE_ALL, false },
	{ "ENABLE", NULL, false, control_enable, SCOPE_ALL, false },
	{ "RECONNECT", NULL, false, control_reconnect, SCOPE_ALL, true },
	{ "KILL", NULL, false, control_kill, SCOPE_ALL, false },
	{ "KILL_CLIENT", NULL, false, control_kill_client, SCOPE_OWNER, false },
	{ "WAIT_CLOSE", NULL, false, control_wait_close, SCOPE_ALL_WAITS, false },
	{ "SHUTDOWN", args_shutdown, false, control_shutdown, SCOPE_HERE, false },
	{ "DRAIN", args_none, false, control_drain, SCOPE_HERE, false },	/* pgvalve extension */
	{ "BAN", args_tenant, false, control_ban, SCOPE_ALL, true },	/* pgvalve extension: BAN TENANT id */
	{ "UNBAN", args_tenant, false, control_ban, SCOPE_ALL, true },	/* pgvalve extension: UNBAN TENANT id */
};

/* RESUME db as a query, the name quoted as the console's grammar reads it ("" for a quote). */
static void resume_command(const char *db, char *buf, size_t size)
{
	size_t n = (size_t)snprintf(buf, size, "RESUME \"");
	for (; *db && n + 4 < size; db++) {
		if (*db == '"')
			buf[n++] = '"';
		buf[n++] = *db;
	}
	snprintf(buf + n, size - n, "\"");
}

/*
 * Hands the command to admin_fanout.c when it is for every worker (or
 * another worker): true if it did. Rights are checked here first: the
 * workers run it as the console superuser.
 */
static bool fan_out(struct client *client, const struct control_verb *v, const struct admin_command *cmd,
		    const char *query)
{
	enum verb_scope scope = v->scope;
	if (!admin_fanout_wanted(client))
		return false;
	if ((scope == SCOPE_ALL_WITH_DB || scope == SCOPE_ALL_WAITS_WITH_DB) && !cmd->has_arg)
		return false;
	if (v->checks_rights && (admin_show_is_fake_param(cmd->key) || !user_is_admin(client)))
		return false;	/* SET of a faked parameter, or refused: the same answer here */
	if (scope == SCOPE_OWNER) {
		char *end;
		unsigned long long id = cmd->has_arg ? strtoull(cmd->arg, &end, 10) : 0;
		int owner = workers_id_owner(id);
		if (!cmd->has_arg || end == cmd->arg || owner < 1 || owner == workers_self())
			return false;	/* malformed, unknown, or one of this worker's: answered here */
		admin_fanout_control(client, query, owner, false, NULL);
		return true;
	}
	/* ^C on PAUSE db undoes it on every worker */
	char undo[2 * sizeof(cmd->arg) + 16];
	bool pause = admin_word_is(v->name, "PAUSE");
	if (pause)
		resume_command(cmd->arg, undo, sizeof(undo));
	admin_fanout_control(client, query, 0, scope == SCOPE_ALL_WAITS || scope == SCOPE_ALL_WAITS_WITH_DB,
			     pause ? undo : NULL);
	return true;
}

bool admin_control_run(struct client *client, const struct admin_command *cmd, const char *query)
{
	const struct control_verb *v = NULL;
	for (size_t i = 0; i < ARRAY_SIZE(verbs) && !v; i++)
		if (admin_word_is(cmd->verb, verbs[i].name))
			v = &verbs[i];
	if (!v || (v->args_ok && !v->args_ok(cmd)) || (cmd->has_tenant && !v->takes_tenant))
		return false;
	if (!v->checks_rights && !user_is_admin(client)) {
		admin_reply_errorf(client, "admin access needed");
		return true;
	}
	if (v->scope != SCOPE_HERE && workers_count() > 1 && fan_out(client, v, cmd, query))
		return true;	/* one process never goes past the test */
	v->run(client, cmd);
	return true;
}

/* ---------------------------------------------------------------- a restarted worker */

static void restore_db(const char *name, unsigned flags, void *arg)
{
	(void)arg;
	struct db *db = pool_find_db(name);
	if (!db || db->is_admin)
		return;	/* gone since (a reload), or an auto-database not made yet: nothing to hold */
	if (flags & ADMIN_DB_PAUSED)
		pause_db(db);
	if (flags & ADMIN_DB_DISABLED)
		db->disabled = true;
	log_info("database %s stays%s%s, as the console left the instance", name,
		 flags & ADMIN_DB_PAUSED ? " paused" : "", flags & ADMIN_DB_DISABLED ? " disabled" : "");
}

static void restore_param(const char *key, const char *value, void *arg)
{
	(void)arg;
	const struct param_def *p = config_find_param(key);
	if (p && p->reloadable && set_param(p, value) == SET_TLS_KEPT)
		log_warning("SET %s: %s", key, tls_kept);
}

void admin_control_restore(void)
{
	admin_state_each_db(restore_db, NULL);
	admin_state_each_param(restore_param, NULL);
}
