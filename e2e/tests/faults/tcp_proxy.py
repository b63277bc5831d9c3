"""A TCP proxy in front of the API server that a test can cut and restore: connections
closed and new ones refused, as from an API server that died, then the same port
listening again. The failure-path and supervision tests both cut the extender off this
way, so it is a module of its own rather than a test module the other imports from."""

from __future__ import annotations

import contextlib
import socket
import threading

from e2e.harness.process import free_port


class TcpProxy:
    """127.0.0.1:<port> -> target, byte for byte (TLS passes through untouched).

    `cut()` closes every open connection and stops listening (new connections are
    refused, as from a dead API server); `restore()` listens on the same port again."""

    def __init__(self, target_port: int) -> None:
        self.target = ("127.0.0.1", target_port)
        self.port = free_port()
        self._lock = threading.Lock()
        self._conns: set[socket.socket] = set()
        self._listener: socket.socket | None = None

    def restore(self) -> TcpProxy:
        lst = socket.socket()
        lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        lst.bind(("127.0.0.1", self.port))
        lst.listen(64)
        self._listener = lst
        threading.Thread(target=self._accept, args=(lst,), daemon=True).start()
        return self

    def cut(self) -> None:
        with self._lock:
            lst, self._listener = self._listener, None
            conns, self._conns = self._conns, set()
        if lst is not None:
            with contextlib.suppress(OSError):
                lst.shutdown(socket.SHUT_RDWR)
            lst.close()
        for c in conns:
            with contextlib.suppress(OSError):
                c.shutdown(socket.SHUT_RDWR)
            c.close()

    def _accept(self, lst: socket.socket) -> None:
        while True:
            try:
                down, _ = lst.accept()
            except OSError:
                return
            try:
                up = socket.create_connection(self.target, timeout=5)
            except OSError:
                down.close()
                continue
            up.settimeout(None)
            with self._lock:
                if self._listener is not lst:
                    down.close()
                    up.close()
                    return
                self._conns |= {down, up}
            for a, b in ((down, up), (up, down)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
