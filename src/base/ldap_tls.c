/*
 * ldap_tls.c - TLS to LDAP directories on the event loop (ldap_tls.h has
 * the contract and why libldap's own TLS is not used).
 *
 * The session reads and writes the socket itself (SSL_set_fd); once
 * attached, liblber calls it as the transport layer of the handle's
 * Sockbuf, above the plain TCP layer ldap_init_fd() put there, which it
 * then no longer reaches. Owns the directories' SSL_CTX; touches no
 * client and no loop state.
 */
#include "common.h"
#include "ldap_tls.h"

#include <arpa/inet.h>
#include <errno.h>

#ifdef HAVE_LDAP

#define LDAP_DEPRECATED 0
#include <ldap.h>
#include <lber.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

struct ldap_tls {
	SSL *ssl;
	bool attached;
};

static SSL_CTX *ctx;
static int reqcert = LDAP_OPT_X_TLS_DEMAND;

/* libldap's global string option (ldap.conf, LDAPTLS_*), copied into buf; false when unset. */
static bool ldap_setting(int option, char *buf, size_t size)
{
	char *v = NULL;
	if (ldap_get_option(NULL, option, &v) != LDAP_OPT_SUCCESS || !v || !v[0]) {
		ldap_memfree(v);
		return false;
	}
	strlcpy_s(buf, v, size);
	ldap_memfree(v);
	return true;
}

/* OpenSSL's first queued error (or what), for a log line. */
static void ssl_reason(const char *what, char *why, size_t size)
{
	unsigned long e = ERR_get_error();
	char buf[256];
	if (e) {
		ERR_error_string_n(e, buf, sizeof(buf));
		snprintf(why, size, "%s: %s", what, buf);
	} else {
		snprintf(why, size, "%s", what);
	}
	ERR_clear_error();
}

/* The context, made once from libldap's settings; NULL with why filled. */
static SSL_CTX *client_ctx(char *why, size_t size)
{
	char ca[1024], cadir[1024], cert[1024], key[1024];
	if (ctx)
		return ctx;
	SSL_CTX *c = SSL_CTX_new(TLS_client_method());
	if (!c) {
		ssl_reason("cannot make a TLS context", why, size);
		return NULL;
	}
	ldap_get_option(NULL, LDAP_OPT_X_TLS_REQUIRE_CERT, &reqcert);
	bool have_ca = ldap_setting(LDAP_OPT_X_TLS_CACERTFILE, ca, sizeof(ca));
	bool have_dir = ldap_setting(LDAP_OPT_X_TLS_CACERTDIR, cadir, sizeof(cadir));
	bool ok = have_ca || have_dir ? SSL_CTX_load_verify_locations(c, have_ca ? ca : NULL, have_dir ? cadir : NULL) == 1 :
		SSL_CTX_set_default_verify_paths(c) == 1;
	if (!ok) {
		ssl_reason("cannot load TLS_CACERT/TLS_CACERTDIR", why, size);
		SSL_CTX_free(c);
		return NULL;
	}
	if (ldap_setting(LDAP_OPT_X_TLS_CERTFILE, cert, sizeof(cert)) &&
	    ldap_setting(LDAP_OPT_X_TLS_KEYFILE, key, sizeof(key)) &&
	    (SSL_CTX_use_certificate_chain_file(c, cert) != 1 ||
	     SSL_CTX_use_PrivateKey_file(c, key, SSL_FILETYPE_PEM) != 1)) {
		ssl_reason("cannot load TLS_CERT/TLS_KEY", why, size);
		SSL_CTX_free(c);
		return NULL;
	}
	bool check = reqcert != LDAP_OPT_X_TLS_NEVER && reqcert != LDAP_OPT_X_TLS_ALLOW;
	SSL_CTX_set_verify(c, check ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, NULL);
	SSL_CTX_set_mode(c, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	ctx = c;
	return ctx;
}

struct ldap_tls *ldap_tls_new(int fd, const char *host, char *why, size_t size)
{
	SSL_CTX *c = client_ctx(why, size);
	if (!c)
		return NULL;
	SSL *ssl = SSL_new(c);
	if (!ssl || SSL_set_fd(ssl, fd) != 1) {
		ssl_reason("cannot start a TLS session", why, size);
		SSL_free(ssl);
		return NULL;
	}
	uint8_t addr[16];
	bool numeric = inet_pton(AF_INET, host, addr) == 1 || inet_pton(AF_INET6, host, addr) == 1;
	X509_VERIFY_PARAM *param = SSL_get0_param(ssl);
	bool ok = true;
	if (reqcert != LDAP_OPT_X_TLS_NEVER && reqcert != LDAP_OPT_X_TLS_ALLOW)	/* the name, as libldap checks it */
		ok = numeric ? X509_VERIFY_PARAM_set1_ip_asc(param, host) == 1 :
			X509_VERIFY_PARAM_set1_host(param, host, 0) == 1;
	if (ok && !numeric)
		ok = SSL_set_tlsext_host_name(ssl, host) == 1;	/* SNI, for names only (as libldap) */
	if (!ok) {
		ssl_reason("cannot set the directory's name for the certificate check", why, size);
		SSL_free(ssl);
		return NULL;
	}
	SSL_set_connect_state(ssl);
	struct ldap_tls *t = xcalloc(1, sizeof(*t));
	t->ssl = ssl;
	return t;
}

enum ldap_tls_status ldap_tls_handshake(struct ldap_tls *t, char *why, size_t size)
{
	ERR_clear_error();
	int rc = SSL_do_handshake(t->ssl);
	if (rc == 1)
		return LDAP_TLS_DONE;
	int e = SSL_get_error(t->ssl, rc);
	if (e == SSL_ERROR_WANT_READ)
		return LDAP_TLS_WANT_READ;
	if (e == SSL_ERROR_WANT_WRITE)
		return LDAP_TLS_WANT_WRITE;
	long verify = SSL_get_verify_result(t->ssl);
	if (verify != X509_V_OK) {
		snprintf(why, size, "certificate verify failed: %s", X509_verify_cert_error_string(verify));
		ERR_clear_error();
	} else if (e == SSL_ERROR_SYSCALL && !ERR_peek_error()) {
		snprintf(why, size, "the TLS handshake was cut off%s%s", errno ? ": " : "", errno ? strerror(errno) : "");
	} else {
		ssl_reason("TLS handshake failed", why, size);
	}
	return LDAP_TLS_FAILED;
}

/* ---------------------------------------------------------------- liblber's transport layer */

static int sbio_setup(Sockbuf_IO_Desc *d, void *arg)
{
	d->sbiod_pvt = arg;
	return 0;
}

static int sbio_remove(Sockbuf_IO_Desc *d)
{
	struct ldap_tls *t = d->sbiod_pvt;
	d->sbiod_pvt = NULL;
	if (t) {
		SSL_free(t->ssl);
		free(t);
	}
	return 0;
}

static int sbio_ctrl(Sockbuf_IO_Desc *d, int opt, void *arg)
{
	const struct ldap_tls *t = d->sbiod_pvt;
	if (opt == LBER_SB_OPT_DATA_READY && t && SSL_pending(t->ssl) > 0)
		return 1;
	return LBER_SBIOD_CTRL_NEXT(d, opt, arg);
}

/* SSL_read's or SSL_write's result as liblber wants it: bytes, 0 at the end, -1 with errno. */
static ber_slen_t sbio_result(SSL *ssl, int n)
{
	if (n > 0)
		return n;
	int e = SSL_get_error(ssl, n);
	ERR_clear_error();
	if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
		errno = EWOULDBLOCK;
		return -1;
	}
	if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && errno == 0))
		return 0;
	if (!errno)
		errno = EIO;
	return -1;
}

static ber_slen_t sbio_read(Sockbuf_IO_Desc *d, void *buf, ber_len_t len)
{
	struct ldap_tls *t = d->sbiod_pvt;
	errno = 0;
	return sbio_result(t->ssl, SSL_read(t->ssl, buf, (int)MIN(len, (ber_len_t)INT_MAX)));
}

static ber_slen_t sbio_write(Sockbuf_IO_Desc *d, void *buf, ber_len_t len)
{
	struct ldap_tls *t = d->sbiod_pvt;
	errno = 0;
	return sbio_result(t->ssl, SSL_write(t->ssl, buf, (int)MIN(len, (ber_len_t)INT_MAX)));
}

static int sbio_close(Sockbuf_IO_Desc *d)
{
	return 0;	/* the TCP layer below closes the socket */
}

static Sockbuf_IO sbio = {
	sbio_setup, sbio_remove, sbio_ctrl, sbio_read, sbio_write, sbio_close,
};

bool ldap_tls_attach(struct ldap_tls *t, void *ld)
{
	Sockbuf *sb = NULL;
	if (ldap_get_option(ld, LDAP_OPT_SOCKBUF, &sb) != LDAP_OPT_SUCCESS || !sb ||
	    ber_sockbuf_add_io(sb, &sbio, LBER_SBIOD_LEVEL_TRANSPORT, t) != 0)
		return false;
	t->attached = true;
	return true;
}

bool ldap_tls_pending(const struct ldap_tls *t)
{
	return t && SSL_pending(t->ssl) > 0;
}

void ldap_tls_free(struct ldap_tls *t)
{
	if (!t || t->attached)
		return;
	SSL_free(t->ssl);
	free(t);
}

#else /* !HAVE_LDAP: nothing calls these */

struct ldap_tls *ldap_tls_new(int fd, const char *host, char *why, size_t size)
{
	snprintf(why, size, "this pgvalve has no LDAP client");
	return NULL;
}

enum ldap_tls_status ldap_tls_handshake(struct ldap_tls *t, char *why, size_t size)
{
	return LDAP_TLS_FAILED;
}

bool ldap_tls_attach(struct ldap_tls *t, void *ld)
{
	return false;
}

bool ldap_tls_pending(const struct ldap_tls *t)
{
	return false;
}

void ldap_tls_free(struct ldap_tls *t)
{
}

#endif
