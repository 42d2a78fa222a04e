/*
 * auth.h - client authentication: which method a login uses, the
 * challenge it sends, and the check of the answer.
 *
 * Works on a client in CL_LOGIN with its login data filled in; reports the
 * outcome by finishing the login through pool.c or closing the client with
 * 28P01/28000. Secrets are compared in constant time and never logged.
 */
#ifndef PGVALVE_AUTH_H
#define PGVALVE_AUTH_H

#include "common.h"

struct client;

/* Starts authentication after a valid StartupMessage. */
void auth_begin(struct client *client);
/* Handles the body of a PasswordMessage / SASL message ('p'). */
void auth_handle_password(struct client *client, const uint8_t *body, uint32_t len);

/* auth_query's answer: the secret, NULL for no such user, or error text. */
void auth_query_answer(struct client *client, const char *secret, const char *error);

struct client_login;
/* Frees login data, wiping secrets. */
void auth_login_free(struct client_login *login);

#endif
