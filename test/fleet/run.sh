#!/usr/bin/env bash
#
# test/fleet/run.sh - a fleet of pgvalve instances behind HAProxy, as pods
# behind a Kubernetes Service (issue 27, point 6):
#
#   - three instances, each in a network namespace of its own with its own
#     address (10.213.X.1N, a veth on a bridge in this namespace), reaching the one
#     PostgreSQL through its Unix socket (a shared volume, as a sidecar
#     would);
#   - HAProxy in TCP mode, round-robin, health-checking each instance's
#     /ready (option httpchk), option redispatch;
#   - pgbench through HAProxy, a new connection per transaction (-C: the
#     reconnecting application a drain expects), while each instance in
#     turn is drained (SIGTERM with shutdown_drain = 1) and started again:
#     0 failed transactions, and every restarted instance serves again;
#   - cancels sent through HAProxy for queries running on every instance,
#     none of which has [peers]: by protocol 3.0 clients (psql's SIGINT),
#     which the instance a cancel lands on sends to every instance the
#     fleet's DNS name resolves to (peers_dns; dnsmasq on the bridge plays
#     the headless Service); and by protocol 3.2 clients (a client written
#     here: libpq 15 speaks 3.0 only), whose long keys name their instance
#     and are signed with the fleet's cancel_key_secret: all land.
#
# Needs root (network namespaces), haproxy, iproute2, dnsmasq, PostgreSQL
# 15's binaries (scripts/deps.sh mode fleet). About 1.5 minutes.
# FLEET_SECONDS (default 45) is pgbench's run. PGV_KEEP_TMP=1 keeps the
# work directory. PGV_BINARY picks the pgvalve binary (default: build/'s,
# else build-dev/'s).
# Exit: 0 passed, 1 a check failed, 2 setup failed, 77 not root.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=scripts/deps.sh
. "$root/scripts/deps.sh"
check_prefix=test/fleet
# shellcheck source=test/checks.sh
. "$root/test/checks.sh"

if [ "$(id -u)" -ne 0 ]; then
	echo "test/fleet: SKIP: needs root (network namespaces)"
	exit 77
fi
pgv_deps_ensure fleet || exit 2
binary=$(pick_pgvalve_binary "$root") || exit 2
py=/usr/bin/python3

started=$(date +%s)
seconds=${FLEET_SECONDS:-45}
work=$(mktemp -d "${TMPDIR:-/tmp}/pgvfleet.XXXXXX")
chmod 0755 "$work"
tag=$$
instances=(1 2 3)
pg_data="$work/pg/data"
pg_port=$(pgv_free_port 24500)
lb_port=$(pgv_free_port $((pg_port + 1)))
declare -A pgv_pid=()
haproxy_pid="" dns_pid=""
dns_port=$(pgv_free_port $((lb_port + 1)))

ns() { echo "pgvf$tag-$1"; }

# A run killed without its trap (SIGKILL, the end of a machine's session)
# leaves its namespaces, veths and bridge behind, named after its PID. The
# bridge keeps its address and its route, and a later run on the same /24
# would have its packets routed into the dead run's pods (HAProxy's checks
# then get "Connection refused"). Remove what belongs to PIDs that are gone.
sweep_dead_runs() {
	local n l t
	for n in $(ip netns list | awk '$1 ~ /^pgvf[0-9]+-[0-9]+$/ {print $1}'); do
		t=${n#pgvf}; t=${t%-*}
		kill -0 "$t" 2>/dev/null || ip netns del "$n" 2>/dev/null || true
	done
	for l in $(ip -o link show | awk -F': ' '{sub(/@.*/, "", $2); print $2}' | grep -E '^pf(b|[0-9]+h)[0-9]+$'); do
		t=${l##*[bh]}
		kill -0 "$t" 2>/dev/null || ip link del "$l" 2>/dev/null || true
	done
}
# The pods' /24: a 10.213.X.0/24 with no route in this namespace, searched
# from X = the tag to spread concurrent runs, so that neither another run
# nor leftovers the sweep may not remove (their PID reused) share it.
pick_subnet() {
	local k x
	for k in $(seq 0 254); do
		x=$(((tag + k) % 255))
		[ -z "$(ip -4 route show root "10.213.$x.0/24")" ] && { echo "10.213.$x"; return 0; }
	done
	return 1
}
sweep_dead_runs
net=$(pick_subnet) || setup_failed "no free 10.213.X.0/24"
addr() { echo "$net.$((10 + $1))"; }

cleanup() {
	local p
	for p in "${pgv_pid[@]}" $haproxy_pid $dns_pid; do
		kill -KILL "$p" 2>/dev/null && wait "$p" 2>/dev/null || true
	done
	for i in "${instances[@]}"; do
		ip netns del "$(ns "$i")" 2>/dev/null || true
		ip link del "pf${i}h$tag" 2>/dev/null || true
	done
	ip link del "pfb$tag" 2>/dev/null || true
	pgv_pg_stop "$pg_data" pgvtest >/dev/null 2>&1 || true
	pgv_kill_matching "$work/" || true
	keep_or_remove "$work"
}
trap cleanup EXIT


# ---------------------------------------------------------------- PostgreSQL
pgv_ensure_user pgvtest
mkdir -p "$work/pg" && chown pgvtest: "$work/pg"
pgv_pg_init "$pg_data" pgvtest "$pg_port" "$work/pg" pgvadmin >/dev/null || setup_failed initdb
cat >"$pg_data/pg_hba.conf" <<'EOF'
local all all trust
EOF
echo "max_connections = 200" >>"$pg_data/postgresql.conf"
pgv_pg_start "$pg_data" pgvtest "$work/pg/postgresql.log" || setup_failed "PostgreSQL start"
psql_admin() { "$PGBIN/psql" -X -q -t -A -h "$work/pg" -p "$pg_port" -U pgvadmin "$@"; }
psql_admin -d postgres -c "CREATE ROLE app LOGIN PASSWORD 'app_pass'" -c "CREATE DATABASE appdb OWNER app" \
	>/dev/null || setup_failed "creating the role"
"$PGBIN/pgbench" -i -q -s 1 -h "$work/pg" -p "$pg_port" -U app appdb >"$work/pgbench-init.log" 2>&1 ||
	setup_failed "pgbench -i"

# ---------------------------------------------------------------- the pods' network
# A bridge in this namespace ($net.1, where HAProxy talks from) and one
# veth per pod on it: the pods reach each other on one link, as on a
# cluster network, with no forwarding in this namespace.
bridge="pfb$tag"
ip link add "$bridge" type bridge || setup_failed "bridge"
ip addr add "$net.1/24" dev "$bridge"
ip link set "$bridge" up
for i in "${instances[@]}"; do
	n=$(ns "$i")
	ip netns add "$n" || setup_failed "ip netns add"
	ip link add "pf${i}h$tag" type veth peer name "pf${i}n$tag" || setup_failed "veth"
	ip link set "pf${i}n$tag" netns "$n"
	ip link set "pf${i}h$tag" master "$bridge"
	ip link set "pf${i}h$tag" up
	ip -n "$n" addr add "$(addr "$i")/24" dev "pf${i}n$tag"
	ip -n "$n" link set "pf${i}n$tag" up
	ip -n "$n" link set lo up
done

# The fleet's DNS name, as a Kubernetes headless Service: every pod's address.
: >"$work/hosts"
for i in "${instances[@]}"; do echo "$(addr "$i") fleet.pgv.test" >>"$work/hosts"; done
dnsmasq --keep-in-foreground --port="$dns_port" --listen-address="$net.1" --bind-interfaces --no-resolv \
	--no-hosts --addn-hosts="$work/hosts" --local-ttl=1 --auth-server="ns.pgv.test,$net.1" \
	--auth-zone=pgv.test --auth-ttl=1 --pid-file="$work/dnsmasq.pid" >"$work/dnsmasq.log" 2>&1 &
dns_pid=$!
echo "nameserver $net.1:$dns_port" >"$work/resolv.conf"
chmod 0644 "$work/resolv.conf" "$work/hosts"

# ---------------------------------------------------------------- the instances
echo '"app" "app_pass"' >"$work/userlist.txt"
chmod 0644 "$work/userlist.txt"
write_ini() { # write_ini N
	local i=$1 j
	mkdir -p "$work/i$i"
	chown pgvtest: "$work/i$i"
	{
		echo "[databases]"
		echo "appdb = host=$work/pg port=$pg_port"
		echo "[pgbouncer]"
		echo "listen_addr = $(addr "$i")"
		echo "listen_port = 6432"
		echo "unix_socket_dir = $work/i$i"
		echo "auth_type = md5"
		echo "auth_file = $work/userlist.txt"
		echo "pool_mode = transaction"
		echo "default_pool_size = 10"
		echo "logfile = $work/i$i/pgvalve.log"
		echo "metrics_listen_addr = $(addr "$i")"
		echo "metrics_port = 9127"
		echo "shutdown_drain = 1"
		echo "drain_timeout = 20"
		echo "verbose = 1"	# the cancel forwards are DEBUG lines
		# no [peers]: 3.0 cancels go by the fleet's DNS name, 3.2 ones by the address in their key
		echo "peers_dns = fleet.pgv.test"
		echo "resolv_conf = $work/resolv.conf"
		echo "dns_max_ttl = 1"
		echo "cancel_key_secret = fleet-secret-$tag"
	} >"$work/i$i/pgvalve.ini"
}
start_instance() { # start_instance N
	local i=$1
	ip netns exec "$(ns "$i")" "$binary" -u pgvtest "$work/i$i/pgvalve.ini" \
		>>"$work/i$i/stderr.log" 2>&1 &
	pgv_pid[$i]=$!
}
ready() { # ready N: its /ready is 200
	[ "$(ip netns exec "$(ns "$1")" python3 - "$(addr "$1")" <<'EOF'
import http.client, sys
try:
    c = http.client.HTTPConnection(sys.argv[1], 9127, timeout=2)
    c.request("GET", "/ready")
    print(c.getresponse().status)
except OSError:
    print(0)
EOF
)" = 200 ]
}
for i in "${instances[@]}"; do
	write_ini "$i"
	start_instance "$i"
done
# a process start and its first server login: a second at most; 10 s on a loaded 2-core machine
for i in "${instances[@]}"; do
	wait_for 10 ready "$i" || { cat "$work/i$i/stderr.log" "$work/i$i/pgvalve.log"; setup_failed "instance $i not ready"; }
done

# ---------------------------------------------------------------- HAProxy
cat >"$work/haproxy.cfg" <<EOF
global
	maxconn 2000
defaults
	mode tcp
	timeout connect 2s
	timeout client 120s
	timeout server 120s
	timeout check 1s
	retries 3
	option redispatch
listen pgvalve
	bind 127.0.0.1:$lb_port
	balance roundrobin
	option httpchk GET /ready
	default-server inter 300ms fall 1 rise 2
EOF
for i in "${instances[@]}"; do
	echo "	server pgv$i $(addr "$i"):6432 check port 9127" >>"$work/haproxy.cfg"
done
haproxy -f "$work/haproxy.cfg" -db >"$work/haproxy.log" 2>&1 &
haproxy_pid=$!
lb_psql() { PGPASSWORD=app_pass "$PGBIN/psql" -X -q -t -A -h 127.0.0.1 -p "$lb_port" -U app -d appdb "$@"; }
wait_for 10 bash -c "$(declare -f lb_psql); PGBIN='$PGBIN' lb_port=$lb_port lb_psql -c 'SELECT 1' >/dev/null 2>&1" ||
	{ cat "$work/haproxy.log"; setup_failed "no query through HAProxy"; }
# margin: HAProxy takes its servers as up from the start; a second is three rounds of health checks (inter 300 ms)
sleep 1

# ---------------------------------------------------------------- cancels through HAProxy
# Each query lands on the next instance (round-robin), each cancel on the
# one after it: a cancel reaches its owner only by way of [peers].
cancel_one() { # cancel_one K: a pg_sleep through HAProxy, SIGINT to psql once it runs; true if it was cancelled
	local out="$work/cancel-$1.out" p running=0
	PGPASSWORD=app_pass "$PGBIN/psql" -X -q -h 127.0.0.1 -p "$lb_port" -U app -d appdb \
		-c "SELECT pg_sleep(20), $1" >"$out" 2>&1 &
	p=$!
	# Until its query runs: a SIGINT before that ends psql instead of
	# cancelling. A psql start and two logins (pgvalve's and PostgreSQL's):
	# well under a second, which a fixed 1 s sleep assumed; 10 s on a loaded
	# machine. The K in the query tells this one from a previous one still
	# running after its psql was killed.
	local ran_by=$((SECONDS + 10))
	while [ "$SECONDS" -lt "$ran_by" ]; do
		running=$(psql_admin -d postgres -c "SELECT count(*) FROM pg_stat_activity
			WHERE query = 'SELECT pg_sleep(20), $1' AND state = 'active'" 2>/dev/null || echo 0)
		[ "$running" -ge 1 ] 2>/dev/null && break
		sleep 0.1
	done
	kill -INT "$p"
	# the cancel is a forward and a postmaster fork: milliseconds; 5 s on a loaded machine
	local deadline=$((SECONDS + 5))
	while kill -0 "$p" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.1; done
	kill -KILL "$p" 2>/dev/null || true
	wait "$p" 2>/dev/null || true
	grep -q "canceling statement due to user request" "$out"
}
logged() { # logged TEXT: lines with TEXT in the instances' logs, all together
	cat "$work"/i*/pgvalve.log | grep -c "$1" || true
}
forwards_before=$(logged "sent cancel request to peer")
landed=0
for k in 1 2 3 4 5 6; do
	if cancel_one "$k"; then landed=$((landed + 1)); fi
done
check "6 of 6 protocol 3.0 cancels through HAProxy landed (peers_dns, no [peers]; $landed landed)" [ "$landed" -eq 6 ]
forwards=$(($(logged "sent cancel request to peer") - forwards_before))
check "they went by the fleet's DNS name ($forwards forwards logged)" [ "$forwards" -ge 6 ]

# Protocol 3.2: a client written here (md5 login over a 3.2 startup), its
# query and its CancelRequest both through HAProxy, so on two instances.
cat >"$work/cancel32.py" <<'EOF'
import hashlib, socket, struct, sys, time

host, port = sys.argv[1], int(sys.argv[2])

def msg(kind, body=b""):
    return kind + struct.pack("!I", len(body) + 4) + body

def read_msg(sock):
    head = b""
    while len(head) < 5:
        chunk = sock.recv(5 - len(head))
        if not chunk:
            raise EOFError("closed")
        head += chunk
    n = struct.unpack("!I", head[1:5])[0] - 4
    body = b""
    while len(body) < n:
        chunk = sock.recv(n - len(body))
        if not chunk:
            raise EOFError("closed")
        body += chunk
    return head[:1], body

s = socket.create_connection((host, port), timeout=30)
params = b"user\0app\0database\0appdb\0\0"
body = struct.pack("!I", (3 << 16) | 2) + params
s.sendall(struct.pack("!I", len(body) + 4) + body)
pid = key = None
while True:
    t, b = read_msg(s)
    if t == b"R" and struct.unpack("!I", b[:4])[0] == 5:
        inner = hashlib.md5(b"app_pass" + b"app").hexdigest().encode()
        s.sendall(msg(b"p", b"md5" + hashlib.md5(inner + b[4:8]).hexdigest().encode() + b"\0"))
    elif t == b"v":
        print("negotiated-down"); sys.exit(1)
    elif t == b"K":
        pid, key = struct.unpack("!I", b[:4])[0], b[4:]
    elif t == b"E":
        print("login error", b); sys.exit(1)
    elif t == b"Z":
        break
if key is None or len(key) <= 4:
    print("no long key (%r)" % (key,)); sys.exit(1)
s.sendall(msg(b"Q", b"SELECT pg_sleep(20)\0"))
time.sleep(1)
c = socket.create_connection((host, port), timeout=10)
req = struct.pack("!I", 80877102) + struct.pack("!I", pid) + key
c.sendall(struct.pack("!I", len(req) + 4) + req)
c.close()
start = time.time()
while True:
    t, b = read_msg(s)
    if t == b"E":
        code = [f[1:].decode() for f in b.split(b"\0") if f[:1] == b"C"]
        print("cancelled" if code == ["57014"] else "error %s" % code, "key %d bytes, %.1f s" % (len(key), time.time() - start))
        sys.exit(0 if code == ["57014"] else 1)
    if t == b"Z":
        print("not cancelled"); sys.exit(1)
EOF
by_key_before=$(logged "sent cancel request to peer 0 (0: by key address)")
landed32=0
for k in 1 2 3 4 5 6; do
	if out=$("$py" "$work/cancel32.py" 127.0.0.1 "$lb_port" 2>&1); then
		landed32=$((landed32 + 1))
	fi
	echo "test/fleet:   3.2 client $k: $out"
done
check "6 of 6 protocol 3.2 cancels through HAProxy landed (signed long keys, no [peers]; $landed32 landed)" \
	[ "$landed32" -eq 6 ]
by_key=$(($(logged "sent cancel request to peer 0 (0: by key address)") - by_key_before))
check "they went to the address in their key ($by_key forwards logged)" [ "$by_key" -ge 6 ]

# ---------------------------------------------------------------- rolling drain under pgbench
# HAProxy sends new connections to a drained instance until its next
# health check (300 ms here) sees /ready fail, so connections reach it as
# it closes its listeners. pgvalve keeps accepting for 200 ms with
# TCP_DEFER_ACCEPT off and holds its exit for a client whose startup
# packet is still on its way (test_drain's
# drain_takes_in_a_connection_held_for_its_first_bytes and
# drain_waits_for_a_startup_packet_on_its_way); before, one such
# connection now and then, completed by the kernel but not yet accepted,
# was reset and its pgbench client aborted with "server closed the
# connection unexpectedly". What is left is the kernel's: a handshake that
# completes in the microseconds between the last accept() and close() is
# reset (PgBouncer's too), rare enough that 0 failures is still the bar.
PGPASSWORD=app_pass "$PGBIN/pgbench" -n -C -c 8 -j 2 -T "$seconds" -h 127.0.0.1 -p "$lb_port" -U app appdb \
	>"$work/pgbench.log" 2>&1 &
bench=$!
sleep 5	# pacing: pgbench runs on all three instances before the first drain
restarted_ok=0
for i in "${instances[@]}"; do
	echo "test/fleet: draining instance $i"
	kill -TERM "${pgv_pid[$i]}"
	# drain_timeout (20 s) bounds the drain; 5 s more to exit
	if wait_for 25 bash -c "! kill -0 ${pgv_pid[$i]} 2>/dev/null"; then
		wait "${pgv_pid[$i]}" 2>/dev/null || true
	else
		echo "test/fleet: instance $i still running 25 s after SIGTERM" >&2
	fi
	# counted once the drained process is gone: its own last logins (it accepts for 200 ms) are not the new one's
	before=$(grep -c "login attempt" "$work/i$i/pgvalve.log" || true)
	start_instance "$i"
	# a process start and a login: a second at most; 10 s on a loaded machine
	wait_for 10 ready "$i" || echo "test/fleet: instance $i not ready after its restart" >&2
	# Served again: HAProxy sends it connections once two health checks pass
	# (rise 2, inter 300 ms), and pgbench -C opens hundreds a second. The
	# bound, 10 s, is over ten times that, for a loaded machine; it used to
	# be a fixed 3 s sleep before counting.
	if wait_for 10 bash -c "[ \$(grep -c 'login attempt' '$work/i$i/pgvalve.log') -gt $before ]"; then
		restarted_ok=$((restarted_ok + 1))
	fi
	# pacing, no bound: pgbench runs on all three instances for a while between drains
	sleep 2
done
bench_status=0
wait "$bench" || bench_status=$?
sed 's/^/test\/fleet:   pgbench: /' "$work/pgbench.log" | grep -E "processed|failed|aborted|tps|error" || true
check "pgbench exited 0 (no client aborted)" [ "$bench_status" -eq 0 ]
check "0 failed transactions" grep -q "number of failed transactions: 0 " "$work/pgbench.log"
processed=$(awk -F': ' '/number of transactions actually processed/ { split($2, a, "/"); print a[1] }' "$work/pgbench.log")
check "transactions went through ($processed)" [ "${processed:-0}" -gt 100 ]
check "every instance drained, restarted and served again ($restarted_ok of 3)" [ "$restarted_ok" -eq 3 ]
for i in "${instances[@]}"; do
	# (said once: a sweep and a leaving client in one loop turn used to log it twice)
	check "instance $i drained on SIGTERM and exited after its last client" \
		bash -c "grep -q 'draining, each client is closed at its next transaction boundary' '$work/i$i/pgvalve.log' &&
			[ \$(grep -c 'drain: the last client has left' '$work/i$i/pgvalve.log') -eq 1 ]"
done

echo "test/fleet: $failures failed, $(($(date +%s) - started)) s"
[ "$failures" -eq 0 ]
