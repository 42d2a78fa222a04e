#!/usr/bin/env bash
#
# test/faults/run.sh - nothing lost when the network lies (issue 45): the
# ledger checker (ledger.py) with clients through pgvalve, in transaction
# and in session mode, while faults are injected, each in a short run of
# its own and then all mixed:
#
#   terminate  pg_terminate_backend of a random pgvalve backend twice a second
#   restart    PostgreSQL restarted with -m immediate
#   blackhole  every packet between pgvalve and PostgreSQL dropped silently
#              (nftables in PostgreSQL's network namespace: no RST, no FIN)
#   sigstop    the postmaster and its backends stopped, then continued
#   partition-restart  PostgreSQL restarted -m immediate inside a blackhole:
#              every server pgvalve holds is dead when the network returns
#   rolling    pgvalve's rolling restart (two instances on one port with
#              so_reuseport, each drained with SIGTERM and started again)
#              with a RELOAD of each every second
#
# PostgreSQL runs in a network namespace this test creates, reached over a
# veth (10.214.X.2); pgvalve in this one. pgvalve's config sets the
# timeouts an operator would (see good_timeouts below); every client must
# get an answer or an error within BOUND seconds, no acknowledged commit
# may be missing, and once a fault heals the pool must serve again with no
# server PostgreSQL does not know (SHOW SERVERS against pg_stat_activity).
#
# Then each fault again against a mishandling setup, where the checker
# must fail: timeouts off under the blackhole and the stop (clients
# hang), asynchronous commit under the immediate restart (acknowledged
# commits lost), clients that acknowledge what they lost under the
# terminations, and a rolling restart by SIGKILL (commits cut in flight).
#
# Then exhaustion.sh: the fd limit reached by a connection storm, and a
# client that never reads a large result.
#
# Needs root (network namespaces, nftables), PostgreSQL 15, nftables,
# iproute2 and Debian's python3-psycopg (scripts/deps.sh mode faults).
# About 3 1/2 minutes. FAULTS_LONG=1: the blackhole lasts 60 s and the stop
# 20 s. FAULTS_ONLY="blackhole sigstop": only these runs (names as in the
# log). LEDGER_GRACE: how long the clients may take to finish after a run
# (default the bound + 2 s; longer, to measure how long a hang lasts).
# PGV_BINARY picks pgvalve (default: build/'s, else build-dev/'s).
# PGV_KEEP_TMP=1 keeps the work directory.
# Exit: 0 passed, 1 a check failed, 2 setup failed, 77 not root.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
here="$root/test/faults"
# shellcheck source=scripts/deps.sh
. "$root/scripts/deps.sh"
check_prefix=test/faults
# shellcheck source=test/checks.sh
. "$root/test/checks.sh"

if [ "$(id -u)" -ne 0 ]; then
	echo "test/faults: SKIP: needs root (network namespaces, nftables)"
	exit 77
fi
pgv_deps_ensure faults || exit 2
binary=$(pick_pgvalve_binary "$root") || exit 2
py=/usr/bin/python3 # Debian's, with Debian's psycopg 3

started=$(date +%s)
long=${FAULTS_LONG:-0}
only=${FAULTS_ONLY:-}
work=$(mktemp -d "${TMPDIR:-/tmp}/pgvfaults.$$.XXXXXX") # the PID: see sweep_dead_runs
chmod 0755 "$work"
pgv_ensure_user pgvtest
tag=$$
ns="pgvq$tag"
veth_h="pqh$tag" veth_n="pqn$tag"
pg_port=$(pgv_free_port 26500)
pgv_port=$(pgv_free_port $((pg_port + 1)))
pg_data="$work/pg/data"
declare -A pgv_pid=()
instances=(1 2)
accounts=50
# Every client's answer or error within BOUND seconds: the longest wait
# the good timeouts allow (query_wait_timeout 6 s, a server connect of
# server_connect_timeout 2 s before it) plus the janitor's tick and a
# loaded machine's slack.
bound=10

# ---------------------------------------------------------------- leftovers, cleanup
# A run killed without its trap leaves its processes (PostgreSQL, maybe
# stopped, pgvalve, the clients), its work directory, its namespace and
# its veth behind, all named after its PID (the nft table lives in the
# namespace and goes with it). End and remove what belongs to PIDs that
# are gone.
sweep_dead_runs() {
	local n l t d
	for d in "${TMPDIR:-/tmp}"/pgvfaults.[0-9]*.*; do
		[ -d "$d" ] || continue
		t=${d##*/pgvfaults.}; t=${t%%.*}
		kill -0 "$t" 2>/dev/null && continue
		# shellcheck disable=SC2046 # a stopped PostgreSQL must go on to hear the TERM
		kill -CONT $(pgrep -f "$d/" 2>/dev/null) 2>/dev/null || true
		pgv_kill_matching "$d/" || true
		rm -rf "$d"
	done
	for n in $(ip netns list | awk '$1 ~ /^pgvq[0-9]+$/ {print $1}'); do
		t=${n#pgvq}
		kill -0 "$t" 2>/dev/null || ip netns del "$n" 2>/dev/null || true
	done
	for l in $(ip -o link show | awk -F': ' '{sub(/@.*/, "", $2); print $2}' | grep -E '^pq[hn][0-9]+$'); do
		t=${l#pq?}
		kill -0 "$t" 2>/dev/null || ip link del "$l" 2>/dev/null || true
	done
}
pick_subnet() {
	local k x
	for k in $(seq 0 254); do
		x=$(((tag + k) % 255))
		[ -z "$(ip -4 route show root "10.214.$x.0/24")" ] && { echo "10.214.$x"; return 0; }
	done
	return 1
}
pg_pids() { # the postmaster and its children
	local pm
	pm=$(head -n 1 "$pg_data/postmaster.pid" 2>/dev/null) || return 0
	[ -n "$pm" ] && pgv_alive "$pm" || return 0
	echo "$pm"
	pgv_children "$pm"
}
cleanup() {
	local p
	for p in "${pgv_pid[@]}"; do kill -KILL "$p" 2>/dev/null && wait "$p" 2>/dev/null || true; done
	# shellcheck disable=SC2046
	kill -CONT $(pg_pids) 2>/dev/null || true
	if [ -f "$pg_data/postmaster.pid" ]; then
		ip netns exec "$ns" runuser -u pgvtest -- "$PGBIN/pg_ctl" -D "$pg_data" -m immediate -w -t 20 stop \
			>/dev/null 2>&1 || true
	fi
	pgv_kill_matching "$work/" || true
	ip netns del "$ns" 2>/dev/null || true
	ip link del "$veth_h" 2>/dev/null || true
	wait 2>/dev/null || true
	keep_or_remove "$work"
}
trap cleanup EXIT
sweep_dead_runs
net=$(pick_subnet) || setup_failed "no free 10.214.X.0/24"
host_addr="$net.1" pg_addr="$net.2"

# ---------------------------------------------------------------- the network
ip netns add "$ns" || setup_failed "ip netns add"
ip link add "$veth_h" type veth peer name "$veth_n" || setup_failed "veth"
ip link set "$veth_n" netns "$ns"
ip addr add "$host_addr/24" dev "$veth_h"
ip link set "$veth_h" up
ip -n "$ns" addr add "$pg_addr/24" dev "$veth_n"
ip -n "$ns" link set "$veth_n" up
ip -n "$ns" link set lo up

# ---------------------------------------------------------------- PostgreSQL, in the namespace
mkdir -p "$work/pg" && chown pgvtest: "$work/pg"
pgv_pg_init "$pg_data" pgvtest "$pg_port" "$work/pg" pgvadmin >/dev/null || setup_failed initdb
cat >>"$pg_data/postgresql.conf" <<EOF
listen_addresses = '$pg_addr'
# the ledger's promise is about acknowledged commits: they must survive a crash
synchronous_commit = on
# PostgreSQL's own end of a silent network, set as an operator should: a
# server pgvalve closed during a blackhole (its FIN lost) would otherwise
# stay "idle in transaction", holding its row locks, until the kernel's
# keepalive (2 hours) or a retransmission after the heal finds it gone.
tcp_keepalives_idle = 2
tcp_keepalives_interval = 1
tcp_keepalives_count = 3
tcp_user_timeout = 3000
EOF
cat >"$pg_data/pg_hba.conf" <<EOF
local all all trust
host all all $net.0/24 trust
EOF
pg_ctl_ns() { (cd "$work" && ip netns exec "$ns" runuser -u pgvtest -- "$PGBIN/pg_ctl" -D "$pg_data" "$@"); }
(pg_ctl_ns -l "$work/pg/postgresql.log" -w -t 60 start >/dev/null) ||
	{ tail "$work/pg/postgresql.log"; setup_failed "PostgreSQL start"; }
psql_admin() { "$PGBIN/psql" -X -q -t -A -h "$work/pg" -p "$pg_port" -U pgvadmin "$@"; }
psql_admin -d postgres -c "CREATE ROLE app LOGIN" -c "CREATE DATABASE appdb OWNER app" >/dev/null ||
	setup_failed "creating the role"
admin_dsn="host=$work/pg port=$pg_port user=pgvadmin dbname=appdb"
echo "$accounts" >"$work/accounts"

# ---------------------------------------------------------------- pgvalve
echo '"app" "app_pass"' >"$work/userlist.txt"
chmod 0644 "$work/userlist.txt"
# What an operator sets against a dead or silent server (doc/operations.md's
# recommendation): each bounds one state a client can wait in.
good_timeouts() {
	echo "query_timeout = 5"         # a query (COMMIT included) without an answer
	echo "query_wait_timeout = 6"    # waiting for a server connection
	echo "server_connect_timeout = 2" # a connect and login that does not finish
	echo "server_login_retry = 1"
	echo "tcp_user_timeout = 3000"   # sent data unacknowledged (a blackhole)
	echo "tcp_keepalive = 1"         # an idle server gone silent
	echo "tcp_keepidle = 2"
	echo "tcp_keepintvl = 1"
	echo "tcp_keepcnt = 3"
	echo "server_check_delay = 2"
	echo "server_check_query = select 1"
}
# PgBouncer's defaults, with the two that matter most turned off.
no_timeouts() {
	echo "query_timeout = 0"
	echo "query_wait_timeout = 0"
	echo "tcp_user_timeout = 0"
	echo "tcp_keepalive = 0"
}
write_ini() { # write_ini N TIMEOUTS_FUNCTION
	local i=$1
	mkdir -p "$work/p$i"
	chown pgvtest: "$work/p$i"
	{
		echo "[databases]"
		echo "appdb = host=$pg_addr port=$pg_port dbname=appdb pool_mode=transaction"
		echo "appdb_s = host=$pg_addr port=$pg_port dbname=appdb pool_mode=session"
		echo "[pgbouncer]"
		echo "listen_addr = 127.0.0.1"
		echo "listen_port = $pgv_port"
		echo "so_reuseport = 1"
		echo "unix_socket_dir = $work/p$i"
		echo "auth_type = md5"
		echo "auth_file = $work/userlist.txt"
		echo "admin_users = app"
		echo "default_pool_size = 8"
		echo "max_client_conn = 200"
		echo "logfile = $work/p$i/pgvalve.log"
		echo "shutdown_drain = 1"
		echo "drain_timeout = 20"
		"$2"
	} >"$work/p$i/pgvalve.ini"
}
start_instance() { # start_instance N
	"$binary" -u pgvtest "$work/p$1/pgvalve.ini" >>"$work/p$1/stderr.log" 2>&1 &
	pgv_pid[$1]=$!
}
console() { # console N SQL: the admin console of instance N
	PGPASSWORD=app_pass "$PGBIN/psql" -X -q -t -A -h "$work/p$1" -p "$pgv_port" -U app -d pgbouncer -c "$2"
}
serves() { # serves N: a query through instance N's own socket works
	[ "$(PGPASSWORD=app_pass "$PGBIN/psql" -X -q -t -A -h "$work/p$1" -p "$pgv_port" -U app -d appdb \
		-c 'SELECT 1' 2>/dev/null)" = 1 ]
}
serves_all() {
	local i
	for i in "${instances[@]}"; do serves "$i" || return 1; done
}
stop_instance() { # stop_instance N: SIGQUIT, now
	local p=${pgv_pid[$1]:-}
	[ -n "$p" ] || return 0
	kill -QUIT "$p" 2>/dev/null || true
	# SIGQUIT exits at once; 10 s on a loaded machine, then SIGKILL
	wait_for 10 bash -c "! kill -0 $p 2>/dev/null" || kill -KILL "$p" 2>/dev/null || true
	wait "$p" 2>/dev/null || true
	pgv_pid[$1]=
}
restart_pgvalve() { # restart_pgvalve TIMEOUTS_FUNCTION: both instances afresh with these settings
	local i
	for i in "${instances[@]}"; do
		stop_instance "$i"
		write_ini "$i" "$1"
		start_instance "$i"
	done
	# a process start and a server login each: a second at most; 15 s on a loaded 2-core machine
	for i in "${instances[@]}"; do
		wait_for 15 serves "$i" || { tail "$work/p$i/stderr.log" "$work/p$i/pgvalve.log"; setup_failed "pgvalve $i does not serve"; }
	done
}

# ---------------------------------------------------------------- faults
# Each prints how many outcomes it can leave unknown (a COMMIT it may cut
# in flight) to the file named by $unknowns.
clients_tx=8 clients_sess=4
clients=$((clients_tx + clients_sess))
add_unknowns() { echo $(($(cat "$unknowns") + $1)) >"$unknowns"; }
fault_terminate() { # fault_terminate SECONDS: a random pgvalve backend twice a second
	local end=$((SECONDS + $1)) n=0
	while [ "$SECONDS" -lt "$end" ]; do
		n=$((n + $(psql_admin -d postgres -c "SELECT count(pg_terminate_backend(pid)) FROM (SELECT pid FROM pg_stat_activity
			WHERE client_addr = '$host_addr' AND backend_type = 'client backend' ORDER BY random() LIMIT 1) s" 2>/dev/null || echo 0)))
		sleep 0.5	# pacing: the fault's rate, twice a second
	done
	echo "test/faults:   terminated $n backends"
	add_unknowns "$n"
}
fault_restart() {
	echo "test/faults:   restart -m immediate"
	pg_ctl_ns -m immediate -w -t 60 restart >/dev/null 2>&1 || echo "test/faults:   pg_ctl restart failed" >&2
	add_unknowns "$clients"
}
nft_ns() { ip netns exec "$ns" nft "$@"; }
fault_blackhole() { # fault_blackhole SECONDS: PostgreSQL's port silently dropped both ways
	echo "test/faults:   blackhole for $1 s"
	nft_ns -f - <<EOF
table inet pgvfaults {
	chain in { type filter hook input priority 0; policy accept; tcp dport $pg_port drop; }
	chain out { type filter hook output priority 0; policy accept; tcp sport $pg_port drop; }
}
EOF
	sleep "$1"	# the fault's length: the clients' bound is checked by ledger.py, not by this sleep
	nft_ns delete table inet pgvfaults
	add_unknowns "$clients"
}
fault_blackhole_restart() { # fault_blackhole_restart SECONDS: PostgreSQL crashes and restarts unseen
	echo "test/faults:   blackhole for $1 s, restart -m immediate inside it"
	nft_ns -f - <<EOF
table inet pgvfaults {
	chain in { type filter hook input priority 0; policy accept; tcp dport $pg_port drop; }
	chain out { type filter hook output priority 0; policy accept; tcp sport $pg_port drop; }
}
EOF
	sleep 1	# the fault's shape: the restart a second into the blackhole, the rest of it after
	pg_ctl_ns -m immediate -w -t 60 restart >/dev/null 2>&1 || echo "test/faults:   pg_ctl restart failed" >&2
	sleep $(($1 - 1))
	nft_ns delete table inet pgvfaults
	add_unknowns "$clients"
}
fault_sigstop() { # fault_sigstop SECONDS
	local pids
	pids=$(pg_pids | tr '\n' ' ')
	echo "test/faults:   SIGSTOP for $1 s"
	# shellcheck disable=SC2086
	kill -STOP $pids
	sleep "$1"	# the fault's length
	# shellcheck disable=SC2086
	kill -CONT $pids
	add_unknowns "$clients"
}
reload_loop() { # every second, RELOAD on each instance
	while :; do
		for i in "${instances[@]}"; do console "$i" RELOAD >/dev/null 2>&1 || true; done
		sleep 1	# pacing
	done
}
fault_rolling() { # fault_rolling drain|kill: each instance in turn, while reloads run
	local how=$1 i p rl
	reload_loop &
	rl=$!
	# a drain goes once round; SIGKILLs twice, so that some COMMIT is surely in flight
	for i in "${instances[@]}" $([ "$how" = kill ] && echo "${instances[@]}"); do
		p=${pgv_pid[$i]}
		echo "test/faults:   rolling restart ($how) of instance $i"
		if [ "$how" = drain ]; then kill -TERM "$p"; else kill -KILL "$p"; fi
		# a drain ends at the clients' next transaction boundary (drain_timeout 20 s at most);
		# 25 s leaves 5 of slack
		wait_for 25 bash -c "! kill -0 $p 2>/dev/null" || echo "test/faults:   instance $i still up 25 s after SIGTERM" >&2
		{ wait "$p"; } 2>/dev/null || true
		start_instance "$i"
		# a process start and a login: a second at most; 10 s on a loaded machine
		wait_for 10 serves "$i" || echo "test/faults:   instance $i does not serve after its restart" >&2
		sleep 1	# pacing: the next instance a second later
	done
	kill "$rl" 2>/dev/null && wait "$rl" 2>/dev/null || true
	# a drain cuts no COMMIT in flight; a SIGKILL may cut every client's
	if [ "$how" = kill ]; then add_unknowns 0; fi
}

# ---------------------------------------------------------------- one run
# ledger_run NAME EXPECT TIMEOUTS SECONDS FAULT... : clients for SECONDS,
# the faults (shell commands, one after another) from the 2nd second on.
# EXPECT pass: every invariant holds, the pool serves again with no dead
# server. EXPECT "fail:TEXT": the checker must fail, with TEXT in its
# verdict.
ledger_run() {
	local name=$1 expect=$2 timeouts=$3 seconds=$4 f out rc=0 t0 lie="" healed
	shift 4
	if [ -n "$only" ] && [[ " $only " != *" $name "* ]]; then return 0; fi
	echo "test/faults: run $name ($expect)"
	out="$work/run-$name"
	mkdir -p "$out"
	cp "$work/accounts" "$out/accounts"
	unknowns="$out/unknowns"
	echo 0 >"$unknowns"
	restart_pgvalve "$timeouts"
	$py "$here/ledger.py" setup "$admin_dsn" "$accounts" || setup_failed "ledger setup"
	[[ $name == *lie* ]] && lie=--lie
	$py "$here/ledger.py" run "$out" "$seconds" "$bound" "$name" \
		"host=127.0.0.1 port=$pgv_port user=app password=app_pass dbname=appdb:$clients_tx" \
		"host=127.0.0.1 port=$pgv_port user=app password=app_pass dbname=appdb_s:$clients_sess" $lie \
		>"$out/run.log" 2>&1 &
	local clients_pid=$!
	sleep 2	# pacing: the faults begin once the clients run (a later start only shortens the faulted part)
	for f in "$@"; do eval "$f"; done
	wait "$clients_pid" || true
	sed 's/^/test\/faults:   /' "$out/run.log"
	$py "$here/ledger.py" check "$admin_dsn" "$out" "$(cat "$unknowns")" "$bound" >"$out/check.log" 2>&1 || rc=$?
	sed 's/^/test\/faults:   /' "$out/check.log"
	if [ "$expect" = pass ]; then
		check "$name: every invariant holds" [ "$rc" -eq 0 ]
		# the pool serves again, with no server PostgreSQL does not know
		t0=$SECONDS
		healed=0
		# the pool heals at the janitor's ticks and the next logins: seconds; 15 s on a loaded machine
		wait_for 15 serves_all && healed=1
		check "$name: both instances serve again ($((SECONDS - t0)) s after the clients stopped)" [ "$healed" = 1 ]
		t0=$SECONDS
		# dead servers are found at their next use or the janitor's check: seconds; 10 s on a loaded machine
		wait_for 10 pool_matches_postgres || true
		check "$name: SHOW SERVERS and pg_stat_activity agree after $((SECONDS - t0)) s (no dead server pooled, no orphan backend)" \
			pool_matches_postgres_verbose
	else
		check "$name: the checker caught it (${expect#fail:})" \
			bash -c "[ $rc -ne 0 ] && grep -q -- '${expect#fail:}' '$out/check.log'"
	fi
}
pool_matches_postgres() {
	local i dsns=()
	for i in "${instances[@]}"; do dsns+=("host=$work/p$i port=$pgv_port user=app password=app_pass dbname=pgbouncer"); done
	$py "$here/ledger.py" servers "$admin_dsn" "$host_addr" "${dsns[@]}" >"$work/servers.log" 2>&1
}
pool_matches_postgres_verbose() {
	local rc=0
	pool_matches_postgres || rc=$?
	sed 's/^/test\/faults:   /' "$work/servers.log"
	return "$rc"
}

# the mishandled runs' blackhole and stop outlast the bound (long mode:
# as long as the good ones, to measure how long PgBouncer's defaults hang)
if [ "$long" = 1 ]; then hole=60 stop=20 bad_hole=60 bad_stop=20; else hole=5 stop=12 bad_hole=$((bound + 2)) bad_stop=$((bound + 2)); fi

ledger_run terminate pass good_timeouts 8 "fault_terminate 5"
ledger_run restart pass good_timeouts 8 "sleep 1" "fault_restart" "sleep 2" "fault_restart"
ledger_run blackhole pass good_timeouts $((hole + 6)) "fault_blackhole $hole"
ledger_run sigstop pass good_timeouts $((stop + 5)) "fault_sigstop $stop"
ledger_run rolling pass good_timeouts 12 "fault_rolling drain"
# every server pgvalve holds is dead when the network comes back, and it was told nothing
ledger_run partition-restart pass good_timeouts $((hole + 6)) "fault_blackhole_restart $hole"
ledger_run mixed pass good_timeouts $((hole + 30)) "fault_terminate 3" "fault_restart" "sleep 2" \
	"fault_blackhole $hole" "sleep 2" "fault_sigstop 8" "fault_rolling drain"

# The checker's own test: each fault against a mishandling setup.
ledger_run terminate-lie "fail:committed ids missing" good_timeouts 6 "fault_terminate 4"
ledger_run blackhole-no-timeouts "fail:waited longer\|hanging" no_timeouts $((bad_hole + 2)) "fault_blackhole $bad_hole"
ledger_run sigstop-no-timeouts "fail:waited longer\|hanging" no_timeouts $((bad_stop + 2)) "fault_sigstop $bad_stop"
ledger_run rolling-kill "fail:unknown outcomes, more than" good_timeouts 10 "fault_rolling kill"
async_commit() {
	psql_admin -d postgres -c "ALTER SYSTEM SET synchronous_commit = off" -c "ALTER SYSTEM SET wal_writer_delay = '10s'" \
		-c "SELECT pg_reload_conf()" >/dev/null
	sleep 4	# commits pile up unflushed (wal_writer_delay 10 s): a loaded machine only makes more of them
}
ledger_run restart-async-commit "fail:committed ids missing" good_timeouts 8 "async_commit" "fault_restart"
psql_admin -d postgres -c "ALTER SYSTEM RESET ALL" -c "SELECT pg_reload_conf()" >/dev/null

for i in "${instances[@]}"; do stop_instance "$i"; done

# shellcheck source=test/faults/exhaustion.sh
. "$here/exhaustion.sh"
if [ -z "$only" ] || [[ " $only " == *" exhaustion "* ]]; then
	exhaustion_start
	exhaustion_fds
	exhaustion_noread
	exhaustion_stop
fi

# A sanitizer build reports to stderr: any report fails the run.
check "no sanitizer report in pgvalve's output" \
	bash -c "! grep -l -E 'ERROR: (Address|Leak)Sanitizer|runtime error:' '$work'/p*/stderr.log"

echo "test/faults: $failures failed, $(($(date +%s) - started)) s"
[ "$failures" -eq 0 ]
