#!/usr/bin/env bash
#
# test/bench/bench.sh - pgbench straight to PostgreSQL and through pgvalve,
# side by side, on a throwaway cluster. `make bench` runs it.
#
#   bench.sh [--duration S] [--rounds N] [--clients N] [--scenarios LIST]
#
# Scenarios (transaction pooling, pool of 20, md5 auth like a production
# setup): select (-S simple protocol), prepared (-S extended protocol),
# tpcb (built-in read/write), many (1000 clients on the pool of 20; no
# direct row since PostgreSQL allows 200 connections here). Prints, per
# scenario, the median tps over the rounds and pgvalve's CPU per
# transaction. For a comparison with PgBouncer use
# ../shared/bench/compare.sh (see README.md).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
srcdir=${abs_top_srcdir:-$(cd "$here/../.." && pwd)}
builddir=${abs_top_builddir:-$srcdir/build}
# shellcheck source=../../scripts/deps.sh
. "$srcdir/scripts/deps.sh"

duration=10 rounds=3 clients=50 scenarios="select,prepared,tpcb,many"
while [ $# -gt 0 ]; do
	case $1 in
	--duration) duration=$2; shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	--clients) clients=$2; shift 2 ;;
	--scenarios) scenarios=$2; shift 2 ;;
	*) echo "usage: bench.sh [--duration S] [--rounds N] [--clients N] [--scenarios LIST]" >&2; exit 2 ;;
	esac
done
PGVALVE=${PGVALVE:-$builddir/src/pgvalve}
[ -x "$PGVALVE" ] || { echo "bench.sh: $PGVALVE not built (run make first)" >&2; exit 2; }

tmp= runas= pgv_pid=
cleanup() {
	trap - EXIT INT TERM
	[ -n "$pgv_pid" ] && pgv_kill_pids "$pgv_pid"
	if [ -n "$tmp" ] && [ -d "$tmp" ]; then
		pgv_pg_stop "$tmp/pgdata" "$runas"
		pgv_kill_matching "$tmp/"
		rm -rf "$tmp"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ "$(id -u)" -eq 0 ]; then
	runas=pgvtest
	pgv_ensure_user "$runas" || exit 1
fi
tmp=$(mktemp -d /tmp/pgvbench.XXXXXX) && chmod 755 "$tmp"
[ -n "$runas" ] && chown "$runas:" "$tmp"
pgport=$(pgv_free_port 27000)
pgv_pg_init "$tmp/pgdata" "$runas" "$pgport" "$tmp" postgres || exit 1
printf 'local all all trust\nhost all all 127.0.0.1/32 md5\n' >"$tmp/pgdata/pg_hba.conf"
echo "max_connections = 220" >>"$tmp/pgdata/postgresql.conf"
pgv_pg_start "$tmp/pgdata" "$runas" "$tmp/pg.log" || exit 1
psql_su() { "$PGBIN/psql" -X -q -h "$tmp" -p "$pgport" -U postgres "$@"; }
psql_su -d postgres -c "SET password_encryption = 'md5'" -c "CREATE ROLE bench LOGIN SUPERUSER PASSWORD 'bench'" >/dev/null
psql_su -d postgres -c "CREATE DATABASE bench OWNER bench" >/dev/null
echo "bench.sh: pgbench -i -s 10"
PGPASSWORD=bench "$PGBIN/pgbench" -i -q -s 10 -h 127.0.0.1 -p "$pgport" -U bench bench >"$tmp/init.log" 2>&1 ||
	{ cat "$tmp/init.log"; exit 1; }

port=$(pgv_free_port $((pgport + 1)))
cat >"$tmp/pgvalve.ini" <<INI
[databases]
bench = host=127.0.0.1 port=$pgport dbname=bench
[pgvalve]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
pool_mode = transaction
default_pool_size = 20
max_client_conn = 2000
auth_type = md5
auth_file = $tmp/userlist.txt
logfile = $tmp/pgvalve.log
log_connections = 0
log_disconnections = 0
INI
echo "\"bench\" \"md5$(printf '%s' benchbench | md5sum | cut -d' ' -f1)\"" >"$tmp/userlist.txt"
[ -n "$runas" ] && chown "$runas:" "$tmp/pgvalve.ini" "$tmp/userlist.txt"
ulimit -n 65536 2>/dev/null || true
if [ -n "$runas" ]; then
	"$PGVALVE" -q -u "$runas" "$tmp/pgvalve.ini" &
else
	"$PGVALVE" -q "$tmp/pgvalve.ini" &
fi
pgv_pid=$!
for _ in $(seq 50); do
	PGPASSWORD=bench "$PGBIN/psql" -X -At -h 127.0.0.1 -p "$port" -U bench -c "SELECT 1" bench >/dev/null 2>&1 && break
	sleep 0.2
done

cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$pgv_pid/stat"; }
hz=$(getconf CLK_TCK)

# run_pgbench TARGET_PORT ARGS... -> prints "tps txns"
run_pgbench() {
	local p=$1; shift
	PGPASSWORD=bench PGSSLMODE=disable "$PGBIN/pgbench" -n -T "$duration" -h 127.0.0.1 -p "$p" -U bench "$@" bench \
		>"$tmp/run.out" 2>&1
	local tps txns
	tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$tmp/run.out" | tail -1)
	txns=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$tmp/run.out")
	if ! grep -q "number of failed transactions: 0 " "$tmp/run.out"; then
		echo "bench.sh: failures in pgbench run:" >&2
		tail -5 "$tmp/run.out" >&2
	fi
	echo "${tps:-0} ${txns:-0}"
}

median() { sort -n | awk '{ a[NR] = $1 } END { if (NR) print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2) }'; }

printf '\n%-10s %12s %12s %10s %14s\n' scenario direct_tps pgvalve_tps ratio pgv_cpu_us/tx
IFS=, read -ra scen_list <<<"$scenarios"
for scen in "${scen_list[@]}"; do
	case $scen in
	select) args=(-S -M simple -c "$clients" -j 2) ;;
	prepared) args=(-S -M extended -c "$clients" -j 2) ;;
	tpcb) args=(-c "$clients" -j 2) ;;
	many) args=(-S -c 1000 -j 2) ;;
	*) echo "bench.sh: unknown scenario $scen" >&2; continue ;;
	esac
	d_tps=() v_tps=() v_cpu=()
	for _ in $(seq "$rounds"); do
		if [ "$scen" != many ]; then
			read -r t _ < <(run_pgbench "$pgport" "${args[@]}")
			d_tps+=("$t")
		fi
		c0=$(cpu_ticks)
		read -r t n < <(run_pgbench "$port" "${args[@]}")
		c1=$(cpu_ticks)
		v_tps+=("$t")
		v_cpu+=("$(awk -v a="$c0" -v b="$c1" -v n="$n" -v hz="$hz" 'BEGIN { printf "%.1f", n ? (b - a) * 1e6 / hz / n : 0 }')")
	done
	dm=$( [ ${#d_tps[@]} -gt 0 ] && printf '%s\n' "${d_tps[@]}" | median || echo "-")
	vm=$(printf '%s\n' "${v_tps[@]}" | median)
	cm=$(printf '%s\n' "${v_cpu[@]}" | median)
	ratio=$(awk -v d="$dm" -v v="$vm" 'BEGIN { if (d == "-" || d == 0) print "-"; else printf "%.2f", v / d }')
	printf '%-10s %12s %12.0f %10s %14s\n' "$scen" "$dm" "$vm" "$ratio" "$cm"
done
echo
echo "median of $rounds rounds of ${duration}s; pgvalve in transaction mode, pool of 20, $clients clients"
