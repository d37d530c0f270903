"""Proof with real programs: amtool accepts every generated config, and a running
Alertmanager inhibits exactly what each generated edge says, and nothing more."""

from __future__ import annotations

import shutil
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from obs_iac import conventions
from obs_iac.labels import CANONICAL_KEYS
from obs_iac.packs.inhibit.analysis import AlertIndex, AlertInfo
from obs_iac.pipeline import open_workspace, render
from tests.inhibit_support import (
    MINIMAL,
    ROOT,
    amtool_check,
    config_with_rules,
    example_render,
    require_tool,
    running_alertmanager,
    text_of,
)
from tests.promtool_runs import assert_promtool_passes

# Realistic values for labels a DCGM-derived alert carries; canonical keys use their
# catalogue examples. Anything else gets "<label>-value" (still a non-empty value).
NATIVE = {
    "gpu": "0",
    "UUID": "GPU-8d4c1f5e-2b7a-4c1e-9f00-3a6b5c4d2e10",
    "device": "nvidia0",
    "modelName": "NVIDIA A100-SXM4-80GB",
    "job": "dcgm-exporter",
    "namespace": "gpu-operator",
    "pod": "dcgm-exporter-7xk2p",
    "container": "dcgm-exporter",
    "endpoint": "gpu-metrics",
    "exported_namespace": "recsys",
    "exported_pod": "trainer-0",
    "exported_container": "trainer",
    "pci_bus_id": "00000000:07:00.0",
}
CANONICAL = {k.classic: k.example for k in CANONICAL_KEYS}


def labels_for(alert: AlertInfo, pair: int) -> dict[str, str]:
    """The labels Alertmanager would receive for this alert, identity values unique per pair
    so that no two pairs can inhibit each other."""
    identity = {
        "host_name": f"gpu-node-{pair}",
        "Hostname": f"gpu-node-{pair}",
        "hostname": f"gpu-node-{pair}",
        "instance": f"10.0.{pair // 250}.{pair % 250 + 1}:9400",
        "nccl_group_id": f"group-{pair}",
    }
    out: dict[str, str] = {}
    # Only labels the alert really carries: adding one it lacks would hide exactly the
    # missing-label bug (absent == empty) this test exists to catch.
    for name in sorted(alert.flow.guaranteed):
        out[name] = identity.get(name) or CANONICAL.get(name) or NATIVE.get(name) or f"{name}-value"
    out.update(alert.static)
    return out


def _alert(labels: dict[str, str]) -> dict[str, Any]:
    return {"labels": labels, "annotations": {"summary": "obs-iac e2e"}}


def test_inhibit_rules_pass_amtool_check_config(tmp_path: Path) -> None:
    result = example_render()
    text = text_of(result, conventions.ALERTMANAGER_INHIBIT_RULES)
    proc = amtool_check(config_with_rules(text), tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    edges = len(result.plan.inhibit_edges)
    assert edges > 0
    assert f" - {edges} inhibit rules" in proc.stdout


def test_rules_use_matchers_never_the_deprecated_maps() -> None:
    rules = yaml.safe_load(text_of(example_render(), conventions.ALERTMANAGER_INHIBIT_RULES))
    for rule in rules["inhibit_rules"]:
        assert set(rule) <= {"source_matchers", "target_matchers", "equal"}
        assert rule["equal"], rule


def _copy_repo(tmp: Path, extra_config: str) -> Path:
    shutil.copytree(ROOT / "blueprints", tmp / "blueprints")
    (tmp / "obs-iac.toml").write_text(extra_config)
    return tmp


def test_merged_config_passes_amtool_and_keeps_the_base(tmp_path: Path) -> None:
    repo = _copy_repo(
        tmp_path / "repo",
        '[generators.alertmanager]\nbase_config = "alertmanager/base.yml"\n',
    )
    base = {
        "global": {"resolve_timeout": "5m"},
        "route": {"receiver": "oncall", "group_by": ["alertname", "service"]},
        "receivers": [{"name": "oncall", "webhook_configs": [{"url": "http://hook:9000/"}]}],
        "inhibit_rules": [
            {"source_matchers": ['severity="page"'], "target_matchers": ['severity="info"']}
        ],
    }
    (repo / "alertmanager").mkdir()
    (repo / "alertmanager" / "base.yml").write_text(yaml.safe_dump(base))
    result = render(open_workspace(repo))
    merged_text = text_of(result, conventions.ALERTMANAGER_CONFIG)
    merged = yaml.safe_load(merged_text)
    assert merged["receivers"] == base["receivers"]
    assert merged["inhibit_rules"][0] == base["inhibit_rules"][0]
    assert len(merged["inhibit_rules"]) == 1 + len(result.plan.inhibit_edges)
    proc = amtool_check(merged_text, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_names_only_from_alertmanager_0_30(tmp_path: Path) -> None:
    """0.25 rejects `name`; that is why it is gated on alertmanager_min_version."""
    repo = _copy_repo(tmp_path / "repo", 'alertmanager_min_version = "0.30"\n')
    result = render(open_workspace(repo))
    rules = yaml.safe_load(text_of(result, conventions.ALERTMANAGER_INHIBIT_RULES))
    assert [r["name"] for r in rules["inhibit_rules"]] == [
        e.name for e in result.plan.inhibit_edges
    ]
    proc = amtool_check({**MINIMAL, **rules}, tmp_path)
    assert proc.returncode != 0  # amtool 0.25 here: proves the gate is needed
    assert "name" in proc.stdout + proc.stderr


def test_every_edge_inhibits_in_a_real_alertmanager() -> None:
    started = time.monotonic()
    result = example_render()
    index = AlertIndex.of_plan(result.plan)
    services = sorted({a.service for a in index.alerts})
    config = config_with_rules(text_of(result, conventions.ALERTMANAGER_INHIBIT_RULES))
    # (edge, source labels, target labels, [(why, control labels)])
    cases: list[tuple[str, dict[str, str], dict[str, str], list[tuple[str, dict[str, str]]]]] = []
    for edge in result.plan.inhibit_edges:
        pairs = index.pairs(edge)
        assert pairs, f"edge {edge.name} connects no alerts"
        for src, dst in pairs:
            fixed = [lbl for lbl in edge.equal if lbl in src.static and lbl in dst.static]
            if any(src.static[lbl] != dst.static[lbl] for lbl in fixed):
                continue  # e.g. one SLO's page and another SLO's ticket: never a pair
            n = len(cases)
            src_labels, dst_labels = labels_for(src, n), labels_for(dst, n)
            for label in edge.equal:
                assert src_labels.get(label) == dst_labels.get(label), (edge.name, label)
            controls = []
            for label in edge.equal:
                other = {**dst_labels, label: dst_labels[label] + "-other"}
                controls.append((f"different {label}", other))
            if any(m.name == "service" for m in edge.target_matchers):
                # A service-scoped edge must not reach the same alert of another service.
                foreign = next(s for s in services if s != dst.service)
                controls.append((f"service {foreign}", {**dst_labels, "service": foreign}))
            cases.append((edge.name, src_labels, dst_labels, controls))

    # One case at a time, resolved before the next: edges equal on the SLA alone (a
    # framework cause muting GPU symptoms) would otherwise reach across cases.
    def key(labels: dict[str, str]) -> tuple[tuple[str, str], ...]:
        return tuple(sorted(labels.items()))

    with running_alertmanager(config) as am:
        for name, src, dst, controls in cases:
            batch = [_alert(src), _alert(dst)] + [_alert(c) for _, c in controls]
            am.post(batch)
            deadline = time.monotonic() + 10
            while True:
                seen = {key(a["labels"]): a for a in am.alerts()}
                inhibited = seen.get(key(dst), {}).get("status", {}).get("inhibitedBy")
                if inhibited or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            source, target = seen[key(src)], seen[key(dst)]
            assert target["status"]["state"] == "suppressed", f"{name}: not inhibited after 10 s"
            assert source["fingerprint"] in target["status"]["inhibitedBy"], name
            for why, control in controls:
                status = seen[key(control)]["status"]
                assert status["inhibitedBy"] == [], f"{name}: control with {why} was inhibited"
                assert status["state"] == "active", (name, why)
            ended = datetime.now(UTC) - timedelta(seconds=1)
            am.post([{**a, "endsAt": ended.isoformat()} for a in batch])
    assert len(cases) >= len(result.plan.inhibit_edges)
    assert time.monotonic() - started < 30


def test_an_alert_on_both_sides_is_not_inhibited_by_its_own_kind() -> None:
    """The premise of inhibit/self-inhibition, checked on the real Alertmanager: two
    GpuTemperatureHigh alerts on one host match both sides and do not mute each other,
    while a target-only alert with the same host is muted."""
    config = {
        **MINIMAL,
        "inhibit_rules": [
            {
                "source_matchers": ['alertname=~"GpuTemperatureHigh|GpuXidError"'],
                "target_matchers": ['alertname=~"GpuTemperatureHigh|GpuUtilizationLow"'],
                "equal": ["host_name"],
            }
        ],
    }
    hot = [
        {"alertname": "GpuTemperatureHigh", "host_name": "n1", "resource_gpu_id": f"nvidia{i}"}
        for i in (0, 1)
    ]
    low = {"alertname": "GpuUtilizationLow", "host_name": "n1", "resource_gpu_id": "nvidia2"}
    with running_alertmanager(config) as am:
        am.post([_alert(x) for x in (*hot, low)])
        deadline = time.monotonic() + 10
        while True:
            state = {a["labels"]["resource_gpu_id"]: a["status"] for a in am.alerts()}
            if state.get("nvidia2", {}).get("inhibitedBy") or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert state["nvidia2"]["inhibitedBy"], "the target-only alert must be muted"
        assert state["nvidia0"]["inhibitedBy"] == []
        assert state["nvidia1"]["inhibitedBy"] == []


def test_missing_binary_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="not installed"):
        require_tool("prometheus-alertmanager", "alertmanager")
    monkeypatch.setenv("CI", "false")
    with pytest.raises(pytest.skip.Exception):
        require_tool("amtool")


def test_node_down_alert_passes_its_promtool_tests(tmp_path: Path) -> None:
    """GpuNodeDown's own unit tests, through promtool, for every example service."""
    require_tool("promtool")
    result = example_render()
    for svc in result.plan.services:
        for path in (conventions.rule_file(svc.name), conventions.rule_test_file(svc.name)):
            target = tmp_path / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(result.files[path])
        test_file = tmp_path / conventions.rule_test_file(svc.name)
        assert "GpuNodeDown: exporter down after serving GPUs fires" in test_file.read_text()
        assert_promtool_passes([test_file])
