/*
 * pool_internal.h - between pool.c (pools, matching clients and servers)
 * and pool_db.c (the databases). Not for the rest of pgvalve: pool.h is.
 */
#ifndef PGVALVE_POOL_INTERNAL_H
#define PGVALVE_POOL_INTERNAL_H

#include "common.h"
#include "pool.h"

/* A new database of the configuration, or an auto-database. */
struct db *db_create(const struct db_config *cfg, const char *name, bool is_autodb);
/* Frees a database with no pool left (pool.c). */
void db_free(struct db *db);
/* Closes every server of the list l with reason. */
void pool_close_server_list(struct list *l, const char *reason);
/* Marks the database's servers for closing once idle (settings changed, RECONNECT). */
void db_retire_servers(struct db *db, const char *reason);
/* The password pgvalve logs in to the database's servers with for user (auth_file, forced user). */
char *pool_login_password(const struct db *db, const char *user);

#endif
