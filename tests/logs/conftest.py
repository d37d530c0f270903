from __future__ import annotations

import pytest

from obs_iac.pipeline import Render, open_workspace, render
from tests.logs.logs_helpers import ROOT


@pytest.fixture(scope="session")
def rendered() -> Render:
    """The example repository, rendered in memory (nothing is written)."""
    return render(open_workspace(ROOT))
