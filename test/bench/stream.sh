#!/usr/bin/env bash
#
# test/bench/stream.sh - bulk streams through the pooler (issue 48): COPY
# OUT, COPY IN, a large SELECT and pg_basebackup, through pgvalve and
# through PgBouncer, with the kernel's default socket buffers and with
# tcp_socket_buffer = 4096 (PgBouncer's own test configuration). `make
# bench-stream` runs it.
#
#   stream.sh [--rounds N] [--scale S] [--buffers "0 4096"] [--only NAME]
#
# Each case runs N times (3) per pooler and buffer size, the poolers taking
# turns; the table gives the median wall time, the MB moved and the
# pooler's CPU per MB (user + system, from /proc). A cluster of pgbench
# scale S (6: pgbench_accounts is about 60 MB as COPY text) is made once.
# Build without sanitizers for meaningful figures (PGVALVE=path/to/pgvalve);
# PGBOUNCER=/path/to/pgbouncer for a current PgBouncer (Debian 12's is 1.18).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
srcdir=${abs_top_srcdir:-$(cd "$here/../.." && pwd)}
builddir=${abs_top_builddir:-$srcdir/build}
rounds=3 scale=6 buffers="0 4096" only=
while [ $# -gt 0 ]; do
	case $1 in
	--rounds) rounds=$2; shift 2 ;;
	--scale) scale=$2; shift 2 ;;
	--buffers) buffers=$2; shift 2 ;;
	--only) only=$2; shift 2 ;;
	*) echo "usage: stream.sh [--rounds N] [--scale S] [--buffers \"0 4096\"] [--only copy_out|copy_in|select|basebackup]" >&2; exit 2 ;;
	esac
done
bench_scale=$scale
bench_tmp_name=pgvstream
# shellcheck source=lib.sh
. "$here/lib.sh"
bench_setup_cluster
# physical replication logs in to the database name "replication"
bench_extra_databases="replication = host=127.0.0.1 port=$pgport"
# pg_basebackup through the pooler: a replication connection of user bench (a superuser)
echo "host replication all 127.0.0.1/32 md5" >>"$tmp/pgdata/pg_hba.conf"
PGPASSWORD=bench "$PGBIN/psql" -X -q -h 127.0.0.1 -p "$pgport" -U bench -d bench \
	-c "SELECT pg_reload_conf()" -c "CREATE TABLE stream_in (LIKE pgbench_accounts)" >/dev/null || exit 1
copy_file="$tmp/accounts.copy"
PGPASSWORD=bench "$PGBIN/psql" -X -q -h 127.0.0.1 -p "$pgport" -U bench -d bench \
	-c "COPY pgbench_accounts TO STDOUT" >"$copy_file" || exit 1
chmod 644 "$copy_file"
echo "$(bench_pgbouncer_line)"

# case_cmd NAME PORT: runs one case against PORT; prints the bytes it moved.
case_cmd() {
	local conn="host=127.0.0.1 port=$2 dbname=bench user=bench password=bench sslmode=disable"
	case $1 in
	copy_out)
		"$PBIN_PSQL" -X -q -d "$conn" -c "COPY pgbench_accounts TO STDOUT" | wc -c ;;
	copy_in)
		"$PBIN_PSQL" -X -q -d "$conn" -c "TRUNCATE stream_in" -c "\\copy stream_in FROM '$copy_file'" >/dev/null &&
			wc -c <"$copy_file" ;;
	select)
		# about 100 MB of DataRows
		"$PBIN_PSQL" -X -q -At -d "$conn" -c "SELECT repeat('x', 1000) FROM generate_series(1, 100000)" | wc -c ;;
	basebackup)
		rm -rf "$tmp/bb"
		"$PGBIN/pg_basebackup" -d "$conn" -D "$tmp/bb" -X stream -c fast -F plain >/dev/null 2>"$tmp/bb.err" ||
			{ cat "$tmp/bb.err" >&2; echo 0; return; }
		du -sb "$tmp/bb" | cut -f1 ;;
	esac
}
PBIN_PSQL=$PGBIN/psql

# measure NAME PORT PID: "seconds bytes cpu_ticks" of one run of case NAME.
measure() {
	local t0 t1 c0 c1 bytes
	c0=$(bench_cpu_ticks "$3")
	t0=$(date +%s.%N)
	bytes=$(case_cmd "$1" "$2")
	t1=$(date +%s.%N)
	c1=$(bench_cpu_ticks "$3")
	echo "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }') ${bytes:-0} $((c1 - c0))"
}

cases="copy_out copy_in select basebackup"
[ -n "$only" ] && cases=$only
printf '%-11s %-7s %-10s %9s %8s %12s\n' case buffer pooler seconds MB "cpu_ms/MB"
status=0
for buf in $buffers; do
	extra="pool_mode = session
tcp_socket_buffer = $buf"
	bench_start_pgvalve "$extra" || exit 1
	have_pgb=0
	bench_start_pgbouncer "$extra" && have_pgb=1
	for c in $cases; do
		: >"$tmp/pgvalve.$c" && : >"$tmp/pgbouncer.$c"
		for r in $(seq "$rounds"); do
			# taking turns at going first
			order="pgvalve pgbouncer"
			[ $((r % 2)) -eq 0 ] && order="pgbouncer pgvalve"
			for who in $order; do
				if [ "$who" = pgvalve ]; then
					measure "$c" "$port" "$pgv_pid" >>"$tmp/pgvalve.$c"
				elif [ "$have_pgb" = 1 ]; then
					measure "$c" "$pgb_port" "$pgb_pid" >>"$tmp/pgbouncer.$c"
				fi
			done
		done
		for who in pgvalve pgbouncer; do
			[ -s "$tmp/$who.$c" ] || continue
			secs=$(cut -d' ' -f1 "$tmp/$who.$c" | median)
			bytes=$(cut -d' ' -f2 "$tmp/$who.$c" | median)
			ticks=$(cut -d' ' -f3 "$tmp/$who.$c" | median)
			if [ "${bytes%.*}" -le 0 ]; then
				echo "${0##*/}: $c through $who moved nothing" >&2
				status=1
				continue
			fi
			awk -v c="$c" -v b="$buf" -v w="$who" -v s="$secs" -v n="$bytes" -v t="$ticks" 'BEGIN {
				mb = n / 1048576; printf "%-11s %-7s %-10s %9.2f %8.1f %12.2f\n", c, (b ? b : "default"), w, s, mb, t * 10 / mb }'
		done
	done
	bench_stop_pgvalve
	bench_stop_pgbouncer
done
exit "$status"
