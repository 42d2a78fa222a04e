/*
 * users.c - the users the pooler knows, as SHOW USERS lists them and the
 * metrics endpoint counts them (users.h).
 *
 * Reads the auth file, the config and the pools' user counters; changes
 * nothing.
 */
#include "common.h"
#include "users.h"
#include "auth_file.h"
#include "config.h"
#include "pool.h"

#include <stdlib.h>

static int cmp_user_row(const void *a, const void *b)
{
	return strcmp(((const struct user_row *)a)->name, ((const struct user_row *)b)->name);
}

size_t users_collect(struct user_row **out)
{
	size_t cap = 16 + auth_store_count(pgv.auth), n = 0;
	for (const struct user_config *uc = pgv.cfg->users; uc; uc = uc->next)
		cap++;
	list_for_each(dpos, &pgv.databases)
		cap += container_of(dpos, struct db, node)->pools.count;
	cap += pool_user_count_list(NULL, 0);
	struct user_row *rows = xcalloc(cap, sizeof(*rows));
	rows[n++] = (struct user_row){ "pgbouncer", 0, 0 };
	for (size_t i = 0; i < auth_store_count(pgv.auth); i++)
		rows[n++] = (struct user_row){ auth_store_entry(pgv.auth, i)->user, 0, 0 };
	for (const struct user_config *uc = pgv.cfg->users; uc; uc = uc->next)
		rows[n++] = (struct user_row){ uc->name, 0, 0 };
	list_for_each(dpos, &pgv.databases) {
		struct db *db = container_of(dpos, struct db, node);
		list_for_each(ppos, &db->pools)
			rows[n++] = (struct user_row){ container_of(ppos, struct pool, node)->user, 0, 0 };
	}
	/* Everyone logged in or logging in, by the name they gave (forced-user databases and the console too). */
	size_t counted = pool_user_count_list(NULL, 0);
	const struct user_count **uc = xcalloc(counted + 1, sizeof(*uc));
	counted = pool_user_count_list(uc, counted);
	for (size_t i = 0; i < counted; i++)
		if (uc[i]->clients > 0)
			rows[n++] = (struct user_row){ uc[i]->name, 0, 0 };
	qsort(rows, n, sizeof(*rows), cmp_user_row);
	size_t w = 0;
	for (size_t i = 0; i < n; i++)
		if (w == 0 || strcmp(rows[w - 1].name, rows[i].name) != 0)
			rows[w++] = rows[i];
	/* Servers by the user they log in as, clients by the user they logged in as. */
	for (size_t i = 0; i < counted; i++) {
		struct user_row key = { uc[i]->name, 0, 0 };
		struct user_row *row = bsearch(&key, rows, w, sizeof(*rows), cmp_user_row);
		if (row) {
			row->servers = uc[i]->servers;
			row->clients = uc[i]->clients;
		}
	}
	free(uc);
	*out = rows;
	return w;
}

size_t users_count(void)
{
	struct user_row *rows;
	size_t n = users_collect(&rows);
	free(rows);
	return n;
}
