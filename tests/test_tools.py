"""require_tool: a missing tool fails under CI and skips elsewhere."""

from __future__ import annotations

import pytest

from tests import tools


def test_found_tool_returns_its_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tools.shutil, "which", lambda name: f"/opt/bin/{name}")
    assert tools.require_tool("promtool") == "/opt/bin/promtool"


@pytest.mark.parametrize(("ci", "outcome"), [("true", "fail"), ("", "skip"), ("1", "skip")])
def test_missing_tool(monkeypatch: pytest.MonkeyPatch, ci: str, outcome: str) -> None:
    monkeypatch.setattr(tools.shutil, "which", lambda name: None)
    monkeypatch.setenv("CI", ci)
    expected = pytest.fail.Exception if outcome == "fail" else pytest.skip.Exception
    with pytest.raises(expected, match="promtool is not installed"):
        tools.require_tool("promtool")
