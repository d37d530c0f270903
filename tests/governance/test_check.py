"""`obs-iac check`: the examples conform; each broken dimension fails with its reason."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from obs_iac.governance.check import Governance, check_collection, check_labels, load
from obs_iac.plan.model import RelabelRule
from tests.conftest import PYPROJECT, REPO, RunCli, blueprint_source, make_repo

# The smallest framework section: with it the OpenTelemetry wiring is declared.
FRAMEWORK = '{"world_size": 8, "ranks_per_node": 8, "step_time_budget_seconds": 2.0}'


def one_service_repo(tmp_path: Path, extra_config: str = "", **fields: str | None) -> Path:
    fields.setdefault("framework", FRAMEWORK)
    root = tmp_path / "repo"
    (root / "blueprints").mkdir(parents=True)
    (root / "blueprints" / "a.py").write_text(blueprint_source(**fields), encoding="utf-8")
    (root / "pyproject.toml").write_text(PYPROJECT.format(extra=extra_config), encoding="utf-8")
    return root


def failures(result_json: str, service: str, dimension: str) -> list[str]:
    data = json.loads(result_json)
    entry = data["services"][service][dimension]
    assert entry["passed"] is (not entry["failures"])
    return list(entry["failures"])


@pytest.fixture(scope="module")
def examples(tmp_path_factory: pytest.TempPathFactory) -> Governance:
    return load(make_repo(tmp_path_factory.mktemp("ex") / "repo", REPO / "blueprints"))


def test_examples_pass_every_dimension(run_cli: RunCli, gitops: Path) -> None:
    result = run_cli(["check", "--format", "json"], gitops)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["passed"] is True
    assert sorted(data["services"]) == ["image-classify-v3", "recomm-v2"]
    for dims in data["services"].values():
        assert sorted(dims) == ["alerting", "collection", "compatibility", "labels", "storage"]
        # A pass must say what it proved, not just be the absence of a failure.
        assert all(d["evidence"] for d in dims.values())
    text = run_cli(["check"], gitops)
    assert text.exit_code == 0
    assert "2 of 2 services conform" in text.stdout
    md = run_cli(["check", "--format", "markdown"], gitops)
    assert md.stdout.startswith("| service | collection | labels |")


def test_storage_fails_when_logs_drop_the_sla_label(run_cli: RunCli, tmp_path: Path) -> None:
    repo = one_service_repo(tmp_path, logs='{"drop_labels": ("filename", "business_sla_id")}')
    result = run_cli(["check", "--format", "json"], repo)
    assert result.exit_code == 1, result.output
    reasons = failures(result.stdout, "svc-a", "storage")
    assert any("lack the business_sla_id label" in r for r in reasons)
    assert failures(result.stdout, "svc-a", "collection") == []
    text = run_cli(["check"], repo)
    assert "svc-a storage: FAIL" in text.stdout
    assert "0 of 1 services conform" in text.stdout


def test_alerting_fails_without_a_gpu_inhibition_matrix(run_cli: RunCli, tmp_path: Path) -> None:
    disable = (
        '{"disable": [{"name": "gpu-fault-mutes-gpu-symptoms", "reason": "test"}, '
        '{"name": "gpu-hot-mutes-util-low", "reason": "test"}]}'
    )
    repo = one_service_repo(tmp_path, inhibitions=disable)
    result = run_cli(["check", "--format", "json"], repo)
    assert result.exit_code == 1, result.output
    assert failures(result.stdout, "svc-a", "alerting") == [
        "no GPU fault inhibition matrix: no inhibit edge has a GPU alert as source"
    ]
    # The same service with its matrix passes: the failure is the disabled edges.
    ok = run_cli(["check", "--format", "json"], one_service_repo(tmp_path / "ok"))
    assert failures(ok.stdout, "svc-a", "alerting") == []


def _without_field(gov: Governance, service: str, field: str) -> Governance:
    plan = gov.plan
    sets = tuple(
        c.model_copy(update={"fields": tuple(f for f in c.fields if f.name != field)})
        if c.service == service
        else c
        for c in plan.collector_sets
    )
    result = dataclasses.replace(gov.result, plan=plan.model_copy(update={"collector_sets": sets}))
    return dataclasses.replace(gov, result=result)


def test_collection_fails_on_a_dcgm_metric_used_but_not_collected(examples: Governance) -> None:
    svc = examples.plan.service("recomm-v2")
    assert check_collection(examples, svc).passed
    broken = _without_field(examples, "recomm-v2", "DCGM_FI_DEV_GPU_TEMP")
    check = check_collection(broken, broken.plan.service("recomm-v2"))
    assert not check.passed
    assert any(
        "DCGM metric DCGM_FI_DEV_GPU_TEMP" in r and "does not collect" in r for r in check.failures
    ), check.failures
    # The other service keeps its own collector set and still passes.
    assert check_collection(broken, broken.plan.service("image-classify-v3")).passed


def test_labels_fail_on_a_gpu_id_from_the_uuid(examples: Governance) -> None:
    plan = examples.plan
    sets = tuple(
        r.model_copy(
            update={
                "rules": tuple(
                    RelabelRule(
                        source_labels=("UUID",),
                        regex="(.+)",
                        replacement="$1",
                        target_label="resource_gpu_id",
                    )
                    if rule.target_label == "resource_gpu_id"
                    else rule
                    for rule in r.rules
                )
            }
        )
        for r in plan.relabel_sets
    )
    broken = dataclasses.replace(
        examples,
        result=dataclasses.replace(
            examples.result, plan=plan.model_copy(update={"relabel_sets": sets})
        ),
    )
    check = check_labels(broken, broken.plan.service("recomm-v2"))
    assert not check.passed
    assert any("'GPU-8d4c1f5e" in r and "resource_gpu_id" in r for r in check.failures)


def test_labels_fail_on_a_panel_without_the_sla_filter(examples: Governance) -> None:
    plan = examples.plan
    rows = []
    for row in plan.dashboard_rows:
        if row.service == "recomm-v2" and row.layer == "hardware":
            panel = row.panels[0]
            query = panel.queries[0].model_copy(update={"expr": "gpu:dcgm_gpu_utilization:ratio"})
            panel = panel.model_copy(update={"queries": (query,)})
            row = row.model_copy(update={"panels": (panel, *row.panels[1:])})
        rows.append(row)
    broken = dataclasses.replace(
        examples,
        result=dataclasses.replace(
            examples.result, plan=plan.model_copy(update={"dashboard_rows": tuple(rows)})
        ),
    )
    check = check_labels(broken, broken.plan.service("recomm-v2"))
    assert any("does not filter on business_sla_id='recomm_v2'" in r for r in check.failures), (
        check.failures
    )


def test_reports_are_deterministic(run_cli: RunCli, gitops: Path, tmp_path: Path) -> None:
    other = make_repo(tmp_path / "other", REPO / "blueprints")
    for command in (["check", "--format", "json"], ["score", "--format", "json"]):
        first, second = run_cli(command, gitops), run_cli(command, other)
        assert first.stdout == second.stdout and first.stdout


def test_labels_fail_on_test_data_outside_the_value_format(examples: Governance) -> None:
    plan = examples.plan
    groups = []
    for group in plan.rule_groups:
        if group.service == "recomm-v2" and group.pack == "gpu":
            rules = []
            for rule in group.rules:
                if getattr(rule, "alert", None) == "GpuTemperatureHigh":
                    case = rule.tests[0]
                    bad = case.model_copy(
                        update={"exp_labels": {**case.exp_labels, "resource_gpu_id": "gpu-001"}}
                    )
                    rule = rule.model_copy(update={"tests": (bad, *rule.tests[1:])})
                rules.append(rule)
            group = group.model_copy(update={"rules": tuple(rules)})
        groups.append(group)
    broken = dataclasses.replace(
        examples,
        result=dataclasses.replace(
            examples.result, plan=plan.model_copy(update={"rule_groups": tuple(groups)})
        ),
    )
    check = check_labels(broken, broken.plan.service("recomm-v2"))
    assert any(
        "GpuTemperatureHigh" in r and "resource_gpu_id='gpu-001'" in r for r in check.failures
    ), check.failures
    assert check_labels(examples, examples.plan.service("recomm-v2")).passed


def _with_alert(gov: Governance, alert: str, **update: object) -> Governance:
    groups = []
    for group in gov.plan.rule_groups:
        if group.service == "recomm-v2":
            rules = tuple(
                r.model_copy(update=update) if getattr(r, "alert", None) == alert else r
                for r in group.rules
            )
            group = group.model_copy(update={"rules": rules})
        groups.append(group)
    plan = gov.plan.model_copy(update={"rule_groups": tuple(groups)})
    return dataclasses.replace(gov, result=dataclasses.replace(gov.result, plan=plan))


def test_labels_follow_untested_alerts_through_their_expression(examples: Governance) -> None:
    kept = _with_alert(
        examples,
        "GpuTemperatureHigh",
        tests=(),
        expr='max by (business_sla_id) (gpu:dcgm_temperature:celsius{business_sla_id="recomm_v2"})'
        " > 85",
    )
    assert check_labels(kept, kept.plan.service("recomm-v2")).passed
    dropped = _with_alert(
        examples,
        "GpuTemperatureHigh",
        tests=(),
        expr='max(gpu:dcgm_temperature:celsius{business_sla_id="recomm_v2"}) > 85',
    )
    check = check_labels(dropped, dropped.plan.service("recomm-v2"))
    assert check.failures == (
        "alert GpuTemperatureHigh: no firing test proves business_sla_id, and its expression "
        "drops it",
    )


def test_collection_requires_opentelemetry_wiring(run_cli: RunCli, tmp_path: Path) -> None:
    bare = one_service_repo(tmp_path / "bare", framework=None)
    result = run_cli(["check", "--format", "json"], bare)
    assert result.exit_code == 1
    [reason] = failures(result.stdout, "svc-a", "collection")
    assert reason.startswith("no OpenTelemetry wiring is declared")
    relaxed = one_service_repo(
        tmp_path / "relaxed",
        extra_config="[tool.obs-iac.packs.governance]\nrequire_otel = false\n",
        framework=None,
    )
    result = run_cli(["check", "--format", "json"], relaxed)
    assert result.exit_code == 0, result.output
    with_framework = run_cli(["check", "--format", "json"], one_service_repo(tmp_path / "fw"))
    assert with_framework.exit_code == 0, with_framework.output


def test_alerting_fails_when_the_matrix_fails_static_verification(
    run_cli: RunCli, tmp_path: Path
) -> None:
    cycle = (
        '{"add": [{"name": "util-low-mutes-hot", "reason": "makes a cycle", '
        '"source_alerts": ["GpuUtilizationLow"], "target_alerts": ["GpuTemperatureHigh"], '
        '"equal": ["business.sla_id", "host.name", "resource.gpu.id"]}]}'
    )
    result = run_cli(["check", "--format", "json"], one_service_repo(tmp_path, inhibitions=cycle))
    assert result.exit_code == 1, result.output
    reasons = failures(result.stdout, "svc-a", "alerting")
    assert reasons and all(r.startswith("inhibit/cycle: ") for r in reasons), reasons
