"""A JobSet (`jobset.x-k8s.io/v1alpha2`) to the `GroupInfo` of its gang: a set of Jobs
is one gang, so a user writes no PodGroup for it (docs/integrations.md, "JobSet").

The gang of a JobSet is named by its name, uid and restart attempt
(`sources.jobset_gang_name`), as its pods name it from their labels; each restart
(`status.restarts`) is a new gang, placed whole again, that no pod of an earlier
attempt counts toward.

Its quorum is every pod its Jobs run at once: over `spec.replicatedJobs`, replicas ×
the Job template's parallelism (capped by completions, as the Job controller caps the
pods it starts). `successPolicy` does not lower it: it says when the set has succeeded,
not how many of its pods must start together. Three things change that count:

* **Stages.** Where the JobSet controller creates replicated Jobs one after another
  (`spec.startupPolicy.startupPolicyOrder: InOrder`, or a replicated Job's
  `dependsOn`), the whole set never exists at once, and a quorum of all of it would
  wait forever. The quorum is then the replicated Jobs the controller has created so
  far, by the same rules it uses (read from `status.replicatedJobsStatus`): the stage
  it is creating joins those already running, so each stage is placed whole, in order,
  beside the running ones (their bound and succeeded pods count toward the quorum).
* **Exclusive placement** (`alpha.jobset.sigs.k8s.io/exclusive-topology` on the JobSet
  or on a replicated Job's template), unless the JobSet asks for its node-selector
  strategy (`alpha.jobset.sigs.k8s.io/node-selector`): JobSet's admission webhook
  refuses a Job's other pods until its first ("leader") pod is bound, so only the
  leaders exist before anything is bound. Each such Job counts one pod, and the rest
  of each Job follows its leader.
* **Opting out**: the annotation `gang-extender.x-k8s.io/jobset-gang: "off"` makes the
  quorum 1, each pod placed on its own as if no gang existed.
* **Splitting the set**: the same annotation on the JobSet, `per-job`, makes each Job
  a gang of its own (`sources.jobset_job_gang_name`), of that Job's pods;
  `per-replicated-job` makes each replicated Job one (`sources.jobset_rjob_gang_name`),
  of all its Jobs' pods. Each such gang's quorum is counted by the rules above, for its
  own Jobs; its gang name carries the set's, so an old attempt's pods never count
  toward it either. Set on one replicated Job's pod template, `per-job` or
  `per-replicated-job` splits that one alone, whatever the JobSet says
  (`_template_split`). The JobSet controller copies none of the
  JobSet's annotations to its pods, so the set's gang carries the split
  (`GroupInfo.jobset_split`), and the core moves each pod to its gang from its
  replicated Job and Job index labels (`sources.jobset_resolve`), as a pod relabelled:
  when the JobSet is read after its pods, or its split changes, its pods' tallies move.
  `jobset_groups_from_k8s` gives every gang.

The JobSet's `gang-extender.x-k8s.io/topology-required` and `topology-preferred`
annotations are the gang's topology, as on a PodGroup (docs/topology.md): the whole
set in one domain when the user asks for one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from extender.core.model import fields
from extender.core.model.annotations import topology_of
from extender.core.model.sources import (
    JOBSET,
    JOBSET_GANG_ANNOTATION,
    JOBSET_MODES,
    JOBSET_OFF,
    JOBSET_PER_JOB,
    JOBSET_PER_RJOB,
    JOBSET_SET,
    jobset_gang_name,
    jobset_job_gang_name,
    jobset_rjob_gang_name,
)
from extender.core.model.types import GroupInfo

__all__ = ["JOBSET_GANG_ANNOTATION", "jobset_group_from_k8s", "jobset_groups_from_k8s"]

# JobSet's own annotations (JobSet API v1alpha2, read as documented there).
EXCLUSIVE_TOPOLOGY = "alpha.jobset.sigs.k8s.io/exclusive-topology"
NODE_SELECTOR_STRATEGY = "alpha.jobset.sigs.k8s.io/node-selector"


def _mode(annotations: Mapping[str, str]) -> str:
    """The gang annotation, refused with the allowed values when it is none of them:
    read as "set", a misspelt "off" would make a JobSet whose user wanted no gang wait
    for all of its pods (the error names the JobSet: `fields.guarded`)."""
    raw = annotations.get(JOBSET_GANG_ANNOTATION)
    if raw is None:
        return JOBSET_SET
    mode = raw.strip()
    if mode not in JOBSET_MODES:
        raise ValueError(f"metadata.annotations[{JOBSET_GANG_ANNOTATION}]: "
                         f"{fields.shown(raw)} is not one of {', '.join(map(repr, JOBSET_MODES))}")
    return mode


def _template_split(template: Mapping[str, Any], w: str) -> str | None:
    """How a replicated Job's pod template splits that replicated Job off the set's gang
    (None: as the JobSet says). It takes both splits, each meaning on one replicated
    Job what it means on the JobSet for all: `per-job`, a gang per Job; and
    `per-replicated-job`, its Jobs together, one gang of their own, which the JobSet's
    value cannot say for one replicated Job alone (there it splits every one), e.g. many
    worker Jobs placed whole apart from a driver and parameter servers kept as one
    gang. `set` and `off` say what the whole JobSet is: refused here, naming the JobSet
    as their place, rather than read as "as the JobSet says", which would quietly hold
    pods whose user asked for none to a gang."""
    spec = fields.as_obj(template.get("spec"), f"{w}.spec")
    pod = fields.as_obj(spec.get("template"), f"{w}.spec.template")
    meta = fields.as_obj(pod.get("metadata"), f"{w}.spec.template.metadata")
    where = f"{w}.spec.template.metadata.annotations"
    raw = fields.as_str_map(meta.get("annotations"), where).get(JOBSET_GANG_ANNOTATION)
    if raw is None:
        return None
    if raw not in (JOBSET_PER_JOB, JOBSET_PER_RJOB):
        raise ValueError(f"{where}[{JOBSET_GANG_ANNOTATION}]: {fields.shown(raw)} is not "
                         f"{JOBSET_PER_JOB!r} or {JOBSET_PER_RJOB!r}, the values a pod "
                         f"template takes; {JOBSET_SET!r} and {JOBSET_OFF!r} go on the "
                         f"JobSet's own metadata.annotations")
    return raw


def _pods_per_job(template: Mapping[str, Any], w: str) -> int:
    """Pods one Job of the template runs at once: parallelism (default 1), no more than
    completions where those are set, as the Job controller starts them."""
    spec = fields.as_obj(template.get("spec"), f"{w}.spec")
    parallelism = fields.as_int(spec.get("parallelism"), f"{w}.spec.parallelism", 1)
    if parallelism < 0:
        raise ValueError(f"{w}.spec.parallelism must be >= 0, got {parallelism}")
    completions = spec.get("completions")
    if completions is not None:
        done = fields.as_int(completions, f"{w}.spec.completions", parallelism)
        if done < 0:
            raise ValueError(f"{w}.spec.completions must be >= 0, got {done}")
        parallelism = min(parallelism, done)
    return parallelism


def _started(statuses: Mapping[str, Mapping[str, Any]], name: str, replicas: int,
             need: str) -> bool:
    """Whether a replicated Job reached what a later one waits for, by the counts the
    JobSet controller itself compares: "Complete" every Job succeeded; "Ready" (and the
    InOrder startup) every Job ready, succeeded or failed. No status yet: not reached."""
    st = statuses.get(name)
    if st is None:
        return False

    def count(field: str) -> int:
        return fields.as_int(st.get(field), f"status.replicatedJobsStatus[{name}].{field}", 0)

    if need == "Complete":
        return count("succeeded") == replicas
    return count("ready") + count("succeeded") + count("failed") == replicas


def _build_jobset(obj: Mapping[str, Any], _ident: str) -> list[GroupInfo]:
    meta, spec, status, name = fields.sections(obj)
    uid = fields.required_str(meta.get("uid"), "metadata.uid")
    annotations = fields.as_str_map(meta.get("annotations"), "metadata.annotations")
    mode = _mode(annotations)
    attempt = fields.as_int(status.get("restarts"), "status.restarts", 0)
    if attempt < 0:
        raise ValueError(f"status.restarts must be >= 0, got {attempt}")
    startup = fields.as_obj(spec.get("startupPolicy"), "spec.startupPolicy")
    in_order = fields.as_str(startup.get("startupPolicyOrder"),
                             "spec.startupPolicy.startupPolicyOrder") == "InOrder"
    statuses: dict[str, Mapping[str, Any]] = {}
    for i, st in enumerate(fields.as_list(status.get("replicatedJobsStatus"),
                                          "status.replicatedJobsStatus")):
        st = fields.as_obj(st, f"status.replicatedJobsStatus[{i}]")
        statuses[fields.as_str(st.get("name"), f"status.replicatedJobsStatus[{i}].name")] = st
    set_exclusive = (EXCLUSIVE_TOPOLOGY in annotations
                     and NODE_SELECTOR_STRATEGY not in annotations)

    quorum = 0
    split: dict[str, str] = {}  # replicated Job -> how it is split off the set's gang
    parts: list[tuple[str, int]] = []  # (gang name, quorum) of each gang split off
    set_gang = jobset_gang_name(name, uid, attempt)
    replicas_of: dict[str, int] = {}
    later = False  # InOrder: a replicated Job before this one has not started
    for i, rjob in enumerate(fields.as_list(spec.get("replicatedJobs"), "spec.replicatedJobs")):
        w = f"spec.replicatedJobs[{i}]"
        rjob = fields.as_obj(rjob, w)
        rname = fields.as_str(rjob.get("name"), f"{w}.name")
        replicas = fields.as_int(rjob.get("replicas"), f"{w}.replicas", 1)
        if replicas < 0:
            raise ValueError(f"{w}.replicas must be >= 0, got {replicas}")
        replicas_of[rname] = replicas
        # Its split is the same before its stage starts as after: a pod's gang must not
        # move as the JobSet's status does.
        template = fields.as_obj(rjob.get("template"), f"{w}.template")
        own = _template_split(template, f"{w}.template")
        if own is not None:
            split[rname] = own
        elif mode in (JOBSET_PER_JOB, JOBSET_PER_RJOB):
            split[rname] = mode
        if later:
            continue
        # Created only once every replicated Job it depends on reached the status named.
        waits = False
        for j, dep in enumerate(fields.as_list(rjob.get("dependsOn"), f"{w}.dependsOn")):
            dep = fields.as_obj(dep, f"{w}.dependsOn[{j}]")
            dname = fields.as_str(dep.get("name"), f"{w}.dependsOn[{j}].name")
            need = fields.as_str(dep.get("status"), f"{w}.dependsOn[{j}].status")
            if not _started(statuses, dname, replicas_of.get(dname, 0), need):
                waits = True
        if waits:
            continue
        tmeta = fields.as_obj(template.get("metadata"), f"{w}.template.metadata")
        tann = fields.as_str_map(tmeta.get("annotations"), f"{w}.template.metadata.annotations")
        exclusive = set_exclusive or (EXCLUSIVE_TOPOLOGY in tann
                                      and NODE_SELECTOR_STRATEGY not in tann)
        per_job = _pods_per_job(template, f"{w}.template")
        count = min(per_job, 1) if exclusive else per_job
        how = split.get(rname)
        if how == JOBSET_PER_JOB:
            parts += [(jobset_job_gang_name(set_gang, rname, k), count) for k in range(replicas)]
        elif how == JOBSET_PER_RJOB:
            parts.append((jobset_rjob_gang_name(set_gang, rname), replicas * count))
        else:
            quorum += replicas * count
        if in_order and not _started(statuses, rname, replicas, "Ready"):
            later = True  # InOrder: the next replicated Job waits until this one has started

    required, preferred, error = topology_of(annotations)
    namespace = fields.shared(fields.as_str(meta.get("namespace"), "metadata.namespace",
                                            "default"))
    creation = fields.parse_time(meta.get("creationTimestamp"), "metadata.creationTimestamp")
    seen: set[str] = {set_gang}
    for gang, _ in parts:
        if gang in seen:
            raise ValueError(f"{JOBSET_GANG_ANNOTATION}: two gangs of this JobSet would be "
                             f"named {fields.shown(gang)} (a replicated Job's name is "
                             f"another's split per Job with its index): rename one, or "
                             f"split both alike")
        seen.add(gang)
    # "off": gangs of one, each pod placed alone. A gang of no pods at all is the same:
    # a quorum of 0 would let nothing count as short of it. The set's gang comes first,
    # even with every pod in another: the JobSet's key names it, and it carries the split.
    return [GroupInfo(namespace=namespace, name=gang, uid=uid, creation=creation,
                      min_member=1 if mode == JOBSET_OFF else max(count, 1), source=JOBSET,
                      topology_required=required, topology_preferred=preferred,
                      topology_error=error,
                      jobset_split=tuple(sorted(split.items())) if gang == set_gang else None)
            for gang, count in [(set_gang, quorum), *parts]]


def jobset_groups_from_k8s(obj: Any) -> list[GroupInfo]:
    """A JobSet to its gangs (this module's docstring says how): the set's, then one per
    Job of each replicated Job split "per-job" and one per replicated Job split
    "per-replicated-job", of the stages created so far; a `ValueError` naming the JobSet
    and the field for anything malformed, like every other source's objects."""
    return fields.guarded("jobset", obj, _build_jobset)


def jobset_group_from_k8s(obj: Any) -> GroupInfo:
    """The JobSet's own gang (`jobset_groups_from_k8s`, first): of every pod not split
    off into a gang of its Job or replicated Job, and carrying the split."""
    return jobset_groups_from_k8s(obj)[0]
