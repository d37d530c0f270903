"""The lint engine: one corpus of rules (from the plan or from files), one catalogue,
one analysis per expression; every lint rule plugin reads the same corpus.

The corpus is built once per (plan, artifacts, inputs) and cached, so every rule
costs one parse and one label-flow walk per distinct expression.
"""

from __future__ import annotations

import datetime as dt
import difflib
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any

from obs_iac import conventions
from obs_iac.diagnostics import Diagnostic, Location, Severity
from obs_iac.labels import CANONICAL_KEYS, LabelNaming, NamingStrategy
from obs_iac.lint.rulefile import ParsedGroup, ParsedRule, RuleFile, parse_duration
from obs_iac.promql import PromQLSyntaxError
from obs_iac.promql.compat import syntax_error
from obs_iac.promql.labelflow import Analysis, LabelRef, MetricFacts, analyze

if TYPE_CHECKING:
    from obs_iac.plan.model import Plan
    from obs_iac.plugins import LintContext
    from obs_iac.render.artifact import Artifact

DEFAULT_INTERVAL = "1m"


@dataclass(frozen=True)
class LintInputs:
    """What ``obs-iac lint`` was asked to check, beyond the plan.

    ``files``: hand-written rule files (already read). ``include_plan``: also lint the
    plan's own rule groups. ``today``: the date expiries are compared with (injectable,
    so tests do not depend on the clock).
    """

    files: tuple[RuleFile, ...] = ()
    include_plan: bool = True
    today: dt.date | None = None


@dataclass
class Unit:
    """One rule group to lint, and where its findings should point."""

    group: ParsedGroup
    file: str  # the file findings point at: the blueprint, or the hand-written rule file
    service: str | None = None
    blueprint_line: int | None = None
    generated: str | None = None
    generated_artifact: Artifact | None = None
    source: RuleFile | None = None

    def generated_line(self, index: int) -> int | None:
        """Line of rule ``index`` in the generated file; worked out only when a finding
        needs it, since it means serialising the artifact."""
        if self.generated_artifact is None:
            return None
        return _generated_lines(self.generated_artifact).get((self.group.name, index))

    @property
    def scope(self) -> str:
        """Rules in one scope end up in one file (duplicates are per file, like promtool)."""
        return self.service or self.file


@dataclass
class Corpus:
    units: list[Unit]
    catalogue: dict[str, MetricFacts]
    naming: LabelNaming
    min_version: str
    evaluation_interval: str
    collected: dict[str, frozenset[str]]  # service -> DCGM fields; "*" = any service
    files: tuple[RuleFile, ...]
    plan: Plan
    today: dt.date
    _analyses: dict[str, Analysis | None] = field(default_factory=dict)
    _syntax: dict[str, str | None] = field(default_factory=dict)
    _by_expr: dict[str, Analysis | None] = field(default_factory=dict)

    def syntax(self, expr: str) -> str | None:
        """Why the expression does not load in ``min_version`` (None: it does)."""
        key = shape(expr)
        if key not in self._syntax:
            self._syntax[key] = syntax_error(key, self.min_version)
        if self._syntax[key] is not None and key != expr:
            # Never let folding invent (or word) an error: the real text decides.
            return syntax_error(expr, self.min_version)
        return self._syntax[key]

    def analysis(self, expr: str) -> Analysis | None:
        """Label-flow facts of an expression, or None when it does not parse."""
        try:
            return self._by_expr[expr]
        except KeyError:
            pass
        key = shape(expr)
        if key != expr and self.syntax(expr) is None and syntax_error(key, self.min_version):
            key = expr  # folding broke a valid expression: analyse the real text
        if key in self._analyses:
            self._by_expr[expr] = self._analyses[key]
            return self._analyses[key]
        result: Analysis | None = None
        if key.strip() and syntax_error(key, self.min_version) is None:
            try:
                result = analyze(key, self.catalogue)
            except PromQLSyntaxError:
                result = None
        self._analyses[key] = result
        self._by_expr[expr] = result
        return result

    def rules(self) -> Iterator[tuple[Unit, ParsedRule]]:
        for unit in self.units:
            for rule in unit.group.rules:
                yield unit, rule

    def diag(
        self,
        rule_code: str,
        severity: Severity,
        message: str,
        unit: Unit,
        rule: ParsedRule | None = None,
        hint: str | None = None,
        at_expr: bool = False,
        related: tuple[Location, ...] = (),
    ) -> Diagnostic:
        if unit.blueprint_line is not None:
            location = Location(unit.file, unit.blueprint_line)
            gen_line = unit.generated_line(rule.index) if rule is not None else None
            if unit.generated and gen_line is not None:
                related = (Location(unit.generated, gen_line), *related)
            elif unit.generated:
                related = (Location(unit.generated), *related)
        else:
            line = unit.group.line
            if rule is not None:
                line = rule.expr_line if at_expr else rule.line
            location = Location(unit.file, line)
        path: tuple[str, ...] = tuple(
            p for p in (unit.service, unit.group.name, rule.name if rule else None) if p
        )
        return Diagnostic(
            rule_code,
            severity,
            message,
            hint=hint,
            location=location,
            object_path=path,
            origin=rule_code,
            related=related,
        )


# Equality matcher values never change what the analysis finds (only "" vs non-empty
# does), so expressions that differ only there share one parse and one analysis. Only
# strings without escapes are folded, so folding can never hide a syntax error.
_EQ_VALUE = re.compile(r'([{,]\s*[a-zA-Z_][a-zA-Z0-9_]*\s*!?=)\s*"[^"\\\n]+"')


def shape(expr: str) -> str:
    if "__name__" in expr or '="' not in expr:
        return expr
    return _EQ_VALUE.sub(r'\1"x"', expr)


# -- catalogue ------------------------------------------------------------------------------


@cache
def dcgm_catalogue(strategy: NamingStrategy) -> dict[str, MetricFacts]:
    """Every DCGM field as dcgm-exporter (stock chart settings) + relabelling present it.

    Seeds the catalogue so DCGM series are always checked strictly, even in a rule file
    linted outside any repository.
    """
    from obs_iac.blueprint.models import GpuFleet
    from obs_iac.catalog import dcgm
    from obs_iac.packs.gpu import _unit, field_labels

    fleet = GpuFleet(model="A100-SXM4-80GB", count=1, driver_version="535.129.03")
    naming = LabelNaming(strategy)
    out: dict[str, MetricFacts] = {}
    for info in dcgm.catalog().values():
        if info.prometheus_type == "label":
            continue
        out[info.name] = MetricFacts(
            name=info.name,
            type=info.prometheus_type,
            unit=_unit(info),
            labels=frozenset(field_labels(info.name, fleet, naming)),
            source="dcgm",
        )
    return out


def _record_unit(name: str, computed: str | None) -> str:
    """The scale a recorded series is on, from its operations part.

    Only bounded 0-1 shares count as "ratio" (``:ratio``, ``:ratio_avg5m``): a ratio *to*
    something (``ratio_to_group_median5m``, ``max_over_median5m``) can exceed 1, so it
    gets its own unit and no threshold check.
    """
    last = name.rsplit(":", 1)[-1]
    if "percent" in last:
        return "percent"
    relative = "_to_" in last or "over" in last
    if "ratio" in last and not relative:
        return "ratio"
    if relative or computed == "ratio":
        return "relative"
    return computed or ""


def planned_catalogue(
    plan: Plan, strategy: NamingStrategy
) -> tuple[dict[str, MetricFacts], frozenset[str]]:
    """DCGM's fields and the plan's catalogue as facts, and the catalogue's names.

    Derived from ``plan.metrics`` alone, so every shard of a render shares one (see
    obs_iac.plan.memo): never mutate it."""
    from obs_iac.plan.memo import per_catalogue

    def build() -> tuple[dict[str, MetricFacts], frozenset[str]]:
        catalogue = dict(dcgm_catalogue(strategy))
        for spec in plan.metrics:
            recording = spec.source == "recording"
            unit = _record_unit(spec.name, spec.unit) if recording else spec.unit
            catalogue[spec.name] = MetricFacts(
                spec.name, str(spec.type), unit, frozenset(spec.labels), spec.source
            )
        return catalogue, frozenset(spec.name for spec in plan.metrics)

    return per_catalogue(plan.metrics, ("lint/catalogue", strategy), build)


def build_catalogue(
    plan: Plan, units: Iterable[Unit], naming: LabelNaming, min_version: str
) -> tuple[dict[str, MetricFacts], dict[str, Analysis | None]]:
    """The catalogue, and the analyses made on the way that stay valid with it.

    The catalogue is the shared ``planned_catalogue`` itself when the units record no
    series the plan does not catalogue (always so for a plan's own rules), else a copy."""
    base, planned = planned_catalogue(plan, naming.strategy)
    catalogue = base
    records = [(u, r) for u in units for r in u.group.rules if r.kind == "record" and r.name]
    record_names = {r.name for _u, r in records}
    reusable: dict[str, Analysis | None] = {}
    # Records may read records defined later: two passes settle every ordinary chain.
    for _ in range(2):
        computed: dict[str, MetricFacts | None] = {}
        first_pass: dict[str, Analysis | None] = {}
        for _unit, rule in records:
            if rule.name in planned or not rule.expr.strip():
                continue
            key = shape(rule.expr)
            if key in first_pass:
                result_or_none = first_pass[key]
            elif syntax_error(key, min_version) is not None:
                result_or_none = None
            else:
                try:
                    result_or_none = analyze(key, catalogue)
                except PromQLSyntaxError:
                    result_or_none = None
            first_pass[key] = result_or_none
            if result_or_none is None:
                computed[rule.name] = None
                continue
            result = result_or_none
            labels = result.labels
            if labels is not None:
                labels = labels | set(rule.labels)
            prior = computed.get(rule.name, MetricFacts(rule.name, "", "", frozenset()))
            if labels is None or prior is None:
                computed[rule.name] = None  # open: some definition lets any label through
                continue
            computed[rule.name] = MetricFacts(
                rule.name,
                result.type or "gauge",
                _record_unit(rule.name, result.unit),
                prior.labels | labels,
                "recording",
            )
        if computed and catalogue is base:
            catalogue = dict(base)
        for name, facts in computed.items():
            if facts is None:
                catalogue.pop(name, None)
            else:
                catalogue[name] = facts
        # Analyses that read no recorded series cannot change with the catalogue.
        reusable = {
            k: a
            for k, a in first_pass.items()
            if a is not None and not record_names & set(a.metrics)
        }
        if not any(a is not None and record_names & set(a.metrics) for a in first_pass.values()):
            break  # no record reads another record: one pass is exact
    return catalogue, reusable


# -- units from the plan ------------------------------------------------------------------


_LINES: dict[int, tuple[Artifact, dict[tuple[str, int], int]]] = {}


def _generated_lines(art: Artifact) -> dict[tuple[str, int], int]:
    """(group name, rule index) -> line, read back from the serialised artifact."""
    cached = _LINES.get(id(art))
    if cached is not None and cached[0] is art:
        return cached[1]
    from obs_iac.lint.rulefile import parse_rule_text
    from obs_iac.render.serialize import serialize

    parsed = parse_rule_text(serialize(art).decode("utf-8"), art.path)
    lines = {(g.name, r.index): r.line for g in parsed.groups for r in g.rules}
    if len(_LINES) > 4096:
        _LINES.clear()
    _LINES[id(art)] = (art, lines)
    return lines


def _plan_units(plan: Plan, artifacts: tuple[Artifact, ...], output: str) -> list[Unit]:
    from obs_iac.plan.model import AlertRule

    rule_files = {a.path: a for a in artifacts if a.format == "yaml"}
    units = []
    for group in plan.rule_groups:
        rules = []
        for index, rule in enumerate(group.rules):
            if isinstance(rule, AlertRule):
                rules.append(
                    ParsedRule(
                        kind="alert",
                        name=rule.alert,
                        expr=rule.expr,
                        line=group.source.line or 1,
                        expr_line=group.source.line or 1,
                        index=index,
                        for_seconds=parse_duration(rule.for_) or 0.0,
                        for_text=rule.for_,
                        keep_firing_for=rule.keep_firing_for or "",
                        labels=dict(rule.labels),
                        annotations=dict(rule.annotations),
                    )
                )
            else:
                rules.append(
                    ParsedRule(
                        kind="record",
                        name=rule.record,
                        expr=rule.expr,
                        line=group.source.line or 1,
                        expr_line=group.source.line or 1,
                        index=index,
                        labels=dict(rule.labels),
                    )
                )
        gen = conventions.rule_file(group.service)
        parsed_group = ParsedGroup(
            name=group.name,
            line=group.source.line or 1,
            interval=group.interval or "",
            interval_seconds=parse_duration(group.interval) if group.interval else None,
            rules=rules,
        )
        units.append(
            Unit(
                group=parsed_group,
                file=group.source.file,
                service=group.service,
                blueprint_line=group.source.line or 1,
                generated=f"{output}/{gen}",
                generated_artifact=rule_files.get(gen),
            )
        )
    return units


# -- dashboard queries ------------------------------------------------------------------------

# Grafana's interval variables stand where PromQL wants a duration.
_GRAFANA_DURATIONS = re.compile(r"\$(?:__rate_interval|__interval|__range)\b|\$\{__[a-z_]+\}")
_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"|`[^`]*`')


def _dashboard_units(plan: Plan, artifacts: tuple[Artifact, ...], output: str) -> list[Unit]:
    """Every Prometheus query of every generated dashboard, as a pseudo rule group, so
    label flow, syntax, types and collector sets are checked on panels too."""
    from obs_iac.lint.dashboard import dashboard_queries

    by_board: dict[str, list[ParsedRule]] = {}
    services: dict[str, str | None] = {}
    by_file = {svc.source.file: svc.name for svc in plan.services}
    for art in artifacts:
        if art.path.startswith("grafana/dashboards/"):
            owners: set[str | None] = set(art.services) or {by_file.get(f) for f in art.sources}
            services[art.path] = owners.pop() if len(owners) == 1 else None
    for query in dashboard_queries(artifacts):
        if query.datasource != "prometheus":
            continue
        expr = _GRAFANA_DURATIONS.sub("5m", query.expr)
        if "$" in _QUOTED.sub('""', expr):
            continue  # a template variable outside a string: not PromQL until Grafana runs
        rules = by_board.setdefault(query.artifact, [])
        rules.append(
            ParsedRule(
                kind="query",
                name=f"panel {query.panel_title!r} ({query.ref_id or 'A'})",
                expr=expr,
                line=1,
                expr_line=1,
                index=len(rules),
            )
        )
    return [
        Unit(
            group=ParsedGroup(name=path.rsplit("/", 1)[-1], line=1, rules=rules),
            file=f"{output}/{path}",
            service=services.get(path),
        )
        for path, rules in sorted(by_board.items())
    ]


# -- the cached corpus ------------------------------------------------------------------------

_CACHE: list[tuple[tuple[Any, ...], Corpus]] = []


def corpus_for(plan: Plan, artifacts: tuple[Artifact, ...], ctx: LintContext) -> Corpus:
    raw = getattr(ctx, "inputs", None)
    inputs = raw if isinstance(raw, LintInputs) else LintInputs()
    key = (plan, artifacts, raw, ctx.repo)
    for cached_key, corpus in _CACHE:
        if all(a is b for a, b in zip(cached_key, key, strict=True)):
            return corpus
    units: list[Unit] = []
    if inputs.include_plan:
        units.extend(_plan_units(plan, artifacts, ctx.repo.output))
        units.extend(_dashboard_units(plan, artifacts, ctx.repo.output))
    for rf in inputs.files:
        for group in rf.groups:
            units.append(Unit(group=group, file=rf.path, source=rf))
    naming = ctx.naming
    min_version = ctx.repo.prometheus_min_version
    collected: dict[str, frozenset[str]] = {}
    for cs in plan.collector_sets:
        collected[cs.service] = frozenset(f.name for f in cs.fields)
    if plan.collector_sets:
        collected["*"] = frozenset().union(*collected.values())
    catalogue, analyses = build_catalogue(plan, units, naming, min_version)
    corpus = Corpus(
        units=units,
        catalogue=catalogue,
        naming=naming,
        min_version=min_version,
        evaluation_interval=ctx.repo.evaluation_interval or DEFAULT_INTERVAL,
        collected=collected,
        files=inputs.files,
        plan=plan,
        today=inputs.today or dt.date.today(),
    )
    if catalogue is planned_catalogue(plan, naming.strategy)[0]:
        # Analyses depend on the expression, the catalogue and the version only: the
        # shards of a render share them instead of analysing each query shape again.
        from obs_iac.plan.memo import per_catalogue

        memo = ("lint/analyses", naming.strategy, min_version)
        corpus._analyses = per_catalogue(plan.metrics, memo, dict)
        corpus._syntax = per_catalogue(plan.metrics, ("lint/syntax", min_version), dict)
    corpus._analyses.update(analyses)
    _CACHE[:] = [(key, corpus)]
    return corpus


# -- label suggestions ----------------------------------------------------------------------


def _compact(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def canonical_suggestion(ref: LabelRef, naming: LabelNaming) -> str | None:
    """The canonical label, present here, that ``ref.label`` most likely means."""
    wanted = _compact(ref.label)
    if len(wanted) < 3:
        return None
    for key in CANONICAL_KEYS:
        spelled = naming.prom(key.key)
        if spelled not in ref.available or spelled == ref.label:
            continue
        compact = _compact(spelled)
        if (
            wanted == compact
            or ref.label in (key.key, key.classic)
            or spelled.endswith("_" + ref.label)
            or (len(wanted) >= 4 and compact.endswith(wanted))
        ):
            return spelled
    canonical = [naming.prom(k.key) for k in CANONICAL_KEYS if naming.prom(k.key) in ref.available]
    close = difflib.get_close_matches(ref.label, canonical, n=1, cutoff=0.8)
    return close[0] if close else None


def spelling_suggestion(ref: LabelRef) -> str | None:
    close = difflib.get_close_matches(ref.label, sorted(ref.available), n=1, cutoff=0.75)
    return close[0] if close else None


def describe_ref(ref: LabelRef) -> str:
    where = {
        "matcher": "matches on",
        "by": "groups by",
        "without": "drops (without)",
        "on": "joins on",
        "ignoring": "ignores",
        "group_left": "copies (group_left)",
        "group_right": "copies (group_right)",
        "label_replace": "reads in label_replace",
        "label_join": "reads in label_join",
    }.get(ref.context, ref.context)
    if ref.context == "template":
        return (
            f"an annotation reads $labels.{ref.label}, but the series the alert fires for "
            f"have no label {ref.label!r}"
        )
    subject = f" on {ref.metric}" if ref.metric else ""
    return f"the query {where} label {ref.label!r}, which does not exist{subject} at that point"
