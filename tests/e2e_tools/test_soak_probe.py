"""The soak's stall probe: the extender's CPU time during one `/healthz` answer, so a slow
answer on a shared machine can be told from the extender's own stall."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from e2e.harness.process import cpu_seconds
from e2e.soak.hostile import StallProbe


def test_cpu_seconds_counts_this_process_work_and_not_its_sleep() -> None:
    pid = os.getpid()
    a = cpu_seconds(pid)
    time.sleep(0.2)
    b = cpu_seconds(pid)
    end = time.thread_time() + 0.3
    while time.thread_time() < end:
        pass
    c = cpu_seconds(pid)
    assert a is not None and b is not None and c is not None
    assert b - a < 0.1
    assert c - b >= 0.25
    assert cpu_seconds(None) is None
    assert cpu_seconds(2**22 + 12345) is None  # no such process


class _Handler(BaseHTTPRequestHandler):
    """Answers after 0.3 s: spinning the CPU when `busy`, asleep otherwise."""

    busy = False

    def do_GET(self) -> None:
        end = time.thread_time() + 0.3
        if _Handler.busy:
            while time.thread_time() < end:
                pass
        else:
            time.sleep(0.3)
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def slow_server() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield int(server.server_address[1])
    server.shutdown()


@pytest.mark.parametrize("busy", [False, True])
def test_a_slow_answer_is_charged_to_the_extender_only_for_its_own_cpu(
        slow_server: int, busy: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_Handler, "busy", busy)
    probe = StallProbe(lambda: slow_server, interval=0.01, pid=os.getpid).start()
    deadline = time.monotonic() + 5
    while probe.answered < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    probe.stop()
    assert probe.answered >= 2
    assert probe.longest >= 0.29 and probe.over_250ms >= 2
    # The server runs in this process, so its CPU counts as "the extender's" here.
    if busy:
        assert probe.longest_cpu >= 0.25 and probe.cpu_over_250ms >= 1
    else:
        assert probe.longest_cpu < 0.1 and probe.cpu_over_250ms == 0
    assert all(len(s) == 3 for s in probe.slow)
