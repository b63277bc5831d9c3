"""The user's documents stay readable and their links stay true.

README.md is the front door: what the project is, why, the two commands, how it works and
where to read on. It grew to 600 lines of flags, measurements and history once, and a
reader looking for "how do I install it" had to scroll past all of it; docs/ files grew
the same way (1,300 lines of install guide). So: README.md at most 250 lines, every
docs/*.md at most 600, each subject in a file of its own.

Moving a section into another file breaks every link to it, silently: a reader lands on
the top of a page, or on GitHub's 404. So every relative link in README.md and docs/*.md
must name a file that exists and, with a `#anchor`, a heading of that file, spelled as
GitHub spells anchors (lowercase; punctuation but `-` and `_` dropped; each space a `-`;
a repeated heading gets `-1`, `-2`, ...). Links inside code blocks are not links.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

# The checkout's root, wherever in tests/ this file is moved.
REPO = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file())
README_MAX_LINES = 250
DOC_MAX_LINES = 600
# What a user reads to learn what the scheduler costs: the numbers and how to measure
# them, not the history of getting there (lab/history/performance-history.md).
PERFORMANCE_MAX_LINES = 399

_FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.M | re.S)
_CODE_SPAN = re.compile(r"`[^`\n]*`")
# [text](target) or ![alt](target), the text possibly over several lines; an optional title.
_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t#]*$", re.M)


def _without_code(text: str) -> str:
    """The text with its fenced blocks blanked (line count kept) and code spans emptied:
    a `# comment` in a YAML block is no heading, a `[x](y)` in one no link."""
    return _FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)


def too_long(text: str, limit: int) -> str | None:
    """Why `text` is over `limit` lines, or None."""
    lines = len(text.splitlines())
    return f"{lines} lines, over {limit}" if lines > limit else None


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text (markdown of links kept as their text)."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip())
    text = re.sub(r"[^\w\s-]", "", text.lower())
    return re.sub(r"\s", "-", text)


def anchors(markdown: str) -> set[str]:
    """Every anchor a file's headings define, duplicates numbered as GitHub numbers them."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    for heading in _HEADING.findall(_without_code(markdown)):
        base = slug(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def links(markdown: str) -> list[str]:
    """The link targets of a file, outside code."""
    text = _CODE_SPAN.sub("``", _without_code(markdown))
    return _LINK.findall(text)


def broken_links(path: Path, text: str | None = None) -> list[str]:
    """The relative links of `path` (or of `text`, read as if it were at `path`) that name
    no existing file, or a heading the file does not have."""
    text = path.read_text() if text is None else text
    out = []
    for target in links(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        if not file_part:  # a heading of this very file
            if anchor not in anchors(text):
                out.append(f"{target}: {path.relative_to(REPO)} has no heading #{anchor}")
            continue
        dest = (path.parent / file_part).resolve()
        if not dest.exists():
            out.append(f"{target}: no file {file_part}")
            continue
        if anchor and dest.suffix == ".md" and anchor not in anchors(dest.read_text()):
            out.append(f"{target}: {dest.relative_to(REPO)} has no heading #{anchor}")
    return out


DOCS = sorted((REPO / "docs").glob("*.md"))
USER_FILES = [REPO / "README.md", *DOCS]


def test_the_readme_is_short() -> None:
    problem = too_long((REPO / "README.md").read_text(), README_MAX_LINES)
    assert problem is None, f"README.md: {problem}"


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_a_docs_file_is_at_most_600_lines(path: Path) -> None:
    problem = too_long(path.read_text(), DOC_MAX_LINES)
    assert problem is None, f"{path.name}: {problem}"


def test_the_performance_page_is_under_400_lines() -> None:
    problem = too_long((REPO / "docs" / "performance.md").read_text(), PERFORMANCE_MAX_LINES)
    assert problem is None, f"performance.md: {problem}"


@pytest.mark.parametrize("path", USER_FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_finds_its_file_and_heading(path: Path) -> None:
    assert broken_links(path) == []


def test_github_slugs() -> None:
    assert slug("Job-made gangs: a Job with no PodGroup of its own (`WorkloadWithJob`)") == (
        "job-made-gangs-a-job-with-no-podgroup-of-its-own-workloadwithjob")
    assert slug("Kubernetes 1.37 (default)") == "kubernetes-137-default"
    assert slug("4. Upgrade") == "4-upgrade"
    assert slug("`kubectl get pg`") == "kubectl-get-pg"
    assert slug("snake_case and  two spaces") == "snake_case-and--two-spaces"
    text = "# Top\n## Same\n```yaml\n# not a heading\n```\n## Same\n"
    assert anchors(text) == {"top", "same", "same-1"}


DOC = REPO / "docs" / "example.md"  # not read: the texts below stand in for it


@pytest.mark.parametrize(("text", "found"), [
    ("[ok](install.md)", []),
    ("[gone](no-such-file.md)", ["no-such-file.md: no file no-such-file.md"]),
    ("[ok](install.md#2-install)", []),
    ("[bad](install.md#no-such-heading)",
     ["install.md#no-such-heading: docs/install.md has no heading #no-such-heading"]),
    ("# Here\n[self](#here) [self](#there)",
     ["#there: docs/example.md has no heading #there"]),
    ("[up](../README.md) [img](../bench/nothing.png)",
     ["../bench/nothing.png: no file ../bench/nothing.png"]),
    ("[over\ntwo lines](nowhere.md)", ["nowhere.md: no file nowhere.md"]),
    ("```\n[in code](nowhere.md)\n```\n`[span](nowhere.md)` [web](https://x.io/a.md)", []),
], ids=["file", "missing-file", "anchor", "missing-anchor", "own-anchor", "up-and-image",
        "wrapped", "code-and-web"])
def test_the_link_check_can_fail(text: str, found: list[str]) -> None:
    assert broken_links(DOC, text) == found


@pytest.mark.parametrize(("lines", "limit", "found"), [
    (250, README_MAX_LINES, None),
    (251, README_MAX_LINES, "251 lines, over 250"),
    (600, DOC_MAX_LINES, None),
    (601, DOC_MAX_LINES, "601 lines, over 600"),
])
def test_the_line_limit_can_fail(lines: int, limit: int, found: str | None) -> None:
    assert too_long("a line\n" * lines, limit) == found
