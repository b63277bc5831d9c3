"""What the demo submits: the cluster's size and the three Jobs, as plain numbers.

Why a module of its own: the deadlock only forms for some sizes (one big Job must fit in the
cluster, two must not), so the sizes and the check that they make the story possible belong
together, apart from the code that talks to a cluster.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

STOCK_SCHEDULER = "default-scheduler"
BIG_JOBS = ("job-a", "job-b")
"""The two rendezvous Jobs that deadlock each other under the stock scheduler."""
QUICK_JOB = "quick"
"""Small independent pods: they show ordinary pods still flow around held capacity."""


@dataclass(frozen=True)
class Workload:
    """The cluster (fake nodes) and the Jobs submitted to it, in both runs alike."""

    nodes: int = 4
    node_cpu: int = 8
    node_memory_mi: int = 16 * 1024
    big_pods: int = 20
    share: float = 0.75
    big_cpu: str = "250m"
    run_seconds: float = 5.0
    quick_pods: int = 50
    quick_cpu: str = "100m"
    quick_memory_mi: int = 64
    quick_seconds: float = 2.0

    @property
    def pod_memory_mi(self) -> int:
        """Memory of one big pod: the Job's share of the cluster's memory, in whole Mi."""
        return math.floor(self.share * self.nodes * self.node_memory_mi / self.big_pods)

    @property
    def slots(self) -> int:
        """How many big pods fit in the cluster (per node, no fractions)."""
        return self.nodes * (self.node_memory_mi // self.pod_memory_mi)

    def job_sizes(self) -> dict[str, int]:
        """Pods per Job, in the order the timeline and the chart list them."""
        return {"job-a": self.big_pods, "job-b": self.big_pods, QUICK_JOB: self.quick_pods}

    def check(self) -> None:
        """The sizes must make the deadlock possible and the gang run feasible."""
        if not self.big_pods <= self.slots < 2 * self.big_pods:
            raise SystemExit(
                f"sizes give {self.slots} slots of {self.pod_memory_mi}Mi for Jobs of "
                f"{self.big_pods} pods: need one Job to fit and two not to")
        slack = self.node_memory_mi - (self.node_memory_mi // self.pod_memory_mi
                                       * self.pod_memory_mi)
        if slack < self.quick_memory_mi:
            raise SystemExit(f"no room for quick pods next to the big ones ({slack}Mi)")

    def describe(self) -> str:
        """One line for the header of the output and the title of the chart."""
        share = self.big_pods * self.pod_memory_mi / (self.nodes * self.node_memory_mi)
        return (f"{self.nodes} nodes × {{cpu: {self.node_cpu}, memory: "
                f"{self.node_memory_mi // 1024}Gi}}; job-a and job-b: {self.big_pods} "
                f"rendezvous pods × {self.pod_memory_mi}Mi ({share:.0%} of the cluster's "
                f"memory each, run {self.run_seconds:g} s once all are up); quick: "
                f"{self.quick_pods} pods × {self.quick_memory_mi}Mi, {self.quick_seconds:g} s")
