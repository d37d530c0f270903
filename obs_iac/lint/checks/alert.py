"""Alert hygiene: what on-call needs, and `for` that can take effect."""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

from obs_iac.diagnostics import Diagnostic, Severity
from obs_iac.lint.checks import CorpusRule
from obs_iac.lint.engine import Corpus
from obs_iac.lint.rulefile import parse_duration
from obs_iac.plugins import LintScope

REQUIRED_LABELS = ("severity",)
REQUIRED_ANNOTATIONS = ("summary", "runbook_url")


class RequiredFields(CorpusRule):
    code: ClassVar[str] = "alert/required-fields"
    # Reads only its own rule groups and dashboards; the catalogue is the fleet's in
    # every shard.
    scope: ClassVar[LintScope] = "service"
    default_severity: ClassVar[Severity] = Severity.WARNING
    description: ClassVar[str] = "An alert without severity, summary or runbook_url."

    def run(self, corpus: Corpus) -> Iterator[Diagnostic]:
        for unit, rule in corpus.rules():
            if rule.kind != "alert":
                continue
            missing = [f"label {n!r}" for n in REQUIRED_LABELS if not rule.labels.get(n)]
            missing += [
                f"annotation {n!r}" for n in REQUIRED_ANNOTATIONS if not rule.annotations.get(n)
            ]
            if missing:
                yield corpus.diag(
                    self.code,
                    self.default_severity,
                    f"alert {rule.name} has no {', '.join(missing)}",
                    unit,
                    rule,
                    hint="routing needs `severity`; the page needs `summary` and a "
                    "`runbook_url` on-call can open",
                )


class ForShorterThanInterval(CorpusRule):
    code: ClassVar[str] = "alert/for-shorter-than-interval"
    # Reads only its own rule groups and dashboards; the catalogue is the fleet's in
    # every shard.
    scope: ClassVar[LintScope] = "service"
    default_severity: ClassVar[Severity] = Severity.WARNING
    description: ClassVar[str] = "An alert `for` shorter than the group's evaluation interval."

    def run(self, corpus: Corpus) -> Iterator[Diagnostic]:
        default = parse_duration(corpus.evaluation_interval) or 60.0
        for unit, rule in corpus.rules():
            if rule.kind != "alert" or not rule.for_seconds:
                continue
            interval = unit.group.interval_seconds or default
            if rule.for_seconds < interval:
                shown = unit.group.interval or corpus.evaluation_interval
                yield corpus.diag(
                    self.code,
                    self.default_severity,
                    f"alert {rule.name}: for: {rule.for_text} is shorter than the evaluation "
                    f"interval {shown}, so it waits one evaluation, not {rule.for_text}",
                    unit,
                    rule,
                    hint=f"use for: {shown} or more, or drop `for`",
                )
