/*
 * server_internal.h - between the files of the server connection:
 * server.c (connect, state, relaying), server_login.c (the login),
 * server_cancel.c (cancel requests) and server_internal.c (pgvalve's own
 * queries). Not for the rest of pgvalve: server.h is.
 */
#ifndef PGVALVE_SERVER_INTERNAL_H
#define PGVALVE_SERVER_INTERNAL_H

#include "common.h"
#include "proto.h"

struct server;
struct client;
struct db;

/* The last ReadyForQuery of an internal query: what it was for decides what comes next. */
void internal_query_done(struct server *server);
/* Logged in and its role accepted: welcome, connect_query, then it serves (server.c). */
void server_login_continue(struct server *server);
/* Its role does not match its pool's target_session_attrs: closed with a Terminate. */
void server_role_rejected(struct server *server);
/* A DataRow of auth_query's answer. */
void take_auth_row(struct server *server, const struct pkt *pkt);
/* The client's server failed while taking its parameters: another one takes its message. */
void retry_on_another_server(struct client *client);

/* server_login.c: a message of a server in SV_LOGIN; false once the server is closed. */
bool server_login_packet(struct server *server, const struct pkt *pkt);
/* server_login.c: the login failed (the server refused it or pgvalve could not complete it). */
void server_login_failed(struct server *server, const char *sqlstate, const char *message);

/* server.c, for the login: */
struct client_kind_ops;
const struct client_kind_ops *server_own_kind(const struct server *server);
void server_send_startup(struct server *server);
void server_free_login_state(struct server *server);
void server_note_hot_standby(const struct server *server);
void db_host_failed(struct db *db, int idx);
void server_remember_param(struct server *server, const char *name, const char *value);
bool server_parse_parameter_status(const struct pkt *pkt, const char **name, const char **value);

/* server_cancel.c: the server's cancel requests in flight no longer refer to it (it is closing). */
void server_forget_cancels(struct server *server);

#endif
