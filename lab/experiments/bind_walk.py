"""Question: does a bind that commits a gang go back and forth between the core's modules
(issue 29)? Answer, before and after the reservation ledger: docs/architecture.md, "How
the walk of a bind call is counted".

Which functions a bind call walks through, and how often it returns to a file it left.

It drives the gang manager with plain data (a gang of 3 on 3 nodes; two members' binds
wait, the third's commits the gang) and records, with `sys.setprofile`, every call into
a function defined under extender/ from the moment `Bind.bind` is entered for the third
bind until it returns. Not counted: comprehensions and lambdas (expressions inside a
function), properties and whatever they call (they read as attributes), and a function
called again from the same caller (a loop's iterations are one stop). It prints each
stop (file:function), then:

* stops: calls counted;
* files: distinct files among them;
* returns: entries into a file that the walk had already left (consecutive stops in one
  file are one visit; a visit to a file seen earlier in the walk is a return).

    PYTHONPATH=$PWD python -m lab.experiments.bind_walk
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import FrameType
from typing import Any

import extender
from extender.core.manager import GangManager
from extender.core.model.config import Config
from extender.core.model.types import GROUP_LABEL, GroupInfo, NodeInfo, PodInfo
from extender.core.model.vocabulary import BindPod
from extender.core.wiring import Core

ROOT = str(Path(extender.__file__).resolve().parent) + "/"
SKIP = {"<genexpr>", "<listcomp>", "<dictcomp>", "<setcomp>", "<lambda>"}


def _cluster() -> tuple[GangManager, list[PodInfo], list[str]]:
    # The bind barrier: the walk counted is the third bind request's, which commits.
    m = GangManager(Core.wire(Config(direct_commit=False)))
    names = [f"n{i}" for i in range(3)]
    for n in names:
        m.on_node(NodeInfo(name=n, allocatable={"cpu": 4000, "memory": 8 << 30, "pods": 110},
                           labels={"kubernetes.io/hostname": n}))
    m.on_group(GroupInfo(namespace="ns", name="g", min_member=3, uid="g-uid"), 0.0)
    pods = [PodInfo(uid=f"u{i}", namespace="ns", name=f"p{i}",
                    requests={"cpu": 1000, "memory": 1 << 30, "pods": 1},
                    labels={GROUP_LABEL: "g"}, scheduler_name="gang-scheduler")
            for i in range(3)]
    for p in pods:
        m.on_pod(p, 0.0)
    return m, pods, names


def _property_codes() -> set[object]:
    """Code of every property getter under extender/: a property reads as an attribute,
    so it is not a stop."""
    out: set[object] = set()
    for name, mod in list(sys.modules.items()):
        if not name.startswith("extender."):
            continue
        for obj in vars(mod).values():
            if isinstance(obj, type) and obj.__module__ == name:
                for attr in vars(obj).values():
                    if isinstance(attr, property) and attr.fget is not None:
                        out.add(attr.fget.__code__)
    return out


def walk() -> list[tuple[str, str]]:
    m, pods, names = _cluster()
    nodes = []
    for p in pods:
        r = m.filter(p, names, 1.0)
        nodes.append(r.nodes[0] if r.nodes else names[0])
    for p, n in zip(pods[:-1], nodes[:-1], strict=True):
        m.bind(p.namespace, p.name, p.uid, n, 2.0)
    props = _property_codes()
    stops: list[tuple[str, str]] = []
    seen: dict[tuple[int, object], int] = {}  # (parent stop, callee) -> stop: loops once
    stack: list[int] = []  # per Python frame: the index of the stop it counts under
    started = [False]

    def prof(frame: FrameType, event: str, arg: Any) -> None:
        if event == "return":
            if stack:
                stack.pop()
            return
        if event != "call":
            return
        code = frame.f_code
        parent = stack[-1] if stack else -1
        if code in props or parent == -2:
            stack.append(-2)  # a property and all it calls read as one attribute
            return
        counted = code.co_filename.startswith(ROOT) and code.co_name not in SKIP
        if not started[0]:
            if not (counted and code.co_filename.endswith("core/bind.py")
                    and code.co_name == "bind"):
                return
            started[0] = True
        if counted and (parent, code) in seen:
            stack.append(seen[parent, code])
        elif counted:
            seen[parent, code] = len(stops)
            stops.append((code.co_filename[len(ROOT):], code.co_qualname))
            stack.append(len(stops) - 1)
        else:
            stack.append(parent)

    last = pods[-1]
    sys.setprofile(prof)
    try:
        m.bind(last.namespace, last.name, last.uid, nodes[-1], 3.0)
    finally:
        sys.setprofile(None)
    binds = [a for a in m.take_actions() if isinstance(a, BindPod)]
    assert len(binds) == 3, f"the walked bind did not commit the gang: {binds}"
    return stops


def count(stops: list[tuple[str, str]]) -> tuple[int, int, int]:
    visits: list[str] = []
    for f, _ in stops:
        if not visits or visits[-1] != f:
            visits.append(f)
    seen: set[str] = set()
    returns = 0
    for f in visits:
        returns += f in seen
        seen.add(f)
    return len(stops), len(seen), returns


def main() -> None:
    stops = walk()
    for f, q in stops:
        print(f"  {f}:{q}")
    n, files, returns = count(stops)
    print(f"stops {n}, files {files}, returns to a file already left {returns}")


if __name__ == "__main__":
    main()
