"""`obs-iac new` writes plugin packages that install, register and pass their own tests."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from obs_iac.cli import main
from tests.venvs import once_per_run, plugin_env

KINDS = ("pack", "generator", "lint-rule")


@pytest.fixture(scope="module")
def scaffolds(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Path]]:
    def build(root: Path) -> None:
        for kind in KINDS:
            result = CliRunner().invoke(main, ["new", kind, f"demo-{kind}", "--dir", str(root)])
            assert result.exit_code == 0, result.output
        plugin_env(root, *(root / f"obs-iac-demo-{kind}" for kind in KINDS))

    root = once_per_run(tmp_path_factory, "scaffolds", build)
    return root / "env", {kind: root / f"obs-iac-demo-{kind}" for kind in KINDS}


@pytest.mark.parametrize("kind", KINDS)
def test_scaffold_passes_its_own_tests(scaffolds: tuple[Path, dict[str, Path]], kind: str) -> None:
    env, made = scaffolds
    proc = subprocess.run(
        [
            env / "bin" / "python",
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            made[kind] / "tests",
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "passed" in proc.stdout


def test_scaffolds_are_discovered_through_entry_points(
    scaffolds: tuple[Path, dict[str, Path]],
) -> None:
    env, _ = scaffolds
    out = subprocess.run(
        [env / "bin" / "obs-iac", "plugins"], check=True, capture_output=True, text=True
    ).stdout
    rows = {tuple(line.split()[:3]) for line in out.splitlines()}
    assert ("pack", "demo-pack", "obs-iac-demo-pack") in rows
    assert ("generator", "demo-generator", "obs-iac-demo-generator") in rows
    assert ("lint-rule", "custom/demo-lint-rule", "obs-iac-demo-lint-rule") in rows


def test_existing_folder_and_bad_names_are_refused(tmp_path: Path) -> None:
    runner = CliRunner()
    assert runner.invoke(main, ["new", "pack", "dup", "--dir", str(tmp_path)]).exit_code == 0
    again = runner.invoke(main, ["new", "pack", "dup", "--dir", str(tmp_path)])
    assert again.exit_code == 2 and "already exists" in again.output
    bad = runner.invoke(main, ["new", "pack", "Bad_Name", "--dir", str(tmp_path)])
    assert bad.exit_code == 2 and "is not kebab-case" in bad.output
