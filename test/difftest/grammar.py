"""grammar.py - seeded random programs of frontend messages, and the rules
that keep them valid for a pool_mode.

Owns what the differential test sends: a program is a list of simulated
clients, each a list of steps, each step a list of messages written in one
go (JSON-friendly lists, encoded by pgwire.encode). The same (seed, mode,
excluded features) always gives the same program.

A program only holds what a driver may send in that mode (class Rules):
PostgreSQL's own answers decide what is right, so errors, empty queries,
unknown names and aborted pipelines are all fair, but the pooling
limitations pgvalve documents (doc/pgvalve.ini.5) are not generated:

  * statement mode: no transaction block left open at ReadyForQuery;
  * transaction and statement mode: DISCARD only alone in a simple query
    (SET and RESET anywhere: in transaction blocks, among other statements,
    through the extended protocol, by set_config() and in DO blocks, since
    pgvalve learns what they left; issue 55); SQL PREPARE, EXECUTE and
    DEALLOCATE only alone in their query, a SQL PREPARE of a name at most
    once per client, and never EXECUTE of the client's protocol-level name
    or Bind of its SQL-level name; no Bind of the unnamed statement parsed
    before an earlier Sync (it lives on whichever server ran that Parse).

Messages: ["Q", sql] ["P", name, sql, [type oids]]
["B", portal, stmt, [formats], [params], [result formats]] ["D", "S"|"P", name]
["E", portal, max rows] ["C", "S"|"P", name] ["H"] (Flush) ["S"] (Sync) ["X"]
(Terminate, then the socket is closed) ["CLOSE"] (the socket closed without
Terminate) ["COPYIN", sql, [CopyData texts], end] with end ["c"] (CopyDone),
["f", message] (CopyFail) or ["X"]: a Query of COPY ... FROM STDIN whose
data is sent once CopyInResponse came (and not at all if the COPY failed).
"""
import json
import random
import re

MODES = ("session", "transaction", "statement")
TXN_MODES = ("transaction", "statement")

# Feature tags: DIFFTEST_EXCLUDE=named,pipeline leaves those out.
FEATURES = {
    "named": "named prepared statements: Parse/Bind/Describe/Close by name, unknown names",
    "pipeline": "several batches before one Sync, several Syncs in one write",
    "flush": "Flush: batches answered before their Sync, the Sync sent later",
    "idleflush": "Flush with nothing owed: alone, or right after a Sync (as psycopg's pipeline)",
    "portal": "named portals, Execute with a row limit",
    "binary": "binary parameters and results",
    "sqlprepare": "PREPARE / EXECUTE / DEALLOCATE",
    "set": "SET / RESET / SHOW / DISCARD ALL",
    "txn": "BEGIN / COMMIT / ROLLBACK / SAVEPOINT",
    "copy": "COPY FROM STDIN, COPY TO STDOUT",
    "error": "statements that fail",
    "multi": "several statements in one Query",
    "terminate": "Terminate or a dropped socket in the middle of a sequence",
}

TABLE_ROWS = 5          # rows 1..5 in every client's table at the start
INT4, TEXT, BYTEA = 23, 25, 17
# Names no client prepares: PostgreSQL says 26000; PGV_* are pgvalve's own
# server-side names, which a client must never reach.
UNKNOWN_NAMES = ("nosuch", "PGV_1", "PGV_2", "PGV_3")


def table(c):
    return f"dt_{c}"


# ------------------------------------------------------------ SQL texts
def _strip_dollar(sql):
    return re.sub(r"\$\$.*?\$\$", "$$", sql, flags=re.S)


def statements_of(sql):
    """The statements of a simple query, by ';' outside $$ bodies."""
    return [s.strip() for s in _strip_dollar(sql).split(";") if s.strip() and not s.strip().startswith("--")]


def first_word(stmt):
    m = re.match(r"\s*([A-Za-z]+)(\s+[A-Za-z_][A-Za-z0-9_]*)?", stmt)
    if not m:
        return "", ""
    return m.group(1).upper(), (m.group(2) or "").strip().upper()


SESSION_WORDS = ("SET", "RESET", "DISCARD")
SQLPREP_WORDS = ("PREPARE", "EXECUTE", "DEALLOCATE")


def is_session_stmt(stmt):
    """SET/RESET/DISCARD that change the session (SET LOCAL and SET TRANSACTION do not)."""
    word, second = first_word(stmt)
    return word in SESSION_WORDS and not (word == "SET" and second in ("LOCAL", "TRANSACTION"))


def opens_txn(stmt):
    word, second = first_word(stmt)
    return word == "BEGIN" or (word == "START" and second == "TRANSACTION")


def closes_txn(stmt):
    word, second = first_word(stmt)
    return word in ("COMMIT", "END", "ABORT") or (word == "ROLLBACK" and second not in ("TO",))


class Rules:
    """What one client may send next in a mode; apply() follows what it sent."""

    def __init__(self, mode):
        self.mode = mode
        self.in_txn = False           # an explicit block may be open
        self.open_segment = False     # extended messages sent since the last Sync
        self.parsed_unnamed = False   # the unnamed statement was parsed in this segment
        self.sql_prepared = set()     # SQL PREPARE names ever sent
        self.proto_names = set()      # protocol-level names ever parsed

    def refuse(self, msg):
        """Why msg may not come next, or None."""
        kind = msg[0]
        txn_mode = self.mode in TXN_MODES
        if kind in ("Q", "COPYIN") and self.open_segment:
            return "simple query inside an unsynced extended batch"
        if kind == "Q":
            stmts = statements_of(msg[1])
            if self.mode == "statement" and any(opens_txn(s) for s in stmts):
                return "transaction block in statement mode"
            if txn_mode:
                return self._refuse_txn_mode_query(stmts)
        if kind == "P":
            word, _ = first_word(msg[2])
            if self.mode == "statement" and opens_txn(msg[2]):
                return "transaction block in statement mode"
            if txn_mode and (word == "DISCARD" or word in SQLPREP_WORDS):
                return "session statement through the extended protocol"
        if kind in "BDC" and txn_mode:
            stmt = msg[2] if kind == "B" else (msg[2] if msg[1] == "S" else None)
            if stmt is not None and stmt in self.sql_prepared:
                return "Bind of a SQL-level statement"
            if stmt == "" and not self.parsed_unnamed:
                return "the unnamed statement of an earlier segment"
        return None

    def _refuse_txn_mode_query(self, stmts):
        special = [s for s in stmts if first_word(s)[0] == "DISCARD" or first_word(s)[0] in SQLPREP_WORDS]
        if special and len(stmts) > 1:
            return "session statement among others"
        if not special:
            return None
        stmt = special[0]
        word, second = first_word(stmt)
        if word == "DISCARD" and self.in_txn:
            return "DISCARD inside a transaction block"
        if word == "EXECUTE" and second.lower() in self.proto_names:
            return "EXECUTE of a protocol-level statement"
        return None

    def apply(self, msg):
        kind = msg[0]
        if kind == "Q":
            stmts = statements_of(msg[1])
            for s in stmts:
                if opens_txn(s):
                    self.in_txn = True
                elif closes_txn(s):
                    self.in_txn = False
                word, second = first_word(s)
                if word == "PREPARE":
                    self.sql_prepared.add(second.lower())
        elif kind in "PBDEC":      # a Flush alone opens nothing
            self.open_segment = True
            if kind == "P":
                if msg[1] == "":
                    self.parsed_unnamed = True
                else:
                    self.proto_names.add(msg[1])
                if opens_txn(msg[2]):
                    self.in_txn = True
        elif kind == "S":
            self.open_segment = False
            self.parsed_unnamed = False


def check_program(program):
    """Why a program (e.g. a shrinking candidate) is not valid for its mode, or None."""
    for c, steps in enumerate(program["clients"]):
        rules = Rules(program["mode"])
        for s, step in enumerate(steps):
            if not step:
                return f"client {c} step {s} is empty"
            for i, msg in enumerate(step):
                if msg[0] in ("X", "CLOSE") and (i != len(step) - 1 or s != len(steps) - 1):
                    return f"client {c}: {msg[0]} is not last"
                if msg[0] == "COPYIN" and i != len(step) - 1:
                    return f"client {c}: COPYIN is not last in its step"
                why = rules.refuse(msg)
                if why:
                    return f"client {c} step {s}: {why}"
                rules.apply(msg)
    return None


# ------------------------------------------------------------ generator
class ClientGen:
    """Draws one client's steps; every step is checked against Rules."""

    def __init__(self, rng, mode, c, exclude, shared_names):
        self.rng, self.mode, self.c, self.exclude = rng, mode, c, exclude
        self.t = table(c)
        self.rules = Rules(mode)
        self.shared_names = shared_names
        self.last_unnamed = None   # spec of the unnamed statement parsed last (session mode reuse)
        self.counter = 0
        self.stmts = {}          # protocol name -> statement spec it was parsed with
        self.sql_names = []      # SQL PREPARE names
        self.steps = []

    def on(self, feature):
        return feature not in self.exclude

    def fresh(self, kind):
        """A new name: the client's own, or (shared_names) one every client uses."""
        self.counter += 1
        if self.shared_names:
            return f"{kind}_{self.counter}"
        return f"{kind}{self.c}_{self.counter}"

    def try_add(self, step):
        """Appends step if every message is allowed; whether it was."""
        probe = Rules(self.mode)
        probe.__dict__ = {k: (set(v) if isinstance(v, set) else v) for k, v in self.rules.__dict__.items()}
        for msg in step:
            if probe.refuse(msg):
                return False
            probe.apply(msg)
        self.rules = probe
        self.steps.append(step)
        return True

    # ---- simple queries
    def single_sql(self):
        r, t = self.rng, self.t
        k = r.randint(1, TABLE_ROWS + 3)
        plain = [
            f"SELECT id, v FROM {t} ORDER BY id",
            "SELECT 1 AS one",
            "SELECT 'x' AS a, NULL::int AS b, 2.5::numeric AS c",
            f"INSERT INTO {t} VALUES ({k}, 'q{k}')",
            f"UPDATE {t} SET v = v || '+' WHERE id = {k}",
            f"DELETE FROM {t} WHERE id = {k}",
            f"SELECT count(*) AS n FROM {t}",
            "SELECT '2024-01-02'::date AS d, '2024-01-02 03:04:05+00'::timestamptz AS ts, "
            "interval '1 day 2 hours' AS i",
            "DO $$BEGIN RAISE NOTICE 'difftest %', 1; END$$",
            # answers larger than the socket buffers (flow control)
            "SELECT g, repeat('x', 100) AS pad FROM generate_series(1, 300) AS g",
            "",
            ";",
            "-- nothing to run",
        ]
        if self.on("set"):
            plain += ["SHOW application_name", "SHOW statement_timeout", "SHOW search_path",
                      "SHOW DateStyle", "SHOW TimeZone",
                      "SELECT coalesce(current_setting('difftest.tag', true), '') AS tag"]
        if self.on("error"):
            plain += ["SELECT 1/0", "SELECT nosuch", "SELEC 1", "SELECT * FROM nosuch_table",
                      f"INSERT INTO {t} VALUES (1, 'dup')"]
        return r.choice(plain)

    def step_simple(self):
        return [["Q", self.single_sql()]]

    def step_multi(self):
        n = self.rng.randint(2, 3)
        return [["Q", "; ".join(self.single_sql() or "SELECT 2" for _ in range(n))]]

    def step_txn(self):
        r = self.rng
        if self.rules.in_txn:
            sql = r.choice(["COMMIT", "ROLLBACK", "END", "SAVEPOINT s1", "ROLLBACK TO SAVEPOINT s1",
                            "RELEASE SAVEPOINT s1", "SET LOCAL statement_timeout = '7s'",
                            "BEGIN", self.single_sql()])
        else:
            sql = r.choice(["BEGIN", "START TRANSACTION ISOLATION LEVEL REPEATABLE READ", "BEGIN READ ONLY",
                            f"BEGIN; {self.single_sql() or 'SELECT 3'}; COMMIT", "COMMIT", "ROLLBACK"])
        return [["Q", sql]]

    def step_set(self):
        r, c = self.rng, self.c
        k = r.randint(1, 9)
        sql = r.choice([
            f"SET application_name = 'app{c}_{k}'",
            r.choice(["SET DateStyle = 'SQL, DMY'", "SET DateStyle = 'ISO, MDY'", "SET DateStyle = 'German'"]),
            r.choice(["SET TimeZone = 'Europe/Paris'", "SET TimeZone = 'UTC'", "SET TimeZone = 'Asia/Tokyo'"]),
            "SET IntervalStyle = 'postgres_verbose'",
            f"SET statement_timeout = '{k}s'",
            "SET search_path = pg_catalog, public",
            f"SET work_mem = '{k}MB'",
            f"SET difftest.tag = 'c{c}_{k}'",
            "SET DateStyle = 'bogus'",
            "SET LOCAL statement_timeout = '3s'",
            r.choice(["RESET application_name", "RESET statement_timeout", "RESET DateStyle", "RESET ALL",
                      "RESET work_mem", "RESET difftest.tag"]),
            "DISCARD ALL",
            r.choice(["SHOW application_name", "SHOW statement_timeout", "SHOW DateStyle", "SHOW TimeZone",
                      "SHOW IntervalStyle", "SHOW search_path", "SHOW work_mem",
                      "SHOW default_transaction_isolation",
                      "SELECT coalesce(current_setting('difftest.tag', true), '') AS tag"]),
            # changes pgvalve learns after the transaction (issue 55)
            f"SELECT set_config('work_mem', '{k + 10}MB', false) AS s",
            f"SELECT set_config('difftest.tag', 'f{c}_{k}', false) AS s",
            f"SELECT set_config('statement_timeout', '{k}min', true) AS s",
            f"DO $$BEGIN SET work_mem = '{k + 20}MB'; END$$",
            f"DO $$BEGIN PERFORM set_config('difftest.tag', 'd{c}_{k}', false); END$$",
            f"SET work_mem = '{k + 30}MB'; SHOW work_mem",
            "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL REPEATABLE READ",
        ])
        if self.rules.in_txn and r.random() < 0.2:
            sql = r.choice(["SAVEPOINT s1", "ROLLBACK TO SAVEPOINT s1"])
        return [["Q", sql]]

    def step_sqlprepare(self):
        r = self.rng
        pick = r.random()
        if pick < 0.4 or not self.sql_names:
            name = self.fresh("sp")
            if self.sql_names and self.mode == "session" and r.random() < 0.3:
                name = r.choice(self.sql_names)      # 42P05 in PostgreSQL
            body = r.choice([f"SELECT v FROM {self.t} WHERE id = $1", "SELECT $1 * 2 AS d",
                             "SELECT nosuch + $1"])
            self.sql_names.append(name)
            return [["Q", f"PREPARE {name}(int) AS {body}"]]
        if pick < 0.8:
            name = r.choice(self.sql_names + ["nosuch", '"PGV_1"', '"PGV_2"'])
            return [["Q", f"EXECUTE {name}({r.randint(0, 7)})"]]
        name = r.choice(self.sql_names + ["nosuch", "ALL"])
        return [["Q", f"DEALLOCATE {name}"]]

    def step_copyin(self):
        r = self.rng
        rows = "".join(f"{i}\tc{i}\n" for i in r.sample(range(1, 12), r.randint(0, 3)))
        if r.random() < 0.1:
            rows += "".join(f"{i}\t{'z' * 80}\n" for i in range(100, 400))    # larger than the buffers
        if self.on("error") and r.random() < 0.15:
            rows += "x\tbad\n"
        cut = sorted(r.sample(range(len(rows) + 1), min(len(rows) + 1, r.randint(0, 2))))
        chunks = [rows[a:b] for a, b in zip([0] + cut, cut + [len(rows)]) if rows[a:b]]
        end = ["c"]
        if r.random() < 0.2:
            end = ["f", "difftest gave up"]
        elif self.on("terminate") and r.random() < 0.05:
            end = ["X"]
        target = self.t if not (self.on("error") and r.random() < 0.1) else "nosuch_table"
        return [["COPYIN", f"COPY {target} (id, v) FROM STDIN", chunks, end]]

    def step_copyout(self):
        sql = self.rng.choice([f"COPY (SELECT * FROM {self.t} ORDER BY id) TO STDOUT",
                               "COPY (SELECT g, g * 2 FROM generate_series(1, 3) AS g) TO STDOUT (FORMAT csv, HEADER)",
                               f"COPY (SELECT id, v FROM {self.t} ORDER BY id) TO STDOUT (FORMAT binary)",
                               "COPY (SELECT g, repeat('y', 60) FROM generate_series(1, 500) AS g) TO STDOUT",
                               "COPY nosuch_table TO STDOUT"])
        return [["Q", sql]]

    # ---- extended protocol
    def ext_specs(self):
        specs = [
            ("SELECT $1::int + 1 AS n", ["int"]),
            (f"SELECT v FROM {self.t} WHERE id = $1", ["int"]),
            (f"SELECT id, v FROM {self.t} ORDER BY id", []),
            ("SELECT g FROM generate_series(1, $1::int) AS g", ["small"]),
            (f"INSERT INTO {self.t} (id, v) VALUES ($1, $2)", ["int", "text"]),
            (f"UPDATE {self.t} SET v = $2 WHERE id = $1", ["int", "text"]),
            (f"DELETE FROM {self.t} WHERE id = $1", ["int"]),
            ("SELECT $1::text AS t, $2::bytea AS b", ["text", "bytea"]),
            (f"SELECT count(*) AS n FROM {self.t}", []),
            ("SELECT current_setting('application_name') AS app, current_setting('DateStyle') AS ds", []),
            ("DO $$BEGIN RAISE NOTICE 'difftest ext'; END$$", []),
            ("", []),
        ]
        if self.on("error"):
            # the divisor in a sub-select: a custom plan would fold 10 / 0 at Bind, a generic one (a statement
            # shared with other clients, used more often) at Execute, and the streams would differ
            specs += [("SELECT 10 / (SELECT $1::int) AS q", ["div"]), (f"SELECT nosuch FROM {self.t}", []),
                      ("SELEC 1", [])]
        if self.on("copy"):
            specs.append((f"COPY (SELECT id, v FROM {self.t} ORDER BY id) TO STDOUT", []))
        if self.on("txn"):
            specs += [("BEGIN", []), ("COMMIT", [])]
        if self.on("set"):
            specs += [("SET application_name = 'ext'", []), ("SET work_mem = '3MB'", []),
                      ("SET search_path = pg_catalog, public", []), ("RESET search_path", []),
                      ("SELECT set_config('difftest.tag', 'ext', false) AS s", []), ("SHOW work_mem", []),
                      ("SHOW search_path", [])]
        return specs

    def param(self, kind, binary):
        r = self.rng
        if kind in ("int", "small", "div"):
            v = {"int": r.randint(1, TABLE_ROWS + 3), "small": r.randint(0, 6), "div": r.randint(0, 2)}[kind]
            if binary and self.on("error") and r.random() < 0.05:
                return {"bin": "0001"}          # 22P03: wrong binary length
            return {"bin": v.to_bytes(4, "big", signed=True).hex()} if binary else str(v)
        if kind == "text":
            if r.random() < 0.1:
                return None
            v = r.choice(["t", "été", "x y", ""])
            return {"bin": v.encode().hex()} if binary else v
        v = r.choice([b"\x00\x01", b"ab", b""])
        return {"bin": v.hex()} if binary else "\\x" + v.hex()

    def bind_args(self, kinds):
        r = self.rng
        binary = [self.on("binary") and r.random() < 0.4 for _ in kinds]
        if not any(binary):
            formats = r.choice([[], [0]]) if kinds else []
        elif all(binary):
            formats = [1]
        else:
            formats = [1 if b else 0 for b in binary]
        params = [self.param(k, b) for k, b in zip(kinds, binary)]
        result = r.choice([[], [0], [1]]) if self.on("binary") else []
        return formats, params, result

    def statement_name(self):
        """'' (unnamed) or a named statement: fresh, one parsed before, or unknown."""
        r = self.rng
        if not self.on("named") or r.random() < 0.45:
            # session mode: now and then the unnamed statement of an earlier batch
            return "", not (self.mode == "session" and self.last_unnamed and r.random() < 0.1)
        pick = r.random()
        if self.stmts and pick < 0.45:
            name = r.choice(sorted(self.stmts))
            return name, r.random() < 0.15     # 42P05 in PostgreSQL
        if pick < 0.55:
            return r.choice(UNKNOWN_NAMES), False
        return self.fresh("ps"), True

    def batch(self):
        """Parse/Bind/Describe/Execute/Close for one statement, no Sync."""
        r = self.rng
        name, parse = self.statement_name()
        if name in self.stmts:
            spec = self.stmts[name]
        elif name == "" and not parse:
            spec = self.last_unnamed
        elif name in UNKNOWN_NAMES:
            spec = ("", [])
        else:
            spec = r.choice(self.ext_specs())
        msgs = []
        if parse:
            # a Parse of a name that exists (42P05) may bring another text
            sql, kinds = spec if name not in self.stmts or r.random() < 0.5 else r.choice(self.ext_specs())
            oids = [{"int": INT4, "small": INT4, "div": INT4, "text": TEXT, "bytea": BYTEA}[k] for k in kinds]
            msgs.append(["P", name, sql, oids if r.random() < 0.5 else []])
            if name:
                self.stmts.setdefault(name, spec)
            else:
                self.last_unnamed = spec
        sql, kinds = spec
        if r.random() < 0.2:
            msgs.append(["D", "S", name])
        portal = self.fresh("pt") if self.on("portal") and r.random() < 0.25 else ""
        formats, params, result = self.bind_args(kinds)
        msgs.append(["B", portal, name, formats, params, result])
        if r.random() < 0.3:
            msgs.append(["D", "P", portal])
        rows = r.choice([1, 2, 3]) if self.on("portal") and r.random() < 0.3 else 0
        msgs.append(["E", portal, rows])
        if rows and r.random() < 0.6:
            msgs.append(["E", portal, r.choice([0, 1])])
        if portal and r.random() < 0.5:
            msgs.append(["C", "P", portal])
        if name and name in self.stmts and r.random() < 0.15:
            msgs.append(["C", "S", name])
            self.stmts.pop(name)
        elif not name and parse and r.random() < 0.05:
            msgs.append(["C", "S", ""])
        return msgs

    def after_sync(self):
        """Drivers' pipelines may flush after their Sync (psycopg does): nothing is owed."""
        return [["H"]] if self.on("idleflush") and self.rng.random() < 0.15 else []

    def step_ext(self):
        return self.batch() + [["S"]] + self.after_sync()

    def step_lone_flush(self):
        return [["H"]]

    def step_lone_sync(self):
        return [["S"]]

    def step_pipeline(self):
        r = self.rng
        step = []
        per_batch_sync = r.random() < 0.4
        for _ in range(r.randint(2, 4)):
            step += self.batch()
            if per_batch_sync:
                step.append(["S"])
        if not per_batch_sync:
            step.append(["S"])
        return step + self.after_sync()

    def step_flush(self):
        """Batches and a Flush: the Sync comes in a later step (see segment_next)."""
        step = []
        for _ in range(self.rng.randint(1, 2)):
            step += self.batch()
        return step + [["H"]]

    def step_segment_next(self):
        """The next step of an open pipeline: more batches (flushed or not), or its Sync."""
        r = self.rng
        pick = r.random()
        if pick < 0.4:
            return [["S"]] + self.after_sync()
        step = self.batch()
        if pick < 0.6:
            return step + [["S"]] + self.after_sync()
        return step + ([["H"]] if pick < 0.9 else [])

    STEP_WEIGHTS = (
        ("simple", 18, None), ("multi", 5, "multi"), ("txn", 9, "txn"), ("set", 9, "set"),
        ("sqlprepare", 5, "sqlprepare"), ("copyin", 4, "copy"), ("copyout", 3, "copy"),
        ("ext", 20, None), ("pipeline", 8, "pipeline"), ("flush", 7, "flush"),
        ("lone_flush", 1, "idleflush"), ("lone_sync", 1, None),
    )

    def next_step(self):
        if self.rules.open_segment:
            return self.step_segment_next()
        kinds = [(k, w) for k, w, f in self.STEP_WEIGHTS if f is None or self.on(f)]
        kind = self.rng.choices([k for k, _ in kinds], [w for _, w in kinds])[0]
        return getattr(self, "step_" + kind)()

    def generate(self, length):
        tries = 0
        while len(self.steps) < length and tries < length * 20:
            tries += 1
            self.try_add(self.next_step())
            if self.on("terminate") and self.rng.random() < 0.03:
                break
        if self.rules.open_segment and not (self.on("terminate") and self.rng.random() < 0.3):
            self.try_add([["S"]])
        self.steps.append([["X"]] if self.rng.random() < 0.85 else [["CLOSE"]])
        return self.steps


def generate(seed, mode, exclude=frozenset(), max_clients=4):
    """The program for (seed, mode, exclude): {"seed", "mode", "exclude", "clients"}."""
    rng = random.Random(f"difftest:{mode}:{seed}")
    n = rng.choices(range(1, max_clients + 1), [2, 4, 3, 2][:max_clients])[0]
    clients = []
    for c in range(n):
        # sometimes every client uses the same names (the pooler must keep them apart)
        shared = rng.random() < 0.3
        clients.append(ClientGen(rng, mode, c, exclude, shared).generate(rng.randint(1, 9)))
    return {"seed": seed, "mode": mode, "exclude": sorted(exclude), "clients": clients}


def describe_msg(msg):
    """One frontend message as a readable line."""
    kind = msg[0]
    if kind == "Q":
        return f"Query {msg[1]!r}"
    if kind == "P":
        return f"Parse {msg[1]!r} {msg[2]!r} types={msg[3]}"
    if kind == "B":
        _, portal, stmt, formats, params, result = msg
        shown = [p if not isinstance(p, dict) else "bin:" + p["bin"] for p in params]
        return f"Bind portal={portal!r} stmt={stmt!r} formats={formats} params={shown} result={result}"
    if kind in "DC" and len(kind) == 1:
        return f"{'Describe' if kind == 'D' else 'Close'} {msg[1]} {msg[2]!r}"
    if kind == "E":
        return f"Execute {msg[1]!r} max_rows={msg[2]}"
    if kind == "COPYIN":
        end = {"c": "CopyDone", "f": "CopyFail", "X": "Terminate"}[msg[3][0]]
        return f"Query {msg[1]!r} + CopyData {msg[2]!r} + {end}"
    return {"H": "Flush", "S": "Sync", "X": "Terminate", "CLOSE": "(socket closed)"}.get(kind, repr(msg))


def dump_program(program):
    """A program as JSON text with one step a line (corpus files, saved failures)."""
    head = [f" {json.dumps(k)}: {json.dumps(v)}" for k, v in program.items() if k != "clients"]
    clients = []
    for steps in program["clients"]:
        clients.append("  [\n" + ",\n".join("   " + json.dumps(step, ensure_ascii=False) for step in steps) + "\n  ]")
    return "{\n" + ",\n".join(head + [' "clients": [\n' + ",\n".join(clients) + "\n ]"]) + "\n}\n"


def describe_program(program):
    lines = []
    for c, steps in enumerate(program["clients"]):
        lines.append(f"  client {c}:")
        for s, step in enumerate(steps):
            lines.append(f"    step {s + 1}: " + "; ".join(describe_msg(m) for m in step))
    return "\n".join(lines)


def count_messages(program):
    n = 0
    for steps in program["clients"]:
        for step in steps:
            for msg in step:
                n += 1 + (len(msg[2]) + 1 if msg[0] == "COPYIN" else 0)
    return n
