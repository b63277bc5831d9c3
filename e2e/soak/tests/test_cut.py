"""The soak's watch cuts (cut.py) without a cluster: the proxy passes bytes both ways, a
cut resets what is open and refuses new connections for the outage, and the chaos
timeline draws the cuts after everything else, so a seed's other chaos stays where it
was."""

from __future__ import annotations

import random
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from e2e.soak.chaos import chaos_timeline
from e2e.soak.config import SoakConfig
from e2e.soak.cut import ApiCut


@pytest.fixture
def echo() -> Iterator[int]:
    """A server that echoes every connection (the API server's stand-in)."""
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(16)

    def serve(c: socket.socket) -> None:
        with c:
            while data := c.recv(4096):
                c.sendall(data)

    def accept() -> None:
        while True:
            try:
                c, _ = lst.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(c,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    yield lst.getsockname()[1]
    lst.close()


def _talk(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(b"ping")
    assert s.recv(4) == b"ping"
    return s


def _closed(s: socket.socket) -> bool:
    """The peer closed or reset it: a read ends at once."""
    try:
        return s.recv(1) == b""
    except OSError:
        return True


def test_a_cut_resets_open_connections_and_refuses_new_ones_for_the_outage(echo: int) -> None:
    cut = ApiCut(echo).start()
    try:
        a, b = _talk(cut.port), _talk(cut.port)
        assert cut.cut(outage=0.5) == 2
        assert _closed(a) and _closed(b)
        during = socket.create_connection(("127.0.0.1", cut.port), timeout=5)
        assert _closed(during)  # within the outage: closed as soon as accepted
        time.sleep(0.6)
        _talk(cut.port).close()  # after it: through again
        assert (cut.cuts, cut.reset_connections) == (1, 2)
    finally:
        cut.stop()


def test_watch_cuts_are_drawn_after_the_rest_of_the_timeline() -> None:
    base = SoakConfig(seed=3)
    cuts = SoakConfig(seed=3, watch_cut_every=20.0)
    without = chaos_timeline(random.Random(3), base, 300.0)
    with_cuts = chaos_timeline(random.Random(3), cuts, 300.0)
    assert [e for e in with_cuts if e[1] != "watchcut"] == without
    assert sum(1 for _, kind in with_cuts if kind == "watchcut") > 3
    assert not any(kind == "watchcut" for _, kind in without)
