/*
 * shard.c - sharded databases' clients (see shard.h): for now, the
 * refusal of their logins until the router lands.
 *
 * Touches only the client it refuses; reads pgv.cfg.
 */
#include "common.h"
#include "shard.h"
#include "client.h"
#include "config.h"
#include "instance.h"

/* A login to a sharded database, if dbname is one: refused for now. */
static __attribute__((noinline)) int claim_sharded(struct client *client, const char *dbname)
{
	const struct db_config *db = config_find_db(pgv.cfg, dbname);
	if (!db || !db->sharding)
		return 0;
	char msg[256 + AUTH_NAME_MAX];
	snprintf(msg, sizeof(msg),
		 "database \"%s\" is sharded (shards=), and this version of pgvalve does not route over shards yet: "
		 "connect to one of its shards' databases instead", dbname);
	client_close(client, "0A000", msg);
	return -1;
}

static int shard_claim(struct client *client, const struct startup_params *sp, const char *dbname)
{
	if (!pgv.cfg->sharded_databases)
		return 0;	/* the common case: no lookup per login */
	return claim_sharded(client, dbname);
}

static const struct client_kind_ops shard_kind = {
	.claim = shard_claim,
};

void shard_register(void)
{
	client_register_kind(CLIENT_SHARDED, &shard_kind);
}
