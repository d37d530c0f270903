"""The compatibility matrix: every built-in row blocks a stack it rejects; bad matrices and
bad versions are located input errors (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from obs_iac.diagnostics import InputError
from obs_iac.governance.compat import (
    COLUMNS,
    CompatRow,
    Stack,
    builtin_matrix,
    evaluate,
    load_matrix,
)
from tests.conftest import RunCli, line_of
from tests.governance.test_check import failures, one_service_repo

# (row key) -> (what makes the row apply, a version of `requires` it rejects, one it accepts)
ROW_CASES: dict[tuple[str, str], tuple[dict[str, str], str, str]] = {
    ("gpu:A100", "driver"): ({}, "520.61.05", "525.85.12"),
    ("driver", "ebpf-collector"): ({"driver": "535.126.02"}, "2.7.9", "2.8.0"),
    ("feature:dcgm-4.6-field-names", "dcgm"): ({}, "4.5.3", "4.6.0"),
    ("feature:host-label-Hostname", "dcgm-exporter"): ({}, "4.9.0", "4.8.2"),
    ("feature:host-label-hostname", "dcgm-exporter"): ({}, "4.8.2", "4.9.0"),
    ("feature:inhibit-rule-name", "alertmanager"): ({}, "0.29.0", "0.30.0"),
    ("feature:rule-group-labels", "prometheus"): ({}, "2.55.1", "3.0.0"),
    ("feature:rule-query-offset", "prometheus"): ({}, "2.52.0", "2.53.0"),
    ("feature:keep-firing-for", "prometheus"): ({}, "2.41.0", "2.42.0"),
    ("feature:otlp-receiver", "prometheus"): ({}, "2.46.0", "2.47.0"),
    ("feature:otlp-promote-resource-attributes", "prometheus"): ({}, "2.54.1", "2.55.0"),
    ("feature:utf8-label-names", "alertmanager"): ({}, "0.26.0", "0.27.0"),
    ("feature:utf8-label-names", "prometheus"): ({}, "2.55.1", "3.0.0"),
}


def _stack(row: CompatRow, versions: dict[str, str]) -> Stack:
    family = row.component.split(":", 1)[1] if row.component.startswith("gpu:") else "H100"
    features = (
        {row.component.split(":", 1)[1]: "test"} if row.component.startswith("feature:") else {}
    )
    return Stack("svc", family, versions, {}, features)


def test_every_builtin_row_has_a_case() -> None:
    assert {(r.component, r.requires) for r in builtin_matrix()} == set(ROW_CASES)


@pytest.mark.parametrize("row", builtin_matrix(), ids=lambda r: f"{r.component}->{r.requires}")
def test_builtin_row_blocks_what_it_rejects(row: CompatRow) -> None:
    applies, bad, good = ROW_CASES[(row.component, row.requires)]
    [violated] = evaluate(_stack(row, {**applies, row.requires: bad}), [row])
    assert violated.status == "violated"
    assert row.reason in violated.detail and bad in violated.detail
    [ok] = evaluate(_stack(row, {**applies, row.requires: good}), [row])
    assert ok.status == "ok"
    # Nothing declared on the required side: the row cannot be judged, so it is not applied.
    [idle] = evaluate(_stack(row, applies), [row])
    assert idle.status == "not-applicable"


def test_version_outside_the_row_range_does_not_apply() -> None:
    row = next(r for r in builtin_matrix() if r.component == "driver")
    [v] = evaluate(
        Stack("svc", "H100", {"driver": "535.54.03", "ebpf-collector": "1.0"}, {}, {}), [row]
    )
    assert v.status == "not-applicable"
    assert "outside >=535.126.02" in v.detail


SVC_GPU = 'GpuFleet(model="{model}", count=8, driver_version="{driver}", profiling=True)'


@pytest.mark.parametrize(
    ("fields", "extra", "expected"),
    [
        (
            {"gpu": SVC_GPU.format(model="A100-SXM4-80GB", driver="520.61.05")},
            "",
            "gpu:A100 requires driver >=525.85.12",
        ),
        (
            {
                "gpu": SVC_GPU.format(model="H100-SXM5-80GB", driver="535.129.03"),
                "components": '{"ebpf_collector": "2.7.1"}',
            },
            "",
            "but ebpf-collector is 2.7.1 (components.ebpf_collector)",
        ),
        (
            {
                "gpu": SVC_GPU.format(model="H100-SXM5-80GB", driver="550.54.15"),
                "components": '{"prometheus": "2.41.0"}',
            },
            "",
            "feature keep-firing-for (alert GpuNvlinkThroughputDrop",
        ),
        (
            {"gpu": SVC_GPU.format(model="H100-SXM5-80GB", driver="550.54.15")},
            'alertmanager_min_version = "0.30"\n'
            '[tool.obs-iac.packs.governance]\ncomponents = { alertmanager = "0.29.0" }\n',
            "but alertmanager is 0.29.0 ([tool.obs-iac.packs.governance] components.alertmanager)",
        ),
    ],
    ids=["a100-driver", "driver-ebpf", "keep-firing-for", "inhibit-rule-name"],
)
def test_incompatible_stack_blocks_check(
    run_cli: RunCli, tmp_path: Path, fields: dict[str, str], extra: str, expected: str
) -> None:
    repo = one_service_repo(tmp_path, extra_config=extra, **fields)
    result = run_cli(["check", "--format", "json"], repo)
    assert result.exit_code == 1, result.output
    reasons = failures(result.stdout, "svc-a", "compatibility")
    assert any(expected in r for r in reasons), reasons
    assert all(r.startswith("obs_iac/catalog/compatibility.csv:") for r in reasons)


REPO_ROWS = (
    ",".join(COLUMNS) + "\ngpu:H100,,driver,>=550,H100 fleet policy: driver 550 or newer,ops\n"
)


def test_repo_matrix_adds_rows(run_cli: RunCli, tmp_path: Path) -> None:
    extra = '[tool.obs-iac.packs.governance]\ncompatibility = "compat.csv"\n'
    gpu = SVC_GPU.format(model="H100-SXM5-80GB", driver="535.129.03")
    repo = one_service_repo(tmp_path, extra_config=extra, gpu=gpu)
    (repo / "compat.csv").write_text("# our fleet\n" + REPO_ROWS, encoding="utf-8")
    result = run_cli(["check", "--format", "json"], repo)
    assert result.exit_code == 1, result.output
    [reason] = failures(result.stdout, "svc-a", "compatibility")
    assert reason.startswith("compat.csv:3: gpu:H100 requires driver >=550")


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        (REPO_ROWS + "driver,>=5x5,ebpf-collector,>=2.8,why,src\n", 3, "versions '>=5x5'"),
        (REPO_ROWS + "gpu:Z900,,driver,>=1,why,src\n", 3, "unknown component 'gpu:Z900'"),
        (REPO_ROWS + "driver,>=1,kernel,>=6,why,src\n", 3, "unknown required component"),
        ("component,versions,requires,reason,source\n", 1, "missing column(s) requires_versions"),
        (REPO_ROWS + "driver,>=1,dcgm\n", 3, "3 fields where the header (line 1) has 6"),
        ("# format version 2\n" + REPO_ROWS, 1, "format version 2 is not supported"),
    ],
    ids=[
        "bad-range",
        "unknown-component",
        "unknown-required",
        "missing-column",
        "short-row",
        "format-version",
    ],
)
def test_malformed_matrix_is_located(text: str, line: int, message: str) -> None:
    with pytest.raises(InputError) as info:
        load_matrix(text, "compat.csv")
    [diag] = info.value.diagnostics
    assert diag.location is not None
    assert (diag.location.file, diag.location.line) == ("compat.csv", line)
    assert message in diag.message
    assert diag.hint


def test_malformed_repo_matrix_exits_2(run_cli: RunCli, tmp_path: Path) -> None:
    extra = '[tool.obs-iac.packs.governance]\ncompatibility = "compat.csv"\n'
    repo = one_service_repo(tmp_path, extra_config=extra)
    (repo / "compat.csv").write_text(REPO_ROWS + "prometheus,~=banana,dcgm,>=1,x,y\n")
    result = run_cli(["check"], repo)
    assert result.exit_code == 2, result.output
    assert "compat.csv:3" in result.stderr and "error[compat/invalid]" in result.stderr
    assert "Traceback" not in result.output


def test_missing_repo_matrix_exits_2(run_cli: RunCli, tmp_path: Path) -> None:
    extra = '[tool.obs-iac.packs.governance]\ncompatibility = "nope.csv"\n'
    result = run_cli(["check"], one_service_repo(tmp_path, extra_config=extra))
    assert result.exit_code == 2
    assert "nope.csv" in result.stderr and "compat/missing" in result.stderr


def test_unparseable_blueprint_version_is_located(run_cli: RunCli, tmp_path: Path) -> None:
    repo = one_service_repo(tmp_path, components='{"prometheus": "three point oh"}')
    source = (repo / "blueprints" / "a.py").read_text()
    for command in (["check"], ["score"]):
        result = run_cli(command, repo)
        assert result.exit_code == 2, result.output
        assert f"blueprints/a.py:{line_of(source, 'three point oh')}" in result.stderr
        assert "'three point oh' does not parse" in result.stderr


def test_unparseable_repo_version_exits_2(run_cli: RunCli, tmp_path: Path) -> None:
    extra = '[tool.obs-iac.packs.governance]\ncomponents = { alertmanager = "v0.x" }\n'
    result = run_cli(["check"], one_service_repo(tmp_path, extra_config=extra))
    assert result.exit_code == 2
    assert "pyproject.toml" in result.stderr
    assert "[tool.obs-iac.packs.governance] components.alertmanager" in result.stderr


def test_unknown_gpu_model_is_located(run_cli: RunCli, tmp_path: Path) -> None:
    gpu = 'GpuFleet(model="Z900-PCIE", count=8, driver_version="535.129.03")'
    repo = one_service_repo(tmp_path, gpu=gpu)
    source = (repo / "blueprints" / "a.py").read_text()
    result = run_cli(["check"], repo)
    assert result.exit_code == 2
    assert f"blueprints/a.py:{line_of(source, 'Z900')}" in result.stderr
    assert "unknown GPU model 'Z900-PCIE'" in result.stderr


def test_examples_declare_and_detect_their_stack(run_cli: RunCli, gitops: Path) -> None:
    data = json.loads(run_cli(["check", "--format", "json"], gitops).stdout)
    evidence = data["services"]["recomm-v2"]["compatibility"]["evidence"]
    assert any(e.startswith("gpu:A100 requires driver") and "535.129.03" in e for e in evidence)
    # The relabelling reads both host-label spellings, so no exporter release is ruled
    # out; on the 2.42 floor the framework takes the scraped route, not OTLP.
    assert not any("feature host-label" in e for e in evidence)
    assert not any("feature otlp" in e for e in evidence)


def test_otlp_route_is_checked_against_the_declared_prometheus(
    run_cli: RunCli, gitops: Path
) -> None:
    # The repository may load on 2.55 (so 'auto' picks OTLP) while one service declares
    # an older Prometheus of its own: that service's compatibility fails, naming the row.
    pyproject = gitops / "pyproject.toml"
    pyproject.write_text(
        pyproject.read_text().replace(
            "[tool.obs-iac]\n", '[tool.obs-iac]\nprometheus_min_version = "2.55"\n'
        )
    )
    blueprint = gitops / "blueprints" / "recomm_v2.py"
    assert "    framework=Framework(" in blueprint.read_text()
    blueprint.write_text(
        blueprint.read_text().replace(
            "    framework=Framework(",
            '    components={"prometheus": "2.50.1"},\n    framework=Framework(',
        )
    )
    result = run_cli(["check", "--format", "json"], gitops)
    data = json.loads(result.stdout)
    compat = data["services"]["recomm-v2"]["compatibility"]
    assert not compat["passed"], compat
    assert any(
        "otlp-promote-resource-attributes" in f and ">=2.55" in f for f in compat["failures"]
    )
