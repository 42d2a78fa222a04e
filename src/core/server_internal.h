/*
 * server_internal.h - between server.c and server_internal.c, the two
 * halves of the server connection: what server.c calls when the answer
 * to one of pgvalve's own queries comes in.
 */
#ifndef PGVALVE_SERVER_INTERNAL_H
#define PGVALVE_SERVER_INTERNAL_H

#include "common.h"
#include "proto.h"

struct server;
struct client;

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

#endif
