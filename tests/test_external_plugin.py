"""A real third-party pack, installed from its own pyproject into a fresh virtual
environment, is discovered through its entry point and renders."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.venvs import once_per_run
from tests.venvs import plugin_env as make_env

REPO = Path(__file__).resolve().parent.parent
PLUGIN = REPO / "examples" / "plugins" / "obs-iac-infiniband"


@pytest.fixture(scope="module")
def plugin_env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    def build(root: Path) -> None:
        make_env(root, PLUGIN)

    return once_per_run(tmp_path_factory, "infiniband-venv", build) / "env"


def test_plugins_lists_the_external_pack(plugin_env: Path) -> None:
    out = subprocess.run(
        [plugin_env / "bin" / "obs-iac", "plugins"], check=True, capture_output=True, text=True
    ).stdout
    line = next(row for row in out.splitlines() if " infiniband " in f" {row} ")
    assert line.split() == ["pack", "infiniband", "obs-iac-infiniband", "0.1.0"]


def test_external_pack_renders_and_its_rules_pass_promtool(
    plugin_env: Path, tmp_path: Path
) -> None:
    from tests.tools import require_tool

    promtool = require_tool("promtool")
    shutil.copytree(PLUGIN / "blueprints", tmp_path / "blueprints")
    subprocess.run([plugin_env / "bin" / "obs-iac", "render"], cwd=tmp_path, check=True)
    rules = tmp_path / "generated" / "prometheus" / "rules" / "llm-pretrain.rules.yml"
    assert "InfinibandPortDown" in rules.read_text()
    subprocess.run([promtool, "check", "rules", str(rules)], check=True, capture_output=True)
    tests = tmp_path / "generated" / "prometheus" / "tests" / "llm-pretrain.test.yml"
    subprocess.run([promtool, "test", "rules", str(tests)], check=True, capture_output=True)


def test_external_pack_own_tests_pass(plugin_env: Path) -> None:
    proc = subprocess.run(
        [
            plugin_env / "bin" / "python",
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            str(PLUGIN / "tests"),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_without_the_plugin_its_section_is_an_error(tmp_path: Path) -> None:
    shutil.copytree(PLUGIN / "blueprints", tmp_path / "blueprints")
    proc = subprocess.run(
        [Path(sys.executable).parent / "obs-iac", "render"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert "infiniband: no installed pack claims a section of this name" in proc.stderr
    assert not (tmp_path / "generated").exists()
