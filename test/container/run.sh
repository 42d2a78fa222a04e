#!/usr/bin/env bash
#
# test/container/run.sh - the container image (Containerfile), built and
# run the way an operator would, on a machine without a registry:
#
#   1. a Debian 12 base image from debootstrap (minbase), imported under
#      the name the Containerfile builds on (docker.io/library/debian:
#      bookworm-slim), in a container storage of this run's own;
#   2. `buildah bud` of the Containerfile (the build stage fetches its
#      compilers with apt, so the host's Debian mirror must be reachable);
#   3. the image's contract: a non-root user, STOPSIGNAL SIGTERM, ports
#      6432 and 9127, /usr/bin/pgbouncer being pgvalve, no compiler left;
#   4. a run: a throwaway PostgreSQL on the host, the container on the
#      host's network with a config directory mounted at /etc/pgvalve, psql
#      through it, /ready and /live, `pkill -HUP --exact pgbouncer` inside
#      the container started as /usr/bin/pgbouncer (as CloudNativePG and
#      PGO do) reloading it, and `podman stop` draining a client that is
#      inside a transaction: its COMMIT goes through, then it is closed.
#
# Needs root (podman with runc and cgroupfs; no registry, no rootless
# setup), buildah, podman, runc, debootstrap (scripts/deps.sh mode
# container installs them). Takes about 5 minutes on 2 cores, most of it
# debootstrap and the image's compile; PGV_CONTAINER_BASE_TAR=FILE keeps
# the base image's tarball there and reuses it next time.
# PGV_KEEP_TMP=1 keeps the work directory (and its container storage).
# Exit: 0 passed, 1 a check failed, 2 setup failed, 77 not root.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=scripts/deps.sh
. "$root/scripts/deps.sh"
check_prefix=test/container
# shellcheck source=test/checks.sh
. "$root/test/checks.sh"

if [ "$(id -u)" -ne 0 ]; then
	echo "test/container: SKIP: needs root (podman with runc and cgroupfs)"
	exit 77
fi
pgv_deps_ensure container || exit 2

started=$(date +%s)
work=$(mktemp -d "${TMPDIR:-/tmp}/pgvctr.XXXXXX")
chmod 0755 "$work"
name="pgvalve-test-$$"
image="localhost/pgvalve-test:$$"
pg_data="$work/pg/data"
pg_port=$(pgv_free_port 24000)
pgv_port=$(pgv_free_port $((pg_port + 1)))
probe_port=$(pgv_free_port $((pgv_port + 1)))

# The engine's settings for this machine (no registry, a sandbox that may
# refuse rlimits and systemd cgroups), and a storage that is only ours.
cat >"$work/containers.conf" <<'EOF'
[containers]
default_ulimits = []
[engine]
cgroup_manager = "cgroupfs"
runtime = "runc"
events_logger = "file"
EOF
export CONTAINERS_CONF="$work/containers.conf"
storage=(--root "$work/storage" --runroot "$work/run" --storage-driver vfs)
pm() { podman "${storage[@]}" "$@"; }
ba() { buildah "${storage[@]}" "$@"; }

cleanup() {
	pm rm -f -t 2 "$name" >/dev/null 2>&1 || true
	pgv_pg_stop "$pg_data" pgvtest >/dev/null 2>&1 || true
	if [ "${PGV_KEEP_TMP:-0}" = 1 ]; then
		echo "test/container: kept $work"
	else
		pm rmi -a -f >/dev/null 2>&1 || true
		# vfs layers are plain directories; nothing stays mounted after rmi
		rm -rf "$work"
	fi
}
trap cleanup EXIT


# ---------------------------------------------------------------- 1. the base image
base_tar=${PGV_CONTAINER_BASE_TAR:-$work/base.tar}
if [ ! -s "$base_tar" ]; then
	echo "test/container: debootstrap (Debian 12 minbase)"
	debootstrap --variant=minbase bookworm "$work/rootfs" http://deb.debian.org/debian \
		>"$work/debootstrap.log" 2>&1 || { tail -20 "$work/debootstrap.log"; setup_failed debootstrap; }
	rm -rf "$work/rootfs/var/cache/apt/archives/"*.deb "$work/rootfs/var/lib/apt/lists/"*
	tar -C "$work/rootfs" -cf "$base_tar.part" . && mv "$base_tar.part" "$base_tar"
	rm -rf "$work/rootfs"
fi
pm import "$base_tar" docker.io/library/debian:bookworm-slim >/dev/null || setup_failed "podman import"

# ---------------------------------------------------------------- 2. the build
echo "test/container: buildah bud"
if ! ba bud --network host --pull-never --layers=false -t "$image" -f "$root/Containerfile" "$root" \
	>"$work/build.log" 2>&1; then
	tail -40 "$work/build.log"
	setup_failed "buildah bud"
fi

# ---------------------------------------------------------------- 3. the image's contract
inspect() { pm image inspect --format "$1" "$image"; }
check "runs as user pgvalve, not root" [ "$(inspect '{{.Config.User}}')" = pgvalve ]
check "STOPSIGNAL SIGTERM (the drain)" [ "$(inspect '{{.Config.StopSignal}}')" = SIGTERM ]
ports=$(inspect '{{range $p, $v := .Config.ExposedPorts}}{{$p}} {{end}}')
check "exposes 6432 and 9127 ($ports)" grep -q '6432/tcp.*9127/tcp\|9127/tcp.*6432/tcp' <<<"$ports"
in_image() { pm run --rm --network none --entrypoint /bin/sh "$image" -c "$1"; }
check "/usr/bin/pgbouncer is pgvalve" \
	[ "$(in_image 'readlink -f /usr/bin/pgbouncer; /usr/bin/pgbouncer --version | head -1')" = \
	"$(printf '/usr/bin/pgvalve\n%s' "$(in_image '/usr/bin/pgvalve --version | head -1')")" ]
check "no compiler or headers in the image" in_image '! command -v gcc && [ ! -d /usr/include/event2 ]'
check "pkill is there for the operators' reload" in_image 'command -v pkill >/dev/null'
size=$(inspect '{{.Size}}')
echo "test/container: image size $((size / 1024 / 1024)) MB"

# ---------------------------------------------------------------- 4. a run
pgv_ensure_user pgvtest
mkdir -p "$work/pg" && chown pgvtest: "$work/pg"
pgv_pg_init "$pg_data" pgvtest "$pg_port" "$work/pg" pgvadmin >/dev/null || setup_failed initdb
cat >"$pg_data/pg_hba.conf" <<'EOF'
local all all                trust
host  all all 127.0.0.1/32   scram-sha-256
EOF
pgv_pg_start "$pg_data" pgvtest "$work/pg/postgresql.log" || setup_failed "PostgreSQL start"
"$PGBIN/psql" -X -q -h "$work/pg" -p "$pg_port" -U pgvadmin -d postgres \
	-c "CREATE ROLE app LOGIN PASSWORD 'app_pass'" -c "CREATE DATABASE appdb OWNER app" \
	>/dev/null || setup_failed "creating the role"

mkdir -p "$work/config"
cat >"$work/config/pgvalve.ini" <<EOF
[databases]
appdb = host=127.0.0.1 port=$pg_port
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $pgv_port
unix_socket_dir = /run/pgvalve
auth_type = scram-sha-256
auth_file = /etc/pgvalve/userlist.txt
pool_mode = transaction
admin_users = app
metrics_listen_addr = 127.0.0.1
metrics_port = $probe_port
shutdown_drain = 1
drain_timeout = 20
default_pool_size = 5
EOF
echo '"app" "app_pass"' >"$work/config/userlist.txt"
chmod 0644 "$work/config/"*
# As CloudNativePG and PGO start it: /usr/bin/pgbouncer <ini>.
pm run -d --name "$name" --network host -v "$work/config:/etc/pgvalve:ro" \
	--entrypoint /usr/bin/pgbouncer "$image" /etc/pgvalve/pgvalve.ini >/dev/null ||
	setup_failed "podman run"

psql_app() {
	PGPASSWORD=app_pass "$PGBIN/psql" -X -q -t -A -h 127.0.0.1 -p "$pgv_port" -U app "$@"
}
http_status() { # http_status PATH: the status code of GET PATH on the probe port
	python3 - "$probe_port" "$1" <<'EOF'
import http.client, sys
try:
    c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=5)
    c.request("GET", sys.argv[2])
    print(c.getresponse().status)
except OSError:
    print(0)
EOF
}
for _ in $(seq 100); do
	[ "$(http_status /live)" = 200 ] && break
	sleep 0.1
done
check "/live answers 200" [ "$(http_status /live)" = 200 ]
check "a query through the container" [ "$(psql_app -d appdb -c 'SELECT 40 + 2')" = 42 ]
check "/ready answers 200 once a server logged in" [ "$(http_status /ready)" = 200 ]
check "it runs as pgvalve (uid 999) under the name pgbouncer" \
	[ "$(pm exec "$name" ps -o user=,comm= -C pgbouncer | awk '{ print $1, $2 }')" = "pgvalve pgbouncer" ]

# the operators' reload: change the mounted file, signal by exact name
sed -i 's/^default_pool_size = 5/default_pool_size = 7/' "$work/config/pgvalve.ini"
pm exec "$name" pkill -HUP --exact pgbouncer || true
pool_size=""
for _ in $(seq 50); do
	pool_size=$(psql_app -d pgbouncer -c 'SHOW CONFIG' | awk -F'|' '$1 == "default_pool_size" { print $2 }')
	[ "$pool_size" = 7 ] && break
	sleep 0.1
done
check "pkill -HUP --exact pgbouncer reloaded it (default_pool_size $pool_size)" [ "$pool_size" = 7 ]

# podman stop sends STOPSIGNAL: a client inside a transaction finishes it, then is closed
fifo="$work/client.fifo"
mkfifo "$fifo"
PGPASSWORD=app_pass "$PGBIN/psql" -X -q -t -A -h 127.0.0.1 -p "$pgv_port" -U app -d appdb \
	<"$fifo" >"$work/client.out" 2>&1 &
client=$!
exec 7>"$fifo"
echo "BEGIN; CREATE TABLE IF NOT EXISTS t (v int); INSERT INTO t VALUES (1); SELECT 'in transaction';" >&7
for _ in $(seq 50); do grep -q 'in transaction' "$work/client.out" && break; sleep 0.1; done
pm stop -t 25 "$name" >/dev/null &
stopper=$!
sleep 1
check "/ready is 503 while draining, or the probe port is already closed" \
	grep -q '^\(503\|0\)$' <<<"$(http_status /ready)"
echo "COMMIT;" >&7
sleep 1
echo "SELECT 'after the commit';" >&7
exec 7>&-
wait "$client" || true
wait "$stopper" || true
check "the client was closed after its transaction, not in it" \
	grep -q 'shutting down' "$work/client.out"
grep -v 'in transaction' "$work/client.out" | sed 's/^/test\/container:   client: /'
check "the transaction committed during the drain" \
	[ "$("$PGBIN/psql" -X -q -t -A -h "$work/pg" -p "$pg_port" -U pgvadmin -d appdb -c 'SELECT count(*) FROM t')" = 1 ]
logs=$(pm logs "$name" 2>&1 || true)
check "the container exited by itself, with status 0" \
	[ "$(pm inspect --format '{{.State.Status}} {{.State.ExitCode}}' "$name")" = "exited 0" ]
check "its log says it drained" grep -q 'drain' <<<"$logs"

echo "test/container: $failures failed, $(($(date +%s) - started)) s"
[ "$failures" -eq 0 ]
