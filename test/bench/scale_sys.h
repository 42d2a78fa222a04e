/*
 * scale_sys.h - what the scale load generator reads from /proc about the
 * machine and the pooler under test: the pooler's processes (given pids
 * and all their descendants, or a command-line pattern as pgrep -f reads
 * it), their resident memory and CPU time summed, and the kernel's socket
 * counts and TCP memory (/proc/net/sockstat). Reads only.
 */
#ifndef PGVALVE_SCALE_SYS_H
#define PGVALVE_SCALE_SYS_H

#include <stdbool.h>
#include <stdint.h>

struct pooler_sample {
	int procs;		/* 0: nothing found (or nothing asked) */
	uint64_t rss_bytes;	/* VmRSS summed */
	double cpu_s;		/* utime + stime summed */
};

struct sock_sample {
	long sockets_used, tcp_inuse, tcp_orphan, tcp_tw, tcp_alloc;
	uint64_t tcp_mem_bytes;	/* "mem" pages times the page size */
};

/* pids: "123,456" (each with its descendants) or NULL; pattern: a substring of the command line, or NULL. */
void scale_sys_pooler(const char *pids, const char *pattern, struct pooler_sample *out);
bool scale_sys_sockets(struct sock_sample *out);
/* One process's utime + stime in seconds; 0 if it is gone. */
double scale_sys_proc_cpu(int pid);

#endif
