"""`core_config`: the `serve` flags as the gang manager's settings, and the flags that
contradict each other refused by name before anything starts (a usage error, not a
crash of a half-started process)."""

from __future__ import annotations

import pytest

from extender.cli import build_parser, core_config
from extender.core.model.config import BackoffPolicy, Config


def _config(*flags: str) -> Config:
    return core_config(build_parser().parse_args(["serve", *flags]))


def test_the_defaults_turn_on_what_the_process_runs_with() -> None:
    config = _config()
    assert config.direct_commit and config.provisioning and config.preemption
    assert config.max_timeout_seconds == 600.0
    assert config.starvation_after_seconds == 30.0


def test_a_core_built_by_hand_commits_as_the_process_does() -> None:
    """One default for the direct commit: the flag's comes from the core's settings, so
    a core built without flags (tests, benchmarks, tools) is not a different scheduler
    from the one the process runs."""
    assert _config().direct_commit is Config().direct_commit is True


def test_zero_turns_the_cap_and_the_starvation_guard_off() -> None:
    config = _config("--max-schedule-timeout", "0", "--starvation-after", "0")
    assert config.max_timeout_seconds is None and config.starvation_after_seconds is None


def test_off_switches_reach_the_core() -> None:
    config = _config("--direct-commit", "off", "--provisioning-requests", "off",
                     "--preemption", "off")
    assert not (config.direct_commit or config.provisioning or config.preemption)


def test_a_cap_below_the_base_is_raised_to_it() -> None:
    assert _config("--backoff-base", "20", "--backoff-cap", "5",
                   "--backoff-limit", "3").backoff == BackoffPolicy(20, 20, 3)


@pytest.mark.parametrize(("flags", "error"), [
    (("--backoff-limit", "0"), "--backoff-limit must be at least 1"),
    (("--default-timeout", "700"), "--default-timeout 700 exceeds --max-schedule-timeout 600"),
])
def test_contradicting_flags_are_a_usage_error(flags: tuple[str, ...], error: str) -> None:
    with pytest.raises(SystemExit, match=error):
        _config(*flags)
