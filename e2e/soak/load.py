"""What the soak's load is made of: the gangs drawn from the seed and the records of the
gangs and neighbour pods it created. Apart from the code that creates them because the
draws are pure (no cluster, no clock) and must stay the same for one seed."""

from __future__ import annotations

import random
from dataclasses import dataclass

from .config import SoakConfig


@dataclass
class GangSpec:
    ns: str
    name: str
    size: int
    min_member: int
    cpu: str
    memory: str
    run_seconds: float
    rendezvous: bool
    timeout: int | None
    first_wave: int  # members created at once; the rest after `second_wave_delay`
    second_wave_delay: float
    impossible: bool = False
    priority_class: str | None = None

    @property
    def key(self) -> str:
        return f"{self.ns}/{self.name}"


@dataclass
class GangRun:
    spec: GangSpec
    created_at: float
    created_pods: int = 0
    replaced: int = 0  # members recreated after someone else deleted them
    second_wave_at: float | None = None
    done_at: float | None = None
    complete_at: float | None = None  # when minMember members existed
    complete_wall: float | None = None  # the same, on the wall clock (starts.py)
    deleted: bool = False


@dataclass
class Neighbour:
    name: str
    kind: str  # direct | scheduled
    created_at: float
    bound: bool = False


def _slots(cfg: SoakConfig, cpu_m: int, mem_mi: int) -> int:
    per_node = min(cfg.node_cpu * 1000 // cpu_m, cfg.node_memory_gi * 1024 // mem_mi)
    return per_node * cfg.nodes


def priority_classes(cfg: SoakConfig, run_id: str) -> list[str]:
    """The names `make_gang` draws from: `{run_id}-p1`.. and `{run_id}-never`."""
    if cfg.priorities <= 0:
        return []
    return [f"{run_id}-p{k}" for k in range(1, cfg.priorities + 1)] + [f"{run_id}-never"]


def make_gang(rng: random.Random, cfg: SoakConfig, ns: str, index: int,
              classes: list[str] | None = None) -> GangSpec:
    cpu_m = rng.choice([250, 500, 500, 1000, 1000, 2000])
    mem_mi = rng.choice([128, 256, 512, 1024])
    impossible = rng.random() < cfg.impossible_fraction
    if impossible:
        # Whole nodes' worth of pods, more of them than the cluster has nodes.
        cpu_m, mem_mi = cfg.node_cpu * 1000, 256
        size = min_member = cfg.nodes + 1 + rng.randrange(3)
    else:
        cap = min(cfg.max_size, _slots(cfg, cpu_m, mem_mi))
        size = rng.randint(1, cap)
        elastic = rng.random() < cfg.elastic_fraction
        min_member = rng.randint(1, size) if elastic else size
    first = size if rng.random() < 0.6 else rng.randint(0, size)
    klass = rng.choice(classes) if classes else None
    return GangSpec(
        ns=ns, name=f"g{index:05d}", size=size, min_member=min_member,
        cpu=f"{cpu_m}m", memory=f"{mem_mi}Mi",
        run_seconds=round(rng.uniform(1.0, 15.0), 1),
        rendezvous=rng.random() < 0.6,
        timeout=rng.choice([None, None, 10, 20, 40]),
        first_wave=first, second_wave_delay=round(rng.uniform(0.5, 12.0), 1),
        impossible=impossible, priority_class=klass,
    )
