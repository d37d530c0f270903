"""obs-iac init: the scaffolded GitOps repository renders and checks as it is."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from obs_iac.cli import main
from obs_iac.scaffold.gitops import CI_SCRIPT, GITHUB_WORKFLOW, GITLAB_CI, MAKEFILE
from obs_iac.scaffold.source import constraints, running
from tests.conftest import CliResult
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
    # No index has obs-iac: the pin names where this installation came from.
    assert "[project]" not in (root / "pyproject.toml").read_text()
    assert running().requirement in (root / "requirements.txt").read_text().splitlines()
    assert os.access(root / "ci.sh", os.X_OK)
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
    assert "sh ci.sh" in steps
    assert any(".venv/bin/obs-iac diff --base" in s and "--format markdown" in s for s in steps)
    gitlab = yaml.safe_load(GITLAB_CI)
    assert gitlab["obs-iac"]["script"][0] == "sh ci.sh"
    # ci.sh installs the pin, then `make check`: render --check, lint, and obs-iac test.
    assert CI_SCRIPT.endswith("make venv\nmake check\n")
    check = MAKEFILE.split("\ncheck: ")[1].split("\n\n")[0]
    for command in ("$(OBS_IAC) render --check", "$(OBS_IAC) lint", "$(OBS_IAC) test"):
        assert command in check
    docs = (REPO / "docs/gitops.md").read_text()
    # docs/gitops.md shows exactly what `obs-iac init` writes
    for text in (GITHUB_WORKFLOW, GITLAB_CI, MAKEFILE, CI_SCRIPT):
        assert text in docs


def test_constraints_pin_the_installed_dependencies() -> None:
    from importlib import metadata

    pins = [line for line in constraints().splitlines() if not line.startswith("#")]
    assert f"pydantic=={metadata.version('pydantic')}" in pins
    assert f"click=={metadata.version('click')}" in pins
    assert not any(line.startswith(("pytest", "ruff", "mypy", "obs-iac")) for line in pins)


def test_pre_commit_hooks_expose_render_check_and_lint() -> None:
    hooks = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
    entries = {h["id"]: h["entry"] for h in hooks}
    assert entries == {
        "obs-iac-render-check": "obs-iac render --check",
        "obs-iac-lint": "obs-iac lint",
    }
    assert all(h["pass_filenames"] is False for h in hooks)


def _init(*args: str) -> CliResult:
    result = CliRunner().invoke(main, ["init", *args])
    return CliResult(result.exit_code, result.stdout, result.stderr)


def test_init_from_a_wheel_vendors_it(tmp_path: Path) -> None:
    wheel = tmp_path / "obs_iac-9.9.9-py3-none-any.whl"
    wheel.write_bytes(b"not really a wheel, only copied")
    out = _init(str(tmp_path / "repo"), "--from", str(wheel))
    assert out.exit_code == 0, out.stderr
    assert (tmp_path / "repo/vendor" / wheel.name).read_bytes() == wheel.read_bytes()
    lines = (tmp_path / "repo/requirements.txt").read_text().splitlines()
    assert lines[-1] == f"./vendor/{wheel.name}"
    assert f"obs-iac from: wheel {wheel.name} (sha256 " in out.stderr


def test_init_from_a_git_url_or_a_source_folder(tmp_path: Path) -> None:
    url = "git+https://github.com/example/obs-iac@v0.1.0"
    out = _init(str(tmp_path / "git"), "--from", url, "--ci", "none")
    assert out.exit_code == 0, out.stderr
    assert (tmp_path / "git/requirements.txt").read_text().splitlines()[-1] == f"obs-iac @ {url}"
    unpinned = _init(str(tmp_path / "loose"), "--from", "git+https://github.com/example/obs-iac")
    assert unpinned.exit_code == 0
    assert "not pinned: add @TAG or @COMMIT" in unpinned.stderr
    out = _init(str(tmp_path / "path"), "--from", str(REPO))
    assert out.exit_code == 0, out.stderr
    line = (tmp_path / "path/requirements.txt").read_text().splitlines()[-1]
    assert line == f"obs-iac @ {REPO.resolve().as_uri()}"


@pytest.mark.parametrize(
    ("source", "code"),
    [
        ("missing/obs_iac-0.1.0-py3-none-any.whl", "init/from-missing"),
        ("missing-folder", "init/from-missing"),
        ("notes.txt", "init/from-not-wheel"),
        ("plain-folder", "init/from-not-source"),
        ("git+nonsense", "init/from-git"),
    ],
)
def test_init_refuses_a_bad_from_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, code: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text("x")
    (tmp_path / "plain-folder").mkdir()
    out = _init("repo", "--from", source)
    assert out.exit_code == 2, out.output
    assert f"error[{code}]" in out.stderr
    assert "help: " in out.stderr
    assert "Traceback" not in out.output
    assert not (tmp_path / "repo").exists()


def test_init_refuses_a_folder_inside_a_repository(tmp_path: Path) -> None:
    (tmp_path / "obs-iac.toml").write_text('blueprints = "blueprints"\n')
    out = _init(str(tmp_path / "sub" / "repo"))
    assert out.exit_code == 2
    assert "error[init/inside-repository]" in out.stderr
    assert f"inside the obs-iac repository {tmp_path.resolve()}" in out.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["obs-iac.toml"]
    # A pyproject.toml without [tool.obs-iac] is some other project, not a repository.
    other = tmp_path.parent / (tmp_path.name + "-other")
    other.mkdir()
    (other / "pyproject.toml").write_text('[project]\nname = "x"\n')
    assert _init(str(other / "repo")).exit_code == 0


def test_init_refuses_a_subfolder_of_a_git_work_tree_unless_forced(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    out = _init(str(tmp_path / "observability"))
    assert out.exit_code == 2
    assert "error[init/inside-git]" in out.stderr
    assert "--force" in out.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [".git"]
    forced = _init(str(tmp_path / "observability"), "--force")
    assert forced.exit_code == 0, forced.stderr
    assert (tmp_path / "observability/ci.sh").is_file()
