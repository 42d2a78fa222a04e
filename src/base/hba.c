/*
 * hba.c - auth_hba_file and auth_ident_file: lexing pg_hba.conf-style text,
 * building immutable rule sets, and matching connections against them.
 *
 * Owns struct hba (rules in file order, plus a snapshot of the local
 * interfaces when samehost/samenet is used) and struct ident_map (map lines
 * with compiled regexes). It decides which method applies and whether a
 * system user maps to a database user; it never authenticates, touches
 * sockets or keeps global state. Warnings name the file and line and at most
 * a keyword, never a whole line and never an option value (ldap options may
 * carry a bind password).
 */
#include "common.h"
#include "config.h"
#include "log.h"
#include "hba.h"
#include "ldap_auth.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <regex.h>

#define HBA_INCLUDE_DEPTH_MAX 10	/* nested @file; stops include loops */

/* ------------------------------------------------------------ helpers */

struct strbuf {
	char *buf;
	size_t len, cap;
};

static void sb_put(struct strbuf *sb, const char *p, size_t n)
{
	if (sb->len + n + 1 > sb->cap) {
		sb->cap = MAX(sb->cap * 2, sb->len + n + 64);
		sb->buf = xrealloc(sb->buf, sb->cap);
	}
	memcpy(sb->buf + sb->len, p, n);
	sb->len += n;
	sb->buf[sb->len] = '\0';
}

static void sb_putc(struct strbuf *sb, char c)
{
	sb_put(sb, &c, 1);
}

static void sb_clear(struct strbuf *sb)
{
	sb->len = 0;
	if (sb->buf)
		sb->buf[0] = '\0';
}

static bool is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v';
}

/* Reads a whole file into a new NUL-terminated buffer; NULL with errno set. */
static char *read_text_file(const char *path, size_t *lenp)
{
	FILE *f = fopen(path, "re");
	struct strbuf sb = { 0 };
	char chunk[8192];
	size_t n;

	if (!f)
		return NULL;
	sb_put(&sb, "", 0);
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
		sb_put(&sb, chunk, n);
	if (ferror(f)) {
		int e = errno ? errno : EIO;
		fclose(f);
		free(sb.buf);
		errno = e;
		return NULL;
	}
	fclose(f);
	*lenp = sb.len;
	return sb.buf;
}

/* "dir/" part of path (with the slash), or "" for a bare name. */
static char *dir_of(const char *path)
{
	const char *slash = strrchr(path, '/');
	size_t n = slash ? (size_t)(slash - path) + 1 : 0;
	char *dir = xmalloc(n + 1);
	memcpy(dir, path, n);
	dir[n] = '\0';
	return dir;
}

/* ------------------------------------------------------------ lexer */

/*
 * The text is read as logical lines (a trailing backslash joins the next
 * physical line, as PostgreSQL does, before any other lexing), each split
 * into fields separated by blanks; a field is a comma-separated list of
 * tokens. Double quotes protect blanks, commas and '#', and make the token
 * "quoted" so it loses any keyword meaning.
 */
struct token {
	char *str;
	bool quoted;
};

struct field {
	struct token *tok;
	size_t n, cap;
};

struct tokline {
	struct field *fields;
	size_t n, cap;
};

struct line_reader {
	const char *p, *end;
	int lineno;		/* last physical line consumed */
	struct strbuf line;
};

/* Next logical line into r->line; *first = its first physical line number. */
static bool reader_next(struct line_reader *r, int *first, bool *has_nul)
{
	if (r->p >= r->end)
		return false;
	sb_clear(&r->line);
	sb_put(&r->line, "", 0);
	*has_nul = false;
	*first = r->lineno + 1;
	for (;;) {
		const char *nl = memchr(r->p, '\n', (size_t)(r->end - r->p));
		const char *eol = nl ? nl : r->end;
		size_t n = (size_t)(eol - r->p);

		r->lineno++;
		if (memchr(r->p, '\0', n))
			*has_nul = true;
		sb_put(&r->line, r->p, n);
		r->p = nl ? nl + 1 : r->end;
		while (r->line.len && r->line.buf[r->line.len - 1] == '\r')
			r->line.buf[--r->line.len] = '\0';
		if (r->line.len && r->line.buf[r->line.len - 1] == '\\') {
			r->line.buf[--r->line.len] = '\0';
			if (r->p < r->end)
				continue;
		}
		return true;
	}
}

static void tokline_clear(struct tokline *tl)
{
	for (size_t i = 0; i < tl->n; i++) {
		for (size_t j = 0; j < tl->fields[i].n; j++)
			free(tl->fields[i].tok[j].str);
		free(tl->fields[i].tok);
	}
	tl->n = 0;
}

static void tokline_free(struct tokline *tl)
{
	tokline_clear(tl);
	free(tl->fields);
	tl->fields = NULL;
	tl->cap = 0;
}

static struct field *tokline_add_field(struct tokline *tl)
{
	if (tl->n == tl->cap) {
		tl->cap = tl->cap ? tl->cap * 2 : 8;
		tl->fields = xrealloc(tl->fields, tl->cap * sizeof(*tl->fields));
	}
	struct field *f = &tl->fields[tl->n++];
	memset(f, 0, sizeof(*f));
	return f;
}

static void field_add(struct field *f, const char *s, bool quoted)
{
	if (f->n == f->cap) {
		f->cap = f->cap ? f->cap * 2 : 4;
		f->tok = xrealloc(f->tok, f->cap * sizeof(*f->tok));
	}
	f->tok[f->n].str = xstrdup(s);
	f->tok[f->n].quoted = quoted;
	f->n++;
}

/* Splits the NUL-terminated line s into tl. Returns NULL or the reason it cannot. */
static const char *tokenize(const char *s, struct tokline *tl)
{
	struct strbuf tok = { 0 };
	const char *why = NULL;

	tokline_clear(tl);
	for (;;) {
		while (is_blank(*s))
			s++;
		if (*s == '\0' || *s == '#')
			break;
		struct field *f = tokline_add_field(tl);
		for (;;) {
			bool quoted = false, in_quote = false;

			sb_clear(&tok);
			sb_put(&tok, "", 0);
			for (; *s; s++) {
				if (in_quote) {
					if (*s == '"')
						in_quote = false;
					else
						sb_putc(&tok, *s);
				} else if (*s == '"') {
					in_quote = quoted = true;
				} else if (is_blank(*s) || *s == ',' || *s == '#') {
					break;
				} else {
					sb_putc(&tok, *s);
				}
			}
			if (in_quote) {
				why = "unterminated quoted field";
				goto out;
			}
			if (tok.len || quoted)
				field_add(f, tok.buf, quoted);
			while (is_blank(*s))
				s++;
			if (*s != ',')
				break;
			s++;		/* the list goes on, blanks after a comma allowed */
			while (is_blank(*s))
				s++;
			if (*s == '\0' || *s == '#')
				break;
		}
		if (f->n == 0) {
			free(f->tok);
			tl->n--;
		}
	}
out:
	free(tok.buf);
	return why;
}

/* The single token of field f, or NULL if it is a list. */
static const struct token *single(const struct field *f)
{
	return f->n == 1 ? &f->tok[0] : NULL;
}

static bool is_kw(const struct token *t, const char *kw)
{
	return !t->quoted && strcmp(t->str, kw) == 0;
}

/* ------------------------------------------------------------ name lists */

struct name_list {
	bool all;
	bool sameuser;		/* database field only */
	bool replication;	/* database field only: matches physical replication connections, and only those */
	char **names;		/* sorted for bsearch */
	size_t n, cap;
};

/* Where a token came from, for warnings and for resolving @file. */
struct src_ctx {
	const char *origin;
	int line;
	int depth;
};

/*
 * One non-empty tokenized line of a rule file; returns why it is rejected or
 * NULL once the line has been taken.
 */
typedef const char *(*take_line_fn)(void *arg, const struct tokline *tl, const struct src_ctx *ctx);

/*
 * Feeds every logical line of text to take_line. A line that cannot be
 * tokenized or that take_line rejects is logged and skipped, as PostgreSQL
 * does, so one typo costs one rule rather than the whole file.
 */
static void for_each_rule_line(const char *text, size_t len, const char *origin, int depth,
			       take_line_fn take_line, void *arg)
{
	struct line_reader r = { .p = text, .end = text + len };
	struct tokline tl = { 0 };
	int first;
	bool has_nul;

	while (reader_next(&r, &first, &has_nul)) {
		struct src_ctx ctx = { origin, first, depth };
		const char *why = has_nul ? "NUL byte in line" : tokenize(r.line.buf, &tl);

		if (!why && tl.n == 0)
			continue;
		if (!why)
			why = take_line(arg, &tl, &ctx);
		if (why)
			log_warning("%s:%d: %s, line skipped", origin, first, why);
	}
	tokline_free(&tl);
	free(r.line.buf);
}

/* Room for one more element in a doubling array of elem_size-byte elements. */
static void *array_reserve_one(void *items, size_t n, size_t *cap, size_t elem_size)
{
	if (n < *cap)
		return items;
	*cap = *cap ? *cap * 2 : 16;
	return xrealloc(items, *cap * elem_size);
}

static void names_push(struct name_list *nl, const char *s)
{
	if (nl->n == nl->cap) {
		nl->cap = nl->cap ? nl->cap * 2 : 4;
		nl->names = xrealloc(nl->names, nl->cap * sizeof(*nl->names));
	}
	nl->names[nl->n++] = xstrdup(s);
}

static void names_add_token(struct name_list *nl, const struct token *t, bool is_db, const struct src_ctx *ctx);

struct include_arg {
	struct name_list *nl;
	bool is_db;
};

static const char *take_include_line(void *argp, const struct tokline *tl, const struct src_ctx *ctx)
{
	struct include_arg *arg = argp;
	for (size_t i = 0; i < tl->n; i++)
		for (size_t j = 0; j < tl->fields[i].n; j++)
			names_add_token(arg->nl, &tl->fields[i].tok[j], arg->is_db, ctx);
	return NULL;
}

/* @file: every token of every line of the file, relative to the referencing file's directory. */
static void names_include(struct name_list *nl, const char *name, bool is_db, const struct src_ctx *ctx)
{
	char *path, *text;
	size_t len = 0;

	if (name[0] == '\0') {
		log_warning("%s:%d: empty file name after @, ignored", ctx->origin, ctx->line);
		return;
	}
	if (ctx->depth >= HBA_INCLUDE_DEPTH_MAX) {
		log_warning("%s:%d: @file nested too deeply, ignored", ctx->origin, ctx->line);
		return;
	}
	if (name[0] == '/') {
		path = xstrdup(name);
	} else {
		char *dir = dir_of(ctx->origin);
		path = xmalloc(strlen(dir) + strlen(name) + 1);
		strcpy(path, dir);
		strcat(path, name);
		free(dir);
	}
	text = read_text_file(path, &len);
	if (!text) {
		log_warning("%s:%d: could not read included file \"%s\": %s; it adds no names",
			    ctx->origin, ctx->line, path, strerror(errno));
		free(path);
		return;
	}
	struct include_arg arg = { nl, is_db };
	for_each_rule_line(text, len, path, ctx->depth + 1, take_include_line, &arg);
	free(text);
	free(path);
}

static void names_add_token(struct name_list *nl, const struct token *t, bool is_db, const struct src_ctx *ctx)
{
	if (!t->quoted) {
		if (t->str[0] == '@') {
			names_include(nl, t->str + 1, is_db, ctx);
			return;
		}
		if (strcmp(t->str, "all") == 0) {
			nl->all = true;
			return;
		}
		if (is_db && strcmp(t->str, "sameuser") == 0) {
			nl->sameuser = true;
			return;
		}
		if (is_db && (strcmp(t->str, "samerole") == 0 || strcmp(t->str, "samegroup") == 0)) {
			log_warning("%s:%d: \"%s\" is not supported (no roles in pgvalve), it never matches",
				    ctx->origin, ctx->line, t->str);
			return;
		}
		if (is_db && strcmp(t->str, "replication") == 0) {
			nl->replication = true;
			return;
		}
		if (!is_db && t->str[0] == '+') {
			log_warning("%s:%d: group names (+group) are not supported, it never matches",
				    ctx->origin, ctx->line);
			return;
		}
		if (t->str[0] == '/') {
			log_warning("%s:%d: regular expressions in the %s field are not supported, it never matches",
				    ctx->origin, ctx->line, is_db ? "database" : "user");
			return;
		}
	}
	names_push(nl, t->str);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void names_build(struct name_list *nl, const struct field *f, bool is_db, const struct src_ctx *ctx)
{
	for (size_t i = 0; i < f->n; i++)
		names_add_token(nl, &f->tok[i], is_db, ctx);
	if (nl->n > 1)
		qsort(nl->names, nl->n, sizeof(*nl->names), cmp_str);
}

static bool names_match(const struct name_list *nl, const char *name, const char *other)
{
	if (nl->all)
		return true;
	if (nl->sameuser && strcmp(name, other) == 0)
		return true;
	return nl->n && bsearch(&name, nl->names, nl->n, sizeof(*nl->names), cmp_str) != NULL;
}

static void names_free(struct name_list *nl)
{
	for (size_t i = 0; i < nl->n; i++)
		free(nl->names[i]);
	free(nl->names);
}

/* ------------------------------------------------------------ addresses */

struct net {
	int family;		/* AF_INET or AF_INET6 */
	uint8_t addr[16];	/* already masked */
	uint8_t mask[16];
};

/* A client address seen both ways when it is IPv4-mapped IPv6. */
struct client_addr {
	bool has4, has6;
	uint8_t v4[4];
	uint8_t v6[16];
};

static bool client_addr_from(const struct sockaddr *sa, struct client_addr *ca)
{
	memset(ca, 0, sizeof(*ca));
	if (!sa)
		return false;
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *sin = (const struct sockaddr_in *)sa;
		memcpy(ca->v4, &sin->sin_addr, 4);
		ca->has4 = true;
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)sa;
		memcpy(ca->v6, &sin6->sin6_addr, 16);
		ca->has6 = true;
		if (IN6_IS_ADDR_V4MAPPED(&sin6->sin6_addr)) {
			memcpy(ca->v4, ca->v6 + 12, 4);
			ca->has4 = true;
		}
	}
	return ca->has4 || ca->has6;
}

static bool bytes_in_net(const uint8_t *a, const struct net *net, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if ((a[i] & net->mask[i]) != net->addr[i])
			return false;
	return true;
}

static bool net_contains(const struct net *net, const struct client_addr *ca)
{
	if (net->family == AF_INET)
		return ca->has4 && bytes_in_net(ca->v4, net, 4);
	return ca->has6 && bytes_in_net(ca->v6, net, 16);
}

static void net_set_prefix(struct net *net, unsigned bits)
{
	memset(net->mask, 0, sizeof(net->mask));
	for (unsigned i = 0; i < bits / 8; i++)
		net->mask[i] = 0xff;
	if (bits % 8)
		net->mask[bits / 8] = (uint8_t)(0xff << (8 - bits % 8));
}

static void net_apply_mask(struct net *net)
{
	for (size_t i = 0; i < sizeof(net->addr); i++)
		net->addr[i] &= net->mask[i];
}

/* Looks like a DNS name (or ".suffix") rather than a mistyped address. */
static bool is_hostname(const char *s)
{
	bool alpha = false;
	if (!*s)
		return false;
	for (; *s; s++) {
		if (isalpha((unsigned char)*s))
			alpha = true;
		else if (!isdigit((unsigned char)*s) && *s != '.' && *s != '-' && *s != '_')
			return false;
	}
	return alpha;
}

/* ------------------------------------------------------------ hba rules */

enum hba_conn {
	HBA_LOCAL,
	HBA_HOST,
	HBA_HOSTSSL,
	HBA_HOSTNOSSL,
	HBA_HOSTGSSENC,		/* parsed, never matches */
	HBA_HOSTNOGSSENC,	/* parsed, never matches (PgBouncer has no such record type) */
};

enum hba_addr {
	ADDR_NONE,		/* local lines */
	ADDR_ALL,
	ADDR_NET,
	ADDR_SAMEHOST,
	ADDR_SAMENET,
	ADDR_NEVER,		/* host name: no DNS here */
};

struct hba_rule {
	int line;
	enum hba_conn conn;
	struct name_list db, user;
	enum hba_addr addr;
	struct net net;
	int method;		/* enum auth_type */
	char *map;
	char *options;		/* ldap lines only */
};

struct hba {
	struct hba_rule *rules;
	size_t n, cap;
	struct net *ifs;	/* local interfaces, for samehost/samenet */
	size_t nifs;
	bool ifs_loaded;
};

static const struct {
	const char *name;
	enum hba_conn conn;
} conn_names[] = {
	{ "local", HBA_LOCAL },
	{ "host", HBA_HOST },
	{ "hostssl", HBA_HOSTSSL },
	{ "hostnossl", HBA_HOSTNOSSL },
	{ "hostgssenc", HBA_HOSTGSSENC },
	{ "hostnogssenc", HBA_HOSTNOGSSENC },
};

static const struct {
	const char *name;
	int method;		/* AUTH_TYPE_ANY: known to PostgreSQL, not supported here */
} method_names[] = {
	{ "trust", AUTH_TYPE_TRUST },
	{ "reject", AUTH_TYPE_REJECT },
	{ "md5", AUTH_TYPE_MD5 },
	{ "scram-sha-256", AUTH_TYPE_SCRAM_SHA_256 },
	{ "password", AUTH_TYPE_PLAIN },
	{ "cert", AUTH_TYPE_CERT },
	{ "peer", AUTH_TYPE_PEER },
	{ "pam", AUTH_TYPE_PAM },
	{ "ldap", AUTH_TYPE_LDAP },
	{ "ident", AUTH_TYPE_ANY },
#ifdef PGVALVE_GSSAPI
	{ "gss", AUTH_TYPE_GSS },
#else
	{ "gss", AUTH_TYPE_ANY },	/* configure found no MIT Kerberos, or --without-gssapi */
#endif
	{ "sspi", AUTH_TYPE_ANY },
	{ "radius", AUTH_TYPE_ANY },
	{ "bsd", AUTH_TYPE_ANY },
	{ "oauth", AUTH_TYPE_ANY },
};

static void add_if(struct hba *hba, int family, const void *addr, const void *mask, size_t len)
{
	struct net *net;
	hba->ifs = xrealloc(hba->ifs, (hba->nifs + 1) * sizeof(*hba->ifs));
	net = &hba->ifs[hba->nifs++];
	memset(net, 0, sizeof(*net));
	net->family = family;
	memcpy(net->addr, addr, len);
	if (mask)
		memcpy(net->mask, mask, len);
	else
		memset(net->mask, 0xff, len);
}

/* Snapshot of the host's addresses, taken once per parse and only if needed. */
static void hba_load_interfaces(struct hba *hba, const char *origin, int line)
{
	static const uint8_t lo4[4] = { 127, 0, 0, 1 }, lo4mask[4] = { 255, 0, 0, 0 };
	struct ifaddrs *ifa = NULL;

	if (hba->ifs_loaded)
		return;
	hba->ifs_loaded = true;
	add_if(hba, AF_INET, lo4, lo4mask, 4);
	add_if(hba, AF_INET6, &in6addr_loopback, NULL, 16);
	if (getifaddrs(&ifa) < 0) {
		log_warning("%s:%d: could not list network interfaces (%s); samehost/samenet match loopback only",
			    origin, line, strerror(errno));
		return;
	}
	for (struct ifaddrs *i = ifa; i; i = i->ifa_next) {
		if (!i->ifa_addr)
			continue;
		if (i->ifa_addr->sa_family == AF_INET) {
			const struct sockaddr_in *a = (const struct sockaddr_in *)i->ifa_addr;
			const struct sockaddr_in *m = (const struct sockaddr_in *)i->ifa_netmask;
			add_if(hba, AF_INET, &a->sin_addr, m ? (const void *)&m->sin_addr : NULL, 4);
		} else if (i->ifa_addr->sa_family == AF_INET6) {
			const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)i->ifa_addr;
			const struct sockaddr_in6 *m = (const struct sockaddr_in6 *)i->ifa_netmask;
			add_if(hba, AF_INET6, &a->sin6_addr, m ? (const void *)&m->sin6_addr : NULL, 16);
		}
	}
	freeifaddrs(ifa);
}

/*
 * The address field(s) starting at fields[*fi]; advances *fi past them.
 * Returns NULL or why the line is malformed.
 */
static const char *parse_address(struct hba *hba, struct hba_rule *rule, const struct tokline *tl,
				 size_t *fi, const struct src_ctx *ctx)
{
	const struct token *t = single(&tl->fields[*fi]);
	const char *slash;
	char addr[INET6_ADDRSTRLEN + 1];
	size_t alen;

	if (!t)
		return "multiple values in the address field";
	(*fi)++;
	if (is_kw(t, "all")) {
		rule->addr = ADDR_ALL;
		return NULL;
	}
	if (is_kw(t, "samehost") || is_kw(t, "samenet")) {
		rule->addr = is_kw(t, "samehost") ? ADDR_SAMEHOST : ADDR_SAMENET;
		hba_load_interfaces(hba, ctx->origin, ctx->line);
		return NULL;
	}

	slash = strchr(t->str, '/');
	alen = slash ? (size_t)(slash - t->str) : strlen(t->str);
	if (alen < sizeof(addr)) {
		memcpy(addr, t->str, alen);
		addr[alen] = '\0';
	} else {
		addr[0] = '\0';
	}
	memset(&rule->net, 0, sizeof(rule->net));
	if (alen < sizeof(addr) && inet_pton(AF_INET, addr, rule->net.addr) == 1) {
		rule->net.family = AF_INET;
	} else if (alen < sizeof(addr) && inet_pton(AF_INET6, addr, rule->net.addr) == 1) {
		rule->net.family = AF_INET6;
	} else if (!slash && is_hostname(t->str)) {
		log_warning("%s:%d: host names are not supported (no DNS lookups here), the line never matches",
			    ctx->origin, ctx->line);
		rule->addr = ADDR_NEVER;
		return NULL;
	} else {
		return slash ? "invalid IP address before the CIDR mask" : "invalid IP address";
	}

	rule->addr = ADDR_NET;
	if (slash) {
		unsigned long bits = 0;
		unsigned max = rule->net.family == AF_INET ? 32 : 128;
		const char *p = slash + 1;
		if (!*p)
			return "empty CIDR mask length";
		for (; *p; p++) {
			if (!isdigit((unsigned char)*p))
				return "invalid CIDR mask length";
			bits = bits * 10 + (unsigned long)(*p - '0');
			if (bits > max)
				return "CIDR mask length out of range";
		}
		net_set_prefix(&rule->net, (unsigned)bits);
	} else {
		const struct token *m;
		if (*fi >= tl->n)
			return "end of line before the netmask";
		if (!(m = single(&tl->fields[*fi])))
			return "multiple values in the netmask field";
		if (inet_pton(rule->net.family, m->str, rule->net.mask) != 1)
			return "invalid netmask (or of another address family than the address)";
		(*fi)++;
	}
	net_apply_mask(&rule->net);
	return NULL;
}

/* The options of a gss line PostgreSQL's meaning is kept for (gss_auth.h). */
static bool gss_option(const char *opt, const char *eq)
{
	size_t n = (size_t)(eq - opt);
	return (n == 13 && strncmp(opt, "include_realm", n) == 0) || (n == 9 && strncmp(opt, "krb_realm", n) == 0);
}

/* Appends name=value to the ldap option string, quoting values that need it. */
static void options_append(struct strbuf *sb, const char *opt, const char *eq)
{
	const char *val = eq + 1;
	bool quote = !*val || strpbrk(val, " \t,#") != NULL;

	if (sb->len)
		sb_putc(sb, ' ');
	sb_put(sb, opt, (size_t)(eq - opt) + 1);
	if (quote)
		sb_putc(sb, '"');
	sb_put(sb, val, strlen(val));
	if (quote)
		sb_putc(sb, '"');
}

/* Options from fields[fi] on. Returns NULL or why the line is malformed. */
static const char *parse_options(struct hba_rule *rule, const struct tokline *tl, size_t fi,
				 bool unsupported, const struct src_ctx *ctx)
{
	struct strbuf opts = { 0 };

	for (; fi < tl->n; fi++) {
		for (size_t j = 0; j < tl->fields[fi].n; j++) {
			const char *opt = tl->fields[fi].tok[j].str;
			const char *eq = strchr(opt, '=');
			if (!eq || eq == opt) {
				free(opts.buf);
				return "authentication option not in name=value format";
			}
			if (eq - opt == 3 && strncmp(opt, "map", 3) == 0) {
				if (!eq[1]) {
					free(opts.buf);
					return "empty map= option";
				}
				free(rule->map);
				rule->map = xstrdup(eq + 1);
			} else if (rule->method == AUTH_TYPE_LDAP || (rule->method == AUTH_TYPE_GSS && gss_option(opt, eq))) {
				options_append(&opts, opt, eq);
			} else if (!unsupported) {
				log_warning("%s:%d: authentication option \"%.*s\" is not supported, ignored",
					    ctx->origin, ctx->line, (int)MIN(eq - opt, 64), opt);
			}
		}
	}
	rule->options = opts.buf;
	return NULL;
}

static void rule_free(struct hba_rule *rule)
{
	names_free(&rule->db);
	names_free(&rule->user);
	free(rule->map);
	free(rule->options);
}

/* Parses one tokenized line into *rule. Returns NULL or why the line is malformed. */
static const char *parse_rule(struct hba *hba, struct hba_rule *rule, const struct tokline *tl,
			      const struct src_ctx *ctx)
{
	const struct token *t;
	size_t fi = 0;
	size_t i;
	bool unsupported = false;

	memset(rule, 0, sizeof(*rule));
	rule->line = ctx->line;
	if (!(t = single(&tl->fields[fi++])))
		return "multiple values in the connection type field";
	for (i = 0; i < ARRAY_SIZE(conn_names); i++)
		if (strcmp(t->str, conn_names[i].name) == 0)
			break;
	if (i == ARRAY_SIZE(conn_names))
		return "unknown connection type";
	rule->conn = conn_names[i].conn;

	if (tl->n < (rule->conn == HBA_LOCAL ? 4u : 5u))
		return "too few fields (expected type, database, user, address for host lines, method)";
	names_build(&rule->db, &tl->fields[fi++], true, ctx);
	names_build(&rule->user, &tl->fields[fi++], false, ctx);
	if (rule->conn != HBA_LOCAL) {
		const char *why = parse_address(hba, rule, tl, &fi, ctx);
		if (why)
			return why;
	}

	if (fi >= tl->n)
		return "end of line before the authentication method";
	if (!(t = single(&tl->fields[fi++])))
		return "multiple values in the authentication method field";
	for (i = 0; i < ARRAY_SIZE(method_names); i++)
		if (strcmp(t->str, method_names[i].name) == 0)
			break;
	if (i == ARRAY_SIZE(method_names))
		return "unknown authentication method";
	rule->method = method_names[i].method;
	if (rule->method == AUTH_TYPE_ANY) {
		log_warning("%s:%d: authentication method \"%s\" is not supported%s, the line acts as reject",
			    ctx->origin, ctx->line, method_names[i].name,
			    strcmp(method_names[i].name, "gss") == 0 ? " (this pgvalve was built without GSSAPI)" : "");
		unsupported = true;
	} else if (rule->method == AUTH_TYPE_PEER && rule->conn != HBA_LOCAL) {
		log_warning("%s:%d: peer authentication works only on local lines, the line acts as reject",
			    ctx->origin, ctx->line);
		unsupported = true;
	} else if (rule->method == AUTH_TYPE_GSS && rule->conn == HBA_LOCAL) {
		/* as PostgreSQL: no Kerberos over a Unix socket */
		log_warning("%s:%d: gss authentication is not supported on local sockets, the line acts as reject",
			    ctx->origin, ctx->line);
		unsupported = true;
	} else if (rule->method == AUTH_TYPE_CERT && (rule->conn == HBA_LOCAL || rule->conn == HBA_HOSTNOSSL)) {
		log_warning("%s:%d: cert authentication needs TLS, the line acts as reject",
			    ctx->origin, ctx->line);
		unsupported = true;
	}
	const char *why = parse_options(rule, tl, fi, unsupported, ctx);
	if (why)
		return why;
	char ldap_why[300];	/* said now; its logins then fail with it (ldap_auth.h) */
	if (rule->method == AUTH_TYPE_LDAP &&
	    !ldap_auth_check_options(rule->options ? rule->options : "", ldap_why, sizeof(ldap_why)))
		log_warning("%s:%d: %s: its LDAP logins will fail", ctx->origin, ctx->line, ldap_why);
	if (unsupported) {
		rule->method = AUTH_TYPE_REJECT;
		free(rule->map);
		rule->map = NULL;
	}
	return NULL;
}

static const char *take_hba_line(void *arg, const struct tokline *tl, const struct src_ctx *ctx)
{
	struct hba *hba = arg;
	struct hba_rule rule;
	const char *why = parse_rule(hba, &rule, tl, ctx);

	if (why) {
		rule_free(&rule);
		return why;
	}
	hba->rules = array_reserve_one(hba->rules, hba->n, &hba->cap, sizeof(*hba->rules));
	hba->rules[hba->n++] = rule;
	return NULL;
}

struct hba *hba_parse(const char *text, size_t len, const char *origin)
{
	struct hba *hba = xcalloc(1, sizeof(*hba));
	for_each_rule_line(text, len, origin, 0, take_hba_line, hba);
	return hba;
}

struct hba *hba_load(const char *path)
{
	size_t len = 0;
	char *text = read_text_file(path, &len);
	if (!text) {
		log_error("could not read auth_hba_file \"%s\": %s", path, strerror(errno));
		return NULL;
	}
	struct hba *hba = hba_parse(text, len, path);
	free(text);
	return hba;
}

void hba_free(struct hba *hba)
{
	if (!hba)
		return;
	for (size_t i = 0; i < hba->n; i++)
		rule_free(&hba->rules[i]);
	free(hba->rules);
	free(hba->ifs);
	free(hba);
}

size_t hba_rule_count(const struct hba *hba)
{
	return hba ? hba->n : 0;
}

/* ------------------------------------------------------------ matching */

static bool addr_match(const struct hba *hba, const struct hba_rule *rule, const struct client_addr *ca)
{
	switch (rule->addr) {
	case ADDR_ALL:
		return true;
	case ADDR_NET:
		return ca && net_contains(&rule->net, ca);
	case ADDR_SAMEHOST:
	case ADDR_SAMENET:
		if (!ca)
			return false;
		for (size_t i = 0; i < hba->nifs; i++) {
			struct net net = hba->ifs[i];
			if (rule->addr == ADDR_SAMEHOST)
				memset(net.mask, 0xff, sizeof(net.mask));
			net_apply_mask(&net);
			if (net_contains(&net, ca))
				return true;
		}
		return false;
	case ADDR_NONE:
	case ADDR_NEVER:
		break;
	}
	return false;
}

static bool conn_match(enum hba_conn conn, const struct hba_request *req)
{
	switch (conn) {
	case HBA_LOCAL:
		return req->is_unix;
	case HBA_HOST:
		return !req->is_unix;
	case HBA_HOSTSSL:
		return !req->is_unix && req->is_tls;
	case HBA_HOSTNOSSL:
		return !req->is_unix && !req->is_tls;
	case HBA_HOSTGSSENC:
	case HBA_HOSTNOGSSENC:
		break;
	}
	return false;
}

void hba_match(const struct hba *hba, const struct hba_request *req, struct hba_match *out)
{
	struct client_addr ca;
	bool have_addr;
	const char *db, *user;

	memset(out, 0, sizeof(*out));
	out->method = AUTH_TYPE_REJECT;
	if (!hba || !req)
		return;
	db = req->dbname ? req->dbname : "";
	user = req->user ? req->user : "";
	have_addr = !req->is_unix && client_addr_from(req->addr, &ca);
	for (size_t i = 0; i < hba->n; i++) {
		const struct hba_rule *rule = &hba->rules[i];
		if (!conn_match(rule->conn, req))
			continue;
		if (!req->is_unix && !addr_match(hba, rule, have_addr ? &ca : NULL))
			continue;
		/*
		 * As PostgreSQL: a physical replication connection names no
		 * database, so only "replication" matches it, and that keyword
		 * matches nothing else (logical ones match by database name).
		 */
		bool db_ok = req->physical_replication ? rule->db.replication : names_match(&rule->db, db, user);
		if (!db_ok || !names_match(&rule->user, user, db))
			continue;
		out->method = rule->method;
		out->map = rule->map;
		out->line = rule->line;
		out->options = rule->options;
		return;
	}
}

/* ------------------------------------------------------------ ident maps */

struct ident_entry {
	char *map;
	char *system_user;	/* as written; a regex when it starts with '/' */
	bool is_regex;
	regex_t re;
	char *db_user;
	bool db_all;
	int line;
};

struct ident_map {
	struct ident_entry *e;
	size_t n, cap;
};

/*
 * Bounds on a system_user regex. glibc's regcomp() copies the subexpression
 * under '+' (x+ becomes x x*) and under {m,n} (n copies), so stacked or
 * nested repetitions multiply: "t" followed by 21 '+' is 2^21 copies and
 * about 2 GB of memory at load. Its epsilon closures then cost about the
 * square of the copies under '*' or '?': "t*" and 11 '+' (2048 copies) took
 * seconds, so the bound is low; 256 still takes a user name pattern such as
 * ([a-z0-9._-]{1,63}) four times over. The ident file is the operator's,
 * but one typo in it must not take the pooler down at start-up or reload.
 */
#define IDENT_REGEX_MAX_LEN		1024
#define IDENT_REGEX_MAX_QUANTIFIERS	64
#define IDENT_REGEX_MAX_COPIES		256	/* estimated atoms after expansion */
#define IDENT_REGEX_MAX_DEPTH		32	/* nested parentheses */

static size_t sat_mul(size_t a, size_t b)
{
	return (b != 0 && a > (IDENT_REGEX_MAX_COPIES + 1) / b) ? IDENT_REGEX_MAX_COPIES + 1 : a * b;
}

static size_t sat_add(size_t a, size_t b)
{
	size_t s = a + b;
	return s > IDENT_REGEX_MAX_COPIES ? IDENT_REGEX_MAX_COPIES + 1 : s;
}

/* Index just past the bracket expression opening at re[i] ('['), or len if it is unterminated. */
static size_t skip_bracket(const char *re, size_t len, size_t i)
{
	i++;
	if (i < len && re[i] == '^')
		i++;
	if (i < len && re[i] == ']')
		i++;	/* a leading ']' is a member */
	while (i < len && re[i] != ']') {
		if (re[i] == '[' && i + 1 < len && (re[i + 1] == ':' || re[i + 1] == '.' || re[i + 1] == '=')) {
			char close = re[i + 1];
			i += 2;
			while (i + 1 < len && !(re[i] == close && re[i + 1] == ']'))
				i++;
			i += 2;
			continue;
		}
		i++;
	}
	return i < len ? i + 1 : len;
}

/*
 * Reads an interval "{m}", "{m,}", "{m,n}" or "{,n}" at re[i]; returns the
 * number of copies regcomp makes of the preceding atom and sets *end past
 * the '}'. glibc reads "{,n}" as "{0,n}" (and "{,}" as '*'), so those count
 * too. 0 if it is not a well-formed interval (regcomp then judges it).
 */
static size_t interval_copies(const char *re, size_t len, size_t i, size_t *end)
{
	size_t m = 0, n = 0;
	bool has_n = false, comma = false, digits = false;

	for (i++; i < len && isdigit((unsigned char)re[i]); i++, digits = true)
		m = m < 100000 ? m * 10 + (size_t)(re[i] - '0') : m;
	if (i < len && re[i] == ',') {
		comma = true;
		for (i++; i < len && isdigit((unsigned char)re[i]); i++, has_n = true)
			n = n < 100000 ? n * 10 + (size_t)(re[i] - '0') : n;
	}
	if ((!digits && !comma) || i >= len || re[i] != '}')
		return 0;
	*end = i + 1;
	if (has_n)
		return n > 0 ? n : 1;
	return comma ? m + 1 : (m > 0 ? m : 1);
}

/*
 * Why the regex re (without its leading '/') is refused, or NULL. Estimates
 * the atoms regcomp would build: each atom counts 1, a group the sum of its
 * contents, and a repetition multiplies what it repeats by the copies made.
 * Syntax errors are left to regcomp.
 */
static const char *ident_regex_too_big(const char *re)
{
	size_t len = strlen(re), quantifiers = 0, depth = 0;
	size_t sum[IDENT_REGEX_MAX_DEPTH + 1] = { 0 };	/* atoms so far in each open group */
	size_t last[IDENT_REGEX_MAX_DEPTH + 1] = { 0 };	/* atoms of the last item, 0 after '|' or '(' */
	bool after_quantifier = false;			/* the last item was a repetition operator */

	if (len > IDENT_REGEX_MAX_LEN)
		return "regular expression too long (at most 1024 bytes)";
	for (size_t i = 0; i < len;) {
		size_t atom = 1, copies = 0, next = i + 1;
		switch (re[i]) {
		case '\\':
			next = i + 2 <= len ? i + 2 : len;
			break;
		case '[':
			next = skip_bracket(re, len, i);
			break;
		case '(':
			if (depth == IDENT_REGEX_MAX_DEPTH)
				return "regular expression nested too deeply (at most 32 levels of parentheses)";
			depth++;
			sum[depth] = last[depth] = 0;
			after_quantifier = false;
			i = next;
			continue;
		case ')':
			if (depth > 0) {
				atom = sum[depth] > 0 ? sum[depth] : 1;
				depth--;
			}
			break;
		case '|':
			last[depth] = 0;
			after_quantifier = false;
			i = next;
			continue;
		case '*':
		case '?':
			copies = 1;
			break;
		case '+':
			copies = 2;
			break;
		case '{':
			copies = interval_copies(re, len, i, &next);
			break;
		}
		if (copies > 0 && after_quantifier)
			return "regular expression has stacked repetition operators (such as \"a*+\")";
		after_quantifier = copies > 0 && last[depth] > 0;
		if (after_quantifier) {
			/* the repeated item grows from last to last * copies atoms */
			if (++quantifiers > IDENT_REGEX_MAX_QUANTIFIERS)
				return "regular expression has too many repetition operators (at most 64)";
			sum[depth] = sat_add(sum[depth], sat_mul(last[depth], copies - 1));
			last[depth] = sat_mul(last[depth], copies);
		} else {
			if (copies > 0 && re[i] == '{')
				next = i + 1;	/* nothing to repeat: a literal '{' */
			sum[depth] = sat_add(sum[depth], atom);
			last[depth] = atom;
		}
		if (sum[depth] > IDENT_REGEX_MAX_COPIES)
			return "regular expression too complex (its repetitions would expand beyond 256 atoms)";
		i = next;
	}
	return NULL;
}

static const char *parse_ident_line(struct ident_entry *e, const struct tokline *tl, const struct src_ctx *ctx)
{
	const struct token *map, *sys, *db;

	memset(e, 0, sizeof(*e));
	e->line = ctx->line;
	if (tl->n != 3)
		return "expected three fields: map name, system user, database user";
	map = single(&tl->fields[0]);
	sys = single(&tl->fields[1]);
	db = single(&tl->fields[2]);
	if (!map || !sys || !db)
		return "multiple values in an ident map field";
	if (!db->quoted && db->str[0] == '+')
		return "group names (+group) are not supported";
	if (!db->quoted && db->str[0] == '/')
		return "regular expressions in the database user field are not supported";
	if (sys->str[0] == '/') {
		const char *why = ident_regex_too_big(sys->str + 1);
		if (why)
			return why;
		int rc = regcomp(&e->re, sys->str + 1, REG_EXTENDED);
		if (rc != 0) {
			char err[128];
			regerror(rc, &e->re, err, sizeof(err));
			log_warning("%s:%d: invalid regular expression: %s", ctx->origin, ctx->line, err);
			return "bad regular expression";
		}
		e->is_regex = true;
		if (strstr(db->str, "\\1") && e->re.re_nsub < 1) {
			regfree(&e->re);
			e->is_regex = false;
			return "\\1 in the database user but the regular expression has no capture group";
		}
	}
	e->map = xstrdup(map->str);
	e->system_user = xstrdup(sys->str);
	e->db_user = xstrdup(db->str);
	e->db_all = is_kw(db, "all");
	return NULL;
}

static const char *take_ident_line(void *arg, const struct tokline *tl, const struct src_ctx *ctx)
{
	struct ident_map *m = arg;
	struct ident_entry e;
	const char *why = parse_ident_line(&e, tl, ctx);

	if (why)
		return why;
	m->e = array_reserve_one(m->e, m->n, &m->cap, sizeof(*m->e));
	m->e[m->n++] = e;
	return NULL;
}

struct ident_map *ident_parse(const char *text, size_t len, const char *origin)
{
	struct ident_map *m = xcalloc(1, sizeof(*m));
	for_each_rule_line(text, len, origin, 0, take_ident_line, m);
	return m;
}

struct ident_map *ident_load(const char *path)
{
	size_t len = 0;
	char *text = read_text_file(path, &len);
	if (!text) {
		log_error("could not read auth_ident_file \"%s\": %s", path, strerror(errno));
		return NULL;
	}
	struct ident_map *m = ident_parse(text, len, path);
	free(text);
	return m;
}

void ident_free(struct ident_map *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->n; i++) {
		if (m->e[i].is_regex)
			regfree(&m->e[i].re);
		free(m->e[i].map);
		free(m->e[i].system_user);
		free(m->e[i].db_user);
	}
	free(m->e);
	free(m);
}

/* db_user of a regex line with its first \1 replaced by the capture, compared to want. */
static bool regex_db_user_eq(const struct ident_entry *e, const char *sys, const regmatch_t *cap, const char *want)
{
	const char *ref = strstr(e->db_user, "\\1");
	size_t pre, caplen, post;

	if (!ref)
		return strcmp(e->db_user, want) == 0;
	pre = (size_t)(ref - e->db_user);
	caplen = cap->rm_so >= 0 ? (size_t)(cap->rm_eo - cap->rm_so) : 0;
	post = strlen(ref + 2);
	if (strlen(want) != pre + caplen + post)
		return false;
	return memcmp(want, e->db_user, pre) == 0
		&& (caplen == 0 || memcmp(want + pre, sys + cap->rm_so, caplen) == 0)
		&& memcmp(want + pre + caplen, ref + 2, post) == 0;
}

bool ident_check(const struct ident_map *m, const char *map, const char *system_user, const char *db_user)
{
	if (!m || !map || !system_user || !db_user)
		return false;
	for (size_t i = 0; i < m->n; i++) {
		const struct ident_entry *e = &m->e[i];
		if (strcmp(e->map, map) != 0)
			continue;
		if (e->is_regex) {
			regmatch_t match[2];
			if (regexec(&e->re, system_user, 2, match, 0) != 0)
				continue;
			if (e->db_all || regex_db_user_eq(e, system_user, &match[1], db_user))
				return true;
		} else if (strcmp(e->system_user, system_user) == 0) {
			if (e->db_all || strcmp(e->db_user, db_user) == 0)
				return true;
		}
	}
	return false;
}
