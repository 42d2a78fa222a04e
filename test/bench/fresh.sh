#!/usr/bin/env bash
#
# test/bench/fresh.sh - what read your writes (load_balance_reads,
# balance_fresh.h) costs a write transaction: pgbench's client-side
# latency, and pgvalve's CPU per transaction, of one-UPDATE transactions
# through a database with load_balance_reads = off and the same database
# with auto, on a throwaway cluster.
#
#   fresh.sh [--transactions N] [--clients C] [--runs R] [--rate TPS] [--read]
#
# --read runs a one-SELECT script instead: what auto's classifier and
# routing cost a read-only transaction in pgvalve (with no standby in
# the list the read is judged, found no standby to go to, and runs on the
# primary; the lending to a standby pool is not in this figure).
#
# Both databases list the one PostgreSQL twice
# (host=127.0.0.1,127.0.0.1 target_session_attrs=read-write): with auto,
# every write transaction is followed by the WAL position query on its
# server, which needs no standby. pgbench -c C (4) -j 2 -t N (5000) -f
# a one-UPDATE script, the two databases taking turns, R (3) runs each;
# prints the medians and the position queries pgvalve ran (SHOW HOSTS'
# xact_count of the auto database). --rate TPS (pgbench -R, all clients
# together) keeps the machine from saturating, so that the latency shows
# what is on the client's path rather than CPU contention. Build without
# sanitizers for meaningful figures (PGVALVE=path/to/pgvalve).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
srcdir=${abs_top_srcdir:-$(cd "$here/../.." && pwd)}
builddir=${abs_top_builddir:-$srcdir/build}
transactions=5000 clients=4 runs=3 rate= script=write
while [ $# -gt 0 ]; do
	case $1 in
	--transactions) transactions=$2; shift 2 ;;
	--clients) clients=$2; shift 2 ;;
	--runs) runs=$2; shift 2 ;;
	--rate) rate=$2; shift 2 ;;
	--read) script=read; shift ;;
	*) echo "usage: fresh.sh [--transactions N] [--clients C] [--runs R] [--rate TPS] [--read]" >&2; exit 2 ;;
	esac
done
bench_scale=1
# shellcheck source=lib.sh
. "$here/lib.sh"
bench_setup_cluster
list="host=127.0.0.1,127.0.0.1 port=$pgport dbname=bench target_session_attrs=read-write"
bench_extra_databases="bfoff = $list load_balance_reads=off
bfauto = $list load_balance_reads=auto"
bench_start_pgvalve "admin_users = bench" || exit 1
printf '\\set aid random(1, 100000)\nUPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = :aid;\n' \
	>"$tmp/write.sql"
printf '\\set aid random(1, 100000)\nSELECT abalance FROM pgbench_accounts WHERE aid = :aid;\n' >"$tmp/read.sql"
chmod 644 "$tmp/write.sql" "$tmp/read.sql"

# one_run DB: "median_latency_ms average_latency_ms cpu_us_per_txn" (the median of every
# transaction's latency, from pgbench -l: a stall of the shared machine moves the average, not it)
one_run() {
	local before after avg med
	rm -f "$tmp"/txlog.*
	before=$(bench_cpu_ticks "$pgv_pid")
	(cd "$tmp" && PGPASSWORD=bench "$PGBIN/pgbench" -n -l --log-prefix=txlog -f "$tmp/$script.sql" -c "$clients" -j 2 \
		-t "$transactions" ${rate:+-R "$rate"} -h 127.0.0.1 -p "$port" -U bench "$1" >"$tmp/run.out" 2>&1) ||
		{ tail -5 "$tmp/run.out" >&2; exit 1; }
	after=$(bench_cpu_ticks "$pgv_pid")
	avg=$(sed -n 's/^latency average = \([0-9.]*\) ms.*/\1/p' "$tmp/run.out")
	med=$(cat "$tmp"/txlog.* | awk '{ print $3 / 1000 }' | median)
	awk -v m="$med" -v a="$avg" -v t=$((after - before)) -v n=$((clients * transactions)) \
		'BEGIN { printf "%.3f %s %.2f\n", m, a, t * 10000 / n }'
}

: >"$tmp/bfoff.txt"
: >"$tmp/bfauto.txt"
for _ in $(seq "$runs"); do
	for db in bfoff bfauto; do
		one_run "$db" >>"$tmp/$db.txt"
	done
done
echo "pgbench -n -f $script.sql (one $( [ "$script" = read ] && echo SELECT || echo UPDATE )) -c $clients -j 2 -t $transactions${rate:+ -R $rate}, medians of $runs runs:"
for db in bfoff bfauto; do
	med=$(cut -d' ' -f1 "$tmp/$db.txt" | median)
	avg=$(cut -d' ' -f2 "$tmp/$db.txt" | median)
	cpu=$(cut -d' ' -f3 "$tmp/$db.txt" | median)
	echo "  load_balance_reads=${db#bf}: latency median $med ms (average $avg ms), pgvalve CPU $cpu us/txn" \
		"(runs' medians: $(cut -d' ' -f1 "$tmp/$db.txt" | tr '\n' ' '))"
done
echo "  transactions the balancer counted (SHOW HOSTS xact_count of bfauto; each write asks the position): $(PGPASSWORD=bench "$PGBIN/psql" -X -At -h 127.0.0.1 \
	-p "$port" -U bench -c "SHOW HOSTS" pgbouncer | awk -F'|' '$1 == "bfauto" { s += $10 } END { print s + 0 }')"
