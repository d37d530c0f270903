"""`obs-iac lint` end to end: inputs, exit codes, formats, locations, suppressions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import RunCli, blueprint_source, make_repo

SEED = """\
groups:
- name: seed
  rules:
  - alert: GpuUtilizationLow
    expr: avg_over_time(DCGM_FI_DEV_GPU_UTIL{gpu_id="0"}[5m]) < 10
    for: 10m
    labels:
      severity: warning
    annotations:
      summary: GPU {{ $labels.gpu_id }} is idle
      runbook_url: https://runbooks.example.com/GpuUtilizationLow
"""


def write(folder: Path, name: str, text: str | bytes) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def test_seed_query_outside_a_repository(run_cli: RunCli, tmp_path: Path) -> None:
    rules = write(tmp_path, "seed.yml", SEED)
    result = run_cli(["lint", str(rules)], tmp_path)
    assert result.exit_code == 1, result.output
    assert f"{rules}:5: error[labels/did-you-mean]" in result.stderr
    assert "did you mean 'resource_gpu_id'?" in result.stderr
    # The template reference is reported on the rule's own line.
    assert f"{rules}:4: error[labels/did-you-mean]" in result.stderr


def test_seed_query_inside_the_repository(run_cli: RunCli, rendered: Path) -> None:
    rules = write(rendered, "hand-written/seed.yml", SEED)
    result = run_cli(["lint", "--format", "json", str(rules)], rendered)
    assert result.exit_code == 1, result.output
    found = json.loads(result.stdout)["diagnostics"]
    codes = {(d["code"], d["location"]["line"]) for d in found}
    assert ("labels/did-you-mean", 5) in codes
    assert not any(d["code"] == "promql/label-flow" for d in found)


def test_generated_output_is_clean(run_cli: RunCli, rendered: Path) -> None:
    plan_mode = run_cli(["lint", "--fail-on", "warning"], rendered)
    assert plan_mode.exit_code == 0, plan_mode.output
    files = run_cli(
        [
            "lint",
            "--fail-on",
            "warning",
            str(rendered / "generated" / "prometheus" / "rules"),
            str(rendered / "generated" / "kubernetes" / "prometheusrules"),
        ],
        rendered,
    )
    assert files.exit_code == 0, files.output


def test_committed_generated_tree_is_clean(run_cli: RunCli) -> None:
    repo = Path(__file__).resolve().parents[2]
    result = run_cli(["lint", "--fail-on", "warning"], repo)
    assert result.exit_code == 0, result.output
    committed = [
        str(repo / "generated" / "prometheus" / "rules"),
        str(repo / "generated" / "kubernetes" / "prometheusrules"),
    ]
    files = run_cli(["lint", "--fail-on", "warning", *committed], repo)
    assert files.exit_code == 0, files.output
    assert "lint: 0 errors, 0 warnings" in files.stderr


@pytest.mark.parametrize(
    ("name", "content", "code", "exit_code", "where"),
    [
        ("binary.yml", b"\x00\x01\x02groups", "input/binary", 2, ":1:1:"),
        ("latin1.yml", "groups: [] # caf\xe9\n".encode("latin-1"), "input/encoding", 2, ":1:"),
        # Text Prometheus would refuse as a whole: exit 4, apart from findings (1).
        ("broken.yml", "groups:\n- name: g\n   rules: []\n", "input/yaml", 4, ":3:"),
        ("prose.yml", "just some text\n", "rules/structure", 4, ":1:1:"),
        (
            "typo-kind.yml",
            "apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRules\nspec: {groups: []}\n",
            "input/not-rule-file",
            4,
            ":1:1:",
        ),
        (
            "unknown-key.yml",
            "groups:\n- name: g\n  rules:\n  - record: a:b:c\n    expr: up\n    labes: {}\n",
            "rules/structure",
            4,
            ":6:5:",
        ),
        (
            "bad-expr.yml",
            "groups:\n- name: g\n  rules:\n  - record: a:b:c\n    expr: sum(up\n",
            "promql/syntax",
            4,
            ":5:",
        ),
    ],
)
def test_bad_input_is_located_never_a_traceback(
    run_subprocess: RunCli,
    tmp_path: Path,
    name: str,
    content: str | bytes,
    code: str,
    exit_code: int,
    where: str,
) -> None:
    path = write(tmp_path, name, content)
    result = run_subprocess(["lint", name], tmp_path)
    assert result.exit_code == exit_code, result.output
    assert f"{name}{where}" in result.stderr and f"[{code}]" in result.stderr, result.stderr
    assert "Traceback" not in result.output
    assert path.exists()


@pytest.mark.parametrize("content", ["", "null\n", "{}\n", "---\n---\n"])
def test_empty_rule_file_is_what_promtool_says(
    run_cli: RunCli, tmp_path: Path, content: str
) -> None:
    """promtool check rules accepts these (0 rules found); so does lint, with a note."""
    path = write(tmp_path, "empty.yml", content)
    result = run_cli(["lint", "--info", str(path)], tmp_path)
    assert result.exit_code == 0, result.output
    assert "[input/empty]" in result.stderr


def test_a_folder_walk_skips_manifests_that_are_not_rule_files(
    run_cli: RunCli, tmp_path: Path
) -> None:
    """Named on the command line, a Deployment is refused (exit 4); found in a folder of
    manifests beside a rule file, it is skipped with a note."""
    write(tmp_path / "manifests", "deploy.yml", "apiVersion: apps/v1\nkind: Deployment\n")
    write(tmp_path / "manifests", "rules.yml", WARNING_ONLY.replace("job_up_sum", "job:up:sum"))
    walked = run_cli(["lint", "--info", str(tmp_path / "manifests")], tmp_path)
    assert walked.exit_code == 0, walked.output
    assert "skipped, not a rule file" in walked.stderr
    named = run_cli(["lint", str(tmp_path / "manifests" / "deploy.yml")], tmp_path)
    assert named.exit_code == 4, named.output
    assert "[input/not-rule-file]" in named.stderr


def test_oversized_file_is_refused(run_cli: RunCli, tmp_path: Path) -> None:
    big = "groups:\n- name: g\n  rules:\n" + "  - record: a:b:c\n    expr: up\n" * 330_000
    write(tmp_path, "big.yml", big)
    assert len(big) > 10_000_000
    result = run_cli(["lint", str(tmp_path / "big.yml")], tmp_path)
    assert result.exit_code == 2
    assert "[input/too-large]" in result.stderr


def test_missing_path(run_cli: RunCli, tmp_path: Path) -> None:
    result = run_cli(["lint", str(tmp_path / "nope.yml")], tmp_path)
    assert result.exit_code == 2
    assert "[input/missing]" in result.stderr


WARNING_ONLY = """\
groups:
- name: g
  rules:
  - record: job_up_sum
    expr: sum by (job) (up)
"""


def test_fail_on_threshold(run_cli: RunCli, tmp_path: Path) -> None:
    path = write(tmp_path, "w.yml", WARNING_ONLY)
    assert run_cli(["lint", str(path)], tmp_path).exit_code == 0
    assert run_cli(["lint", "--fail-on", "warning", str(path)], tmp_path).exit_code == 1


def test_json_when_clean(run_cli: RunCli, tmp_path: Path) -> None:
    path = write(tmp_path, "ok.yml", WARNING_ONLY.replace("job_up_sum", "job:up:sum"))
    result = run_cli(["lint", "--format", "json", str(path)], tmp_path)
    assert result.exit_code == 0
    assert json.loads(result.stdout) == {"diagnostics": [], "version": 1}


def test_github_format(run_cli: RunCli, tmp_path: Path) -> None:
    path = write(tmp_path, "seed.yml", SEED)
    result = run_cli(["lint", "--format", "github", str(path)], tmp_path)
    lines = result.stdout.splitlines()
    assert lines and all(line.startswith("::error file=") for line in lines)
    assert f"::error file={path},line=5,title=labels/did-you-mean::" in result.stdout


def test_findings_are_sorted_and_stable(run_cli: RunCli, tmp_path: Path) -> None:
    write(tmp_path, "b.yml", SEED)
    write(tmp_path, "a.yml", SEED.replace("seed", "other") + WARNING_ONLY.split("rules:\n")[1])
    first = run_cli(["lint", "--format", "json", str(tmp_path)], tmp_path).stdout
    second = run_cli(["lint", "--format", "json", str(tmp_path)], tmp_path).stdout
    assert first == second
    found = json.loads(first)["diagnostics"]
    keys = [(d["location"]["file"], d["location"]["line"]) for d in found]
    assert keys == sorted(keys)
    assert keys[0][0].endswith("a.yml")


CRD = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: unrelated}
data: {a: b}
---
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata: {name: gpu, namespace: monitoring}
spec:
  groups:
  - name: gpu
    rules:
    - record: gpu:dcgm_gpu_utilization:ratio
      expr: DCGM_FI_DEV_GPU_UTIL{gpu_id="0"} / 100
"""

MIMIR = """\
namespace: gpu
groups:
- name: gpu
  source_tenants: [team-a]
  rules:
  - record: gpu:dcgm_gpu_utilization:ratio
    expr: DCGM_FI_DEV_GPU_UTIL{gpu_id="0"} / 100
"""


@pytest.mark.parametrize(("name", "text", "line"), [("crd.yaml", CRD, 14), ("ns.yml", MIMIR, 7)])
def test_crd_and_mimir_files(
    run_cli: RunCli, tmp_path: Path, name: str, text: str, line: int
) -> None:
    path = write(tmp_path, name, text)
    result = run_cli(["lint", str(path)], tmp_path)
    assert result.exit_code == 1, result.output
    assert f"{path}:{line}: error[labels/did-you-mean]" in result.stderr


def test_mimir_duplicate_group_across_files(run_cli: RunCli, tmp_path: Path) -> None:
    write(tmp_path, "one.yml", MIMIR)
    write(tmp_path, "two.yml", MIMIR.replace("gpu_id", "resource_gpu_id"))
    result = run_cli(["lint", str(tmp_path)], tmp_path)
    assert "[rules/duplicate-group]" in result.stderr
    assert "namespace 'gpu'" in result.stderr


def _repo_with(tmp_path: Path, suppress: str | None) -> Path:
    # A 10m evaluation interval makes GpuTemperatureHigh's `for: 5m` a finding.
    source = blueprint_source(**({"suppress": suppress} if suppress else {}))
    source = source.replace("import GpuFleet,", "import GpuFleet, Suppression,")
    folder = tmp_path / "bp"
    folder.mkdir()
    (folder / "svc.py").write_text(source, encoding="utf-8")
    return make_repo(tmp_path / "repo", folder, 'evaluation_interval = "10m"\n')


def _findings(run_cli: RunCli, repo: Path, today: str, code: str) -> list[dict[str, Any]]:
    result = run_cli(["lint", "--format", "json", "--today", today], repo)
    return [d for d in json.loads(result.stdout)["diagnostics"] if d["code"] == code]


SLOW = "alert/for-shorter-than-interval"


def test_plan_finding_points_at_blueprint_and_generated_line(
    run_cli: RunCli, tmp_path: Path
) -> None:
    repo = _repo_with(tmp_path, None)
    found = {d["object_path"][-1]: d for d in _findings(run_cli, repo, "2026-06-01", SLOW)}
    hot = found["GpuTemperatureHigh"]  # for: 5m < 10m
    assert "GpuUtilizationLow" not in found  # for: 30m
    assert hot["location"]["file"] == "blueprints/svc.py"
    assert hot["location"]["line"] == 3  # the service( call
    generated, line = hot["related"][0].rsplit(":", 1)
    assert generated == "generated/prometheus/rules/svc-a.rules.yml"
    run_cli(["render"], repo)
    text = (repo / generated).read_text(encoding="utf-8").splitlines()
    assert text[int(line) - 1].strip() == "- alert: GpuTemperatureHigh"


def test_targeted_suppression(run_cli: RunCli, tmp_path: Path) -> None:
    suppress = (
        f'(Suppression(code="{SLOW}", reason="slow Prometheus", target="GpuTemperatureHigh"),)'
    )
    repo = _repo_with(tmp_path, suppress)
    names = {d["object_path"][-1] for d in _findings(run_cli, repo, "2026-06-01", SLOW)}
    assert "GpuTemperatureHigh" not in names


def test_suppression_silences_until_it_expires(run_cli: RunCli, tmp_path: Path) -> None:
    suppress = f'(Suppression(code="{SLOW}", reason="slow Prometheus", until="2026-12-31"),)'
    repo = _repo_with(tmp_path, suppress)
    assert _findings(run_cli, repo, "2026-06-01", SLOW) == []
    assert _findings(run_cli, repo, "2026-06-01", "lint/expired-suppression") == []
    assert _findings(run_cli, repo, "2027-01-01", SLOW)
    expired = _findings(run_cli, repo, "2027-01-01", "lint/expired-suppression")
    assert [d["severity"] for d in expired] == ["warning"]
    assert expired[0]["location"]["file"] == "blueprints/svc.py"


def test_paths_lint_only_those_files(run_cli: RunCli, tmp_path: Path) -> None:
    repo = _repo_with(tmp_path, None)  # its own rules have a finding in plan mode
    path = write(tmp_path, "ok.yml", WARNING_ONLY.replace("job_up_sum", "job:up:sum"))
    result = run_cli(["lint", "--fail-on", "warning", str(path)], repo)
    assert result.exit_code == 0, result.output
