"""pgwire.py - the PostgreSQL v3 protocol as the differential test speaks it.

Owns: encoding frontend messages, framing backend messages, and one
non-blocking socket connection that logs in (trust, cleartext, md5) and
reads with a deadline. Knows nothing of sequences, pooling or comparison.
"""
import hashlib
import select
import socket
import struct
import time

PROTOCOL_V3 = 196608
# A backend message longer than this is a broken stream, not data.
MAX_MESSAGE = 1 << 26
# Terminal answers of the extended protocol: one per Parse, Bind, Describe,
# Execute or Close (ErrorResponse ends the batch instead).
EXT_TERMINAL = frozenset(b"123nTCIs")
EXT_MESSAGES = frozenset("PBDEC")


class ProtocolError(Exception):
    """The backend sent something that is not a v3 message stream."""


def _cstr(text):
    return text.encode() + b"\0"


def _msg(kind, body=b""):
    return kind + struct.pack("!I", len(body) + 4) + body


def startup(params):
    body = struct.pack("!I", PROTOCOL_V3)
    body += b"".join(_cstr(k) + _cstr(v) for k, v in params.items()) + b"\0"
    return struct.pack("!I", len(body) + 4) + body


def param_bytes(value):
    """A Bind parameter as the generator writes it: None, text, or {"bin": hex}."""
    if value is None:
        return None
    if isinstance(value, dict):
        return bytes.fromhex(value["bin"])
    return value.encode()


def encode(msg):
    """One frontend message from its JSON form (see grammar.py), as bytes."""
    kind = msg[0]
    if kind == "Q":
        return _msg(b"Q", _cstr(msg[1]))
    if kind == "P":
        _, name, sql, types = msg
        return _msg(b"P", _cstr(name) + _cstr(sql) + struct.pack("!H", len(types)) +
                    b"".join(struct.pack("!I", t) for t in types))
    if kind == "B":
        _, portal, stmt, formats, params, result_formats = msg
        body = _cstr(portal) + _cstr(stmt) + struct.pack("!H", len(formats))
        body += b"".join(struct.pack("!H", f) for f in formats)
        body += struct.pack("!H", len(params))
        for p in params:
            raw = param_bytes(p)
            body += struct.pack("!i", -1) if raw is None else struct.pack("!I", len(raw)) + raw
        body += struct.pack("!H", len(result_formats))
        body += b"".join(struct.pack("!H", f) for f in result_formats)
        return _msg(b"B", body)
    if kind == "D":
        return _msg(b"D", msg[1].encode() + _cstr(msg[2]))
    if kind == "E":
        return _msg(b"E", _cstr(msg[1]) + struct.pack("!I", msg[2]))
    if kind == "C":
        return _msg(b"C", msg[1].encode() + _cstr(msg[2]))
    if kind == "H":
        return _msg(b"H")
    if kind == "S":
        return _msg(b"S")
    if kind == "X":
        return _msg(b"X")
    if kind == "d":
        return _msg(b"d", msg[1].encode())
    if kind == "c":
        return _msg(b"c")
    if kind == "f":
        return _msg(b"f", _cstr(msg[1]))
    raise ValueError(f"no encoding for message {msg!r}")


class Conn:
    """A socket to PostgreSQL or pgvalve: buffered, non-blocking, deadline-bound."""

    def __init__(self, sock):
        self.sock = sock
        self.sock.setblocking(False)
        self.buf = bytearray()
        self.eof = False

    @classmethod
    def open(cls, address, timeout):
        """address: (host, port) for TCP, or a Unix socket path."""
        if isinstance(address, str):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        else:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(timeout)
        try:
            sock.connect(address)
        except OSError:
            sock.close()
            raise
        return cls(sock)

    def fileno(self):
        return self.sock.fileno()

    def close(self):
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def send(self, data, timeout):
        """Writes all of data, reading meanwhile so a full pipe cannot deadlock.
        False if the peer closed first."""
        view = memoryview(data)
        deadline = time.monotonic() + timeout
        while view:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("send timed out")
            readable, writable, _ = select.select([self.sock], [self.sock], [], left)
            if readable and not self.eof:
                self._recv()
            if writable:
                try:
                    n = self.sock.send(view)
                except (BrokenPipeError, ConnectionResetError):
                    return False
                except BlockingIOError:
                    continue
                view = view[n:]
        return True

    def _recv(self):
        try:
            data = self.sock.recv(65536)
        except BlockingIOError:
            return False
        except ConnectionResetError:
            data = b""
        if not data:
            self.eof = True
            return False
        self.buf += data
        return True

    def pump(self):
        """Reads what is there without waiting; whether anything (or EOF) came."""
        if self.eof:
            return False
        got = False
        while self._recv():
            got = True
        return got or self.eof

    def next_message(self):
        """The next complete backend message buffered, as (type char, body), or None."""
        if len(self.buf) < 5:
            return None
        kind = chr(self.buf[0])
        (length,) = struct.unpack_from("!I", self.buf, 1)
        if length < 4 or length > MAX_MESSAGE:
            raise ProtocolError(f"message {kind!r} of length {length}")
        if len(self.buf) < 1 + length:
            return None
        body = bytes(self.buf[5:1 + length])
        del self.buf[:1 + length]
        return kind, body

    def messages(self):
        """Every complete backend message buffered so far."""
        out = []
        while (m := self.next_message()) is not None:
            out.append(m)
        return out

    def read_until(self, done, timeout):
        """Messages until done(kind, body) is true for one of them; raises TimeoutError."""
        got = []
        deadline = time.monotonic() + timeout
        while True:
            while (m := self.next_message()) is not None:
                got.append(m)
                if done(*m):
                    return got
            if self.eof:
                raise ConnectionError(f"closed by the peer after {[k for k, _ in got]}")
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no answer within {timeout} s after {[k for k, _ in got]}")
            select.select([self.sock], [], [], left)
            self.pump()


def md5_password(user, password, salt):
    inner = hashlib.md5((password + user).encode()).hexdigest()
    return "md5" + hashlib.md5(inner.encode() + salt).hexdigest()


def login(conn, user, database, password, timeout):
    """Startup and authentication up to ReadyForQuery; returns every message received."""
    conn.send(startup({"user": user, "database": database}), timeout)
    return finish_login(conn, user, password, timeout)


def finish_login(conn, user, password, timeout):
    """The rest of a login whose StartupMessage was sent: authentication up to
    ReadyForQuery. Returns every message received."""
    got = []
    deadline = time.monotonic() + timeout
    while True:
        left = max(0.0, deadline - time.monotonic())
        for kind, body in conn.read_until(lambda k, b: k in "RZE", left):
            got.append((kind, body))
            if kind == "E":
                raise ConnectionError(f"login refused: {error_fields(body)}")
            if kind == "Z":
                return got
            if kind == "R":
                _answer_auth(conn, user, password, body, timeout)


def _answer_auth(conn, user, password, body, timeout):
    (code,) = struct.unpack_from("!I", body)
    if code == 0:
        return
    if code == 3:
        conn.send(_msg(b"p", _cstr(password)), timeout)
    elif code == 5:
        conn.send(_msg(b"p", _cstr(md5_password(user, password, body[4:8]))), timeout)
    else:
        raise ConnectionError(f"authentication request {code} not supported by the difftest")


def error_fields(body):
    """An ErrorResponse or NoticeResponse body as {field char: text}."""
    fields = {}
    for part in body.split(b"\0"):
        if part:
            fields[chr(part[0])] = part[1:].decode(errors="replace")
    return fields
