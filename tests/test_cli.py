"""The obs-iac command: help, schema, plan, plugins, fields, and exit codes for bugs."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from obs_iac import pipeline, plugins
from obs_iac.blueprint.models import CORE_FIELDS
from obs_iac.engine import run as engine_run
from tests.conftest import CliResult, RunCli

BUILTINS = {
    ("pack", "gpu"),
    ("generator", "dcgm-collectors"),
    ("generator", "prometheus-rules"),
    ("generator", "promtool-tests"),
    ("generator", "prometheus-relabel"),
}


def test_help(run_subprocess: Callable[..., CliResult], tmp_path: Path) -> None:
    result = run_subprocess(["--help"], tmp_path)
    assert result.exit_code == 0
    for command in ("render", "plan", "schema", "plugins", "fields"):
        assert command in result.stdout


def test_help_does_not_import_the_heavy_modules() -> None:
    heavy = ("pydantic", "yaml", "promql_parser")
    code = f"import sys, obs_iac.cli; print(sorted(m for m in {heavy!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_unknown_command_is_a_usage_error(run_cli: RunCli, gitops: Path) -> None:
    result = run_cli(["rendr"], gitops)
    assert result.exit_code == 2
    assert "No such command" in result.stderr


def test_schema(run_cli: RunCli, gitops: Path) -> None:
    result = run_cli(["schema"], gitops)
    assert result.exit_code == 0, result.output
    schema = json.loads(result.stdout)
    assert schema["title"] == "obs-iac service blueprint v1"
    assert set(schema["properties"]) >= CORE_FIELDS
    assert {"name", "team", "sla_id", "objective", "runbook_base_url", "gpu"} <= set(
        schema["required"]
    )
    fleet = schema["$defs"]["GpuFleet"]
    assert {"model", "count", "driver_version", "dcgm_exporter_version", "profiling"} <= set(
        fleet["properties"]
    )
    assert fleet["additionalProperties"] is False
    assert schema["additionalProperties"] is False
    for model in (schema, *schema["$defs"].values()):
        for name, prop in model.get("properties", {}).items():
            assert prop.get("description"), f"{model.get('title')}.{name} has no description"


def test_config_schema(run_cli: RunCli, gitops: Path) -> None:
    result = run_cli(["schema", "--config"], gitops)
    assert result.exit_code == 0, result.output
    schema = json.loads(result.stdout)
    assert {"blueprints", "output", "naming", "prometheus_min_version"} <= set(schema["properties"])


def test_plan_json(run_cli: RunCli, gitops: Path) -> None:
    result = run_cli(["plan", "--format", "json"], gitops)
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert [s["name"] for s in plan["services"]] == ["image-classify-v3", "recomm-v2"]
    assert {s["sla_id"] for s in plan["services"]} == {"image_classify_v3", "recomm_v2"}
    assert plan["services"][0]["source"]["file"] == "blueprints/image_classify_v3.py"
    metrics = {m["name"]: m for m in plan["metrics"]}
    assert metrics["DCGM_FI_DEV_GPU_UTIL"]["type"] == "gauge"
    assert "business_sla_id" in metrics["DCGM_FI_DEV_GPU_UTIL"]["labels"]
    assert plan["rule_groups"] and plan["collector_sets"]
    assert not (gitops / "generated").exists()


def test_plugins_lists_the_builtins_with_their_distribution(run_cli: RunCli, gitops: Path) -> None:
    result = run_cli(["plugins", "--format", "json"], gitops)
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    found = {(r["kind"], r["name"]) for r in rows}
    assert found >= BUILTINS
    for row in rows:
        if (row["kind"], row["name"]) in BUILTINS:
            assert row["distribution"] == "obs-iac"
            assert row["entry_point"].startswith("obs-iac: obs_iac.")
    text = run_cli(["plugins"], gitops)
    assert text.exit_code == 0
    assert any(line.split()[:3] == ["pack", "gpu", "obs-iac"] for line in text.stdout.splitlines())


def test_fields_filters_by_exporter(run_cli: RunCli, gitops: Path) -> None:
    every = run_cli(["fields", "GPU_UTIL"], gitops)
    assert every.exit_code == 0
    names = {line.split()[0] for line in every.stdout.splitlines()}
    assert {"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_GPU_UTIL_RATIO"} <= names
    old = run_cli(["fields", "GPU_UTIL", "--exporter", "4.5.3-4.8.2"], gitops)
    names = {line.split()[0] for line in old.stdout.splitlines()}
    assert "DCGM_FI_DEV_GPU_UTIL" in names
    assert "DCGM_FI_DEV_GPU_UTIL_RATIO" not in names


class _BrokenGenerator(plugins.Generator):
    name: ClassVar[str] = "broken"

    def generate(self, plan: Any, ctx: plugins.GeneratorContext) -> Iterator[Any]:
        raise RuntimeError("generator exploded")
        yield  # pragma: no cover


@pytest.fixture
def broken_generator(rendered: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Installs a crashing generator into a repo that has already rendered once."""
    real = plugins.discover
    monkeypatch.setattr(
        pipeline,
        "discover",
        lambda repo=None: real(repo, extra={plugins.GENERATORS: [("broken", _BrokenGenerator())]}),
    )


@pytest.mark.usefixtures("broken_generator")
def test_plugin_crash_is_exit_3_without_traceback(run_cli: RunCli, rendered: Path) -> None:
    before = sorted(p.read_bytes() for p in (rendered / "generated").rglob("*") if p.is_file())
    result = run_cli(["render"], rendered)
    assert result.exit_code == 3, result.output
    assert "error[plugin/crash]: generator 'broken' failed: RuntimeError: generator exploded" in (
        result.stderr
    )
    assert "help: this is a bug in the generator; rerun with --debug" in result.stderr
    assert "Traceback" not in result.output
    after = sorted(p.read_bytes() for p in (rendered / "generated").rglob("*") if p.is_file())
    assert after == before


@pytest.mark.usefixtures("broken_generator")
def test_plugin_crash_traceback_with_debug(run_cli: RunCli, rendered: Path) -> None:
    result = run_cli(["--debug", "render"], rendered)
    assert result.exit_code == 3
    assert "Traceback" in result.stderr
    assert "generator exploded" in result.stderr


def test_internal_error_is_exit_3_with_traceback_only_under_debug(
    run_cli: RunCli, gitops: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom(*args: Any, **kwargs: Any) -> Any:
        raise KeyError("oops")

    monkeypatch.setattr(engine_run, "run", boom)
    plain = run_cli(["render"], gitops)
    assert plain.exit_code == 3
    assert "internal error: KeyError: 'oops'" in plain.stderr
    assert "rerun with --debug" in plain.stderr
    assert "Traceback" not in plain.output
    debug = run_cli(["--debug", "render"], gitops)
    assert debug.exit_code == 3
    assert "Traceback" in debug.stderr
    assert not (gitops / "generated").exists()


def test_render_then_check_through_the_console_script(
    run_subprocess: Callable[..., CliResult], gitops: Path
) -> None:
    first = run_subprocess(["render"], gitops)
    assert first.exit_code == 0, first.output
    assert re.search(r"rendered 2 services into generated/: [1-9][0-9]* added", first.stderr)
    check = run_subprocess(["render", "--check"], gitops)
    assert check.exit_code == 0, check.output
    (gitops / "generated/prometheus/rules/recomm-v2.rules.yml").write_text("groups: []\n")
    stale = run_subprocess(["render", "--check"], gitops)
    assert stale.exit_code == 1
    assert "would change: prometheus/rules/recomm-v2.rules.yml" in stale.stderr


class _EscapingGenerator(plugins.Generator):
    name: ClassVar[str] = "escaping"

    def generate(self, plan: Any, ctx: plugins.GeneratorContext) -> Iterator[Any]:
        from obs_iac.render.artifact import Artifact

        yield Artifact("../outside.yml", "text", "x", self.name, ())
        yield Artifact("prometheus/rules/recomm-v2.rules.yml", "text", "x", self.name, ())


def test_generator_paths_cannot_escape_or_collide(
    run_cli: RunCli, gitops: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = plugins.discover
    monkeypatch.setattr(
        pipeline,
        "discover",
        lambda repo=None: real(
            repo, extra={plugins.GENERATORS: [("escaping", _EscapingGenerator())]}
        ),
    )
    result = run_cli(["render"], gitops)
    assert result.exit_code == 3, result.output
    assert "error[plugin/bad-path]: generator 'escaping' returned the path '../outside.yml'" in (
        result.stderr
    )
    assert "error[plugin/path-conflict]" in result.stderr
    assert "Traceback" not in result.output
    assert not (gitops / "outside.yml").exists()
    assert not (gitops / "generated").exists()
