"""`obs-iac lint`: the plan and everything generated, or the rule files given."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, replace
from pathlib import Path

from obs_iac.diagnostics import Diagnostic, ExitCode, Location, Severity
from obs_iac.lint.engine import LintInputs
from obs_iac.lint.rulefile import RuleFile, read_rule_file

RULE_SUFFIXES = (".yml", ".yaml")
# Errors that mean Prometheus (promtool check rules, or the rule manager on reload) would
# refuse the file as a whole, as opposed to a rule that loads but is wrong.
REFUSED_CODES = frozenset(
    {
        "input/yaml",
        "input/not-rule-file",
        "rules/structure",
        "rules/duplicate-group",
        "promql/syntax",
    }
)


@dataclass(frozen=True)
class LintResult:
    diagnostics: tuple[Diagnostic, ...]
    unreadable: bool
    files: int

    def exit_code(self, fail_on: Severity) -> ExitCode:
        if self.unreadable:
            return ExitCode.BAD_INPUT
        if any(d.severity is Severity.ERROR and d.code in REFUSED_CODES for d in self.diagnostics):
            return ExitCode.REFUSED
        if any(d.severity >= fail_on for d in self.diagnostics):
            return ExitCode.FINDINGS
        return ExitCode.OK


def _display(path: Path) -> str:
    """The path as the user wrote it, or relative to the working folder if under it."""
    if not path.is_absolute():
        return str(path)
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def expand_paths(paths: tuple[Path, ...]) -> tuple[list[Path], list[Diagnostic]]:
    files: list[Path] = []
    problems: list[Diagnostic] = []
    for path in paths:
        if path.is_dir():
            found = sorted(
                p
                for p in path.rglob("*")
                if p.is_file()
                and p.suffix in RULE_SUFFIXES
                and not any(part.startswith(".") for part in p.relative_to(path).parts)
            )
            files.extend(found)
        elif path.is_file():
            files.append(path)
        else:
            problems.append(
                Diagnostic(
                    "input/missing",
                    Severity.ERROR,
                    f"{path}: no such file or directory",
                    hint="pass rule files or folders that hold them",
                    location=Location(str(path)),
                )
            )
    return files, problems


def _skip_foreign(rf: RuleFile) -> None:
    """A folder of manifests holds more than rule files: one found by the walk that is
    not a rule file is skipped with a note, not failed (named on the command line, it is
    refused, as promtool refuses it)."""
    foreign = [p for p in rf.refused if p.code == "input/not-rule-file"]
    for p in foreign:
        rf.refused.remove(p)
        rf.notes.append(
            replace(p, message=p.message.replace("not a rule file", "skipped, not a rule file"))
        )


def _input_diagnostics(rf: RuleFile) -> list[Diagnostic]:
    channels = (
        (rf.unreadable, Severity.ERROR),
        (rf.refused, Severity.ERROR),
        (rf.notes, Severity.INFO),
    )
    return [
        Diagnostic(
            p.code,
            severity,
            p.message,
            hint=p.hint,
            location=Location(rf.path, p.line, p.column),
            origin="obs-iac lint",
        )
        for problems, severity in channels
        for p in problems
    ]


def run_lint(root: Path, paths: tuple[Path, ...], today: dt.date | None = None) -> LintResult:
    from obs_iac.pipeline import build_plan, generate, open_workspace, verify
    from obs_iac.plan.model import CollectorSet, MetricSpec, Plan
    from obs_iac.plugins import discover

    ws = open_workspace(root)
    plugins = discover(ws.config)
    if not paths:
        plan = build_plan(ws, plugins)
        artifacts = generate(ws, plan, plugins)
        findings = verify(ws, plan, artifacts, plugins, LintInputs(today=today))
        return LintResult(findings, False, len(plan.rule_groups))
    files, problems = expand_paths(paths)
    parsed = [read_rule_file(f, _display(f), ws.config.prometheus_min_version) for f in files]
    unreadable = bool(problems) or any(rf.unreadable for rf in parsed)
    named = {f for f in paths if not f.is_dir()}
    for path, rf in zip(files, parsed, strict=True):
        if path not in named:
            _skip_foreign(rf)
        problems.extend(_input_diagnostics(rf))
    metrics: tuple[MetricSpec, ...] = ()
    collectors: tuple[CollectorSet, ...] = ()
    if (ws.root / ws.config.blueprints).is_dir():
        # Inside a repository: its plan gives the catalogue and the collector sets.
        full = build_plan(ws, plugins)
        metrics, collectors = full.metrics, full.collector_sets
    # Only what describes the files' world: checks over the plan's own objects (its
    # rules, inhibit edges, dashboards) belong to `obs-iac lint` without paths.
    plan = Plan(
        naming=ws.config.naming,
        evaluation_interval=ws.config.evaluation_interval,
        services=(),
        metrics=metrics,
        rule_groups=(),
        relabel_sets=(),
        collector_sets=collectors,
    )
    inputs = LintInputs(files=tuple(parsed), include_plan=False, today=today)
    findings = verify(ws, plan, (), plugins, inputs)
    everything = tuple(sorted([*problems, *findings], key=Diagnostic.sort_key))
    return LintResult(everything, unreadable, len(files))
