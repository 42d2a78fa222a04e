#!/usr/bin/env bash
#
# test/bench/rolling_restart.sh - how many clients a rolling restart resets,
# with net.ipv4.tcp_migrate_req = 0 and = 1. `make bench-rolling` runs it.
#
#   rolling_restart.sh [--duration S] [--interval S] [--clients N]
#
# For each setting, in a network namespace of its own (root only; the
# host's setting is left alone): pgbench -C -S (a new connection per
# transaction) runs for S seconds against pgvalve with so_reuseport, and
# every --interval seconds a new pgvalve starts on the same port and the
# previous one gets SIGTERM (a hand-off). Prints the hand-offs, the pgbench
# clients that were reset while connecting, and the transactions. pgvalve
# drains its queue right before closing, so with 0 only a connection that
# Linux queues in the microseconds between the last accept() and close()
# is reset; with 1 the kernel gives such connections to the new process.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
srcdir=${abs_top_srcdir:-$(cd "$here/../.." && pwd)}
builddir=${abs_top_builddir:-$srcdir/build}
duration=40 interval=1 clients=50

# One setting, run inside the namespace: rolling_restart.sh --inner MIGRATE
if [ "${1:-}" = --inner ]; then
	migrate=$2
	ip link set lo up && sysctl -qw net.ipv4.tcp_migrate_req="$migrate" || exit 1
	n=0 pids=()
	start() {
		n=$((n + 1))
		sed "s|@LOG@|$tmp/rr.$migrate.$n.log|" "$tmp/rr.ini" >"$tmp/rr.$n.ini"
		[ -n "$runas" ] && chown "$runas:" "$tmp/rr.$n.ini"
		"$PGVALVE" -q ${runas:+-u "$runas"} "$tmp/rr.$n.ini" &
		pids+=($!)
		for _ in $(seq 50); do
			grep -q "listening on" "$tmp/rr.$migrate.$n.log" 2>/dev/null && return
			sleep 0.1
		done
	}
	start
	PGPASSWORD=bench PGSSLMODE=disable "$PGBIN/pgbench" -n -C -S -c "$clients" -j 2 -T "$duration" \
		-h 127.0.0.1 -p "$port" -U bench bench >"$tmp/rr.$migrate.out" 2>&1 &
	bench=$!
	handoffs=0 end=$((SECONDS + duration - 2))
	while [ $SECONDS -lt $end ]; do
		sleep "$interval"
		old=${pids[-1]}
		start
		sleep 0.3
		kill -TERM "$old"
		handoffs=$((handoffs + 1))
	done
	wait "$bench"
	for p in "${pids[@]}"; do kill -INT "$p" 2>/dev/null; done
	wait
	resets=$(grep -c "aborted while establishing connection" "$tmp/rr.$migrate.out")
	txns=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$tmp/rr.$migrate.out")
	printf 'tcp_migrate_req = %s: %3d hand-offs, %2d clients reset, %s transactions\n' \
		"$migrate" "$handoffs" "$resets" "${txns:-0}"
	exit 0
fi

while [ $# -gt 0 ]; do
	case $1 in
	--duration) duration=$2; shift 2 ;;
	--interval) interval=$2; shift 2 ;;
	--clients) clients=$2; shift 2 ;;
	*) echo "usage: rolling_restart.sh [--duration S] [--interval S] [--clients N]" >&2; exit 2 ;;
	esac
done
[ "$(id -u)" -eq 0 ] || { echo "rolling_restart.sh: needs root (network namespaces, sysctl)" >&2; exit 2; }
[ -e /proc/sys/net/ipv4/tcp_migrate_req ] || { echo "rolling_restart.sh: kernel without tcp_migrate_req (5.14+)" >&2; exit 2; }
# shellcheck source=lib.sh
. "$here/lib.sh"
bench_setup_cluster
port=$(pgv_free_port $((pgport + 1)))
# PostgreSQL is reached over its Unix socket: 127.0.0.1 in the namespace is not the host's.
cat >"$tmp/rr.ini" <<INI
[databases]
bench = host=$tmp port=$pgport dbname=bench
[pgvalve]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
so_reuseport = 1
pool_mode = transaction
default_pool_size = 10
max_client_conn = 2000
auth_type = md5
auth_file = $tmp/userlist.txt
logfile = @LOG@
log_connections = 0
log_disconnections = 0
INI
export tmp runas port PGVALVE PGBIN duration interval clients
for migrate in 0 1; do
	unshare -n "$here/rolling_restart.sh" --inner "$migrate"
done
echo "pgbench -C -S, $clients clients, ${duration}s; a hand-off every ${interval}s + 0.3s; $(nproc) CPUs"
