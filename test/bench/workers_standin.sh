#!/usr/bin/env bash
#
# test/bench/workers_standin.sh - what one pgvalve instance costs per
# transaction with workers = 1, 2, 4, 8 (or --workers LIST) when the
# server answers at once: a stand-in (test/bench/pg_standin.c, compiled
# here) replaces PostgreSQL, so that the pooler's own work is measured and
# PostgreSQL does not take the CPUs. `make bench-workers
# BENCH_ARGS=--standin` runs it (workers.sh passes --standin here).
#
#   workers_standin.sh [--workers LIST] [--clients N] [--duration S] [--txns N] [--counts] [--pgbouncer]
#
# Per workers value, one instance (transaction pooling, pool of 20):
#   - saturation: pgbench -S -M simple, --clients clients, --duration s:
#     tps and the instance's CPU (user + system) per transaction;
#   - system calls per transaction, counted by strace -f -c attached to
#     every worker while pgbench runs --txns transactions per client
#     (deterministic where timings are not);
#   - the shared table's lockings per transaction, those that found the
#     lock taken and how long they waited, which each worker logs as it
#     stops.
#   - with --counts, instructions per transaction: the instance runs
#     under valgrind's callgrind (every process: a fork stays under it;
#     no vgdb, each process writes its counts as it exits) twice, for
#     --txns and for 2 x --txns transactions per client; the difference
#     of the totals over the difference of the transactions is what a
#     transaction costs, the start, the logins and the stop cancelling
#     out (deterministic but for how messages happen to batch), less what
#     the instance does idle in the time the longer run took longer (two
#     idle runs of 1 and 6 s give that rate: timers and ticks follow the
#     clock, and callgrind's slowness stretches them). Each run is
#     bounded by a timeout.
# --pgbouncer: the same for PgBouncer ($PGBOUNCER) as N so_reuseport processes.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
srcdir=${abs_top_srcdir:-$(cd "$here/../.." && pwd)}
builddir=${abs_top_builddir:-$srcdir/build}
workers_list="1,2,4,8" clients=32 duration=5 txns=200 with_pgbouncer=0 counts=0
usage="usage: workers_standin.sh [--workers LIST] [--clients N] [--duration S] [--txns N] [--counts] [--pgbouncer]"
while [ $# -gt 0 ]; do
	case $1 in
	--standin) shift ;;
	--workers) workers_list=$2; shift 2 ;;
	--clients) clients=$2; shift 2 ;;
	--duration) duration=$2; shift 2 ;;
	--txns) txns=$2; shift 2 ;;
	--pgbouncer) with_pgbouncer=1; shift ;;
	--counts) counts=1; shift ;;
	*) echo "$usage" >&2; exit 2 ;;
	esac
done
bench_scale=0	# no tables: the stand-in answers every query with one row
# shellcheck source=lib.sh
. "$here/lib.sh"
bench_setup_cluster

cc -O2 -o "$tmp/pg_standin" "$here/pg_standin.c" || { echo "workers_standin.sh: cannot compile pg_standin.c" >&2; exit 2; }
standin_port=$(pgv_free_port $((pgport + 100)))
"$tmp/pg_standin" "$standin_port" &
standin_pid=$!
pgport=$standin_port	# the poolers' [databases] point at the stand-in (bench_pooler_ini)

procs=()
stop_all() {
	if [ ${#procs[@]} -gt 0 ]; then
		pgv_kill_pids "${procs[@]}"
		wait "${procs[@]}" 2>/dev/null
	fi
	procs=()
}
trap 'kill "$standin_pid" 2>/dev/null; stop_all; bench_cleanup' EXIT
trap 'exit 1' INT TERM

# instance_pids ROOT...: the processes and their children (a supervisor's workers).
instance_pids() { echo "$@" $(pgrep -P "$(echo "$@" | tr ' ' ',')" 2>/dev/null); }

instance_ticks() {
	local total=0 p
	for p in $(instance_pids "$@"); do
		[ -r "/proc/$p/stat" ] && total=$((total + $(bench_cpu_ticks "$p")))
	done
	echo "$total"
}

# fixed_pgbench PORT N: N transactions per client.
fixed_pgbench() {
	PGPASSWORD=bench PGSSLMODE=disable "$PGBIN/pgbench" -n -S -M simple -c "$clients" -j 2 -t "$2" -h 127.0.0.1 -p "$1" \
		-U bench bench >"$tmp/fixed.out" 2>&1
}

# start KIND W PORT: pgvalve with W workers, or W PgBouncers on PORT (pids in procs), each
# under the command in the array wrap (none by default), which then runs as $runas from the
# start (setpriv execs: the pid is the pooler's) rather than the pooler dropping to it with -u,
# so that what the wrapper opens at the start (callgrind's output file) stays its own.
wrap=()
start() {
	local kind=$1 w=$2 p=$3 k as=(${runas:+-u "$runas"}) cmd=()
	procs=()
	if [ ${#wrap[@]} -gt 0 ]; then
		cmd=("${wrap[@]}")
		[ -n "$runas" ] && cmd=(setpriv --reuid="$runas" --regid="$runas" --init-groups "${wrap[@]}") && as=()
	fi
	if [ "$kind" = pgvalve ]; then
		bench_pooler_ini pgvalve "$p" "pgvalve-$w" "workers = $w" >"$tmp/pgvalve-$w.ini"
		[ -n "$runas" ] && chown "$runas:" "$tmp/pgvalve-$w.ini"
		"${cmd[@]}" "$PGVALVE" -q "${as[@]}" "$tmp/pgvalve-$w.ini" >/dev/null 2>&1 &
		procs+=($!)
	else
		for k in $(seq "$w"); do
			bench_pooler_ini pgbouncer "$p" "pgbouncer$k" "so_reuseport = $([ "$w" -gt 1 ] && echo 1 || echo 0)" \
				>"$tmp/pgbouncer$k.ini"
			[ -n "$runas" ] && chown "$runas:" "$tmp/pgbouncer$k.ini"
			"${cmd[@]}" "$PGBOUNCER" -q "${as[@]}" "$tmp/pgbouncer$k.ini" >/dev/null 2>&1 &
			procs+=($!)
		done
	fi
	for _ in $(seq 300); do
		PGPASSWORD=bench "$PGBIN/psql" -X -At -h 127.0.0.1 -p "$p" -U bench -c "SELECT 1" bench >/dev/null 2>&1 && break
		sleep 0.2
	done
	sleep 1	# every worker listening
}

# serving_pids: the processes that serve clients (a supervisor's workers, or the PgBouncers).
serving_pids() {
	local kids
	kids=$(pgrep -P "$(echo "${procs[@]}" | tr ' ' ',')" 2>/dev/null | tr '\n' ' ')
	if [ -n "$kids" ]; then echo "$kids"; else echo "${procs[@]}"; fi
}

# cg_run KIND W TXNS|-SECS: the instance under callgrind running TXNS transactions per client (or
# idle for SECS seconds); prints the instructions of every process and the run's seconds.
cg_run() {
	local kind=$1 w=$2 n=$3 p t0 t1
	rm -rf "$tmp/cg" && mkdir "$tmp/cg" && { [ -z "$runas" ] || chown "$runas:" "$tmp/cg"; }
	wrap=(valgrind --tool=callgrind --vgdb=no --dump-instr=no --callgrind-out-file="$tmp/cg/out.%p")
	p=$(pgv_free_port $((standin_port + 1)))
	start "$kind" "$w" "$p"
	wrap=()
	t0=$(date +%s.%N)
	if [ "$n" -lt 0 ]; then
		sleep $((-n))
	else
		timeout 600 env PGPASSWORD=bench PGSSLMODE=disable "$PGBIN/pgbench" -n -S -M simple -c "$clients" -j 2 \
			-t "$n" -h 127.0.0.1 -p "$p" -U bench bench >"$tmp/cg.out" 2>&1 || { stop_all; return 1; }
	fi
	t1=$(date +%s.%N)
	# each process writes its counts as it exits: wait for them (pgv_kill_pids would not, past 5 s)
	kill -TERM "${procs[@]}" 2>/dev/null
	for _ in $(seq 600); do pgv_alive "${procs[0]}" || break; sleep 0.1; done
	stop_all
	cat "$tmp"/cg/out.* 2>/dev/null | awk -v t0="$t0" -v t1="$t1" \
		'/^(summary|totals):/ { t += $2 } END { printf "%d %.3f\n", t, t1 - t0 }'
}

# instructions KIND W: instructions per transaction (see --counts above), or - if a run failed.
# The loaded runs differ in length too, and every process does some work by the clock (timers,
# ticks): what the instance does idle per second (two idle runs, 1 and 6 s) is taken off.
instructions() {
	local kind=$1 w=$2 a at b bt i1 i2
	read -r a at < <(cg_run "$kind" "$w" "$txns") || { echo -; return; }
	read -r b bt < <(cg_run "$kind" "$w" $((2 * txns))) || { echo -; return; }
	read -r i1 _ < <(cg_run "$kind" "$w" -1)
	read -r i2 _ < <(cg_run "$kind" "$w" -6)
	[ -n "$a" ] && [ -n "$b" ] && [ -n "$i1" ] && [ -n "$i2" ] || { echo -; return; }
	awk -v a="$a" -v at="$at" -v b="$b" -v bt="$bt" -v i1="$i1" -v i2="$i2" -v n=$((clients * txns)) \
		'BEGIN { idle = (i2 - i1) / 5; printf "%.0f", (b - a - idle * (bt - at)) / n }'
}

declare -A tps cpu sys waits instr
measure() {
	local kind=$1 w=$2 label="$1-$2" p t n t0 t1 calls pids args=()
	p=$(pgv_free_port $((standin_port + 1)))
	start "$kind" "$w" "$p"
	t0=$(instance_ticks "${procs[@]}")
	read -r t n _ < <(run_pgbench "$p" -S -M simple -c "$clients" -j 2)
	t1=$(instance_ticks "${procs[@]}")
	tps[$label]=$t
	cpu[$label]=$(awk -v d=$((t1 - t0)) -v n="$n" 'BEGIN { printf "%.2f", n ? d * 10000 / n : 0 }')
	# system calls: strace attached to the serving processes for a fixed run
	pids=$(serving_pids)
	for k in $pids; do args+=(-p "$k"); done
	strace -f -c -q -o "$tmp/strace.out" "${args[@]}" &
	local tracer=$!
	sleep 1
	fixed_pgbench "$p" "$txns"
	kill -INT "$tracer"
	wait "$tracer" 2>/dev/null
	calls=$(awk '$NF == "total" { print ($4 ~ /^[0-9]+$/) ? $4 : $3 }' "$tmp/strace.out")
	sys[$label]=$(awk -v c="${calls:-0}" -v n=$((txns * clients)) 'BEGIN { printf "%.1f", c / n }')
	stop_all
	# lock waits: each worker logs its own as it stops (shared_pool.c); per transaction of both runs
	waits[$label]=-
	[ "$kind" = pgvalve ] && [ "$w" -gt 1 ] && waits[$label]=$(sed -n \
		's/.*shared pool table: \([0-9]*\) lockings waited for another worker, \([0-9]*\) us in all (of \([0-9]*\) lockings).*/\1 \2 \3/p' \
		"$tmp/pgvalve-$w.log" | awk -v n=$((n + txns * clients)) \
		'{ c += $1; u += $2; l += $3 } END { printf "%.4f lockings/txn, %d waited (%.3f us/txn)", n ? l / n : 0, c, n ? u / n : 0 }')
	instr[$label]=-
	[ "$counts" = 1 ] && instr[$label]=$(instructions "$kind" "$w")
	echo "workers_standin.sh: $label: ${tps[$label]} tps, ${cpu[$label]} us/txn, ${sys[$label]} syscalls/txn, ${instr[$label]} instructions/txn, lock waits ${waits[$label]}"
}

IFS=, read -ra wl <<<"$workers_list"
[ "$with_pgbouncer" = 1 ] && [ ! -x "$PGBOUNCER" ] && { echo "workers_standin.sh: no PgBouncer at $PGBOUNCER" >&2; exit 2; }
labels=()
for w in "${wl[@]}"; do
	measure pgvalve "$w"
	labels+=("pgvalve-$w")
	if [ "$with_pgbouncer" = 1 ]; then
		measure pgbouncer "$w"
		labels+=("pgbouncer-$w")
	fi
done
printf '\n%-13s %9s %10s %13s %13s  %s\n' what tps us/txn syscalls/txn instr/txn "shared table: lockings, waits (waiting time per txn)"
for l in "${labels[@]}"; do
	printf '%-13s %9.0f %10s %13s %13s  %s\n' "$l" "${tps[$l]}" "${cpu[$l]}" "${sys[$l]}" "${instr[$l]}" "${waits[$l]}"
done
echo
echo "a server stand-in answering at once (pg_standin); pgbench -S -M simple, $clients clients, -j 2, ${duration}s; $(nproc) CPUs"
echo "us/txn: pooler CPU (user + system) per transaction at saturation; syscalls/txn: strace -f -c over $txns transactions"
echo "per client, every serving process summed; instr/txn (--counts): callgrind, every process, ($txns x 2 - $txns) x $clients transactions;"
echo "shared table: lockings of its rows per transaction, those that found another worker holding the lock, and their"
echo "waiting time per transaction, over the saturation and strace runs (the workers' own counts, logged as they stop)"
[ "$with_pgbouncer" = 1 ] && bench_pgbouncer_line
exit 0
