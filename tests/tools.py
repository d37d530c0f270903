"""Real tools (promtool, amtool) for the tests that need them."""

from __future__ import annotations

import os
import shutil

import pytest


def require_tool(name: str) -> str:
    """The path of ``name``; a missing tool fails the test under CI and skips it elsewhere."""
    path = shutil.which(name)
    if path is not None:
        return path
    message = f"{name} is not installed (apt-get install -y prometheus prometheus-alertmanager)"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)
