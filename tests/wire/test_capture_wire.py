"""The recorder behind tests/wire (e2e/capture_wire.py), without a cluster: the two
configurations it runs kube-scheduler with, what it answers, what it keeps of a call, and
that the committed recording is the one its configuration produces."""

from __future__ import annotations

import copy
import http.client
import json
from typing import Any

import pytest
import yaml

from e2e.capture_wire import (
    DEPLOY_CONFIG,
    VERBS,
    RecordingExtender,
    answer,
    mode_name,
    profile_name,
    wire_configs,
)
from tests.wire import WIRE_DIR, capture, sample

URL = "http://127.0.0.1:1"


def deploy() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(DEPLOY_CONFIG.read_text())
    return data


def test_both_modes_are_deploys_configuration_with_only_the_address_and_the_flag_changed(
) -> None:
    original = deploy()
    before = copy.deepcopy(original)
    configs = wire_configs(original, URL)
    assert original == before  # deploy's own dict is left alone
    for capable, cfg in configs.items():
        assert [e["nodeCacheCapable"] for e in cfg["extenders"]] == [capable] * len(
            before["extenders"])
        assert {e["urlPrefix"] for e in cfg["extenders"]} == {URL}
        assert cfg["leaderElection"] == {"leaderElect": False}
        # Everything else (verbs, timeouts, profile, backoff) is what users install.
        for key in set(before) - {"extenders", "leaderElection"}:
            assert cfg[key] == before[key], key
        for ours, theirs in zip(cfg["extenders"], before["extenders"], strict=True):
            rest = {k: v for k, v in theirs.items() if k not in ("urlPrefix", "nodeCacheCapable")}
            assert rest.items() <= ours.items()
    assert profile_name(configs[True]) == "gang-scheduler"


@pytest.mark.parametrize(("cfg", "message"), [
    ({"profiles": [{"schedulerName": "s"}]}, "no extenders"),
    ({"extenders": []}, "no extenders"),
    ({"extenders": ["http://x"]}, "not a mapping"),
])
def test_a_configuration_it_cannot_record_under_is_a_clear_error(
        cfg: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        wire_configs(cfg, URL)


def test_profile_name_wants_exactly_one_named_profile() -> None:
    with pytest.raises(ValueError, match="exactly one profile"):
        profile_name({"profiles": [{"schedulerName": "a"}, {"schedulerName": "b"}]})


def test_answers_pass_every_node_in_the_form_the_request_used() -> None:
    by_name = sample("nodecachecapable-true.filter.request.json")
    by_object = sample("nodecachecapable-false.filter.request.json")
    assert answer("filter", by_name)["NodeNames"] == by_name["NodeNames"]
    assert answer("filter", by_name)["Nodes"] is None
    assert answer("filter", by_object)["Nodes"] == by_object["Nodes"]
    assert answer("filter", by_object)["NodeNames"] is None
    hosts = [n["metadata"]["name"] for n in by_object["Nodes"]["items"]]
    assert answer("prioritize", by_object) == [{"Host": h, "Score": 0} for h in hosts]
    with pytest.raises(ValueError, match="unknown verb"):
        answer("preempt", by_name)


def test_the_recorder_answers_and_keeps_both_sides_of_a_call() -> None:
    rec = RecordingExtender()
    try:
        body = json.dumps(sample("nodecachecapable-true.filter.request.json")).encode()
        conn = http.client.HTTPConnection("127.0.0.1", int(rec.server.server_address[1]),
                                          timeout=10)
        replies = []
        for payload in (body, b"{broken"):  # one kept-alive connection, as Go's client
            conn.request("POST", "/filter", payload, {"Content-Type": "application/json"})
            resp = conn.getresponse()
            replies.append((resp.status, resp.getheader("Content-Type"),
                            json.loads(resp.read())))
        conn.close()
    finally:
        rec.stop()
    ok, broken = replies
    assert ok[:2] == (200, "application/json") and ok[2]["Error"] == ""
    assert "recorder" in broken[2]["Error"] and len(rec.errors) == 1
    first = rec.calls[0]
    assert first.request_line == "POST /filter HTTP/1.1"
    assert first.headers["Content-Type"] == "application/json"
    assert first.response == ok[2] and first.seq == 1
    assert rec.calls_for("default/gang-0") == {"filter": first}


def test_the_committed_recording_is_complete_and_made_under_deploys_configuration() -> None:
    manifest = capture()
    assert manifest["schedulerName"] == profile_name(deploy())
    assert manifest["kubernetesVersion"].startswith("v1.")
    assert [m["nodeCacheCapable"] for m in manifest["modes"]] == [True, False]
    for mode in manifest["modes"]:
        prefix = mode_name(mode["nodeCacheCapable"])
        assert sorted(mode["files"]) == sorted(
            [f"{prefix}.{v}.{side}.json" for v in VERBS for side in ("request", "response")]
            + [f"{prefix}.http.json"])
        filt = sample(f"{prefix}.filter.request.json")
        assert filt["Pod"]["metadata"]["uid"] == mode["pod"]["uid"]
        assert sample(f"{prefix}.bind.request.json")["Node"] == mode["boundTo"]
        if mode["nodeCacheCapable"]:
            assert filt["Nodes"] is None and sorted(filt["NodeNames"]) == manifest["nodes"]
        else:
            assert filt["NodeNames"] is None
            assert sorted(n["metadata"]["name"] for n in filt["Nodes"]["items"]) == (
                manifest["nodes"])
        http = sample(f"{prefix}.http.json")
        assert [http[v]["path"] for v in VERBS] == ["/filter", "/prioritize", "/bind"]
    assert (WIRE_DIR / "README.md").read_text().count(manifest["kubernetesVersion"]) == 1
