#!/usr/bin/env bash
#
# test/bench/sweep.sh - throughput and latency against the number of
# clients: persistent pgbench clients running "SELECT 1" (simple protocol)
# through pgvalve, through PgBouncer, and straight to
# PostgreSQL (up to 200 clients: its max_connections is 220 here).
# `make bench-sweep` runs it.
#
#   [PGBOUNCER=/path/to/pgbouncer] sweep.sh [--duration S] [--rounds N] [--clients LIST] [--out DIR]
#
# PGBOUNCER is the PgBouncer to compare with; without it, Debian's
# /usr/sbin/pgbouncer when installed. The table and the plot name its version.
#
# Prints per client count and target the median tps and average latency
# over the rounds (targets alternate within a round), with pgvalve's tps as
# a ratio to PgBouncer's and to direct. Writes DIR/sweep.dat and, when
# gnuplot is installed (`pgv_deps_ensure bench` in scripts/deps.sh),
# DIR/sweep.png: tps and latency against clients, log scale.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
srcdir=${abs_top_srcdir:-$(cd "$here/../.." && pwd)}
builddir=${abs_top_builddir:-$srcdir/build}
duration=10 rounds=3 client_list=10,50,100,200,500,1000,2000,3000 out=$PWD
while [ $# -gt 0 ]; do
	case $1 in
	--duration) duration=$2; shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	--clients) client_list=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	*) echo "usage: sweep.sh [--duration S] [--rounds N] [--clients LIST] [--out DIR]" >&2; exit 2 ;;
	esac
done
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
bench_scale=0	# SELECT 1 needs no tables
# shellcheck source=lib.sh
. "$here/lib.sh"
bench_setup_cluster
echo "SELECT 1;" >"$tmp/select1.sql"
[ -n "$runas" ] && chown "$runas:" "$tmp/select1.sql"
bench_start_pgvalve "max_client_conn = 4000"

targets=("pgvalve $port")
bench_start_pgbouncer "max_client_conn = 4000" && targets+=("pgbouncer $pgb_port")
targets+=("direct $pgport")

# run_sweep PORT CLIENTS -> "tps latency_ms"
run_sweep() {
	PGPASSWORD=bench PGSSLMODE=disable "$PGBIN/pgbench" -n -T "$duration" -c "$2" -j 2 -M simple \
		-f "$tmp/select1.sql" -h 127.0.0.1 -p "$1" -U bench bench >"$tmp/run.out" 2>&1
	local tps lat
	tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$tmp/run.out" | tail -1)
	lat=$(sed -n 's/^latency average = \([0-9.]*\) ms.*/\1/p' "$tmp/run.out")
	if ! grep -q "number of failed transactions: 0 " "$tmp/run.out"; then
		echo "${0##*/}: port $1, $2 clients: pgbench failed:" >&2
		tail -3 "$tmp/run.out" >&2
	fi
	echo "${tps:-0} ${lat:-0}"
}

IFS=, read -ra counts <<<"$client_list"
declare -A tps lat
for n in "${counts[@]}"; do
	for r in $(seq "$rounds"); do
		order=("${targets[@]}")
		[ $((r % 2)) -eq 0 ] && order=("${targets[@]:1}" "${targets[0]}")
		for t in "${order[@]}"; do
			read -r name p <<<"$t"
			[ "$name" = direct ] && [ "$n" -gt 200 ] && continue
			read -r a b < <(run_sweep "$p" "$n")
			tps[$name.$n]+="$a " lat[$name.$n]+="$b "
		done
	done
done

names=()
for t in "${targets[@]}"; do read -r name _ <<<"$t"; names+=("$name"); done
{
	printf '# clients'
	for name in "${names[@]}"; do printf ' %s_tps %s_lat_ms' "$name" "$name"; done
	echo
	for n in "${counts[@]}"; do
		printf '%s' "$n"
		for name in "${names[@]}"; do
			if [ -n "${tps[$name.$n]:-}" ]; then
				printf ' %s %s' "$(printf '%s\n' ${tps[$name.$n]} | median)" "$(printf '%s\n' ${lat[$name.$n]} | median)"
			else
				printf ' NaN NaN'
			fi
		done
		echo
	done
} >"$out/sweep.dat"

printf '\n%s\n' "$(bench_pgbouncer_line)"
printf '%8s' clients
for name in "${names[@]}"; do printf ' %12s %10s' "${name}_tps" "lat_ms"; done
printf ' %12s %12s\n' vs_pgbouncer vs_direct
awk -v names="${names[*]}" 'BEGIN { k = split(names, nm, " ") }
	/^#/ { next }
	{
		printf "%8s", $1
		for (i = 1; i <= k; i++) {
			t[nm[i]] = $(2 * i)
			if ($(2 * i) == "NaN") printf " %12s %10s", "-", "-"
			else printf " %12.0f %10.2f", $(2 * i), $(2 * i + 1)
		}
		vb = (t["pgbouncer"] != "" && t["pgbouncer"] != "NaN" && t["pgbouncer"] > 0) ? sprintf("%.2f", t["pgvalve"] / t["pgbouncer"]) : "-"
		vd = (t["direct"] != "NaN" && t["direct"] > 0) ? sprintf("%.2f", t["pgvalve"] / t["direct"]) : "-"
		printf " %12s %12s\n", vb, vd
	}' "$out/sweep.dat"
echo
echo "median of $rounds rounds of ${duration}s; pgbench -c N -j 2 -M simple, SELECT 1; transaction mode, pool of 20"
echo "data: $out/sweep.dat"

if command -v gnuplot >/dev/null 2>&1; then
	{
		echo "set terminal pngcairo size 1100,450 noenhanced"
		echo "set output '$out/sweep.png'"
		echo "set multiplot layout 1,2 title 'pgbench SELECT 1, persistent clients (median of $rounds x ${duration}s; ${pgb_version:-no PgBouncer})'"
		echo "set logscale x; set xlabel 'clients'; set grid; set key top left"
		echo "set ylabel 'tps'"
		printf "plot"
		i=0
		for name in "${names[@]}"; do
			[ $i -gt 0 ] && printf ","
			printf " '%s' using 1:%d with linespoints title '%s'" "$out/sweep.dat" $((2 * i + 2)) "$name"
			i=$((i + 1))
		done
		echo
		echo "set ylabel 'average latency (ms)'; set logscale y"
		printf "plot"
		i=0
		for name in "${names[@]}"; do
			[ $i -gt 0 ] && printf ","
			printf " '%s' using 1:%d with linespoints title '%s'" "$out/sweep.dat" $((2 * i + 3)) "$name"
			i=$((i + 1))
		done
		echo
		echo "unset multiplot"
	} >"$tmp/sweep.gp"
	gnuplot "$tmp/sweep.gp" && echo "plot: $out/sweep.png"
else
	echo "${0##*/}: no gnuplot, no plot"
fi
