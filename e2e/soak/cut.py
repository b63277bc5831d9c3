"""Watch cuts: the extender reaches kube-apiserver through a TCP proxy of the soak's, which
the chaos can cut. A cut resets every connection the extenders hold (their watches, the
Bindings and status writes in flight) and refuses new ones for a short outage, while
kube-apiserver and every other client (kube-scheduler, the default scheduler, the
neighbours, the fake kubelet, the checker) go on: pods are bound onto the gangs' nodes
while the extender is blind, and it must list again, catch up, and not commit on what it
has not seen. Apart from the chaos because it is a piece of plumbing (a byte pump) that
the stack sets up before the extenders start.

What it does not simulate: a half-open connection that stays silent (the extender's
watch idle timeout, 120 s, is longer than the soak's outages), a watch that
kube-apiserver itself ends (410 Gone, its own request timeout), or a partition that
also cuts kube-scheduler from the API server."""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time

from e2e.harness.process import free_port

log = logging.getLogger("soak")


class ApiCut:
    """127.0.0.1:<port> -> kube-apiserver, byte for byte (TLS passes through: the
    server's certificate is for 127.0.0.1, whatever the port)."""

    def __init__(self, target_port: int) -> None:
        self.target = ("127.0.0.1", target_port)
        self.port = free_port()
        self.cuts = 0
        self.reset_connections = 0  # connections the cuts closed, over the run
        self._lock = threading.Lock()
        self._pairs: set[tuple[socket.socket, socket.socket]] = set()
        self._listener: socket.socket | None = None
        self._open_at = 0.0  # monotonic time before which new connections are closed

    def start(self) -> ApiCut:
        lst = socket.socket()
        lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        lst.bind(("127.0.0.1", self.port))
        lst.listen(128)
        self._listener = lst
        threading.Thread(target=self._accept, args=(lst,), name="soak-api-cut",
                         daemon=True).start()
        return self

    def stop(self) -> None:
        with self._lock:
            lst, self._listener = self._listener, None
        if lst is not None:
            with contextlib.suppress(OSError):
                lst.shutdown(socket.SHUT_RDWR)
            lst.close()
        self._close_all()

    def cut(self, outage: float) -> int:
        """Close every open connection, and every new one for `outage` seconds (the
        extender sees its connections reset, then refused-like failures); returns how
        many connections were open."""
        with self._lock:
            self._open_at = time.monotonic() + outage
        n = self._close_all()
        self.cuts += 1
        self.reset_connections += n
        return n

    def _close_all(self) -> int:
        with self._lock:
            pairs, self._pairs = self._pairs, set()
        for pair in pairs:
            _close(pair)
        return len(pairs)

    def _accept(self, lst: socket.socket) -> None:
        while True:
            try:
                down, _ = lst.accept()
            except OSError:
                return
            if time.monotonic() < self._open_at:
                down.close()  # within the outage: the extender's connect fails
                continue
            try:
                up = socket.create_connection(self.target, timeout=5)
            except OSError:  # kube-apiserver is down (its own restart)
                down.close()
                continue
            up.settimeout(None)
            with self._lock:
                if self._listener is not lst:
                    down.close()
                    up.close()
                    return
                self._pairs.add((down, up))
            for a, b in ((down, up), (up, down)):
                threading.Thread(target=self._pump, args=(a, b, (down, up)),
                                 daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket,
              pair: tuple[socket.socket, socket.socket]) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            with self._lock:
                self._pairs.discard(pair)
            _close(pair)


def _close(pair: tuple[socket.socket, socket.socket]) -> None:
    """Shut down first: it wakes the other direction's pump blocked in recv."""
    for s in pair:
        with contextlib.suppress(OSError):
            s.shutdown(socket.SHUT_RDWR)
    for s in pair:
        with contextlib.suppress(OSError):
            s.close()
