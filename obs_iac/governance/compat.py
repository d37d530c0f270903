"""The compatibility matrix: which component versions a service's stack needs.

A row says: when ``component`` (in ``versions``) is in use, ``requires`` must be in
``requires_versions``. The built-in rows ship in ``obs_iac/catalog/compatibility.csv``; a
GitOps repository adds its own with a CSV of the same columns. Ranges are pip specifiers.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Literal

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from obs_iac.blueprint.models import GPU_FAMILIES
from obs_iac.diagnostics import Diagnostic, InputError, Location, Severity

MATRIX_FORMAT_VERSION = 1
BUILTIN_FILE = "obs_iac/catalog/compatibility.csv"
COLUMNS = ("component", "versions", "requires", "requires_versions", "reason", "source")

# Components with a version a service's stack declares (blueprint, or repo-wide default).
VERSIONED = (
    "driver",
    "dcgm",
    "dcgm-exporter",
    "ebpf-collector",
    "otel-collector",
    "prometheus",
    "alertmanager",
)

# Features the plan or the rendered output can use, detected by governance.stack.
FEATURES: Mapping[str, str] = {
    "dcgm-4.6-field-names": "a collector set names a DCGM field first defined in DCGM 4.6",
    "host-label-Hostname": "relabelling reads dcgm-exporter's `Hostname` label",
    "host-label-hostname": "relabelling reads dcgm-exporter's `hostname` label",
    "inhibit-rule-name": "the Alertmanager configuration names its inhibit rules",
    "rule-group-labels": "a Prometheus rule group carries group-level labels",
    "rule-query-offset": "a Prometheus rule group sets query_offset",
    "keep-firing-for": "an alerting rule sets keep_firing_for",
    "otlp-receiver": "the OTel Collector exports spanmetrics to Prometheus's OTLP receiver",
    "otlp-promote-resource-attributes": "prometheus.yml's otlp: block promotes resource "
    "attributes to labels",
    "utf8-label-names": "the repository spells canonical labels with dots (naming = utf8)",
}


def known_components() -> tuple[str, ...]:
    return (
        *VERSIONED,
        *(f"gpu:{family}" for family in GPU_FAMILIES),
        *(f"feature:{name}" for name in sorted(FEATURES)),
    )


@dataclass(frozen=True, slots=True)
class CompatRow:
    component: str
    versions: str
    requires: str
    requires_versions: str
    reason: str
    source: str
    location: Location

    @property
    def spec(self) -> SpecifierSet:
        return SpecifierSet(self.versions)

    @property
    def requires_spec(self) -> SpecifierSet:
        return SpecifierSet(self.requires_versions)

    def describe(self) -> str:
        when = self.component + (f" {self.versions}" if self.versions else "")
        return f"{when} requires {self.requires} {self.requires_versions}"


def parse_version(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None


def _spec_problem(text: str) -> str | None:
    try:
        SpecifierSet(text)
    except InvalidSpecifier as exc:
        return str(exc)
    return None


def _row_problems(row: dict[str, str]) -> list[tuple[str, str]]:
    """(message, hint) for each thing wrong with one row."""
    out: list[tuple[str, str]] = []
    component, requires = row["component"], row["requires"]
    known = known_components()
    if component not in known:
        out.append(
            (
                f"unknown component {component!r}",
                "components: " + ", ".join(VERSIONED) + ", gpu:<FAMILY> (e.g. gpu:A100), "
                "feature:<name> (" + ", ".join(sorted(FEATURES)) + ")",
            )
        )
    elif not component.startswith(("gpu:", "feature:")):
        if not row["versions"]:
            out.append(
                (
                    f"component {component!r} needs a version range",
                    "give a pip specifier such as '>=535.126.02' (an empty range is only "
                    "allowed for gpu: and feature: components)",
                )
            )
    elif row["versions"]:
        out.append(
            (
                f"{component!r} has no version; its range must be empty",
                "leave the versions column empty for gpu: and feature: rows",
            )
        )
    if requires not in VERSIONED:
        out.append(
            (
                f"unknown required component {requires!r}",
                "a row can require only a versioned component: " + ", ".join(VERSIONED),
            )
        )
    for column in ("versions", "requires_versions"):
        problem = _spec_problem(row[column])
        if problem:
            out.append(
                (
                    f"{column} {row[column]!r} is not a version range: {problem}",
                    "write pip specifiers, e.g. '>=2.8.0' or '>=4.5,<4.7'",
                )
            )
    if not row["requires_versions"]:
        out.append(("requires_versions is empty", "say which versions are required"))
    if not row["reason"]:
        out.append(("reason is empty", "say in one sentence why the versions must match"))
    return out


def load_matrix(text: str, file: str) -> tuple[CompatRow, ...]:
    """Parses one matrix CSV; every problem becomes a diagnostic at file:line (exit 2)."""
    problems: list[Diagnostic] = []
    rows: list[CompatRow] = []
    header: list[str] | None = None
    header_line = 0
    for number, line in enumerate(text.splitlines(), start=1):
        if line.lstrip().startswith("#"):
            declared = re.search(r"format version (\d+)", line)
            if declared and int(declared.group(1)) != MATRIX_FORMAT_VERSION:
                problems.append(
                    _bad(
                        file,
                        number,
                        f"compatibility matrix format version {declared.group(1)} is not "
                        f"supported (this obs-iac reads version {MATRIX_FORMAT_VERSION})",
                        "upgrade obs-iac, or write the file in format version "
                        f"{MATRIX_FORMAT_VERSION} (docs/governance.md)",
                    )
                )
            continue
        if not line.strip():
            continue
        try:
            fields = next(csv.reader(io.StringIO(line)))
        except csv.Error as exc:
            problems.append(_bad(file, number, f"not a CSV record: {exc}", "quote the field"))
            continue
        fields = [f.strip() for f in fields]
        if header is None:
            header, header_line = fields, number
            missing = [c for c in COLUMNS if c not in header]
            unknown = [c for c in header if c not in COLUMNS]
            if missing or unknown:
                what = []
                if missing:
                    what.append("missing column(s) " + ", ".join(missing))
                if unknown:
                    what.append("unknown column(s) " + ", ".join(unknown))
                raise InputError(
                    [
                        _bad(
                            file,
                            number,
                            f"compatibility matrix header: {'; '.join(what)}",
                            "the first record must name the columns " + ",".join(COLUMNS),
                        )
                    ]
                )
            continue
        if len(fields) != len(header):
            problems.append(
                _bad(
                    file,
                    number,
                    f"{len(fields)} fields where the header (line {header_line}) has {len(header)}",
                    "quote fields that contain commas",
                )
            )
            continue
        record = dict(zip(header, fields, strict=True))
        row_problems = _row_problems(record)
        for message, hint in row_problems:
            problems.append(_bad(file, number, message, hint))
        if not row_problems:
            rows.append(
                CompatRow(
                    **{c: record[c] for c in COLUMNS},
                    location=Location(file, number),
                )
            )
    if header is None:
        problems.append(_bad(file, None, "no header record", "start with " + ",".join(COLUMNS)))
    if problems:
        raise InputError(problems)
    return tuple(rows)


def _bad(file: str, line: int | None, message: str, hint: str) -> Diagnostic:
    return Diagnostic(
        "compat/invalid",
        Severity.ERROR,
        message,
        hint=hint,
        location=Location(file, line),
        object_path=("compatibility",),
    )


@cache
def builtin_matrix() -> tuple[CompatRow, ...]:
    text = resources.files("obs_iac.catalog").joinpath("compatibility.csv").read_text("utf-8")
    return load_matrix(text, BUILTIN_FILE)


def load(root: Path, extra: str | None) -> tuple[CompatRow, ...]:
    """The built-in rows, then the repository's own (which add to them, never replace)."""
    rows = builtin_matrix()
    if extra is None:
        return rows
    path = root / extra
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(
            [
                Diagnostic(
                    "compat/missing",
                    Severity.ERROR,
                    f"the compatibility matrix {extra} cannot be read: {type(exc).__name__}",
                    hint="fix [tool.obs-iac.packs.governance] compatibility (a path relative "
                    "to the repository root)",
                    location=Location(extra),
                )
            ]
        ) from None
    return rows + load_matrix(text, extra)


Status = Literal["ok", "violated", "not-applicable"]


@dataclass(frozen=True, slots=True)
class Stack:
    """What one service runs: component versions, GPU family, and plan features in use."""

    service: str
    gpu_family: str
    versions: Mapping[str, str]
    version_origin: Mapping[str, str]
    features: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class Verdict:
    row: CompatRow
    status: Status
    detail: str


def _applies(row: CompatRow, stack: Stack) -> str | None:
    """Why the row applies to this stack, or None."""
    if row.component.startswith("gpu:"):
        family = row.component.split(":", 1)[1]
        return f"GPU family {family}" if stack.gpu_family == family else None
    if row.component.startswith("feature:"):
        name = row.component.split(":", 1)[1]
        evidence = stack.features.get(name)
        return f"feature {name} ({evidence})" if evidence else None
    declared = stack.versions.get(row.component)
    version = parse_version(declared) if declared else None
    if version is None or not row.spec.contains(version, prereleases=True):
        return None
    return f"{row.component} {declared}"


def evaluate(stack: Stack, rows: Sequence[CompatRow]) -> tuple[Verdict, ...]:
    out: list[Verdict] = []
    for row in rows:
        why = _applies(row, stack)
        if why is None:
            declared = stack.versions.get(row.component)
            idle = (
                f"{row.component} {declared} is outside {row.versions}"
                if declared
                else f"{row.component} not in use"
            )
            out.append(Verdict(row, "not-applicable", idle))
            continue
        declared = stack.versions.get(row.requires)
        if declared is None:
            out.append(Verdict(row, "not-applicable", f"{why}, but no {row.requires} is declared"))
            continue
        version = parse_version(declared)
        origin = stack.version_origin.get(row.requires, "")
        where = f" ({origin})" if origin else ""
        if version is not None and row.requires_spec.contains(version, prereleases=True):
            out.append(Verdict(row, "ok", f"{why}; {row.requires} {declared}{where}"))
        else:
            out.append(
                Verdict(
                    row,
                    "violated",
                    f"{why} requires {row.requires} {row.requires_versions}, but "
                    f"{row.requires} is {declared}{where}: {row.reason}",
                )
            )
    return tuple(out)
