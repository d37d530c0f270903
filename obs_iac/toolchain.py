"""Finds the real programs obs-iac proves its output against, in the two stacks it supports.

``floor`` is the oldest release obs-iac promises to load its output: Debian's Prometheus 2.x
(>= 2.42) and Alertmanager (>= 0.25), found on PATH or in /usr/bin (``apt-get install
prometheus prometheus-alertmanager``). ``current`` is the releases pinned in
tools/versions.toml, built by ``make tools`` into ``$OBS_IAC_TOOLS_DIR/bin`` (default
``~/.cache/obs-iac/tools/bin``), and each must report exactly its pinned release, so a
stale build is caught rather than tested against. The OpenTelemetry Collector is not in
Debian: both stacks use the pinned build.

A tool that is missing or of the wrong version is a user error (exit 2) naming the tool,
the version found and ``make tools``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Literal

from obs_iac.diagnostics import Diagnostic, InputError, Severity

Stack = Literal["floor", "current"]
STACKS: tuple[Stack, ...] = ("floor", "current")

# The programs obs-iac knows, and the pin table (tools/versions.toml) each comes from.
TOOLS: dict[str, str] = {
    "prometheus": "prometheus",
    "promtool": "prometheus",
    "alertmanager": "alertmanager",
    "amtool": "alertmanager",
    "otelcol": "otelcol",
}
# Debian installs the Alertmanager server as prometheus-alertmanager.
_FLOOR_NAMES: dict[str, tuple[str, ...]] = {
    "prometheus": ("prometheus",),
    "promtool": ("promtool",),
    "alertmanager": ("prometheus-alertmanager", "alertmanager"),
    "amtool": ("amtool",),
}
_ALIASES = {"prometheus-alertmanager": "alertmanager"}
# The floor: the first releases obs-iac's output is promised to load in (README,
# "Compatibility"); Prometheus 3 is not the floor, whatever it is >= to.
_FLOOR_MIN: dict[str, tuple[tuple[int, int], int | None]] = {
    "prometheus": ((2, 42), 2),
    "promtool": ((2, 42), 2),
    "alertmanager": ((0, 25), 0),
    "amtool": ((0, 25), 0),
}
FLOOR_INSTALL = "apt-get install prometheus prometheus-alertmanager"
_VERSION = re.compile(r"version[ :]+v?(\d+\.\d+\.\d+)")
_REPO_PINS = Path(__file__).resolve().parent.parent / "tools" / "versions.toml"


@dataclass(frozen=True, slots=True)
class Tool:
    """A program found and checked: what to run, and the release it reported."""

    name: str
    path: Path
    version: str


class ToolError(InputError):
    """A tool is missing or of the wrong version (exit 2, like any user error)."""

    def __init__(self, name: str, stack: Stack, found: str | None, wanted: str, hint: str) -> None:
        self.name = name
        self.stack = stack
        self.found = found
        self.wanted = wanted
        message = (
            f"{name} ({stack} stack): {found or 'not found'}; obs-iac needs {wanted}; "
            "run `make tools`"
        )
        super().__init__([Diagnostic("tools/unavailable", Severity.ERROR, message, hint=hint)])


def tools_dir() -> Path:
    """Where ``make tools`` installs (OBS_IAC_TOOLS_DIR overrides the default)."""
    env = os.environ.get("OBS_IAC_TOOLS_DIR")
    return Path(env) if env else Path.home() / ".cache" / "obs-iac" / "tools"


def bin_dir() -> Path:
    return tools_dir() / "bin"


def pinned_releases() -> dict[str, str]:
    """Tool name -> the release tools/versions.toml pins for it.

    Read from the repository's pin file; outside a checkout (an installed obs-iac), from
    the copy ``make tools`` leaves in the tools dir.
    """
    for path in (_REPO_PINS, tools_dir() / "versions.toml"):
        try:
            data = path.read_bytes()
        except OSError:
            continue
        return _releases(data)
    return {}


@lru_cache(maxsize=8)
def _releases(data: bytes) -> dict[str, str]:
    pins = tomllib.loads(data.decode("utf-8"))
    out: dict[str, str] = {}
    for table in pins.values():
        for binary in table.get("binaries", ()):
            out[str(binary)] = str(table["release"])
    return out


def find_tool(name: str, stack: Stack) -> Tool:
    """The ``stack`` release of ``name`` (prometheus, promtool, alertmanager, amtool,
    otelcol), checked by running ``name --version``; ToolError when it is missing or
    of the wrong version."""
    name = _ALIASES.get(name, name)
    if name not in TOOLS:
        raise ValueError(f"unknown tool {name!r}; known: {', '.join(sorted(TOOLS))}")
    if stack == "current" or name not in _FLOOR_NAMES:
        return _find_current(name, stack)
    if stack == "floor":
        return _find_floor(name)
    raise ValueError(f"unknown stack {stack!r}; known: floor, current")


def _find_current(name: str, stack: Stack) -> Tool:
    wanted = pinned_releases().get(name)
    hint = f"`make tools` builds the pinned releases into {bin_dir()}"
    if wanted is None:
        raise ToolError(name, stack, None, "the release pinned in tools/versions.toml", hint)
    path = bin_dir() / name
    if not os.access(path, os.X_OK):
        raise ToolError(name, stack, None, wanted, hint)
    found = probe_version(path)
    if found != wanted:
        raise ToolError(name, stack, _found(path, found), wanted, hint)
    return Tool(name, path, found)


def _find_floor(name: str) -> Tool:
    (minimum, major) = _FLOOR_MIN[name]
    wanted = f"{major}.x >= {minimum[0]}.{minimum[1]}"
    hint = f"Debian's floor: `{FLOOR_INSTALL}` (as root); `make tools` checks for them too"
    first_bad: tuple[Path, str | None] | None = None
    for path in _floor_candidates(name):
        found = probe_version(path)
        if found is not None and _fits_floor(found, minimum, major):
            return Tool(name, path, found)
        first_bad = first_bad or (path, found)
    if first_bad is None:
        raise ToolError(name, "floor", None, wanted, hint)
    raise ToolError(name, "floor", _found(*first_bad), wanted, hint)


def _floor_candidates(name: str) -> Iterator[Path]:
    """Debian's binaries on PATH, then in /usr/bin; never ``make tools``' bin dir, whose
    builds are the current stack even when a user put it on PATH."""
    ours = _real(bin_dir())
    seen: set[Path] = set()
    dirs = [d for d in os.environ.get("PATH", "").split(os.pathsep) if d] + ["/usr/bin"]
    for binary in _FLOOR_NAMES[name]:
        for directory in dirs:
            if _real(Path(directory)) == ours:
                continue
            found = shutil.which(binary, path=directory)
            if found is None:
                continue
            path = Path(found)
            key = _real(path)
            if key not in seen:
                seen.add(key)
                yield path


def _real(path: Path) -> Path:
    try:
        return path.resolve()
    except OSError:
        return path


def _fits_floor(version: str, minimum: tuple[int, int], major: int | None) -> bool:
    parts = tuple(int(p) for p in version.split("."))
    return (major is None or parts[0] == major) and parts[:2] >= minimum


def _found(path: Path, version: str | None) -> str:
    return f"{path} reports version {version}" if version else f"{path} reports no version"


def probe_version(path: Path) -> str | None:
    """The X.Y.Z ``path --version`` prints (stdout or stderr), or None."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return _probe(str(path), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=64)
def _probe(path: str, mtime_ns: int, size: int) -> str | None:
    # mtime and size are in the key so a rebuilt binary is probed again.
    del mtime_ns, size
    try:
        proc = subprocess.run(
            [path, "--version"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = _VERSION.search(proc.stdout + "\n" + proc.stderr)
    return match.group(1) if match else None


def main() -> int:
    """``python -m obs_iac.toolchain``: every tool of both stacks; 2 if one is unusable."""
    status = 0
    for stack in STACKS:
        for name in TOOLS:
            if stack == "floor" and name not in _FLOOR_NAMES:
                continue  # one build serves both stacks; listed under current
            try:
                tool = find_tool(name, stack)
            except ToolError as exc:
                print(f"{stack:7} {name:12} ERROR {exc}", file=sys.stderr)
                status = 2
            else:
                print(f"{stack:7} {name:12} {tool.version:10} {tool.path}")
    return status


if __name__ == "__main__":
    sys.exit(main())
