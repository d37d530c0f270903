"""`obs-iac import sloth|openslo` writes blueprints that compile into the same SLOs."""

from __future__ import annotations

import ast
from pathlib import Path

from obs_iac.plan.model import AlertRule
from tests.slo.helpers import cli, make_repo, render_repo

SLOTH = """\
version: "prometheus/v1"
service: "checkout-api"
slos:
  - name: "latency"
    objective: 99
    sli:
      events:
        error_query: |
          (
            sum(rate(http_request_duration_seconds_count{job="checkout"}[{{.window}}]))
            -
            sum(rate(http_request_duration_seconds_bucket{le="0.25",job="checkout"}[{{.window}}]))
          )
        total_query: sum(rate(http_request_duration_seconds_count{job="checkout"}[{{.window}}]))
    alerting:
      name: CheckoutLatency
      ticket_alert:
        disable: true
"""

OPENSLO = """\
apiVersion: openslo/v1
kind: SLI
metadata:
  name: ok-ratio
spec:
  ratioMetric:
    counter: true
    good:
      metricSource:
        type: Prometheus
        spec:
          query: sum(rate(orders_total{code="200"}[5m]))
    total:
      metricSource:
        type: Prometheus
        spec:
          query: orders_total
---
apiVersion: openslo/v1
kind: SLO
metadata:
  name: orders
spec:
  service: orders
  indicatorRef: ok-ratio
  timeWindow:
    - duration: 4w
      isRolling: true
  budgetingMethod: Occurrences
  objectives:
    - displayName: good orders
      target: 0.995
"""


def _spec(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "spec.yml"
    path.write_text(text, encoding="utf-8")
    return path


def test_sloth_to_stdout_is_a_python_blueprint(tmp_path: Path) -> None:
    result = cli(tmp_path, "import", "sloth", str(_spec(tmp_path, SLOTH)))
    assert result.exit_code == 0, result.output
    ast.parse(result.stdout)
    assert "LatencySli(histogram=HTTP_REQUEST_DURATION_SECONDS, threshold_seconds=0.25" in (
        result.stdout
    )
    assert "ticket=False" in result.stdout
    assert "window='30d'" in result.stdout


def test_output_file_is_never_overwritten_without_force(tmp_path: Path) -> None:
    spec = _spec(tmp_path, SLOTH)
    target = tmp_path / "out.py"
    target.write_text("# mine\n", encoding="utf-8")
    refused = cli(tmp_path, "import", "sloth", str(spec), "-o", str(target))
    assert refused.exit_code == 2
    assert "import/exists" in refused.stderr
    assert target.read_text(encoding="utf-8") == "# mine\n"
    forced = cli(tmp_path, "import", "sloth", str(spec), "-o", str(target), "--force")
    assert forced.exit_code == 0
    assert "LatencySli" in target.read_text(encoding="utf-8")


def test_sloth_import_compiles_to_the_same_slo(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", "")
    out = repo / "blueprints" / "svc.py"
    result = cli(repo, "import", "sloth", str(_spec(tmp_path, SLOTH)), "-o", str(out), "--force")
    assert result.exit_code == 0, result.output
    plan = render_repo(repo).plan
    alerts = [r for g in plan.rule_groups for r in g.rules if isinstance(r, AlertRule)]
    slo_alerts = [a for a in alerts if a.labels.get("slo") == "latency"]
    assert sorted(a.labels["slo_tier"] for a in slo_alerts) == ["page", "page"]
    assert plan.service("checkout-api").sla_id == "checkout_api"
    expr = next(
        r.expr
        for g in plan.rule_groups
        for r in g.rules
        if getattr(r, "record", "") == "business_sla_id_slo:slo_errors:rate5m"
    )
    assert 'le="0.25"' in expr and 'job="checkout"' in expr


def test_openslo_with_an_sli_reference(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", "")
    out = repo / "blueprints" / "svc.py"
    spec = _spec(tmp_path, OPENSLO)
    result = cli(repo, "import", "openslo", str(spec), "-o", str(out), "--force")
    assert result.exit_code == 0, result.output
    text = out.read_text(encoding="utf-8")
    assert "objective=99.5" in text
    assert "window='28d'" in text
    assert "good_matchers={'code': '200'}" in text
    plan = render_repo(repo).plan
    alerts = [r for g in plan.rule_groups for r in g.rules if isinstance(r, AlertRule)]
    assert len([a for a in alerts if a.labels.get("slo") == "orders"]) == 4


def test_openslo_threshold_metric_is_refused(tmp_path: Path) -> None:
    spec = OPENSLO.replace("  ratioMetric:", "  thresholdMetric:\n    x: 1\n  ratioMetricX:")
    result = cli(tmp_path, "import", "openslo", str(_spec(tmp_path, spec)))
    assert result.exit_code == 2
    assert "thresholdMetric is not supported" in result.stderr
    assert "spec.yml:5:" in result.stderr
