#!/usr/bin/env bash
#
# test/faults/soak.sh - a soak that shows no drift (issue 45, point 4);
# `make soak`, not in CI. SOAK_MINUTES (default 10) of soak.py's mixed
# workload at a fixed rate (simple, extended, prepared, COPY, LISTEN/NOTIFY,
# a login per operation) through pgvalve in transaction and session mode,
# with a RELOAD (SIGHUP) every 10 s and a pgvalve backend terminated every
# minute. Every 10 s it samples pgvalve's RSS, open file descriptors and
# CPU time per transaction (printed, and kept in soak.tsv, or SOAK_TSV).
# It fails if the RSS or the fds, after the first minute, grow by more
# than 5%: the last three samples against the three after the first
# minute (their median for the RSS, their lowest for the fds, as logins
# come and go).
#
# Needs PostgreSQL 15 and Debian's python3-psycopg (scripts/deps.sh mode
# faults); as root PostgreSQL and pgvalve run as pgvtest. A sanitizer
# build runs with ASan's quarantine off, which would otherwise look like
# growth. PGV_BINARY picks pgvalve; PGV_KEEP_TMP=1 keeps the work directory.
# Exit: 0 passed, 1 drift, 2 setup failed.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
here="$root/test/faults"
# shellcheck source=scripts/deps.sh
. "$root/scripts/deps.sh"
check_prefix=test/soak
# shellcheck source=test/checks.sh
. "$root/test/checks.sh"
pgv_deps_ensure faults || exit 2
binary=$(pick_pgvalve_binary "$root") || exit 2
py=/usr/bin/python3

minutes=${SOAK_MINUTES:-10}
work=$(mktemp -d "${TMPDIR:-/tmp}/pgvsoak.XXXXXX")
chmod 0755 "$work"
runas=""
if [ "$(id -u)" -eq 0 ]; then
	pgv_ensure_user pgvtest
	runas=pgvtest
	chown pgvtest: "$work"
fi
pg_port=$(pgv_free_port 27500)
pgv_port=$(pgv_free_port $((pg_port + 1)))
pg_data="$work/pg/data"
pgv_pid="" load_pid=""

cleanup() {
	[ -n "$load_pid" ] && kill "$load_pid" 2>/dev/null || true
	[ -n "$pgv_pid" ] && kill -KILL "$pgv_pid" 2>/dev/null || true
	pgv_pg_stop "$pg_data" "$runas" >/dev/null 2>&1 || true
	pgv_kill_matching "$work/" || true
	wait 2>/dev/null || true
	keep_or_remove "$work"
}
trap cleanup EXIT

mkdir -p "$work/pg"
[ -z "$runas" ] || chown "$runas": "$work/pg"
pgv_pg_init "$pg_data" "$runas" "$pg_port" "$work/pg" pgvadmin >/dev/null || setup_failed initdb
echo "local all all trust" >"$pg_data/pg_hba.conf"
pgv_pg_start "$pg_data" "$runas" "$work/pg/postgresql.log" || setup_failed "PostgreSQL start"
psql_admin() { "$PGBIN/psql" -X -q -t -A -h "$work/pg" -p "$pg_port" -U pgvadmin "$@"; }
psql_admin -d postgres -c "CREATE ROLE app LOGIN" -c "CREATE DATABASE appdb OWNER app" >/dev/null
psql_admin -d appdb -c "CREATE TABLE soak (k int, v text)" -c "ALTER TABLE soak OWNER TO app" >/dev/null

echo '"app" "app_pass"' >"$work/userlist.txt"
cat >"$work/pgvalve.ini" <<EOF
[databases]
appdb = host=$work/pg port=$pg_port dbname=appdb pool_mode=transaction
appdb_s = host=$work/pg port=$pg_port dbname=appdb pool_mode=session
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $pgv_port
unix_socket_dir = $work
auth_type = md5
auth_file = $work/userlist.txt
default_pool_size = 10
max_prepared_statements = 100
logfile = $work/pgvalve.log
query_timeout = 10
EOF
chmod 0644 "$work/userlist.txt" "$work/pgvalve.ini"
ASAN_OPTIONS=${ASAN_OPTIONS:-quarantine_size_mb=0:detect_leaks=0} \
	"$binary" ${runas:+-u "$runas"} "$work/pgvalve.ini" >>"$work/stderr.log" 2>&1 &
pgv_pid=$!
wait_for 15 bash -c "PGPASSWORD=app_pass '$PGBIN/psql' -X -q -t -A -h 127.0.0.1 -p $pgv_port -U app -d appdb -c 'SELECT 1'" ||
	{ tail "$work/stderr.log"; setup_failed "pgvalve does not serve"; }

dsn="host=127.0.0.1 port=$pgv_port user=app password=app_pass"
seconds=$((minutes * 60))
# the load outlives the last sample, which must not see it winding down
$py "$here/soak.py" "$dsn dbname=appdb" "$dsn dbname=appdb_s" $((seconds + 15)) "$work/count" >"$work/load.log" 2>&1 &
load_pid=$!

hz=$(getconf CLK_TCK)
cpu_ticks() { awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }
printf 'second\trss_kb\tfds\tcpu_us_per_txn\ttxns\terrors\n' >"$work/soak.tsv"
echo "test/soak: $minutes minutes; every 10 s: RSS, fds, CPU per transaction"
t=0 last_cpu=$(cpu_ticks "$pgv_pid") last_n=0
while [ "$t" -lt "$seconds" ] && kill -0 "$load_pid" 2>/dev/null; do
	sleep 10
	t=$((t + 10))
	kill -HUP "$pgv_pid"
	if [ $((t % 60)) -eq 0 ]; then
		psql_admin -d postgres -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE datname = 'appdb' AND backend_type = 'client backend' AND pid <> pg_backend_pid()
			ORDER BY random() LIMIT 1" >/dev/null || true
	fi
	rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$pgv_pid/status")
	fds=$(find "/proc/$pgv_pid/fd" -mindepth 1 -maxdepth 1 | wc -l)
	cpu=$(cpu_ticks "$pgv_pid")
	read -r n errors <"$work/count" 2>/dev/null || { n=0 errors=0; }
	per=0
	[ $((n - last_n)) -gt 0 ] && per=$(((cpu - last_cpu) * 1000000 / hz / (n - last_n)))
	last_cpu=$cpu last_n=$n
	printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$t" "$rss" "$fds" "$per" "$n" "$errors" >>"$work/soak.tsv"
	echo "test/soak:   ${t}s: RSS ${rss} kB, ${fds} fds, ${per} us CPU per transaction, $n transactions ($errors errors)"
done
wait "$load_pid" || true
load_pid=""
sed 's/^/test\/soak:   /' "$work/load.log"

# medians of three: just after the first minute, and at the end
verdict=$($py - "$work/soak.tsv" <<'EOF'
import statistics, sys
rows = [l.split("\t") for l in open(sys.argv[1]).read().splitlines()[1:]]
rows = [[int(x) for x in r] for r in rows]
after = [r for r in rows if r[0] > 60]
if len(after) < 4:
    print("short 0 0 0 0"); sys.exit()
base, end = after[:3], after[-3:]
med = lambda rs, i: statistics.median(r[i] for r in rs)
low = lambda rs, i: min(r[i] for r in rs)  # fds: a login in flight at a sample is not a leak
print("ok", med(base, 1), med(end, 1), low(base, 2), low(end, 2))
EOF
)
read -r state rss0 rss1 fds0 fds1 <<<"$verdict"
if [ "$state" = short ]; then
	echo "test/soak: too short to judge drift (SOAK_MINUTES >= 2)"
else
	check "RSS after the first minute: ${rss0} kB -> ${rss1} kB (at most +5%)" \
		awk -v a="$rss0" -v b="$rss1" 'BEGIN { exit !(b <= a * 1.05) }'
	check "fds after the first minute: ${fds0} -> ${fds1} (at most +5%)" \
		awk -v a="$fds0" -v b="$fds1" 'BEGIN { exit !(b <= a * 1.05) }'
fi
check "pgvalve still up after the soak" kill -0 "$pgv_pid"
cp "$work/soak.tsv" "${SOAK_TSV:-$work/soak.tsv}" 2>/dev/null || true
echo "test/soak: $failures failed"
[ "$failures" -eq 0 ]
