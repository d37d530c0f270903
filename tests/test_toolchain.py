"""obs_iac.toolchain: finds each tool of the floor and current stacks and checks its version,
against fake binaries on a temporary PATH / tools dir, so every case runs without Go builds."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from obs_iac import toolchain
from obs_iac.diagnostics import ExitCode, InputError
from obs_iac.toolchain import Tool, ToolError, find_tool

PINS = """\
[prometheus]
dir = "prometheus"
binaries = ["prometheus", "promtool"]
packages = []
release = "3.16.0"
[alertmanager]
dir = "alertmanager"
binaries = ["alertmanager", "amtool"]
packages = []
release = "0.35.0"
[otelcol]
dir = "go/otelcol"
binaries = ["otelcol"]
packages = ["."]
release = "0.165.0"
"""


def fake(directory: Path, name: str, output: str, *, stream: str = "stdout") -> Path:
    """An executable that prints ``output`` for --version, as the real programs do."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    redirect = " >&2" if stream == "stderr" else ""
    path.write_text(f"#!/bin/sh\nprintf '%s\\n' '{output}'{redirect}\n", encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


@pytest.fixture
def stacks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """An empty PATH dir for the floor and an empty tools dir for the current stack,
    with /usr/bin kept out of the floor search so the machine's own tools do not leak in."""
    floor = tmp_path / "path"
    floor.mkdir()
    tools = tmp_path / "tools"
    (tools / "bin").mkdir(parents=True)
    (tools / "versions.toml").write_text(PINS, encoding="utf-8")
    monkeypatch.setenv("PATH", str(floor))
    monkeypatch.setenv("OBS_IAC_TOOLS_DIR", str(tools))
    monkeypatch.setattr(toolchain, "_REPO_PINS", tmp_path / "no-repo" / "versions.toml")
    monkeypatch.setattr(toolchain, "_floor_candidates", _candidates_on_path_only)
    return floor, tools / "bin"


def _candidates_on_path_only(name: str) -> list[Path]:
    import os
    import shutil

    out: list[Path] = []
    for binary in toolchain._FLOOR_NAMES[name]:
        found = shutil.which(binary, path=os.environ["PATH"])
        if found:
            out.append(Path(found))
    return out


def test_floor_prometheus_2_42_is_found(stacks: tuple[Path, Path]) -> None:
    floor, _ = stacks
    path = fake(floor, "promtool", "promtool, version 2.42.0+ds (branch: debian/sid)")
    assert find_tool("promtool", "floor") == Tool("promtool", path, "2.42.0")


def test_floor_alertmanager_is_debians_prometheus_alertmanager(stacks: tuple[Path, Path]) -> None:
    floor, _ = stacks
    path = fake(floor, "prometheus-alertmanager", "alertmanager, version 0.25.0 (branch: x)")
    assert find_tool("alertmanager", "floor") == Tool("alertmanager", path, "0.25.0")


@pytest.mark.parametrize(
    ("output", "found"),
    [
        ("promtool, version 2.41.0 (branch: x)", "2.41.0"),  # older than the floor
        ("promtool, version 3.16.0 (branch: x)", "3.16.0"),  # Prometheus 3 is not the floor
    ],
)
def test_floor_promtool_of_the_wrong_version_is_a_user_error(
    stacks: tuple[Path, Path], output: str, found: str
) -> None:
    floor, _ = stacks
    fake(floor, "promtool", output)
    with pytest.raises(ToolError) as info:
        find_tool("promtool", "floor")
    message = str(info.value)
    assert "promtool" in message and f"version {found}" in message and "make tools" in message
    assert info.value.found is not None and found in info.value.found
    assert isinstance(info.value, InputError) and info.value.exit_code is ExitCode.BAD_INPUT


def test_floor_missing_says_not_found(stacks: tuple[Path, Path]) -> None:
    with pytest.raises(ToolError, match=r"amtool \(floor stack\): not found.*make tools"):
        find_tool("amtool", "floor")


def test_current_promtool_of_the_pinned_release_is_found(stacks: tuple[Path, Path]) -> None:
    _, bin_dir = stacks
    path = fake(bin_dir, "promtool", "promtool, version 3.16.0 (branch: module-proxy)")
    assert find_tool("promtool", "current") == Tool("promtool", path, "3.16.0")


def test_current_otelcol_version_on_stderr_is_read(stacks: tuple[Path, Path]) -> None:
    _, bin_dir = stacks
    path = fake(bin_dir, "otelcol", "otelcol version 0.165.0", stream="stderr")
    assert find_tool("otelcol", "current") == Tool("otelcol", path, "0.165.0")
    # The collector has no Debian floor: both stacks run the pinned build.
    assert find_tool("otelcol", "floor") == Tool("otelcol", path, "0.165.0")


def test_current_stale_build_is_a_user_error(stacks: tuple[Path, Path]) -> None:
    _, bin_dir = stacks
    fake(bin_dir, "amtool", "amtool, version 0.34.0 (branch: x)")
    with pytest.raises(ToolError) as info:
        find_tool("amtool", "current")
    message = str(info.value)
    assert "amtool" in message and "version 0.34.0" in message and "0.35.0" in message
    assert "make tools" in message


def test_current_missing_says_not_found(stacks: tuple[Path, Path]) -> None:
    with pytest.raises(ToolError, match=r"prometheus \(current stack\): not found.*make tools"):
        find_tool("prometheus", "current")


def test_current_ignores_the_floor_on_path(stacks: tuple[Path, Path]) -> None:
    floor, _ = stacks
    fake(floor, "promtool", "promtool, version 3.16.0 (branch: x)")
    with pytest.raises(ToolError, match="not found"):
        find_tool("promtool", "current")


def test_rebuilt_binary_is_probed_again(stacks: tuple[Path, Path]) -> None:
    _, bin_dir = stacks
    fake(bin_dir, "promtool", "promtool, version 3.15.0 (branch: x)")
    with pytest.raises(ToolError):
        find_tool("promtool", "current")
    path = fake(bin_dir, "promtool", "promtool, version 3.16.0 (branch: module-proxy)")
    assert find_tool("promtool", "current").version == "3.16.0"
    assert path.exists()


def test_repo_pins_name_every_tool() -> None:
    """The committed tools/versions.toml pins a release for each tool obs-iac runs."""
    releases = toolchain._releases(toolchain._REPO_PINS.read_bytes())
    assert set(toolchain.TOOLS) <= set(releases)
    assert releases["promtool"].startswith("3.") and releases["amtool"].startswith("0.35.")


def test_unknown_tool_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="unknown tool"):
        find_tool("grafana", "floor")


def test_floor_search_skips_the_tools_bin_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A user who put `make tools`' bin dir on PATH still gets Debian's floor."""
    tools = tmp_path / "tools"
    ours = fake(tools / "bin", "promtool", "promtool, version 3.16.0")
    debian = fake(tmp_path / "debian", "promtool", "promtool, version 2.42.0+ds")
    monkeypatch.setenv("OBS_IAC_TOOLS_DIR", str(tools))
    monkeypatch.setenv("PATH", f"{ours.parent}:{debian.parent}")
    assert next(iter(toolchain._floor_candidates("promtool"))) == debian
