# test/bench/lib.sh - what the benchmarks share: a throwaway PostgreSQL
# cluster with pgbench tables, a pgvalve on it, pgbench runs and medians.
# Sourced by bench.sh and workers.sh (after they set srcdir and builddir);
# it installs an EXIT trap that stops whatever it started.
#
#   bench_setup_cluster          tmp, runas, pgport; database bench (pgbench tables of scale
#                                $bench_scale, 10 if unset, none if 0), role bench/bench (md5)
#   bench_write_ini NAME PORT EXTRA   $tmp/NAME.ini: a pgvalve config on PORT (bench_pooler_ini)
#   bench_start_pgvalve EXTRA    pgvalve on a free port ($port, $pgv_pid), transaction mode,
#                                pool of 20, EXTRA lines appended to [pgvalve]
#   bench_pooler_ini SECTION PORT NAME EXTRA   that config, for pgvalve or PgBouncer
#                                ($bench_extra_databases: more [databases] lines)
#   bench_start_named NAME PORT EXTRA   a pgvalve from that config in the background; prints its pid
#   bench_cpu_ticks PID          its CPU (user + system) so far, in 1/100 s
#   bench_cpu_ratio_line ...     CPU per transaction of two side-by-side runs and their ratio
#   bench_wait_ready PORT        waits (10 s at most) until a query runs there; 1 if none did
#   bench_start_pgbouncer EXTRA  PgBouncer ($PGBOUNCER) likewise ($pgb_port, $pgb_pid);
#                                1 if not installed
#   bench_pgbouncer_line         "PgBouncer: <its --version> (<path>, <given or fallback>)",
#                                the line every table prints with its PgBouncer figures
#   bench_stop_pgvalve, bench_stop_pgbouncer
#   run_pgbench PORT ARGS...     prints "tps transactions latency_ms" (pgbench's latency
#                                average); warns about failed transactions
#                                (sslmode: $bench_sslmode, default disable)
#   median                       of numbers on stdin
# shellcheck shell=bash
# shellcheck source=../../scripts/deps.sh
. "$srcdir/scripts/deps.sh"

PGVALVE=${PGVALVE:-$builddir/src/pgvalve}
[ -x "$PGVALVE" ] || { echo "${0##*/}: $PGVALVE not built (run make first)" >&2; exit 2; }
duration=${duration:-10}
tmp= runas= pgv_pid= port= pgport= pgb_pid= pgb_port=

# The PgBouncer to compare with: PGBOUNCER=/path/to/pgbouncer (`make bench
# PGBOUNCER=...`), a current release built by hand; only when none is given,
# Debian's package (1.18 on Debian 12, older than what operators run).
if [ -n "${PGBOUNCER:-}" ]; then
	[ -x "$PGBOUNCER" ] && [ ! -d "$PGBOUNCER" ] ||
		{ echo "${0##*/}: PGBOUNCER=$PGBOUNCER is not an executable file" >&2; exit 2; }
	pgb_origin="given as PGBOUNCER"
else
	PGBOUNCER=/usr/sbin/pgbouncer
	pgb_origin="Debian's package: no PGBOUNCER given"
fi
pgb_version=
[ -x "$PGBOUNCER" ] && pgb_version=$("$PGBOUNCER" --version 2>/dev/null | head -n 1)

# bench_pgbouncer_line: which PgBouncer the figures beside pgvalve's come from.
bench_pgbouncer_line() {
	if [ -n "$pgb_version" ]; then
		echo "PgBouncer: $pgb_version ($PGBOUNCER, $pgb_origin)"
	else
		echo "PgBouncer: none ($PGBOUNCER not installed; give PGBOUNCER=/path/to/pgbouncer)"
	fi
}

bench_cleanup() {
	trap - EXIT INT TERM
	[ -n "$pgv_pid" ] && pgv_kill_pids "$pgv_pid"
	[ -n "$pgb_pid" ] && pgv_kill_pids "$pgb_pid"
	if [ -n "$tmp" ] && [ -d "$tmp" ]; then
		pgv_pg_stop "$tmp/pgdata" "$runas"
		pgv_kill_matching "$tmp/"
		rm -rf "$tmp"
	fi
}
trap bench_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

bench_setup_cluster() {
	if [ "$(id -u)" -eq 0 ]; then
		runas=pgvtest
		pgv_ensure_user "$runas" || exit 1
	fi
	tmp=$(mktemp -d "/tmp/${bench_tmp_name:-pgvbench}.XXXXXX") && chmod 755 "$tmp"
	[ -n "$runas" ] && chown "$runas:" "$tmp"
	pgport=$(pgv_free_port 27000)
	pgv_pg_init "$tmp/pgdata" "$runas" "$pgport" "$tmp" postgres || exit 1
	printf 'local all all trust\nhost all all 127.0.0.1/32 md5\n' >"$tmp/pgdata/pg_hba.conf"
	echo "max_connections = 220" >>"$tmp/pgdata/postgresql.conf"
	pgv_pg_start "$tmp/pgdata" "$runas" "$tmp/pg.log" || exit 1
	local psql_su=("$PGBIN/psql" -X -q -h "$tmp" -p "$pgport" -U postgres)
	"${psql_su[@]}" -d postgres -c "SET password_encryption = 'md5'" \
		-c "CREATE ROLE bench LOGIN SUPERUSER PASSWORD 'bench'" >/dev/null
	"${psql_su[@]}" -d postgres -c "CREATE DATABASE bench OWNER bench" >/dev/null
	if [ "${bench_scale:-10}" -gt 0 ]; then
		echo "${0##*/}: pgbench -i -s ${bench_scale:-10}"
		PGPASSWORD=bench "$PGBIN/pgbench" -i -q -s "${bench_scale:-10}" -h 127.0.0.1 -p "$pgport" -U bench bench \
			>"$tmp/init.log" 2>&1 || { cat "$tmp/init.log"; exit 1; }
	fi
	echo "\"bench\" \"md5$(printf '%s' benchbench | md5sum | cut -d' ' -f1)\"" >"$tmp/userlist.txt"
	[ -n "$runas" ] && chown "$runas:" "$tmp/userlist.txt"
	ulimit -n 65536 2>/dev/null || true
}

# bench_pooler_ini SECTION PORT NAME EXTRA: the benchmarks' pooler config on
# stdout (PgBouncer's format; SECTION pgvalve or pgbouncer), logging to $tmp/NAME.log.
bench_pooler_ini() {
	cat <<INI
[databases]
bench = host=127.0.0.1 port=$pgport dbname=bench
${bench_extra_databases:-}
[$1]
listen_addr = 127.0.0.1
listen_port = $2
unix_socket_dir =
pool_mode = transaction
default_pool_size = 20
max_client_conn = 2000
auth_type = md5
auth_file = $tmp/userlist.txt
logfile = $tmp/$3.log
log_connections = 0
log_disconnections = 0
$4
INI
}

# bench_wait_ready PORT: until user bench can run a query there (10 s at most); 1 if it never could.
bench_wait_ready() {
	for _ in $(seq 50); do
		PGPASSWORD=bench "$PGBIN/psql" -X -At -h 127.0.0.1 -p "$1" -U bench -c "SELECT 1" bench >/dev/null 2>&1 &&
			return 0
		sleep 0.2
	done
	echo "${0##*/}: nothing answers on port $1" >&2
	return 1
}

# bench_write_ini NAME PORT EXTRA: $tmp/NAME.ini for a pgvalve on PORT (log in $tmp/NAME.log).
bench_write_ini() {
	bench_pooler_ini pgvalve "$2" "$1" "$3" >"$tmp/$1.ini"
	if [ -n "$runas" ]; then chown "$runas:" "$tmp/$1.ini"; fi
}

# bench_start_named NAME PORT EXTRA: a pgvalve from bench_write_ini NAME's config, in the background; prints its pid.
bench_start_named() {
	bench_write_ini "$1" "$2" "$3"
	if [ -n "$runas" ]; then
		"$PGVALVE" -q -u "$runas" "$tmp/$1.ini" >/dev/null 2>&1 &
	else
		"$PGVALVE" -q "$tmp/$1.ini" >/dev/null 2>&1 &
	fi
	echo $!
}

# bench_cpu_ticks PID: its user + system CPU so far, in clock ticks (1/100 s).
bench_cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

# bench_cpu_ratio_line LABEL_A TICKS_A TXNS_A LABEL_B TICKS_B TXNS_B: CPU per transaction of two
# side-by-side runs, "A x us/txn (n txns), B y us/txn (n txns), B/A ratio" (the ratio last).
bench_cpu_ratio_line() {
	awk -v la="$1" -v a="$2" -v na="$3" -v lb="$4" -v b="$5" -v nb="$6" 'BEGIN {
		ua = a * 10000 / na; ub = b * 10000 / nb
		printf "%s %.2f us/txn (%d txns), %s %.2f us/txn (%d txns), %s/%s %.3f", la, ua, na, lb, ub, nb, lb, la, ub / ua }'
}

bench_start_pgvalve() {
	port=$(pgv_free_port $((pgport + 1)))
	bench_pooler_ini pgvalve "$port" pgvalve "$1" >"$tmp/pgvalve.ini"
	[ -n "$runas" ] && chown "$runas:" "$tmp/pgvalve.ini"
	if [ -n "$runas" ]; then
		"$PGVALVE" -q -u "$runas" "$tmp/pgvalve.ini" &
	else
		"$PGVALVE" -q "$tmp/pgvalve.ini" &
	fi
	pgv_pid=$!
	bench_wait_ready "$port"
}

# bench_start_pgbouncer EXTRA: PgBouncer ($PGBOUNCER) the same way ($pgb_port,
# $pgb_pid); returns 1 (and says so) when it is not installed.
bench_start_pgbouncer() {
	if [ ! -x "$PGBOUNCER" ]; then
		echo "${0##*/}: no PgBouncer at $PGBOUNCER (give PGBOUNCER=/path/to/pgbouncer; pgv_deps_ensure bench in scripts/deps.sh installs Debian's)"
		return 1
	fi
	pgb_port=$(pgv_free_port $((${port:-$pgport} + 1)))
	bench_pooler_ini pgbouncer "$pgb_port" pgbouncer "$1" >"$tmp/pgbouncer.ini"
	[ -n "$runas" ] && chown "$runas:" "$tmp/pgbouncer.ini"
	if [ -n "$runas" ]; then
		"$PGBOUNCER" -q -u "$runas" "$tmp/pgbouncer.ini" &
	else
		"$PGBOUNCER" -q "$tmp/pgbouncer.ini" &
	fi
	pgb_pid=$!
	bench_wait_ready "$pgb_port" && return 0
	# a PgBouncer asked for by name that does not run is an error, not a missing column
	if [ "$pgb_origin" = "given as PGBOUNCER" ]; then
		echo "${0##*/}: PgBouncer $PGBOUNCER did not start; its log:" >&2
		tail -n 5 "$tmp/pgbouncer.log" >&2
		exit 1
	fi
	bench_stop_pgbouncer
	return 1
}

bench_stop_pgbouncer() {
	[ -n "$pgb_pid" ] && pgv_kill_pids "$pgb_pid"
	wait "$pgb_pid" 2>/dev/null
	pgb_pid=
}

bench_stop_pgvalve() {
	[ -n "$pgv_pid" ] && pgv_kill_pids "$pgv_pid"
	wait "$pgv_pid" 2>/dev/null
	pgv_pid=
}

run_pgbench() {
	local p=$1
	shift
	PGPASSWORD=bench PGSSLMODE=${bench_sslmode:-disable} "$PGBIN/pgbench" -n -T "$duration" -h 127.0.0.1 -p "$p" -U bench "$@" bench \
		>"$tmp/run.out" 2>&1
	local tps txns lat
	tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$tmp/run.out" | tail -1)
	txns=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$tmp/run.out")
	lat=$(sed -n 's/^latency average = \([0-9.]*\) ms.*/\1/p' "$tmp/run.out")
	if ! grep -q "number of failed transactions: 0 " "$tmp/run.out"; then
		echo "${0##*/}: failures in pgbench run:" >&2
		tail -5 "$tmp/run.out" >&2
	fi
	echo "${tps:-0} ${txns:-0} ${lat:-0}"
}

median() { sort -n | awk '{ a[NR] = $1 } END { if (NR) print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2) }'; }
