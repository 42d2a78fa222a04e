#!/usr/bin/env bash
#
# test/bench/session_sets_cost.sh - what remembering clients' own SETs
# costs in transaction pooling (issue 14, track_client_set): pooler CPU per
# transaction of pgbench -S whose clients each run a few session SETs when
# they start (statement_timeout, lock_timeout, search_path: what
# applications do at connect), against the same run without them, at a
# fixed rate.
#
#   session_sets_cost.sh [--duration S] [--rounds N] [--rate TPS] [--clients N] [--in-transaction]
#
# --in-transaction: what learning a transaction's settings costs (issue
# 55): both run BEGIN; SET search_path; the SELECT; COMMIT, whose SET
# pgvalve learns from the server after the COMMIT is answered, against
# the same with track_client_set = off (nothing learned: PgBouncer's
# behaviour). Besides CPU, each round prints both runs' latency average
# (pgbench's, at the same rate): learning is one round trip on the server
# after the client has its answer, and must not show in the latency.
#
# Two identical pgvalve processes (pool of 20) run side by side, each with
# its own pgbench at the same rate (more clients than servers, so clients
# change servers all the time), so a shared, noisy machine slows both
# alike; each round prints both CPU-per-transaction figures (utime + stime
# from /proc) and their ratio, with SETs / without; the median ratio comes
# last. Build without sanitizers for meaningful figures (PGVALVE=...).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
srcdir=${abs_top_srcdir:-$(cd "$here/../.." && pwd)}
builddir=${abs_top_builddir:-$srcdir/build}
duration=20 rounds=5 rate=2000 clients=50 in_txn=0
while [ $# -gt 0 ]; do
	case $1 in
	--in-transaction) in_txn=1; shift ;;
	--duration) duration=$2; shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	--rate) rate=$2; shift 2 ;;
	--clients) clients=$2; shift 2 ;;
	*) echo "usage: session_sets_cost.sh [--duration S] [--rounds N] [--rate TPS] [--clients N] [--in-transaction]" >&2
		exit 2 ;;
	esac
done
# shellcheck source=lib.sh
. "$here/lib.sh"
bench_setup_cluster

plain_pid= sets_pid=
cost_cleanup() {
	for p in $plain_pid $sets_pid; do pgv_kill_pids "$p"; done
	bench_cleanup
}
trap cost_cleanup EXIT

# The same SELECT as pgbench -S; the "sets" script first runs three SETs,
# once per client (pgbench keeps a client's variables across its runs).
select_sql='\set aid random(1, 100000 * :scale)
SELECT abalance FROM pgbench_accounts WHERE aid = :aid;'
plain_ini=
if [ "$in_txn" = 1 ]; then
	printf '%s\n' 'BEGIN;' 'SET search_path = public;' "$select_sql" 'COMMIT;' >"$tmp/sets.sql"
	cp "$tmp/sets.sql" "$tmp/plain.sql"
	plain_ini='track_client_set = 0'
else
	printf '%s\n' "$select_sql" >"$tmp/plain.sql"
	{
		printf '%s\n' '\if :did_set = 0' "SET statement_timeout = '30s';" "SET lock_timeout = '10s';" \
			'SET search_path = public;' '\set did_set 1' '\endif'
		printf '%s\n' "$select_sql"
	} >"$tmp/sets.sql"
fi

pgbench_at() {
	PGPASSWORD=bench PGSSLMODE=disable "$PGBIN/pgbench" -n -M simple -R "$rate" -c "$clients" -j 1 \
		-T "$duration" -D did_set=0 -D scale="${bench_scale:-10}" -f "$tmp/$2.sql" \
		-h 127.0.0.1 -p "$1" -U bench bench >"$tmp/run.$2.out" 2>&1
	grep -q '^number of failed transactions: [1-9]' "$tmp/run.$2.out" &&
		echo "${0##*/}: failed transactions in the $2 run" >&2
	sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$tmp/run.$2.out"
}

plain_port=$(pgv_free_port $((pgport + 1)))
sets_port=$(pgv_free_port $((plain_port + 1)))
ratios=
for round in $(seq "$rounds"); do
	plain_pid=$(bench_start_named plain "$plain_port" "$plain_ini")
	sets_pid=$(bench_start_named sets "$sets_port" "")
	bench_wait_ready "$plain_port" && bench_wait_ready "$sets_port" || exit 1
	a0=$(bench_cpu_ticks "$plain_pid") b0=$(bench_cpu_ticks "$sets_pid")
	pgbench_at "$plain_port" plain >"$tmp/n.plain" &
	bench_a=$!
	pgbench_at "$sets_port" sets >"$tmp/n.sets"
	wait "$bench_a"
	a1=$(bench_cpu_ticks "$plain_pid") b1=$(bench_cpu_ticks "$sets_pid")
	n_plain=$(cat "$tmp/n.plain") n_sets=$(cat "$tmp/n.sets")
	pgv_kill_pids "$plain_pid" "$sets_pid"
	plain_pid= sets_pid=
	line=$(bench_cpu_ratio_line without $((a1 - a0)) "$n_plain" with $((b1 - b0)) "$n_sets")
	lat_plain=$(sed -n 's/^latency average = \([0-9.]*\) ms.*/\1/p' "$tmp/run.plain.out")
	lat_sets=$(sed -n 's/^latency average = \([0-9.]*\) ms.*/\1/p' "$tmp/run.sets.out")
	echo "${0##*/}: round $round: $line; latency average without ${lat_plain:-?} ms, with ${lat_sets:-?} ms"
	ratios="$ratios ${line##* }"
done
printf '%s\n' $ratios | median | awk '{ printf "session_sets_cost.sh: median CPU per transaction, with SETs / without: %.3f\n", $1 }'
