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
# shellcheck source=lib.sh
. "$here/lib.sh"
bench_setup_cluster
bench_start_pgvalve ""

cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$pgv_pid/stat"; }
hz=$(getconf CLK_TCK)

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
