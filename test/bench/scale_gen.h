/*
 * scale_gen.h - what the scale load generator's parent (scale_gen.c) and
 * its children (scale_child.c) share: the options, the commands the parent
 * writes to a child's command pipe, and the report a child writes back on
 * its report pipe (counts, failure causes and histograms of one phase, as
 * plain structs the parent adds up).
 */
#ifndef PGVALVE_SCALE_GEN_H
#define PGVALVE_SCALE_GEN_H

#include "common.h"
#include "scale_hist.h"

#include <netinet/in.h>

#define SCALE_CAUSES 24
#define SCALE_CAUSE_LEN 24
#define SCALE_SRC_FIRST 2	/* source addresses 127.0.0.2 ... */
#define SCALE_SRC_LAST 254	/* ... 127.0.0.254 */

struct scale_opts {
	struct sockaddr_in addr;	/* the pooler (127.0.0.0/8 only) */
	const char *user, *password, *dbname, *query, *name;
	long clients, active, storm;
	double rate, duration;
	long per_proc;			/* clients (held + storm) per child process */
	long login_window;		/* logins in flight per child in the held phases */
	double login_rate;		/* held logins a second, all children together (0: as fast as the window allows) */
	double login_timeout;		/* seconds from connect to ReadyForQuery */
	bool tls, storm_tls;
	const char *pooler_pids, *pooler_pgrep;
};

/* One child's share of the clients. */
struct scale_share {
	long held, active, storm;
	double rate;
	double login_rate;	/* this child's held logins a second, 0: no limit */
};

enum scale_cmd_op {
	CMD_LOGIN = 'L',	/* log in n more held clients, login_window at a time */
	CMD_STORM = 'S',	/* log in n storm clients, all at once */
	CMD_RATE = 'R',		/* start the active clients' schedule */
	CMD_SNAPSHOT = 'P',	/* report the transactions since the last snapshot */
	CMD_RESTART = 'X',	/* drop the transactions due and not started (counted as dropped), schedule from now */
	CMD_QUIT = 'Q',
};

struct scale_cmd {
	char op;
	long n;
};

/* Why logins failed (or held clients were lost): name -> count, merged by name. */
struct scale_causes {
	struct {
		char name[SCALE_CAUSE_LEN];
		uint64_t n;
	} e[SCALE_CAUSES];
	uint64_t other;		/* causes past the table's room */
};

enum scale_report_kind { REPORT_LOGINS = 1, REPORT_TXNS = 2 };

struct scale_report {
	int kind;
	/* REPORT_LOGINS: one LOGIN or STORM command's clients */
	uint64_t logged_in, failed;
	struct scale_causes causes;
	struct hist login;
	/* REPORT_TXNS: the active clients since the last snapshot */
	uint64_t txns, txn_errors, dropped, lost, active_now;
	uint64_t longest_wait_us;	/* the longest any active client waited for an answer, done or not */
	struct scale_causes lost_causes;
	struct hist txn;
};

void scale_causes_add(struct scale_causes *c, const char *name, uint64_t n);
void scale_causes_merge(struct scale_causes *into, const struct scale_causes *from);
uint64_t scale_causes_total(const struct scale_causes *c);
/* "refused=3 sqlstate:53300=2", or "none", into buf. */
void scale_causes_format(const struct scale_causes *c, char *buf, size_t size);

/* The child's loop: reads commands from cmd_fd, writes reports to rep_fd, exits when told. */
void scale_child_run(const struct scale_opts *o, const struct scale_share *share, int index,
		     int cmd_fd, int rep_fd) __attribute__((noreturn));

#endif
