"""Real tools (promtool, amtool, prometheus, alertmanager, otelcol, git, ...) for the tests
that need them.

The programs obs-iac emits configuration for come in two stacks (obs_iac.toolchain):
``floor`` (Debian's Prometheus 2.42 / Alertmanager 0.25) and ``current`` (the releases
pinned in tools/versions.toml, built by ``make tools``). A missing tool, or one of the
wrong version, fails the test under CI=true and skips it elsewhere.
"""

from __future__ import annotations

import os
import shutil
from typing import NoReturn

import pytest

from obs_iac.toolchain import TOOLS, Stack, ToolError, bin_dir, find_tool


def require_tool(name: str, stack: Stack = "floor") -> str:
    """The path of ``name`` in ``stack`` (ignored for tools outside obs_iac.toolchain,
    such as git or make, which are looked up on PATH)."""
    if name in TOOLS or name == "prometheus-alertmanager":
        try:
            return str(find_tool(name, stack).path)
        except ToolError as exc:
            _missing(str(exc))
    path = shutil.which(name)
    if path is not None:
        return path
    _missing(f"{name} is not installed")


def _missing(message: str) -> NoReturn:
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


def tools_bin() -> str:
    """Where `make tools` puts the programs built from tools/go/<name>/."""
    return str(bin_dir())


def require_built_tool(name: str) -> str:
    """A program built from ``tools/go/<name>/`` (by `make tools`, or ``go build -o
    <tools dir>/bin/<name> ./tools/go/<name>``); fails under CI, skips elsewhere."""
    path = os.path.join(tools_bin(), name)
    if os.access(path, os.X_OK):
        return path
    _missing(f"{path} is missing: build tools/go/{name} (make tools)")
