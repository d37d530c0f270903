"""Label flow through PromQL, following Prometheus's evaluation rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from obs_iac.promql.labelflow import MetricFacts, analyze

CATALOGUE = {
    "gpu_util": MetricFacts("gpu_util", "gauge", "percent", frozenset({"gpu", "host", "sla"})),
    "node_info": MetricFacts("node_info", "gauge", "", frozenset({"host", "kernel"})),
    "req_bucket": MetricFacts("req_bucket", "counter", "", frozenset({"job", "le"})),
    "errors_total": MetricFacts("errors_total", "counter", "", frozenset({"job"})),
}


@pytest.mark.parametrize(
    ("expr", "labels"),
    [
        ("gpu_util", {"gpu", "host", "sla"}),
        ("sum by (host) (gpu_util)", {"host"}),
        ("sum without (gpu) (gpu_util)", {"host", "sla"}),
        ("sum(gpu_util)", set()),
        ("topk by (host) (1, gpu_util)", {"gpu", "host", "sla"}),
        ('count_values("v", gpu_util)', {"v"}),
        # Parenthesised string parameters are valid PromQL (promtool 2.42 accepts both).
        ('count_values(("v"), gpu_util)', {"v"}),
        ('label_replace(gpu_util, ("dst"), "$1", ("gpu"), "(.*)")', {"gpu", "host", "sla", "dst"}),
        ("gpu_util * on (host) group_left (kernel) node_info", {"gpu", "host", "sla", "kernel"}),
        ("node_info * on (host) group_right (kernel) gpu_util", {"gpu", "host", "sla", "kernel"}),
        ("gpu_util > on (host, gpu, sla) gpu_util", {"gpu", "host", "sla"}),
        ("gpu_util / on (host) sum by (host) (gpu_util)", {"host"}),
        ("gpu_util / ignoring (gpu) sum without (gpu) (gpu_util)", {"host", "sla"}),
        ('label_replace(gpu_util, "dst", "$1", "gpu", "(.*)")', {"gpu", "host", "sla", "dst"}),
        ('label_join(gpu_util, "dst", ",", "gpu", "host")', {"gpu", "host", "sla", "dst"}),
        ('absent(gpu_util{host="a", gpu=~"1"})', {"host"}),
        ("vector(1)", set()),
        ("histogram_quantile(0.9, sum by (le, job) (rate(req_bucket[5m])))", {"job"}),
        ("max_over_time(gpu_util[10m:1m] offset 5m)", {"gpu", "host", "sla"}),
        ("gpu_util or node_info", {"gpu", "host", "sla", "kernel"}),
        ("gpu_util and on (host) node_info", {"gpu", "host", "sla"}),
    ],
)
def test_output_labels(expr: str, labels: set[str]) -> None:
    result = analyze(expr, CATALOGUE)
    assert result.labels == frozenset(labels)
    assert not result.missing


def test_unknown_metrics_are_open() -> None:
    result = analyze('sum by (anything) (mystery{whatever="x"})', CATALOGUE)
    assert result.missing == []
    assert analyze("mystery", CATALOGUE).labels is None


@pytest.mark.parametrize(
    ("expr", "label", "context"),
    [
        ('gpu_util{gpu_id="0"}', "gpu_id", "matcher"),
        ("sum by (gpu_id) (gpu_util)", "gpu_id", "by"),
        ("sum by (host) (gpu_util) * on (gpu) node_info", "gpu", "on"),
        (
            "gpu_util * on (host) group_left (kernel_version) node_info",
            "kernel_version",
            "group_left",
        ),
        ('label_replace(gpu_util, "d", "$1", "gpu_id", "(.*)")', "gpu_id", "label_replace"),
        ("sum by (gpu) (sum by (host) (gpu_util))", "gpu", "by"),
    ],
)
def test_missing_labels(expr: str, label: str, context: str) -> None:
    result = analyze(expr, CATALOGUE)
    assert [(m.label, m.context) for m in result.missing] == [(label, context)]


def test_selecting_an_absent_label_is_legitimate() -> None:
    assert analyze('gpu_util{gpu_id=""}', CATALOGUE).missing == []


def test_types_and_scales() -> None:
    assert analyze("rate(gpu_util[5m])", CATALOGUE).counter_misuse
    assert not analyze("rate(errors_total[5m])", CATALOGUE).counter_misuse
    assert analyze("gpu_util > 0.5", CATALOGUE).scale_mixes
    assert not analyze("gpu_util / 100 > 0.5", CATALOGUE).scale_mixes
    assert analyze("histogram_quantile(0.9, sum by (job) (rate(req_bucket[5m])))", CATALOGUE)
    assert analyze(
        "histogram_quantile(0.9, sum by (job) (rate(req_bucket[5m])))", CATALOGUE
    ).quantile_misuse


def test_join_mismatch() -> None:
    result = analyze("gpu_util / sum by (host) (gpu_util)", CATALOGUE)
    assert [(j.lhs_only, j.rhs_only) for j in result.joins] == [
        (frozenset({"gpu", "sla"}), frozenset())
    ]
    assert analyze("gpu_util or vector(0)", CATALOGUE).joins == []


def test_folding_matcher_values_never_changes_the_verdict(tmp_path: Path) -> None:
    from obs_iac.lint.run import run_lint

    rules = tmp_path / "r.yml"
    rules.write_text(
        "groups:\n- name: g\n  rules:\n"
        '  - record: job:up:joined\n    expr: label_join(up{job="a"}, "dst", "=", "job")\n'
        '  - record: job:up:other\n    expr: label_join(up{job="b"}, "dst", "=", "job")\n',
        encoding="utf-8",
    )
    result = run_lint(tmp_path, (rules,))
    assert [d.code for d in result.diagnostics] == []


def test_only_bounded_ratios_get_threshold_checks() -> None:
    from obs_iac.lint.engine import _record_unit

    assert _record_unit("gpu:dcgm_gpu_utilization:ratio", None) == "ratio"
    assert _record_unit("business_sla_id:gpu_waste:ratio_avg5m", None) == "ratio"
    assert _record_unit("rank:step_seconds:ratio_to_group_median5m", "ratio") == "relative"
    assert _record_unit("group:skew:max_over_median5m", "ratio") == "relative"
    assert _record_unit("gpu:util:percent", None) == "percent"


TEMPLATE_ON_AGGREGATED_LABEL = """\
groups:
- name: g
  rules:
  - alert: TemplateReadsAggregatedLabel
    expr: sum by (job) (up) == 0
    annotations:
      summary: "{{ $labels.instance }} is down"
"""


def test_a_template_on_a_missing_label_renders_empty(tmp_path: Path) -> None:
    """The alert still fires; only the text is empty: a warning that says so, not the
    error "can never fire" (244 such false errors on public rule files, issue 20)."""
    from obs_iac.lint.run import run_lint

    path = tmp_path / "r.yml"
    path.write_text(TEMPLATE_ON_AGGREGATED_LABEL)
    (finding,) = [
        d for d in run_lint(tmp_path, (path,)).diagnostics if d.code == "promql/label-flow"
    ]
    assert finding.severity.label == "warning"
    assert "renders empty" in finding.message and "never fire" not in finding.message


@pytest.mark.parametrize(
    ("expr", "severity", "says"),
    [
        ('gpu_util{kernel="5"}', "error", "can never fire"),
        ("sum by (kernel) (gpu_util)", "warning", "grouping has no effect"),
        ("gpu_util * on (kernel) node_info", "warning", "empty value"),
    ],
)
def test_consequence_per_context(expr: str, severity: str, says: str) -> None:
    from obs_iac.lint.checks.promql import ref_consequence

    (ref, *_) = analyze(expr, CATALOGUE).missing
    level, text = ref_consequence(ref, "alert")
    assert (level.label, says in text) == (severity, True), text
