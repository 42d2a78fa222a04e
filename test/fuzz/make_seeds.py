#!/usr/bin/env python3
"""test/fuzz/make_seeds.py - writes the seed corpora in corpus/<target>/.

The seeds are committed; this script documents how the binary ones were
made and can write them again (it never removes other files, such as
regression inputs for fixed crashes). Run from anywhere.
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def put(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def startup(params, version=196608):
    body = struct.pack("!I", version)
    for k, v in params:
        body += k.encode() + b"\0" + v.encode() + b"\0"
    body += b"\0"
    return struct.pack("!I", len(body) + 4) + body


def msg(t, body):
    return t.encode() + struct.pack("!I", len(body) + 4) + body


# ---- startup packet and message framing
su = startup([("user", "app"), ("database", "app"), ("application_name", "psql")])
put("fuzz_startup", "startup", su)
put("fuzz_startup", "ssl_then_startup", struct.pack("!II", 8, 80877103) + su)
put("fuzz_startup", "gssenc", struct.pack("!II", 8, 80877104))
put("fuzz_startup", "cancel", struct.pack("!IIII", 16, 80877102, 1234, 5678))
# the 6 KB startup packet that once corrupted netbuf's input buffer
put("fuzz_startup", "big_startup", startup([("user", "u"), ("application_name", "x" * 6000)]))
put("fuzz_startup", "password", su + msg("p", b"secret\0"))
put("fuzz_startup", "sasl", su + msg("p", b"SCRAM-SHA-256\0" + struct.pack("!i", 32)
                                     + b"n,,n=,r=rOprNGfwEbeRWgbNEkqO") + msg("p", b"c=biws,r=x,p=y"))
put("fuzz_startup", "query", su + msg("Q", b"select 1\0") + msg("X", b""))
put("fuzz_startup", "extended", su + msg("P", b"s1\0select $1\0" + struct.pack("!HI", 1, 23))
    + msg("B", b"\0s1\0" + struct.pack("!HHIH", 0, 1, 1, 0) + b"") + msg("E", b"\0" + struct.pack("!I", 0))
    + msg("S", b""))
put("fuzz_startup", "error", su + msg("E", b"SERROR\0C08P01\0Mbad\0\0"))

# ---- SCRAM: server-first \n server-final (client side), client-first \n client-final (server side)
CN = "rOprNGfwEbeRWgbNEkqO"
SN = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
put("fuzz_scram_client", "rfc7677",
    "r=%s%s,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096\nv=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=" % (CN, SN))
put("fuzz_scram_client", "error_final", "r=%sabc,s=QSXCR+Q6sek8bf92,i=4096\ne=invalid-proof" % CN)
put("fuzz_scram_client", "extension", "m=ext,r=%sabc,s=QSXCR+Q6sek8bf92,i=1\nv=AAAA" % CN)
put("fuzz_scram_server", "rfc7677",
    "n,,n=user,r=%s\nc=biws,r=%s%s,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=" % (CN, CN, SN))
put("fuzz_scram_server", "wrong_proof",
    "n,,n=,r=%s\nc=biws,r=%s%s,p=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=" % (CN, CN, SN))
put("fuzz_scram_server", "y_flag", "y,,n=user,r=abc\nc=eSws,r=abc%s,p=AAAA" % SN)
put("fuzz_scram_server", "authzid", "n,a=admin,n=user,r=abc\n")

# ---- text files
put("fuzz_hba", "basic", """# TYPE DATABASE USER ADDRESS METHOD
local   all       all                     trust
host    all       all   127.0.0.1/32      md5
host    "all",db2 +grp  10.0.0.0 255.0.0.0 scram-sha-256
hostssl sameuser  all   ::1/128           cert map=m1
hostnossl all     @users 0.0.0.0/0        reject
host    all       all   samenet           password
host    db        all   all               ldap ldapserver=x "ldapprefix=cn=" ldapsuffix=",dc=x"
host    all       all   example.com       \\
        ident
""")
put("fuzz_ident", "basic", """# MAPNAME SYSTEM-USERNAME PG-USERNAME
omicron  bryanh  bryanh
mymap    /^(.*)@mydomain\\.com$     \\1
pre      "/^([a-z]+)-x{1,3}$"       db_\\1_end
anymap   root    all
quoted   "x y"   "all"
""")
put("fuzz_ident", "stacked", "m /t" + "+" * 21 + " u\n")
put("fuzz_auth_file", "basic", """"app" "md56a422f785c9e20873908ce25d1736ae2"
"plain" "pass word"
"sc" "SCRAM-SHA-256$4096:W22ZaJ0SNY7soEsUEjb6gQ==$WG5d8oPm3OtcPnkdi4Uo7BkeZkBFzpcXkuLmtbsT4qY=:wfPLwcE6nTWhTAmQ7tl2KeoiWGPlZqQxSrmfPwDl2dU="
;comment
"quo""te" ""
"unterminated
""")
put("fuzz_config", "basic", """[databases]
app = host=127.0.0.1 port=5432 dbname=app pool_size=20 auth_user=x
* = host=/tmp
quoted = host=localhost password='a b\\'c' connect_query='select 1'

[users]
app = pool_mode=transaction max_user_connections=5

[peers]
1 = host=127.0.0.1 port=6433

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = 6432
auth_type = md5
auth_file = /etc/pgvalve/userlist.txt
admin_users = postgres, admin
pool_mode = session
default_pool_size = 20
max_client_conn = 100
server_lifetime = 3600.5
ignore_startup_parameters = extra_float_digits
unknown_key = 1
""")
put("fuzz_config", "pgvalve_section", "[pgvalve]\nworkers = auto\nmax_packet_size = 2147483647\n[databases]\n")
for i, q in enumerate(["SHOW POOLS;", "show stats", "SET default_pool_size = 30", "set x to 'a''b';",
                       "PAUSE \"my db\"", "KILL_CLIENT 12", "SHUTDOWN WAIT_FOR_CLIENTS;", "RELOAD"]):
    put("fuzz_admin_command", "q%d" % i, q)
for i, q in enumerate(["SELECT a, 'x''y', E'\\\\'';' FROM t WHERE b = $1;",
                       "/* a /* nested */ ; */ SET search_path = \"My\"\"Schema\", public -- x\n;",
                       "DO $fn$ BEGIN PERFORM 1; END $fn$; LISTEN chan; UNLISTEN *",
                       "WITH d AS (DELETE FROM t RETURNING *) SELECT * FROM d FOR UPDATE",
                       "PREPARE p(int) AS SELECT U&'d\\0061t' || B'101'::text || X'1F'::text; EXECUTE p(1)",
                       "SELECT 'unterminated", "SELECT /* unterminated", "SELECT $q$ unterminated"]):
    put("fuzz_sql_lex", "s%d" % i, q)
for i, q in enumerate(["SELECT count(*) FROM t WHERE a IN (1, 2) AND b = 'x'",
                       "WITH x AS (SELECT 1) SELECT * FROM x; VALUES (1); TABLE t; SHOW all",
                       "SELECT * FROM t FOR UPDATE", "SELECT nextval('s')", "SELECT volatile_fn()",
                       "WITH d AS (DELETE FROM t RETURNING *) SELECT * FROM d",
                       "SELECT 'a\\' , ' ; DELETE FROM t; --'", "SELECT 1 --\r; DELETE FROM t",
                       "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SELECT 1",
                       "START TRANSACTION READ ONLY; COMMIT; INSERT INTO t VALUES (1)"]):
    put("fuzz_sql_classify", "c%d" % i, q)
for i, q in enumerate(["SELECT * FROM users u JOIN orders o ON o.user_id = u.id WHERE u.id IN (1, $2, '3'::bigint)",
                       "INSERT INTO users (id, name) VALUES (1, 'a'), ($1, $2), (DEFAULT, 'x') ON CONFLICT (id) DO NOTHING",
                       "INSERT INTO orders VALUES (1, -9223372036854775808, 2.5) RETURNING *",
                       "UPDATE users SET name = o.total FROM orders o WHERE o.user_id = users.id AND users.id = 5",
                       "DELETE FROM items WHERE tenant_id = E'a\\'' AND id IN (SELECT id FROM users)",
                       "WITH x AS (SELECT * FROM items) SELECT count(DISTINCT id), row_number() OVER () FROM x",
                       "SELECT id FROM users UNION SELECT user_id FROM orders; SELECT 1",
                       "SELECT " + "1+" * 600 + "1", "SELECT " + "(" * 200 + "1" + ")" * 200]):
    put("fuzz_shard_parse", "p%d" % i, q)
