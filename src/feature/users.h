/*
 * users.h - the users the pooler knows: the built-in pgbouncer, the
 * auth_file's, [users], the pools' server users and every name a client
 * logged in (or is logging in) with, each once, sorted by name.
 */
#ifndef PGVALVE_USERS_H
#define PGVALVE_USERS_H

#include "common.h"

struct user_row {
	const char *name;	/* valid until the next config reload or pool change */
	int servers;		/* servers logged in as this user */
	int clients;		/* clients logged in as this user */
};

/* The rows, in a new array the caller frees; returns how many. */
size_t users_collect(struct user_row **out);
/* How many rows users_collect would give (SHOW LISTS, pgbouncer_users). */
size_t users_count(void);

#endif
