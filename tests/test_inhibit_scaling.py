"""The inhibit analysis at fleet scale: known label values scope SLA-wide edges to their
own SLA, and the indexed lookup answers exactly what a scan of every alert answers."""

from __future__ import annotations

from obs_iac.packs.inhibit.analysis import AlertIndex, AlertInfo, LabelFlow
from obs_iac.packs.inhibit.matchers import parse_matcher
from obs_iac.plan.model import Matcher, MetricSpec, MetricType
from tests.inhibit_support import example_render


def scan(index: AlertIndex, matchers: list[Matcher]) -> tuple[AlertInfo, ...]:
    """The reference answer: every alert checked one by one."""
    return tuple(a for a in index.alerts if a.matches_all(matchers))


def test_selector_pins_label_values_through_the_expression() -> None:
    metrics = {
        "a": MetricSpec(name="a", type=MetricType.GAUGE, unit="x", labels=("h", "s"), source="t"),
        "b": MetricSpec(name="b", type=MetricType.GAUGE, unit="x", labels=("h", "s"), source="t"),
    }
    flow = LabelFlow(metrics, ())
    assert flow.expr('sum by (s) (rate(a{s="x"}[5m])) > 1').value("s") == "x"
    assert flow.expr('sum by (h) (a{s="x"})').value("s") is None
    assert flow.expr('a{s="x"} / on (h) b{s="y"}').value("s") is None
    assert flow.expr('a{s="x"} / ignoring (h) b').value("s") == "x"
    assert flow.expr('a{s="x"} * on (h) group_left () b{s="y"}').value("s") == "x"
    assert flow.expr('a * on (h) group_left (s) b{s="y"}').value("s") == "y"
    assert flow.expr('a{s="x"} or b{s="y"}').value("s") is None
    assert flow.expr('a{s="x"} or b{s="x"}').value("s") == "x"
    # label_replace can rewrite the pinned label, so its value is no longer known.
    assert flow.expr('label_replace(a{s="x"}, "s", "z", "", "")').value("s") is None
    assert flow.expr('a{s="x", s="y"}').value("s") is None


def test_sla_scoped_edge_touches_only_its_own_sla() -> None:
    plan = example_render().plan
    index = AlertIndex.of_plan(plan)
    slo_edges = [e for e in plan.inhibit_edges if e.name == "slo-page-inhibits-ticket"]
    assert len(slo_edges) == 2
    for edge in slo_edges:
        sla = next(m.value for m in edge.source_matchers if m.name == "business_sla_id")
        services = {s.name for s in plan.services if s.sla_id == sla}
        touched = {a.service for pair in index.pairs(edge) for a in pair}
        assert touched == services


def test_indexed_matching_equals_a_full_scan() -> None:
    plan = example_render().plan
    index = AlertIndex.of_plan(plan)
    sides = [list(e.source_matchers) for e in plan.inhibit_edges]
    sides += [list(e.target_matchers) for e in plan.inhibit_edges]
    # Negative, regex and absent-label matchers cannot be narrowed by the index.
    extra = (
        'severity!="critical"',
        'alertname=~"Gpu.*"',
        'slo_tier=""',
        'namespace=""',
        'alertname=~"GpuXidError|NcclCollectiveErrors"',
    )
    sides += [[parse_matcher(text)] for text in extra]
    sides += [[parse_matcher('service="recomm-v2"'), parse_matcher('slo_tier!="page"')]]
    for matchers in sides:
        assert index.matching(matchers) == scan(index, matchers), matchers
    assert any(index.matching(m) for m in sides)
