"""The soak's knobs, apart from the run because three readers share them and none owns
them: the command line (its defaults are the options' defaults), the CI test, and every
part of the run (load, neighbours, chaos, checks)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class SoakConfig:
    seed: int = 1
    minutes: float = 10.0
    max_gangs: int = 1_000_000
    nodes: int = 6
    node_cpu: int = 8
    node_memory_gi: int = 16
    concurrent_gangs: int = 10
    max_size: int = 32
    impossible_fraction: float = 0.04
    impossible_lifetime: float = 90.0  # seconds before an impossible gang is deleted
    # Share of gangs with minMember < size (elastic extras bind one by one after the
    # quorum); the others have minMember == size.
    elastic_fraction: float = 0.5
    # Mean seconds between kills (exponential); 0 disables that kind. With two
    # replicas the extender and kube-scheduler kills hit the leader's.
    extender_kill_every: float = 60.0
    scheduler_kill_every: float = 60.0
    apiserver_restarts: int = 1
    max_outage: float = 4.0  # a killed component stays down up to this long
    # Mean seconds between watch cuts (exponential; 0: none): the extenders reach
    # kube-apiserver through a proxy (cut.py) whose connections are all reset, and new
    # ones refused for up to `max_outage`, while everything else goes on.
    watch_cut_every: float = 0.0
    partial_window: float = 30.0
    # A gang with 0 < bound < minMember may stay so this many times its PodGroup's
    # scheduleTimeoutSeconds (the extender's --default-timeout without one).
    partial_grace_factor: float = 2.0
    # A gang commit's over-commit is excused as a race (noted, not a violation) when
    # the node fits without the neighbours bound less than this many seconds before the
    # commit began (invariants.py); 0: every one is a violation.
    race_window: float = 0.5
    drain_timeout: float = 600.0
    max_rss_mb: float = 400.0
    # PriorityClasses the gangs draw from (values 100, 200, ...; the highest is also made
    # once more with preemptionPolicy Never); 0: every gang at priority 0.
    priorities: int = 3
    extender_args: tuple[str, ...] = ("--default-timeout", "20", "--backoff-base", "2",
                                      "--backoff-cap", "16")
    # Neighbours: pods of no gang on the gangs' nodes. Mean seconds between two
    # (exponential; 0: none), of which `direct_fraction` are created with spec.nodeName
    # and the rest go through the default scheduler; of the direct ones,
    # `direct_targeted_fraction` aim at a node where a gang holds capacity right now
    # and take 50-100 % of its free cpu. Sizes and run times are drawn from the ranges
    # (a direct pod is shrunk to what is free on its node). At most `max_neighbours`
    # exist at once; a default-scheduler one still unbound after
    # `neighbour_pending_timeout` is deleted; none is created after the load.
    neighbour_every: float = 2.0
    direct_fraction: float = 0.5
    direct_targeted_fraction: float = 0.5
    neighbour_cpu_m: tuple[int, int] = (100, 2000)
    neighbour_memory_mi: tuple[int, int] = (64, 512)
    neighbour_run_seconds: tuple[float, float] = (1.0, 20.0)
    max_neighbours: int = 12
    target_wait: float = 3.0  # a targeted pod waits this long for a hold to aim at
    neighbour_pending_timeout: float = 60.0
    # Replicas of (extender + kube-scheduler): 1, or 2 with leader election on the
    # Lease `gang-scheduler`, the leader pair SIGKILLed every `leader_kill_every`
    # seconds on average (0: never) and restarted as the standby.
    replicas: int = 1
    leader_kill_every: float = 90.0
    lease_duration: float = 8.0  # kube-scheduler's leaseDuration; renewDeadline 0.7x
    # Pass --leader-lease/--leader-identity to the extenders (replicas=2). False runs
    # both extenders active: only to exercise the soak's own replica machinery on a
    # tree without the extender's active/standby mode.
    leader_flags: bool = True
    extender_ready_path: str = "/readyz"
    # Hostile mode (hostile.py): mean seconds between two hostile objects (unplaceable
    # gangs, absurd quantities, junk and orphans) created beside the gangs; 0: none.
    hostile_every: float = 0.0
    # The most CPU the active extender may use while one /healthz answer is awaited
    # (StallProbe: its own stall of the loop); 0: measured, not checked.
    max_stall_s: float = 0.0
    # The longest /healthz answer allowed on the wall clock, which counts every process
    # of the machine: it catches a loop blocked without using CPU; 0: not checked.
    max_stall_wall_s: float = 0.0
