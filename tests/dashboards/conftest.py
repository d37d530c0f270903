"""Fixtures for the dashboard tests: one render of the repository's own examples."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from obs_iac.pipeline import Render, open_workspace, render

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(scope="session")
def rendered() -> Render:
    return render(open_workspace(REPO))


@pytest.fixture(scope="session")
def boards(rendered: Render) -> dict[str, dict]:
    return {
        a.data["uid"]: a.data
        for a in rendered.artifacts
        if a.path.startswith("grafana/dashboards/") and a.format == "json"
    }
