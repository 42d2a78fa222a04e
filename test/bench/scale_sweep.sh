#!/usr/bin/env bash
#
# test/bench/scale_sweep.sh - test/bench/scale.sh at several client counts,
# pgvalve beside PgBouncer, and a plot of what it found: memory per client
# and the active clients' p99 against the number of clients held.
# `make bench-scale-sweep` runs it.
#
#   [PGBOUNCER=/path/to/pgbouncer] scale_sweep.sh [--clients LIST] [--active N] [--rate TPS]
#                                                 [--duration S] [--login-rate N] [--out DIR] [--plot-only]
#
# For each N in LIST (1000,10000,100000,1000000): N SCRAM clients held,
# min(N, --active) of them (10,000) running --rate (5,000) transactions a
# second in total through a pool of 20, as scale.sh runs them (pgvalve
# with workers = ceil(N / 15000) + 1; PgBouncer, with PGBOUNCER set, as as
# many so_reuseport processes), the held clients logging in at
# --login-rate a second (4,000: on 2 cores a faster login phase starves
# the active clients of CPU, pooler and generator alike). Writes DIR/scale.dat (one line per N:
# each pooler's bytes per client, p99 with only the active clients
# connected, p99 with all of them, longest wait), the summary lines in
# DIR/scale.txt, and with gnuplot (`pgv_deps_ensure bench`) DIR/scale.png
# (a run with failed logins is plotted too; its count is in scale.dat).
# --plot-only: no runs, the plot of an existing DIR/scale.dat.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
client_list=1000,10000,100000,1000000 active=10000 rate=5000 duration=20 login_rate=4000 out=$PWD plot_only=0
usage="usage: scale_sweep.sh [--clients LIST] [--active N] [--rate TPS] [--duration S] [--login-rate N] [--out DIR] [--plot-only]"
while [ $# -gt 0 ]; do
	case $1 in
	--clients) client_list=$2; shift 2 ;;
	--active) active=$2; shift 2 ;;
	--rate) rate=$2; shift 2 ;;
	--duration) duration=$2; shift 2 ;;
	--login-rate) login_rate=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	--plot-only) plot_only=1; shift ;;
	*) echo "$usage" >&2; exit 2 ;;
	esac
done
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
pgb_flag=
[ -n "${PGBOUNCER:-}" ] && pgb_flag=--pgbouncer

field() { sed -n "s/.* $2=\([^ ]*\).*/\1/p" <<<"$1"; }
IFS=, read -r -a counts <<<"$client_list"
[ "$plot_only" = 1 ] && counts=()
if [ "$plot_only" = 0 ]; then
	: >"$out/scale.txt"
	echo "# clients, then for pgvalve and PgBouncer: bytes_per_client base_p99_ms p99_ms longest_wait_ms failed" >"$out/scale.dat"
fi
for n in "${counts[@]}"; do
	a=$((n < active ? n : active))
	echo "scale_sweep: $n clients, $a active at $rate tps"
	log="$out/scale-$n.log"
	"$here/scale.sh" --clients "$n" --active "$a" --rate "$rate" --duration "$duration" --login-rate "$login_rate" \
		$pgb_flag 2>&1 | tee "$log"
	row="$n"
	for pooler in pgvalve pgbouncer; do
		line=$(grep "^bench-scale: pooler=$pooler " "$log" | tail -n 1)
		[ -n "$line" ] && echo "$line" >>"$out/scale.txt"
		if [ -n "$line" ]; then
			row="$row $(field "$line" bytes_per_client) $(field "$line" base_p99_ms) $(field "$line" p99_ms) $(field "$line" longest_wait_ms) $(field "$line" failed)"
		else
			row="$row - - - - -"	# not run
		fi
	done
	echo "$row" >>"$out/scale.dat"
done
echo
[ "$plot_only" = 0 ] && cat "$out/scale.txt"
echo "data: $out/scale.dat"

if command -v gnuplot >/dev/null 2>&1; then
	gp=$(mktemp)
	{
		echo "set terminal pngcairo size 1100,450 noenhanced"
		echo "set output '$out/scale.png'"
		echo "set datafile missing '-'"
		echo "set multiplot layout 1,2 title 'clients held (SCRAM), $active of them at $rate tps through a pool of 20'"
		echo "set logscale x; set xlabel 'clients held'; set grid; set key top left; set format x '%.0s%c'"
		echo "set ylabel 'pooler memory per client (bytes)'"
		echo "set yrange [0:*]"
		echo "plot '$out/scale.dat' using 1:2 with linespoints title 'pgvalve', '' using 1:7 with linespoints title 'PgBouncer'"
		echo "set ylabel 'p99 of the active clients (ms)'; set logscale y; set yrange [*:*]"
		echo "plot '$out/scale.dat' using 1:4 with linespoints title 'pgvalve, all held', '' using 1:9 with linespoints title 'PgBouncer, all held', '' using 1:3 with linespoints dashtype 2 title 'pgvalve, active alone', '' using 1:8 with linespoints dashtype 2 title 'PgBouncer, active alone'"
		echo "unset multiplot"
	} >"$gp"
	gnuplot "$gp" && echo "plot: $out/scale.png"
	rm -f "$gp"
else
	echo "scale_sweep: gnuplot is not installed: no plot (scripts/deps.sh: pgv_deps_ensure bench)"
fi
