#!/usr/bin/env bash
#
# scripts/quickstart.sh - try pgvalve in one command.
#
# Installs what is missing (as root, with apt-get), builds pgvalve in build/,
# starts a throwaway PostgreSQL 15 cluster with a database and user "app",
# writes a pgvalve.ini for it and runs pgvalve in the foreground on
# 127.0.0.1:6432 (PGVALVE_PORT to change it). Ctrl-C (or SIGTERM) stops
# pgvalve and PostgreSQL and removes every file this made.
#
#   ./scripts/quickstart.sh [PGVALVE OPTIONS]     e.g. -v for debug logging
#
# As root, PostgreSQL and pgvalve run as the system user "pgvalve" (created
# if missing): PostgreSQL refuses to run as root.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
# shellcheck source=scripts/deps.sh
. "$root/scripts/deps.sh"

listen_port=${PGVALVE_PORT:-6432}

pgv_deps_ensure quickstart || exit 2
# A build/ that scripts/test.sh configured (with sanitizers) serves as it is:
# reconfiguring would wipe it, and the next test.sh would wipe this one.
if [ -f "$root/build/config.status" ]; then
	make -C "$root/build" -j2 src/pgvalve || exit 2
else
	pgv_build "$root/build" || exit 2
fi
binary="$root/build/src/pgvalve"

runas=
if [ "$(id -u)" -eq 0 ]; then
	runas=pgvalve
	pgv_ensure_user "$runas" || { echo "quickstart: cannot create system user $runas" >&2; exit 2; }
fi
if [ "$(pgv_free_port "$listen_port")" != "$listen_port" ]; then
	echo "quickstart: port $listen_port is in use; pick another with PGVALVE_PORT=..." >&2
	exit 2
fi

tmp=
pgvalve_pid=
# shellcheck disable=SC2317 # called by the traps below
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	set +e
	if [ -n "$pgvalve_pid" ] && pgv_alive "$pgvalve_pid"; then
		echo "quickstart: stopping pgvalve"
		# SIGQUIT: immediate shutdown (SIGTERM would wait for connected clients)
		kill -QUIT "$pgvalve_pid" 2>/dev/null
		pgv_kill_pids "$pgvalve_pid"
	fi
	if [ -n "$tmp" ] && [ -d "$tmp" ]; then
		echo "quickstart: stopping PostgreSQL and removing $tmp"
		pgv_pg_stop "$tmp/pgdata" "$runas"
		pgv_kill_matching "$tmp/"
		rm -rf "$tmp"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

tmp=$(mktemp -d /tmp/pgvalve-quickstart.XXXXXX)
chmod 755 "$tmp"
[ -z "$runas" ] || chown "$runas:" "$tmp"

pgport=$(pgv_free_port 25432)
pgv_pg_init "$tmp/pgdata" "$runas" "$pgport" "$tmp" postgres
cat >"$tmp/pgdata/pg_hba.conf" <<'EOF'
local   all   all                 trust
host    all   all   127.0.0.1/32  scram-sha-256
EOF
pgv_pg_start "$tmp/pgdata" "$runas" "$tmp/postgresql.log"

password=$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')
"$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$tmp" -p "$pgport" -U postgres -d postgres >/dev/null <<EOF
CREATE ROLE app LOGIN PASSWORD '$password';
CREATE DATABASE app OWNER app;
EOF

cat >"$tmp/userlist.txt" <<EOF
"app" "$password"
EOF
chmod 600 "$tmp/userlist.txt"
cat >"$tmp/pgvalve.ini" <<EOF
; written by scripts/quickstart.sh; see etc/pgvalve.ini for every knob
[databases]
app = host=127.0.0.1 port=$pgport dbname=app

[pgvalve]
listen_addr = 127.0.0.1
listen_port = $listen_port
unix_socket_dir = $tmp
auth_type = md5
auth_file = $tmp/userlist.txt
admin_users = app
stats_users = app
pool_mode = session
default_pool_size = 10
max_client_conn = 100
pidfile = $tmp/pgvalve.pid
EOF
[ -z "$runas" ] || chown "$runas:" "$tmp/userlist.txt" "$tmp/pgvalve.ini"

cat <<EOF

  PostgreSQL 15   127.0.0.1:$pgport (throwaway cluster in $tmp)
  pgvalve         127.0.0.1:$listen_port, config $tmp/pgvalve.ini

  Try it from another terminal:
    psql "host=127.0.0.1 port=$listen_port dbname=app user=app password=$password"

  Admin console (SHOW POOLS, SHOW STATS, SHOW HELP, ...):
    psql "host=127.0.0.1 port=$listen_port dbname=pgbouncer user=app password=$password" -c 'SHOW POOLS'

  Ctrl-C stops pgvalve and PostgreSQL and removes $tmp.

EOF

# In the background and waited for, so that Ctrl-C and SIGTERM reach this
# script's trap at once; pgvalve logs to this terminal.
"$binary" ${runas:+-u "$runas"} "$@" "$tmp/pgvalve.ini" </dev/null &
pgvalve_pid=$!
status=0
wait "$pgvalve_pid" || status=$?
pgvalve_pid=
echo "quickstart: pgvalve exited with status $status"
exit "$status"
