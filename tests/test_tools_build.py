"""tools/build.py (`make tools`): which Go modules it builds, and that it refuses a go.mod
that drifts from tools/versions.toml. Nothing is compiled here."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import REPO
from tests.tools import require_tool

TOOLS = REPO / "tools"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("obs_iac_tools_build", TOOLS / "build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


build = _load()


def test_pinned_units_build_every_tool_obs_iac_runs() -> None:
    binaries = {b for unit in build.load_units() for b in unit.binaries}
    assert {"prometheus", "promtool", "alertmanager", "amtool", "otelcol"} <= binaries


def _copy_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    copy = tmp_path / "tools"
    shutil.copytree(TOOLS, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(build, "HERE", copy)
    monkeypatch.setattr(build, "PINS", copy / "versions.toml")
    return copy


def test_any_go_dir_with_main_go_is_built_under_its_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy = _copy_tools(tmp_path, monkeypatch)
    program = copy / "go" / "hello"
    program.mkdir(parents=True)
    (program / "go.mod").write_text("module example.invalid/hello\n\ngo 1.26\n")
    (program / "main.go").write_text("package main\n\nfunc main() {}\n")
    (copy / "go" / "no-main").mkdir()
    (copy / "go" / "no-main" / "go.mod").write_text("module example.invalid/x\n")
    units = {u.name: u for u in build.load_units()}
    assert units["hello"].binaries == ("hello",) and units["hello"].packages == (".",)
    assert "no-main" not in units
    # The collector's dir is described by its pin table, not picked up twice.
    assert [u.name for u in build.load_units()].count("otelcol") == 1


def test_a_go_mod_off_the_pins_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    require_tool("go")
    copy = _copy_tools(tmp_path, monkeypatch)
    build.check_pins(build.load_units())  # the committed modules agree with the pins
    program = copy / "go" / "drift"
    program.mkdir(parents=True)
    (program / "go.mod").write_text(
        "module example.invalid/drift\n\ngo 1.26\n\n"
        "require github.com/prometheus/alertmanager v0.34.0\n"
    )
    (program / "main.go").write_text("package main\n\nfunc main() {}\n")
    with pytest.raises(
        SystemExit,
        match=r"drift/go.mod requires github.com/prometheus/alertmanager v0.34.0, "
        r"versions.toml pins v0.35.0 \(floor: v0.25.0\)",
    ):
        build.check_pins(build.load_units())
    # The floor's own version is allowed: a program may reproduce Alertmanager 0.25.
    (program / "go.mod").write_text(
        (program / "go.mod").read_text().replace("v0.34.0", "v0.25.0"), encoding="utf-8"
    )
    build.check_pins(build.load_units())


def test_stamp_changes_with_the_pins_and_the_sources(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy = _copy_tools(tmp_path, monkeypatch)
    unit = next(u for u in build.load_units() if u.name == "otelcol")
    key = build.stamp_key(unit, "go1.26.8")
    assert build.stamp_key(unit, "go1.26.8") == key
    assert build.stamp_key(unit, "go1.27.0") != key
    main = copy / "go" / "otelcol" / "main.go"
    main.write_text(main.read_text() + "\n")
    assert build.stamp_key(unit, "go1.26.8") != key
