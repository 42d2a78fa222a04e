#!/usr/bin/env bash
#
# test/package/run.sh - the operator's view: builds the .deb (nocheck, the
# suite ran already), lints it, checks the systemd units, installs it,
# runs pgvalve exactly as pgvalve.service's ExecStart would (its user, its
# environment files, its umask, a NOTIFY_SOCKET this script listens on:
# there is no systemd PID 1 here), connects through it with psql to a
# throwaway PostgreSQL, reloads, rotates the log, tries socket activation,
# purges, and builds the RPM from pgvalve.spec.
#
# Needs root (it installs a package); otherwise it says so and exits 77
# (skipped). Takes about 3 minutes on 2 cores, most of it two compiles and
# lintian. PGV_KEEP_TMP=1 keeps the work directory.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=scripts/deps.sh
. "$root/scripts/deps.sh"

if [ "$(id -u)" -ne 0 ]; then
	echo "test/package: SKIP: needs root (installs and purges the pgvalve package)"
	exit 77
fi
# Anything dpkg knows of pgvalve but "not-installed": unpacked, half-configured, config-files.
pkg_present() { dpkg-query -W -f='${Status}\n' pgvalve 2>/dev/null | grep -qv 'not-installed$'; }
if pkg_present; then
	echo "test/package: FAIL: a pgvalve package is installed already; not touching it" >&2
	exit 1
fi
pgv_deps_ensure package || exit 2

started=$(date +%s)
work=$(mktemp -d "${TMPDIR:-/tmp}/pgvpkg.XXXXXX")
chmod 0755 "$work"
failures=0
pids=()
pg_data="$work/pg/data"

stop_pid() { # stop_pid PID [SIGNAL]: a background job of ours, quietly
	{ kill -"${2:-TERM}" "$1" && wait "$1"; } 2>/dev/null || true
}
step() { printf '\n== %s\n' "$*"; }
ok() { printf 'ok   %s\n' "$*"; }
fail() {
	printf 'FAIL %s\n' "$*" >&2
	failures=$((failures + 1))
}
check() { # check DESCRIPTION COMMAND...: ok if the command succeeds
	local what=$1
	shift
	if "$@"; then ok "$what"; else fail "$what"; fi
}

cleanup() {
	local pid
	for pid in "${pids[@]}"; do
		stop_pid "$pid" KILL
	done
	[ -d "$pg_data" ] && pgv_pg_stop "$pg_data" pgvtest
	if pkg_present; then
		apt-get purge -y -q pgvalve >/dev/null 2>&1 || true
	fi
	if [ "${PGV_KEEP_TMP:-}" = 1 ]; then
		echo "test/package: kept $work"
	else
		rm -rf "$work"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------- build
step "one version everywhere"
version=$(sed -n 's/^AC_INIT(\[pgvalve\], \[\([^]]*\)\].*/\1/p' "$root/configure.ac")
deb_version=$(sed -n '1s/^pgvalve (\([^)-]*\).*/\1/p' "$root/debian/changelog")
rpm_version=$(sed -n 's/^Version: *//p' "$root/pgvalve.spec")
check "configure.ac ($version), debian/changelog ($deb_version) and pgvalve.spec ($rpm_version) agree" \
	test -n "$version" -a "$version" = "$deb_version" -a "$version" = "$rpm_version"

step "build the .deb (DEB_BUILD_OPTIONS=nocheck)"
src="$work/src/pgvalve-$version"
mkdir -p "$src"
# What git tracks plus new files not ignored: the tree as it is, without build/.
(cd "$root" && git ls-files -z --cached --others --exclude-standard |
	xargs -0 -I{} sh -c 'test -e "{}" && printf "%s\0" "{}"' |
	tar --null -T - -cf -) | tar -C "$src" -xf -
(cd "$src" && DEB_BUILD_OPTIONS="nocheck parallel=2" dpkg-buildpackage -b -us -uc -Pnocheck \
	>"$work/deb-build.log" 2>&1) || {
	tail -n 60 "$work/deb-build.log" >&2
	fail "dpkg-buildpackage"
	exit 1
}
deb=$(ls "$work"/src/pgvalve_*.deb)
ok "built $(basename "$deb")"

step "lintian --pedantic"
lintian --pedantic --tag-display-limit 0 "$deb" >"$work/lintian.log" 2>&1 || true
cat "$work/lintian.log"
errors=$(grep -c '^E: ' "$work/lintian.log" || true)
warnings=$(grep -c '^W: ' "$work/lintian.log" || true)
pedantic=$(grep -c '^P: ' "$work/lintian.log" || true)
echo "lintian: $errors errors, $warnings warnings, $pedantic pedantic"
check "lintian: no errors and no warnings" test "$errors" -eq 0 -a "$warnings" -eq 0

step "contents"
dpkg-deb -c "$deb" | awk '{ print $1, $2, $6 }' >"$work/contents"
for f in ./usr/bin/pgvalve ./etc/pgvalve/pgvalve.ini ./usr/share/pgvalve/userlist.txt \
	./etc/default/pgvalve ./etc/logrotate.d/pgvalve ./usr/lib/sysctl.d/60-pgvalve.conf \
	./lib/systemd/system/pgvalve.service ./lib/systemd/system/pgvalve@.service \
	./lib/systemd/system/pgvalve.socket ./usr/lib/sysusers.d/pgvalve.conf \
	./usr/lib/tmpfiles.d/pgvalve.conf ./usr/share/man/man5/pgvalve.ini.5.gz; do
	check "ships $f" grep -q " $f\$" "$work/contents"
done
check "no userlist.txt in /etc (the postinst creates it 0640)" \
	bash -c "! grep -q ' ./etc/pgvalve/userlist.txt\$' '$work/contents'"

# ---------------------------------------------------------------- install
# What /usr/bin/pgbouncer is before the install: the package may add it, never replace it.
pgbouncer_name_before=none
if [ -e /usr/bin/pgbouncer ] || [ -L /usr/bin/pgbouncer ]; then
	pgbouncer_name_before=$(stat -c '%i %s' /usr/bin/pgbouncer)
fi
step "apt-get install ./$(basename "$deb")"
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$deb" \
	>"$work/install.log" 2>&1 || {
	cat "$work/install.log" >&2
	fail "apt-get install"
	exit 1
}
ok "installed"

owner_mode() { stat -c '%U:%G %a' "$1" 2>/dev/null; }
check "user pgvalve exists, no login shell" \
	bash -c 'getent passwd pgvalve | grep -q ":/usr/sbin/nologin$"'
check "/etc/pgvalve/pgvalve.ini is pgvalve:pgvalve 640" \
	test "$(owner_mode /etc/pgvalve/pgvalve.ini)" = "pgvalve:pgvalve 640"
check "/etc/pgvalve/userlist.txt is pgvalve:pgvalve 640" \
	test "$(owner_mode /etc/pgvalve/userlist.txt)" = "pgvalve:pgvalve 640"
check "/var/log/pgvalve is pgvalve:pgvalve 750" \
	test "$(owner_mode /var/log/pgvalve)" = "pgvalve:pgvalve 750"
check "/run/pgvalve is pgvalve:pgvalve 755" test "$(owner_mode /run/pgvalve)" = "pgvalve:pgvalve 755"
check "pgvalve.service is enabled" test -L /etc/systemd/system/multi-user.target.wants/pgvalve.service
check "pgvalve.socket is not enabled" test ! -e /etc/systemd/system/sockets.target.wants/pgvalve.socket
check "pgvalve --version names PgBouncer 1.26" \
	bash -c '/usr/bin/pgvalve --version | head -n 1 | grep -q "PgBouncer 1\.26"'
# The pgbouncer name, an alternative (never over a real file: Debian's own
# PgBouncer is /usr/sbin/pgbouncer, so /usr/bin/pgbouncer is free for it).
if [ "$pgbouncer_name_before" = none ]; then
	check "/usr/bin/pgbouncer is pgvalve (update-alternatives)" \
		test "$(readlink -f /usr/bin/pgbouncer)" = /usr/bin/pgvalve
	check "pgbouncer --version runs pgvalve" bash -c '/usr/bin/pgbouncer --version | head -n 1 | grep -q "^pgvalve"'
else
	check "the existing /usr/bin/pgbouncer ($pgbouncer_name_before) is untouched" \
		test "$(stat -c '%i %s' /usr/bin/pgbouncer)" = "$pgbouncer_name_before"
fi

step "systemd-analyze verify and security of the installed units"
check "units verify cleanly and rate <= 4.0" "$root/scripts/check-units.sh" /lib/systemd/system /usr/bin/pgvalve

# ---------------------------------------------------------------- run
step "a throwaway PostgreSQL 15"
pgv_ensure_user pgvtest
mkdir -p "$work/pg"
chown pgvtest "$work/pg"
pg_port=$(pgv_free_port 25432)
pgv_pg_init "$pg_data" pgvtest "$pg_port" "$work/pg" pkgtest
pgv_pg_start "$pg_data" pgvtest "$work/pg/postgres.log"
ok "PostgreSQL on port $pg_port"

port=$(pgv_free_port 26432)
password=pkgtest-$RANDOM$RANDOM
md5=md5$(printf '%s' "${password}pkgtest" | md5sum | cut -d' ' -f1)
# The shipped configuration, with a free port and a database on the
# throwaway cluster, reached the way an operator would: PGVALVE_CONFIG in
# /etc/default/pgvalve, the file %including the shipped one.
install -m 0640 -o pgvalve -g pgvalve /dev/stdin /etc/pgvalve/pkgtest.ini <<EOF
%include /etc/pgvalve/pgvalve.ini
[databases]
pkgtest = host=127.0.0.1 port=$pg_port dbname=postgres
[pgvalve]
listen_port = $port
admin_users = pkgtest
EOF
printf '"pkgtest" "%s"\n' "$md5" >>/etc/pgvalve/userlist.txt
echo "PGVALVE_CONFIG=/etc/pgvalve/pkgtest.ini" >>/etc/default/pgvalve

# NOTIFY_SOCKET: a datagram socket like systemd's; every message a line.
notify_sock="$work/notify"
notify_log="$work/notify.log"
python3 - "$notify_sock" "$notify_log" <<'EOF' &
import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
os.chmod(sys.argv[1], 0o666)
with open(sys.argv[2], "a", buffering=1) as out:
    while True:
        out.write(s.recv(4096).decode().replace("\n", "|") + "\n")
EOF
pids+=($!)
# until the listener above has bound its socket (a python start): 5 s on a loaded machine
for _ in $(seq 50); do [ -S "$notify_sock" ] && break; sleep 0.1; done

# The unit's User, Environment, EnvironmentFile, UMask and ExecStart, as
# systemd would apply them (later assignments win; '-' files are optional).
# UNIT may be an instance of a template (pgvalve@a.service: %i is "a").
unit_value() {
	local unit=$1 instance=
	case $unit in *@?*.service)
		instance=${unit#*@}
		instance=${instance%.service}
		unit=${unit%%@*}@.service
		;;
	esac
	sed -n "s/^$2=//p" "/lib/systemd/system/$unit" | sed "s/%i/$instance/g"
}
start_as_unit() { # start_as_unit UNIT [WRAPPER...]: pid of the started pgvalve in $pgvalve_pid
	local unit=$1 user group umask_ exec envs=() f line
	shift
	user=$(unit_value "$unit" User)
	group=$(unit_value "$unit" Group)
	umask_=$(unit_value "$unit" UMask)
	exec=$(unit_value "$unit" ExecStart)
	while IFS= read -r line; do envs+=("$line"); done < <(unit_value "$unit" Environment)
	while IFS= read -r f; do
		f=${f#-}
		[ -r "$f" ] || continue
		while IFS= read -r line; do
			case $line in '' | '#'*) continue ;; esac
			envs+=("$line")
		done <"$f"
	done < <(unit_value "$unit" EnvironmentFile)
	# ExecStart's $VAR splits into words, ${VAR} is one argument.
	local cmd
	cmd=$(env -i "${envs[@]}" bash -c 'set -f; c=$1; eval "set -- $(printf "%s" "$c" | sed "s/\${\([A-Z_]*\)}/\"\${\1}\"/g")"; printf "%s\n" "$@"' _ "$exec")
	mapfile -t argv <<<"$cmd"
	echo "ExecStart as run: ${argv[*]} (user $user, umask $umask_)"
	(
		cd /
		umask "$umask_"
		exec env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin NOTIFY_SOCKET="$notify_sock" "${envs[@]}" \
			setpriv --reuid="$user" --regid="$group" --init-groups "$@" "${argv[@]}"
	) >"$work/$unit.stderr" 2>&1 &
	pgvalve_pid=$!
	pids+=("$pgvalve_pid")
}
# wait_for SECONDS COMMAND...: true once the command succeeds. The bounds
# below (5 to 15 s) wait for a process start, a reload, a log line or an
# exit, each well under a second on an idle machine: a loaded 2-core
# machine has plenty.
wait_for() {
	local i n=$(($1 * 10))
	shift
	for ((i = 0; i < n; i++)); do
		"$@" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}

step "the shipped configuration as it is"
if pgv_free_port 6432 | grep -qx 6432; then
	: >"$notify_log"
	(
		cd /
		umask 0027
		exec setpriv --reuid=pgvalve --regid=pgvalve --init-groups env NOTIFY_SOCKET="$notify_sock" \
			/usr/bin/pgvalve /etc/pgvalve/pgvalve.ini
	) >"$work/shipped.stderr" 2>&1 &
	shipped_pid=$!
	pids+=("$shipped_pid")
	check "READY=1 with /etc/pgvalve/pgvalve.ini" wait_for 10 grep -q '^READY=1|' "$notify_log"
	sleep 2	# a negative window: a start-up that fails after READY (a worker, a listener) shows within it
	check "still up 2 s later" kill -0 "$shipped_pid"
	check "listening on /run/pgvalve/.s.PGSQL.6432" test -S /run/pgvalve/.s.PGSQL.6432
	kill -INT "$shipped_pid"
	check "stops on SIGINT" wait_for 10 bash -c "! kill -0 $shipped_pid"
	stop_pid "$shipped_pid"
else
	echo "port 6432 is taken on this machine: the shipped configuration is only run with another port below"
fi

step "start pgvalve as pgvalve.service's ExecStart would"
: >"$notify_log"
start_as_unit pgvalve.service
check "READY=1 on NOTIFY_SOCKET" wait_for 10 grep -q '^READY=1|STATUS=0 clients, 0 servers$' "$notify_log"
check "runs as pgvalve" test "$(stat -c %U "/proc/$pgvalve_pid")" = pgvalve
psql_app() { PGPASSWORD=$password psql -X -A -t -v ON_ERROR_STOP=1 "$@"; }
# psql_expect EXPECTED CONNINFO SQL: retried for 10 s (a socket being set up)
psql_expect() {
	local i
	for ((i = 0; i < 50; i++)); do
		[ "$(psql_app "$2" -c "$3" 2>/dev/null)" = "$1" ] && return 0
		sleep 0.2
	done
	psql_app "$2" -c "$3" >&2 || true
	return 1
}
check "psql through TCP reaches PostgreSQL" \
	test "$(psql_app "host=127.0.0.1 port=$port dbname=pkgtest user=pkgtest" -c 'SELECT 40 + 2')" = 42
check "psql through the Unix socket in /run/pgvalve" \
	test -n "$(psql_app "host=/run/pgvalve port=$port dbname=pgbouncer user=pkgtest" -c 'SHOW VERSION' | grep 'PgBouncer 1.26')"
check "logfile /var/log/pgvalve/pgvalve.log is pgvalve:pgvalve 640" \
	test "$(owner_mode /var/log/pgvalve/pgvalve.log)" = "pgvalve:pgvalve 640"
check "pidfile /run/pgvalve/pgvalve.pid names it" test "$(cat /run/pgvalve/pgvalve.pid)" = "$pgvalve_pid"
check "startup log names PgBouncer 1.26" grep -q 'process up: pgvalve .*PgBouncer 1\.26' /var/log/pgvalve/pgvalve.log

step "reload (ExecReload: SIGHUP) and log rotation"
kill -HUP "$pgvalve_pid"
check "RELOADING=1 then READY=1" wait_for 10 bash -c "grep -A1 '^RELOADING=1|' '$notify_log' | grep -q '^READY=1|'"
check "reload logged" wait_for 5 grep -q 'got SIGHUP' /var/log/pgvalve/pgvalve.log
logrotate -f -s "$work/logrotate.state" /etc/logrotate.d/pgvalve
check "rotated to pgvalve.log.1" test -s /var/log/pgvalve/pgvalve.log.1
check "postrotate sent SIGHUP" wait_for 5 grep -q 'got SIGHUP' /var/log/pgvalve/pgvalve.log.1
check "still serving after the reloads" \
	test "$(psql_app "host=127.0.0.1 port=$port dbname=pkgtest user=pkgtest application_name=after_rotate" -c 'SELECT 1')" = 1
check "pgvalve logs to the new pgvalve.log (0640 pgvalve)" \
	bash -c "grep -q 'pkgtest' /var/log/pgvalve/pgvalve.log && test \"\$(stat -c '%U:%G %a' /var/log/pgvalve/pgvalve.log)\" = 'pgvalve:pgvalve 640'"
# STATUS is sent every 5 s (STATUS_PERIOD_SEC): 8 s is one period and 3 s of slack for a loaded machine
check "STATUS shows live counts" wait_for 8 grep -Eq '^STATUS=[0-9]+ clients, [1-9][0-9]* servers$' "$notify_log"

step "stop (KillSignal=SIGINT)"
kill -INT "$pgvalve_pid"
check "STOPPING=1" wait_for 10 grep -q '^STOPPING=1|' "$notify_log"
check "exits" wait_for 10 bash -c "! kill -0 $pgvalve_pid"
wait "$pgvalve_pid" && rc=0 || rc=$?
check "exit status 0" test "$rc" -eq 0

step "socket activation (systemd-socket-activate stands in for pgvalve.socket)"
sa_port=$(pgv_free_port $((port + 1)))
: >"$notify_log"
start_as_unit pgvalve.service systemd-socket-activate -l "127.0.0.1:$sa_port" -E NOTIFY_SOCKET
# systemd-socket-activate starts the service on the first connection, as the socket unit does
check "psql on the inherited socket" \
	psql_expect 7 "host=127.0.0.1 port=$sa_port dbname=pkgtest user=pkgtest connect_timeout=10" 'SELECT 7'
check "pgvalve took fd 3 from systemd" grep -q 'listening on file descriptor 3 from systemd (tcp)' /var/log/pgvalve/pgvalve.log
check "and says listen_addr is ignored" grep -q 'sockets passed by systemd: listen_addr is ignored' /var/log/pgvalve/pgvalve.log
check "and did not bind listen_port itself" \
	bash -c "! psql -X -h 127.0.0.1 -p $port -U pkgtest -d pkgtest -c 'SELECT 1' >/dev/null 2>&1"
check "READY=1 from the activated pgvalve" wait_for 5 grep -q '^READY=1|' "$notify_log"
sa_pid=$(cat /run/pgvalve/pgvalve.pid 2>/dev/null) || sa_pid=$pgvalve_pid
kill -INT "$sa_pid" 2>/dev/null || true
check "activated pgvalve exits" wait_for 10 bash -c "! kill -0 $sa_pid"
stop_pid "$pgvalve_pid"	# systemd-socket-activate itself

# The same with two workers (PGVALVE_OPTS): both accept on the inherited socket.
echo "PGVALVE_OPTS=-w 2" >>/etc/default/pgvalve
start_as_unit pgvalve.service systemd-socket-activate -l "127.0.0.1:$sa_port" -E NOTIFY_SOCKET
check "psql with workers on the inherited socket" \
	psql_expect 8 "host=127.0.0.1 port=$sa_port dbname=pkgtest user=pkgtest connect_timeout=10" 'SELECT 8'
for w in w1 w2; do
	check "worker $w took fd 3" wait_for 10 grep -q "\[$w\] listening on file descriptor 3 from systemd (tcp)" \
		/var/log/pgvalve/pgvalve.log
done
check "the workers' private sockets (cancel forwarding) are there" \
	wait_for 5 bash -c "ls /run/pgvalve/pgvalve-$port-*-w2/.s.PGSQL.$port >/dev/null 2>&1"
sa_pid=$(cat /run/pgvalve/pgvalve.pid 2>/dev/null) || sa_pid=$pgvalve_pid
kill -INT "$sa_pid" 2>/dev/null || true
check "supervisor and workers exit" wait_for 15 bash -c "! kill -0 $sa_pid"
stop_pid "$pgvalve_pid"
sed -i '/^PGVALVE_OPTS=-w 2$/d' /etc/default/pgvalve

step "rolling restart with pgvalve@a and pgvalve@b (doc/operations.md's steps)"
for i in a b; do
	install -m 0640 -o pgvalve -g pgvalve /dev/stdin /etc/pgvalve/pgvalve-$i.ini <<EOF
%include /etc/pgvalve/pkgtest.ini
[pgvalve]
so_reuseport = 1
unix_socket_dir = /run/pgvalve/$i
pidfile = /run/pgvalve/$i/pgvalve.pid
EOF
	# what RuntimeDirectory=pgvalve pgvalve/%i does
	install -d -m 0755 -o pgvalve -g pgvalve /run/pgvalve/$i
done
: >"$notify_log"
start_as_unit pgvalve@a.service
a_pid=$pgvalve_pid
check "pgvalve@a ready" wait_for 10 grep -q '^READY=1|' "$notify_log"
# Clients one after another from before b starts until after a has gone:
# every one must be served.
(
	n=0 bad=0
	while [ ! -e "$work/rolling.stop" ]; do
		n=$((n + 1))
		[ "$(psql_app "host=127.0.0.1 port=$port dbname=pkgtest user=pkgtest connect_timeout=5" -c 'SELECT 1' 2>>"$work/rolling.err")" = 1 ] ||
			bad=$((bad + 1))
	done
	echo "$n $bad" >"$work/rolling.result"
) &
clients=$!
sleep 1	# pacing: clients run before b starts
start_as_unit pgvalve@b.service
b_pid=$pgvalve_pid
check "pgvalve@b ready beside a" wait_for 10 bash -c "[ \$(grep -c '^READY=1|' '$notify_log') -ge 2 ]"
kill -"$(unit_value pgvalve@a.service KillSignal | sed 's/^SIG//')" "$a_pid"
check "pgvalve@a exits after handing off" wait_for 10 bash -c "! kill -0 $a_pid"
stop_pid "$a_pid"
sleep 1	# pacing: clients run after a has gone
touch "$work/rolling.stop"
wait "$clients" || true
read -r n bad <"$work/rolling.result"
echo "rolling restart: $n clients, $bad failed"
check "every client served during the restart" test "$n" -ge 3 -a "$bad" -eq 0
check "pgvalve@b serves alone" \
	test "$(psql_app "host=127.0.0.1 port=$port dbname=pkgtest user=pkgtest" -c 'SELECT 2')" = 2
check "pgvalve@b's own Unix socket" test -S "/run/pgvalve/b/.s.PGSQL.$port"
kill -TERM "$b_pid"
check "pgvalve@b stops" wait_for 10 bash -c "! kill -0 $b_pid"
stop_pid "$b_pid"

step "a PgBouncer configuration laid out as Debian's pgbouncer package does"
if getent passwd postgres >/dev/null && [ -d /run/postgresql ] && [ -d /var/log/postgresql ]; then
	pgb="$work/etc-pgbouncer"
	pgb_log=/var/log/postgresql/pgbouncer-pkgtest-$$.log
	install -d -m 0750 -o postgres -g postgres "$pgb"
	install -m 0640 -o postgres -g postgres /dev/stdin "$pgb/pgbouncer.ini" <<EOF
[databases]
pkgtest = host=127.0.0.1 port=$pg_port dbname=postgres

[pgbouncer]
logfile = $pgb_log
pidfile = /var/run/postgresql/pgbouncer-pkgtest-$$.pid
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir = /var/run/postgresql
auth_type = md5
auth_file = $pgb/userlist.txt
admin_users = pkgtest
EOF
	printf '"pkgtest" "%s"\n' "$md5" | install -m 0640 -o postgres -g postgres /dev/stdin "$pgb/userlist.txt"
	adduser --quiet pgvalve postgres
	echo "PGVALVE_CONFIG=$pgb/pgbouncer.ini" >>/etc/default/pgvalve
	: >"$notify_log"
	start_as_unit pgvalve.service
	check "ready with the PgBouncer file" wait_for 10 grep -q '^READY=1|' "$notify_log"
	check "psql through it" \
		test "$(psql_app "host=127.0.0.1 port=$port dbname=pkgtest user=pkgtest" -c 'SELECT 5')" = 5
	check "its Unix socket in /run/postgresql" test -S "/run/postgresql/.s.PGSQL.$port"
	check "its log in /var/log/postgresql" grep -q 'process up' "$pgb_log"
	kill -INT "$pgvalve_pid"
	check "stops" wait_for 10 bash -c "! kill -0 $pgvalve_pid"
	stop_pid "$pgvalve_pid"
	rm -f "$pgb_log"
else
	echo "no postgres user or /run/postgresql here: skipped"
fi

step "reinstall (the postinst again): the operator's files stay as they are"
chmod 0600 /etc/pgvalve/pgvalve.ini
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --reinstall "$deb" >"$work/reinstall.log" 2>&1 || {
	cat "$work/reinstall.log" >&2
	fail "apt-get install --reinstall"
}
check "userlist.txt kept, with the test's user" grep -q '^"pkgtest"' /etc/pgvalve/userlist.txt
check "userlist.txt still pgvalve:pgvalve 640" test "$(owner_mode /etc/pgvalve/userlist.txt)" = "pgvalve:pgvalve 640"
check "pgvalve.ini keeps the operator's mode 600" test "$(owner_mode /etc/pgvalve/pgvalve.ini)" = "pgvalve:pgvalve 600"

# ---------------------------------------------------------------- purge
# The test's own files first: an operator's extra files would stay, as dpkg wants.
rm -f /etc/pgvalve/pkgtest.ini /etc/pgvalve/pgvalve-a.ini /etc/pgvalve/pgvalve-b.ini
step "apt-get purge pgvalve"
DEBIAN_FRONTEND=noninteractive apt-get purge -y -q pgvalve >"$work/purge.log" 2>&1 || {
	cat "$work/purge.log" >&2
	fail "apt-get purge"
}
check "package gone" bash -c "$(declare -f pkg_present); ! pkg_present"
for p in /etc/pgvalve /var/log/pgvalve /run/pgvalve /etc/default/pgvalve /lib/systemd/system/pgvalve.service \
	/etc/systemd/system/multi-user.target.wants/pgvalve.service /usr/bin/pgvalve; do
	check "removed $p" test ! -e "$p"
done
check "user pgvalve removed" bash -c '! getent passwd pgvalve >/dev/null'
if [ "$pgbouncer_name_before" = none ]; then
	check "the pgbouncer alternative is gone" bash -c '! test -e /usr/bin/pgbouncer && ! test -L /usr/bin/pgbouncer'
fi

# ---------------------------------------------------------------- rpm
step "rpmbuild -bb pgvalve.spec (--nodeps: the build dependencies are Debian's)"
top="$work/rpmbuild"
mkdir -p "$top/SOURCES"
tar -C "$work/src" --exclude=debian/.debhelper -czf "$top/SOURCES/pgvalve-$version.tar.gz" "pgvalve-$version"
cp "$root/etc/pgvalve.sysusers" "$top/SOURCES/"
rpmbuild -bb --nodeps --define "_topdir $top" "$root/pgvalve.spec" >"$work/rpm-build.log" 2>&1 || {
	tail -n 60 "$work/rpm-build.log" >&2
	fail "rpmbuild"
	exit 1
}
rpmfile=$(ls "$top"/RPMS/*/pgvalve-"$version"-*.rpm)
ok "built $(basename "$rpmfile")"
rpm -qlp "$rpmfile" 2>/dev/null | tee "$work/rpm-files"
for f in /usr/bin/pgvalve /etc/pgvalve/pgvalve.ini /etc/pgvalve/userlist.txt /etc/sysconfig/pgvalve \
	/etc/logrotate.d/pgvalve /usr/lib/sysctl.d/60-pgvalve.conf /usr/lib/systemd/system/pgvalve.service \
	/usr/lib/systemd/system/pgvalve@.service /usr/lib/systemd/system/pgvalve.socket \
	/usr/lib/sysusers.d/pgvalve.conf /usr/lib/tmpfiles.d/pgvalve.conf /var/log/pgvalve /run/pgvalve; do
	check "rpm lists $f" grep -qx "$f" "$work/rpm-files"
done
check "rpm: userlist.txt is 0640 pgvalve" \
	bash -c "rpm -qlvp '$rpmfile' 2>/dev/null | grep -E '^-rw-r----- +[0-9]+ pgvalve +pgvalve .* /etc/pgvalve/userlist.txt$' >/dev/null"
check "rpm: %pre creates the user" bash -c "rpm -qp --scripts '$rpmfile' 2>/dev/null | grep -q 'useradd -r -g pgvalve'"

echo
echo "test/package: $failures failed, $(($(date +%s) - started)) s"
[ "$failures" -eq 0 ]
