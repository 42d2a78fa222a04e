/*
 * tls.c - builds and swaps the OpenSSL contexts (see tls.h).
 *
 * Owns the two SSL_CTX objects (process state, documented here): the one
 * clients handshake against and the one used towards PostgreSQL. Knows
 * nothing of sockets; netbuf.c drives the handshakes.
 *
 * The client context carries the tls-server-end-point hash of pgvalve's
 * certificate (SCRAM-SHA-256-PLUS), made once when the context is built
 * and kept with it, so a login that began before a reload binds to the
 * certificate its handshake used.
 */
#include "common.h"
#include "tls.h"
#include "tls_record.h"
#include "config.h"
#include "log.h"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <strings.h>

static struct {
	SSL_CTX *client_ctx;	/* pgvalve as TLS server, for clients */
	SSL_CTX *server_ctx;	/* pgvalve as TLS client, towards PostgreSQL */
	bool client_ready;
	bool server_verify_full;
} tlsg;

/*
 * OpenSSL's own text for the first error queued, system errors included
 * ("error:80000002:system library::No such file or directory"), after
 * PgBouncer 1.26's words for what failed.
 */
static void openssl_error(char *errbuf, size_t errsize, const char *what, const char *file)
{
	unsigned long e = ERR_get_error();
	char reason[256] = "unknown error";
	if (e)
		ERR_error_string_n(e, reason, sizeof(reason));
	ERR_clear_error();
	snprintf(errbuf, errsize, "%s%s%s%s: %s", what, file ? " \"" : "", file ? file : "", file ? "\"" : "", reason);
}

/* "secure" = TLS 1.2 and 1.3; "all" = TLS 1.0 and up; or a list like "tlsv1.2,tlsv1.3". */
static int set_protocols(SSL_CTX *ctx, const char *spec, char *errbuf, size_t errsize)
{
	int lo = 0, hi = 0;
	if (!spec[0] || strcasecmp(spec, "secure") == 0) {
		lo = TLS1_2_VERSION;
	} else if (strcasecmp(spec, "all") == 0 || strcasecmp(spec, "legacy") == 0) {
		lo = TLS1_VERSION;
	} else {
		static const struct { const char *name; int v; } names[] = {
			{ "tlsv1.0", TLS1_VERSION }, { "tlsv1", TLS1_VERSION }, { "tlsv1.1", TLS1_1_VERSION },
			{ "tlsv1.2", TLS1_2_VERSION }, { "tlsv1.3", TLS1_3_VERSION },
		};
		char copy[256];
		strlcpy_s(copy, spec, sizeof(copy));
		for (char *save = NULL, *tok = strtok_r(copy, ", \t", &save); tok; tok = strtok_r(NULL, ", \t", &save)) {
			int v = 0;
			for (size_t i = 0; i < ARRAY_SIZE(names); i++)
				if (strcasecmp(tok, names[i].name) == 0)
					v = names[i].v;
			if (!v) {
				snprintf(errbuf, errsize, "unknown TLS protocol \"%s\"", tok);
				return -1;
			}
			if (!lo || v < lo)
				lo = v;
			if (v > hi)
				hi = v;
		}
	}
	SSL_CTX_set_min_proto_version(ctx, lo);
	SSL_CTX_set_max_proto_version(ctx, hi);
	return 0;
}

static int set_ciphers(SSL_CTX *ctx, const char *ciphers, const char *tls13, char *errbuf, size_t errsize)
{
	/* PgBouncer's names for cipher sets; "default" leaves OpenSSL's choice. */
	static const struct { const char *name; const char *list; } aliases[] = {
		{ "default", NULL }, { "secure", "HIGH:!aNULL:!MD5:!3DES:!RC4" },
		{ "normal", "HIGH:MEDIUM:!aNULL:!MD5" }, { "fast", "HIGH:!aNULL:!MD5" },
		{ "all", "ALL:!aNULL" }, { "legacy", "ALL" },
	};
	const char *list = ciphers;
	for (size_t i = 0; i < ARRAY_SIZE(aliases); i++)
		if (strcasecmp(ciphers, aliases[i].name) == 0)
			list = aliases[i].list;
	if (list && list[0] && SSL_CTX_set_cipher_list(ctx, list) != 1) {
		openssl_error(errbuf, errsize, "failed to set ciphers", NULL);	/* PgBouncer's words */
		return -1;
	}
	if (tls13 && tls13[0] && SSL_CTX_set_ciphersuites(ctx, tls13) != 1) {
		openssl_error(errbuf, errsize, "failed to set the TLSv1.3 cipher suites", NULL);
		return -1;
	}
	return 0;
}

static int load_cert_key(SSL_CTX *ctx, const char *cert, const char *key, char *errbuf, size_t errsize)
{
	if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) {
		openssl_error(errbuf, errsize, "failed to load certificate file", cert);
		return -1;
	}
	if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
		openssl_error(errbuf, errsize, "failed to load private key file", key);
		return -1;
	}
	if (SSL_CTX_check_private_key(ctx) != 1) {
		openssl_error(errbuf, errsize, "private/public key mismatch", cert);
		return -1;
	}
	return 0;
}

/* ALPN for PostgreSQL 17's direct TLS: only "postgresql" is accepted. */
static int alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen, const unsigned char *in,
		       unsigned int inlen, void *arg)
{
	static const unsigned char proto[] = "\x0apostgresql";
	(void)ssl;
	(void)arg;
	if (SSL_select_next_proto((unsigned char **)out, outlen, proto, sizeof(proto) - 1, in, inlen) ==
	    OPENSSL_NPN_NEGOTIATED)
		return SSL_TLSEXT_ERR_OK;
	return SSL_TLSEXT_ERR_ALERT_FATAL;
}

/* The hash of a tls-server-end-point binding, kept as the client context's ex_data. */
struct end_point {
	size_t len;
	uint8_t hash[EVP_MAX_MD_SIZE];
};
static int end_point_index = -1;

static void end_point_free(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx, long argl, void *argp)
{
	(void)parent;
	(void)ad;
	(void)idx;
	(void)argl;
	(void)argp;
	free(ptr);
}

/*
 * RFC 5929 section 4.1: the certificate hashed with its signature's hash
 * function, SHA-256 in place of MD5 and SHA-1. 0 when the signature names
 * no hash (Ed25519): no binding then, as in PostgreSQL.
 */
static size_t end_point_hash(X509 *cert, uint8_t out[EVP_MAX_MD_SIZE])
{
	int mdnid = NID_undef;
	unsigned int len = 0;
	if (!cert || X509_get_signature_info(cert, &mdnid, NULL, NULL, NULL) != 1)
		return 0;
	if (mdnid == NID_md5 || mdnid == NID_sha1)
		mdnid = NID_sha256;
	const EVP_MD *md = mdnid == NID_undef ? NULL : EVP_get_digestbynid(mdnid);
	if (!md || X509_digest(cert, md, out, &len) != 1)
		return 0;
	return len;
}

static void end_point_attach(SSL_CTX *ctx)
{
	if (end_point_index < 0)
		end_point_index = SSL_CTX_get_ex_new_index(0, NULL, NULL, NULL, end_point_free);
	struct end_point *ep = xcalloc(1, sizeof(*ep));
	ep->len = end_point_hash(SSL_CTX_get0_certificate(ctx), ep->hash);
	if (end_point_index < 0 || SSL_CTX_set_ex_data(ctx, end_point_index, ep) != 1)
		free(ep);
}

static SSL_CTX *build_client_ctx(const struct config *cfg, bool *ready, char *errbuf, size_t errsize)
{
	*ready = false;
	if (cfg->client_tls_sslmode == TLS_SSLMODE_DISABLE)
		return NULL;
	if (!cfg->client_tls_cert_file[0] || !cfg->client_tls_key_file[0]) {
		snprintf(errbuf, errsize, "client_tls_sslmode needs client_tls_cert_file and client_tls_key_file");
		return NULL;
	}
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
	if (!ctx) {
		openssl_error(errbuf, errsize, "cannot create TLS context", NULL);
		return NULL;
	}
	/*
	 * RELEASE_BUFFERS: OpenSSL's ~34 kB of record buffers are freed while a
	 * connection has nothing in flight, so an idle TLS client costs a few kB
	 * instead of ~31 kB (test/bench/idle.sh --tls); PgBouncer does the same.
	 */
	SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
			 SSL_MODE_RELEASE_BUFFERS);
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
	if (set_protocols(ctx, cfg->client_tls_protocols, errbuf, errsize) < 0 ||
	    set_ciphers(ctx, cfg->client_tls_ciphers, cfg->client_tls13_ciphers, errbuf, errsize) < 0 ||
	    load_cert_key(ctx, cfg->client_tls_cert_file, cfg->client_tls_key_file, errbuf, errsize) < 0)
		goto fail;
	if (strcasecmp(cfg->client_tls_ecdhcurve, "auto") != 0 && cfg->client_tls_ecdhcurve[0] &&
	    SSL_CTX_set1_groups_list(ctx, cfg->client_tls_ecdhcurve) != 1) {
		openssl_error(errbuf, errsize, "failed to set ECDHE curve", NULL);
		goto fail;
	}
	if (strcasecmp(cfg->client_tls_dheparams, "none") != 0)
		SSL_CTX_set_dh_auto(ctx, 1);
	if (cfg->client_tls_sslmode >= TLS_SSLMODE_VERIFY_CA && !cfg->client_tls_ca_file[0]) {
		snprintf(errbuf, errsize, "client_tls_sslmode verify-ca/verify-full needs client_tls_ca_file");
		goto fail;
	}
	if (cfg->client_tls_ca_file[0]) {
		if (SSL_CTX_load_verify_locations(ctx, cfg->client_tls_ca_file, NULL) != 1) {
			openssl_error(errbuf, errsize, "failed to load CA", cfg->client_tls_ca_file);
			goto fail;
		}
		/* A certificate is asked for; verify-* modes (and auth_type cert) require one. */
		int mode = SSL_VERIFY_PEER;
		if (cfg->client_tls_sslmode >= TLS_SSLMODE_VERIFY_CA)
			mode |= SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
		SSL_CTX_set_verify(ctx, mode, NULL);
	}
	SSL_CTX_set_alpn_select_cb(ctx, alpn_select, NULL);
	end_point_attach(ctx);
	tls_record_prepare_ctx(ctx);	/* TLS 1.3 clients leave OpenSSL after the handshake (tls_record.h) */
	*ready = true;
	return ctx;
fail:
	SSL_CTX_free(ctx);
	return NULL;
}

static SSL_CTX *build_server_ctx(const struct config *cfg, char *errbuf, size_t errsize)
{
	if (cfg->server_tls_sslmode == TLS_SSLMODE_DISABLE)
		return NULL;
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	if (!ctx) {
		openssl_error(errbuf, errsize, "cannot create TLS context", NULL);
		return NULL;
	}
	SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
			 SSL_MODE_RELEASE_BUFFERS);	/* idle pooled servers too (see the client context) */
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
	if (set_protocols(ctx, cfg->server_tls_protocols, errbuf, errsize) < 0 ||
	    set_ciphers(ctx, cfg->server_tls_ciphers, cfg->server_tls13_ciphers, errbuf, errsize) < 0)
		goto fail;
	if (cfg->server_tls_cert_file[0] &&
	    load_cert_key(ctx, cfg->server_tls_cert_file, cfg->server_tls_key_file, errbuf, errsize) < 0)
		goto fail;
	if (cfg->server_tls_sslmode >= TLS_SSLMODE_VERIFY_CA) {
		/* Without server_tls_ca_file the system's CA store, as PgBouncer (and libpq's sslrootcert=system). */
		if (!cfg->server_tls_ca_file[0] && SSL_CTX_set_default_verify_paths(ctx) != 1) {
			openssl_error(errbuf, errsize, "failed to load the system CA store", NULL);
			goto fail;
		}
		if (cfg->server_tls_ca_file[0] && SSL_CTX_load_verify_locations(ctx, cfg->server_tls_ca_file, NULL) != 1) {
			openssl_error(errbuf, errsize, "failed to load CA", cfg->server_tls_ca_file);
			goto fail;
		}
		SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	} else {
		SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
	}
	return ctx;
fail:
	SSL_CTX_free(ctx);
	return NULL;
}

int tls_configure(const struct config *cfg, char *errbuf, size_t errsize)
{
	char err[512] = "";
	bool ready = false;
	SSL_CTX *cctx = build_client_ctx(cfg, &ready, err, sizeof(err));
	if (cfg->client_tls_sslmode != TLS_SSLMODE_DISABLE && !cctx) {
		snprintf(errbuf, errsize, "client TLS: %s", err);
		log_error("TLS setup failed: %s; keeping the previous TLS configuration", err);	/* 1.26's words */
		return -1;
	}
	SSL_CTX *sctx = build_server_ctx(cfg, err, sizeof(err));
	if (cfg->server_tls_sslmode != TLS_SSLMODE_DISABLE && !sctx) {
		snprintf(errbuf, errsize, "server TLS: %s", err);
		log_error("TLS setup failed: %s; keeping the previous TLS configuration", err);
		SSL_CTX_free(cctx);
		return -1;
	}
	SSL_CTX_free(tlsg.client_ctx);
	SSL_CTX_free(tlsg.server_ctx);
	tlsg.client_ctx = cctx;
	tlsg.server_ctx = sctx;
	tlsg.client_ready = ready;
	tlsg.server_verify_full = cfg->server_tls_sslmode == TLS_SSLMODE_VERIFY_FULL;
	return 0;
}

void tls_cleanup(void)
{
	SSL_CTX_free(tlsg.client_ctx);
	SSL_CTX_free(tlsg.server_ctx);
	tlsg.client_ctx = tlsg.server_ctx = NULL;
	tlsg.client_ready = false;
}

bool tls_client_side_ready(void)
{
	return tlsg.client_ready;
}

SSL *tls_new_client_ssl(void)
{
	return tlsg.client_ctx ? SSL_new(tlsg.client_ctx) : NULL;
}

SSL *tls_new_server_ssl(const char *host)
{
	if (!tlsg.server_ctx)
		return NULL;
	SSL *ssl = SSL_new(tlsg.server_ctx);
	if (ssl && host && host[0] && host[0] != '/') {
		struct in6_addr a6;
		struct in_addr a4;
		bool is_ip = inet_pton(AF_INET, host, &a4) == 1 || inet_pton(AF_INET6, host, &a6) == 1;
		if (!is_ip)
			SSL_set_tlsext_host_name(ssl, host);
		if (tlsg.server_verify_full) {
			X509_VERIFY_PARAM *vp = SSL_get0_param(ssl);
			if (is_ip)
				X509_VERIFY_PARAM_set1_ip_asc(vp, host);
			else
				X509_VERIFY_PARAM_set1_host(vp, host, 0);
		}
	}
	return ssl;
}

void tls_describe(SSL *ssl, char *buf, size_t size)
{
	if (!ssl) {
		buf[0] = '\0';
		return;
	}
	char kx[80] = "";
	EVP_PKEY *tmp = NULL;
	if (SSL_get_peer_tmp_key(ssl, &tmp) == 1 && tmp) {
		int nid = EVP_PKEY_id(tmp);
		char group[48];
		size_t glen = 0;
		if (nid == EVP_PKEY_DH)
			snprintf(kx, sizeof(kx), "/DH=%d", EVP_PKEY_get_bits(tmp));
		else if (nid == EVP_PKEY_EC && EVP_PKEY_get_group_name(tmp, group, sizeof(group), &glen) == 1)
			snprintf(kx, sizeof(kx), "/ECDH=%s", group);	/* e.g. prime256v1, secp384r1 */
		else
			snprintf(kx, sizeof(kx), "/ECDH=%s", OBJ_nid2sn(nid));	/* X25519, X448 */
		EVP_PKEY_free(tmp);
	}
	snprintf(buf, size, "%s/%s%s", SSL_get_version(ssl), SSL_get_cipher_name(ssl), kx);
}

bool tls_alpn_postgresql(const SSL *ssl)
{
	const unsigned char *alpn = NULL;
	unsigned int alpn_len = 0;
	if (ssl)
		SSL_get0_alpn_selected(ssl, &alpn, &alpn_len);
	return alpn_len == 10 && memcmp(alpn, "postgresql", 10) == 0;
}

bool tls_peer_common_name(SSL *ssl, char *buf, size_t size)
{
	if (!ssl || SSL_get_verify_result(ssl) != X509_V_OK)
		return false;
	X509 *cert = SSL_get1_peer_certificate(ssl);
	if (!cert)
		return false;
	int n = X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, buf, (int)size);
	X509_free(cert);
	return n > 0 && (size_t)n < size;
}

size_t tls_server_end_point(SSL *ssl, uint8_t out[TLS_END_POINT_MAX])
{
	if (!ssl)
		return 0;
	if (!SSL_is_server(ssl))	/* towards PostgreSQL: its certificate, per server connection */
		return end_point_hash(SSL_get0_peer_certificate(ssl), out);
	return tls_ctx_server_end_point(SSL_get_SSL_CTX(ssl), out);
}

size_t tls_ctx_server_end_point(SSL_CTX *ctx, uint8_t out[TLS_END_POINT_MAX])
{
	const struct end_point *ep = end_point_index < 0 || !ctx ? NULL : SSL_CTX_get_ex_data(ctx, end_point_index);
	if (!ep || !ep->len)
		return 0;
	memcpy(out, ep->hash, ep->len);
	return ep->len;
}
