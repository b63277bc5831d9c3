"""bench/e2e/floor.py: the floor's bare client binds every pod it is given, once, to the
nodes in turn, only when told to (its connections opened before), and a failed Binding
fails the run with the pod named instead of leaving a floor that looks fast because it
bound fewer pods."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from bench.e2e.floor import FloorBinder, assign, binding


class FakeApi:
    def __init__(self, fail: str = "") -> None:
        self.fail = fail
        self.lock = threading.Lock()
        self.calls: list[tuple[str, str, Any]] = []
        self.threads: set[int] = set()

    def request(self, method: str, path: str, body: Any = None) -> bytes:
        with self.lock:
            self.calls.append((method, path, body))
            self.threads.add(threading.get_ident())
        if body is not None and body["metadata"]["name"] == self.fail:
            raise OSError("connection reset")
        return b"{}"


def test_pods_go_to_the_nodes_in_turn() -> None:
    assert assign(["p0", "p1", "p2"], ["n0", "n1"]) == [("p0", "n0"), ("p1", "n1"),
                                                        ("p2", "n0")]
    with pytest.raises(ValueError, match="no node to bind 3 pods"):
        assign(["p0", "p1", "p2"], [])
    assert binding("ns", "p0", "n0") == {
        "apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p0", "namespace": "ns"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "n0"}}


def test_every_pod_is_bound_once_and_only_after_bind() -> None:
    api = FakeApi()
    binder = FloorBinder(api, "ns", threads=4)  # type: ignore[arg-type]
    # Constructed: each thread has opened its connection and waits.
    assert [c[0] for c in api.calls] == ["GET"] * 4 and len(api.threads) == 4
    pairs = assign([f"p{i}" for i in range(50)], ["n0", "n1", "n2"])
    binder.bind(pairs)
    posts = [(p, b["target"]["name"]) for m, p, b in api.calls if m == "POST"]
    assert sorted(posts) == sorted((f"/api/v1/namespaces/ns/pods/{p}/binding", n)
                                   for p, n in pairs)


def test_a_failed_binding_fails_the_floor_naming_the_pod() -> None:
    binder = FloorBinder(FakeApi(fail="p3"), "ns", threads=2)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="1 of 5 floor Bindings failed, first: binding "
                                           "p3 to n0: connection reset"):
        binder.bind(assign([f"p{i}" for i in range(5)], ["n0"]))
    with pytest.raises(ValueError, match="at least 1, got 0"):
        FloorBinder(FakeApi(), "ns", threads=0)  # type: ignore[arg-type]
