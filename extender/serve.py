"""`gang-extender serve` once its flags are read: every adapter wired around one
GangManager in one place (`wire`), and the life of the process until its exit status.

Why it is apart from `cli.py`: the command line turns flags into settings and owns the
event loop; this module says which part feeds which (architecture.md, "Layers"), so that
a part is wired here without wading through the flags' help, and how the process ends:
SIGTERM 0, leadership lost 1 (`EXIT_LOST_LEADERSHIP`), a long-running task that ended 3
(`scheduler/supervise.py`). `cli.py` imports it only to serve, so `--help` and the
parser's tests load neither uvicorn nor the adapters.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import socket
from dataclasses import dataclass
from typing import Any

import uvicorn

from extender.cel_selectors import compile_selector
from extender.core.manager import GangManager
from extender.core.model.config import Config
from extender.core.model.vocabulary import PodRef, Report
from extender.core.wiring import Core
from extender.kube.catch_up import CatchUpRequests
from extender.kube.client import Kube, make_kube
from extender.kube.device_kinds import DEVICE_KINDS
from extender.kube.informer import BUDGETS, Informer, InformerOptions
from extender.kube.leader import Leadership
from extender.kube.recorder import EventRecorder
from extender.reporting.events import GangEvents, pod_ref
from extender.reporting.kinds import observed_kinds, source_kinds
from extender.reporting.metrics import GaugeSources, Metrics
from extender.reporting.status import StatusHooks, StatusWriter
from extender.scheduler.debug import install_podgroups_route
from extender.scheduler.dispatch import DispatchConfig, Dispatcher, Gates, Outlets
from extender.scheduler.evictions import Evictions
from extender.scheduler.http import create_app, create_metrics_app, with_fast_verbs
from extender.scheduler.provisioner import PROVISIONING_REQUESTS, Provisioner
from extender.scheduler.supervise import LagMonitor, LoopErrors, first_to_end, tick_faults_from_env
from extender.scheduler.wakeups import Wakeups
from extender.scheduler.warm import ConnectionWarmer

# On leadership loss, how long Bindings already posted may take before the process exits.
LOST_BINDINGS_GRACE_SECONDS = 5.0
# Then how long the servers may take to send the last answers and close.
SHUTDOWN_SECONDS = 3.0
# Exit status after leadership was lost (kube-scheduler exits 1 then, too).
EXIT_LOST_LEADERSHIP = 1

log = logging.getLogger("gang-extender")


@dataclass(frozen=True)
class Parts:
    """The adapters around one gang manager as `wire` made them: what `serve` runs."""

    manager: GangManager
    kube: Kube
    leader: Leadership
    lost: asyncio.Event  # set when leadership is lost
    # Set once the informers' first lists are applied: until then the verbs answer "not
    # synced", and the tick and the status writer wait.
    synced: asyncio.Event
    metrics: Metrics
    recorder: EventRecorder
    status: StatusWriter
    dispatcher: Dispatcher
    wakeups: Wakeups
    provisioner: Provisioner
    informer: Informer
    servers: list[uvicorn.Server]
    warmer: ConnectionWarmer | None


def wire(args: argparse.Namespace, config: Config) -> Parts:
    """Every adapter, made with all it needs, each after the parts it needs; none is
    changed afterwards (tests/repo/test_layering.py checks that no attribute of another object
    is set anywhere else). Three loops are cut here: the `synced` event is made first and
    handed to the informer, which sets it, and to the dispatcher and the servers, which
    wait for it; the catch-up requests are made first and handed to the dispatcher's
    binding cycle, which makes them, and to the informer, which serves them; the gauges
    read from parts that count into the metrics (the status writer's counts, the watches
    behind) go to the scrape, made last."""
    manager = GangManager(Core.wire(config, selectors=compile_selector))
    reads = manager.reads
    # Idle connections kept: one for each Binding in flight, and a few for the other
    # writes (status, Events, wake-ups), so that a commit finds them open (warm.py).
    kube = make_kube(args.kubeconfig, max_idle=args.binding_concurrency + 8)
    metrics = Metrics()
    lost = asyncio.Event()
    leader = Leadership(kube, args.leader_lease, args.leader_identity or socket.gethostname(),
                        on_lost=lambda why: lost.set())
    synced = asyncio.Event()
    # A Binding's try that left the API server's state unknown asks through it for the
    # pods and nodes to be caught up; the informer, made after the dispatcher, serves it.
    catch_up = CatchUpRequests()

    def loop_error(loop: str) -> None:  # a loop's failed iteration, counted by loop name
        metrics.loop_errors.labels(loop).inc()

    # What users see (architecture.md §9), all off the request path: the Events, the
    # PodGroup status and the metrics, fed by one `on_report`. Switched off, a writer
    # still computes (for /debug/podgroups, the gauges and the log) but sends nothing. On
    # standby neither computes nor sends (extender/kube/leader.py).
    recorder = EventRecorder(kube if args.events == "on" else None,
                             on_result=lambda r: metrics.events.labels(r).inc(),
                             instance=args.leader_identity, active=lambda: leader.active)
    clock = recorder.clock
    gang_events = GangEvents(recorder, reads)
    status = StatusWriter(reads, kube if args.podgroup_status == "on" else None, clock,
                          events=gang_events,
                          hooks=StatusHooks(
                              on_write=lambda r: metrics.status_writes.labels(r).inc(),
                              on_loop_error=loop_error))

    def on_report(report: Report) -> None:
        metrics.on_report(report)
        gang_events.on_report(report)
        status.on_report(report)

    # The core's actions carried out: Bindings (the direct commit's among them, counted
    # by `on_binding`), waiting binds answered, wake-ups, evictions and the
    # ProvisioningRequests; what the evictions and the provisioner learn goes back to
    # the core, whose new actions the dispatcher drains.
    wakeups = Wakeups(reads, kube, clock, on_wake=metrics.wakeups.inc,
                      loop_errors=LoopErrors("wake", loop_error))
    evictions = Evictions(kube, on_result=lambda r: metrics.evictions.labels(r).inc(),
                          active=lambda: leader.active)
    provisioner = Provisioner(manager, kube, recorder,
                              on_result=lambda r: metrics.provisioning.labels(r).inc(),
                              clock=clock, active=lambda: leader.active)

    def bound_directly(pod: PodRef, node: str) -> None:
        # kube-scheduler posts a pod's Scheduled Event only when it binds the pod itself.
        recorder.record(pod_ref(pod), "Scheduled", f"Successfully assigned {pod.key} to {node}",
                        background=True)

    dispatcher = Dispatcher(
        manager, kube,
        DispatchConfig(bind_wait_limit=args.bind_wait_limit, commit_wait=args.commit_wait,
                       binding_concurrency=args.binding_concurrency),
        clock,
        Outlets(wakeups=wakeups, evictions=evictions, provisioner=provisioner,
                on_report=on_report, on_binding=metrics.on_binding,
                on_bound_directly=bound_directly, on_assembly_wait=metrics.on_assembly_wait,
                on_commit_wait=metrics.on_commit_wait, catch_up=catch_up),
        Gates(leader=leader, synced=synced.is_set, tick_errors=LoopErrors("tick", loop_error),
              tick_fault=tick_faults_from_env()))

    # The watches: what the status writer observes, the gangs' sources, the budgets, and
    # the ProvisioningRequests while they are asked for and served.
    informer = Informer(
        kube, manager, clock, dispatcher.cache_changed,
        kinds=(*observed_kinds(status), *source_kinds(status), BUDGETS, *DEVICE_KINDS,
               *((PROVISIONING_REQUESTS,) if args.provisioning_requests == "on" else ())),
        options=InformerOptions(
            protobuf=args.pod_watch == "protobuf", synced=synced, catch_up=catch_up,
            on_skip=lambda kind, why: metrics.skipped_objects.labels(kind, why).inc(),
            on_served=provisioner.served))

    # The verbs' server on --listen, and the probes' and metrics' on --metrics-listen.
    # /healthz fails when the tick loop stopped or a watch has been behind too long.
    gauges = GaugeSources(status_counts=status.counts, leader_active=lambda: leader.active,
                          connections_opened=kube.connections_opened,
                          watches_behind=informer.behind)

    def health() -> str | None:
        return dispatcher.tick_health() or informer.health()

    app = create_app(dispatcher, metrics, ready=synced, health=health, gauges=gauges)
    install_podgroups_route(app, status, recorder, clock)
    host, port = args.listen
    servers = [uvicorn.Server(uvicorn.Config(
        with_fast_verbs(app), host=host, port=port, log_level="warning", timeout_keep_alive=120,
        access_log=False, lifespan="off"))]
    if args.metrics_listen:
        mhost, mport = args.metrics_listen
        metrics_app = create_metrics_app(reads, metrics, ready=synced, health=health,
                                         gauges=gauges)
        servers.append(uvicorn.Server(uvicorn.Config(
            metrics_app, host=mhost, port=mport, log_level="warning", access_log=False,
            lifespan="off")))

    return Parts(manager, kube, leader, lost, synced, metrics, recorder, status, dispatcher,
                 wakeups, provisioner, informer, servers, _warmer(args, kube, manager))


def _warmer(args: argparse.Namespace, kube: Kube,
            manager: GangManager) -> ConnectionWarmer | None:
    """Connections for a gang's Bindings opened while its members are created, as many
    as the Binding concurrency lets be in flight; none with `--warm-connections off`."""
    if args.warm_connections == "off":
        return None
    return ConnectionWarmer(kube.warm, manager.reads.bindings_ahead, args.binding_concurrency)


async def serve(args: argparse.Namespace, config: Config) -> int:
    """Run until cancelled (SIGTERM: 0) or until leadership is lost (1)."""
    parts = wire(args, config)
    leader, synced, dispatcher = parts.leader, parts.synced, parts.dispatcher
    policy = config.backoff
    log.info("serving on %s:%d (scheduler %s, default timeout %gs, backoff %gs..%gs, limit %s, "
             "identity %s, leader lease %s)", *args.listen, args.scheduler_name,
             args.default_timeout, policy.base_seconds, policy.cap_seconds, policy.retry_limit,
             leader.identity, leader.lease or "off")
    # Each runs for the life of the process; one that ends is fatal (supervise.py).
    tasks = [
        asyncio.create_task(parts.informer.run(), name="informer"),
        asyncio.create_task(dispatcher.tick_loop(), name="tick"),
        asyncio.create_task(parts.wakeups.run(lambda: leader.active), name="wake"),
        asyncio.create_task(parts.provisioner.run(), name="provisioning"),
        asyncio.create_task(parts.status.run(lambda: leader.active and synced.is_set()),
                            name="podgroup-status"),
        asyncio.create_task(parts.recorder.run(), name="events"),
        asyncio.create_task(LagMonitor(parts.metrics.event_loop_lag.observe).run(),
                            name="event-loop-lag"),
    ]
    if parts.warmer is not None:
        tasks.append(asyncio.create_task(
            parts.warmer.run(lambda: leader.active and synced.is_set()), name="connections"))
    if leader.lease is not None:  # without a lease to follow there is nothing to watch
        tasks.append(asyncio.create_task(leader.run(), name="leader"))
    try:
        return await _until_exit(parts.servers, parts.lost, tasks, dispatcher, leader)
    finally:
        await parts.kube.http.aclose()


async def _close(servers: list[uvicorn.Server], serving: asyncio.Future[Any]) -> None:
    """Stop the servers once the waiting binds are answered: those answers are sent and
    the connections closed, within `SHUTDOWN_SECONDS`."""
    for server in servers:
        server.should_exit = True
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.shield(serving), SHUTDOWN_SECONDS)


async def _until_exit(servers: list[uvicorn.Server], lost: asyncio.Event,
                      tasks: list[asyncio.Task[None]], dispatcher: Dispatcher,
                      leader: Leadership) -> int:
    """Serve until the servers stop, leadership is lost or a long-running task ends;
    answer the waiting binds of the last two before the servers close."""
    serving = asyncio.ensure_future(asyncio.gather(*(s.serve() for s in servers)))
    losing = asyncio.ensure_future(lost.wait())
    ended = asyncio.ensure_future(first_to_end(tasks))
    try:
        await asyncio.wait((serving, losing, ended), return_when=asyncio.FIRST_COMPLETED)
        if ended.done():
            # Logged with its cause by first_to_end. Waiting binds are answered so their
            # pods are re-queued at once rather than at kube-scheduler's timeout.
            answered = dispatcher.bindings.answer_waiting(
                "gang-extender is restarting: a long-running task ended (see its log)")
            await _close(servers, serving)
            log.error("exiting (status %d): %d waiting bind(s) answered with an error",
                      ended.result(), answered)
            return ended.result()
        if not losing.done():
            serving.result()
            return 0
        # Lost while active: the verbs already answer the standby error. Bindings already
        # sent are let be answered, none is sent any more; waiting binds die with the
        # process: answered with the error, so kube-scheduler (if it still runs) re-queues
        # their pods, and the new leader, which starts with no reservation, places those
        # gangs whole.
        left = await dispatcher.bindings.settled(LOST_BINDINGS_GRACE_SECONDS)
        answered = dispatcher.bindings.answer_waiting(leader.standby_error())
        await _close(servers, serving)
        log.error("exiting (status %d) after losing leadership: %d waiting bind(s) answered "
                  "with an error, %d Binding(s) still in flight; restarting makes it a "
                  "standby", EXIT_LOST_LEADERSHIP, answered, left)
        return EXIT_LOST_LEADERSHIP
    finally:
        running: list[asyncio.Future[Any]] = [serving, losing, ended, *tasks]
        for t in running:
            t.cancel()
        await asyncio.gather(*running, return_exceptions=True)
