#!/usr/bin/env bash
#
# test/bench/idle.sh - what idle clients cost: N md5 clients log in and stay
# idle (test/bench/idle_cpu.py; with --tls over TLS, a self-signed
# certificate made here), then the pooler's RSS growth per client and
# its CPU over an idle window, for pgvalve and PgBouncer (PGBOUNCER=path;
# without it Debian's /usr/sbin/pgbouncer when installed; the table names its
# version). Each round starts a fresh pooler. `make bench-idle` runs it.
#
#   [PGBOUNCER=/path/to/pgbouncer] idle.sh [--clients N] [--window S] [--rounds N] [--tls]
#
# Prints the median bytes per idle client and idle CPU (% of one core) over
# the rounds, and pgvalve's bytes as a ratio to PgBouncer's.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
srcdir=${abs_top_srcdir:-$(cd "$here/../.." && pwd)}
builddir=${abs_top_builddir:-$srcdir/build}
clients=10000 window=20 rounds=3 tls=
while [ $# -gt 0 ]; do
	case $1 in
	--clients) clients=$2; shift 2 ;;
	--window) window=$2; shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	--tls) tls=--tls; shift ;;
	*) echo "usage: idle.sh [--clients N] [--window S] [--rounds N] [--tls]" >&2; exit 2 ;;
	esac
done
bench_scale=0
# shellcheck source=lib.sh
. "$here/lib.sh"
bench_setup_cluster
extra="max_client_conn = $((clients + 100))"
if [ -n "$tls" ]; then
	openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost \
		-keyout "$tmp/idle.key" -out "$tmp/idle.crt" 2>/dev/null
	[ -n "$runas" ] && chown "$runas:" "$tmp/idle.key" "$tmp/idle.crt"
	extra+=$'\n'"client_tls_sslmode = require"$'\n'"client_tls_key_file = $tmp/idle.key"
	extra+=$'\n'"client_tls_cert_file = $tmp/idle.crt"
fi

# measure PID PORT -> "bytes_per_client cpu_percent"
measure() {
	PGPASSWORD=bench python3 "$here/idle_cpu.py" --pid "$1" --port "$2" --user bench --db bench \
		--n "$clients" --window "$window" $tls >"$tmp/idle.out" 2>&1
	local bytes cpu
	bytes=$(sed -n 's/.*: \([0-9.]*\) bytes per idle client/\1/p' "$tmp/idle.out")
	cpu=$(sed -n 's/.* = \([0-9.]*\)% of one core/\1/p' "$tmp/idle.out")
	if ! grep -q "connected=$clients failed=0" "$tmp/idle.out"; then
		echo "${0##*/}: not every client logged in:" >&2
		head -3 "$tmp/idle.out" >&2
	fi
	echo "${bytes:-0} ${cpu:-0}"
}

declare -A mem cpu
poolers=(pgvalve)
[ -x "$PGBOUNCER" ] && poolers+=(pgbouncer)
for r in $(seq "$rounds"); do
	for pl in "${poolers[@]}"; do
		if [ "$pl" = pgvalve ]; then
			bench_start_pgvalve "$extra"
			read -r b c < <(measure "$pgv_pid" "$port")
			bench_stop_pgvalve
		else
			bench_start_pgbouncer "$extra" || continue
			read -r b c < <(measure "$pgb_pid" "$pgb_port")
			bench_stop_pgbouncer
		fi
		mem[$pl]+="$b " cpu[$pl]+="$c "
		printf '%s: round %d %-9s %8s bytes/client %6s%% CPU idle\n' "${0##*/}" "$r" "$pl" "$b" "$c"
	done
done

printf '\n%s\n' "$(bench_pgbouncer_line)"
printf '%-10s %16s %14s %12s\n' pooler bytes_per_client idle_cpu_pct vs_pgbouncer
pgb_mem=$(printf '%s\n' ${mem[pgbouncer]:-} | median)
for pl in "${poolers[@]}"; do
	bm=$(printf '%s\n' ${mem[$pl]} | median)
	printf '%-10s %16.0f %14s %12s\n' "$pl" "$bm" "$(printf '%s\n' ${cpu[$pl]} | median)" \
		"$(awk -v a="$bm" -v b="${pgb_mem:-0}" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }')"
done
echo
echo "median of $rounds rounds: $clients idle md5 clients${tls:+ over TLS}, RSS growth / clients, CPU over ${window}s idle"
