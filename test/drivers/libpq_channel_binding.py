"""SCRAM-SHA-256-PLUS with libpq 18 (the one psycopg's binary wheel bundles,
built with OpenSSL): channel_binding=require logs in through pgvalve over
TLS; through a TLS-terminating proxy that shows the client another
certificate (PGV_DRV_PROXY_CERT/KEY) the same login is refused, while a
login that does not bind still goes through that proxy. Connection
settings come from PGV_DRV_* (test_drivers.c)."""
import os
import select
import socket
import ssl
import struct
import sys
import threading

import psycopg
from psycopg import pq

SSL_REQUEST = struct.pack("!II", 8, 80877103)


def conninfo(port, channel_binding):
    e = os.environ
    return (f"host={e['PGV_DRV_HOST']} port={port} dbname={e['PGV_DRV_DB']} "
            f"user={e['PGV_DRV_USER']} password={e['PGV_DRV_PASSWORD']} sslmode=require "
            f"gssencmode=disable channel_binding={channel_binding} connect_timeout=10")


def recv_exact(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed early")
        data += chunk
    return data


def relay(a, b):
    """Moves decrypted bytes both ways until one side is done."""
    while True:
        ready = [s for s in (a, b) if s.pending()] or select.select([a, b], [], [], 15)[0]
        if not ready:
            return
        for s in ready:
            other = b if s is a else a
            try:
                data = s.recv(16384)
            except ssl.SSLWantReadError:
                continue
            except (OSError, ssl.SSLError):
                return
            if not data:
                return
            other.sendall(data)


def proxy_once(target_port):
    """One connection: TLS with the client under the proxy's certificate, TLS to pgvalve, relayed."""
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(1)

    def run():
        conn, _ = lsock.accept()
        with conn:
            if recv_exact(conn, 8) != SSL_REQUEST:
                return
            conn.sendall(b"S")
            server_side = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            server_side.load_cert_chain(os.environ["PGV_DRV_PROXY_CERT"], os.environ["PGV_DRV_PROXY_KEY"])
            a = server_side.wrap_socket(conn, server_side=True)
            up = socket.create_connection((os.environ["PGV_DRV_HOST"], target_port), timeout=15)
            up.sendall(SSL_REQUEST)
            if recv_exact(up, 1) != b"S":
                return
            client_side = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            client_side.check_hostname = False
            client_side.verify_mode = ssl.CERT_NONE
            with client_side.wrap_socket(up) as b:
                relay(a, b)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return lsock, t


def through_proxy(target_port, channel_binding):
    """Logs in through a fresh proxy: None when it worked, else libpq's message."""
    lsock, t = proxy_once(target_port)
    try:
        with psycopg.connect(conninfo(lsock.getsockname()[1], channel_binding)) as conn:
            conn.execute("SELECT 1")
        return None
    except psycopg.OperationalError as exc:
        return str(exc)
    finally:
        t.join(20)
        lsock.close()


def main():
    version = pq.version()
    if version < 170000:
        raise RuntimeError(f"psycopg's libpq is {version}, not 17 or 18")
    port = int(os.environ["PGV_DRV_PORT"])
    with psycopg.connect(conninfo(port, "require")) as conn:
        assert conn.execute("SELECT current_user").fetchone()[0] == os.environ["PGV_DRV_USER"]
        assert conn.pgconn.ssl_in_use, "no TLS"
    err = through_proxy(port, "disable")
    assert err is None, f"through the proxy without binding: {err}"
    err = through_proxy(port, "require")
    assert err is not None, "channel_binding=require logged in through a proxy with another certificate"
    assert "channel binding" in err, f"refused, but not for the binding: {err}"
    print(f"ok: libpq {version}: channel_binding=require logs in; through another certificate refused ({err.strip()})")


if __name__ == "__main__":
    try:
        main()
    except Exception as exc:
        print(f"FAILED: {type(exc).__name__}: {exc}")
        sys.exit(1)
