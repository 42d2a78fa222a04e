#!/usr/bin/env bash
#
# test/bench/connect.sh - what a client login costs pgvalve: pgbench -C
# (a new connection for every transaction, "SELECT 1") with md5 and with
# SCRAM, in alternating rounds on one pgvalve. `make bench-connect` runs it.
#
#   [PGBOUNCER=/path/to/pgbouncer] connect.sh [--duration S] [--rounds N] [--clients N] [--logins LIST] [--rate N]
#                                             [--client pgbench|login_bench]
#
# Three users, chosen by an hba file (auth_type = hba):
#   md5         md5 secret in the userlist, md5 login
#   scram-plain plain-text password in the userlist, SCRAM login (the
#               pooler derives the keys, once: scram_cache)
#   scram-secret SCRAM-SHA-256$ secret in the userlist (PostgreSQL's own),
#               SCRAM login, no PBKDF2 on the pooler at all
# Server connections are pooled (transaction mode), so the rounds measure
# client logins. The same runs go through PgBouncer (PGBOUNCER=path; without
# it Debian's /usr/sbin/pgbouncer when installed: `pgv_deps_ensure bench` in
# scripts/deps.sh), alternating with pgvalve's; the table names its version. Prints
# per pooler (and direct to PostgreSQL: connections per second only) and user the median connections per second and the pooler's
# CPU per connection (user+system time of the process over the round /
# connections made), and the ratio of each to md5. pgbench's own
# SCRAM (libpq derives the key on every connect) shares the machine and
# limits the SCRAM rates to a tenth of md5's or less. A pooler's CPU per
# connection also falls as the rate rises (one wake-up serves several
# sockets), which flatters md5: --rate N (pgbench -R) runs every login at
# the same N connections per second, the fair comparison.
#
# --client login_bench logs in with test/bench/login_bench (built by `make
# bench-connect`) instead: the same login, SELECT 1 and Terminate, but it
# derives SCRAM's salted password once per salt instead of at every connect
# (it still computes and checks both proofs at every login), so SCRAM logins
# run at md5's rates and the poolers' CPU per login is measured at rates
# where it is the login's and not their idle time's.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
srcdir=${abs_top_srcdir:-$(cd "$here/../.." && pwd)}
builddir=${abs_top_builddir:-$srcdir/build}
duration=10 rounds=5 clients=20 logins=md5,scram-plain,scram-secret rate= client=pgbench
while [ $# -gt 0 ]; do
	case $1 in
	--duration) duration=$2; shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	--clients) clients=$2; shift 2 ;;
	--logins) logins=$2; shift 2 ;;
	--rate) rate=$2; shift 2 ;;
	--client) client=$2; shift 2 ;;
	*) echo "usage: connect.sh [--duration S] [--rounds N] [--clients N] [--logins LIST] [--rate N] [--client pgbench|login_bench]" >&2; exit 2 ;;
	esac
done
case $client in
pgbench) load="pgbench -C -c $clients${rate:+ -R $rate}" ;;
login_bench)
	load="login_bench --clients $clients${rate:+ --rate $rate}"
	login_bench=$builddir/test/bench/login_bench
	[ -x "$login_bench" ] || { echo "${0##*/}: $login_bench is not built (make -C $builddir test/bench/login_bench)" >&2; exit 2; } ;;
*) echo "${0##*/}: --client: pgbench or login_bench" >&2; exit 2 ;;
esac
bench_scale=0	# SELECT 1 needs no tables
# shellcheck source=lib.sh
. "$here/lib.sh"
bench_setup_cluster

psql_su=("$PGBIN/psql" -X -q -At -h "$tmp" -p "$pgport" -U postgres -d postgres)
"${psql_su[@]}" -c "SET password_encryption = 'scram-sha-256'" \
	-c "CREATE ROLE bench_plain LOGIN PASSWORD 'bench'" \
	-c "CREATE ROLE bench_secret LOGIN PASSWORD 'bench'" \
	-c "GRANT CONNECT ON DATABASE bench TO bench_plain, bench_secret" >/dev/null
secret=$("${psql_su[@]}" -c "SELECT rolpassword FROM pg_authid WHERE rolname = 'bench_secret'")
{
	echo "\"bench_plain\" \"bench\""
	echo "\"bench_secret\" \"$secret\""
} >>"$tmp/userlist.txt"
printf 'host all bench 127.0.0.1/32 md5\nhost all all 127.0.0.1/32 scram-sha-256\n' >"$tmp/hba.conf"
echo "SELECT 1;" >"$tmp/select1.sql"
[ -n "$runas" ] && chown "$runas:" "$tmp/userlist.txt" "$tmp/hba.conf" "$tmp/select1.sql"
bench_start_pgvalve "auth_type = hba
auth_hba_file = $tmp/hba.conf"

# PgBouncer, the same way, when there is one (see lib.sh).
bench_start_pgbouncer "auth_type = hba
auth_hba_file = $tmp/hba.conf"

hz=$(getconf CLK_TCK)

cpu_of() { if [ "$1" = - ]; then echo 0; else bench_cpu_ticks "$1"; fi; }

# run_connect PID PORT USER -> "connections_per_s cpu_us_per_connection" (CPU of process PID; PID - : none, "-")
run_connect() {
	local pid=$1 p=$2 user=$3 c0 c1 tps n ok
	c0=$(cpu_of "$pid")
	if [ "$client" = pgbench ]; then
		PGPASSWORD=bench PGSSLMODE=disable "$PGBIN/pgbench" -n -C -T "$duration" -c "$clients" -j 2 ${rate:+-R "$rate"} \
			-f "$tmp/select1.sql" -h 127.0.0.1 -p "$p" -U "$user" bench >"$tmp/run.out" 2>&1
	else
		"$login_bench" --port "$p" --user "$user" --password bench --dbname bench --clients "$clients" \
			--duration "$duration" ${rate:+--rate "$rate"} >"$tmp/run.out" 2>&1
	fi
	c1=$(cpu_of "$pid")
	if [ "$client" = pgbench ]; then
		tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$tmp/run.out" | tail -1)
		n=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$tmp/run.out")
		grep -q "number of failed transactions: 0 " "$tmp/run.out" && ok=1
	else
		tps=$(sed -n 's/^logins_per_s //p' "$tmp/run.out")
		n=$(sed -n 's/^logins //p' "$tmp/run.out")
		grep -qx "failed 0" "$tmp/run.out" && ok=1
	fi
	if [ -z "${ok:-}" ] || [ -z "$n" ] || [ "$n" = 0 ]; then
		echo "${0##*/}: $user on port $p: $client failed:" >&2
		tail -5 "$tmp/run.out" >&2
	fi
	awk -v a="$c0" -v b="$c1" -v n="${n:-0}" -v hz="$hz" -v t="${tps:-0}" -v none="$([ "$pid" = - ] && echo 1)" \
		'BEGIN { if (none) printf "%s -\n", t; else printf "%s %.1f\n", t, n ? (b - a) * 1e6 / hz / n : 0 }'
}

all_users=(bench bench_plain bench_secret)
all_names=(md5 scram-plain scram-secret)
users=() names=()
for i in 0 1 2; do
	case ",$logins," in *",${all_names[$i]},"*) users+=("${all_users[$i]}") names+=("${all_names[$i]}") ;; esac
done
[ ${#users[@]} -gt 0 ] || { echo "${0##*/}: --logins: pick from ${all_names[*]}" >&2; exit 2; }
poolers=("pgvalve $pgv_pid $port")
[ -n "$pgb_pid" ] && poolers+=("pgbouncer $pgb_pid $pgb_port")
# PostgreSQL itself, the reference: a backend forked per login (its CPU is not the poolers' to compare: "-")
poolers+=("direct - $pgport")
declare -A rate cpu
for r in $(seq "$rounds"); do
	# alternate the order, so a drift of the machine's load does not favour one run
	order=("${users[@]}")
	if [ $((r % 2)) -eq 0 ]; then
		order=()
		for ((i = ${#users[@]} - 1; i >= 0; i--)); do order+=("${users[$i]}"); done
	fi
	# and which pooler goes first: the second of two back-to-back runs pays for the first (doc/benchmarks.md: "Which pooler runs first")
	porder=("${poolers[@]}")
	if [ $((r % 2)) -eq 0 ] && [ -n "$pgb_pid" ]; then
		porder=("${poolers[1]}" "${poolers[0]}" "${poolers[@]:2}")
	fi
	for u in "${order[@]}"; do
		for pl in "${porder[@]}"; do
			read -r name pid p <<<"$pl"
			read -r t c < <(run_connect "$pid" "$p" "$u")
			rate[$name.$u]+="$t "
			cpu[$name.$u]+="$c "
			printf '%s: round %d %-9s %-12s %8.0f conn/s %8s us/conn\n' "${0##*/}" "$r" "$name" "$u" "$t" "$c"
		done
	done
done

printf '\n%s\n' "$(bench_pgbouncer_line)"
printf '%-10s %-13s %12s %16s %11s\n' pooler login conn_per_s cpu_us_per_conn cpu_vs_md5
for pl in "${poolers[@]}"; do
	read -r name _ _ <<<"$pl"
	md5_cpu=$(printf '%s\n' ${cpu[$name.bench]:-} | median)
	for i in "${!users[@]}"; do
		u=${users[$i]}
		rm=$(printf '%s\n' ${rate[$name.$u]} | median)
		cm=$(printf '%s\n' ${cpu[$name.$u]} | median)
		[ "$name" = direct ] && cm=-
		printf '%-10s %-13s %12.0f %16s %11s\n' "$name" "${names[$i]}" "$rm" "$cm" \
			"$(awk -v a="$cm" -v b="${md5_cpu:-0}" 'BEGIN { if (a != "-" && b > 0) printf "%.2f", a / b; else print "-" }')"
	done
done
echo
echo "median of $rounds rounds of ${duration}s; $load, SELECT 1; transaction mode, pool of 20"
