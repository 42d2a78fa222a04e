#!/usr/bin/env bash
#
# test/ha/patroni.sh - pgvalve in front of a real Patroni cluster (issue
# 24): one etcd and three PostgreSQL 15 nodes under Patroni on loopback
# addresses 127.0.0.11-13 (one port, as host lists share one), and pgvalve
# with a `target_session_attrs = read-write` database over the three.
#
# While writers insert numbered rows through pgvalve (transaction mode,
# each on a connection it keeps, reconnecting only when pgvalve closes it):
#   1. `patronictl switchover` moves the primary to another node;
#   2. `kill -9` of the (new) primary's postmaster (Patroni restarts it, or
#      fails over if that takes longer than its TTL).
# Then, as issue 24 point 3 asks:
#   - no write reached a standby (no 25006 read-only error ever came back);
#   - every row a writer was told was committed is on the primary at the
#     end (nothing acknowledged was lost);
#   - a client that was idle across the switchover runs its next
#     transaction on the new primary without reconnecting;
# and it prints the write outage pgvalve showed for each event (first
# failed to first successful write after it).
#
# Needs root (PostgreSQL and Patroni run as pgvtest), Debian's patroni and
# etcd-server, PostgreSQL 15 (scripts/deps.sh mode ha). About 2 minutes.
# PGV_BINARY picks pgvalve (default: build/'s, else build-dev/'s).
# PGV_KEEP_TMP=1 keeps the work directory. HA_SECONDS: how long the
# writers run after each event (default 12).
# Exit: 0 passed, 1 a check failed, 2 setup failed, 77 not root.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=scripts/deps.sh
. "$root/scripts/deps.sh"
check_prefix=test/ha
# shellcheck source=test/checks.sh
. "$root/test/checks.sh"

if [ "$(id -u)" -ne 0 ]; then
	echo "test/ha: SKIP: needs root (PostgreSQL and Patroni run as user pgvtest)"
	exit 77
fi
pgv_deps_ensure ha || exit 2
binary=$(pick_pgvalve_binary "$root") || exit 2
# Debian's python with Debian's psycopg2 (patroni's own dependency), whatever python3 PATH finds first.
py=/usr/bin/python3

started=$(date +%s)
settle=${HA_SECONDS:-12}
work=$(mktemp -d "${TMPDIR:-/tmp}/pgvha.XXXXXX")
chmod 0755 "$work"
pgv_ensure_user pgvtest
chown pgvtest: "$work"
nodes=(1 2 3)
pg_port=$(pgv_free_port 25500)
etcd_port=$(pgv_free_port $((pg_port + 1)))
etcd_peer=$(pgv_free_port $((etcd_port + 1)))
pgv_port=$(pgv_free_port $((etcd_peer + 1)))
rest_base=$(pgv_free_port 8100)
declare -A patroni_pid=()
etcd_pid="" pgvalve_pid="" writer_pid=""

node_addr() { echo "127.0.0.$((10 + $1))"; }

cleanup() {
	local p
	[ -n "$writer_pid" ] && kill -KILL "$writer_pid" 2>/dev/null || true
	[ -n "$pgvalve_pid" ] && kill -KILL "$pgvalve_pid" 2>/dev/null || true
	# Patroni stops its PostgreSQL on SIGTERM; what is left is ended by path below
	for p in "${patroni_pid[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${patroni_pid[@]}"; do
		# Patroni stops PostgreSQL (fast) and exits: seconds; 10 s, then SIGKILL
		for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$p" 2>/dev/null || true
	done
	[ -n "$etcd_pid" ] && kill -KILL "$etcd_pid" 2>/dev/null || true
	pgv_kill_matching "$work/" || true
	wait 2>/dev/null || true
	keep_or_remove "$work"
}
trap cleanup EXIT


# ---------------------------------------------------------------- etcd
runuser -u pgvtest -- etcd --name e1 --data-dir "$work/etcd" \
	--listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
	--listen-peer-urls "http://127.0.0.1:$etcd_peer" --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer" \
	--initial-cluster "e1=http://127.0.0.1:$etcd_peer" --log-level warn >"$work/etcd.log" 2>&1 &
etcd_pid=$!
# etcd starts in a second or two; 20 s on a loaded machine
wait_for 20 $py -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$etcd_port/health', timeout=2)" || {
	tail "$work/etcd.log"
	setup_failed "etcd"
}

# ---------------------------------------------------------------- Patroni
patroni_yml() { # patroni_yml N
	local n=$1 a
	a=$(node_addr "$n")
	cat <<EOF
scope: pgvha$$
name: pg$n
restapi:
  listen: 127.0.0.1:$((rest_base + n))
  connect_address: 127.0.0.1:$((rest_base + n))
etcd3:
  hosts: 127.0.0.1:$etcd_port
bootstrap:
  dcs:
    ttl: 20
    loop_wait: 2
    retry_timeout: 5
    maximum_lag_on_failover: 10485760
    postgresql:
      use_pg_rewind: true
      parameters:
        wal_level: replica
        hot_standby: "on"
        max_connections: 100
        wal_log_hints: "on"
  initdb:
    - encoding: UTF8
    - locale: C
postgresql:
  listen: $a:$pg_port
  connect_address: $a:$pg_port
  data_dir: $work/pg$n
  bin_dir: $PGBIN
  pgpass: $work/pgpass$n
  authentication:
    superuser: { username: postgres, password: super_pass }
    replication: { username: repl, password: repl_pass }
    rewind: { username: postgres, password: super_pass }
  parameters:
    unix_socket_directories: $work/sock$n
  pg_hba:
    - local all all trust
    - host replication repl 127.0.0.0/8 scram-sha-256
    - host all all 127.0.0.0/8 scram-sha-256
tags: { nofailover: false, noloadbalance: false, clonefrom: false, nosync: false }
EOF
}
for n in "${nodes[@]}"; do
	mkdir -p "$work/sock$n"
	chown pgvtest: "$work/sock$n"
	patroni_yml "$n" >"$work/patroni$n.yml"
	chmod 0644 "$work/patroni$n.yml"
done
start_patroni() { # start_patroni N
	(cd "$work" && exec runuser -u pgvtest -- patroni "$work/patroni$1.yml") >>"$work/patroni$1.log" 2>&1 &
	patroni_pid[$1]=$!
}
start_patroni 1
# pacing: node 1 takes the leader key and bootstraps first; a later start of the
# others is harmless (they wait for a leader to clone from)
sleep 3
start_patroni 2
start_patroni 3
patronictl_() { patronictl -c "$work/patroni1.yml" "$@"; }
leader() { patronictl_ list -f json 2>/dev/null | $py -c '
import json, sys
for m in json.load(sys.stdin):
    if m.get("Role") == "Leader" and m.get("State") == "running":
        print(m["Member"])'; }
streaming_replicas() { patronictl_ list -f json 2>/dev/null | $py -c '
import json, sys
print(sum(1 for m in json.load(sys.stdin) if m.get("Role") in ("Replica", "Sync Standby") and m.get("State") in ("running", "streaming")))'; }
# an initdb, a bootstrap and two base backups: under a minute on a loaded
# 2-core machine; 90 s each
wait_for 90 bash -c "[ -n \"\$($(declare -f patronictl_ leader); py=$py work=$work leader)\" ]" || {
	tail -20 "$work/patroni1.log"
	setup_failed "no Patroni leader"
}
wait_for 90 bash -c "[ \"\$($(declare -f patronictl_ streaming_replicas); py=$py work=$work streaming_replicas)\" = 2 ]" || {
	patronictl_ list || true
	tail -20 "$work/patroni2.log"
	setup_failed "replicas not streaming"
}
first=$(leader)
echo "test/ha: Patroni cluster up, leader $first ($(($(date +%s) - started)) s)"
lead_n=${first#pg}
PGPASSWORD=super_pass "$PGBIN/psql" -X -q -h "$(node_addr "$lead_n")" -p "$pg_port" -U postgres -d postgres \
	-c "CREATE ROLE app LOGIN PASSWORD 'app_pass'" -c "CREATE DATABASE appdb OWNER app" >/dev/null ||
	setup_failed "creating the role"
PGPASSWORD=app_pass "$PGBIN/psql" -X -q -h "$(node_addr "$lead_n")" -p "$pg_port" -U app -d appdb \
	-c "CREATE TABLE w (id bigint PRIMARY KEY, writer int, at timestamptz DEFAULT now())" >/dev/null ||
	setup_failed "creating the table"

# ---------------------------------------------------------------- pgvalve
mkdir -p "$work/pgv"
cat >"$work/pgv/pgvalve.ini" <<EOF
[databases]
appdb = host=$(node_addr 1),$(node_addr 2),$(node_addr 3) port=$pg_port target_session_attrs=read-write
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $pgv_port
unix_socket_dir = $work/pgv
auth_type = scram-sha-256
auth_file = $work/pgv/userlist.txt
pool_mode = transaction
default_pool_size = 8
query_wait_timeout = 60
server_role_check_period = 1
logfile = $work/pgv/pgvalve.log
EOF
echo '"app" "app_pass"' >"$work/pgv/userlist.txt"
chown -R pgvtest: "$work/pgv"
"$binary" -u pgvtest "$work/pgv/pgvalve.ini" >"$work/pgv/stderr.log" 2>&1 &
pgvalve_pid=$!
dsn="host=127.0.0.1 port=$pgv_port dbname=appdb user=app password=app_pass connect_timeout=5"
# a process start and a server login: a second at most; 10 s on a loaded machine
wait_for 10 "$PGBIN/psql" "$dsn" -c "SELECT 1" || { cat "$work/pgv/stderr.log"; setup_failed "pgvalve"; }

# ---------------------------------------------------------------- the writers
# Each writer keeps one connection, inserts (id = writer * 10^9 + n), and
# logs "ok ID T" for every COMMIT acknowledged and "err SQLSTATE T" for a
# failure (reconnecting only when the connection is gone). An idle client
# runs one transaction now and one when told (SIGUSR1) after the switchover.
cat >"$work/writer.py" <<'EOF'
import os, signal, sys, threading, time
import psycopg2

dsn, out_dir, writers = sys.argv[1], sys.argv[2], int(sys.argv[3])
stop = threading.Event()
idle_go = threading.Event()
signal.signal(signal.SIGTERM, lambda *a: stop.set())
signal.signal(signal.SIGUSR1, lambda *a: idle_go.set())

def writer(w):
    log = open(os.path.join(out_dir, "writer%d.log" % w), "w", buffering=1)
    conn, n = None, 0
    while not stop.is_set():
        try:
            if conn is None or conn.closed:
                conn = psycopg2.connect(dsn)
                conn.autocommit = True
            n += 1
            rid = w * 1000000000 + n
            with conn.cursor() as cur:
                cur.execute("INSERT INTO w (id, writer) VALUES (%s, %s)", (rid, w))
            log.write("ok %d %.3f\n" % (rid, time.time()))
        except psycopg2.Error as e:
            log.write("err %s %.3f %s\n" % (e.pgcode or "conn", time.time(), str(e).splitlines()[0] if str(e) else ""))
            if conn is not None and conn.closed:
                conn = None
            time.sleep(0.05)
        time.sleep(0.01)

def idle_client():
    log = open(os.path.join(out_dir, "idle.log"), "w", buffering=1)
    conn = psycopg2.connect(dsn)
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute("SELECT pg_is_in_recovery(), inet_server_addr()")
        log.write("before %s %s\n" % cur.fetchone())
    idle_go.wait()
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT pg_is_in_recovery(), inet_server_addr()")
            log.write("after %s %s\n" % cur.fetchone())
            cur.execute("INSERT INTO w (id, writer) VALUES (%s, 0)", (int(time.time() * 1000),))
            log.write("after-write ok\n")
    except psycopg2.Error as e:
        log.write("after-error %s %s\n" % (e.pgcode or "conn", str(e).splitlines()[0] if str(e) else ""))

threads = [threading.Thread(target=writer, args=(w,)) for w in range(1, writers + 1)]
threads.append(threading.Thread(target=idle_client))
for t in threads:
    t.start()
for t in threads[:-1]:
    t.join()
idle_go.set()
threads[-1].join()
EOF
$py "$work/writer.py" "$dsn" "$work" 4 >"$work/writer.out" 2>&1 &
writer_pid=$!
sleep "$settle"	# pacing: the writers run before the switchover

# ---------------------------------------------------------------- 1. switchover
from=$(leader)
to=""
for n in "${nodes[@]}"; do [ "pg$n" != "$from" ] && { to="pg$n"; break; }; done
echo "test/ha: switchover $from -> $to"
t_switch=$(date +%s.%N)
patronictl_ switchover --leader "$from" --candidate "$to" --force >"$work/switchover.log" 2>&1 ||
	{ cat "$work/switchover.log"; echo "test/ha: switchover command failed" >&2; }
# a switchover is a checkpoint and a promotion, seconds; 60 s on a loaded machine
wait_for 60 bash -c "[ \"\$($(declare -f patronictl_ leader); py=$py work=$work leader)\" = $to ]" ||
	echo "test/ha: $to did not become leader" >&2
sleep "$settle"	# pacing: the writers run on the new leader
kill -USR1 "$writer_pid"
sleep 1	# pacing: the idle client's second transaction, before the kill

# ---------------------------------------------------------------- 2. kill -9 of the primary's postmaster
victim=$(leader)
vn=${victim#pg}
postmaster=$(head -1 "$work/pg$vn/postmaster.pid")
echo "test/ha: kill -9 of $victim's postmaster ($postmaster)"
t_kill=$(date +%s.%N)
kill -KILL "$postmaster"
# pacing: the writers run through Patroni's recovery (a restart or a failover,
# ttl 20 s at most) and after it
sleep "$((settle + 10))"
kill -TERM "$writer_pid"
wait "$writer_pid" || true
writer_pid=""
# The invariants are read on the leader. On a loaded machine the recovery
# may outlast the pacing above: wait for a leader (60 s, as for the
# switchover) rather than read from none.
wait_for 60 bash -c "[ -n \"\$($(declare -f patronictl_ leader); py=$py work=$work leader)\" ]" ||
	echo "test/ha: no leader after the kill" >&2

# ---------------------------------------------------------------- the invariants
final=$(leader)
fn=${final#pg}
cat "$work"/writer*.log | awk '$1 == "ok" { print $2 }' | sort -n >"$work/acked.txt"
PGPASSWORD=app_pass "$PGBIN/psql" -X -q -t -A -h "$(node_addr "$fn")" -p "$pg_port" -U app -d appdb \
	-c "SELECT id FROM w WHERE writer > 0 ORDER BY id" >"$work/present.txt"
acked=$(wc -l <"$work/acked.txt")
lost=$(comm -23 "$work/acked.txt" "$work/present.txt" | wc -l)
readonly_errors=$(cat "$work"/writer*.log | awk '$1 == "err" && $2 == "25006"' | wc -l)
echo "test/ha: $acked writes acknowledged, $(wc -l <"$work/present.txt") rows on the final primary $final"
check "no acknowledged write lost ($lost missing on $final)" [ "$lost" -eq 0 ]
check "no write reached a standby ($readonly_errors read-only errors)" [ "$readonly_errors" -eq 0 ]
check "writes went through before and after both events ($acked)" [ "$acked" -gt 200 ]

# the outage each event caused, as the writers saw it
outage() { # outage T0 T1: the longest time between T0 and T1 in which no writer had a write acknowledged
	cat "$work"/writer*.log | awk '$1 == "ok" { print $3 }' | sort -n | awk -v t0="$1" -v t1="$2" '
		{ if ($1 > t0 && prev < t1) { from = prev > t0 ? prev : t0; if ($1 - from > gap) gap = $1 - from } prev = $1 }
		END { printf "%.2f", gap }'
}
echo "test/ha: longest stretch without an acknowledged write after the switchover: $(outage "$t_switch" "$t_kill") s;" \
	"after kill -9: $(outage "$t_kill" "$(date +%s.%N)") s"
errs=$(cat "$work"/writer*.log | awk '$1 == "err" { print $2 }' | sort | uniq -c | tr '\n' ' ')
echo "test/ha: failed writes by SQLSTATE: ${errs:-none}"
check "writes succeed again after the kill -9" bash -c "[ \"\$(awk '\$1 == \"ok\" && \$3 > $t_kill + 1' $work/writer*.log | wc -l)\" -gt 0 ]"
sed 's/^/test\/ha:   idle client: /' "$work/idle.log"
check "an idle client runs its next transaction on the new primary without reconnecting" \
	grep -q "^after False" "$work/idle.log"
check "... and writes there" grep -q "^after-write ok" "$work/idle.log"
check "pgvalve logged the role changes" grep -q "is now primary" "$work/pgv/pgvalve.log"

echo "test/ha: $failures failed, $(($(date +%s) - started)) s"
[ "$failures" -eq 0 ]
