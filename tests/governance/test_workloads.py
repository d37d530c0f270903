"""Workload kinds in `obs-iac check` and `obs-iac score` (issue 22, part 5): each kind's
own requirement, per-service waivers with reasons and expiry, and the scaffold's
example passing its own check. One good and one bad case per requirement."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from obs_iac.governance.check import load, run_checks
from obs_iac.governance.score import score_all
from obs_iac.scaffold.gitops import scaffold_repo
from tests.conftest import RunCli, line_of
from tests.governance.test_check import one_service_repo


def _series(name: str, kind: str, unit: str) -> str:
    labels = '["business_sla_id", "instance", "job"]'
    return f'{{"name": "{name}", "type": "{kind}", "unit": "{unit}", "labels": {labels}}}'


ERRORS_SLO = (
    '[{"name": "errors", "objective": 99.5, "description": "answers without error", '
    '"sli": {"kind": "error_ratio", '
    f'"total": {_series("serve_requests_total", "counter", "requests")}, '
    f'"bad": {_series("serve_request_errors_total", "counter", "requests")}}}}}]'
)
FRESH_SLO = (
    '[{"name": "fresh", "objective": 99.0, "description": "scored within 1h", '
    '"sli": {"kind": "freshness", "max_age": "1h", '
    f'"last_success": {_series("batch_last_success_timestamp_seconds", "gauge", "timestamp_seconds")}}}}}]'  # noqa: E501
)


def check_json(run_cli: RunCli, repo: Path) -> tuple[int, dict[str, Any]]:
    result = run_cli(["check", "--format", "json"], repo)
    assert result.exit_code in (0, 1), result.output
    return result.exit_code, json.loads(result.stdout)


def collection(data: dict[str, Any]) -> dict[str, Any]:
    entry: dict[str, Any] = data["services"]["svc-a"]["collection"]
    return entry


@pytest.mark.parametrize(
    ("workload", "slo", "code"),
    [
        ('"training"', None, "collection/otel-wiring"),
        ('"inference"', None, "collection/request-sli"),
        ('"inference"', FRESH_SLO, "collection/request-sli"),
        ('"batch"', None, "collection/job-sli"),
        ('"batch"', ERRORS_SLO, "collection/job-sli"),
    ],
)
def test_each_kind_fails_without_its_own_signal(
    run_cli: RunCli, tmp_path: Path, workload: str, slo: str | None, code: str
) -> None:
    repo = one_service_repo(tmp_path, framework=None, workload=workload, slo=slo)
    exit_code, data = check_json(run_cli, repo)
    assert exit_code == 1
    entry = collection(data)
    assert entry["failure_codes"] == [code]
    assert workload.strip('"') in entry["failures"][0] or code.endswith("otel-wiring")


@pytest.mark.parametrize(
    ("workload", "slo", "framework"),
    [
        ('"inference"', ERRORS_SLO, None),
        ('"batch"', FRESH_SLO, None),
        (None, None, '{"world_size": 8, "step_time_budget_seconds": 2.0}'),
    ],
)
def test_each_kind_passes_with_its_own_signal(
    run_cli: RunCli, tmp_path: Path, workload: str | None, slo: str | None, framework: str | None
) -> None:
    repo = one_service_repo(tmp_path, framework=framework, workload=workload, slo=slo)
    exit_code, data = check_json(run_cli, repo)
    assert exit_code == 0, json.dumps(data, indent=1)
    assert any("workload" in line for line in collection(data)["evidence"])


def test_a_framework_section_is_not_required_for_inference(tmp_path: Path) -> None:
    repo = one_service_repo(tmp_path, framework=None, workload='"inference"', slo=ERRORS_SLO)
    checks = {c.dimension: c for c in run_checks(load(repo))}
    assert checks["collection"].passed
    assert not any("framework" in f for f in checks["collection"].failures)


def test_unknown_workload_is_a_located_error(run_cli: RunCli, tmp_path: Path) -> None:
    repo = one_service_repo(tmp_path, workload='"serving"')
    result = run_cli(["check"], repo)
    assert result.exit_code == 2
    source = (repo / "blueprints" / "a.py").read_text()
    assert f"blueprints/a.py:{line_of(source, 'workload=')}:" in result.stderr
    assert "'training', 'inference' or 'batch'" in result.stderr


WAIVE_OTEL = '[{"check": "collection/otel-wiring", "reason": "GPU-only burn-in job"%s}]'


def test_a_waiver_accepts_one_failure_with_its_reason(run_cli: RunCli, tmp_path: Path) -> None:
    repo = one_service_repo(tmp_path, framework=None, waive=WAIVE_OTEL % "")
    exit_code, data = check_json(run_cli, repo)
    assert exit_code == 0
    entry = collection(data)
    assert entry["passed"] and not entry["failures"]
    assert entry["waived"] and "(waived: GPU-only burn-in job)" in entry["waived"][0]
    text = run_cli(["check"], repo)
    assert "svc-a collection: waived" in text.stdout


def test_a_waiver_for_one_requirement_leaves_the_others(run_cli: RunCli, tmp_path: Path) -> None:
    """Waiving otel-wiring must not hide a different collection failure."""
    repo = one_service_repo(tmp_path, framework=None, workload='"inference"', waive=WAIVE_OTEL % "")
    exit_code, data = check_json(run_cli, repo)
    assert exit_code == 1
    assert collection(data)["failure_codes"] == ["collection/request-sli"]


def test_a_dimension_waiver_covers_every_requirement_of_it(tmp_path: Path) -> None:
    waive = '[{"check": "collection", "reason": "new service, SLO comes next sprint"}]'
    repo = one_service_repo(tmp_path, framework=None, workload='"batch"', waive=waive)
    checks = {c.dimension: c for c in run_checks(load(repo))}
    assert checks["collection"].passed and checks["collection"].waived


def test_an_expired_waiver_fails_again_and_says_so(tmp_path: Path) -> None:
    repo = one_service_repo(tmp_path, framework=None, waive=WAIVE_OTEL % ', "until": "2026-06-30"')
    before = {c.dimension: c for c in run_checks(load(repo, today=dt.date(2026, 6, 30)))}
    assert before["collection"].passed
    after = {c.dimension: c for c in run_checks(load(repo, today=dt.date(2026, 7, 1)))}
    assert not after["collection"].passed
    assert (
        "the waiver for collection/otel-wiring expired on 2026-06-30"
        in (after["collection"].failures[0])
    )


def test_a_misspelt_waiver_is_a_located_error(run_cli: RunCli, tmp_path: Path) -> None:
    waive = '[{"check": "collection/otel-wireing", "reason": "typo"}]'
    repo = one_service_repo(tmp_path, framework=None, waive=waive)
    result = run_cli(["render"], repo)
    assert result.exit_code == 2, result.output
    source = (repo / "blueprints" / "a.py").read_text()
    assert f"blueprints/a.py:{line_of(source, 'waive=')}:" in result.stderr
    assert "error[governance/unknown-waiver]" in result.stderr
    assert "did you mean 'collection/otel-wiring'?" in result.stderr
    assert not (repo / "generated").exists()


def test_a_waiver_without_a_reason_is_rejected(run_cli: RunCli, tmp_path: Path) -> None:
    repo = one_service_repo(tmp_path, waive='[{"check": "storage"}]')
    result = run_cli(["render"], repo)
    assert result.exit_code == 2
    assert "waive.0.reason: required field is missing" in result.stderr


def test_score_items_read_by_workload(tmp_path: Path) -> None:
    repo = one_service_repo(tmp_path, framework=None, workload='"inference"', slo=ERRORS_SLO)
    (card,) = score_all(load(repo))
    items = {i.key: i for i in card.items}
    assert items["coverage.framework"].title == "Serving signals with canonical keys"
    # business_sla_id is on the request series, host and GPU are not: 1 of 3 keys.
    assert items["coverage.framework"].score == 2
    assert items["correlation.join"].title == "Inference SLI series joinable to GPU series"
    assert not any("framework" in line for line in items["correlation.dashboard"].lines)


def test_score_of_a_training_service_still_asks_for_framework_spans(tmp_path: Path) -> None:
    repo = one_service_repo(tmp_path, framework=None)
    (card,) = score_all(load(repo))
    items = {i.key: i for i in card.items}
    assert items["coverage.framework"].title == "Framework spans with canonical keys"
    assert items["coverage.framework"].score == 1
    assert any(
        line.startswith("framework: no row") for line in items["correlation.dashboard"].lines
    )


def test_the_scaffolds_example_passes_its_own_check(run_cli: RunCli, tmp_path: Path) -> None:
    repo = tmp_path / "scaffold"
    scaffold_repo(repo)
    result = run_cli(["check"], repo)
    assert result.exit_code == 0, result.output
    assert "1 of 1 services conform" in result.stdout
