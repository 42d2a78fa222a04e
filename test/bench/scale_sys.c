/*
 * scale_sys.c - the scale load generator's readings of /proc: the
 * pooler's processes, their memory and CPU, and the kernel's socket
 * figures (see scale_sys.h). Reads only; the generator's own processes
 * are never counted as the pooler's.
 */
#include "scale_sys.h"

#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_PROCS 65536

struct proc_row {
	int pid, ppid;
};

/* /proc/PID/NAME into buf, NUL-terminated; its length, or -1 when the process is gone. */
static long read_proc_file(int pid, const char *name, char *buf, size_t size)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/%s", pid, name);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	size_t len = fread(buf, 1, size - 1, f);
	fclose(f);
	buf[len] = 0;
	return (long)len;
}

/* Every process's pid and parent: a snapshot of /proc. */
static int read_procs(struct proc_row *rows, int cap)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	int n = 0;
	if (!d)
		return 0;
	while ((e = readdir(d)) && n < cap) {
		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		char buf[512];
		if (read_proc_file(atoi(e->d_name), "stat", buf, sizeof(buf)) < 0)
			continue;
		char *p = strrchr(buf, ')');
		int ppid;
		if (!p || sscanf(p + 1, " %*c %d", &ppid) != 1)
			continue;
		rows[n].pid = atoi(e->d_name);
		rows[n].ppid = ppid;
		n++;
	}
	closedir(d);
	return n;
}

static bool cmdline_has(int pid, const char *pattern)
{
	char buf[4096];
	long len = read_proc_file(pid, "cmdline", buf, sizeof(buf));
	for (long i = 0; i + 1 < len; i++)
		if (buf[i] == 0)
			buf[i] = ' ';	/* the arguments, as pgrep -f joins them */
	return len > 0 && strstr(buf, pattern) != NULL;
}

/* Is pid one of roots or below one of them (through the parent links of rows)? */
static bool under(const struct proc_row *rows, int n, int pid, const int *roots, int nroots)
{
	for (int depth = 0; depth < 64 && pid > 1; depth++) {
		for (int r = 0; r < nroots; r++)
			if (pid == roots[r])
				return true;
		int parent = 0;
		for (int i = 0; i < n; i++)
			if (rows[i].pid == pid) {
				parent = rows[i].ppid;
				break;
			}
		pid = parent;
	}
	return false;
}

static void add_proc(int pid, struct pooler_sample *out)
{
	char buf[4096];
	unsigned long long kb = 0;
	if (read_proc_file(pid, "status", buf, sizeof(buf)) < 0)
		return;
	const char *rss = strstr(buf, "\nVmRSS:");
	if (rss)
		sscanf(rss, "\nVmRSS: %llu kB", &kb);	/* none for a zombie */
	if (read_proc_file(pid, "stat", buf, sizeof(buf)) < 0)
		return;
	char *p = strrchr(buf, ')');
	unsigned long long ut, st;
	/* after the comm: state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime */
	if (!p || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return;
	out->procs++;
	out->rss_bytes += kb * 1024;
	out->cpu_s += (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

double scale_sys_proc_cpu(int pid)
{
	struct pooler_sample one = { 0 };
	add_proc(pid, &one);
	return one.cpu_s;
}

void scale_sys_pooler(const char *pids, const char *pattern, struct pooler_sample *out)
{
	int roots[64], nroots = 0, self = getpid();
	out->procs = 0;
	out->rss_bytes = 0;
	out->cpu_s = 0;
	if (!pids && !pattern)
		return;
	for (const char *p = pids; p && *p && nroots < 64;) {
		int v = atoi(p);
		if (v > 1)
			roots[nroots++] = v;
		p = strchr(p, ',');
		p = p ? p + 1 : NULL;
	}
	struct proc_row *rows = malloc(sizeof(*rows) * MAX_PROCS);
	if (!rows)
		return;
	int n = read_procs(rows, MAX_PROCS);
	for (int i = 0; i < n; i++) {
		int pid = rows[i].pid;
		if (under(rows, n, pid, &self, 1))
			continue;	/* the generator itself */
		if ((nroots && under(rows, n, pid, roots, nroots)) || (pattern && cmdline_has(pid, pattern)))
			add_proc(pid, out);
	}
	free(rows);
}

bool scale_sys_sockets(struct sock_sample *out)
{
	char line[256];
	long mem = 0;
	FILE *f = fopen("/proc/net/sockstat", "r");
	if (!f)
		return false;
	memset(out, 0, sizeof(*out));
	while (fgets(line, sizeof(line), f)) {
		sscanf(line, "sockets: used %ld", &out->sockets_used);
		sscanf(line, "TCP: inuse %ld orphan %ld tw %ld alloc %ld mem %ld", &out->tcp_inuse, &out->tcp_orphan,
		       &out->tcp_tw, &out->tcp_alloc, &mem);
	}
	fclose(f);
	out->tcp_mem_bytes = (uint64_t)mem * (uint64_t)sysconf(_SC_PAGESIZE);
	return true;
}
