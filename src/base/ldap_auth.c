/*
 * ldap_auth.c - LDAP password checks on the event loop (ldap_auth.h has
 * the contract).
 *
 * One check is one LDAP connection, as in PostgreSQL: search+bind binds as
 * ldapbinddn (or anonymously), searches ldapbasedn for exactly one entry,
 * then binds again on the same connection as that entry with the user's
 * password; simple bind binds as ldapprefix + user + ldapsuffix at once.
 * Before the first request: a lookup (dns.h) unless the host is an
 * address, a non-blocking connect per address until one takes, and for
 * ldaps or StartTLS a handshake step per socket event (ldap_tls.h). Each
 * step is then one asynchronous request whose answer is read when its
 * socket is readable. Owns nothing outside this file; never touches a
 * client.
 */
#include "common.h"
#include "ldap_auth.h"
#include "config.h"
#include "dns.h"
#include "instance.h"
#include "ldap_tls.h"
#include "list.h"
#include "log.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/util.h>

#include <openssl/crypto.h>

#define LDAP_OPTS_MAX 2048		/* the option string, and the copies of its values */

struct ldap_opts {
	char buf[LDAP_OPTS_MAX];
	size_t used;
	const char *server, *scheme, *basedn, *binddn, *bindpasswd, *searchattribute, *searchfilter;
	const char *prefix, *suffix;
	int port;
	int scope;			/* from ldapurl; subtree otherwise */
	bool tls;
};

/* One name=value from *p (blanks and commas between pairs); false at the end or on a malformed pair. */
static bool next_pair(const char **p, char *key, size_t ksize, char *val, size_t vsize, bool *bad)
{
	const char *s = *p;
	size_t k = 0, v = 0;

	while (*s && (isspace((unsigned char)*s) || *s == ','))
		s++;
	if (!*s)
		return false;
	while (*s && *s != '=' && !isspace((unsigned char)*s) && k + 1 < ksize)
		key[k++] = *s++;
	key[k] = '\0';
	if (*s != '=' || k == 0 || isspace((unsigned char)s[1]) || !s[1]) {
		*bad = true;
		return false;
	}
	s++;
	if (*s == '"') {
		for (s++; *s && !(*s == '"' && s[1] != '"'); s++) {
			if (*s == '"')
				s++;	/* "" is one quote */
			if (v + 1 < vsize)
				val[v++] = *s;
		}
		if (*s != '"') {
			*bad = true;
			return false;
		}
		s++;
	} else {
		while (*s && !isspace((unsigned char)*s) && *s != ',')
			if (v + 1 < vsize)
				val[v++] = *s++;
			else
				s++;
	}
	val[v] = '\0';
	*p = s;
	return true;
}

void ldap_auth_mask_options(const char *options, char *out, size_t size)
{
	const char *p = options, *start;
	char key[64], val[LDAP_OPTS_MAX];
	bool bad = false;
	size_t len = 0;

	out[0] = '\0';
	for (start = p; next_pair(&p, key, sizeof(key), val, sizeof(val), &bad); start = p) {
		bool secret = strcmp(key, "ldapbindpasswd") == 0;
		while (*start && (isspace((unsigned char)*start) || *start == ','))
			start++;
		int n = secret ? snprintf(out + len, size - len, "%s%s=********", len ? " " : "", key) :
			snprintf(out + len, size - len, "%s%.*s", len ? " " : "", (int)(p - start), start);
		if (n < 0 || (size_t)n >= size - len)
			break;
		len += (size_t)n;
	}
	if (bad && len + 4 < size)
		strlcpy_s(out + len, len ? " ..." : "...", size - len);	/* never echo what could not be read */
}

#ifdef HAVE_LDAP

#define LDAP_DEPRECATED 0
#include <ldap.h>
#include <openldap.h>		/* ldap_init_fd */

bool ldap_auth_built(void)
{
	return true;
}

static const char *opts_keep(struct ldap_opts *o, const char *value)
{
	size_t n = strlen(value) + 1;
	if (o->used + n > sizeof(o->buf))
		return NULL;
	char *dst = o->buf + o->used;
	memcpy(dst, value, n);
	o->used += n;
	return dst;
}

static bool url_into_opts(struct ldap_opts *o, const char *url, char *why, size_t size)
{
	LDAPURLDesc *u = NULL;
	int rc = ldap_url_parse(url, &u);
	if (rc != LDAP_URL_SUCCESS) {
		snprintf(why, size, "could not parse ldapurl (error %d)", rc);
		return false;
	}
	bool ok = strcmp(u->lud_scheme, "ldap") == 0 || strcmp(u->lud_scheme, "ldaps") == 0;
	if (!ok)
		snprintf(why, size, "unsupported LDAP URL scheme \"%s\"", u->lud_scheme);
	if (ok && u->lud_host && u->lud_host[0])
		ok = (o->server = opts_keep(o, u->lud_host)) != NULL;
	if (ok)
		ok = (o->scheme = opts_keep(o, u->lud_scheme)) != NULL;
	if (ok && u->lud_dn)
		ok = (o->basedn = opts_keep(o, u->lud_dn)) != NULL;
	if (ok && u->lud_attrs && u->lud_attrs[0])
		ok = (o->searchattribute = opts_keep(o, u->lud_attrs[0])) != NULL;
	if (ok && u->lud_filter)
		ok = (o->searchfilter = opts_keep(o, u->lud_filter)) != NULL;
	if (u->lud_port)
		o->port = u->lud_port;
	o->scope = u->lud_scope;
	ldap_free_urldesc(u);
	if (!ok && !why[0])
		snprintf(why, size, "LDAP options too long");
	return ok;
}

/* One option into o; false with why filled. */
static bool opt_set(struct ldap_opts *o, const char *key, const char *val, char *why, size_t size)
{
	static const struct { const char *name; size_t off; } strs[] = {
		{ "ldapserver", offsetof(struct ldap_opts, server) },
		{ "ldapbasedn", offsetof(struct ldap_opts, basedn) },
		{ "ldapbinddn", offsetof(struct ldap_opts, binddn) },
		{ "ldapbindpasswd", offsetof(struct ldap_opts, bindpasswd) },
		{ "ldapsearchattribute", offsetof(struct ldap_opts, searchattribute) },
		{ "ldapsearchfilter", offsetof(struct ldap_opts, searchfilter) },
		{ "ldapprefix", offsetof(struct ldap_opts, prefix) },
		{ "ldapsuffix", offsetof(struct ldap_opts, suffix) },
	};
	for (size_t i = 0; i < ARRAY_SIZE(strs); i++) {
		if (strcmp(key, strs[i].name) == 0) {
			const char **slot = (const char **)((char *)o + strs[i].off);
			if (!(*slot = opts_keep(o, val)))
				snprintf(why, size, "LDAP options too long");
			return *slot != NULL;
		}
	}
	if (strcmp(key, "ldapport") == 0) {
		char *end;
		long port = strtol(val, &end, 10);
		if (*end || port < 1 || port > 65535) {
			snprintf(why, size, "invalid LDAP port number: \"%.20s\"", val);
			return false;
		}
		o->port = (int)port;
		return true;
	}
	if (strcmp(key, "ldapscheme") == 0) {
		if (strcmp(val, "ldap") != 0 && strcmp(val, "ldaps") != 0) {
			snprintf(why, size, "invalid ldapscheme value: \"%.20s\"", val);
			return false;
		}
		return (o->scheme = opts_keep(o, val)) != NULL;
	}
	if (strcmp(key, "ldaptls") == 0) {
		o->tls = strcmp(val, "1") == 0;
		return true;
	}
	if (strcmp(key, "ldapurl") == 0)
		return url_into_opts(o, val, why, size);
	snprintf(why, size, "invalid LDAP option \"%.40s\"", key);
	return false;
}

/* PostgreSQL's rules on which options go together. */
static bool opts_validate(const struct ldap_opts *o, char *why, size_t size)
{
	if ((o->prefix || o->suffix) &&
	    (o->basedn || o->binddn || o->bindpasswd || o->searchattribute || o->searchfilter)) {
		snprintf(why, size, "cannot use ldapbasedn, ldapbinddn, ldapbindpasswd, ldapsearchattribute, "
			 "ldapsearchfilter, or ldapurl together with ldapprefix");
		return false;
	}
	if (!o->prefix && !o->suffix && !o->basedn) {
		snprintf(why, size, "authentication method \"ldap\" requires argument \"ldapbasedn\", "
			 "\"ldapprefix\", or \"ldapsuffix\" to be set");
		return false;
	}
	if (o->searchattribute && o->searchfilter) {
		snprintf(why, size, "cannot use ldapsearchattribute together with ldapsearchfilter");
		return false;
	}
	if (o->tls && o->scheme && strcmp(o->scheme, "ldaps") == 0) {
		snprintf(why, size, "cannot use ldaptls=1 with ldapscheme=ldaps");
		return false;
	}
	if (!o->server || !o->server[0]) {
		snprintf(why, size, "ldapserver is required (pgvalve does not look up DNS SRV records)");
		return false;
	}
	return true;
}

static bool opts_parse(const char *options, struct ldap_opts *o, char *why, size_t size)
{
	char key[64], val[LDAP_OPTS_MAX];
	const char *p = options;
	bool bad = false;

	memset(o, 0, sizeof(*o));
	o->scope = LDAP_SCOPE_SUBTREE;
	why[0] = '\0';
	while (next_pair(&p, key, sizeof(key), val, sizeof(val), &bad))
		if (!opt_set(o, key, val, why, size))
			return false;
	if (bad) {
		snprintf(why, size, "LDAP options not in name=value form");
		return false;
	}
	if (!o->scheme)
		o->scheme = "ldap";
	if (!o->port)
		o->port = strcmp(o->scheme, "ldaps") == 0 ? LDAPS_PORT : LDAP_PORT;
	return opts_validate(o, why, size);
}

bool ldap_auth_check_options(const char *options, char *why, size_t size)
{
	struct ldap_opts *o = xcalloc(1, sizeof(*o));
	bool ok = opts_parse(options, o, why, size);
	secret_clear(o, sizeof(*o));
	free(o);
	return ok;
}

enum ldap_step {
	STEP_QUEUED,
	STEP_LOOKUP,		/* c-ares looks the current host up */
	STEP_CONNECT,		/* the non-blocking connect to the current address */
	STEP_TLS,		/* the TLS handshake: ldaps, or after StartTLS */
	STEP_STARTTLS,		/* ldaptls=1: the StartTLS request */
	STEP_SEARCH_BIND,	/* search+bind: as ldapbinddn, or anonymously */
	STEP_SEARCH,
	STEP_USER_BIND,		/* as the user's DN with the user's password */
};

struct ldap_auth_req {
	struct list_node node;		/* queued or active */
	enum ldap_step step;
	bool is_active;			/* on `active` (else `queued`) */
	struct ldap_opts opts;
	char user[256];
	char *password;
	char dn[1024];
	LDAP *ld;			/* made on the connected socket, which it then owns */
	int msgid;
	int fd;				/* the socket: ours until ld exists */
	struct event *io;
	short io_what;			/* what io waits for */
	struct event *timer;
	ldap_auth_done_fn done;
	void *arg;
	/* Which address is tried: the host_i-th host of ldapserver, its addr_i-th address of addr_count. */
	int host_i, addr_i, addr_count;
	char host[256];
	char last_error[200];		/* why the last address could not be used */
	struct dns_waiter dns;
	struct ldap_tls *tls;		/* owned until attached to ld; then ld's, still asked for pending bytes */
};

static struct list queued, active;
static struct event *pump_ev;	/* also says the lists are initialized */

static void close_socket(struct ldap_auth_req *req)
{
	if (req->io)
		event_free(req->io);
	req->io = NULL;
	if (req->fd >= 0 && !req->ld)
		close(req->fd);
	req->fd = -1;
}

static void req_free(struct ldap_auth_req *req)
{
	dns_cancel(&req->dns);
	if (req->timer)
		event_free(req->timer);
	ldap_tls_free(req->tls);	/* one not attached yet; an attached one goes with ld */
	close_socket(req);
	if (req->ld)
		ldap_unbind_ext(req->ld, NULL, NULL);	/* the socket is non-blocking: no wait */
	if (req->password) {
		secret_clear(req->password, strlen(req->password));
		free(req->password);
	}
	secret_clear(req, sizeof(*req));
	free(req);
}

static void pump_later(void)
{
	if (pump_ev)
		event_active(pump_ev, EV_TIMEOUT, 0);
}

/* Ends a check: off its list, freed, then its callback. */
static void finish(struct ldap_auth_req *req, enum ldap_outcome outcome, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void finish(struct ldap_auth_req *req, enum ldap_outcome outcome, const char *fmt, ...)
{
	char text[1400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	ldap_auth_done_fn done = req->done;
	void *arg = req->arg;
	list_remove(req->is_active ? &active : &queued, &req->node);
	req_free(req);
	pump_later();
	done(arg, outcome, text);
}

/* A call's error code; -1 says to look at the handle's own. */
static int ld_code(LDAP *ld, int rc)
{
	int err = rc;
	if (rc == -1 && ld)
		ldap_get_option(ld, LDAP_OPT_RESULT_CODE, &err);
	return err;
}

static const char *ld_error(LDAP *ld, int rc)
{
	return ldap_err2string(ld_code(ld, rc));
}

/* A libldap or directory error code as an outcome: the directory unreachable, or it answered no. */
static enum ldap_outcome outcome_of(int err)
{
	switch (err) {
	case LDAP_SERVER_DOWN:
	case LDAP_CONNECT_ERROR:
	case LDAP_TIMEOUT:
	case LDAP_UNAVAILABLE:
	case LDAP_BUSY:
		return LDAP_OUTCOME_UNAVAILABLE;
	default:
		return LDAP_OUTCOME_ERROR;
	}
}

static void on_io(evutil_socket_t fd, short what, void *arg);

/* Watches the socket for what (EV_READ or EV_WRITE). */
static bool watch(struct ldap_auth_req *req, short what)
{
	if (req->io && req->io_what != what) {
		event_free(req->io);
		req->io = NULL;
	}
	if (!req->io)
		req->io = event_new(pgv.base, req->fd, what | EV_PERSIST, on_io, req);
	req->io_what = what;
	if (req->io && event_add(req->io, NULL) == 0)
		return true;
	finish(req, LDAP_OUTCOME_ERROR, "could not watch the LDAP connection to %s", req->opts.server);
	return false;
}

/* The filter that finds the user's entry: ldapsearchfilter with $username, or (attribute=user). */
static void search_filter(const struct ldap_auth_req *req, char *out, size_t size)
{
	const char *pat = req->opts.searchfilter;
	if (!pat) {
		snprintf(out, size, "(%s=%s)", req->opts.searchattribute ? req->opts.searchattribute : "uid",
			 req->user);
		return;
	}
	size_t n = 0;
	while (*pat && n + 1 < size) {
		if (strncmp(pat, "$username", 9) == 0) {
			n += strlcpy_s(out + n, req->user, size - n);
			n = MIN(n, size - 1);
			pat += 9;
		} else {
			out[n++] = *pat++;
		}
	}
	out[n] = '\0';
}

/* The libldap call of the current step: it only queues the request on the non-blocking socket. */
static int issue_request(struct ldap_auth_req *req)
{
	const struct ldap_opts *o = &req->opts;
	struct berval cred;

	switch (req->step) {
	case STEP_STARTTLS:
		return ldap_start_tls(req->ld, NULL, NULL, &req->msgid);
	case STEP_SEARCH_BIND:
		cred.bv_val = (char *)(o->bindpasswd ? o->bindpasswd : "");
		cred.bv_len = strlen(cred.bv_val);
		return ldap_sasl_bind(req->ld, o->binddn ? o->binddn : "", LDAP_SASL_SIMPLE, &cred, NULL, NULL,
				      &req->msgid);
	case STEP_SEARCH: {
		char filter[1024];
		char *attrs[] = { (char *)LDAP_NO_ATTRS, NULL };
		search_filter(req, filter, sizeof(filter));
		return ldap_search_ext(req->ld, o->basedn, o->scope, filter, attrs, 0, NULL, NULL, NULL, 2, &req->msgid);
	}
	default:
		cred.bv_val = req->password;
		cred.bv_len = strlen(req->password);
		return ldap_sasl_bind(req->ld, req->dn, LDAP_SASL_SIMPLE, &cred, NULL, NULL, &req->msgid);
	}
}

/* Sends the request of the current step, then waits for its answer. */
static void send_step(struct ldap_auth_req *req)
{
	const struct ldap_opts *o = &req->opts;
	int rc = issue_request(req);
	if (rc != LDAP_SUCCESS) {
		finish(req, outcome_of(ld_code(req->ld, rc)), "could not talk to LDAP server \"%s\" port %d: %s", o->server,
		       o->port, ld_error(req->ld, rc));
		return;
	}
	watch(req, EV_READ);
}

/* The first step once connected (again after StartTLS). */
static void first_step(struct ldap_auth_req *req)
{
	if (req->opts.basedn) {
		req->step = STEP_SEARCH_BIND;
	} else {
		snprintf(req->dn, sizeof(req->dn), "%s%s%s", req->opts.prefix ? req->opts.prefix : "", req->user,
			 req->opts.suffix ? req->opts.suffix : "");
		req->step = STEP_USER_BIND;
	}
	send_step(req);
}

/* The handshake as far as the socket allows; once done, libldap talks through the session. */
static void tls_continue(struct ldap_auth_req *req)
{
	char why[300];
	switch (ldap_tls_handshake(req->tls, why, sizeof(why))) {
	case LDAP_TLS_WANT_READ:
		watch(req, EV_READ);
		return;
	case LDAP_TLS_WANT_WRITE:
		watch(req, EV_WRITE);
		return;
	case LDAP_TLS_DONE:
		if (!ldap_tls_attach(req->tls, req->ld)) {
			finish(req, LDAP_OUTCOME_ERROR, "could not start LDAP TLS session on server \"%s\": "
			       "libldap took no transport layer", req->opts.server);
			return;
		}
		first_step(req);
		return;
	default:
		finish(req, LDAP_OUTCOME_ERROR, "could not start LDAP TLS session on server \"%s\": %s", req->opts.server,
		       why);
		return;
	}
}

static void tls_start(struct ldap_auth_req *req)
{
	char why[300];
	req->tls = ldap_tls_new(req->fd, req->host, why, sizeof(why));
	if (!req->tls) {
		finish(req, LDAP_OUTCOME_ERROR, "could not start LDAP TLS session on server \"%s\": %s", req->opts.server,
		       why);
		return;
	}
	req->step = STEP_TLS;
	tls_continue(req);
}

/* The socket is connected: libldap takes it (ldap_init_fd); TLS first if asked. */
static void connected(struct ldap_auth_req *req)
{
	const struct ldap_opts *o = &req->opts;
	char url[400];
	int version = LDAP_VERSION3;
	bool v6 = strchr(req->host, ':') != NULL;
	snprintf(url, sizeof(url), "%s://%s%s%s:%d", o->scheme, v6 ? "[" : "", req->host, v6 ? "]" : "", o->port);
	if (ldap_init_fd(req->fd, LDAP_PROTO_TCP, url, &req->ld) != LDAP_SUCCESS) {
		req->ld = NULL;
		finish(req, LDAP_OUTCOME_ERROR, "could not initialize LDAP for server \"%s\"", o->server);
		return;
	}
	ldap_set_option(req->ld, LDAP_OPT_PROTOCOL_VERSION, &version);
	ldap_set_option(req->ld, LDAP_OPT_REFERRALS, LDAP_OPT_OFF);
	if (strcmp(o->scheme, "ldaps") == 0) {
		tls_start(req);
	} else if (o->tls) {
		req->step = STEP_STARTTLS;
		send_step(req);
	} else {
		first_step(req);
	}
}

/* The host_i-th host of ldapserver ("a b c") into req->host; false past the last. */
static bool current_host(struct ldap_auth_req *req)
{
	const char *p = req->opts.server;
	for (int i = 0;; i++) {
		p += strspn(p, " ");
		size_t len = strcspn(p, " ");
		if (!len)
			return false;
		if (i == req->host_i) {
			snprintf(req->host, sizeof(req->host), "%.*s", (int)MIN(len, sizeof(req->host) - 1), p);
			return true;
		}
		p += len;
	}
}

/* The address failed: the host's next one, else the next host. */
static void next_address(struct ldap_auth_req *req, const char *why)
{
	snprintf(req->last_error, sizeof(req->last_error), "%s", why);
	close_socket(req);
	if (++req->addr_i >= req->addr_count) {
		req->addr_i = 0;
		req->host_i++;
	}
}

/* Starts the non-blocking connect; false with next_address done when it failed at once. */
static bool connect_start(struct ldap_auth_req *req, const union pgv_sockaddr *sa, socklen_t len)
{
	req->fd = socket(sa->sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (req->fd < 0 || (connect(req->fd, &sa->sa, len) != 0 && errno != EINPROGRESS)) {
		next_address(req, strerror(errno));
		return false;
	}
	req->step = STEP_CONNECT;
	watch(req, EV_WRITE);	/* writable once connected or refused; also right after an immediate connect */
	return true;
}

static void on_dns(struct dns_waiter *w, const struct dns_addr *addr, const char *error);

/* Connects to the current address, moving along ldapserver's hosts and their addresses on failures. */
static void connect_next(struct ldap_auth_req *req)
{
	const struct ldap_opts *o = &req->opts;
	union pgv_sockaddr sa;
	socklen_t len;
	char err[300];

	while (current_host(req)) {
		int literal = dns_literal_address(req->host, o->port, &sa, &len, err, sizeof(err));
		if (literal == 0 || req->host[0] == '/' || req->host[0] == '@') {
			struct dns_addr a;
			req->dns.want = req->addr_i + 1;
			enum dns_status st = dns_lookup(req->host, &req->dns, on_dns, &a, err, sizeof(err));
			if (st == DNS_PENDING) {
				req->step = STEP_LOOKUP;
				return;
			}
			if (st == DNS_FAILED) {
				req->addr_count = 0;
				next_address(req, err);
				continue;
			}
			req->addr_count = a.count;
			dns_answer_address(&a, o->port, &sa, &len);
		} else if (literal < 0) {
			req->addr_count = 0;
			next_address(req, err);
			continue;
		} else {
			req->addr_count = 1;
		}
		if (connect_start(req, &sa, len))
			return;
	}
	finish(req, LDAP_OUTCOME_UNAVAILABLE, "could not talk to LDAP server \"%s\" port %d: %s", o->server, o->port,
	       req->last_error[0] ? req->last_error : "no address to connect to");
}

static void on_dns(struct dns_waiter *w, const struct dns_addr *addr, const char *error)
{
	struct ldap_auth_req *req = container_of(w, struct ldap_auth_req, dns);
	union pgv_sockaddr sa;
	socklen_t len;
	if (!addr) {
		req->addr_count = 0;
		next_address(req, error);
		connect_next(req);
		return;
	}
	req->addr_count = addr->count;
	dns_answer_address(addr, req->opts.port, &sa, &len);
	if (!connect_start(req, &sa, len))
		connect_next(req);
}

/* The connect ended: go on with the connection, or with the next address. */
static void connect_done(struct ldap_auth_req *req)
{
	int err = 0;
	socklen_t len = sizeof(err);
	if (getsockopt(req->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
		err = errno;
	if (err) {
		next_address(req, strerror(err));
		connect_next(req);
		return;
	}
	event_free(req->io);	/* from here on it watches for answers */
	req->io = NULL;
	connected(req);
}

/* The one entry the search found becomes the DN to bind as. */
static void search_done(struct ldap_auth_req *req, LDAPMessage *res)
{
	int n = ldap_count_entries(req->ld, res);
	char filter[1024];
	search_filter(req, filter, sizeof(filter));
	if (n != 1) {
		if (n == 0)
			finish(req, LDAP_OUTCOME_UNKNOWN_USER, "LDAP user \"%s\" does not exist: search for filter \"%s\" on server \"%s\" "
			       "returned no entries", req->user, filter, req->opts.server);
		else
			finish(req, LDAP_OUTCOME_ERROR, "LDAP user \"%s\" is not unique: search for filter \"%s\" on server \"%s\" "
			       "returned %s entries", req->user, filter, req->opts.server, n > 1 ? "several" : "no usable");
		return;
	}
	char *dn = ldap_get_dn(req->ld, ldap_first_entry(req->ld, res));
	if (!dn) {
		finish(req, LDAP_OUTCOME_ERROR, "could not get the DN of the entry matching \"%s\" on server \"%s\"", filter,
		       req->opts.server);
		return;
	}
	strlcpy_s(req->dn, dn, sizeof(req->dn));
	ldap_memfree(dn);
	req->step = STEP_USER_BIND;
	send_step(req);
}

/* An answer to the current step's request. */
static void step_done(struct ldap_auth_req *req, LDAPMessage *res)
{
	const struct ldap_opts *o = &req->opts;
	int err = LDAP_OTHER;
	int rc = ldap_parse_result(req->ld, res, &err, NULL, NULL, NULL, NULL, 0);
	if (rc != LDAP_SUCCESS)
		err = rc;
	if (req->step == STEP_SEARCH && (err == LDAP_SUCCESS || err == LDAP_SIZELIMIT_EXCEEDED)) {
		search_done(req, res);
		return;
	}
	if (err != LDAP_SUCCESS) {
		if (req->step == STEP_STARTTLS)
			finish(req, LDAP_OUTCOME_ERROR, "could not start LDAP TLS session on server \"%s\": %s", o->server,
			       ldap_err2string(err));
		else if (req->step == STEP_SEARCH_BIND)
			finish(req, outcome_of(err), "could not perform initial LDAP bind for ldapbinddn \"%s\" on server \"%s\": %s",
			       o->binddn ? o->binddn : "", o->server, ldap_err2string(err));
		else if (req->step == STEP_SEARCH)
			finish(req, outcome_of(err), "could not search LDAP on server \"%s\": %s", o->server, ldap_err2string(err));
		else
			finish(req, err == LDAP_INVALID_CREDENTIALS ? LDAP_OUTCOME_BAD_PASSWORD : outcome_of(err),
			       "LDAP login failed for user \"%s\" on server \"%s\": %s", req->dn, o->server,
			       ldap_err2string(err));
		return;
	}
	switch (req->step) {
	case STEP_STARTTLS:
		tls_start(req);
		return;
	case STEP_SEARCH_BIND:
		req->step = STEP_SEARCH;
		send_step(req);
		return;
	default:
		finish(req, LDAP_OUTCOME_OK, "%s", req->dn);
		return;
	}
}

static void on_io(evutil_socket_t fd, short what, void *arg)
{
	struct ldap_auth_req *req = arg;
	struct timeval zero = { 0, 0 };
	LDAPMessage *res = NULL;

	if (req->step == STEP_CONNECT) {
		connect_done(req);
		return;
	}
	if (req->step == STEP_TLS) {
		tls_continue(req);
		return;
	}
	int rc = ldap_result(req->ld, req->msgid, LDAP_MSG_ALL, &zero, &res);
	if (rc == 0) {
		if (ldap_tls_pending(req->tls))	/* decrypted already: the socket will not say so */
			event_active(req->io, EV_READ, 0);
		return;		/* not all of it yet */
	}
	if (rc < 0) {
		finish(req, LDAP_OUTCOME_UNAVAILABLE, "lost the connection to LDAP server \"%s\": %s", req->opts.server,
		       ld_error(req->ld, -1));
		return;
	}
	step_done(req, res);
	ldap_msgfree(res);
}

static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct ldap_auth_req *req = arg;
	finish(req, LDAP_OUTCOME_UNAVAILABLE, "no answer from LDAP server \"%s\" within auth_ldap_timeout (%.1f s)%s",
	       req->opts.server, (double)pgv.cfg->auth_ldap_timeout / USEC_PER_SEC,
	       !req->is_active ? ", still waiting for a turn (auth_ldap_max_concurrent)" :
	       req->step == STEP_LOOKUP ? ", looking up its address" : req->step == STEP_CONNECT ? ", connecting" :
	       req->step == STEP_TLS ? ", in the TLS handshake" : "");
}

/* A queued check takes its turn: it connects. */
static void begin(struct ldap_auth_req *req)
{
	list_remove(&queued, &req->node);
	list_append(&active, &req->node);
	req->is_active = true;
	connect_next(req);
}

static void pump(evutil_socket_t fd, short what, void *arg)
{
	int max = pgv.cfg->auth_ldap_max_concurrent > 0 ? pgv.cfg->auth_ldap_max_concurrent : 1;
	while (!list_empty(&queued) && (int)active.count < max)
		begin(container_of(list_first(&queued), struct ldap_auth_req, node));
}

struct ldap_auth_req *ldap_auth_start(const char *options, const char *user, const char *password,
				      ldap_auth_done_fn done, void *arg, char *why, size_t size)
{
	if (!password[0]) {
		snprintf(why, size, "empty password");	/* an LDAP bind without one would be anonymous */
		return NULL;
	}
	if (strlen(user) >= sizeof(((struct ldap_auth_req *)0)->user)) {
		snprintf(why, size, "user name too long for LDAP authentication");
		return NULL;
	}
	struct ldap_auth_req *req = xcalloc(1, sizeof(*req));
	req->fd = -1;
	if (!opts_parse(options, &req->opts, why, size)) {
		req_free(req);
		return NULL;
	}
	/* As PostgreSQL: no character that a search filter would need escaped. */
	if (req->opts.basedn && strpbrk(user, "*()\\/")) {
		snprintf(why, size, "invalid character in user name for LDAP authentication");
		req_free(req);
		return NULL;
	}
	if (!pump_ev) {
		list_init(&queued);
		list_init(&active);
		pump_ev = event_new(pgv.base, -1, 0, pump, NULL);
	}
	struct timeval tv = { (time_t)(pgv.cfg->auth_ldap_timeout / USEC_PER_SEC),
			      (suseconds_t)(pgv.cfg->auth_ldap_timeout % USEC_PER_SEC) };
	req->timer = evtimer_new(pgv.base, on_timeout, req);
	if (!pump_ev || !req->timer || (pgv.cfg->auth_ldap_timeout > 0 && evtimer_add(req->timer, &tv) != 0)) {
		snprintf(why, size, "out of memory");
		req_free(req);
		return NULL;
	}
	strlcpy_s(req->user, user, sizeof(req->user));
	req->password = xstrdup(password);
	req->done = done;
	req->arg = arg;
	req->step = STEP_QUEUED;
	list_append(&queued, &req->node);
	pump_later();
	return req;
}

void ldap_auth_cancel(struct ldap_auth_req *req)
{
	if (!req)
		return;
	list_remove(req->is_active ? &active : &queued, &req->node);
	req_free(req);
	pump_later();
}

#else /* !HAVE_LDAP */

bool ldap_auth_built(void)
{
	return false;
}

bool ldap_auth_check_options(const char *options, char *why, size_t size)
{
	snprintf(why, size, "LDAP authentication is not supported (pgvalve has no LDAP client)");
	return false;
}

struct ldap_auth_req *ldap_auth_start(const char *options, const char *user, const char *password,
				      ldap_auth_done_fn done, void *arg, char *why, size_t size)
{
	snprintf(why, size, "LDAP authentication is not supported (pgvalve has no LDAP client)");
	return NULL;
}

void ldap_auth_cancel(struct ldap_auth_req *req)
{
}

#endif
