/*
 * cancel_key.c - BackendKeyData with the peer id inside (cancel_key.h).
 */
#include "pgvalve/common.h"
#include "pgvalve/cancel_key.h"
#include "pgvalve/crypto.h"

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
		k |= CANCEL_KEY_TTL_MASK;			/* byte 7: full TTL */
	}
	*pid = p;
	*key = k;
}

int cancel_key_peer_id(uint32_t pid)
{
	return (int)(((pid >> 16) & 0xFF) | (((pid >> 8) & 0xFF) << 8));
}
