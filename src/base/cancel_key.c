/*
 * cancel_key.c - BackendKeyData with the peer id inside, and the long keys
 * of protocol 3.2 clients with their owner's address and HMAC
 * (cancel_key.h has the layouts).
 *
 * Owns: this process's instance id and, without cancel_key_secret, its
 * random HMAC secret. Reads pgv.cfg at each use, so a reload of the
 * secret or the advertised address takes effect for the next key (keys
 * handed out under an old secret stop verifying).
 */
#include "common.h"
#include "cancel_key.h"
#include "config.h"
#include "crypto.h"
#include "dns.h"
#include "instance.h"
#include "log.h"

#include <arpa/inet.h>
#include <openssl/crypto.h>
#include <netinet/in.h>
#include <unistd.h>

#define CANCEL_KEY_MAC_AT 28
#define CANCEL_KEY_MAC_LEN (CANCEL_KEY_LONG_LEN - CANCEL_KEY_MAC_AT)

void cancel_key_make(int peer_id, uint32_t *pid, uint32_t *key)
{
	uint32_t r[2];
	crypto_random(r, sizeof(r));
	uint32_t p = r[0] & 0x7FFFFFFFu;	/* byte 0's high bit */
	uint32_t k = r[1];
	if (peer_id > 0) {
		p &= 0xFF0000FFu;
		p |= (uint32_t)(peer_id & 0xFF) << 16;		/* byte 1 */
		p |= (uint32_t)((peer_id >> 8) & 0xFF) << 8;	/* byte 2 */
	}
	/* byte 7: full TTL wherever the key may be forwarded (peers_dns sends it on with TTL 0) */
	if (peer_id > 0 || (pgv.cfg && pgv.cfg->peers_dns && pgv.cfg->peers_dns[0]))
		k |= CANCEL_KEY_TTL_MASK;
	*pid = p;
	*key = k;
}

int cancel_key_peer_id(uint32_t pid)
{
	return (int)(((pid >> 16) & 0xFF) | (((pid >> 8) & 0xFF) << 8));
}

/* ---------------------------------------------------------------- identity */

/* Drawn once per process (again in a forked child: each worker is an instance of its own). */
static struct {
	pid_t pid;
	uint8_t instance_id[4];
	uint8_t secret[32];
} self;

static void cancel_key_self_init(void)
{
	if (self.pid == getpid())
		return;
	self.pid = getpid();
	crypto_random(self.instance_id, sizeof(self.instance_id));
	crypto_random(self.secret, sizeof(self.secret));
}

static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static uint32_t get_be32(const uint8_t *p)
{
	return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

/* The HMAC of a long key (pid and bytes 0-27, TTL bits cleared) under secret. */
static void cancel_key_mac(uint32_t pid, const uint8_t *key, const uint8_t *secret, size_t secret_len,
			   uint8_t out[32])
{
	uint8_t msg[4 + CANCEL_KEY_MAC_AT];
	put_be32(msg, pid);
	memcpy(msg + 4, key, CANCEL_KEY_MAC_AT);
	msg[4 + 3] &= (uint8_t)~CANCEL_KEY_TTL_MASK;
	crypto_hmac_sha256(secret, secret_len, msg, sizeof(msg), out);
}

static bool cancel_key_mac_ok(const struct cancel_request *req, const uint8_t *secret, size_t secret_len)
{
	if (req->key_len != CANCEL_KEY_LONG_LEN || req->key[4] != CANCEL_KEY_FORMAT)
		return false;
	uint8_t mac[32];
	cancel_key_mac(req->pid, req->key, secret, secret_len, mac);
	return CRYPTO_memcmp(mac, req->key + CANCEL_KEY_MAC_AT, CANCEL_KEY_MAC_LEN) == 0;
}

/* This process's HMAC key: the fleet's secret, else its own random one. */
static void cancel_key_own_secret(const uint8_t **secret, size_t *len)
{
	const char *fleet = pgv.cfg->cancel_key_secret;
	cancel_key_self_init();
	if (fleet && fleet[0]) {
		*secret = (const uint8_t *)fleet;
		*len = strlen(fleet);
	} else {
		*secret = self.secret;
		*len = sizeof(self.secret);
	}
}

/* ---------------------------------------------------------------- owner address */

/* cancel_advertise_addr/_port, else the local end of fd; false if neither gives a TCP address. */
static bool cancel_key_advertised(int fd, bool is_unix, struct sockaddr_storage *ss)
{
	const char *host = pgv.cfg->cancel_advertise_addr;
	memset(ss, 0, sizeof(*ss));
	if (host && host[0]) {
		union pgv_sockaddr addr;
		socklen_t len;
		char err[256];
		int port = pgv.cfg->cancel_advertise_port ? pgv.cfg->cancel_advertise_port : pgv.cfg->listen_port;
		if (dns_literal_address(host, port, &addr, &len, err, sizeof(err)) != 1 ||
		    (addr.sa.sa_family != AF_INET && addr.sa.sa_family != AF_INET6)) {
			static char warned[128];	/* once per value, not once per login */
			if (strncmp(warned, host, sizeof(warned) - 1) != 0) {
				strlcpy_s(warned, host, sizeof(warned));
				log_warning("cancel_advertise_addr \"%s\" is not an IP address: long cancel keys name "
					    "no instance", host);
			}
			return false;
		}
		memcpy(ss, &addr, len);
		return true;
	}
	socklen_t len = sizeof(*ss);
	if (is_unix || getsockname(fd, (struct sockaddr *)ss, &len) < 0)
		return false;
	if (ss->ss_family == AF_INET6 && pgv.cfg->cancel_advertise_port)
		((struct sockaddr_in6 *)ss)->sin6_port = htons((uint16_t)pgv.cfg->cancel_advertise_port);
	else if (ss->ss_family == AF_INET && pgv.cfg->cancel_advertise_port)
		((struct sockaddr_in *)ss)->sin_port = htons((uint16_t)pgv.cfg->cancel_advertise_port);
	return ss->ss_family == AF_INET || ss->ss_family == AF_INET6;
}

/* Bytes 5-23: family, port, address (all zero without one). */
static void cancel_key_put_owner(uint8_t *key, int fd, bool is_unix)
{
	struct sockaddr_storage ss;
	memset(key + 5, 0, 19);
	if (!pgv.cfg->cancel_key_secret || !pgv.cfg->cancel_key_secret[0] || !cancel_key_advertised(fd, is_unix, &ss))
		return;
	if (ss.ss_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)&ss;
		key[5] = 4;
		memcpy(key + 6, &in->sin_port, 2);
		memcpy(key + 8, &in->sin_addr, 4);
	} else {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&ss;
		key[5] = 6;
		memcpy(key + 6, &in6->sin6_port, 2);
		memcpy(key + 8, &in6->sin6_addr, 16);
	}
}

void cancel_key_make_long(uint32_t pid, uint32_t key, int fd, bool is_unix, uint8_t *out)
{
	const uint8_t *secret;
	size_t secret_len;
	uint8_t mac[32];

	cancel_key_own_secret(&secret, &secret_len);
	put_be32(out, key | CANCEL_KEY_TTL_MASK);	/* full TTL: forwarded by address, with or without peer_id */
	out[4] = CANCEL_KEY_FORMAT;
	cancel_key_put_owner(out, fd, is_unix);
	memcpy(out + 24, self.instance_id, 4);
	cancel_key_mac(pid, out, secret, secret_len, mac);
	memcpy(out + CANCEL_KEY_MAC_AT, mac, CANCEL_KEY_MAC_LEN);
}

/* ---------------------------------------------------------------- requests */

bool cancel_key_local(const struct cancel_request *req, uint32_t *key)
{
	if (req->key_len == CANCEL_KEY_SHORT_LEN) {
		*key = get_be32(req->key);
		return true;
	}
	const uint8_t *secret;
	size_t secret_len;
	cancel_key_own_secret(&secret, &secret_len);
	if (!cancel_key_mac_ok(req, secret, secret_len))
		return false;
	*key = get_be32(req->key);
	return true;
}

bool cancel_key_fleet_valid(const struct cancel_request *req)
{
	const char *fleet = pgv.cfg->cancel_key_secret;
	return fleet && fleet[0] && cancel_key_mac_ok(req, (const uint8_t *)fleet, strlen(fleet));
}

bool cancel_key_is_own(const struct cancel_request *req)
{
	cancel_key_self_init();
	return req->key_len == CANCEL_KEY_LONG_LEN && memcmp(req->key + 24, self.instance_id, 4) == 0;
}

bool cancel_key_owner(const struct cancel_request *req, struct sockaddr_storage *addr, socklen_t *len)
{
	memset(addr, 0, sizeof(*addr));
	if (req->key_len != CANCEL_KEY_LONG_LEN)
		return false;
	const uint8_t *key = req->key;
	if (key[5] == 4) {
		struct sockaddr_in *in = (struct sockaddr_in *)addr;
		in->sin_family = AF_INET;
		memcpy(&in->sin_port, key + 6, 2);
		memcpy(&in->sin_addr, key + 8, 4);
		*len = sizeof(*in);
	} else if (key[5] == 6) {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)addr;
		in6->sin6_family = AF_INET6;
		memcpy(&in6->sin6_port, key + 6, 2);
		memcpy(&in6->sin6_addr, key + 8, 16);
		*len = sizeof(*in6);
	} else {
		return false;
	}
	return key[6] != 0 || key[7] != 0;	/* port 0: nowhere to go */
}

unsigned cancel_request_ttl(const struct cancel_request *req)
{
	return req->key[3] & CANCEL_KEY_TTL_MASK;
}

void cancel_request_lower_ttl(struct cancel_request *req)
{
	req->key[3]--;	/* the TTL bits are non-zero: no borrow */
}
