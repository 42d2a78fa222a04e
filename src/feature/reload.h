/*
 * reload.h - re-reading the configuration and auth_file while running.
 *
 * A file with an error changes nothing: the running configuration stays in
 * force and the error is reported. Parameters that need a restart keep
 * their running value, with a log line saying so.
 */
#ifndef PGVALVE_RELOAD_H
#define PGVALVE_RELOAD_H

#include "common.h"

/* Returns 0, or -1 with errbuf holding the reason (file:line: ...). */
int reload_config(char *errbuf, size_t errsize);

#endif
