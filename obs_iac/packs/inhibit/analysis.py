"""What an inhibit edge really touches: the labels each generated alert carries, and which
alerts each side of an edge can match.

Label flow is conservative: ``guaranteed`` holds only labels every output series of an
expression carries; ``exact`` says whether we know the full label set (every metric in the
expression is in the catalogue or is a recording rule we can follow). A label outside
``guaranteed`` on an ``exact`` flow is certainly absent, which Alertmanager reads as the
empty value.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from obs_iac.packs.inhibit.matchers import matches_value
from obs_iac.plan.model import AlertRule, InhibitEdge, Matcher, MetricSpec, Plan, RecordingRule
from obs_iac.plan.model import RuleGroup as PlanRuleGroup
from obs_iac.promql import parse, selector_metric

# Functions whose output carries no input labels.
_LABELLESS = {"vector", "time", "scalar", "pi", "absent", "absent_over_time", "day_of_month"}
_LABELLESS |= {"day_of_week", "day_of_year", "days_in_month", "hour", "minute", "month", "year"}
_SCALAR = {"time", "scalar", "pi"}


@dataclass(frozen=True)
class Flow:
    guaranteed: frozenset[str]
    exact: bool
    scalar: bool = False

    @staticmethod
    def of_scalar() -> Flow:
        return Flow(frozenset(), True, True)


class LabelFlow:
    """Output labels of PromQL expressions over a metric catalogue and recording rules."""

    def __init__(self, metrics: Mapping[str, MetricSpec], groups: Sequence[PlanRuleGroup]):
        self._metrics = metrics
        self._records: dict[str, list[RecordingRule]] = {}
        for group in groups:
            for rule in group.rules:
                if isinstance(rule, RecordingRule):
                    self._records.setdefault(rule.record, []).append(rule)
        self._cache: dict[str, Flow] = {}
        self._visiting: set[str] = set()

    def expr(self, text: str) -> Flow:
        if text not in self._cache:
            try:
                node = parse(text)
            except ValueError:
                return Flow(frozenset(), False)
            self._cache[text] = self._node(node)
        return self._cache[text]

    def _metric(self, name: str) -> Flow:
        spec = self._metrics.get(name)
        if spec is not None:
            return Flow(frozenset(spec.labels) - {"__name__"}, True)
        rules = self._records.get(name)
        if not rules or name in self._visiting:
            return Flow(frozenset(), False)
        self._visiting.add(name)
        try:
            flows = [self.expr(r.expr) for r in rules]
        finally:
            self._visiting.discard(name)
        # Several services may record the same name: only labels all of them give count.
        guaranteed = frozenset.intersection(
            *[f.guaranteed | frozenset(r.labels) for f, r in zip(flows, rules, strict=True)]
        )
        return Flow(guaranteed, all(f.exact for f in flows))

    def _node(self, node: Any) -> Flow:
        kind = type(node).__name__
        if kind in ("NumberLiteral", "StringLiteral"):
            return Flow.of_scalar()
        if kind == "VectorSelector":
            name = selector_metric(node)
            base = self._metric(name) if name else Flow(frozenset(), False)
            pinned = {
                m.name
                for m in node.matchers.matchers
                if str(m.op) in ("MatchOp.Equal", "=") and m.value and m.name != "__name__"
            }
            return Flow(base.guaranteed | pinned, base.exact)
        if kind == "MatrixSelector":
            return self._node(node.vector_selector)
        if kind in ("ParenExpr", "UnaryExpr", "SubqueryExpr"):
            return self._node(node.expr)
        if kind == "AggregateExpr":
            inner = self._node(node.expr)
            op = str(node.op)
            if op in ("topk", "bottomk", "limitk", "limit_ratio"):
                return Flow(inner.guaranteed, inner.exact)
            mod = node.modifier
            if mod is None:
                return Flow(frozenset(), True)
            labels = frozenset(mod.labels)
            if str(mod.type).endswith("Without"):
                return Flow(inner.guaranteed - labels, inner.exact)
            if op == "count_values" and node.param is not None:
                labels |= {str(getattr(node.param, "val", ""))} - {""}
            return Flow(inner.guaranteed & labels, inner.exact)
        if kind == "Call":
            return self._call(node)
        if kind == "BinaryExpr":
            return self._binary(node)
        return Flow(frozenset(), False)

    def _call(self, node: Any) -> Flow:
        name = node.func.name
        if name in _SCALAR:
            return Flow.of_scalar()
        if name in _LABELLESS:
            return Flow(frozenset(), True)
        for arg in node.args:
            flow = self._node(arg)
            if not flow.scalar:
                if name == "histogram_quantile":
                    return Flow(flow.guaranteed - {"le"}, flow.exact)
                return Flow(flow.guaranteed, flow.exact)
        return Flow.of_scalar()

    def _binary(self, node: Any) -> Flow:
        lhs, rhs = self._node(node.lhs), self._node(node.rhs)
        if lhs.scalar and rhs.scalar:
            return Flow.of_scalar()
        if lhs.scalar or rhs.scalar:
            vec = rhs if lhs.scalar else lhs
            return Flow(vec.guaranteed, vec.exact)
        op = str(node.op)
        exact = lhs.exact and rhs.exact
        if op in ("and", "unless"):
            return Flow(lhs.guaranteed, lhs.exact)
        if op == "or":
            return Flow(lhs.guaranteed & rhs.guaranteed, exact)
        mod = node.modifier
        card = str(mod.card) if mod is not None else "OneToOne"
        matching = mod.matching if mod is not None else None
        include = frozenset(getattr(mod, "group_labels", None) or ()) if mod is not None else None
        if card.endswith("ManyToOne") or card.endswith("OneToMany"):
            many, one = (lhs, rhs) if card.endswith("ManyToOne") else (rhs, lhs)
            inc = include or frozenset()
            # A group_x label missing on the "one" side is deleted from the result.
            return Flow((many.guaranteed - inc) | (inc & one.guaranteed), exact)
        if matching is None:
            return Flow(lhs.guaranteed, exact)
        labels = frozenset(matching.labels)
        if str(matching.type).endswith("Include"):
            return Flow(lhs.guaranteed & labels, exact)
        return Flow(lhs.guaranteed - labels, exact)


@dataclass(frozen=True, eq=False)
class AlertInfo:
    """One generated alert as Alertmanager will see it."""

    service: str
    name: str
    static: Mapping[str, str]  # rule labels + alertname: values known exactly
    flow: Flow  # labels of the expression's output series

    @property
    def key(self) -> tuple[str, str]:
        return (self.service, self.name)

    @property
    def severity(self) -> str | None:
        return self.static.get("severity")

    def has_label(self, name: str) -> bool:
        return name in self.static or name in self.flow.guaranteed

    def label_state(self, name: str) -> Literal["present", "absent", "unknown"]:
        if self.has_label(name):
            return "present"
        return "absent" if self.flow.exact else "unknown"

    def all_labels(self) -> frozenset[str]:
        return frozenset(self.static) | self.flow.guaranteed

    def may_match(self, matcher: Matcher) -> bool:
        """False only when the matcher certainly rejects every instance of this alert."""
        if matcher.name in self.static:
            return matches_value(matcher, self.static[matcher.name])
        if self.label_state(matcher.name) == "absent":
            return matches_value(matcher, "")
        return True

    def matches_all(self, matchers: Iterable[Matcher]) -> bool:
        return all(self.may_match(m) for m in matchers)


class AlertIndex:
    """Every generated alert, and which of them each side of an edge can match."""

    def __init__(self, metrics: Iterable[MetricSpec], groups: Sequence[PlanRuleGroup]):
        self.flow = LabelFlow({m.name: m for m in metrics}, groups)
        alerts: list[AlertInfo] = []
        for group in groups:
            for rule in group.rules:
                if isinstance(rule, AlertRule):
                    alerts.append(self._info(group.service, rule))
        self.alerts: tuple[AlertInfo, ...] = tuple(sorted(alerts, key=lambda a: a.key))

    @classmethod
    def of_plan(cls, plan: Plan) -> AlertIndex:
        return cls(plan.metrics, plan.rule_groups)

    def _info(self, service: str, rule: AlertRule) -> AlertInfo:
        static = {**rule.labels, "alertname": rule.alert}
        return AlertInfo(service, rule.alert, static, self.flow.expr(rule.expr))

    @property
    def names(self) -> frozenset[str]:
        return frozenset(a.name for a in self.alerts)

    def matching(self, matchers: Sequence[Matcher]) -> tuple[AlertInfo, ...]:
        return tuple(a for a in self.alerts if a.matches_all(matchers))

    def sources(self, edge: InhibitEdge) -> tuple[AlertInfo, ...]:
        return self.matching(edge.source_matchers)

    def targets(self, edge: InhibitEdge) -> tuple[AlertInfo, ...]:
        return self.matching(edge.target_matchers)

    def pairs(self, edge: InhibitEdge) -> list[tuple[AlertInfo, AlertInfo]]:
        """(source, target) alert pairs the edge can connect, self-pairs excluded."""
        return [(s, t) for s in self.sources(edge) for t in self.targets(edge) if s.key != t.key]
