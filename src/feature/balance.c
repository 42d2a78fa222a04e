/*
 * balance.c - the read balancer: which pool a client's transaction runs
 * in. See balance.h for the contract.
 */
#include "common.h"
#include "balance.h"
#include "client.h"
#include "config.h"
#include "pool.h"
#include "proto.h"
#include "relay.h"
#include "roles.h"
#include "server.h"
#include "sql_classify.h"
#include "varcache.h"

#include <strings.h>

static bool balance_enabled(const struct pool *pool)
{
	const struct db_config *dc = pool->db->cfg;
	int tsa = dc->target_session_attrs;
	if (dc->load_balance_reads <= LOAD_BALANCE_READS_OFF || (tsa != TSA_READ_WRITE && tsa != TSA_PRIMARY) ||
	    pool->db->host_count < 2 || pool->db->is_admin)
		return false;
	/* per transaction, or per statement: whenever a client has no server (session pooling: not yet) */
	int mode = pool_effective_mode(pool);
	return mode == POOL_MODE_TRANSACTION || mode == POOL_MODE_STATEMENT;
}

/* The SQL text of a whole Query or Parse, and its length; NULL if it has none. */
static const char *packet_text(const struct pkt *pkt, size_t *len)
{
	const char *body = (const char *)pkt_body(pkt);
	size_t n = pkt_body_len(pkt);
	if (pkt->type == 'P') {
		const char *end = memchr(body, '\0', n);	/* the statement's name */
		if (!end)
			return NULL;
		n -= (size_t)(end + 1 - body);
		body = end + 1;
	}
	const char *end = memchr(body, '\0', n);
	if (!end)
		return NULL;
	*len = (size_t)(end - body);
	return body;
}

static bool value_on(const char *v)
{
	return v && (strcasecmp(v, "on") == 0 || strcasecmp(v, "true") == 0 || strcasecmp(v, "yes") == 0 ||
		     strcasecmp(v, "1") == 0 || strcasecmp(v, "t") == 0);
}

/* default_transaction_read_only is on for this client's session. */
static bool session_read_only(const struct client *client)
{
	static int idx = -2;
	if (idx == -2)
		idx = varcache_index("default_transaction_read_only");
	return idx >= 0 && client->vars && value_on(varcache_get(client->vars, idx));
}

/* Whether text (not NUL-terminated) contains word, any case. */
static bool mentions(const char *text, size_t len, const char *word)
{
	size_t wl = strlen(word);
	for (size_t i = 0; i + wl <= len; i++)
		if (strncasecmp(text + i, word, wl) == 0)
			return true;
	return false;
}

/*
 * auto: PostgreSQL's own functions that never write nor ask for a
 * transaction ID (none VOLATILE that writes). Any other call stays on
 * the primary.
 */
static bool function_safe(void *arg, const char *name)
{
	static const char *const safe[] = {
		"pg_is_in_recovery", "inet_server_addr", "inet_server_port", "host", "count", "sum", "min", "max",
		"avg", "lower", "upper", "length", "abs", "round", "now", "version", "current_database",
	};
	(void)arg;
	for (size_t i = 0; i < ARRAY_SIZE(safe); i++)
		if (strcmp(name, safe[i]) == 0)
			return true;
	return false;
}

/* Whether the transaction pkt starts only reads, as this database's mode counts them. */
static bool starts_read(const struct client *client, const struct pkt *pkt)
{
	size_t len;
	const char *text = packet_text(pkt, &len);
	if (!text)
		return false;
	if (sql_classify_begin(text, len) == SQL_BEGIN_READ_ONLY)
		return true;
	if (session_read_only(client) && !mentions(text, len, "write") && !mentions(text, len, "read_only"))
		return true;
	if (client->pool->db->cfg->load_balance_reads != LOAD_BALANCE_READS_AUTO || pkt->type != 'Q')
		return false;
	return sql_classify_begin(text, len) == SQL_BEGIN_NONE && sql_classify_read_only(text, len, function_safe, NULL);
}

static struct pool *balance_pick(struct client *client, const struct pkt *pkt)
{
	struct pool *home = client->pool;
	if (home->standby_reads || client->notify || !starts_read(client, pkt))
		return NULL;
	struct pool *companion = pool_standby_companion(home);
	if (roles_standby_may_serve(home->db) &&
	    !(companion->last_error[0] && pool_login_retry_pending(companion, now_usec())))
		return companion;
	/* none known: while some entry's role is unknown, one server of the companion learns it */
	if (roles_host_unknown(home->db) && list_empty(&companion->login_servers) &&
	    !pool_login_retry_pending(companion, now_usec()))
		server_connect(companion);
	return NULL;
}

void balance_register(void)
{
	relay_hooks.balance_enabled = balance_enabled;
	relay_hooks.balance_pick = balance_pick;
}
