"""The metrics are declared once, in extender/reporting/metrics.toml (`DECLARED`): each
row becomes a `Metrics` attribute whose annotation gives callers its type, a malformed
catalogue is refused when the module is imported, and docs/observability.md's metrics
table lists exactly what the scrape serves, with the same kinds and labels."""

from __future__ import annotations

import re
import typing
from pathlib import Path

import pytest
from prometheus_client import Counter, Gauge, Histogram

from extender.deprecated import METRICS
from extender.reporting import metrics
from extender.reporting.metrics import DECLARED, CatalogueError, Metrics, parse_catalogue

_KINDS = (Counter, Gauge, Histogram)
_DOCS = Path(__file__).resolve().parents[2] / "docs" / "observability.md"
_SECTION = "## Metrics (`/metrics`)"


def kind_mismatches(cls: type, declared: tuple[metrics._Declared, ...]) -> list[str]:
    """Rows whose attribute is not annotated with their kind on `cls`, and metric
    annotations no row makes."""
    hints = typing.get_type_hints(cls)
    rows = {d.attribute: d.kind for d in declared}
    out = [f"{a}: declared {k.__name__}, annotated {getattr(hints.get(a), '__name__', None)}"
           for a, k in rows.items() if hints.get(a) is not k]
    out += [f"{a}: annotated, not declared" for a, t in hints.items()
            if t in _KINDS and a not in rows]
    return out


def test_every_declared_metric_is_an_attribute_of_its_annotated_kind() -> None:
    assert kind_mismatches(Metrics, DECLARED) == []
    m = Metrics()
    for d in DECLARED:
        assert type(getattr(m, d.attribute)) is d.kind, d.attribute


def test_the_kind_check_fails_on_a_row_out_of_step() -> None:
    wrong = tuple(metrics._Declared(d.attribute, Gauge, d.name, d.labels, d.help)
                  if d.attribute == "timeouts" else d for d in DECLARED)
    assert kind_mismatches(Metrics, wrong) == ["timeouts: declared Gauge, annotated Counter"]
    missing = tuple(d for d in DECLARED if d.attribute != "leader")
    assert kind_mismatches(Metrics, missing) == ["leader: annotated, not declared"]


def test_histograms_and_only_histograms_have_buckets() -> None:
    for d in DECLARED:
        assert (d.buckets is not None) == (d.kind is Histogram), d.attribute


def documented(docs: str) -> dict[str, tuple[str, tuple[str, ...]]]:
    """docs/observability.md's metrics table: metric name -> (its type, its labels). A row
    names one or more metrics, then their type, then their labels, each label in
    backquotes, optionally followed by its values in parentheses, then the prose."""
    section = docs.split(_SECTION, 1)[1].split("\n## ", 1)[0]
    table: dict[str, tuple[str, tuple[str, ...]]] = {}
    for line in section.splitlines():
        if not line.startswith("| `"):
            continue
        names, kind, rest = (cell.strip() for cell in line.strip().strip("|").split("|"))
        labels: list[str] = []
        while (label := re.match(r"`(\w+)`(?: \([^()]*\))?", rest)) is not None:
            labels.append(label.group(1))
            rest = rest[label.end():]
            if not rest.startswith(", "):
                break
            rest = rest[2:]
        for name in re.findall(r"`(\w+)`", names):
            table[name] = (kind, tuple(labels))
    return table


def docs_mismatches(docs: str, declared: tuple[metrics._Declared, ...]) -> list[str]:
    """Where the docs' metrics table and the catalogue disagree; a deprecated old name is
    listed under "Deprecated names", not in the table."""
    table = documented(docs)
    out = []
    for d in declared:
        if d.name in METRICS:
            if f"| `{d.name}` | `{METRICS[d.name]}` | metric |" not in docs:
                out.append(f"{d.name}: a deprecated name missing from \"Deprecated names\"")
            continue
        served = (d.kind.__name__.lower(), d.labels)
        got = table.pop(d.name, None)
        if got is None:
            out.append(f"{d.name}: served, not in the metrics table")
        elif got != served:
            out.append(f"{d.name}: documented as {got}, served as {served}")
    out += [f"{name}: in the metrics table, not served" for name in table]
    return out


def test_the_docs_list_every_metric_served_with_its_kind_and_labels() -> None:
    assert docs_mismatches(_DOCS.read_text(), DECLARED) == []


def test_the_docs_check_fails_on_a_table_out_of_step() -> None:
    docs = _DOCS.read_text()
    row = "| `gang_extender_wakeups_total` | counter |"
    assert docs_mismatches(docs.replace(row, "| `gang_extender_wakeups_total` | gauge |"),
                           DECLARED) == [
        "gang_extender_wakeups_total: documented as ('gauge', ()), served as ('counter', ())"]
    assert docs_mismatches(docs.replace("| `loop` (tick, wake", "| `loop`, `kind` (tick, wake"),
                           DECLARED) == [
        "gang_extender_loop_errors_total: documented as ('counter', ('loop', 'kind')), "
        "served as ('counter', ('loop',))"]
    assert docs_mismatches(docs.replace(row, "| `gang_extender_wakeup_total` | counter |"),
                           DECLARED) == [
        "gang_extender_wakeups_total: served, not in the metrics table",
        "gang_extender_wakeup_total: in the metrics table, not served"]
    old = "| `gang_extender_held_binds` | `gang_extender_waiting_binds` | metric |"
    assert docs_mismatches(docs.replace(old, ""), DECLARED) == [
        "gang_extender_held_binds: a deprecated name missing from \"Deprecated names\""]


def test_the_deprecated_old_name_is_the_renamed_metric_under_its_old_name() -> None:
    rows = {d.name: d for d in DECLARED}
    for old, new in METRICS.items():
        assert (rows[old].kind, rows[old].labels) == (rows[new].kind, rows[new].labels)
        assert rows[old].attribute == f"{rows[new].attribute}_old"


def test_a_rename_of_a_metric_the_catalogue_does_not_declare_is_refused(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metrics, "_OLD_NAME", {"gang_extender_nothing": "gang_extender_old"})
    with pytest.raises(CatalogueError, match=re.escape(
            "renames metric(s) to gang_extender_nothing, which metrics.toml does not declare")):
        metrics._with_old_names(DECLARED)


_GOOD = """
[buckets]
fast = [0.1, 1]

[metric.calls]
name = "x_calls_total"
kind = "counter"
labels = ["verb"]
help = "Calls."

[metric.seconds]
name = "x_seconds"
kind = "histogram"
buckets = "fast"
help = "Time."
"""


def test_a_catalogue_is_read_in_its_order() -> None:
    calls, seconds = parse_catalogue(_GOOD)
    assert calls == metrics._Declared("calls", Counter, "x_calls_total", ("verb",), "Calls.")
    assert seconds == metrics._Declared("seconds", Histogram, "x_seconds", (), "Time.",
                                        (0.1, 1.0))


def _refused(old: str, new: str) -> str:
    """The error `_GOOD` with `old` replaced by `new` is refused with."""
    assert _GOOD.count(old) == 1
    with pytest.raises(CatalogueError) as refused:
        parse_catalogue(_GOOD.replace(old, new))
    return str(refused.value)


def test_a_catalogue_that_is_not_one_is_refused() -> None:
    assert _refused("[metric.calls]", "[metric.calls").startswith("metrics.toml: not valid TOML")
    assert _refused("[buckets]", "[bucket]") == (
        "metrics.toml: bucket: unknown key; expected buckets, metric")
    with pytest.raises(CatalogueError, match=re.escape("metrics.toml: [metric]: Field required")):
        parse_catalogue("[buckets]\n")
    with pytest.raises(CatalogueError, match=re.escape(
            "metrics.toml: [metric]: Dictionary should have at least 1 item")):
        parse_catalogue("[metric]\n")
    with pytest.raises(CatalogueError, match=re.escape("metrics.toml: [metric]: must be a "
                                                       "table, got 1")):
        parse_catalogue("metric = 1\n")
    with pytest.raises(CatalogueError, match=re.escape("metrics.toml: [metric.calls]: must be a "
                                                       "table, got 1")):
        parse_catalogue("[metric]\ncalls = 1\n")


# A metric's entry, edited: (what is replaced, by what, the error after the entry's name).
@pytest.mark.parametrize(("old", "new", "error"), [
    ('"x_calls_total"', '"x-calls"', " name: not a Prometheus metric name, got 'x-calls'"),
    ('name = "x_calls_total"\n', "", " name: Field required"),
    ('kind = "counter"', 'kind = "summary"', " kind: Input should be 'counter', 'gauge' or "
                                             "'histogram', got 'summary'"),
    ('kind = "counter"', 'kind = ["counter"]', " kind: Input should be 'counter', 'gauge' or "
                                               "'histogram', got ['counter']"),
    ('["verb"]', '["verb", "verb"]', " labels: must be distinct, got ['verb', 'verb']"),
    ('["verb"]', '["verb", "the verb"]', " labels[1]: not a Prometheus label name, got 'the verb'"),
    ('["verb"]', '"verb"', " labels: Input should be a valid list, got 'verb'"),
    ('help = "Calls."', 'help = " "', " help: must not be blank, got ' '"),
    ('help = "Calls."', "help = 3", " help: Input should be a valid string, got 3"),
    ('help = "Calls."', 'help = "Calls."\nunit = "s"',
     " unit: unknown key; expected buckets, help, kind, labels, name"),
    ('kind = "counter"', 'kind = "histogram"', ": a histogram names its buckets, and only a "
                                               "histogram"),
])
def test_a_malformed_entry_is_refused_naming_the_entry_and_the_field(
        old: str, new: str, error: str) -> None:
    assert _refused(old, new) == f"metrics.toml: [metric.calls]{error}"


def test_every_fault_of_a_catalogue_is_named_on_a_line_of_its_own() -> None:
    assert _refused('kind = "counter"', 'kind = "summary"\nunit = "s"').splitlines() == [
        "metrics.toml: [metric.calls] kind: Input should be 'counter', 'gauge' or 'histogram', "
        "got 'summary'",
        "metrics.toml: [metric.calls] unit: unknown key; expected buckets, help, kind, labels, "
        "name"]


def test_malformed_buckets_are_refused() -> None:
    entry = "metrics.toml: [metric.seconds]"
    assert _refused('buckets = "fast"\n', "") == (
        entry + ": a histogram names its buckets, and only a histogram")
    assert _refused('buckets = "fast"', 'buckets = "slow"') == (
        entry + " buckets: 'slow' is not a set of [buckets] (fast)")
    assert _refused("fast = [0.1, 1]", "fast = [1, 0.1]") == (
        "metrics.toml: [buckets] fast: bounds must increase, got [1, 0.1]")
    assert _refused("fast = [0.1, 1]", 'fast = [0.1, "1"]') == (
        "metrics.toml: [buckets] fast[1]: Input should be a valid number, got '1'")
    assert _refused("fast = [0.1, 1]", "fast = [true]") == (
        "metrics.toml: [buckets] fast[0]: Input should be a valid number, got True")
    assert _refused("fast = [0.1, 1]", "fast = []").startswith(
        "metrics.toml: [buckets] fast: List should have at least 1 item")


def test_an_entry_is_named_by_its_attribute_and_its_name_by_one_entry() -> None:
    assert _refused("[metric.calls]", "[metric._calls]") == (
        "metrics.toml: [metric._calls]: must be a public Python name (it becomes an attribute "
        "of Metrics), got '_calls'")
    assert _refused('"x_seconds"', '"x_calls_total"') == (
        "metrics.toml: [metric.seconds] and [metric.calls] both name x_calls_total")
