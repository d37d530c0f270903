"""One type for everything a user sees: findings, input errors, plugin failures.

A diagnostic reads like a compiler message: where (file:line:column), what (a stable
``area/name`` code and one sentence), and what to do next (``help:``).
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path


class Severity(enum.IntEnum):
    INFO = 0
    WARNING = 1
    ERROR = 2

    @property
    def label(self) -> str:
        return self.name.lower()


class ExitCode(enum.IntEnum):
    OK = 0
    FINDINGS = 1
    BAD_INPUT = 2
    INTERNAL = 3
    # `obs-iac lint`: a Prometheus of the declared version would refuse to load a file
    # (syntax, structure, not YAML, not a rule file), told apart from findings (1).
    REFUSED = 4


@dataclass(frozen=True, slots=True)
class Location:
    file: str
    line: int | None = None
    column: int | None = None

    def __str__(self) -> str:
        text = self.file
        if self.line is not None:
            text += f":{self.line}"
            if self.column is not None:
                text += f":{self.column}"
        return text


@dataclass(frozen=True, slots=True)
class Diagnostic:
    code: str
    severity: Severity
    message: str
    hint: str | None = None
    location: Location | None = None
    object_path: tuple[str, ...] = ()
    origin: str = "obs-iac"
    related: tuple[Location, ...] = field(default=())

    def total_key(self) -> tuple[tuple[str, int, int, int, str, str], str]:
        """sort_key() made total: diagnostics that tie on it (same place, code and
        message) still sort the same way in every process, whatever the hash seed."""
        return (self.sort_key(), repr(self))

    def sort_key(self) -> tuple[str, int, int, int, str, str]:
        loc = self.location
        return (
            loc.file if loc else "",
            (loc.line or 0) if loc else 0,
            (loc.column or 0) if loc else 0,
            -int(self.severity),
            self.code,
            self.message,
        )

    def to_json(self) -> dict[str, object]:
        return {
            "code": self.code,
            "severity": self.severity.label,
            "message": self.message,
            "hint": self.hint,
            "location": None
            if self.location is None
            else {
                "file": self.location.file,
                "line": self.location.line,
                "column": self.location.column,
            },
            "related": [str(r) for r in self.related],
            "object_path": list(self.object_path),
            "origin": self.origin,
        }


class ObsIacError(Exception):
    """Raised to stop a stage; carries every diagnostic the stage collected."""

    exit_code: ExitCode = ExitCode.BAD_INPUT

    def __init__(self, diagnostics: Sequence[Diagnostic]) -> None:
        self.diagnostics = tuple(sorted(diagnostics, key=Diagnostic.total_key))
        super().__init__("; ".join(d.message for d in self.diagnostics))


class InputError(ObsIacError):
    """The user's blueprints, config or command line are wrong (exit 2)."""

    exit_code = ExitCode.BAD_INPUT


class PluginError(ObsIacError):
    """A plugin could not be loaded or misbehaved (exit 3)."""

    exit_code = ExitCode.INTERNAL


def has_errors(diagnostics: Iterable[Diagnostic]) -> bool:
    return any(d.severity is Severity.ERROR for d in diagnostics)


class SourceCache:
    """Reads source lines once, for carets under the offending line."""

    def __init__(self, root: Path | None = None) -> None:
        self._root = root
        self._lines: dict[str, list[str] | None] = {}

    def line(self, file: str, line: int) -> str | None:
        if file not in self._lines:
            path = Path(file)
            if not path.is_absolute() and self._root is not None:
                path = self._root / path
            try:
                self._lines[file] = path.read_text(encoding="utf-8").splitlines()
            except (OSError, UnicodeDecodeError):
                self._lines[file] = None
        lines = self._lines[file]
        if lines is None or not 1 <= line <= len(lines):
            return None
        return lines[line - 1]


def format_text(
    diagnostics: Iterable[Diagnostic], sources: SourceCache | None = None, color: bool = False
) -> str:
    sources = sources or SourceCache()
    out: list[str] = []
    colors = {Severity.ERROR: "31", Severity.WARNING: "33", Severity.INFO: "36"}
    for diag in diagnostics:
        sev = diag.severity.label
        if color:
            sev = f"\x1b[1;{colors[diag.severity]}m{sev}\x1b[0m"
        where = f"{diag.location}: " if diag.location else ""
        out.append(f"{where}{sev}[{diag.code}]: {diag.message}")
        if diag.object_path:
            out.append(f"  in: {' > '.join(diag.object_path)}")
        loc = diag.location
        if loc is not None and loc.line is not None:
            text = sources.line(loc.file, loc.line)
            if text is not None:
                gutter = str(loc.line)
                out.append(f"  {gutter} | {text}")
                stripped = len(text) - len(text.lstrip())
                col = (loc.column - 1) if loc.column else stripped
                width = max(1, len(text.rstrip()) - col) if not loc.column else 1
                out.append(f"  {' ' * len(gutter)} | {' ' * col}{'^' * width}")
        for rel in diag.related:
            out.append(f"  note: also at {rel}")
        if diag.hint:
            out.append(f"  help: {diag.hint}")
    return "\n".join(out)


def format_json(diagnostics: Iterable[Diagnostic]) -> str:
    payload = {"version": 1, "diagnostics": [d.to_json() for d in diagnostics]}
    return json.dumps(payload, indent=2, sort_keys=True)


def format_github(diagnostics: Iterable[Diagnostic]) -> str:
    """GitHub workflow commands, so findings show up as PR annotations."""
    out = []
    kinds = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}
    for diag in diagnostics:
        params = []
        if diag.location:
            params.append(f"file={diag.location.file}")
            if diag.location.line:
                params.append(f"line={diag.location.line}")
            if diag.location.column:
                params.append(f"col={diag.location.column}")
        params.append(f"title={diag.code}")
        msg = diag.message + (f" (help: {diag.hint})" if diag.hint else "")
        msg = msg.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
        out.append(f"::{kinds[diag.severity]} {','.join(params)}::{msg}")
    return "\n".join(out)
