#!/usr/bin/env bash
#
# test/bench/metrics_cost.sh - what the metrics endpoint costs: pooler CPU
# per transaction with metrics_port set and one scrape a second, against
# the same pgvalve without it, at a fixed rate (pgbench -S -R).
#
#   metrics_cost.sh [--duration S] [--rounds N] [--rate TPS] [--clients N]
#
# The two pgvalve processes run side by side, each with its own pgbench
# at the same rate, so a shared, noisy machine slows both alike; each
# round takes their CPU (utime + stime from /proc) over the run and prints
# the ratio of CPU per transaction, metrics on / off. Prints the median
# ratio at the end. Build without sanitizers for meaningful figures
# (PGVALVE=path/to/pgvalve).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
srcdir=${abs_top_srcdir:-$(cd "$here/../.." && pwd)}
builddir=${abs_top_builddir:-$srcdir/build}
duration=20 rounds=5 rate=2000 clients=20
while [ $# -gt 0 ]; do
	case $1 in
	--duration) duration=$2; shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	--rate) rate=$2; shift 2 ;;
	--clients) clients=$2; shift 2 ;;
	*) echo "usage: metrics_cost.sh [--duration S] [--rounds N] [--rate TPS] [--clients N]" >&2; exit 2 ;;
	esac
done
# shellcheck source=lib.sh
. "$here/lib.sh"
bench_setup_cluster

scraper_pid= on_pid= off_pid=
cost_cleanup() {
	[ -n "$scraper_pid" ] && kill "$scraper_pid" 2>/dev/null
	for p in $on_pid $off_pid; do pgv_kill_pids "$p"; done
	bench_cleanup
}
trap cost_cleanup EXIT

# One scrape a second, over bash's /dev/tcp (no curl needed); a line in $tmp/scrapes per answered one.
scrape_loop() {
	while sleep 1; do
		{ exec 3<>"/dev/tcp/127.0.0.1/$1" && printf 'GET /metrics HTTP/1.0\r\n\r\n' >&3 &&
			grep -c '^pgbouncer_up 1' <&3 >>"$tmp/scrapes"; } 2>/dev/null
		exec 3<&- 2>/dev/null
	done
}

pgbench_at() {
	PGPASSWORD=bench PGSSLMODE=disable "$PGBIN/pgbench" -n -S -M simple -R "$rate" -c "$clients" -j 1 \
		-T "$duration" -h 127.0.0.1 -p "$1" -U bench bench >"$tmp/run.$1.out" 2>&1
	sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$tmp/run.$1.out"
}

off_port=$(pgv_free_port $((pgport + 1)))
on_port=$(pgv_free_port $((off_port + 1)))
metrics_port=$(pgv_free_port $((on_port + 1)))
ratios=
for round in $(seq "$rounds"); do
	off_pid=$(bench_start_named off "$off_port" "")
	on_pid=$(bench_start_named on "$on_port" "metrics_port = $metrics_port")
	bench_wait_ready "$off_port" && bench_wait_ready "$on_port" || exit 1
	: >"$tmp/scrapes"
	scrape_loop "$metrics_port" &
	scraper_pid=$!
	a0=$(bench_cpu_ticks "$off_pid") b0=$(bench_cpu_ticks "$on_pid")
	pgbench_at "$off_port" >"$tmp/n.off" &
	bench_a=$!
	pgbench_at "$on_port" >"$tmp/n.on"
	wait "$bench_a"
	a1=$(bench_cpu_ticks "$off_pid") b1=$(bench_cpu_ticks "$on_pid")
	kill "$scraper_pid" 2>/dev/null
	wait "$scraper_pid" 2>/dev/null
	scraper_pid=
	n_off=$(cat "$tmp/n.off") n_on=$(cat "$tmp/n.on")
	pgv_kill_pids "$off_pid" "$on_pid"
	off_pid= on_pid=
	line=$(bench_cpu_ratio_line off $((a1 - a0)) "$n_off" on $((b1 - b0)) "$n_on")
	echo "${0##*/}: round $round: $line, $(grep -c '^1$' "$tmp/scrapes") scrapes"
	ratios="$ratios ${line##* }"
done
printf '%s\n' $ratios | median | awk '{ printf "metrics_cost.sh: median CPU per transaction, metrics on / off: %.3f\n", $1 }'
