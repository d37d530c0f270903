from __future__ import annotations

import pytest
from logs_helpers import ROOT

from obs_iac.pipeline import Render, open_workspace, render


@pytest.fixture(scope="session")
def rendered() -> Render:
    """The example repository, rendered in memory (nothing is written)."""
    return render(open_workspace(ROOT))
