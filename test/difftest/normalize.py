"""normalize.py - backend messages as comparable, readable lines, and the diff.

Owns the list of what may legitimately differ between a client's session
straight on PostgreSQL and the same client through pgvalve. Everything not
named here must be byte-for-byte PostgreSQL's answer:

  * BackendKeyData: pgvalve hands out its own PID and key (shown as "K").
  * The ParameterStatus messages of the login: compared as one sorted set,
    since a pooler replays what its server reported in an order of its own.
  * ErrorResponse and NoticeResponse: the F (source file), L (line) and R
    (routine) fields are left out; they name PostgreSQL's C code, not the
    client's error, and pgvalve answers some errors itself (a statement name
    the client does not have). Every other field is compared.

Server-side statement names are not normalised: a client must only ever
see its own names (issue 29).
"""
import difflib
import struct

from pgwire import error_fields

SOURCE_FIELDS = frozenset("FLR")


def _values(body):
    (n,) = struct.unpack_from("!H", body)
    pos, out = 2, []
    for _ in range(n):
        (length,) = struct.unpack_from("!i", body, pos)
        pos += 4
        if length < 0:
            out.append("NULL")
        else:
            out.append(repr(body[pos:pos + length])[1:])
            pos += length
    return out


def _row_description(body):
    (n,) = struct.unpack_from("!H", body)
    pos, cols = 2, []
    for _ in range(n):
        end = body.index(b"\0", pos)
        name = body[pos:end].decode()
        table, attnum, typ, typlen, typmod, fmt = struct.unpack_from("!IhIhih", body, end + 1)
        pos = end + 1 + 18
        cols.append(f"{name}:{typ}/{typlen}/{typmod}/f{fmt}/t{table}.{attnum}")
    return " ".join(cols)


def _copy_response(body):
    fmt, n = struct.unpack_from("!bH", body)
    cols = struct.unpack_from(f"!{n}H", body, 3)
    return f"format {fmt} columns {list(cols)}"


def _fields(body):
    f = error_fields(body)
    return " ".join(f"{k}={f[k]!r}" for k in sorted(f) if k not in SOURCE_FIELDS)


def render(kind, body):
    """One backend message as a line; the normalisations above happen here."""
    if kind == "K":
        return "K BackendKeyData"
    if kind in "EN":
        return f"{kind} {_fields(body)}"
    if kind == "S":
        name, value = body.split(b"\0")[:2]
        return f"S {name.decode()}={value.decode()}"
    if kind == "Z":
        return f"Z {chr(body[0])}"
    if kind == "D":
        return "D " + " | ".join(_values(body))
    if kind == "T":
        return "T " + _row_description(body)
    if kind == "t":
        (n,) = struct.unpack_from("!H", body)
        return f"t {list(struct.unpack_from(f'!{n}I', body, 2))}"
    if kind == "C":
        return "C " + body.rstrip(b"\0").decode()
    if kind == "R":
        return f"R {struct.unpack_from('!I', body)[0]}"
    if kind in "GHW":
        return f"{kind} {_copy_response(body)}"
    if kind == "d":
        return f"d {bytes(body)!r}"
    if kind == "A":
        return "A " + repr(body[4:])
    return f"{kind} {bytes(body)!r}" if body else kind


def login_lines(messages):
    """The login's messages: ParameterStatus as one sorted block, the rest in order."""
    params = sorted(render(k, b) for k, b in messages if k == "S")
    others = [render(k, b) for k, b in messages if k != "S"]
    return others[:-1] + params + others[-1:]


def diff(direct, pooled, label_a="postgresql", label_b="pgvalve"):
    """A unified diff of two clients' streams, or "" when equal."""
    if direct == pooled:
        return ""
    return "\n".join(difflib.unified_diff(direct, pooled, label_a, label_b, n=4, lineterm=""))
