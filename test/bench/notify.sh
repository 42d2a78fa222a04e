#!/usr/bin/env bash
#
# test/bench/notify.sh - LISTEN/NOTIFY fan-out (issue 25) through pgvalve in
# transaction pooling and straight to PostgreSQL, on a throwaway cluster.
# `make bench-notify` builds test/bench/notify_bench and runs it.
#
#   notify.sh [--clients N] [--channels C] [--rate R] [--duration S] [--pool-size P]
#
# N clients (1,000) listen on C channels (10) through a pool of P servers
# (10); a producer sends R notifications a second (10,000), each carrying
# the time it was sent; notify_bench prints what was sent and delivered,
# the delivery latency p50/p99 (send to receipt) and, through pgvalve,
# pgvalve's CPU per delivered notification. Then the same load straight to
# PostgreSQL (max_connections raised to N + 50: N backends listening).
# On a busy machine the rate asked may be out of reach: the figures say
# what was achieved. Build without sanitizers for meaningful CPU figures
# (PGVALVE=path/to/pgvalve).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
srcdir=${abs_top_srcdir:-$(cd "$here/../.." && pwd)}
builddir=${abs_top_builddir:-$srcdir/build}
clients=1000 channels=10 rate=10000 duration=10 pool_size=10
while [ $# -gt 0 ]; do
	case $1 in
	--clients) clients=$2; shift 2 ;;
	--channels) channels=$2; shift 2 ;;
	--rate) rate=$2; shift 2 ;;
	--duration) duration=$2; shift 2 ;;
	--pool-size) pool_size=$2; shift 2 ;;
	*) echo "usage: notify.sh [--clients N] [--channels C] [--rate R] [--duration S] [--pool-size P]" >&2; exit 2 ;;
	esac
done
BENCH=${NOTIFY_BENCH:-$builddir/test/bench/notify_bench}
[ -x "$BENCH" ] || { echo "${0##*/}: $BENCH not built (make bench-notify builds it)" >&2; exit 2; }
bench_scale=0
# shellcheck source=lib.sh
. "$here/lib.sh"
bench_setup_cluster
# N listening backends when the producer goes straight to PostgreSQL
echo "max_connections = $((clients + 50))" >>"$tmp/pgdata/postgresql.conf"
pgv_as "$runas" "$PGBIN/pg_ctl" -D "$tmp/pgdata" -l "$tmp/pg.log" -m fast -w -t 60 restart >/dev/null ||
	{ echo "${0##*/}: PostgreSQL did not restart" >&2; exit 1; }
head -n 1 "$tmp/pgdata/postmaster.pid" >"$tmp/pgdata.pid"

bench_start_pgvalve "default_pool_size = $pool_size
max_client_conn = $((clients + 50))"
args=(--clients "$clients" --channels "$channels" --rate "$rate" --duration "$duration")
echo "== through pgvalve (transaction pooling, default_pool_size = $pool_size): $clients clients, $channels channels, $rate notifications/s asked, ${duration} s"
"$BENCH" "host=127.0.0.1 port=$port dbname=bench user=bench password=bench sslmode=disable" \
	"${args[@]}" --cpu-pid "$pgv_pid"
rc_pgv=$?
bench_stop_pgvalve
echo "== straight to PostgreSQL: $clients backends listening"
"$BENCH" "host=127.0.0.1 port=$pgport dbname=bench user=bench password=bench sslmode=disable" "${args[@]}"
rc_pg=$?
echo "(notify_bench exits 3 when fewer notifications arrived than expected: pgvalve $rc_pgv, PostgreSQL $rc_pg)"
[ "$rc_pgv" -le 3 ] && [ "$rc_pg" -le 3 ]
