/*
 * cancel_index.c - the cancel-key index: which client a CancelRequest's
 * (pid, key) names, by hash, for the cancel requests that come in on
 * pgvalve's port (pool.h declares it).
 */
#include "common.h"
#include "cancel_key.h"
#include "client.h"
#include "pool.h"

/* ---------------------------------------------------------------- cancel keys */

/*
 * Keys match whatever their TTL bits say (peer.h): a request a peer
 * forwarded arrives with a lowered TTL. Two random bits of 64 are lost.
 */
#define CANCEL_KEY_MATCH_MASK (~(uint32_t)CANCEL_KEY_TTL_MASK)

static uint32_t cancel_hash(uint32_t pid, uint32_t key)
{
	return (pid * 2654435761u) ^ ((key & CANCEL_KEY_MATCH_MASK) * 2246822519u);
}

static void cancel_table_grow(void)
{
	uint32_t size = pgv.cancel_table_size ? pgv.cancel_table_size * 2 : 256;
	struct client **table = xcalloc(size, sizeof(*table));
	for (uint32_t i = 0; i < pgv.cancel_table_size; i++) {
		struct client *c = pgv.cancel_table[i];
		while (c) {
			struct client *next = c->cancel_next;
			uint32_t h = cancel_hash(c->cancel_pid, c->cancel_key) & (size - 1);
			c->cancel_next = table[h];
			table[h] = c;
			c = next;
		}
	}
	free(pgv.cancel_table);
	pgv.cancel_table = table;
	pgv.cancel_table_size = size;
}

/*
 * Up to CANCEL_CHAIN_AVG clients per bucket: the table costs an idle
 * client 2 to 4 bytes rather than 8 to 16, and a lookup (rare: cancels)
 * or a removal (at close) walks a few more links.
 */
#define CANCEL_CHAIN_AVG 4

void cancel_index_add(struct client *client)
{
	if (pgv.cancel_count >= pgv.cancel_table_size * CANCEL_CHAIN_AVG)
		cancel_table_grow();
	uint32_t h = cancel_hash(client->cancel_pid, client->cancel_key) & (pgv.cancel_table_size - 1);
	client->cancel_next = pgv.cancel_table[h];
	pgv.cancel_table[h] = client;
	client->in_cancel_index = true;
	pgv.cancel_count++;
}

void cancel_index_remove(struct client *client)
{
	if (!client->in_cancel_index)
		return;
	uint32_t h = cancel_hash(client->cancel_pid, client->cancel_key) & (pgv.cancel_table_size - 1);
	for (struct client **pp = &pgv.cancel_table[h]; *pp; pp = &(*pp)->cancel_next) {
		if (*pp == client) {
			*pp = client->cancel_next;
			break;
		}
	}
	client->in_cancel_index = false;
	pgv.cancel_count--;
}

struct client *cancel_index_find(uint32_t pid, uint32_t key)
{
	if (!pgv.cancel_table_size)
		return NULL;
	uint32_t h = cancel_hash(pid, key) & (pgv.cancel_table_size - 1);
	for (struct client *c = pgv.cancel_table[h]; c; c = c->cancel_next)
		if (c->cancel_pid == pid && ((c->cancel_key ^ key) & CANCEL_KEY_MATCH_MASK) == 0)
			return c;
	return NULL;
}
