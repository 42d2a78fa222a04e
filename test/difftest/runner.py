"""runner.py - plays a program against PostgreSQL or pgvalve and records
what each simulated client receives.

Owns the client-side protocol model (when is a step answered, who may be
holding the pool's only server) and the scheduler that interleaves the
clients through pgvalve. Every wait is bounded: a step that gets no answer
within the bound is a failure (Hang), never a hung test.

Straight to PostgreSQL the clients run one after another, each on its own
session. Through pgvalve (pool_size = 1) they are interleaved by a seeded
scheduler: a client may send while another one holds the server, and then
waits for it. The run only goes on once every client that can progress has
got its answers; a client may wait only while another client, idle, holds
the server legitimately (Client.holding). Otherwise the server is pinned or
an answer is lost, and the run fails after `bound` seconds without a byte.
Now and then several clients send at once (_send_burst) and are served in
turn, each within the bound after the one before it.
"""
import random
import select
import time

import grammar
import pgwire

BURST_P = 0.3   # chance, at each turn, of several clients sending at once


class Hang(Exception):
    """No answer within the bound while the pooler should have given one."""


class Segment:
    """Extended-protocol messages up to one Sync, as far as answers go."""

    def __init__(self):
        self.sent = 0        # Parse/Bind/Describe/Execute/Close counted for answers
        self.answered = 0
        self.flushed = 0     # sent before the last Flush: answers owed now
        self.aborted = False  # an ErrorResponse came: the rest is skipped
        self.synced = False
        self.touched = False  # any extended message at all (the server is taken)


class Client:
    def __init__(self, idx, steps, mode):
        self.idx = idx
        self.steps = [list(s) for s in steps]
        self.mode = mode
        self.conn = None
        self.login = []
        self.stream = []          # (type char, body) after the login, in order
        self.alive = False
        self.sent_any = False
        self.status = "I"
        self.pending_rfq = 0
        self.segments = [Segment()]
        self.copy_rest = None     # data and end of a COPYIN awaiting CopyInResponse
        self.waiting_since = None  # sent a step, no byte yet
        self.contender = False    # sent while another client held the server
        self.stats = None         # run_pooled's counters (handover times)
        self.frontend_msgs = 0
        self.left_clean = False   # left with ReadyForQuery I and nothing pending

    # ---- the protocol model
    def answered(self):
        seg = self.segments[-1]
        return (not self.alive) or (self.pending_rfq == 0 and self.copy_rest is None and
                                    (seg.aborted or seg.answered >= seg.flushed))

    def holding(self):
        """Whether this client may keep the server while idle, in its pool_mode."""
        if not self.alive or not self.sent_any:
            return False
        if self.mode == "session":
            return True
        return self.status in "TE" or self.pending_rfq > 0 or self.segments[-1].touched or \
            self.copy_rest is not None

    def send_step(self, timeout):
        step = self.steps.pop(0)
        data = bytearray()
        closing = None
        for msg in step:
            kind = msg[0]
            self.frontend_msgs += 1
            if kind in ("X", "CLOSE"):
                closing = kind
                if kind == "X":
                    data += pgwire.encode(msg)
                break
            if kind == "COPYIN":
                data += pgwire.encode(["Q", msg[1]])
                self.pending_rfq += 1
                self.copy_rest = (msg[2], msg[3])
                continue
            data += pgwire.encode(msg)
            seg = self.segments[-1]
            if kind == "Q":
                self.pending_rfq += 1
            elif kind == "S":
                self.pending_rfq += 1
                seg.synced = True
                self.segments.append(Segment())
            elif kind == "H":
                seg.flushed = seg.sent
            elif kind in pgwire.EXT_MESSAGES:
                seg.touched = True
                if not seg.aborted:
                    seg.sent += 1
        if data:
            self.sent_any = True
            self.waiting_since = time.monotonic()
            if not self.conn.send(bytes(data), timeout):
                self.closed_by_peer()
                return
        if closing:
            self.leave()

    def send_copy_rest(self, timeout):
        chunks, end = self.copy_rest
        self.copy_rest = None
        data = b"".join(pgwire.encode(["d", c]) for c in chunks)
        self.frontend_msgs += len(chunks) + 1
        if end[0] == "X":
            self.conn.send(data + pgwire.encode(["X"]), timeout)
            self.conn.close()
            self.alive = False
            return
        if not self.conn.send(data + pgwire.encode(end), timeout):
            self.closed_by_peer()

    def leave(self):
        """Closes the socket (after Terminate or not); notes whether the client left its
        server with nothing going on, so that a pooler must keep that server."""
        seg = self.segments[-1]
        self.left_clean = (self.status == "I" and self.pending_rfq == 0 and not seg.touched and
                           self.copy_rest is None)
        self.conn.close()
        self.alive = False
        self.note_release()

    def closed_by_peer(self):
        self.stream.append(("<", b"connection closed by the server"))
        self.conn.close()
        self.alive = False
        self.steps = []

    def receive(self, timeout):
        """Takes in whatever arrived; whether anything did."""
        if not self.alive:
            return False
        got = self.conn.pump()
        for kind, body in self.conn.messages():
            got = True
            if self.contender:
                self.note_handover()
            self.waiting_since = None
            self.stream.append((kind, body))
            self.account(kind, body, timeout)
            if not self.alive:
                return True
        if self.conn.eof and self.alive:
            self.closed_by_peer()
        return got

    def note_handover(self):
        """A waiting client got its first answer: how long after the server was free."""
        self.contender = False
        released = self.stats.get("released_at", 0.0)
        if self.waiting_since is not None and released > self.waiting_since:
            self.stats["max_handover"] = max(self.stats["max_handover"], time.monotonic() - released)

    def note_release(self):
        if self.stats is not None and not self.holding():
            self.stats["released_at"] = time.monotonic()

    def account(self, kind, body, timeout):
        head = self.segments[0]
        ext_owed = head.sent > head.answered and not head.aborted
        if kind == "Z":
            self.pending_rfq -= 1
            self.status = chr(body[0])
            self.copy_rest = None
            if head.synced:
                self.segments.pop(0)
            self.note_release()
        elif kind == "G":
            if self.copy_rest is not None:
                self.send_copy_rest(timeout)
            else:
                # a COPY FROM STDIN nobody planned: both sides get the same CopyFail
                self.conn.send(pgwire.encode(["f", "difftest: unexpected COPY FROM STDIN"]), timeout)
        elif kind == "E" and ext_owed:
            head.aborted = True
        elif ext_owed and ord(kind) in pgwire.EXT_TERMINAL:
            head.answered += 1


def _connect_all(clients, address, user, password, timeout):
    """Logs every client in: all StartupMessages first, so that the servers (or
    PostgreSQL's backends) start in parallel, then each login to its end."""
    for c in clients:
        c.conn = pgwire.Conn.open(address, timeout)
        c.alive = True
        c.conn.send(pgwire.startup({"user": user, "database": "pgvtest"}), timeout)
    for c in clients:
        c.login = pgwire.finish_login(c.conn, user, password, timeout)


def wait_answered(clients, bound, pooled):
    """Reads until every client that can progress has its answers (see the top)."""
    last_progress = time.monotonic()
    while True:
        outstanding = [c for c in clients if c.alive and not c.answered()]
        if not outstanding:
            return
        if pooled and any(c.alive and c.answered() and c.holding() for c in clients):
            return
        left = last_progress + bound - time.monotonic()
        if left <= 0:
            raise Hang(describe_hang(clients, outstanding, bound))
        select.select([c.conn for c in outstanding], [], [], min(left, 0.5))
        for c in clients:
            if c.receive(bound):
                last_progress = time.monotonic()


def describe_hang(clients, outstanding, bound):
    parts = []
    for c in outstanding:
        got = [k for k, _ in c.stream[-6:]]
        parts.append(f"client {c.idx} got nothing for {bound:.1f} s (status {c.status}, last messages {got})")
    idle = [f"client {c.idx} (status {c.status})" for c in clients if c.alive and c.answered()]
    parts.append("no client holds the server: " + (", ".join(idle) + " idle" if idle else "none idle")
                 if outstanding else "")
    return "; ".join(p for p in parts if p)


def _close_all(clients):
    for c in clients:
        if c.conn is not None:
            c.conn.close()
            c.alive = False


def run_direct(program, address, user, bound):
    """Each client on a session of its own, one after another."""
    clients = [Client(i, steps, "direct") for i, steps in enumerate(program["clients"])]
    try:
        _connect_all(clients, address, user, None, bound)
        for c in clients:
            while c.alive and c.steps:
                c.send_step(bound)
                wait_answered([c], bound, pooled=False)
            if c.alive:
                c.leave()
    finally:
        _close_all(clients)
    return clients


def run_pooled(program, address, user, password, bound, stats):
    """The clients interleaved through pgvalve by a scheduler seeded from the program."""
    clients = [Client(i, steps, program["mode"]) for i, steps in enumerate(program["clients"])]
    for c in clients:
        c.stats = stats
    rng = random.Random(f"schedule:{program['mode']}:{program['seed']}")
    try:
        _connect_all(clients, address, user, password, bound)
        while True:
            wait_answered(clients, bound, pooled=True)
            for c in clients:
                # a program that ends without Terminate: its socket closes now, freeing the server
                if c.alive and not c.steps and c.answered():
                    c.receive(bound)
                    c.leave()
            pick = _candidates(clients)
            if not pick:
                if any(c.alive for c in clients):
                    continue
                break
            if _send_burst(clients, rng, stats, bound):
                continue
            c = rng.choice(pick)
            if not c.holding() and c.steps[0][0][0] not in ("X", "CLOSE") and \
                    any(o.holding() for o in clients if o is not c):
                stats["contended"] += 1
                c.contender = True
            c.send_step(bound)
    finally:
        _close_all(clients)
    return clients


def _burstable(c):
    """A step that leaves its client holding nothing, whoever is served first: no
    server held before it, and it ends with its own Sync or Query opening no block."""
    if not (c.alive and c.steps and c.answered()) or c.holding():
        return False
    step = c.steps[0]
    if step[-1][0] not in ("S", "Q", "COPYIN"):
        return False
    for m in step:
        if m[0] == "Q" and any(grammar.opens_txn(s) for s in grammar.statements_of(m[1])):
            return False
        if m[0] == "P" and grammar.opens_txn(m[2]):
            return False
    return True


def _send_burst(clients, rng, stats, bound):
    """Now and then (transaction and statement mode, nobody holding or waiting) several
    clients send at once: all but one wait in pgvalve's queue and must be served in
    turn. Whether a burst was sent."""
    if clients[0].mode == "session" or rng.random() >= BURST_P:
        return False
    if any(c.alive and (c.holding() or not c.answered()) for c in clients):
        return False
    group = [c for c in clients if _burstable(c)]
    if len(group) < 2:
        return False
    chosen = rng.sample(group, rng.randint(2, len(group)))
    for i, c in enumerate(chosen):
        c.contender = i > 0
        c.send_step(bound)
    stats["contended"] += len(chosen) - 1
    return True


def _expects_answer(step):
    kinds = [m[0] for m in step]
    return any(k in ("Q", "S", "COPYIN") for k in kinds) or (
        "H" in kinds and any(k in pgwire.EXT_MESSAGES for k in kinds[:kinds.index("H")]))


def _candidates(clients):
    """Clients that may send their next step now without making the run ambiguous.

    While some client waits for the server, only the one holding it (or a
    client that just leaves) goes on; a client that would have to wait
    sends only a step that is answered, so its wait can be seen."""
    idle = [c for c in clients if c.alive and c.steps and c.answered()]
    waiting = any(c.alive and not c.answered() for c in clients)
    holders = [c for c in idle if c.holding()]
    out = []
    for c in idle:
        step = c.steps[0]
        leaves = step[0][0] in ("X", "CLOSE")
        if c.holding() or leaves:
            out.append(c)
        elif not waiting and (not holders or _expects_answer(step)):
            out.append(c)
    return out
