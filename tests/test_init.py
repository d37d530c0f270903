"""obs-iac init: the scaffolded GitOps repository renders and checks as it is."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml
from click.testing import CliRunner

from obs_iac.cli import main
from obs_iac.scaffold.gitops import GITHUB_WORKFLOW, GITLAB_CI, MAKEFILE
from tests.tools import require_tool

REPO = Path(__file__).resolve().parents[1]
OBS_IAC = Path(sys.executable).with_name("obs-iac")


def _make(root: Path, target: str) -> subprocess.CompletedProcess[str]:
    make = require_tool("make")
    return subprocess.run(
        [make, target, f"OBS_IAC={OBS_IAC}"], cwd=root, capture_output=True, text=True
    )


def test_scaffold_renders_and_checks(tmp_path: Path) -> None:
    root = tmp_path / "obs-gitops"
    out = CliRunner().invoke(main, ["init", str(root)])
    assert out.exit_code == 0, out.output
    for rel in (
        "blueprints/example_training.py",
        "pyproject.toml",
        "Makefile",
        ".github/workflows/obs-iac.yml",
    ):
        assert (root / rel).is_file(), rel
    assert '[tool.obs-iac]\nblueprints = "blueprints"' in (root / "pyproject.toml").read_text()
    assert 'dependencies = ["obs-iac>=0.1"]' in (root / "pyproject.toml").read_text()
    check = _make(root, "check")
    assert check.returncode != 0  # nothing rendered yet: generated/ is stale
    render = _make(root, "render")
    assert render.returncode == 0, render.stderr
    assert (root / "generated/prometheus/rules/example-training.rules.yml").is_file()
    check = _make(root, "check")
    assert check.returncode == 0, check.stdout + check.stderr
    assert "up to date" in check.stderr


def test_scaffold_refuses_a_non_empty_directory(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("mine")
    out = CliRunner().invoke(main, ["init", str(tmp_path)])
    assert out.exit_code == 2
    assert "error[init/not-empty]" in out.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt"]
    forced = CliRunner().invoke(main, ["init", str(tmp_path), "--force", "--ci", "gitlab"])
    assert forced.exit_code == 0, forced.output
    assert (tmp_path / "keep.txt").read_text() == "mine"
    assert (tmp_path / ".gitlab-ci.yml").read_text() == GITLAB_CI


def test_ci_recipes_are_valid_yaml_and_documented() -> None:
    workflow = yaml.safe_load(GITHUB_WORKFLOW)
    steps = [s.get("run", "") for s in workflow["jobs"]["obs-iac"]["steps"]]
    assert "obs-iac render --check" in steps and "obs-iac lint" in steps
    assert any("obs-iac diff --base" in s and "--format markdown" in s for s in steps)
    gitlab = yaml.safe_load(GITLAB_CI)
    assert "obs-iac render --check" in gitlab["obs-iac"]["script"]
    docs = (REPO / "docs/gitops.md").read_text()
    # docs/gitops.md shows exactly what `obs-iac init` writes
    assert GITHUB_WORKFLOW in docs and GITLAB_CI in docs and MAKEFILE in docs


def test_pre_commit_hooks_expose_render_check_and_lint() -> None:
    hooks = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
    entries = {h["id"]: h["entry"] for h in hooks}
    assert entries == {
        "obs-iac-render-check": "obs-iac render --check",
        "obs-iac-lint": "obs-iac lint",
    }
    assert all(h["pass_filenames"] is False for h in hooks)
