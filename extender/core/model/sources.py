"""Where gangs come from: each source's pod keys and group objects, and the one rule that
decides which gang a pod joins when it carries the keys of several.

Every source becomes the same `GroupInfo` (with its `source`, addressed by `gang_key`),
so the queue, the planner, reservations and the permit barrier never know the difference:

* scheduler-plugins: pods labelled `scheduling.x-k8s.io/pod-group: <name>`, a PodGroup
  `scheduling.x-k8s.io/v1alpha1`;
* workload-api: pods with `spec.schedulingGroup.podGroupName: <name>`, a PodGroup
  `scheduling.k8s.io/v1beta1` (Kubernetes 1.37) or `v1alpha2` (1.36 alpha);
* volcano: pods annotated `scheduling.k8s.io/group-name: <name>`, a PodGroup
  `scheduling.volcano.sh/v1beta1`;
* kueue: pods labelled `kueue.x-k8s.io/pod-group-name: <name>` and annotated
  `kueue.x-k8s.io/pod-group-total-count: "<n>"`; no object, the gang is its pods;
* jobset: pods labelled by the JobSet controller (`jobset.sigs.k8s.io/jobset-name`,
  `jobset-uid`, `restart-attempt`), a JobSet `jobset.x-k8s.io/v1alpha2`: one gang per
  JobSet and restart attempt (`jobset_gang_name`), or per Job (`jobset_job_gang_name`)
  or per replicated Job (`jobset_rjob_gang_name`) where the JobSet or the pod's template
  splits it, each quorum derived from the JobSet's replicated Jobs
  (`convert_jobset.jobset_groups_from_k8s`). The one gang not read from the pod alone:
  a split the JobSet asks for is known only from the JobSet (`jobset_resolve`).

**Precedence** (`PRECEDENCE`), when one pod carries keys of several sources: the first
in that order wins and the pod is a member of that gang only, so one group is never
counted twice. The rule looks at the pod's keys alone, never at which group objects exist,
so a pod's gang does not depend on the order watch events arrive in (within a
JobSet, which of its gangs a pod joins is the JobSet's to say, and follows it as it
is read: `jobset_resolve`); a missing object
shows as a rejection naming it (`missing_group_message`), not as a silent switch:

1. scheduler-plugins label: what this extender has always honoured; an operator or user
   who sets it chose this gang explicitly, and existing users must see no change;
2. upstream `spec.schedulingGroup`: part of the pod's own spec, immutable, set by
   Kubernetes' workload controllers;
3. Volcano annotation: set by operators in their Volcano mode;
4. JobSet labels: set by the JobSet controller on every pod of a JobSet, whether or
   not its user meant a gang; a user who wrote a PodGroup by hand for a JobSet (and its
   label into the templates) keeps that gang, as before JobSets were read;
5. Kueue labels: Kueue's pod groups are about admission (quota) first; the weakest
   statement of how the pods must be placed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from extender.core.model.types import (
    GROUP_LABEL,
    KUEUE,
    SCHEDULER_PLUGINS,
    VOLCANO,
    WORKLOAD_API,
    GroupInfo,
    JobSetPod,
    Membership,
    PodInfo,
    split_gang_key,
)

__all__ = [
    "JOBSET",
    "JOBSET_ATTEMPT_LABEL",
    "JOBSET_GANG_ANNOTATION",
    "JOBSET_INDEX_LABEL",
    "JOBSET_MODES",
    "JOBSET_NAME_LABEL",
    "JOBSET_OFF",
    "JOBSET_PER_JOB",
    "JOBSET_PER_RJOB",
    "JOBSET_RJOB_LABEL",
    "JOBSET_UID_LABEL",
    "KUEUE_GROUP_LABEL",
    "KUEUE_TOTAL_ANNOTATION",
    "PRECEDENCE",
    "VOLCANO_GROUP_ANNOTATION",
    "jobset_gang_name",
    "jobset_job_gang_name",
    "jobset_resolve",
    "jobset_rjob_gang_name",
    "jobset_set_gang_of",
    "kueue_group",
    "membership",
    "missing_group_message",
]

VOLCANO_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
KUEUE_GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"
KUEUE_TOTAL_ANNOTATION = "kueue.x-k8s.io/pod-group-total-count"

# The JobSet source: kept here rather than with the others in types.py, as everything
# about it (its pod labels, its gang names) is.
JOBSET = "jobset"
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
JOBSET_UID_LABEL = "jobset.sigs.k8s.io/jobset-uid"
# The JobSet's status.restarts when the pod's Job was made: a label and an annotation.
JOBSET_ATTEMPT_LABEL = "jobset.sigs.k8s.io/restart-attempt"
# The replicated Job and the index of the pod's Job within it (0 to replicas - 1).
JOBSET_RJOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
JOBSET_INDEX_LABEL = "jobset.sigs.k8s.io/job-index"
# How a JobSet's pods are gang-placed, on the JobSet: "set" (the default, one gang),
# "off" (none), "per-job" (each Job a gang of its own, `jobset_job_gang_name`) or
# "per-replicated-job" (each replicated Job, all its Jobs together, a gang of its own,
# `jobset_rjob_gang_name`). On a replicated Job's pod template "per-job" alone, which
# wins over the JobSet's value for that replicated Job. The JobSet controller copies no
# annotation of the JobSet to its pods, so a split the JobSet asks for reaches a pod's
# gang through the JobSet's group (`GroupInfo.jobset_split`, `jobset_resolve`); the
# template's is on the pod itself.
JOBSET_GANG_ANNOTATION = "gang-extender.x-k8s.io/jobset-gang"
JOBSET_SET = "set"
JOBSET_OFF = "off"
JOBSET_PER_JOB = "per-job"
JOBSET_PER_RJOB = "per-replicated-job"
JOBSET_MODES = (JOBSET_SET, JOBSET_OFF, JOBSET_PER_JOB, JOBSET_PER_RJOB)

PRECEDENCE = (SCHEDULER_PLUGINS, WORKLOAD_API, VOLCANO, JOBSET, KUEUE)


def _count(value: object) -> int | None:
    """Kueue's total count: a positive decimal integer, else None (unknown)."""
    if not isinstance(value, str) or not value.strip().isdigit():
        return None
    n = int(value)
    return n if n > 0 else None


def membership(labels: Mapping[str, str], annotations: Mapping[str, Any],
               scheduling_group: str) -> Membership | None:
    """The gang a pod joins, by `PRECEDENCE`; None for a plain pod. `scheduling_group`
    is the pod's spec.schedulingGroup.podGroupName ("" when absent)."""
    name = labels.get(GROUP_LABEL)
    if name:
        return Membership(SCHEDULER_PLUGINS, name)
    if scheduling_group:
        return Membership(WORKLOAD_API, scheduling_group)
    volcano = annotations.get(VOLCANO_GROUP_ANNOTATION)
    if isinstance(volcano, str) and volcano:
        return Membership(VOLCANO, volcano)
    jobset = _jobset_membership(labels, annotations)
    if jobset is not None:
        return jobset
    name = labels.get(KUEUE_GROUP_LABEL)
    if name:
        return Membership(KUEUE, name, _count(annotations.get(KUEUE_TOTAL_ANNOTATION)))
    return None


def jobset_gang_name(name: str, uid: str, attempt: int | str) -> str:
    """The gang of one restart attempt of one JobSet, by the JobSet's name, uid and
    attempt: the JobSet and its pods both name it. The attempt keeps an old attempt's
    pods (still terminating while the new Jobs' pods arrive) out of the new gang, which
    is then placed whole again; the uid (its first 8 characters: a clash needs two
    JobSets of one name, one deleted, whose uids share them) does the same for a JobSet
    deleted and made again under its name. Dots separate them: a JobSet's name is a
    DNS label, which has none, so no other JobSet's gang can have this name."""
    return f"{name}.{attempt}.{uid[:8]}"


def jobset_job_gang_name(set_gang: str, replicated_job: str, index: int | str) -> str:
    """The gang of one Job of a replicated Job split "per-job", within the gang of
    its JobSet's attempt (`jobset_gang_name`): its replicated Job's name (a DNS label)
    and the Job's index, after a dot."""
    return f"{set_gang}.{replicated_job}-{index}"


def jobset_rjob_gang_name(set_gang: str, replicated_job: str) -> str:
    """The gang of a replicated Job split "per-replicated-job" (all its Jobs), within
    the gang of its JobSet's attempt: its name after a dot. One JobSet could make it
    equal to a Job's gang of another replicated Job (one named "workers-0" beside
    "workers" split per Job): `convert_jobset` refuses such a JobSet."""
    return f"{set_gang}.{replicated_job}"


def jobset_set_gang_of(split_gang: str) -> str | None:
    """The gang of the JobSet attempt a split gang lies within (`jobset_job_gang_name`,
    `jobset_rjob_gang_name`): its first three dot-separated parts; None for a name with
    no part after them (the attempt's own gang, or no JobSet's). The inverse of the two
    above, kept beside them so that the names and their reading change together."""
    parts = split_gang.split(".")
    return ".".join(parts[:3]) if len(parts) > 3 else None


def jobset_resolve(m: Membership,
                   split: tuple[tuple[str, str], ...] | None) -> Membership:
    """The gang of a JobSet's pod (`m`, as `membership` read it) under its JobSet's
    split (`GroupInfo.jobset_split` of the set's gang; None while the JobSet is not
    known: the set's gang, which turns the pod away naming the JobSet). `m` itself when
    that is its gang already, so a pod seen again is not copied."""
    keys = m.jobset
    if keys is None:
        return m
    name = keys.set_gang
    for rjob, mode in split or ():
        if rjob == keys.replicated_job:
            name = (jobset_job_gang_name(name, rjob, keys.index) if mode == JOBSET_PER_JOB
                    else jobset_rjob_gang_name(name, rjob))
            break
    return m if name == m.name else Membership(JOBSET, name, None, keys)


def _jobset_membership(labels: Mapping[str, str],
                       annotations: Mapping[str, Any]) -> Membership | None:
    """A pod of a JobSet: its name, uid and attempt labels, which the JobSet controller
    sets together, the attempt as a plain decimal number; under "per-job" also its
    replicated Job and Job index labels (kept for `jobset_resolve` when its template
    does not choose its gang itself). A pod without all three, or
    with another attempt spelling, was not made by it: not a member, so no gang waits
    on a pod that names no attempt. The admission policy on the extender's pod patches
    (deploy/admission/extender-pod-patches.yaml) derives the same gang by the same
    rule, and, as it cannot read the JobSet either, also the gangs `jobset_resolve` may
    give the pod."""
    name = labels.get(JOBSET_NAME_LABEL)
    if not name:
        return None
    uid = labels.get(JOBSET_UID_LABEL, "")
    attempt = labels.get(JOBSET_ATTEMPT_LABEL, "")
    if not uid or not attempt.isascii() or not attempt.isdigit() or str(int(attempt)) != attempt:
        return None
    gang = jobset_gang_name(name, uid, attempt)
    rjob, index = labels.get(JOBSET_RJOB_LABEL, ""), labels.get(JOBSET_INDEX_LABEL, "")
    if not (rjob and index):
        return Membership(JOBSET, gang)
    own = annotations.get(JOBSET_GANG_ANNOTATION)  # its template's split, copied to it
    if own == JOBSET_PER_JOB:
        return Membership(JOBSET, jobset_job_gang_name(gang, rjob, index))
    if own == JOBSET_PER_RJOB:
        return Membership(JOBSET, jobset_rjob_gang_name(gang, rjob))
    # The set's gang until the JobSet says how it is split (`jobset_resolve`).
    return Membership(JOBSET, gang, None, JobSetPod(gang, rjob, index))


def missing_group_message(gang: str, pod: PodInfo) -> str:
    """Why a member of a gang without a group is turned away, naming what to fix."""
    source, namespace, name = split_gang_key(gang)
    if source == WORKLOAD_API:
        # Both versions are read (v1beta1 on 1.37, v1alpha2 on 1.36), whichever is served.
        return (f"gang {gang}: PodGroup {namespace}/{name} (scheduling.k8s.io v1beta1 or "
                f"v1alpha2) not found; create it (the API must be served) or fix "
                f"spec.schedulingGroup.podGroupName of pod {pod.key}")
    if source == VOLCANO:
        return (f"gang {gang}: PodGroup {namespace}/{name} (scheduling.volcano.sh/v1beta1) "
                f"not found; create it (the CRD must be installed) or fix the "
                f"{VOLCANO_GROUP_ANNOTATION} annotation of pod {pod.key}")
    if source == JOBSET:
        return (f"gang {gang}: the JobSet of pod {pod.key} (label {JOBSET_NAME_LABEL}), "
                f"at this restart attempt ({JOBSET_ATTEMPT_LABEL}), is not known: it was "
                f"deleted or has restarted since (the pod is of an old attempt), the "
                f"JobSet API (jobset.x-k8s.io/v1alpha2) is not served or not readable, or "
                f"the JobSet could not be read (the extender's log says why, e.g. a "
                f"gang-extender.x-k8s.io/jobset-gang value other than "
                f"{', '.join(map(repr, JOBSET_MODES))})")
    if source == KUEUE:
        return (f"gang {gang}: no pod of Kueue pod group {name} has a valid "
                f"{KUEUE_TOTAL_ANNOTATION} annotation (a positive integer), so the size "
                f"of the gang is unknown; pod {pod.key} waits until one has")
    return (f"gang {gang}: PodGroup {gang} not found; create it or fix the "
            f"{GROUP_LABEL} label of pod {pod.key}")


# ----- Kueue: the group is its pods ----------------------------------------------------


def kueue_group(key: str, pods: Iterable[PodInfo],
                previous: GroupInfo | None = None) -> GroupInfo | None:
    """The gang of a Kueue plain pod group, derived from its pods (there is no object):
    the quorum is the largest total count any of them declares (they should all agree;
    the largest never lets part of a gang through), created when its oldest pod was (or
    earlier, as `previous` says: replacing a pod does not move the gang back in the
    queue). None when no pod declares a valid count: the size is unknown."""
    _, namespace, name = split_gang_key(key)
    pods = list(pods)
    totals = [p.membership.total for p in pods if p.membership is not None
              and p.membership.total is not None]
    if not totals:
        return None
    creation = min(p.creation for p in pods)
    if previous is not None:
        creation = min(creation, previous.creation)
    return GroupInfo(namespace=namespace, name=name, min_member=max(totals),
                     uid=f"kueue:{namespace}/{name}", creation=creation, source=KUEUE)
