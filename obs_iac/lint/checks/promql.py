"""PromQL checks: syntax, label flow, types, scales, regexes, joins."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from typing import ClassVar

from obs_iac.diagnostics import Diagnostic, Severity
from obs_iac.lint.checks import CorpusRule
from obs_iac.lint.engine import (
    Corpus,
    canonical_suggestion,
    describe_ref,
    spelling_suggestion,
)
from obs_iac.lint.gotemplate import label_references
from obs_iac.lint.rulefile import ParsedRule
from obs_iac.plugins import LintScope
from obs_iac.promql.labelflow import LabelRef, Measure, RegexUse


class Syntax(CorpusRule):
    code: ClassVar[str] = "promql/syntax"
    # Reads only its own rule groups and dashboards; the catalogue is the fleet's in
    # every shard.
    scope: ClassVar[LintScope] = "service"
    default_severity: ClassVar[Severity] = Severity.ERROR
    description: ClassVar[str] = "The expression does not parse in the oldest Prometheus targeted."

    def run(self, corpus: Corpus) -> Iterator[Diagnostic]:
        for unit, rule in corpus.rules():
            if not rule.expr.strip():
                continue  # rules/structure reports the missing expr
            problem = corpus.syntax(rule.expr)
            if problem:
                yield corpus.diag(
                    self.code,
                    self.default_severity,
                    f"{rule.name or 'rule'}: could not parse expression: {problem}",
                    unit,
                    rule,
                    hint=f"Prometheus {corpus.min_version} must load this rule; "
                    "check the expression with `promtool check rules`",
                    at_expr=True,
                )


def label_refs(corpus: Corpus, rule: ParsedRule) -> list[LabelRef]:
    """Every label the rule names where it does not exist (expression and templates)."""
    analysis = corpus.analysis(rule.expr)
    if analysis is None:
        return []
    refs = list(analysis.missing)
    if rule.kind != "alert":
        return refs
    seen = set()
    for key in sorted(rule.annotations):
        for label in label_references(rule.annotations[key]):
            if label in seen:
                continue
            if analysis.labels is not None and label not in analysis.labels:
                refs.append(LabelRef(label, "template", analysis.labels))
            elif analysis.labels is None and label in analysis.removed:
                refs.append(LabelRef(label, "template", frozenset(), removed_from_open=True))
            else:
                continue
            seen.add(label)
    return refs


class LabelFlow(CorpusRule):
    code: ClassVar[str] = "promql/label-flow"
    scope: ClassVar[LintScope] = "service"
    default_severity: ClassVar[Severity] = Severity.ERROR
    description: ClassVar[str] = (
        "A matcher, grouping, join label or alert template names a label that does not "
        "exist at that point of the query."
    )

    def run(self, corpus: Corpus) -> Iterator[Diagnostic]:
        for unit, rule in corpus.rules():
            for ref in label_refs(corpus, rule):
                if canonical_suggestion(ref, corpus.naming):
                    continue  # labels/did-you-mean reports it, with the right spelling
                close = spelling_suggestion(ref)
                known = ", ".join(sorted(ref.available)) or "none"
                hint = f"did you mean {close!r}? " if close else ""
                if ref.removed_from_open:
                    hint += f"`without ({ref.label})` or `ignoring ({ref.label})` removes it"
                else:
                    hint += f"labels there: {known}"
                severity, consequence = ref_consequence(ref, rule.kind)
                yield corpus.diag(
                    self.code,
                    severity,
                    f"{rule.name}: {describe_ref(ref)}; {consequence}",
                    unit,
                    rule,
                    hint=hint,
                    at_expr=ref.context != "template",
                )


def ref_consequence(ref: LabelRef, kind: str) -> tuple[Severity, str]:
    """What a missing label does, stated exactly. Only a matcher makes the query select
    nothing (a defect: error); elsewhere the rule still evaluates and the damage is
    narrower (a warning that says what it is)."""
    if ref.context == "matcher":
        what = "the alert can never fire" if kind == "alert" else "the rule records nothing"
        return Severity.ERROR, f"the selector matches no series, so {what}"
    if ref.context == "template":
        return Severity.WARNING, "the alert fires, but that part of the text renders empty"
    if ref.context in ("by", "without"):
        return Severity.WARNING, "the grouping has no effect for it and the result lacks it"
    if ref.context in ("on", "ignoring"):
        return Severity.WARNING, "both sides match on an empty value for it"
    if ref.context in ("group_left", "group_right"):
        return Severity.WARNING, "the copied label is empty on every result series"
    return Severity.WARNING, "the label it writes is built from an empty value"


class RateOnNonCounter(CorpusRule):
    code: ClassVar[str] = "promql/rate-on-non-counter"
    scope: ClassVar[LintScope] = "service"
    default_severity: ClassVar[Severity] = Severity.ERROR
    description: ClassVar[str] = "rate/irate/increase applied to a gauge."

    def run(self, corpus: Corpus) -> Iterator[Diagnostic]:
        for unit, rule in corpus.rules():
            analysis = corpus.analysis(rule.expr)
            for misuse in analysis.counter_misuse if analysis else ():
                yield corpus.diag(
                    self.code,
                    self.default_severity,
                    f"{rule.name}: {misuse.function}() over {misuse.metric}, which is a "
                    f"{misuse.type}, not a counter",
                    unit,
                    rule,
                    hint="for a gauge use deriv() or delta(), or aggregate it with "
                    "avg_over_time()/max_over_time()",
                    at_expr=True,
                )


class HistogramQuantileNonBucket(CorpusRule):
    code: ClassVar[str] = "promql/histogram-quantile-non-bucket"
    scope: ClassVar[LintScope] = "service"
    default_severity: ClassVar[Severity] = Severity.ERROR
    description: ClassVar[str] = "histogram_quantile over something that is not a bucket series."

    def run(self, corpus: Corpus) -> Iterator[Diagnostic]:
        for unit, rule in corpus.rules():
            analysis = corpus.analysis(rule.expr)
            for misuse in analysis.quantile_misuse if analysis else ():
                yield corpus.diag(
                    self.code,
                    self.default_severity,
                    f"{rule.name}: histogram_quantile(): {misuse.reason}; it returns nothing",
                    unit,
                    rule,
                    hint="pass rate(<name>_bucket[...]) and keep `le` in every aggregation, "
                    "e.g. sum by (le) (...)",
                    at_expr=True,
                )


class UnitScale(CorpusRule):
    code: ClassVar[str] = "promql/unit-scale"
    scope: ClassVar[LintScope] = "service"
    default_severity: ClassVar[Severity] = Severity.ERROR
    description: ClassVar[str] = "A 0-100 percent compared with a 0-1 ratio, or the reverse."

    def run(self, corpus: Corpus) -> Iterator[Diagnostic]:
        for unit, rule in corpus.rules():
            analysis = corpus.analysis(rule.expr)
            for mix in analysis.scale_mixes if analysis else ():
                if mix.rhs[0].isdigit() or mix.rhs[0] == "-":
                    message = (
                        f"{rule.name}: a {mix.lhs} (0-{100 if mix.lhs == 'percent' else 1}) "
                        f"value is compared with {mix.rhs}, a threshold on the other scale"
                    )
                else:
                    message = f"{rule.name}: `{mix.op}` mixes a {mix.lhs} and a {mix.rhs} value"
                yield corpus.diag(
                    self.code,
                    self.default_severity,
                    message,
                    unit,
                    rule,
                    hint="DCGM_FI_DEV_*_UTIL are integers 0-100 (percent); DCGM_FI_PROF_* "
                    "are 0.0-1.0 ratios; divide percents by 100 or write the threshold "
                    "on the series' own scale",
                    at_expr=True,
                )
            problem = _bytes_conversion(rule, analysis.measure if analysis else None)
            if problem is not None:
                yield corpus.diag(
                    self.code,
                    self.default_severity,
                    f"{rule.name}: {problem}",
                    unit,
                    rule,
                    hint="DCGM_FI_DEV_FB_* are MiB: multiply by 1048576 (2^20) for bytes; "
                    "utilisation fields are percents of time, not sizes",
                    at_expr=True,
                )


_BYTES_NAME = re.compile(r"(?:^|[_:])bytes(?:$|[_:])")
MIB = 1 << 20


def _bytes_conversion(rule: ParsedRule, measure: Measure | None) -> str | None:
    """A record named in bytes whose value cannot be bytes (prometheus naming practice:
    base units; a record's unit is in its name, docs/practices/naming.md)."""
    if rule.kind != "record" or measure is None:
        return None
    # level:metric:operations: the unit may sit in the metric or the operations part.
    named = rule.name.split(":", 1)[1] if ":" in rule.name else rule.name
    if not _BYTES_NAME.search(named):
        return None
    if measure.unit in ("percent", "ratio"):
        return f"records a {measure.unit} as bytes; a share of time is not a size"
    if measure.unit == "mebibytes" and not math.isclose(measure.factor, MIB, rel_tol=1e-9):
        factor = f"{measure.factor:g}" if measure.factor != 1 else "nothing"
        return f"records MiB as bytes multiplied by {factor}; 1 MiB is {MIB} bytes (2^20)"
    return None


# RE2 syntax characters (google/re2 wiki "Syntax"); a pattern without any is a string.
_RE2_META = frozenset(".^$*+?()[]{}|\\")


def _pointless_regex(use: RegexUse) -> tuple[str, str] | None:
    """A regex matcher that says what a plainer one would (pint's promql/regexp check):
    Prometheus anchors the pattern fully, so these mean exactly the named alternative."""
    pattern, negated = use.pattern, use.op == "!~"
    plain = "!=" if negated else "="
    if pattern == "":
        what = "a non-empty value" if negated else "no value (the label absent)"
        return f"matches {what}", f'write {use.label}{plain}"" instead'
    if pattern in (".*", "(.*)", "(?:.*)"):
        if negated:
            return "selects no series at all", "drop the selector or fix the pattern"
        return "matches every series, with or without the label", "drop the matcher"
    if not any(ch in _RE2_META for ch in pattern):
        return "has no regex syntax", f'write {use.label}{plain}"{pattern}" instead'
    return None


class Regex(CorpusRule):
    code: ClassVar[str] = "promql/regex"
    scope: ClassVar[LintScope] = "service"
    default_severity: ClassVar[Severity] = Severity.ERROR
    description: ClassVar[str] = "Regex matchers that are not RE2 or are anchored redundantly."

    def run(self, corpus: Corpus) -> Iterator[Diagnostic]:
        import re2

        for unit, rule in corpus.rules():
            analysis = corpus.analysis(rule.expr)
            for use in analysis.regexes if analysis else ():
                try:
                    re2.compile(use.pattern)
                except Exception as exc:
                    yield corpus.diag(
                        self.code,
                        Severity.ERROR,
                        f"{rule.name}: {use.pattern!r} ({use.context} on {use.label!r}) is not "
                        f"a valid RE2 regex: {exc}",
                        unit,
                        rule,
                        hint="Prometheus uses Go's RE2: no lookaround, no backreferences",
                        at_expr=True,
                    )
                    continue
                if use.context == "matcher":
                    pointless = _pointless_regex(use)
                    if pointless is not None:
                        message, hint = pointless
                        yield corpus.diag(
                            self.code,
                            Severity.WARNING,
                            f"{rule.name}: {use.label}{use.op}{use.pattern!r} {message}",
                            unit,
                            rule,
                            hint=hint,
                            at_expr=True,
                        )
                        continue
                if use.pattern.startswith("^") or (
                    use.pattern.endswith("$") and not use.pattern.endswith("\\$")
                ):
                    yield corpus.diag(
                        self.code,
                        Severity.WARNING,
                        f"{rule.name}: {use.pattern!r} ({use.context} on {use.label!r}) is "
                        "anchored with ^ or $, but Prometheus anchors every regex already",
                        unit,
                        rule,
                        hint="drop the ^ and $",
                        at_expr=True,
                    )


class JoinNoCommonLabels(CorpusRule):
    code: ClassVar[str] = "promql/join-no-common-labels"
    scope: ClassVar[LintScope] = "service"
    default_severity: ClassVar[Severity] = Severity.ERROR
    description: ClassVar[str] = "A binary operation whose two sides can never match."

    def run(self, corpus: Corpus) -> Iterator[Diagnostic]:
        for unit, rule in corpus.rules():
            analysis = corpus.analysis(rule.expr)
            for join in analysis.joins if analysis else ():
                only = []
                if join.lhs_only:
                    only.append(f"only the left side has {', '.join(sorted(join.lhs_only))}")
                if join.rhs_only:
                    only.append(f"only the right side has {', '.join(sorted(join.rhs_only))}")
                yield corpus.diag(
                    self.code,
                    self.default_severity,
                    f"{rule.name}: the two sides of `{join.op}` never match: " + "; ".join(only),
                    unit,
                    rule,
                    hint="match on the labels both sides share, e.g. `"
                    + join.op
                    + " on(...)`, or aggregate the richer side first",
                    at_expr=True,
                )
