/*
 * prepare_answer.c - the answers each server owes for prepared statements
 * (prepare_internal.h): one queue per server of the answers it awaits,
 * pushed as prepare.c sends messages, walked against the server's replies
 * (prepare_server_message), so that answers pgvalve makes itself go to
 * the client in protocol order, answers to messages pgvalve injected never
 * reach it, and errors about rewritten messages read as PostgreSQL's.
 * A failed or discarded message's bookkeeping is undone in the tables.
 *
 * Owns: the queues (struct prep_server's ring, risky counts, owed error).
 * Touches servers through their netbuf (netbuf_insert) and clients only
 * to resume one held for risky answers.
 */
#include "common.h"
#include "prepare.h"
#include "prepare_internal.h"
#include "client.h"
#include "config.h"
#include "log.h"
#include "pool.h"
#include "server.h"

/* ---------------------------------------------------------------- awaited answers */

/* Queues an awaited answer; name (may be NULL) is copied. */
struct prep_pending *prep_pending_push(struct prep_server *ps, uint8_t kind, struct prep_stmt *stmt,
				       const char *name)
{
	if (ps->ring_len == ps->ring_cap) {
		uint32_t cap = ps->ring_cap ? ps->ring_cap * 2 : 16;
		struct prep_pending *ring = xmalloc(cap * sizeof(*ring));
		for (uint32_t i = 0; i < ps->ring_len; i++)
			ring[i] = ps->ring[(ps->ring_head + i) & (ps->ring_cap - 1)];
		free(ps->ring);
		ps->ring = ring;
		ps->ring_cap = cap;
		ps->ring_head = 0;
	}
	struct prep_pending *p = &ps->ring[(ps->ring_head + ps->ring_len) & (ps->ring_cap - 1)];
	ps->ring_len++;
	ps->risky_open += (PEND_RISKY >> kind) & 1;
	if (kind == PEND_SYNC || kind >= PEND_QUERY) {	/* its answer ends a segment: the risky ones before it are closed */
		ps->risky_closed += ps->risky_open;
		ps->risky_open = 0;
	}
	/* Field by field: one per awaited answer, and the name buffer needs no clearing. */
	p->kind = kind;
	p->tags = 0;
	p->rename = false;
	p->sid = 0;
	p->pos_from = 0;
	p->pos_shift = 0;
	p->name[0] = '\0';
	p->long_name = NULL;
	p->stmt = stmt;
	if (stmt)
		prep_stmt_ref(stmt);
	if (name) {
		size_t n = strlen(name);
		if (n < sizeof(p->name))
			memcpy(p->name, name, n + 1);
		else
			p->long_name = xstrdup(name);
	}
	return p;
}

/* The same, for a message sent under server name PGV_<sid>: its errors name the client's `name` instead. */
struct prep_pending *prep_pending_push_renamed(struct prep_server *ps, uint8_t kind, struct prep_stmt *stmt,
					       const char *name, uint64_t sid)
{
	struct prep_pending *p = prep_pending_push(ps, kind, stmt, name);
	p->rename = true;
	p->sid = sid;
	return p;
}

static bool text_is_ascii(const char *text, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if ((uint8_t)text[i] >= 0x80)
			return false;
	return true;
}

/*
 * The Query being built in b goes in place of the client's: its bytes
 * from b->len on are the client's from `client_at` on. Error positions
 * the server gives from there are shifted back (owe_corrected_error).
 */
void prep_pending_shift_positions(struct prep_pending *p, const struct pkt *pkt, const char *client_at,
				  const struct pktbuf *b)
{
	const char *text = (const char *)pkt_body(pkt);
	const char *built = (const char *)b->buf + b->msg_start + 5;	/* after 'Q' and the length */
	size_t built_len = (size_t)((const char *)b->buf + b->len - built), client_len = (size_t)(client_at - text);
	if (!text_is_ascii(built, built_len) || !text_is_ascii(text, client_len)) {
		/*
		 * Positions count characters, which depend on client_encoding
		 * (not read here) once a name or text before the client's is not
		 * ASCII: then no position rather than a wrong one.
		 */
		p->pos_from = UINT32_MAX;
		return;
	}
	p->pos_from = (uint32_t)built_len + 1;
	p->pos_shift = (int32_t)built_len - (int32_t)client_len;
}

static const char *pending_name(const struct prep_pending *p)
{
	return p->long_name ? p->long_name : p->name;
}

static bool pending_is_query(const struct prep_pending *p)
{
	return p->kind >= PEND_QUERY;
}

/* The i-th awaited answer from the head (i < ring_len). */
static struct prep_pending *pending_at(struct prep_server *ps, uint32_t i)
{
	return &ps->ring[(ps->ring_head + i) & (ps->ring_cap - 1)];
}

static struct prep_pending *pending_head(struct prep_server *ps)
{
	return ps->ring_len ? &ps->ring[ps->ring_head] : NULL;
}

/* The server rejected or discarded p's message: undoes what pgvalve did for it when it was sent. */
static void pending_undo(struct server *server, const struct prep_pending *p)
{
	struct prep_server *ps = server->prep;
	switch (p->kind) {
	case PEND_PARSE:
	case PEND_PARSE_INJECTED:
	case PEND_PARSE_CHECK:
		/* Never created here (or, checked, refused): as PostgreSQL, the name does not exist. */
		if (p->kind != PEND_PARSE_CHECK)
			prep_cache_remove(ps, p->stmt);
		if (p->kind != PEND_PARSE_INJECTED && server->link)
			prep_client_forget_name(server->link, pending_name(p), p->stmt);
		break;
	case PEND_CLOSE_EVICT:	/* the Close was discarded: the server still has it */
		prep_cache_add(ps, p->stmt);
		break;
	case PEND_CLOSE_OWED:	/* the client's Close was discarded: the name stays */
		if (p->stmt && server->link && !prep_client_lookup(server->link, pending_name(p))) {
			prep_stmt_ref(p->stmt);
			prep_client_bind_name(server->link, pending_name(p), p->stmt);
		}
		break;
	default:
		break;
	}
}

/* Drops the head (answered; a failed one was undone first: pending_fail_segment). */
static void pending_pop(struct server *server)
{
	struct prep_server *ps = server->prep;
	struct prep_pending *p = &ps->ring[ps->ring_head];
	/* Tested here: most awaited answers (a Query's, a Sync's) hold neither, and this runs for each. */
	if (p->stmt) {
		prep_stmt_unref(p->stmt);
		p->stmt = NULL;
	}
	if (p->long_name) {
		free(p->long_name);
		p->long_name = NULL;
	}
	ps->ring_head = (ps->ring_head + 1) & (ps->ring_cap - 1);
	ps->ring_len--;
	if ((PEND_RISKY >> p->kind) & 1) {
		if (ps->risky_closed)	/* the closed ones come first in the ring */
			ps->risky_closed--;
		else
			ps->risky_open--;
	}
	if (ps->holding && !ps->risky_closed) {
		ps->holding = false;
		if (server->link)
			netbuf_resume(&server->link->nb);
	}
}

static void pending_clear(struct server *server)
{
	struct prep_server *ps = server->prep;
	while (ps && ps->ring_len)
		pending_pop(server);
}

static bool pending_is_owed(const struct prep_pending *p)
{
	return p->kind == PEND_CLOSE_OWED || p->kind == PEND_DESCRIBE_OWED;
}

static __attribute__((noinline)) void answer_owed(struct server *server, struct prep_server *ps)
{
	struct prep_pending *p;
	if (ps->owed_error) {
		netbuf_insert(&server->nb, ps->owed_error, ps->owed_error_len);
		free(ps->owed_error);
		ps->owed_error = NULL;
	}
	while ((p = pending_head(ps)) && pending_is_owed(p)) {
		static const uint8_t close_complete[5] = { '3', 0, 0, 0, 4 };
		static const uint8_t no_data[5] = { 'n', 0, 0, 0, 4 };
		if (p->kind == PEND_CLOSE_OWED) {
			netbuf_insert(&server->nb, close_complete, 5);
		} else {
			netbuf_insert(&server->nb, p->stmt->param_desc, p->stmt->param_desc_len);
			netbuf_insert(&server->nb, no_data, 5);
		}
		pending_pop(server);
	}
}

/*
 * Answers pgvalve owes the client, once everything before them was
 * answered. Called after every server message prepared statements watch,
 * and mostly nothing is owed: that answer takes a few loads, the work is
 * answer_owed's.
 */
void prepare_server_answer_owed(struct server *server)
{
	struct prep_server *ps = server->prep;
	if (ps && (ps->owed_error || (ps->ring_len && pending_is_owed(&ps->ring[ps->ring_head]))))
		answer_owed(server, ps);
}

/*
 * The awaited answers before the next Sync (or Query: `to_query`) failed
 * or were discarded. Undone last first, so that each undo finds what its
 * message found when it was sent (a Close, then a Parse of the same name).
 */
static void pending_fail_segment(struct server *server, bool to_query)
{
	struct prep_server *ps = server->prep;
	uint32_t n = 0;
	while (n < ps->ring_len) {
		const struct prep_pending *p = pending_at(ps, n);
		if (p->kind == PEND_SYNC || (to_query && pending_is_query(p)))
			break;
		n++;
	}
	for (uint32_t i = n; i-- > 0;)
		pending_undo(server, pending_at(ps, i));
	while (n-- > 0)
		pending_pop(server);
}

/* A field of the ErrorResponse being rebuilt: `v` (NUL-terminated) as the client must see it. */
static bool put_corrected_field(struct pktbuf *b, uint8_t code, const char *v, size_t vlen,
				const struct prep_pending *p, const char *quoted, uint32_t qlen)
{
	const char *at = code == 'M' && p->rename ? memmem(v, vlen, quoted, qlen) : NULL;
	if (at) {
		pktbuf_put_byte(b, code);
		pktbuf_put_bytes(b, v, (uint32_t)(at - v) + 1);
		pktbuf_put_bytes(b, pending_name(p), (uint32_t)strlen(pending_name(p)));
		pktbuf_put_string(b, at + qlen - 1);
		return true;
	}
	if (code == 'P' && p->pos_from) {
		long pos = strtol(v, NULL, 10);
		if (pos < (long)p->pos_from)
			return true;	/* inside pgvalve's text: no position the client could use */
		char num[24];	/* any long */
		snprintf(num, sizeof(num), "%ld", pos - p->pos_shift);
		pktbuf_put_byte(b, code);
		pktbuf_put_string(b, num);
		return true;
	}
	pktbuf_put_byte(b, code);
	pktbuf_put_bytes(b, v, (uint32_t)vlen);
	pktbuf_put_byte(b, 0);
	return false;
}

/*
 * The server's error is about a message pgvalve rewrote: it names
 * PGV_<sid> where PostgreSQL would name the client's statement, or its
 * position counts pgvalve's text. The same ErrorResponse, as PostgreSQL
 * would have sent it to the client, is owed in its place. False if
 * nothing needed correcting (a syntax error, no position): it goes as it is.
 */
static bool owe_corrected_error(struct prep_server *ps, const struct pkt *pkt, const struct prep_pending *p)
{
	char quoted[PREP_SERVER_NAME_MAX + 2];
	quoted[0] = '"';
	uint32_t qlen = prep_server_name_of_id(p->sid, quoted + 1) + 2;
	quoted[qlen - 1] = '"';
	const uint8_t *f = pkt_body(pkt), *end = f + pkt_body_len(pkt);
	struct pktbuf b;
	pktbuf_init(&b, pkt_body_len(pkt) + 64);
	pktbuf_begin(&b, 'E');
	bool corrected = false;
	while (f < end && *f) {
		const char *v = (const char *)f + 1;
		size_t vlen = strnlen(v, (size_t)(end - f) - 1);
		if (v + vlen == (const char *)end) {	/* a field without its NUL: passed on as it came */
			corrected = false;
			break;
		}
		corrected |= put_corrected_field(&b, *f, v, vlen, p, quoted, qlen);
		f += vlen + 2;
	}
	pktbuf_put_byte(&b, 0);
	pktbuf_end(&b);
	if (corrected) {
		free(ps->owed_error);
		ps->owed_error = xmalloc(b.len);
		memcpy(ps->owed_error, b.buf, b.len);
		ps->owed_error_len = b.len;
	}
	pktbuf_free(&b);
	return corrected;
}

static bool is_tag(const struct pkt *pkt, const char *tag)
{
	size_t n = strlen(tag) + 1;
	return pkt_body_len(pkt) == n && memcmp(pkt_body(pkt), tag, n) == 0;
}

/* A CommandComplete within a Query: which of its tags are pgvalve's, and when nothing is left to undo. */
static enum prepare_verdict query_tag(struct prep_pending *p)
{
	bool first = p->tags++ == 0;
	bool through = true;	/* the statement pgvalve may have to undo went through */
	enum prepare_verdict v = PREPARE_FORWARD;
	switch (p->kind) {
	case PEND_QUERY_PREFIXED:	/* pgvalve's PREPARE, then the client's statement */
		through = first;
		v = first ? PREPARE_SKIP : PREPARE_FORWARD;
		break;
	case PEND_QUERY_CHECKED:	/* the client's PREPARE under SCRATCH, then pgvalve's DEALLOCATE */
		v = first ? PREPARE_FORWARD : PREPARE_SKIP;
		break;
	case PEND_QUERY_DEALLOCATE:	/* pgvalve's PREPARE of SCRATCH, then the client's DEALLOCATE of it */
		through = !first;
		v = first ? PREPARE_SKIP : PREPARE_FORWARD;
		break;
	default:
		break;
	}
	if (through && p->stmt) {	/* a plain Query's holds none */
		prep_stmt_unref(p->stmt);
		p->stmt = NULL;
	}
	return v;
}

/* An error within a Query: undoes what pgvalve did, for the statement that did not go through. */
static void query_failed(struct server *server, struct prep_pending *p)
{
	struct client *client = server->link;
	if (!p->stmt)
		return;		/* nothing to undo, or it went through */
	switch (p->kind) {
	case PEND_QUERY_PREPARE:
	case PEND_QUERY_PREFIXED:	/* the statement is not on this server */
		prep_cache_remove(server->prep, p->stmt);
		if (p->kind == PEND_QUERY_PREPARE && client)
			prep_client_forget_name(client, pending_name(p), p->stmt);
		break;
	case PEND_QUERY_CHECKED:	/* as PostgreSQL, the client's PREPARE failed */
		if (client)
			prep_client_forget_name(client, pending_name(p), p->stmt);
		break;
	case PEND_QUERY_DEALLOCATE:	/* as PostgreSQL, the statement was not deallocated */
		if (client && !prep_client_lookup(client, pending_name(p))) {
			prep_stmt_ref(p->stmt);
			prep_client_bind_name(client, pending_name(p), p->stmt);
		}
		break;
	default:
		break;
	}
	prep_stmt_unref(p->stmt);
	p->stmt = NULL;
}

/* ParseComplete or CloseComplete: whose it is. */
static enum prepare_verdict parse_or_close_complete(struct server *server, struct prep_pending *head, uint8_t type)
{
	uint8_t kind = head->kind;
	if (kind == PEND_PARSE_DUP) {
		/* Only if PGV_<sid> was dropped behind pgvalve's back: that name now holds another text. */
		server_log(LOG_LEVEL_WARNING, server, "a statement pgvalve prepared was gone: closing when released");
		server->close_needed = true;
	}
	pending_pop(server);
	bool ours = (type == '1' && kind == PEND_PARSE_INJECTED) ||
		    (type == '3' && (kind == PEND_CLOSE_EVICT || kind == PEND_CLOSE_SCRATCH));
	return ours ? PREPARE_SKIP : PREPARE_FORWARD;
}

enum prepare_verdict prepare_server_message(struct server *server, const struct pkt *pkt)
{
	struct prep_server *ps = server->prep;
	struct prep_pending *head = ps ? pending_head(ps) : NULL;

	/* DEALLOCATE ALL and DISCARD ALL (the client's or a reset query) empty the server and the client. */
	if (ps && pkt->type == 'C' &&
	    (pkt_body_len(pkt) == sizeof("DISCARD ALL") || pkt_body_len(pkt) == sizeof("DEALLOCATE ALL"))) {
		if (!pkt_complete(pkt))
			return PREPARE_NEED_MORE;
		if (is_tag(pkt, "DISCARD ALL") || is_tag(pkt, "DEALLOCATE ALL")) {
			prep_cache_clear(ps);
			if (server->link && server->internal == SV_INTERNAL_NONE)
				prep_client_forget_all(server->link);
		}
	}
	if (!head || server->internal != SV_INTERNAL_NONE)
		return PREPARE_FORWARD;	/* notices, ParameterStatus, pgvalve's own queries, or nothing awaited */
	switch (pkt->type) {
	case '1':
	case '3':
		return parse_or_close_complete(server, head, pkt->type);
	case 't':	/* ParameterDescription: whole (server.c waits for it) */
		if (head->kind != PEND_DESCRIBE_LEARN)
			return PREPARE_FORWARD;
		prep_stmt_learn_parameters(head->stmt, pkt);
		return PREPARE_SKIP;
	case 'n':	/* NoData */
	case 'T':
		if (head->kind == PEND_DESCRIBE_LEARN) {
			prep_stmt_learn_shape(head->stmt, pkt->type == 'n' ? SHAPE_NO_ROWS : SHAPE_ROWS);
			pending_pop(server);
			return PREPARE_SKIP;
		}
		if (pkt->type == 'T') {
			if (head->kind == PEND_DESCRIBE)
				pending_pop(server);
			return PREPARE_FORWARD;
		}
		/* NoData ends a Describe as these end their messages */
		/* fall through */
	case '2':	/* BindComplete */
	case 's':	/* PortalSuspended */
	case 'I':	/* EmptyQueryResponse */
		if (!pending_is_query(head))
			pending_pop(server);
		return PREPARE_FORWARD;
	case 'C':
		if (pending_is_query(head))
			return query_tag(head);
		pending_pop(server);
		return PREPARE_FORWARD;
	case 'E': {
		bool correct = head->rename || head->pos_from;
		enum prepare_verdict v = correct && owe_corrected_error(ps, pkt, head) ? PREPARE_SKIP : PREPARE_FORWARD;
		if (pending_is_query(head))
			query_failed(server, head);
		else
			pending_fail_segment(server, false);	/* the head failed, the server skips up to the Sync */
		return v;
	}
	case 'Z':
		/*
		 * What is still awaited before the Sync or Query it answers was
		 * discarded after an error (nothing when that Sync or Query is
		 * the head, as for every lone Query).
		 */
		if (head->kind != PEND_SYNC && !pending_is_query(head))
			pending_fail_segment(server, true);
		if (pending_head(ps))
			pending_pop(server);
		if (ps->ring_len && server->expect_ready <= 1 && !server->unsynced) {
			/*
			 * The server owes nothing more, yet answers are awaited: the
			 * queue is out of step (a Sync PostgreSQL ignored, after an
			 * extended COPY). Forgotten, so that no later answer is
			 * matched against it and no client waits on it.
			 */
			server_log(LOG_LEVEL_DEBUG, server, "%u awaited answers left at the last ReadyForQuery: dropped",
				   ps->ring_len);
			pending_clear(server);
		}
		return PREPARE_FORWARD;
	default:
		return PREPARE_FORWARD;
	}
}

void prepare_server_free(struct server *server)
{
	struct prep_server *ps = server->prep;
	if (!ps)
		return;
	pending_clear(server);
	prep_cache_clear(ps);
	free(ps->owed_error);
	free(ps->ring);
	free(ps->buckets);
	free(ps);
	server->prep = NULL;
}
