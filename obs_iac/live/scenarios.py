"""The fault scenarios of a live run and the world they play in.

Every service gets its own nodes, one per GPU scenario plus a healthy one, and its SLOs
go through healthy, slow-burn and fast-burn phases. GPU scenarios run at the same time on
disjoint nodes, so one Prometheus and one Alertmanager carry the whole run. A scenario
says which alerts it is made for (``proves``) and on which labels they must fire; its
other effects are what the fault does to a real node (a crashed job idles every GPU of
the node), which is what makes the alert storm."""

from __future__ import annotations

import csv
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from obs_iac.live import framework
from obs_iac.live.exporter import Endpoint, GpuNode, ServiceApp, SliSeries
from obs_iac.live.inventory import AlertRule

GPUS_PER_NODE = 8
XID_FALLEN_OFF_BUS = 79

# GPU alert -> the scenario made for it. An alert not named here or below has no scenario.
GPU_SCENARIO = {
    "GpuTemperatureHigh": "over-temperature",
    "GpuUtilizationLow": "over-temperature",
    "GpuXidError": "xid-79-twice",
    "GpuUncorrectableEccErrors": "uncorrectable-ecc",
    "GpuRowRemapFailure": "row-remap-failure",
    "GpuNvlinkThroughputDrop": "nvlink-drop",
    "GpuNodeDown": "node-down",
}
GPU_SCENARIOS = (
    "over-temperature",
    "xid-79-twice",
    "uncorrectable-ecc",
    "row-remap-failure",
    "nvlink-drop",
    "node-down",
)
# With an upgrade version, these scenarios' nodes serve its shape: a node-down source and
# a target on another host, both with the new host label, show whether an edge whose
# `equal` holds host_name still keeps to one host (issue 17).
UPGRADED_SCENARIOS = ("over-temperature", "node-down")
# Framework alerts need spans through the real OpenTelemetry Collector.
FRAMEWORK_SCENARIO = {
    "TrainingDataLoaderStarvingGpu": "data-loader-starvation",
    "TrainingStragglerRank": "straggler-rank",
    "NcclCollectiveErrors": "nccl-errors",
    "NcclAllreduceP95Regression": "nccl-errors",
    "TrainingStepTimeOverBudget": "straggler-rank",
}


@dataclass
class Action:
    at: float  # seconds after the fault phase starts (compressed time)
    do: Callable[[], None]
    what: str


@dataclass
class Scenario:
    name: str
    service: str
    hosts: tuple[str, ...] = ()
    slo: str = ""
    # alertname -> labels it must fire with (host_name, resource_gpu_id or slo)
    proves: dict[str, dict[str, str]] = field(default_factory=dict)
    actions: list[Action] = field(default_factory=list)
    # alertname -> how many separate firing episodes the scenario must cause
    episodes: dict[str, int] = field(default_factory=dict)
    note: str = ""


@dataclass
class World:
    nodes: list[GpuNode]
    apps: list[ServiceApp]
    endpoints: list[tuple[str, Endpoint, dict[str, str]]]  # job, endpoint, target labels
    scenarios: list[Scenario]
    healthy_hosts: set[str]
    unproven: dict[tuple[str, str], str]  # (service, alert) -> why
    framework: framework.FrameworkWorld = field(default_factory=framework.FrameworkWorld)
    # host -> the exporter version it serves, for nodes not on the blueprint's pin
    upgraded: dict[str, str] = field(default_factory=dict)


def _stale(holder: list[ServiceApp], slo: str) -> None:
    holder[0].set_stale(slo, True)


def _ratio(holder: list[ServiceApp], slo: str, ratio: float) -> None:
    holder[0].set_bad_ratio(slo, ratio)


def read_collectors(path: Path) -> list[tuple[str, str, str]]:
    rows = []
    with path.open(encoding="utf-8", newline="") as fh:
        for rec in csv.reader(line for line in fh if not line.startswith("#") and line.strip()):
            rows.append((rec[0].strip(), rec[1].strip(), ",".join(rec[2:]).strip()))
    return rows


_THRESHOLD = re.compile(r"slo_error:ratio_rate\w+\{[^}]*\}\s*>\s*([0-9.e+-]+)")


def _slo_thresholds(alerts: Sequence[AlertRule], service: str, slo: str) -> dict[str, float]:
    out = {}
    for a in alerts:
        if a.service == service and a.labels.get("slo") == slo:
            found = [float(x) for x in _THRESHOLD.findall(a.expr)]
            if found:
                out[a.name] = min(found)
    return out


def build_world(
    plan: Mapping[str, Any],
    generated: Path,
    alerts: Sequence[AlertRule],
    scale: int,
    upgraded: str | None = None,
) -> World:
    nodes: list[GpuNode] = []
    apps: list[ServiceApp] = []
    endpoints: list[tuple[str, Endpoint, dict[str, str]]] = []
    scenarios: list[Scenario] = []
    healthy: set[str] = set()
    unproven: dict[tuple[str, str], str] = {}
    fw_world = framework.FrameworkWorld()
    exporter_of: dict[str, str] = {}

    def later(minutes: float) -> float:
        return minutes * 60 / scale

    for svc in sorted(plan["services"], key=lambda s: s["name"]):
        name, sla = svc["name"], svc["sla_id"]
        gpu = svc.get("gpu")
        svc_alerts = [a for a in alerts if a.service == name]
        if gpu:
            fields = read_collectors(generated / "dcgm-exporter" / name / "collectors.csv")
            limit = float(gpu.get("temperature_limit_celsius") or 85)

            def node(host: str, version: str | None = None) -> GpuNode:
                n = GpuNode(
                    host=host,
                    service=name,  # noqa: B023 (called in the same iteration)
                    sla_id=sla,  # noqa: B023 (called in the same iteration)
                    exporter_version=version or gpu["dcgm_exporter_version"],  # noqa: B023 (called in the same iteration)
                    model=gpu["model"],  # noqa: B023 (called in the same iteration)
                    driver_version=gpu.get("driver_version") or "",  # noqa: B023 (called in the same iteration)
                    fields=fields,  # noqa: B023 (called in the same iteration)
                    gpus=GPUS_PER_NODE,
                    node_index=len(nodes) + 1,
                    time_scale=scale,
                )
                nodes.append(n)
                ep = Endpoint(n.exposition)
                # The dcgm-exporter pod's own target labels, as the chart's ServiceMonitor
                # gives them: with honorLabels false they turn the exporter's pod labels
                # into exported_*.
                endpoints.append(
                    (
                        "dcgm-exporter",
                        ep,
                        {
                            "namespace": "gpu-operator",
                            "pod": f"nvidia-dcgm-exporter-{n.node_index}",
                            "container": "nvidia-dcgm-exporter",
                            "endpoint": "gpu-metrics",
                        },
                    )
                )
                n.endpoint = ep  # type: ignore[attr-defined]
                return n

            h = node(f"{name}-healthy")
            healthy.add(h.host)

            def crash(n: GpuNode) -> None:
                # The job on the node dies with the GPU: every GPU idles, collectives stop.
                for i in range(GPUS_PER_NODE):
                    n.set(i, "DCGM_FI_DEV_GPU_UTIL", 0)
                    n.set(i, "DCGM_FI_PROF_NVLINK_TX_BYTES", 0)
                    n.set(i, "DCGM_FI_PROF_NVLINK_RX_BYTES", 0)

            for scen in GPU_SCENARIOS:
                # A rolling upgrade: these nodes serve the newer exporter's shape (its
                # host label spelt differently), the rest of the fleet the pinned one.
                n = node(f"{name}-{scen}", upgraded if scen in UPGRADED_SCENARIOS else None)
                if scen in UPGRADED_SCENARIOS and upgraded:
                    exporter_of[n.host] = upgraded
                s = Scenario(name=scen, service=name, hosts=(n.host,))
                g0 = {"host_name": n.host, "resource_gpu_id": "nvidia0"}
                if scen == "over-temperature":

                    def hot(n: GpuNode = n) -> None:
                        n.set(0, "DCGM_FI_DEV_GPU_TEMP", limit + 7)  # noqa: B023 (called in the same iteration)
                        n.set(0, "DCGM_FI_DEV_GPU_UTIL", 5)  # throttled
                        n.set(1, "DCGM_FI_DEV_GPU_UTIL", 5)  # its peer waits on it

                    s.actions.append(Action(0, hot, f"GPU 0 at {limit + 7:g} °C, GPUs 0-1 idle"))
                    s.proves = {
                        "GpuTemperatureHigh": g0,
                        "GpuUtilizationLow": g0,
                    }
                elif scen == "xid-79-twice":

                    def xid(n: GpuNode = n) -> None:
                        n.xid(0, XID_FALLEN_OFF_BUS)
                        crash(n)

                    def xid_again(n: GpuNode = n) -> None:
                        n.xid(0, XID_FALLEN_OFF_BUS)

                    s.actions += [
                        Action(0, xid, "XID 79 on GPU 0, the job crashes"),
                        Action(later(15), xid_again, "XID 79 again on GPU 0"),
                    ]
                    s.proves = {"GpuXidError": g0}
                    # The repeat of the same code, after the first has left the exporter's
                    # XID window, must fire again (issue 17: a gauge of the last code
                    # cannot show it).
                    s.episodes = {"GpuXidError": 2}
                elif scen == "uncorrectable-ecc":

                    def ecc(n: GpuNode = n) -> None:
                        n.add(0, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", 2)
                        crash(n)

                    s.actions.append(Action(0, ecc, "2 double-bit ECC errors on GPU 0"))
                    s.proves = {"GpuUncorrectableEccErrors": g0}
                elif scen == "row-remap-failure":

                    def remap(n: GpuNode = n) -> None:
                        n.set(0, "DCGM_FI_DEV_ROW_REMAP_FAILURE", 1)
                        crash(n)

                    s.actions.append(Action(0, remap, "row remapping failed on GPU 0"))
                    s.proves = {"GpuRowRemapFailure": g0}
                elif scen == "nvlink-drop":

                    def link(n: GpuNode = n) -> None:
                        n.set(0, "DCGM_FI_PROF_NVLINK_TX_BYTES", 0.8e9)
                        n.set(0, "DCGM_FI_PROF_NVLINK_RX_BYTES", 0.8e9)
                        n.set(0, "DCGM_FI_DEV_GPU_UTIL", 5)

                    s.actions.append(Action(0, link, "GPU 0 NVLink throughput -80 %, GPU 0 idle"))
                    s.proves = {"GpuNvlinkThroughputDrop": g0}
                elif scen == "node-down":

                    def ecc_burst(n: GpuNode = n) -> None:
                        n.add(0, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", 1)

                    def down(n: GpuNode = n) -> None:
                        n.endpoint.stop()  # type: ignore[attr-defined]

                    s.actions += [
                        Action(0, ecc_burst, "1 double-bit ECC error on GPU 0"),
                        Action(later(1.5), down, "the node's exporter stops answering"),
                    ]
                    s.proves = {"GpuNodeDown": {"host_name": n.host}}
                scenarios.append(s)
            if (svc.get("sections") or {}).get("framework"):
                fw_scen, fw_healthy, fw_unproven = framework.build(
                    svc, alerts, generated, node, scale, fw_world
                )
                scenarios += fw_scen
                healthy |= fw_healthy
                unproven.update(fw_unproven)

        # SLOs: one application endpoint per service, every SLO healthy, then slow, then
        # fast burn (ticket alerts alone, then pages over them).
        series: list[SliSeries] = []
        slow = Scenario(name="slo-slow-burn", service=name)
        fast = Scenario(name="slo-fast-burn", service=name)
        app_holder: list[ServiceApp] = []
        for slo in (svc.get("sections") or {}).get("slo") or []:
            sli, sname = slo["sli"], slo["name"]
            kind = sli["kind"]
            base = {"business_sla_id": sla}

            def lbls(spec: Mapping[str, Any]) -> dict[str, str]:
                out = dict(base)  # noqa: B023 (called in the same iteration)
                for label in spec.get("labels") or []:
                    if label not in ("business_sla_id", "instance", "job"):
                        out[label] = "0" if "rank" in label else "v1"
                return out

            if kind == "latency":
                h_ = sli["histogram"]
                series.append(
                    SliSeries(
                        h_["name"],
                        "latency",
                        sname,
                        lbls(h_),
                        h_["buckets"],
                        sli["threshold_seconds"],
                    )
                )
            elif kind == "error_ratio":
                series.append(SliSeries(sli["total"]["name"], "total", sname, lbls(sli["total"])))
                if sli.get("bad"):
                    series.append(SliSeries(sli["bad"]["name"], "bad", sname, lbls(sli["bad"])))
                if sli.get("good"):
                    series.append(SliSeries(sli["good"]["name"], "good", sname, lbls(sli["good"])))
            elif kind == "freshness":
                ls = sli["last_success"]
                series.append(SliSeries(ls["name"], "timestamp", sname, lbls(ls)))
            else:
                for a in svc_alerts:
                    if a.labels.get("slo") == sname:
                        unproven[(name, a.name)] = f"no scenario for a {kind} SLI"
                continue
            th = _slo_thresholds(svc_alerts, name, sname)
            page = [v for a, v in th.items() if "Page" in a]
            ticket = [v for a, v in th.items() if "Ticket" in a]
            for a in svc_alerts:
                if a.labels.get("slo") != sname:
                    continue
                target = fast if a.labels.get("slo_tier") == "page" else slow
                if kind == "freshness" and target is slow:
                    # A bad/good slice per evaluation cannot hold a slow burn in a short
                    # run (one bad slice in a 30m window already crosses the 6h page's
                    # short window); the ticket alerts are proven under the fast burn.
                    target = fast
                target.proves[a.name] = {"slo": sname}
            if kind == "freshness":
                fast.actions.append(
                    Action(
                        0,
                        partial(_stale, app_holder, sname),
                        f"{sname}: no success for 2h",
                    )
                )
                continue
            if ticket:
                ceiling = min(page) if page else 1.0
                ratio = min((max(ticket) + ceiling) / 2, max(ticket) * 2, 0.99)
                slow.actions.append(
                    Action(
                        0,
                        partial(_ratio, app_holder, sname, ratio),
                        f"{sname}: {ratio:.4g} bad",
                    )
                )
            fast.actions.append(
                Action(
                    0,
                    partial(_ratio, app_holder, sname, 1.0),
                    f"{sname}: every event bad",
                )
            )
        if series:
            # Series of one name serve one SLO only (a counter shared by two SLOs keeps
            # the first SLO's role).
            unique: list[SliSeries] = []
            for one in series:
                if one.name not in {u.name for u in unique}:
                    unique.append(one)
            app = ServiceApp(service=name, series=unique)
            app_holder.append(app)
            apps.append(app)
            endpoints.append((f"{name}-app", Endpoint(app.exposition), {}))
            if slow.proves or slow.actions:
                scenarios.append(slow)
            if fast.proves:
                scenarios.append(fast)

        covered = {a for s in scenarios if s.service == name for a in s.proves}
        for a in svc_alerts:
            if a.name in covered or (name, a.name) in unproven:
                continue
            if a.name in FRAMEWORK_SCENARIO and not gpu:
                unproven[(name, a.name)] = (
                    f"{FRAMEWORK_SCENARIO[a.name]} joins spans with DCGM series, and this "
                    "service has no gpu section"
                )
            else:
                unproven[(name, a.name)] = "obs-iac has no scenario for this alert"
    return World(nodes, apps, endpoints, scenarios, healthy, unproven, fw_world, exporter_of)
