"""``python -m e2e.soak --seed N --minutes M``: the long chaos soak on a fresh local
control plane, with neighbours on the gangs' nodes. Prints a summary (load, kills,
violations by invariant, neighbour over-commits as information, RSS; ``--json`` writes
the full report); exits 1 if any invariant was violated, a gang that fits did not
finish, or the extender kept state."""

from __future__ import annotations

import argparse
import logging
import shlex
import sys
from pathlib import Path

from e2e.harness.cluster import ControlPlane
from e2e.harness.fakekubelet import FakeKubelet
from e2e.harness.target import use_cluster

from .config import SoakConfig
from .driver import run_soak


def main(argv: list[str] | None = None) -> int:
    d = SoakConfig()
    ap = argparse.ArgumentParser(prog="python -m e2e.soak", description=__doc__)
    ap.add_argument("--seed", type=int, default=d.seed)
    ap.add_argument("--minutes", type=float, default=d.minutes,
                    help="how long gangs are created (the drain comes on top)")
    ap.add_argument("--max-gangs", type=int, default=d.max_gangs)
    ap.add_argument("--nodes", type=int, default=d.nodes)
    ap.add_argument("--node-cpu", type=int, default=d.node_cpu)
    ap.add_argument("--node-memory-gi", type=int, default=d.node_memory_gi)
    ap.add_argument("--concurrent-gangs", type=int, default=d.concurrent_gangs)
    ap.add_argument("--max-size", type=int, default=d.max_size)
    ap.add_argument("--elastic-fraction", type=float, default=d.elastic_fraction,
                    help="share of gangs with minMember < size (0: every gang is rigid)")
    ap.add_argument("--extender-kill-every", type=float, default=d.extender_kill_every,
                    help="mean seconds between extender kills (0: none)")
    ap.add_argument("--scheduler-kill-every", type=float, default=d.scheduler_kill_every,
                    help="mean seconds between kube-scheduler kills (0: none)")
    ap.add_argument("--apiserver-restarts", type=int, default=d.apiserver_restarts)
    ap.add_argument("--watch-cut-every", type=float, default=d.watch_cut_every,
                    help="mean seconds between cuts of every connection the extenders hold "
                         "to kube-apiserver (through a proxy of the soak's; new ones refused "
                         "for up to 4 s), the API server and other clients going on (0: none)")
    ap.add_argument("--leader-kill-every", type=float, default=d.leader_kill_every,
                    help="mean seconds between kills of the leader pair, with --replicas 2 "
                         "(0: none)")
    ap.add_argument("--replicas", type=int, choices=(1, 2), default=d.replicas,
                    help="pairs of (extender + kube-scheduler); 2: leader election on the "
                         "Lease gang-scheduler, needs the extender's --leader-lease")
    ap.add_argument("--no-leader-flags", action="store_true",
                    help="with --replicas 2, start the extenders without --leader-lease: "
                         "both active; only to test the soak's replica machinery")
    ap.add_argument("--neighbour-every", type=float, default=d.neighbour_every,
                    help="mean seconds between neighbour pods on the gangs' nodes (0: none)")
    ap.add_argument("--direct-fraction", type=float, default=d.direct_fraction,
                    help="share of neighbours created with spec.nodeName (the rest go "
                         "through default-scheduler)")
    ap.add_argument("--direct-targeted-fraction", type=float,
                    default=d.direct_targeted_fraction,
                    help="share of spec.nodeName neighbours aimed at a node where a gang "
                         "holds capacity (reservation or held bind)")
    ap.add_argument("--max-neighbours", type=int, default=d.max_neighbours,
                    help="neighbour pods existing at once, at most")
    ap.add_argument("--partial-window", type=float, default=d.partial_window)
    ap.add_argument("--race-window", type=float, default=d.race_window,
                    help="seconds: a gang commit's over-commit that fits without the "
                         "neighbours bound this shortly before the commit is a race, noted "
                         "(0: a violation)")
    ap.add_argument("--partial-grace-factor", type=float, default=d.partial_grace_factor,
                    help="a gang may stay partially bound this many times its "
                         "scheduleTimeoutSeconds")
    ap.add_argument("--drain-timeout", type=float, default=d.drain_timeout)
    ap.add_argument("--max-rss-mb", type=float, default=d.max_rss_mb)
    ap.add_argument("--hostile-every", type=float, default=d.hostile_every,
                    help="mean seconds between hostile objects (unplaceable gangs, absurd "
                         "quantities, junk and orphans) beside the gangs; 0: none")
    ap.add_argument("--max-stall-ms", type=float, default=d.max_stall_s * 1000,
                    help="fail if the active extender ever used more CPU while one /healthz "
                         "answer was awaited (its own loop stall; 0: only measured)")
    ap.add_argument("--max-stall-wall-ms", type=float, default=d.max_stall_wall_s * 1000,
                    help="fail if one /healthz answer ever took longer on the wall clock "
                         "(0: only measured)")
    ap.add_argument("--extender-args", default="",
                    help="more arguments for every extender, after the soak's own "
                         f"({' '.join(d.extender_args)}); e.g. '--direct-commit off'")
    ap.add_argument("--json", type=Path, help="write the full report here")
    ap.add_argument("--keep", action="store_true",
                    help="keep the control plane's workdir (logs) and the soak's objects")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("urllib3").setLevel(logging.ERROR)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    cfg = SoakConfig(
        seed=args.seed, minutes=args.minutes, max_gangs=args.max_gangs, nodes=args.nodes,
        node_cpu=args.node_cpu, node_memory_gi=args.node_memory_gi,
        concurrent_gangs=args.concurrent_gangs, max_size=args.max_size,
        elastic_fraction=args.elastic_fraction,
        extender_kill_every=args.extender_kill_every,
        scheduler_kill_every=args.scheduler_kill_every,
        apiserver_restarts=args.apiserver_restarts, partial_window=args.partial_window,
        watch_cut_every=args.watch_cut_every,
        drain_timeout=args.drain_timeout, max_rss_mb=args.max_rss_mb,
        replicas=args.replicas, leader_kill_every=args.leader_kill_every,
        neighbour_every=args.neighbour_every, direct_fraction=args.direct_fraction,
        direct_targeted_fraction=args.direct_targeted_fraction,
        max_neighbours=args.max_neighbours, partial_grace_factor=args.partial_grace_factor,
        race_window=args.race_window, leader_flags=not args.no_leader_flags,
        hostile_every=args.hostile_every, max_stall_s=args.max_stall_ms / 1000,
        max_stall_wall_s=args.max_stall_wall_ms / 1000,
        extender_args=(*d.extender_args, *shlex.split(args.extender_args)))
    cp = ControlPlane(keep_workdir=args.keep or None).start()
    fk: FakeKubelet | None = None
    try:
        use_cluster(cp)
        fk = FakeKubelet(cp).start()
        report = run_soak(cp, cfg, keep=args.keep)
        if args.json:
            args.json.write_text(report.to_json())
        print(report.summary())
        if args.keep:
            print(f"logs: {cp.log_dir}")
        return 0 if report.ok else 1
    finally:
        if fk is not None:
            fk.stop()
        cp.stop()


if __name__ == "__main__":
    sys.exit(main())
