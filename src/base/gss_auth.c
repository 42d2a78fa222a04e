/*
 * gss_auth.c - the GSSAPI acceptor for client logins (see gss_auth.h).
 *
 * Owns one acceptor credential per process (acceptor below, with the
 * settings it was acquired for) and each exchange's security context.
 * Touches no connection, logs nothing: auth.c frames the tokens and logs
 * what this returns.
 */
#include "common.h"
#include "gss_auth.h"

#ifdef PGVALVE_GSSAPI

#include <gssapi/gssapi.h>
#include <gssapi/gssapi_ext.h>
#include <gssapi/gssapi_krb5.h>

#define PRINCIPAL_MAX 512
#define REALM_MAX 256

struct gss_auth {
	gss_ctx_id_t ctx;
	gss_buffer_desc out;		/* the last output token, released on the next step */
	bool include_realm;
	char krb_realm[REALM_MAX];
	char principal[PRINCIPAL_MAX];
};

/*
 * The acceptor credential and the keytab it came from (process state). It
 * is for any key of the keytab (a credential for one name would leak in MIT
 * 1.20 whenever the keytab lacks it); the service is checked on the
 * accepted context instead (target_service_ok).
 */
static struct {
	gss_cred_id_t cred;
	char *keyfile;
} acceptor = { GSS_C_NO_CREDENTIAL, NULL };

bool gss_auth_supported(void)
{
	return true;
}

/* "name=value" pairs separated by blanks, a value perhaps in double quotes (hba.c's form). */
static void parse_options(struct gss_auth *g, const char *s)
{
	char name[64], value[REALM_MAX];
	while (s && *s) {
		s += strspn(s, " \t");
		size_t nlen = strcspn(s, "= \t");
		if (!*s || s[nlen] != '=')
			break;
		snprintf(name, sizeof(name), "%.*s", (int)MIN(nlen, sizeof(name) - 1), s);
		s += nlen + 1;
		bool quoted = *s == '"';
		s += quoted;
		size_t vlen = strcspn(s, quoted ? "\"" : " \t");
		snprintf(value, sizeof(value), "%.*s", (int)MIN(vlen, sizeof(value) - 1), s);
		s += vlen + (quoted && s[vlen] == '"');
		if (strcmp(name, "include_realm") == 0)
			g->include_realm = strcmp(value, "1") == 0;	/* as PostgreSQL: only "1" keeps it */
		else if (strcmp(name, "krb_realm") == 0)
			strlcpy_s(g->krb_realm, value, sizeof(g->krb_realm));
	}
}

struct gss_auth *gss_auth_new(const char *hba_options)
{
	struct gss_auth *g = xcalloc(1, sizeof(*g));
	g->ctx = GSS_C_NO_CONTEXT;
	g->include_realm = true;	/* PostgreSQL's default since 9.5 */
	parse_options(g, hba_options);
	return g;
}

void gss_auth_free(struct gss_auth *g)
{
	OM_uint32 minor;
	if (!g)
		return;
	if (g->out.length)
		gss_release_buffer(&minor, &g->out);
	if (g->ctx != GSS_C_NO_CONTEXT)
		gss_delete_sec_context(&minor, &g->ctx, GSS_C_NO_BUFFER);
	free(g);
}

/* GSSAPI's words for a status: the major code's, then the mechanism's. */
static void status_text(const char *what, OM_uint32 major, OM_uint32 minor, char *err, size_t errsize)
{
	size_t used = (size_t)snprintf(err, errsize, "%s", what);
	OM_uint32 codes[2] = { major, minor }, ctx_minor;
	int types[2] = { GSS_C_GSS_CODE, GSS_C_MECH_CODE };
	for (int i = 0; i < 2 && used < errsize; i++) {
		OM_uint32 more = 0;
		if (i == 1 && minor == 0)
			break;
		do {
			gss_buffer_desc msg = GSS_C_EMPTY_BUFFER;
			if (GSS_ERROR(gss_display_status(&ctx_minor, codes[i], types[i], GSS_C_NO_OID, &more, &msg)))
				break;
			if (used < errsize)
				used += (size_t)snprintf(err + used, errsize - used, ": %.*s", (int)msg.length,
							 (const char *)msg.value);
			gss_release_buffer(&ctx_minor, &msg);
		} while (more);
	}
}

/* The credential from the keytab, acquired again when auth_krb_server_keyfile changed. */
static gss_cred_id_t acceptor_cred(const char *keyfile, char *err, size_t errsize)
{
	OM_uint32 major, minor;
	if (acceptor.cred != GSS_C_NO_CREDENTIAL && acceptor.keyfile && strcmp(acceptor.keyfile, keyfile) == 0)
		return acceptor.cred;
	if (acceptor.cred != GSS_C_NO_CREDENTIAL)
		gss_release_cred(&minor, &acceptor.cred);
	free(acceptor.keyfile);
	acceptor.keyfile = NULL;

	gss_key_value_element_desc kt = { "keytab", keyfile };
	gss_key_value_set_desc store = { 1, &kt };
	major = gss_acquire_cred_from(&minor, GSS_C_NO_NAME, GSS_C_INDEFINITE, GSS_C_NO_OID_SET, GSS_C_ACCEPT,
				      keyfile[0] ? &store : GSS_C_NO_CRED_STORE, &acceptor.cred, NULL, NULL);
	if (GSS_ERROR(major)) {
		acceptor.cred = GSS_C_NO_CREDENTIAL;
		status_text("cannot use the server keytab", major, minor, err, errsize);
		return GSS_C_NO_CREDENTIAL;
	}
	acceptor.keyfile = xstrdup(keyfile);
	return acceptor.cred;
}

/* The ticket was for krb_srvname/<any host>: the service part of the accepted context's own name. */
static bool target_service_ok(struct gss_auth *g, const char *srvname, char *err, size_t errsize)
{
	OM_uint32 major, minor;
	gss_name_t target = GSS_C_NO_NAME;
	gss_buffer_desc text = GSS_C_EMPTY_BUFFER;
	major = gss_inquire_context(&minor, g->ctx, NULL, &target, NULL, NULL, NULL, NULL, NULL);
	if (!GSS_ERROR(major))
		major = gss_display_name(&minor, target, &text, NULL);
	if (GSS_ERROR(major)) {
		status_text("cannot read the service the ticket is for", major, minor, err, errsize);
		gss_release_name(&minor, &target);
		return false;
	}
	size_t n = strlen(srvname);
	bool ok = text.length > n && memcmp(text.value, srvname, n) == 0 && ((const char *)text.value)[n] == '/';
	if (!ok)
		snprintf(err, errsize, "the ticket is for \"%.*s\", not for the service krb_srvname \"%s\"",
			 (int)MIN(text.length, (size_t)200), (const char *)text.value, srvname);
	gss_release_buffer(&minor, &text);
	gss_release_name(&minor, &target);
	return ok;
}

/* The authenticated peer's name, as text. */
static bool peer_principal(struct gss_auth *g, gss_name_t src, char *err, size_t errsize)
{
	OM_uint32 minor;
	gss_buffer_desc text = GSS_C_EMPTY_BUFFER;
	OM_uint32 major = gss_display_name(&minor, src, &text, NULL);
	if (GSS_ERROR(major)) {
		status_text("cannot read the client's principal", major, minor, err, errsize);
		return false;
	}
	bool fits = text.length < sizeof(g->principal) && !memchr(text.value, '\0', text.length);
	if (fits)
		snprintf(g->principal, sizeof(g->principal), "%.*s", (int)text.length, (const char *)text.value);
	else
		snprintf(err, errsize, "the client's principal is too long");
	gss_release_buffer(&minor, &text);
	return fits;
}

enum gss_auth_result gss_auth_step(struct gss_auth *g, const char *keyfile, const char *srvname,
				   const void *token, size_t len, const void **out, size_t *out_len,
				   char *err, size_t errsize)
{
	OM_uint32 major, minor;
	*out = NULL;
	*out_len = 0;
	if (g->out.length)
		gss_release_buffer(&minor, &g->out);
	gss_cred_id_t cred = acceptor_cred(keyfile ? keyfile : "", err, errsize);
	if (cred == GSS_C_NO_CREDENTIAL)
		return GSS_AUTH_FAILED;
	gss_buffer_desc in = { len, (void *)token };
	gss_name_t src = GSS_C_NO_NAME;
	major = gss_accept_sec_context(&minor, &g->ctx, cred, &in, GSS_C_NO_CHANNEL_BINDINGS, &src, NULL,
				       &g->out, NULL, NULL, NULL);
	if (GSS_ERROR(major)) {
		status_text("accepting the GSSAPI security context failed", major, minor, err, errsize);
		if (src != GSS_C_NO_NAME)
			gss_release_name(&minor, &src);
		return GSS_AUTH_FAILED;
	}
	*out = g->out.value;
	*out_len = g->out.length;
	if (major & GSS_S_CONTINUE_NEEDED) {
		if (src != GSS_C_NO_NAME)
			gss_release_name(&minor, &src);
		return GSS_AUTH_CONTINUE;
	}
	bool named = peer_principal(g, src, err, errsize);
	gss_release_name(&minor, &src);
	if (!named || !target_service_ok(g, srvname && srvname[0] ? srvname : "postgres", err, errsize))
		return GSS_AUTH_FAILED;
	return GSS_AUTH_DONE;
}

bool gss_auth_system_user(const struct gss_auth *g, char *out, size_t size, char *err, size_t errsize)
{
	const char *at = strchr(g->principal, '@');
	if (g->krb_realm[0]) {
		if (!at) {
			snprintf(err, errsize, "GSSAPI did not return a realm but realm matching was requested");
			return false;
		}
		if (strcmp(at + 1, g->krb_realm) != 0) {
			snprintf(err, errsize, "GSSAPI realm (%s) and configured realm (%s) do not match", at + 1,
				 g->krb_realm);
			return false;
		}
	}
	size_t n = at && !g->include_realm ? (size_t)(at - g->principal) : strlen(g->principal);
	snprintf(out, size, "%.*s", (int)n, g->principal);
	return n < size;
}

const char *gss_auth_principal(const struct gss_auth *g)
{
	return g->principal;
}

#else /* !PGVALVE_GSSAPI */

bool gss_auth_supported(void)
{
	return false;
}

struct gss_auth *gss_auth_new(const char *hba_options)
{
	(void)hba_options;
	return NULL;
}

void gss_auth_free(struct gss_auth *g)
{
	(void)g;
}

enum gss_auth_result gss_auth_step(struct gss_auth *g, const char *keyfile, const char *srvname,
				   const void *token, size_t len, const void **out, size_t *out_len,
				   char *err, size_t errsize)
{
	(void)g, (void)keyfile, (void)srvname, (void)token, (void)len;
	*out = NULL;
	*out_len = 0;
	snprintf(err, errsize, "this pgvalve was built without GSSAPI");
	return GSS_AUTH_FAILED;
}

bool gss_auth_system_user(const struct gss_auth *g, char *out, size_t size, char *err, size_t errsize)
{
	(void)g, (void)out, (void)size;
	snprintf(err, errsize, "this pgvalve was built without GSSAPI");
	return false;
}

const char *gss_auth_principal(const struct gss_auth *g)
{
	(void)g;
	return "";
}

#endif
