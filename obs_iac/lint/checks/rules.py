"""Rule file structure and duplicates."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

from obs_iac.diagnostics import Diagnostic, Location, Severity
from obs_iac.lint.checks import CorpusRule
from obs_iac.lint.engine import Corpus, Unit
from obs_iac.lint.rulefile import ParsedRule
from obs_iac.plan.model import Plan
from obs_iac.plugins import LintContext, LintScope
from obs_iac.promql.disjoint import outputs_disjoint


def _file_problems(corpus: Corpus, code: str) -> Iterator[Diagnostic]:
    for rf in corpus.files:
        for problem in rf.problems:
            if problem.code != code:
                continue
            yield Diagnostic(
                code,
                Severity.ERROR,
                problem.message,
                hint=problem.hint,
                location=Location(rf.path, problem.line, problem.column),
                origin=code,
            )


class Structure(CorpusRule):
    code: ClassVar[str] = "rules/structure"
    # Only hand-written files have structure problems; the plan's groups never do.
    scope: ClassVar[LintScope] = "service"
    default_severity: ClassVar[Severity] = Severity.ERROR
    description: ClassVar[str] = (
        "The rule file does not decode strictly as Prometheus rulefmt (unknown fields, "
        "wrong types, bad durations, label names, templates)."
    )

    def run(self, corpus: Corpus) -> Iterator[Diagnostic]:
        yield from _file_problems(corpus, self.code)


class Duplicate(CorpusRule):
    """promtool's `duplicate-rules` lint warns on two rules of one name and identical
    `labels:` in a file (cmd/promtool/main.go checkDuplicates, v2.42 and v3.x). Of those,
    only a true copy or two records that can write the same series are defects; two
    alerts with different conditions and records with disjoint selectors are not."""

    code: ClassVar[str] = "rules/duplicate"
    # Duplicates count within one rule file, and a service's groups make one file.
    scope: ClassVar[LintScope] = "service"
    default_severity: ClassVar[Severity] = Severity.WARNING
    description: ClassVar[str] = (
        "Two alerts or records with the same name and identical labels that evaluate the "
        "same expression, or two records that can write the same series."
    )

    def run(self, corpus: Corpus) -> Iterator[Diagnostic]:
        seen: dict[tuple[str, str, str, tuple[tuple[str, str], ...]], list[tuple[Unit, ParsedRule]]]
        seen = {}
        for unit, rule in corpus.rules():
            if not rule.name or rule.kind == "query":
                continue
            key = (unit.scope, rule.kind, rule.name, tuple(sorted(rule.labels.items())))
            earlier = seen.setdefault(key, [])
            clash = next((e for e in earlier if self._clashes(corpus, e[1], rule)), None)
            earlier.append((unit, rule))
            if clash is None:
                continue
            f_unit, f_rule = clash
            same = " ".join(f_rule.expr.split()) == " ".join(rule.expr.split())
            yield corpus.diag(
                self.code,
                self.default_severity,
                f"{rule.kind} {rule.name} is defined twice with identical labels "
                f"(groups {f_unit.group.name!r} and {unit.group.name!r})"
                + ("" if same else "; both can write the same series"),
                unit,
                rule,
                hint="merge them, or tell them apart with a label or disjoint selectors",
                related=(Location(f_unit.file, f_unit.blueprint_line or f_rule.line),),
            )

    @staticmethod
    def _clashes(corpus: Corpus, first: ParsedRule, second: ParsedRule) -> bool:
        if " ".join(first.expr.split()) == " ".join(second.expr.split()):
            return True
        if first.kind == "alert":
            return False  # one alert name, several conditions: an ordinary pattern
        a, b = corpus.analysis(first.expr), corpus.analysis(second.expr)
        if a is None or b is None:
            return False  # promql/syntax reports it
        return not outputs_disjoint(first.expr, a.labels, second.expr, b.labels)


class DuplicateGroup(CorpusRule):
    code: ClassVar[str] = "rules/duplicate-group"
    # Group names must be unique across the whole plan: a cross-service check.
    scope: ClassVar[LintScope] = "plan"
    default_severity: ClassVar[Severity] = Severity.ERROR
    description: ClassVar[str] = (
        "Two rule groups with the same name in one file, one Mimir namespace, or one plan."
    )

    def fleet_view(self, shard: Plan, ctx: LintContext) -> Any:
        # Group names and where they come from; dashboards (fleet files) are skipped.
        return [[g.service, g.name, g.source.model_dump(mode="json")] for g in shard.rule_groups]

    def run(self, corpus: Corpus) -> Iterator[Diagnostic]:
        yield from _file_problems(corpus, self.code)
        seen: dict[tuple[str, str], Unit] = {}
        for unit in corpus.units:
            if any(r.kind == "query" for r in unit.group.rules):
                continue  # a dashboard, not a rule group
            if unit.source is not None and unit.source.format != "mimir":
                continue  # plain files: only within one file, reported while decoding
            scope = unit.group.namespace if unit.source is not None else "plan"
            key = (scope, unit.group.name)
            first = seen.get(key)
            if first is None:
                seen[key] = unit
                continue
            if first.file == unit.file and unit.source is not None:
                continue  # same file: the decoder reported it
            yield corpus.diag(
                self.code,
                self.default_severity,
                f"rule group {unit.group.name!r} is defined twice in "
                + (f"namespace {scope!r}" if scope != "plan" else "the plan"),
                unit,
                hint="group names must be unique per namespace; rename one",
                related=(Location(first.file, first.blueprint_line or first.group.line),),
            )
