# shellcheck shell=bash
#
# test/faults/exhaustion.sh - resource exhaustion (issue 45, point 3),
# sourced by test/faults/run.sh once its PostgreSQL is up (it uses run.sh's
# $work, $pg_port, $binary, $py, check, wait_for):
#
#   exhaustion_fds     a pgvalve with an fd limit of 80 and max_client_conn
#                      100 meets a storm of 200 connections: its existing
#                      clients keep being served, accept()'s EMFILE is
#                      logged (once a second, not in a loop), its CPU stays
#                      low, and it accepts again once the storm is gone;
#   exhaustion_noread  a client asks for a 1 GB result and never reads it:
#                      pgvalve's RSS stays bounded, the others are served,
#                      and when that client leaves its server goes too.

x_dir="$work/px"
x_pid=""
x_fds=80 x_max_client_conn=100
x_dsn() { echo "host=127.0.0.1 port=$x_port user=app password=app_pass dbname=appdb"; }

exhaustion_start() {
	x_port=$(pgv_free_port $((pgv_port + 1)))
	mkdir -p "$x_dir"
	chown pgvtest: "$x_dir"
	cat >"$x_dir/pgvalve.ini" <<EOF
[databases]
appdb = host=$work/pg port=$pg_port dbname=appdb
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $x_port
unix_socket_dir = $x_dir
auth_type = md5
auth_file = $work/userlist.txt
admin_users = app
pool_mode = transaction
default_pool_size = 5
max_client_conn = $x_max_client_conn
logfile = $x_dir/pgvalve.log
EOF
	prlimit --nofile=$x_fds:$x_fds -- "$binary" -u pgvtest "$x_dir/pgvalve.ini" >>"$x_dir/stderr.log" 2>&1 &
	x_pid=$!
	wait_for 15 x_serves || { tail "$x_dir/stderr.log" "$x_dir/pgvalve.log"; setup_failed "the fd-limited pgvalve does not serve"; }
}
exhaustion_stop() {
	[ -n "$x_pid" ] || return 0
	kill -QUIT "$x_pid" 2>/dev/null || true
	wait_for 10 bash -c "! kill -0 $x_pid 2>/dev/null" || kill -KILL "$x_pid" 2>/dev/null || true
	wait "$x_pid" 2>/dev/null || true
	x_pid=""
}
x_serves() {
	[ "$(PGPASSWORD=app_pass "$PGBIN/psql" -X -q -t -A -h 127.0.0.1 -p "$x_port" -U app -d appdb \
		-c 'SELECT 1' 2>/dev/null)" = 1 ]
}
# CPU time (user + system) of PID in clock ticks
cpu_ticks() { awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }
rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }

exhaustion_fds() {
	local storm=$((2 * x_max_client_conn)) hold=10 steady_pid storm_pid c0 c1 window=5 ticks hz emfile t0 rc=0 back per_second
	hz=$(getconf CLK_TCK)
	echo "test/faults: fd exhaustion: ulimit -n $x_fds, max_client_conn $x_max_client_conn, a storm of $storm"
	$py "$here/exhaust.py" steady "$(x_dsn)" 5 $((hold + 6)) >"$x_dir/steady.log" 2>&1 &
	steady_pid=$!
	sleep 2
	$py "$here/exhaust.py" storm 127.0.0.1 "$x_port" "$storm" "$hold" >"$x_dir/storm.log" 2>&1 &
	storm_pid=$!
	wait_for 30 grep -q "connected" "$x_dir/storm.log" || true
	# the storm is in, the limit reached: pgvalve's CPU over the next seconds
	c0=$(cpu_ticks "$x_pid")
	sleep "$window"
	c1=$(cpu_ticks "$x_pid")
	ticks=$((c1 - c0))
	wait "$storm_pid" || true
	sed 's/^/test\/faults:   /' "$x_dir/storm.log"
	t0=$SECONDS
	back=0
	wait_for 10 x_serves && back=1
	wait "$steady_pid" || rc=$?
	sed 's/^/test\/faults:   /' "$x_dir/steady.log"
	emfile=$(grep -c "accept() failed: Too many open files" "$x_dir/pgvalve.log" || true)
	check "fds: the existing clients were served throughout, without an error" [ "$rc" -eq 0 ]
	check "fds: the limit was reached and logged clearly ($emfile lines 'accept() failed: Too many open files')" \
		[ "$emfile" -ge 1 ]
	# at most one a second (two may share a second's label)
	per_second=$(grep "accept() failed: Too many open files" "$x_dir/pgvalve.log" | cut -c1-19 | uniq -c |
		awk '$1 > m { m = $1 } END { print m + 0 }')
	check "fds: no log flood (at most $per_second such lines in any second)" [ "$per_second" -le 2 ]
	check "fds: no busy loop on accept (CPU $((ticks * 1000 / hz)) ms over ${window} s at the limit, under 10%)" \
		[ $((ticks * 1000 / hz)) -lt $((window * 100)) ]
	check "fds: accepts again once the storm is gone ($((SECONDS - t0)) s)" [ "$back" = 1 ]
}

exhaustion_noread() {
	local rows=1000000 seconds=10 rss0 rss max=0 np steady_pid rc=0 i left
	rss0=$(rss_kb "$x_pid")
	echo "test/faults: a client that never reads a 1 GB result (pgvalve's RSS $((rss0 / 1024)) MB before)"
	$py "$here/exhaust.py" steady "$(x_dsn)" 2 "$seconds" >"$x_dir/steady2.log" 2>&1 &
	steady_pid=$!
	$py "$here/exhaust.py" noread 127.0.0.1 "$x_port" app app_pass appdb "$rows" "$seconds" >"$x_dir/noread.log" 2>&1 &
	np=$!
	for ((i = 0; i < seconds * 2; i++)); do
		rss=$(rss_kb "$x_pid")
		[ "$rss" -gt "$max" ] && max=$rss
		sleep 0.5
	done
	wait "$np" || true
	wait "$steady_pid" || rc=$?
	sed 's/^/test\/faults:   /' "$x_dir/noread.log" "$x_dir/steady2.log"
	check "noread: pgvalve's RSS stayed bounded (peak $((max / 1024)) MB, $(((max - rss0) / 1024)) MB over its start, limit 32 MB)" \
		[ $((max - rss0)) -lt $((32 * 1024)) ]
	check "noread: the other clients were served meanwhile" [ "$rc" -eq 0 ]
	left=1
	wait_for 15 bash -c "[ \"\$($PGBIN/psql -X -q -t -A -h $work/pg -p $pg_port -U pgvadmin -d postgres -c \
		\"SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query LIKE 'SELECT repeat%'\")\" = 0 ]" && left=0
	check "noread: its server did not go on streaming for no one (no backend still running the query)" [ "$left" = 0 ]
	[ "$left" = 0 ] || PGPASSWORD=app_pass "$PGBIN/psql" -X -h 127.0.0.1 -p "$x_port" -U app -d pgbouncer -c "SHOW SERVERS" || true
}
