"""The committed generated/ output against what the exporter really emits.

Inputs here are built from the exporter-shape catalogue and the *generated* relabelling
file (not from the GPU pack's own test-input code), then run through real promtool and
Alertmanager. Each test failed on the code before issue 17's fixes:
- GpuXidError never fired on 4.x shapes (err_code per value; changes() stays 0);
- relabelling read only `Hostname`, so an exporter upgrade lost host_name;
- an inhibit edge matched across hosts when host_name was missing on both sides.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import yaml

from obs_iac.catalog.exporter_shapes import GpuDevice, PodAttribution, shape
from obs_iac.plan.model import RelabelRule
from obs_iac.relabel import apply, merge_target_labels
from tests.inhibit_support import ROOT, running_alertmanager
from tests.tools import require_tool

GENERATED = ROOT / "generated"
RULES = GENERATED / "prometheus" / "rules" / "recomm-v2.rules.yml"
RELABEL = GENERATED / "prometheus" / "relabel" / "dcgm-exporter.metric_relabel_configs.yml"
INHIBIT = GENERATED / "alertmanager" / "inhibit_rules.yml"
# recomm-v2's blueprint: A100 on dcgm-exporter 4.5.3-4.8.2, honorLabels false.
TARGET = {
    "job": "dcgm-exporter",
    "instance": "10.1.2.3:9400",
    "namespace": "gpu-operator",
    "pod": "nvidia-dcgm-exporter-abcde",
    "container": "nvidia-dcgm-exporter",
}
DEVICE = GpuDevice(
    gpu=3,
    uuid="GPU-5a1b2c3d-0000-4000-8000-00000000aaaa",
    model_name="NVIDIA A100-SXM4-80GB",
    hostname="dgx-07",
    pci_bus_id="00000000:4E:00.0",
)
POD = PodAttribution("recsys", "recomm-trainer-0", "trainer", {"business_sla_id": "recomm_v2"})


def generated_relabelling() -> tuple[RelabelRule, ...]:
    body = yaml.safe_load(RELABEL.read_text())
    return tuple(
        RelabelRule(
            **{k: tuple(v) if k == "source_labels" else v for k, v in rule.items()},
        )
        for rule in body["metric_relabel_configs"]
    )


def stored(tag: str, field: str, value_labels: dict[str, str] | None = None) -> dict[str, str]:
    raw = shape(tag).series(field, DEVICE, kubernetes=POD, value_labels=value_labels)
    merged = merge_target_labels(raw, TARGET, honor_labels=False)
    out = apply(merged, generated_relabelling())
    assert out is not None
    return out


def selector(metric: str, labels: dict[str, str]) -> str:
    inner = ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return f"{metric}{{{inner}}}"


def _promtool(tmp_path: Path, tests: list[dict[str, Any]]) -> subprocess.CompletedProcess[str]:
    promtool = require_tool("promtool")
    test_file = tmp_path / "reality.test.yml"
    test_file.write_text(
        yaml.safe_dump({"rule_files": [str(RULES)], "evaluation_interval": "1m", "tests": tests})
    )
    return subprocess.run(
        [promtool, "test", "rules", str(test_file)], capture_output=True, text=True, check=False
    )


def _xid_inputs(tag: str) -> list[dict[str, str]]:
    """Both XID metrics as the exporter serves them, a scrape a minute: XID 79 at 3m and
    at 4m, nothing from 9m, XID 79 again at 16m. DCGM_FI_DEV_XID_ERRORS moves from the
    err_code="0" series to err_code="79" and then never changes (a repeat of the last
    code is invisible there); the XID count has one series per code in the window."""
    field, count = "DCGM_FI_DEV_XID_ERRORS", "DCGM_EXP_XID_ERRORS_COUNT"
    return [
        {
            "series": selector(field, stored(tag, field, {"err_code": "0"})),
            "values": "0 0 0 stale",
        },
        {
            "series": selector(field, stored(tag, field, {"err_code": "79"})),
            "values": "_ _ _ 79x17",
        },
        {
            "series": selector(count, stored(tag, count)),
            "values": "0 0 0 stale _ _ _ _ _ 0 0 0 0 0 0 0 stale",
        },
        {
            "series": selector(count, stored(tag, count, {"xid": "79"})),
            "values": "_ _ _ 1 2 2 2 2 1 stale _ _ _ _ _ _ 1 1 1 1 1",
        },
    ]


FIRING = 'ALERTS{alertname="GpuXidError", alertstate="firing"}'


def _alerts_at(eval_time: str, labels: dict[str, str] | None) -> dict[str, Any]:
    """The ALERTS series at an instant: label sets without annotations (which are not
    what these tests are about)."""
    samples = []
    if labels is not None:
        full = {**labels, "alertname": "GpuXidError", "alertstate": "firing"}
        samples.append({"labels": selector("ALERTS", full), "value": 1})
    return {"expr": FIRING, "eval_time": eval_time, "exp_samples": samples}


def test_xid_alert_fires_on_a_new_and_a_repeated_xid_of_the_pinned_exporter(
    tmp_path: Path,
) -> None:
    rules = yaml.safe_load(RULES.read_text())
    alert = next(r for g in rules["groups"] for r in g["rules"] if r.get("alert") == "GpuXidError")
    tag = "4.5.3-4.8.2"
    fired = {
        k: v
        for k, v in stored(tag, "DCGM_EXP_XID_ERRORS_COUNT", {"xid": "79"}).items()
        if k != "window_size_in_ms"
    }
    fired.update(alert["labels"])
    # The equal labels of gpu-fault-mutes-gpu-symptoms must be on the alert, or the
    # XID half of that edge cannot mute anything.
    assert {"business_sla_id", "host_name", "resource_gpu_id"} <= set(fired)
    checks = [
        _alerts_at("3m", fired),
        _alerts_at("6m", fired),
        _alerts_at("12m", None),
        _alerts_at("17m", fired),
    ]
    proc = _promtool(
        tmp_path,
        [{"interval": "1m", "input_series": _xid_inputs(tag), "promql_expr_test": checks}],
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_xid_alert_stays_silent_without_an_xid(tmp_path: Path) -> None:
    tag = "4.5.3-4.8.2"
    field, count = "DCGM_FI_DEV_XID_ERRORS", "DCGM_EXP_XID_ERRORS_COUNT"
    inputs = [
        {"series": selector(field, stored(tag, field, {"err_code": "0"})), "values": "0x20"},
        {"series": selector(count, stored(tag, count)), "values": "0x20"},
    ]
    checks = [_alerts_at(t, None) for t in ("5m", "15m")]
    proc = _promtool(
        tmp_path, [{"interval": "1m", "input_series": inputs, "promql_expr_test": checks}]
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_host_name_survives_an_exporter_upgrade_across_the_hostname_rename() -> None:
    # The examples pin 4.5.3-4.8.2 (`Hostname`); the next exporter says `hostname`
    # (d5e5f51). The committed relabelling must give host_name for both.
    for tag, native in (("4.5.3-4.8.2", "Hostname"), ("4.5.3-4.9.0", "hostname")):
        labels = stored(tag, "DCGM_FI_DEV_GPU_TEMP")
        assert labels[native] == "dgx-07"
        assert labels["host_name"] == "dgx-07", (tag, labels)


def test_relabelling_gives_no_host_name_when_the_exporter_omits_it() -> None:
    # -n/--no-hostname: no host label at all; host_name must then be absent, not "".
    raw = shape("4.5.3-4.8.2").series(
        "DCGM_FI_DEV_GPU_TEMP",
        GpuDevice(gpu=0, uuid="GPU-a", model_name="A100", hostname=""),
        kubernetes=POD,
    )
    out = apply(merge_target_labels(raw, TARGET, honor_labels=False), generated_relabelling())
    assert out is not None and "host_name" not in out


def _edge_alert(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"labels": {"alertname": name, **labels}, "annotations": {"summary": "reality"}}


def test_an_inhibit_edge_never_matches_across_hosts_on_a_missing_label() -> None:
    rules = yaml.safe_load(INHIBIT.read_text())["inhibit_rules"]
    config = {
        "route": {"receiver": "null"},
        "receivers": [{"name": "null"}],
        "inhibit_rules": rules,
    }
    common = {"service": "recomm-v2", "business_sla_id": "recomm_v2", "resource_gpu_id": "nvidia0"}
    # Two hosts whose exporters lost host_name (e.g. upgraded without the relabel fix):
    # a hot GPU on one must not mute the idle GPU on the other.
    source = _edge_alert("GpuTemperatureHigh", {**common, "instance": "10.0.0.1:9400"})
    target = _edge_alert("GpuUtilizationLow", {**common, "instance": "10.0.0.2:9400"})
    # Control pair: both carry host_name and match, so the edge must mute.
    same = {**common, "host_name": "gpu-node-9"}
    source_ok = _edge_alert("GpuTemperatureHigh", {**same, "instance": "10.0.0.9:9400"})
    target_ok = _edge_alert("GpuUtilizationLow", {**same, "instance": "10.0.0.9:9400"})
    with running_alertmanager(config) as am:
        am.post([source, target, source_ok, target_ok])
        deadline = time.monotonic() + 10
        while True:
            state = {
                (a["labels"]["alertname"], a["labels"]["instance"]): a["status"]["state"]
                for a in am.alerts()
            }
            if state.get(("GpuUtilizationLow", "10.0.0.9:9400")) == "suppressed":
                break
            assert time.monotonic() < deadline, state
            time.sleep(0.2)
    assert state[("GpuUtilizationLow", "10.0.0.2:9400")] == "active", state
