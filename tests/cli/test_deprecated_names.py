"""Renamed user-facing names keep their old spelling for one release
(extender/deprecated.py; docs/observability.md "Deprecated names"): the old flag still
sets the value and warns, the old metric is still exported beside the new one."""

from __future__ import annotations

import logging

import pytest
from prometheus_client import generate_latest

from extender.cli import build_parser
from extender.core.manager import GangManager
from extender.deprecated import FLAGS, METRICS, warn_deprecated
from extender.reporting.metrics import Metrics


def test_old_bind_hold_limit_flag_sets_the_wait_limit_and_warns(
        caplog: pytest.LogCaptureFixture) -> None:
    parser = build_parser()
    assert parser.parse_args(["serve"]).bind_wait_limit == 240.0
    assert parser.parse_args(["serve", "--bind-wait-limit", "30"]).bind_wait_limit == 30.0
    args = parser.parse_args(["serve", "--bind-hold-limit", "30"])
    assert args.bind_wait_limit == 30.0
    with caplog.at_level(logging.WARNING, logger="gang-extender"):
        warn_deprecated(args)
    assert "--bind-hold-limit is deprecated" in caplog.text
    assert "--bind-wait-limit" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="gang-extender"):
        warn_deprecated(parser.parse_args(["serve", "--bind-wait-limit", "30"]))
    assert caplog.text == ""


def test_old_flag_is_checked_like_the_new_one(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--bind-hold-limit", "0"])
    assert "expected a positive number" in capsys.readouterr().err


def test_old_flags_are_hidden_from_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--help"])
    text = capsys.readouterr().out
    for old, new in FLAGS.items():
        assert new in text and old not in text


def test_old_metric_names_are_exported_beside_the_new_ones() -> None:
    metrics = Metrics()
    metrics.refresh(GangManager().reads)
    text = generate_latest(metrics.registry).decode()
    for old, new in METRICS.items():
        assert f"\n{old} 0.0" in text and f"\n{new} 0.0" in text
