"""require_tool: a missing tool fails under CI and skips elsewhere, in either stack."""

from __future__ import annotations

from pathlib import Path

import pytest

from obs_iac.toolchain import Stack, Tool, ToolError
from tests import tools


def test_found_generic_tool_returns_its_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tools.shutil, "which", lambda name: f"/opt/bin/{name}")
    assert tools.require_tool("git") == "/opt/bin/git"


@pytest.mark.parametrize("stack", ["floor", "current"])
def test_found_toolchain_tool_asks_for_its_stack(
    monkeypatch: pytest.MonkeyPatch, stack: Stack
) -> None:
    asked: list[tuple[str, str]] = []

    def find(name: str, wanted: Stack) -> Tool:
        asked.append((name, wanted))
        return Tool(name, Path(f"/{wanted}/{name}"), "1.2.3")

    monkeypatch.setattr(tools, "find_tool", find)
    assert tools.require_tool("promtool", stack) == f"/{stack}/promtool"
    assert asked == [("promtool", stack)]


def test_default_stack_is_the_floor(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tools, "find_tool", lambda n, s: Tool(n, Path(f"/{s}/{n}"), "2.42.0"))
    assert tools.require_tool("amtool") == "/floor/amtool"


def _unavailable(name: str, stack: Stack) -> Tool:
    raise ToolError(name, stack, None, "3.16.0", "hint")


@pytest.mark.parametrize(("ci", "outcome"), [("true", "fail"), ("", "skip"), ("1", "skip")])
def test_missing_toolchain_tool(monkeypatch: pytest.MonkeyPatch, ci: str, outcome: str) -> None:
    monkeypatch.setattr(tools, "find_tool", _unavailable)
    monkeypatch.setenv("CI", ci)
    expected = pytest.fail.Exception if outcome == "fail" else pytest.skip.Exception
    with pytest.raises(expected, match=r"promtool \(current stack\): not found.*make tools"):
        tools.require_tool("promtool", "current")


@pytest.mark.parametrize(("ci", "outcome"), [("true", "fail"), ("", "skip")])
def test_missing_generic_tool(monkeypatch: pytest.MonkeyPatch, ci: str, outcome: str) -> None:
    monkeypatch.setattr(tools.shutil, "which", lambda name: None)
    monkeypatch.setenv("CI", ci)
    expected = pytest.fail.Exception if outcome == "fail" else pytest.skip.Exception
    with pytest.raises(expected, match="git is not installed"):
        tools.require_tool("git")
