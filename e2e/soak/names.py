"""What one soak run is called on the cluster: its id, the gang kube-scheduler's profile
name, the gangs' namespaces and the one of neighbours and the Lease, and the taint every
soak pod tolerates. Apart because every part of the run names the same objects, and a
value made once per run and handed to each part keeps them agreeing without any of them
reaching into another for it.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass


@dataclass(frozen=True)
class RunNames:
    run_id: str
    scheduler_name: str
    namespaces: tuple[str, ...]  # the gangs', in turn
    aux_ns: str  # neighbours and the Lease

    @classmethod
    def new(cls, seed: int) -> RunNames:
        """Names of a new run: the seed, for the reader, and a random suffix, so that a
        run never meets the objects (or waits for the Lease) of an earlier one."""
        run_id = f"soak-{seed}-{secrets.token_hex(2)}"
        return cls(run_id=run_id, scheduler_name=f"{run_id}-scheduler",
                   namespaces=tuple(f"{run_id}-{c}" for c in "abc"), aux_ns=f"{run_id}-nb")

    @property
    def toleration(self) -> dict[str, str]:
        """Of the taint on the run's fake nodes: no pod of another test lands there."""
        return {"key": "soak", "operator": "Equal", "value": self.run_id,
                "effect": "NoSchedule"}

    @property
    def node_label(self) -> dict[str, str]:
        """On the run's fake nodes, and the soak pods' node selector."""
        return {"soak": self.run_id}

    @property
    def all_namespaces(self) -> list[str]:
        return [*self.namespaces, self.aux_ns]
