"""The generated SLO rules load in promtool, and their generated tests pass: per tier a
burn just above the threshold fires, one just below does not, the low-traffic guard
holds, and a stale freshness SLI fires. A mutated threshold must make them fail."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from obs_iac import conventions
from obs_iac.packs.slo.windows import seconds
from tests.slo.helpers import HEADER, make_repo, render_repo, require_tool, service_call

SLOS = """\
Slo(name="latency", objective=99.0, window="28d",
    sli=LatencySli(histogram=LAT, threshold_seconds=0.25), min_events=50),
Slo(name="errors", objective=99.5, window="30d",
    sli=ErrorRatioSli(total=REQ, bad=ERR, bad_matchers={"job": "=~api.*"})),
Slo(name="freshness", objective=99.5, window="28d",
    sli=FreshnessSli(last_success=FRESH, max_age="15m"), ticket=False),
Slo(name="throughput", objective=99.0, window="30d",
    sli=ThroughputSli(counter=REQ, min_per_second=5, rate_window="2m"), ticket=False),
Slo(name="daily", objective=99.0, window="30d",
    sli=FreshnessSli(last_success=FRESH, max_age="1d"), ticket=False),
"""
SLICE_SLOS = ("Freshness", "Throughput", "Daily")


def _write(tmp_path: Path) -> tuple[Path, Path]:
    repo = make_repo(tmp_path, HEADER + service_call(SLOS))
    result = render_repo(repo)
    out = repo / "generated"
    for path, data in result.files.items():
        target = out / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return out / conventions.rule_file("svc"), out / conventions.rule_test_file("svc")


def _select(rules: Path, keep: Callable[[str], bool], tag: str) -> list[Path]:
    """Copies of the service's test files (one per evaluation step) holding only the tests
    whose name passes ``keep``, next to the originals so the rule path still resolves."""
    files = []
    for path in sorted(rules.parent.parent.glob("tests/svc.*test.yml")):
        if not re.fullmatch(r"svc(\.eval-[^.]+)?\.test\.yml", path.name):
            continue  # a copy made by an earlier selection
        body = yaml.safe_load(path.read_text(encoding="utf-8"))
        body["tests"] = [t for t in body["tests"] if keep(t["name"])]
        if body["tests"]:
            target = path.with_name(path.name.replace(".test.yml", f".{tag}.test.yml"))
            target.write_text(yaml.safe_dump(body, sort_keys=False), encoding="utf-8")
            files.append(target)
    return files


def _names(files: list[Path]) -> list[str]:
    return [t["name"] for f in files for t in yaml.safe_load(f.read_text())["tests"]]


def _is_slice(name: str) -> bool:
    return name.startswith(tuple(f"Slo{slo}BudgetBurn" for slo in SLICE_SLOS))


def _is_event(name: str) -> bool:
    return name.startswith("Slo") and not _is_slice(name)


def test_rules_check_and_generated_tests_pass(tmp_path: Path) -> None:
    promtool = require_tool("promtool")
    rules, _ = _write(tmp_path)
    check = subprocess.run([promtool, "check", "rules", str(rules)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    files = _select(rules, lambda name: name.startswith("Slo"), "slo")
    names = _names(files)
    # Every tier of the event SLOs has above / below / guard cases.
    for slo, tiers in (("Latency", 4), ("Errors", 4)):
        for case in ("threshold fires", "threshold does not fire", "events does not fire"):
            hits = [n for n in names if n.startswith(f"Slo{slo}BudgetBurn") and case in n]
            assert len(hits) == tiers, (slo, case, hits)
    # Every tier of the time-slice SLOs has one timeline with a firing and a silent check.
    tests = [t for f in files for t in yaml.safe_load(f.read_text())["tests"]]
    for slo, what in (
        ("Freshness", "no success for longer than 15m"),
        ("Throughput", "throughput below 5/s"),
        ("Daily", "no success for longer than 1d"),
    ):
        for tier in ("Page1h", "Page6h"):
            (test,) = [t for t in tests if t["name"].startswith(f"Slo{slo}BudgetBurn{tier}")]
            assert what in test["name"]
            assert [bool(c["exp_alerts"]) for c in test["alert_rule_test"]] == [True, False]
    run = subprocess.run(
        [promtool, "test", "rules", *map(str, files)], capture_output=True, text=True
    )
    assert run.returncode == 0, run.stdout + run.stderr


# One test per direction, so pytest-xdist can run them side by side.
@pytest.mark.parametrize(
    ("scale", "broken"), [(1.1, "threshold fires"), (0.9, "threshold does not fire")]
)
def test_a_mutated_threshold_fails_the_generated_tests(
    tmp_path: Path, scale: float, broken: str
) -> None:
    """The tests are not vacuous: thresholds 10 % higher (a wrong factor) must break every
    'just above fires' case, and 10 % lower every 'just below does not fire' case."""
    promtool = require_tool("promtool")
    rules, _ = _write(tmp_path / str(scale))
    files = _select(rules, lambda n, b=broken: _is_event(n) and b in n, "broken")
    kept = _names(files)
    assert len(kept) == 8
    text = rules.read_text(encoding="utf-8")

    def bump(match: re.Match[str], scale: float = scale) -> str:
        return f"{match.group(1)}{float(match.group(2)) * scale:.12g}"

    mutated = re.sub(r"(slo_error:ratio_rate\w+\{[^}]*\} > )([0-9.e+-]+)", bump, text)
    assert mutated != text
    rules.write_text(mutated, encoding="utf-8")
    run = subprocess.run(
        [promtool, "test", "rules", *map(str, files)], capture_output=True, text=True
    )
    output = run.stdout + run.stderr
    assert run.returncode != 0
    for name in kept:
        assert f"name: {name}," in output, (name, output[:3000])


def _failed_checks(output: str) -> dict[str, list[str]]:
    """promtool's failure report: per failed test name, "fire" for a check that expected
    the alert and got none, "quiet" for one that expected silence and got it."""
    failed: dict[str, list[str]] = {}
    for block in output.split("    name: ")[1:]:
        name = block.split(",\n", 1)[0]
        for check in block.split("alertname: ")[1:]:
            if "got:[]" in check:
                failed.setdefault(name, []).append("fire")
            elif "exp:[]" in check:
                failed.setdefault(name, []).append("quiet")
    return failed


@pytest.mark.parametrize(("scale", "broken"), [(1.1, "fire"), (0.9, "quiet")])
def test_a_mutated_threshold_fails_the_time_slice_tests(
    tmp_path: Path, scale: float, broken: str
) -> None:
    """Per tier of a freshness or throughput SLO, 10 % higher thresholds break the check
    at the crossing, and 10 % lower ones the check one evaluation earlier: each timeline
    pins the threshold to within one bad slice."""
    promtool = require_tool("promtool")
    rules, _ = _write(tmp_path / str(scale))
    files = _select(rules, _is_slice, "slices")
    names = _names(files)
    assert len(names) == 2 * len(SLICE_SLOS)
    text = rules.read_text(encoding="utf-8")

    def bump(match: re.Match[str], scale: float = scale) -> str:
        return f"{match.group(1)}{float(match.group(2)) * scale:.12g}"

    mutated = re.sub(r"(slo_error:ratio_rate\w+\{[^}]*\} > )([0-9.e+-]+)", bump, text)
    assert mutated != text
    rules.write_text(mutated, encoding="utf-8")
    run = subprocess.run(
        [promtool, "test", "rules", *map(str, files)], capture_output=True, text=True
    )
    assert run.returncode != 0
    failed = _failed_checks(run.stdout + run.stderr)
    assert failed == {name: [broken] for name in names}, (run.stdout + run.stderr)[:3000]


def test_a_wrong_long_window_fails_the_time_slice_tests(tmp_path: Path) -> None:
    """The page 6h alert reading the 1h ratio instead: the 1h share of the same bad slices
    is far above the 6h threshold, so the silent check fails."""
    promtool = require_tool("promtool")
    rules, _ = _write(tmp_path)
    files = _select(rules, lambda n: n.startswith("SloFreshnessBudgetBurnPage6h"), "window")
    (name,) = _names(files)
    text = rules.read_text(encoding="utf-8")
    selector = '{business_sla_id="svc_a", slo="freshness"} >'
    assert text.count(f"ratio_rate6h{selector}") == 1
    rules.write_text(text.replace(f"ratio_rate6h{selector}", f"ratio_rate1h{selector}"))
    run = subprocess.run(
        [promtool, "test", "rules", *map(str, files)], capture_output=True, text=True
    )
    assert _failed_checks(run.stdout + run.stderr) == {name: ["quiet"]}, run.stdout[:3000]


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
Slo(name="fresh", objective=99.5, sli=FreshnessSli(last_success=FRESH, max_age="15m"),
    alerts=(BurnAlert(tier="page", long_window="1h", short_window="5m", budget_percent=2,
                      for_duration="2m"),)),
"""
    repo = make_repo(tmp_path, HEADER + service_call(slos))
    result = render_repo(repo)
    out = repo / "generated"
    for path, data in result.files.items():
        (out / path).parent.mkdir(parents=True, exist_ok=True)
        (out / path).write_bytes(data)
    files = _select(out / conventions.rule_file("svc"), lambda n: n.startswith("Slo"), "slo")
    tests = [t for f in files for t in yaml.safe_load(f.read_text())["tests"]]
    times = {
        t["alert_rule_test"][0]["eval_time"] for t in tests if t["name"].startswith("SloErrors")
    }
    assert times == {"130m", "100m"}  # 2h + 10m; 2 steps of 20m + 1h
    # A time-slice tier checks 2m after the crossing (its step is under a minute, so the
    # hold spans several evaluations) and one evaluation before that.
    (where,) = [f for f in files if "SloFreshBudgetBurnPage1h" in f.read_text()]
    body = yaml.safe_load(where.read_text())
    step = seconds(body["evaluation_interval"])
    fire, quiet = body["tests"][0]["alert_rule_test"]
    assert seconds(fire["eval_time"]) - seconds(quiet["eval_time"]) == step
    assert step < 120 and fire["exp_alerts"] and not quiet["exp_alerts"]
    run = subprocess.run(
        [promtool, "test", "rules", *map(str, files)], capture_output=True, text=True
    )
    assert run.returncode == 0, run.stdout + run.stderr
