"""Declared endpoints through the sandbox: a run reaches the host:port pairs its task names
(`network`, and for the grader also `grader_network`) and nothing else.

The sandbox keeps its own network namespace (bwrap --unshare-net: a loopback of its own,
no route out, the host's loopback unreachable). For each declared endpoint the engine
listens on a unix socket in a folder bound read-only into the sandbox and forwards every
connection to that one host:port; inside, a small bridge (BRIDGE_PY, the sandbox's first
process) listens on the same address and port on the sandbox's own loopback and passes
each connection to the endpoint's socket, then runs the experiment's command. So a client
inside connects to `127.0.0.1:8000` as it would outside, the only way out is a socket
that leads to one declared endpoint, and an undeclared port finds nothing listening.

A host name (`judge.example.org:8443`) is mapped in the sandbox's /etc/hosts to a
loopback address of its own (127.0.0.2, ...), and resolved outside, by the engine, when a
connection is made. Limits: inside, a port below 1024 can only be listened on where the
sandbox runs as root (an unprivileged user namespace may not bind it): the bridge then
stops with a line saying so; use a port >= 1024 (a local forward, or the provider's
alternative port). Only TCP is forwarded (no UDP, no DNS)."""
from __future__ import annotations

import socket
import sys
import tempfile
import threading
from pathlib import Path

from loop.setup.endpoints import is_ip, parse

ENV = "AUTORESEARCH_NETWORK"      # the endpoints a step may reach, space-separated
CHUNK = 1 << 16


def endpoints_from(env: dict) -> list[str]:
    return sorted(set(env.get(ENV, "").split()))


def inside_addresses(endpoints: list[str]) -> dict[str, str]:
    """Where each endpoint listens inside the sandbox: a loopback address stays itself,
    `localhost` is 127.0.0.1, each other host name gets 127.0.0.2, 127.0.0.3, ..."""
    names = sorted({parse(e)[0] for e in endpoints} - {"localhost"}
                   - {h for h in (parse(e)[0] for e in endpoints) if is_ip(h)})
    mapped = {name: f"127.0.0.{i + 2}" for i, name in enumerate(names)}
    out = {}
    for e in endpoints:
        host, port = parse(e)
        addr = "127.0.0.1" if host == "localhost" else host if is_ip(host) else mapped[host]
        out[e] = f"{addr}:{port}"
    return out


class Bridge:
    """The engine's side for one sandboxed command: a unix socket per endpoint, forwarding
    to it. `argv(command)` wraps the command in the inner bridge; `readonly` and
    `hosts_file` are what the sandbox must show. Close it when the command has ended."""

    def __init__(self, endpoints: list[str]):
        self.endpoints = sorted(set(endpoints))
        for e in self.endpoints:
            parse(e)
        # short, under /tmp: a unix socket's path is limited to 107 bytes
        self.folder = Path(tempfile.mkdtemp(prefix="ar-net-"))
        self.inside = inside_addresses(self.endpoints)
        self.servers: list[socket.socket] = []
        self.stopped = threading.Event()
        self.pairs = []
        for i, e in enumerate(self.endpoints):
            path = self.folder / f"{i}.sock"
            server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            server.bind(str(path))
            server.listen(64)
            self.servers.append(server)
            self.pairs.append(f"{self.inside[e]}={path}")
            threading.Thread(target=self._accept, args=(server, parse(e)), daemon=True).start()
        (self.folder / "bridge.py").write_text(BRIDGE_PY)
        self.hosts_file = None
        names = {parse(e)[0]: self.inside[e].rsplit(":", 1)[0] for e in self.endpoints
                 if not is_ip(parse(e)[0]) and parse(e)[0] != "localhost"}
        if names:
            self.hosts_file = self.folder / "hosts"
            self.hosts_file.write_text("127.0.0.1 localhost\n::1 localhost\n" + "".join(
                f"{addr} {name}\n" for name, addr in sorted(names.items())))

    @property
    def readonly(self) -> list[str]:
        return [str(self.folder)]

    def argv(self, command: list[str]) -> list[str]:
        return [sys.executable, "-I", "-S", str(self.folder / "bridge.py"), *self.pairs,
                "--", *command]

    def _accept(self, server: socket.socket, target: tuple[str, int]) -> None:
        while not self.stopped.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=self._connect, args=(conn, target), daemon=True).start()

    def _connect(self, conn: socket.socket, target: tuple[str, int]) -> None:
        try:
            upstream = socket.create_connection(target, timeout=30)
            upstream.settimeout(None)
        except OSError:
            conn.close()            # the client sees the connection closed, as refused
            return
        _splice(conn, upstream)

    def close(self) -> None:
        self.stopped.set()
        for server in self.servers:
            try:
                server.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            server.close()
        import shutil
        shutil.rmtree(self.folder, ignore_errors=True)


def _splice(a: socket.socket, b: socket.socket) -> None:
    """Copy both ways until either side closes."""
    def pump(src, dst):
        try:
            while True:
                data = src.recv(CHUNK)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            try:
                dst.shutdown(socket.SHUT_WR)
            except OSError:
                pass
    t = threading.Thread(target=pump, args=(b, a), daemon=True)
    t.start()
    pump(a, b)
    t.join()
    a.close()
    b.close()


# The sandbox's side, run with `python -I -S` (stdlib only: the run's packages are not
# needed). argv: ADDR:PORT=SOCKET ... -- COMMAND...
BRIDGE_PY = r'''
import os, signal, socket, subprocess, sys, threading

def pump(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass

def serve(server, path):
    while True:
        conn, _ = server.accept()
        def handle(conn=conn):
            up = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                up.connect(path)
            except OSError:
                conn.close()
                return
            t = threading.Thread(target=pump, args=(up, conn), daemon=True)
            t.start()
            pump(conn, up)
            t.join()
            conn.close()
            up.close()
        threading.Thread(target=handle, daemon=True).start()

split = sys.argv.index("--")
for pair in sys.argv[1:split]:
    where, path = pair.split("=", 1)
    addr, port = where.rsplit(":", 1)
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        server.bind((addr, int(port)))
    except OSError as exc:
        print(f"sandbox network: cannot listen on {where} inside the sandbox ({exc.strerror})"
              + ("; ports below 1024 need root here: use a port >= 1024" if int(port) < 1024
                 else ""), file=sys.stderr, flush=True)
        sys.exit(126)
    server.listen(64)
    threading.Thread(target=serve, args=(server, path), daemon=True).start()
child = subprocess.Popen(sys.argv[split + 1:])
for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(sig, lambda s, f: child.send_signal(s))
code = child.wait()
sys.exit(code if code >= 0 else 128 - code)
'''
