"""User-facing names renamed so that each word means one idea (docs/architecture.md,
"Words"), kept under their old spelling for one release so that deployments, dashboards
and scripts built on them keep working while they move. Each old name lives here and
nowhere else; docs/observability.md ("Deprecated names") lists them for users.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from typing import Any

log = logging.getLogger("gang-extender")

# old flag → new flag. A bind request "waits" at the permit barrier; "held" is capacity.
FLAGS = {"--bind-hold-limit": "--bind-wait-limit"}
# old metric name → new metric name (both exported, same value).
METRICS = {"gang_extender_held_binds": "gang_extender_waiting_binds"}
# old debug key → new debug key (both in the JSON, same value).
DEBUG_KEYS = {"heldBinds": "waitingBinds"}


class DeprecatedFlag(argparse.Action):
    """Stores into the new flag's destination and remembers that the old spelling was
    used, so the warning is logged once logging is set up (`warn_deprecated`)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: str | Sequence[Any] | None, option_string: str | None = None) -> None:
        setattr(namespace, self.dest, values)
        used = getattr(namespace, "deprecated_flags", None) or []
        used.append(option_string)
        namespace.deprecated_flags = used


def add_deprecated_flag(parser: argparse.ArgumentParser, old: str, **kwargs: Any) -> None:
    """`old` as an alias of `FLAGS[old]`: same type and destination, hidden from --help."""
    new = FLAGS[old]
    parser.add_argument(old, dest=new.lstrip("-").replace("-", "_"), action=DeprecatedFlag,
                        default=argparse.SUPPRESS, help=argparse.SUPPRESS, **kwargs)


def warn_deprecated(args: argparse.Namespace) -> None:
    for old in getattr(args, "deprecated_flags", None) or []:
        log.warning("flag %s is deprecated and will be removed in the next release: "
                    "use %s", old, FLAGS[old])


def with_old_keys(body: dict[str, Any]) -> dict[str, Any]:
    """A debug view with each renamed key also under its old name."""
    for old, new in DEBUG_KEYS.items():
        if new in body:
            body[old] = body[new]
    return body
