#!/usr/bin/env bash
#
# test/bench/fresh.sh - what read your writes (load_balance_reads,
# balance_fresh.h) costs a write transaction: pgbench's client-side
# latency, and pgvalve's CPU per transaction, of one-UPDATE transactions
# through a database with load_balance_reads = off and the same database
# with auto, on a throwaway cluster.
#
#   fresh.sh [--transactions N] [--clients C] [--runs R] [--rate TPS] [--read] [--standby]
#
# --read runs a one-SELECT script instead: what auto's classifier and
# routing cost a read-only transaction in pgvalve (with no standby in
# the list the read is judged, found no standby to go to, and runs on the
# primary; the lending to a standby pool is not in this figure).
#
# --standby adds a streaming replica (pg_basebackup -R) on 127.0.0.2, same
# port, and lists it second (host=127.0.0.1,127.0.0.2): with auto, --read's
# SELECTs are lent to the standby pool and run on the replica, so the
# figure is the whole path (classify, route, lend, give back); with off
# they run on the primary. A third database, rep, lists the replica alone
# (off): what pgvalve's CPU is when it relays to that replica with no
# balancing, so that a difference of the servers does not pass for the
# balancer's cost. pgvalve's CPU is counted alone, not the servers'.
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
transactions=5000 clients=4 runs=3 rate= script=write standby=
while [ $# -gt 0 ]; do
	case $1 in
	--transactions) transactions=$2; shift 2 ;;
	--clients) clients=$2; shift 2 ;;
	--runs) runs=$2; shift 2 ;;
	--rate) rate=$2; shift 2 ;;
	--read) script=read; shift ;;
	--standby) standby=1; shift ;;
	*) echo "usage: fresh.sh [--transactions N] [--clients C] [--runs R] [--rate TPS] [--read] [--standby]" >&2; exit 2 ;;
	esac
done
bench_scale=1
# shellcheck source=lib.sh
. "$here/lib.sh"
bench_setup_cluster
second=127.0.0.1
# a streaming replica of the bench cluster on 127.0.0.2, same port (stopped by stop_standby at exit)
start_standby() {
	local data=$tmp/standby
	printf 'host replication all 127.0.0.0/8 trust\nhost all all 127.0.0.0/8 md5\n' >>"$tmp/pgdata/pg_hba.conf"
	"$PGBIN/psql" -X -q -h "$tmp" -p "$pgport" -U postgres -d postgres -c "SELECT pg_reload_conf()" >/dev/null
	mkdir -p "$tmp/standby-sock" && [ -n "$runas" ] && chown "$runas:" "$tmp/standby-sock"
	(cd "$tmp" && pgv_as "$runas" "$PGBIN/pg_basebackup" -h 127.0.0.1 -p "$pgport" -U postgres -D "$data" -R \
		>"$tmp/basebackup.log" 2>&1) || { cat "$tmp/basebackup.log" >&2; exit 1; }
	printf "listen_addresses = '127.0.0.2'\nunix_socket_directories = '%s'\n" "$tmp/standby-sock" \
		>>"$data/postgresql.conf"
	pgv_pg_start "$data" "$runas" "$tmp/standby.log" || exit 1
	second=127.0.0.2
}
stop_standby() {
	[ -n "$tmp" ] && [ -f "$tmp/standby.pid" ] && pgv_pg_stop "$tmp/standby" "$runas"
	bench_cleanup
}
if [ -n "$standby" ]; then
	trap stop_standby EXIT
	start_standby
fi
list="host=127.0.0.1,$second port=$pgport dbname=bench target_session_attrs=read-write"
bench_extra_databases="bfoff = $list load_balance_reads=off
bfauto = $list load_balance_reads=auto"
dbs="bfoff bfauto"
if [ -n "$standby" ]; then
	bench_extra_databases+="
bfrep = host=$second port=$pgport dbname=bench"
	dbs+=" bfrep"
fi
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

for db in $dbs; do
	: >"$tmp/$db.txt"
done
for _ in $(seq "$runs"); do
	for db in $dbs; do
		one_run "$db" >>"$tmp/$db.txt"
	done
done
echo "pgbench -n -f $script.sql (one $( [ "$script" = read ] && echo SELECT || echo UPDATE )) -c $clients -j 2 -t $transactions${rate:+ -R $rate}, medians of $runs runs:"
for db in $dbs; do
	med=$(cut -d' ' -f1 "$tmp/$db.txt" | median)
	avg=$(cut -d' ' -f2 "$tmp/$db.txt" | median)
	cpu=$(cut -d' ' -f3 "$tmp/$db.txt" | median)
	label="load_balance_reads=${db#bf}"
	[ "$db" = bfrep ] && label="the replica alone, off"
	echo "  $label: latency median $med ms (average $avg ms), pgvalve CPU $cpu us/txn" \
		"(runs' medians: $(cut -d' ' -f1 "$tmp/$db.txt" | tr '\n' ' '))"
done
# host_column DB HOST COLUMN: SHOW HOSTS' COLUMN of DB's entries named HOST ("": all of DB's), summed
host_column() {
	PGPASSWORD=bench "$PGBIN/psql" -X -A -h 127.0.0.1 -p "$port" -U bench -c "SHOW HOSTS" pgbouncer |
		awk -F'|' -v db="$1" -v host="$2" -v col="$3" '
			NR == 1 { for (i = 1; i <= NF; i++) if ($i == col) c = i; next }
			c && $1 == db && (host == "" || $2 == host) { s += $c }
			END { print s + 0 }'
}
[ -n "$standby" ] && echo "  reads the balancer sent to the replica (SHOW HOSTS reads_balanced of bfauto on 127.0.0.2): $(host_column bfauto 127.0.0.2 reads_balanced)"
echo "  transactions the balancer counted (SHOW HOSTS xact_count of bfauto; each write asks the position): $(host_column bfauto "" xact_count)"
