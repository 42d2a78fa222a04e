#!/usr/bin/env bash
#
# test/integration/roles_cluster.sh - a PostgreSQL primary and two
# streaming replicas for test_roles, on loopback addresses sharing one
# port (pgvalve's host lists share the database's port):
#
#   node1 127.0.0.2 (the primary at first), node2 127.0.0.3, node3 127.0.0.4
#
#   roles_cluster.sh init DIR PORT          primary, pg_basebackup -R replicas, all started
#   roles_cluster.sh start|stop|promote DIR NODE
#   roles_cluster.sh delay|undelay DIR NODE recovery_min_apply_delay 1h / 0 (a lagging replica)
#   roles_cluster.sh stopall DIR            every node of DIR that runs
#
# Everything lives under DIR (each node's data dir, socket dir and log).
# Superuser pgvadmin, trust from 127.0.0.0/8; database postgres holds
# table t (id int primary key). Runs PostgreSQL as PGV_TEST_RUNAS when set
# (root), from PGV_TEST_PGBIN. Stops only what it started, by data dir.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PGBIN=${PGV_TEST_PGBIN:-/usr/lib/postgresql/15/bin}
# shellcheck source=scripts/deps.sh
. "${abs_top_srcdir:-$here/../..}/scripts/deps.sh"
runas=${PGV_TEST_RUNAS:-}

addr_of() { echo "127.0.0.$(($1 + 1))"; }

node_conf() {	# DIR NODE PORT: the node's own address and socket dir
	local data=$1/node$2 sock=$1/sock$2
	mkdir -p "$sock"
	[ -z "$runas" ] || chown "$runas:" "$sock"
	cat >>"$data/postgresql.conf" <<EOF
listen_addresses = '$(addr_of "$2")'
port = $3
unix_socket_directories = '$sock'
EOF
}

init() {
	local dir=$1 port=$2 n
	mkdir -p "$dir"
	[ -z "$runas" ] || chown "$runas:" "$dir"
	pgv_pg_init "$dir/node1" "$runas" "$port" "$dir" pgvadmin
	cat >>"$dir/node1/postgresql.conf" <<EOF
wal_level = replica
max_wal_senders = 10
hot_standby = on
wal_keep_size = 256MB
EOF
	node_conf "$dir" 1 "$port"
	cat >"$dir/node1/pg_hba.conf" <<'EOF'
local   all         all                 trust
local   replication all                 trust
host    all         all   127.0.0.0/8   trust
host    replication all   127.0.0.0/8   trust
EOF
	pgv_pg_start "$dir/node1" "$runas" "$dir/node1.log"
	pgv_as "$runas" "$PGBIN/psql" -X -q -h "$dir/sock1" -p "$port" -U pgvadmin -d postgres \
		-c "CREATE TABLE t (id int PRIMARY KEY)" >/dev/null
	for n in 2 3; do
		(cd "$dir" && pgv_as "$runas" "$PGBIN/pg_basebackup" -h "$(addr_of 1)" -p "$port" -U pgvadmin \
			-D "$dir/node$n" -R -X stream --no-sync >"$dir/node$n.basebackup.log" 2>&1)
		# the primary's own lines come along: the node's own come last and win
		node_conf "$dir" "$n" "$port"
		pgv_pg_start "$dir/node$n" "$runas" "$dir/node$n.log"
	done
}

case ${1:-} in
init) init "$2" "$3" ;;
start) pgv_pg_start "$2/node$3" "$runas" "$2/node$3.log" ;;
stop) pgv_pg_stop "$2/node$3" "$runas" ;;
promote) (cd "$2" && pgv_as "$runas" "$PGBIN/pg_ctl" -D "$2/node$3" -w -t 30 promote >/dev/null) ;;
delay | undelay)
	[ "$1" = delay ] && v="'1h'" || v=0
	echo "recovery_min_apply_delay = $v" >>"$2/node$3/postgresql.conf"
	(cd "$2" && pgv_as "$runas" "$PGBIN/pg_ctl" -D "$2/node$3" reload >/dev/null)
	;;
stopall) for n in 1 2 3; do pgv_pg_stop "$2/node$n" "$runas"; done ;;
*) echo "usage: $0 init DIR PORT | start|stop|promote|delay|undelay DIR NODE | stopall DIR" >&2; exit 2 ;;
esac
