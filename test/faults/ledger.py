"""test/faults/ledger.py - the ledger checker of test/faults/run.sh (issue 45).

Clients move money between accounts through pgvalve while faults are
injected; every transfer carries a unique id written to a ledger table in
the same transaction. Each client records every transfer's outcome:

  committed  COMMIT was acknowledged (CommandComplete "COMMIT")
  failed     an error before COMMIT, or at COMMIT one PostgreSQL's protocol
             says means "not committed" (a serialization failure, COMMIT
             answered "ROLLBACK"); connecting failed
  unknown    the connection died, or pgvalve gave up (its query_timeout,
             "server conn crashed?"), while COMMIT was in flight: the
             transaction may or may not be there

Afterwards `check` proves, from PostgreSQL itself:
  - the sum of the balances is what `setup` put in;
  - each account's balance is its start plus its ledger rows (no half
    transfer);
  - every committed id is in the ledger; no failed id is; no ledger row
    has an id no client sent;
  - unknowns are no more than the faults injected can explain;
  - no client waited longer than the bound the operator's timeouts state
    for any transfer, and none was still waiting when the run ended;
and prints the ids that break an invariant.

  ledger.py setup ADMIN_DSN ACCOUNTS
  ledger.py run OUTDIR SECONDS BOUND TAG DSN:CLIENTS [DSN:CLIENTS ...] [--lie]
  ledger.py check ADMIN_DSN OUTDIR UNKNOWN_BOUND BOUND
  ledger.py servers ADMIN_DSN CLIENT_ADDR CONSOLE_DSN...  (pools vs pg_stat_activity)

--lie makes the clients misreport (an error before COMMIT is recorded as
committed): a pooler that acknowledges what it lost, so that run.sh can
show the checker catches a loss.
"""

import os
import random
import sys
import threading
import time

import psycopg

START_BALANCE = 1000


def setup(admin_dsn, accounts):
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS ledger, accounts")
        conn.execute("CREATE TABLE accounts (id int PRIMARY KEY, balance bigint NOT NULL)")
        conn.execute(
            "CREATE TABLE ledger (id text PRIMARY KEY, src int NOT NULL, dst int NOT NULL, amount int NOT NULL)"
        )
        conn.execute(
            "INSERT INTO accounts SELECT g, %s FROM generate_series(1, %s) g", (START_BALANCE, accounts)
        )
        conn.execute("GRANT ALL ON accounts, ledger TO app")


def definitive(err):
    """True when an error answering COMMIT means the transaction did not commit."""
    state = getattr(err, "sqlstate", None)
    # 40: rollback (serialization, deadlock); 23/22/25/42: the transaction's own faults.
    return state is not None and state[:2] in ("40", "23", "22", "25", "42")


class Client(threading.Thread):
    def __init__(self, num, dsn, tag, stop, outdir, accounts, lie):
        super().__init__(daemon=True)
        self.num, self.dsn, self.tag, self.stop, self.lie = num, dsn, tag, stop, lie
        self.accounts = accounts
        self.out = open(os.path.join(outdir, "client-%d.log" % num), "w", buffering=1)
        self.inflight = None  # (id, since, stage) while a transfer is under way
        self.conn = None

    def record(self, tid, outcome, t0, stage, detail=""):
        self.out.write("%s %s %.3f %s %s\n" % (tid, outcome, time.monotonic() - t0, stage, detail.replace("\n", " ")[:160]))

    def transfer(self, tid):
        src, dst = random.sample(range(1, self.accounts + 1), 2)
        amount = random.randint(1, 50)
        stage = "connect"
        t0 = time.monotonic()
        self.inflight = (tid, t0)
        try:
            if self.conn is None or self.conn.closed:
                self.conn = psycopg.connect(self.dsn, autocommit=True)
            stage = "begin"
            self.conn.execute("BEGIN")
            stage = "update"
            # in id order, so that two transfers never deadlock
            for acc, delta in sorted([(src, -amount), (dst, amount)]):
                self.conn.execute("UPDATE accounts SET balance = balance + %s WHERE id = %s", (delta, acc))
            stage = "insert"
            self.conn.execute("INSERT INTO ledger VALUES (%s, %s, %s, %s)", (tid, src, dst, amount))
            stage = "commit"
            cur = self.conn.execute("COMMIT")
            if cur.statusmessage == "COMMIT":
                self.record(tid, "committed", t0, stage)
            else:
                self.record(tid, "failed", t0, stage, "COMMIT answered %s" % cur.statusmessage)
        except psycopg.Error as e:
            if stage == "commit" and not definitive(e):
                outcome = "unknown"
            elif self.lie and stage != "connect":
                outcome = "committed"  # the lie: a lost transfer acknowledged
            else:
                outcome = "failed"
            self.record(tid, outcome, t0, stage, "%s %s" % (getattr(e, "sqlstate", None), e))
            try:
                self.conn.close()
            except Exception:
                pass
            self.conn = None
            time.sleep(0.05 + random.random() * 0.1)
        self.inflight = None

    def run(self):
        seq = 0
        while not self.stop.is_set():
            seq += 1
            self.transfer("%s-%d-%d" % (self.tag, self.num, seq))
        if self.conn is not None:
            try:
                self.conn.close()
            except Exception:
                pass


def run(outdir, seconds, bound, tag, specs, lie):
    os.makedirs(outdir, exist_ok=True)
    with open(os.path.join(outdir, "accounts")) as f:
        accounts = int(f.read())
    stop = threading.Event()
    clients = []
    for spec in specs:
        dsn, n = spec.rsplit(":", 1)
        for _ in range(int(n)):
            clients.append(Client(len(clients) + 1, dsn, tag, stop, outdir, accounts, lie))
    for c in clients:
        c.start()
    time.sleep(seconds)
    stop.set()
    # A transfer started just before the stop may take up to the bound
    # (LEDGER_GRACE: longer, to measure how long a hang lasts).
    deadline = time.monotonic() + float(os.environ.get("LEDGER_GRACE", bound + 2))
    for c in clients:
        c.join(max(0.0, deadline - time.monotonic()))
    hung = [c for c in clients if c.is_alive()]
    with open(os.path.join(outdir, "hung.txt"), "w") as f:
        for c in hung:
            if c.inflight:
                tid, since = c.inflight
                f.write("%s %.1f\n" % (tid, time.monotonic() - since))
            else:
                f.write("client-%d 0\n" % c.num)
    print("ledger: %d clients ran %d s, %d still waiting at the end" % (len(clients), seconds, len(hung)))
    sys.stdout.flush()
    os._exit(0)  # a hung client's thread would keep a normal exit waiting


def read_outcomes(outdir):
    outcomes, durations = {}, []
    for name in sorted(os.listdir(outdir)):
        if not name.startswith("client-"):
            continue
        with open(os.path.join(outdir, name)) as f:
            for line in f:
                parts = line.split(" ", 4)
                if len(parts) < 4:
                    continue
                tid, outcome, took, stage = parts[:4]
                outcomes[tid] = (outcome, stage, parts[4].strip() if len(parts) > 4 else "")
                durations.append((float(took), tid, stage))
    return outcomes, durations


def check(admin_dsn, outdir, unknown_bound, bound):
    outcomes, durations = read_outcomes(outdir)
    with open(os.path.join(outdir, "accounts")) as f:
        accounts = int(f.read())
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        total = conn.execute("SELECT sum(balance) FROM accounts").fetchone()[0]
        rows = conn.execute("SELECT id, src, dst, amount FROM ledger").fetchall()
        balances = dict(conn.execute("SELECT id, balance FROM accounts").fetchall())
    ledger = {r[0] for r in rows}
    expect = {a: START_BALANCE for a in range(1, accounts + 1)}
    for _, src, dst, amount in rows:
        expect[src] -= amount
        expect[dst] += amount
    counts = {}
    for outcome, _, _ in outcomes.values():
        counts[outcome] = counts.get(outcome, 0) + 1
    bad = []
    if total != START_BALANCE * accounts:
        bad.append("sum of balances %s, expected %d" % (total, START_BALANCE * accounts))
    skewed = [a for a in expect if balances.get(a) != expect[a]]
    if skewed:
        bad.append("accounts whose balance is not their ledger's: %s" % skewed[:20])
    lost = sorted(t for t, o in outcomes.items() if o[0] == "committed" and t not in ledger)
    if lost:
        bad.append("%d committed ids missing from the ledger: %s" % (len(lost), " ".join(lost[:20])))
    ghost = sorted(t for t, o in outcomes.items() if o[0] == "failed" and t in ledger)
    if ghost:
        bad.append("%d ids recorded as failed are in the ledger: %s" % (len(ghost), " ".join(ghost[:20])))
    stray = sorted(t for t in ledger if t not in outcomes)
    hung = []
    with open(os.path.join(outdir, "hung.txt")) as f:
        hung = [line.split() for line in f if line.strip()]
    hung_ids = {h[0] for h in hung}
    stray = [t for t in stray if t not in hung_ids]  # a hung transfer has no outcome yet
    if stray:
        bad.append("%d ledger ids no client recorded: %s" % (len(stray), " ".join(stray[:20])))
    unknown = counts.get("unknown", 0)
    if unknown > unknown_bound:
        ids = sorted(t for t, o in outcomes.items() if o[0] == "unknown")
        bad.append("%d unknown outcomes, more than the %d the faults explain: %s" % (unknown, unknown_bound, " ".join(ids[:20])))
    slow = sorted((d for d in durations if d[0] > bound), reverse=True)
    if slow:
        bad.append("%d transfers waited longer than %s s: %s" % (
            len(slow), bound, " ".join("%s(%.1fs at %s)" % (t, d, s) for d, t, s in slow[:10])))
    if hung:
        bad.append("%d clients hanging when the run ended: %s" % (
            len(hung), " ".join("%s(waiting %ss)" % (h[0], h[1]) for h in hung[:10])))
    longest = max((d[0] for d in durations), default=0.0)
    print("ledger: %d committed, %d failed, %d unknown (bound %d); longest wait %.1f s (bound %s s); %d ledger rows" % (
        counts.get("committed", 0), counts.get("failed", 0), unknown, unknown_bound, longest, bound, len(ledger)))
    for b in bad:
        print("ledger: VIOLATION: " + b)
    return 1 if bad else 0


def servers(admin_dsn, client_addr, console_dsns):
    """Server connections the pools hold that PostgreSQL does not know (dead), and backends of
    pgvalve's address no pool holds (orphans, holding their locks): both must be none."""
    pool = set()
    for dsn in console_dsns:
        with psycopg.connect(dsn, autocommit=True, cursor_factory=psycopg.ClientCursor) as conn:
            cur = conn.execute("SHOW SERVERS")
            cols = [d.name for d in cur.description]
            pool |= {int(r[cols.index("local_port")]) for r in cur.fetchall() if r[cols.index("local_port")]}
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        pg = {r[0] for r in conn.execute(
            "SELECT client_port FROM pg_stat_activity WHERE client_addr = %s AND backend_type = 'client backend'",
            (client_addr,)).fetchall()}
    dead, orphans = sorted(pool - pg), sorted(pg - pool)
    print("servers: pool %d, PostgreSQL %d, in the pool only (dead) %s, in PostgreSQL only (orphans) %s" % (
        len(pool), len(pg), dead, orphans))
    return 1 if dead or orphans else 0


def main(argv):
    cmd = argv[1]
    if cmd == "setup":
        setup(argv[2], int(argv[3]))
        return 0
    if cmd == "run":
        lie = "--lie" in argv
        args = [a for a in argv[2:] if a != "--lie"]
        run(args[0], float(args[1]), float(args[2]), args[3], args[4:], lie)
    if cmd == "check":
        return check(argv[2], argv[3], int(argv[4]), float(argv[5]))
    if cmd == "servers":
        return servers(argv[2], argv[3], argv[4:])
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
