#!/usr/bin/env bash
#
# test/bench/prepared_bench.sh PGVALVE PGPORT PGDB [ROUNDS] [SECONDS] [RATE]
#
# Issue 16's speed check: pgbench -S -M prepared against -M extended
# through pgvalve (transaction mode, max_prepared_statements = 200, 50
# clients, pool 20), interleaved rounds. Per run: tps, failed transactions,
# and pgvalve's CPU per transaction at a fixed rate (-R RATE) in a second
# run. PostgreSQL must be on 127.0.0.1:PGPORT with trust for user postgres
# and pgbench tables in PGDB. As root pgvalve runs as PGV_BENCH_USER
# (pgvtest). Prints one line per run and the medians.
set -euo pipefail
pgvalve=$1 pgport=$2 db=$3 rounds=${4:-5} secs=${5:-10} rate=${6:-3000}
dir=$(mktemp -d)
chmod 755 "$dir"
[ "$(id -u)" -ne 0 ] || chown "${PGV_BENCH_USER:-pgvtest}" "$dir"
port=$((pgport + 11))
echo '"postgres" "x"' >"$dir/userlist.txt"
cat >"$dir/pgv.ini" <<INI
[databases]
$db = host=127.0.0.1 port=$pgport dbname=$db
[pgvalve]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir = $dir
auth_type = trust
auth_file = $dir/userlist.txt
pool_mode = transaction
default_pool_size = 20
max_client_conn = 500
max_prepared_statements = 200
log_connections = 0
log_disconnections = 0
$([ "$(id -u)" -ne 0 ] || echo "user = ${PGV_BENCH_USER:-pgvtest}")
INI
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
run() {	# mode extra-args... -> "tps failed cpu_us_per_txn"
	local mode=$1; shift
	"$pgvalve" -q "$dir/pgv.ini" & local pid=$!
	sleep 0.5
	local t0; t0=$(cpu_ticks $pid)
	local out; out=$(pgbench -n -S -M "$mode" -c 50 -j 2 -T "$secs" "$@" -h 127.0.0.1 -p $port -U postgres "$db" 2>&1)
	local t1; t1=$(cpu_ticks $pid)
	kill $pid; wait $pid 2>/dev/null || true
	local tps failed txns
	tps=$(sed -n 's/^tps = \([0-9.]*\) (without.*/\1/p' <<<"$out")
	failed=$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' <<<"$out")
	txns=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' <<<"$out")
	local hz; hz=$(getconf CLK_TCK)
	echo "$tps ${failed:-?} $(awk -v t=$((t1 - t0)) -v n="$txns" -v hz="$hz" 'BEGIN{printf "%.1f", t * 1e6 / hz / n}')"
}
declare -A tps cpu
for r in $(seq "$rounds"); do
	for mode in extended prepared; do
		read -r t f _ < <(run $mode)
		read -r _ f2 c < <(run $mode -R "$rate")
		echo "round $r $mode: tps $t failed $f | at $rate tps: cpu ${c} us/txn failed $f2"
		tps[$mode]+="$t "
		cpu[$mode]+="$c "
	done
done
median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END{print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
for mode in extended prepared; do
	echo "median $mode: tps $(median <<<"${tps[$mode]}") cpu_us_per_txn $(median <<<"${cpu[$mode]}")"
done
rm -rf "$dir"
