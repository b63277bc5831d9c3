"""The namespace and the two service accounts deploy/ installs: kube-scheduler's and the
extender's, each with its own rules. The RBAC checks of the security tests and of the
install's hardening tests both read the manifests for these names, so they are written
once here rather than in a test module the other imports from."""

from __future__ import annotations

NS = "gang-scheduler-system"
SCHEDULER_SA = "gang-scheduler"
EXTENDER_SA = "gang-scheduler-extender"
