"""Golden output trees: tests/golden/<case>/{blueprints/, pyproject.toml?, expected/}.

``OBS_IAC_UPDATE_GOLDEN=1`` (``make golden``) rewrites expected/ from the current code;
review the diff like any code change, since expected/ is only what the code produced.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import yaml

from tests.conftest import (
    GOLDEN,
    GOLDEN_CASES,
    PYPROJECT,
    RunCli,
    golden_blueprints,
    golden_expected,
    tree_bytes,
)

CASES = GOLDEN_CASES
UPDATE = os.environ.get("OBS_IAC_UPDATE_GOLDEN") == "1"


def _render_case(case: str, tmp_path: Path, run_cli: RunCli) -> Path:
    src = GOLDEN / case
    repo = tmp_path / case
    shutil.copytree(golden_blueprints(case), repo / "blueprints")
    if (src / "pyproject.toml").is_file():
        shutil.copy(src / "pyproject.toml", repo / "pyproject.toml")
    else:
        (repo / "pyproject.toml").write_text(PYPROJECT.format(extra=""))
    result = run_cli(["render"], repo)
    assert result.exit_code == 0, result.output
    return repo / "generated"


def test_cases_exist() -> None:
    assert {"examples", "no-profiling", "utf8-naming", "honor-labels"} <= set(CASES)


@pytest.mark.parametrize("case", CASES)
def test_golden(case: str, tmp_path: Path, run_cli: RunCli) -> None:
    out = _render_case(case, tmp_path, run_cli)
    expected = golden_expected(case)
    if UPDATE and case == "examples":
        return  # generated/ is the examples' golden tree; `make render` refreshes it
    if UPDATE:
        shutil.rmtree(expected, ignore_errors=True)
        shutil.copytree(out, expected)
        return
    assert expected.is_dir(), f"no golden tree for {case}; run `make golden`"
    got, want = tree_bytes(out), tree_bytes(expected)
    assert sorted(got) == sorted(want), "file sets differ; run `make golden` and review"
    for path in sorted(want):
        assert got[path].decode() == want[path].decode(), f"{case}: {path} differs"


def _rules(case: str, service: str) -> list[dict[str, object]]:
    path = golden_expected(case) / "prometheus/rules" / f"{service}.rules.yml"
    data = yaml.safe_load(path.read_text())
    return [r for g in data["groups"] for r in g["rules"]]


def test_no_profiling_has_no_dcp_rules_or_alert() -> None:
    rules = _rules("no-profiling", "inference-t4")
    names = {str(r.get("alert") or r.get("record")) for r in rules}
    assert "GpuNvlinkThroughputDrop" not in names
    assert not any("nvlink" in n or "sm_active" in n or "tensor" in n for n in names)
    assert not any("DCGM_FI_PROF_" in str(r["expr"]) for r in rules)
    csv = (GOLDEN / "no-profiling/expected/dcgm-exporter/inference-t4/collectors.csv").read_text()
    assert "DCGM_FI_PROF_" not in csv
    assert "DCGM_FI_DEV_SM_CLOCK, gauge," in csv
    assert "GpuUtilizationLow" in names
    low = next(r for r in rules if r.get("alert") == "GpuUtilizationLow")
    assert str(low["expr"]).endswith("< 0.05")


def test_utf8_naming_quotes_canonical_keys() -> None:
    rules = _rules("utf8-naming", "llm-h100")
    exprs = [str(r["expr"]) for r in rules]
    assert all('{"business.sla_id"="llm_h100"}' in e for e in exprs)
    assert not any("business_sla_id=" in e for e in exprs)
    relabel = yaml.safe_load(
        (
            GOLDEN
            / "utf8-naming/expected/prometheus/relabel/dcgm-exporter.metric_relabel_configs.yml"
        ).read_text()
    )
    targets = {r["target_label"] for r in relabel["metric_relabel_configs"]}
    assert {"resource.gpu.id", "host.name", "business.sla_id"} <= targets
    # The GPU test inputs went through that relabelling, so they carry the dotted keys
    # (Prometheus 3 writes UTF-8 target labels; a classic-only simulation dropped them).
    tests = (GOLDEN / "utf8-naming/expected/prometheus/tests/llm-h100.test.yml").read_text()
    assert '"resource.gpu.id"="nvidia0"' in tests and '"host.name"="gpu-node-1"' in tests
    # promtool 2.42 cannot load UTF-8 label names, so test_promtool.py skips this case.


def test_honor_labels_and_newer_exporter_use_plain_workload_labels_and_hostname() -> None:
    relabel = yaml.safe_load(
        (
            GOLDEN
            / "honor-labels/expected/prometheus/relabel/dcgm-exporter.metric_relabel_configs.yml"
        ).read_text()
    )
    rules = relabel["metric_relabel_configs"]
    sources = {r["source_labels"][0]: r["target_label"] for r in rules}
    # One rule reads both host-label spellings, so an exporter upgrade keeps host_name.
    [host] = [r for r in rules if r["target_label"] == "host_name"]
    assert host["source_labels"] == ["Hostname", "hostname"]
    assert sources["pod"] == "k8s_pod_name"
    assert sources["namespace"] == "k8s_namespace_name"
    assert not any(s.startswith("exported_") for s in sources)
