"""Every inhibit lint rule: the committed examples are clean (good case), and one planted
mistake per rule is reported (bad case)."""

from __future__ import annotations

import pytest

from obs_iac.config import RepoConfig
from obs_iac.diagnostics import Diagnostic, Severity
from obs_iac.labels import LabelNaming
from obs_iac.packs.inhibit import lint
from obs_iac.packs.inhibit.analysis import AlertIndex, LabelFlow
from obs_iac.packs.inhibit.matchers import parse_matcher, provably_disjoint
from obs_iac.plan.model import InhibitEdge, Matcher, MetricSpec, MetricType, Plan
from obs_iac.plugins import LintContext, LintRule, NoConfig
from tests.inhibit_support import example_render

SVC = "recomm-v2"


def run(rule: type[LintRule], plan: Plan) -> list[Diagnostic]:
    ctx = LintContext(naming=LabelNaming(plan.naming), repo=RepoConfig(), settings=NoConfig())
    return list(rule().check(plan, (), ctx))


def m(text: str) -> Matcher:
    return parse_matcher(text)


def edge(name: str, src: list[str], dst: list[str], equal: tuple[str, ...]) -> InhibitEdge:
    return InhibitEdge(
        name=name,
        service=SVC,
        pack="test",
        reason="planted by a test",
        source_matchers=tuple(m(s) for s in [*src, f'service="{SVC}"']),
        target_matchers=tuple(m(s) for s in [*dst, f'service="{SVC}"']),
        equal=equal,
    )


PER_GPU = ("business_sla_id", "host_name", "resource_gpu_id")


def with_edges(*edges: InhibitEdge) -> Plan:
    plan = example_render().plan
    return plan.model_copy(update={"inhibit_edges": (*plan.inhibit_edges, *edges)})


@pytest.mark.parametrize("rule", lint.ALL_RULES, ids=lambda r: r.code)
def test_good_examples_are_clean(rule: type[LintRule]) -> None:
    plan = example_render().plan
    assert plan.inhibit_edges, "the examples must carry edges for the good case to mean much"
    assert run(rule, plan) == []


def test_unknown_alert_with_did_you_mean() -> None:
    bad = edge(
        "typo", ['alertname="GpuTemperatureHihg"'], ['alertname="GpuUtilizationLow"'], PER_GPU
    )
    found = run(lint.UnknownAlert, with_edges(bad))
    assert len(found) == 1
    assert "'GpuTemperatureHihg'" in found[0].message
    assert "did you mean 'GpuTemperatureHigh'" in (found[0].hint or "")
    assert found[0].severity is Severity.WARNING
    # and no-match leaves it to unknown-alert instead of reporting twice
    assert run(lint.NoMatch, with_edges(bad)) == []


def test_latent_overlap() -> None:
    # No generated alert has this layer, but a future one could match both sides.
    bad = edge("loose", ['severity="critical"', 'layer="storage"'], ['layer=~".+"'], PER_GPU)
    found = run(lint.Overlap, with_edges(bad))
    assert [d.code for d in found] == ["inhibit/overlap"]
    assert found[0].severity is Severity.ERROR


def test_self_inhibition() -> None:
    bad = edge(
        "both-sides",
        ['alertname=~"GpuTemperatureHigh|GpuXidError"'],
        ['alertname=~"GpuTemperatureHigh|GpuUtilizationLow"'],
        PER_GPU,
    )
    found = run(lint.SelfInhibition, with_edges(bad))
    assert len(found) == 1 and "GpuTemperatureHigh" in found[0].message
    assert "GpuXidError" not in found[0].message
    assert run(lint.Overlap, with_edges(bad)) == []  # reported once, by the concrete rule


def test_equal_label_missing_on_one_side() -> None:
    bad = edge("gpu-less", ['alertname="GpuNodeDown"'], ['alertname="GpuXidError"'], PER_GPU)
    found = run(lint.EqualMissing, with_edges(bad))
    assert len(found) == 1
    assert "'resource_gpu_id'" in found[0].message and "GpuNodeDown" in found[0].message
    assert "never be paired" in found[0].message


def test_equal_label_missing_on_both_sides_turns_global() -> None:
    bad = edge(
        "nccl",
        ['alertname="GpuTemperatureHigh"'],
        ['alertname="GpuUtilizationLow"'],
        ("nccl_rank",),
    )
    found = run(lint.EqualMissing, with_edges(bad))
    assert len(found) == 1 and "global" in found[0].message


def test_cycle() -> None:
    back = edge(
        "back", ['alertname="GpuUtilizationLow"'], ['alertname="GpuTemperatureHigh"'], PER_GPU
    )
    found = run(lint.Cycle, with_edges(back))
    assert len(found) == 1
    assert "GpuTemperatureHigh" in found[0].message and "GpuUtilizationLow" in found[0].message
    assert "back" in found[0].message and "gpu-hot-mutes-util-low" in found[0].message


def test_severity_order_is_a_warning() -> None:
    bad = edge(
        "quiet-mutes-loud", ['alertname="GpuUtilizationLow"'], ['alertname="GpuXidError"'], PER_GPU
    )
    found = run(lint.SeverityOrder, with_edges(bad))
    assert len(found) == 1 and found[0].severity is Severity.WARNING
    assert "GpuUtilizationLow (warning) mutes GpuXidError (critical)" in found[0].message


def test_no_match() -> None:
    bad = edge(
        "hardware-vs-nothing", ['alertname="GpuXidError"'], ['layer="storage"'], ("host_name",)
    )
    found = run(lint.NoMatch, with_edges(bad))
    assert len(found) == 1 and "target matchers match no generated alert" in found[0].message


def test_suppression_by_edge_name() -> None:
    bad = edge(
        "quiet-mutes-loud", ['alertname="GpuUtilizationLow"'], ['alertname="GpuXidError"'], PER_GPU
    )
    plan = with_edges(bad)
    services = tuple(
        s.model_copy(
            update={
                "suppressions": (
                    {"code": "inhibit/severity-order", "reason": "ok", "target": bad.name},
                )
            }
        )
        if s.name == SVC
        else s
        for s in plan.services
    )
    assert run(lint.SeverityOrder, plan.model_copy(update={"services": services})) == []


def test_label_flow_follows_promql_semantics() -> None:
    metrics = {
        "a": MetricSpec(
            name="a", type=MetricType.GAUGE, unit="x", labels=("h", "g", "i"), source="t"
        ),
        "b": MetricSpec(name="b", type=MetricType.GAUGE, unit="x", labels=("i", "n"), source="t"),
    }
    flow = LabelFlow(metrics, ())
    assert flow.expr("sum by (h) (a)").guaranteed == {"h"}
    assert flow.expr("sum without (g) (a)").guaranteed == {"h", "i"}
    assert flow.expr("a * on (i) b").guaranteed == {"i"}
    assert flow.expr("a * on (i) group_left (n) b").guaranteed == {"h", "g", "i", "n"}
    assert flow.expr("a and on (i) b").guaranteed == {"h", "g", "i"}
    assert flow.expr("a or b").guaranteed == {"i"}
    assert flow.expr('rate(a{x="1"}[5m]) > 0').guaranteed == {"h", "g", "i", "x"}
    assert flow.expr("sum(a)").guaranteed == frozenset()
    assert flow.expr("sum(a)").exact
    assert not flow.expr("unknown_metric").exact


def test_node_down_alert_labels_are_host_level() -> None:
    index = AlertIndex.of_plan(example_render().plan)
    node = next(a for a in index.alerts if a.name == "GpuNodeDown")
    assert {"business_sla_id", "host_name", "instance"} <= node.flow.guaranteed
    assert node.label_state("resource_gpu_id") == "absent"


def test_disjointness_proof() -> None:
    assert provably_disjoint([m('alertname="A"')], [m('alertname=~"B|C"')]) == "alertname"
    assert provably_disjoint([m('alertname="A"')], [m('alertname!="B"')]) is None
    assert provably_disjoint([m('severity="page"')], [m('severity!="page"')]) == "severity"
    assert provably_disjoint([m('x=~"a.*"')], [m('x=~"ab"')]) is None
