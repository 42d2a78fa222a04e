#!/usr/bin/env bash
#
# test/bench/workers.sh - one pgvalve instance with workers = 1, 2, 4 (or
# --workers LIST) on a throwaway cluster, and optionally PgBouncer as N
# so_reuseport processes beside it. `make bench-workers` runs it.
#
#   workers.sh [--duration S] [--rounds N] [--clients N] [--workers LIST] [--pool-size N]
#              [--rate TPS] [--handovers N] [--pgbouncer]
#   workers.sh --standin [...]    workers_standin.sh: a server stand-in, CPU and system calls per transaction
#   workers.sh --counts [...]     the same with instructions per transaction (callgrind; slow)
#
# Each round starts the instance once per workers value (transaction
# pooling, default_pool_size = 20 for the instance, or --pool-size, md5)
# and measures, interleaving the values so that a noisy machine hurts
# them alike:
#   - saturation: pgbench -S -M simple with --clients clients: tps, the
#     median and 99th percentile latency (pgbench -l), the
#     instance's CPU per transaction (supervisor and workers, user +
#     system) and the most server connections PostgreSQL showed (sampled
#     every 0.2 s; never above the pool size if the limit is the instance's);
#   - with --rate: the same at a fixed rate (pgbench -R), CPU per
#     transaction at equal load (what the shared accounting costs);
#   - with workers >= 2, the hand-over: a database of pool_size 1 whose
#     one server worker 1 holds idle, then a one-query pgbench through
#     worker 2's private socket, and back, --handovers times: the median
#     latency of those queries is the time a client waiting in one worker
#     takes to get a server another worker holds idle.
# --pgbouncer: PgBouncer ($PGBOUNCER) as N processes on one port with
# so_reuseport = 1 for each N of the list (one plain process for 1), its
# pool_size per process as PgBouncer has it: the figures operators get
# today, and a scaling curve to set pgvalve's beside on a many-core machine.
# Build without sanitizers for meaningful figures (PGVALVE=path/to/pgvalve).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
srcdir=${abs_top_srcdir:-$(cd "$here/../.." && pwd)}
builddir=${abs_top_builddir:-$srcdir/build}
duration=10 rounds=3 clients=50 workers_list="1,2,4" pool_size=20 rate=0 handovers=7 with_pgbouncer=0
usage="usage: workers.sh [--duration S] [--rounds N] [--clients N] [--workers LIST] [--pool-size N] [--rate TPS] [--handovers N] [--pgbouncer]"
while [ $# -gt 0 ]; do
	case $1 in
	--duration) duration=$2; shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	--clients) clients=$2; shift 2 ;;
	--workers) workers_list=$2; shift 2 ;;
	--pool-size) pool_size=$2; shift 2 ;;
	--rate) rate=$2; shift 2 ;;
	--handovers) handovers=$2; shift 2 ;;
	--pgbouncer) with_pgbouncer=1; shift ;;
	--standin | --counts) exec "$here/workers_standin.sh" "$@" ;;	# a server stand-in instead of PostgreSQL
	*) echo "$usage" >&2; exit 2 ;;
	esac
done
# shellcheck source=lib.sh
. "$here/lib.sh"
bench_setup_cluster

# instance_ticks PID...: CPU ticks of these processes and their children.
instance_ticks() {
	local total=0 p
	for p in "$@" $(pgrep -P "$(echo "$@" | tr ' ' ',')" 2>/dev/null); do
		[ -r "/proc/$p/stat" ] && total=$((total + $(bench_cpu_ticks "$p")))
	done
	echo "$total"
}

# sample_servers OUT: the most client backends of user bench PostgreSQL shows, every 0.2 s, into OUT until killed.
sample_servers() {
	local most=0 n
	while :; do
		n=$("$PGBIN/psql" -X -At -h "$tmp" -p "$pgport" -U postgres -d postgres \
			-c "SELECT count(*) FROM pg_stat_activity WHERE usename = 'bench' AND backend_type = 'client backend'" 2>/dev/null)
		[ -n "$n" ] && [ "$n" -gt "$most" ] && most=$n && echo "$most" >"$1"
		sleep 0.2
	done
}

# pg_sessions: sessions PostgreSQL has started for database bench so far (pg_stat_database; a backend
# reports its start at its first flush, so call it a second after the load stops).
pg_sessions() {
	"$PGBIN/psql" -X -At -h "$tmp" -p "$pgport" -U postgres -d postgres \
		-c "SELECT pg_stat_force_next_flush(); SELECT sessions FROM pg_stat_database WHERE datname = 'bench'" 2>/dev/null | tail -1
}

# measure LABEL PORT PIDS...: one saturation run (and one at --rate) against PORT; appends to the tables.
declare -A tps cpu_sat cpu_rate servers handover handover_in lat50 lat99 logins
measure() {
	local label=$1 p=$2
	shift 2
	echo 0 >"$tmp/most"
	sample_servers "$tmp/most" &
	local sampler=$!
	local t0 t1 t txns s0 s1
	s0=$(pg_sessions)
	t0=$(instance_ticks "$@")
	rm -f "$tmp"/lat.*
	read -r t txns _ < <(run_pgbench "$p" -S -M simple -c "$clients" -j 2 -l --log-prefix="$tmp/lat")
	t1=$(instance_ticks "$@")
	kill "$sampler" 2>/dev/null
	wait "$sampler" 2>/dev/null
	sleep 1
	s1=$(pg_sessions)
	logins[$label]="${logins[$label]:-} $(( ${s1:-0} - ${s0:-0} ))"
	# per-transaction latencies (pgbench -l: the third field, in microseconds): p50 and p99 in ms
	read -r p50 p99 < <(cat "$tmp"/lat.* | awk '{ print $3 }' | sort -n |
		awk '{ a[NR] = $1 } END { if (NR) printf "%.3f %.3f\n", a[int(NR * 0.5) + 1] / 1000, a[int(NR * 0.99) + 1] / 1000; else print "0 0" }')
	rm -f "$tmp"/lat.*
	lat50[$label]="${lat50[$label]:-} $p50"
	lat99[$label]="${lat99[$label]:-} $p99"
	tps[$label]="${tps[$label]:-} $t"
	cpu_sat[$label]="${cpu_sat[$label]:-} $(awk -v d=$((t1 - t0)) -v n="$txns" 'BEGIN { printf "%.2f", n ? d * 10000 / n : 0 }')"
	servers[$label]="${servers[$label]:-} $(cat "$tmp/most")"
	echo "workers.sh: round $round, $label: $t tps, latency p50 $p50 ms, p99 $p99 ms, at most $(cat "$tmp/most") server connections, $(( ${s1:-0} - ${s0:-0} )) server logins"
	if [ "$rate" -gt 0 ]; then
		t0=$(instance_ticks "$@")
		read -r t txns _ < <(run_pgbench "$p" -S -M simple -c "$clients" -j 2 -R "$rate")
		t1=$(instance_ticks "$@")
		cpu_rate[$label]="${cpu_rate[$label]:-} $(awk -v d=$((t1 - t0)) -v n="$txns" 'BEGIN { printf "%.2f", n ? d * 10000 / n : 0 }')"
	fi
}

# one_query DIR PORT: latency (ms) of one SELECT 1 by a fresh pgbench client through socket DIR.
one_query() {
	echo "SELECT 1;" >"$tmp/one.sql"
	PGPASSWORD=bench "$PGBIN/pgbench" -n -t 1 -c 1 -f "$tmp/one.sql" -h "$1" -p "$2" -U bench bench1 2>&1 |
		sed -n 's/^latency average = \([0-9.]*\) ms.*/\1/p'
}

# handovers W: median latency of a query in worker 2 while worker 1 holds the one server idle, and back.
measure_handover() {
	local w=$1 d1="/tmp/pgvalve-$port-$pgv_pid-w1" d2="/tmp/pgvalve-$port-$pgv_pid-w2" list= base= i a b
	one_query "$d1" "$port" >/dev/null
	one_query "$d2" "$port" >/dev/null	# both workers' pools know the server's parameters
	for i in $(seq "$handovers"); do
		a=$(one_query "$d1" "$port")
		b=$(one_query "$d2" "$port")
		list="$list $a $b"
		base="$base $(one_query "$d2" "$port")"	# the same query with the server at hand: no hand-over
	done
	# shellcheck disable=SC2086 # the list of numbers is meant to split
	handover[$w]="${handover[$w]:-} $(printf '%s\n' $list | median)"
	# the pooler's own measure (handover.c's log line): from the receiving worker's ask to its client served
	local inner
	inner=$(sed -n 's/.*taken over from worker .* no new login (\([0-9]*\) us after the ask.*/\1/p' "$tmp/pgvalve.log" |
		tail -n $((2 * handovers)) | awk '{ printf "%.3f\n", $1 / 1000 }' | median)
	handover_in[$w]="${handover_in[$w]:-} ${inner:-0}"
	local after_send
	after_send=$(sed -n 's/.*taken over from worker .* no new login (.* us after the ask, \([0-9]*\) after the send.*/\1/p' \
		"$tmp/pgvalve.log" | tail -n $((2 * handovers)) | awk '{ printf "%.3f\n", $1 / 1000 }' | median)
	echo "workers.sh: round $round, workers = $w: hand-over $(printf '%s\n' $list | median) ms per query ($(printf '%s\n' $base | median) ms without one), ${inner:-?} ms from the ask to the client served (${after_send:-?} ms from the send)"
}

IFS=, read -ra wl <<<"$workers_list"
pgb_procs=()
start_pgbouncers() {
	local n=$1 k
	pgb_port=$(pgv_free_port $((pgport + 50)))
	pgb_procs=()
	for k in $(seq "$n"); do
		bench_pooler_ini pgbouncer "$pgb_port" "pgbouncer$k" "default_pool_size = $pool_size
so_reuseport = $([ "$n" -gt 1 ] && echo 1 || echo 0)" >"$tmp/pgbouncer$k.ini"
		[ -n "$runas" ] && chown "$runas:" "$tmp/pgbouncer$k.ini"
		if [ -n "$runas" ]; then "$PGBOUNCER" -q -u "$runas" "$tmp/pgbouncer$k.ini" & else "$PGBOUNCER" -q "$tmp/pgbouncer$k.ini" & fi
		pgb_procs+=($!)
	done
	bench_wait_ready "$pgb_port"
}
stop_pgbouncers() {
	[ ${#pgb_procs[@]} -gt 0 ] && pgv_kill_pids "${pgb_procs[@]}"
	wait "${pgb_procs[@]}" 2>/dev/null
	pgb_procs=()
}
trap 'stop_pgbouncers; bench_cleanup' EXIT
[ "$with_pgbouncer" = 1 ] && [ ! -x "$PGBOUNCER" ] && { echo "workers.sh: no PgBouncer at $PGBOUNCER" >&2; exit 2; }

for round in $(seq "$rounds"); do
	for w in "${wl[@]}"; do
		bench_start_pgvalve "workers = $w
default_pool_size = $pool_size
[databases]
bench1 = host=127.0.0.1 port=$pgport dbname=bench pool_size=1"
		sleep 1	# every worker listening, not just the first
		measure "pgvalve-$w" "$port" "$pgv_pid"
		[ "$w" -ge 2 ] && measure_handover "$w"
		bench_stop_pgvalve
		if [ "$with_pgbouncer" = 1 ]; then
			start_pgbouncers "$w"
			measure "pgbouncer-$w" "$pgb_port" "${pgb_procs[@]}"
			stop_pgbouncers
		fi
	done
done

labels=()
for w in "${wl[@]}"; do
	labels+=("pgvalve-$w")
	[ "$with_pgbouncer" = 1 ] && labels+=("pgbouncer-$w")
done
med() { printf '%s\n' "$@" | median; }
printf '\n%-13s %9s %8s %8s %12s %13s %12s %7s %12s %11s\n' what tps p50_ms p99_ms "us/txn(sat)" "us/txn(rate)" max_servers logins "handover_ms" "ask_to_use"
for l in "${labels[@]}"; do
	w=${l#*-}
	# shellcheck disable=SC2086 # lists of numbers are meant to split
	printf '%-13s %9.0f %8.3f %8.3f %12.2f %13s %12s %7s %12s %11s\n' "$l" "$(med ${tps[$l]})" "$(med ${lat50[$l]})" "$(med ${lat99[$l]})" "$(med ${cpu_sat[$l]})" \
		"$([ "$rate" -gt 0 ] && printf '%.2f' "$(med ${cpu_rate[$l]})" || echo -)" "$(printf '%s\n' ${servers[$l]} | sort -n | tail -1)" "$(med ${logins[$l]})" \
		"$([ "${l%%-*}" = pgvalve ] && [ "$w" -ge 2 ] && printf '%.2f' "$(med ${handover[$w]})" || echo -)" \
		"$([ "${l%%-*}" = pgvalve ] && [ "$w" -ge 2 ] && printf '%.3f' "$(med ${handover_in[$w]})" || echo -)"
done
echo
echo "pgbench -S -M simple, $clients clients, -j 2, ${duration}s rounds x $rounds (medians; max_servers: the most over all rounds)"
echo "handover_ms: latency of a one-query client in the worker that lacks the server, its query included;"
echo "ask_to_use: in the pooler, from that worker's ask for a server to its client served (its log line; medians)"
echo "logins: server logins PostgreSQL saw during the saturation run (a plain server moves between workers without one)"
echo "pool of $pool_size for the pgvalve instance (per process for PgBouncer); $(nproc) CPUs; us/txn = pooler CPU (user + system) per transaction"
[ "$rate" -gt 0 ] && echo "us/txn(rate): at pgbench -R $rate"
[ "$with_pgbouncer" = 1 ] && bench_pgbouncer_line
exit 0
