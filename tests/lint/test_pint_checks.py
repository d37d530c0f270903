"""The checks users expect from pint that need no live server (issue 20, part 6):
labels removed from open series, `.Labels` as `$labels`, pointless regex matchers."""

from __future__ import annotations

from pathlib import Path

import pytest

from obs_iac.lint.gotemplate import label_references
from obs_iac.lint.run import run_lint
from obs_iac.promql.labelflow import analyze


@pytest.mark.parametrize(
    ("expr", "removed"),
    [
        ("sum without (job) (up)", {"job"}),
        ("up == ignoring (job) up", {"job"}),
        ("rate(sum without (job) (x_total)[5m:])", {"job"}),
        ("topk(3, sum without (job, pod) (up))", {"job", "pod"}),
        ('label_replace(sum without (job) (up), "job", "x", "", "")', set()),
        ("up * ignoring (job) group_left (job) up", set()),
        ("up", set()),
    ],
)
def test_labels_removed_from_open_series(expr: str, removed: set[str]) -> None:
    analysis = analyze(expr, {})
    assert analysis.labels is None
    assert analysis.removed == removed


@pytest.mark.parametrize(
    ("text", "labels"),
    [
        ("{{ $labels.a }}", ["a"]),
        ("{{ .Labels.b }}", ["b"]),
        ("{{ $.Labels.c }}", ["c"]),
        ('{{ index .Labels "d" }}', ["d"]),
        ("{{ $x.Labels.e }}", []),  # a variable's field, not the alert's labels
        ("{{ .ExternalLabels.f }}", []),
    ],
)
def test_dot_labels_reads_the_alerts_labels(text: str, labels: list[str]) -> None:
    assert label_references(text) == labels


RULES = """\
groups:
- name: g
  rules:
  - alert: WithoutJob
    expr: sum without (job) (node_up) == 0
    annotations: {summary: "{{ .Labels.job }} down"}
  - alert: KeepsJob
    expr: sum without (instance) (node_up) == 0
    annotations: {summary: "{{ .Labels.job }} down"}
  - record: x:static
    expr: node_up{job=~"api"}
  - record: x:empty
    expr: node_up{job=~""}
  - record: x:all
    expr: node_up{job=~".*"}
  - record: x:none
    expr: node_up{job!~".*"}
  - record: x:real
    expr: node_up{job=~"api|web", pod=~".+"}
"""


def test_findings_on_open_series(tmp_path: Path) -> None:
    path = tmp_path / "rules.yml"
    path.write_text(RULES)
    found = [
        (d.code, d.severity.label, d.message)
        for d in run_lint(tmp_path, (path,)).diagnostics
        if d.code in ("promql/label-flow", "promql/regex")
    ]
    assert [(c, s) for c, s, _m in found] == [
        ("promql/label-flow", "warning"),
        *[("promql/regex", "warning")] * 4,
    ], found
    messages = " | ".join(m for _c, _s, m in found)
    assert "WithoutJob: an annotation reads $labels.job" in messages
    assert "job=~'api' has no regex syntax" in messages
    assert "job=~'' matches no value" in messages
    assert "job=~'.*' matches every series" in messages
    assert "job!~'.*' selects no series" in messages


@pytest.mark.parametrize(
    ("expr", "says"),
    [
        ("DCGM_FI_DEV_MEM_COPY_UTIL * 1024 * 1024", "records a percent as bytes"),
        ("DCGM_FI_DEV_FB_USED * 1000000", "multiplied by 1e+06"),
        ("DCGM_FI_DEV_FB_USED", "multiplied by nothing"),
        ("DCGM_FI_DEV_FB_USED * 1048576", None),
        ("sum(DCGM_FI_DEV_FB_USED) * 2 ^ 20", None),
        ("rate(DCGM_FI_DEV_FB_USED[5m]) * 1e6", None),  # no longer a size: not judged
    ],
)
def test_bytes_conversions(tmp_path: Path, expr: str, says: str | None) -> None:
    path = tmp_path / "rules.yml"
    path.write_text(f"groups:\n- name: g\n  rules:\n  - record: gpu:fb:bytes\n    expr: {expr}\n")
    found = [
        d.message for d in run_lint(tmp_path, (path,)).diagnostics if d.code == "promql/unit-scale"
    ]
    if says is None:
        assert found == []
    else:
        assert len(found) == 1 and says in found[0], found
