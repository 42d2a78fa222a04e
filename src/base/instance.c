/*
 * instance.c - the process instance (instance.h): its one definition and
 * its start-up.
 *
 * Must not call into the connection core or anything above it.
 */
#include "common.h"
#include "instance.h"
#include "relay.h"

struct instance pgv;
/* The data path's feature table (relay.h): a process global of the same documented set. */
struct relay_hooks relay_hooks;

void instance_init(void)
{
	list_init(&pgv.databases);
	list_init(&pgv.login_clients);
	list_init(&pgv.dead_clients);
	list_init(&pgv.dead_servers);
	list_init(&pgv.cancel_requests);
	list_init(&pgv.peer_pools);
}
