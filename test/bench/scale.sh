#!/usr/bin/env bash
#
# test/bench/scale.sh - many clients held by one pooler, a fraction of them
# running transactions at a fixed rate, and a login storm beside them:
# test/bench/scale_gen.c against pgvalve, then against PgBouncer with
# --pgbouncer. `make bench-scale` runs it.
#
#   [PGBOUNCER=/path/to/pgbouncer] scale.sh [--clients N] [--active N] [--rate TPS] [--storm N]
#            [--tls] [--storm-tls] [--duration S] [--auth scram|md5] [--backlog N] [--login-rate N] [--pgbouncer]
#
# A throwaway PostgreSQL (lib.sh), then pgvalve with workers =
# ceil((clients + storm) / 15000) + 1 (a worker holds fewer than the
# 20,000 descriptors a process may have here), max_client_conn for every
# client, a pool of 20 (transaction mode), SCRAM-SHA-256 logins from a
# userlist holding PostgreSQL's own secret of the role (auth_type = hba;
# --auth md5 for md5 logins), client TLS allowed with a self-signed
# certificate made here, listen_backlog as configured (--backlog N sets
# it). The generator logs in --clients clients and holds them, --active
# of them run --rate transactions a second in total (SELECT 1), and
# --storm new clients connect at once (over TLS with --tls, which makes
# every client TLS, or --storm-tls, the storm only). Its phases are
# printed as they end; each pooler's summary line comes last:
#   bench-scale: pooler=NAME clients=N logged_in=N failed=N bytes_per_client=B base_p99_ms=X ...
# --pgbouncer: the same against PgBouncer ($PGBOUNCER only; no fallback),
# as N so_reuseport processes when one cannot hold the clients (N =
# ceil((clients + storm) / 15000) + 1, the pool of 20 split between them);
# without an executable PGBOUNCER a line says it was skipped.
# Build without sanitizers for meaningful figures.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
srcdir=${abs_top_srcdir:-$(cd "$here/../.." && pwd)}
builddir=${abs_top_builddir:-$srcdir/build}
clients=1000 active=100 rate=500 storm=0 duration=10 tls= storm_tls= auth=scram backlog= with_pgbouncer=0 login_rate=0
usage="usage: scale.sh [--clients N] [--active N] [--rate TPS] [--storm N] [--tls] [--storm-tls] [--duration S] [--auth scram|md5] [--backlog N] [--login-rate N] [--pgbouncer]"
while [ $# -gt 0 ]; do
	case $1 in
	--clients) clients=$2; shift 2 ;;
	--active) active=$2; shift 2 ;;
	--rate) rate=$2; shift 2 ;;
	--storm) storm=$2; shift 2 ;;
	--duration) duration=$2; shift 2 ;;
	--tls) tls=--tls; shift ;;
	--storm-tls) storm_tls=--storm-tls; shift ;;
	--auth) auth=$2; shift 2 ;;
	--backlog) backlog=$2; shift 2 ;;
	--login-rate) login_rate=$2; shift 2 ;;
	--pgbouncer) with_pgbouncer=1; shift ;;
	*) echo "$usage" >&2; exit 2 ;;
	esac
done
case $auth in scram | md5) ;; *) echo "$usage" >&2; exit 2 ;; esac
[ "$active" -le "$clients" ] || { echo "scale.sh: --active is more than --clients" >&2; exit 2; }
gen=$builddir/test/bench/scale_gen
[ -x "$gen" ] || { echo "${0##*/}: $gen is not built (make -C $builddir test/bench/scale_gen)" >&2; exit 2; }

# Only the PgBouncer given by path: no package fallback for this one.
pgb_skip=
if [ "$with_pgbouncer" = 1 ]; then
	if [ -z "${PGBOUNCER:-}" ]; then
		pgb_skip="PGBOUNCER is not set"
	elif [ ! -x "$PGBOUNCER" ] || [ -d "$PGBOUNCER" ]; then
		pgb_skip="PGBOUNCER=$PGBOUNCER is not an executable file"
	fi
fi
[ -n "$pgb_skip" ] && unset PGBOUNCER	# lib.sh would stop at a PGBOUNCER it cannot run
bench_scale=0 duration=$duration
# shellcheck source=lib.sh
. "$here/lib.sh"

gen_pid= tail_pid= pgb_procs=()
stop_scale() {
	[ -n "$gen_pid" ] && pgv_kill_pids "$gen_pid"
	[ -n "$tail_pid" ] && pgv_kill_pids "$tail_pid"
	[ ${#pgb_procs[@]} -gt 0 ] && pgv_kill_pids "${pgb_procs[@]}"
	gen_pid= tail_pid= pgb_procs=()
}
trap 'stop_scale; bench_cleanup' EXIT

total=$((clients + storm))
per_worker=15000
workers=$(((total + per_worker - 1) / per_worker + 1))
bench_setup_cluster

psql_su=("$PGBIN/psql" -X -q -At -h "$tmp" -p "$pgport" -U postgres -d postgres)
"${psql_su[@]}" -c "SET password_encryption = 'scram-sha-256'" -c "CREATE ROLE bench_scram LOGIN PASSWORD 'bench'" \
	-c "GRANT CONNECT ON DATABASE bench TO bench_scram" >/dev/null || exit 1
secret=$("${psql_su[@]}" -c "SELECT rolpassword FROM pg_authid WHERE rolname = 'bench_scram'")
echo "\"bench_scram\" \"$secret\"" >>"$tmp/userlist.txt"
# bench (md5) for psql's readiness check and --auth md5; the generator's source addresses are all of 127.0.0.0/8
printf 'host all bench 127.0.0.0/8 md5\nhost all all 127.0.0.0/8 scram-sha-256\n' >"$tmp/hba.conf"
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost \
	-keyout "$tmp/scale.key" -out "$tmp/scale.crt" 2>/dev/null || exit 1
[ -n "$runas" ] && chown "$runas:" "$tmp/userlist.txt" "$tmp/hba.conf" "$tmp/scale.key" "$tmp/scale.crt"
user=bench_scram
[ "$auth" = md5 ] && user=bench

common="auth_type = hba
auth_hba_file = $tmp/hba.conf
client_tls_sslmode = allow
client_tls_key_file = $tmp/scale.key
client_tls_cert_file = $tmp/scale.crt${backlog:+
listen_backlog = $backlog}"

summaries=()
# run_gen NAME PORT PIDS: the generator against one pooler; its report on stdout, its summary kept
run_gen() {
	: >"$tmp/gen-$1.out"
	"$gen" --port "$2" --user "$user" --password bench --dbname bench --name "$1" --pooler-pid "$3" \
		--clients "$clients" --active "$active" --rate "$rate" --duration "$duration" --storm "$storm" \
		--login-rate "$login_rate" \
		$tls $storm_tls >"$tmp/gen-$1.out" 2>&1 &
	gen_pid=$!
	tail -n +1 -f --pid="$gen_pid" "$tmp/gen-$1.out" &
	tail_pid=$!
	wait "$gen_pid"	# a builtin wait, so a signal to this script is handled at once (the trap stops the generator)
	local rc=$?
	wait "$tail_pid"
	gen_pid= tail_pid=
	[ "$rc" -eq 0 ] || echo "${0##*/}: $1: the generator exited with $rc (failed logins or lost clients: see above)"
	summaries+=("$(grep '^bench-scale: ' "$tmp/gen-$1.out" || echo "bench-scale: pooler=$1 (no summary: the generator failed)")")
}

echo "${0##*/}: pgvalve, workers = $workers, $total clients at most"
bench_start_pgvalve "$common
workers = $workers
max_client_conn = $((total + 100))
default_pool_size = 20" || exit 1
run_gen pgvalve "$port" "$pgv_pid"
bench_stop_pgvalve

if [ "$with_pgbouncer" = 1 ] && [ -n "$pgb_skip" ]; then
	echo "${0##*/}: PgBouncer skipped: $pgb_skip (give PGBOUNCER=/path/to/pgbouncer, a 1.25 build)"
elif [ "$with_pgbouncer" = 1 ]; then
	n=1
	[ "$total" -gt "$per_worker" ] && n=$(((total + per_worker - 1) / per_worker + 1))
	pool=$(((20 + n - 1) / n))
	pgb_port=$(pgv_free_port $((port + 1)))
	echo "${0##*/}: $(bench_pgbouncer_line), $n process(es), pool $pool each"
	for k in $(seq "$n"); do
		bench_pooler_ini pgbouncer "$pgb_port" "pgbouncer$k" "$common
so_reuseport = $([ "$n" -gt 1 ] && echo 1 || echo 0)
max_client_conn = $((total / n * 3 / 2 + 100 < 19000 ? total / n * 3 / 2 + 100 : 19000))
default_pool_size = $pool" >"$tmp/pgbouncer$k.ini"
		[ -n "$runas" ] && chown "$runas:" "$tmp/pgbouncer$k.ini"
		if [ -n "$runas" ]; then "$PGBOUNCER" -q -u "$runas" "$tmp/pgbouncer$k.ini" & else "$PGBOUNCER" -q "$tmp/pgbouncer$k.ini" & fi
		pgb_procs+=($!)
	done
	if bench_wait_ready "$pgb_port"; then
		run_gen pgbouncer "$pgb_port" "$(IFS=,; echo "${pgb_procs[*]}")"
	else
		echo "${0##*/}: PgBouncer did not start; its log:" >&2
		tail -n 5 "$tmp/pgbouncer1.log" >&2
	fi
	pgv_kill_pids "${pgb_procs[@]}"
	pgb_procs=()
fi

echo
printf '%s\n' "${summaries[@]}"
