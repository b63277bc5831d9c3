"""`serve.wire` hands one catch-up channel to the binding cycle, which makes requests on
it when a Binding's answer is lost, and to the informer, which serves them
(kube/catch_up.py): made before both, as the `synced` event is, since the dispatcher is
made before the informer that takes its `cache_changed`."""

from __future__ import annotations

import asyncio
from pathlib import Path

import yaml

from extender.cli import build_parser, core_config
from extender.kube.catch_up import FIT_KINDS
from extender.serve import wire


def test_the_binding_cycle_and_the_informer_share_one_catch_up_channel(
        tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "t",
        "clusters": [{"name": "t", "cluster": {"server": "http://127.0.0.1:9"}}],
        "users": [{"name": "t", "user": {"token": "t"}}],
        "contexts": [{"name": "t", "context": {"cluster": "t", "user": "t"}}],
    }))
    args = build_parser().parse_args(["serve", "--kubeconfig", str(kubeconfig)])

    async def go() -> None:
        parts = wire(args, core_config(args))
        try:
            asked = parts.dispatcher.bindings.hooks.catch_up
            assert asked is not None and asked.kinds == FIT_KINDS
            assert parts.informer._options.catch_up is asked
            # The kinds it names are the informer's kinds that decide fits.
            assert {k.name for k in parts.informer.kinds if k.holds_commits} == set(FIT_KINDS)
        finally:
            await parts.kube.http.aclose()

    asyncio.run(go())
