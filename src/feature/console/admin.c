/*
 * admin.c - the admin console ("pgbouncer" / "pgvalve" database): the
 * session of a console client.
 *
 * Decides who may log in to the console and with which rights, reads one
 * simple-protocol query at a time, parses it with the console's grammar
 * and hands it to a SHOW view (admin_show.c) or a control verb
 * (admin_control.c); anything else is answered as PgBouncer answers it.
 * admin_internal.h describes how the console's files divide the work.
 *
 * Owns nothing but the per-client flags it sets (admin_counted,
 * shown_as_admin_user) and the console database's query counts; changes
 * no pool or process state itself.
 */
#include "common.h"
#include "admin.h"
#include "admin_internal.h"
#include "auth_file.h"
#include "client.h"
#include "config.h"
#include "log.h"
#include "netbuf.h"
#include "pool.h"
#include "proto.h"
#include "workers.h"

#include <ctype.h>
#include <strings.h>

#define ADMIN_QUERY_MAX (64 * 1024)

/* ---------------------------------------------------------------- command parsing */

static const char *skip_ws(const char *p)
{
	while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
		p++;
	return p;
}

/* Reads a word or quoted token into out; false on bad syntax, *too_long when it does not fit. */
static bool read_token(const char **pp, char quote_ok, char *out, size_t size, bool *too_long)
{
	const char *p = *pp;
	size_t n = 0, raw = 0;
	if (*p == '"' || (quote_ok && *p == '\'')) {
		char q = *p++;
		raw++;
		for (;;) {
			if (!*p)
				return false;
			if (*p == q) {
				if (p[1] != q)
					break;
				p++;
				raw++;
			}
			if (n + 1 < size)
				out[n++] = *p;
			p++;
			raw++;
		}
		p++;
		raw++;
		if (n == 0 && q == '"')
			return false;
	} else {
		while (isalnum((unsigned char)*p) || *p == '_') {
			if (n + 1 < size)
				out[n++] = *p;
			p++;
			raw++;
		}
		if (raw == 0)
			return false;
	}
	out[n] = '\0';
	if (raw >= size)
		*too_long = true;
	*pp = p;
	return true;
}

enum admin_parse_result admin_parse_command(const char *q, struct admin_command *cmd)
{
	bool too_long = false;
	memset(cmd, 0, sizeof(*cmd));
	const char *p = skip_ws(q);
	if (!read_token(&p, 0, cmd->verb, sizeof(cmd->verb), &too_long))
		return ADMIN_PARSE_INVALID;
	if (strcasecmp(cmd->verb, "set") == 0 && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) {
		const char *s = skip_ws(p);
		if (read_token(&s, 0, cmd->key, sizeof(cmd->key), &too_long)) {
			s = skip_ws(s);
			bool eq = false;
			if (*s == '=') {
				s++;
				eq = true;
			} else if (strncasecmp(s, "to", 2) == 0 && (s[2] == ' ' || s[2] == '\t' || s[2] == '\'' ||
								    s[2] == '"')) {
				s += 2;
				eq = true;
			}
			if (eq) {
				s = skip_ws(s);
				if (read_token(&s, '\'', cmd->value, sizeof(cmd->value), &too_long)) {
					s = skip_ws(s);
					if (*s == ';')
						s = skip_ws(s + 1);
					if (!*s) {
						cmd->is_set = true;
						return too_long ? ADMIN_PARSE_TOO_LONG : ADMIN_PARSE_OK;
					}
				}
			}
		}
		too_long = false;
	}
	const char *after_verb = p;
	p = skip_ws(p);
	if (*p && *p != ';') {
		if (p == after_verb)
			return ADMIN_PARSE_INVALID;	/* no white space between the words */
		if (!read_token(&p, 0, cmd->arg, sizeof(cmd->arg), &too_long))
			return ADMIN_PARSE_INVALID;
		cmd->has_arg = true;
		const char *after_arg = p;
		p = skip_ws(p);
		/* COMMAND TENANT id: a second word only after TENANT */
		if (*p && *p != ';' && p != after_arg && strcasecmp(cmd->arg, "tenant") == 0) {
			if (!read_token(&p, 0, cmd->tenant, sizeof(cmd->tenant), &too_long))
				return ADMIN_PARSE_INVALID;
			cmd->has_tenant = true;
			p = skip_ws(p);
		}
	}
	if (*p == ';')
		p = skip_ws(p + 1);
	if (*p)
		return ADMIN_PARSE_INVALID;
	return too_long ? ADMIN_PARSE_TOO_LONG : ADMIN_PARSE_OK;
}

/* ---------------------------------------------------------------- dispatch */

static void run_query(struct client *client, const char *query)
{
	struct admin_command cmd;
	enum admin_parse_result pr = admin_parse_command(query, &cmd);

	/* As PgBouncer: an admin connection counts one query and one transaction. */
	if (!client->admin_counted) {
		client->admin_counted = true;
		admin_db()->stats.total.query_count++;
		admin_db()->stats.total.xact_count++;
	}
	if (pr == ADMIN_PARSE_TOO_LONG) {
		admin_reply_errorf(client, "bad arguments");
		return;
	}
	if (pr == ADMIN_PARSE_INVALID)
		goto invalid;
	client_log(LOG_LEVEL_DEBUG, client, "admin command: %s", query);
	if (admin_word_is(cmd.verb, "SHOW") || admin_word_is(cmd.verb, "SELECT")) {
		if (cmd.has_arg && workers_count() > 1 && admin_fanout_wanted(client) &&
		    admin_fanout_show(client, cmd.arg, query))
			return;	/* the whole instance's rows, merged (admin_fanout.c) */
		if (cmd.has_arg && admin_show_run(client, cmd.arg))
			return;
		goto invalid;
	}
	if (admin_control_run(client, &cmd, query))
		return;
invalid:
	admin_reply_errorf(client, "invalid command '%s', use SHOW HELP;", query);
}

bool admin_handle_packet(struct client *client, const struct pkt *pkt)
{
	char msg[96];

	switch (pkt->type) {
	case 'Q': {
		if (pkt->len > ADMIN_QUERY_MAX) {
			client_close(client, "08P01", "admin command too long");
			return false;
		}
		if (!pkt_complete(pkt))
			return true;
		netbuf_skip(&client->nb, pkt->len);
		struct pkt_reader r;
		pkt_reader_init(&r, pkt_body(pkt), pkt_body_len(pkt));
		const char *query = pkt_get_string(&r);
		if (!query) {
			client_close(client, "08P01", "bad packet");
			return false;
		}
		run_query(client, query);
		return client->state != CL_CLOSED;
	}
	case 'X':
		netbuf_skip(&client->nb, pkt->len);
		client_close(client, NULL, "client close request");
		return false;
	case 'P': case 'B': case 'E':
		snprintf(msg, sizeof(msg), "extended query protocol not supported by admin console");
		break;
	default:
		snprintf(msg, sizeof(msg), "unsupported packet type for admin console: %d", pkt->type);
		break;
	}
	/* As PgBouncer: an error the client can read, then the connection is closed. */
	netbuf_skip(&client->nb, pkt->len);
	admin_reply_errorf(client, "%s", msg);
	client_close(client, "08P01", "bad packet");
	return false;
}

/*
 * Before any password is asked: admin_users and stats_users may go on;
 * auth_type any lets anyone in with stats rights; a known user in neither
 * list is refused at once. Unknown users go on to fail authentication.
 */
bool admin_check_login(struct client *client, const char *user)
{
	if (config_list_contains(pgv.cfg->admin_users, user) || config_list_contains(pgv.cfg->stats_users, user))
		return true;
	if (pgv.cfg->auth_type == AUTH_TYPE_ANY)
		return true;
	if (client->is_unix && strcmp(user, "pgbouncer") == 0)
		return true;	/* auth.c lets in the same OS user, refuses anyone else */
	if (pgv.auth && auth_store_find(pgv.auth, user)) {
		client_close(client, "28000", "not allowed");
		return false;
	}
	return true;
}

bool admin_check_access(struct client *client)
{
	const char *user = client_user_name(client);
	if (client->admin_superuser || config_list_contains(pgv.cfg->admin_users, user) ||
	    config_list_contains(pgv.cfg->stats_users, user))
		return true;
	if (pgv.cfg->auth_type == AUTH_TYPE_ANY) {
		/* anyone, with stats rights, shown as the admin db's user */
		client->shown_as_admin_user = true;
		return true;
	}
	client_close(client, "28000", "not allowed");
	return false;
}

/* Console logins: the reserved database names. */
static int console_claim(struct client *client, const struct startup_params *sp, const char *dbname)
{
	(void)client; (void)sp;
	return config_is_admin_dbname(dbname);
}

/* A console client leaves: a fan-out under way for it ends first, then its wait. */
static void console_closing(struct client *client)
{
	admin_fanout_abort(client);
	admin_client_closing(client);
}

/* ^C on a command being run on every worker: admin_fanout.c ends a waiting one (and undoes a PAUSE db). */
static void console_cancel(struct client *client)
{
	if (!admin_fanout_cancel(client))
		admin_cancel_request(client);
}

static const struct client_kind_ops console_kind = {
	.claim = console_claim,
	.check_login = admin_check_login,
	.check_access = admin_check_access,
	.data_packet = admin_handle_packet,
	.cancel = console_cancel,
	.closing = console_closing,
};

void admin_register(void)
{
	client_register_kind(CLIENT_CONSOLE, &console_kind);
}
