/*
 * notify.c - LISTEN/NOTIFY in transaction and statement pooling: a
 * listener server per pool, clients' channel sets applied at commit, the
 * fan-out of notifications (see notify.h for the contract).
 *
 * Owns: struct notify_pool (pool->notify), struct notify_client (found
 * by client in a hash table here, client->notify says whether it has one:
 * struct client stays in its 320-byte chunk), the channels. Reads a client's statements and its
 * server's answers through relay_hooks; writes only to a listening
 * client's socket and to the listener; sets server->release_sql.
 */
#include "common.h"
#include "notify.h"
#include "sql_lex.h"
#include "client.h"
#include "config.h"
#include "instance.h"
#include "log.h"
#include "metrics.h"
#include "pool.h"
#include "proto.h"
#include "relay.h"
#include "server.h"
#include "workers.h"

#include <ctype.h>
#include <event2/event.h>

#define CHANNEL_MAX 63		/* PostgreSQL's NAMEDATALEN - 1 */
#define SENDERS_MAX 256		/* backends remembered for self-notifications, per pool */

struct notify_channel {
	struct notify_channel *next;
	struct notify_client **clients;
	int count, size;
	uint64_t listen_seq;	/* the listener's query that LISTENs it */
	char name[CHANNEL_MAX + 1];
};

struct notify_sender {
	uint32_t be_pid;
	uint64_t client_id;
};

struct notify_pool {
	struct pool *pool;		/* NULL once detached (listener lost) */
	struct server *listener;	/* NULL when lost or not opened */
	bool ready;			/* logged in: queries go out at once */
	bool dead;			/* the listener was lost: its clients are being closed */
	struct notify_channel *channels;
	struct list clients;		/* struct notify_client.node */
	struct pktbuf out;		/* queries for the listener before it is ready */
	uint64_t sent_seq, done_seq;	/* Queries sent to the listener, ReadyForQuery seen */
	struct list waiters;		/* struct notify_client.wait_node: statements held for early_listen */
	struct notify_sender senders[SENDERS_MAX];
	int sender_count, sender_next;
};

enum notify_op_kind { OP_LISTEN, OP_UNLISTEN, OP_UNLISTEN_ALL };

/* How the client's transaction ended, by its last COMMIT or ROLLBACK command tag (notify_note_server). */
enum txn_end { END_NONE, END_COMMIT, END_ROLLBACK };

struct notify_op {
	uint8_t kind;
	char name[CHANNEL_MAX + 1];
};

struct notify_client {
	struct client *client;
	struct notify_client *hash_next;	/* its bucket's chain (clients[]) */
	struct notify_pool *np;		/* NULL until it listens */
	struct list_node node;		/* np->clients */
	struct notify_channel **channels;	/* channels it listens on (committed) */
	int nchannels, channels_size;
	struct notify_op *pending;	/* LISTEN/UNLISTEN of the open transaction */
	int npending, pending_size;
	bool failed;			/* an error since the last ReadyForQuery 'I' */
	bool notifying;			/* ... a statement that may have notified (runs_no_user_code) */
	uint8_t ended;			/* the last COMMIT or ROLLBACK since then (enum txn_end) */
	struct server *held;		/* its ReadyForQuery waits for the listener */
	uint64_t wait_seq;
	struct pktbuf queue;		/* notifications held while it has a server */
	char (*early)[CHANNEL_MAX + 1];	/* channels LISTENed on the listener for its open transaction */
	int nearly, early_size;
	struct list_node wait_node;	/* its np's waiters: its statement waits for the listener */
	uint64_t early_seq;		/* ... until this query of the listener is answered */
	bool doomed;			/* to be closed from the loop */
	const char *doom_sqlstate;
	const char *doom_reason;
	struct list_node doom_node;
};

static struct list doomed_clients;

/* The clients with state here, by address: a table of chains, doubled when as full as it is long. */
static struct notify_client **clients;
static size_t clients_size, clients_count;

static size_t client_bucket(const struct client *client, size_t size)
{
	uint64_t h = (uint64_t)(uintptr_t)client * UINT64_C(0x9E3779B97F4A7C15);
	return (size_t)(h >> 32) & (size - 1);
}

static struct notify_client *nc_of(const struct client *client)
{
	if (!client->notify)
		return NULL;
	for (struct notify_client *nc = clients[client_bucket(client, clients_size)]; nc; nc = nc->hash_next)
		if (nc->client == client)
			return nc;
	return NULL;
}

static void clients_grow(void)
{
	size_t size = clients_size ? clients_size * 2 : 64;
	struct notify_client **table = xcalloc(size, sizeof(*table));
	for (size_t i = 0; i < clients_size; i++) {
		struct notify_client *nc = clients[i];
		while (nc) {
			struct notify_client *next = nc->hash_next;
			size_t b = client_bucket(nc->client, size);
			nc->hash_next = table[b];
			table[b] = nc;
			nc = next;
		}
	}
	free(clients);
	clients = table;
	clients_size = size;
}

static void clients_add(struct notify_client *nc)
{
	if (clients_count + 1 > clients_size)
		clients_grow();
	size_t b = client_bucket(nc->client, clients_size);
	nc->hash_next = clients[b];
	clients[b] = nc;
	clients_count++;
	nc->client->notify = true;
}

static void clients_remove(struct notify_client *nc)
{
	for (struct notify_client **pp = &clients[client_bucket(nc->client, clients_size)]; *pp; pp = &(*pp)->hash_next) {
		if (*pp == nc) {
			*pp = nc->hash_next;
			clients_count--;
			break;
		}
	}
	nc->client->notify = false;
}
static struct event *doom_event;

static struct notify_client *notify_client_new(struct client *client);

/* ---------------------------------------------------------------- parsing statements */

/* Cut to 63 bytes at a character boundary (UTF-8), as PostgreSQL truncates identifiers. */
static void clip_name(char *name, size_t len)
{
	if (len > CHANNEL_MAX) {
		len = CHANNEL_MAX;
		while (len > 0 && ((unsigned char)name[len] & 0xC0) == 0x80)
			len--;
	}
	name[len] = '\0';
}

/*
 * One LISTEN/UNLISTEN statement in lx (after its keyword): its op, or
 * false if it is malformed. Stops before the ';' that ends it.
 */
static bool parse_op(struct sql_lexer *lx, bool listen, struct notify_op *op)
{
	struct sql_token tok;
	char buf[1024];
	sql_lex_next(lx, &tok);
	if (!listen && sql_token_is_char(&tok, '*')) {
		op->kind = OP_UNLISTEN_ALL;
		op->name[0] = '\0';
	} else {
		if (!sql_token_name(&tok, buf, sizeof(buf)))
			return false;
		size_t n = strlen(buf);
		memcpy(op->name, buf, MIN(n, (size_t)CHANNEL_MAX + 1));
		clip_name(op->name, MIN(n, (size_t)CHANNEL_MAX + 1));
		op->kind = listen ? OP_LISTEN : OP_UNLISTEN;
	}
	enum sql_token_kind next = sql_lex_peek(lx, &tok);
	return next == SQL_TOKEN_END || next == SQL_TOKEN_SEMICOLON;
}

/* Whether the text mentions listen at all (cheap: most queries do not). */
/* "isten" in any case after an l found by memchr. */
static bool isten_at(const char *p)
{
	return (p[0] | 0x20) == 'i' && (p[1] | 0x20) == 's' && (p[2] | 0x20) == 't' && (p[3] | 0x20) == 'e' &&
	       (p[4] | 0x20) == 'n';
}

/* Whether "listen" appears anywhere in sql, in any case: every Query and Parse of a pool with notify_support passes here. */
static bool mentions_listen(const char *sql, size_t len)
{
	const char *end = sql + len;
	for (const char *p = sql_find_pair(sql, len, 'l', 'i'); p; p = sql_find_pair(p + 1, (size_t)(end - p - 1), 'l', 'i'))
		if (end - p >= 6 && isten_at(p + 1))
			return true;
	return false;
}

static void pending_add(struct notify_client *nc, const struct notify_op *op)
{
	if (nc->npending == nc->pending_size) {
		nc->pending_size = nc->pending_size ? nc->pending_size * 2 : 4;
		nc->pending = xrealloc(nc->pending, (size_t)nc->pending_size * sizeof(*nc->pending));
	}
	nc->pending[nc->npending++] = *op;
}

/*
 * The LISTEN/UNLISTEN statements of sql, added to the client's pending
 * ones (created on the first). A statement that does not parse is
 * PostgreSQL's to refuse: its transaction fails, nothing is recorded.
 * Returns how many were found.
 */
static __attribute__((noinline)) int parse_listens(struct client *client, const char *sql, size_t len)
{
	struct sql_lexer lx;
	struct sql_token tok;
	int n = 0;
	sql_lex_init(&lx, sql, len, true);
	do {
		struct sql_lexer at = lx;
		sql_lex_next(&at, &tok);
		bool listen = sql_token_is(&tok, "listen");
		struct notify_op op;
		if ((listen || sql_token_is(&tok, "unlisten")) && parse_op(&at, listen, &op)) {
			struct notify_client *nc = nc_of(client);
			if (!nc)
				nc = notify_client_new(client);
			pending_add(nc, &op);
			n++;
		}
	} while (sql_lex_skip_statement(&lx));
	return n;
}

/*
 * The same, the usual answer first: most statements do not mention
 * listen, and lexing's stack frame is not set up for them.
 */
static int parse_statements(struct client *client, const char *sql, size_t len)
{
	return mentions_listen(sql, len) ? parse_listens(client, sql, len) : 0;
}

/* ---------------------------------------------------------------- clients closed from the loop */

static void doom_run(evutil_socket_t fd, short what, void *arg)
{
	(void)fd, (void)what, (void)arg;
	struct list_node *n;
	while ((n = list_first(&doomed_clients))) {
		struct notify_client *nc = container_of(n, struct notify_client, doom_node);
		list_remove(&doomed_clients, n);
		list_node_init(&nc->doom_node);
		client_close(nc->client, nc->doom_sqlstate, nc->doom_reason);	/* frees nc (notify_client_free) */
	}
}

/*
 * Closes the client from the event loop, not from inside the core's
 * callback that found the reason; nothing more is sent to it meanwhile.
 */
static void doom(struct notify_client *nc, const char *sqlstate, const char *reason)
{
	if (nc->doomed)
		return;
	nc->doomed = true;
	nc->doom_sqlstate = sqlstate;
	nc->doom_reason = reason;
	list_append(&doomed_clients, &nc->doom_node);
	if (!doom_event)
		doom_event = evtimer_new(pgv.base, doom_run, NULL);
	struct timeval now = { 0, 0 };
	evtimer_add(doom_event, &now);
}

/* ---------------------------------------------------------------- channels */

static struct notify_channel *channel_find(struct notify_pool *np, const char *name)
{
	for (struct notify_channel *ch = np->channels; ch; ch = ch->next)
		if (strcmp(ch->name, name) == 0)
			return ch;
	return NULL;
}

/* A query for the listener: sent now, or when it is logged in. Returns its sequence number. */
static uint64_t listener_query(struct notify_pool *np, const char *verb, const char *name)
{
	struct pktbuf b;
	pktbuf_init(&b, 2 * CHANNEL_MAX + 32);
	pktbuf_begin(&b, 'Q');
	pktbuf_put_bytes(&b, verb, (uint32_t)strlen(verb));
	pktbuf_put_bytes(&b, " \"", 2);
	for (const char *p = name; *p; p++) {
		if (*p == '"')
			pktbuf_put_byte(&b, '"');
		pktbuf_put_byte(&b, (uint8_t)*p);
	}
	pktbuf_put_bytes(&b, "\"", 2);	/* the closing quote and the string's NUL */
	pktbuf_end(&b);
	if (np->ready)
		netbuf_send(&np->listener->nb, b.buf, b.len);
	else
		pktbuf_put_bytes(&np->out, b.buf, b.len);
	pktbuf_free(&b);
	return ++np->sent_seq;
}

/*
 * A Sync for the listener, which answers it with a ReadyForQuery: a
 * notification committed before it was sent reaches pgvalve before that
 * answer (PostgreSQL signals the listening backends before its commit is
 * answered, and a backend sends what it was signalled for before it reads
 * its next message). Only for a listener logged in. Returns its sequence
 * number.
 */
static uint64_t listener_sync(struct notify_pool *np)
{
	static const uint8_t sync[5] = { 'S', 0, 0, 0, 4 };
	netbuf_send(&np->listener->nb, sync, sizeof(sync));
	return ++np->sent_seq;
}

/* A channel the listener LISTENs from now on, with no client yet. */
static struct notify_channel *channel_new(struct notify_pool *np, const char *name)
{
	struct notify_channel *ch = xcalloc(1, sizeof(*ch));
	strlcpy_s(ch->name, name, sizeof(ch->name));
	ch->next = np->channels;
	np->channels = ch;
	ch->listen_seq = listener_query(np, "LISTEN", name);
	return ch;
}

static void channel_add_client(struct notify_pool *np, const char *name, struct notify_client *nc)
{
	struct notify_channel *ch = channel_find(np, name);
	if (!ch)
		ch = channel_new(np, name);
	if (ch->count == ch->size) {
		ch->size = ch->size ? ch->size * 2 : 4;
		ch->clients = xrealloc(ch->clients, (size_t)ch->size * sizeof(*ch->clients));
	}
	ch->clients[ch->count++] = nc;
	if (nc->nchannels == nc->channels_size) {
		nc->channels_size = nc->channels_size ? nc->channels_size * 2 : 4;
		nc->channels = xrealloc(nc->channels, (size_t)nc->channels_size * sizeof(*nc->channels));
	}
	nc->channels[nc->nchannels++] = ch;
	nc->wait_seq = MAX(nc->wait_seq, ch->listen_seq);
}

static void channel_free(struct notify_pool *np, struct notify_channel *ch)
{
	for (struct notify_channel **pp = &np->channels; *pp; pp = &(*pp)->next) {
		if (*pp == ch) {
			*pp = ch->next;
			break;
		}
	}
	free(ch->clients);
	free(ch);
}

/* The client's i-th channel goes; the channel too (UNLISTEN on the listener) if it was the last. */
static void channel_remove_client(struct notify_pool *np, struct notify_client *nc, int i)
{
	struct notify_channel *ch = nc->channels[i];
	nc->channels[i] = nc->channels[--nc->nchannels];
	for (int j = 0; j < ch->count; j++) {
		if (ch->clients[j] == nc) {
			ch->clients[j] = ch->clients[--ch->count];
			break;
		}
	}
	if (ch->count > 0)
		return;
	if (np->listener && !np->dead)
		listener_query(np, "UNLISTEN", ch->name);
	channel_free(np, ch);
}

static int client_channel_index(const struct notify_client *nc, const char *name)
{
	for (int i = 0; i < nc->nchannels; i++)
		if (strcmp(nc->channels[i]->name, name) == 0)
			return i;
	return -1;
}

/* ---------------------------------------------------------------- LISTEN ahead of the client */

/*
 * A channel a later client's statement LISTENs and the listener lacks:
 * the listener LISTENs it first and the statement waits for that (one
 * round trip), so the listener hears the channel before the client's
 * LISTEN commits, and nothing committed after that commit is missed. The
 * channel has no client until the transaction commits (apply_pending);
 * early_release drops it if none came. Returns the listener's query to
 * wait for.
 */
static uint64_t early_listen(struct notify_pool *np, struct notify_client *nc, const char *name)
{
	struct notify_channel *ch = channel_find(np, name);
	if (ch)
		return ch->listen_seq;
	ch = channel_new(np, name);
	if (nc->nearly == nc->early_size) {
		nc->early_size = nc->early_size ? nc->early_size * 2 : 4;
		nc->early = xrealloc(nc->early, (size_t)nc->early_size * sizeof(*nc->early));
	}
	strlcpy_s(nc->early[nc->nearly++], name, sizeof(*nc->early));
	return ch->listen_seq;
}

/* The client's transaction ended: channels LISTENed ahead for it that no client took go. */
static void early_release(struct notify_client *nc)
{
	struct notify_pool *np = nc->client->pool ? nc->client->pool->notify : NULL;
	for (int i = 0; np && i < nc->nearly; i++) {
		struct notify_channel *ch = channel_find(np, nc->early[i]);
		if (!ch || ch->count > 0)
			continue;
		if (np->listener && !np->dead)
			listener_query(np, "UNLISTEN", ch->name);
		channel_free(np, ch);
	}
	nc->nearly = 0;
}

/*
 * The LISTENs the client's statement added (pending from index first):
 * true if it must wait for the listener (the client is paused and the
 * statement's ops dropped: it is parsed again when offered again). Not
 * for a pool's first LISTEN (no listener yet: its server becomes it) nor
 * on the server that is to become the listener.
 */
static bool early_listens(struct notify_client *nc, struct server *server, int first)
{
	struct notify_pool *np = nc->client->pool->notify;
	if (!np || !server || np->listener == server || nc->doomed)
		return false;
	uint64_t seq = 0;
	for (int i = first; i < nc->npending; i++)
		if (nc->pending[i].kind == OP_LISTEN)
			seq = MAX(seq, early_listen(np, nc, nc->pending[i].name));
	if (seq <= np->done_seq)
		return false;
	nc->npending = first;
	nc->early_seq = MAX(nc->early_seq, seq);
	if (!list_node_linked(&nc->wait_node))	/* offered again while it waits: one place in the list */
		list_append(&np->waiters, &nc->wait_node);
	netbuf_pause(&nc->client->nb);
	return true;
}

/* ---------------------------------------------------------------- the listener */

/* A client whose statement waited for the listener goes on (offered again). */
static void waiter_resume(struct notify_pool *np, struct notify_client *nc)
{
	list_remove(&np->waiters, &nc->wait_node);
	list_node_init(&nc->wait_node);
	netbuf_resume(&nc->client->nb);
}

static void pool_state_free(struct notify_pool *np)
{
	struct list_node *n;
	while ((n = list_first(&np->waiters)))
		waiter_resume(np, container_of(n, struct notify_client, wait_node));
	while (np->channels)
		channel_free(np, np->channels);
	pktbuf_free(&np->out);
	if (np->pool && np->pool->notify == np)
		np->pool->notify = NULL;
	free(np);
}

static void listener_ready(struct server *server)
{
	struct notify_pool *np = server->pool->notify;
	if (!np || np->listener != server) {
		server_close(server, "notification listener not needed any more");
		return;
	}
	server_log(LOG_LEVEL_INFO, server, "notification listener ready");
	np->ready = true;
	if (np->out.len)
		netbuf_send(&server->nb, np->out.buf, np->out.len);
	pktbuf_reset(&np->out);
}

/* The listener is gone: every client listening through it is told, as a lost session would be. */
static void listener_lost(struct server *server, const char *reason)
{
	struct notify_pool *np = server->pool->notify;
	if (!np || np->listener != server)
		return;
	np->listener = NULL;
	np->ready = false;
	np->dead = true;
	server->pool->notify = NULL;	/* the next LISTEN gets a new listener */
	np->pool = NULL;
	struct list_node *w;
	while ((w = list_first(&np->waiters)))	/* their LISTENs go on: the next commit opens a new listener */
		waiter_resume(np, container_of(w, struct notify_client, wait_node));
	if (list_empty(&np->clients)) {
		pool_state_free(np);
		return;
	}
	log_warning("notification listener of %s/%s lost (%s): closing its %u listening clients",
		    server->pool->db->name, server->pool->user, reason, (unsigned)np->clients.count);
	list_for_each(pos, &np->clients)
		doom(container_of(pos, struct notify_client, node), "08006",
		     "connection to the notification listener was lost: notifications may have been missed; "
		     "reconnect and LISTEN again");
}

/* ---------------------------------------------------------------- delivery */

static void sender_note(struct notify_pool *np, uint32_t be_pid, uint64_t client_id)
{
	for (int i = 0; i < np->sender_count; i++) {
		if (np->senders[i].be_pid == be_pid) {
			np->senders[i].client_id = client_id;
			return;
		}
	}
	int i = np->sender_count < SENDERS_MAX ? np->sender_count++ : np->sender_next++ % SENDERS_MAX;
	np->senders[i] = (struct notify_sender){ be_pid, client_id };
}

static uint64_t sender_client(const struct notify_pool *np, uint32_t be_pid)
{
	for (int i = 0; i < np->sender_count; i++)
		if (np->senders[i].be_pid == be_pid)
			return np->senders[i].client_id;
	return 0;
}

/* Whether the client's unsent notifications are over notify_buffer_limit: then it is closed. */
static bool over_limit(struct notify_client *nc)
{
	uint64_t held = (uint64_t)netbuf_queue_len(&nc->client->nb) + nc->queue.len;
	int limit = pgv.cfg->notify_buffer_limit;
	if (limit <= 0 || held <= (uint64_t)limit)
		return false;
	metrics_count_notify_client_dropped();
	client_log(LOG_LEVEL_WARNING, nc->client, "closing: %llu bytes of notifications not read (notify_buffer_limit %d)",
		   (unsigned long long)held, limit);
	doom(nc, "53400", "notify_buffer_limit exceeded: the client did not read its notifications");
	return true;
}

/* Between transactions: at once; with a server: held until it is back between transactions. */
static void deliver_one(struct notify_client *nc, const uint8_t *msg, uint32_t len)
{
	struct client *client = nc->client;
	if (client->state == CL_IDLE && !client->link && nc->queue.len == 0)
		netbuf_send(&client->nb, msg, len);
	else
		pktbuf_put_bytes(&nc->queue, msg, len);
	metrics_count_notification_delivered();
	over_limit(nc);
}

/* A NotificationResponse on the listener: to every client of its channel. */
static void listener_notification(struct notify_pool *np, const struct pkt *pkt)
{
	const uint8_t *body = pkt_body(pkt);
	uint32_t blen = pkt_body_len(pkt);
	if (blen < 6 || !memchr(body + 4, '\0', blen - 4))
		return;
	uint32_t pid = proto_read_be32(body);
	struct notify_channel *ch = channel_find(np, (const char *)body + 4);
	if (!ch)
		return;		/* UNLISTENed while this was on its way */
	uint64_t self = sender_client(np, pid);
	uint8_t *msg = xmalloc(pkt->len);
	memcpy(msg, pkt->data, pkt->len);
	for (int i = 0; i < ch->count; i++) {	/* doom() defers closes: the array stays as it is */
		struct notify_client *nc = ch->clients[i];
		if (nc->doomed)
			continue;
		uint32_t shown = self && nc->client->id == self ? nc->client->cancel_pid : pid;
		msg[5] = (uint8_t)(shown >> 24), msg[6] = (uint8_t)(shown >> 16);
		msg[7] = (uint8_t)(shown >> 8), msg[8] = (uint8_t)shown;
		deliver_one(nc, msg, pkt->len);
	}
	free(msg);
}

/* Listeners' ReadyForQuery: the clients whose own ReadyForQuery waited for it go on. */
static void listener_caught_up(struct notify_pool *np)
{
	np->done_seq++;
	list_for_each_safe(pos, tmp, &np->waiters) {
		struct notify_client *nc = container_of(pos, struct notify_client, wait_node);
		if (nc->early_seq <= np->done_seq)
			waiter_resume(np, nc);
	}
	list_for_each(pos, &np->clients) {
		struct notify_client *nc = container_of(pos, struct notify_client, node);
		if (nc->held && nc->wait_seq <= np->done_seq)
			netbuf_resume(&nc->held->nb);	/* offered again: notify_note_server lets it through */
	}
}

#define LISTENER_MSG_MAX (1024 * 1024)

static bool listener_packet(struct server *server, const struct pkt *pkt)
{
	struct notify_pool *np = server->pool->notify;
	if (!pkt_complete(pkt)) {
		if (pkt->len <= LISTENER_MSG_MAX)
			return true;	/* read it whole */
		server_close(server, "oversized message on the notification listener");
		return false;
	}
	if (np && np->listener == server) {
		if (pkt->type == 'A')
			listener_notification(np, pkt);
		else if (pkt->type == 'Z')
			listener_caught_up(np);
	}
	if (pkt->type == 'E') {
		const char *msg = proto_error_field(pkt_body(pkt), pkt_body_len(pkt), 'M');
		server_log(LOG_LEVEL_WARNING, server, "notification listener: %s", msg ? msg : "error");
	}
	netbuf_skip(&server->nb, pkt->len);
	return true;
}

static const struct server_owner listener_owner = {
	.ready = listener_ready,
	.packet = listener_packet,
	.lost = listener_lost,
};

/* ---------------------------------------------------------------- a client's channels */

static struct notify_client *notify_client_new(struct client *client)
{
	struct notify_client *nc = xcalloc(1, sizeof(*nc));
	nc->client = client;
	list_node_init(&nc->node);
	list_node_init(&nc->doom_node);
	list_node_init(&nc->wait_node);
	pktbuf_init(&nc->queue, 0);
	clients_add(nc);
	return nc;
}

/*
 * The pool's listener state, with a listener on its way: the server the
 * client's LISTEN just committed on (server), claimed, so that it becomes
 * the listener as soon as the client lets it go. So the listener is one
 * of the pool's servers, counted in pool_size, max_db_connections,
 * max_user_connections and the instance's budget, and never waits for
 * room (no other client's transaction, nor a LISTEN held for it, can
 * stand in its way); and that server has listened on the client's
 * channels since its commit, so the first client misses nothing. NULL
 * (why in *refused) if the pool cannot spare a server for it.
 */
static struct notify_pool *pool_state(struct pool *pool, struct server *server, const char **refused)
{
	if (pool->notify)
		return pool->notify;
	/* Each worker has its own listener (workers = N): one server each, and one left for queries. */
	int listeners = pgv.budget ? workers_count() : 1;
	if (pool_server_capacity(pool) < listeners + 1) {
		*refused = "LISTEN needs a server for the notification listener of each worker and one for queries: "
			   "raise pool_size (and max_db_connections, max_user_connections) to at least workers + 1";
		return NULL;
	}
	struct notify_pool *np = xcalloc(1, sizeof(*np));
	np->pool = pool;
	list_init(&np->clients);
	list_init(&np->waiters);
	pktbuf_init(&np->out, 256);
	pool->notify = np;
	np->listener = server;
	server_claim(server, &listener_owner);
	server_log(LOG_LEVEL_INFO, server, "to be the notification listener of %s/%s once its client lets it go",
		   pool->db->name, pool->user);
	return np;
}

static void client_detach(struct notify_client *nc)
{
	struct notify_pool *np = nc->np;
	if (!np)
		return;
	while (nc->nchannels > 0)
		channel_remove_client(np, nc, nc->nchannels - 1);
	list_remove(&np->clients, &nc->node);
	nc->np = NULL;
	if (!list_empty(&np->clients))
		return;
	if (np->listener && np->listener->claim) {	/* not the listener yet: back to the pool as any other */
		server_unclaim(np->listener);
		pool_state_free(np);
	} else if (np->listener) {
		server_close(np->listener, "no client listens any more");	/* listener_lost frees np */
	} else {
		pool_state_free(np);
	}
}

static bool pending_listens(const struct notify_client *nc)
{
	for (int i = 0; i < nc->npending; i++)
		if (nc->pending[i].kind == OP_LISTEN)
			return true;
	return false;
}

/* The committed transaction's LISTEN/UNLISTEN on server, in order, as PostgreSQL applies them. */
static void apply_pending(struct notify_client *nc, struct server *server)
{
	struct client *client = nc->client;
	if (!nc->np) {
		if (!pending_listens(nc))
			return;	/* UNLISTEN of what it does not listen on: nothing */
		const char *refused = NULL;
		nc->np = pool_state(client->pool, server, &refused);
		if (!nc->np) {
			client_log(LOG_LEVEL_WARNING, client, "closing: %s", refused);
			doom(nc, "0A000", refused);
			return;
		}
		list_append(&nc->np->clients, &nc->node);
	}
	for (int i = 0; i < nc->npending; i++) {
		const struct notify_op *op = &nc->pending[i];
		int idx = op->kind == OP_UNLISTEN_ALL ? -1 : client_channel_index(nc, op->name);
		if (op->kind == OP_LISTEN && idx < 0)
			channel_add_client(nc->np, op->name, nc);
		else if (op->kind == OP_UNLISTEN && idx >= 0)
			channel_remove_client(nc->np, nc, idx);
		else if (op->kind == OP_UNLISTEN_ALL)
			while (nc->nchannels > 0)
				channel_remove_client(nc->np, nc, nc->nchannels - 1);
	}
	if (nc->nchannels == 0)
		client_detach(nc);
}

/* ---------------------------------------------------------------- relay hooks */

static bool notify_enabled(const struct pool *pool)
{
	return pgv.cfg->notify_support && pool_effective_mode(pool) != POOL_MODE_SESSION;
}

static bool notify_note_client(struct client *client, struct server *server, const struct relay_text *rt)
{
	const char *sql = rt->sql;
	size_t len = rt->len;
	struct notify_client *nc = nc_of(client);
	int first = nc ? nc->npending : 0;
	if ((rt->marks & SQL_MARK_LI) && parse_statements(client, sql, len) > 0) {
		if (early_listens(nc_of(client), server, first))
			return true;
		if (server)
			server->release_sql = "UNLISTEN *";	/* what ran here must not listen for the next client */
	}
	/*
	 * Every client's, listening or not: a backend's notifications are its
	 * last client's, and one that only notifies must not leave them to
	 * the listening client that used the backend before it.
	 */
	if (client->pool->notify && server)
		sender_note(client->pool->notify, server->be_pid, client->id);
	return false;
}

/* Whether the client's open transaction LISTENs channel. */
static bool pending_listen(const struct notify_client *nc, const char *channel)
{
	for (int i = 0; i < nc->npending; i++)
		if (nc->pending[i].kind == OP_LISTEN && strcmp(nc->pending[i].name, channel) == 0)
			return true;
	return false;
}

/*
 * A notification on the client's own server: its backend listens only on
 * what this client LISTENed since it got the server (the server is
 * cleaned before anyone else's turn). One for a channel the client's open
 * transaction LISTENs, not yet listened on through the listener, is that LISTEN
 * seeing a notification committed with it or after it, before the
 * listener could have it (a LISTEN and a NOTIFY in one transaction): it
 * goes to the client, with its login PID if its own backend sent it. The
 * rest the listener delivers.
 */
static enum notify_verdict own_server_notification(struct notify_client *nc, struct server *server,
						   const struct pkt *pkt, uint32_t *pid)
{
	const uint8_t *body = pkt_body(pkt);
	uint32_t len = pkt_body_len(pkt);
	if (nc->np && nc->np->listener == server) {	/* the listener to be (pool_state): it hears for all */
		listener_notification(nc->np, pkt);
		return NOTIFY_DROP;
	}
	if (len < 6 || !memchr(body + 4, '\0', len - 4) || client_channel_index(nc, (const char *)body + 4) >= 0 ||
	    !pending_listen(nc, (const char *)body + 4))
		return NOTIFY_DROP;
	uint32_t sender = proto_read_be32(body);
	metrics_count_notification_delivered();
	if (sender != server->be_pid)
		return NOTIFY_PASS;
	*pid = nc->client->cancel_pid;
	return NOTIFY_SET_PID;
}

/*
 * The notifications held during the client's transaction go out before
 * the ReadyForQuery that ends it (about to be forwarded from server), as
 * PostgreSQL sends those it got during a transaction: its own NOTIFYs'
 * copies from the listener among them.
 */
static void deliver_before_ready(struct notify_client *nc, struct server *server)
{
	if (nc->doomed || nc->queue.len == 0 || over_limit(nc))
		return;
	netbuf_insert(&server->nb, nc->queue.buf, nc->queue.len);
	pktbuf_reset(&nc->queue);
}

/*
 * Whether the transaction that just ended (ReadyForQuery 'I') committed:
 * a transaction block by its last COMMIT or ROLLBACK, so that one that
 * recovered from an error or a ROLLBACK TO SAVEPOINT and committed keeps
 * its LISTENs (all of them: those after the savepoint too, see notify.h);
 * a statement outside a block if no error came.
 */
/*
 * Whether a command tag names a statement that runs no function, trigger
 * or rule of the user's, so cannot have sent a notification: anything
 * else (a SELECT calling pg_notify(), an INSERT whose trigger notifies, a
 * CALL, a DO) may have.
 */
static bool runs_no_user_code(const char *tag, uint32_t len)
{
	static const char *const quiet[] = { "LISTEN", "UNLISTEN", "BEGIN", "SAVEPOINT", "RELEASE", "SHOW", "SET",
					     "RESET", "DEALLOCATE" };
	for (size_t i = 0; i < sizeof(quiet) / sizeof(quiet[0]); i++) {
		size_t n = strlen(quiet[i]);
		if (len >= n + 1 && memcmp(tag, quiet[i], n + 1) == 0)	/* the tag with its NUL */
			return true;
	}
	return false;
}

static bool committed(const struct notify_client *nc)
{
	return nc->ended == END_COMMIT || (nc->ended == END_NONE && !nc->failed);
}

/* The client's transaction as its server answers it; NOTIFY_HOLD a ReadyForQuery until the listener has the new channels. */
static enum notify_verdict notify_note_server(struct server *server, const struct pkt *pkt, uint32_t *pid)
{
	struct notify_client *nc = nc_of(server->link);
	if (!nc)
		return pkt->type == 'A' ? NOTIFY_DROP : NOTIFY_PASS;
	const char *body = (const char *)pkt_body(pkt);
	uint32_t len = pkt_body_len(pkt);
	if (pkt->type == 'A') {
		return own_server_notification(nc, server, pkt, pid);
	} else if (pkt->type == 'E') {
		nc->failed = true;
	} else if (pkt->type == 'C') {
		/*
		 * "COMMIT" only when a transaction block committed (a failed one's
		 * COMMIT answers "ROLLBACK"); "ROLLBACK" also ends ROLLBACK TO
		 * SAVEPOINT, after which a COMMIT may still come.
		 */
		if (len >= 7 && memcmp(body, "COMMIT", 7) == 0)
			nc->ended = END_COMMIT;
		else if (len >= 8 && memcmp(body, "ROLLBACK", 8) == 0)
			nc->ended = END_ROLLBACK;
		else if (!runs_no_user_code(body, len))
			nc->notifying = true;	/* a NOTIFY, or a function or trigger that may have sent one */
	} else if (pkt->type == 'Z') {
		if (nc->held == server) {
			if (nc->doomed || !nc->np || nc->wait_seq <= nc->np->done_seq) {
				nc->held = NULL;
				nc->wait_seq = 0;
				deliver_before_ready(nc, server);
				return NOTIFY_PASS;
			}
			return NOTIFY_HOLD;
		}
		if (len < 1 || body[0] != 'I')
			return NOTIFY_PASS;
		bool notified = nc->notifying && committed(nc);
		if (nc->npending > 0 && committed(nc) && !nc->doomed)
			apply_pending(nc, server);
		nc->npending = 0;
		nc->failed = false;
		nc->notifying = false;
		nc->ended = END_NONE;
		early_release(nc);
		if (nc->np && nc->np->listener == server)
			nc->wait_seq = 0;	/* its own server becomes the listener: it has listened since the commit */
		else if (notified && nc->np && nc->np->ready && nc->nchannels > 0 && !nc->doomed)
			nc->wait_seq = MAX(nc->wait_seq, listener_sync(nc->np));	/* its own notifications first */
		if (nc->np && !nc->doomed && nc->wait_seq > nc->np->done_seq) {
			nc->held = server;
			return NOTIFY_HOLD;
		}
		nc->wait_seq = 0;
		deliver_before_ready(nc, server);
	}
	return NOTIFY_PASS;
}

static void notify_client_idle(struct client *client)
{
	struct notify_client *nc = nc_of(client);
	if (!nc)
		return;
	if (nc->held) {	/* its server left it while its ReadyForQuery waited (closed under it): no longer ours to hold */
		netbuf_resume(&nc->held->nb);
		nc->held = NULL;
		nc->wait_seq = 0;
	}
	if (nc->doomed || nc->queue.len == 0)
		return;
	if (!over_limit(nc)) {
		netbuf_send(&client->nb, nc->queue.buf, nc->queue.len);
		pktbuf_reset(&nc->queue);
	}
}

static void notify_client_free(struct client *client)
{
	struct notify_client *nc = nc_of(client);
	if (!nc)
		return;
	clients_remove(nc);
	if (list_node_linked(&nc->doom_node))
		list_remove(&doomed_clients, &nc->doom_node);
	if (nc->held)
		netbuf_resume(&nc->held->nb);
	if (list_node_linked(&nc->wait_node))	/* then its pool's listener state is the one it waits on */
		list_remove(&client->pool->notify->waiters, &nc->wait_node);
	early_release(nc);
	client_detach(nc);	/* a lost listener's state goes with its last client */
	free(nc->early);
	free(nc->channels);
	free(nc->pending);
	pktbuf_free(&nc->queue);
	free(nc);
}

void notify_register(void)
{
	list_init(&doomed_clients);
	relay_hooks.notify_enabled = notify_enabled;
	relay_hooks.notify_note_client = notify_note_client;
	relay_hooks.notify_note_server = notify_note_server;
	relay_hooks.notify_client_idle = notify_client_idle;
	relay_hooks.notify_client_free = notify_client_free;
}

void notify_each_channel(const struct pool *pool, notify_channel_fn fn, void *arg)
{
	if (!pool->notify)
		return;
	for (const struct notify_channel *ch = pool->notify->channels; ch; ch = ch->next)
		fn(arg, pool, ch->name, ch->count);
}
