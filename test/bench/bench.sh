#!/usr/bin/env bash
#
# test/bench/bench.sh - pgbench straight to PostgreSQL, through pgvalve and
# through PgBouncer, side by side on a throwaway cluster. `make bench` runs it.
#
#   [PGBOUNCER=/path/to/pgbouncer] bench.sh [--duration S] [--rounds N] [--clients N] [--scenarios LIST] [--rate TPS]
#
# PGBOUNCER (`make bench PGBOUNCER=...`) is the PgBouncer to compare with;
# without it, Debian's /usr/sbin/pgbouncer when installed. The table names
# its version.
#
# Scenarios (transaction pooling, pool of 20, md5 auth like a production
# setup): select (-S simple protocol), prepared (-S extended protocol),
# tpcb (built-in read/write), many (1000 clients on the pool of 20; no
# direct row since PostgreSQL allows 200 connections here), tls (select
# with client-side TLS to the pooler, sslmode=require; no direct row: the
# cluster serves plain text), lone (select by one client, -c 1: its tps is
# the inverse of a round trip's latency through the pooler, so a ratio
# above 1 is a shorter latency; lone_extended: the same with -M extended,
# not run unless named). Each round runs direct, then pgvalve and
# PgBouncer one after the other, pgvalve first in odd rounds and PgBouncer
# first in even ones (on a 2-core machine the second of a pair measured
# about 4% fewer tps at saturation, whichever pooler it was); prints, per scenario, the median tps over the rounds,
# each pooler's CPU per transaction, and pgvalve's ratios to direct (tps)
# and to PgBouncer (tps and CPU).
#
# --rate TPS throttles every run to TPS transactions a second (pgbench -R)
# and prints, instead, each pooler's latency (pgbench's average, from each
# transaction's scheduled start) and CPU per transaction at that equal load,
# the figures compare.sh's --rate gives but with the order alternating as
# above (compare.sh runs its poolers in the same order every round, and the
# second of a pair then runs on a machine its predecessor just warmed or
# loaded). Connect-per-transaction logins are
# `make bench-connect`, the client-count sweep `make bench-sweep`, idle
# memory `make bench-idle`; ../shared/bench/compare.sh is the shared
# harness (see doc/benchmarks.md).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
srcdir=${abs_top_srcdir:-$(cd "$here/../.." && pwd)}
builddir=${abs_top_builddir:-$srcdir/build}
duration=10 rounds=3 clients=50 scenarios="select,prepared,tpcb,many,tls,lone" rate=
while [ $# -gt 0 ]; do
	case $1 in
	--duration) duration=$2; shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	--clients) clients=$2; shift 2 ;;
	--scenarios) scenarios=$2; shift 2 ;;
	--rate) rate=$2; shift 2 ;;
	*) echo "usage: bench.sh [--duration S] [--rounds N] [--clients N] [--scenarios LIST] [--rate TPS]" >&2; exit 2 ;;
	esac
done
[[ -z $rate || $rate =~ ^[1-9][0-9]*$ ]] || { echo "bench.sh: --rate takes a whole number of transactions a second" >&2; exit 2; }
# shellcheck source=lib.sh
. "$here/lib.sh"
bench_setup_cluster

# Client TLS for both poolers (the tls scenario asks for it; the others do not).
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=localhost \
	-keyout "$tmp/tls.key" -out "$tmp/tls.crt" >/dev/null 2>&1 || { echo "bench.sh: openssl failed" >&2; exit 1; }
[ -n "$runas" ] && chown "$runas:" "$tmp/tls.key" "$tmp/tls.crt"
chmod 600 "$tmp/tls.key"
tls_ini="client_tls_sslmode = allow
client_tls_key_file = $tmp/tls.key
client_tls_cert_file = $tmp/tls.crt"
bench_start_pgvalve "$tls_ini"
have_pgb=0
bench_start_pgbouncer "$tls_ini" && have_pgb=1

cpu_us_per_tx() { awk -v a="$1" -v b="$2" -v n="$3" -v hz="$hz" 'BEGIN { printf "%.1f", n ? (b - a) * 1e6 / hz / n : 0 }'; }
hz=$(getconf CLK_TCK)
# One pgbench run of the current scenario through the pooler (pid, port): "tps cpu_us_per_tx latency_ms".
measure() {
	local c0 c1 t n l
	c0=$(bench_cpu_ticks "$1")
	read -r t n l < <(bench_sslmode=$bench_sslmode run_pgbench "$2" "${args[@]}")
	c1=$(bench_cpu_ticks "$1")
	echo "$t $(cpu_us_per_tx "$c0" "$c1" "$n") $l"
}
med() { if [ $# -gt 0 ]; then printf '%s\n' "$@" | median; else echo "-"; fi; }
r0() { awk -v x="$1" 'BEGIN { if (x == "-") print "-"; else printf "%.0f", x }'; }
r3() { awk -v x="$1" 'BEGIN { if (x == "-") print "-"; else printf "%.3f", x }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.2f", a / b }'; }

printf '\n%s\n' "$(bench_pgbouncer_line)"
if [ -n "$rate" ]; then
	printf '%-9s %10s %11s %13s %9s %9s %9s %9s %9s\n' scenario direct_ms pgvalve_ms pgbouncer_ms \
		lat_v/pgb pgv_tps pgv_us/tx pgb_us/tx cpu_v/pgb
else
	printf '%-9s %10s %11s %11s %8s %8s %9s %9s %8s\n' scenario direct_tps pgvalve_tps pgbouncer_tps \
		v/direct v/pgb pgv_us/tx pgb_us/tx cpu_v/pgb
fi
IFS=, read -ra scen_list <<<"$scenarios"
for scen in "${scen_list[@]}"; do
	bench_sslmode=disable
	case $scen in
	select) args=(-S -M simple -c "$clients" -j 2) ;;
	prepared) args=(-S -M extended -c "$clients" -j 2) ;;
	tpcb) args=(-c "$clients" -j 2) ;;
	many) args=(-S -c 1000 -j 2) ;;
	tls) args=(-S -M simple -c "$clients" -j 2) bench_sslmode=require ;;
	lone) args=(-S -M simple -c 1 -j 1) ;;
	lone_extended) args=(-S -M extended -c 1 -j 1) ;;
	*) echo "bench.sh: unknown scenario $scen" >&2; continue ;;
	esac
	[ -n "$rate" ] && args+=(-R "$rate")
	d_tps=() v_tps=() v_cpu=() b_tps=() b_cpu=() d_lat=() v_lat=() b_lat=()
	for round in $(seq "$rounds"); do
		if [ "$scen" != many ] && [ "$scen" != tls ]; then
			read -r t _ l < <(bench_sslmode=disable run_pgbench "$pgport" "${args[@]}")
			d_tps+=("$t") d_lat+=("$l")
		fi
		# Odd rounds pgvalve first, even rounds PgBouncer first: whichever runs
		# second in a round measured ~4% fewer tps at saturation here.
		order=(pgvalve pgbouncer)
		((round % 2 == 0)) && order=(pgbouncer pgvalve)
		for who in "${order[@]}"; do
			if [ "$who" = pgvalve ]; then
				read -r t c l < <(measure "$pgv_pid" "$port")
				v_tps+=("$t") v_cpu+=("$c") v_lat+=("$l")
			elif [ "$have_pgb" = 1 ]; then
				read -r t c l < <(measure "$pgb_pid" "$pgb_port")
				b_tps+=("$t") b_cpu+=("$c") b_lat+=("$l")
			fi
		done
	done
	dm=$(med "${d_tps[@]}") vm=$(med "${v_tps[@]}") cm=$(med "${v_cpu[@]}")
	bm=$(med "${b_tps[@]}") bc=$(med "${b_cpu[@]}")
	if [ -n "$rate" ]; then
		dl=$(r3 "$(med "${d_lat[@]}")") vl=$(r3 "$(med "${v_lat[@]}")") bl=$(r3 "$(med "${b_lat[@]}")")
		printf '%-9s %10s %11s %13s %9s %9s %9s %9s %9s\n' "$scen" "$dl" "$vl" "$bl" "$(ratio "$vl" "$bl")" \
			"$(r0 "$vm")" "$cm" "$bc" "$(ratio "$cm" "$bc")"
	else
		printf '%-9s %10s %11s %11s %8s %8s %9s %9s %8s\n' "$scen" "$(r0 "$dm")" "$(r0 "$vm")" "$(r0 "$bm")" "$(ratio "$vm" "$dm")" \
			"$(ratio "$vm" "$bm")" "$cm" "$bc" "$(ratio "$cm" "$bc")"
	fi
done
echo
echo "median of $rounds rounds of ${duration}s; transaction pooling, pool of 20, $clients clients (lone: 1)${rate:+; every run throttled to $rate tps (pgbench -R), latency = the average pgbench reports, in ms}"
