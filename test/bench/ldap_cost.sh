#!/usr/bin/env bash
#
# test/bench/ldap_cost.sh - whether LDAP logins cost the other clients
# anything (issue 44): pgbench -C md5 logins at a fixed rate, alone, and
# with LDAP logins (a real slapd, simple bind) beside them at a ninth of
# that rate (10% of all logins), in alternating rounds on one pgvalve.
# `make bench-ldap` runs it; use a build without sanitizers and with LDAP.
#
#   ldap_cost.sh [--duration S] [--rounds N] [--rate N] [--clients N] [--ldapserver HOST]
#
# --ldapserver: how the hba line names the directory (127.0.0.1; localhost
# makes each LDAP login look the name up, through pgvalve's resolver).
#
# Prints per round and as medians: the md5 logins' average latency
# (pgbench's, connect included), pgvalve's CPU per login over all logins
# of the run, and the LDAP logins made. Equal md5 latency and CPU per
# login with and without the LDAP logins say that an LDAP login waits on
# the directory without holding anyone else up or spinning.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
srcdir=${abs_top_srcdir:-$(cd "$here/../.." && pwd)}
builddir=${abs_top_builddir:-$srcdir/build}
duration=10 rounds=3 rate=400 clients=8 ldapserver=127.0.0.1
while [ $# -gt 0 ]; do
	case $1 in
	--duration) duration=$2; shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	--rate) rate=$2; shift 2 ;;
	--clients) clients=$2; shift 2 ;;
	--ldapserver) ldapserver=$2; shift 2 ;;
	*) echo "usage: ldap_cost.sh [--duration S] [--rounds N] [--rate N] [--clients N] [--ldapserver HOST]" >&2; exit 2 ;;
	esac
done
[ -x /usr/sbin/slapd ] || { echo "${0##*/}: needs Debian's slapd (scripts/deps.sh test mode installs it)" >&2; exit 2; }
bench_scale=0
# shellcheck source=lib.sh
. "$here/lib.sh"
bench_setup_cluster

# The directory: uid=bench_ldap under ou=people, in $tmp/slapd (stopped by lib.sh's cleanup: its command line names $tmp/).
sd=$tmp/slapd
mkdir -p "$sd/db"
cat >"$sd/slapd.conf" <<EOF
include /etc/ldap/schema/core.schema
include /etc/ldap/schema/cosine.schema
include /etc/ldap/schema/inetorgperson.schema
modulepath /usr/lib/ldap
moduleload back_mdb
database mdb
maxsize 10485760
suffix "dc=example,dc=com"
directory $sd/db
access to attrs=userPassword by anonymous auth by * none
access to * by * read
EOF
printf '%s\n' "dn: dc=example,dc=com" "objectClass: dcObject" "objectClass: organization" "o: x" "dc: example" "" \
	"dn: ou=people,dc=example,dc=com" "objectClass: organizationalUnit" "ou: people" "" \
	"dn: uid=bench_ldap,ou=people,dc=example,dc=com" "objectClass: inetOrgPerson" "uid: bench_ldap" "cn: b" \
	"sn: b" "userPassword: bench" >"$sd/data.ldif"
/usr/sbin/slapadd -q -f "$sd/slapd.conf" -l "$sd/data.ldif" || exit 1
ldap_port=$(pgv_free_port 23500)
/usr/sbin/slapd -f "$sd/slapd.conf" -h "ldap://127.0.0.1:$ldap_port/" -d 0 >"$sd/slapd.out" 2>&1 &
slapd_pid=$!

"$PGBIN/psql" -X -q -h "$tmp" -p "$pgport" -U postgres -d postgres \
	-c "CREATE ROLE bench_ldap LOGIN PASSWORD 'bench'" -c "GRANT CONNECT ON DATABASE bench TO bench_ldap" >/dev/null
printf 'host all bench 127.0.0.1/32 md5\nhost all bench_ldap 127.0.0.1/32 ldap ldapserver=%s ldapport=%s "ldapprefix=uid=" "ldapsuffix=,ou=people,dc=example,dc=com"\n' \
	"$ldapserver" "$ldap_port" >"$tmp/hba.conf"
echo "SELECT 1;" >"$tmp/select1.sql"
[ -n "$runas" ] && chown "$runas:" "$tmp/hba.conf" "$tmp/select1.sql"
bench_start_pgvalve "auth_type = hba
auth_hba_file = $tmp/hba.conf" || exit 1
PGPASSWORD=bench "$PGBIN/psql" -X -q -At -h 127.0.0.1 -p "$port" -U bench_ldap -d bench -c "SELECT 1" >/dev/null ||
	{ echo "${0##*/}: an LDAP login through pgvalve failed:" >&2; tail -5 "$tmp/pgvalve.log" >&2; exit 1; }

hz=$(getconf CLK_TCK)
pgbench_c() {	# USER RATE OUT: pgbench -C at RATE logins a second
	PGPASSWORD=bench PGSSLMODE=disable "$PGBIN/pgbench" -n -C -T "$duration" -c "$clients" -j 2 -R "$2" \
		-f "$tmp/select1.sql" -h 127.0.0.1 -p "$port" -U "$1" bench >"$3" 2>&1
}
count_of() { sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$1"; }

# run WITH_LDAP -> "md5_latency_ms cpu_us_per_login ldap_logins md5_logins"
run() {
	local c0 c1 n l=0 lat lpid=
	c0=$(bench_cpu_ticks "$pgv_pid")
	if [ "$1" = 1 ]; then
		pgbench_c bench_ldap $((rate / 9)) "$tmp/ldap.out" &
		lpid=$!
	fi
	pgbench_c bench "$rate" "$tmp/md5.out"
	[ -n "$lpid" ] && wait "$lpid"
	c1=$(bench_cpu_ticks "$pgv_pid")
	n=$(count_of "$tmp/md5.out")
	lat=$(sed -n 's/^latency average = \([0-9.]*\) ms.*/\1/p' "$tmp/md5.out")
	[ "$1" = 1 ] && l=$(count_of "$tmp/ldap.out")
	for f in "$tmp/md5.out" ${lpid:+"$tmp/ldap.out"}; do
		grep -q "number of failed transactions: 0 " "$f" || { echo "${0##*/}: failures:" >&2; tail -3 "$f" >&2; }
	done
	awk -v a="$c0" -v b="$c1" -v n="${n:-0}" -v l="${l:-0}" -v hz="$hz" -v lat="${lat:-0}" \
		'BEGIN { printf "%s %.1f %d %d\n", lat, (n + l) ? (b - a) * 1e6 / hz / (n + l) : 0, l, n }'
}

declare -A lat cpu nl nm
for r in $(seq "$rounds"); do
	order=(0 1)
	[ $((r % 2)) -eq 0 ] && order=(1 0)
	for w in "${order[@]}"; do
		read -r la cu lo nmd < <(run "$w")
		lat[$w]+="$la " cpu[$w]+="$cu " nl[$w]+="$lo " nm[$w]+="$nmd "
		printf '%s: round %d %-14s md5 latency %7s ms  %6s us CPU/login  %5s LDAP logins\n' "${0##*/}" "$r" \
			"$([ "$w" = 1 ] && echo "md5+10%-ldap" || echo "md5 alone")" "$la" "$cu" "$lo"
	done
done
printf '\n%-14s %18s %18s\n' run md5_latency_ms cpu_us_per_login
for w in 0 1; do
	printf '%-14s %18s %18s\n' "$([ "$w" = 1 ] && echo "md5+10%-ldap" || echo "md5 alone")" \
		"$(printf '%s\n' ${lat[$w]} | median)" "$(printf '%s\n' ${cpu[$w]} | median)"
done
# What one LDAP login cost pgvalve, if the md5 logins cost what they cost alone.
c0=$(printf '%s\n' ${cpu[0]} | median) c1=$(printf '%s\n' ${cpu[1]} | median)
n1=$(printf '%s\n' ${nm[1]} | median) l1=$(printf '%s\n' ${nl[1]} | median)
awk -v c0="$c0" -v c1="$c1" -v n="$n1" -v l="$l1" \
	'BEGIN { if (l > 0) printf "CPU per LDAP login (derived): %.1f us (md5 login alone: %.1f us)\n", (c1 * (n + l) - c0 * n) / l, c0 }'
echo "median of $rounds rounds of ${duration}s; pgbench -C -c $clients -R $rate (md5) [+ -R $((rate / 9)) (LDAP, simple bind)], SELECT 1"
kill "$slapd_pid" 2>/dev/null
wait "$slapd_pid" 2>/dev/null
