"""DCGM: every field a query reads must be collected by the exporter."""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

from obs_iac.catalog import dcgm
from obs_iac.diagnostics import Diagnostic, Severity
from obs_iac.lint.checks import CorpusRule
from obs_iac.lint.engine import Corpus
from obs_iac.plugins import LintScope


class FieldNotCollected(CorpusRule):
    code: ClassVar[str] = "dcgm/field-not-collected"
    # A service's queries are compared with that service's own collector set. Queries
    # of no one service (the fleet overview, linted with the fleet shard, which has no
    # collector set) would be skipped; the overview reads recorded series only.
    scope: ClassVar[LintScope] = "service"
    default_severity: ClassVar[Severity] = Severity.ERROR
    description: ClassVar[str] = (
        "A query reads a DCGM field the service's exporter does not collect."
    )

    def run(self, corpus: Corpus) -> Iterator[Diagnostic]:
        if not corpus.collected:
            return  # no plan, no collector sets to compare with
        catalog = dcgm.catalog()
        for unit, rule in corpus.rules():
            analysis = corpus.analysis(rule.expr)
            if analysis is None:
                continue
            collected = corpus.collected.get(unit.service or "*", frozenset())
            for metric in analysis.metrics:
                if metric not in catalog or metric in collected:
                    continue
                whose = f"service {unit.service}" if unit.service else "any service"
                yield corpus.diag(
                    self.code,
                    self.default_severity,
                    f"{rule.name}: reads {metric}, but the dcgm-exporter collector set of "
                    f"{whose} does not collect it, so the query returns nothing",
                    unit,
                    rule,
                    hint=f"add {metric!r} to gpu.extra_fields of the service blueprint",
                    at_expr=True,
                )
