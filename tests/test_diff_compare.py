"""The semantic model and the risk rules, on hand-made entities."""

from __future__ import annotations

from typing import Any

import pytest

from obs_iac.diff.compare import compare, number_changes, risk_flags
from obs_iac.diff.model import (
    FLEET,
    Entity,
    EntityId,
    SemanticModel,
    build_model,
    duration,
    partners,
    squash,
)


def alert(service: str, name: str, severity: str, expr: str = "up == 0") -> Entity:
    fields = {"expr": expr, "for": "0s", "labels": {"severity": severity, "service": service}}
    return Entity(EntityId("alert", service, name), "x", fields, {"expr": expr})


def model(*entities: Entity) -> SemanticModel:
    return {e.id: e for e in entities}


def edge(target: list[str], key: str = "node-down-mutes-gpu") -> Entity:
    fields = {"source_matchers": ['alertname="NodeDown"'], "target_matchers": target, "equal": []}
    return Entity(EntityId("inhibit-edge", FLEET, key), "plan", fields)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("30m", "30m"), ("1800s", "30m"), ("0h30m", "30m"), ("", "0s"), ("90m", "1h30m")],
)
def test_duration_spellings(raw: str, expected: str) -> None:
    assert duration(raw) == expected


def test_squash_keeps_strings() -> None:
    assert squash('a{x="two  spaces"}   >\n  5') == 'a{x="two  spaces"} > 5'


def test_number_changes() -> None:
    assert number_changes('a{x="1"} < 0.1', 'a{x="1"} < 0.05') == [("threshold", "0.1", "0.05")]
    assert number_changes("rate(a[5m]) > 3", "rate(a[10m]) > 3") == [("duration", "5m", "10m")]
    assert number_changes("a > 1", "b > 1") is None
    assert number_changes('a{x="1"} > 1', 'a{x="2"} > 1') is None  # numbers in strings count


def test_severity_lowered_and_alert_removed() -> None:
    before = model(alert("s", "A", "critical"), alert("s", "B", "warning"))
    after = model(alert("s", "A", "warning"))
    changes = compare(before, after)
    flags = risk_flags(changes, after, None, {})
    assert [(f.diagnostic.code, f.diagnostic.object_path) for f in flags] == [
        ("diff/severity-lowered", ("s", "alert", "A")),
        ("diff/alert-removed", ("s", "alert", "B")),
    ]
    raised = risk_flags(compare(after, before), before, None, {})
    assert raised == []  # raising a severity and adding an alert are not risks


def test_new_inhibit_edge_that_can_mute_a_critical_alert() -> None:
    alerts = [alert("s", "Hot", "critical"), alert("s", "Idle", "warning")]
    after = model(*alerts, edge(['severity=~"critical|warning"']))
    flags = risk_flags(compare(model(*alerts), after), after, None, {})
    assert [f.diagnostic.code for f in flags] == ["diff/inhibit-mutes-page"]
    assert "s/Hot" in flags[0].diagnostic.message
    assert "Idle" not in flags[0].diagnostic.message
    # an edge that only mutes warnings is no paging risk
    harmless = model(*alerts, edge(['severity="warning"']))
    assert risk_flags(compare(model(*alerts), harmless), harmless, None, {}) == []


def test_removed_dcgm_field_still_queried() -> None:
    used = Entity(EntityId("collector", "s", "DCGM_FI_DEV_GPU_TEMP"), "c", {"type": "gauge"})
    spare = Entity(EntityId("collector", "s", "DCGM_FI_DEV_MEM_COPY_UTIL"), "c", {"type": "gauge"})
    rule = alert("s", "Hot", "critical", 'DCGM_FI_DEV_GPU_TEMP{business_sla_id="s"} > 85')
    flags = risk_flags(compare(model(used, spare, rule), model(rule)), model(rule), None, {})
    assert [(f.diagnostic.code, f.diagnostic.severity.label) for f in flags] == [
        ("diff/field-still-used", "error")
    ]
    assert "DCGM_FI_DEV_GPU_TEMP" in flags[0].diagnostic.message
    assert "Hot" in flags[0].diagnostic.message


def test_dropped_selector_label() -> None:
    before = model(alert("s", "Hot", "critical", 'temp{business_sla_id="s"} > 85'))
    after = model(alert("s", "Hot", "critical", "temp > 85"))
    flags = risk_flags(compare(before, after), after, None, {})
    assert [f.diagnostic.code for f in flags] == ["diff/label-dropped"]
    assert "business_sla_id (business.sla_id)" in flags[0].diagnostic.message


def test_twins_are_read_once() -> None:
    assert partners("prometheus/rules/a.rules.yml") == {"kubernetes/prometheusrules/a.yaml"}
    assert partners("kubernetes/prometheusrules/a.yaml") == {"prometheus/rules/a.rules.yml"}
    rules = b"groups:\n- name: obs-iac.a.gpu\n  rules:\n  - alert: X\n    expr: up == 0\n"
    crd = (
        b"apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\n"
        b"metadata: {name: obs-iac-a, namespace: monitoring}\nspec:\n"
        + b"\n".join(b"  " + line for line in rules.splitlines())
        + b"\n"
    )
    both = {"prometheus/rules/a.rules.yml": rules, "kubernetes/prometheusrules/a.yaml": crd}
    only_crd = {"kubernetes/prometheusrules/a.yaml": crd}
    kinds: Any = lambda m: sorted((e.id.kind, e.id.key, e.path) for e in m.values())  # noqa: E731
    assert kinds(build_model(both, both, ["a"])) == [
        ("alert", "X", "prometheus/rules/a.rules.yml"),
        ("object", "PrometheusRule/monitoring/obs-iac-a", "kubernetes/prometheusrules/a.yaml"),
        ("output", "prometheus/rules/a.rules.yml", "prometheus/rules/a.rules.yml"),
    ]
    # plain rule files switched off: the CRD carries the rules, and the diff is only that
    # the plain file is gone
    assert [e.id.key for e in build_model(only_crd, only_crd, ["a"]).values()] == [
        "PrometheusRule/monitoring/obs-iac-a",
        "X",
    ]
    changes = compare(build_model(both, both, ["a"]), build_model(only_crd, both, ["a"]))
    assert [(c.id.kind, c.id.key, c.change) for c in changes] == [
        ("output", "prometheus/rules/a.rules.yml", "removed")
    ]


def test_inhibit_rules_file_edges_are_named_by_their_comments() -> None:
    def text(target: str) -> bytes:
        return (
            "# Generated by obs-iac.\ninhibit_rules:\n"
            "# gpu-xid-mutes-util (recomm-v2, pack gpu): a broken GPU is not idle\n"
            '- source_matchers:\n  - alertname="GpuXidError"\n'
            f"  target_matchers:\n  - {target}\n  equal:\n  - resource_gpu_id\n"
        ).encode()

    path = "alertmanager/inhibit_rules.yml"
    old = {path: text('alertname="GpuUtilizationLow"')}
    new = {path: text('severity=~"warning|critical"')}
    hot = alert("recomm-v2", "GpuTemperatureHigh", "critical")
    before = build_model(old, old, ["recomm-v2"])
    after = build_model(new, new, ["recomm-v2"])
    assert [e.id for e in before.values()] == [
        EntityId("inhibit-edge", "recomm-v2", "gpu-xid-mutes-util")
    ]
    changes = compare(before, after)
    assert [(c.id.key, c.summary) for c in changes] == [
        (
            "gpu-xid-mutes-util",
            'target_matchers[] alertname="GpuUtilizationLow" -> severity=~"warning|critical"',
        )
    ]
    after[hot.id] = hot
    flags = risk_flags(changes, after, None, {})
    assert [f.diagnostic.code for f in flags] == ["diff/inhibit-mutes-page"]
    assert "recomm-v2/GpuTemperatureHigh" in flags[0].diagnostic.message


def test_markdown_fits_a_comment() -> None:
    from obs_iac.diff.compare import DiffResult
    from obs_iac.diff.report import to_markdown

    before = model(*(alert(f"svc-{i:04d}", "Hot", "critical", "t > 85") for i in range(400)))
    after = model(*(alert(f"svc-{i:04d}", "Hot", "critical", "t > 80") for i in range(400)))
    result = DiffResult("generated/", compare(before, after), [])
    full = to_markdown(result, limit=10**9)
    assert "| svc-0399 | 0 | 0 | 1 | 0 | 0 |" in full and "_Cut to fit" not in full
    cut = to_markdown(result, limit=20_000)
    assert len(cut) <= 20_000
    assert cut.startswith(full[: full.index("| svc-0000")])  # totals and summary head kept
    assert "_Cut to fit a comment:" in cut and "`obs-iac diff --format json`" in cut


def test_log_pipeline_losing_a_canonical_label() -> None:
    def pipeline(labels: list[str]) -> Entity:
        fields = {"stream_labels": labels, "structured_metadata": ["resource_gpu_id"]}
        return Entity(EntityId("log-pipeline", "s", "logs"), "plan", fields)

    before = model(pipeline(["business_sla_id", "k8s_namespace_name"]))
    after = model(pipeline(["k8s_namespace_name"]))
    flags = risk_flags(compare(before, after), after, None, {})
    assert [(f.diagnostic.code, f.diagnostic.severity.label) for f in flags] == [
        ("diff/label-dropped", "error")
    ]
    assert "business_sla_id" in flags[0].diagnostic.message


def test_inhibit_edge_losing_an_equal_label() -> None:
    def with_equal(equal: list[str]) -> Entity:
        fields = {
            "source_matchers": ['alertname="NodeDown"'],
            "target_matchers": ['severity="warning"'],
            "equal": equal,
        }
        return Entity(EntityId("inhibit-edge", "s", "node-down"), "plan", fields)

    before = model(with_equal(["business_sla_id", "host_name"]))
    after = model(with_equal(["host_name"]))
    flags = risk_flags(compare(before, after), after, None, {})
    assert [(f.diagnostic.code, f.diagnostic.severity.label) for f in flags] == [
        ("diff/label-dropped", "error")
    ]
    assert "no longer requires equal business_sla_id" in flags[0].diagnostic.message
