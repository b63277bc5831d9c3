"""What the experiments share and the benchmarks do not: where the lab's results go, and
how an experiment loads an old revision's code to time it beside today's."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from bench.common import REPO

# An experiment's results are the lab's, not the benchmarks' latest (bench/results/).
RESULTS = Path(__file__).resolve().parent / "results"


# The model's modules left the core's root (issue 29 item 2): a revision before that has
# them there, importing each other from there; read either, importing from the model.
MOVED_TO_MODEL = ("types", "resources", "quantity", "constraints", "convert",
                  "convert_groups", "annotations", "sources", "vocabulary", "config",
                  "phase", "fit")


def source_at(rev: str, name: str) -> str:
    """The text of core module `name` at git revision `rev`, wherever that revision
    keeps it, with its imports of the moved modules pointed at the model: what the
    experiments that time an old revision's code load."""
    for path in (f"extender/core/model/{name}.py", f"extender/core/{name}.py"):
        done = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=REPO,
                              capture_output=True, text=True)
        if done.returncode == 0:
            return re.sub(r"\bextender\.core\.(" + "|".join(MOVED_TO_MODEL) + r")\b",
                          r"extender.core.model.\1", done.stdout)
    raise SystemExit(f"{rev} has no {name}.py in extender/core/model/ or extender/core/")
