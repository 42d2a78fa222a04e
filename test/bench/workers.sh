#!/usr/bin/env bash
#
# test/bench/workers.sh - pgbench -S through pgvalve with workers = 1 and
# workers = 2 (or --workers LIST), on a throwaway cluster. `make
# bench-workers` runs it.
#
#   workers.sh [--duration S] [--rounds N] [--clients N] [--workers LIST] [--pool-size N]
#
# Each round starts pgvalve once per workers value (transaction pooling,
# default_pool_size = 20 for the instance, or --pool-size, md5), runs pgbench -S -M simple -C
# off, and stops it; the rounds interleave the values so a noisy machine
# hurts them alike. Prints the median tps per value. Build without
# sanitizers for meaningful figures (PGVALVE=path/to/pgvalve).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
srcdir=${abs_top_srcdir:-$(cd "$here/../.." && pwd)}
builddir=${abs_top_builddir:-$srcdir/build}
duration=10 rounds=3 clients=50 workers_list="1,2" pool_size=20
while [ $# -gt 0 ]; do
	case $1 in
	--duration) duration=$2; shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	--clients) clients=$2; shift 2 ;;
	--workers) workers_list=$2; shift 2 ;;
	--pool-size) pool_size=$2; shift 2 ;;
	*) echo "usage: workers.sh [--duration S] [--rounds N] [--clients N] [--workers LIST] [--pool-size N]" >&2; exit 2 ;;
	esac
done
# shellcheck source=lib.sh
. "$here/lib.sh"
bench_setup_cluster

IFS=, read -ra wl <<<"$workers_list"
declare -A tps
for round in $(seq "$rounds"); do
	for w in "${wl[@]}"; do
		bench_start_pgvalve "workers = $w
default_pool_size = $pool_size"
		sleep 1	# every worker listening, not just the first
		read -r t _ < <(run_pgbench "$port" -S -M simple -c "$clients" -j 2)
		tps[$w]="${tps[$w]:-} $t"
		echo "workers.sh: round $round, workers = $w: $t tps, $(grep -E '^latency average' "$tmp/run.out")"
		bench_stop_pgvalve
	done
done

printf '\n%-8s %12s   %s\n' workers median_tps rounds
for w in "${wl[@]}"; do
	# shellcheck disable=SC2086 # the list of numbers is meant to split
	printf '%-8s %12.0f  %s\n' "$w" "$(printf '%s\n' ${tps[$w]} | median)" "${tps[$w]}"
done
echo
echo "pgbench -S -M simple, $clients clients, -j 2, ${duration}s rounds; pool of $pool_size for the instance; $(nproc) CPUs"
