"""Provisional stand-in for the `tools` branch's toolchain module: where each real program
lives for a stack ("floor": Debian's Prometheus 2.42 / Alertmanager 0.25; "current": the
builds of `make tools`), and its version checked. Replaced by the `tools` branch's copy
when that lands; the API (find_tool, Tool, ToolError) is the one agreed with it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from obs_iac.diagnostics import Diagnostic, InputError, Severity

Stack = Literal["floor", "current"]

# Floor names are Debian's package binaries; current names are what `make tools` installs.
_FLOOR = {
    "prometheus": ("prometheus", "2.42"),
    "promtool": ("promtool", "2.42"),
    "alertmanager": ("prometheus-alertmanager", "0.25"),
    "amtool": ("amtool", "0.25"),
}
_CURRENT = {
    "prometheus": ("prometheus", "3."),
    "promtool": ("promtool", "3."),
    "alertmanager": ("alertmanager", "0.35"),
    "amtool": ("amtool", "0.35"),
    "otelcol": ("otelcol", "0."),
}


def tools_dir() -> Path:
    default = Path.home() / ".cache" / "obs-iac" / "tools"
    return Path(os.environ.get("OBS_IAC_TOOLS_DIR") or default)


@dataclass(frozen=True, slots=True)
class Tool:
    name: str
    path: str
    version: str


class ToolError(InputError):
    """A program obs-iac runs is missing or of the wrong version (a user error: exit 2)."""

    def __init__(self, name: str, found: str, expected: str) -> None:
        super().__init__(
            [
                Diagnostic(
                    code="tools/missing" if found == "not found" else "tools/version",
                    severity=Severity.ERROR,
                    message=f"{name}: found {found}, need {expected}",
                    hint="run `make tools` (builds the current releases into "
                    f"{tools_dir()}/bin); the floor tools come from Debian: "
                    "apt-get install prometheus prometheus-alertmanager",
                )
            ]
        )
        self.tool, self.found, self.expected = name, found, expected


_VERSION = re.compile(r"version\s+v?(\d+\.\d+\.\d+)")


def tool_version(path: str) -> str:
    try:
        out = subprocess.run(
            [path, "--version"], capture_output=True, text=True, timeout=20, check=False
        )
    except OSError:
        return "unrunnable"
    match = _VERSION.search(out.stdout + out.stderr)
    return match.group(1) if match else "unknown version"


def find_tool(name: str, stack: Stack) -> Tool:
    table = _FLOOR if stack == "floor" else _CURRENT
    if name not in table:
        raise ToolError(name, "not found", f"a tool obs-iac knows ({', '.join(table)})")
    binary, prefix = table[name]
    if stack == "floor":
        path = shutil.which(binary)
    else:
        candidate = tools_dir() / "bin" / binary
        path = str(candidate) if candidate.is_file() and os.access(candidate, os.X_OK) else None
    expected = f"{name} {prefix.rstrip('.')}{'.x' if prefix.endswith('.') else ''} ({stack})"
    if path is None:
        raise ToolError(name, "not found", expected)
    version = tool_version(path)
    if not version.startswith(prefix):
        raise ToolError(name, f"{path} version {version}", expected)
    return Tool(name=name, path=path, version=version)
