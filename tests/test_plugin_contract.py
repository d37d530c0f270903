"""Misbehaving plugins get a diagnostic naming them, exit 3, and nothing is written."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest
from click.testing import CliRunner
from pydantic import BaseModel, ConfigDict

from obs_iac.cli import main
from obs_iac.config import RepoConfig
from obs_iac.diagnostics import PluginError
from obs_iac.plugins import Generator, discover
from obs_iac.render.artifact import Artifact
from obs_iac.testing import render_blueprints

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "blueprints"


def fake_distribution(root: Path, name: str, group: str, entry: str, module_source: str) -> None:
    """A distribution on sys.path that importlib.metadata discovers like an installed one."""
    dist = root / f"{name.replace('-', '_')}-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[{group}]\n{entry}\n")
    module = entry.split("=")[1].strip().split(":")[0]
    (root / f"{module}.py").write_text(module_source)


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    root = tmp_path / "site"
    root.mkdir()
    monkeypatch.syspath_prepend(str(root))
    yield root
    for name in list(sys.modules):
        if name.startswith("broken_plugin") or name.startswith("twin_plugin"):
            del sys.modules[name]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    shutil.copytree(EXAMPLES, root / "blueprints")
    return root


def test_plugin_raising_on_import_is_named(site: Path, repo: Path) -> None:
    fake_distribution(
        site,
        "broken-plugin",
        "obs_iac.generators",
        "broken = broken_plugin:Gen",
        "raise RuntimeError('boom at import')\n",
    )
    result = CliRunner().invoke(main, ["--root", str(repo), "render"])
    assert result.exit_code == 3
    assert (
        "plugin 'broken' from broken-plugin failed to load: RuntimeError: boom at import"
        in result.output
    )
    assert "Traceback" not in result.output
    assert not (repo / "generated").exists()


def test_duplicate_plugin_names_are_refused(site: Path) -> None:
    fake_distribution(
        site,
        "twin-plugin",
        "obs_iac.generators",
        "prometheus-rules = twin_plugin:Twin",
        "from obs_iac.generators.prometheus_rules import PrometheusRulesGenerator as Twin\n",
    )
    with pytest.raises(PluginError) as err:
        discover(RepoConfig())
    message = str(err.value)
    assert "two generator plugins are named 'prometheus-rules'" in message
    assert "twin-plugin" in message


class FutureGenerator(Generator):
    name: ClassVar[str] = "future"
    api_version: ClassVar[int] = 99


def test_unsupported_api_version_is_refused() -> None:
    with pytest.raises(PluginError) as err:
        render_blueprints(EXAMPLES, extra_generators=[FutureGenerator()])
    assert "generator 'future'" in str(err.value) and "api_version 99" in str(err.value)


class EscapingGenerator(Generator):
    name: ClassVar[str] = "escaping"

    def generate(self, plan: object, ctx: object) -> Iterator[Artifact]:
        yield Artifact("../outside.txt", "text", "x", self.name)


def test_path_outside_output_folder_is_refused() -> None:
    with pytest.raises(PluginError) as err:
        render_blueprints(EXAMPLES, extra_generators=[EscapingGenerator()])
    assert "generator 'escaping' returned the path '../outside.txt'" in str(err.value)


class StrictConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    level: int


class ConfiguredGenerator(Generator):
    name: ClassVar[str] = "configured"
    config_model: ClassVar[type[BaseModel]] = StrictConfig

    def generate(self, plan: object, ctx: object) -> Iterator[Artifact]:
        return iter(())


def test_plugin_config_failing_validation_names_the_plugin() -> None:
    config = RepoConfig(generators={"configured": {"level": "high"}})
    with pytest.raises(Exception) as err:
        render_blueprints(EXAMPLES, config=config, extra_generators=[ConfiguredGenerator()])
    message = str(err.value)
    assert "[tool.obs-iac.generators.configured] level" in message


def test_required_plugin_missing_lists_installed_expected_missing() -> None:
    config = RepoConfig.model_validate({"plugins": {"require": ["gpu", "nonexistent-pack"]}})
    with pytest.raises(PluginError) as err:
        discover(config)
    diag = err.value.diagnostics[0]
    assert diag.message == "required plugins are not installed: nonexistent-pack"
    assert (
        diag.hint is not None
        and "installed:" in diag.hint
        and "expected: gpu, nonexistent-pack" in diag.hint
    )


def test_disabled_plugin_is_left_out() -> None:
    config = RepoConfig.model_validate({"plugins": {"disable": ["promtool-tests"]}})
    result = render_blueprints(EXAMPLES, config=config)
    assert not any(path.startswith("prometheus/tests/") for path in result.files)


CONFIGURED_RULE = """
from pydantic import BaseModel, ConfigDict
from obs_iac.diagnostics import Diagnostic, Severity
from obs_iac.plugins import LintRule


class Limits(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    max_groups: int = 100


class GroupLimit(LintRule):
    code = "demo/group-limit"
    config_model = Limits
    scope = "plan"

    def check(self, plan, artifacts, ctx):
        limit = ctx.settings.max_groups
        if len(plan.rule_groups) > limit:
            yield Diagnostic(self.code, Severity.ERROR, f"more than {limit} rule groups")
"""


@pytest.mark.parametrize(("table", "finding"), [("max_groups = 1", True), ("", False)])
def test_lint_rule_settings_come_from_the_lint_table(
    site: Path, repo: Path, table: str, finding: bool
) -> None:
    """`[tool.obs-iac.lint."<code>"]` reaches the rule (it used to read the generators'
    table, while errors named the lint one)."""
    fake_distribution(
        site,
        "configured-rule",
        "obs_iac.lint_rules",
        "demo/group-limit = configured_rule:GroupLimit",
        CONFIGURED_RULE,
    )
    (repo / "pyproject.toml").write_text(
        '[tool.obs-iac]\nblueprints = "blueprints"\noutput = "generated"\n'
        + (f'[tool.obs-iac.lint."demo/group-limit"]\n{table}\n' if table else "")
    )
    result = CliRunner().invoke(main, ["--root", str(repo), "lint"])
    assert ("more than 1 rule groups" in result.output) is finding, result.output
    bad = repo / "pyproject.toml"
    bad.write_text(bad.read_text().replace("max_groups = 1", "max_groups = 'many'"))
    if finding:
        result = CliRunner().invoke(main, ["--root", str(repo), "lint"])
        assert result.exit_code == 2, result.output
        assert "[tool.obs-iac.lint.demo/group-limit] max_groups" in result.output
