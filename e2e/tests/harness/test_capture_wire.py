"""``python -m e2e.capture_wire`` still records what tests/wire holds.

Why an e2e test: the recording is made once per Kubernetes release, so a script that has
rotted (a harness rename, a changed deploy/ configuration) would only be found on the day
it is needed. This runs it into a temporary directory and compares it with the committed
recording: the same files, requests of the same form, and, on the release it was made
from, replies and requests of the same shape (values such as uids and times differ on
every run).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from e2e.capture_wire import VERBS, capture, mode_name
from e2e.harness.cluster import ControlPlane
from e2e.harness.target import current_cluster
from tests.wire import WIRE_DIR, sample
from tests.wire import capture as committed_capture

pytestmark = pytest.mark.e2e


def shape(value: Any) -> Any:
    """Keys and kinds of values, not the values."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    return type(value).__name__


def test_a_new_recording_matches_the_committed_one(
        local_control_plane: ControlPlane, tmp_path: Path) -> None:
    manifest = capture(tmp_path)
    assert current_cluster() is local_control_plane  # the session's cluster is back
    committed = committed_capture()
    assert [m["files"] for m in manifest["modes"]] == [m["files"] for m in committed["modes"]]
    same_release = manifest["kubernetesVersion"] == committed["kubernetesVersion"]
    for mode in manifest["modes"]:
        prefix = mode_name(mode["nodeCacheCapable"])
        for verb in VERBS:
            for side in ("request", "response"):
                name = f"{prefix}.{verb}.{side}.json"
                ours = json.loads((tmp_path / name).read_text())
                theirs = sample(name)
                if isinstance(theirs, dict):
                    assert list(ours) == list(theirs), name
                if same_release:
                    assert shape(ours) == shape(theirs), name
        assert sorted(mode["pod"]) == ["creationTimestamp", "name", "namespace", "uid"]
    assert (tmp_path / "README.md").is_file() and (WIRE_DIR / "README.md").is_file()
