"""Real tools for tests: fail (never skip) under CI when one is missing."""

from __future__ import annotations

import os
import shutil

import pytest


def require_tool(name: str) -> str:
    path = shutil.which(name)
    if path:
        return path
    if os.environ.get("CI") == "true":
        pytest.fail(f"{name} is not installed; .ci/run must install it", pytrace=False)
    pytest.skip(f"{name} is not installed")
    raise AssertionError("unreachable")
