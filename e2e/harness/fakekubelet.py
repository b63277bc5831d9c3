"""Fake nodes and a fake kubelet: pods bound to fake nodes run and finish on command.

Why: the extender decides *where* pods go; what happens after binding only matters in so far
as the rest of the system (job controller, PodGroup status, the extender's own accounting)
reacts to pod phases. A kubelet that flips phases through the status subresource, driven by
annotations, makes those reactions real and deterministic without containers.

Annotations understood (on the pod):

* ``e2e.gang-extender.io/run-seconds: "N"``: Succeeded N seconds after becoming Running.
  Without it (and without a rendezvous) a pod runs forever.
* ``e2e.gang-extender.io/fail: "true"``: Failed (exit code 1) instead of Succeeded.
* ``e2e.gang-extender.io/rendezvous: "<name>"`` + ``e2e.gang-extender.io/rendezvous-size:
  "<N>"``: the pod completes only once N pods of that group (same namespace) have each been
  Running for the run time (``run-seconds``, default 1); until then it runs forever, which
  is how a distributed job with a missing worker hangs. Once met, the group stays met.

Deletion: pods with a deletionTimestamp on fake nodes (or on no node) are force-deleted, as a
kubelet would after stopping containers.

Scale: one LIST then a WATCH for pods and for fake nodes (the generated client on raw
JSON, orjson, no model objects), an in-memory index, and a worker pool for the status
writes and deletes through :class:`~e2e.harness.rawapi.RawApi` (keep-alive connections set
up from the kubeconfig, no generated API layer). A real kubelet runs on other machines;
this one shares the machine with the schedulers being benchmarked, so its per-pod writes
take the cheaper client: about 1.0 ms of CPU per pod against 2.0-2.1 ms through the
generated client with every response read (and 10 ms with responses left unread, each call
then opening a new TLS connection); ``python -m lab.experiments.kubelet_writes`` measures it.

The parts: :mod:`e2e.harness.fakenodes` (the Node objects and node CRUD, and which
provisioner-made nodes lose the ``not-ready`` taint), :mod:`e2e.harness.kubelet.pod` (the
annotations above), :mod:`e2e.harness.kubelet.loop` (LIST + WATCH and the decisions) and
:mod:`e2e.harness.kubelet.life` (timers and status writes, which the loop holds and calls)
and :mod:`e2e.harness.kubelet.writes` (the client those writes go through). This module
is what tests hold, :class:`FakeKubelet` (node CRUD plus the loop as a child process or a
thread), and the process's entry point: starting, stopping and the command line in one
place.

Run it as a process (preferred, survives test-runner oddities)::

    python -m e2e.harness.fakekubelet --kubeconfig admin.kubeconfig

or in-process with :meth:`KubeletLoop.start_thread` on the loop :func:`make_kubelet`
wires. Nodes are created through :class:`FakeNodes` (plain API calls; the loop discovers
them by label).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from collections.abc import Sequence
from typing import Any

from .base import REPO_ROOT
from .clusterbase import Cluster
from .fakenodes import FAKE_NODE_SELECTOR, FakeNodes
from .k8s import client, config
from .kubelet.loop import READY_LINE, KubeletLoop, make_kubelet
from .process import ManagedProcess
from .readiness import log_contains


class FakeKubelet(FakeNodes):
    """Fake nodes plus the kubelet loop, as a child process (default) or a thread.

    A process is preferred: it keeps running whatever the test process does (a debugger
    stop, a stuck fixture, pytest-timeout's signal) and its log sits next to the other
    components' logs in failure messages.
    """

    def __init__(self, cluster: Cluster, in_process: bool = False) -> None:
        self.cluster = cluster
        self._api = cluster.api_client()
        super().__init__(self._api)
        self.in_process = in_process
        self.process: ManagedProcess | None = None
        self.loop: KubeletLoop | None = None

    def start(self) -> FakeKubelet:
        """Start the loop; returns once it has listed nodes and pods."""
        if self.in_process:
            self.loop = make_kubelet(self.cluster.api_client()).start_thread()
            return self
        env = {"PYTHONPATH": os.pathsep.join(
            [str(REPO_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
        self.process = self.cluster.start_process(
            [sys.executable, "-m", "e2e.harness.fakekubelet",
             "--kubeconfig", str(self.cluster.kubeconfig)],
            "fake-kubelet", env=env, cwd=REPO_ROOT, ready=log_contains(READY_LINE),
            ready_timeout=60)
        return self

    def stop(self) -> None:
        """Stop the loop (by pid for the process)."""
        if self.process is not None:
            self.process.stop()
        if self.loop is not None:
            self.loop.stop()
        self._api.close()


# ----------------------------------------------------------------------------------------
# CLI


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m e2e.harness.fakekubelet --kubeconfig K``: run until SIGTERM/SIGINT."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("--node-selector", default=FAKE_NODE_SELECTOR)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO, stream=sys.stdout,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s", force=True)
    logging.getLogger("urllib3").setLevel(logging.WARNING)
    logging.getLogger("kubernetes").setLevel(logging.WARNING)
    cfg = client.Configuration()
    config.load_kube_config(config_file=args.kubeconfig, client_configuration=cfg)
    cfg.connection_pool_maxsize = args.workers + 4
    loop = make_kubelet(client.ApiClient(cfg), args.node_selector, args.workers)

    def on_signal(signum: int, _frame: Any) -> None:
        loop.stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    loop.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
