"""Command line: `gang-extender serve` runs the extender (the demo is `make demo`).

The flags, their checks, the settings they make, the event loop and the exit status:
what an operator types. Which part feeds which once the flags are read is
`extender/serve.py`, imported only to serve, so that `--help` and a usage error load
neither uvicorn nor the adapters.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Sequence

from extender.core.model.config import BackoffPolicy, Config
from extender.core.model.provisioning_request import ATOMIC_CLASS
from extender.deprecated import add_deprecated_flag, warn_deprecated
from extender.kube.leader import LeaseRef

# What `--help` says above the commands.
DESCRIPTION = "Command line: `gang-extender serve` runs the extender (the demo is `make demo`)."
# The lease of the shipped scheduler configuration (deploy/scheduler-config.yaml).
DEFAULT_LEASE = LeaseRef("gang-scheduler-system", "gang-scheduler")


def _host_port(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not (0 < int(port) < 65536):
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {value!r}")
    return host or "127.0.0.1", int(port)


def _number(value: str, zero_ok: bool) -> float:
    try:
        f = float(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected a number, got {value!r}") from exc
    if f < 0 or (f == 0 and not zero_ok) or f != f:
        kind = "zero or a positive number" if zero_ok else "a positive number"
        raise argparse.ArgumentTypeError(f"expected {kind}, got {value!r}")
    return f


def _positive(value: str) -> float:
    return _number(value, zero_ok=False)


def _non_negative(value: str) -> float:
    return _number(value, zero_ok=True)


def _count(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {value!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {value!r}")
    return n


def _lease(value: str) -> LeaseRef | None:
    try:
        return LeaseRef.parse(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _switch(parser: argparse.ArgumentParser, flag: str, help: str, default: str = "on") -> None:
    """A feature an operator turns `on` or `off`: words rather than a bare flag, so a
    manifest states the value it relies on whatever the default becomes."""
    parser.add_argument(flag, choices=("on", "off"), default=default, help=help)


def _seconds(parser: argparse.ArgumentParser, flag: str, default: float, help: str,
             off_at_zero: bool = False) -> None:
    """A duration in seconds: a positive number, or 0 too where 0 turns the feature off;
    anything else (a negative, NaN, a word) is a usage error naming the flag."""
    parser.add_argument(flag, type=_non_negative if off_at_zero else _positive,
                        default=default, help=help)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gang-extender", description=DESCRIPTION)
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the extender for kube-scheduler")
    serve.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster, then ~/.kube)")
    serve.add_argument("--listen", type=_host_port, default=("127.0.0.1", 8888),
                       help="HOST:PORT for the extender verbs (default 127.0.0.1:8888)")
    serve.add_argument("--metrics-listen", type=_host_port, default=None,
                       help="extra HOST:PORT serving only /metrics, /healthz and /readyz, "
                            "for probes and scraping from outside the pod (they are always "
                            "served on --listen too; the verbs never are on this one)")
    _seconds(serve, "--default-timeout", 60.0,
             "seconds a reservation waits for its quorum to bind when the "
             "PodGroup sets no scheduleTimeoutSeconds (default 60)")
    _seconds(serve, "--max-schedule-timeout", 600.0,
             "longest a reservation waits for its quorum to bind, whatever "
             "the PodGroup's scheduleTimeoutSeconds asks: what one tenant's "
             "gang can hold capacity for. 0 turns the cap off (default 600)",
             off_at_zero=True)
    _seconds(serve, "--backoff-base", 10.0,
             "seconds a gang backs off after its first timeout; doubles each "
             "time (default 10)")
    _seconds(serve, "--backoff-cap", 300.0, "longest backoff in seconds (default 300)")
    serve.add_argument("--backoff-limit", type=int, default=None,
                       help="timeouts after which the PodGroup is marked Failed "
                            "(default: retry forever)")
    _seconds(serve, "--bind-wait-limit", 240.0,
             "longest a single bind request waits for its gang, in seconds; "
             "keep it below the bind extender entry's httpTimeout (default 240)")
    add_deprecated_flag(serve, "--bind-hold-limit", type=_positive)
    serve.add_argument("--binding-concurrency", type=_count, default=128,
                       help="Binding POSTs in flight at once when a gang commits; the rest "
                            "queue in order (default 128; docs/performance.md measures it)")
    _switch(serve, "--warm-connections",
            "while a gang's members are being created, open the connections its commit's "
            "Bindings will use (up to the Binding concurrency), each with one GET /version, "
            "instead of at the commit (default on)")
    _seconds(serve, "--assembly-wait", 1.5,
             "longest a gang member's filter call waits for the rest of a "
             "gang that is still being created, in seconds, instead of "
             "turning it away into kube-scheduler's 1-2 s pod backoff; only "
             "while the members arrive fast enough to be complete within it. "
             "It holds kube-scheduler's loop: keep it well below the filter "
             "entry's httpTimeout. 0 turns it off (default 1.5)",
             off_at_zero=True)
    _seconds(serve, "--commit-wait", 1.0,
             "longest a gang member's filter call, answered with its node "
             "(or turned away though bound on a node kube-scheduler did "
             "not pass), waits until the Bindings of the commits under way are seen "
             "by the watch, in seconds, so that kube-scheduler's queue drops "
             "those members instead of running a scheduling cycle for each. "
             "It holds kube-scheduler's loop: the assembly wait plus this "
             "must stay well below the filter entry's httpTimeout. 0 turns "
             "it off (default 1)",
             off_at_zero=True)
    _seconds(serve, "--assembly-gap", 0.5,
             "the wait goes on only while the gang's newest member arrived "
             "less than this many seconds ago (default 0.5)")
    _switch(serve, "--podgroup-status",
            "write PodGroup status (phase, counts, conditions). off when another controller "
            "owns it, for example scheduler-plugins' PodGroup controller; /debug/podgroups "
            "and the metrics still show the computed status (default on)")
    _switch(serve, "--events", "post Kubernetes Events on PodGroups and pods (default on)")
    serve.add_argument("--pod-watch", choices=("json", "protobuf"), default="json",
                       help="encoding of the watch of all pods. protobuf spares "
                            "kube-apiserver a JSON encoding of every pod event when no "
                            "other client watches pods in JSON, and costs the extender "
                            "more CPU per event (docs/performance.md; default json)")
    _switch(serve, "--preemption",
            "whole-gang preemption: a gang or a plain pod of the gang scheduler that cannot "
            "be placed evicts whole lower-priority gangs and pods through the Eviction API "
            "(docs/preemption.md; default on)")
    _switch(serve, "--provisioning-requests",
            "ask the cluster autoscaler for a gang's capacity with a ProvisioningRequest "
            "(autoscaling.x-k8s.io/v1) while that API is served, and keep reserved nodes "
            "from its scale-down; off: none is asked, and the nodes a run with it on marked "
            "are unmarked (docs/autoscaler.md)")
    serve.add_argument("--provisioning-class", default=ATOMIC_CLASS,
                       help="provisioningClassName of the requests (default %(default)s)")
    _switch(serve, "--direct-commit",
            "bind a planned gang's members as soon as it is reserved, without waiting for "
            "kube-scheduler's cycle of each; members with claim volumes, resource claims or "
            "host ports still come through kube-scheduler. off: every member waits at the "
            "bind barrier (docs/performance.md; default %(default)s)",
            default="on" if Config().direct_commit else "off")
    _seconds(serve, "--starvation-after", 30.0,
             "seconds a gang waits for capacity "
             "before the capacity of its best plan is held for it as it "
             "frees up; 0 turns the guard off (default 30)",
             off_at_zero=True)
    serve.add_argument("--scheduler-name", default="gang-scheduler",
                       help="schedulerName of the gang scheduler profile (default gang-scheduler)")
    serve.add_argument("--leader-lease", type=_lease, default=DEFAULT_LEASE,
                       help="NAMESPACE/NAME of the Lease kube-scheduler's leader election uses "
                            "(its leaderElection.resourceNamespace/resourceName): this "
                            "extender acts only while its own kube-scheduler holds it, and "
                            "stands by otherwise. off: always act (one replica, no election) "
                            f"(default {DEFAULT_LEASE})")
    serve.add_argument("--leader-identity", default=None,
                       help="what this extender's kube-scheduler puts before '_' in the "
                            "lease's holderIdentity: its hostname, the same for both "
                            "containers of a pod (default: this host's name); also the "
                            "Events' reportingInstance when given")
    serve.add_argument("--log-level", default="INFO")
    serve.add_argument(
        "--event-loop", choices=("auto", "uvloop", "asyncio"), default="auto",
        help="auto: uvloop when installed (it is a dependency on Linux), else asyncio",
    )
    return parser


def core_config(args: argparse.Namespace) -> Config:
    """The gang manager's settings from the `serve` flags; flags that contradict each
    other are a usage error, named by flag, before anything starts."""
    if args.backoff_limit is not None and args.backoff_limit < 1:
        raise SystemExit("--backoff-limit must be at least 1")
    if args.max_schedule_timeout and args.default_timeout > args.max_schedule_timeout:
        raise SystemExit(f"--default-timeout {args.default_timeout:g} exceeds "
                         f"--max-schedule-timeout {args.max_schedule_timeout:g}")
    policy = BackoffPolicy(args.backoff_base, max(args.backoff_cap, args.backoff_base),
                           args.backoff_limit)
    return Config(
        args.default_timeout, policy, assembly_wait_seconds=args.assembly_wait,
        assembly_gap_seconds=args.assembly_gap, preemption=args.preemption == "on",
        starvation_after_seconds=args.starvation_after or None,
        scheduler_name=args.scheduler_name,
        max_timeout_seconds=args.max_schedule_timeout or None,
        provisioning=args.provisioning_requests == "on",
        provisioning_class=args.provisioning_class,
        direct_commit=args.direct_commit == "on")


def _configure_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
        stream=sys.stderr,
    )
    # httpx logs every request at INFO: one line per binding and watch reconnect drowns
    # the extender's own decision lines.
    logging.getLogger("httpx").setLevel(logging.WARNING)


def _new_event_loop(kind: str) -> asyncio.AbstractEventLoop:
    """uvloop's transports (TLS included) are in C: the watch streams, Bindings and the
    verbs' sockets cost less CPU on it than on asyncio's pure-Python selector loop."""
    if kind in ("auto", "uvloop"):
        try:
            import uvloop
        except ImportError:
            if kind == "uvloop":
                raise SystemExit("--event-loop uvloop: uvloop is not installed") from None
        else:
            return uvloop.new_event_loop()
    return asyncio.new_event_loop()


def _finish_tasks(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel what is still running (waiting binds' requests, Bindings, wake-ups) and let it
    unwind, as asyncio.run does: a task destroyed while pending would be logged as an
    error on every exit."""
    pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for t in pending:
        t.cancel()
    if pending:
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
    loop.run_until_complete(loop.shutdown_asyncgens())


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "serve":
        _configure_logging(args.log_level)
        warn_deprecated(args)
        config = core_config(args)
        from extender.serve import serve  # uvicorn and the adapters: only to serve

        loop = _new_event_loop(args.event_loop)
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, lambda: [t.cancel() for t in asyncio.all_tasks(loop)])
        code = 0
        try:
            code = loop.run_until_complete(serve(args, config))
        except asyncio.CancelledError:
            pass
        finally:
            _finish_tasks(loop)
            loop.close()
        return code
    return 2


if __name__ == "__main__":
    sys.exit(main())
