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


def tools_bin() -> str:
    """Where `make tools` puts the programs built from tools/go/<name>/."""
    root = os.environ.get("OBS_IAC_TOOLS_DIR") or os.path.expanduser("~/.cache/obs-iac/tools")
    return os.path.join(root, "bin")


def require_built_tool(name: str) -> str:
    """A program built from ``tools/go/<name>/`` (by `make tools`, or ``go build -o
    <tools dir>/bin/<name> ./tools/go/<name>``); fails under CI, skips elsewhere."""
    path = os.path.join(tools_bin(), name)
    if os.access(path, os.X_OK):
        return path
    message = f"{path} is missing: build tools/go/{name} (make tools)"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)
