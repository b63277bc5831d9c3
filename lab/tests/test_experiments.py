"""The lab's experiments keep their answers findable and their pure parts working. Run with
`.venv/bin/pytest lab -q` (lab/README.md); `make test` does not: the lab is not the product.

The experiments themselves need a control plane or minutes of CPU, so only what can be
checked from plain data is: the docstring that says each one's question and where its
answer is written, and the tables and counts two of them compute."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# In an experiment's docstring: a file, then the heading that holds the answer.
WHERE = re.compile(r"((?:docs/[\w-]+|lab/history/[\w-]+|README)\.md), \"([^\"]+)\"")
EXPERIMENTS = sorted(p for p in (REPO / "lab" / "experiments").glob("*.py")
                     if p.name not in ("__init__.py", "plane.py"))


def _headings(path: Path) -> list[str]:
    return [" ".join(line.lstrip("#").split()) for line in path.read_text().splitlines()
            if line.startswith("#")]


@pytest.mark.parametrize("path", EXPERIMENTS, ids=lambda p: p.stem)
def test_an_experiment_says_its_question_and_where_the_answer_is(path: Path) -> None:
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    top = " ".join(doc.split("\n\n")[0].split())
    assert top.startswith("Question: ") and " Answer" in top, top
    places = WHERE.findall(top)
    assert places, f"{path.name}: its answer names no docs/, lab/history/ or README section"
    for file, heading in places:
        assert (REPO / file).exists(), f"{path.name}: {file} does not exist"
        assert any(h.startswith(heading) for h in _headings(REPO / file)), (
            f"{path.name}: {file} has no section {heading!r}")


def test_nominate_report_from_trials() -> None:
    """lab.experiments.nominate's tables from trial records (the run itself needs a control
    plane)."""
    from lab.experiments import nominate

    pending = "0/1 nodes are available: 1 Insufficient cpu."
    gang = {"nominate": True, "d": "bound", "gang_bound": True, "start_seconds": 0.05,
            "b_first_call_nodes": 1, "b_nnn_after_failed_retry": "n", "b_nnn_was": "n",
            "b_nnn_after_bind": "", "b_moved": True}
    data = {"kubernetes": "v0", "machine": {"date": "now", "commit": "x"}, "cases": {
        "foreign P=D": [{"d": "bound", "detail": "n", "p_still_nominated": True}] * 2,
        "own P=D": [{"d": "pending", "detail": pending, "p_still_nominated": True}] * 2,
        "node-name": [{"e_on_node": True, "e_running": True}],
        "binding": [{"bound": True, "nnn_after_binding": ""}],
        "gang on": [gang],
    }}
    md = nominate.report(data)
    assert "| foreign P=D | 2 | 2 | 0 | 2 | - |" in md
    assert f"| own P=D | 2 | 0 | 2 | 2 | {pending} |" in md
    assert "Running in 1 of 1 tries" in md and "still set in 0 of 1 tries" in md
    assert "| gang on | 1 | 1 | 1 | 0.05 | 0.05 | [1] | ['kept'] | ['cleared'] | 1 |" in md
    assert nominate._slug("foreign P<D") == "foreign-p-lt-d"


def test_bind_walk_starts_at_bind_and_counts_returns() -> None:
    """lab.experiments.bind_walk (docs/architecture.md, the walk of a bind call): its walk is the
    committing bind's, and a file entered again after another counts once per visit."""
    from lab.experiments.bind_walk import count, walk

    stops = walk()
    assert stops[0] == ("core/bind.py", "Bind.bind")
    assert any(q == "Ledger.commit" for _, q in stops)
    assert count([("a", "f"), ("a", "g"), ("b", "h"), ("a", "i"), ("c", "j"), ("b", "k")]) == (
        6, 3, 2)
