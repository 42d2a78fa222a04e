/*
 * admin.h - the admin console: the virtual database "pgbouncer" (also
 * "pgvalve") that answers SHOW and control commands the way PgBouncer
 * does, so existing monitoring and scripts work unchanged.
 *
 * Speaks the simple query protocol only; extended-protocol messages get an
 * error and a ReadyForQuery at their Sync, never a hang. Users in
 * admin_users may run everything, users in stats_users the SHOW commands.
 */
#ifndef PGVALVE_ADMIN_H
#define PGVALVE_ADMIN_H

#include "common.h"
#include "proto.h"

struct client;
struct db;

/* The admin database object (made at start-up). */
struct db *admin_db(void);
void admin_setup(void);
/*
 * Registers the console client kind (client.h) at start-up: the core
 * reaches the console only through that table.
 */
void admin_register(void);
/* Before authentication: refuses a known user who is in neither admin_users nor stats_users. */
bool admin_check_login(struct client *client, const char *user);
/* After authentication: may this user use the console? Closes the client if not. */
bool admin_check_access(struct client *client);
/* A message from a logged-in console client. Returns false if the client was closed. */
bool admin_handle_packet(struct client *client, const struct pkt *pkt);
/* Janitor tick: finishes PAUSE / WAIT_CLOSE / SHUTDOWN waits whose condition now holds. */
void admin_check_waits(void);
/* A console client is going away: its wait ends. */
void admin_client_closing(struct client *client);
/* A CancelRequest for a console client: a waiting PAUSE is undone. */
void admin_cancel_request(struct client *client);
/* PAUSE / RESUME for all databases (SIGUSR1 / SIGUSR2). */
void admin_pause_all(void);
void admin_resume_all(void);
/*
 * A worker of a supervisor: follow the instance's pause state (workers.h)
 * if it changed since last time: pause or resume this process, and end a
 * PAUSE waiting here with an error when the instance was resumed under it.
 * Nothing for a single process.
 */
void admin_sync_instance_pause(void);
/*
 * A restarted worker (workers = N), after its catch-up reload: pauses,
 * disables and SETs what the console changed for the instance
 * (admin_state.h), before it takes clients.
 */
void admin_control_restore(void);
/* SHUTDOWN WAIT_FOR_SERVERS / WAIT_FOR_CLIENTS (SIGINT / SIGTERM). */
void admin_shutdown_wait_for_servers(void);
void admin_shutdown_wait_for_clients(void);

/*
 * The console's command grammar, as PgBouncer's: COMMAND [ARG] [;] or
 * SET KEY (=|TO) VALUE [;]; and pgvalve's COMMAND TENANT ID [;] (BAN,
 * UNBAN, RECONNECT: the id, a word or a quoted identifier, below 256). A word is [0-9a-zA-Z_]+ or a double-quoted
 * identifier ("" escapes a quote); a SET value may also be a single-quoted
 * string ('' escapes). Commands are below 16 bytes, arguments below 64, SET
 * values below 256. Pure: no state, no I/O (test/fuzz/fuzz_admin_command.c
 * calls it alone).
 */
struct admin_command {
	char verb[16];
	char arg[64];
	char key[64];
	char value[256];
	char tenant[256];	/* COMMAND TENANT id: the id (has_tenant) */
	bool has_tenant;
	bool has_arg;
	bool is_set;
};

enum admin_parse_result { ADMIN_PARSE_OK, ADMIN_PARSE_INVALID, ADMIN_PARSE_TOO_LONG };

/* Parses one query string (NUL-terminated) into *cmd. */
enum admin_parse_result admin_parse_command(const char *query, struct admin_command *cmd);

#endif
