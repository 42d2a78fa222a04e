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
# (pgvtest). Before each run it waits up to PGV_BENCH_WAIT_QUIET seconds
# (30; 0 = not at all) for the machine to be under 10% busy, as other
# sessions' builds and tests skew both figures. Prints one line per run
# and the medians.
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
busy_total() { awk '/^cpu /{print $2 + $3 + $4 + $7 + $8, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9}' /proc/stat; }
wait_quiet() {	# until the machine's busy share over 1 s is under 10%, or the wait is over
	local until=$((SECONDS + ${PGV_BENCH_WAIT_QUIET:-30})) a b
	while ((SECONDS < until)); do
		a=$(busy_total); sleep 1; b=$(busy_total)
		awk -v a="$a" -v b="$b" 'BEGIN { split(a, x); split(b, y);
			exit !(y[2] > x[2] && (y[1] - x[1]) * 100 < 10 * (y[2] - x[2])) }' && return
	done
	echo "machine still busy after ${PGV_BENCH_WAIT_QUIET:-30} s; running anyway" >&2
}
run() {	# mode extra-args... -> "tps failed cpu_us_per_txn"
	local mode=$1; shift
	wait_quiet
	"$pgvalve" -q "$dir/pgv.ini" 2>"$dir/pgv.err" & local pid=$!
	sleep 0.5
	local t0 t1 out
	t0=$(cpu_ticks $pid 2>/dev/null || echo 0)
	out=$(pgbench -n -S -M "$mode" -c 50 -j 2 -T "$secs" "$@" -h 127.0.0.1 -p $port -U postgres "$db" 2>&1) || true
	t1=$(cpu_ticks $pid 2>/dev/null || echo 0)
	kill $pid 2>/dev/null; wait $pid 2>/dev/null || true
	local tps failed txns
	tps=$(sed -n 's/^tps = \([0-9.]*\) (without.*/\1/p' <<<"$out")
	failed=$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' <<<"$out")
	txns=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' <<<"$out")
	if [ -z "$tps" ] || [ "${txns:-0}" -eq 0 ] || [ "${failed:-1}" -ne 0 ]; then
		# A run that broke says why, and counts as failed rather than ending the benchmark.
		{ echo "run $mode $*: pgbench:"; tail -n 5 <<<"$out"; echo "pgvalve:"; tail -n 5 "$dir/pgv.err"; } >&2
		echo "${tps:-0} ${failed:-?} NA"
		return
	fi
	local hz; hz=$(getconf CLK_TCK)
	echo "$tps $failed $(awk -v t=$((t1 - t0)) -v n="$txns" -v hz="$hz" 'BEGIN{printf "%.1f", t * 1e6 / hz / n}')"
}
declare -A tps cpu
for r in $(seq "$rounds"); do
	for mode in extended prepared; do
		read -r t f _ < <(run $mode)
		read -r _ f2 c < <(run $mode -R "$rate")
		echo "round $r $mode: tps $t failed $f | at $rate tps: cpu ${c} us/txn failed $f2"
		[ "$f" != 0 ] || tps[$mode]+="$t "
		[ "$f2" != 0 ] || cpu[$mode]+="$c "
	done
done
# Of the runs without failures (those above say what went wrong).
median() { tr ' ' '\n' | grep -E '^[0-9.]+$' | sort -g | awk '{a[NR]=$1} END{print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
for mode in extended prepared; do
	echo "median $mode: tps $(median <<<"${tps[$mode]}") cpu_us_per_txn $(median <<<"${cpu[$mode]}")"
done
rm -rf "$dir"
