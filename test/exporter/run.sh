#!/usr/bin/env bash
#
# test/exporter/run.sh - an exporter made for PgBouncer, scraping the
# console of a pgvalve instance with workers = 4, agrees with pgvalve's own
# /metrics (issue 26, point 3: the console is the instance).
#
# The exporter is PyPI's prometheus-pgbouncer-exporter 2.1.2 (Debian's
# package of it, 1.7, stops at SHOW STATS's total_requests, which PgBouncer
# dropped in 1.8), installed into a throwaway venv over Debian's psycopg2,
# prometheus_client and yaml (its pinned psycopg2 2.8.5 would need a
# compiler). After a finished pgbench run spread over the workers, with six
# clients left inside a query on several workers, every figure both expose
# must be equal: transactions, queries, bytes, transaction, query and wait
# time per database; active, waiting, idle and other clients and servers
# per pool; pool size and current connections per database.
#
# Needs PostgreSQL 15's binaries, python3-venv/psycopg2/prometheus-client/
# yaml and curl (scripts/deps.sh mode exporter) and PyPI. About 30 s. On
# demand; .ci/run does not run it. PGV_BINARY picks the pgvalve binary
# (default: build/'s, else build-dev/'s).
# Exit: 0 passed, 1 a figure differed, 2 setup failed.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
srcdir=$(cd "$here/../.." && pwd)
builddir=$srcdir/build
[ -x "$builddir/src/pgvalve" ] || builddir=$srcdir/build-dev
export PGVALVE=${PGV_BINARY:-$builddir/src/pgvalve}	# lib.sh starts it
# shellcheck source=../../scripts/deps.sh
. "$srcdir/scripts/deps.sh"
pgv_deps_ensure exporter || exit 2
export bench_scale=1 bench_tmp_name=pgvexporter	# read by lib.sh
# shellcheck source=../bench/lib.sh
. "$srcdir/test/bench/lib.sh"
bench_setup_cluster >/dev/null || exit 2

venv=$tmp/venv
/usr/bin/python3 -m venv --system-site-packages "$venv" &&
	"$venv/bin/pip" install -q --no-deps prometheus-pgbouncer-exporter==2.1.2 python-json-logger==0.1.11 ||
	{ echo "exporter: could not install prometheus-pgbouncer-exporter from PyPI" >&2; exit 2; }

mport=$(pgv_free_port 29127)
bench_start_pgvalve "workers = 4
admin_users = bench
metrics_listen_addr = 127.0.0.1
metrics_port = $mport" || exit 2
sleep 1	# every worker listening
PGPASSWORD=bench "$PGBIN/pgbench" -n -S -c 8 -j 2 -t 500 -h 127.0.0.1 -p "$port" -U bench bench >"$tmp/pgbench.out" 2>&1 ||
	{ cat "$tmp/pgbench.out"; exit 2; }
sleepers=()
for _ in 1 2 3 4 5 6; do
	PGPASSWORD=bench "$PGBIN/psql" -X -q -h 127.0.0.1 -p "$port" -U bench -c 'SELECT pg_sleep(8)' bench >/dev/null 2>&1 &
	sleepers+=($!)
done
sleep 2	# the six are inside their query

eport=$(pgv_free_port 29300)
cat >"$tmp/exporter.yml" <<YML
exporter_host: 127.0.0.1
exporter_port: $eport
pgbouncers:
  - dsn: postgresql://bench:bench@127.0.0.1:$port/pgbouncer
    connect_timeout: 5
YML
"$venv/bin/pgbouncer-exporter" --config "$tmp/exporter.yml" --log-file "$tmp/exporter.log" &
exporter=$!
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$eport/metrics" >/dev/null && break; sleep 0.1; done
# Both scraped while nothing moves: the sleepers are mid-query, pgbench is done.
curl -sf "http://127.0.0.1:$eport/metrics" >"$tmp/exporter.prom"
curl -sf "http://127.0.0.1:$mport/metrics" >"$tmp/pgvalve.prom"
kill "$exporter" 2>/dev/null
wait "$exporter" 2>/dev/null
wait "${sleepers[@]}" 2>/dev/null

# sample FILE NAME LABELS: the value of the sample NAME{LABELS} (labels as printed, in order).
sample() { awk -v k="$2{$3}" '$1 == k { print $2 + 0; exit }' "$1"; }
failed=0 checked=0
# same EXPORTER_NAME EXPORTER_LABELS PGVALVE_NAME PGVALVE_LABELS [SCALE]: pgvalve's value times SCALE
# (seconds to microseconds) equals the exporter's.
same() {
	local e v
	e=$(sample "$tmp/exporter.prom" "$1" "$2")
	v=$(sample "$tmp/pgvalve.prom" "$3" "$4")
	checked=$((checked + 1))
	if [ -z "$e" ] || [ -z "$v" ] ||
		! awk -v e="$e" -v v="$v" -v s="${5:-1}" 'BEGIN { d = e - v * s; exit !(d < 0.5 && d > -0.5) }'; then
		echo "exporter: $1{$2} = ${e:-none}, pgvalve's $3{$4} = ${v:-none} (x${5:-1})"
		failed=1
	fi
}
db='database="bench"' pool='database="bench",user="bench"'
same pgbouncer_stats_transactions_total "$db" pgbouncer_stats_sql_transactions_pooled_total "$db"
same pgbouncer_stats_queries_total "$db" pgbouncer_stats_queries_pooled_total "$db"
same pgbouncer_stats_received_bytes_total "$db" pgbouncer_stats_received_bytes_total "$db"
same pgbouncer_stats_sent_bytes_total "$db" pgbouncer_stats_sent_bytes_total "$db"
same pgbouncer_stats_transactions_duration_microseconds_total "$db" \
	pgbouncer_stats_server_in_transaction_seconds_total "$db" 1000000
same pgbouncer_stats_queries_duration_microseconds_total "$db" pgbouncer_stats_queries_duration_seconds_total "$db" 1000000
same pgbouncer_stats_waiting_duration_microseconds_total "$db" pgbouncer_stats_client_wait_seconds_total "$db" 1000000
for m in client_active client_waiting server_active server_idle server_used server_testing server_login; do
	same "pgbouncer_pools_${m}_connections" "$pool" "pgbouncer_pools_${m}_connections" "$pool"
done
same pgbouncer_databases_database_pool_size 'backend_database="bench",database="bench"' pgbouncer_databases_pool_size \
	"name=\"bench\",host=\"127.0.0.1\",port=\"$pgport\",database=\"bench\",force_user=\"\",pool_mode=\"\""
same pgbouncer_databases_database_current_connections 'backend_database="bench",database="bench"' \
	pgbouncer_databases_current_connections \
	"name=\"bench\",host=\"127.0.0.1\",port=\"$pgport\",database=\"bench\",force_user=\"\",pool_mode=\"\""
active=$(sample "$tmp/pgvalve.prom" pgbouncer_pools_client_active_connections "$pool")
txns=$(sample "$tmp/pgvalve.prom" pgbouncer_stats_sql_transactions_pooled_total "$db")
# Figures that could agree by being empty or zero prove nothing.
if [ "${active:-0}" -lt 6 ] || [ "${txns:-0}" -lt 4000 ]; then
	echo "exporter: expected 6 active clients and 4,000 transactions, /metrics has ${active:-none} and ${txns:-none}"
	failed=1
fi
if [ "$failed" = 0 ]; then
	echo "exporter: $checked figures agree ($txns transactions, $active active clients over 4 workers)"
else
	tail -5 "$tmp/exporter.log"
fi
exit "$failed"
