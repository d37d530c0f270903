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
from functools import cached_property
from typing import Any, Literal

from obs_iac.packs.inhibit.matchers import literal_values, matches_value
from obs_iac.plan import views
from obs_iac.plan.model import AlertRule, InhibitEdge, Matcher, MetricSpec, Plan, RecordingRule
from obs_iac.plan.model import RuleGroup as PlanRuleGroup
from obs_iac.promql import parse, selector_metric

# Functions that can rewrite a label's value: known values do not survive them.
_RELABEL = {"label_replace", "label_join"}
# Functions whose output carries no input labels.
_LABELLESS = {"vector", "time", "scalar", "pi", "absent", "absent_over_time", "day_of_month"}
_LABELLESS |= {"day_of_week", "day_of_year", "days_in_month", "hour", "minute", "month", "year"}
_SCALAR = {"time", "scalar", "pi"}


Values = frozenset[tuple[str, str]]
_NO_VALUES: Values = frozenset()


def _keep(values: Values, labels: frozenset[str]) -> Values:
    return frozenset((k, v) for k, v in values if k in labels)


@dataclass(frozen=True)
class Flow:
    guaranteed: frozenset[str]
    exact: bool
    scalar: bool = False
    # (label, value) pairs every output series carries with exactly that value: the
    # `business_sla_id="..."` a selector pins. Only labels in ``guaranteed`` appear here.
    values: Values = _NO_VALUES

    def value(self, label: str) -> str | None:
        for k, v in self.values:
            if k == label:
                return v
        return None

    def keep_from(self, source: Flow, overwritten: set[str]) -> Flow:
        """Values of ``source`` for this flow's labels, except the overwritten ones."""
        kept = _keep(source.values, self.guaranteed - overwritten)
        return Flow(self.guaranteed, self.exact, self.scalar, kept)

    def keep(self, guaranteed: frozenset[str], exact: bool) -> Flow:
        """This flow's known values, limited to the labels that survive."""
        return Flow(guaranteed, exact, values=_keep(self.values, guaranteed))

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
        self._recorded: dict[str, Flow] = {}
        self._cut = False

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
            self._cut = self._cut or bool(rules)
            return Flow(frozenset(), False)
        if name in self._recorded:
            return self._recorded[name]
        # Every service's rules read the fleet-wide recording rules of the same name, so
        # the result is kept, unless a recursion cut made it depend on where we came from.
        outer_cut, self._cut = self._cut, False
        self._visiting.add(name)
        try:
            flows = [self.expr(r.expr) for r in rules]
        finally:
            self._visiting.discard(name)
        flow = self._merge(flows, rules)
        if not self._cut:
            self._recorded[name] = flow
        self._cut = self._cut or outer_cut
        return flow

    @staticmethod
    def _merge(flows: Sequence[Flow], rules: Sequence[RecordingRule]) -> Flow:
        # Several services may record the same name: only labels all of them give count.
        guaranteed = frozenset.intersection(
            *[f.guaranteed | frozenset(r.labels) for f, r in zip(flows, rules, strict=True)]
        )
        # A rule's static label overwrites the expression's value for that label.
        per_rule = [
            frozenset((k, v) for k, v in f.values if k not in r.labels)
            | frozenset(r.labels.items())
            for f, r in zip(flows, rules, strict=True)
        ]
        values = _keep(frozenset.intersection(*per_rule), guaranteed)
        return Flow(guaranteed, all(f.exact for f in flows), values=values)

    def _node(self, node: Any) -> Flow:
        kind = type(node).__name__
        if kind in ("NumberLiteral", "StringLiteral"):
            return Flow.of_scalar()
        if kind == "VectorSelector":
            name = selector_metric(node)
            base = self._metric(name) if name else Flow(frozenset(), False)
            pins = {
                (m.name, m.value)
                for m in node.matchers.matchers
                if str(m.op) in ("MatchOp.Equal", "=") and m.value and m.name != "__name__"
            }
            pinned = {k for k, _ in pins}
            values = frozenset(pins) | frozenset((k, v) for k, v in base.values if k not in pinned)
            if len({k for k, _ in values}) != len(values):
                # Two pins of one label select nothing; keep no value rather than guess.
                values = frozenset((k, v) for k, v in values if k not in pinned)
            return Flow(base.guaranteed | pinned, base.exact, values=values)
        if kind == "MatrixSelector":
            return self._node(node.vector_selector)
        if kind in ("ParenExpr", "UnaryExpr", "SubqueryExpr"):
            return self._node(node.expr)
        if kind == "AggregateExpr":
            inner = self._node(node.expr)
            op = str(node.op)
            if op in ("topk", "bottomk", "limitk", "limit_ratio"):
                return inner.keep(inner.guaranteed, inner.exact)
            mod = node.modifier
            if mod is None:
                return Flow(frozenset(), True)
            labels = frozenset(mod.labels)
            if str(mod.type).endswith("Without"):
                return inner.keep(inner.guaranteed - labels, inner.exact)
            if op == "count_values" and node.param is not None:
                counted = {str(getattr(node.param, "val", ""))} - {""}
                labels |= counted
                # count_values writes the counted label's value itself.
                return Flow(inner.guaranteed & labels, inner.exact).keep_from(inner, counted)
            return inner.keep(inner.guaranteed & labels, inner.exact)
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
                if name in _RELABEL:
                    return Flow(flow.guaranteed, flow.exact)
                if name == "histogram_quantile":
                    return flow.keep(flow.guaranteed - {"le"}, flow.exact)
                return flow.keep(flow.guaranteed, flow.exact)
        return Flow.of_scalar()

    def _binary(self, node: Any) -> Flow:
        lhs, rhs = self._node(node.lhs), self._node(node.rhs)
        if lhs.scalar and rhs.scalar:
            return Flow.of_scalar()
        if lhs.scalar or rhs.scalar:
            vec = rhs if lhs.scalar else lhs
            return vec.keep(vec.guaranteed, vec.exact)
        op = str(node.op)
        exact = lhs.exact and rhs.exact
        if op in ("and", "unless"):
            return lhs.keep(lhs.guaranteed, lhs.exact)
        if op == "or":
            both = lhs.guaranteed & rhs.guaranteed
            return Flow(both, exact, values=_keep(lhs.values & rhs.values, both))
        mod = node.modifier
        card = str(mod.card) if mod is not None else "OneToOne"
        matching = mod.matching if mod is not None else None
        include = frozenset(getattr(mod, "group_labels", None) or ()) if mod is not None else None
        if card.endswith("ManyToOne") or card.endswith("OneToMany"):
            many, one = (lhs, rhs) if card.endswith("ManyToOne") else (rhs, lhs)
            inc = include or frozenset()
            # A group_x label missing on the "one" side is deleted from the result.
            guaranteed = (many.guaranteed - inc) | (inc & one.guaranteed)
            values = _keep(many.values, many.guaranteed - inc) | _keep(one.values, inc)
            return Flow(guaranteed, exact, values=_keep(values, guaranteed))
        if matching is None:
            return lhs.keep(lhs.guaranteed, exact)
        labels = frozenset(matching.labels)
        if str(matching.type).endswith("Include"):
            return lhs.keep(lhs.guaranteed & labels, exact)
        return lhs.keep(lhs.guaranteed - labels, exact)


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
        known = self.flow.value(matcher.name)
        if known is not None:
            return matches_value(matcher, known)
        if self.label_state(matcher.name) == "absent":
            return matches_value(matcher, "")
        return True

    def matches_all(self, matchers: Iterable[Matcher]) -> bool:
        return all(self.may_match(m) for m in matchers)


class AlertIndex:
    """Every generated alert, and which of them each side of an edge can match.

    Edges are scoped (``service="..."``, ``business_sla_id="..."``), so each side is
    answered from an index of known label values instead of a scan of the whole fleet;
    the index only narrows the candidates, and every candidate is still checked with
    :meth:`AlertInfo.matches_all`, so the answer is the same as a full scan.
    """

    def __init__(self, metrics: Iterable[MetricSpec], groups: Sequence[PlanRuleGroup]):
        self.flow = LabelFlow({m.name: m for m in metrics}, groups)
        alerts: list[AlertInfo] = []
        for group in groups:
            for rule in group.rules:
                if isinstance(rule, AlertRule):
                    alerts.append(self._info(group.service, rule))
        self.alerts: tuple[AlertInfo, ...] = tuple(sorted(alerts, key=lambda a: a.key))
        self._known: dict[tuple[str, str], list[int]] = {}
        self._labels: set[str] = set()
        for i, alert in enumerate(self.alerts):
            for label, value in (*alert.static.items(), *alert.flow.values):
                if label not in alert.static or (label, value) in alert.static.items():
                    self._known.setdefault((label, value), []).append(i)
                self._labels.add(label)
        self._vague: dict[str, tuple[frozenset[int], frozenset[int]]] = {}
        self._matching: dict[tuple[Matcher, ...], tuple[AlertInfo, ...]] = {}
        self._by_identity: dict[int, tuple[Sequence[Matcher], tuple[AlertInfo, ...]]] = {}
        self._pairs: dict[int, tuple[InhibitEdge, tuple[tuple[AlertInfo, AlertInfo], ...]]] = {}
        self._by_service: dict[str, tuple[AlertInfo, ...]] | None = None

    @classmethod
    def of_plan(cls, plan: Plan) -> AlertIndex:
        # Every inhibit generator and lint rule asks for the index of the same plan; a
        # plan is frozen, so the last one built is reused (one slot: nothing piles up).
        if not _LAST or _LAST[0][0] is not plan:
            _LAST[:] = [(plan, cls(plan.metrics, plan.rule_groups))]
        return _LAST[0][1]

    def _info(self, service: str, rule: AlertRule) -> AlertInfo:
        static = {**rule.labels, "alertname": rule.alert}
        return AlertInfo(service, rule.alert, static, self.flow.expr(rule.expr))

    @cached_property
    def names(self) -> frozenset[str]:
        return frozenset(a.name for a in self.alerts)

    def of_service(self, service: str) -> tuple[AlertInfo, ...]:
        """The alerts of one service, in index order."""
        if self._by_service is None:
            grouped: dict[str, list[AlertInfo]] = {}
            for alert in self.alerts:
                grouped.setdefault(alert.service, []).append(alert)
            self._by_service = {k: tuple(v) for k, v in grouped.items()}
        return self._by_service.get(service, ())

    def _unvalued(self, label: str) -> tuple[frozenset[int], frozenset[int]]:
        """Alerts without a known value for ``label``: (absent, may carry any value)."""
        if label not in self._vague:
            absent: set[int] = set()
            unknown: set[int] = set()
            for i, alert in enumerate(self.alerts):
                if label in alert.static or alert.flow.value(label) is not None:
                    continue
                if alert.label_state(label) == "absent":
                    absent.add(i)
                else:
                    unknown.add(i)
            self._vague[label] = (frozenset(absent), frozenset(unknown))
        return self._vague[label]

    def _candidates(self, matcher: Matcher) -> set[int] | None:
        """A superset of the alerts the matcher may match, or None when it cannot be
        narrowed (a negative or non-literal matcher)."""
        values = literal_values(matcher)
        if values is None:
            return None
        absent, unknown = self._unvalued(matcher.name)
        out = set(unknown)
        if "" in values:
            out |= absent
        for value in values:
            out.update(self._known.get((matcher.name, value), ()))
        return out

    def matching(self, matchers: Sequence[Matcher]) -> tuple[AlertInfo, ...]:
        # Every generator and lint rule asks about the same edges' matcher tuples; hashing
        # a tuple of frozen models hashes every field, so look the tuple up by identity
        # first. The entry holds the tuple itself, so its id cannot be reused meanwhile.
        same = self._by_identity.get(id(matchers))
        if same is not None and same[0] is matchers:
            return same[1]
        key = tuple(matchers)
        if key not in self._matching:
            narrowed: set[int] | None = None
            for matcher in matchers:
                found = self._candidates(matcher)
                if found is not None:
                    narrowed = found if narrowed is None else narrowed & found
            pool = (
                self.alerts if narrowed is None else tuple(self.alerts[i] for i in sorted(narrowed))
            )
            self._matching[key] = tuple(a for a in pool if a.matches_all(matchers))
        if type(matchers) is tuple:
            self._by_identity[id(matchers)] = (matchers, self._matching[key])
        return self._matching[key]

    def sources(self, edge: InhibitEdge) -> tuple[AlertInfo, ...]:
        return self.matching(edge.source_matchers)

    def targets(self, edge: InhibitEdge) -> tuple[AlertInfo, ...]:
        return self.matching(edge.target_matchers)

    def pairs(self, edge: InhibitEdge) -> list[tuple[AlertInfo, AlertInfo]]:
        """(source, target) alert pairs the edge can connect, self-pairs excluded."""
        # Memoised by identity like matching(); the entry keeps the edge alive.
        same = self._pairs.get(id(edge))
        if same is None or same[0] is not edge:
            found = tuple(
                (s, t) for s in self.sources(edge) for t in self.targets(edge) if s.key != t.key
            )
            same = self._pairs[id(edge)] = (edge, found)
        return list(same[1])


_LAST: list[tuple[Plan, AlertIndex]] = []
_VIEWS: list[tuple[Plan, Any]] = []


def inhibit_view(shard: Plan) -> Any:
    """What the inhibit analysis of a plan reads from one service: its edges, its rules as
    the alert index sees them (see AlertIndex), and its suppressions (the lint rules'
    only extra). The generators share it: a wider view only costs a miss now and then."""
    # Eleven generators and rules ask for it on the same shard, and the engine encodes a
    # view it has already seen (the same object) once. One shard at a time, as of_plan.
    if not _VIEWS or _VIEWS[0][0] is not shard:
        view = {
            "services": views.services(shard, "suppressions"),
            "edges": views.dump(shard.inhibit_edges),
            "rules": views.rule_shapes(shard),
        }
        _VIEWS[:] = [(shard, view)]
    return _VIEWS[0][1]
