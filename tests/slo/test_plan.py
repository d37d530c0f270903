"""What the SLO pack puts in the plan: rules, labels, catalogue, inhibit edge, dashboard."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from obs_iac import conventions
from obs_iac.packs.slo.windows import burn_factor, seconds, threshold
from obs_iac.plan.model import AlertRule, MetricType, Plan, RecordingRule
from obs_iac.promql import parse
from tests.promtool_runs import assert_promtool_passes
from tests.slo.helpers import HEADER, make_repo, render_repo, require_tool, service_call

ROOT = Path(__file__).resolve().parents[2]

SLOS = """\
Slo(name="latency", objective=99.0, window="28d",
    sli=LatencySli(histogram=LAT, threshold_seconds=0.25)),
Slo(name="fresh", objective=99.5, window="30d", page=False,
    sli=FreshnessSli(last_success=FRESH, max_age="15m")),
Slo(name="errors", objective=99.9,
    sli=ErrorRatioSli(total=REQ, bad=ERR),
    alerts=(BurnAlert(tier="page", long_window="1h", short_window="5m", budget_percent=4,
                      min_events=0),)),
"""


@pytest.fixture(scope="module")
def plan(tmp_path_factory: pytest.TempPathFactory) -> Plan:
    repo = make_repo(tmp_path_factory.mktemp("plan"), HEADER + service_call(SLOS))
    return render_repo(repo).plan


def _rules(plan: Plan) -> list[RecordingRule | AlertRule]:
    return [r for g in plan.rule_groups if g.pack == "slo" for r in g.rules]


def test_factors() -> None:
    tiers = ((2, "1h"), (5, "6h"), (10, "1d"), (10, "3d"))
    assert [round(burn_factor(p, "30d", w), 4) for p, w in tiers] == [14.4, 6.0, 3.0, 1.0]
    assert [round(burn_factor(p, "28d", w), 4) for p, w in tiers] == [13.44, 5.6, 2.8, 0.9333]
    assert threshold(99.5, 2, "30d", "1h") == pytest.approx(0.072)


def test_recording_rules_per_window_follow_the_naming_convention(plan: Plan) -> None:
    records = [r for r in _rules(plan) if isinstance(r, RecordingRule)]
    for rule in records:
        level, _metric, _ops = rule.record.split(":")
        assert level == "business_sla_id_slo"
        assert rule.labels["slo"] in ("latency", "fresh", "errors")
        parse(rule.expr)
    names = {(r.labels["slo"], r.record) for r in records}
    for slo in ("latency", "fresh", "errors"):
        for window in ("5m", "30m", "1h", "2h", "6h", "1d", "3d"):
            assert (slo, conventions.SloRecords.error_ratio(window)) in names
            assert (slo, conventions.SloRecords.burn_rate(window)) in names
    assert ("latency", conventions.SloRecords.budget_remaining("28d")) in names
    assert ("errors", conventions.SloRecords.budget_remaining("30d")) in names
    assert ("fresh", conventions.SloRecords.BAD_SLICE) in names


def test_latency_reads_the_threshold_bucket(plan: Plan) -> None:
    def expr(record: str) -> str:
        return next(
            r.expr
            for r in _rules(plan)
            if isinstance(r, RecordingRule) and r.labels["slo"] == "latency" and r.record == record
        )

    bad = expr(conventions.SloRecords.errors("5m"))
    assert 'req_duration_seconds_bucket{business_sla_id="svc_a", le="0.25"}' in bad
    total = expr(conventions.SloRecords.events("5m"))
    assert 'rate(req_duration_seconds_count{business_sla_id="svc_a"}[5m])' in total


def test_alert_labels_tiers_and_guard(plan: Plan) -> None:
    alerts = [r for r in _rules(plan) if isinstance(r, AlertRule)]
    by_slo: dict[str, list[AlertRule]] = {}
    for alert in alerts:
        by_slo.setdefault(alert.labels["slo"], []).append(alert)
        assert alert.labels["layer"] == "business"
        assert alert.labels["team"] == "t" and alert.labels["service"] == "svc"
        assert (
            alert.labels["severity"]
            == {"page": "critical", "ticket": "warning"}[alert.labels["slo_tier"]]
        )
        parse(alert.expr)
        assert len(alert.tests) == 2 + ("slo_events" in alert.expr), alert.alert
    assert sorted(a.labels["burn_window"] for a in by_slo["latency"]) == ["1d", "1h", "3d", "6h"]
    # page=False leaves the ticket tiers only.
    assert {a.labels["slo_tier"] for a in by_slo["fresh"]} == {"ticket"}
    # A time-slice SLI is tested on every tier, one timeline each: the alert fires at the
    # evaluation where the bad-slice share crosses the threshold, not one earlier.
    for alert in by_slo["fresh"]:
        fire, quiet = alert.tests
        assert fire.expect_firing and not quiet.expect_firing
        assert fire.input_series == quiet.input_series
        assert fire.evaluation_interval is not None
        step = seconds(fire.evaluation_interval)
        assert seconds(fire.eval_time) - seconds(quiet.eval_time) == step
        # The step does not divide the long window (same sample count in 2.x and 3.x),
        # and the long window is full at the checks.
        assert seconds(alert.labels["burn_window"]) % step
        assert seconds(quiet.eval_time) > seconds(alert.labels["burn_window"])
    # A tuned single tier: 4 % in 1h at 30d is factor 28.8; min_events=0 drops the guard.
    (errors,) = by_slo["errors"]
    assert "> 0.0288" in errors.expr
    assert "slo_events" not in errors.expr
    latency_page = next(a for a in by_slo["latency"] if a.labels["burn_window"] == "1h")
    assert "* 3600 >= 10" in latency_page.expr


def test_user_series_join_the_catalogue(plan: Plan) -> None:
    bucket = plan.metric("req_duration_seconds_bucket")
    assert bucket is not None and bucket.type is MetricType.HISTOGRAM
    assert bucket.labels == ("business_sla_id", "job", "le")
    fresh = plan.metric("job_last_success_timestamp_seconds")
    assert fresh is not None and fresh.type is MetricType.GAUGE
    assert fresh.unit == "timestamp_seconds"
    ratio = plan.metric(conventions.SloRecords.error_ratio("1h"))
    assert ratio is not None and ratio.labels == ("business_sla_id", "slo")


def test_page_inhibits_ticket_of_the_same_sla_and_slo(plan: Plan) -> None:
    (edge,) = [e for e in plan.inhibit_edges if e.pack == "slo"]
    assert edge.equal == ("business_sla_id", "slo")
    source = {(m.name, m.op, m.value) for m in edge.source_matchers}
    target = {(m.name, m.op, m.value) for m in edge.target_matchers}
    assert ("slo_tier", "=", "page") in source and ("slo_tier", "=", "ticket") in target
    assert source.isdisjoint(target - {("business_sla_id", "=", "svc_a")})
    for alert in (r for r in _rules(plan) if isinstance(r, AlertRule)):
        assert set(edge.equal) <= {"business_sla_id", *alert.labels}


def test_business_dashboard_row(plan: Plan) -> None:
    (row,) = [r for r in plan.dashboard_rows if r.pack == "slo"]
    assert row.layer == "business"
    keys = [p.key for p in row.panels]
    assert keys[:3] == ["slo-latency-sli", "slo-latency-burn-rate", "slo-latency-budget"]
    units = {p.key: p.unit for p in row.panels}
    assert units["slo-latency-sli"] == "percentunit"
    assert units["slo-errors-budget"] == "percentunit"
    burn = next(p for p in row.panels if p.key == "slo-errors-burn-rate")
    assert [q.legend for q in burn.queries] == ["5m", "30m", "1h", "2h", "6h", "1d", "3d"]
    for panel in row.panels:
        for query in panel.queries:
            parse(query.expr)


def test_examples_carry_slos_that_pass_promtool(tmp_path: Path) -> None:
    """Done-when of issue 6: both example services' SLO alerts load and their tests pass."""
    promtool = require_tool("promtool")
    result = render_repo(ROOT)
    for service, kinds in (("recomm-v2", {"freshness", "latency"}),
                           ("image-classify-v3", {"latency", "error_ratio"})):  # fmt: skip
        sections = result.plan.service(service).sections["slo"]
        assert {s["sli"]["kind"] for s in sections} == kinds
        # Every SLO alert has a firing and a silent check, some in files of their own
        # evaluation step (tests/test_promtool.py runs all of them on the full render).
        checks: dict[str, set[bool]] = {}
        for path, data in result.files.items():
            if path.startswith(f"prometheus/tests/{service}."):
                for test in yaml.safe_load(data)["tests"]:
                    for check in test["alert_rule_test"]:
                        checks.setdefault(check["alertname"], set()).add(bool(check["exp_alerts"]))
        alerts = [r.alert for g in result.plan.rule_groups if g.service == service
                  and g.pack == "slo" for r in g.rules if isinstance(r, AlertRule)]  # fmt: skip
        assert len(alerts) >= 8
        assert all(checks.get(alert) == {True, False} for alert in alerts), checks
        rules = tmp_path / conventions.rule_file(service)
        rules.parent.mkdir(parents=True, exist_ok=True)
        rules.write_bytes(result.files[conventions.rule_file(service)])
        check = subprocess.run([promtool, "check", "rules", str(rules)], capture_output=True)
        assert check.returncode == 0, check.stdout
        # The service's test files of every evaluation step, as rendered: promtool runs
        # each test on its own input, so the SLO tests pass alone if they pass here (and
        # the verdicts are shared with the other tests that run the example services).
        tests = []
        for path, data in sorted(result.files.items()):
            if path.startswith(f"prometheus/tests/{service}."):
                (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
                (tmp_path / path).write_bytes(data)
                tests.append(tmp_path / path)
        names = [t["name"] for f in tests for t in yaml.safe_load(f.read_text())["tests"]]
        assert any(name.startswith("Slo") for name in names)
        assert_promtool_passes(tests)


def test_freshness_bound_longer_than_the_alert_window_still_gets_tests() -> None:
    from obs_iac.labels import LabelNaming
    from obs_iac.packs.slo import FreshnessSli, Series, Slo
    from obs_iac.packs.slo.rules import SloContext, test_cases

    gauge = Series(
        name="etl_last_success_timestamp_seconds",
        type="gauge",
        unit="timestamp_seconds",
        labels=("business_sla_id",),
    )
    slo = Slo(name="daily", objective=99.0, sli=FreshnessSli(last_success=gauge, max_age="1d"))
    ctx = SloContext(slo=slo, sla_id="etl", naming=LabelNaming())
    runs: dict[object, list[tuple[int, int]]] = {}
    for alert in slo.selected_alerts:
        fire, quiet = test_cases(ctx, alert)
        assert fire.expect_firing and not quiet.expect_firing
        # For the page windows (shorter than the bound) the last success predates the test
        # (a negative time): the run need not simulate a day before the first bad slice.
        if alert.tier == "page":
            assert fire.input_series[0][1].startswith("-"), fire.input_series
        key = (fire.input_series, fire.evaluation_interval)
        runs.setdefault(key, []).append((seconds(fire.eval_time), seconds(alert.long_window)))
    # A tier runs alone or shares the run of a longer tier (same input, same step), and a
    # run lasts less than twice its longest window; the 1d ticket shares the 3d one.
    assert sorted(len(tiers) for tiers in runs.values()) == [1, 1, 2]
    for tiers in runs.values():
        assert all(at < 2 * max(w for _, w in tiers) for at, _ in tiers), tiers
