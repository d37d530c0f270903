"""The generated SLO rules load in promtool, and their generated tests pass: per tier a
burn just above the threshold fires, one just below does not, the low-traffic guard
holds, and a stale freshness SLI fires. A mutated threshold must make them fail."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import yaml

from obs_iac import conventions
from tests.slo.helpers import HEADER, make_repo, render_repo, require_tool, service_call

SLOS = """\
Slo(name="latency", objective=99.0, window="28d",
    sli=LatencySli(histogram=LAT, threshold_seconds=0.25), min_events=50),
Slo(name="errors", objective=99.5, window="30d",
    sli=ErrorRatioSli(total=REQ, bad=ERR, bad_matchers={"job": "=~api.*"})),
Slo(name="freshness", objective=99.5, window="28d",
    sli=FreshnessSli(last_success=FRESH, max_age="15m"), ticket=False),
Slo(name="throughput", objective=99.0, window="30d",
    sli=ThroughputSli(counter=REQ, min_per_second=5), ticket=False),
"""


def _write(tmp_path: Path) -> tuple[Path, Path]:
    repo = make_repo(tmp_path, HEADER + service_call(SLOS))
    result = render_repo(repo)
    out = repo / "generated"
    for path, data in result.files.items():
        target = out / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return out / conventions.rule_file("svc"), out / conventions.rule_test_file("svc")


def _only_slo_tests(tests: Path) -> None:
    body = yaml.safe_load(tests.read_text(encoding="utf-8"))
    body["tests"] = [t for t in body["tests"] if t["name"].startswith("Slo")]
    tests.write_text(yaml.safe_dump(body, sort_keys=False), encoding="utf-8")


def test_rules_check_and_generated_tests_pass(tmp_path: Path) -> None:
    promtool = require_tool("promtool")
    rules, tests = _write(tmp_path)
    check = subprocess.run([promtool, "check", "rules", str(rules)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    body = yaml.safe_load(tests.read_text(encoding="utf-8"))
    names = [t["name"] for t in body["tests"]]
    # Every tier of the event SLOs has above / below / guard cases.
    for slo, tiers in (("Latency", 4), ("Errors", 4)):
        for case in ("threshold fires", "threshold does not fire", "events does not fire"):
            hits = [n for n in names if n.startswith(f"Slo{slo}BudgetBurn") and case in n]
            assert len(hits) == tiers, (slo, case, hits)
    assert any(
        "FreshnessBudgetBurnPage1h: no success for longer than 15m fires" in n for n in names
    )
    assert any("ThroughputBudgetBurnPage1h: throughput below 5/s fires" in n for n in names)
    _only_slo_tests(tests)
    run = subprocess.run([promtool, "test", "rules", str(tests)], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr


def test_a_mutated_threshold_fails_the_generated_tests(tmp_path: Path) -> None:
    """The tests are not vacuous: thresholds 10 % higher (a wrong factor) must break every
    'just above fires' case, and 10 % lower every 'just below does not fire' case."""
    promtool = require_tool("promtool")
    for scale, broken in ((1.1, "threshold fires"), (0.9, "threshold does not fire")):
        rules, tests = _write(tmp_path / str(scale))
        body = yaml.safe_load(tests.read_text(encoding="utf-8"))
        body["tests"] = [t for t in body["tests"] if broken in t["name"]]
        kept = [t["name"] for t in body["tests"]]
        assert len(kept) == 8
        tests.write_text(yaml.safe_dump(body, sort_keys=False), encoding="utf-8")
        text = rules.read_text(encoding="utf-8")

        def bump(match: re.Match[str], scale: float = scale) -> str:
            return f"{match.group(1)}{float(match.group(2)) * scale:.12g}"

        mutated = re.sub(r"(slo_error:ratio_rate\w+\{[^}]*\} > )([0-9.e+-]+)", bump, text)
        assert mutated != text
        rules.write_text(mutated, encoding="utf-8")
        run = subprocess.run(
            [promtool, "test", "rules", str(tests)], capture_output=True, text=True
        )
        output = run.stdout + run.stderr
        assert run.returncode != 0
        for name in kept:
            assert f"name: {name}," in output, (name, output[:3000])


def test_missing_counters_and_series_read_as_zero_errors_or_stale(tmp_path: Path) -> None:
    """A bad counter that was never incremented does not exist yet: the error ratio must
    be 0, not empty; a freshness gauge that does not exist counts as stale."""
    promtool = require_tool("promtool")
    rules, _ = _write(tmp_path)
    ratio = "business_sla_id_slo:slo_error:ratio_rate{w}{{slo={slo!r}}}"
    body = {
        "rule_files": [rules.name],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [
                    {
                        "series": 'req_total{business_sla_id="svc_a", job="api"}',
                        "values": "0+600x20",
                    }
                ],
                "promql_expr_test": [
                    {
                        "expr": ratio.format(w=w, slo="errors").replace("'", '"'),
                        "eval_time": "15m",
                        "exp_samples": [
                            {
                                "labels": ratio.format(w=w, slo="errors")
                                .replace("{slo=", '{business_sla_id="svc_a", slo=')
                                .replace("'", '"'),
                                "value": 0,
                            }
                        ],
                    }
                    for w in ("5m", "1h")
                ]
                + [
                    {
                        "expr": 'business_sla_id_slo:slo_bad_slice:bool{slo="freshness"}',
                        "eval_time": "15m",
                        "exp_samples": [
                            {
                                "labels": "business_sla_id_slo:slo_bad_slice:bool"
                                '{business_sla_id="svc_a", slo="freshness"}',
                                "value": 1,
                            }
                        ],
                    }
                ],
            }
        ],
    }
    tests = rules.parent / "extra.test.yml"
    tests.write_text(yaml.safe_dump(body, sort_keys=False), encoding="utf-8")
    run = subprocess.run([promtool, "test", "rules", str(tests)], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr


def test_tier_with_for_keeps_burning_through_it(tmp_path: Path) -> None:
    """`for` delays firing: the generated burn must last through it, and still pass."""
    promtool = require_tool("promtool")
    slos = """\
Slo(name="errors", objective=99.5, sli=ErrorRatioSli(total=REQ, bad=ERR),
    alerts=(BurnAlert(tier="page", long_window="1h", short_window="5m", budget_percent=2,
                      for_duration="10m"),
            BurnAlert(tier="ticket", long_window="1d", short_window="2h", budget_percent=10,
                      for_duration="1h"))),
"""
    repo = make_repo(tmp_path, HEADER + service_call(slos))
    result = render_repo(repo)
    out = repo / "generated"
    for path, data in result.files.items():
        (out / path).parent.mkdir(parents=True, exist_ok=True)
        (out / path).write_bytes(data)
    tests = out / conventions.rule_test_file("svc")
    _only_slo_tests(tests)
    body = yaml.safe_load(tests.read_text(encoding="utf-8"))
    times = {t["alert_rule_test"][0]["eval_time"] for t in body["tests"]}
    assert times == {"130m", "100m"}  # 2h + 10m; 2 steps of 20m + 1h
    run = subprocess.run([promtool, "test", "rules", str(tests)], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
