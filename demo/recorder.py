"""Watching a run's namespace: when each pod was created, bound, running and finished.

Why on top of :class:`e2e.gang.Recorder`: that one records binds and phases for the e2e
tests' invariants; the demo also needs when each pod first appeared (a gang is placed only
once all its members exist, and the chart shows the wait) and which Job it belongs to.
"""

from __future__ import annotations

import time
from typing import Any

from demo.timeline import PodTimes
from e2e.gang import Recorder

JOB_NAME_LABELS = ("batch.kubernetes.io/job-name", "job-name")
"""The job controller's labels naming a pod's Job, newest first."""


def job_of(pod: Any) -> str:
    """The Job a pod belongs to: its job-name label, else its name without the suffix."""
    labels = pod.metadata.labels or {}
    for key in JOB_NAME_LABELS:
        if key in labels:
            return str(labels[key])
    return str(pod.metadata.name).rsplit("-", 1)[0]


class DemoRecorder(Recorder):
    """:class:`e2e.gang.Recorder` plus when each pod was first seen and its Job."""

    def __init__(self, namespace: str) -> None:
        super().__init__(namespace)
        self.first_seen: dict[str, float] = {}
        self.job: dict[str, str] = {}

    def _observe(self, pod: Any) -> None:
        now = time.monotonic()
        with self._lock:
            self.first_seen.setdefault(pod.metadata.name, now)
            self.job.setdefault(pod.metadata.name, job_of(pod))
        super()._observe(pod)

    def snapshot(self, t0: float) -> dict[str, PodTimes]:
        """Every pod seen so far, its times relative to ``t0`` (the submission)."""

        def rel(t: float | None) -> float | None:
            return None if t is None else round(t - t0, 3)

        with self._lock:
            out = {}
            for name, r in self.pods.items():
                done = r.phase_at.get("Succeeded", r.phase_at.get("Failed"))
                out[name] = PodTimes(
                    job=self.job.get(name, "?"), node=r.node,
                    created=rel(self.first_seen.get(name)), bound=rel(r.bound_at),
                    running=rel(r.phase_at.get("Running")), finished=rel(done),
                    phase=r.phase)
            return out
