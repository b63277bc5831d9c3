"""Which autoscaler the e2e provisioning tests run against (e2e/integrations/autoscaler_standin.py's
the real Cluster Autoscaler when it can be had, the stand-in otherwise, or as told."""

from __future__ import annotations

from pathlib import Path

import pytest

from e2e.integrations.autoscaler_standin import choose


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("E2E_AUTOSCALER", raising=False)
    monkeypatch.delenv("E2E_AUTOSCALER_GIT", raising=False)
    return tmp_path


def test_auto_takes_the_stand_in_where_the_autoscaler_is_not_built(cache: Path) -> None:
    kind, why = choose()
    assert kind == "standin" and "not built" in why


def test_auto_takes_the_built_autoscaler(cache: Path) -> None:
    built = cache / "gang-extender" / "cluster-autoscaler" / "v1.36.1" / "cluster-autoscaler"
    built.parent.mkdir(parents=True)
    built.write_text("")
    assert choose()[0] == "real"


def test_auto_takes_the_real_one_when_its_source_is_pointed_at(
        cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("E2E_AUTOSCALER_GIT", "/srv/mirror/autoscaler")
    assert choose() == ("real", "E2E_AUTOSCALER_GIT is set")


def test_the_variable_decides_and_a_typo_is_an_error(
        cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("E2E_AUTOSCALER_GIT", "/srv/mirror/autoscaler")
    monkeypatch.setenv("E2E_AUTOSCALER", "standin")
    assert choose()[0] == "standin"
    monkeypatch.setenv("E2E_AUTOSCALER", "real")
    assert choose()[0] == "real"
    monkeypatch.setenv("E2E_AUTOSCALER", "stand-in")
    with pytest.raises(ValueError, match="expected real, standin or auto"):
        choose()
