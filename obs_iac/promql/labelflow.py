"""Label-flow analysis: which labels exist at each point of a PromQL expression.

Starts from a catalogue of known series (name -> type, unit, label set) and propagates
label sets bottom-up through selectors, functions, aggregations and binary operations,
following Prometheus's own evaluation rules (``resultMetric`` in promql/engine.go):
a one-to-one match ``on(l)`` keeps only ``l``, ``ignoring(l)`` drops ``l``,
``group_left(x)`` copies ``x`` from the "one" side, ``by`` keeps only its labels.

A series the catalogue does not know is *open*: any label may exist, so nothing about
it is reported (hand-written files must not get false alarms). Everything the walk
notices is returned as plain facts; the lint rules decide what to report.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from obs_iac.promql import parse

Labels = frozenset[str] | None  # None: open, any label may be there

COUNTER_FUNCTIONS = frozenset({"rate", "irate", "increase"})
# Functions whose result is on the same scale as their (first) vector argument.
SCALE_KEEPING = frozenset(
    {
        "avg_over_time",
        "min_over_time",
        "max_over_time",
        "last_over_time",
        "quantile_over_time",
        "abs",
        "ceil",
        "floor",
        "round",
        "clamp",
        "clamp_min",
        "clamp_max",
        "sort",
        "sort_desc",
        "label_replace",
        "label_join",
    }
)
SCALE_KEEPING_AGGREGATIONS = frozenset({"avg", "min", "max", "quantile", "topk", "bottomk"})
MEASURE_KEEPING_AGGREGATIONS = SCALE_KEEPING_AGGREGATIONS | {"sum"}
COMPARISONS = frozenset({"==", "!=", ">", "<", ">=", "<="})
SET_OPS = frozenset({"and", "or", "unless"})
ANY_VALUE_MATCHES_EMPTY = frozenset({"=~", "!~"})


@dataclass(frozen=True, slots=True)
class MetricFacts:
    """What the analysis needs to know about one series name."""

    name: str
    type: str  # counter, gauge, histogram, summary, info, unknown
    unit: str
    labels: frozenset[str]
    source: str = ""


@dataclass(frozen=True, slots=True)
class LabelRef:
    """A label the expression names, which does not exist where it is named."""

    label: str
    context: str  # matcher, by, without, on, ignoring, group_left, group_right, label_replace...
    available: frozenset[str]
    metric: str | None = None
    # The series are open (no catalogue): only this label is known to be gone.
    removed_from_open: bool = False


@dataclass(frozen=True, slots=True)
class CounterMisuse:
    function: str
    metric: str
    type: str


@dataclass(frozen=True, slots=True)
class QuantileMisuse:
    reason: str
    metric: str | None = None


@dataclass(frozen=True, slots=True)
class JoinMismatch:
    op: str
    lhs_only: frozenset[str]
    rhs_only: frozenset[str]


@dataclass(frozen=True, slots=True)
class ScaleMix:
    op: str
    lhs: str
    rhs: str


@dataclass(frozen=True, slots=True)
class Measure:
    """The physical unit a value was read in and the constant it was multiplied by since:
    what a unit conversion (`* 1048576`, `/ 100`) did to it. Kept through sums, unlike
    the scale (`unit`), since a sum of MiB is still MiB."""

    unit: str
    factor: float = 1.0


@dataclass(frozen=True, slots=True)
class RegexUse:
    label: str
    pattern: str
    context: str  # matcher or label_replace
    op: str = "=~"


@dataclass
class Analysis:
    """Everything one expression reveals, computed once per expression and catalogue."""

    labels: Labels = None
    # Labels known to be absent from an open result (`without`, `ignoring`): what pint's
    # checks find on series no catalogue describes.
    removed: frozenset[str] = frozenset()
    measure: Measure | None = None
    kind: str = "vector"  # vector, matrix, scalar, string
    type: str | None = None
    unit: str | None = None
    metrics: tuple[str, ...] = ()
    missing: list[LabelRef] = field(default_factory=list)
    counter_misuse: list[CounterMisuse] = field(default_factory=list)
    quantile_misuse: list[QuantileMisuse] = field(default_factory=list)
    joins: list[JoinMismatch] = field(default_factory=list)
    scale_mixes: list[ScaleMix] = field(default_factory=list)
    regexes: list[RegexUse] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _Value:
    kind: str
    labels: Labels
    type: str | None = None
    unit: str | None = None
    number: float | None = None
    metric: str | None = None
    removed: frozenset[str] = frozenset()  # see Analysis.removed
    measure: Measure | None = None  # see Analysis.measure


def _op(value: Any) -> str:
    return str(value)


# promql_parser.MatchOp as integers: Equal, NotEqual, Re, NotRe.
_MATCH_OPS = ("=", "!=", "=~", "!~")


def match_op(matcher: Any) -> str:
    return _MATCH_OPS[int(matcher.op)]


def _union(a: Labels, b: Labels) -> Labels:
    if a is None or b is None:
        return None
    return a | b


def _matches_empty(op: str, value: str) -> bool:
    """Whether a matcher accepts a series that lacks the label (value "")."""
    if op == "=":
        return value == ""
    if op == "!=":
        return value != ""
    import re2

    try:
        hit = re2.fullmatch(value, "") is not None
    except Exception:  # an invalid pattern is promql/regex's finding, not ours
        return True
    return hit if op == "=~" else not hit


class _Walker:
    def __init__(self, catalogue: Mapping[str, MetricFacts]) -> None:
        self.catalogue = catalogue
        self.out = Analysis()
        self.metrics: set[str] = set()

    # -- leaves -------------------------------------------------------------------------
    def selector(self, node: Any) -> _Value:
        name = node.name or None
        matchers = list(node.matchers.matchers)
        if name is None:
            for m in matchers:
                if m.name == "__name__" and match_op(m) == "=":
                    name = str(m.value)
        facts = self.catalogue.get(name) if name else None
        if name:
            self.metrics.add(name)
        labels: Labels = facts.labels if facts is not None else None
        for m in matchers:
            op = match_op(m)
            if op in ANY_VALUE_MATCHES_EMPTY:
                self.out.regexes.append(RegexUse(m.name, str(m.value), "matcher", op))
            if m.name == "__name__" or labels is None or m.name in labels:
                continue
            if _matches_empty(op, str(m.value)) and op in ("=", "=~"):
                continue  # selecting "label absent" is legitimate
            self.out.missing.append(LabelRef(m.name, "matcher", labels, name))
        guessed = "counter" if name and name.endswith("_total") else None
        physical = facts.unit if facts else None
        return _Value(
            "vector",
            labels,
            facts.type if facts else guessed,
            facts.unit if facts else _guess_unit(name),
            metric=name,
            measure=Measure(physical) if physical and physical != "none" else None,
        )

    # -- dispatch -----------------------------------------------------------------------
    def eval(self, node: Any) -> _Value:
        kind = type(node).__name__
        if kind == "VectorSelector":
            return self.selector(node)
        if kind == "MatrixSelector":
            inner = self.selector(node.vector_selector)
            return replace(inner, kind="matrix")
        if kind == "NumberLiteral":
            return _Value("scalar", frozenset(), number=float(node.val))
        if kind == "StringLiteral":
            return _Value("string", frozenset())
        if kind == "ParenExpr":
            return self.eval(node.expr)
        if kind == "UnaryExpr":
            inner = self.eval(node.expr)
            number = -inner.number if inner.number is not None else None
            measure = (
                replace(inner.measure, factor=-inner.measure.factor) if inner.measure else None
            )
            return _Value(
                inner.kind,
                inner.labels,
                "gauge",
                inner.unit,
                number,
                inner.metric,
                inner.removed,
                measure,
            )
        if kind == "SubqueryExpr":
            inner = self.eval(node.expr)
            return replace(inner, kind="matrix", number=None)
        if kind == "Call":
            return self.call(node)
        if kind == "AggregateExpr":
            return self.aggregate(node)
        if kind == "BinaryExpr":
            return self.binary(node)
        return _Value("vector", None)

    # -- functions ----------------------------------------------------------------------
    def call(self, node: Any) -> _Value:
        fname = str(node.func.name)
        args = [self.eval(a) for a in node.args]
        raw = list(node.args)
        vec = next((a for a in args if a.kind in ("vector", "matrix")), None)
        if fname in ("time", "pi", "scalar"):
            return _Value("scalar", frozenset())
        if fname == "vector":
            return _Value("vector", frozenset(), "gauge")
        if fname in ("absent", "absent_over_time"):
            inner = raw[0]
            if type(inner).__name__ == "MatrixSelector":
                inner = inner.vector_selector
            kept: set[str] = set()
            if type(inner).__name__ == "VectorSelector":
                kept = {
                    m.name
                    for m in inner.matchers.matchers
                    if match_op(m) == "=" and m.name != "__name__"
                }
            return _Value("vector", frozenset(kept), "gauge")
        if vec is None:
            return _Value("vector", frozenset(), "gauge")
        labels = vec.labels
        if (
            fname in COUNTER_FUNCTIONS
            and vec.metric
            and vec.type not in (None, "counter", "unknown", "histogram", "summary")
        ):
            self.out.counter_misuse.append(CounterMisuse(fname, vec.metric, vec.type))
        if fname in ("label_replace", "label_join"):
            strings = [_string_literal(a) for a in raw[1:]]
            dst = strings[0] if strings else None
            sources: list[str] = []
            if fname == "label_replace" and len(strings) >= 4:
                sources = [s for s in strings[2:3] if s]
                if strings[3] is not None:
                    self.out.regexes.append(RegexUse(str(dst), str(strings[3]), "label_replace"))
            elif fname == "label_join":
                sources = [s for s in strings[2:] if s]
            if labels is not None:
                for src in sources:
                    if src not in labels and src != "__name__":
                        self.out.missing.append(LabelRef(src, fname, labels, vec.metric))
            removed = vec.removed - {dst} if dst else vec.removed
            if dst:
                labels = _union(labels, frozenset({dst}))
            elif dst is None and strings:
                labels, removed = None, frozenset()  # not a literal: any label may be there
            return _Value("vector", labels, vec.type, vec.unit, metric=vec.metric, removed=removed)
        if fname in ("histogram_quantile", "histogram_fraction"):
            if labels is not None and "le" not in labels:
                self.out.quantile_misuse.append(
                    QuantileMisuse("the argument has no `le` label", vec.metric)
                )
            elif vec.metric and vec.type not in (None, "histogram", "unknown", "counter"):
                self.out.quantile_misuse.append(
                    QuantileMisuse(f"{vec.metric} is a {vec.type}, not a histogram", vec.metric)
                )
            elif vec.metric and vec.type == "counter" and not vec.metric.endswith("_bucket"):
                self.out.quantile_misuse.append(
                    QuantileMisuse(f"{vec.metric} is not a _bucket series", vec.metric)
                )
            return _Value("vector", labels - {"le"} if labels is not None else None, "gauge")
        unit = vec.unit if fname in SCALE_KEEPING else None
        kept_type = (
            vec.type if fname in ("label_replace", "label_join", "sort", "sort_desc") else None
        )
        measure = vec.measure if fname in SCALE_KEEPING else None
        return _Value(
            "vector", labels, kept_type or "gauge", unit, removed=vec.removed, measure=measure
        )

    # -- aggregations -------------------------------------------------------------------
    def aggregate(self, node: Any) -> _Value:
        op = _op(node.op)
        inner = self.eval(node.expr)
        if node.param is not None:
            self.eval(node.param)
        labels = inner.labels
        mod = node.modifier
        grouping: list[str] = list(mod.labels) if mod is not None else []
        without = mod is not None and "Without" in str(mod.type)
        if labels is not None:
            for label in grouping:
                if label not in labels:
                    ctx = "without" if without else "by"
                    self.out.missing.append(LabelRef(label, ctx, labels, inner.metric))
        removed: frozenset[str] = frozenset()
        if op in ("topk", "bottomk", "limitk", "limit_ratio"):
            out: Labels = labels
            removed = inner.removed
        elif without:
            out = labels - set(grouping) if labels is not None else None
            removed = inner.removed | set(grouping)
        else:
            out = frozenset(grouping)
        if op == "count_values" and node.param is not None:
            value_label = _string_literal(node.param)
            # Prometheus accepts any string-typed parameter, `("v")` included.
            out = _union(out, frozenset({value_label}) if value_label is not None else None)
        kind_type = "counter" if op == "sum" and inner.type == "counter" else "gauge"
        unit = inner.unit if op in SCALE_KEEPING_AGGREGATIONS else None
        measure = inner.measure if op in MEASURE_KEEPING_AGGREGATIONS else None
        return _Value(
            "vector", out, kind_type, unit, metric=inner.metric, removed=removed, measure=measure
        )

    # -- binary operations --------------------------------------------------------------
    def binary(self, node: Any) -> _Value:
        op = _op(node.op)
        lhs = self.eval(node.lhs)
        rhs = self.eval(node.rhs)
        mod = node.modifier
        self._scale(op, lhs, rhs)
        scalar_l = lhs.kind == "scalar"
        scalar_r = rhs.kind == "scalar"
        if scalar_l and scalar_r:
            return _Value("scalar", frozenset(), number=_fold(op, lhs.number, rhs.number))
        if scalar_l or scalar_r:
            vec = rhs if scalar_l else lhs
            unit = (
                vec.unit if op in COMPARISONS or (op in ("*", "/") and _is_one(lhs, rhs)) else None
            )
            if op in ("+", "-"):
                unit = vec.unit
            return _Value(
                "vector",
                vec.labels,
                "gauge",
                unit,
                metric=vec.metric,
                removed=vec.removed,
                measure=_scaled(vec.measure, op, lhs if scalar_l else rhs, scalar_l),
            )
        matching = mod.matching if mod is not None else None
        on = matching is not None and "Include" in str(matching.type)
        listed = list(matching.labels) if matching is not None else []
        card = str(mod.card) if mod is not None else "OneToOne"
        include = list(getattr(mod, "group_labels", None) or []) if mod is not None else []
        if op in SET_OPS:
            card = "ManyToMany"
        for label in listed:
            sides = [s for s in (lhs, rhs) if s.labels is not None]
            if on:
                lacking = [s for s in sides if s.labels is not None and label not in s.labels]
                if lacking and lacking[0].labels is not None:
                    side = lacking[0]
                    assert side.labels is not None
                    self.out.missing.append(LabelRef(label, "on", side.labels, side.metric))
            elif len(sides) == 2 and all(label not in (s.labels or ()) for s in sides):
                both = (lhs.labels or frozenset()) | (rhs.labels or frozenset())
                self.out.missing.append(LabelRef(label, "ignoring", both, lhs.metric))
        if "ManyToOne" in card and rhs.labels is not None:
            for label in include:
                if label not in rhs.labels:
                    self.out.missing.append(LabelRef(label, "group_left", rhs.labels, rhs.metric))
        if "OneToMany" in card and lhs.labels is not None:
            for label in include:
                if label not in lhs.labels:
                    self.out.missing.append(LabelRef(label, "group_right", lhs.labels, lhs.metric))
        if not on and op != "or" and lhs.labels is not None and rhs.labels is not None:
            key_l = lhs.labels - set(listed)
            key_r = rhs.labels - set(listed)
            if key_l != key_r:
                self.out.joins.append(JoinMismatch(op, key_l - key_r, key_r - key_l))
        if op == "or":
            return _Value("vector", _union(lhs.labels, rhs.labels), "gauge")
        if op in ("and", "unless"):
            return replace(lhs, kind="vector", number=None)
        if "OneToMany" in card:
            base, extra = rhs, include
        else:
            base, extra = lhs, include if "ManyToOne" in card else []
        labels = base.labels
        removed = base.removed
        if "OneToOne" in card and matching is not None:
            if on:
                labels = frozenset(listed) if labels is None else labels & set(listed)
            elif labels is not None:
                labels = labels - set(listed)
            else:
                # Prometheus drops ignoring() labels from one-to-one results (resultMetric).
                removed = removed | set(listed)
        labels = _union(labels, frozenset(extra)) if extra else labels
        removed = removed - set(extra)
        unit = (
            base.unit if op in COMPARISONS or (op in ("+", "-") and lhs.unit == rhs.unit) else None
        )
        measure = base.measure if op in COMPARISONS or op in ("+", "-") else None
        return _Value(
            "vector", labels, "gauge", unit, metric=base.metric, removed=removed, measure=measure
        )

    def _scale(self, op: str, lhs: _Value, rhs: _Value) -> None:
        if op not in COMPARISONS and op not in ("+", "-"):
            return
        units = {lhs.unit, rhs.unit}
        if {"percent", "ratio"} <= units:
            self.out.scale_mixes.append(ScaleMix(op, str(lhs.unit), str(rhs.unit)))
            return
        if op not in COMPARISONS:
            return
        for vec, other in ((lhs, rhs), (rhs, lhs)):
            if other.number is None or vec.kind == "scalar":
                continue
            value = other.number
            if vec.unit == "percent" and 0 < value < 1:
                self.out.scale_mixes.append(ScaleMix(op, "percent", f"{value:g}"))
            elif vec.unit == "ratio" and value > 1:
                self.out.scale_mixes.append(ScaleMix(op, "ratio", f"{value:g}"))


def _scaled(measure: Measure | None, op: str, scalar: _Value, scalar_first: bool) -> Measure | None:
    """The measure after `vector op number` (or `number op vector`)."""
    if measure is None:
        return None
    if op in ("+", "-") or op in COMPARISONS:
        return measure
    if scalar.number is None or op not in ("*", "/") or (op == "/" and scalar_first):
        return None
    if op == "/" and scalar.number == 0:
        return None
    factor = scalar.number if op == "*" else 1 / scalar.number
    return replace(measure, factor=measure.factor * factor)


def _fold(op: str, a: float | None, b: float | None) -> float | None:
    """`1024 * 1024`, `2 ^ 20`: constant arithmetic, so a factor written either way reads
    the same."""
    if a is None or b is None:
        return None
    try:
        if op == "+":
            return a + b
        if op == "-":
            return a - b
        if op == "*":
            return a * b
        if op == "/":
            return a / b
        if op == "^":
            return float(a**b)
    except (ArithmeticError, ValueError):
        return None
    return None


def _is_one(lhs: _Value, rhs: _Value) -> bool:
    return 1.0 in (lhs.number, rhs.number)


def _guess_unit(name: str | None) -> str | None:
    """Scale of exporter series the catalogue does not describe (seed for open files)."""
    if not name:
        return None
    if name.startswith("DCGM_FI_DEV_") and name.endswith("_UTIL"):
        return "percent"
    if name.startswith("DCGM_FI_PROF_") and (name.endswith("_ACTIVE") or name.endswith("_RATIO")):
        return "ratio"
    if name.endswith("_ratio"):
        return "ratio"
    if name.endswith("_percent"):
        return "percent"
    return None


def analyze(expr: str, catalogue: Mapping[str, MetricFacts]) -> Analysis:
    """Label-flow facts of one expression; raises PromQLSyntaxError if it does not parse."""
    walker = _Walker(catalogue)
    value = walker.eval(parse(expr))
    result = walker.out
    result.labels = value.labels
    result.removed = value.removed if value.labels is None else frozenset()
    result.measure = value.measure
    result.kind = value.kind
    result.type = value.type
    result.unit = value.unit
    result.metrics = tuple(sorted(walker.metrics))
    return result


def _string_literal(node: Any) -> str | None:
    """The value of a string literal, through any parentheses; None for anything else."""
    while type(node).__name__ == "ParenExpr":
        node = node.expr
    if type(node).__name__ == "StringLiteral":
        return str(node.val)
    return None
