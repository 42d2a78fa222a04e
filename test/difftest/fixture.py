"""fixture.py - the PostgreSQL cluster of test/integration/run.sh and the
pgvalve instances the differential test starts on it.

Owns: reading the PGV_TEST_* environment run.sh exports, the clients'
tables (created and reset through a direct admin session), and starting
and stopping pgvalve the way test/integration/harness.c does (an instance
dir under PGV_TEST_DIR with ini, userlist, log and pidfile; -u
PGV_TEST_RUNAS as root; a free port, never a fixed one). run.sh sweeps
whatever an interrupted run leaves.
"""
import os
import pwd
import random
import signal
import socket
import subprocess
import time

import pgwire

USER, PASSWORD, DATABASE = "scram_user", "scram_pass", "pgvtest"
SANITIZER_MARKS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                   "ERROR: UndefinedBehaviorSanitizer")


class Cluster:
    """The cluster run.sh started (PGV_TEST_*)."""

    def __init__(self):
        env = os.environ
        self.dir = env["PGV_TEST_DIR"]
        self.port = int(env["PGV_TEST_PGPORT"])
        self.sockdir = env["PGV_TEST_PGSOCKDIR"]
        self.runas = env.get("PGV_TEST_RUNAS") or None
        self.binary = env["PGV_BINARY"]
        self.socket = f"{self.sockdir}/.s.PGSQL.{self.port}"
        self.admin = None

    def open_admin(self, timeout):
        """A session as the owner of the clients' tables, with bounded lock waits."""
        self.admin = pgwire.Conn.open(self.socket, timeout)
        pgwire.login(self.admin, USER, DATABASE, None, timeout)
        self.query("SET lock_timeout = '5s'", timeout)

    def query(self, sql, timeout):
        """Runs sql on the admin session; raises on an ErrorResponse."""
        self.admin.send(pgwire.encode(["Q", sql]), timeout)
        got = self.admin.read_until(lambda k, b: k == "Z", timeout)
        errors = [pgwire.error_fields(b) for k, b in got if k == "E"]
        if errors:
            raise RuntimeError(f"{sql[:60]}...: {errors[0].get('M')}")

    def create_tables(self, n, rows, timeout):
        sql = "; ".join(f"DROP TABLE IF EXISTS dt_{c}; CREATE TABLE dt_{c} (id int PRIMARY KEY, v text)"
                        for c in range(n))
        self.query(sql, timeout)
        self.rows = rows

    def reset_tables(self, n, timeout):
        """The first n clients' tables back to their first rows. The lock (bounded by
        lock_timeout) fails if a session is still inside a transaction that used one.
        DELETE, not TRUNCATE: a third of the cost; queries that show rows order them."""
        if n == 0:
            return
        names = ", ".join(f"dt_{c}" for c in range(n))
        self.query(f"BEGIN; LOCK TABLE {names} IN ACCESS EXCLUSIVE MODE; " + "; ".join(
            f"DELETE FROM dt_{c}; INSERT INTO dt_{c} SELECT i, 'r' || i FROM generate_series(1, {self.rows}) AS i"
            for c in range(n)) + "; COMMIT", timeout)

    def close(self):
        if self.admin is not None:
            self.admin.close()


def _listening(port):
    want = f":{port:04X}"
    for path in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(path) as f:
                for line in f.readlines()[1:]:
                    parts = line.split()
                    if parts[1].endswith(want) and parts[3] == "0A":
                        return True
        except OSError:
            pass
    return False


def _free_port(avoid):
    start = random.randrange(3000)
    for i in range(3000):
        port = 32000 + (start + i) % 3000
        if port == avoid:
            continue
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            return port
        except OSError:
            continue
        finally:
            s.close()
    raise RuntimeError("no free TCP port in 32000-34999")


class Pgvalve:
    """One pgvalve with one database on pool_size = 1 in a pool_mode."""
    serial = 0

    def __init__(self, cluster, mode, extra):
        self.cluster, self.mode, self.extra = cluster, mode, extra
        self.proc = None
        self.dir = None
        self.sanitizer_reports = []     # from every instance stopped so far

    def address(self):
        return ("127.0.0.1", self.port)

    def start(self, timeout=20):
        Pgvalve.serial += 1
        self.log_offset = 0
        c = self.cluster
        self.dir = f"{c.dir}/difftest-{os.getpid()}-{Pgvalve.serial}-{self.mode}"
        os.mkdir(self.dir, 0o755)
        self.port = _free_port(c.port)
        ini = f"""; written by test/difftest/fixture.py
[databases]
{DATABASE} = host={c.sockdir} port={c.port} dbname={DATABASE} pool_size=1

[pgvalve]
listen_addr = 127.0.0.1
listen_port = {self.port}
unix_socket_dir = {self.dir}
auth_type = trust
auth_file = {self.dir}/userlist.txt
logfile = {self.dir}/pgvalve.log
pidfile = {self.dir}/pgvalve.pid
pool_mode = {self.mode}
default_pool_size = 1
max_client_conn = 100
{self.extra}
"""
        self._write("pgvalve.ini", ini, 0o644)
        self._write("userlist.txt", f'"{USER}" "{PASSWORD}"\n', 0o600)
        self._write("pgvalve.log", "", 0o644)
        argv = [c.binary] + (["-u", c.runas] if c.runas and os.geteuid() == 0 else []) + [f"{self.dir}/pgvalve.ini"]
        with open(f"{self.dir}/stderr.log", "wb") as err:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=err, stderr=err,
                                         cwd=self.dir, start_new_session=True)
        deadline = time.monotonic() + timeout
        # pgvalve writes its pidfile once every listener is up
        while not (self._pidfile_pid() == self.proc.pid and _listening(self.port)):
            if self.proc.poll() is not None:
                raise RuntimeError(f"pgvalve exited during start-up ({self.proc.returncode}):\n{self.log_tail()}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"pgvalve not listening on port {self.port} after {timeout} s")
            time.sleep(0.02)

    def _write(self, name, text, mode):
        path = f"{self.dir}/{name}"
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, mode)
        if self.cluster.runas and os.geteuid() == 0:
            pw = pwd.getpwnam(self.cluster.runas)
            os.chown(path, pw.pw_uid, pw.pw_gid)
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)

    def _pidfile_pid(self):
        try:
            with open(f"{self.dir}/pgvalve.pid") as f:
                return int(f.readline().strip() or 0)
        except (OSError, ValueError):
            return 0

    def stop(self):
        """SIGQUIT (immediate shutdown), SIGKILL after 5 s; keeps a sanitizer report."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        report = self.sanitizer_report()
        if report:
            self.sanitizer_reports.append(report)

    def restart(self):
        self.stop()
        self.start()

    def new_log_lines(self, needle):
        """Lines of pgvalve's log holding needle, written since the last call."""
        try:
            with open(f"{self.dir}/pgvalve.log", "rb") as f:
                f.seek(self.log_offset)
                data = f.read()
        except OSError:
            return []
        end = data.rfind(b"\n") + 1
        self.log_offset += end
        return [line for line in data[:end].decode(errors="replace").splitlines() if needle in line]

    def log_tail(self, size=3000):
        out = []
        for name in ("pgvalve.log", "stderr.log"):
            try:
                with open(f"{self.dir}/{name}", "rb") as f:
                    f.seek(0, 2)
                    f.seek(max(0, f.tell() - size))
                    out.append(f"--- {name}\n" + f.read().decode(errors="replace"))
            except OSError:
                pass
        return "\n".join(out)

    def sanitizer_report(self):
        try:
            with open(f"{self.dir}/stderr.log", errors="replace") as f:
                text = f.read()
        except OSError:
            return None
        return text if any(m in text for m in SANITIZER_MARKS) else None
