"""Each CRD has one source, crds/: Kustomize reads it there, and the Helm chart's copy
is the one `make crds` (tools/sync_crds.py) writes, so a copy edited by hand, or left
behind when its source changed, fails here with the command that fixes it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from tools import sync_crds

REPO = Path(__file__).resolve().parents[2]
CRD = "scheduling.x-k8s.io_podgroups.yaml"


def test_every_copy_is_what_make_crds_writes() -> None:
    assert sync_crds.sources(), "crds/ holds no CRD"
    assert sync_crds.stale() == [], "run `make crds`"


def test_kustomize_installs_the_source_not_a_copy() -> None:
    kust = yaml.safe_load((REPO / "deploy" / "kustomization.yaml").read_text())
    assert "../crds" in kust["resources"]
    base = yaml.safe_load((REPO / "crds" / "kustomization.yaml").read_text())
    assert sorted(base["resources"]) == sorted(sync_crds.sources())


def test_no_other_file_defines_a_crd_of_crds() -> None:
    """A third copy (or a second source) of one of our CRDs, wherever it appears."""
    ours = {yaml.safe_load(body)["metadata"]["name"] for body in sync_crds.sources().values()}
    allowed = {sync_crds.SOURCE, *sync_crds.COPIES}
    others = []
    for path in REPO.rglob("*.yaml"):
        rel = path.relative_to(REPO)
        if {".venv", ".git", "node_modules"} & set(rel.parts) or rel.parent in allowed:
            continue
        text = path.read_text(errors="replace")
        if "CustomResourceDefinition" not in text:
            continue
        for doc in yaml.safe_load_all(text):
            if (isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition"
                    and doc.get("metadata", {}).get("name") in ours):
                others.append(str(rel))
    assert others == []


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """crds/ and the chart's copies of this repository, in a scratch folder."""
    for folder in (sync_crds.SOURCE, *sync_crds.COPIES):
        shutil.copytree(REPO / folder, tmp_path / folder)
    return tmp_path


def test_an_edited_copy_is_stale_until_synced(tree: Path) -> None:
    copy = tree / sync_crds.COPIES[0] / CRD
    copy.write_text(copy.read_text().replace("minMember", "minMembers", 1))
    assert sync_crds.stale(tree) == [str(sync_crds.COPIES[0] / CRD)]
    assert sync_crds.sync(tree) == [str(sync_crds.COPIES[0] / CRD)]
    assert sync_crds.stale(tree) == []
    assert copy.read_bytes() == (REPO / "crds" / CRD).read_bytes()


def test_a_new_source_is_copied_and_a_copy_without_one_removed(tree: Path) -> None:
    (tree / "crds" / "example.com_widgets.yaml").write_text("kind: CustomResourceDefinition\n")
    (tree / sync_crds.COPIES[0] / "example.com_gone.yaml").write_text("old\n")
    chart = sync_crds.COPIES[0]
    assert sync_crds.stale(tree) == [str(chart / "example.com_gone.yaml"),
                                     str(chart / "example.com_widgets.yaml")]
    sync_crds.sync(tree)
    assert sync_crds.stale(tree) == []
    assert not (tree / chart / "example.com_gone.yaml").exists()
    assert (tree / chart / "example.com_widgets.yaml").read_text() == (
        "kind: CustomResourceDefinition\n")


def test_the_check_exits_1_on_a_stale_copy_and_writes_nothing(
        tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert sync_crds.main(["--check"], tree) == 0
    (tree / sync_crds.COPIES[0] / CRD).write_text("edited\n")
    assert sync_crds.main(["--check"], tree) == 1
    assert "make crds" in capsys.readouterr().err
    assert (tree / sync_crds.COPIES[0] / CRD).read_text() == "edited\n"
    assert sync_crds.main([], tree) == 0
    assert sync_crds.main(["--check"], tree) == 0
